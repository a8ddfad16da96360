"""User function interfaces for windowed and keyed streams (PyFlink names, Java Flink behaviour).

``reduce``/``aggregate``/``sum``... are incremental: the window keeps one
accumulator.  ``process``/``apply`` see all elements.  With an evictor every
window keeps its elements, incremental or not (seed 000).
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Generic, Iterable, TypeVar

from engine.api.typeinfo import check_type_info
from engine.errors import JobDefinitionError

if TYPE_CHECKING:
    from engine.state.descriptors import State, StateDescriptor


def check_callable(fn: Any, parameter: str, method_name: str | None = None) -> Callable[..., Any]:
    """Accept a plain callable or a PyFlink-style function object with ``method_name``."""
    if method_name and hasattr(fn, method_name) and callable(getattr(fn, method_name)):
        return getattr(fn, method_name)
    if callable(fn):
        return fn
    expected = f"a callable or an object with a {method_name}() method" if method_name else "a callable"
    raise JobDefinitionError(parameter, fn, f"must be {expected}")

IN = TypeVar("IN")
ACC = TypeVar("ACC")
OUT = TypeVar("OUT")
KEY = TypeVar("KEY")
W = TypeVar("W")
IN1 = TypeVar("IN1")
IN2 = TypeVar("IN2")


class Function:
    """Marker base of user functions; ``open``/``close`` bracket their use in a subtask."""

    def open(self, runtime_context: Any) -> None:  # noqa: B027 - optional hook
        pass

    def close(self) -> None:  # noqa: B027 - optional hook
        pass


class MapFunction(Function, Generic[IN, OUT]):
    """PyFlink's ``MapFunction``: ``map(value)`` returns one result (``DataStream.map`` also takes a callable)."""

    @abstractmethod
    def map(self, value: IN) -> OUT: ...


class FlatMapFunction(Function, Generic[IN, OUT]):
    """PyFlink's ``FlatMapFunction``: ``flat_map(value)`` yields any number of results."""

    @abstractmethod
    def flat_map(self, value: IN) -> Iterable[OUT]: ...


class FilterFunction(Function, Generic[IN]):
    """PyFlink's ``FilterFunction``: ``filter(value)`` keeps the value when true."""

    @abstractmethod
    def filter(self, value: IN) -> bool: ...


class KeySelector(Function, Generic[IN, KEY]):
    """PyFlink's ``KeySelector``: ``get_key(value)`` is the record's key (``key_by`` also takes a callable or a field)."""

    @abstractmethod
    def get_key(self, value: IN) -> KEY: ...


class ReduceFunction(Function, Generic[IN]):
    @abstractmethod
    def reduce(self, value1: IN, value2: IN) -> IN: ...


class Partitioner(Function, Generic[KEY]):
    """``partition_custom``'s partitioner (PyFlink's ``Partitioner``): the consumer subtask of a key, an int in
    ``[0, num_partitions)``; a plain ``f(key, num_partitions)`` works too (engine/graph/partitioners.py)."""

    @abstractmethod
    def partition(self, key: KEY, num_partitions: int) -> int: ...


class AggregateFunction(Function, Generic[IN, ACC, OUT]):
    """Incremental aggregation with an accumulator (Flink's AggregateFunction).

    Accumulators are stored in snapshots, so they must be plain data (numbers,
    str, tuples, lists, dicts): see :mod:`engine.state.codec`.
    """

    @abstractmethod
    def create_accumulator(self) -> ACC: ...

    @abstractmethod
    def add(self, value: IN, accumulator: ACC) -> ACC: ...

    @abstractmethod
    def get_result(self, accumulator: ACC) -> OUT: ...

    @abstractmethod
    def merge(self, acc_a: ACC, acc_b: ACC) -> ACC: ...


