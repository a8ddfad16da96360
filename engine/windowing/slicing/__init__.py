"""Window operator variants beside the general one, and the factory that picks them (issue 15).

:func:`create_window_operator` is how runtimes and tests build a window operator: it asks the one
predicate (:func:`~engine.windowing.variant.window_operator_variant`) which variant runs the
configuration and builds it.  The variants (slicing_operator.py and its columnar layout in
columnar_operator.py, session_operator.py) give the general operator's results and share its snapshot
format (engine/windowing/window_operator.py).
"""

from __future__ import annotations

from typing import Any, Callable

from engine.api.functions import OutputTag
from engine.windowing.assigners import WindowAssigner
from engine.windowing.evictors import Evictor
from engine.windowing.slicing.columnar_operator import ColumnarSlicingWindowOperator
from engine.windowing.slicing.session_operator import SessionWindowOperator
from engine.windowing.slicing.slicing_operator import SlicingWindowOperator
from engine.windowing.variant import WindowOperatorVariant, window_geometry, window_operator_variant
from engine.windowing.triggers import Trigger
from engine.windowing.window_operator import WindowOperator

__all__ = [
    "ColumnarSlicingWindowOperator",
    "SessionWindowOperator",
    "SlicingWindowOperator",
    "WindowOperatorVariant",
    "create_window_operator",
    "window_geometry",
    "window_operator_variant",
]


def create_window_operator(
    assigner: WindowAssigner,
    trigger: Trigger | None = None,
    evictor: Evictor | None = None,
    window_function: Any = None,
    allowed_lateness_ms: int = 0,
    late_data_output_tag: OutputTag | None = None,
    key_selector: Callable[[Any], Any] | None = None,
    incremental_aggregate: Any = None,
    specialized: bool = False,
) -> WindowOperator:
    """The window operator for this configuration: the general one or a variant (variant.py).

    ``specialized`` allows the layouts made for one shape (columnar tumbling/sliding sums, sessions), with
    the same results and snapshots; the runtimes pass it.  Bad parameters raise JobDefinitionError from
    the operator's constructor, naming the parameter.
    """
    variant = window_operator_variant(assigner, trigger, evictor, window_function, allowed_lateness_ms,
                                      incremental_aggregate, specialized)
    args = (assigner, trigger, evictor, window_function, allowed_lateness_ms, late_data_output_tag, key_selector,
            incremental_aggregate)
    if variant is WindowOperatorVariant.SESSION:
        return SessionWindowOperator(*args)
    if variant is WindowOperatorVariant.SLICING_COLUMNAR:
        return ColumnarSlicingWindowOperator(*args)
    if variant is WindowOperatorVariant.SLICING:
        return SlicingWindowOperator(*args)
    return WindowOperator(*args)
