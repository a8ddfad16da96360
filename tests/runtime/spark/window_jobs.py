"""Randomly generated window jobs, built the same way for both runtimes (importable by Spark workers).

One job carries many window operators on the same keyed stream — every assigner family, the
built-in triggers, evictors, and each function kind (sum/min/max/min_by/max_by, reduce,
aggregate, aggregate + process, process, apply), a window after a window, a map after a window,
window_all and a union — so one Spark run (seconds on this machine) covers them all.

Each key lives in exactly one split, so per-key arrival order is the split's order on both
runtimes, and results may be compared as sorted lists.
"""

from __future__ import annotations

import random
from typing import Any

from engine.api.functions import AggregateFunction, OutputTag, ProcessWindowFunction
from engine.api.environment import StreamExecutionEnvironment
from engine.api.time import Duration, Time
from engine.io.collection_source import CollectionSource
from engine.watermarks.strategy import WatermarkStrategy
from engine.windowing.assigners import (
    EventTimeSessionWindows,
    GlobalWindows,
    SlidingEventTimeWindows,
    TumblingEventTimeWindows,
)
from engine.windowing.evictors import CountEvictor, TimeEvictor
from engine.windowing.triggers import ContinuousEventTimeTrigger, CountTrigger, PurgingTrigger


def generate_events(seed: int, n_splits: int = 3, per_split: int = 40, keys_per_split: int = 3,
                    disorder_ms: int = 0) -> list[list[tuple]]:
    """Per split, events ``(key, timestamp_ms, amount)``; ``disorder_ms`` > 0 makes them out of order."""
    rng = random.Random(seed)
    splits = []
    for s in range(n_splits):
        t = rng.randrange(0, 3000)
        events = []
        for _ in range(per_split):
            t += rng.randrange(0, 2500)
            ts = max(0, t - (rng.randrange(0, disorder_ms) if disorder_ms and rng.random() < 0.3 else 0))
            events.append((f"s{s}k{rng.randrange(keys_per_split)}", ts, rng.randrange(1, 100)))
        splits.append(events)
    return splits


class SplitCollection(CollectionSource):
    """A collection source whose splits are given (one list per split), so keys stay in their split."""

    def __init__(self, splits: list[list[Any]], prefix: str) -> None:
        super().__init__([e for split in splits for e in split], num_splits=len(splits))
        self._split_lists = [tuple(split) for split in splits]
        self._prefix = prefix

    def discover_splits(self):
        from engine.io.source import SourceSplit

        return [SourceSplit(f"{self._prefix}-{i}", i) for i in range(len(self._split_lists))]

    def chunk(self, split):
        return self._split_lists[split.index]


class Average(AggregateFunction):
    def create_accumulator(self):
        return (0, 0)

    def add(self, value, accumulator):
        return (accumulator[0] + value[2], accumulator[1] + 1)

    def get_result(self, accumulator):
        return (accumulator[0], accumulator[1])

    def merge(self, a, b):
        return (a[0] + b[0], a[1] + b[1])


class Describe(ProcessWindowFunction):
    """Emits key, window bounds and the sorted amounts: order-free, so any fold order must agree."""

    def process(self, key, context, elements):
        w = context.window()
        bounds = (w.start, w.end) if hasattr(w, "start") else ("global",)
        yield (key, *bounds, tuple(sorted(e[2] for e in elements)))


class WithWindow(ProcessWindowFunction):
    def process(self, key, context, elements):
        w = context.window()
        for result in elements:
            yield (key, w.start, w.end, result)


def _by_key(e):
    return e[0]


def _timestamp(e, ts):
    return e[1]


def _add(a, b):
    return (a[0], max(a[1], b[1]), a[2] + b[2])