@dataclass(frozen=True)
class OutputTag:
    """Names a side output, e.g. late data: ``OutputTag("late")`` or, as PyFlink writes it,
    ``OutputTag("late", Types.TUPLE([Types.STRING(), Types.INT()]))``.

    Tags are equal by ``tag_id`` alone (Flink compares ids; the type only describes the records).
    """

    tag_id: str
    type_info: Any = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.tag_id, str) or not self.tag_id:
            raise JobDefinitionError("tag_id", self.tag_id, "must be a non-empty string")
        check_type_info(self.type_info, "type_info")


class KeyedStateStore(ABC):
    """Keyed state for a ProcessWindowFunction: per window or global for the key."""

    @abstractmethod
    def get_state(self, descriptor: StateDescriptor) -> State: ...

    # PyFlink spells the typed getters separately; they all resolve to get_state
    def get_list_state(self, descriptor: StateDescriptor) -> State:
        return self.get_state(descriptor)

    def get_map_state(self, descriptor: StateDescriptor) -> State:
        return self.get_state(descriptor)

    def get_reducing_state(self, descriptor: StateDescriptor) -> State:
        return self.get_state(descriptor)

    def get_aggregating_state(self, descriptor: StateDescriptor) -> State:
        return self.get_state(descriptor)


class ProcessWindowContext(ABC, Generic[W]):
    """What a ProcessWindowFunction sees about the window it is called for."""

    @abstractmethod
    def window(self) -> W: ...

    @abstractmethod
    def current_processing_time(self) -> int: ...

    @abstractmethod
    def current_watermark(self) -> int: ...

    @abstractmethod
    def window_state(self) -> KeyedStateStore:
        """State scoped to this key and window; cleared by :meth:`ProcessWindowFunction.clear`."""

    @abstractmethod
    def global_state(self) -> KeyedStateStore:
        """State scoped to this key across all windows."""

    @abstractmethod
    def output(self, output_tag: OutputTag, value: Any) -> None:
        """Emit ``value`` to the side output ``output_tag``."""


class ProcessWindowFunction(Function, Generic[IN, OUT, KEY, W]):
    """Sees all elements of a fired window (or the one pre-aggregated result when combined with ``aggregate``)."""

    #: PyFlink's nested name for the context, so ``context: ProcessWindowFunction.Context[TimeWindow]`` ports
    Context = ProcessWindowContext

    @abstractmethod
    def process(self, key: KEY, context: ProcessWindowContext[W], elements: Iterable[IN]) -> Iterable[OUT]:
        """Return (or yield) the results for this firing."""

    def clear(self, context: ProcessWindowContext[W]) -> None:  # noqa: B027 - optional hook
        """Called when the window is purged; remove per-window state here."""


class WindowFunction(Function, Generic[IN, OUT, KEY, W]):
    """The older ``apply`` interface: ``apply(key, window, inputs)`` returns results."""

    @abstractmethod
    def apply(self, key: KEY, window: W, inputs: Iterable[IN]) -> Iterable[OUT]: ...


class AllWindowFunction(Function, Generic[IN, OUT, W]):
    """PyFlink's ``AllWindowFunction`` for ``window_all(...).apply``: ``apply(window, inputs)``, no key."""

    @abstractmethod
    def apply(self, window: W, inputs: Iterable[IN]) -> Iterable[OUT]: ...


class ProcessAllWindowFunction(Function, Generic[IN, OUT, W]):
    """PyFlink's ``ProcessAllWindowFunction`` for ``window_all(...).process``: ``process(context, elements)``,
    no key; ``context`` is the keyed function's context (``window()``, ``current_watermark()``,
    ``window_state()``, ``global_state()``)."""

    Context = ProcessWindowContext

    @abstractmethod
    def process(self, context: ProcessWindowContext[W], elements: Iterable[IN]) -> Iterable[OUT]: ...

    def clear(self, context: ProcessWindowContext[W]) -> None:  # noqa: B027 - optional hook
        """Called when the window is purged."""


# -- KeyedStream.process ---------------------------------------------------------------------------------------


class TimeDomain(enum.Enum):
    """Which clock a timer follows (PyFlink's ``pyflink.datastream.TimeDomain``)."""

    EVENT_TIME = 0
    PROCESSING_TIME = 1


