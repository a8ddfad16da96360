"""Windows are identifiers, not containers (seed 000): a window's elements live in keyed state
under the window as namespace.  ``TimeWindow`` is [start, end); ``GlobalWindow`` is the single
window of ``GlobalWindows``."""

from __future__ import annotations

from dataclasses import dataclass

from engine.elements import MAX_WATERMARK


class Window:
    """Base of window identifiers; every window answers the last timestamp it can hold."""

    __slots__ = ()

    def max_timestamp(self) -> int:
        raise NotImplementedError


@dataclass(frozen=True, slots=True, order=True)
class TimeWindow(Window):
    """The half-open interval [start, end) in ms."""

    start: int
    end: int

    def max_timestamp(self) -> int:
        return self.end - 1

    def intersects(self, other: TimeWindow) -> bool:
        """True if the windows overlap or touch, the rule session windows merge by."""
        return self.start <= other.end and self.end >= other.start

    def cover(self, other: TimeWindow) -> TimeWindow:
        """The smallest window spanning both."""
        return TimeWindow(min(self.start, other.start), max(self.end, other.end))

    @staticmethod
    def get_window_start_with_offset(timestamp: int, offset: int, window_size: int) -> int:
        """Start of the window of ``window_size`` (shifted by ``offset``) that holds ``timestamp``.

        Python's ``%`` is a floor modulo, so unlike Java no correction is needed for
        negative timestamps: the result is always <= timestamp.
        """
        return timestamp - (timestamp - offset) % window_size


@dataclass(frozen=True, slots=True, order=True)
class GlobalWindow(Window):
    """The one window of GlobalWindows; it never ends on its own."""

    def max_timestamp(self) -> int:
        return MAX_WATERMARK

    def __repr__(self) -> str:
        return "GlobalWindow"


GLOBAL_WINDOW = GlobalWindow()


def get() -> GlobalWindow:
    """PyFlink spells the singleton ``GlobalWindow.get()``; kept as a module function too."""
    return GLOBAL_WINDOW


GlobalWindow.get = staticmethod(get)  # type: ignore[attr-defined]