def build_job(env: StreamExecutionEnvironment, splits: list[list[tuple]], *, out_of_order: bool) -> dict[str, Any]:
    """The streams to collect, by name; ``out_of_order`` adds late data and cadence-dependent triggers."""
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(2)).with_timestamp_assigner(_timestamp)
    half = len(splits) // 2 or 1
    first = env.from_source(SplitCollection(splits[:half], "a"), strategy, "A")
    second = env.from_source(SplitCollection(splits[half:], "b"), strategy, "B")
    events = first.union(second).map(lambda e: (e[0], e[1], e[2]))
    keyed = events.key_by(_by_key)
    late = OutputTag("late")
    tumbling = keyed.window(TumblingEventTimeWindows.of(Time.seconds(10)))
    streams: dict[str, Any] = {
        "tumbling_sum": tumbling.sum(2),
        "tumbling_min_by": keyed.window(TumblingEventTimeWindows.of(Time.seconds(10))).min_by(2),
        "sliding_reduce": keyed.window(SlidingEventTimeWindows.of(Time.seconds(20), Time.seconds(5))).reduce(
            _add, WithWindow()),
        "sliding_max": keyed.window(SlidingEventTimeWindows.of(Time.seconds(15), Time.seconds(5))).max(2),
        "session_process": keyed.window(EventTimeSessionWindows.with_gap(Time.seconds(3))).process(Describe()),
        "session_aggregate": keyed.window(EventTimeSessionWindows.with_gap(Time.seconds(4))).aggregate(Average()),
        "count_trigger": keyed.window(TumblingEventTimeWindows.of(Time.seconds(30))).trigger(
            CountTrigger.of(3)).aggregate(Average()),
        "global_purging_count": keyed.window(GlobalWindows.create()).trigger(
            PurgingTrigger.of(CountTrigger.of(4))).reduce(_add),
        "count_evictor": keyed.window(TumblingEventTimeWindows.of(Time.seconds(20))).evictor(
            CountEvictor.of(2)).process(Describe()),
        "time_evictor": keyed.window(TumblingEventTimeWindows.of(Time.seconds(20))).evictor(
            TimeEvictor.of(Time.seconds(5))).sum(2),
        "count_window": keyed.count_window(3).reduce(_add),
        "apply": keyed.window(TumblingEventTimeWindows.of(Time.seconds(10))).apply(
            lambda key, window, inputs: [(key, window.start, len(list(inputs)))]),
        "window_all": events.window_all(TumblingEventTimeWindows.of(Time.seconds(10))).max(2).map(lambda e: e[2]),
    }
    # a window after a window, and a map after it
    streams["window_of_windows"] = streams["tumbling_sum"].key_by(_by_key).window(
        TumblingEventTimeWindows.of(Time.seconds(30))).sum(2).map(lambda e: (e[0], e[2]))
    if out_of_order:
        lateness = keyed.window(TumblingEventTimeWindows.of(Time.seconds(5))).allowed_lateness(
            Time.seconds(2)).side_output_late_data(late).sum(2)
        streams["late_allowed_sum"] = lateness
        streams["late_side_output"] = lateness.get_side_output(late)
        streams["continuous"] = keyed.window(TumblingEventTimeWindows.of(Time.seconds(30))).trigger(
            ContinuousEventTimeTrigger.of(Time.seconds(10))).sum(2)
    return streams


def run_job(runtime: str, splits: list[list[tuple]], *, out_of_order: bool, parallelism: int = 2,
            epoch_records: int | None = None) -> tuple[dict[str, list], Any]:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime(runtime)
    env.set_parallelism(parallelism)
    env.set_max_parallelism(16)
    if epoch_records is not None:
        env.set_runtime_option("epoch_records", epoch_records)
    streams = build_job(env, splits, out_of_order=out_of_order)
    collected, result = env.execute_and_collect_streams(streams)
    return {name: sorted(values, key=repr) for name, values in collected.items()}, result


def checkpointed_spark_env(storage: str, epoch_records: int, parallelism: int = 2) -> StreamExecutionEnvironment:
    """A Spark-runtime environment with epochs of ``epoch_records`` per split, checkpointing every epoch into
    ``storage`` (a ``file://`` or ``s3://`` folder)."""
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime("spark")
    env.set_parallelism(parallelism)
    env.set_runtime_option("epoch_records", epoch_records)
    env.enable_checkpointing(10)
    env.get_checkpoint_config().set_checkpoint_storage_dir(storage)
    return env