class TimerService(ABC):
    """Timers and time for the current key (PyFlink's TimerService); times are epoch milliseconds.

    Timers are kept per key and timestamp: registering the same time twice for a key gives one timer, and
    deleting a timer that does not exist does nothing.  An event-time timer fires once the watermark reaches
    its time (watermark >= timestamp), in timestamp order; a processing-time timer once processing time does.
    """

    @abstractmethod
    def current_processing_time(self) -> int: ...

    @abstractmethod
    def current_watermark(self) -> int: ...

    @abstractmethod
    def register_processing_time_timer(self, timestamp: int) -> None: ...

    @abstractmethod
    def register_event_time_timer(self, timestamp: int) -> None: ...

    @abstractmethod
    def delete_processing_time_timer(self, timestamp: int) -> None: ...

    @abstractmethod
    def delete_event_time_timer(self, timestamp: int) -> None: ...


class RuntimeContext(KeyedStateStore):
    """What ``open(runtime_context)`` receives in a keyed function (PyFlink's RuntimeContext): keyed state
    through ``get_state`` / ``get_list_state`` / ... (scoped to the key being processed) and where the
    function runs."""

    @abstractmethod
    def get_task_name(self) -> str: ...

    @abstractmethod
    def get_number_of_parallel_subtasks(self) -> int: ...

    @abstractmethod
    def get_max_number_of_parallel_subtasks(self) -> int: ...

    @abstractmethod
    def get_index_of_this_subtask(self) -> int: ...


class _KeyedProcessContext(ABC):
    """``ctx`` of :meth:`KeyedProcessFunction.process_element`."""

    @abstractmethod
    def timestamp(self) -> int | None:
        """The element's event timestamp (None when it has none); in ``on_timer``, the timer's time."""

    @abstractmethod
    def timer_service(self) -> TimerService: ...

    @abstractmethod
    def get_current_key(self) -> Any: ...


class _KeyedProcessOnTimerContext(_KeyedProcessContext):
    """``ctx`` of :meth:`KeyedProcessFunction.on_timer`: also which clock the firing timer follows."""

    @abstractmethod
    def time_domain(self) -> TimeDomain: ...


class KeyedProcessFunction(Function, Generic[KEY, IN, OUT]):
    """Processes a keyed stream element by element with keyed state and timers (PyFlink's KeyedProcessFunction).

    ``process_element(value, ctx)`` and ``on_timer(timestamp, ctx)`` return or yield their outputs; yielding
    ``(output_tag, value)`` with an :class:`OutputTag` sends ``value`` to that side output, as in PyFlink.
    Outputs of ``process_element`` carry the element's timestamp; those of an event-time timer carry the timer's
    time, those of a processing-time timer none (Flink's TimestampedCollector).  State comes from
    ``runtime_context.get_state(...)`` in ``open``; it and the timers are in every checkpoint and savepoint and
    are redistributed by key group when a job is restored at another parallelism.  At the end of bounded input
    (MAX_WATERMARK) every event-time timer fires; pending processing-time timers do not (Flink's behaviour).

    Both runtimes run it (engine/operators/keyed_process.py).  On Spark, as for windows, the records of epoch n
    are processed under the watermark of the end of epoch n-1 and processing time moves once per epoch.
    Each subtask works on its own copy of the function (``copy.deepcopy``), as Flink deserializes one per task.
    """

    Context = _KeyedProcessContext
    OnTimerContext = _KeyedProcessOnTimerContext

    @abstractmethod
    def process_element(self, value: IN, ctx: _KeyedProcessContext) -> Iterable[OUT] | None:
        """Called for every element, with its key as the current key."""

    def on_timer(self, timestamp: int, ctx: _KeyedProcessOnTimerContext) -> Iterable[OUT] | None:
        """Called when a timer fires, with the key that registered it as the current key."""
        return None


