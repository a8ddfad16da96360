"""Evictors remove elements from a fired window before and/or after the window function (seed 000).

An evictor sees the window's elements as a mutable list of
:class:`TimestampedValue` in arrival order and removes entries in place.
Built-in evictors are implemented below the base classes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from engine.windowing.windows import Window

T = TypeVar("T")
W = TypeVar("W", bound=Window)


@dataclass(slots=True)
class TimestampedValue:
    value: Any
    timestamp: int | None = None

    def has_timestamp(self) -> bool:
        return self.timestamp is not None

    def get_value(self) -> Any:
        return self.value

    def get_timestamp(self) -> int | None:
        return self.timestamp


class EvictorContext(ABC):
    @abstractmethod
    def get_current_processing_time(self) -> int: ...

    @abstractmethod
    def get_current_watermark(self) -> int: ...


class Evictor(ABC, Generic[T, W]):
    """Base of built-in and user evictors; ``Evictor[T, W]`` as Flink's ``Evictor<T, W>``."""

    @abstractmethod
    def evict_before(self, elements: list[TimestampedValue], size: int, window: W, ctx: EvictorContext) -> None:
        """Remove elements (in place) before the window function runs."""

    @abstractmethod
    def evict_after(self, elements: list[TimestampedValue], size: int, window: W, ctx: EvictorContext) -> None:
        """Remove elements (in place) after the window function ran."""


# ---------------------------------------------------------------------------------------------
# Built-in evictors (Flink Java semantics).  Seed 000: "the Evictor walks the window's element
# list and decides how many of the first elements to remove"; with an evictor every window keeps
# all its elements (no incremental aggregation).
# ---------------------------------------------------------------------------------------------

from typing import Callable  # noqa: E402

from engine.durations import SizeLike, positive_millis  # noqa: E402
from engine.errors import JobDefinitionError  # noqa: E402
from engine.windowing.triggers import as_delta_function  # noqa: E402


class CountEvictor(Evictor):
    """Keeps only the last ``max_count`` elements (seed 000: sliding count windows are
    ``GlobalWindows + CountEvictor.of(size) + CountTrigger.of(slide)``)."""

    def __init__(self, max_count: int, do_evict_after: bool = False) -> None:
        if isinstance(max_count, bool) or not isinstance(max_count, int) or max_count < 0:
            raise JobDefinitionError("max_count", max_count, "must be an int >= 0")
        self.max_count = max_count
        self.do_evict_after = bool(do_evict_after)

    @staticmethod
    def of(max_count: int, do_evict_after: bool = False) -> CountEvictor:
        return CountEvictor(max_count, do_evict_after)

    def evict_before(self, elements: list[TimestampedValue], size: int, window: Window, ctx: EvictorContext) -> None:
        if not self.do_evict_after:
            self._evict(elements, size)

    def evict_after(self, elements: list[TimestampedValue], size: int, window: Window, ctx: EvictorContext) -> None:
        if self.do_evict_after:
            self._evict(elements, size)

    def _evict(self, elements: list[TimestampedValue], size: int) -> None:
        # Flink removes the first (size - max_count) elements of the iteration
        if size <= self.max_count:
            return
        del elements[: size - self.max_count]

    def __repr__(self) -> str:
        return f"CountEvictor({self.max_count}, do_evict_after={self.do_evict_after})"


class TimeEvictor(Evictor):
    """Keeps elements with ``timestamp > max_timestamp - window_size`` where max_timestamp is the
    largest timestamp among the window's elements.

    As in Flink, nothing is evicted when the first element carries no timestamp; elements without
    a timestamp further on are kept and do not count for the maximum (Flink would fail on them).
    """

    def __init__(self, window_size_ms: int, do_evict_after: bool = False) -> None:
        self.window_size_ms = window_size_ms
        self.do_evict_after = bool(do_evict_after)

    @staticmethod
    def of(window_size: SizeLike, do_evict_after: bool = False) -> TimeEvictor:
        return TimeEvictor(positive_millis(window_size, "window_size"), do_evict_after)

    def evict_before(self, elements: list[TimestampedValue], size: int, window: Window, ctx: EvictorContext) -> None:
        if not self.do_evict_after:
            self._evict(elements)

    def evict_after(self, elements: list[TimestampedValue], size: int, window: Window, ctx: EvictorContext) -> None:
        if self.do_evict_after:
            self._evict(elements)

    def _evict(self, elements: list[TimestampedValue]) -> None:
        if not elements or not elements[0].has_timestamp():
            return
        current_time = max(e.timestamp for e in elements if e.timestamp is not None)
        cutoff = current_time - self.window_size_ms
        elements[:] = [e for e in elements if e.timestamp is None or e.timestamp > cutoff]

    def __repr__(self) -> str:
        return f"TimeEvictor({self.window_size_ms}, do_evict_after={self.do_evict_after})"


class DeltaEvictor(Evictor):
    """Removes every element whose ``delta_function(element, last_element) >= threshold``, the last
    element being the window's most recent one (Flink's DeltaEvictor)."""

    def __init__(self, threshold: float, delta_function: Callable[[Any, Any], float], do_evict_after: bool = False):
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
            raise JobDefinitionError("threshold", threshold, "must be a number")
        self.threshold = threshold
        self.delta_function = as_delta_function(delta_function)
        self.do_evict_after = bool(do_evict_after)

    @staticmethod
    def of(threshold: float, delta_function: Any, do_evict_after: bool = False) -> DeltaEvictor:
        return DeltaEvictor(threshold, delta_function, do_evict_after)

    def evict_before(self, elements: list[TimestampedValue], size: int, window: Window, ctx: EvictorContext) -> None:
        if not self.do_evict_after:
            self._evict(elements)

    def evict_after(self, elements: list[TimestampedValue], size: int, window: Window, ctx: EvictorContext) -> None:
        if self.do_evict_after:
            self._evict(elements)

    def _evict(self, elements: list[TimestampedValue]) -> None:
        if not elements:
            return
        last = elements[-1].value
        delta = self.delta_function
        elements[:] = [e for e in elements if not delta(e.value, last) >= self.threshold]

    def __repr__(self) -> str:
        return f"DeltaEvictor({self.threshold}, do_evict_after={self.do_evict_after})"
