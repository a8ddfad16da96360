"""Built-in window assigners: window placement, offsets, negative timestamps, validation, session merging."""

from __future__ import annotations

import datetime as dt

import pytest

from engine.api.time import Duration, Time
from engine.errors import JobDefinitionError
from engine.windowing.assigners import (
    DynamicEventTimeSessionWindows,
    DynamicProcessingTimeSessionWindows,
    EventTimeSessionWindows,
    GlobalWindows,
    MergingWindowAssigner,
    ProcessingTimeSessionWindows,
    SessionWindowTimeGapExtractor,
    SlidingEventTimeWindows,
    SlidingProcessingTimeWindows,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
    WindowAssignerContext,
)
from engine.windowing.triggers import EventTimeTrigger, NeverTrigger, ProcessingTimeTrigger
from engine.windowing.windows import GLOBAL_WINDOW, TimeWindow


class FixedClock(WindowAssignerContext):
    def __init__(self, now: int) -> None:
        self.now = now

    def get_current_processing_time(self) -> int:
        return self.now


NO_CLOCK = FixedClock(-999_999)  # event-time assigners must not look at processing time


#  ts:   0 ....... 4999 | 5000 ...... 9999 | 10000
#        [    0,   5000 )[ 5000,    10000 )
@pytest.mark.parametrize(
    ("timestamp", "expected"),
    [(0, TimeWindow(0, 5000)), (4999, TimeWindow(0, 5000)), (5000, TimeWindow(5000, 10000)),
     (-1, TimeWindow(-5000, 0)), (-5000, TimeWindow(-5000, 0)), (-5001, TimeWindow(-10000, -5000))],
)
def test_tumbling_event_time_places_each_timestamp_in_one_window(timestamp, expected):
    assigner = TumblingEventTimeWindows.of(Time.seconds(5))
    assert assigner.assign_windows("x", timestamp, NO_CLOCK) == [expected]


def test_tumbling_offset_shifts_window_boundaries():
    assigner = TumblingEventTimeWindows.of(Time.milliseconds(5000), Time.milliseconds(100))
    assert assigner.assign_windows("x", 100, NO_CLOCK) == [TimeWindow(100, 5100)]
    assert assigner.assign_windows("x", 99, NO_CLOCK) == [TimeWindow(-4900, 100)]
    negative = TumblingEventTimeWindows.of(Duration.of_hours(24), Duration.of_hours(-8))
    day_start = 16 * 3_600_000  # UTC+8 midnight expressed in UTC
    assert negative.assign_windows("x", day_start + 1, NO_CLOCK) == [TimeWindow(day_start, day_start + 86_400_000)]


def test_sizes_accept_time_duration_timedelta_and_int_ms():
    expected = TumblingEventTimeWindows.of(60_000)
    assert TumblingEventTimeWindows.of(Time.minutes(1)) == expected
    assert TumblingEventTimeWindows.of(Duration.of_minutes(1)) == expected
    assert TumblingEventTimeWindows.of(dt.timedelta(minutes=1)) == expected


@pytest.mark.parametrize(
    ("build", "parameter"),
    [
        (lambda: TumblingEventTimeWindows.of(0), "size"),
        (lambda: TumblingEventTimeWindows.of(-5), "size"),
        (lambda: TumblingEventTimeWindows.of(10, 10), "offset"),
        (lambda: TumblingEventTimeWindows.of(10, -10), "offset"),
        (lambda: TumblingProcessingTimeWindows.of(10, 11), "offset"),
        (lambda: SlidingEventTimeWindows.of(10, 0), "slide"),
        (lambda: SlidingEventTimeWindows.of(0, 5), "size"),
        (lambda: SlidingEventTimeWindows.of(10, 5, 5), "offset"),
        (lambda: SlidingProcessingTimeWindows.of(10, -1), "slide"),
        (lambda: EventTimeSessionWindows.with_gap(0), "gap"),
        (lambda: ProcessingTimeSessionWindows.with_gap(Time.seconds(-1)), "gap"),
        (lambda: TumblingEventTimeWindows.of("5s"), "size"),
        (lambda: EventTimeSessionWindows.with_dynamic_gap(42), "session_window_time_gap_extractor"),
    ],
)
def test_invalid_definitions_name_the_parameter(build, parameter):
    with pytest.raises(JobDefinitionError) as info:
        build()
    assert info.value.parameter == parameter


