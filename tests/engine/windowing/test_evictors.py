"""Built-in evictors (before/after variants) and seed 000's sliding count window at the trigger+evictor level."""

from __future__ import annotations

import pytest

from engine.api.time import Time
from engine.elements import StreamRecord
from engine.errors import JobDefinitionError
from engine.testing import TriggerTestHarness
from engine.windowing.evictors import (
    CountEvictor,
    DeltaEvictor,
    EvictorContext,
    TimeEvictor,
    TimestampedValue,
)
from engine.windowing.triggers import CountTrigger, DeltaFunction, TriggerResult
from engine.windowing.windows import GLOBAL_WINDOW, TimeWindow


class Ctx(EvictorContext):
    def get_current_processing_time(self) -> int:
        return 0

    def get_current_watermark(self) -> int:
        return 0


CTX = Ctx()
W = TimeWindow(0, 100)


def values(elements):
    return [e.value for e in elements]


def run(evictor, elements, phase):
    elements = list(elements)
    getattr(evictor, f"evict_{phase}")(elements, len(elements), W, CTX)
    return elements


def timestamped(*pairs):
    return [TimestampedValue(v, ts) for v, ts in pairs]


def test_count_evictor_keeps_the_last_max_count_elements_before_the_function():
    elements = timestamped(*[(i, i) for i in range(6)])
    assert values(run(CountEvictor.of(4), elements, "before")) == [2, 3, 4, 5]
    assert values(run(CountEvictor.of(4), elements, "after")) == list(range(6))  # before-variant does nothing after
    assert values(run(CountEvictor.of(10), elements, "before")) == list(range(6))
    assert values(run(CountEvictor.of(0), elements, "before")) == []


def test_count_evictor_after_variant_evicts_only_after_the_function():
    elements = timestamped(*[(i, i) for i in range(6)])
    evictor = CountEvictor.of(2, do_evict_after=True)
    assert values(run(evictor, elements, "before")) == list(range(6))
    assert values(run(evictor, elements, "after")) == [4, 5]


def test_count_evictor_validates_max_count():
    with pytest.raises(JobDefinitionError) as info:
        CountEvictor.of(-1)
    assert info.value.parameter == "max_count"


def test_time_evictor_keeps_elements_newer_than_max_timestamp_minus_window_size():
    #  ts: 1  4  5  9  7      max 9, size 4 -> cutoff 5: keep ts > 5
    elements = timestamped(("a", 1), ("b", 4), ("c", 5), ("d", 9), ("e", 7))
    assert values(run(TimeEvictor.of(4), elements, "before")) == ["d", "e"]
    assert values(run(TimeEvictor.of(Time.milliseconds(4), do_evict_after=True), elements, "before")) == list("abcde")
    assert values(run(TimeEvictor.of(4, do_evict_after=True), elements, "after")) == ["d", "e"]
    assert values(run(TimeEvictor.of(100), elements, "before")) == list("abcde")


def test_time_evictor_is_a_no_op_when_elements_lack_timestamps():
    elements = [TimestampedValue("a"), TimestampedValue("b", 100), TimestampedValue("c", 1)]
    assert values(run(TimeEvictor.of(1), elements, "before")) == ["a", "b", "c"]


def test_time_evictor_keeps_later_elements_without_timestamp():
    elements = [TimestampedValue("a", 1), TimestampedValue("b"), TimestampedValue("c", 10)]
    assert values(run(TimeEvictor.of(5), elements, "before")) == ["b", "c"]


def test_time_evictor_validates_window_size():
    with pytest.raises(JobDefinitionError) as info:
        TimeEvictor.of(0)
    assert info.value.parameter == "window_size"


def test_delta_evictor_removes_elements_too_far_from_the_last_one():
    elements = timestamped((1, 0), (8, 0), (5, 0), (9, 0), (7, 0))
    #  last = 7; delta >= 3 is evicted: |1-7|=6 x, |8-7|=1, |5-7|=2, |9-7|=2, 0
    evictor = DeltaEvictor.of(3, lambda a, b: abs(a - b))
    assert values(run(evictor, elements, "before")) == [8, 5, 9, 7]
    assert values(run(evictor, elements, "after")) == [1, 8, 5, 9, 7]
    after = DeltaEvictor.of(2, lambda a, b: abs(a - b), do_evict_after=True)
    assert values(run(after, elements, "after")) == [8, 7]
    assert run(evictor, [], "before") == []


def test_delta_evictor_accepts_a_delta_function_and_validates_threshold():
    class Diff(DeltaFunction):
        def get_delta(self, old, new):
            return abs(old["x"] - new["x"])

    elements = [TimestampedValue({"x": 0}), TimestampedValue({"x": 10})]
    assert values(run(DeltaEvictor.of(5, Diff()), elements, "before")) == [{"x": 10}]
    with pytest.raises(JobDefinitionError):
        DeltaEvictor.of("5", Diff())
    with pytest.raises(JobDefinitionError):
        DeltaEvictor.of(5, "not a function")


def sliding_count_window(elements, size, slide):
    """GlobalWindows + CountTrigger.of(slide) + CountEvictor.of(size), the way the window operator
    combines them (seed 000): on FIRE evict before, sum, evict after, keep what is left."""
    harness = TriggerTestHarness(CountTrigger.of(slide))
    evictor = CountEvictor.of(size)
    contents: list[TimestampedValue] = []
    fires = []
    for position, value in enumerate(elements):
        contents.append(TimestampedValue(value, position))
        result = harness.process_element(StreamRecord(value, position), GLOBAL_WINDOW)
        if result.is_fire():
            evictor.evict_before(contents, len(contents), GLOBAL_WINDOW, CTX)
            fires.append((value, sum(values(contents)), values(contents)))
            evictor.evict_after(contents, len(contents), GLOBAL_WINDOW, CTX)
        assert result in (TriggerResult.CONTINUE, TriggerResult.FIRE)  # no purge: the window is reused
    return fires, values(contents)


def test_seed_000_sliding_count_window_every_2_elements_over_the_last_4_sums_22_on_the_third_fire():
    # Seed 000: "the first fire happens when element 5 enters, the third when element 2 enters, evicting
    # 5 and 2 and summing the remaining 4 elements (22), keeping 2, 4, 9, 7" (listed newest first).
    # Arrival order reconstructed from those constraints: 2, 5, 7, 9, 4, 2.
    fires, kept = sliding_count_window([2, 5, 7, 9, 4, 2], size=4, slide=2)
    assert [f[0] for f in fires] == [5, 9, 2]          # fire points: elements 2, 4 and 6
    assert fires[0][1:] == (7, [2, 5])
    assert fires[1][1:] == (23, [2, 5, 7, 9])
    assert fires[2][1:] == (22, [7, 9, 4, 2])
    assert list(reversed(kept)) == [2, 4, 9, 7]


def test_sliding_count_window_with_a_different_grouping_still_counts_per_element():
    fires, kept = sliding_count_window(list(range(1, 8)), size=3, slide=3)
    assert fires == [(3, 6, [1, 2, 3]), (6, 15, [4, 5, 6])]
    assert kept == [4, 5, 6, 7]
