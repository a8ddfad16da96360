"""A small keyed job run by the real local runtime, checkpointing to a file:// folder (validation tests).

Tumbling 1 s event-time sums with 200 ms allowed lateness and 1 s event-time
sessions over 12 keys from two splits, parallelism 2; the job fails on purpose
after ``fail_after`` records (``restarts=0``) so its retained checkpoints stay
in storage (RETAIN_ON_CANCELLATION keeps them when a job fails, seed 002) with
windows still open in them, as a crashed production job leaves them.
"""

from __future__ import annotations

from typing import Any

from engine import (
    CheckpointingMode,
    EventTimeSessionWindows,
    ExternalizedCheckpointRetention,
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


def events(n: int = 900, keys: int = 12) -> list[tuple[str, int, int]]:
    """Deterministic events, 40 ms apart, with a 3 s gap every 150 events (sessions close)."""
    out, ts = [], 0
    for i in range(n):
        ts += 3_000 if i % 150 == 149 else 40
        out.append((f"k{(i * 7) % keys}", 1 + i % 5, ts))
    return out


def build_job(out_dir: str, storage_dir: str, *, fail_after: int = 700, retained: int = 2) -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.set_max_parallelism(16)
    env.set_clock(ManualClock())
    env.set_runtime_option("bundle_size", 8)
    env.set_runtime_option("clock_step_ms", 10)
    env.enable_checkpointing(30, CheckpointingMode.EXACTLY_ONCE)
    config = env.get_checkpoint_config()
    config.set_checkpoint_storage_dir(storage_dir)
    config.set_num_retained_checkpoints(retained)
    config.set_externalized_checkpoint_retention(ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION)
    env.set_runtime_option("fault_plan", FaultPlan([Fault(FaultKind.RECORDS, fail_after)]))
    env.set_runtime_option("restart_strategy", RestartStrategies.fixed_delay_restart(0, 0))
    stream = env.from_source(CollectionSource(events(), num_splits=2)).assign_timestamps_and_watermarks(
        WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(_timestamp))
    keyed = stream.key_by(_key)
    sums = keyed.window(TumblingEventTimeWindows.of(Time.seconds(1))).allowed_lateness(Time.milliseconds(200)) \
        .sum(1).uid("tumbling")
    sessions = stream.key_by(_key).window(EventTimeSessionWindows.with_gap(Time.seconds(1))).sum(1).uid("session")
    sums.sink_to(FileSink(out_dir + "/tumbling", "jsonl"))
    sessions.sink_to(FileSink(out_dir + "/sessions", "jsonl"))
    return env


def _timestamp(event: Any, _record_ts: Any) -> int:
    return event[2]


def _key(event: Any) -> str:
    return event[0]
