"""The heap keyed state backend: state per (key, namespace), partitioned by key group (seed 002).

Seed 000: a window is only an identifier; "the window's elements are stored in
Key/Value state, the key being the window".  Here the *namespace* is the window
(TimeWindow, GlobalWindow) or :data:`VOID_NAMESPACE` for per-key state, and the
key is the stream key set with :meth:`HeapKeyedStateBackend.set_current_key`.

Storage: for every state name a :class:`StateTable` holding one plain dict per
key group, ``(key, namespace) -> value``.  Operations act on the backend's
current key and the state object's current namespace; the hot path is a list
index, one flag check and one dict operation.

Keys must be hashable (return a tuple, not a list, from ``key_by``).  The backend
holds a key's identity (engine/state/key_identity.py: ``1``, ``1.0`` and ``True``
are three keys, as in Flink), hands the key itself to ``get_current_key``, and
encodes keys with :func:`engine.state.codec.encode_key` for key groups and snapshots.

The state objects and their per-group tables are in :mod:`engine.state.heap_states`.
"""

from __future__ import annotations

from typing import Any, Iterator

import pyarrow as pa

from engine.clock import Clock, SystemClock
from engine.errors import CorruptSnapshotError, IllegalStateError, JobDefinitionError
from engine.state import codec
from engine.state.descriptors import (
    StateDescriptor,
)
from engine.state.heap_states import STATE_KINDS, InternalKvState, StateTable
from engine.state.key_identity import TypedKey, key_identity, key_value
from engine.state.key_groups import KeyGroupRange, key_group_for_encoded_key
from engine.state.ttl import base_kind, drop_expired, ttl_state_class
from engine.state.snapshot import (
    VOID_NAMESPACE,
    KeyedStateSnapshot,
    StateTableSnapshot,
    VoidNamespace,
    decode_namespace,
    validate_state_table,
)

__all__ = ["VOID_NAMESPACE", "VoidNamespace", "HeapKeyedStateBackend"]

_MISSING = object()
#: bound of the key -> key group caches; cleared wholesale when reached (cheap, keeps memory flat)
_KEY_CACHE_LIMIT = 100_000


