"""The keyed process operator: ``KeyedStream.process(KeyedProcessFunction)`` and the rolling aggregates.

Flink's ``KeyedProcessOperator`` on the engine's own parts: keyed state lives in the same
:class:`~engine.state.keyed_state.HeapKeyedStateBackend` the window operator uses (the void namespace: state
per key, not per window), timers in the same :class:`~engine.timers.InternalTimerService` (seed 004: an
event-time timer fires when the watermark reaches it, ``watermark >= timestamp``, in timestamp order, with its
key as the current key; timers are deduplicated per key and time).  A snapshot is those two, copy-on-write
(seed 002), in the layout of the window operator's: ``keyed/<state name>`` tables, a ``timers`` table and
the watermark in the metadata, so storage, validation and rescaling by key group treat both alike.

The rolling aggregates (``reduce``, ``sum``, ``min``, ``max``, ``min_by``, ``max_by`` on a KeyedStream) are
:class:`RollingAggregation`, a KeyedProcessFunction holding the key's aggregate in a ValueState and emitting
it after every element, as Flink's StreamGroupedReduceOperator does; the per-field semantics are those of
the window aggregations (engine/windowing/aggregations.py, Flink's SumAggregator / ComparableAggregator).

Errors: a key selector that raises makes the record a dead letter (a data problem, as for windows), and so
does a record whose field a rolling ``sum``/``min``/``max``/``min_by``/``max_by`` cannot fold (None; a str under
``sum``: stage ``aggregate``); an exception in the user's function fails the task, and the runtime restarts from the
last checkpoint.
"""

from __future__ import annotations

import copy
from typing import Any, Callable, Iterable

from engine.api.functions import (
    AggregateFunction,
    Function,
    KeyedProcessFunction,
    OutputTag,
    RuntimeContext,
    TimeDomain,
    TimerService,
)
from engine.elements import StreamRecord, Watermark
from engine.errors import IllegalStateError, JobDefinitionError
from engine.operators.base import (
    MaterializedOperatorSnapshot,
    OneInputStreamOperator,
    OperatorContext,
    OperatorSnapshot,
    Output,
    checking_key_selector,
    key_failure,
    materialize_all,
)
from engine.operators.keyed_restore import KEYED_TABLE_PREFIX, TIMERS_TABLE, restore_keyed_snapshots
from engine.state.descriptors import StateDescriptor, ValueStateDescriptor
from engine.state.key_groups import KeyGroupRange
from engine.state.keyed_state import HeapKeyedStateBackend
from engine.state.snapshot import VOID_NAMESPACE, KeyedStateSnapshot
from engine.timers import InternalTimer, InternalTimerService, TimerServiceSnapshot


def copy_function(function: Any) -> Any:
    """The subtask's own instance of a user function, as Flink deserializes one per task: functions keep state
    handles and other fields (``self.state = ctx.get_state(...)`` in open), which must not be shared by subtasks."""
    try:
        return copy.deepcopy(function)
    except Exception as exc:  # noqa: BLE001 - translate: the user's object cannot be copied
        raise JobDefinitionError(
            "func", function, f"must be copyable (copy.deepcopy) so every subtask gets its own instance "
            f"({type(exc).__name__}: {exc})",
            "Create clients, locks and the like in open(), not in __init__") from exc


def emit_results(output: Output, function: Any, results: Iterable[Any] | None, timestamp: int | None) -> None:
    """Consume what a process function returned or yielded (state changes of a generator happen now, in order);
    ``(OutputTag, value)`` goes to that side output, as in PyFlink; every output carries ``timestamp``."""
    if results is None:
        return
    try:
        iterator = iter(results)
    except TypeError:
        raise TypeError(f"{type(function).__name__} must return or yield its outputs (an iterable or None); "
                        f"it returned {results!r}") from None
    for item in iterator:
        if type(item) is tuple and len(item) == 2 and isinstance(item[0], OutputTag):
            output.collect_side(item[0], StreamRecord(item[1], timestamp))
        else:
            output.collect(StreamRecord(item, timestamp))


