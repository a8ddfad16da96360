"""Restart strategies on Spark: a failed attempt restarts in-process from the latest completed checkpoint.

engine/runtime/spark/job_run.py.  A map fails once, in a Spark task, on a record in the middle of
the input (a marker file makes it fail only the first time, whichever process evaluates it).
With ``fixed_delay_restart`` the job restarts from its newest completed checkpoint and its outputs
— an exactly-once file sink, ``execute_and_collect`` and the dead letters — equal an uninterrupted
local run's, nothing lost or repeated; without a strategy the failure surfaces as on the local
runtime, with its cause, and the completed checkpoints stay for a restore.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from engine.api.environment import StreamExecutionEnvironment
from engine.api.restart import RestartStrategies
from engine.api.time import Duration, Time
from engine.checkpointing.config import ExternalizedCheckpointRetention
from engine.errors import JobFailedError
from engine.io.file_sink import read_committed
from engine.io.sink import Sink
from engine.watermarks.strategy import WatermarkStrategy
from engine.windowing.assigners import TumblingEventTimeWindows
from window_jobs import SplitCollection, checkpointed_spark_env, generate_events


class FailOnce:
    """Raises on ``victim`` the first time any process sees it (the marker file says it happened)."""

    def __init__(self, victim: tuple, marker: str) -> None:
        self.victim, self.marker = victim, marker

    def __call__(self, e):
        if e == self.victim and not os.path.exists(self.marker):
            Path(self.marker).touch()
            raise RuntimeError(f"injected failure on {e!r}")
        return e


class FailingOnceSink(Sink):
    """A plain sink (written on the driver) whose second write fails once: the epoch's dead letters and
    earlier driver rows are in by then, so the restart must take them back to the restore point."""

    def __init__(self, marker: str) -> None:
        self.marker = marker
        self.writes = 0

    def write(self, values, epoch: int = 0) -> None:
        self.writes += 1
        if self.writes == 2 and not os.path.exists(self.marker):
            Path(self.marker).touch()
            raise RuntimeError("injected sink failure")


def _ts(e, _):
    return e[1]


def _key(e):
    return e[0]


def _negative_is_bad(e):
    if e[2] % 17 == 0:
        raise ValueError("divisible by 17")  # a dead letter, not a failure
    return e[0]


def _build(env, splits, fail: FailOnce | None, output: str | None):
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(1)).with_timestamp_assigner(_ts)
    events = env.from_source(SplitCollection(splits, "restart"), strategy, "events")
    if fail is not None:
        events = events.map(fail)
    sums = events.key_by(_negative_is_bad).window(TumblingEventTimeWindows.of(Time.seconds(5))).sum(2)
    if output is not None:
        sums.write_files(output, "jsonl")
    sums.events = events  # the stream before the window, for tests that collect it too
    return sums


def _spark_env(tmp_path, restarts: int | None):
    env = checkpointed_spark_env(f"file://{tmp_path}/chk", epoch_records=6)
    if restarts is not None:
        env.set_restart_strategy(RestartStrategies.fixed_delay_restart(restarts, Duration.of_millis(10)))
    return env


def test_a_failed_attempt_restarts_from_the_latest_checkpoint_and_outputs_stay_exactly_once(spark, tmp_path):
    splits = generate_events(seed=5, n_splits=2, per_split=40)
    victim = splits[1][29]  # late in the input: several checkpoints complete before it
    local = StreamExecutionEnvironment.get_execution_environment()
    local.set_runtime_option("epoch_records", 6)
    golden_sums = _build(local, splits, None, None)
    golden = sorted(map(tuple, golden_sums.execute_and_collect()))

    env = _spark_env(tmp_path, restarts=2)
    output = f"file://{tmp_path}/sums"
    sums = _build(env, splits, FailOnce(victim, str(tmp_path / "failed")), output)
    result = env.execute("restart")
    assert result.restarts == 1 and (tmp_path / "failed").exists()
    assert sorted(map(tuple, read_committed(output))) == golden
    bad = sorted(e for s in splits for e in s if e[2] % 17 == 0)
    assert sorted(tuple(d["value"]) for d in result.dead_letters) == bad  # replayed epochs add none twice

    # execute_and_collect: the list keeps what it held at the restore point, then the replay fills it
    (tmp_path / "failed").unlink()
    env2 = _spark_env(tmp_path / "collect", restarts=1)
    collected = _build(env2, splits, FailOnce(victim, str(tmp_path / "failed")), None).execute_and_collect()
    assert sorted(map(tuple, collected)) == golden


def test_outputs_the_driver_took_after_the_restore_point_are_taken_back(spark, tmp_path):
    """The sink fails after the epoch's source records and dead letters reached the driver (they come back
    before the window results): without cutting the collect lists and dead letters back to the restore
    point, the replay would add them twice.  Deterministic, unlike a task failure."""
    splits = generate_events(seed=5, n_splits=2, per_split=40)
    local = StreamExecutionEnvironment.get_execution_environment()
    local.set_runtime_option("epoch_records", 6)
    golden = sorted(map(tuple, _build(local, splits, None, None).execute_and_collect()))

    env = _spark_env(tmp_path, restarts=1)
    sums = _build(env, splits, None, None)
    sums.sink_to(FailingOnceSink(str(tmp_path / "sink-failed")))
    got, result = env.execute_and_collect_streams({"events": sums.events, "sums": sums})
    assert (tmp_path / "sink-failed").exists() and result.restarts == 1
    assert sorted(map(tuple, got["sums"])) == golden
    assert sorted(map(tuple, got["events"])) == sorted(e for s in splits for e in s)
    bad = sorted(e for s in splits for e in s if e[2] % 17 == 0)
    assert sorted(tuple(d["value"]) for d in result.dead_letters) == bad


def test_without_a_restart_strategy_the_failure_surfaces_with_its_cause(spark, tmp_path):
    splits = generate_events(seed=5, n_splits=2, per_split=40)
    env = _spark_env(tmp_path, restarts=None)
    # Flink's setting for checkpoints that must outlive a failed (or cancelled) job
    env.get_checkpoint_config().set_externalized_checkpoint_retention(
        ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION)
    _build(env, splits, FailOnce(splits[1][29], str(tmp_path / "failed")), f"file://{tmp_path}/sums")
    with pytest.raises(JobFailedError, match=r"(?s)failed after 0 restart\(s\).*injected failure on"):
        env.execute("no-restart")
    assert list((tmp_path / "chk").rglob("_metadata")), "completed checkpoints stay for a restore"


def test_restarts_run_out(spark, tmp_path):
    """Every attempt fails (the marker is removed each time): one restart allowed, then the job fails."""

    class AlwaysFail(FailOnce):
        def __call__(self, e):
            if e == self.victim:
                raise RuntimeError(f"injected failure on {e!r}")
            return e

    splits = generate_events(seed=5, n_splits=2, per_split=40)
    env = _spark_env(tmp_path, restarts=1)
    sums = _build(env, splits, AlwaysFail(splits[0][10], ""), None)
    with pytest.raises(JobFailedError, match=r"failed after 1 restart\(s\) \(restart strategy allows 1\)"):
        sums.execute_and_collect()


def test_a_submitted_job_restarts_behind_its_client(spark, tmp_path):
    """execute_async: the client's handle outlives the failed attempt; status counts attempts and restarts."""
    splits = generate_events(seed=5, n_splits=2, per_split=40)
    env = _spark_env(tmp_path, restarts=2)
    output = f"file://{tmp_path}/sums"
    _build(env, splits, FailOnce(splits[0][25], str(tmp_path / "failed")), output)
    client = env.execute_async("async-restart")
    result = client.get_job_execution_result().result(300)
    assert result.restarts == 1
    details = client.status_details()
    assert details["attempt"] == 2 and details["restarts"] == 1 and details["state"] == "FINISHED"
    assert any("injected failure" in f["message"] for f in details["failures"])
    history = client._handle.checkpoint_history()
    assert {r.attempt for r in history} == {1, 2}
    assert [r.checkpoint_id for r in history] == sorted({r.checkpoint_id for r in history}), "ids continue"
