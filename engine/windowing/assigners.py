"""Window assigners: which window(s) an element belongs to (seed 000).

Per Flink's rule an assigner keeps no per-key state in fields: it may be
re-created or shared across keys (on Spark it is rebuilt in every task).
Built-in assigners are implemented below the base classes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, Callable, Collection, Generic, TypeVar

from engine.windowing.windows import Window

if TYPE_CHECKING:
    from engine.windowing.triggers import Trigger

W = TypeVar("W", bound=Window)


class WindowAssignerContext(ABC):
    """What an assigner may ask of the runtime: only the current processing time."""

    @abstractmethod
    def get_current_processing_time(self) -> int: ...


class WindowAssigner(ABC, Generic[W]):
    @abstractmethod
    def assign_windows(self, element: Any, timestamp: int | None, context: WindowAssignerContext) -> Collection[W]:
        """The windows ``element`` (with event timestamp ``timestamp``) belongs to."""

    @abstractmethod
    def get_default_trigger(self) -> Trigger:
        """The trigger used when the job sets none."""

    @abstractmethod
    def is_event_time(self) -> bool:
        """True if windows are closed by watermarks (event time), False for processing time."""

    def can_take_evictor(self) -> bool:
        """Whether ``.evictor()`` is meaningful with this assigner (every built-in says yes)."""
        return True


class MergingWindowAssigner(WindowAssigner[W]):
    """An assigner whose windows may merge (sessions)."""

    class MergeCallback(ABC, Generic[W]):  # noqa: D106 - Flink's nested interface
        @abstractmethod
        def merge(self, to_be_merged: Collection[W], merge_result: W) -> None: ...

    @abstractmethod
    def merge_windows(self, windows: Collection[W], callback: Callable[[Collection[W], W], None]) -> None:
        """Find windows that should merge and call ``callback(to_be_merged, merge_result)`` for each group."""
