"""Broadcast state: ``stream.connect(other.broadcast(descriptor)).process(...)`` (Flink's broadcast state pattern).

The operator reads the tagged union of engine/operators/co_functions.py: records of input 1 (the
non-broadcast side, keyed or not) go to ``process_element`` with the broadcast state read-only; records of
input 2 arrive at every subtask (a BROADCAST edge) and go to ``process_broadcast_element``, which may write it.

Broadcast state is operator state, one map per MapStateDescriptor, the same in every subtask because every
subtask sees every broadcast record and must change the state only from it (Flink's contract: "the same
operations on the broadcast state in all parallel instances").  A snapshot holds each subtask's copy as
``broadcast/<name>`` tables of codec-encoded ``key`` and ``value`` text (never pickled); a restore takes one
former subtask's copy, so at another parallelism every new subtask starts with the same state, as in Flink
(``BroadcastState`` is redistributed to all instances on rescale).

:class:`KeyedBroadcastProcessOperator` is the keyed process operator (keyed state, timers, their snapshots and
rescaling by key group) plus broadcast state; :class:`BroadcastProcessOperator` is the non-keyed form, with
no keyed state and no timers.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator

import pyarrow as pa

from engine.api.functions import (
    BroadcastProcessFunction,
    KeyedBroadcastProcessFunction,
)
from engine.elements import MIN_WATERMARK, StreamRecord, Watermark
from engine.errors import CorruptSnapshotError, IllegalStateError, JobDefinitionError
from engine.operators.base import (
    MaterializedOperatorSnapshot,
    OneInputStreamOperator,
    OperatorSnapshot,
    materialize_all,
)
from engine.operators.co_functions import FIRST, SECOND, TaggedKeySelector, UntaggedKeySelector
from engine.operators.keyed_process import (
    KeyedProcessOperator,
    NonKeyedRuntimeContext,
    _Context,
    copy_function,
    emit_results,
)
from engine.state import codec
from engine.state.descriptors import MapStateDescriptor
from engine.state.key_groups import KeyGroupRange

BROADCAST_TABLE_PREFIX = "broadcast/"
_SCHEMA = pa.schema([("key", pa.string()), ("value", pa.string())])


class ReadOnlyBroadcastState:
    """A broadcast state as ``process_element`` sees it (PyFlink's ReadOnlyBroadcastState)."""

    __slots__ = ("_entries",)

    def __init__(self, entries: dict[Any, Any]) -> None:
        self._entries = entries

    def get(self, key: Any) -> Any:
        return self._entries.get(key)

    def contains(self, key: Any) -> bool:
        return key in self._entries

    def items(self) -> Iterator[tuple[Any, Any]]:
        return iter(list(self._entries.items()))

    def keys(self) -> Iterator[Any]:
        return iter(list(self._entries))

    def values(self) -> Iterator[Any]:
        return iter(list(self._entries.values()))

    def is_empty(self) -> bool:
        return not self._entries

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._entries!r})"


class BroadcastState(ReadOnlyBroadcastState):
    """A broadcast state as ``process_broadcast_element`` sees it: also writable (PyFlink's BroadcastState)."""

    __slots__ = ()

    def put(self, key: Any, value: Any) -> None:
        self._entries[key] = value

    def put_all(self, entries: Any) -> None:
        self._entries.update(entries)

    def remove(self, key: Any) -> None:
        self._entries.pop(key, None)

    def clear(self) -> None:
        self._entries.clear()


class BroadcastStateStore:
    """The broadcast states of one subtask by descriptor name, with their snapshot tables."""

    def __init__(self, descriptors: Iterable[MapStateDescriptor]) -> None:
        self.descriptors = {d.name: d for d in descriptors}
        self.entries: dict[str, dict[Any, Any]] = {name: {} for name in self.descriptors}
        self._read_only = {name: ReadOnlyBroadcastState(e) for name, e in self.entries.items()}
        self._writable = {name: BroadcastState(e) for name, e in self.entries.items()}

    def _name_of(self, descriptor: Any) -> str:
        if not isinstance(descriptor, MapStateDescriptor) or descriptor.name not in self.descriptors:
            raise JobDefinitionError(
                "state_descriptor", descriptor, f"must be one of the MapStateDescriptors given to broadcast(...): "
                f"{sorted(self.descriptors)}")
        return descriptor.name

    def read_only(self, descriptor: Any) -> ReadOnlyBroadcastState:
        return self._read_only[self._name_of(descriptor)]

    def writable(self, descriptor: Any) -> BroadcastState:
        return self._writable[self._name_of(descriptor)]

    def to_arrow_tables(self) -> dict[str, pa.Table]:
        """Encoded now: later changes to the state (or to a value object put in it) cannot reach the snapshot."""
        tables = {}
        for name, entries in self.entries.items():
            keys = [codec.encode(k) for k in entries]
            values = [codec.encode(v) for v in entries.values()]
            tables[BROADCAST_TABLE_PREFIX + name] = pa.table(
                [pa.array(keys, pa.string()), pa.array(values, pa.string())], schema=_SCHEMA)
        return tables

    def restore(self, tables: dict[str, pa.Table]) -> None:
        for full_name, table in tables.items():
            name = full_name[len(BROADCAST_TABLE_PREFIX):]
            if table.column_names != ["key", "value"]:
                raise CorruptSnapshotError(f"broadcast state table {full_name!r} has columns {table.column_names}, "
                                           "expected ['key', 'value']")
            entries = self.entries.get(name)
            if entries is None:  # a state the job no longer declares: kept, as Flink keeps it
                entries = self.entries[name] = {}
            entries.clear()
            for k, v in zip(table.column("key").to_pylist(), table.column("value").to_pylist()):
                entries[codec.decode(k)] = codec.decode(v)


