"""The non-keyed process operator: ``DataStream.process(ProcessFunction)`` and ``ConnectedStreams.process
(CoProcessFunction)`` (Flink's ProcessOperator).

It is the keyed process operator's element path without a key: the same context class (``ctx.timestamp()``,
``ctx.timer_service()``), the same handling of returned or yielded outputs and side outputs
(engine/operators/keyed_process.py ``emit_results``), the same per-subtask copy of the function.  What a
non-keyed stream cannot have is refused as PyFlink and Flink refuse it: registering or deleting a timer raises
("only supported on a keyed stream"), and so does ``get_state`` in ``open``.  The operator's watermark is the
last one it received (Flink's ``currentWatermark``), MIN_WATERMARK before any.

It keeps no state in snapshots (PyFlink's ProcessFunction has none), so it runs like a flat_map: chained into
its producer's task on both runtimes, built by engine/graph/operator_factory.py ``stateless_operator``.  On Spark
a chained operator is opened once per task (a split's slice or a keyed subtask, for one epoch) and given the
job's watermark W(n-1) before the epoch's records (engine/runtime/spark/chains.py ``Router``).
"""

from __future__ import annotations

from typing import Any

from engine.api.functions import ProcessFunction
from engine.elements import MIN_WATERMARK, StreamRecord, Watermark
from engine.errors import JobDefinitionError
from engine.operators.base import OneInputStreamOperator
from engine.operators.keyed_process import NonKeyedRuntimeContext, _Context, _TimerService, copy_function, emit_results

_KEYED_HINT = "key_by(...) first and use a KeyedProcessFunction (or a KeyedCoProcessFunction on two keyed inputs)"


class _NonKeyedTimerService(_TimerService):
    """The clocks of the keyed timer service; timers refused, as in PyFlink's NonKeyedTimerServiceImpl."""

    def _refuse(self, call: str, timestamp: Any) -> None:
        raise JobDefinitionError(
            f"ctx.timer_service().{call}", timestamp,
            f"{'setting' if call.startswith('register') else 'deleting'} timers is only supported on a keyed stream "
            f"(the {type(self._op.function).__name__} runs on a non-keyed stream)", _KEYED_HINT)

    def register_processing_time_timer(self, timestamp: int) -> None:
        self._refuse("register_processing_time_timer", timestamp)

    def register_event_time_timer(self, timestamp: int) -> None:
        self._refuse("register_event_time_timer", timestamp)

    def delete_processing_time_timer(self, timestamp: int) -> None:
        self._refuse("delete_processing_time_timer", timestamp)

    def delete_event_time_timer(self, timestamp: int) -> None:
        self._refuse("delete_event_time_timer", timestamp)


class _ProcessOperatorContext(_Context, ProcessFunction.Context):
    """The keyed process context with the non-keyed timer service; there is no current key."""

    __slots__ = ()

    timer_service_type = _NonKeyedTimerService

    def get_current_key(self) -> Any:
        raise JobDefinitionError("ctx.get_current_key", None, "is not available: the stream is not keyed",
                                 _KEYED_HINT)


class ProcessOperator(OneInputStreamOperator):
    """Runs a :class:`ProcessFunction` per element (a CoProcessFunction runs as one: co_functions.CoProcess)."""

    def __init__(self, function: Any) -> None:
        if not isinstance(function, ProcessFunction):
            raise JobDefinitionError("func", function, "must be a ProcessFunction")
        self.function = copy_function(function)
        self.watermark = MIN_WATERMARK

    def open(self, context: Any, output: Any) -> None:
        super().open(context, output)
        self.watermark = MIN_WATERMARK
        self._ctx = _ProcessOperatorContext(self)
        self.function.open(NonKeyedRuntimeContext(self, f"a {type(self.function).__name__} on a non-keyed stream",
                                                  _KEYED_HINT))

    def close(self) -> None:
        self.function.close()

    def process_element(self, record: StreamRecord) -> None:
        ctx = self._ctx
        ctx.current_timestamp = record.timestamp
        emit_results(self.output, self.function, self.function.process_element(record.value, ctx), record.timestamp)

    def process_watermark(self, watermark: Watermark) -> None:
        self.watermark = max(self.watermark, watermark.timestamp)
        self.output.emit_watermark(watermark)

    def current_watermark(self) -> int:
        return self.watermark
