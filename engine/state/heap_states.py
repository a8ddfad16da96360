"""The heap backend's state objects (Value/List/Map/Reducing/Aggregating) and the per-key-group tables behind them.

Copy-on-write snapshots (seed 002, "Asynchronous State Snapshots"):
:meth:`HeapKeyedStateBackend.snapshot` hands the current group dicts to the
snapshot and marks them *shared*; the first access (read or write) to a shared
group afterwards replaces it with a copy, and mutable values in it (lists, map
dicts, accumulators) are copied too, so nothing reachable from the snapshot is
ever mutated again.  Reads also copy because callers may mutate what they read
(an accumulator updated in place, a list returned by ``get()``).  The cost is
O(group size) once per touched group per snapshot, paid during processing, not
in the synchronous part, and mostly at C speed: list and map values are copied
with ``map(list.copy, ...)``, and a group whose values are all immutable (ints,
floats, strings, tuples of them: the usual accumulators) is copied as one
``dict.copy()`` after a C-level type scan.

``ListState.get()`` / ``ReducingState.get()`` / ``AggregatingState.get()`` return
None when the state holds nothing for the current key and namespace (Flink's
internal behaviour; the window operator relies on it to tell "empty" from
"no window contents").  ``ValueState.update(None)`` clears, as in Flink.
"""

from __future__ import annotations

import copy
from itertools import chain
from typing import TYPE_CHECKING, Any, Iterable, Iterator


from engine.state.descriptors import (
    AggregatingState,
    AggregatingStateDescriptor,
    ListState,
    ListStateDescriptor,
    MapState,
    MapStateDescriptor,
    ReducingState,
    ReducingStateDescriptor,
    StateDescriptor,
    ValueState,
    ValueStateDescriptor,
)
from engine.state.snapshot import (
    VOID_NAMESPACE,
)

if TYPE_CHECKING:  # the backend creates these states; they only hold it (a runtime import would be a cycle)
    from engine.state.keyed_state import HeapKeyedStateBackend

__all__ = [
    "STATE_KINDS",
    "StateTable",
    "InternalKvState",
    "InternalValueState",
    "InternalListState",
    "InternalMapState",
    "InternalReducingState",
    "InternalAggregatingState",
]

_MISSING = object()
_IMMUTABLE_SCALARS = (int, float, str, bool, type(None), bytes)


_IMMUTABLE_SCALAR_TYPES = frozenset(_IMMUTABLE_SCALARS)
_IMMUTABLE_CONTAINER_TYPES = frozenset((tuple, frozenset))


def _copy_value(value: Any) -> Any:
    if type(value) in _IMMUTABLE_SCALARS:
        return value
    return copy.deepcopy(value)


def _all_immutable(values: Any) -> bool:
    """True if every value is an immutable scalar, or a tuple/frozenset of such (at any depth).

    Checked with C-level ``map(type, ...)`` passes, so a group of plain accumulators (ints,
    floats, tuples of them) is recognised in a few ns per value and copied as a whole.
    """
    types = set(map(type, values))
    if types <= _IMMUTABLE_SCALAR_TYPES:
        return True
    if not types <= _IMMUTABLE_SCALAR_TYPES | _IMMUTABLE_CONTAINER_TYPES:
        return False
    inner = list(chain.from_iterable(v for v in values if type(v) in _IMMUTABLE_CONTAINER_TYPES))
    return _all_immutable(inner)


class StateTable:
    """All entries of one state name: one dict per key group plus its shared-with-a-snapshot flag."""

    __slots__ = ("name", "kind", "groups", "shared")

    def __init__(self, name: str, kind: str, num_groups: int) -> None:
        self.name = name
        self.kind = kind
        self.groups: list[dict] = [{} for _ in range(num_groups)]
        self.shared: list[bool] = [False] * num_groups

    def unshare(self, index: int) -> dict:
        """Copy group ``index`` (and its mutable values) so the snapshot's dict stays untouched."""
        old = self.groups[index]
        if self.kind.startswith("list"):  # list and list-ttl
            new = dict(zip(old.keys(), map(list.copy, old.values())))
        elif self.kind.startswith("map"):
            new = dict(zip(old.keys(), map(dict.copy, old.values())))
        elif _all_immutable(old.values()):
            new = old.copy()  # nothing in it can be changed in place: the values may be shared
        else:
            new = {k: _copy_value(v) for k, v in old.items()}
        self.groups[index] = new
        self.shared[index] = False
        return new

    def freeze(self) -> tuple[dict, ...]:
        """Hand the current dicts to a snapshot; later accesses copy first."""
        shared = self.shared
        for i in range(len(shared)):
            shared[i] = True
        return tuple(self.groups)

    def num_entries(self) -> int:
        return sum(len(g) for g in self.groups)


