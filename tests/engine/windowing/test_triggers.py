"""Built-in triggers driven through the TriggerTestHarness: results, timers, state, merging, clear()."""

from __future__ import annotations

import pytest

from engine.elements import MAX_WATERMARK, StreamRecord
from engine.errors import JobDefinitionError
from engine.testing import TriggerTestHarness
from engine.windowing.triggers import (
    ContinuousEventTimeTrigger,
    ContinuousProcessingTimeTrigger,
    CountTrigger,
    DeltaFunction,
    DeltaTrigger,
    EndOfStreamTrigger,
    EventTimeTrigger,
    NeverTrigger,
    ProcessingTimeTrigger,
    PurgingTrigger,
    TriggerResult,
)
from engine.windowing.windows import GLOBAL_WINDOW, TimeWindow

CONTINUE, FIRE, PURGE, FIRE_AND_PURGE = (
    TriggerResult.CONTINUE, TriggerResult.FIRE, TriggerResult.PURGE, TriggerResult.FIRE_AND_PURGE)
W1, W2 = TimeWindow(0, 2), TimeWindow(2, 4)


def test_trigger_result_flags():
    assert [(r.is_fire(), r.is_purge()) for r in (CONTINUE, FIRE, PURGE, FIRE_AND_PURGE)] == [
        (False, False), (True, False), (False, True), (True, True)]


# ---- EventTimeTrigger -------------------------------------------------------------------------

def test_event_time_trigger_registers_one_timer_per_window_and_fires_at_max_timestamp():
    harness = TriggerTestHarness(EventTimeTrigger.create())
    assert harness.process_element(StreamRecord(1, 0), W1) is CONTINUE
    assert harness.process_element(StreamRecord(1, 1), W1) is CONTINUE
    assert harness.process_element(StreamRecord(1, 2), W2) is CONTINUE
    assert harness.num_state_entries() == 0
    assert harness.num_event_time_timers() == 2
    assert harness.num_event_time_timers(W1) == 1
    assert harness.advance_watermark(0) == []
    assert harness.advance_watermark(1) == [(W1, FIRE)]
    assert harness.num_event_time_timers() == 1
    assert harness.advance_watermark(10) == [(W2, FIRE)]
    assert harness.num_event_time_timers() == 0


def test_event_time_trigger_fires_late_elements_immediately_without_a_timer():
    harness = TriggerTestHarness(EventTimeTrigger.create())
    harness.advance_watermark(5)
    assert harness.process_element(StreamRecord(1, 1), W1) is FIRE
    assert harness.num_event_time_timers() == 0


def test_event_time_trigger_clear_removes_its_timer():
    harness = TriggerTestHarness(EventTimeTrigger.create())
    harness.process_element(StreamRecord(1, 0), W1)
    harness.process_element(StreamRecord(1, 2), W2)
    harness.clear_trigger_state(W1)
    assert harness.num_event_time_timers(W1) == 0 and harness.num_event_time_timers(W2) == 1
    harness.clear_trigger_state(W2)
    assert harness.num_event_time_timers() == 0 and harness.num_state_entries() == 0


def test_event_time_trigger_on_event_time_for_another_time_continues():
    harness = TriggerTestHarness(EventTimeTrigger.create())
    assert harness.invoke_on_event_time(0, W1) is CONTINUE
    assert harness.invoke_on_event_time(1, W1) is FIRE
    assert harness.invoke_on_processing_time(1, W1) is CONTINUE


def test_event_time_trigger_merging_moves_the_timer_to_the_merged_window():
    harness = TriggerTestHarness(EventTimeTrigger.create())
    assert EventTimeTrigger.create().can_merge()
    harness.process_element(StreamRecord(1, 0), TimeWindow(0, 2))
    harness.process_element(StreamRecord(1, 1), TimeWindow(1, 3))
    harness.merge_windows(TimeWindow(0, 3), [TimeWindow(0, 2), TimeWindow(1, 3)])
    assert harness.num_event_time_timers() == 1
    assert harness.num_event_time_timers(TimeWindow(0, 3)) == 1
    assert harness.advance_watermark(2) == [(TimeWindow(0, 3), FIRE)]


def test_event_time_trigger_merge_after_the_watermark_passed_registers_no_timer():
    harness = TriggerTestHarness(EventTimeTrigger.create())
    harness.advance_watermark(10)
    harness.merge_windows(TimeWindow(0, 3), [TimeWindow(0, 2), TimeWindow(1, 3)])
    assert harness.num_event_time_timers() == 0


