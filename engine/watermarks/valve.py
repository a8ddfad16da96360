"""``StatusWatermarkValve``: combines the watermarks and statuses of a task's input channels (seed 004).

The valve receives every watermark and watermark status from the task's input
channels and decides what the task's operator sees.  It follows the seed's
Flink 1.11 code exactly:

* each channel keeps its watermark, its status (ACTIVE/IDLE) and whether it is
  *aligned* (counted in the minimum);
* a watermark counts only if both its channel and the valve are active and it
  is higher than the channel's previous one; the valve emits the minimum over
  aligned channels whenever that minimum rises;
* a channel that goes idle is no longer aligned; if it held the minimum, the
  minimum over the remaining aligned channels may now advance;
* when the last active channel goes idle, the valve emits IDLE -- and first,
  if that channel's watermark equals the last output, "flushes" the maximum
  watermark across all channels, so the result does not depend on the order in
  which the channels went idle;
* a channel that becomes active again re-joins the minimum only once its
  watermark has caught up with the last output (it may have fallen behind
  while idle and must not pull the output back or hold it up); the valve emits
  ACTIVE when it was idle.

The valve is pure: inputs are method calls, decisions leave through the
:class:`ValveOutput`.  Its state round-trips through :meth:`snapshot` /
:meth:`restore` as plain JSON data for checkpoint metadata.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from engine.elements import MIN_WATERMARK, Watermark, WatermarkStatus, WatermarkStatusElement
from engine.errors import CorruptSnapshotError, IllegalStateError, JobDefinitionError, UnsupportedFormatVersion

VALVE_FORMAT_VERSION = 1


class ValveOutput(ABC):
    """Receives what the valve decides (Flink's ``DataOutput`` as the valve uses it)."""

    @abstractmethod
    def emit_watermark(self, watermark: Watermark) -> None: ...

    @abstractmethod
    def emit_watermark_status(self, status: WatermarkStatus) -> None: ...


@dataclass(frozen=True, slots=True)
class InputChannelStatus:
    """A read-only view of one channel: last watermark, status and whether it counts in the minimum.

    A channel is not aligned while it is idle, or after resuming until its
    watermark catches up with the valve's last output (seed 004).
    """

    watermark: int
    status: WatermarkStatus
    is_watermark_aligned: bool


class _Channel:
    __slots__ = ("watermark", "status", "is_watermark_aligned")

    def __init__(self) -> None:
        self.watermark = MIN_WATERMARK
        self.status = WatermarkStatus.ACTIVE
        self.is_watermark_aligned = True


class StatusWatermarkValve:
    """Per-channel watermark/status bookkeeping that emits the task's combined watermark and status."""

    __slots__ = ("_channels", "_output", "_last_output_watermark", "_last_output_status")

    def __init__(self, num_input_channels: int, output: ValveOutput) -> None:
        if isinstance(num_input_channels, bool) or not isinstance(num_input_channels, int) or num_input_channels <= 0:
            raise JobDefinitionError("num_input_channels", num_input_channels, "must be an int greater than 0")
        self._channels = [_Channel() for _ in range(num_input_channels)]
        self._output = output
        self._last_output_watermark = MIN_WATERMARK
        self._last_output_status = WatermarkStatus.ACTIVE

    # ---- inputs ---------------------------------------------------------------------------------

    def input_watermark(self, watermark: Watermark, channel_index: int) -> None:
        """Feed a watermark from ``channel_index``; may emit a new combined watermark."""
        channel = self._channel(channel_index)
        # ignore it if its channel, or the whole valve, is idle
        if not (self._last_output_status.is_active() and channel.status.is_active()):
            return
        timestamp = watermark.timestamp
        # a watermark not above the channel's previous one carries no news
        if timestamp <= channel.watermark:
            return
        channel.watermark = timestamp
        # a channel that resumed behind the output re-joins the minimum once it has caught up
        if not channel.is_watermark_aligned and timestamp >= self._last_output_watermark:
            channel.is_watermark_aligned = True
        self._find_and_output_new_min_watermark_across_aligned_channels()

    def input_watermark_status(self, status: WatermarkStatus | WatermarkStatusElement, channel_index: int) -> None:
        """Feed a status from ``channel_index``; may emit a status change and/or a watermark. Repeats are no-ops."""
        if isinstance(status, WatermarkStatusElement):
            status = status.status
        channel = self._channel(channel_index)
        if status.is_idle() and channel.status.is_active():
            channel.status = WatermarkStatus.IDLE
            channel.is_watermark_aligned = False
            if not self._has_active_channels():
                # No channel will advance any more: flush to the max across all channels so the
                # result does not depend on the order the channels went idle.  Earlier idle
                # transitions already advanced the min, so only the channel that held the last
                # output can make a flush necessary.
                if channel.watermark == self._last_output_watermark:
                    self._find_and_output_max_watermark_across_all_channels()
                self._last_output_status = WatermarkStatus.IDLE
                self._output.emit_watermark_status(self._last_output_status)
            elif channel.watermark == self._last_output_watermark:
                # the channel held the overall min: the remaining aligned channels may advance it
                self._find_and_output_new_min_watermark_across_aligned_channels()
        elif status.is_active() and channel.status.is_idle():
            channel.status = WatermarkStatus.ACTIVE
            # a channel whose watermark is not behind the output can count in the min at once
            if channel.watermark >= self._last_output_watermark:
                channel.is_watermark_aligned = True
            if self._last_output_status.is_idle():
                self._last_output_status = WatermarkStatus.ACTIVE
                self._output.emit_watermark_status(self._last_output_status)

    # ---- views ----------------------------------------------------------------------------------

    @property
    def num_input_channels(self) -> int:
        return len(self._channels)

    @property
    def last_output_watermark(self) -> int:
        return self._last_output_watermark

    @property
    def last_output_status(self) -> WatermarkStatus:
        return self._last_output_status

    def get_input_channel_status(self, channel_index: int) -> InputChannelStatus:
        channel = self._channel(channel_index)
        return InputChannelStatus(channel.watermark, channel.status, channel.is_watermark_aligned)

    # ---- snapshot -------------------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """The valve's state as plain JSON data (recorded in checkpoint metadata)."""
        return {
            "format_version": VALVE_FORMAT_VERSION,
            "last_output_watermark": self._last_output_watermark,
            "last_output_status": self._last_output_status.value,
            "channels": [
                {"watermark": c.watermark, "status": c.status.value, "is_watermark_aligned": c.is_watermark_aligned}
                for c in self._channels
            ],
        }

    def restore(self, state: dict[str, Any]) -> None:
        """Resume from :meth:`snapshot`.  Emits nothing.

        With the same number of channels every channel is restored.  After a
        rescale the channels no longer correspond, so only the last output
        watermark and status are kept and every channel starts fresh (at
        MIN_WATERMARK, active, aligned): the output then stays put until every
        new channel has passed it, so a restore never makes the watermark regress.
        """
        if not isinstance(state, dict):
            raise CorruptSnapshotError(f"valve state must be an object, got {type(state).__name__}")
        version = state.get("format_version")
        if version != VALVE_FORMAT_VERSION:
            raise UnsupportedFormatVersion(
                f"valve state format_version {version!r} is not supported (this Sluice reads {VALVE_FORMAT_VERSION})"
            )
        try:
            last_watermark = _int(state["last_output_watermark"])
            last_status = WatermarkStatus(state["last_output_status"])
            raw_channels = state["channels"]
            channels = []
            for raw in raw_channels:
                channel = _Channel()
                channel.watermark = _int(raw["watermark"])
                channel.status = WatermarkStatus(raw["status"])
                channel.is_watermark_aligned = bool(raw["is_watermark_aligned"])
                channels.append(channel)
        except (KeyError, TypeError, ValueError) as exc:
            raise CorruptSnapshotError(f"valve state is malformed ({exc!r}): {state!r}") from exc
        self._last_output_watermark = last_watermark
        self._last_output_status = last_status
        if len(channels) == len(self._channels):
            self._channels = channels
        else:
            self._channels = [_Channel() for _ in self._channels]
            self._last_output_status = WatermarkStatus.ACTIVE

    # ---- internals ------------------------------------------------------------------------------

    def _channel(self, channel_index: int) -> _Channel:
        if not 0 <= channel_index < len(self._channels):
            raise IllegalStateError(
                f"invalid channel index {channel_index}; the valve has {len(self._channels)} input channels"
            )
        return self._channels[channel_index]

    def _has_active_channels(self) -> bool:
        return any(c.status.is_active() for c in self._channels)

    def _find_and_output_new_min_watermark_across_aligned_channels(self) -> None:
        aligned = [c.watermark for c in self._channels if c.is_watermark_aligned]
        # emit only if the min really comes from some aligned channel and is higher than the last output
        if aligned:
            new_min = min(aligned)
            if new_min > self._last_output_watermark:
                self._last_output_watermark = new_min
                self._output.emit_watermark(Watermark(new_min))

    def _find_and_output_max_watermark_across_all_channels(self) -> None:
        max_watermark = max(c.watermark for c in self._channels)
        if max_watermark > self._last_output_watermark:
            self._last_output_watermark = max_watermark
            self._output.emit_watermark(Watermark(max_watermark))

    def __repr__(self) -> str:
        return (
            f"StatusWatermarkValve(channels={len(self._channels)}, last_output_watermark={self._last_output_watermark}, "
            f"status={self._last_output_status.value})"
        )


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"expected an int, got {value!r}")
    return value