def split_broadcast_tables(
    snapshots: list[MaterializedOperatorSnapshot],
) -> tuple[dict[str, pa.Table], list[MaterializedOperatorSnapshot]]:
    """One former subtask's broadcast tables (every subtask held the same copy) and the snapshots without them.

    A snapshot is known to hold broadcast state by its ``broadcast/`` tables, not its metadata: the Spark
    runtime's ``_metadata`` records no per-subtask ``broadcast_states`` (engine/runtime/spark/checkpoint_store.py)."""
    chosen: dict[str, pa.Table] | None = None
    rest = []
    for snap in snapshots:
        mine = {n: t for n, t in snap.tables.items() if n.startswith(BROADCAST_TABLE_PREFIX)}
        if chosen is None and mine:
            chosen = mine
        rest.append(MaterializedOperatorSnapshot(
            snap.metadata, {n: t for n, t in snap.tables.items() if not n.startswith(BROADCAST_TABLE_PREFIX)}))
    return chosen or {}, rest


class _WithBroadcastState(OperatorSnapshot):
    def __init__(self, inner: OperatorSnapshot, tables: dict[str, pa.Table]) -> None:
        self.inner = inner
        self.tables = tables

    def materialize(self) -> MaterializedOperatorSnapshot:
        snap = self.inner.materialize()
        metadata = dict(snap.metadata)
        metadata["broadcast_states"] = sorted(n[len(BROADCAST_TABLE_PREFIX):] for n in self.tables)
        return MaterializedOperatorSnapshot(metadata, {**snap.tables, **self.tables})


def _untag(value: Any) -> tuple[int, Any]:
    if type(value) is not tuple or len(value) != 2 or value[0] not in (FIRST, SECOND):
        raise IllegalStateError(f"Bug: a broadcast process operator got an untagged record {value!r}")
    return value


# ---- keyed -----------------------------------------------------------------------------------------------


class _NoCurrentKey:
    """Stands in for the keyed state backend while a broadcast element is processed: there is no key then."""

    def get_partitioned_state(self, descriptor: Any) -> Any:
        raise IllegalStateError(
            f"keyed state {descriptor.name!r} is not available in process_broadcast_element: a broadcast record has "
            "no key (Flink's rule); use the broadcast state there, and keyed state in process_element / on_timer")

    def get_current_key(self) -> Any:
        raise IllegalStateError("there is no current key in process_broadcast_element")


_NO_CURRENT_KEY = _NoCurrentKey()


class _KeyedReadOnlyContext(_Context):
    """``process_element`` / ``on_timer`` context: the keyed process context plus the broadcast state read-only."""

    __slots__ = ()

    def get_broadcast_state(self, state_descriptor: Any) -> ReadOnlyBroadcastState:
        return self._op.broadcast_states.read_only(state_descriptor)

    def current_processing_time(self) -> int:
        return self._op.context.clock.now_ms()

    def current_watermark(self) -> int:
        return self._op.timer_service.current_watermark()


class _BroadcastSideContext(KeyedBroadcastProcessFunction.Context):
    """``process_broadcast_element`` context: the broadcast state writable, no key, no timers."""

    __slots__ = ("_op", "current_timestamp")

    def __init__(self, op: Any) -> None:
        self._op = op
        self.current_timestamp: int | None = None

    def get_broadcast_state(self, state_descriptor: Any) -> BroadcastState:
        return self._op.broadcast_states.writable(state_descriptor)

    def timestamp(self) -> int | None:
        return self.current_timestamp

    def current_processing_time(self) -> int:
        return self._op.context.clock.now_ms()

    def current_watermark(self) -> int:
        return self._op.current_watermark()


