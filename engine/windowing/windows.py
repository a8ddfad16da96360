"""Windows are identifiers, not containers (seed 000): a window's elements live in keyed state
under the window as namespace.  ``TimeWindow`` is [start, end); ``GlobalWindow`` is the single
window of ``GlobalWindows``."""

from __future__ import annotations

from operator import itemgetter

from engine.elements import MAX_WATERMARK


class Window:
    """Base of window identifiers; every window answers the last timestamp it can hold."""

    __slots__ = ()

    def max_timestamp(self) -> int:
        raise NotImplementedError


class TimeWindow(tuple, Window):
    """The half-open interval [start, end) in ms.

    Immutable and ordered by (start, end) like the frozen, ordered dataclass it used to be, with the
    same ``repr``, but a ``tuple`` underneath: a window is the namespace of every state and timer
    lookup (several per element and window), and a tuple's hash and equality run in C, where a
    dataclass's generated ``__hash__``/``__eq__`` are Python calls and its frozen ``__init__`` goes
    through ``object.__setattr__``.  As a tuple, ``TimeWindow(0, 10) == (0, 10)``; Sluice never
    mixes plain tuples and TimeWindows as namespaces of one state, and the state codec refuses a
    window as a stored value, as it did before.
    """

    __slots__ = ()

    def __new__(cls, start: int, end: int) -> TimeWindow:
        return tuple.__new__(cls, (start, end))

    def __getnewargs__(self) -> tuple[int, int]:
        return (self[0], self[1])

    #: the window's first timestamp (ms, inclusive)
    start = property(itemgetter(0), doc="First timestamp of the window (ms, inclusive).")
    #: the window's end (ms, exclusive)
    end = property(itemgetter(1), doc="End of the window (ms, exclusive).")

    __match_args__ = ("start", "end")

    def __repr__(self) -> str:
        return f"TimeWindow(start={self[0]!r}, end={self[1]!r})"

    def max_timestamp(self) -> int:
        return self[1] - 1

    def intersects(self, other: TimeWindow) -> bool:
        """True if the windows overlap or touch, the rule session windows merge by."""
        return self[0] <= other[1] and self[1] >= other[0]

    def cover(self, other: TimeWindow) -> TimeWindow:
        """The smallest window spanning both."""
        return tuple.__new__(TimeWindow, (min(self[0], other[0]), max(self[1], other[1])))

    @staticmethod
    def get_window_start_with_offset(timestamp: int, offset: int, window_size: int) -> int:
        """Start of the window of ``window_size`` (shifted by ``offset``) that holds ``timestamp``.

        Python's ``%`` is a floor modulo, so unlike Java no correction is needed for
        negative timestamps: the result is always <= timestamp.
        """
        return timestamp - (timestamp - offset) % window_size


class GlobalWindow(Window):
    """The one window of GlobalWindows; it never ends on its own.

    A singleton: ``GlobalWindow()`` always returns the same instance, so equality and hashing are
    object identity, done in C (the dataclass it used to be compared its zero fields in a Python
    ``__eq__``/``__hash__``, once per state and timer lookup).  Every GlobalWindow was equal to
    every other before, and is the same object now, so no comparison changes.
    """

    __slots__ = ()
    _instance: GlobalWindow | None = None

    def __new__(cls) -> GlobalWindow:
        instance = GlobalWindow._instance
        if instance is None:
            instance = GlobalWindow._instance = object.__new__(cls)
        return instance

    def __reduce__(self) -> tuple[type, tuple]:
        return (GlobalWindow, ())

    def max_timestamp(self) -> int:
        return MAX_WATERMARK

    # ordered like the ordered dataclass with no fields: equal to itself, less than nothing
    def __lt__(self, other: object) -> bool:
        return False if type(other) is GlobalWindow else NotImplemented  # type: ignore[return-value]

    def __gt__(self, other: object) -> bool:
        return False if type(other) is GlobalWindow else NotImplemented  # type: ignore[return-value]

    def __le__(self, other: object) -> bool:
        return True if type(other) is GlobalWindow else NotImplemented  # type: ignore[return-value]

    def __ge__(self, other: object) -> bool:
        return True if type(other) is GlobalWindow else NotImplemented  # type: ignore[return-value]

    def __repr__(self) -> str:
        return "GlobalWindow"


GLOBAL_WINDOW = GlobalWindow()


def get() -> GlobalWindow:
    """PyFlink spells the singleton ``GlobalWindow.get()``; kept as a module function too."""
    return GLOBAL_WINDOW


GlobalWindow.get = staticmethod(get)  # type: ignore[attr-defined]

#: PyFlink's name for the windows of ``count_window``, so ``WindowFunction[tuple, tuple, str, CountWindow]``
#: ports.  Sluice builds count windows as Flink's Java API does (GlobalWindows with a CountTrigger, and a
#: CountEvictor when sliding; ARCHITECTURE section 2), so the window such a function sees is the
#: GlobalWindow, not PyFlink's numbered ``CountWindow(id)``.
CountWindow = GlobalWindow