class _ProcessContext(ABC):
    """``ctx`` of :meth:`ProcessFunction.process_element` / the CoProcessFunction's: the element's timestamp and
    the clocks; the timer service refuses timers (there is no key to keep them by)."""

    @abstractmethod
    def timestamp(self) -> int | None:
        """The element's event timestamp (None when it has none)."""

    @abstractmethod
    def timer_service(self) -> TimerService:
        """``current_processing_time()`` and ``current_watermark()``; registering or deleting a timer raises, as
        in PyFlink and Flink: timers are only supported on a keyed stream."""


class ProcessFunction(Function, Generic[IN, OUT]):
    """Processes a non-keyed stream element by element (PyFlink's ProcessFunction): ``DataStream.process(f)``.

    ``process_element(value, ctx)`` returns or yields its outputs, which carry the element's timestamp; yielding
    ``(output_tag, value)`` with an :class:`OutputTag` sends ``value`` to that side output.  ``ctx.timestamp()``,
    ``ctx.timer_service().current_processing_time()`` and ``current_watermark()`` are available; there is no keyed
    state (``get_state`` in ``open`` raises) and there are no timers (registering one raises: key_by(...) and use
    a :class:`KeyedProcessFunction`).  It holds no state in snapshots: it runs like a flat_map, chained into its
    producer's task, on both runtimes (engine/operators/process.py).  Each subtask works on its own copy
    (``copy.deepcopy``), so plain fields set in ``open`` are per subtask, and are not checkpointed.
    """

    Context = _ProcessContext

    @abstractmethod
    def process_element(self, value: IN, ctx: _ProcessContext) -> Iterable[OUT] | None:
        """Called for every element."""


# ---- two inputs: connect() (engine/api/connected_streams.py) ------------------------------------------


class CoMapFunction(Function, Generic[IN1, IN2, OUT]):
    """``connect(other).map(f)``: ``map1`` for each record of the first stream, ``map2`` for the second (PyFlink)."""

    @abstractmethod
    def map1(self, value: Any) -> Any: ...

    @abstractmethod
    def map2(self, value: Any) -> Any: ...


class CoFlatMapFunction(Function, Generic[IN1, IN2, OUT]):
    """``connect(other).flat_map(f)``: ``flat_map1`` / ``flat_map2`` return or yield any number of results."""

    @abstractmethod
    def flat_map1(self, value: Any) -> Iterable[Any] | None: ...

    @abstractmethod
    def flat_map2(self, value: Any) -> Iterable[Any] | None: ...


class KeyedCoProcessFunction(Function, Generic[KEY, IN1, IN2, OUT]):
    """Two keyed streams connected, processed with shared keyed state and timers (PyFlink's KeyedCoProcessFunction).

    ``process_element1(value, ctx)`` gets the first stream's records, ``process_element2`` the second's, both
    with the record's key current; ``on_timer(timestamp, ctx)`` as in :class:`KeyedProcessFunction`, with the
    same context, outputs, side outputs (yield ``(output_tag, value)``), snapshots and rescaling.  Both inputs
    must key alike (equal keys for records that belong together): ``connect`` then ``key_by(k1, k2)``, or two
    KeyedStreams connected.  The operator's watermark is the minimum of both inputs' (Flink).
    """

    Context = _KeyedProcessContext
    OnTimerContext = _KeyedProcessOnTimerContext

    @abstractmethod
    def process_element1(self, value: Any, ctx: _KeyedProcessContext) -> Iterable[Any] | None: ...

    @abstractmethod
    def process_element2(self, value: Any, ctx: _KeyedProcessContext) -> Iterable[Any] | None: ...

    def on_timer(self, timestamp: int, ctx: _KeyedProcessOnTimerContext) -> Iterable[Any] | None:
        return None


