"""A keyed-state snapshot and its Arrow form (seed 002 "Asynchronous State Snapshots", ARCHITECTURE section 5).

Seed 002: "the operator must be able to produce a state object that should be
stored in a way such that further modifications to the operator state do not
affect that state object ... copy-on-write style data structures".
:meth:`HeapKeyedStateBackend.snapshot` therefore only *references* the backend's
per-key-group dicts (O(number of key groups), nothing copied) and marks them
shared; the backend copies a group before its next access.  A
:class:`KeyedStateSnapshot` can then be materialized with
:meth:`KeyedStateSnapshot.to_arrow_tables` later, even from another thread,
while processing goes on.

Arrow layout, one table per state name (also the restore contract)::

    key_group     int32    the key's key group (rescaling filters on it)
    key           string   codec.encode_key(key)
    namespace     string   encode_namespace(ns): {"type":"time","start":..,"end":..},
                           {"type":"global"}, {"type":"void"} or {"type":"value","value":..}
    window_start  int64?   TimeWindow start, null for other namespaces
    window_end    int64?   TimeWindow end, null for other namespaces
    value         string   codec.encode(value) (a list state stores its whole list in one row,
                           an aggregating state its accumulator, a map state its dict)
    value_num     float64? the value when it is an int or float (for validation tools), else null

Schema metadata: ``state_kind`` (value/list/map/reducing/aggregating),
``format_version``, ``max_parallelism``.  No pickle: decoding builds plain data only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterator

import pyarrow as pa

from engine.errors import CorruptSnapshotError, StateSerializationError, UnsupportedFormatVersion
from engine.state import codec
from engine.state.key_groups import KeyGroupRange
from engine.windowing.windows import GLOBAL_WINDOW, GlobalWindow, TimeWindow

FORMAT_VERSION = 1

#: the plain kinds, then their time-to-live twins (engine/state/ttl.py: entries stored as ``(value, stamp)``)
STATE_KINDS = ("value", "list", "map", "reducing", "aggregating",
               "value-ttl", "list-ttl", "map-ttl", "reducing-ttl", "aggregating-ttl")


@dataclass(frozen=True, slots=True)
class VoidNamespace:
    """The namespace of state that belongs to a key but to no window (Flink's VoidNamespace)."""

    def __repr__(self) -> str:
        return "VOID_NAMESPACE"


#: Namespace for per-key state outside any window (ProcessWindowFunction global state, timers of non-window operators).
VOID_NAMESPACE = VoidNamespace()

SCHEMA_FIELDS = (
    pa.field("key_group", pa.int32(), nullable=False),
    pa.field("key", pa.string(), nullable=False),
    pa.field("namespace", pa.string(), nullable=False),
    pa.field("window_start", pa.int64(), nullable=True),
    pa.field("window_end", pa.int64(), nullable=True),
    pa.field("value", pa.string(), nullable=False),
    pa.field("value_num", pa.float64(), nullable=True),
)


def state_table_schema(state_kind: str, max_parallelism: int) -> pa.Schema:
    """The Arrow schema of one state's table, with its kind in the metadata."""
    return pa.schema(
        list(SCHEMA_FIELDS),
        metadata={
            "state_kind": state_kind,
            "format_version": str(FORMAT_VERSION),
            "max_parallelism": str(max_parallelism),
        },
    )


def encode_namespace(namespace: Any) -> str:
    """Canonical text of a namespace; TimeWindow, GlobalWindow and the void namespace stay distinguishable."""
    if type(namespace) is TimeWindow:
        return f'{{"end":{namespace.end},"start":{namespace.start},"type":"time"}}'
    if isinstance(namespace, GlobalWindow):
        return '{"type":"global"}'
    if isinstance(namespace, VoidNamespace):
        return '{"type":"void"}'
    try:
        inner = json.loads(codec.encode_key(namespace))
    except StateSerializationError as exc:
        raise StateSerializationError(f"cannot persist state namespace {namespace!r}: {exc}") from exc
    return json.dumps({"type": "value", "value": inner}, separators=(",", ":"), sort_keys=True)


def decode_namespace(text: str) -> Any:
    """Inverse of :func:`encode_namespace`; raises CorruptSnapshotError on anything else."""
    try:
        raw = json.loads(text)
    except (TypeError, ValueError) as exc:
        raise CorruptSnapshotError(f"namespace is not valid JSON ({exc}): {text[:80]!r}") from exc
    kind = raw.get("type") if isinstance(raw, dict) else None
    if kind == "time":
        start, end = raw.get("start"), raw.get("end")
        if type(start) is not int or type(end) is not int:
            raise CorruptSnapshotError(f"time-window namespace needs integer start and end: {text[:80]!r}")
        return TimeWindow(start, end)
    if kind == "global":
        return GLOBAL_WINDOW
    if kind == "void":
        return VOID_NAMESPACE
    if kind == "value" and "value" in raw:
        value = codec.decode(json.dumps(raw["value"]))
        return _hashable(value)
    raise CorruptSnapshotError(f"unknown namespace encoding {text[:80]!r}")


def _hashable(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    return value


@dataclass(frozen=True)
class StateTableSnapshot:
    """One state's entries at snapshot time: per key group (index = group - range start) a dict
    ``(key, namespace) -> value`` that the backend promised never to mutate again."""

    name: str
    state_kind: str
    groups: tuple[dict, ...]


class KeyedStateSnapshot:
    """The state of one backend at one instant; cheap to take, materialized later (seed 002).

    Taking it copied no entries: it holds the backend's group dicts, which the
    backend copies before touching them again (copy-on-write).  So it keeps
    reflecting the snapshot instant however much processing continues, and it
    may be materialized from another thread.
    """

    def __init__(self, max_parallelism: int, key_group_range: KeyGroupRange, tables: dict[str, StateTableSnapshot]):
        self.max_parallelism = max_parallelism
        self.key_group_range = key_group_range
        self._tables = tables

    @property
    def state_names(self) -> list[str]:
        return sorted(self._tables)

    def state_kind(self, name: str) -> str:
        return self._tables[name].state_kind

    def num_entries(self, name: str | None = None) -> int:
        tables = [self._tables[name]] if name is not None else self._tables.values()
        return sum(len(g) for t in tables for g in t.groups)

    def entries(self, name: str) -> Iterator[tuple[int, Any, Any, Any]]:
        """``(key_group, key, namespace, value)`` of one state, by key group."""
        table = self._tables[name]
        start = self.key_group_range.start_key_group
        for index, group in enumerate(table.groups):
            for (key, namespace), value in group.items():
                yield start + index, key, namespace, value

    def to_arrow_tables(self) -> dict[str, pa.Table]:
        """One Arrow table per state name, in the layout of this module's docstring."""
        return {name: self._to_arrow_table(table) for name, table in sorted(self._tables.items())}

    def _to_arrow_table(self, table: StateTableSnapshot) -> pa.Table:
        key_groups: list[int] = []
        keys: list[str] = []
        namespaces: list[str] = []
        starts: list[int | None] = []
        ends: list[int | None] = []
        values: list[str] = []
        nums: list[float | None] = []
        start_group = self.key_group_range.start_key_group
        key_cache: dict[Any, str] = {}
        ns_cache: dict[Any, str] = {}
        for index, group in enumerate(table.groups):
            group_id = start_group + index
            # sort for deterministic files: equal state gives byte-equal snapshots
            rows = []
            for (key, namespace), value in group.items():
                ek = key_cache.get(key)
                if ek is None:
                    ek = key_cache[key] = codec.encode_key(key)
                en = ns_cache.get(namespace)
                if en is None:
                    en = ns_cache[namespace] = encode_namespace(namespace)
                rows.append((ek, en, namespace, value))
            rows.sort(key=lambda r: (r[0], r[1]))
            for ek, en, namespace, value in rows:
                key_groups.append(group_id)
                keys.append(ek)
                namespaces.append(en)
                if type(namespace) is TimeWindow:
                    starts.append(namespace.start)
                    ends.append(namespace.end)
                else:
                    starts.append(None)
                    ends.append(None)
                try:
                    values.append(codec.encode(value))
                except StateSerializationError as exc:
                    raise StateSerializationError(f"state {table.name!r}, key {ek}: {exc}") from exc
                t = type(value)
                nums.append(float(value) if (t is int or t is float) else None)
        schema = state_table_schema(table.state_kind, self.max_parallelism)
        return pa.Table.from_arrays(
            [
                pa.array(key_groups, pa.int32()),
                pa.array(keys, pa.string()),
                pa.array(namespaces, pa.string()),
                pa.array(starts, pa.int64()),
                pa.array(ends, pa.int64()),
                pa.array(values, pa.string()),
                pa.array(nums, pa.float64()),
            ],
            schema=schema,
        )


def validate_state_table(name: str, table: pa.Table, max_parallelism: int) -> str:
    """Check a table against the layout: return its state kind or raise CorruptSnapshotError naming table and column."""
    if not isinstance(table, pa.Table):
        raise CorruptSnapshotError(f"state table {name!r} is a {type(table).__name__}, not a pyarrow.Table")
    for field in SCHEMA_FIELDS:
        if field.name not in table.column_names:
            raise CorruptSnapshotError(f"state table {name!r} lacks column {field.name!r}")
        actual = table.schema.field(field.name).type
        if actual != field.type:
            raise CorruptSnapshotError(
                f"state table {name!r} column {field.name!r} has type {actual}, expected {field.type}"
            )
        if not field.nullable and table.column(field.name).null_count:
            raise CorruptSnapshotError(f"state table {name!r} column {field.name!r} has null values")
    metadata = {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}
    kind = metadata.get("state_kind")
    if kind not in STATE_KINDS:
        raise CorruptSnapshotError(
            f"state table {name!r} metadata 'state_kind' is {kind!r}, expected one of {', '.join(STATE_KINDS)}"
        )
    version = metadata.get("format_version", str(FORMAT_VERSION))
    if version != str(FORMAT_VERSION):
        raise UnsupportedFormatVersion(
            f"state table {name!r} has format_version {version!r}; this Sluice reads {FORMAT_VERSION}"
        )
    written_mp = metadata.get("max_parallelism")
    if written_mp is not None and written_mp != str(max_parallelism):
        raise CorruptSnapshotError(
            f"state table {name!r} was written with max_parallelism {written_mp}, the job now has {max_parallelism}: "
            "the number of key groups cannot change across a restore (as in Flink)"
        )
    return kind