def test_sliding_event_time_assigns_size_over_slide_windows_newest_first():
    assigner = SlidingEventTimeWindows.of(Time.seconds(10), Time.seconds(5))
    assert assigner.assign_windows("x", 7000, NO_CLOCK) == [TimeWindow(5000, 15000), TimeWindow(0, 10000)]
    # seed 000: the first record at 0 goes to [-5, 5) and [0, 10) (in seconds)
    assert assigner.assign_windows("x", 0, NO_CLOCK) == [TimeWindow(0, 10000), TimeWindow(-5000, 5000)]


@pytest.mark.parametrize(("size", "slide"), [(10, 5), (10, 3), (9, 3), (7, 10), (1000, 1)])
@pytest.mark.parametrize("timestamp", [-17, -1, 0, 1, 9, 10, 123])
def test_sliding_windows_are_exactly_those_containing_the_timestamp(size, slide, timestamp):
    windows = SlidingEventTimeWindows.of(size, slide).assign_windows("x", timestamp, NO_CLOCK)
    expected = [TimeWindow(s, s + size) for s in range(timestamp - size - slide, timestamp + 1)
                if s % slide == 0 and s <= timestamp < s + size]
    assert sorted(windows) == sorted(expected)
    assert len(windows) in (size // slide, -(-size // slide))


def test_sliding_with_offset():
    assigner = SlidingEventTimeWindows.of(10, 5, 2)
    assert assigner.assign_windows("x", 3, NO_CLOCK) == [TimeWindow(2, 12), TimeWindow(-3, 7)]


def test_event_time_assigners_refuse_records_without_timestamp_with_a_hint():
    for assigner in (TumblingEventTimeWindows.of(10), SlidingEventTimeWindows.of(10, 5),
                     EventTimeSessionWindows.with_gap(10)):
        with pytest.raises(JobDefinitionError, match="assign_timestamps_and_watermarks"):
            assigner.assign_windows("x", None, NO_CLOCK)


def test_processing_time_assigners_use_the_injected_clock_not_the_timestamp():
    clock = FixedClock(12_345)
    assert TumblingProcessingTimeWindows.of(1000).assign_windows("x", 1, clock) == [TimeWindow(12_000, 13_000)]
    assert TumblingProcessingTimeWindows.of(1000).assign_windows("x", None, clock) == [TimeWindow(12_000, 13_000)]
    assert SlidingProcessingTimeWindows.of(1000, 500).assign_windows("x", None, clock) == [
        TimeWindow(12_000, 13_000), TimeWindow(11_500, 12_500)]
    assert ProcessingTimeSessionWindows.with_gap(100).assign_windows("x", None, clock) == [TimeWindow(12_345, 12_445)]


def test_default_triggers_and_time_domains():
    assert isinstance(TumblingEventTimeWindows.of(1).get_default_trigger(), EventTimeTrigger)
    assert isinstance(SlidingEventTimeWindows.of(2, 1).get_default_trigger(), EventTimeTrigger)
    assert isinstance(EventTimeSessionWindows.with_gap(1).get_default_trigger(), EventTimeTrigger)
    assert isinstance(TumblingProcessingTimeWindows.of(1).get_default_trigger(), ProcessingTimeTrigger)
    assert isinstance(SlidingProcessingTimeWindows.of(2, 1).get_default_trigger(), ProcessingTimeTrigger)
    assert isinstance(ProcessingTimeSessionWindows.with_gap(1).get_default_trigger(), ProcessingTimeTrigger)
    assert isinstance(GlobalWindows.create().get_default_trigger(), NeverTrigger)
    assert [a.is_event_time() for a in (TumblingEventTimeWindows.of(1), EventTimeSessionWindows.with_gap(1),
                                        TumblingProcessingTimeWindows.of(1), GlobalWindows.create())] == [
        True, True, False, False]


def test_global_windows_put_everything_in_the_global_window():
    assert GlobalWindows.create().assign_windows("x", None, NO_CLOCK) == [GLOBAL_WINDOW]
    assert GlobalWindows.create().assign_windows("y", 5, NO_CLOCK) == [GLOBAL_WINDOW]


def test_session_assigner_opens_a_gap_long_window_per_element():
    assigner = EventTimeSessionWindows.with_gap(Time.seconds(30))
    assert isinstance(assigner, MergingWindowAssigner)
    assert assigner.assign_windows("x", 1000, NO_CLOCK) == [TimeWindow(1000, 31_000)]


def merges_of(assigner, windows):
    calls = []
    assigner.merge_windows(windows, lambda to_merge, result: calls.append((sorted(to_merge), result)))
    return calls


def test_session_merging_merges_intersecting_and_touching_windows_only():
    #  [0,10) [5,15)        -> [0,15)
    #  [15,20) touches [5,15) -> merged too (Flink's intersects is inclusive)
    #  [30,40) [35,45) [44,50) -> [30,50)
    #  [60,70) alone -> no callback
    windows = [TimeWindow(35, 45), TimeWindow(0, 10), TimeWindow(60, 70), TimeWindow(15, 20),
               TimeWindow(5, 15), TimeWindow(44, 50), TimeWindow(30, 40)]
    assert merges_of(EventTimeSessionWindows.with_gap(10), windows) == [
        ([TimeWindow(0, 10), TimeWindow(5, 15), TimeWindow(15, 20)], TimeWindow(0, 20)),
        ([TimeWindow(30, 40), TimeWindow(35, 45), TimeWindow(44, 50)], TimeWindow(30, 50)),
    ]


def test_session_merging_of_disjoint_windows_calls_nothing():
    assert merges_of(ProcessingTimeSessionWindows.with_gap(5), [TimeWindow(0, 5), TimeWindow(6, 11)]) == []


def test_session_merging_accepts_a_merge_callback_object():
    class Callback(MergingWindowAssigner.MergeCallback):
        def __init__(self):
            self.calls = []

        def merge(self, to_be_merged, merge_result):
            self.calls.append(merge_result)

    callback = Callback()
    EventTimeSessionWindows.with_gap(10).merge_windows([TimeWindow(0, 10), TimeWindow(9, 19)], callback)
    assert callback.calls == [TimeWindow(0, 19)]


def test_dynamic_gap_from_a_callable_or_an_extractor():
    by_callable = EventTimeSessionWindows.with_dynamic_gap(lambda e: e["gap"])
    assert by_callable.assign_windows({"gap": 7}, 100, NO_CLOCK) == [TimeWindow(100, 107)]

    class Extractor(SessionWindowTimeGapExtractor):
        def extract(self, element):
            return Time.seconds(element)

    by_extractor = ProcessingTimeSessionWindows.with_dynamic_gap(Extractor())
    assert by_extractor.assign_windows(2, None, FixedClock(10)) == [TimeWindow(10, 2010)]


@pytest.mark.parametrize("fixed, dynamic, now", [
    (EventTimeSessionWindows, DynamicEventTimeSessionWindows, None),
    (ProcessingTimeSessionWindows, DynamicProcessingTimeSessionWindows, 100),
])
def test_dynamic_session_assigners_are_classes_of_their_own_as_in_pyflink(fixed, dynamic, now):
    """PyFlink 2.3's ``X.with_dynamic_gap``, ``DynamicX.with_dynamic_gap`` and ``DynamicX(extractor)`` all build a
    ``DynamicX``; here it is also an ``X`` (a subclass), so code checking for session windows still finds it."""
    built = [dynamic(lambda e: 5), dynamic.with_dynamic_gap(lambda e: 5), fixed.with_dynamic_gap(lambda e: 5)]
    for assigner in built:
        assert type(assigner) is dynamic and isinstance(assigner, fixed)
        assert repr(assigner).startswith(f"{dynamic.__name__}(") and str(assigner) == f"{dynamic.__name__}(dynamic)"
        assert assigner.is_event_time() is (now is None)
        assert assigner.assign_windows("x", 100, FixedClock(now) if now is not None else NO_CLOCK) == [
            TimeWindow(100, 105)]
    assert type(fixed.with_gap(5)) is fixed and str(fixed.with_gap(5)) == f"{fixed.__name__}(5)"
    with pytest.raises(JobDefinitionError) as err:
        dynamic(42)
    assert err.value.parameter == "session_window_time_gap_extractor"


def test_dynamic_gap_that_is_not_positive_fails_with_a_clear_error():
    assigner = EventTimeSessionWindows.with_dynamic_gap(lambda e: 0)
    with pytest.raises(JobDefinitionError, match="0 < gap"):
        assigner.assign_windows("x", 5, NO_CLOCK)
