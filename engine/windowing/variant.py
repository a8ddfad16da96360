"""Which window operator runs a window: the one predicate every caller asks (issue 15).

:func:`window_operator_variant` looks at a window's configuration (what ``WindowedStream`` collected: the
assigner, trigger, evictor, window function, allowed lateness and incremental aggregate) and names the
operator that runs it.  :func:`engine.windowing.slicing.create_window_operator` builds that operator, and
the Spark runtime's pre-aggregation (engine/runtime/spark/preaggregation.py) asks the same function
which windows it may fold in Spark SQL first, so the two can never disagree.

Every variant gives the general operator's results, element for element and in the same order, and
writes its snapshot format (differential tests: tests/engine/windowing/test_window_operator_batch.py,
test_columnar_windows.py, test_session_layout.py).  The exact type checks below (``type(x) is Y``, not
``isinstance``) are deliberate: a user's subclass of a built-in trigger or assigner may change what it
does per element, which only the general operator honours.
"""

from __future__ import annotations

import enum
from typing import Any

from engine.windowing.aggregations import SumAggregate
from engine.windowing.assigners import (
    EventTimeSessionWindows,
    MergingWindowAssigner,
    SlidingEventTimeWindows,
    SlidingProcessingTimeWindows,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
    WindowAssigner,
    default_trigger_of,
)
from engine.windowing.evictors import Evictor
from engine.windowing.triggers import EventTimeTrigger, ProcessingTimeTrigger, Trigger


class WindowOperatorVariant(enum.Enum):
    """The operator a window runs on, from the most general to the most specialized."""

    #: engine/windowing/window_operator.py: any assigner, trigger, evictor and function, element by element
    GENERAL = "general"
    #: engine/windowing/slicing/slicing_operator.py, heap layout: non-merging windows, exactly the built-in
    #: time trigger of the assigner's domain, an incremental aggregate, no evictor; a batch folds per
    #: (key, window) and a watermark fires with the trigger's decisions inlined
    SLICING = "slicing"
    #: the slicing operator with its windows in arrays (columnar_operator.py, columnar.py): event-time
    #: tumbling/sliding windows, exactly the built-in ``sum``, no window function, no allowed lateness
    SLICING_COLUMNAR = "slicing-columnar"
    #: engine/windowing/slicing/session_operator.py: event-time sessions with a fixed gap, exactly
    #: EventTimeTrigger, an incremental aggregate, no evictor, no window function, no allowed lateness
    SESSION = "session"

    @property
    def is_slicing(self) -> bool:
        return self is WindowOperatorVariant.SLICING or self is WindowOperatorVariant.SLICING_COLUMNAR


def window_operator_variant(
    assigner: WindowAssigner,
    trigger: Trigger | None = None,
    evictor: Evictor | None = None,
    window_function: Any = None,
    allowed_lateness_ms: int = 0,
    incremental_aggregate: Any = None,
    specialized: bool = False,
) -> WindowOperatorVariant:
    """The variant that runs a window so configured.

    ``specialized`` allows the layouts made for one shape (columnar tumbling/sliding sums, sessions);
    both runtimes pass it.  A configuration the operators refuse (not a WindowAssigner, not a Trigger...)
    is GENERAL here: the general operator's constructor then names the bad parameter.
    """
    if not isinstance(assigner, WindowAssigner):
        return WindowOperatorVariant.GENERAL
    if trigger is None:
        trigger = default_trigger_of(assigner)
    if not isinstance(trigger, Trigger) or incremental_aggregate is None or evictor is not None:
        return WindowOperatorVariant.GENERAL  # the windows keep their elements: nothing to fold early
    event_time = assigner.is_event_time()
    exact_trigger = type(trigger) is (EventTimeTrigger if event_time else ProcessingTimeTrigger)
    if not exact_trigger:
        return WindowOperatorVariant.GENERAL
    plain = window_function is None and allowed_lateness_ms == 0
    if isinstance(assigner, MergingWindowAssigner):
        if (specialized and plain and type(assigner) is EventTimeSessionWindows
                and assigner.gap_extractor is None):
            return WindowOperatorVariant.SESSION
        return WindowOperatorVariant.GENERAL
    if (specialized and plain and event_time and window_geometry(assigner) is not None
            and type(incremental_aggregate) is SumAggregate):
        return WindowOperatorVariant.SLICING_COLUMNAR
    return WindowOperatorVariant.SLICING


def window_geometry(assigner: WindowAssigner) -> tuple[int, int, int] | None:
    """``(size, slide, offset)`` of the built-in tumbling/sliding assigners, whose windows the slicing
    operator computes itself (same arithmetic and the same descending-start order as their
    ``assign_windows``); None for any other assigner."""
    t = type(assigner)
    if t is TumblingEventTimeWindows or t is TumblingProcessingTimeWindows:
        return assigner.size_ms, assigner.size_ms, assigner.offset_ms  # type: ignore[attr-defined]
    if t is SlidingEventTimeWindows or t is SlidingProcessingTimeWindows:
        return assigner.size_ms, assigner.slide_ms, assigner.offset_ms  # type: ignore[attr-defined]
    return None
