"""ExternalizedCheckpointRetention on Spark, applied when the whole run ends (issue 15), as on the local runtime.

Real Spark runs on file storage, a checkpoint per epoch, two retained:

- a run that FINISHES deletes its retained checkpoints, whatever the retention (Flink discards on finish);
- a cancelled run deletes them by default (NO_EXTERNALIZED_CHECKPOINTS) and with DELETE_ON_CANCELLATION,
  and keeps them with RETAIN_ON_CANCELLATION;
- a failed attempt is not the end of the run: the next attempt restores the newest retained checkpoint
  (which a FAILED shutdown would have deleted by default), and only the run's end applies the retention.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from checkpoints import load_snapshot
from engine import ExternalizedCheckpointRetention
from engine.api.environment import StreamExecutionEnvironment
from engine.api.restart import RestartStrategies
from engine.api.time import Duration, Time
from engine.runtime.spark.job_run import SparkJobRun
from engine.watermarks.strategy import WatermarkStrategy
from engine.windowing.assigners import TumblingEventTimeWindows
from window_jobs import SplitCollection, checkpointed_spark_env, generate_events

SPLITS = generate_events(seed=23, n_splits=2, per_split=36)
#: two thirds into split 1: with 6 records per split and epoch, several checkpoints complete before it
VICTIM = SPLITS[1][24]


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


def _key(e):
    return e[0]


def _build(env: StreamExecutionEnvironment, fail: FailOnce | None = None):
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(1)).with_timestamp_assigner(_ts)
    events = env.from_source(SplitCollection(SPLITS, "retention"), strategy, "events")
    if fail is not None:
        events = events.map(fail)
    return events.key_by(_key).window(TumblingEventTimeWindows.of(Time.seconds(5))).sum(2)


def _env(storage: Path, retention: ExternalizedCheckpointRetention | None, restarts: int = 0,
         epoch_interval_ms: int = 0) -> StreamExecutionEnvironment:
    env = checkpointed_spark_env(f"file://{storage}", epoch_records=6)
    env.set_runtime_option("async_snapshots", False)
    env.set_runtime_option("epoch_interval_ms", epoch_interval_ms)
    config = env.get_checkpoint_config()
    config.set_num_retained_checkpoints(2)
    if retention is not None:
        config.set_externalized_checkpoint_retention(retention)
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(restarts, Duration.of_millis(10)))
    return env


def _run(env: StreamExecutionEnvironment, stream, name: str) -> SparkJobRun:
    return SparkJobRun(env._runtime_instance(), name, [], [stream._node])


def _retained(storage: Path, job_id: str) -> list[str]:
    """The checkpoint folders storage still holds for the job (``_metadata`` makes one exist)."""
    folder = storage / job_id
    return sorted(p.name for p in folder.glob("chk-*") if (p / "_metadata").exists()) if folder.exists() else []


@pytest.fixture(scope="module")
def golden() -> list:
    local = StreamExecutionEnvironment.get_execution_environment()
    return sorted(map(tuple, _build(local).execute_and_collect()))


@pytest.mark.parametrize("retention", [None, ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION],
                         ids=["default", "retain_on_cancellation"])
def test_a_finished_run_deletes_its_retained_checkpoints(spark, tmp_path: Path, golden: list,
                                                         retention: ExternalizedCheckpointRetention | None) -> None:
    storage = tmp_path / "chk"
    env = _env(storage, retention)
    stream = _build(env)
    run = _run(env, stream, "finishes")
    result = run.run()
    assert sorted(map(tuple, result.collected[stream._node.id])) == golden
    assert run.state == "finished" and len(result.completed_checkpoints) >= 3
    assert _retained(storage, run.job_id) == []


@pytest.mark.parametrize("retention, kept", [
    (None, False),
    (ExternalizedCheckpointRetention.DELETE_ON_CANCELLATION, False),
    (ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION, True),
], ids=["default", "delete_on_cancellation", "retain_on_cancellation"])
def test_a_cancelled_run_keeps_its_retained_checkpoints_only_when_asked_to(
        spark, tmp_path: Path, retention: ExternalizedCheckpointRetention | None, kept: bool) -> None:
    storage = tmp_path / "chk"
    env = _env(storage, retention, epoch_interval_ms=400)
    run = _run(env, _build(env), "cancelled")
    run.run_in_background()
    deadline = time.monotonic() + 120
    while len([r for r in run.checkpoint_history() if r.kind == "checkpoint"]) < 2 and not run.done():
        assert time.monotonic() < deadline, "no two checkpoints completed in time"
        time.sleep(0.05)
    assert len(_retained(storage, run.job_id)) == 2  # while it runs, both are there
    run.cancel()
    run.wait(120)
    assert run.status().state == "cancelled"
    retained = _retained(storage, run.job_id)
    if kept:
        assert len(retained) == 2
        for name in retained:  # still whole: a later run may restore either
            assert load_snapshot((storage / run.job_id / name).as_uri(), verify_checksums=True)
    else:
        assert retained == []


def test_retention_waits_for_the_end_of_the_run_not_of_a_failed_attempt(spark, tmp_path: Path, golden: list) -> None:
    storage, marker = tmp_path / "chk", tmp_path / "failed-once"
    env = _env(storage, None, restarts=1)  # NO_EXTERNALIZED_CHECKPOINTS: a FAILED end would delete them
    stream = _build(env, FailOnce(VICTIM, str(marker)))
    run = _run(env, stream, "restarts")
    result = run.run()
    assert marker.exists() and result.restarts == 1
    restored = run.job.checkpointing.restored_from  # the first attempt's newest checkpoint was still there
    assert restored is not None and "chk-" in restored
    assert sorted(map(tuple, result.collected[stream._node.id])) == golden
    assert _retained(storage, run.job_id) == []  # and the finished run deleted them at its end
