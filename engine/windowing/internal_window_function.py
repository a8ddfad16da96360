"""Every user window-function spelling normalized to one internal shape (Flink's InternalWindowFunction family).

Users write ``reduce(fn)``, ``aggregate(AggregateFunction)``, ``aggregate(agg, ProcessWindowFunction)``,
``process(ProcessWindowFunction)`` or ``apply(WindowFunction | fn(key, window, inputs))``.  The window
operator sees two things only:

* :class:`IncrementalAggregation` — how one element is folded into a window's accumulator (seed 000:
  "每个进入窗口的元素都会执行一次聚合函数并修改result值"), or None when the window keeps its elements;
* :class:`InternalWindowFunction` — what a firing emits, given the key, the window and the window's
  inputs (the single aggregate result, or all elements).

With an evictor the window always keeps all elements, even for reduce/aggregate ("如果用户定义了
Evictor，则不会启用对聚合窗口的优化", seed 000); then the aggregation runs over the remaining elements
at fire time (Flink's ReduceApplyWindowFunction / AggregateApplyWindowFunction).
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from engine.api.functions import AggregateFunction, Function, ProcessWindowContext, ProcessWindowFunction, ReduceFunction, WindowFunction
from engine.errors import JobDefinitionError
from engine.state.key_identity import key_value


class IncrementalAggregation(AggregateFunction):
    """A reduce function or an AggregateFunction, as the fold the window operator applies per element.

    The accumulator lives in keyed state; None means "no element yet" (state absent), so
    :meth:`fold` starts from ``create_accumulator()`` for aggregates and from the element itself
    for reduce.  It is itself an AggregateFunction so the state backend merges session windows'
    accumulators with :meth:`merge`.
    """

    def __init__(self, function: Any) -> None:
        self.is_reduce = False
        if isinstance(function, AggregateFunction):
            self.aggregate_function: AggregateFunction | None = function
            self._reduce: Callable[[Any, Any], Any] | None = None
        elif isinstance(function, ReduceFunction):
            self.aggregate_function = None
            self._reduce = function.reduce
            self.is_reduce = True
        elif callable(function):
            self.aggregate_function = None
            self._reduce = function
            self.is_reduce = True
        else:
            raise JobDefinitionError(
                "incremental_aggregate",
                function,
                "must be an AggregateFunction, a ReduceFunction or a callable (a, b) -> c",
            )
        self.user_function = function

    def create_accumulator(self) -> Any:
        return None

    def add(self, value: Any, accumulator: Any) -> Any:
        return self.fold(accumulator, value)

    def fold(self, accumulator: Any, value: Any) -> Any:
        agg = self.aggregate_function
        if agg is not None:
            return agg.add(value, agg.create_accumulator() if accumulator is None else accumulator)
        return value if accumulator is None else self._reduce(accumulator, value)  # type: ignore[misc]

    def fold_all(self, accumulator: Any, values: Iterable[Any]) -> Any:
        agg = self.aggregate_function
        if agg is not None:
            add = agg.add
            if accumulator is None:
                accumulator = agg.create_accumulator()
            for v in values:
                accumulator = add(v, accumulator)
            return accumulator
        reduce = self._reduce
        for v in values:
            accumulator = v if accumulator is None else reduce(accumulator, v)  # type: ignore[misc]
        return accumulator

    def get_result(self, accumulator: Any) -> Any:
        agg = self.aggregate_function
        return agg.get_result(accumulator) if agg is not None else accumulator

    def merge(self, acc_a: Any, acc_b: Any) -> Any:
        agg = self.aggregate_function
        if agg is not None:
            return agg.merge(acc_a, acc_b)
        if acc_a is None:
            return acc_b
        if acc_b is None:
            return acc_a
        return self._reduce(acc_a, acc_b)  # type: ignore[misc]

    @property
    def vectorized(self) -> Any:
        """The built-in aggregation's (kind, field), when the user function is one (engine.windowing.aggregations)."""
        return getattr(self.user_function, "vectorized", None)


class InternalWindowFunction:
    """What one firing emits: ``emit_inputs(key, window, context, inputs)`` returns the output values.

    ``inputs`` is the list of the aggregate's single result, or the window's elements.
    """

    def __init__(self, window_function: Any, incremental: IncrementalAggregation | None) -> None:
        self._process: ProcessWindowFunction | None = None
        self._apply: Callable[[Any, Any, Any], Any] | None = None
        if window_function is None:
            if incremental is None:
                raise JobDefinitionError(
                    "window_function",
                    None,
                    "is required when no incremental aggregate (reduce/aggregate) is given",
                    "Pass a ProcessWindowFunction, a WindowFunction or a callable (key, window, inputs)",
                )
        elif isinstance(window_function, ProcessWindowFunction):
            self._process = window_function
        elif isinstance(window_function, WindowFunction):
            self._apply = window_function.apply
        elif callable(window_function):
            self._apply = window_function
        else:
            raise JobDefinitionError(
                "window_function",
                window_function,
                "must be a ProcessWindowFunction, a WindowFunction or a callable (key, window, inputs)",
            )
        self.window_function = window_function
        self.incremental = incremental

    def functions(self) -> list[Function]:
        """The user functions with open/close hooks."""
        result = []
        for fn in (self.window_function, self.incremental.user_function if self.incremental else None):
            if isinstance(fn, Function):
                result.append(fn)
        return result

    def emit_inputs(self, key: Any, window: Any, context: ProcessWindowContext, inputs: list) -> Iterable[Any]:
        key = key_value(key)  # the user's key, not the operator's identity of it (engine/state/key_identity.py)
        if self._process is not None:
            out = self._process.process(key, context, inputs)
        elif self._apply is not None:
            out = self._apply(key, window, inputs)
        else:
            return inputs
        return () if out is None else out

    def emit_accumulator(self, key: Any, window: Any, context: ProcessWindowContext, accumulator: Any) -> Iterable[Any]:
        """A firing of an incremental window: the one result of the accumulator goes to the function."""
        return self.emit_inputs(key, window, context, [self.incremental.get_result(accumulator)])  # type: ignore[union-attr]

    def emit_elements(self, key: Any, window: Any, context: ProcessWindowContext, values: list) -> Iterable[Any]:
        """A firing of a window that kept its elements; with an incremental aggregate they are aggregated now.

        Not supported: reduce over a window whose elements were all evicted emits nothing (Flink
        would emit a null).
        """
        incremental = self.incremental
        if incremental is None:
            return self.emit_inputs(key, window, context, values)
        if incremental.is_reduce and not values:
            return ()
        accumulator = incremental.fold_all(None, values)
        return self.emit_inputs(key, window, context, [incremental.get_result(accumulator)])

    def clear(self, context: ProcessWindowContext) -> None:
        """The window is cleaned up: a ProcessWindowFunction removes its per-window state."""
        if self._process is not None:
            self._process.clear(context)
