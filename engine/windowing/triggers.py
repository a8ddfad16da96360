"""Triggers decide when a window is evaluated and when it is purged (seed 000).

Every window has its own trigger instance state (kept in keyed state through the
context, never in trigger fields) and its own timers.  Built-in triggers are
implemented below the base classes.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from typing import Any, Generic, TypeVar

from engine.state.descriptors import State, StateDescriptor
from engine.windowing.windows import Window

T = TypeVar("T")
W = TypeVar("W", bound=Window)


class TriggerResult(enum.Enum):
    """What the window operator does after asking a trigger (seed 000)."""

    CONTINUE = (False, False)
    FIRE = (True, False)
    PURGE = (False, True)
    FIRE_AND_PURGE = (True, True)

    def is_fire(self) -> bool:
        return self.value[0]

    def is_purge(self) -> bool:
        return self.value[1]


class TriggerContext(ABC):
    """The runtime services a trigger may use, scoped to the current key and window."""

    @abstractmethod
    def get_current_processing_time(self) -> int: ...

    @abstractmethod
    def get_current_watermark(self) -> int: ...

    @abstractmethod
    def register_processing_time_timer(self, time: int) -> None: ...

    @abstractmethod
    def register_event_time_timer(self, time: int) -> None: ...

    @abstractmethod
    def delete_processing_time_timer(self, time: int) -> None: ...

    @abstractmethod
    def delete_event_time_timer(self, time: int) -> None: ...

    @abstractmethod
    def get_partitioned_state(self, state_descriptor: StateDescriptor) -> State:
        """State scoped to the current key and the window the trigger is called for."""


class OnMergeContext(TriggerContext):
    """Context passed to :meth:`Trigger.on_merge`."""

    @abstractmethod
    def merge_partitioned_state(self, state_descriptor: StateDescriptor) -> None:
        """Merge the named state of all merged windows into the result window (reducing/aggregating/list state)."""


class Trigger(ABC, Generic[T, W]):
    """Base for built-in and user triggers (PyFlink method names); ``Trigger[T, W]`` as in PyFlink (T the
    element type, W the window type)."""

    @abstractmethod
    def on_element(self, element: Any, timestamp: int | None, window: W, ctx: TriggerContext) -> TriggerResult: ...

    @abstractmethod
    def on_processing_time(self, time: int, window: W, ctx: TriggerContext) -> TriggerResult: ...

    @abstractmethod
    def on_event_time(self, time: int, window: W, ctx: TriggerContext) -> TriggerResult: ...

    def can_merge(self) -> bool:
        """True if this trigger supports merging windows (sessions)."""
        return False

    def on_merge(self, window: W, ctx: OnMergeContext) -> None:
        raise NotImplementedError(f"{type(self).__name__} does not support merging windows; can_merge() is False")

    @abstractmethod
    def clear(self, window: W, ctx: TriggerContext) -> None:
        """Remove every timer and state entry this trigger holds for ``window``."""


# ---------------------------------------------------------------------------------------------
# Built-in triggers (Flink Java semantics).  Flink's rule, word for word: a trigger keeps no state
# in fields "since they can be re-created or reused for different keys"; fields below are
# configuration only, per-window state lives in ctx.get_partitioned_state(descriptor).
# ---------------------------------------------------------------------------------------------

from typing import Callable  # noqa: E402

from engine.durations import SizeLike, positive_millis  # noqa: E402
from engine.elements import MAX_WATERMARK  # noqa: E402
from engine.errors import JobDefinitionError  # noqa: E402
from engine.state.descriptors import ReducingStateDescriptor, ValueStateDescriptor  # noqa: E402


def _sum(a: int, b: int) -> int:
    return a + b


def _min(a: int, b: int) -> int:
    return a if a <= b else b


def _java_floor_to_interval(timestamp: int, interval: int) -> int:
    """``timestamp - (timestamp % interval)`` with Java's truncating ``%`` (Flink's continuous triggers):
    rounds toward zero, so a negative timestamp's first fire lands on the interval boundary above zero-ward."""
    remainder = abs(timestamp) % interval
    return timestamp - (remainder if timestamp >= 0 else -remainder)


class EventTimeTrigger(Trigger):
    """Fires once when the watermark passes the window's end (the default of event-time assigners).

    An element arriving when the watermark is already past the window (allowed lateness) fires
    at once, so every late element updates the result.
    """

    @staticmethod
    def create() -> EventTimeTrigger:
        return EventTimeTrigger()

    def on_element(self, element: Any, timestamp: int | None, window: Window, ctx: TriggerContext) -> TriggerResult:
        if window.max_timestamp() <= ctx.get_current_watermark():
            return TriggerResult.FIRE
        ctx.register_event_time_timer(window.max_timestamp())
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return TriggerResult.FIRE if time == window.max_timestamp() else TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: Window, ctx: OnMergeContext) -> None:
        # only register a timer if the watermark is not yet past the end of the merged window;
        # otherwise the merged window fires on its next element (Flink, FLINK-3976)
        if window.max_timestamp() > ctx.get_current_watermark():
            ctx.register_event_time_timer(window.max_timestamp())

    def clear(self, window: Window, ctx: TriggerContext) -> None:
        ctx.delete_event_time_timer(window.max_timestamp())

    def __repr__(self) -> str:
        return "EventTimeTrigger()"


