"""A window size, slide or gap that is zero or negative is refused at build time, naming the assigner, the
parameter and the value (new-user trial: ``size must be greater than 0 ms`` did not say which window, and an
assigner built directly, ``TumblingEventTimeWindows(-5)``, was accepted and failed on the first record)."""

from __future__ import annotations

import pytest

from engine import (
    EventTimeSessionWindows,
    ProcessingTimeSessionWindows,
    SlidingEventTimeWindows,
    SlidingProcessingTimeWindows,
    StreamExecutionEnvironment,
    Time,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
)
from engine.errors import JobDefinitionError

CASES = {
    "tumbling of -5 ms": (lambda: TumblingEventTimeWindows.of(-5), "TumblingEventTimeWindows", "size", -5),
    "tumbling of -5 s": (lambda: TumblingEventTimeWindows.of(Time.seconds(-5)), "TumblingEventTimeWindows", "size",
                         Time.seconds(-5)),
    "tumbling built directly": (lambda: TumblingEventTimeWindows(-5), "TumblingEventTimeWindows", "size_ms", -5),
    "tumbling processing time of 0": (lambda: TumblingProcessingTimeWindows.of(0), "TumblingProcessingTimeWindows",
                                      "size", 0),
    "sliding with a zero slide": (lambda: SlidingEventTimeWindows.of(Time.seconds(10), Time.seconds(0)),
                                  "SlidingEventTimeWindows", "slide", Time.seconds(0)),
    "sliding with a negative size": (lambda: SlidingEventTimeWindows.of(-10, 5), "SlidingEventTimeWindows", "size",
                                     -10),
    "sliding built directly": (lambda: SlidingEventTimeWindows(10_000, 0), "SlidingEventTimeWindows", "slide_ms", 0),
    "sliding processing time": (lambda: SlidingProcessingTimeWindows.of(5, -1), "SlidingProcessingTimeWindows",
                                "slide", -1),
    "session gap of 0": (lambda: EventTimeSessionWindows.with_gap(Time.seconds(0)), "EventTimeSessionWindows", "gap",
                         Time.seconds(0)),
    "session built directly": (lambda: EventTimeSessionWindows(0), "EventTimeSessionWindows", "gap_ms", 0),
    "processing-time session": (lambda: ProcessingTimeSessionWindows.with_gap(-1), "ProcessingTimeSessionWindows",
                                "gap", -1),
}


@pytest.mark.parametrize("case", CASES)
def test_a_size_slide_or_gap_at_or_below_zero_is_refused_naming_the_assigner_the_parameter_and_the_value(case):
    build, assigner, parameter, value = CASES[case]
    with pytest.raises(JobDefinitionError) as refused:
        build()
    error = refused.value
    assert (error.parameter, error.value) == (parameter, value)
    message = str(error)
    assert assigner in message and f"`{parameter}`" in message and repr(value) in message, message
    assert "greater than 0 ms" in message


def test_time_window_and_count_window_name_what_they_build():
    keyed = StreamExecutionEnvironment.get_execution_environment().from_collection([("a", 1)]).key_by(lambda e: e[0])
    with pytest.raises(JobDefinitionError, match=r"`slide` must be greater than 0 ms in SlidingEventTimeWindows"):
        keyed.time_window(Time.seconds(10), Time.seconds(-1))
    with pytest.raises(JobDefinitionError, match=r"`size` must be an int >= 1 \(a number of elements\) in "
                                                 r"count_window\(size, slide\); got 0"):
        keyed.count_window(0)


def test_valid_assigners_still_build():
    assert TumblingEventTimeWindows.of(Time.seconds(5)).size_ms == 5_000
    assert SlidingEventTimeWindows.of(Time.seconds(10), Time.seconds(20)).slide_ms == 20_000  # Flink allows gaps
    assert EventTimeSessionWindows.with_dynamic_gap(lambda e: 5).gap_ms is None
    assert ProcessingTimeSessionWindows.with_dynamic_gap(lambda e: 5).gap_ms is None
