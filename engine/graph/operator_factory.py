"""Build the operator for a logical node; shared by the local and Spark runtimes so both run the same code."""

from __future__ import annotations

from typing import Any, Sequence

from engine.clock import Clock
from engine.elements import MAX_WATERMARK, StreamRecord, Watermark, WatermarkStatusElement
from engine.errors import IllegalStateError
from engine.graph.transformations import (
    AsyncTransformation,
    BroadcastProcessTransformation,
    KeyedProcessTransformation,
    MapTransformation,
    TimestampsAndWatermarksTransformation,
    Transformation,
    WindowTransformation,
)
from engine.operators.async_io import AsyncWaitOperator
from engine.operators.base import OneInputStreamOperator
from engine.operators.process import ProcessOperator
from engine.operators.simple import FilterOperator, FlatMapOperator, MapOperator
from engine.operators.timestamps_watermarks import SourceTimestampsAndWatermarks


class TimestampsAndWatermarksOperator(OneInputStreamOperator):
    """``assign_timestamps_and_watermarks`` away from a source: one generator per subtask.

    Like Flink's TimestampsAndWatermarksOperator it ignores upstream watermarks
    except the final MAX_WATERMARK (end of input), and emits its own after each
    buffer of records (the local runtime's periodic emission point).
    """

    _CHANNEL = "subtask"

    def __init__(self, strategy: Any, clock: Clock, auto_watermark_interval_ms: int | None = None) -> None:
        self._strategy = strategy
        self._clock = clock
        self._interval_ms = auto_watermark_interval_ms

    def open(self, context: Any, output: Any) -> None:
        super().open(context, output)
        self._stage = SourceTimestampsAndWatermarks(
            self._strategy, self._clock,
            lambda dl: context.dead_letter(dl.value, dl.error, "timestamp_assigner"),
            auto_watermark_interval_ms=self._interval_ms)
        self._stage.add_split(self._CHANNEL)

    def _emit(self, elements: Sequence[Any]) -> None:
        out = self.output
        for e in elements:
            if type(e) is StreamRecord:
                out.collect(e)
            elif isinstance(e, Watermark):
                out.emit_watermark(e)
            elif isinstance(e, WatermarkStatusElement):
                out.emit_watermark_status(e.status)

    def process_element(self, record: StreamRecord) -> None:
        self._emit(self._stage.on_record(self._CHANNEL, record.value, record.timestamp))

    def process_batch(self, records: Sequence[StreamRecord]) -> None:
        stage = self._stage
        for r in records:
            self._emit(stage.on_record(self._CHANNEL, r.value, r.timestamp))
        self._emit(stage.on_periodic_emit())

    def process_watermark(self, watermark: Watermark) -> None:
        if watermark.timestamp == MAX_WATERMARK:
            self._emit(self._stage.end_of_input())

    def process_watermark_status(self, status: Any) -> None:
        pass  # this operator decides its own status


#: MapTransformation.kind -> the operator class running its ``fn``
STATELESS_OPERATORS: dict[str, Any] = {"map": MapOperator, "filter": FilterOperator, "flat_map": FlatMapOperator,
                                       "process": ProcessOperator}


def stateless_operator(node: MapTransformation) -> OneInputStreamOperator:
    """The operator of a map / filter / flat_map / process node, as both runtimes build it (chained where it can
    be: it keeps no state)."""
    return STATELESS_OPERATORS[node.kind](node.fn)


def build_operator(node: Transformation, env: Any, clock: Clock) -> OneInputStreamOperator:
    if isinstance(node, TimestampsAndWatermarksTransformation):
        config = getattr(env, "get_config", None)  # engine/api/execution_config.py: the auto-watermark interval
        interval = config().get_auto_watermark_interval() if config is not None else None
        return TimestampsAndWatermarksOperator(node.watermark_strategy, clock, interval)
    if isinstance(node, WindowTransformation):
        return build_window_operator(node)
    if isinstance(node, AsyncTransformation):
        return AsyncWaitOperator(node.async_function, node.timeout_ms, node.capacity, node.ordered)
    raise IllegalStateError(f"Bug: no operator for {type(node).__name__} {node.name!r}")


def build_window_operator(node: WindowTransformation) -> OneInputStreamOperator:
    """The window operator for ``node``: the variant the one predicate picks for it (engine/windowing/slicing/),
    with the layouts made for common windows allowed (identical results and snapshots)."""
    from engine.windowing.slicing import create_window_operator

    return create_window_operator(**_window_configuration(node), late_data_output_tag=node.late_data_tag,
                                  key_selector=node.key_selector)


def keyed_operator(node: Any) -> OneInputStreamOperator:
    """The operator of a keyed (or broadcast) vertex: the window operator, the keyed process operator of
    ``KeyedStream.process`` and the rolling aggregates, or the broadcast process operator; both runtimes build
    theirs here, and the Spark runtime's checkpoint writer builds a keyless subtask's snapshot from it."""
    if isinstance(node, BroadcastProcessTransformation):
        from engine.operators.broadcast_process import BroadcastProcessOperator, KeyedBroadcastProcessOperator

        if node.key_selector is None:
            return BroadcastProcessOperator(node.function, node.descriptors)
        return KeyedBroadcastProcessOperator(node.function, node.key_selector, node.descriptors)
    if isinstance(node, KeyedProcessTransformation):
        from engine.operators.keyed_process import KeyedProcessOperator

        return KeyedProcessOperator(node.function, node.key_selector)
    return build_window_operator(node)


def window_variant_of(node: WindowTransformation) -> Any:
    """The :class:`~engine.windowing.variant.WindowOperatorVariant` :func:`build_window_operator`
    builds for ``node``, without building it: what a runtime's fast path asks so it agrees with the operator."""
    from engine.windowing.variant import window_operator_variant

    return window_operator_variant(**_window_configuration(node))


def _window_configuration(node: WindowTransformation) -> dict[str, Any]:
    """What decides a window operator's variant, as the runtimes pass it."""
    spec = node.function
    if spec.kind == "aggregate":
        window_function, incremental = spec.process_function, spec.aggregate_function
    elif spec.kind == "process":
        window_function, incremental = spec.process_function, None
    else:
        window_function, incremental = spec.window_function, None
    return {
        "assigner": node.assigner, "trigger": node.trigger, "evictor": node.evictor,
        "window_function": window_function, "allowed_lateness_ms": node.allowed_lateness_ms,
        "incremental_aggregate": incremental,
        "specialized": True,  # layouts made for common windows (columnar.py, sessions.py): identical results
    }