class CoProcessFunction(Function, Generic[IN1, IN2, OUT]):
    """Two non-keyed streams connected, processed by one function (PyFlink's CoProcessFunction):
    ``first.connect(second).process(f)``.

    ``process_element1(value, ctx)`` gets the first stream's records, ``process_element2`` the second's, with the
    :class:`ProcessFunction`'s context, outputs and side outputs; no keyed state, no timers (use a
    :class:`KeyedCoProcessFunction` on keyed inputs for those).  The operator's watermark
    (``ctx.timer_service().current_watermark()``) is the minimum of both inputs' (Flink).
    """

    Context = _ProcessContext

    @abstractmethod
    def process_element1(self, value: Any, ctx: _ProcessContext) -> Iterable[Any] | None: ...

    @abstractmethod
    def process_element2(self, value: Any, ctx: _ProcessContext) -> Iterable[Any] | None: ...


class _BroadcastReadOnlyContext(ABC):
    """``ctx`` of ``process_element``: the broadcast state read-only, the element's timestamp, the clocks."""

    @abstractmethod
    def get_broadcast_state(self, state_descriptor: Any) -> Any:
        """A ReadOnlyBroadcastState (get, contains, items, keys, values, is_empty) for a descriptor given to
        ``broadcast(...)``."""

    @abstractmethod
    def timestamp(self) -> int | None: ...

    @abstractmethod
    def current_processing_time(self) -> int: ...

    @abstractmethod
    def current_watermark(self) -> int: ...


class _BroadcastContext(_BroadcastReadOnlyContext):
    """``ctx`` of ``process_broadcast_element``: ``get_broadcast_state`` returns a writable BroadcastState
    (also put, put_all, remove, clear)."""


class _KeyedBroadcastReadOnlyContext(_BroadcastReadOnlyContext):
    @abstractmethod
    def timer_service(self) -> TimerService: ...

    @abstractmethod
    def get_current_key(self) -> Any: ...


class _KeyedBroadcastOnTimerContext(_KeyedBroadcastReadOnlyContext):
    @abstractmethod
    def time_domain(self) -> TimeDomain: ...


class BroadcastProcessFunction(Function, Generic[IN1, IN2, OUT]):
    """``stream.connect(broadcast_stream).process(f)`` on a non-keyed stream (PyFlink's BroadcastProcessFunction).

    ``process_broadcast_element(value, ctx)`` runs in every subtask for every broadcast record and may write the
    broadcast state; ``process_element(value, ctx)`` runs for the other stream's records and may only read it.
    Every subtask must change the broadcast state alike (depending only on the broadcast record), so that all
    hold the same copy, as in Flink.  The state is in checkpoints and savepoints; at another parallelism every
    new subtask restores that copy.  There is no keyed state and there are no timers here.
    """

    ReadOnlyContext = _BroadcastReadOnlyContext
    Context = _BroadcastContext

    @abstractmethod
    def process_element(self, value: Any, ctx: _BroadcastReadOnlyContext) -> Iterable[Any] | None: ...

    @abstractmethod
    def process_broadcast_element(self, value: Any, ctx: _BroadcastContext) -> Iterable[Any] | None: ...


class KeyedBroadcastProcessFunction(Function, Generic[KEY, IN1, IN2, OUT]):
    """``keyed_stream.connect(broadcast_stream).process(f)`` (PyFlink's KeyedBroadcastProcessFunction).

    As :class:`BroadcastProcessFunction`, plus, in ``process_element`` and ``on_timer``, keyed state (from
    ``open``), ``ctx.timer_service()`` and ``ctx.get_current_key()`` as in :class:`KeyedProcessFunction`.
    ``process_broadcast_element`` runs with no current key: keyed state and timers are not available there.
    """

    ReadOnlyContext = _KeyedBroadcastReadOnlyContext
    Context = _BroadcastContext
    OnTimerContext = _KeyedBroadcastOnTimerContext

    @abstractmethod
    def process_element(self, value: Any, ctx: _KeyedBroadcastReadOnlyContext) -> Iterable[Any] | None: ...

    @abstractmethod
    def process_broadcast_element(self, value: Any, ctx: _BroadcastContext) -> Iterable[Any] | None: ...

    def on_timer(self, timestamp: int, ctx: _KeyedBroadcastOnTimerContext) -> Iterable[Any] | None:
        return None