# ---- ProcessingTimeTrigger --------------------------------------------------------------------

def test_processing_time_trigger_fires_when_processing_time_reaches_max_timestamp():
    harness = TriggerTestHarness(ProcessingTimeTrigger.create())
    assert harness.process_element(StreamRecord(1), W1) is CONTINUE
    assert harness.process_element(StreamRecord(1), W2) is CONTINUE
    assert harness.num_processing_time_timers() == 2 and harness.num_event_time_timers() == 0
    assert harness.advance_watermark(100) == []
    assert harness.advance_processing_time(1) == [(W1, FIRE)]
    assert harness.advance_processing_time(3) == [(W2, FIRE)]


def test_processing_time_trigger_clear_and_merge():
    harness = TriggerTestHarness(ProcessingTimeTrigger.create())
    harness.process_element(StreamRecord(1), TimeWindow(0, 2))
    harness.process_element(StreamRecord(1), TimeWindow(1, 3))
    harness.merge_windows(TimeWindow(0, 3), [TimeWindow(0, 2), TimeWindow(1, 3)])
    assert harness.num_processing_time_timers() == 1
    assert harness.num_processing_time_timers(TimeWindow(0, 3)) == 1
    harness.clear_trigger_state(TimeWindow(0, 3))
    assert harness.num_processing_time_timers() == 0


# ---- CountTrigger -----------------------------------------------------------------------------

def test_count_trigger_fires_every_max_count_elements_per_window_and_resets():
    harness = TriggerTestHarness(CountTrigger.of(3))
    assert [harness.process_element(StreamRecord(i), W1) for i in range(3)] == [CONTINUE, CONTINUE, FIRE]
    assert harness.num_state_entries(W1) == 0  # the count was cleared on fire
    assert harness.process_element(StreamRecord(1), W2) is CONTINUE
    assert harness.process_element(StreamRecord(1), W1) is CONTINUE
    assert harness.num_state_entries() == 2
    assert [harness.process_element(StreamRecord(i), W1) for i in range(2)] == [CONTINUE, FIRE]
    assert harness.num_event_time_timers() == harness.num_processing_time_timers() == 0


def test_count_trigger_clear_removes_the_count():
    harness = TriggerTestHarness(CountTrigger.of(3))
    harness.process_element(StreamRecord(1), W1)
    harness.process_element(StreamRecord(1), W2)
    harness.clear_trigger_state(W1)
    assert harness.num_state_entries(W1) == 0 and harness.num_state_entries(W2) == 1
    harness.clear_trigger_state(W2)
    assert harness.num_state_entries() == 0


def test_count_trigger_merging_adds_counts_of_merged_windows():
    harness = TriggerTestHarness(CountTrigger.of(3))
    harness.process_element(StreamRecord(1), TimeWindow(0, 2))
    harness.process_element(StreamRecord(1), TimeWindow(2, 4))
    harness.merge_windows(TimeWindow(0, 4), [TimeWindow(0, 2), TimeWindow(2, 4)])
    assert harness.num_state_entries() == 1 and harness.num_state_entries(TimeWindow(0, 4)) == 1
    assert harness.process_element(StreamRecord(1), TimeWindow(0, 4)) is FIRE


@pytest.mark.parametrize("bad", [0, -1, 1.5, "3", True])
def test_count_trigger_needs_a_positive_count(bad):
    with pytest.raises(JobDefinitionError) as info:
        CountTrigger.of(bad)
    assert info.value.parameter == "max_count"


# ---- PurgingTrigger ---------------------------------------------------------------------------

def test_purging_trigger_turns_fire_into_fire_and_purge():
    harness = TriggerTestHarness(PurgingTrigger.of(CountTrigger.of(2)))
    assert harness.process_element(StreamRecord(1), GLOBAL_WINDOW) is CONTINUE
    assert harness.process_element(StreamRecord(2), GLOBAL_WINDOW) is FIRE_AND_PURGE
    timed = TriggerTestHarness(PurgingTrigger.of(EventTimeTrigger.create()))
    timed.process_element(StreamRecord(1, 0), W1)
    assert timed.advance_watermark(1) == [(W1, FIRE_AND_PURGE)]
    processing = TriggerTestHarness(PurgingTrigger.of(ProcessingTimeTrigger.create()))
    processing.process_element(StreamRecord(1), W1)
    assert processing.advance_processing_time(1) == [(W1, FIRE_AND_PURGE)]