class _StateHandle:
    """A state object as the function got it in ``open``: every call goes to the operator's current backend.

    Restoring at another key-group range builds a new backend after ``open``; a handle re-resolves then, so
    state objects kept in fields stay valid (Flink's keyed state handles are likewise bound to the operator,
    not to a key)."""

    __slots__ = ("_op", "_descriptor", "_backend", "_state")

    def __init__(self, op: KeyedProcessOperator, descriptor: StateDescriptor) -> None:
        self._op = op
        self._descriptor = descriptor
        self._backend: Any = None
        self._state: Any = None
        self._resolve()  # a bad descriptor fails in open(), not at the first element

    def _resolve(self) -> Any:
        backend = self._op.keyed_state_backend
        if backend is not self._backend:
            self._state = backend.get_partitioned_state(self._descriptor)
            self._backend = backend
        return self._state

    def __getattr__(self, name: str) -> Any:
        return getattr(self._resolve(), name)

    def __repr__(self) -> str:
        return f"{type(self._state).__name__}({self._descriptor.name!r})"


class _RuntimeContext(RuntimeContext):
    def __init__(self, op: KeyedProcessOperator) -> None:
        self._op = op

    def get_state(self, descriptor: StateDescriptor) -> Any:
        if not isinstance(descriptor, StateDescriptor):
            raise JobDefinitionError("state_descriptor", descriptor,
                                     "must be a Value/List/Map/Reducing/AggregatingStateDescriptor")
        return _StateHandle(self._op, descriptor)

    def get_task_name(self) -> str:
        return self._op.context.operator_id

    def get_number_of_parallel_subtasks(self) -> int:
        return self._op.context.parallelism

    def get_max_number_of_parallel_subtasks(self) -> int:
        return self._op.context.max_parallelism

    def get_index_of_this_subtask(self) -> int:
        return self._op.context.subtask_index


class NonKeyedRuntimeContext(_RuntimeContext):
    """The keyed runtime context's subtask facts, without keyed state: what a function on a non-keyed stream gets
    in ``open`` (a ProcessFunction, a CoProcessFunction, a BroadcastProcessFunction); ``get_state`` says why not
    and ``hint`` the way out."""

    def __init__(self, op: Any, function_kind: str, hint: str) -> None:
        super().__init__(op)
        self._function_kind = function_kind
        self._hint = hint

    def get_state(self, descriptor: Any) -> Any:
        raise JobDefinitionError("state_descriptor", descriptor,
                                 f"cannot be keyed state in {self._function_kind}: the stream is not keyed", self._hint)


def _check_time(timestamp: Any) -> int:
    if isinstance(timestamp, bool) or not isinstance(timestamp, int):
        raise TypeError(f"a timer's timestamp must be an int of epoch milliseconds; got {timestamp!r}"
                        + (" (ctx.timestamp() is None: the records carry no timestamp; assign them with "
                           "assign_timestamps_and_watermarks)" if timestamp is None else ""))
    return timestamp


class _TimerService(TimerService):
    """The user's view of the operator's timer service: the current key, the void namespace."""

    def __init__(self, op: KeyedProcessOperator) -> None:
        self._op = op

    def current_processing_time(self) -> int:
        return self._op.context.clock.now_ms()

    def current_watermark(self) -> int:
        return self._op.current_watermark()

    def register_processing_time_timer(self, timestamp: int) -> None:
        self._op.timer_service.register_processing_time_timer(VOID_NAMESPACE, _check_time(timestamp))

    def register_event_time_timer(self, timestamp: int) -> None:
        self._op.timer_service.register_event_time_timer(VOID_NAMESPACE, _check_time(timestamp))

    def delete_processing_time_timer(self, timestamp: int) -> None:
        self._op.timer_service.delete_processing_time_timer(VOID_NAMESPACE, _check_time(timestamp))

    def delete_event_time_timer(self, timestamp: int) -> None:
        self._op.timer_service.delete_event_time_timer(VOID_NAMESPACE, _check_time(timestamp))


