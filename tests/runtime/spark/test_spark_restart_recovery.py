"""Spark's in-process restart reads its restore point the way the local runtime's does (issue 17).

engine/runtime/spark/job_run.py with engine/runtime/attempts.py, on a job that completes a checkpoint per epoch:

- The exactly-once file sink's commit of checkpoint k fails once, after a byte of k's state was flipped in
  storage: k is complete and retained but unreadable, and its output not yet visible.  The restart passes
  over k to k-1, cuts the driver's collect lists and dead letters back to k-1's marks, and the output equals
  an uninterrupted run's: nothing lost, nothing twice.  (Had k's commit gone through, the span between k-1
  and k would be committed twice: docs/reliability.md.)
- When every retained checkpoint is damaged the job fails naming each one, instead of starting over.
- Storage refuses the driver's reads of checkpoint metadata for a while after a task failed (a map fails
  once late in the input; a marker file makes it fail only the first time): the restart waits with the
  restart strategy's backoff and resumes from the newest checkpoint.

Uploads are synchronous (``async_snapshots`` False) so that no checkpoint completes after the failure: the
newest completed checkpoint when the attempt fails is the one the restart looks at first.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from engine import ExternalizedCheckpointRetention
from engine.api.environment import StreamExecutionEnvironment
from engine.api.restart import RestartStrategies
from engine.api.time import Duration, Time
from engine.errors import CorruptSnapshotError
from engine.io.file_sink import FileSink, read_committed
from engine.runtime.spark.job_run import SparkJobRun
from engine.watermarks.strategy import WatermarkStrategy
from engine.windowing.assigners import TumblingEventTimeWindows
from window_jobs import SplitCollection, checkpointed_spark_env, generate_events

SPLITS = generate_events(seed=5, n_splits=2, per_split=40)
#: late in the input: with 6 records per split and epoch and a checkpoint per epoch, 4 complete before it
VICTIM = SPLITS[1][29]
BAD = sorted(e for s in SPLITS for e in s if e[2] % 17 == 0)


class FailOnce:
    """Raises on ``victim`` the first time any process sees it; the marker file says it happened."""

    def __init__(self, victim: tuple, marker: str) -> None:
        self.victim, self.marker = victim, marker

    def __call__(self, e):
        if e == self.victim and not os.path.exists(self.marker):
            self.before_failing()
            Path(self.marker).touch()
            raise RuntimeError(f"injected failure on {e!r}")
        return e

    def before_failing(self) -> None:
        """Runs in the Spark task, just before the failure."""


def _flip_a_byte(folder: Path) -> None:
    files = sorted(folder.rglob("*.parquet"))
    assert files, f"checkpoint {folder} has no state file in its own folder"
    data = bytearray(files[0].read_bytes())
    data[len(data) // 2] ^= 0xFF
    files[0].write_bytes(bytes(data))


class CommitFailsOnce(FileSink):
    """An exactly-once file sink whose commit of checkpoint ``at`` (or the first one after it) fails once,
    after a byte of that checkpoint's state was flipped in storage: the checkpoint is complete and retained
    (its ``_metadata`` is written before the sinks commit) but unreadable, and its output is not yet visible."""

    def __init__(self, path: str, at: int, storage: Path, marker: Path) -> None:
        super().__init__(path, "jsonl")
        self.at, self.storage, self.marker = at, storage, marker

    def commit(self, handle) -> None:
        checkpoint_id = handle["checkpoint_id"]
        if checkpoint_id >= self.at and not self.marker.exists():
            (folder,) = self.storage.rglob(f"chk-{checkpoint_id}")
            _flip_a_byte(folder)
            self.marker.write_text(str(checkpoint_id))
            raise RuntimeError(f"injected failure committing checkpoint {checkpoint_id}")
        super().commit(handle)


def _ts(e, _):
    return e[1]


def _dead_letter_on_17(e):
    if e[2] % 17 == 0:
        raise ValueError("divisible by 17")  # a dead letter, not a failure
    return e[0]


def _build(env, fail):
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(1)).with_timestamp_assigner(_ts)
    events = env.from_source(SplitCollection(SPLITS, "recovery"), strategy, "events")
    if fail is not None:
        events = events.map(fail)
    sums = events.key_by(_dead_letter_on_17).window(TumblingEventTimeWindows.of(Time.seconds(5))).sum(2)
    return events, sums


@pytest.fixture(scope="module")
def golden() -> list:
    local = StreamExecutionEnvironment.get_execution_environment()
    local.set_runtime_option("epoch_records", 6)
    _, sums = _build(local, None)
    return sorted(map(tuple, sums.execute_and_collect()))


def _spark_env(storage: Path, restarts: int):
    env = checkpointed_spark_env(f"file://{storage}", epoch_records=6)
    env.set_runtime_option("async_snapshots", False)
    env.get_checkpoint_config().set_num_retained_checkpoints(3)
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(restarts, Duration.of_millis(10)))
    return env


def _run(env, streams, name: str) -> tuple[SparkJobRun, object]:
    run = SparkJobRun(env._runtime_instance(), name, list(env._sinks), [s._node for s in streams])
    return run, run.run()


def test_a_restart_passes_over_a_corrupt_newest_checkpoint_and_outputs_stay_exactly_once(spark, tmp_path, golden,
                                                                                          caplog):
    storage, marker = tmp_path / "chk", tmp_path / "damaged"
    env = _spark_env(storage, restarts=2)
    output = f"file://{tmp_path}/sums"
    events, sums = _build(env, None)
    sums.sink_to(CommitFailsOnce(output, 4, storage, marker))
    run, result = _run(env, [events, sums], "corrupt-newest")

    corrupt_id = int(marker.read_text())
    assert result.restarts == 1
    restored = run.job.checkpointing.restored_from
    assert restored.rstrip("/").endswith(f"chk-{corrupt_id - 1}"), restored
    assert f"retained checkpoint {corrupt_id} is unreadable" in caplog.text
    assert sorted(map(tuple, read_committed(output))) == golden
    assert sorted(map(tuple, result.collected[sums._node.id])) == golden
    # cut back to checkpoint k-1's marks: the epoch between k-1 and k is replayed once, not twice
    assert sorted(map(tuple, result.collected[events._node.id])) == sorted(e for s in SPLITS for e in s)
    assert sorted(tuple(d["value"]) for d in result.dead_letters) == BAD


@pytest.mark.parametrize("sink_mode", ["at_least_once", "exactly_once"])
def test_when_every_retained_checkpoint_is_unreadable_the_job_fails_naming_each(spark, tmp_path, sink_mode):
    """Starting over would emit committed results again: the restart refuses instead.  With an at-least-once sink
    each damaged checkpoint is passed over in turn and named; with an exactly-once sink the restart stops at the
    newest, whose output is committed: restoring an older one would write that span twice."""
    storage = tmp_path / "chk"

    class CorruptEveryRetained(FailOnce):
        def before_failing(self) -> None:
            for metadata in storage.rglob("chk-*/_metadata"):
                for state in sorted(metadata.parent.rglob("*.parquet"))[:1]:
                    state.write_bytes(state.read_bytes()[:-10])  # truncated

    env = _spark_env(storage, restarts=2)
    # kept after the FAILED end only when retained (the default, NO_EXTERNALIZED_CHECKPOINTS, deletes them then)
    env.get_checkpoint_config().set_externalized_checkpoint_retention(
        ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION)
    _build(env, CorruptEveryRetained(VICTIM, str(tmp_path / "failed")))[1].sink_to(
        FileSink(f"file://{tmp_path}/sums", "jsonl", mode=sink_mode))
    with pytest.raises(CorruptSnapshotError) as failed:
        _run(env, [], "all-corrupt")
    cause = str(failed.value)
    retained = sorted(int(m.parent.name.split("-", 1)[1]) for m in storage.rglob("chk-*/_metadata"))
    assert len(retained) == 3 and "truncated" in cause
    if sink_mode == "at_least_once":
        assert "no retained checkpoint can be restored" in cause
        for checkpoint_id in retained:
            assert f"checkpoint {checkpoint_id}: " in cause
    else:
        assert f"retained checkpoint {retained[-1]} is unreadable" in cause
        assert "exactly-once sinks already committed its output" in cause and "/sums" in cause


class _MetadataOutage:
    """The driver's store refuses reads of ``_metadata`` the first ``times`` times after the failure (the
    marker exists): an S3 outage that starts as the job restarts."""

    def __init__(self, marker: Path, times: int) -> None:
        self.marker, self.times, self.refused = marker, times, 0

    def install(self, monkeypatch) -> None:
        from checkpoints.backends.local import LocalFileSystemStore
        from checkpoints.errors import StorageUnavailable

        original = LocalFileSystemStore.get_bytes
        outage = self

        def get_bytes(store, key: str) -> bytes:
            if key.endswith("/_metadata") and outage.marker.exists() and outage.refused < outage.times:
                outage.refused += 1
                raise StorageUnavailable(f"GetObject {key}: connection refused (simulated outage)")
            return original(store, key)

        monkeypatch.setattr(LocalFileSystemStore, "get_bytes", get_bytes)


def test_a_restart_waits_out_unreachable_storage_with_the_backoff_and_resumes(spark, tmp_path, golden, monkeypatch,
                                                                              caplog):
    storage, marker = tmp_path / "chk", tmp_path / "failed"
    outage = _MetadataOutage(marker, times=3)
    outage.install(monkeypatch)
    env = _spark_env(storage, restarts=5)
    output = f"file://{tmp_path}/sums"
    events, sums = _build(env, FailOnce(VICTIM, str(marker)))
    sums.write_files(output, "jsonl")
    run, result = _run(env, [events], "storage-outage")

    assert outage.refused == 3
    assert result.restarts == 1, "the reads refused were waited out, not counted as failed attempts"
    assert caplog.text.count("storage unreachable while restarting") == 3
    newest = max(r.checkpoint_id for r in run.checkpoint_history() if r.attempt == 1)
    assert run.job.checkpointing.restored_from.rstrip("/").endswith(f"chk-{newest}")
    assert sorted(map(tuple, read_committed(output))) == golden
    assert sorted(map(tuple, result.collected[events._node.id])) == sorted(e for s in SPLITS for e in s)
    assert sorted(tuple(d["value"]) for d in result.dead_letters) == BAD