class ProcessingTimeTrigger(Trigger):
    """Fires once when processing time reaches the window's end (default of processing-time assigners).

    Seed 000 shows the 2016 version returning FIRE_AND_PURGE at ``window.end``; current Flink fires
    at ``max_timestamp()`` and leaves purging to the window's cleanup timer, as here.
    """

    @staticmethod
    def create() -> ProcessingTimeTrigger:
        return ProcessingTimeTrigger()

    def on_element(self, element: Any, timestamp: int | None, window: Window, ctx: TriggerContext) -> TriggerResult:
        ctx.register_processing_time_timer(window.max_timestamp())
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return TriggerResult.FIRE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: Window, ctx: OnMergeContext) -> None:
        if window.max_timestamp() > ctx.get_current_processing_time():
            ctx.register_processing_time_timer(window.max_timestamp())

    def clear(self, window: Window, ctx: TriggerContext) -> None:
        ctx.delete_processing_time_timer(window.max_timestamp())

    def __repr__(self) -> str:
        return "ProcessingTimeTrigger()"


class CountTrigger(Trigger):
    """Fires each time ``max_count`` elements have arrived in the window since the last fire (seed 000:
    the trigger of count windows); the count lives in the ReducingState "count"."""

    def __init__(self, max_count: int) -> None:
        if isinstance(max_count, bool) or not isinstance(max_count, int) or max_count < 1:
            raise JobDefinitionError("max_count", max_count, "must be an int >= 1")
        self.max_count = max_count
        self.state_descriptor = ReducingStateDescriptor("count", reduce_function=_sum)

    @staticmethod
    def of(max_count: int) -> CountTrigger:
        return CountTrigger(max_count)

    def on_element(self, element: Any, timestamp: int | None, window: Window, ctx: TriggerContext) -> TriggerResult:
        count = ctx.get_partitioned_state(self.state_descriptor)
        count.add(1)  # type: ignore[attr-defined]
        if count.get() >= self.max_count:  # type: ignore[attr-defined]
            count.clear()
            return TriggerResult.FIRE
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: Window, ctx: OnMergeContext) -> None:
        ctx.merge_partitioned_state(self.state_descriptor)

    def clear(self, window: Window, ctx: TriggerContext) -> None:
        ctx.get_partitioned_state(self.state_descriptor).clear()

    def __repr__(self) -> str:
        return f"CountTrigger({self.max_count})"


class PurgingTrigger(Trigger):
    """Turns every FIRE of the nested trigger into FIRE_AND_PURGE (seed 000: tumbling count windows
    are ``PurgingTrigger.of(CountTrigger.of(size))``)."""

    def __init__(self, nested_trigger: Trigger) -> None:
        if not isinstance(nested_trigger, Trigger):
            raise JobDefinitionError("nested_trigger", nested_trigger, "must be a Trigger")
        self.nested_trigger = nested_trigger

    @staticmethod
    def of(nested_trigger: Trigger) -> PurgingTrigger:
        return PurgingTrigger(nested_trigger)

    @staticmethod
    def _purging(result: TriggerResult) -> TriggerResult:
        return TriggerResult.FIRE_AND_PURGE if result.is_fire() else result

    def on_element(self, element: Any, timestamp: int | None, window: Window, ctx: TriggerContext) -> TriggerResult:
        return self._purging(self.nested_trigger.on_element(element, timestamp, window, ctx))

    def on_event_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return self._purging(self.nested_trigger.on_event_time(time, window, ctx))

    def on_processing_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return self._purging(self.nested_trigger.on_processing_time(time, window, ctx))

    def can_merge(self) -> bool:
        return self.nested_trigger.can_merge()

    def on_merge(self, window: Window, ctx: OnMergeContext) -> None:
        self.nested_trigger.on_merge(window, ctx)

    def clear(self, window: Window, ctx: TriggerContext) -> None:
        self.nested_trigger.clear(window, ctx)

    def __repr__(self) -> str:
        return f"PurgingTrigger({self.nested_trigger!r})"


