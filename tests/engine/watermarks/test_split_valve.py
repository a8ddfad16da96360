"""SplitWatermarkValve: the Spark runtime's per-split valve when a monitored folder adds and finishes splits."""

from __future__ import annotations

from engine.elements import MIN_WATERMARK, Watermark, WatermarkStatus
from engine.watermarks.split_valve import SplitWatermarkValve
from engine.watermarks.valve import ValveOutput


class Recorder(ValveOutput):
    def __init__(self) -> None:
        self.events: list = []

    def emit_watermark(self, watermark: Watermark) -> None:
        self.events.append(watermark.timestamp)

    def emit_watermark_status(self, status: WatermarkStatus) -> None:
        self.events.append(status.value)


def test_a_new_split_holds_the_output_until_it_has_read_and_never_pulls_it_back() -> None:
    out = Recorder()
    valve = SplitWatermarkValve(1, out)
    valve.input_watermark(Watermark(100), 0)
    new = valve.add_channel()
    valve.input_watermark(Watermark(300), 0)
    assert out.events == [100]  # the new split at MIN holds it
    valve.input_watermark(Watermark(50), new)
    assert out.events == [100] and valve.last_output_watermark == 100
    valve.input_watermark(Watermark(250), new)
    assert out.events == [100, 250]


def test_a_finished_split_leaves_the_minimum_and_the_last_one_changes_nothing() -> None:
    out = Recorder()
    valve = SplitWatermarkValve(2, out)
    valve.input_watermark(Watermark(100), 0)
    valve.input_watermark(Watermark(400), 1)
    valve.release_channel(0)
    assert out.events == [100, 400]
    valve.release_channel(1)
    valve.release_channel(1)  # twice is once
    assert out.events == [100, 400] and valve.last_output_status is WatermarkStatus.ACTIVE
    valve.input_watermark(Watermark(900), 1)  # a released channel is deaf
    assert out.events == [100, 400]
    again = valve.add_channel()
    valve.input_watermark(Watermark(500), again)
    assert out.events == [100, 400, 500]


def test_releasing_the_last_active_split_beside_idle_ones_makes_the_output_idle_and_a_new_one_wakes_it() -> None:
    out = Recorder()
    valve = SplitWatermarkValve(2, out)
    valve.input_watermark(Watermark(100), 0)
    valve.input_watermark(Watermark(200), 1)
    valve.input_watermark_status(WatermarkStatus.IDLE, 0)
    assert out.events == [100, 200]
    valve.release_channel(1)
    assert out.events == [100, 200, "IDLE"]
    valve.add_channel()
    assert out.events == [100, 200, "IDLE", "ACTIVE"]


def test_restore_forgets_released_channels_the_runtime_releases_them_again() -> None:
    valve = SplitWatermarkValve(2, Recorder())
    valve.release_channel(0)
    restored = SplitWatermarkValve(2, Recorder())
    restored.release_channel(1)
    restored.restore(valve.snapshot())
    assert not restored.is_released(0) and not restored.is_released(1)
    assert restored.get_input_channel_status(0).watermark == MIN_WATERMARK


def test_splits_that_finish_in_one_epoch_leave_together_at_the_highest_of_their_watermarks_in_any_order() -> None:
    #   epoch n reads three whole files: 2989, 8989, 5989 (reports arrive in any order)
    #   one by one, the output would be the watermark of whichever report came last; together it is 8989
    for order in ([0, 1, 2], [2, 1, 0], [1, 0, 2]):
        out = Recorder()
        valve = SplitWatermarkValve(3, out)
        for i in order:
            valve.input_watermark(Watermark((2989, 8989, 5989)[i]), i)
        assert out.events == [2989], order
        valve.release_channels(order)
        assert out.events == [2989, 8989], order
    # beside a split still open, the open one's watermark rules once the others left
    out = Recorder()
    valve = SplitWatermarkValve(2, out)
    valve.input_watermark(Watermark(100), 0)
    valve.input_watermark(Watermark(400), 1)
    valve.release_channels([1])
    assert out.events == [100] and valve.last_output_watermark == 100


def test_a_hold_channel_keeps_a_quiet_subtask_at_its_watermark_until_it_goes_idle() -> None:
    """A monitored source subtask whose last split leaves: its hold channel stands for it at its watermark (the
    split's channel leaves after the hold joined), and only idleness lets the others' progress through."""
    out = Recorder()
    valve = SplitWatermarkValve(2, out)
    valve.input_watermark(Watermark(100), 0)  # subtask A's split
    valve.input_watermark(Watermark(200), 1)  # subtask B's split
    hold = valve.add_hold_channel(100)  # A's split is read to its end: A holds at 100
    valve.release_channels([0])
    valve.input_watermark(Watermark(900), 1)
    assert out.events == [100] and valve.last_output_watermark == 100
    valve.input_watermark_status(WatermarkStatus.IDLE, hold)
    assert out.events == [100, 900]


def test_a_hold_below_the_output_holds_nothing_back_and_hold_channels_stay_out_of_the_snapshot() -> None:
    out = Recorder()
    valve = SplitWatermarkValve(1, out)
    valve.input_watermark(Watermark(500), 0)
    valve.add_hold_channel(MIN_WATERMARK)  # as a channel back from idleness below the output: not aligned
    valve.input_watermark(Watermark(700), 0)
    assert out.events == [500, 700]
    assert len(valve.snapshot()["channels"]) == 1
    restored = SplitWatermarkValve(1, Recorder())
    restored.restore(valve.snapshot())
    assert restored.last_output_watermark == 700
