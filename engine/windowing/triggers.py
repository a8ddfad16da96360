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


class Trigger(ABC, Generic[W]):
    """Base for built-in and user triggers (PyFlink method names)."""

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
