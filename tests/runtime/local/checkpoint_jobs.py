"""The keyed windowed job the checkpointing tests crash and restore (issue 3 "Done means").

Tumbling and session windows over keyed events from three splits, each result
written exactly-once to a FileSink.  Time is a ManualClock advanced a fixed step
per scheduling round (``clock_step_ms``), so checkpoint intervals are counted
in rounds and every run is reproducible.
"""

from __future__ import annotations

import random
from typing import Any

from engine import (
    CheckpointingMode,
    EventTimeSessionWindows,
    ManualClock,
    StreamExecutionEnvironment,
    Time,
    TumblingEventTimeWindows,
    WatermarkStrategy,
)
from engine.api.restart import RestartStrategies
from engine.io.collection_source import CollectionSource
from engine.io.file_sink import FileSink, read_committed


def make_events(seed: int = 7, n: int = 1500, keys: int = 23) -> list[tuple[str, int, int]]:
    rng = random.Random(seed)
    ts, out = 0, []
    for i in range(n):
        ts += rng.choice((50, 100, 150, 4_000 if i % 97 == 0 else 60))  # gaps close sessions
        out.append((f"k{rng.randrange(keys)}", rng.randrange(1, 10), ts))
    return out


def build_job(out_dir: str, events: list, *, parallelism: int = 3, mode: CheckpointingMode | None = None,
              unaligned: bool = False, interval_ms: int = 50, fault_plan: Any = None, restarts: int = 0,
              storage_dir: str | None = None, retained: int = 1, bundle_size: int = 16,
              sink_mode: str = "exactly_once", task_budget: int | None = None) -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism)
    env.set_clock(ManualClock())
    env.set_runtime_option("bundle_size", bundle_size)
    env.set_runtime_option("channel_capacity", 4)
    env.set_runtime_option("clock_step_ms", 10)
    if task_budget is not None:
        env.set_runtime_option("task_budget", task_budget)  # consumers lag: channels hold in-flight data
    if mode is not None:
        env.enable_checkpointing(interval_ms, mode)
        config = env.get_checkpoint_config()
        if unaligned:
            config.enable_unaligned_checkpoints()
        if storage_dir is not None:
            config.set_checkpoint_storage_dir(storage_dir)
        config.set_num_retained_checkpoints(retained)
    if fault_plan is not None:
        env.set_runtime_option("fault_plan", fault_plan)
    env.set_runtime_option("restart_strategy", RestartStrategies.fixed_delay_restart(restarts, 0))
    stream = env.from_source(CollectionSource(events, num_splits=3)).assign_timestamps_and_watermarks(
        WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, ts: e[2]))
    keyed = stream.key_by(lambda e: e[0])
    tumbling = keyed.window(TumblingEventTimeWindows.of(Time.seconds(2))).sum(1).map(lambda e: ["T", e[0], e[1], e[2]])
    sessions = (stream.key_by(lambda e: e[0]).window(EventTimeSessionWindows.with_gap(Time.seconds(1)))
                .reduce(lambda a, b: (a[0], a[1] + b[1], max(a[2], b[2]))).map(lambda e: ["S", e[0], e[1], e[2]]))
    tumbling.sink_to(FileSink(out_dir + "/tumbling", "jsonl", mode=sink_mode))
    sessions.sink_to(FileSink(out_dir + "/sessions", "jsonl", mode=sink_mode))
    return env


def committed(out_dir: str) -> list:
    return sorted(read_committed(out_dir + "/tumbling") + read_committed(out_dir + "/sessions"))
