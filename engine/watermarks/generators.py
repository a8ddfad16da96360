"""Watermark generators: how one source split turns event timestamps into watermarks.

A :class:`WatermarkGenerator` sees every event of its split
(:meth:`~WatermarkGenerator.on_event`) and is asked periodically
(:meth:`~WatermarkGenerator.on_periodic_emit`, every auto-watermark interval)
whether event time has advanced.  It tells the world through a
:class:`WatermarkOutput`.  One generator instance runs per source split
(ARCHITECTURE section 4), so a generator may keep per-split progress in fields.

Two styles, both through this one interface (Flink's ``WatermarkGenerator``):

* **periodic** -- remember the progress in ``on_event`` and emit in
  ``on_periodic_emit`` (:class:`BoundedOutOfOrdernessWatermarks`).
* **punctuated** -- emit directly from ``on_event`` when an event carries a
  watermark-worthy marker, and do nothing periodically::

      class MarkerWatermarks(WatermarkGenerator):
          def on_event(self, event, event_timestamp, output):
              if event.get("is_marker"):
                  output.emit_watermark(Watermark(event_timestamp))

          def on_periodic_emit(self, output):
              pass

A watermark emitted from ``on_event`` follows the record that caused it.

Generators may persist their progress through :meth:`~WatermarkGenerator.snapshot_state`
/ :meth:`~WatermarkGenerator.restore_state` (plain JSON data), so a restored
job does not emit a watermark lower than one already emitted before the
failure.  The default keeps nothing.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from engine.clock import Clock
from engine.elements import MIN_WATERMARK, Watermark
from engine.errors import CorruptSnapshotError, JobDefinitionError


class WatermarkOutput(ABC):
    """Where a generator reports progress (Flink's ``WatermarkOutput``)."""

    @abstractmethod
    def emit_watermark(self, watermark: Watermark) -> None:
        """Event time of this output reached ``watermark``; implies the output is active again."""

    @abstractmethod
    def mark_idle(self) -> None:
        """No events for now: downstream must not wait for this output's watermark."""

    @abstractmethod
    def mark_active(self) -> None:
        """Events flow again after :meth:`mark_idle`."""


class WatermarkGenerator(ABC):
    """Generates watermarks for one source split (seed 004: the watermark is a stream element)."""

    @abstractmethod
    def on_event(self, event: Any, event_timestamp: int, output: WatermarkOutput) -> None:
        """Called for every event, after its timestamp was assigned; punctuated generators emit here."""

    @abstractmethod
    def on_periodic_emit(self, output: WatermarkOutput) -> None:
        """Called every auto-watermark interval; periodic generators emit here."""

    def snapshot_state(self) -> dict[str, Any]:
        """This generator's progress as plain JSON data (default: nothing to keep)."""
        return {}

    def restore_state(self, state: dict[str, Any]) -> None:  # noqa: B027 - optional hook
        """Resume from :meth:`snapshot_state`'s result."""


class BoundedOutOfOrdernessWatermarks(WatermarkGenerator):
    """Watermark = highest timestamp seen - out-of-orderness - 1, emitted periodically.

    The ``- 1`` is Flink's: a watermark ``t`` promises no more elements with
    timestamp <= ``t``, and an element exactly ``out_of_orderness`` late is
    still on time.  Before any event the watermark is MIN_WATERMARK.
    """

    __slots__ = ("out_of_orderness_ms", "_max_timestamp")

    def __init__(self, out_of_orderness_ms: int) -> None:
        if isinstance(out_of_orderness_ms, bool) or not isinstance(out_of_orderness_ms, int) or out_of_orderness_ms < 0:
            raise JobDefinitionError("max_out_of_orderness", out_of_orderness_ms, "must be an int of ms >= 0")
        self.out_of_orderness_ms = out_of_orderness_ms
        # start so that the first periodic watermark is exactly MIN_WATERMARK (no underflow below it)
        self._max_timestamp = MIN_WATERMARK + out_of_orderness_ms + 1

    @property
    def max_timestamp(self) -> int:
        return self._max_timestamp

    def current_watermark(self) -> int:
        return self._max_timestamp - self.out_of_orderness_ms - 1

    def on_event(self, event: Any, event_timestamp: int, output: WatermarkOutput) -> None:
        if event_timestamp > self._max_timestamp:
            self._max_timestamp = event_timestamp

    def on_periodic_emit(self, output: WatermarkOutput) -> None:
        output.emit_watermark(Watermark(self.current_watermark()))

    def snapshot_state(self) -> dict[str, Any]:
        return {"max_timestamp": self._max_timestamp}

    def restore_state(self, state: dict[str, Any]) -> None:
        value = state.get("max_timestamp")
        if isinstance(value, bool) or not isinstance(value, int):
            raise CorruptSnapshotError(f"watermark generator state has no int max_timestamp: {state!r}")
        self._max_timestamp = max(self._max_timestamp, value)

    def __repr__(self) -> str:
        return f"BoundedOutOfOrdernessWatermarks(out_of_orderness_ms={self.out_of_orderness_ms})"


class AscendingTimestampsWatermarks(BoundedOutOfOrdernessWatermarks):
    """For timestamps that never decrease within a split: out-of-orderness 0 (watermark = max - 1)."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(0)

    def __repr__(self) -> str:
        return "AscendingTimestampsWatermarks()"


class NoWatermarksGenerator(WatermarkGenerator):
    """Emits nothing: for processing-time jobs, or streams whose watermarks come from elsewhere."""

    __slots__ = ()

    def on_event(self, event: Any, event_timestamp: int, output: WatermarkOutput) -> None:
        pass

    def on_periodic_emit(self, output: WatermarkOutput) -> None:
        pass


class WatermarksWithIdleness(WatermarkGenerator):
    """Wraps a generator and marks its split idle after ``idle_timeout_ms`` of processing time without events.

    Follows Flink's ``WatermarksWithIdleness`` / ``IdlenessTimer``: the first
    periodic check that sees no new event starts the inactivity period; a
    later periodic check more than ``idle_timeout_ms`` after that start marks
    the output idle (once) and stops forwarding periodic watermarks.  The next
    event makes the split active again -- :meth:`WatermarkOutput.mark_active` is
    called *before* the inner generator sees the event, because records never
    flow between IDLE and ACTIVE (seed 004).  Time comes from the injected clock.
    """

    __slots__ = ("_watermarks", "idle_timeout_ms", "_clock", "_counter", "_last_counter", "_start_of_inactivity_ms", "_is_idle_now")

    def __init__(self, watermarks: WatermarkGenerator, idle_timeout_ms: int, clock: Clock) -> None:
        if isinstance(idle_timeout_ms, bool) or not isinstance(idle_timeout_ms, int) or idle_timeout_ms <= 0:
            raise JobDefinitionError("idle_timeout", idle_timeout_ms, "must be an int of ms greater than 0")
        self._watermarks = watermarks
        self.idle_timeout_ms = idle_timeout_ms
        self._clock = clock
        self._counter = 0
        self._last_counter = 0
        self._start_of_inactivity_ms: int | None = None
        self._is_idle_now = False

    @property
    def inner(self) -> WatermarkGenerator:
        return self._watermarks

    def is_idle_now(self) -> bool:
        return self._is_idle_now

    def on_event(self, event: Any, event_timestamp: int, output: WatermarkOutput) -> None:
        if self._is_idle_now:
            self._is_idle_now = False
            output.mark_active()
        self._watermarks.on_event(event, event_timestamp, output)
        self._counter += 1

    def on_periodic_emit(self, output: WatermarkOutput) -> None:
        if self._check_if_idle():
            if not self._is_idle_now:
                output.mark_idle()
                self._is_idle_now = True
        else:
            self._watermarks.on_periodic_emit(output)

    def _check_if_idle(self) -> bool:
        if self._counter != self._last_counter:
            # activity since the last check: the inactivity period (if any) is over
            self._last_counter = self._counter
            self._start_of_inactivity_ms = None
            return False
        now_ms = self._clock.now_ms()
        if self._start_of_inactivity_ms is None:
            self._start_of_inactivity_ms = now_ms
            return False
        return now_ms - self._start_of_inactivity_ms > self.idle_timeout_ms

    def snapshot_state(self) -> dict[str, Any]:
        return {"inner": self._watermarks.snapshot_state(), "is_idle": self._is_idle_now}

    def restore_state(self, state: dict[str, Any]) -> None:
        inner = state.get("inner")
        if not isinstance(inner, dict):
            raise CorruptSnapshotError(f"idleness generator state has no inner state: {state!r}")
        self._watermarks.restore_state(inner)
        # an active split restarts its inactivity period on the restored clock
        self._is_idle_now = bool(state.get("is_idle", False))
        self._last_counter = self._counter
        if self._is_idle_now:
            # stay idle until the next event, rather than waiting out a fresh idle timeout
            self._start_of_inactivity_ms = self._clock.now_ms() - self.idle_timeout_ms - 1
        else:
            self._start_of_inactivity_ms = None

    def __repr__(self) -> str:
        return f"WatermarksWithIdleness({self._watermarks!r}, idle_timeout_ms={self.idle_timeout_ms})"
