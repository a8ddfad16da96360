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


class Evictor(ABC, Generic[W]):
    @abstractmethod
    def evict_before(self, elements: list[TimestampedValue], size: int, window: W, ctx: EvictorContext) -> None:
        """Remove elements (in place) before the window function runs."""

    @abstractmethod
    def evict_after(self, elements: list[TimestampedValue], size: int, window: W, ctx: EvictorContext) -> None:
        """Remove elements (in place) after the window function ran."""