def test_purging_trigger_delegates_merge_and_clear():
    assert PurgingTrigger.of(CountTrigger.of(2)).can_merge()
    assert not PurgingTrigger.of(DeltaTrigger.of(1, lambda a, b: 0)).can_merge()
    harness = TriggerTestHarness(PurgingTrigger.of(CountTrigger.of(3)))
    harness.process_element(StreamRecord(1), TimeWindow(0, 2))
    harness.process_element(StreamRecord(1), TimeWindow(1, 3))
    harness.merge_windows(TimeWindow(0, 3), [TimeWindow(0, 2), TimeWindow(1, 3)])
    assert harness.process_element(StreamRecord(1), TimeWindow(0, 3)) is FIRE_AND_PURGE
    harness.process_element(StreamRecord(1), TimeWindow(0, 3))
    harness.clear_trigger_state(TimeWindow(0, 3))
    assert harness.num_state_entries() == 0


# ---- ContinuousEventTimeTrigger ---------------------------------------------------------------

def test_continuous_event_time_trigger_fires_every_interval_and_at_window_end():
    #  window [0, 10), interval 3: periodic fires at 3, 6, 9 (capped at max_timestamp 9)
    window = TimeWindow(0, 10)
    harness = TriggerTestHarness(ContinuousEventTimeTrigger.of(3))
    assert harness.process_element(StreamRecord("a", 1), window) is CONTINUE
    assert harness.num_state_entries() == 1  # the fire-time
    assert harness.num_event_time_timers() == 2  # 3 and the window end 9
    assert harness.advance_watermark(2) == []
    assert harness.advance_watermark(3) == [(window, FIRE)]
    assert harness.advance_watermark(7) == [(window, FIRE)]  # fire at 6
    # the next periodic fire is min(9, 9): the window end fires once, never lost
    assert harness.advance_watermark(9) == [(window, FIRE)]
    harness.clear_trigger_state(window)
    assert harness.num_event_time_timers() == 0 and harness.num_state_entries() == 0


def test_continuous_event_time_trigger_catches_up_after_a_watermark_jump():
    window = TimeWindow(0, 100)
    harness = TriggerTestHarness(ContinuousEventTimeTrigger.of(10))
    harness.process_element(StreamRecord("a", 5), window)
    fired = harness.advance_watermark(35)
    assert fired == [(window, FIRE)] * 3  # 10, 20, 30: every interval passed fires, none lost
    assert harness.num_event_time_timers() == 2  # 40 and the window end


def test_continuous_event_time_trigger_fires_late_elements_immediately():
    harness = TriggerTestHarness(ContinuousEventTimeTrigger.of(3))
    harness.advance_watermark(20)
    assert harness.process_element(StreamRecord("late", 1), TimeWindow(0, 10)) is FIRE
    assert harness.num_state_entries() == 0 and harness.num_event_time_timers() == 0


def test_continuous_event_time_trigger_merge_keeps_the_earliest_fire_time():
    merged = TimeWindow(15, 61)
    harness = TriggerTestHarness(ContinuousEventTimeTrigger.of(10))
    harness.process_element(StreamRecord("a", 15), TimeWindow(15, 45))  # next fire 20
    harness.process_element(StreamRecord("b", 31), TimeWindow(31, 61))  # next fire 40
    harness.merge_windows(merged, [TimeWindow(15, 45), TimeWindow(31, 61)])
    assert harness.num_state_entries() == 1
    assert harness.num_state_entries(merged) == 1
    assert harness.num_event_time_timers(merged) == 1  # the min fire time 20
    # As in Flink, clear() of a merged-away window finds its fire-time already moved, so its old
    # timers stay registered; when they fire they find no state and only CONTINUE.
    fired = harness.advance_watermark(20)
    assert (merged, FIRE) in fired
    assert [r for w, r in fired if w != merged] == [CONTINUE]
    assert harness.num_event_time_timers(merged) == 1  # next fire 30


def test_continuous_event_time_trigger_aligns_first_fire_like_java_for_negative_timestamps():
    harness = TriggerTestHarness(ContinuousEventTimeTrigger.of(5))
    window = TimeWindow(-100, 100)
    harness.process_element(StreamRecord("a", -7), window)  # Java: -7 - (-7 % 5) = -5, next fire 0
    assert harness.advance_watermark(-1) == []
    assert harness.advance_watermark(0) == [(window, FIRE)]


# ---- ContinuousProcessingTimeTrigger ----------------------------------------------------------

