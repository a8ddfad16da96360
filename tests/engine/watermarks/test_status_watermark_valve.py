"""StatusWatermarkValve, in Flink's StatusWatermarkValveTest style: after each input, exactly this, then nothing (seed 004)."""

from __future__ import annotations

import json
from collections import deque

import pytest

from engine.elements import MIN_WATERMARK, Watermark, WatermarkStatus, WatermarkStatusElement
from engine.errors import CorruptSnapshotError, IllegalStateError, JobDefinitionError, UnsupportedFormatVersion
from engine.watermarks.valve import InputChannelStatus, StatusWatermarkValve, ValveOutput

ACTIVE = WatermarkStatus.ACTIVE
IDLE = WatermarkStatus.IDLE


class ValveOutputRecorder(ValveOutput):
    def __init__(self) -> None:
        self.seen: deque = deque()

    def emit_watermark(self, watermark: Watermark) -> None:
        self.seen.append(watermark)

    def emit_watermark_status(self, status: WatermarkStatus) -> None:
        self.seen.append(status)

    def pop(self):
        return self.seen.popleft() if self.seen else None

    def expect(self, *elements) -> None:
        """Exactly these, in this order, then nothing."""
        got = [self.pop() for _ in elements]
        assert got == list(elements)
        assert self.pop() is None


def make(n: int):
    out = ValveOutputRecorder()
    return StatusWatermarkValve(n, out), out


def test_a_single_channel_forwards_only_increasing_watermarks():
    valve, out = make(1)
    valve.input_watermark(Watermark(0), 0)
    out.expect(Watermark(0))
    valve.input_watermark(Watermark(25), 0)
    out.expect(Watermark(25))
    valve.input_watermark(Watermark(18), 0)
    out.expect()
    valve.input_watermark(Watermark(25), 0)
    out.expect()
    valve.input_watermark(Watermark(42), 0)
    out.expect(Watermark(42))


def test_a_single_channel_going_idle_and_back_emits_status_changes():
    valve, out = make(1)
    valve.input_watermark_status(IDLE, 0)
    out.expect(IDLE)
    valve.input_watermark_status(ACTIVE, 0)
    out.expect(ACTIVE)


def test_watermarks_of_an_idle_channel_are_ignored():
    valve, out = make(1)
    valve.input_watermark(Watermark(5), 0)
    out.expect(Watermark(5))
    valve.input_watermark_status(IDLE, 0)
    out.expect(IDLE)
    valve.input_watermark(Watermark(10), 0)
    out.expect()
    assert valve.get_input_channel_status(0).watermark == 5


def test_status_inputs_that_do_not_change_the_channel_status_are_no_ops():
    valve, out = make(2)
    valve.input_watermark_status(ACTIVE, 0)
    out.expect()
    valve.input_watermark_status(IDLE, 0)
    out.expect()
    valve.input_watermark_status(IDLE, 0)
    out.expect()
    valve.input_watermark_status(WatermarkStatusElement(IDLE), 1)
    out.expect(IDLE)
    valve.input_watermark_status(IDLE, 1)
    out.expect()
    valve.input_watermark_status(ACTIVE, 1)
    out.expect(ACTIVE)
    valve.input_watermark_status(ACTIVE, 1)
    out.expect()


def test_the_output_is_the_min_over_aligned_channels_and_only_when_it_rises():
    valve, out = make(3)
    valve.input_watermark(Watermark(10), 0)
    valve.input_watermark(Watermark(12), 1)
    out.expect()  # channel 2 still at MIN
    valve.input_watermark(Watermark(7), 2)
    out.expect(Watermark(7))
    valve.input_watermark(Watermark(8), 2)
    out.expect(Watermark(8))
    valve.input_watermark(Watermark(11), 2)
    out.expect(Watermark(10))
    valve.input_watermark(Watermark(15), 1)
    out.expect()  # channel 0 holds 10
    valve.input_watermark(Watermark(20), 0)
    out.expect(Watermark(11))


