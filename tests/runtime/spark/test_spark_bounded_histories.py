"""The Spark driver keeps the newest checkpoint records and dead letters, and exact totals (issue 17).

engine/histories.py through engine/runtime/spark/job_run.py: one job with ``max_dead_letters`` 3 and
``max_checkpoint_history`` 2 completes a checkpoint per epoch and fails once in a Spark task late in the input,
so the run restarts from its newest checkpoint.  The restart cuts the dead letters back to that checkpoint's
mark, a total: with only the newest 3 kept, a mark taken as a list length would cut back to the wrong place.
The test counts the completed checkpoints from the coordinator's log (a finished run deletes its retained ones).
"""

from __future__ import annotations

import logging

import os
from pathlib import Path

import pytest

from engine.api.environment import StreamExecutionEnvironment
from engine.api.restart import RestartStrategies
from engine.api.time import Duration, Time
from engine.io.file_sink import read_committed
from engine.runtime.spark.job_run import SparkJobRun
from engine.watermarks.strategy import WatermarkStrategy
from engine.windowing.assigners import TumblingEventTimeWindows
from window_jobs import SplitCollection, checkpointed_spark_env, generate_events

SPLITS = generate_events(seed=5, n_splits=2, per_split=40)
VICTIM = SPLITS[1][29]
BAD = sorted(e for s in SPLITS for e in s if e[2] % 5 == 0)


class FailOnce:
    """Raises on ``victim`` the first time any process sees it; the marker file says it happened."""

    def __init__(self, victim: tuple, marker: str) -> None:
        self.victim, self.marker = victim, marker

    def __call__(self, e):
        if e == self.victim and not os.path.exists(self.marker):
            Path(self.marker).touch()
            raise RuntimeError(f"injected failure on {e!r}")
        return e


def _ts(e, _):
    return e[1]


def _dead_letter_on_5(e):
    if e[2] % 5 == 0:
        raise ValueError("divisible by 5")  # a dead letter, not a failure
    return e[0]


def _build(env, fail):
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(1)).with_timestamp_assigner(_ts)
    events = env.from_source(SplitCollection(SPLITS, "bounded"), strategy, "events")
    if fail is not None:
        events = events.map(fail)
    return events.key_by(_dead_letter_on_5).window(TumblingEventTimeWindows.of(Time.seconds(5))).sum(2)


@pytest.fixture(scope="module")
def bounded_run(spark, tmp_path_factory):
    local = StreamExecutionEnvironment.get_execution_environment()
    local.set_runtime_option("epoch_records", 6)
    golden = sorted(map(tuple, _build(local, None).execute_and_collect()))

    folder = tmp_path_factory.mktemp("bounded")
    env = checkpointed_spark_env((folder / "chk").as_uri(), epoch_records=6)
    env.set_runtime_option("async_snapshots", False)
    env.set_runtime_option("max_dead_letters", 3)
    env.set_runtime_option("max_checkpoint_history", 2)
    env.get_checkpoint_config().set_num_retained_checkpoints(100)
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(2, Duration.of_millis(10)))
    output = (folder / "sums").as_uri()
    _build(env, FailOnce(VICTIM, str(folder / "failed"))).write_files(output, "jsonl")
    run = SparkJobRun(env._runtime_instance(), "bounded", list(env._sinks), [])
    # every checkpoint completed, as the coordinator logs it (a finished run deletes its retained checkpoints,
    # so storage no longer shows them)
    completed: list[int] = []
    handler = logging.Handler()
    handler.emit = lambda record: completed.append(record.checkpoint_id) \
        if getattr(record, "event", None) == "checkpoint_completed" else None
    coordinator_log = logging.getLogger("engine.checkpointing.coordinator")
    level = coordinator_log.level
    coordinator_log.addHandler(handler)
    coordinator_log.setLevel(logging.INFO)
    try:
        result = run.run()
    finally:
        coordinator_log.removeHandler(handler)
        coordinator_log.setLevel(level)
    return run, result, sorted(completed), golden, read_committed(output)


def test_the_spark_driver_keeps_the_newest_dead_letters_and_counts_them_all_across_a_restart(bounded_run):
    run, result, _, golden, output = bounded_run
    assert result.restarts == 1
    assert len(result.dead_letters) == 3 and len(run.dead_letters) == 3
    assert {tuple(d["value"]) for d in result.dead_letters} <= set(BAD)
    assert result.dead_letter_count == run.dead_letters.total == len(BAD)
    assert result.metrics["num_dead_letter_records"] == len(BAD)
    assert sorted(map(tuple, output)) == golden


def test_the_spark_driver_keeps_the_newest_checkpoint_records_and_counts_them_all(bounded_run):
    run, result, on_disk, _, _ = bounded_run
    assert len(on_disk) > 4, "several checkpoints, in both attempts"
    assert len(set(on_disk)) == len(on_disk)
    history = run.checkpoint_history()
    assert [r.checkpoint_id for r in history] == on_disk[-2:]
    assert {r.attempt for r in run._history} == {1} and len(run._history) == 2
    assert result.completed_checkpoints == on_disk[-2:]
    assert result.num_completed_checkpoints == len(on_disk)
    status = run.status()
    assert status.num_completed_checkpoints == len(on_disk)
    assert status.last_completed_checkpoint_id == on_disk[-1]