class ContinuousEventTimeTrigger(Trigger):
    """Fires every ``interval`` of event time while the window is open, and at the window's end.

    Current Flink semantics (which PyFlink lacks, ARCHITECTURE section 2): the next fire time
    is ``min(t + interval, window.max_timestamp())`` so the last periodic fire cannot be lost
    beyond the window's end, the window's own end timer is registered on every element, and
    ``on_event_time`` fires at ``max_timestamp()`` regardless of the fire-time state.  The pending
    fire time lives in the ReducingState "fire-time" (min on merge).  The first fire is aligned
    with Java's truncating ``%`` (``ts - ts % interval``).
    """

    def __init__(self, interval_ms: int) -> None:
        self.interval_ms = interval_ms
        self.state_descriptor = ReducingStateDescriptor("fire-time", reduce_function=_min)

    @staticmethod
    def of(interval: SizeLike) -> ContinuousEventTimeTrigger:
        return ContinuousEventTimeTrigger(positive_millis(interval, "interval"))

    def on_element(self, element: Any, timestamp: int | None, window: Window, ctx: TriggerContext) -> TriggerResult:
        if window.max_timestamp() <= ctx.get_current_watermark():
            return TriggerResult.FIRE  # the watermark is already past the window: fire immediately
        ctx.register_event_time_timer(window.max_timestamp())
        fire_time = ctx.get_partitioned_state(self.state_descriptor)
        if fire_time.get() is None:  # type: ignore[attr-defined]
            if timestamp is None:
                raise JobDefinitionError(
                    "timestamp", None, "must be set for ContinuousEventTimeTrigger",
                    "Assign timestamps with assign_timestamps_and_watermarks",
                )
            self._register_next_fire_timestamp(
                _java_floor_to_interval(timestamp, self.interval_ms), window, ctx, fire_time
            )
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        if time == window.max_timestamp():
            return TriggerResult.FIRE
        fire_time = ctx.get_partitioned_state(self.state_descriptor)
        if fire_time.get() == time:  # type: ignore[attr-defined]
            fire_time.clear()
            self._register_next_fire_timestamp(time, window, ctx, fire_time)
            return TriggerResult.FIRE
        return TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def _register_next_fire_timestamp(self, time: int, window: Window, ctx: TriggerContext, fire_time: State) -> None:
        next_fire = time + self.interval_ms
        end = window.max_timestamp()
        if time < end < next_fire:  # never at or before ``time``: that timer would be due again at once
            next_fire = end
        fire_time.add(next_fire)  # type: ignore[attr-defined]
        ctx.register_event_time_timer(next_fire)

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: Window, ctx: OnMergeContext) -> None:
        ctx.merge_partitioned_state(self.state_descriptor)
        next_fire = ctx.get_partitioned_state(self.state_descriptor).get()  # type: ignore[attr-defined]
        if next_fire is not None:
            ctx.register_event_time_timer(next_fire)

    def clear(self, window: Window, ctx: TriggerContext) -> None:
        fire_time = ctx.get_partitioned_state(self.state_descriptor)
        timestamp = fire_time.get()  # type: ignore[attr-defined]
        if timestamp is not None:
            ctx.delete_event_time_timer(timestamp)
            fire_time.clear()

    def __repr__(self) -> str:
        return f"ContinuousEventTimeTrigger({self.interval_ms})"


class ContinuousProcessingTimeTrigger(Trigger):
    """Fires every ``interval`` of processing time, aligned to multiples of the interval; the next fire
    time is kept in ReducingState "fire-time".

    While the window's ``max_timestamp()`` is still ahead of the current fire time, the next fire time is
    capped at it (current Flink: a processing-time window fires at its end).  Once it is not, the next fire
    time is an interval later: on an event-time window the end is an event time, usually far behind
    processing time, and Flink's cap there re-registers a timer at the same past time without end
    (FLINK-35069).  The window is then fired every interval until its own cleanup timer purges it.
    """

    def __init__(self, interval_ms: int) -> None:
        self.interval_ms = interval_ms
        self.state_descriptor = ReducingStateDescriptor("fire-time", reduce_function=_min)

    @staticmethod
    def of(interval: SizeLike) -> ContinuousProcessingTimeTrigger:
        return ContinuousProcessingTimeTrigger(positive_millis(interval, "interval"))

    def on_element(self, element: Any, timestamp: int | None, window: Window, ctx: TriggerContext) -> TriggerResult:
        fire_time = ctx.get_partitioned_state(self.state_descriptor)
        now = ctx.get_current_processing_time()
        if fire_time.get() is None:  # type: ignore[attr-defined]
            self._register_next_fire_timestamp(_java_floor_to_interval(now, self.interval_ms), window, ctx, fire_time)
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        fire_time = ctx.get_partitioned_state(self.state_descriptor)
        if fire_time.get() == time:  # type: ignore[attr-defined]
            fire_time.clear()
            self._register_next_fire_timestamp(time, window, ctx, fire_time)
            return TriggerResult.FIRE
        return TriggerResult.CONTINUE

    def _register_next_fire_timestamp(self, time: int, window: Window, ctx: TriggerContext, fire_time: State) -> None:
        next_fire = time + self.interval_ms
        end = window.max_timestamp()
        if time < end < next_fire:  # never at or before ``time``: that timer would be due again at once
            next_fire = end
        fire_time.add(next_fire)  # type: ignore[attr-defined]
        ctx.register_processing_time_timer(next_fire)

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: Window, ctx: OnMergeContext) -> None:
        ctx.merge_partitioned_state(self.state_descriptor)
        next_fire = ctx.get_partitioned_state(self.state_descriptor).get()  # type: ignore[attr-defined]
        if next_fire is not None:
            ctx.register_processing_time_timer(next_fire)

    def clear(self, window: Window, ctx: TriggerContext) -> None:
        fire_time = ctx.get_partitioned_state(self.state_descriptor)
        timestamp = fire_time.get()  # type: ignore[attr-defined]
        if timestamp is not None:
            ctx.delete_processing_time_timer(timestamp)
            fire_time.clear()

    def __repr__(self) -> str:
        return f"ContinuousProcessingTimeTrigger({self.interval_ms})"


