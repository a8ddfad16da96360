"""Window assigners: which window(s) an element belongs to (seed 000).

Per Flink's rule an assigner keeps no per-key state in fields: it may be
re-created or shared across keys (on Spark it is rebuilt in every task).
Built-in assigners are implemented below the base classes.
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, Callable, Collection, Generic, TypeVar

from engine.windowing.windows import Window

if TYPE_CHECKING:
    from engine.windowing.triggers import Trigger

T = TypeVar("T")
W = TypeVar("W", bound=Window)


class WindowAssignerContext(ABC):
    """What an assigner may ask of the runtime: only the current processing time."""

    @abstractmethod
    def get_current_processing_time(self) -> int: ...


class WindowAssigner(ABC, Generic[T, W]):
    """Base of built-in and user assigners; ``WindowAssigner[T, W]`` as in PyFlink (T the element type,
    W the window type)."""

    @abstractmethod
    def assign_windows(self, element: Any, timestamp: int | None, context: WindowAssignerContext) -> Collection[W]:
        """The windows ``element`` (with event timestamp ``timestamp``) belongs to."""

    @abstractmethod
    def get_default_trigger(self, env: Any = None) -> Trigger:
        """The trigger used when the job sets none.

        PyFlink passes the StreamExecutionEnvironment (``get_default_trigger(self, env)``), so user
        assigners written for PyFlink port; Sluice passes it too (see :func:`default_trigger_of`), and
        the built-ins ignore it.
        """

    @abstractmethod
    def is_event_time(self) -> bool:
        """True if windows are closed by watermarks (event time), False for processing time."""

    def can_take_evictor(self) -> bool:
        """Whether ``.evictor()`` is meaningful with this assigner (every built-in says yes)."""
        return True


class MergingWindowAssigner(WindowAssigner[T, W]):
    """An assigner whose windows may merge (sessions)."""

    class MergeCallback(ABC, Generic[W]):  # noqa: D106 - Flink's nested interface
        @abstractmethod
        def merge(self, to_be_merged: Collection[W], merge_result: W) -> None: ...

    @abstractmethod
    def merge_windows(self, windows: Collection[W], callback: Callable[[Collection[W], W], None]) -> None:
        """Find windows that should merge and call ``callback(to_be_merged, merge_result)`` for each group."""


def default_trigger_of(assigner: WindowAssigner, env: Any = None) -> Trigger:
    """``assigner``'s default trigger, asked the way its ``get_default_trigger`` is written: with the
    environment (PyFlink's signature) or, for an assigner written before Sluice passed it, without."""
    method = assigner.get_default_trigger
    try:
        inspect.signature(method).bind(env)
    except TypeError:
        return method()
    except ValueError:  # no signature to inspect (a builtin): ask PyFlink's way
        pass
    return method(env)


# ---------------------------------------------------------------------------------------------
# Built-in assigners (Flink Java semantics; seed 000 "Time Window / Session Window / Count Window")
# ---------------------------------------------------------------------------------------------

import dataclasses as _dc  # noqa: E402 - the built-ins below are kept apart from the bases above

from engine.durations import SIZE_HINT, SizeLike, positive_millis, to_millis  # noqa: E402
from engine.errors import JobDefinitionError  # noqa: E402
from engine.windowing.triggers import EndOfStreamTrigger, EventTimeTrigger, NeverTrigger, ProcessingTimeTrigger  # noqa: E402
from engine.windowing.windows import GLOBAL_WINDOW, GlobalWindow, TimeWindow  # noqa: E402

_MISSING_TIMESTAMP_HINT = (
    "Record has no timestamp, so an event-time window cannot place it. Did you forget "
    "stream.assign_timestamps_and_watermarks(WatermarkStrategy...with_timestamp_assigner(...))? "
    "For windows by arrival time use a processing-time assigner instead"
)


def _require_timestamp(assigner: str, timestamp: int | None, element: Any) -> int:
    if timestamp is None:
        raise JobDefinitionError(f"{assigner}: timestamp of {element!r}", None, "must be set", _MISSING_TIMESTAMP_HINT)
    return timestamp


def _check_offset(assigner: str, offset_ms: int, bound_ms: int, bound_name: str, offset: Any) -> None:
    # Flink: "TumblingEventTimeWindows parameters must satisfy abs(offset) < size" (sliding: < slide)
    if abs(offset_ms) >= bound_ms:
        raise JobDefinitionError(
            "offset",
            offset,
            f"must satisfy abs(offset) < {bound_name} ({bound_ms} ms) for {assigner}",
            "An offset only shifts window boundaries within one period (e.g. Time.hours(-8) for UTC+8 days)",
        )


def _check_built_ms(where: str, parameter: str, value: Any) -> None:
    """An assigner built directly (not through ``of``/``with_gap``) takes ints of ms, each > 0 (Flink checks its
    constructors' arguments too), so a bad one fails at build time, not on the first record."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise JobDefinitionError(parameter, value, f"must be an int of milliseconds in {where}",
                                 f"Or build it with {where.split('(')[0]}.of(Time.seconds(...)) / with_gap(...)")
    if value <= 0:
        raise JobDefinitionError(parameter, value, f"must be greater than 0 ms in {where}", SIZE_HINT)


def _check_built(where: str, size_ms: Any, offset_ms: Any, slide_ms: Any = None) -> None:
    """:func:`_check_built_ms` for a tumbling (``slide_ms`` None) or sliding assigner, and its offset rule."""
    _check_built_ms(where, "size_ms", size_ms)
    if slide_ms is not None:
        _check_built_ms(where, "slide_ms", slide_ms)
    if isinstance(offset_ms, bool) or not isinstance(offset_ms, int):
        raise JobDefinitionError("offset_ms", offset_ms, f"must be an int of milliseconds in {where}")
    bound, name = (size_ms, "size") if slide_ms is None else (slide_ms, "slide")
    _check_offset(where.split("(")[0], offset_ms, bound, name, offset_ms)


def merge_time_windows(windows: Collection[TimeWindow], callback: Any) -> None:
    """Flink's ``TimeWindow.mergeWindows``: sort by start, sweep, and merge every run of intersecting
    windows into their cover; ``callback(to_be_merged, merge_result)`` is called for each run of 2 or more.

    ``callback`` is a callable or a :class:`MergingWindowAssigner.MergeCallback`.
    """
    merged: list[tuple[TimeWindow, list[TimeWindow]]] = []
    current: tuple[TimeWindow, list[TimeWindow]] | None = None
    for candidate in sorted(windows, key=lambda w: w.start):
        if current is None:
            current = (candidate, [candidate])
        elif current[0].intersects(candidate):
            current = (current[0].cover(candidate), current[1] + [candidate])
        else:
            merged.append(current)
            current = (candidate, [candidate])
    if current is not None:
        merged.append(current)
    call = callback.merge if hasattr(callback, "merge") else callback
    for result, members in merged:
        if len(members) > 1:
            call(members, result)


@_dc.dataclass(frozen=True, slots=True)
class TumblingEventTimeWindows(WindowAssigner[Any, TimeWindow]):
    """Fixed-size, non-overlapping event-time windows [start, start + size), start = ts - (ts - offset) mod size.

    ``offset`` shifts the boundaries (e.g. ``Time.hours(-8)`` for days in UTC+8); |offset| < size.
    Negative timestamps are placed with a floor modulo, as Flink does since 1.7.
    """

    size_ms: int
    offset_ms: int = 0

    def __post_init__(self) -> None:
        _check_built("TumblingEventTimeWindows(size_ms, offset_ms)", self.size_ms, self.offset_ms)

    @staticmethod
    def of(size: SizeLike, offset: SizeLike = 0) -> TumblingEventTimeWindows:
        where = "TumblingEventTimeWindows.of(size, offset)"
        size_ms = positive_millis(size, "size", where=where)
        offset_ms = to_millis(offset, "offset", where=where)
        _check_offset("TumblingEventTimeWindows", offset_ms, size_ms, "size", offset)
        return TumblingEventTimeWindows(size_ms, offset_ms)

    def assign_windows(self, element: Any, timestamp: int | None, context: WindowAssignerContext) -> list[TimeWindow]:
        ts = _require_timestamp("TumblingEventTimeWindows", timestamp, element)
        start = ts - (ts - self.offset_ms) % self.size_ms
        return [TimeWindow(start, start + self.size_ms)]

    def get_default_trigger(self, env: Any = None) -> Trigger:
        return EventTimeTrigger.create()

    def is_event_time(self) -> bool:
        return True

    def get_size(self) -> int:
        return self.size_ms

    def __str__(self) -> str:
        return f"TumblingEventTimeWindows({self.size_ms})"


@_dc.dataclass(frozen=True, slots=True)
class SlidingEventTimeWindows(WindowAssigner[Any, TimeWindow]):
    """Windows of ``size`` starting every ``slide`` (an element falls into ceil(size / slide) windows,
    seed 000 "Sliding Time Window"); |offset| < slide, as Flink requires."""

    size_ms: int
    slide_ms: int
    offset_ms: int = 0

    def __post_init__(self) -> None:
        _check_built("SlidingEventTimeWindows(size_ms, slide_ms, offset_ms)", self.size_ms, self.offset_ms,
                     self.slide_ms)

    @staticmethod
    def of(size: SizeLike, slide: SizeLike, offset: SizeLike = 0) -> SlidingEventTimeWindows:
        where = "SlidingEventTimeWindows.of(size, slide, offset)"
        size_ms = positive_millis(size, "size", where=where)
        slide_ms = positive_millis(slide, "slide", where=where)
        offset_ms = to_millis(offset, "offset", where=where)
        _check_offset("SlidingEventTimeWindows", offset_ms, slide_ms, "slide", offset)
        return SlidingEventTimeWindows(size_ms, slide_ms, offset_ms)

    def assign_windows(self, element: Any, timestamp: int | None, context: WindowAssignerContext) -> list[TimeWindow]:
        ts = _require_timestamp("SlidingEventTimeWindows", timestamp, element)
        return _sliding_windows(ts, self.size_ms, self.slide_ms, self.offset_ms)

    def get_default_trigger(self, env: Any = None) -> Trigger:
        return EventTimeTrigger.create()

    def is_event_time(self) -> bool:
        return True

    def get_size(self) -> int:
        return self.size_ms

    def get_slide(self) -> int:
        return self.slide_ms

    def __str__(self) -> str:
        return f"SlidingEventTimeWindows({self.size_ms}, {self.slide_ms})"


def _sliding_windows(ts: int, size_ms: int, slide_ms: int, offset_ms: int) -> list[TimeWindow]:
    # Flink: lastStart = getWindowStartWithOffset(ts, offset, slide);
    #        for (start = lastStart; start > ts - size; start -= slide) add [start, start + size)
    last_start = ts - (ts - offset_ms) % slide_ms
    return [TimeWindow(start, start + size_ms) for start in range(last_start, ts - size_ms, -slide_ms)]


@_dc.dataclass(frozen=True, slots=True)
class TumblingProcessingTimeWindows(WindowAssigner[Any, TimeWindow]):
    """Tumbling windows over the operator's processing time (the element's timestamp is ignored).

    Not supported: Flink's ``WindowStagger`` (all panes start aligned to the offset).
    """

    size_ms: int
    offset_ms: int = 0

    def __post_init__(self) -> None:
        _check_built("TumblingProcessingTimeWindows(size_ms, offset_ms)", self.size_ms, self.offset_ms)

    @staticmethod
    def of(size: SizeLike, offset: SizeLike = 0) -> TumblingProcessingTimeWindows:
        where = "TumblingProcessingTimeWindows.of(size, offset)"
        size_ms = positive_millis(size, "size", where=where)
        offset_ms = to_millis(offset, "offset", where=where)
        _check_offset("TumblingProcessingTimeWindows", offset_ms, size_ms, "size", offset)
        return TumblingProcessingTimeWindows(size_ms, offset_ms)

    def assign_windows(self, element: Any, timestamp: int | None, context: WindowAssignerContext) -> list[TimeWindow]:
        now = context.get_current_processing_time()
        start = now - (now - self.offset_ms) % self.size_ms
        return [TimeWindow(start, start + self.size_ms)]

    def get_default_trigger(self, env: Any = None) -> Trigger:
        return ProcessingTimeTrigger.create()

    def is_event_time(self) -> bool:
        return False

    def get_size(self) -> int:
        return self.size_ms

    def __str__(self) -> str:
        return f"TumblingProcessingTimeWindows({self.size_ms})"


@_dc.dataclass(frozen=True, slots=True)
class SlidingProcessingTimeWindows(WindowAssigner[Any, TimeWindow]):
    """Sliding windows over processing time; seed 000 walks through exactly this assigner."""

    size_ms: int
    slide_ms: int
    offset_ms: int = 0

    def __post_init__(self) -> None:
        _check_built("SlidingProcessingTimeWindows(size_ms, slide_ms, offset_ms)", self.size_ms, self.offset_ms,
                     self.slide_ms)

    @staticmethod
    def of(size: SizeLike, slide: SizeLike, offset: SizeLike = 0) -> SlidingProcessingTimeWindows:
        where = "SlidingProcessingTimeWindows.of(size, slide, offset)"
        size_ms = positive_millis(size, "size", where=where)
        slide_ms = positive_millis(slide, "slide", where=where)
        offset_ms = to_millis(offset, "offset", where=where)
        _check_offset("SlidingProcessingTimeWindows", offset_ms, slide_ms, "slide", offset)
        return SlidingProcessingTimeWindows(size_ms, slide_ms, offset_ms)

    def assign_windows(self, element: Any, timestamp: int | None, context: WindowAssignerContext) -> list[TimeWindow]:
        return _sliding_windows(context.get_current_processing_time(), self.size_ms, self.slide_ms, self.offset_ms)

    def get_default_trigger(self, env: Any = None) -> Trigger:
        return ProcessingTimeTrigger.create()

    def is_event_time(self) -> bool:
        return False

    def get_size(self) -> int:
        return self.size_ms

    def get_slide(self) -> int:
        return self.slide_ms

    def __str__(self) -> str:
        return f"SlidingProcessingTimeWindows({self.size_ms}, {self.slide_ms})"


class SessionWindowTimeGapExtractor(ABC):
    """Gives the session gap for one element (Flink's SessionWindowTimeGapExtractor); must return > 0 ms."""

    @abstractmethod
    def extract(self, element: Any) -> int: ...


def _gap_extractor(extractor: Any) -> Callable[[Any], Any]:
    if isinstance(extractor, SessionWindowTimeGapExtractor):
        return extractor.extract
    if callable(extractor):
        return extractor
    raise JobDefinitionError(
        "session_window_time_gap_extractor",
        extractor,
        "must be a SessionWindowTimeGapExtractor or a callable element -> gap in ms",
    )


def _dynamic_gap(assigner: str, extract: Callable[[Any], Any], element: Any) -> int:
    raw = extract(element)
    gap = to_millis(raw, "session gap returned by the gap extractor")
    if gap <= 0:
        # Flink: "Dynamic session time gap must satisfy 0 < gap"
        raise JobDefinitionError(
            f"{assigner}: session gap extracted from {element!r}", raw, "must satisfy 0 < gap (ms)",
            "Fix the gap extractor passed to with_dynamic_gap so it returns a positive gap for every element",
        )
    return gap


@_dc.dataclass(frozen=True, slots=True)
class EventTimeSessionWindows(MergingWindowAssigner[Any, TimeWindow]):
    """Session windows (seed 000 "Session Window"): every element opens [ts, ts + gap); windows that
    intersect (or touch) are merged by :meth:`merge_windows`.  ``gap_extractor`` makes the gap dynamic."""

    gap_ms: int | None
    gap_extractor: Callable[[Any], Any] | None = None

    def __post_init__(self) -> None:
        if self.gap_extractor is None:  # a dynamic gap is checked per element (_dynamic_gap)
            _check_built_ms("EventTimeSessionWindows(gap_ms)", "gap_ms", self.gap_ms)

    @staticmethod
    def with_gap(gap: SizeLike) -> EventTimeSessionWindows:
        return EventTimeSessionWindows(positive_millis(gap, "gap", where="EventTimeSessionWindows.with_gap(gap)"))

    @staticmethod
    def with_dynamic_gap(
        extractor: SessionWindowTimeGapExtractor | Callable[[Any], Any],
    ) -> DynamicEventTimeSessionWindows:
        """A :class:`DynamicEventTimeSessionWindows` (as PyFlink returns)."""
        return DynamicEventTimeSessionWindows(extractor)

    def assign_windows(self, element: Any, timestamp: int | None, context: WindowAssignerContext) -> list[TimeWindow]:
        ts = _require_timestamp("EventTimeSessionWindows", timestamp, element)
        gap = _session_gap("EventTimeSessionWindows", self.gap_ms, self.gap_extractor, element)
        return [TimeWindow(ts, ts + gap)]

    def merge_windows(self, windows: Collection[TimeWindow], callback: Any) -> None:
        merge_time_windows(windows, callback)

    def get_default_trigger(self, env: Any = None) -> Trigger:
        return EventTimeTrigger.create()

    def is_event_time(self) -> bool:
        return True

    def __str__(self) -> str:
        return f"{type(self).__name__}({self.gap_ms if self.gap_extractor is None else 'dynamic'})"


def _session_gap(assigner: str, gap_ms: int | None, extractor: Callable[[Any], Any] | None, element: Any) -> int:
    """The fixed gap, or the dynamic one the extractor gives for ``element`` (both session assigners)."""
    return gap_ms if extractor is None else _dynamic_gap(assigner, extractor, element)  # type: ignore[return-value]


class DynamicEventTimeSessionWindows(EventTimeSessionWindows):
    """Event-time sessions with a gap per element (PyFlink's ``DynamicEventTimeSessionWindows``):
    ``DynamicEventTimeSessionWindows(extractor)``, ``DynamicEventTimeSessionWindows.with_dynamic_gap(extractor)``
    and ``EventTimeSessionWindows.with_dynamic_gap(extractor)`` all build one.

    A subclass of :class:`EventTimeSessionWindows` with ``gap_ms=None`` and the extractor as ``gap_extractor``, so
    what accepts session windows accepts it; ``type(a) is EventTimeSessionWindows`` (the specialised session
    operator, engine/windowing/variant.py) does not, as that operator needs a fixed gap.  PyFlink's ``repr``
    shows the last gap it extracted; this one keeps no state (STYLE section 3) and shows the extractor."""

    __slots__ = ()

    def __init__(self, session_window_time_gap_extractor: SessionWindowTimeGapExtractor | Callable[[Any], Any]
                 ) -> None:
        super().__init__(None, _gap_extractor(session_window_time_gap_extractor))

    @staticmethod
    def with_dynamic_gap(
        extractor: SessionWindowTimeGapExtractor | Callable[[Any], Any],
    ) -> DynamicEventTimeSessionWindows:
        return DynamicEventTimeSessionWindows(extractor)

    def __repr__(self) -> str:
        return f"DynamicEventTimeSessionWindows({self.gap_extractor!r})"


@_dc.dataclass(frozen=True, slots=True)
class ProcessingTimeSessionWindows(MergingWindowAssigner[Any, TimeWindow]):
    """Session windows over processing time: every element opens [now, now + gap)."""

    gap_ms: int | None
    gap_extractor: Callable[[Any], Any] | None = None

    def __post_init__(self) -> None:
        if self.gap_extractor is None:  # a dynamic gap is checked per element (_dynamic_gap)
            _check_built_ms("ProcessingTimeSessionWindows(gap_ms)", "gap_ms", self.gap_ms)

    @staticmethod
    def with_gap(gap: SizeLike) -> ProcessingTimeSessionWindows:
        return ProcessingTimeSessionWindows(positive_millis(gap, "gap", where="ProcessingTimeSessionWindows.with_gap(gap)"))

    @staticmethod
    def with_dynamic_gap(
        extractor: SessionWindowTimeGapExtractor | Callable[[Any], Any],
    ) -> DynamicProcessingTimeSessionWindows:
        """A :class:`DynamicProcessingTimeSessionWindows` (as PyFlink returns)."""
        return DynamicProcessingTimeSessionWindows(extractor)

    def assign_windows(self, element: Any, timestamp: int | None, context: WindowAssignerContext) -> list[TimeWindow]:
        now = context.get_current_processing_time()
        gap = _session_gap("ProcessingTimeSessionWindows", self.gap_ms, self.gap_extractor, element)
        return [TimeWindow(now, now + gap)]

    def merge_windows(self, windows: Collection[TimeWindow], callback: Any) -> None:
        merge_time_windows(windows, callback)

    def get_default_trigger(self, env: Any = None) -> Trigger:
        return ProcessingTimeTrigger.create()

    def is_event_time(self) -> bool:
        return False

    def __str__(self) -> str:
        return f"{type(self).__name__}({self.gap_ms if self.gap_extractor is None else 'dynamic'})"


@_dc.dataclass(frozen=True, slots=True)
class GlobalWindows(WindowAssigner[Any, GlobalWindow]):
    """Every element goes to the one :data:`GLOBAL_WINDOW` (seed 000: the base of count windows).

    The default trigger never fires, so a trigger must be set (``count_window`` sets CountTrigger).
    ``create_with_end_of_stream_trigger()`` fires once when the watermark reaches its end (MAX_WATERMARK).
    """

    end_of_stream_trigger: bool = False

    @staticmethod
    def create() -> GlobalWindows:
        return GlobalWindows()

    @staticmethod
    def create_with_end_of_stream_trigger() -> GlobalWindows:
        return GlobalWindows(True)

    def assign_windows(self, element: Any, timestamp: int | None, context: WindowAssignerContext) -> list[GlobalWindow]:
        return [GLOBAL_WINDOW]

    def get_default_trigger(self, env: Any = None) -> Trigger:
        return EndOfStreamTrigger() if self.end_of_stream_trigger else NeverTrigger()

    def is_event_time(self) -> bool:
        return False

    def __str__(self) -> str:
        return "GlobalWindows()"


class DynamicProcessingTimeSessionWindows(ProcessingTimeSessionWindows):
    """Processing-time sessions with a gap per element (PyFlink's ``DynamicProcessingTimeSessionWindows``); a
    subclass of :class:`ProcessingTimeSessionWindows`, built and shown as DynamicEventTimeSessionWindows is."""

    __slots__ = ()

    def __init__(self, session_window_time_gap_extractor: SessionWindowTimeGapExtractor | Callable[[Any], Any]
                 ) -> None:
        super().__init__(None, _gap_extractor(session_window_time_gap_extractor))

    @staticmethod
    def with_dynamic_gap(
        extractor: SessionWindowTimeGapExtractor | Callable[[Any], Any],
    ) -> DynamicProcessingTimeSessionWindows:
        return DynamicProcessingTimeSessionWindows(extractor)

    def __repr__(self) -> str:
        return f"DynamicProcessingTimeSessionWindows({self.gap_extractor!r})"
