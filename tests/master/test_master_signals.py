"""A job master stopped by a signal suspends its job (Flink's JobStatus.SUSPENDED) instead of dying silently.

The client is whoever stops a ``sluice run`` process the ordinary way: Airflow killing its task, systemd
stopping the unit, Kubernetes terminating the pod (SIGTERM), or somebody pressing Ctrl-C (SIGINT).  Done
means: the process exits promptly with 128 + the signal's number; the status document in storage says
SUSPENDED, which signal and when; every retained checkpoint is still there and loads (no "delete on
cancel"); nothing new was committed and no savepoint was taken; the lease is released, so a successor
restoring the newest checkpoint starts at once, and the job's committed output is exactly the
reference.  The real ``sluice run`` processes of the reliability tests are used (tests/reliability).
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from reliability.reliability_support import (
    Where,
    cli,
    committed_output_matches_the_reference,
    every_retained_checkpoint_is_intact,
    kill,
    log_of,
    record,
    retained,
    start,
    store_of,
    wait,
)


def _now_ms() -> int:
    return int(time.time() * 1000)


def _checkpoint_folders_with_metadata(where: Where) -> list[int]:
    store = store_of(where)
    return sorted({int(info.key.split("/")[1].removeprefix("chk-"))
                   for info in store.list("purchases/chk-") if info.key.endswith("/_metadata")})


def _signal_and_wait(process, signum: int, timeout_s: float) -> tuple[int, float, int]:
    """Send ``signum`` to the master process itself (as Kubernetes and Airflow do, not to its group): its exit
    status, the seconds it took, and the wall time the signal was sent."""
    sent_ms = _now_ms()
    started = time.monotonic()
    os.kill(process.pid, signum)
    code = process.wait(timeout=timeout_s)
    return code, time.monotonic() - started, sent_ms


def _assert_suspended(where: Where, pid: int, signal_name: str, exit_status: int, sent_ms: int) -> list[int]:
    """What every suspension must leave in storage; returns the retained checkpoint ids."""
    from checkpoints.desired_state import read_desired_state
    from checkpoints.lease import read_lease
    from checkpoints.status import read_status

    store = store_of(where)
    doc = read_status(store, "purchases")
    assert doc is not None and doc.state == "SUSPENDED", doc
    assert doc.suspension is not None, doc
    assert (doc.suspension.signal, doc.suspension.exit_status) == (signal_name, exit_status), doc.suspension
    assert sent_ms - 1_000 <= doc.suspension.received_ms <= _now_ms(), (sent_ms, doc.suspension)
    assert doc.suspension.stopped_ms is not None and doc.suspension.stopped_ms >= doc.suspension.received_ms
    # every retained checkpoint is kept and loads; no other chk-<id> holds a _metadata
    kept = every_retained_checkpoint_is_intact(where)
    assert len(kept) == 3, kept
    assert _checkpoint_folders_with_metadata(where) == kept
    assert doc.last_completed_checkpoint == max(kept), (doc.last_completed_checkpoint, kept)
    # no savepoint was taken
    assert not any((where.tmp_path / "sp").rglob("_metadata")), "a savepoint was taken"
    # the lease is released by the master that held it
    lease = read_lease(store, "purchases")
    assert lease is not None and lease.lease.released and lease.lease.pid == pid, lease
    # nobody stopped the job on purpose: it is still meant to run, so supervision restores it
    desired = read_desired_state(store, "purchases")
    assert desired is not None and desired.state.value == "running", desired
    return kept


@pytest.mark.slow
def test_sigterm_suspends_the_job_keeps_its_checkpoints_releases_the_lease_and_exits_143(tmp_path: Path) -> None:
    where = Where(tmp_path)
    first = start(where, "first")
    second = None
    try:
        wait(lambda: len(retained(where)) >= 3, 120, "three retained checkpoints", first, tmp_path=tmp_path)
        code, exit_s, sent_ms = _signal_and_wait(first, signal.SIGTERM, timeout_s=60)
        log = log_of(tmp_path, "first")
        assert code == 143, f"exit status {code}\n{log[-3000:]}"
        assert exit_s < 10, f"the master took {exit_s:.1f} s to exit"
        assert "SIGTERM" in log and "SUSPENDED" in log and "--from-savepoint" in log, log[-3000:]
        kept = _assert_suspended(where, first.pid, "SIGTERM", 143, sent_ms)

        # the lease was released: a successor without --lease-wait starts at once from the newest checkpoint
        started = time.monotonic()
        second = start(where, "second", "--from-savepoint", where.checkpoint_uri(max(kept)))
        wait(lambda: max(retained(where)) > max(kept), 120, "a checkpoint of the restored job", second,
             tmp_path=tmp_path)
        successor_s = time.monotonic() - started
        assert "already has a running job master" not in log_of(tmp_path, "second")
        stop = cli("stop", "purchases", "--storage", where.storage)
        assert stop.returncode == 0, stop.stderr
        assert second.wait(timeout=120) == 0, log_of(tmp_path, "second")[-3000:]

        rows = committed_output_matches_the_reference(tmp_path / "out")
        staged = sorted(str(p.relative_to(tmp_path)) for p in (tmp_path / "out").glob("*/_staging/**/*")
                        if p.is_file())
        assert staged == [], staged
        record("sigterm-local", {"exit_status": code, "exit_s": round(exit_s, 2), "retained_kept": kept,
                                 "successor_first_checkpoint_s": round(successor_s, 1), "rows_compared": rows})
    finally:
        kill(first, *([second] if second is not None else []))


@pytest.mark.slow
def test_sigint_like_ctrl_c_suspends_the_job_too_and_exits_130(tmp_path: Path) -> None:
    where = Where(tmp_path)
    first = start(where, "first")
    try:
        wait(lambda: len(retained(where)) >= 3, 120, "three retained checkpoints", first, tmp_path=tmp_path)
        code, exit_s, sent_ms = _signal_and_wait(first, signal.SIGINT, timeout_s=60)
        assert code == 130, f"exit status {code}\n{log_of(tmp_path, 'first')[-3000:]}"
        assert exit_s < 10, f"the master took {exit_s:.1f} s to exit"
        _assert_suspended(where, first.pid, "SIGINT", 130, sent_ms)
    finally:
        kill(first)


def _process_group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.slow
@pytest.mark.spark
def test_sigterm_on_a_spark_master_suspends_the_job_and_leaves_no_jvm_behind(tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    where = Where(tmp_path, runtime="spark")
    first = start(where, "first")
    try:
        wait(lambda: len(retained(where)) >= 3, 400, "three retained checkpoints", first, tmp_path=tmp_path)
        code, exit_s, sent_ms = _signal_and_wait(first, signal.SIGTERM, timeout_s=120)
        log = log_of(tmp_path, "first")
        assert code == 143, f"exit status {code}\n{log[-3000:]}"
        assert exit_s < 45, f"the Spark master took {exit_s:.1f} s to exit"
        # the master stopped its SparkContext: the JVM (and its Python workers) went with it
        deadline = time.monotonic() + 10
        while _process_group_alive(first.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _process_group_alive(first.pid), "a process of the master's group (the Spark JVM?) outlived it"
        kept = _assert_suspended(where, first.pid, "SIGTERM", 143, sent_ms)
        record("sigterm-spark", {"exit_status": code, "exit_s": round(exit_s, 2), "retained_kept": kept})
    finally:
        if _process_group_alive(first.pid):
            os.killpg(first.pid, signal.SIGKILL)
        kill(first)


# -- the master in-process ---------------------------------------------------------------------------------------

UNBOUNDED = {"events_per_split": None, "events_per_second": 50, "num_keys": 20}


def _config(tmp_path: Path, **kw):
    from engine.master.master import MasterConfig

    base = dict(job_spec="engine.examples.purchases:build", job_name="purchases", params=dict(UNBOUNDED),
                checkpoint_interval_ms=200, storage_uri=(tmp_path / "chk").as_uri(),
                savepoint_dir=(tmp_path / "sp").as_uri(), output_dir=str(tmp_path / "out"),
                status_interval_ms=100, linger_after_end_s=3.0, runtime_options={"bundle_size": 64})
    base.update(kw)
    return MasterConfig(**base)


def _retained_ids(tmp_path: Path) -> list[int]:
    from checkpoints.backends import open_store
    from checkpoints.index import read_index

    try:
        return read_index(open_store((tmp_path / "chk").as_uri()), "purchases").index.ids()
    except Exception:  # noqa: BLE001 - not written yet
        return []


def _until(predicate, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_suspended_master_publishes_suspended_releases_its_lease_and_does_not_linger(tmp_path: Path) -> None:
    from checkpoints.backends import open_store
    from checkpoints.lease import read_lease
    from checkpoints.status import read_status
    from engine.master.master import JobMaster

    # a linger far longer than a suspension takes on a loaded host: a master that lingers cannot pass unseen
    master = JobMaster(_config(tmp_path, linger_after_end_s=60.0)).start()
    try:
        _until(lambda: len(_retained_ids(tmp_path)) >= 3, 120, "three retained checkpoints")
        before = _retained_ids(tmp_path)
        master.request_suspend(signal.SIGTERM)  # what the signal handler does; wait() suspends the job
        started = time.monotonic()
        result = master.wait()
        took_s = time.monotonic() - started
    finally:
        if not master.client.get_job_execution_result().done():
            master.client.cancel()
            master.wait()
    store = open_store((tmp_path / "chk").as_uri())
    doc = read_status(store, "purchases")
    assert doc.state == "SUSPENDED" and doc.suspension.signal == "SIGTERM" and doc.suspension.exit_status == 143
    assert doc.suspension.stopped_ms is not None
    after = _retained_ids(tmp_path)
    assert len(after) == 3 and max(after) >= max(before), (before, after)
    assert read_lease(store, "purchases").lease.released
    assert took_s < 30.0, f"a suspended master must not linger ({took_s:.1f} s; linger_after_end_s is 60)"
    assert result.job_id == "purchases"


def build_deleting_on_cancel(env, **params):
    """The purchases job with DELETE_ON_CANCELLATION chosen by the job itself: cancelling it deletes its
    retained checkpoints, so a signal must not suspend it by cancelling."""
    from engine.checkpointing.config import ExternalizedCheckpointRetention
    from engine.examples.purchases import build

    streams = build(env, **params)
    env.get_checkpoint_config().set_externalized_checkpoint_retention(
        ExternalizedCheckpointRetention.DELETE_ON_CANCELLATION)
    return streams


def test_a_job_that_deletes_its_checkpoints_on_cancel_is_not_cancelled_by_a_signal(tmp_path: Path) -> None:
    from checkpoints.backends import open_store
    from checkpoints.lease import read_lease
    from checkpoints.status import read_status
    from engine.master.master import JobMaster

    master = JobMaster(_config(tmp_path, job_spec=f"{__name__}:build_deleting_on_cancel")).start()
    try:
        _until(lambda: len(_retained_ids(tmp_path)) >= 3, 120, "three retained checkpoints")
        master.suspend(signal.SIGTERM)
        with pytest.raises(TimeoutError, match="DELETE_ON_CANCELLATION"):
            master.wait()
        store = open_store((tmp_path / "chk").as_uri())
        doc = read_status(store, "purchases")
        assert doc.state == "SUSPENDED" and doc.suspension.stopped_ms is None, doc
        assert "DELETE_ON_CANCELLATION" in doc.suspension.note
        assert len(_retained_ids(tmp_path)) == 3
        # the job was left running, so the lease is not released: it expires after its ttl
        assert not read_lease(store, "purchases").lease.released
    finally:
        master.client.cancel()
        master.client.get_job_execution_result().exception(timeout=60)


# -- the signal handler --------------------------------------------------------------------------------------------


class _FakeMaster:
    def __init__(self, lease=None, client=None) -> None:
        self.lease, self.client = lease, client
        self.requested: list[int] = []

    def request_suspend(self, signum: int) -> None:
        self.requested.append(signum)


class _Exited(Exception):
    pass


def _handler(master):
    from engine.master.signals import SuspendOnSignal

    lines: list[str] = []

    def exit_now(status: int):
        raise _Exited(status)

    return SuspendOnSignal(master, announce=lines.append, exit_now=exit_now), lines


def test_a_signal_before_the_lease_is_held_exits_at_once_with_128_plus_its_number() -> None:
    handler, lines = _handler(_FakeMaster())
    with pytest.raises(_Exited, match="^130$"):
        handler.on_signal(signal.SIGINT, None)
    assert "SIGINT" in lines[-1]


def test_a_signal_once_the_lease_is_held_asks_the_master_to_suspend_the_job() -> None:
    master = _FakeMaster(lease=object())  # start() under way: wait() acts on the request once it runs
    handler, lines = _handler(master)
    handler.on_signal(signal.SIGTERM, None)
    assert master.requested == [signal.SIGTERM]
    assert "suspending the job" in lines[-1] and "143" in lines[-1]


def test_a_second_signal_during_the_suspension_exits_at_once() -> None:
    master = _FakeMaster(lease=object(), client=object())
    handler, lines = _handler(master)
    handler.on_signal(signal.SIGTERM, None)
    assert master.requested == [signal.SIGTERM]
    with pytest.raises(_Exited, match="^143$"):
        handler.on_signal(signal.SIGTERM, None)
    assert master.requested == [signal.SIGTERM]
    assert "again" in lines[-1] and "lease is not released" in lines[-1]


def test_a_master_started_with_sigint_ignored_keeps_ignoring_it() -> None:
    """``sluice run ... &`` in a script (or under nohup) starts with SIGINT ignored, so the script's Ctrl-C
    is not meant for it: the master keeps ignoring SIGINT, as Python itself does, and handles SIGTERM."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        handler, _ = _handler(_FakeMaster())
        handler.install()
        try:
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            assert signal.getsignal(signal.SIGTERM) == handler.on_signal
        finally:
            handler.uninstall()
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)


def test_the_status_document_round_trips_a_suspension_and_reads_documents_without_one() -> None:
    from checkpoints.status import StatusDocument, Suspension

    doc = StatusDocument("job-1", 1000, "SUSPENDED", suspension=Suspension(
        signal="SIGTERM", received_ms=990, exit_status=143, stopped_ms=995, note=""))
    assert StatusDocument.from_json(doc.to_json()) == doc
    older = json.loads(StatusDocument("job-1", 1000).to_json())
    older.pop("suspension", None)
    older["format_version"] = "1.0"
    assert StatusDocument.from_json(json.dumps(older)).suspension is None