def test_continuous_processing_time_trigger_fires_at_aligned_intervals_capped_at_window_end():
    window = TimeWindow(0, 25)
    harness = TriggerTestHarness(ContinuousProcessingTimeTrigger.of(10), processing_time=3)
    assert harness.process_element(StreamRecord("a"), window) is CONTINUE
    assert harness.process_element(StreamRecord("b"), window) is CONTINUE
    assert harness.num_processing_time_timers() == 1 and harness.num_state_entries() == 1
    assert harness.advance_processing_time(9) == []
    assert harness.advance_processing_time(10) == [(window, FIRE)]
    assert harness.advance_processing_time(24) == [(window, FIRE), (window, FIRE)]  # 20 and the end 24
    harness.clear_trigger_state(window)
    assert harness.num_processing_time_timers() == 0 and harness.num_state_entries() == 0


def test_continuous_processing_time_trigger_merge():
    harness = TriggerTestHarness(ContinuousProcessingTimeTrigger.of(10), processing_time=12)
    harness.process_element(StreamRecord("a"), TimeWindow(0, 100))  # fire at 20
    harness.current_processing_time = 35
    harness.process_element(StreamRecord("b"), TimeWindow(30, 100))  # fire at 40
    harness.merge_windows(TimeWindow(0, 100), [TimeWindow(30, 100)])
    assert harness.num_state_entries() == 1
    assert harness.advance_processing_time(20) == [(TimeWindow(0, 100), FIRE)]
    # fires at 30 and 40; the merged-away window's old timer at 40 finds no fire-time and does not fire
    assert harness.advance_processing_time(40) == [
        (TimeWindow(0, 100), FIRE), (TimeWindow(0, 100), FIRE), (TimeWindow(30, 100), CONTINUE)]


# ---- DeltaTrigger -----------------------------------------------------------------------------

def test_delta_trigger_fires_when_the_delta_to_the_last_fired_element_exceeds_the_threshold():
    harness = TriggerTestHarness(DeltaTrigger.of(5.0, lambda old, new: abs(new - old)))
    results = [harness.process_element(StreamRecord(v), GLOBAL_WINDOW) for v in (1, 3, 6, 7, 12, 13)]
    #              1 stored, 3 (2), 6 (5 not > 5), 7 (6 > 5: fire, store 7), 12 (5), 13 (6: fire)
    assert results == [CONTINUE, CONTINUE, CONTINUE, FIRE, CONTINUE, FIRE]
    assert harness.num_state_entries() == 1
    harness.clear_trigger_state(GLOBAL_WINDOW)
    assert harness.num_state_entries() == 0


def test_delta_trigger_accepts_a_delta_function_object():
    class Distance(DeltaFunction):
        def get_delta(self, old, new):
            return abs(new[1] - old[1])

    harness = TriggerTestHarness(DeltaTrigger.of(1, Distance()))
    assert harness.process_element(StreamRecord(("a", 0)), W1) is CONTINUE
    assert harness.process_element(StreamRecord(("a", 2)), W1) is FIRE
    assert not DeltaTrigger.of(1, Distance()).can_merge()
    with pytest.raises(JobDefinitionError):
        harness.merge_windows(W1, [W2])


# ---- NeverTrigger / EndOfStreamTrigger --------------------------------------------------------

def test_never_trigger_never_fires_and_holds_nothing():
    harness = TriggerTestHarness(NeverTrigger())
    assert harness.process_element(StreamRecord(1, 5), GLOBAL_WINDOW) is CONTINUE
    assert harness.advance_watermark(MAX_WATERMARK) == []
    assert harness.num_event_time_timers() == harness.num_processing_time_timers() == harness.num_state_entries() == 0


def test_end_of_stream_trigger_fires_once_at_max_watermark():
    harness = TriggerTestHarness(EndOfStreamTrigger())
    harness.process_element(StreamRecord(1, 5), GLOBAL_WINDOW)
    harness.process_element(StreamRecord(2, 6), GLOBAL_WINDOW)
    assert harness.num_event_time_timers() == 1
    assert harness.advance_watermark(10**12) == []
    assert harness.advance_watermark(MAX_WATERMARK) == [(GLOBAL_WINDOW, FIRE)]


def test_triggers_keep_no_per_window_state_in_fields():
    # Flink's rule: one trigger instance serves every key and window
    trigger = CountTrigger.of(2)
    before = dict(vars(trigger))
    a, b = TriggerTestHarness(trigger), TriggerTestHarness(trigger)
    a.process_element(StreamRecord(1), W1)
    assert b.process_element(StreamRecord(1), W1) is CONTINUE
    assert a.process_element(StreamRecord(1), W1) is FIRE
    assert vars(trigger) == before
