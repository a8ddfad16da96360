"""ContinuousProcessingTimeTrigger on an event-time window fires periodically in processing time (issue 19).

The trigger capped its next fire time at the window's ``max_timestamp()``.  On an event-time window that is an
event time, long behind the processing time: the capped timer was due at once, and firing it registered the
same time again, so the operator fired the window without end (Flink's FLINK-35069).  The cap only holds while
the window's end is still ahead in processing time (a processing-time window); past it the trigger fires every
``interval``.  The window's end still purges it through the window's event-time cleanup timer.
"""

from __future__ import annotations

import pytest

from engine.elements import MAX_WATERMARK, StreamRecord
from engine.testing.operator_harness import KeyedOneInputStreamOperatorTestHarness
from engine.testing.trigger_harness import TriggerTestHarness
from engine.windowing.assigners import TumblingEventTimeWindows
from engine.windowing.triggers import ContinuousProcessingTimeTrigger, TriggerResult
from engine.windowing.window_operator import WindowOperator
from engine.windowing.windows import TimeWindow

FIRE = TriggerResult.FIRE


def test_past_the_windows_end_the_trigger_fires_every_interval_of_processing_time():
    window = TimeWindow(0, 60_000)  # an event-time window; processing time is far beyond its end
    harness = TriggerTestHarness(ContinuousProcessingTimeTrigger.of(1_000), processing_time=1_000_500)
    assert harness.process_element(StreamRecord("a", 5), window) is TriggerResult.CONTINUE
    assert harness.num_processing_time_timers() == 1
    assert harness.advance_processing_time(1_000_999) == []
    assert harness.advance_processing_time(1_003_000) == [(window, FIRE)] * 3  # 1 001 000, 1 002 000, 1 003 000
    assert harness.num_processing_time_timers() == 1 and harness.num_state_entries() == 1
    harness.clear_trigger_state(window)
    assert harness.num_processing_time_timers() == 0 and harness.num_state_entries() == 0


def test_the_timer_at_the_windows_end_does_not_register_itself_again():
    window = TimeWindow(0, 25)
    harness = TriggerTestHarness(ContinuousProcessingTimeTrigger.of(10), processing_time=3)
    harness.process_element(StreamRecord("a"), window)
    assert harness.advance_processing_time(24) == [(window, FIRE)] * 3  # 10, 20 and the end 24
    assert harness.advance_processing_time(33) == []
    assert harness.advance_processing_time(34) == [(window, FIRE)]  # an interval after the end, not 24 again


def _sum_pairs(a, b):
    return (a[0], a[1] + b[1])


@pytest.mark.timeout(60)
def test_an_event_time_window_fires_in_processing_time_and_its_end_purges_it():
    h = KeyedOneInputStreamOperatorTestHarness(
        WindowOperator(TumblingEventTimeWindows.of(60_000), trigger=ContinuousProcessingTimeTrigger.of(1_000),
                       key_selector=lambda e: e[0], incremental_aggregate=_sum_pairs),
        initial_processing_time_ms=1_000_500)
    h.process_element(("a", 1), 1_000)
    h.process_element(("a", 2), 2_000)
    h.set_processing_time(1_001_000)
    assert h.extract_output_values() == [("a", 3)]
    h.process_element(("a", 4), 3_000)
    h.set_processing_time(1_002_500)
    assert h.extract_output_values() == [("a", 3), ("a", 7)]
    h.process_element(("a", 8), 4_000)
    h.process_watermark(MAX_WATERMARK)  # the end of input: the cleanup purges, the trigger does not fire
    assert h.extract_output_values() == [("a", 3), ("a", 7)]
    assert h.num_processing_time_timers() == 0 and h.num_event_time_timers() == 0
    assert h.num_keyed_state_entries() == 0
