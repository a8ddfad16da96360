"""State time-to-live: ``StateTtlConfig`` and the states that honour it (Flink's ``StateTtlConfig`` and TTL states).

``descriptor.enable_time_to_live(StateTtlConfig.new_builder(Time.seconds(1)).build())`` makes every entry of that
state expire ``ttl`` after its last access in processing time (Flink's only TTL time characteristic):

- **What is stamped.**  An entry carries the processing time it was last stamped at: a value, a reducing or
  aggregating accumulator as a whole, each element of a list, each entry of a map (as Flink's ``TtlValue``).
  Writes stamp (``OnCreateAndWrite``, the default); ``OnReadAndWrite`` stamps on reads too.
- **When it is expired.**  Once ``last stamp + ttl <= now``.  An expired entry that is read is removed; it is
  returned that once only with ``StateVisibility.ReturnExpiredIfNotCleanedUp``, never with the default
  ``NeverReturnExpired``.  A list or map read drops its expired elements or entries.
- **Cleanup.**  Expired entries go when they are read, and when a snapshot is restored (a restore starts with
  no expired entry: Flink's full-snapshot cleanup seen from the reading side).  Not built: Flink's incremental
  background cleanup of entries that are never read again; until they are read or restored they stay in
  memory and in snapshots.  ``cleanup_incrementally``, ``cleanup_full_snapshot``,
  ``cleanup_in_rocksdb_compact_filter`` and ``disable_cleanup_in_background`` are accepted and recorded, so
  PyFlink programs port unchanged.
- **In snapshots.**  A TTL state's table has its own kind (``value-ttl``, ``list-ttl``, ...; engine/state/snapshot.py):
  its entries are ``(value, stamp)`` tuples.  As in Flink, a state cannot change between TTL and no TTL across a
  restore (the job is refused naming the state); the ttl itself may change.
- **Which clock.**  The keyed state backend's ``ttl_clock`` (engine/clock.py ``SystemClock`` unless a test hands
  in a ``ManualClock``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Iterator

from engine.state.heap_states import (
    InternalAggregatingState,
    InternalListState,
    InternalMapState,
    InternalReducingState,
    InternalValueState,
)
from engine.state.ttl_config import StateTtlConfig

if TYPE_CHECKING:
    from engine.state.heap_states import InternalKvState

__all__ = ["StateTtlConfig", "TTL_SUFFIX", "base_kind", "ttl_state_class", "drop_expired"]

#: a TTL state's kind is its plain kind plus this suffix (``value-ttl``)
TTL_SUFFIX = "-ttl"
_MISSING = object()


def base_kind(kind: str) -> str:
    """``list-ttl`` -> ``list``: the layout of the table's values."""
    return kind[: -len(TTL_SUFFIX)] if kind.endswith(TTL_SUFFIX) else kind


# ---- the states ---------------------------------------------------------------------------------------------
# Each stores ``(user value, stamp)`` where its plain twin stores the user value; Flink's TtlValue.


class _Ttl:
    """Expiry and stamping shared by the TTL states (a mixin before the plain state class)."""

    __slots__ = ()

    def _config(self) -> StateTtlConfig:
        return self.descriptor.ttl_config  # type: ignore[attr-defined]

    def _now(self) -> int:
        return self._backend.ttl_clock.now_ms()  # type: ignore[attr-defined]

    def _expired(self, stamped: tuple, now: int) -> bool:
        return stamped[1] + self._config().ttl_ms <= now

    def _on_read(self) -> bool:
        return self._config().get_update_type() is StateTtlConfig.UpdateType.OnReadAndWrite

    def _return_expired(self) -> bool:
        return self._config().get_state_visibility() is StateTtlConfig.StateVisibility.ReturnExpiredIfNotCleanedUp

    def _read_whole(self) -> Any:
        """The live user value of a value/reducing/aggregating entry (or _MISSING), with Flink's read rules."""
        ck = (self._backend._current_key, self._namespace)  # type: ignore[attr-defined]
        group = self._group()  # type: ignore[attr-defined]
        stamped = group.get(ck)
        if stamped is None:
            return _MISSING
        now = self._now()
        if self._expired(stamped, now):
            del group[ck]
            return stamped[0] if self._return_expired() else _MISSING
        if self._on_read():
            group[ck] = (stamped[0], now)
        return stamped[0]

    def _write_whole(self, value: Any) -> None:
        self._group()[(self._backend._current_key, self._namespace)] = (value, self._now())  # type: ignore[attr-defined]


class TtlValueState(_Ttl, InternalValueState):
    __slots__ = ()
    kind = "value" + TTL_SUFFIX

    def value(self) -> Any:
        v = self._read_whole()
        return self.descriptor.default if v is _MISSING else v  # type: ignore[attr-defined]

    def update(self, value: Any) -> None:
        if value is None:
            self.clear()
        else:
            self._write_whole(value)