class HeapKeyedStateBackend:
    """Keyed state of one subtask: the key groups in ``key_group_range`` of ``max_parallelism``.

    Call :meth:`set_current_key` before using any state object; a state object
    acts on that key and on its own namespace (``set_current_namespace``).
    """

    def __init__(self, max_parallelism: int, key_group_range: KeyGroupRange, ttl_clock: Clock | None = None) -> None:
        if not isinstance(max_parallelism, int) or max_parallelism < 1:
            raise JobDefinitionError("max_parallelism", max_parallelism, "must be a positive int")
        if len(key_group_range) and (
            key_group_range.start_key_group < 0 or key_group_range.end_key_group >= max_parallelism
        ):
            raise JobDefinitionError(
                "key_group_range", key_group_range, f"must lie within [0, {max_parallelism - 1}]"
            )
        self.max_parallelism = max_parallelism
        self.key_group_range = key_group_range
        self._start = key_group_range.start_key_group
        self._num_groups = len(key_group_range)
        self._tables: dict[str, StateTable] = {}
        self._states: dict[str, InternalKvState] = {}
        self._current_key: Any = None
        # None until set_current_key: indexing with it fails loudly
        self._group_index: int = None  # type: ignore[assignment]
        self.current_key_group: int | None = None
        self._simple_key_cache: dict[Any, int] = {}
        self._encoded_key_cache: dict[str, int] = {}
        #: processing time of state TTL (engine/state/ttl.py); a test may hand in a ManualClock
        self.ttl_clock: Clock = ttl_clock if ttl_clock is not None else SystemClock()
        #: restored TTL tables not yet cleaned of what expired (done when their descriptor is first used)
        self._restored_ttl_tables: set[str] = set()

    # ---- keys -------------------------------------------------------------------------------
    def set_current_key(self, key: Any) -> None:
        """Make ``key`` the key every state object acts on (computes and checks its key group).  State is keyed by
        the key's identity (engine/state/key_identity.py): ``1``, ``1.0`` and ``True`` are three keys."""
        t = type(key)
        if t is str or t is int:
            group = self._simple_key_cache.get(key)
            if group is None:
                group = self._key_group_of_encoded(codec.encode_key(key), key)
                cache = self._simple_key_cache
                if len(cache) >= _KEY_CACHE_LIMIT:
                    cache.clear()
                cache[key] = group
        else:
            if t is TypedKey:  # an identity already: its text is the encoded key
                encoded = key.text
            else:
                try:
                    hash(key)
                except TypeError:
                    raise JobDefinitionError(
                        "key", key, "must be hashable", "Return a tuple instead of a list (or dict) from key_by"
                    ) from None
                encoded = codec.encode_key(key)
            group = self._encoded_key_cache.get(encoded)
            if group is None:
                group = self._key_group_of_encoded(encoded, key)
                cache = self._encoded_key_cache
                if len(cache) >= _KEY_CACHE_LIMIT:
                    cache.clear()
                cache[encoded] = group
            key = key_identity(key, encoded)
        self._current_key = key
        self._group_index = group - self._start
        self.current_key_group = group

    def _key_group_of_encoded(self, encoded: str, key: Any) -> int:
        group = key_group_for_encoded_key(encoded, self.max_parallelism)
        if not self.key_group_range.contains(group):
            raise IllegalStateError(
                f"key {key!r} belongs to key group {group}, outside this backend's range "
                f"[{self.key_group_range.start_key_group}, {self.key_group_range.end_key_group}] "
                f"(max_parallelism {self.max_parallelism}): records were routed to the wrong subtask"
            )
        return group

    def get_current_key(self) -> Any:
        return key_value(self._current_key)

    @property
    def current_key_identity(self) -> Any:
        """The current key as state and timers hold it (engine/state/key_identity.py)."""
        return self._current_key

    # ---- state objects ----------------------------------------------------------------------
    def get_partitioned_state(self, descriptor: StateDescriptor) -> InternalKvState:
        """The state object for ``descriptor``; the same name always returns the same object."""
        existing = self._states.get(descriptor.name)
        if existing is not None:
            if type(existing.descriptor) is not type(descriptor):
                raise JobDefinitionError(
                    "state_descriptor",
                    descriptor,
                    f"reuses the name {descriptor.name!r} of a {existing.kind} state",
                    "Give every piece of state its own name",
                )
            return existing
        kind_and_class = STATE_KINDS.get(type(descriptor))
        if kind_and_class is None:
            raise JobDefinitionError(
                "state_descriptor", descriptor, "must be a Value/List/Map/Reducing/AggregatingStateDescriptor"
            )
        kind, cls = kind_and_class
        ttl_config = descriptor.ttl_config
        if ttl_config is not None:
            cls = ttl_state_class(kind)
        if kind == "reducing" and not callable(getattr(descriptor, "reduce_function", None)):
            raise JobDefinitionError("reduce_function", None, "is required for a ReducingStateDescriptor")
        if kind == "aggregating" and descriptor.aggregate_function is None:  # type: ignore[attr-defined]
            raise JobDefinitionError("aggregate_function", None, "is required for an AggregatingStateDescriptor")
        kind = cls.kind
        table = self._tables.get(descriptor.name)
        if table is None:
            table = self._tables[descriptor.name] = StateTable(descriptor.name, kind, self._num_groups)
        elif table.kind != kind:
            raise JobDefinitionError(
                "state_descriptor",
                descriptor,
                f"declares {descriptor.name!r} as {kind} state but the restored snapshot holds it as "
                f"{table.kind} state",
                "Keep the state kind when changing a job (as in Flink, time-to-live can be neither added to nor "
                "removed from a state across a restore), or start without the snapshot",
            )
        if descriptor.name in self._restored_ttl_tables:
            self._restored_ttl_tables.discard(descriptor.name)
            self._drop_expired(table, ttl_config.ttl_ms)
        state = cls(self, table, descriptor)
        self._states[descriptor.name] = state
        return state

    def _drop_expired(self, table: StateTable, ttl_ms: int) -> None:
        """Cleanup at restore: a restored TTL table starts without expired entries."""
        now = self.ttl_clock.now_ms()
        for group in table.groups:
            for ck in list(group):
                live = drop_expired(table.kind, group[ck], ttl_ms, now)
                if live is None:
                    del group[ck]
                else:
                    group[ck] = live

    # ---- inspection -------------------------------------------------------------------------
    def get_keys(self, state_name: str, namespace: Any) -> Iterator[Any]:
        """Keys with an entry in ``state_name`` under ``namespace`` (materialized: state may change while iterating)."""
        table = self._tables.get(state_name)
        if table is None:
            return iter(())
        return iter([k for g in table.groups for (k, ns) in g if ns == namespace])

    def get_keys_and_namespaces(self, state_name: str) -> Iterator[tuple[Any, Any]]:
        """Every ``(key, namespace)`` with an entry in ``state_name`` (materialized, like :meth:`get_keys`)."""
        table = self._tables.get(state_name)
        if table is None:
            return iter(())
        return iter([kn for g in table.groups for kn in g])

    def num_entries(self, state_name: str | None = None) -> int:
        if state_name is not None:
            table = self._tables.get(state_name)
            return 0 if table is None else table.num_entries()
        return sum(t.num_entries() for t in self._tables.values())

    @property
    def state_names(self) -> list[str]:
        return sorted(self._tables)

    def state_kinds(self) -> dict[str, str]:
        """State name -> kind ("value", "list", "map", "reducing", "aggregating")."""
        return {name: table.kind for name, table in sorted(self._tables.items())}

    # ---- snapshot and restore ---------------------------------------------------------------
    def snapshot(self) -> KeyedStateSnapshot:
        """Synchronous part of a snapshot: O(states x key groups), copies no entry (see module docstring)."""
        tables = {
            name: StateTableSnapshot(name, table.kind, table.freeze()) for name, table in self._tables.items()
        }
        return KeyedStateSnapshot(self.max_parallelism, self.key_group_range, tables)

    def restore_from_arrow(self, tables: dict[str, pa.Table]) -> None:
        """Load state written by :meth:`KeyedStateSnapshot.to_arrow_tables`, keeping only rows of this
        backend's key groups (rescaling: every new subtask reads all old files and filters).

        Restores into an empty backend only; columns, kinds and key-group placement are checked and
        a mismatch raises CorruptSnapshotError naming the table and column.
        """
        if self.num_entries():
            raise IllegalStateError("restore_from_arrow needs an empty backend; it already holds state")
        import pyarrow.compute as pc

        start, end = self.key_group_range.start_key_group, self.key_group_range.end_key_group
        for name, arrow_table in tables.items():
            kind = validate_state_table(name, arrow_table, self.max_parallelism)
            table = self._tables.get(name)
            if table is None:
                table = self._tables[name] = StateTable(name, kind, self._num_groups)
            elif table.kind != kind:
                raise CorruptSnapshotError(
                    f"state table {name!r} holds {kind} state but the job declares {table.kind} state"
                )
            if self._num_groups == 0 or arrow_table.num_rows == 0:
                continue
            key_group_col = arrow_table.column("key_group")
            mask = pc.and_(pc.greater_equal(key_group_col, start), pc.less_equal(key_group_col, end))
            mine = arrow_table.filter(mask)
            self._load_rows(name, kind, table, mine)
            if base_kind(kind) != kind:
                declared = self._states.get(name)
                if declared is None:
                    self._restored_ttl_tables.add(name)
                else:
                    self._drop_expired(table, declared.descriptor.ttl_config.ttl_ms)

    def _load_rows(self, name: str, kind: str, table: StateTable, rows: pa.Table) -> None:
        groups = rows.column("key_group").to_pylist()
        keys = rows.column("key").to_pylist()
        namespaces = rows.column("namespace").to_pylist()
        values = rows.column("value").to_pylist()
        key_cache: dict[str, Any] = {}
        ns_cache: dict[str, Any] = {}
        for row, (group, encoded_key, encoded_ns, encoded_value) in enumerate(zip(groups, keys, namespaces, values)):
            key = key_cache.get(encoded_key, _MISSING)
            if key is _MISSING:
                if key_group_for_encoded_key(encoded_key, self.max_parallelism) != group:
                    raise CorruptSnapshotError(
                        f"state table {name!r} column 'key_group': row {row} places key {encoded_key} in group "
                        f"{group}, but the key hashes to another group"
                    )
                try:
                    key = key_identity(_hashable(codec.decode(encoded_key)), encoded_key)
                except CorruptSnapshotError as exc:
                    raise CorruptSnapshotError(f"state table {name!r} column 'key': row {row}: {exc}") from exc
                key_cache[encoded_key] = key
            namespace = ns_cache.get(encoded_ns, _MISSING)
            if namespace is _MISSING:
                try:
                    namespace = ns_cache[encoded_ns] = decode_namespace(encoded_ns)
                except CorruptSnapshotError as exc:
                    raise CorruptSnapshotError(f"state table {name!r} column 'namespace': row {row}: {exc}") from exc
            try:
                value = codec.decode(encoded_value)
            except CorruptSnapshotError as exc:
                raise CorruptSnapshotError(f"state table {name!r} column 'value': row {row}: {exc}") from exc
            plain = base_kind(kind)
            if plain == "list" and not isinstance(value, list):
                raise CorruptSnapshotError(f"state table {name!r} column 'value': row {row} of list state is no list")
            if plain == "map" and not isinstance(value, dict):
                raise CorruptSnapshotError(f"state table {name!r} column 'value': row {row} of map state is no map")
            if plain != kind:
                stamped = value if plain == "list" else value.values() if plain == "map" else [value]
                if not all(isinstance(e, tuple) and len(e) == 2 and type(e[1]) is int for e in stamped):
                    raise CorruptSnapshotError(f"state table {name!r} column 'value': row {row} of {kind} state "
                                               "holds an entry that is not a (value, stamp ms) pair")
            table.groups[group - self._start][(key, namespace)] = value


def _hashable(value: Any) -> Any:
    """Keys decode as plain data; a list inside a key (encode_key writes none for hashable keys) becomes a tuple."""
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    return value
