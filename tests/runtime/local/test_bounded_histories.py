"""The local runtime keeps the newest checkpoint records and dead letters, and exact totals (issue 17).

engine/histories.py: runtime options ``max_checkpoint_history`` and ``max_dead_letters`` bound what the
driver holds for the life of a job.  The same job runs twice, with small bounds and with the defaults (which it
does not reach); with a manual clock both runs are the same, so the bounded one must keep exactly the newest
items of the unbounded one and report the same totals.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from engine import (
    CheckpointingMode,
    ManualClock,
    StreamExecutionEnvironment,
    Time,
    TumblingEventTimeWindows,
    WatermarkStrategy,
)
from engine.errors import JobDefinitionError
from engine.io.collection_source import CollectionSource
from engine.io.file_sink import FileSink, read_committed
from engine.runtime.local.runtime import LocalRuntime

from checkpoint_jobs import make_events

EVENTS = make_events()
BAD = [e for e in EVENTS if e[1] == 9]


def _key_unless_nine(e):
    if e[1] == 9:
        raise ValueError("nine is not a key")  # a dead letter ("key_selector"), not a failure
    return e[0]


def _run(out: Path, storage: Path, **options):
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.set_clock(ManualClock())
    env.set_runtime_option("clock_step_ms", 10)
    env.set_runtime_option("bundle_size", 16)
    tolerable = options.pop("tolerable_failures", False)
    for key, value in options.items():
        env.set_runtime_option(key, value)
    env.enable_checkpointing(20, CheckpointingMode.EXACTLY_ONCE)
    if tolerable:
        env.get_checkpoint_config().set_tolerable_checkpoint_failure_number(5)
    env.get_checkpoint_config().set_checkpoint_storage_dir(storage.as_uri())
    (env.from_source(CollectionSource(EVENTS, num_splits=3))
        .assign_timestamps_and_watermarks(
            WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, ts: e[2]))
        .key_by(_key_unless_nine)
        .window(TumblingEventTimeWindows.of(Time.seconds(2))).sum(1)
        .sink_to(FileSink(str(out), "jsonl")))
    run = LocalRuntime(env)._prepare("bounded histories", list(env._sinks), [])
    return run, run.run()


@pytest.fixture(scope="module")
def unbounded(tmp_path_factory):
    folder = tmp_path_factory.mktemp("unbounded")
    run, result = _run(folder / "out", folder / "chk")
    assert len(result.dead_letters) == len(BAD) and len(run.history) > 10, "the defaults are not reached"
    return run, result, read_committed(str(folder / "out"))


def test_the_driver_keeps_the_newest_dead_letters_and_counts_them_all(unbounded, tmp_path) -> None:
    _, full, _ = unbounded
    run, result = _run(tmp_path / "out", tmp_path / "chk", max_dead_letters=4)
    assert len(result.dead_letters) == 4 and len(run.dead_letters) == 4
    assert result.dead_letters == full.dead_letters[-4:]
    assert result.dead_letter_count == run.dead_letters.total == len(BAD)
    assert result.metrics["num_dead_letter_records"] == len(BAD)
    assert sorted(d["value"] for d in full.dead_letters) == sorted(BAD)


def test_the_driver_keeps_the_newest_checkpoint_records_and_counts_them_all(unbounded, tmp_path) -> None:
    full_run, full, output = unbounded
    run, result = _run(tmp_path / "out", tmp_path / "chk", max_checkpoint_history=3)
    assert len(run.history) == 3
    def ids(history):
        return [(r.checkpoint_id, r.kind, r.completed_ms) for r in history]

    assert ids(run.history) == ids(full_run.history)[-3:]
    assert result.completed_checkpoints == full.completed_checkpoints[-3:]
    assert result.num_completed_checkpoints == len(full.completed_checkpoints) == run.history.total
    checkpoints = sum(1 for r in full_run.history if r.kind == "checkpoint")
    assert run.status().num_completed_checkpoints == full_run.status().num_completed_checkpoints == checkpoints
    assert run.status().last_completed_checkpoint_id == full_run.status().last_completed_checkpoint_id
    assert read_committed(str(tmp_path / "out")) == output


@pytest.mark.parametrize("option", ["max_checkpoint_history", "max_dead_letters"])
@pytest.mark.parametrize("value", [0, -1, 2.5, True, "10"])
def test_a_bound_that_is_not_a_positive_int_is_refused_before_the_job_runs(option, value, tmp_path) -> None:
    with pytest.raises(JobDefinitionError, match=rf"`{option}` must be an int >= 1 .*leave it unset"):
        _run(tmp_path / "out", tmp_path / "chk", **{option: value})
    assert not (tmp_path / "out").exists()


def test_the_storage_adapter_keeps_nothing_of_checkpoints_that_ended(tmp_path) -> None:
    """A checkpoint that failed (its upload raised; tolerated) left its storage location in the adapter for the
    job's life, and every savepoint its target."""
    from engine.runtime.local.faults import Fault, FaultKind, FaultPlan

    plan = FaultPlan([Fault(FaultKind.UPLOAD_ERROR, 3), Fault(FaultKind.UPLOAD_ERROR, 6)])
    run, result = _run(tmp_path / "out", tmp_path / "chk", fault_plan=plan, tolerable_failures=True)
    assert len(plan.fired) == 2 and result.restarts == 0 and result.num_completed_checkpoints > 10
    assert run.adapter._locations == {} and run.adapter._savepoint_targets == {}
    assert len(run.adapter.external_pointers) <= 1
