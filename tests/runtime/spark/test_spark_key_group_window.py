"""The shared WindowOperator, run once per key group inside Spark tasks, sums one epoch exactly as a
plain-Python tumbling-window sum does (first end-to-end of the Spark runtime; seed 000's flow)."""

from __future__ import annotations

from collections import defaultdict

from engine.api.time import Time
from engine.elements import MAX_WATERMARK
from engine.io.generator_source import GeneratorSource
from engine.runtime.spark.epochs import SplitSlice, partition_by_subtask, read_epoch, with_key_groups
from engine.runtime.spark.key_group_window import run_window_epoch
from engine.state import codec
from engine.windowing.aggregations import builtin_aggregation
from engine.windowing.assigners import TumblingEventTimeWindows
from engine.windowing.slicing import create_window_operator
from engine.windowing.window_operator import WindowOperator

SIZE_MS = 10_000
MAX_PARALLELISM = 8
PARALLELISM = 2


def _tumbling_sum() -> WindowOperator:
    return create_window_operator(
        TumblingEventTimeWindows.of(Time.seconds(10)),
        key_selector=lambda v: v["user_id"],
        incremental_aggregate=builtin_aggregation("sum", "qty"),
    )


def test_one_epoch_of_a_tumbling_sum_equals_the_python_reference(spark):
    source = GeneratorSource(num_splits=2, events_per_split=300, num_keys=12, events_per_second=5,
                             out_of_orderness_ms=3_000, seed=11)
    slices = [SplitSlice(s, 0, 300) for s in source.discover_splits()]
    epoch = with_key_groups(read_epoch(spark, source, slices, key_field="user_id"), MAX_PARALLELISM)
    placed = partition_by_subtask(spark, epoch, PARALLELISM, MAX_PARALLELISM)
    rows = run_window_epoch(placed, _tumbling_sum, operator_id="window-1", parallelism=PARALLELISM,
                            max_parallelism=MAX_PARALLELISM, timestamp_field="ts",
                            watermark_after_epoch=MAX_WATERMARK).collect()
    got = sorted((codec.decode(r.value)["user_id"], r.timestamp, codec.decode(r.value)["qty"]) for r in rows)

    expected: dict[tuple[str, int], int] = defaultdict(int)
    for split in source.discover_splits():
        for v in source.create_reader(split, 0).read(300).values:
            window_start = v["ts"] - v["ts"] % SIZE_MS
            expected[(v["user_id"], window_start + SIZE_MS - 1)] += v["qty"]
    assert got == sorted((user, ts, qty) for (user, ts), qty in expected.items())
    assert len({ts for _, ts, _ in got}) > 5  # several windows, not one
