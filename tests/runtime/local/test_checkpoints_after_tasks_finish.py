"""Checkpoints go on after some tasks finished (issue 19; Flink's FLIP-147, the default since Flink 1.15).

A bounded job with more source subtasks than splits -- the README's ``from_collection`` example at
parallelism 2 -- took no periodic checkpoint at all: the subtask without a split finished at once, and
the coordinator refused every trigger while a task was not running.  A finished task now acknowledges
with its final state (split positions at their end, its sinks' open transaction), without a barrier,
and a restore from such a checkpoint neither re-reads a finished split nor loses one.
"""

from __future__ import annotations

import json
from pathlib import Path

from engine import (
    CheckpointingMode,
    ManualClock,
    StreamExecutionEnvironment,
    Time,
    TumblingEventTimeWindows,
    WatermarkStrategy,
)
from engine.api.restart import RestartStrategies
from engine.io.collection_source import CollectionSource
from engine.io.file_sink import FileSink
from engine.runtime.local.faults import Fault, FaultKind, FaultPlan

EVENTS = [(f"k{i % 7}", 1 + i % 5, i * 10) for i in range(3_000)]


def _run(tmp_path: Path, name: str, parallelism: int, num_splits: int, fault: Fault | None = None):
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism)
    env.set_clock(ManualClock())
    env.set_runtime_option("bundle_size", 16)
    env.set_runtime_option("clock_step_ms", 10)
    env.enable_checkpointing(50, CheckpointingMode.EXACTLY_ONCE)
    env.get_checkpoint_config().set_checkpoint_storage_dir((tmp_path / f"chk-{name}").as_uri())
    env.set_runtime_option("restart_strategy", RestartStrategies.fixed_delay_restart(1, 0))
    if fault is not None:
        env.set_runtime_option("fault_plan", FaultPlan([fault]))
    output = tmp_path / f"out-{name}"
    (env.from_source(CollectionSource(EVENTS, num_splits=num_splits))
     .assign_timestamps_and_watermarks(
         WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, ts: e[2]))
     .key_by(lambda e: e[0]).window(TumblingEventTimeWindows.of(Time.seconds(1))).sum(1)
     .map(lambda e: [e[0], e[1], e[2]])
     .sink_to(FileSink(str(output), "jsonl")))
    result = env.execute(name)
    rows = sorted(json.loads(line) for part in output.glob("part-*.jsonl")
                  for line in part.read_text().splitlines() if line.strip())
    return result, rows


def test_a_source_subtask_without_a_split_no_longer_stops_periodic_checkpoints(tmp_path: Path) -> None:
    alone, rows_alone = _run(tmp_path, "p1", 1, 1)
    spread, rows_spread = _run(tmp_path, "p2", 2, 1)  # subtask 1 has no split: finished from the start
    assert alone.num_completed_checkpoints >= 20
    # the final checkpoint was the only one before; now as many as with one subtask
    assert spread.num_completed_checkpoints >= alone.num_completed_checkpoints - 2
    assert rows_spread == rows_alone and len(rows_alone) == 7 * 30


def test_a_restore_from_a_checkpoint_taken_after_a_subtask_finished_is_exactly_once(tmp_path: Path) -> None:
    _, reference = _run(tmp_path, "reference", 1, 3)
    # 3 splits on 2 subtasks: subtask 1 reads one split and finishes while subtask 0 still reads two; the
    # fault hits late, so the restored checkpoint holds subtask 1's final state
    result, rows = _run(tmp_path, "restored", 2, 3, Fault(FaultKind.RECORDS, int(len(EVENTS) * 0.9)))
    assert result.restarts == 1
    assert rows == reference


def test_a_sink_subtask_that_finished_early_commits_exactly_once_across_a_restore(tmp_path: Path) -> None:
    """source -> map -> sink chained at parallelism 2 over one split: subtask 1's sink ends at once, its empty
    transaction rides every checkpoint; a late fault restores and the output is exact."""
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.set_clock(ManualClock())
    env.set_runtime_option("bundle_size", 16)
    env.set_runtime_option("clock_step_ms", 10)
    env.enable_checkpointing(50, CheckpointingMode.EXACTLY_ONCE)
    env.get_checkpoint_config().set_checkpoint_storage_dir((tmp_path / "chk").as_uri())
    env.set_runtime_option("restart_strategy", RestartStrategies.fixed_delay_restart(1, 0))
    env.set_runtime_option("fault_plan", FaultPlan([Fault(FaultKind.RECORDS, 2_500)]))
    env.from_source(CollectionSource(list(range(3_000)))).map(lambda x: [x]) \
        .sink_to(FileSink(str(tmp_path / "out"), "jsonl"))
    result = env.execute("chained")
    values = sorted(json.loads(line)[0] for part in (tmp_path / "out").glob("part-*.jsonl")
                    for line in part.read_text().splitlines() if line.strip())
    assert result.restarts == 1 and result.num_completed_checkpoints >= 20
    assert values == list(range(3_000))