class InternalKvState:
    """Common part of the state objects: the table, the backend (for the current key) and the namespace."""

    __slots__ = ("_backend", "_table", "_namespace", "descriptor")
    kind = ""

    def __init__(self, backend: HeapKeyedStateBackend, table: StateTable, descriptor: StateDescriptor) -> None:
        self._backend = backend
        self._table = table
        self._namespace: Any = VOID_NAMESPACE
        self.descriptor = descriptor

    @property
    def name(self) -> str:
        return self._table.name

    def set_current_namespace(self, namespace: Any) -> None:
        self._namespace = namespace

    def get_current_namespace(self) -> Any:
        return self._namespace

    def _group(self) -> dict:
        index = self._backend._group_index
        table = self._table
        if table.shared[index]:
            return table.unshare(index)
        return table.groups[index]

    def clear(self) -> None:
        self._group().pop((self._backend._current_key, self._namespace), None)

    def get_internal(self) -> Any:
        """The raw stored value (list, accumulator, ...) or None."""
        return self._group().get((self._backend._current_key, self._namespace))

    def update_internal(self, value: Any) -> None:
        """Replace the raw stored value; None clears."""
        if value is None:
            self.clear()
        else:
            self._group()[(self._backend._current_key, self._namespace)] = value

    def has_entry(self) -> bool:
        """True if there is an entry for the current key and namespace."""
        return (self._backend._current_key, self._namespace) in self._group()

    def fold_entries(self, entries: Iterable[tuple[tuple[Any, Any], Any]], fold: Any,
                     namespace_of: dict | None = None) -> None:
        """For each ``((key, namespace), arg)`` in order: ``update_internal(fold(get_internal(), arg))``
        under that key and namespace -- one loop instead of four calls per entry (the window
        operator's batch path hands it its groups dict's ``items()``).  With ``namespace_of`` the
        second item is a token and the namespace is ``namespace_of[token]``.  Leaves the last
        entry's key and namespace current, as the calls one by one would.  Copy-on-write and
        key-group checks are those of the single calls.
        """
        backend = self._backend
        table = self._table
        groups, shared = table.groups, table.shared
        simple_cache = backend._simple_key_cache
        first = backend._start
        set_key = backend.set_current_key
        last_key: Any = _MISSING
        namespace: Any = _MISSING
        for (key, namespace), arg in entries:
            if namespace_of is not None:
                namespace = namespace_of[namespace]
            t = type(key)
            group_id = simple_cache.get(key) if t is str or t is int else None
            if group_id is None:
                set_key(key)  # computes, checks and caches the key group
                group_id = backend.current_key_group
            index = group_id - first  # type: ignore[operator]
            group = table.unshare(index) if shared[index] else groups[index]
            ck = (key, namespace)
            value = fold(group.get(ck), arg)
            if value is None:
                group.pop(ck, None)
            else:
                group[ck] = value
            last_key = key
        if last_key is not _MISSING:
            set_key(last_key)
            self._namespace = namespace

    def fold_key_entries(self, entries: Iterable[tuple[Any, list[tuple[Any, Any]]]], fold: Any) -> None:
        """:meth:`fold_entries` with the entries grouped by key: ``(key, [(namespace, arg), ...])``, so
        the key group is looked up once per key.  Same steps per entry, in the same order; leaves the
        last key and namespace current."""
        backend = self._backend
        table = self._table
        groups, shared = table.groups, table.shared
        simple_cache = backend._simple_key_cache
        first = backend._start
        set_key = backend.set_current_key
        last_key: Any = _MISSING
        namespace: Any = _MISSING
        for key, namespaced in entries:
            t = type(key)
            group_id = simple_cache.get(key) if t is str or t is int else None
            if group_id is None:
                set_key(key)  # computes, checks and caches the key group
                group_id = backend.current_key_group
            index = group_id - first  # type: ignore[operator]
            group = table.unshare(index) if shared[index] else groups[index]
            for namespace, arg in namespaced:
                ck = (key, namespace)
                value = fold(group.get(ck), arg)
                if value is None:
                    group.pop(ck, None)
                else:
                    group[ck] = value
            last_key = key
        if last_key is not _MISSING:
            set_key(last_key)
            self._namespace = namespace

    def pop_internal(self) -> Any:
        """Remove the current key and namespace's raw value and return it (None if there was none)."""
        return self._group().pop((self._backend._current_key, self._namespace), None)


class InternalValueState(InternalKvState, ValueState):
    __slots__ = ()
    kind = "value"

    def value(self) -> Any:
        v = self._group().get((self._backend._current_key, self._namespace), _MISSING)
        if v is _MISSING:
            return self.descriptor.default  # type: ignore[attr-defined]
        return v

    def update(self, value: Any) -> None:
        if value is None:
            self.clear()
        else:
            self._group()[(self._backend._current_key, self._namespace)] = value