def test_an_idle_channel_holding_the_min_lets_the_others_advance():
    #   ch0: 3 ----- IDLE
    #   ch1: 5 ---------> valve output 3 -> 5 when ch0 goes idle
    valve, out = make(2)
    valve.input_watermark(Watermark(3), 0)
    valve.input_watermark(Watermark(5), 1)
    out.expect(Watermark(3))
    valve.input_watermark_status(IDLE, 0)
    out.expect(Watermark(5))
    valve.input_watermark(Watermark(9), 1)
    out.expect(Watermark(9))


def test_an_idle_channel_not_holding_the_min_changes_nothing():
    valve, out = make(3)
    valve.input_watermark(Watermark(3), 0)
    valve.input_watermark(Watermark(5), 1)
    valve.input_watermark(Watermark(4), 2)
    out.expect(Watermark(3))
    valve.input_watermark_status(IDLE, 1)
    out.expect()
    assert valve.get_input_channel_status(1) == InputChannelStatus(5, IDLE, False)


def test_all_channels_idle_flushes_the_max_when_the_last_active_channel_held_the_output():
    valve, out = make(3)
    valve.input_watermark(Watermark(10), 0)
    valve.input_watermark(Watermark(5), 1)
    valve.input_watermark(Watermark(3), 2)
    out.expect(Watermark(3))
    valve.input_watermark_status(IDLE, 0)
    out.expect()
    valve.input_watermark_status(IDLE, 1)
    out.expect()
    # channel 2 holds the last output 3: the flush emits the max (10), then IDLE
    valve.input_watermark_status(IDLE, 2)
    out.expect(Watermark(10), IDLE)


def test_all_channels_idle_in_another_order_gives_the_same_output():
    valve, out = make(3)
    valve.input_watermark(Watermark(10), 0)
    valve.input_watermark(Watermark(5), 1)
    valve.input_watermark(Watermark(3), 2)
    out.expect(Watermark(3))
    valve.input_watermark_status(IDLE, 2)
    out.expect(Watermark(5))
    valve.input_watermark_status(IDLE, 1)
    out.expect(Watermark(10))
    valve.input_watermark_status(IDLE, 0)
    out.expect(IDLE)
    assert valve.last_output_watermark == 10


def test_no_flush_when_the_last_active_channel_is_not_at_the_last_output():
    valve, out = make(2)
    valve.input_watermark(Watermark(7), 0)
    valve.input_watermark(Watermark(4), 1)
    out.expect(Watermark(4))
    valve.input_watermark_status(IDLE, 1)
    out.expect(Watermark(7))
    # channel 0 did not advance; it is at the last output 7, max is 7: nothing new to flush
    valve.input_watermark_status(IDLE, 0)
    out.expect(IDLE)


def test_a_watermark_while_the_whole_valve_is_idle_is_ignored_even_from_an_active_channel():
    valve, out = make(2)
    valve.input_watermark_status(IDLE, 0)
    valve.input_watermark_status(IDLE, 1)
    out.expect(IDLE)
    valve.input_watermark_status(ACTIVE, 0)
    out.expect(ACTIVE)
    valve.input_watermark(Watermark(6), 0)
    out.expect(Watermark(6))


def test_a_channel_resuming_behind_the_output_rejoins_only_when_it_catches_up():
    #   ch0: 2 -- IDLE ........ ACTIVE 4 ... 12 (caught up: aligned again)
    #   ch1: 2 ---- 10 --------------------- 15
    valve, out = make(2)
    valve.input_watermark(Watermark(2), 0)
    valve.input_watermark(Watermark(2), 1)
    out.expect(Watermark(2))
    valve.input_watermark_status(IDLE, 0)
    out.expect()
    valve.input_watermark(Watermark(10), 1)
    out.expect(Watermark(10))
    valve.input_watermark_status(ACTIVE, 0)
    out.expect()
    assert valve.get_input_channel_status(0) == InputChannelStatus(2, ACTIVE, False)
    valve.input_watermark(Watermark(4), 0)  # still behind: does not pull the output back or hold it
    out.expect()
    valve.input_watermark(Watermark(13), 1)
    out.expect(Watermark(13))
    valve.input_watermark(Watermark(12), 0)  # behind 13, still unaligned
    out.expect()
    assert not valve.get_input_channel_status(0).is_watermark_aligned
    valve.input_watermark(Watermark(14), 0)  # caught up: aligned, min(14, 13) = 13 is not new
    out.expect()
    assert valve.get_input_channel_status(0).is_watermark_aligned
    valve.input_watermark(Watermark(20), 1)
    out.expect(Watermark(14))  # now channel 0 holds the output back


