"""``WindowedStream`` / ``AllWindowedStream``: window configuration and the window function.

Everything is validated here, at build time, so a bad job fails before any data
flows (issue 2, "Bad input").  The result is a :class:`WindowTransformation`
carrying a normalized :class:`WindowFunctionSpec`; both runtimes build the same
``WindowOperator`` from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from engine.api.functions import (
    AggregateFunction,
    AllWindowFunction,
    OutputTag,
    ProcessAllWindowFunction,
    ProcessWindowFunction,
    ReduceFunction,
    WindowFunction,
)
from engine.api.time import SizeLike, non_negative_millis
from engine.api.typeinfo import check_type_info
from engine.errors import JobDefinitionError
from engine.graph.transformations import (
    SourceTransformation,
    TimestampsAndWatermarksTransformation,
    WindowTransformation,
    declared_output_type,
)
from engine.windowing import aggregations
from engine.windowing.aggregations import ReduceAggregate
from engine.windowing.assigners import MergingWindowAssigner, WindowAssigner, default_trigger_of
from engine.windowing.evictors import Evictor
from engine.windowing.triggers import Trigger

if TYPE_CHECKING:
    from engine.api.datastream import DataStream, SingleOutputStreamOperator


@dataclass(frozen=True)
class WindowFunctionSpec:
    """What the window computes, normalized from the many user spellings.

    ``kind`` is one of:

    - ``"aggregate"``: incremental; ``aggregate_function`` is an AggregateFunction
      (reduce functions and built-in sum/min/max/... are wrapped into one);
      ``process_function`` optionally post-processes the single result.
    - ``"process"``: all elements go to ``process_function`` (a ProcessWindowFunction).
    - ``"apply"``: all elements go to ``window_function`` (a WindowFunction).
    """

    kind: str
    aggregate_function: AggregateFunction | None = None
    process_function: ProcessWindowFunction | None = None
    window_function: WindowFunction | None = None
    #: for diagnostics and snapshot metadata: "reduce", "sum", "min", "aggregate", "process", ...
    description: str = ""


class _CallableReduce(ReduceFunction):
    def __init__(self, fn: Callable[[Any, Any], Any]) -> None:
        self._fn = fn

    def reduce(self, value1: Any, value2: Any) -> Any:
        return self._fn(value1, value2)


class _CallableWindowFunction(WindowFunction):
    def __init__(self, fn: Callable[..., Any]) -> None:
        self._fn = fn

    def apply(self, key: Any, window: Any, inputs: Any) -> Any:
        return self._fn(key, window, inputs)


class _AllWindowFunctionAdapter(WindowFunction):
    """PyFlink's AllWindowFunction takes (window, inputs): drop the constant key."""

    def __init__(self, fn: Any) -> None:
        self._fn = fn

    def apply(self, key: Any, window: Any, inputs: Any) -> Any:
        if hasattr(self._fn, "apply"):
            return self._fn.apply(window, inputs)
        return self._fn(window, inputs)


class _ProcessAllWindowAdapter(ProcessWindowFunction):
    """PyFlink's ProcessAllWindowFunction takes (context, elements): drop the constant key."""

    def __init__(self, function: ProcessAllWindowFunction) -> None:
        self.function = function

    def open(self, runtime_context: Any) -> None:
        self.function.open(runtime_context)

    def close(self) -> None:
        self.function.close()

    def process(self, key: Any, context: Any, elements: Any) -> Any:
        return self.function.process(context, elements)

    def clear(self, context: Any) -> None:
        self.function.clear(context)


class _WindowFunctionAsProcess(ProcessWindowFunction):
    """A WindowFunction after ``reduce``/``aggregate`` (PyFlink accepts either kind there): called with the
    window instead of the context."""

    def __init__(self, window_function: WindowFunction) -> None:
        self.window_function = window_function

    def open(self, runtime_context: Any) -> None:
        self.window_function.open(runtime_context)

    def close(self) -> None:
        self.window_function.close()

    def process(self, key: Any, context: Any, elements: Any) -> Any:
        return self.window_function.apply(key, context.window(), elements)


def _check_field(field: Any, parameter: str = "field") -> Any:
    if isinstance(field, bool) or not isinstance(field, (int, str)):
        raise JobDefinitionError(parameter, field, "must be a tuple position (int) or a dict key (str)")
    return field


