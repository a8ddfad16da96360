"""How the local runtime's in-process restart reads its restore point (engine/runtime/attempts.py, issue 17).

The job is killed right after checkpoint 3 completed (a BEFORE_COMMIT fault: retained, its output not yet
committed), and storage then misbehaves as the job restarts:

- reads of checkpoint metadata are refused for a while: the restart waits with the restart strategy's
  backoff (a manual clock: the waits cost no time) and resumes from checkpoint 3, output exact;
- every retained checkpoint is damaged: the job fails, and the failure is a failure, so the retained
  checkpoints stay for an operator to look at (a FINISHED shutdown would have deleted them);
- the newest is damaged: the restart passes over it only while its output is not committed yet; once an
  exactly-once sink committed it, restoring the one before would write that span twice, so the job fails.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from engine import CheckpointingMode, ExternalizedCheckpointRetention
from checkpoints import load_snapshot
from engine.errors import CorruptSnapshotError
from engine.runtime.local.faults import Fault, FaultKind, FaultPlan
from engine.runtime.local.runtime import LocalRuntime

from checkpoint_jobs import build_job, committed, make_events

EVENTS = make_events()


@pytest.fixture(scope="module")
def golden(tmp_path_factory) -> list:
    out = str(tmp_path_factory.mktemp("golden"))
    build_job(out, EVENTS).execute("golden")
    return committed(out)


def _retained_folders(storage: Path) -> list[Path]:
    return sorted((m.parent for m in storage.rglob("chk-*/_metadata")), key=lambda p: int(p.name.split("-")[1]))


class _MetadataOutage:
    """Reads of ``_metadata`` are refused ``times`` times once ``plan`` fired: S3 down as the job restarts."""

    def __init__(self, plan: FaultPlan, times: int) -> None:
        self.plan, self.times, self.refused = plan, times, 0

    def install(self, monkeypatch) -> None:
        from checkpoints.backends.local import LocalFileSystemStore
        from checkpoints.errors import StorageUnavailable

        original = LocalFileSystemStore.get_bytes
        outage = self

        def get_bytes(store, key: str) -> bytes:
            if key.endswith("/_metadata") and outage.plan.fired and outage.refused < outage.times:
                outage.refused += 1
                raise StorageUnavailable(f"GetObject {key}: connection refused (simulated outage)")
            return original(store, key)

        monkeypatch.setattr(LocalFileSystemStore, "get_bytes", get_bytes)


def test_a_restart_waits_out_unreachable_storage_with_the_backoff(golden, tmp_path, monkeypatch, caplog) -> None:
    out, storage = str(tmp_path / "out"), tmp_path / "chk"
    plan = FaultPlan([Fault(FaultKind.BEFORE_COMMIT, 3)])
    outage = _MetadataOutage(plan, times=3)
    outage.install(monkeypatch)
    env = build_job(out, EVENTS, mode=CheckpointingMode.EXACTLY_ONCE, storage_dir=f"file://{storage}", retained=3,
                    fault_plan=plan, restarts=5, interval_ms=20)
    with caplog.at_level(logging.WARNING, logger="engine.runtime.recovery"):
        result = env.execute("storage outage while restarting")
    assert outage.refused == 3
    assert result.restarts == 1
    assert caplog.text.count("storage unreachable while restarting") == 3
    assert committed(out) == golden


def test_a_storage_outage_longer_than_the_strategy_allows_fails_the_job(tmp_path, monkeypatch) -> None:
    from engine.errors import JobFailedError

    plan = FaultPlan([Fault(FaultKind.BEFORE_COMMIT, 3)])
    outage = _MetadataOutage(plan, times=100)
    outage.install(monkeypatch)
    env = build_job(str(tmp_path / "out"), EVENTS, mode=CheckpointingMode.EXACTLY_ONCE,
                    storage_dir=f"file://{tmp_path}/chk", retained=3, fault_plan=plan, restarts=3, interval_ms=20)
    with pytest.raises(JobFailedError, match=r"could not read checkpoint 3 to restart .*simulated outage"):
        env.execute("storage down for good")
    assert outage.refused == 3  # 3 restarts allowed: one for the fault, two waits, and the third refusal fails


class _CorruptEveryRetained(FaultPlan):
    """Truncates a state file of every retained checkpoint, then kills the attempt after checkpoint ``at``."""

    def __init__(self, at: int, storage: Path) -> None:
        super().__init__([Fault(FaultKind.BEFORE_COMMIT, at)])
        self.storage = storage
        self.damaged: list[int] = []

    def fire(self, kind: FaultKind, value: int) -> None:
        if kind is FaultKind.BEFORE_COMMIT and value == self.faults[0].at and not self.damaged:
            for folder in _retained_folders(self.storage):
                state = sorted(folder.rglob("*.parquet"))[0]
                state.write_bytes(state.read_bytes()[:-10])
                self.damaged.append(int(folder.name.split("-")[1]))
        super().fire(kind, value)


def test_when_no_retained_checkpoint_is_readable_the_job_fails_and_keeps_them(tmp_path) -> None:
    out, storage = str(tmp_path / "out"), tmp_path / "chk"
    plan = _CorruptEveryRetained(3, storage)
    env = build_job(out, EVENTS, mode=CheckpointingMode.EXACTLY_ONCE, storage_dir=f"file://{storage}", retained=3,
                    fault_plan=plan, restarts=2, interval_ms=20)
    env.get_checkpoint_config().set_externalized_checkpoint_retention(
        ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION)
    client = LocalRuntime(env).submit("every retained checkpoint damaged", list(env._sinks))
    with pytest.raises(CorruptSnapshotError, match="checkpoint 2 is unreadable") as failed:
        client.wait(60)
    assert plan.damaged == [1, 2, 3]
    # 3 is passed over (killed before its commit), 2 is not: its output is committed, an older restore would
    # write it again
    assert "already committed its output" in str(failed.value) and "truncated" in str(failed.value)
    assert client.status().state == "failed"
    assert [int(p.name.split("-")[1]) for p in _retained_folders(storage)] == [1, 2, 3], \
        "a failed restart keeps the retained checkpoints (RETAIN_ON_CANCELLATION)"


class _CorruptNewestWhen(FaultPlan):
    """Truncates a state file of the newest retained checkpoint when ``fault`` fires, which then kills the attempt."""

    def __init__(self, fault: Fault, storage: Path) -> None:
        super().__init__([fault])
        self.storage = storage
        self.damaged: list[int] = []

    def fire(self, kind: FaultKind, value: int) -> None:
        fault = self.faults[0]
        due = kind is fault.kind and (value == fault.at if kind is FaultKind.BEFORE_COMMIT else value >= fault.at)
        if due and not self.damaged:
            newest = _retained_folders(self.storage)[-1]
            state = sorted(newest.rglob("*.parquet"))[0]
            state.write_bytes(state.read_bytes()[:-10])
            self.damaged.append(int(newest.name.split("-")[1]))
        super().fire(kind, value)


def test_a_newest_checkpoint_damaged_before_its_commit_is_passed_over_exactly_once(golden, tmp_path) -> None:
    out, storage = str(tmp_path / "out"), tmp_path / "chk"
    plan = _CorruptNewestWhen(Fault(FaultKind.BEFORE_COMMIT, 4), storage)
    env = build_job(out, EVENTS, mode=CheckpointingMode.EXACTLY_ONCE, storage_dir=f"file://{storage}", retained=3,
                    fault_plan=plan, restarts=2, interval_ms=20)
    result = env.execute("newest damaged before its commit")
    assert plan.damaged == [4] and result.restarts == 1
    assert committed(out) == golden


def test_a_newest_checkpoint_damaged_after_its_commit_fails_the_job_instead_of_duplicating(golden, tmp_path) -> None:
    out, storage = str(tmp_path / "out"), tmp_path / "chk"
    plan = _CorruptNewestWhen(Fault(FaultKind.RECORDS, len(EVENTS) * 3 // 4), storage)
    env = build_job(out, EVENTS, mode=CheckpointingMode.EXACTLY_ONCE, storage_dir=f"file://{storage}", retained=3,
                    fault_plan=plan, restarts=2, interval_ms=20)
    env.get_checkpoint_config().set_externalized_checkpoint_retention(
        ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION)
    client = LocalRuntime(env).submit("newest damaged after its commit", list(env._sinks))
    with pytest.raises(CorruptSnapshotError, match=r"already committed its output .*tumbling") as failed:
        client.wait(60)
    assert f"checkpoint {plan.damaged[0]} is unreadable" in str(failed.value)
    produced = committed(out)
    assert len(produced) == len(set(map(json.dumps, produced))), "a row was committed twice"
    assert all(row in golden for row in produced) and len(produced) < len(golden)


def test_a_restart_that_cannot_even_build_its_attempt_fails_and_keeps_the_retained_checkpoints(
        tmp_path, monkeypatch) -> None:
    from engine.io.file_sink import FileSink

    """The next attempt's construction fails: its sinks cannot re-commit the restored checkpoint's transactions
    (S3 refusing, a permission taken away)."""
    out, storage = str(tmp_path / "out"), tmp_path / "chk"
    plan = FaultPlan([Fault(FaultKind.RECORDS, len(EVENTS) // 2)])

    def recover_and_commit(sink, handles) -> None:
        if plan.fired:
            raise PermissionError("AccessDenied: PutObject on the output (simulated)")

    monkeypatch.setattr(FileSink, "recover_and_commit", recover_and_commit)
    env = build_job(out, EVENTS, mode=CheckpointingMode.EXACTLY_ONCE, storage_dir=f"file://{storage}", retained=3,
                    fault_plan=plan, restarts=2, interval_ms=20)
    env.get_checkpoint_config().set_externalized_checkpoint_retention(
        ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION)
    client = LocalRuntime(env).submit("attempt cannot be built", list(env._sinks))
    with pytest.raises(PermissionError, match="AccessDenied"):
        client.wait(60)
    assert plan.fired and client.status().state == "failed"
    kept = _retained_folders(storage)
    assert len(kept) == 3, "a failed job keeps its retained checkpoints (it used to shut down as FINISHED)"
    for folder in kept:
        load_snapshot(folder.as_uri())