class _Context(KeyedProcessFunction.OnTimerContext):
    """One object serves as both contexts: ``time_domain`` is only meaningful (and only documented) in on_timer."""

    __slots__ = ("_op", "_timer_service", "current_timestamp", "current_domain")

    #: the timer service the function gets (the non-keyed process operator's refuses timers:
    #: engine/operators/process.py)
    timer_service_type: type = _TimerService

    def __init__(self, op: Any) -> None:
        self._op = op
        self._timer_service = self.timer_service_type(op)
        self.current_timestamp: int | None = None
        self.current_domain: TimeDomain | None = None

    def timestamp(self) -> int | None:
        return self.current_timestamp

    def timer_service(self) -> TimerService:
        return self._timer_service

    def get_current_key(self) -> Any:
        return self._op.keyed_state_backend.get_current_key()

    def time_domain(self) -> TimeDomain:
        if self.current_domain is None:
            raise IllegalStateError("time_domain() is only available in on_timer")
        return self.current_domain


class KeyedOperatorSnapshot(OperatorSnapshot):
    """Keyed state and timers (both copy-on-write), materialized to Arrow on demand."""

    def __init__(self, metadata: dict[str, Any], keyed: KeyedStateSnapshot, timers: TimerServiceSnapshot) -> None:
        self.metadata = metadata
        self.keyed = keyed
        self.timers = timers

    def materialize(self) -> MaterializedOperatorSnapshot:
        tables = {KEYED_TABLE_PREFIX + name: t for name, t in self.keyed.to_arrow_tables().items()}
        tables[TIMERS_TABLE] = self.timers.to_arrow_table()
        return MaterializedOperatorSnapshot(dict(self.metadata), tables)


