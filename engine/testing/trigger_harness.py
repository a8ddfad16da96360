"""TriggerTestHarness: drive one Trigger by hand and count its timers and state (Flink's TriggerTestHarness).

STYLE section 6: "a trigger harness returns the TriggerResult and counts timers
and state entries, so 'clear() removed everything' is an assertion."  The
harness owns a :class:`HeapKeyedStateBackend` (one key), a watermark, a
processing time and two timer sets of ``(time, window)``; timers are
deduplicated per (time, window) and fire in time order, as the window
operator's timer service does (seed 004).  No wall clock: time moves only
when the test says so.

Example (seed 000 count window)::

    harness = TriggerTestHarness(CountTrigger.of(2))
    assert harness.process_element(StreamRecord(5, 0), GLOBAL_WINDOW) is TriggerResult.CONTINUE
"""

from __future__ import annotations

from typing import Any, Iterable

from engine.elements import MIN_WATERMARK, StreamRecord
from engine.errors import JobDefinitionError
from engine.state.descriptors import State, StateDescriptor
from engine.state.key_groups import KeyGroupRange
from engine.state.keyed_state import HeapKeyedStateBackend
from engine.windowing.triggers import OnMergeContext, Trigger, TriggerResult
from engine.windowing.windows import Window

_MERGEABLE_KINDS = ("list", "reducing", "aggregating")


class _HarnessContext(OnMergeContext):
    """Trigger context for one window; doubles as the merge context when ``merged_windows`` is set."""

    def __init__(self, harness: TriggerTestHarness, window: Window, merged_windows: Iterable[Window] = ()) -> None:
        self._harness = harness
        self._window = window
        self._merged_windows = list(merged_windows)

    def get_current_processing_time(self) -> int:
        return self._harness.current_processing_time

    def get_current_watermark(self) -> int:
        return self._harness.current_watermark

    def register_processing_time_timer(self, time: int) -> None:
        self._harness._processing_time_timers.add((time, self._window))

    def register_event_time_timer(self, time: int) -> None:
        self._harness._event_time_timers.add((time, self._window))

    def delete_processing_time_timer(self, time: int) -> None:
        self._harness._processing_time_timers.discard((time, self._window))

    def delete_event_time_timer(self, time: int) -> None:
        self._harness._event_time_timers.discard((time, self._window))

    def get_partitioned_state(self, state_descriptor: StateDescriptor) -> State:
        state = self._harness.backend.get_partitioned_state(state_descriptor)
        state.set_current_namespace(self._window)
        return state

    def merge_partitioned_state(self, state_descriptor: StateDescriptor) -> None:
        state = self._harness.backend.get_partitioned_state(state_descriptor)
        if state.kind not in _MERGEABLE_KINDS:
            raise JobDefinitionError(
                "state_descriptor",
                state_descriptor,
                "must describe a mergeable state (list, reducing or aggregating) to be merged",
            )
        if self._merged_windows:
            state.merge_namespaces(self._window, self._merged_windows)  # type: ignore[attr-defined]


class TriggerTestHarness:
    """Feeds a trigger elements, watermarks and processing time for one key; see the module docstring."""

    KEY = "trigger-test-harness-key"

    def __init__(self, trigger: Trigger, *, processing_time: int = 0, watermark: int = MIN_WATERMARK) -> None:
        self.trigger = trigger
        self.backend = HeapKeyedStateBackend(1, KeyGroupRange(0, 0))
        self.backend.set_current_key(self.KEY)
        self.current_processing_time = processing_time
        self.current_watermark = watermark
        self._event_time_timers: set[tuple[int, Window]] = set()
        self._processing_time_timers: set[tuple[int, Window]] = set()

    def _context(self, window: Window) -> _HarnessContext:
        return _HarnessContext(self, window)

    def process_element(self, record: StreamRecord | Any, window: Window) -> TriggerResult:
        """``trigger.on_element`` for ``record`` in ``window``; a bare value is taken as a record without timestamp."""
        if not isinstance(record, StreamRecord):
            record = StreamRecord(record)
        return self.trigger.on_element(record.value, record.timestamp, window, self._context(window))

    def advance_watermark(self, timestamp: int) -> list[tuple[Window, TriggerResult]]:
        """Set the watermark, then fire every event-time timer <= it in time order (including timers the
        trigger registers while firing); returns ``(window, result)`` per fired timer."""
        self.current_watermark = timestamp
        return self._fire(self._event_time_timers, timestamp, event_time=True)

    def advance_processing_time(self, timestamp: int) -> list[tuple[Window, TriggerResult]]:
        """Set processing time, then fire every processing-time timer <= it, like :meth:`advance_watermark`."""
        self.current_processing_time = timestamp
        return self._fire(self._processing_time_timers, timestamp, event_time=False)

    def _fire(
        self, timers: set[tuple[int, Window]], up_to: int, event_time: bool
    ) -> list[tuple[Window, TriggerResult]]:
        results: list[tuple[Window, TriggerResult]] = []
        # A trigger may re-register the very timer that is firing (ContinuousProcessingTimeTrigger at the
        # window end does): in the window operator the window's cleanup then deletes it.  The harness has
        # no cleanup, so such a timer stays registered but fires at most once per advance call.
        fired: set[tuple[int, Window]] = set()
        while True:
            due = [t for t in timers if t[0] <= up_to and t not in fired]
            if not due:
                return results
            time, window = min(due, key=_timer_order)
            timers.discard((time, window))
            fired.add((time, window))
            ctx = self._context(window)
            if event_time:
                result = self.trigger.on_event_time(time, window, ctx)
            else:
                result = self.trigger.on_processing_time(time, window, ctx)
            results.append((window, result))

    def invoke_on_event_time(self, time: int, window: Window) -> TriggerResult:
        """Call ``on_event_time`` directly, as if a timer at ``time`` had fired (no timer needed)."""
        return self.trigger.on_event_time(time, window, self._context(window))

    def invoke_on_processing_time(self, time: int, window: Window) -> TriggerResult:
        return self.trigger.on_processing_time(time, window, self._context(window))

    def merge_windows(self, target_window: Window, merged_windows: Iterable[Window]) -> None:
        """``trigger.on_merge(target)`` with the merge context, then clear the merged windows' trigger
        state, in the order the window operator does it."""
        merged = list(merged_windows)
        if not self.trigger.can_merge():
            raise JobDefinitionError("trigger", self.trigger, "does not support merging windows (can_merge() is False)")
        self.trigger.on_merge(target_window, _HarnessContext(self, target_window, merged))
        for window in merged:
            self.clear_trigger_state(window)

    def clear_trigger_state(self, window: Window) -> None:
        self.trigger.clear(window, self._context(window))

    def num_state_entries(self, window: Window | None = None) -> int:
        """State entries of the harness key, in ``window`` or in all windows."""
        if window is None:
            return self.backend.num_entries()
        return sum(
            1
            for name in self.backend.state_names
            for _, namespace in self.backend.get_keys_and_namespaces(name)
            if namespace == window
        )

    def num_event_time_timers(self, window: Window | None = None) -> int:
        return sum(1 for _, w in self._event_time_timers if window is None or w == window)

    def num_processing_time_timers(self, window: Window | None = None) -> int:
        return sum(1 for _, w in self._processing_time_timers if window is None or w == window)


def _timer_order(timer: tuple[int, Window]) -> tuple[int, int, int]:
    # time first; ties between windows in window order (GlobalWindow has no start: it sorts first)
    time, window = timer
    return time, getattr(window, "start", 0), getattr(window, "end", 0)