class TtlReducingState(_Ttl, InternalReducingState):
    __slots__ = ()
    kind = "reducing" + TTL_SUFFIX

    def get(self) -> Any:
        v = self._read_whole()
        return None if v is _MISSING else v

    def add(self, value: Any) -> None:
        current = self._read_whole()
        reduce = self.descriptor.reduce_function  # type: ignore[attr-defined]
        self._write_whole(value if current is _MISSING else reduce(current, value))

    def _merge_values(self, a: tuple, b: tuple) -> tuple:
        return (self.descriptor.reduce_function(a[0], b[0]), max(a[1], b[1]))  # type: ignore[attr-defined]


class TtlAggregatingState(_Ttl, InternalAggregatingState):
    __slots__ = ()
    kind = "aggregating" + TTL_SUFFIX

    def get(self) -> Any:
        acc = self._read_whole()
        if acc is _MISSING:
            return None
        return self.descriptor.aggregate_function.get_result(acc)  # type: ignore[attr-defined]

    def add(self, value: Any) -> None:
        fn = self.descriptor.aggregate_function  # type: ignore[attr-defined]
        acc = self._read_whole()
        self._write_whole(fn.add(value, fn.create_accumulator() if acc is _MISSING else acc))

    def _merge_values(self, a: tuple, b: tuple) -> tuple:
        return (self.descriptor.aggregate_function.merge(a[0], b[0]), max(a[1], b[1]))  # type: ignore[attr-defined]


class TtlListState(_Ttl, InternalListState):
    __slots__ = ()
    kind = "list" + TTL_SUFFIX

    def get(self) -> list | None:
        group = self._group()
        ck = (self._backend._current_key, self._namespace)
        stamped = group.get(ck)
        if stamped is None:
            return None
        now = self._now()
        live = [e for e in stamped if not self._expired(e, now)]
        shown = [e[0] for e in (stamped if self._return_expired() else live)]
        if self._on_read():
            live = [(e[0], now) for e in live]
        if live:
            group[ck] = live
        else:
            del group[ck]
        return shown or None

    def add(self, value: Any) -> None:
        super().add((value, self._now()))

    def add_all(self, values: Iterable[Any]) -> None:
        now = self._now()
        super().add_all([(v, now) for v in values])

    def update(self, values: list[Any]) -> None:
        now = self._now()
        super().update([(v, now) for v in (values or [])])


class TtlMapState(_Ttl, InternalMapState):
    __slots__ = ()
    kind = "map" + TTL_SUFFIX

    def _live(self) -> dict | None:
        """The current map with expired entries removed (returned ones kept per visibility); None when empty."""
        m = self._map(False)
        if not m:
            return None
        now = self._now()
        expired = [k for k, e in m.items() if self._expired(e, now)]
        for k in expired:
            del m[k]
        if not m:
            self.clear()
            return None
        return m

    def get(self, key: Any) -> Any:
        m = self._map(False)
        if m is None or key not in m:
            return None
        stamped, now = m[key], self._now()
        if self._expired(stamped, now):
            del m[key]
            if not m:
                self.clear()
            return stamped[0] if self._return_expired() else None
        if self._on_read():
            m[key] = (stamped[0], now)
        return stamped[0]

    def put(self, key: Any, value: Any) -> None:
        super().put(key, (value, self._now()))

    def put_all(self, entries: dict) -> None:
        now = self._now()
        super().put_all({k: (v, now) for k, v in entries.items()})

    def contains(self, key: Any) -> bool:  # type: ignore[override]
        m = self._live()
        return m is not None and key in m

    def items(self) -> Iterator[tuple[Any, Any]]:
        m = self._live()
        return iter([(k, e[0]) for k, e in m.items()]) if m else iter(())

    def keys(self) -> Iterator[Any]:
        m = self._live()
        return iter(list(m)) if m else iter(())

    def values(self) -> Iterator[Any]:
        m = self._live()
        return iter([e[0] for e in m.values()]) if m else iter(())

    def is_empty(self) -> bool:
        return self._live() is None


_TTL_CLASSES: dict[str, type[InternalKvState]] = {
    "value": TtlValueState, "list": TtlListState, "map": TtlMapState,
    "reducing": TtlReducingState, "aggregating": TtlAggregatingState,
}


def ttl_state_class(kind: str) -> type[InternalKvState]:
    """The TTL twin of the plain state class of ``kind``."""
    return _TTL_CLASSES[kind]


def drop_expired(kind: str, value: Any, ttl_ms: int, now: int) -> Any:
    """A restored TTL entry without what expired (None when nothing is left): cleanup at restore."""
    plain = base_kind(kind)
    if plain == "list":
        live = [e for e in value if e[1] + ttl_ms > now]
        return live or None
    if plain == "map":
        live = {k: e for k, e in value.items() if e[1] + ttl_ms > now}
        return live or None
    return value if value[1] + ttl_ms > now else None
