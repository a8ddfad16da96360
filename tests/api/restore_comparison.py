"""Restore-and-compare on the local runtime, shared by test_keyed_process_restore.py and
test_broadcast_state_restore.py: a job that fails midway (or is stopped with a savepoint) and is resumed, also
at another parallelism, must commit exactly what an uninterrupted run of it commits.

A test module provides ``build(out, kind, parallelism=2, storage=None, fault_plan=None)``: the job of ``kind``
writing to an exactly-once FileSink in ``out``, on an environment from :func:`configured_env`.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Callable, Iterable

import pytest

from engine import (
    CheckpointingMode,
    ExternalizedCheckpointRetention,
    ManualClock,
    StreamExecutionEnvironment,
)
from engine.api.restart import RestartStrategies
from engine.errors import JobFailedError
from engine.io.file_sink import read_committed
from engine.runtime.local.faults import Fault, FaultKind, FaultPlan
from engine.runtime.local.runtime import LocalRuntime
from source_gate import savepoint_after

Build = Callable[..., StreamExecutionEnvironment]


def configured_env(parallelism: int, storage: str | None = None,
                   fault_plan: FaultPlan | None = None) -> StreamExecutionEnvironment:
    """Checkpoints every 50 ms of a manual clock (counted in scheduling rounds: every run is the same), exactly
    once, no restart (a fault fails the job), retained on cancellation in ``storage`` when given."""
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism)
    env.set_clock(ManualClock())
    env.set_runtime_option("bundle_size", 16)
    env.set_runtime_option("clock_step_ms", 10)
    env.enable_checkpointing(50, CheckpointingMode.EXACTLY_ONCE)
    env.set_runtime_option("restart_strategy", RestartStrategies.fixed_delay_restart(0, 0))
    if storage is not None:
        config = env.get_checkpoint_config()
        config.set_checkpoint_storage_dir(storage)
        config.set_externalized_checkpoint_retention(ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION)
    if fault_plan is not None:
        env.set_runtime_option("fault_plan", fault_plan)
    return env


def uninterrupted_results(build: Build, kinds: Iterable[str]) -> dict[str, list]:
    """kind -> what an uninterrupted run commits, sorted."""
    out = {}
    for kind in kinds:
        folder = tempfile.mkdtemp()
        build(folder, kind).execute(f"golden {kind}")
        out[kind] = sorted(read_committed(folder))
    return out


def assert_restoring_the_latest_checkpoint_commits_the_uninterrupted_results(
        build: Build, golden: list, tmp_path: Path, kind: str, fail_at_record: int, new_parallelism: int) -> None:
    """Fail the job after ``fail_at_record`` records, then resume it from its retained checkpoint."""
    out, storage = str(tmp_path / "out"), f"file://{tmp_path}/chk"
    with pytest.raises(JobFailedError):
        build(out, kind, storage=storage, fault_plan=FaultPlan([Fault(FaultKind.RECORDS, fail_at_record)])) \
            .execute("fails")
    (job_dir,) = [p for p in (tmp_path / "chk").iterdir() if p.is_dir()]
    (latest,) = [p for p in job_dir.iterdir() if p.name.startswith("chk-") and (p / "_metadata").exists()]
    assert 0 < len(read_committed(out)) < len(golden)  # failed midway

    resumed = build(out, kind, parallelism=new_parallelism)
    resumed.set_runtime_option("from_savepoint", f"file://{latest}")
    resumed.execute("resumed")
    assert sorted(read_committed(out)) == golden


def assert_stop_with_savepoint_then_restore_commits_the_uninterrupted_results(
        build: Build, golden: list, tmp_path: Path, kind: str, stop_after_records: int,
        new_parallelism: int = 3) -> None:
    """Stop the job with a savepoint once ``stop_after_records`` records were read, then resume from it."""
    out = str(tmp_path / "out")
    env = build(out, kind)
    client, uri = savepoint_after(lambda: LocalRuntime(env).submit("to be stopped", list(env._sinks)),
                                  stop_after_records, f"file://{tmp_path}/savepoints")
    client.wait(30)
    assert client.status().state == "stopped"
    assert 0 < len(read_committed(out)) < len(golden)

    resumed = build(out, kind, parallelism=new_parallelism)
    resumed.set_runtime_option("from_savepoint", uri)
    resumed.execute("resumed")
    assert sorted(read_committed(out)) == golden