class DeltaFunction(ABC):
    """Distance between two elements, for DeltaTrigger and DeltaEvictor (Flink's DeltaFunction)."""

    @abstractmethod
    def get_delta(self, old_data_point: Any, new_data_point: Any) -> float: ...


def as_delta_function(delta_function: Any, parameter: str = "delta_function") -> Callable[[Any, Any], float]:
    """Accept a DeltaFunction or a plain callable ``(old, new) -> float``."""
    if isinstance(delta_function, DeltaFunction):
        return delta_function.get_delta
    if callable(delta_function):
        return delta_function
    raise JobDefinitionError(parameter, delta_function, "must be a DeltaFunction or a callable (old, new) -> float")


class DeltaTrigger(Trigger):
    """Fires when ``delta_function(last_fired_element, element) > threshold``; the element that caused
    the last fire (initially the window's first element) lives in ValueState "last-element".

    Elements must be storable state values (snapshots persist the last element).
    """

    def __init__(self, threshold: float, delta_function: Any) -> None:
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
            raise JobDefinitionError("threshold", threshold, "must be a number")
        self.threshold = threshold
        self.delta_function = as_delta_function(delta_function)
        self.state_descriptor = ValueStateDescriptor("last-element")

    @staticmethod
    def of(threshold: float, delta_function: Any, state_serializer: Any = None) -> DeltaTrigger:
        """``state_serializer`` is accepted for PyFlink/Java signature compatibility and ignored (state is JSON)."""
        return DeltaTrigger(threshold, delta_function)

    def on_element(self, element: Any, timestamp: int | None, window: Window, ctx: TriggerContext) -> TriggerResult:
        last = ctx.get_partitioned_state(self.state_descriptor)
        last_element = last.value()  # type: ignore[attr-defined]
        if last_element is None:
            last.update(element)  # type: ignore[attr-defined]
            return TriggerResult.CONTINUE
        if self.delta_function(last_element, element) > self.threshold:
            last.update(element)  # type: ignore[attr-defined]
            return TriggerResult.FIRE
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def clear(self, window: Window, ctx: TriggerContext) -> None:
        ctx.get_partitioned_state(self.state_descriptor).clear()

    def __repr__(self) -> str:
        return f"DeltaTrigger({self.threshold})"


class NeverTrigger(Trigger):
    """GlobalWindows' default: never fires (Flink's GlobalWindows.NeverTrigger); set a trigger to get output."""

    def on_element(self, element: Any, timestamp: int | None, window: Window, ctx: TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_merge(self, window: Window, ctx: OnMergeContext) -> None:
        pass

    def clear(self, window: Window, ctx: TriggerContext) -> None:
        pass

    def __repr__(self) -> str:
        return "NeverTrigger()"


class EndOfStreamTrigger(Trigger):
    """Fires once when the watermark reaches the global window's end, i.e. at end of input
    (MAX_WATERMARK; Flink's GlobalWindows.EndOfStreamTrigger)."""

    def on_element(self, element: Any, timestamp: int | None, window: Window, ctx: TriggerContext) -> TriggerResult:
        ctx.register_event_time_timer(window.max_timestamp())
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return TriggerResult.FIRE if time == window.max_timestamp() == MAX_WATERMARK else TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def clear(self, window: Window, ctx: TriggerContext) -> None:
        ctx.delete_event_time_timer(window.max_timestamp())

    def __repr__(self) -> str:
        return "EndOfStreamTrigger()"
