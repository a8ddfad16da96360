"""The internal timer service: per-key, per-namespace event-time and processing-time timers (seed 004).

Seed 004 quotes Flink's ``InternalTimerServiceImpl.advanceWatermark``::

    currentWatermark = time;
    while ((timer = eventTimeTimersQueue.peek()) != null && timer.getTimestamp() <= time) {
        eventTimeTimersQueue.poll();
        keyContext.setCurrentKey(timer.getKey());
        triggerTarget.onEventTime(timer);
    }

and that is what :meth:`InternalTimerService.advance_watermark` does: timers fire in
timestamp order, each with its key set as the current key; a timer registered while
firing that is already due fires in the same advance, because the loop re-peeks the queue.

Timers are deduplicated by (key, namespace, timestamp) — a window registers its
end-of-window timer once per element, but it fires once (seed 000: "相同窗口只会注册一份").
Timers are kept per key group, so they snapshot and rescale with key groups like keyed
state does, and a snapshot is copy-on-write per key group (seed 002): taking it is
O(key groups), not O(timers).  The queue is a heap with lazy deletion; entries carry a
sequence number so a timer deleted and registered again does not fire twice, and ties at
one timestamp fire in registration order (deterministic, identical in both runtimes).

Pure: no wall clock, no threads.  Processing time only moves when
:meth:`advance_processing_time` is called; :meth:`next_processing_time` tells a runtime
when to call it next.

Snapshot layout, one Arrow table (also the restore contract)::

    key_group  int32    the timer key's key group
    key        string   codec.encode_key(key)
    namespace  string   engine.state.snapshot.encode_namespace(namespace)
    timestamp  int64    when the timer fires, ms
    kind       string   "event_time" | "processing_time"
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Any, Protocol

import pyarrow as pa

from engine.elements import MIN_WATERMARK
from engine.errors import CorruptSnapshotError, UnsupportedFormatVersion
from engine.state import codec
from engine.state.key_groups import KeyGroupRange
from engine.state.key_identity import key_identity
from engine.state.snapshot import decode_namespace, encode_namespace

TIMERS_FORMAT_VERSION = 1
EVENT_TIME = "event_time"
PROCESSING_TIME = "processing_time"

TIMER_SCHEMA_FIELDS = (
    pa.field("key_group", pa.int32(), nullable=False),
    pa.field("key", pa.string(), nullable=False),
    pa.field("namespace", pa.string(), nullable=False),
    pa.field("timestamp", pa.int64(), nullable=False),
    pa.field("kind", pa.string(), nullable=False),
)


@dataclass(frozen=True, slots=True)
class InternalTimer:
    """A due timer handed to the Triggerable: its time, key and namespace (a window)."""

    timestamp: int
    key: Any
    namespace: Any


class Triggerable(Protocol):
    """The operator the timer service calls back (Flink's ``Triggerable``)."""

    def on_event_time(self, timer: InternalTimer) -> None: ...

    def on_processing_time(self, timer: InternalTimer) -> None: ...


class KeyContext(Protocol):
    """What the timer service needs from the keyed state backend: the current key and its key group."""

    def set_current_key(self, key: Any) -> None: ...

    def get_current_key(self) -> Any: ...

    @property
    def current_key_group(self) -> int: ...


class _TimerQueue:
    """One time domain's timers: per key group a dedup dict, one heap with lazy deletion.

    ``_groups[key_group]`` maps (key, namespace, timestamp) -> sequence; a heap entry
    (timestamp, sequence, key_group, key, namespace) is live only while its group holds
    that sequence.  Sequences only grow, so they are also the registration order.

    Copy-on-write (seed 002, as the heap keyed state backend does): :meth:`freeze` hands the
    group dicts to a snapshot in O(number of key groups) and marks them shared; the first
    change to a shared group afterwards replaces it with a copy (one C-level ``dict.copy``),
    so a snapshot keeps exactly the timers of its instant while processing goes on.
    """

    __slots__ = ("_groups", "_shared", "_heap", "_seq", "_size")

    def __init__(self) -> None:
        self._groups: dict[int, dict[tuple[Any, Any, int], int]] = {}
        self._shared: set[int] = set()
        self._heap: list[tuple[int, int, int, Any, Any]] = []
        self._seq = 0
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def _writable(self, key_group: int) -> dict[tuple[Any, Any, int], int]:
        group = self._groups.get(key_group)
        if group is None:
            group = self._groups[key_group] = {}
        elif key_group in self._shared:
            group = self._groups[key_group] = group.copy()
            self._shared.discard(key_group)
        return group

    def add(self, key: Any, namespace: Any, timestamp: int, key_group: int) -> bool:
        ident = (key, namespace, timestamp)
        group = self._groups.get(key_group)
        if group is None:
            group = self._groups[key_group] = {}
        elif key_group in self._shared:
            if ident in group:
                return False
            group = self._writable(key_group)
        seq = self._seq
        if group.setdefault(ident, seq) != seq:  # already registered (earlier sequences are all smaller)
            return False
        self._seq = seq + 1
        self._size += 1
        heapq.heappush(self._heap, (timestamp, seq, key_group, key, namespace))
        return True

    def remove(self, key: Any, namespace: Any, timestamp: int, key_group: int) -> bool:
        ident = (key, namespace, timestamp)
        group = self._groups.get(key_group)
        if group is None:
            return False
        if key_group in self._shared:
            if ident not in group:
                return False
            group = self._writable(key_group)
        if group.pop(ident, None) is None:
            return False
        self._size -= 1
        # Lazy deletion leaves the heap entry; compact when dead entries dominate.
        if len(self._heap) > 64 and len(self._heap) > 2 * self._size:
            self._compact()
        return True

    def _compact(self) -> None:
        self._heap = [(ts, seq, kg, key, ns) for kg, group in self._groups.items() for (key, ns, ts), seq in group.items()]
        heapq.heapify(self._heap)

    def _is_live(self, entry: tuple[int, int, int, Any, Any]) -> bool:
        ts, seq, kg, key, ns = entry
        group = self._groups.get(kg)
        return group is not None and group.get((key, ns, ts)) == seq

    def peek_timestamp(self) -> int | None:
        heap = self._heap
        while heap:
            if self._is_live(heap[0]):
                return heap[0][0]
            heapq.heappop(heap)
        return None

    def poll_due(self, time: int) -> tuple[int, Any, Any] | None:
        """Remove and return the earliest live timer with timestamp <= ``time``, or None."""
        heap = self._heap
        groups = self._groups
        while heap and heap[0][0] <= time:
            ts, seq, kg, key, ns = heapq.heappop(heap)
            group = groups.get(kg)
            if group is None:
                continue
            if kg in self._shared:
                group = self._writable(kg)
            ident = (key, ns, ts)
            live = group.pop(ident, None)
            if live == seq:
                self._size -= 1
                return ts, key, ns
            if live is not None:  # a stale heap entry of a timer deleted and registered again: keep that one
                group[ident] = live
        return None

    def freeze(self) -> dict[int, dict[tuple[Any, Any, int], int]]:
        """Hand the group dicts to a snapshot (O(key groups)); later changes copy a group first."""
        self._shared = set(self._groups)
        return dict(self._groups)

    def contains(self, key: Any, namespace: Any, timestamp: int, key_group: int | None = None) -> bool:
        ident = (key, namespace, timestamp)
        if key_group is not None:
            group = self._groups.get(key_group)
            return group is not None and ident in group
        return any(ident in group for group in self._groups.values())

    def count_for_key_group(self, key_group: int) -> int:
        return len(self._groups.get(key_group, ()))


def _rows_in_registration_order(groups: dict[int, dict[tuple[Any, Any, int], int]]) -> list[tuple[int, int, Any, Any, int]]:
    """(sequence, key_group, key, namespace, timestamp) of frozen groups, in registration order."""
    rows = [(seq, kg, key, ns, ts) for kg, group in groups.items() for (key, ns, ts), seq in group.items()]
    rows.sort(key=lambda r: r[0])
    return rows


class TimerServiceSnapshot:
    """The timers at one instant, materialized later to Arrow.

    Taking it copies no timer: it holds the timer queues' per-key-group dicts, which the
    queues copy before changing them again (copy-on-write, see ``_TimerQueue``).  So it keeps
    reflecting the snapshot instant however much processing continues, and it may be
    materialized from another thread.
    """

    def __init__(self, max_parallelism: int, event_time: dict, processing_time: dict) -> None:
        self.max_parallelism = max_parallelism
        self._groups = ((EVENT_TIME, event_time), (PROCESSING_TIME, processing_time))

    def num_timers(self) -> int:
        return sum(len(group) for _kind, groups in self._groups for group in groups.values())

    def event_time_groups(self) -> dict[int, dict[tuple[Any, Any, int], int]]:
        """The event-time timers: key group -> {(key, namespace, timestamp): registration sequence} (read only)."""
        return self._groups[0][1]

    def to_arrow_table(self) -> pa.Table:
        key_groups: list[int] = []
        keys: list[str] = []
        namespaces: list[str] = []
        timestamps: list[int] = []
        kinds: list[str] = []
        key_cache: dict[Any, str] = {}
        ns_cache: dict[Any, str] = {}
        for kind, groups in self._groups:
            for _seq, kg, key, ns, ts in _rows_in_registration_order(groups):
                ek = key_cache.get(key)
                if ek is None:
                    ek = key_cache[key] = codec.encode_key(key)
                en = ns_cache.get(ns)
                if en is None:
                    en = ns_cache[ns] = encode_namespace(ns)
                key_groups.append(kg)
                keys.append(ek)
                namespaces.append(en)
                timestamps.append(ts)
                kinds.append(kind)
        schema = pa.schema(
            list(TIMER_SCHEMA_FIELDS),
            metadata={"format_version": str(TIMERS_FORMAT_VERSION), "max_parallelism": str(self.max_parallelism)},
        )
        return pa.Table.from_arrays(
            [
                pa.array(key_groups, pa.int32()),
                pa.array(keys, pa.string()),
                pa.array(namespaces, pa.string()),
                pa.array(timestamps, pa.int64()),
                pa.array(kinds, pa.string()),
            ],
            schema=schema,
        )


class InternalTimerService:
    """Event-time and processing-time timers of one operator subtask, over its key-group range.

    ``key_context`` is the keyed state backend: registering uses its current key (and
    key group), firing sets the timer's key on it before calling ``triggerable``.
    """

    def __init__(
        self,
        key_context: KeyContext,
        triggerable: Triggerable,
        key_group_range: KeyGroupRange,
        max_parallelism: int,
    ) -> None:
        self._key_context = key_context
        self._triggerable = triggerable
        self.key_group_range = key_group_range
        self.max_parallelism = max_parallelism
        self._event_time = _TimerQueue()
        self._processing_time = _TimerQueue()
        self._current_watermark = MIN_WATERMARK
        self._current_processing_time = MIN_WATERMARK

    # -- time -----------------------------------------------------------------------------------
    def current_watermark(self) -> int:
        return self._current_watermark

    def current_processing_time(self) -> int:
        """The processing time of the last :meth:`advance_processing_time` (MIN_WATERMARK before any)."""
        return self._current_processing_time

    def set_current_watermark(self, timestamp: int) -> None:
        """Restore the watermark without firing anything (used by initialize_state)."""
        self._current_watermark = timestamp

    # -- registration (current key) ---------------------------------------------------------------
    def register_event_time_timer(self, namespace: Any, time: int) -> None:
        kc = self._key_context
        self._event_time.add(_identity(kc), namespace, time, kc.current_key_group)

    def delete_event_time_timer(self, namespace: Any, time: int) -> None:
        kc = self._key_context
        self._event_time.remove(_identity(kc), namespace, time, kc.current_key_group)

    def register_processing_time_timer(self, namespace: Any, time: int) -> None:
        kc = self._key_context
        self._processing_time.add(_identity(kc), namespace, time, kc.current_key_group)

    def delete_processing_time_timer(self, namespace: Any, time: int) -> None:
        kc = self._key_context
        self._processing_time.remove(_identity(kc), namespace, time, kc.current_key_group)

    def register_event_time_timer_for_key(self, key: Any, key_group: int, namespace: Any, time: int) -> None:
        """Register for an explicit key (batch paths that know the key group and skip set_current_key)."""
        self._event_time.add(key, namespace, time, key_group)

    def register_processing_time_timer_for_key(self, key: Any, key_group: int, namespace: Any, time: int) -> None:
        self._processing_time.add(key, namespace, time, key_group)

    def has_event_time_timer(self, key: Any, namespace: Any, time: int) -> bool:
        return self._event_time.contains(key, namespace, time)

    def has_processing_time_timer(self, key: Any, namespace: Any, time: int) -> bool:
        return self._processing_time.contains(key, namespace, time)

    # -- firing -------------------------------------------------------------------------------------
    def advance_watermark(self, time: int) -> None:
        """Fire every event-time timer with timestamp <= ``time``, in timestamp order (seed 004).

        A watermark never moves back (the valve guarantees it; a stale one is ignored
        here so a window cannot become "not late" again).
        """
        if time > self._current_watermark:
            self._current_watermark = time
        queue = self._event_time
        kc = self._key_context
        target = self._triggerable
        while True:
            due = queue.poll_due(time)
            if due is None:
                return
            ts, key, ns = due
            kc.set_current_key(key)
            target.on_event_time(InternalTimer(ts, key, ns))

    def poll_due_event_time(self, time: int) -> tuple[int, Any, Any] | None:
        """Remove and return the earliest event-time timer due at ``time`` as (timestamp, key, namespace),
        or None: the loop of :meth:`advance_watermark` for an operator that runs it itself (it must
        raise the watermark first and set each timer's key as the current key, as that loop does)."""
        return self._event_time.poll_due(time)

    def advance_processing_time(self, time: int) -> None:
        """Fire every processing-time timer with timestamp <= ``time``, in timestamp order."""
        if time > self._current_processing_time:
            self._current_processing_time = time
        queue = self._processing_time
        kc = self._key_context
        target = self._triggerable
        while True:
            due = queue.poll_due(time)
            if due is None:
                return
            ts, key, ns = due
            kc.set_current_key(key)
            target.on_processing_time(InternalTimer(ts, key, ns))

    # -- introspection --------------------------------------------------------------------------------
    def num_event_time_timers(self) -> int:
        return len(self._event_time)

    def num_processing_time_timers(self) -> int:
        return len(self._processing_time)

    def num_event_time_timers_for_key_group(self, key_group: int) -> int:
        return self._event_time.count_for_key_group(key_group)

    def next_processing_time(self) -> int | None:
        """The earliest registered processing-time timer, or None: when a runtime should next advance."""
        return self._processing_time.peek_timestamp()

    def next_event_time(self) -> int | None:
        return self._event_time.peek_timestamp()

    # -- snapshot / restore ---------------------------------------------------------------------------------
    def snapshot(self) -> TimerServiceSnapshot:
        """The timers now, in O(key groups): copy-on-write (see ``_TimerQueue``); Arrow conversion happens
        in ``to_arrow_table`` later, possibly in another thread."""
        return TimerServiceSnapshot(self.max_parallelism, self._event_time.freeze(), self._processing_time.freeze())

    def restore_from_arrow(self, table: pa.Table) -> int:
        """Add the timers of ``table`` whose key group is in this service's range; returns how many.

        Rows are re-registered in table order (which is registration order per kind), so
        ties keep firing in the order they would have without the restore.
        """
        _validate_timer_table(table, self.max_parallelism)
        krange = self.key_group_range
        columns = table.to_pydict()
        restored = 0
        key_cache: dict[str, Any] = {}
        ns_cache: dict[str, Any] = {}
        for kg, ek, en, ts, kind in zip(
            columns["key_group"], columns["key"], columns["namespace"], columns["timestamp"], columns["kind"]
        ):
            if not krange.contains(kg):
                continue
            key = key_cache.get(ek)
            if key is None:
                key = key_cache[ek] = key_identity(_hashable(codec.decode(ek)), ek)
            ns = ns_cache.get(en)
            if ns is None:
                ns = ns_cache[en] = decode_namespace(en)
            if kind == EVENT_TIME:
                self._event_time.add(key, ns, ts, kg)
            elif kind == PROCESSING_TIME:
                self._processing_time.add(key, ns, ts, kg)
            else:
                raise CorruptSnapshotError(f"timer table has unknown kind {kind!r} (expected event_time/processing_time)")
            restored += 1
        return restored


def _hashable(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    return value


def _validate_timer_table(table: Any, max_parallelism: int) -> None:
    if not isinstance(table, pa.Table):
        raise CorruptSnapshotError(f"timer table is a {type(table).__name__}, not a pyarrow.Table")
    for f in TIMER_SCHEMA_FIELDS:
        if f.name not in table.column_names:
            raise CorruptSnapshotError(f"timer table lacks column {f.name!r}")
        if table.schema.field(f.name).type != f.type:
            raise CorruptSnapshotError(
                f"timer table column {f.name!r} has type {table.schema.field(f.name).type}, expected {f.type}"
            )
        if table.column(f.name).null_count:
            raise CorruptSnapshotError(f"timer table column {f.name!r} has null values")
    metadata = {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}
    version = metadata.get("format_version", str(TIMERS_FORMAT_VERSION))
    if version != str(TIMERS_FORMAT_VERSION):
        raise UnsupportedFormatVersion(f"timer table format_version {version!r}; this Sluice reads {TIMERS_FORMAT_VERSION}")
    written = metadata.get("max_parallelism")
    if written is not None and written != str(max_parallelism):
        raise CorruptSnapshotError(
            f"timer table was written with max_parallelism {written}, the job now has {max_parallelism}: "
            "the number of key groups cannot change across a restore"
        )


def _identity(key_context: Any) -> Any:
    """The current key as timers hold it: its identity when the context is a keyed state backend
    (engine/state/key_identity.py), else the key."""
    identity = getattr(key_context, "current_key_identity", _NONE)
    return key_context.get_current_key() if identity is _NONE else identity


_NONE = object()