def test_a_channel_resuming_ahead_of_the_output_is_aligned_at_once():
    valve, out = make(2)
    valve.input_watermark(Watermark(9), 0)
    valve.input_watermark(Watermark(3), 1)
    out.expect(Watermark(3))
    valve.input_watermark_status(IDLE, 0)
    out.expect()
    valve.input_watermark_status(ACTIVE, 0)
    out.expect()
    assert valve.get_input_channel_status(0) == InputChannelStatus(9, ACTIVE, True)
    valve.input_watermark(Watermark(12), 1)
    out.expect(Watermark(9))


def test_resuming_after_all_idle_emits_active_and_the_resumed_channel_must_catch_up():
    valve, out = make(2)
    valve.input_watermark(Watermark(4), 0)
    valve.input_watermark(Watermark(8), 1)
    out.expect(Watermark(4))
    valve.input_watermark_status(IDLE, 1)
    out.expect()
    valve.input_watermark_status(IDLE, 0)
    out.expect(Watermark(8), IDLE)
    valve.input_watermark_status(ACTIVE, 0)  # channel 0 is at 4, behind 8
    out.expect(ACTIVE)
    valve.input_watermark(Watermark(6), 0)
    out.expect()
    valve.input_watermark(Watermark(9), 0)
    out.expect(Watermark(9))


def test_min_watermark_is_never_emitted_as_news():
    valve, out = make(1)
    valve.input_watermark(Watermark(MIN_WATERMARK), 0)
    out.expect()


def test_bad_channel_counts_and_indexes_are_refused():
    with pytest.raises(JobDefinitionError, match="num_input_channels"):
        StatusWatermarkValve(0, ValveOutputRecorder())
    valve, _ = make(2)
    with pytest.raises(IllegalStateError, match="invalid channel index 2"):
        valve.input_watermark(Watermark(1), 2)


def test_snapshot_is_json_and_restores_every_channel():
    valve, out = make(3)
    valve.input_watermark(Watermark(5), 0)
    valve.input_watermark(Watermark(9), 1)
    valve.input_watermark(Watermark(7), 2)
    valve.input_watermark_status(IDLE, 0)
    out.expect(Watermark(5), Watermark(7))
    state = json.loads(json.dumps(valve.snapshot()))

    restored, out2 = make(3)
    restored.restore(state)
    out2.expect()
    assert restored.snapshot() == valve.snapshot()
    restored.input_watermark(Watermark(6), 2)  # lower than before the restore: no news
    out2.expect()
    restored.input_watermark(Watermark(11), 2)
    out2.expect(Watermark(9))


def test_restore_with_another_channel_count_keeps_the_output_from_regressing():
    valve, out = make(2)
    valve.input_watermark(Watermark(50), 0)
    valve.input_watermark(Watermark(40), 1)
    state = valve.snapshot()
    rescaled, out2 = make(3)
    rescaled.restore(state)
    assert rescaled.last_output_watermark == 40
    rescaled.input_watermark(Watermark(30), 0)
    rescaled.input_watermark(Watermark(45), 1)
    rescaled.input_watermark(Watermark(60), 2)
    out2.expect()  # min 30 is below the restored output
    rescaled.input_watermark(Watermark(44), 0)
    out2.expect(Watermark(44))


def test_restore_refuses_unknown_versions_and_malformed_state():
    valve, _ = make(1)
    good = valve.snapshot()
    with pytest.raises(UnsupportedFormatVersion):
        valve.restore({**good, "format_version": 99})
    with pytest.raises(CorruptSnapshotError):
        valve.restore({**good, "channels": [{"watermark": "x", "status": "ACTIVE", "is_watermark_aligned": True}]})
    with pytest.raises(CorruptSnapshotError):
        valve.restore({**good, "last_output_status": "SLEEPY"})
