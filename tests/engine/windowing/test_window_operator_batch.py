"""``process_batch`` gives exactly the output of processing the same records one by one, and the
operator variant ``create_window_operator`` picks gives exactly what the general WindowOperator gives.

Random keyed input with out-of-order and late timestamps is cut into random batches with a
watermark (and a processing-time advance) after each; the same run is fed once through
``process_element`` and once through ``process_batch``.  Output order, side outputs, metrics,
remaining state and timers must all be identical — float sums included, so the fast path must add
in arrival order.
"""

from __future__ import annotations

import random
from typing import Any, Callable

import pytest

from engine.api.functions import AggregateFunction, OutputTag
from engine.elements import MAX_WATERMARK, StreamRecord
from engine.testing.operator_harness import KeyedOneInputStreamOperatorTestHarness
from engine.windowing.aggregations import builtin_aggregation
from engine.windowing.assigners import (
    EventTimeSessionWindows,
    GlobalWindows,
    SlidingEventTimeWindows,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
)
from engine.windowing.evictors import CountEvictor
from engine.windowing.triggers import CountTrigger
from engine.windowing.slicing import create_window_operator
from engine.windowing.window_operator import WindowOperator

LATE = OutputTag("late")


class MeanAndCount(AggregateFunction):
    """Not commutative in its float rounding: a fold order change would show."""

    def create_accumulator(self):
        return (0.0, 0)

    def add(self, value, accumulator):
        return (accumulator[0] + value[1], accumulator[1] + 1)

    def get_result(self, accumulator):
        return (accumulator[0] / accumulator[1], accumulator[1])

    def merge(self, acc_a, acc_b):
        return (acc_a[0] + acc_b[0], acc_a[1] + acc_b[1])


def concat(a, b):
    """A reduce whose result depends on the order of the elements."""
    return (a[0], f"{a[1]}|{b[1]}")


#: each builds the operator ``create_window_operator`` picks for it, or, given ``build=WindowOperator``, the
#: general one with the same configuration
CONFIGS: dict[str, Callable[..., WindowOperator]] = {
    "tumbling int sum, lateness, late tag": lambda build=create_window_operator: build(
        TumblingEventTimeWindows.of(10), incremental_aggregate=builtin_aggregation("sum", 1),
        allowed_lateness_ms=7, late_data_output_tag=LATE, key_selector=lambda v: v[0]),
    "tumbling float sum, no lateness": lambda build=create_window_operator: build(
        TumblingEventTimeWindows.of(10), incremental_aggregate=builtin_aggregation("sum", 1),
        key_selector=lambda v: v[0]),
    "sliding float sum, lateness": lambda build=create_window_operator: build(
        SlidingEventTimeWindows.of(15, 5), incremental_aggregate=builtin_aggregation("sum", 1),
        allowed_lateness_ms=4, key_selector=lambda v: v[0]),
    "sliding min": lambda build=create_window_operator: build(
        SlidingEventTimeWindows.of(10, 5), incremental_aggregate=builtin_aggregation("min", 1),
        key_selector=lambda v: v[0]),
    "sliding size not a multiple of the slide, offset, lateness, late tag": lambda build=create_window_operator: build(
        SlidingEventTimeWindows.of(14, 4, 3), incremental_aggregate=builtin_aggregation("sum", 1),
        allowed_lateness_ms=5, late_data_output_tag=LATE, key_selector=lambda v: v[0]),
    "sliding with gaps (size < slide), late tag": lambda build=create_window_operator: build(
        SlidingEventTimeWindows.of(3, 7), incremental_aggregate=builtin_aggregation("max", 1),
        allowed_lateness_ms=2, late_data_output_tag=LATE, key_selector=lambda v: v[0]),
    "sliding order-sensitive reduce, lateness": lambda build=create_window_operator: build(
        SlidingEventTimeWindows.of(20, 5), incremental_aggregate=concat, allowed_lateness_ms=6,
        late_data_output_tag=LATE, key_selector=lambda v: v[0]),
    "tumbling max_by": lambda build=create_window_operator: build(
        TumblingEventTimeWindows.of(8, 3), incremental_aggregate=builtin_aggregation("max_by", 1),
        allowed_lateness_ms=3, key_selector=lambda v: v[0]),
    "tumbling order-sensitive reduce": lambda build=create_window_operator: build(
        TumblingEventTimeWindows.of(10), incremental_aggregate=concat, allowed_lateness_ms=5,
        late_data_output_tag=LATE, key_selector=lambda v: v[0]),
    "tumbling aggregate function": lambda build=create_window_operator: build(
        TumblingEventTimeWindows.of(12), incremental_aggregate=MeanAndCount(), allowed_lateness_ms=6,
        key_selector=lambda v: v[0]),
    "processing-time tumbling sum": lambda build=create_window_operator: build(
        TumblingProcessingTimeWindows.of(10), incremental_aggregate=builtin_aggregation("sum", 1),
        key_selector=lambda v: v[0]),
    "count window with evictor (sliding count window 4 every 2)": lambda build=create_window_operator: build(
        GlobalWindows.create(), trigger=CountTrigger.of(2), evictor=CountEvictor.of(4),
        incremental_aggregate=builtin_aggregation("sum", 1), key_selector=lambda v: v[0]),
    "count trigger, incremental order-sensitive reduce": lambda build=create_window_operator: build(
        GlobalWindows.create(), trigger=CountTrigger.of(3), incremental_aggregate=concat,
        key_selector=lambda v: v[0]),
    # not on the fast path: process_batch must fall back to per-element processing
    "sessions (merging)": lambda build=create_window_operator: build(
        EventTimeSessionWindows.with_gap(4), incremental_aggregate=builtin_aggregation("sum", 1),
        key_selector=lambda v: v[0]),
    "evictor": lambda build=create_window_operator: build(
        TumblingEventTimeWindows.of(10), evictor=CountEvictor.of(2), incremental_aggregate=builtin_aggregation("sum", 1),
        key_selector=lambda v: v[0]),
}