class _MergingState(InternalKvState):
    """List, reducing and aggregating state: their contents of several namespaces can be merged (sessions)."""

    __slots__ = ()

    def _merge_values(self, a: Any, b: Any) -> Any:
        raise NotImplementedError

    def merge_namespaces(self, target: Any, sources: Iterable[Any]) -> None:
        """Move the current key's contents of every ``sources`` namespace into ``target`` (Flink's
        AbstractHeapMergingState.mergeNamespaces: sources merged in order, then ``merge(target, merged)``)."""
        group = self._group()
        key = self._backend._current_key
        merged = _MISSING
        for source in sources:
            value = group.pop((key, source), _MISSING)
            if value is _MISSING:
                continue
            merged = value if merged is _MISSING else self._merge_values(merged, value)
        if merged is _MISSING:
            return
        existing = group.get((key, target), _MISSING)
        group[(key, target)] = merged if existing is _MISSING else self._merge_values(existing, merged)


class InternalListState(_MergingState, ListState):
    __slots__ = ()
    kind = "list"

    def get(self) -> list | None:
        """The stored list (callers must not mutate it; use update) or None when empty."""
        return self._group().get((self._backend._current_key, self._namespace))

    def add(self, value: Any) -> None:
        group = self._group()
        ck = (self._backend._current_key, self._namespace)
        lst = group.get(ck)
        if lst is None:
            group[ck] = [value]
        else:
            lst.append(value)

    def add_all(self, values: Iterable[Any]) -> None:
        values = list(values)
        if not values:
            return
        group = self._group()
        ck = (self._backend._current_key, self._namespace)
        lst = group.get(ck)
        if lst is None:
            group[ck] = values
        else:
            lst.extend(values)

    def update(self, values: list[Any]) -> None:
        """Replace the list; an empty list clears (as in Flink)."""
        values = list(values) if values is not None else []
        if values:
            self._group()[(self._backend._current_key, self._namespace)] = values
        else:
            self.clear()

    def _merge_values(self, a: list, b: list) -> list:
        return a + b


class InternalMapState(InternalKvState, MapState):
    __slots__ = ()
    kind = "map"

    def _map(self, create: bool) -> dict | None:
        group = self._group()
        ck = (self._backend._current_key, self._namespace)
        m = group.get(ck)
        if m is None and create:
            m = group[ck] = {}
        return m

    def get(self, key: Any) -> Any:
        m = self._map(False)
        return None if m is None else m.get(key)

    def put(self, key: Any, value: Any) -> None:
        self._map(True)[key] = value  # type: ignore[index]

    def put_all(self, entries: dict) -> None:
        self._map(True).update(entries)  # type: ignore[union-attr]

    def remove(self, key: Any) -> None:
        m = self._map(False)
        if m is not None:
            m.pop(key, None)
            if not m:
                self.clear()

    def contains(self, key: Any) -> bool:  # type: ignore[override]
        m = self._map(False)
        return m is not None and key in m

    def items(self) -> Iterator[tuple[Any, Any]]:
        m = self._map(False)
        return iter(list(m.items())) if m else iter(())

    def keys(self) -> Iterator[Any]:
        m = self._map(False)
        return iter(list(m)) if m else iter(())

    def values(self) -> Iterator[Any]:
        m = self._map(False)
        return iter(list(m.values())) if m else iter(())

    def is_empty(self) -> bool:
        return not self._map(False)


class InternalReducingState(_MergingState, ReducingState):
    __slots__ = ()
    kind = "reducing"

    def get(self) -> Any:
        return self._group().get((self._backend._current_key, self._namespace))

    def add(self, value: Any) -> None:
        group = self._group()
        ck = (self._backend._current_key, self._namespace)
        current = group.get(ck, _MISSING)
        reduce = self.descriptor.reduce_function  # type: ignore[attr-defined]
        group[ck] = value if current is _MISSING else reduce(current, value)

    def _merge_values(self, a: Any, b: Any) -> Any:
        return self.descriptor.reduce_function(a, b)  # type: ignore[attr-defined]


class InternalAggregatingState(_MergingState, AggregatingState):
    __slots__ = ()
    kind = "aggregating"

    def get(self) -> Any:
        """``get_result`` of the accumulator, or None when nothing was added."""
        acc = self._group().get((self._backend._current_key, self._namespace), _MISSING)
        if acc is _MISSING:
            return None
        return self.descriptor.aggregate_function.get_result(acc)  # type: ignore[attr-defined]

    def add(self, value: Any) -> None:
        group = self._group()
        ck = (self._backend._current_key, self._namespace)
        fn = self.descriptor.aggregate_function  # type: ignore[attr-defined]
        acc = group.get(ck, _MISSING)
        if acc is _MISSING:
            acc = fn.create_accumulator()
        group[ck] = fn.add(value, acc)

    def _merge_values(self, a: Any, b: Any) -> Any:
        return self.descriptor.aggregate_function.merge(a, b)  # type: ignore[attr-defined]


STATE_KINDS: dict[type, tuple[str, type[InternalKvState]]] = {
    ValueStateDescriptor: ("value", InternalValueState),
    ListStateDescriptor: ("list", InternalListState),
    MapStateDescriptor: ("map", InternalMapState),
    ReducingStateDescriptor: ("reducing", InternalReducingState),
    AggregatingStateDescriptor: ("aggregating", InternalAggregatingState),
}