class KeyedBroadcastProcessOperator(KeyedProcessOperator):
    """Runs a :class:`KeyedBroadcastProcessFunction`: keyed records with their key current, broadcast records
    with none; keyed state and timers as the keyed process operator, broadcast state beside them."""

    function_type = KeyedBroadcastProcessFunction

    def __init__(self, function: KeyedBroadcastProcessFunction, key_selector: Any,
                 descriptors: Iterable[MapStateDescriptor]) -> None:
        # the node keys tagged records (TaggedKeySelector); the operator untags first, then keys as its parent does
        first = key_selector.key_selector1 if isinstance(key_selector, TaggedKeySelector) else key_selector
        super().__init__(function, UntaggedKeySelector(first, FIRST) if callable(first) else first)
        self.descriptors = tuple(descriptors)

    def open(self, context: Any, output: Any) -> None:
        self.broadcast_states = BroadcastStateStore(self.descriptors)
        super().open(context, output)  # opens the user's function: its state handles need the backend
        self._ctx = _KeyedReadOnlyContext(self)
        self._broadcast_ctx = _BroadcastSideContext(self)

    def process_element(self, record: StreamRecord) -> None:
        input, value = _untag(record.value)
        if input == SECOND:
            self._process_broadcast(value, record.timestamp)
        else:  # the keyed process operator's element path, with the user's record
            super().process_element(StreamRecord(value, record.timestamp))

    def _process_broadcast(self, value: Any, timestamp: int | None) -> None:
        ctx = self._broadcast_ctx
        ctx.current_timestamp = timestamp
        backend = self.keyed_state_backend
        self.keyed_state_backend = _NO_CURRENT_KEY  # type: ignore[assignment]
        try:
            results = self.function.process_broadcast_element(value, ctx)
            if results is not None:
                results = list(results)  # a generator runs now, while there is no current key
        finally:
            self.keyed_state_backend = backend
        self._emit(results, timestamp)

    def snapshot_state(self, checkpoint_id: int) -> OperatorSnapshot:
        return _WithBroadcastState(super().snapshot_state(checkpoint_id), self.broadcast_states.to_arrow_tables())

    def initialize_state(self, snapshots: Any, key_group_range: KeyGroupRange | None = None) -> None:
        broadcast, keyed = split_broadcast_tables(materialize_all(snapshots))
        super().initialize_state(keyed, key_group_range)
        self.broadcast_states.restore(broadcast)


# ---- non-keyed -------------------------------------------------------------------------------------------


class _NonKeyedContext(BroadcastProcessFunction.Context):
    """Both contexts of a BroadcastProcessFunction; ``writable`` says which state view it hands out."""

    __slots__ = ("_op", "writable", "current_timestamp")

    def __init__(self, op: BroadcastProcessOperator, writable: bool) -> None:
        self._op = op
        self.writable = writable
        self.current_timestamp: int | None = None

    def get_broadcast_state(self, state_descriptor: Any) -> Any:
        store = self._op.broadcast_states
        return store.writable(state_descriptor) if self.writable else store.read_only(state_descriptor)

    def timestamp(self) -> int | None:
        return self.current_timestamp

    def current_processing_time(self) -> int:
        return self._op.context.clock.now_ms()

    def current_watermark(self) -> int:
        return self._op.watermark


class BroadcastProcessOperator(OneInputStreamOperator):
    """Runs a :class:`BroadcastProcessFunction` on a non-keyed stream and a broadcast stream."""

    def __init__(self, function: BroadcastProcessFunction, descriptors: Iterable[MapStateDescriptor]) -> None:
        if not isinstance(function, BroadcastProcessFunction):
            raise JobDefinitionError("func", function, "must be a BroadcastProcessFunction")
        self.function = copy_function(function)
        self.descriptors = tuple(descriptors)

    def open(self, context: Any, output: Any) -> None:
        super().open(context, output)
        self.broadcast_states = BroadcastStateStore(self.descriptors)
        self.watermark = MIN_WATERMARK
        self._ctx = _NonKeyedContext(self, writable=False)
        self._broadcast_ctx = _NonKeyedContext(self, writable=True)
        self.function.open(NonKeyedRuntimeContext(self, "a BroadcastProcessFunction",
                                                  "key_by(...) the non-broadcast stream and use a "
                                                  "KeyedBroadcastProcessFunction"))

    def close(self) -> None:
        self.function.close()

    def process_element(self, record: StreamRecord) -> None:
        input, value = _untag(record.value)
        if input == FIRST:
            ctx = self._ctx
            ctx.current_timestamp = record.timestamp
            results = self.function.process_element(value, ctx)
        else:
            ctx = self._broadcast_ctx
            ctx.current_timestamp = record.timestamp
            results = self.function.process_broadcast_element(value, ctx)
        emit_results(self.output, self.function, results, record.timestamp)

    def process_watermark(self, watermark: Watermark) -> None:
        self.watermark = max(self.watermark, watermark.timestamp)
        self.output.emit_watermark(watermark)

    def current_watermark(self) -> int:
        return self.watermark

    def snapshot_state(self, checkpoint_id: int) -> OperatorSnapshot:
        return _WithBroadcastState(super().snapshot_state(checkpoint_id), self.broadcast_states.to_arrow_tables())

    def initialize_state(self, snapshots: Any, key_group_range: KeyGroupRange | None = None) -> None:
        broadcast, _ = split_broadcast_tables(materialize_all(snapshots))
        self.broadcast_states.restore(broadcast)