def random_run(seed: int, floats: bool) -> list[tuple[list[StreamRecord], int, int]]:
    """Batches of records, each followed by (watermark, processing time); timestamps jitter behind the watermark."""
    rnd = random.Random(seed)
    keys = [f"k{i}" for i in range(rnd.randint(1, 6))] + [7, ("t", 1)]
    run = []
    watermark = -5
    now = 0
    for _ in range(rnd.randint(5, 25)):
        batch = []
        for _ in range(rnd.randint(0, 30)):
            ts = watermark + rnd.randint(-20, 15)
            value = rnd.uniform(-100, 100) if floats else rnd.randint(-50, 50)
            batch.append(StreamRecord((rnd.choice(keys), value), ts))
        watermark += rnd.randint(0, 12)
        now += rnd.randint(0, 12)
        run.append((batch, watermark, now))
    return run


def drive(factory: Callable[[], WindowOperator], run, batched: bool) -> KeyedOneInputStreamOperatorTestHarness:
    h = KeyedOneInputStreamOperatorTestHarness(factory(), max_parallelism=8)
    for batch, watermark, now in run:
        if batched:
            h.process_elements(batch)
        else:
            for record in batch:
                h.process_element(record)
        h.process_watermark(watermark)
        h.set_processing_time(now)
    return h


def observable(h: KeyedOneInputStreamOperatorTestHarness) -> dict[str, Any]:
    return {
        "output": h.get_output(),
        "late": h.side_output(LATE),
        "metrics": dict(h.metrics.counters),
        "state_entries": h.num_keyed_state_entries(),
        "timers": (h.num_event_time_timers(), h.num_processing_time_timers()),
    }


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("seed", range(12))
def test_process_batch_emits_exactly_what_per_element_processing_emits(config: str, seed: int):
    factory = CONFIGS[config]
    run = random_run(seed, floats="float" in config or "aggregate function" in config)
    one_by_one = drive(factory, run, batched=False)
    batched = drive(factory, run, batched=True)
    expected = observable(one_by_one)
    assert observable(batched) == expected
    # and the variant the factory picked gives what the general operator gives
    assert observable(drive(lambda: factory(WindowOperator), run, batched=False)) == expected
    # the comparison is meaningful: something was emitted, and the end of input flushes the same
    one_by_one.process_watermark(MAX_WATERMARK)
    batched.process_watermark(MAX_WATERMARK)
    assert batched.get_output() == one_by_one.get_output()
    assert any(isinstance(e, StreamRecord) for e in one_by_one.get_output())


def test_the_random_runs_exercise_late_refires_and_the_side_output():
    """Guards the test above: the input really contains allowed-late and too-late elements."""
    h = drive(CONFIGS["tumbling int sum, lateness, late tag"], random_run(3, floats=False), batched=True)
    windows_fired = [r.timestamp for r in h.get_output_records()]
    assert len(windows_fired) > len(set(windows_fired))  # some window fired more than once per key or keys share ends
    assert h.side_output(LATE)


def test_a_scalar_stream_summed_at_position_0_falls_back_to_add_and_still_matches():
    factory = lambda build=create_window_operator: build(  # noqa: E731
        TumblingEventTimeWindows.of(10), incremental_aggregate=builtin_aggregation("sum", 0),
        key_selector=lambda v: v % 3)
    run = [([StreamRecord(v, v) for v in range(0, 30)], 29, 0)]
    assert drive(factory, run, batched=True).get_output() == drive(factory, run, batched=False).get_output()


@pytest.mark.parametrize("config", [c for c in CONFIGS if c.startswith("sliding")])
@pytest.mark.parametrize("seed", range(6))
def test_process_batch_restored_midway_emits_what_per_element_processing_emits(config: str, seed: int):
    """The batch path's knowledge of registered timers is not in the snapshot: a restored operator relearns it."""
    factory = CONFIGS[config]
    run = random_run(seed, floats="float" in config)
    expected = drive(factory, run, batched=False)
    half = len(run) // 2
    first = drive(factory, run[:half], batched=True)
    second = KeyedOneInputStreamOperatorTestHarness(factory(), max_parallelism=8)
    second.initialize_state(first.snapshot())
    for batch, watermark, now in run[half:]:
        second.process_elements(batch)
        second.process_watermark(watermark)
        second.set_processing_time(now)
    assert first.get_output() + second.get_output() == expected.get_output()
    assert first.side_output(LATE) + second.side_output(LATE) == expected.side_output(LATE)
    assert (second.num_event_time_timers(), second.num_keyed_state_entries()) == (
        expected.num_event_time_timers(), expected.num_keyed_state_entries())
