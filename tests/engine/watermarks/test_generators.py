"""Watermark generators: periodic, punctuated, idleness on an injected clock."""

from __future__ import annotations

import pytest

from engine.clock import ManualClock
from engine.elements import MIN_WATERMARK, Watermark
from engine.errors import JobDefinitionError
from engine.watermarks.generators import (
    AscendingTimestampsWatermarks,
    BoundedOutOfOrdernessWatermarks,
    NoWatermarksGenerator,
    WatermarkGenerator,
    WatermarkOutput,
    WatermarksWithIdleness,
)


class RecordingOutput(WatermarkOutput):
    def __init__(self) -> None:
        self.events: list = []

    def emit_watermark(self, watermark: Watermark) -> None:
        self.events.append(watermark)

    def mark_idle(self) -> None:
        self.events.append("idle")

    def mark_active(self) -> None:
        self.events.append("active")

    def take(self) -> list:
        events, self.events = self.events, []
        return events


def test_bounded_out_of_orderness_emits_max_minus_bound_minus_one_on_each_periodic_emit():
    gen, out = BoundedOutOfOrdernessWatermarks(5), RecordingOutput()
    gen.on_periodic_emit(out)
    assert out.take() == [Watermark(MIN_WATERMARK)]
    gen.on_event("a", 100, out)
    gen.on_event("b", 90, out)  # late but within bounds: the max stays 100
    assert out.take() == []  # periodic: nothing on events
    gen.on_periodic_emit(out)
    assert out.take() == [Watermark(94)]
    gen.on_event("c", 120, out)
    gen.on_periodic_emit(out)
    assert out.take() == [Watermark(114)]


def test_ascending_timestamps_watermark_is_max_minus_one():
    gen, out = AscendingTimestampsWatermarks(), RecordingOutput()
    gen.on_event("a", 7, out)
    gen.on_periodic_emit(out)
    assert out.take() == [Watermark(6)]


def test_no_watermarks_generator_never_emits():
    gen, out = NoWatermarksGenerator(), RecordingOutput()
    gen.on_event("a", 7, out)
    gen.on_periodic_emit(out)
    assert out.take() == []


def test_bounded_generator_progress_survives_snapshot_and_restore():
    gen, out = BoundedOutOfOrdernessWatermarks(10), RecordingOutput()
    gen.on_event("a", 500, out)
    restored = BoundedOutOfOrdernessWatermarks(10)
    restored.restore_state(gen.snapshot_state())
    restored.on_periodic_emit(out)
    assert out.take() == [Watermark(489)]


def test_negative_out_of_orderness_is_refused():
    with pytest.raises(JobDefinitionError, match="max_out_of_orderness"):
        BoundedOutOfOrdernessWatermarks(-1)


class MarkerWatermarks(WatermarkGenerator):
    """A punctuated generator: records flagged as markers carry the watermark."""

    def on_event(self, event, event_timestamp, output):
        if event.get("marker"):
            output.emit_watermark(Watermark(event_timestamp))

    def on_periodic_emit(self, output):
        pass


def test_a_punctuated_generator_emits_from_on_event_only():
    gen, out = MarkerWatermarks(), RecordingOutput()
    gen.on_event({"marker": False}, 10, out)
    assert out.take() == []
    gen.on_event({"marker": True}, 15, out)
    assert out.take() == [Watermark(15)]
    gen.on_periodic_emit(out)
    assert out.take() == []


class EveryThirdPeriodWatermarks(WatermarkGenerator):
    """A custom periodic generator: emits the max seen on every third periodic call."""

    def __init__(self) -> None:
        self.max_ts = MIN_WATERMARK
        self.calls = 0

    def on_event(self, event, event_timestamp, output):
        self.max_ts = max(self.max_ts, event_timestamp)

    def on_periodic_emit(self, output):
        self.calls += 1
        if self.calls % 3 == 0:
            output.emit_watermark(Watermark(self.max_ts))


def test_a_custom_periodic_generator_decides_when_to_emit():
    gen, out = EveryThirdPeriodWatermarks(), RecordingOutput()
    gen.on_event("x", 40, out)
    gen.on_periodic_emit(out)
    gen.on_periodic_emit(out)
    assert out.take() == []
    gen.on_periodic_emit(out)
    assert out.take() == [Watermark(40)]


def test_idleness_marks_idle_after_timeout_of_processing_time_without_events():
    #  t=0 event | t=0 check (activity) | t=100 check (inactivity starts) | t=150 check (50 <= 50: not yet)
    #  t=151 check: idle (once) | t=300 check: still idle, nothing new | t=310 event: active again
    clock = ManualClock(0)
    gen, out = WatermarksWithIdleness(BoundedOutOfOrdernessWatermarks(0), 50, clock), RecordingOutput()
    gen.on_event("a", 10, out)
    gen.on_periodic_emit(out)
    assert out.take() == [Watermark(9)]
    clock.set(100)
    gen.on_periodic_emit(out)
    assert out.take() == [Watermark(9)]
    clock.set(150)
    gen.on_periodic_emit(out)
    assert out.take() == [Watermark(9)]
    clock.set(151)
    gen.on_periodic_emit(out)
    assert out.take() == ["idle"]
    assert gen.is_idle_now()
    clock.set(300)
    gen.on_periodic_emit(out)
    assert out.take() == []
    clock.set(310)
    gen.on_event("b", 20, out)
    assert out.take() == ["active"]
    gen.on_periodic_emit(out)
    assert out.take() == [Watermark(19)]


def test_an_idle_split_restored_from_a_snapshot_stays_idle_until_its_next_event():
    clock = ManualClock(0)
    gen = WatermarksWithIdleness(BoundedOutOfOrdernessWatermarks(0), 50, clock)
    out = RecordingOutput()
    gen.on_event("a", 10, out)
    for t in (0, 100, 200):
        clock.set(t)
        gen.on_periodic_emit(out)
    assert out.take()[-1] == "idle"
    state = gen.snapshot_state()
    assert state == {"inner": {"max_timestamp": 10}, "is_idle": True}

    restored = WatermarksWithIdleness(BoundedOutOfOrdernessWatermarks(0), 50, clock)
    restored.restore_state(state)
    restored.on_periodic_emit(out)
    assert out.take() == []  # already idle: neither a watermark nor a second idle mark
    restored.on_event("b", 30, out)
    assert out.take() == ["active"]


def test_idleness_requires_a_positive_timeout():
    with pytest.raises(JobDefinitionError, match="idle_timeout"):
        WatermarksWithIdleness(NoWatermarksGenerator(), 0, ManualClock())