class KeyedProcessOperator(OneInputStreamOperator):
    """Runs a :class:`KeyedProcessFunction` per element and per timer, with the element's key current."""

    #: the user function class this operator runs (the keyed broadcast operator runs another)
    function_type: type = KeyedProcessFunction

    def __init__(self, function: Any, key_selector: Callable[[Any], Any]) -> None:
        if not isinstance(function, self.function_type):
            raise JobDefinitionError("func", function, f"must be a {self.function_type.__name__}")
        if not callable(key_selector):
            raise JobDefinitionError("key_selector", key_selector, "must be a callable value -> key")
        self.function = copy_function(function)
        # a rolling sum/min/max... also rejects a record whose field it cannot fold: a dead letter, as an
        # unkeyable record is (engine/windowing/aggregations.py, "Bad data")
        self.key_selector = (checking_key_selector(key_selector, function.aggregate)
                             if isinstance(function, RollingAggregation) else key_selector)

    # ---- lifecycle -----------------------------------------------------------------------------------
    def open(self, context: OperatorContext, output: Output) -> None:
        super().open(context, output)
        self._build(context.key_group_range)  # type: ignore[arg-type]
        self._ctx = _Context(self)
        self.function.open(_RuntimeContext(self))

    def _build(self, key_group_range: KeyGroupRange) -> None:
        mp = self.context.max_parallelism
        self.keyed_state_backend = HeapKeyedStateBackend(mp, key_group_range, ttl_clock=self.context.clock)
        self.timer_service = InternalTimerService(self.keyed_state_backend, self, key_group_range, mp)

    def close(self) -> None:
        self.function.close()

    # ---- elements and timers ---------------------------------------------------------------------------
    def process_element(self, record: StreamRecord) -> None:
        value = record.value
        try:
            key = self.key_selector(value)
        except Exception as exc:  # noqa: BLE001 - a failing key selector is a data problem: dead letter
            self.context.metrics.inc("num_dead_letter_records")
            key_failure(self.key_selector, value, exc, self.context.dead_letter)
            return
        self.keyed_state_backend.set_current_key(key)
        ctx = self._ctx
        ctx.current_timestamp = record.timestamp
        ctx.current_domain = None
        self._emit(self.function.process_element(value, ctx), record.timestamp)

    def process_watermark(self, watermark: Watermark) -> None:
        """Fire the event-time timers the watermark reached, then forward it (seed 004)."""
        self.timer_service.advance_watermark(watermark.timestamp)
        self.output.emit_watermark(watermark)

    def advance_processing_time(self, now_ms: int) -> None:
        self.timer_service.advance_processing_time(now_ms)

    def current_watermark(self) -> int:
        return self.timer_service.current_watermark()

    def on_event_time(self, timer: InternalTimer) -> None:
        self._on_timer(timer, TimeDomain.EVENT_TIME, timer.timestamp)

    def on_processing_time(self, timer: InternalTimer) -> None:
        self._on_timer(timer, TimeDomain.PROCESSING_TIME, None)

    def _on_timer(self, timer: InternalTimer, domain: TimeDomain, output_timestamp: int | None) -> None:
        ctx = self._ctx
        ctx.current_timestamp = timer.timestamp
        ctx.current_domain = domain
        self._emit(self.function.on_timer(timer.timestamp, ctx), output_timestamp)
        ctx.current_domain = None

    def _emit(self, results: Iterable[Any] | None, timestamp: int | None) -> None:
        emit_results(self.output, self.function, results, timestamp)

    # ---- snapshots -------------------------------------------------------------------------------------
    def snapshot_state(self, checkpoint_id: int) -> KeyedOperatorSnapshot:
        metadata = self._snapshot_metadata(checkpoint_id)
        metadata["current_watermark"] = self.timer_service.current_watermark()
        backend = self.keyed_state_backend
        # counted from the live backend, apart from the files written later (a validator can tell a lost row)
        metadata["state_rows"] = {name: backend.num_entries(name) for name in backend.state_names}
        metadata["state_kinds"] = backend.state_kinds()
        return KeyedOperatorSnapshot(metadata, backend.snapshot(), self.timer_service.snapshot())

    def initialize_state(self, snapshots: Any, key_group_range: KeyGroupRange | None = None) -> None:
        """Restore keyed state, timers and the watermark from one or more former subtasks' snapshots.

        Rescaling passes several: each one's rows outside this subtask's key groups are dropped, and the
        watermark restored is the smallest of theirs (no timer fires earlier than it would have).
        """
        materialized = materialize_all(snapshots)
        if key_group_range is not None and key_group_range != self.context.key_group_range:
            self.context.key_group_range = key_group_range
            self._build(key_group_range)  # the function's state handles re-resolve (_StateHandle)
        restore_keyed_snapshots(materialized, self.keyed_state_backend, self.timer_service,
                                self.context.max_parallelism, "keyed process operator")


class RollingAggregation(KeyedProcessFunction):
    """``reduce`` / ``sum`` / ``min`` / ``max`` / ``min_by`` / ``max_by`` on a KeyedStream: the key's aggregate so
    far in a ValueState, emitted after every element (Flink's StreamGroupedReduceOperator).

    ``aggregate`` is one of engine/windowing/aggregations.py's AggregateFunctions (whose accumulator is the
    aggregated record itself), so a rolling ``min`` and a windowed ``min`` agree record for record.
    ``user_function``, a ReduceFunction, is opened and closed with this function.
    """

    def __init__(self, aggregate: AggregateFunction, description: str, user_function: Any = None) -> None:
        self.aggregate = aggregate
        self.description = description
        self.user_function = user_function

    def open(self, runtime_context: Any) -> None:
        if isinstance(self.user_function, Function):
            self.user_function.open(runtime_context)
        # Flink's name for this state in StreamGroupedReduceOperator
        self._state = runtime_context.get_state(ValueStateDescriptor("_op_state"))

    def close(self) -> None:
        if isinstance(self.user_function, Function):
            self.user_function.close()

    def process_element(self, value: Any, ctx: Any) -> Iterable[Any]:
        aggregate, state = self.aggregate, self._state
        acc = state.value()
        acc = aggregate.add(value, aggregate.create_accumulator() if acc is None else acc)
        state.update(acc)
        return (aggregate.get_result(acc),)

    def __repr__(self) -> str:
        return f"RollingAggregation({self.description}: {self.aggregate!r})"