def _records_carry_timestamps(node: Any) -> bool:
    """Whether every record reaching ``node`` has an event timestamp: each path up to a source passes a timestamp
    assigner (or a window, whose results carry the window's max timestamp), or starts at a source given a
    WatermarkStrategy."""
    seen: dict[int, bool] = {}

    def stamped(n: Any) -> bool:
        if n.id not in seen:
            if isinstance(n, (TimestampsAndWatermarksTransformation, WindowTransformation)):
                seen[n.id] = True
            elif isinstance(n, SourceTransformation):
                seen[n.id] = n.watermark_strategy is not None
            else:
                seen[n.id] = bool(n.inputs) and all(stamped(i) for i in n.inputs)
        return seen[n.id]

    return stamped(node)


class WindowedStream:
    """A keyed (or, via AllWindowedStream, non-keyed) stream with a window assigner."""

    def __init__(self, input_stream: DataStream, key_selector: Callable[[Any], Any] | None, assigner: WindowAssigner,
                 non_keyed: bool = False) -> None:
        if not isinstance(assigner, WindowAssigner):
            raise JobDefinitionError(
                "window_assigner", assigner, "must be a WindowAssigner",
                "Use e.g. TumblingEventTimeWindows.of(Time.minutes(1))",
            )
        if assigner.is_event_time() and not _records_carry_timestamps(input_stream._node):
            raise JobDefinitionError(
                "window_assigner", assigner,
                "is an event-time assigner, but the records reaching it carry no timestamps (no "
                "assign_timestamps_and_watermarks, and no WatermarkStrategy given to from_source, upstream): "
                "every window would stay empty",
                "Call .assign_timestamps_and_watermarks(WatermarkStrategy.for_bounded_out_of_orderness(...)"
                ".with_timestamp_assigner(...)) before key_by, or use a processing-time assigner",
            )
        self._input = input_stream
        self._key_selector = key_selector
        self._assigner = assigner
        self._trigger: Trigger = default_trigger_of(assigner, input_stream._env)
        self._evictor: Evictor | None = None
        self._allowed_lateness_ms = 0
        self._late_tag: OutputTag | None = None
        self._non_keyed = non_keyed

    # -- configuration -------------------------------------------------------------------------
    def trigger(self, trigger: Trigger) -> WindowedStream:
        if not isinstance(trigger, Trigger):
            raise JobDefinitionError("trigger", trigger, "must be a Trigger (e.g. CountTrigger.of(100))")
        if isinstance(self._assigner, MergingWindowAssigner) and not trigger.can_merge():
            raise JobDefinitionError(
                "trigger", trigger, f"must support merging (can_merge() is True) with {type(self._assigner).__name__}",
                "Session windows merge, so their trigger state and timers must merge too",
            )
        self._trigger = trigger
        return self

    def evictor(self, evictor: Evictor) -> WindowedStream:
        if not isinstance(evictor, Evictor):
            raise JobDefinitionError("evictor", evictor, "must be an Evictor (e.g. CountEvictor.of(4))")
        if not self._assigner.can_take_evictor():
            raise JobDefinitionError(
                "evictor", evictor, f"cannot be used with {type(self._assigner).__name__} (its can_take_evictor() is False)"
            )
        self._evictor = evictor
        return self

    def allowed_lateness(self, lateness: SizeLike) -> WindowedStream:
        self._allowed_lateness_ms = non_negative_millis(lateness, "allowed_lateness")
        return self

    def side_output_late_data(self, output_tag: OutputTag) -> WindowedStream:
        if not isinstance(output_tag, OutputTag):
            raise JobDefinitionError("output_tag", output_tag, "must be an OutputTag, e.g. OutputTag('late')")
        self._late_tag = output_tag
        return self

    # -- functions -----------------------------------------------------------------------------
    # PyFlink's ``output_type`` / ``accumulator_type`` arguments below are TypeInformations: checked, and
    # otherwise only shaping ``print()`` (engine/api/typeinfo.py).  ``window_function`` is a
    # ProcessWindowFunction or, as PyFlink also allows, a WindowFunction.
    def reduce(self, reduce_function: ReduceFunction | Callable[[Any, Any], Any],
               window_function: ProcessWindowFunction | WindowFunction | None = None,
               output_type: Any = None) -> SingleOutputStreamOperator:
        check_type_info(output_type, "output_type")
        if output_type is None and window_function is None:
            # PyFlink: a plain reduce emits the input's type
            output_type = declared_output_type(self._input._node)
        fn = reduce_function if isinstance(reduce_function, ReduceFunction) else None
        if fn is None:
            if not callable(reduce_function):
                raise JobDefinitionError("reduce_function", reduce_function, "must be a ReduceFunction or a callable (a, b) -> c")
            fn = _CallableReduce(reduce_function)
        return self._build(WindowFunctionSpec("aggregate", aggregate_function=ReduceAggregate(fn),
                                              process_function=self._check_process(window_function, optional=True),
                                              description="reduce"), "Window(reduce)", output_type)

    def aggregate(self, aggregate_function: AggregateFunction,
                  window_function: ProcessWindowFunction | WindowFunction | None = None,
                  accumulator_type: Any = None, output_type: Any = None) -> SingleOutputStreamOperator:
        check_type_info(accumulator_type, "accumulator_type")
        check_type_info(output_type, "output_type")
        if not isinstance(aggregate_function, AggregateFunction):
            raise JobDefinitionError("aggregate_function", aggregate_function, "must be an AggregateFunction")
        return self._build(WindowFunctionSpec("aggregate", aggregate_function=aggregate_function,
                                              process_function=self._check_process(window_function, optional=True),
                                              description="aggregate"), "Window(aggregate)", output_type)

    def process(self, process_window_function: ProcessWindowFunction,
                output_type: Any = None) -> SingleOutputStreamOperator:
        check_type_info(output_type, "output_type")
        return self._build(WindowFunctionSpec("process", process_function=self._check_process(process_window_function),
                                              description="process"), "Window(process)", output_type)

    def apply(self, window_function: WindowFunction | Callable[..., Any],
              output_type: Any = None) -> SingleOutputStreamOperator:
        check_type_info(output_type, "output_type")
        if isinstance(window_function, WindowFunction):
            wf = window_function
        elif isinstance(window_function, AllWindowFunction):
            wf = _AllWindowFunctionAdapter(window_function)
        elif callable(window_function) or hasattr(window_function, "apply"):
            wf = _AllWindowFunctionAdapter(window_function) if self._non_keyed else _CallableWindowFunction(window_function)
        else:
            raise JobDefinitionError("window_function", window_function, "must be a WindowFunction or a callable (key, window, inputs)")
        return self._build(WindowFunctionSpec("apply", window_function=wf, description="apply"), "Window(apply)",
                           output_type)

    def _builtin(self, kind: str, field: Any) -> SingleOutputStreamOperator:
        agg = aggregations.builtin_aggregation(kind, _check_field(field))
        return self._build(WindowFunctionSpec("aggregate", aggregate_function=agg, description=kind), f"Window({kind})")

    def sum(self, field: int | str) -> SingleOutputStreamOperator:
        return self._builtin("sum", field)

    def min(self, field: int | str) -> SingleOutputStreamOperator:
        return self._builtin("min", field)

    def max(self, field: int | str) -> SingleOutputStreamOperator:
        return self._builtin("max", field)

    def min_by(self, field: int | str) -> SingleOutputStreamOperator:
        return self._builtin("min_by", field)

    def max_by(self, field: int | str) -> SingleOutputStreamOperator:
        return self._builtin("max_by", field)

    # -- helpers -------------------------------------------------------------------------------
    @staticmethod
    def _check_process(fn: Any, optional: bool = False) -> ProcessWindowFunction | None:
        if fn is None and optional:
            return None
        if isinstance(fn, ProcessAllWindowFunction):  # PyFlink's window_all functions take no key
            return _ProcessAllWindowAdapter(fn)
        if optional and isinstance(fn, AllWindowFunction):
            return _WindowFunctionAsProcess(_AllWindowFunctionAdapter(fn))
        if optional and isinstance(fn, WindowFunction):
            return _WindowFunctionAsProcess(fn)
        if not isinstance(fn, ProcessWindowFunction):
            expected = "a ProcessWindowFunction or WindowFunction" if optional else "a ProcessWindowFunction"
            raise JobDefinitionError("window_function", fn, f"must be {expected} subclass instance")
        return fn

    def _build(self, spec: WindowFunctionSpec, name: str, output_type: Any = None) -> SingleOutputStreamOperator:
        node = WindowTransformation(
            name=name,
            inputs=[self._input._node],
            parallelism=1 if self._non_keyed else None,
            key_selector=self._key_selector,
            assigner=self._assigner,
            trigger=self._trigger,
            evictor=self._evictor,
            allowed_lateness_ms=self._allowed_lateness_ms,
            late_data_tag=self._late_tag,
            function=spec,
            non_keyed=self._non_keyed,
            output_type=output_type,
        )
        return self._input._result(node)


class AllWindowedStream(WindowedStream):
    """``window_all``: every record in one window operator of parallelism 1 (Flink's AllWindowedStream)."""

    def __init__(self, input_stream: DataStream, assigner: WindowAssigner) -> None:
        super().__init__(input_stream, _constant_key, assigner, non_keyed=True)


def _constant_key(_value: Any) -> int:
    """Flink's NullByteKeySelector: all records share one key."""
    return 0
