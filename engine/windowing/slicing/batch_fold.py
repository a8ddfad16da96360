"""The folds the slicing and session operators apply to a batch of one (key, window)'s elements.

``batch_folder(incremental)`` gives ``fold(existing_accumulator_or_None, values) -> accumulator``: the
accumulator per-element processing would reach by folding ``values`` one by one, in order.
"""

from __future__ import annotations

from operator import itemgetter
from typing import Any, Callable

from engine.windowing.aggregations import less, set_field
from engine.windowing.internal_window_function import IncrementalAggregation

#: element types whose field the batch folds read with itemgetter (others go through add(), e.g. a str is a
#: scalar element, not a sequence of fields)
_FIELD_CONTAINERS = (tuple, list, dict)


def batch_folder(incremental: IncrementalAggregation) -> Callable[[Any, list], Any]:
    """``fold(existing_accumulator_or_None, values) -> accumulator`` for process_batch.

    For the built-in field aggregations the field is folded directly, doing exactly the additions
    and comparisons of their ``add`` in the same order (so float sums round identically); any
    element the fast fold cannot read (a scalar stream, a missing field) falls back to calling
    ``add`` per element, which also raises the proper JobDefinitionError.
    """
    generic = incremental.fold_all
    vectorized = incremental.vectorized
    if vectorized is None:
        return generic
    kind, field = vectorized.kind, vectorized.field
    getter = itemgetter(field)

    if kind in ("sum", "min", "max"):
        def fold_field(acc: Any, values: list) -> Any:
            try:
                if acc is None:
                    base = values[0]
                    if not isinstance(base, _FIELD_CONTAINERS):
                        return generic(acc, values)  # a scalar stream: add() reads the value itself
                    if len(values) == 1:
                        # what add() does with a first element: check the field is there, keep the element
                        getter(base)
                        return base
                    it = iter(values)
                    next(it)
                else:
                    base = acc
                    if not isinstance(base, _FIELD_CONTAINERS):
                        return generic(acc, values)
                    if len(values) == 1:
                        x = getter(values[0])
                        running = getter(base)
                        if kind == "sum":
                            return set_field(base, field, running + x)
                        if kind == "min":
                            return set_field(base, field, running if less(running, x) else x)
                        return set_field(base, field, running if less(x, running) else x)
                    it = iter(values)
                running = getter(base)
                if kind == "sum":
                    for v in it:
                        running += getter(v)
                elif kind == "min":  # NaN ordered above every number (aggregations.less)
                    for v in it:
                        x = getter(v)
                        if not (running < x or (x != x and running == running)):
                            running = x
                else:
                    for v in it:
                        x = getter(v)
                        if not (x < running or (running != running and x == x)):
                            running = x
                return set_field(base, field, running)
            except (TypeError, IndexError, KeyError):
                return generic(acc, values)

        return fold_field

    if kind in ("min_by", "max_by"):
        by_min = kind == "min_by"

        def fold_by(acc: Any, values: list) -> Any:
            try:
                it = iter(values)
                best = next(it) if acc is None else acc
                if not isinstance(best, _FIELD_CONTAINERS):
                    return generic(acc, values)  # a scalar stream: add() reads the value itself
                best_field = getter(best)
                for v in it:
                    x = getter(v)
                    if less(x, best_field) if by_min else less(best_field, x):
                        best, best_field = v, x
                return best
            except (TypeError, IndexError, KeyError):
                return generic(acc, values)

        return fold_by
    return generic

