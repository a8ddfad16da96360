"""A watermark valve whose channels are a source's splits, and splits come and go (a monitored folder).

The Spark runtime combines the per-split watermarks of every source subtask with one valve, a channel per
split (engine/runtime/spark/splits.py).  With a fixed set of splits that is seed 004's valve as it is.  A
monitored folder (``read_files(..., monitor_interval=...)``) adds a split whenever a file lands and finishes
one whenever a file has been read; this valve follows the local runtime's per-split rule for that
(engine/operators/timestamps_watermarks.py, Flink's ``WatermarkOutputMultiplexer``):

* a split found mid-run joins active at MIN_WATERMARK and counts in the minimum at once: it holds the output
  back until it has read (the output never regresses);
* a finished split is released: it counts no longer, in the minimum nor as an active channel; when the last
  active channel leaves and only idle ones remain, the output goes IDLE; when none remain, the output moves to
  the highest watermark of the channels that left together (:meth:`release_channels`: the splits that finished
  in one epoch leave together, so the result does not depend on the order their reports arrive in, as the
  source stage's rule, engine/operators/timestamps_watermarks.py ``monitored=True``).

A monitored source subtask with no split left to read keeps its last watermark and holds the output back, as
the local runtime's source subtask does (and Flink's source reader without a split): the driver gives it a
*hold channel* (:meth:`add_hold_channel`) at that watermark while it has no split, which goes idle by the
strategy's idleness and is released when a new split reaches the subtask (engine/runtime/spark/splits.py).

Released channels are not part of the snapshot: the runtime releases the channels of finished splits again
after a restore (a split's ``finished`` flag is in the snapshot).  Nor are hold channels: the runtime adds them
again at the first epoch after a restore.
"""

from __future__ import annotations

from typing import Any

from engine.elements import Watermark, WatermarkStatus, WatermarkStatusElement
from engine.watermarks.valve import StatusWatermarkValve, _Channel


class SplitWatermarkValve(StatusWatermarkValve):
    """:class:`StatusWatermarkValve` plus :meth:`add_channel` and :meth:`release_channel`."""

    def __init__(self, num_input_channels: int, output: Any) -> None:
        super().__init__(num_input_channels, output)
        self._released: set[int] = set()
        self._holds: set[int] = set()

    def add_channel(self) -> int:
        """A new split's channel (active, aligned, at MIN_WATERMARK); returns its index."""
        self._channels.append(_Channel())
        if self._last_output_status.is_idle():
            self._last_output_status = WatermarkStatus.ACTIVE
            self._output.emit_watermark_status(self._last_output_status)
        return len(self._channels) - 1

    def add_hold_channel(self, watermark: int) -> int:
        """A channel for a monitored source subtask with no split to read, at that subtask's ``watermark``; returns
        its index.  It is active, and aligned unless the output has passed it (as a channel back from idleness,
        it then holds nothing back until it catches up, which a channel without input never does)."""
        channel = _Channel()
        channel.watermark = watermark
        channel.is_watermark_aligned = watermark >= self._last_output_watermark
        self._channels.append(channel)
        self._holds.add(len(self._channels) - 1)
        if self._last_output_status.is_idle():
            self._last_output_status = WatermarkStatus.ACTIVE
            self._output.emit_watermark_status(self._last_output_status)
        return len(self._channels) - 1

    def release_channel(self, channel_index: int) -> None:
        """A finished split leaves the valve; see the module docstring."""
        channel = self._channel(channel_index)
        if channel_index in self._released:
            return
        self._released.add(channel_index)
        live = self._live()
        if not live or not channel.status.is_active():
            return
        if not any(c.status.is_active() for c in live):
            self._last_output_status = WatermarkStatus.IDLE
            self._output.emit_watermark_status(self._last_output_status)
        else:
            self._find_and_output_new_min_watermark_across_aligned_channels()

    def release_channels(self, channel_indexes: list[int]) -> None:
        """Finished splits leave together (after their last watermarks were input); see the module docstring."""
        leaving = [i for i in channel_indexes if i not in self._released]
        if not leaving:
            return
        channels = [self._channel(i) for i in leaving]
        self._released.update(leaving)
        live = self._live()
        if not live:
            highest = max(c.watermark for c in channels)
            if self._last_output_status.is_active() and highest > self._last_output_watermark:
                self._last_output_watermark = highest
                self._output.emit_watermark(Watermark(highest))
        elif any(c.status.is_active() for c in channels):
            if not any(c.status.is_active() for c in live):
                self._last_output_status = WatermarkStatus.IDLE
                self._output.emit_watermark_status(self._last_output_status)
            else:
                self._find_and_output_new_min_watermark_across_aligned_channels()

    def is_released(self, channel_index: int) -> bool:
        return channel_index in self._released

    def input_watermark(self, watermark: Watermark, channel_index: int) -> None:
        if channel_index not in self._released:
            super().input_watermark(watermark, channel_index)

    def input_watermark_status(self, status: WatermarkStatus | WatermarkStatusElement, channel_index: int) -> None:
        if channel_index not in self._released:
            super().input_watermark_status(status, channel_index)

    def snapshot(self) -> dict[str, Any]:
        state = super().snapshot()
        state["channels"] = [c for i, c in enumerate(state["channels"]) if i not in self._holds]
        return state

    def restore(self, state: dict[str, Any]) -> None:
        super().restore(state)
        self._released = set()
        self._holds = set()

    def _live(self) -> list[_Channel]:
        return [c for i, c in enumerate(self._channels) if i not in self._released]

    def _has_active_channels(self) -> bool:
        return any(c.status.is_active() for c in self._live())

    def _find_and_output_new_min_watermark_across_aligned_channels(self) -> None:
        aligned = [c.watermark for c in self._live() if c.is_watermark_aligned]
        if aligned and min(aligned) > self._last_output_watermark:
            self._last_output_watermark = min(aligned)
            self._output.emit_watermark(Watermark(self._last_output_watermark))

    def _find_and_output_max_watermark_across_all_channels(self) -> None:
        live = self._live()
        if live and max(c.watermark for c in live) > self._last_output_watermark:
            self._last_output_watermark = max(c.watermark for c in live)
            self._output.emit_watermark(Watermark(self._last_output_watermark))
