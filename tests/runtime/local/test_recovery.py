"""Recovery on the local runtime (seed 002 "Recovery"): savepoints and retained checkpoints restore the job,
also at another parallelism (key groups are redistributed), and the committed output stays exactly-once."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import pytest

from checkpoints import load_snapshot
from engine import CheckpointingMode, ExternalizedCheckpointRetention
from engine.errors import JobFailedError
from engine.runtime.local.faults import Fault, FaultKind, FaultPlan
from engine.runtime.local.runtime import LocalRuntime

from checkpoint_jobs import build_job, committed, make_events
from source_gate import savepoint_after

EVENTS = make_events()


@pytest.fixture(scope="module")
def golden() -> list:
    out = tempfile.mkdtemp()
    build_job(out, EVENTS).execute("golden")
    return committed(out)


def stop_with_savepoint_after(env, records: int, savepoint_dir: str) -> tuple[str, object]:
    client, uri = savepoint_after(lambda: LocalRuntime(env).submit("to be stopped", list(env._sinks)), records,
                                  savepoint_dir)
    client.wait(30)
    return uri, client


@pytest.mark.parametrize("new_parallelism", [2, 4])
def test_restoring_a_savepoint_at_another_parallelism_gives_the_same_final_output(golden: list, tmp_path: Path,
                                                                                     new_parallelism: int) -> None:
    out = str(tmp_path / "out")
    env = build_job(out, EVENTS, mode=CheckpointingMode.EXACTLY_ONCE)
    uri, client = stop_with_savepoint_after(env, 400, f"file://{tmp_path}/savepoints")
    assert client.status().state == "stopped"
    assert [r.kind for r in client.checkpoint_history()][-1] == "savepoint"
    before = committed(out)
    assert 0 < len(before) < len(golden)  # stopped midway, with what the savepoint covers committed

    resumed = build_job(out, EVENTS, parallelism=new_parallelism, mode=CheckpointingMode.EXACTLY_ONCE)
    resumed.set_runtime_option("from_savepoint", uri)
    result = resumed.execute("resumed")
    assert committed(out) == golden
    assert min(result.completed_checkpoints) > load_snapshot(uri).metadata.checkpoint_id  # ids continue


def test_a_savepoint_is_self_contained_and_leaves_the_running_job_undisturbed(golden: list, tmp_path: Path) -> None:
    out = str(tmp_path / "out")
    env = build_job(out, EVENTS, mode=CheckpointingMode.EXACTLY_ONCE, storage_dir=f"file://{tmp_path}/chk")
    client, uri = savepoint_after(lambda: LocalRuntime(env).submit("savepointed", list(env._sinks)), 300,
                                  f"file://{tmp_path}/sp", stop=False)
    client.wait(30)
    assert client.status().state == "finished"
    assert committed(out) == golden
    snapshot = load_snapshot(uri)  # full validation: key groups covered, files and checksums present
    assert snapshot.metadata.is_savepoint()
    assert str(tmp_path / "sp") in uri
    assert not any(p.startswith("shared/") for p in snapshot.metadata.referenced_paths())
    window_ops = [op for op in snapshot.metadata.operators if op.is_keyed()]
    assert len(window_ops) == 2 and all(op.parallelism == 3 for op in window_ops)


def test_retained_checkpoints_are_n_in_storage_and_restore_a_failed_job(golden: list, tmp_path: Path) -> None:
    out, storage = str(tmp_path / "out"), f"file://{tmp_path}/chk"
    env = build_job(out, EVENTS, mode=CheckpointingMode.EXACTLY_ONCE, storage_dir=storage, retained=2,
                    fault_plan=FaultPlan([Fault(FaultKind.RECORDS, 1300)]), restarts=0)
    env.get_checkpoint_config().set_externalized_checkpoint_retention(
        ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION)
    with pytest.raises(JobFailedError):
        env.execute("fails late")
    (job_dir,) = [p for p in (tmp_path / "chk").iterdir() if p.is_dir()]
    retained = sorted(p.name for p in job_dir.iterdir() if p.name.startswith("chk-") and (p / "_metadata").exists())
    assert len(retained) == 2
    latest = f"file://{job_dir}/{retained[-1]}"

    resumed = build_job(out, EVENTS, mode=CheckpointingMode.EXACTLY_ONCE)
    resumed.set_runtime_option("from_savepoint", latest)
    resumed.execute("resumed from a retained checkpoint")
    assert committed(out) == golden


def test_checkpoint_ids_continue_across_restarts(golden: list, tmp_path: Path) -> None:
    out = str(tmp_path / "out")
    plan = FaultPlan([Fault(FaultKind.BEFORE_ACK, 2), Fault(FaultKind.RECORDS, 900)])
    env = build_job(out, EVENTS, mode=CheckpointingMode.EXACTLY_ONCE, fault_plan=plan, restarts=5)
    run = LocalRuntime(env)._prepare("restarts", list(env._sinks), [])
    result = run.run()
    ids = [r.checkpoint_id for r in run.history]
    assert result.restarts == 2 and len({r.attempt for r in run.history}) >= 2
    assert ids == sorted(set(ids))
    assert run.history[-1].kind == "final"
    assert committed(out) == golden


def test_cancel_stops_the_job_and_keeps_nothing_uncommitted(tmp_path: Path) -> None:
    out = str(tmp_path / "out")
    env = build_job(out, EVENTS, mode=CheckpointingMode.EXACTLY_ONCE)
    client = LocalRuntime(env).submit("cancelled", list(env._sinks))
    while client.status().records_in < 200 and not client.done():
        time.sleep(0.0002)
    client.cancel()
    client.wait(30)
    assert client.status().state in ("cancelled", "finished")
    assert not list((tmp_path / "out" / "tumbling").glob("_staging/*/*"))  # open transactions were aborted


def test_checkpoints_and_restore_work_on_s3_through_a_moto_server(golden: list, tmp_path: Path, moto_s3) -> None:
    out = str(tmp_path / "out")  # moto_s3 (tests/conftest.py): a bucket of its own, AWS_ENDPOINT_URL set
    plan = FaultPlan([Fault(FaultKind.BEFORE_COMMIT, 2)])
    env = build_job(out, EVENTS, mode=CheckpointingMode.EXACTLY_ONCE, storage_dir=f"s3://{moto_s3.bucket}/checkpoints",
                    fault_plan=plan, restarts=2, interval_ms=200)
    result = env.execute("on s3")
    assert result.restarts == 1
    assert committed(out) == golden


class _CorruptingPlan(FaultPlan):
    """Kills the attempt right after checkpoint ``at`` completed, having first flipped a byte in one of its
    state files on disk: the in-process restart finds its newest retained checkpoint corrupt."""

    def __init__(self, at: int, storage: Path) -> None:
        super().__init__([Fault(FaultKind.BEFORE_COMMIT, at)])
        self.storage = storage
        self.corrupted: list[Path] = []

    def fire(self, kind: FaultKind, value: int) -> None:
        if kind is FaultKind.BEFORE_COMMIT and any(f.at == value for f in self.faults) and not self.corrupted:
            files = sorted(p for p in self.storage.rglob(f"chk-{value}/**/*.parquet"))
            assert files, f"checkpoint {value} wrote no state file under {self.storage}"
            data = bytearray(files[0].read_bytes())
            data[len(data) // 2] ^= 0xFF
            files[0].write_bytes(bytes(data))
            self.corrupted.append(files[0])
        super().fire(kind, value)


def test_an_in_process_restart_passes_over_a_corrupt_newest_checkpoint_to_the_one_before(golden: list,
                                                                                         tmp_path: Path) -> None:
    out = str(tmp_path / "out")
    plan = _CorruptingPlan(3, tmp_path / "chk")
    env = build_job(out, EVENTS, mode=CheckpointingMode.EXACTLY_ONCE, storage_dir=f"file://{tmp_path}/chk",
                    retained=3, fault_plan=plan, restarts=2, interval_ms=20)
    result = env.execute("newest checkpoint corrupt")
    assert plan.corrupted and result.restarts == 1
    assert committed(out) == golden


class _Opaque:
    """A value keyed state cannot persist without pickle."""

    def __init__(self, n: int) -> None:
        self.n = n


def test_a_state_upload_that_fails_fails_the_job_with_its_own_cause(tmp_path: Path) -> None:
    from engine import StreamExecutionEnvironment
    from engine.errors import StateSerializationError

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    env.enable_checkpointing(20)
    env.get_checkpoint_config().set_checkpoint_storage_dir(f"file://{tmp_path}/chk")
    env.set_runtime_option("bundle_size", 1)
    (env.from_collection([("k", _Opaque(i)) for i in range(5_000)])
        .key_by(lambda kv: kv[0])
        .count_window(10_000)  # never fires: the elements stay in window state, which checkpoints must persist
        .reduce(lambda a, b: (a[0], _Opaque(a[1].n + b[1].n)))
        .print())
    with pytest.raises(JobFailedError) as failed:
        env.execute("opaque state")
    chain, error = [], failed.value
    while error is not None:
        chain.append(error)
        error = error.__cause__ or error.__context__
    assert not any(isinstance(e, NameError) for e in chain), chain
    assert any(isinstance(e, StateSerializationError) for e in chain), chain


@pytest.mark.parametrize("request_kind", ["stop_with_savepoint", "trigger_savepoint"])
def test_a_savepoint_requested_after_the_job_finished_is_refused_not_left_waiting(tmp_path: Path,
                                                                                  request_kind: str) -> None:
    """A request posted to the control mailbox after the run's last round used to wait forever: nobody
    drained the mailbox again. Once the run has ended a request is answered at once, with the reason."""
    env = build_job(str(tmp_path / "out"), EVENTS[:50], mode=CheckpointingMode.EXACTLY_ONCE)
    client = LocalRuntime(env).submit("already over", list(env._sinks))
    client.wait(60)
    future = getattr(client, request_kind)(f"file://{tmp_path}/sp")
    with pytest.raises(JobFailedError, match="state 'finished'"):
        future.result(timeout=10)
    client.cancel()  # nothing to cancel: returns, does not raise


def test_a_savepoints_completion_log_names_the_savepoint_folder_a_restore_takes(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The line named the savepoint root (``.../sp``), not the savepoint's own folder: a user copying it into
    ``sluice restore`` was refused, the root holding no ``_metadata``."""
    env = build_job(str(tmp_path / "out"), EVENTS, mode=CheckpointingMode.EXACTLY_ONCE,
                    storage_dir=f"file://{tmp_path}/chk")
    with caplog.at_level("INFO", logger="engine.checkpointing.coordinator"):
        client, uri = savepoint_after(lambda: LocalRuntime(env).submit("savepointed", list(env._sinks)), 300,
                                      f"file://{tmp_path}/sp", stop=False)
        client.wait(30)
    completed = [r for r in caplog.records if getattr(r, "event", None) == "savepoint_completed"]
    assert [r.location for r in completed] == [uri]
    assert uri.rstrip("/") != f"file://{tmp_path}/sp" and load_snapshot(uri).metadata.is_savepoint()
    assert completed[0].getMessage().endswith(f" at {uri}")
