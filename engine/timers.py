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
Each timer remembers its key group, so timers snapshot and rescale with key groups like
keyed state does.  The queue is a heap with lazy deletion; entries carry a sequence number
so a timer deleted and registered again does not fire twice, and ties at one timestamp
fire in registration order (deterministic, identical in both runtimes).

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
    """One time domain's timers: a dedup dict and a heap with lazy deletion.

    ``_entries`` maps (key, namespace, timestamp) -> (sequence, key_group); a heap entry
    (timestamp, sequence, key, namespace) is live only while ``_entries`` holds that sequence.
    """

    __slots__ = ("_entries", "_heap", "_seq")

    def __init__(self) -> None:
        self._entries: dict[tuple[Any, Any, int], tuple[int, int]] = {}
        self._heap: list[tuple[int, int, Any, Any]] = []
        self._seq = 0

    def __len__(self) -> int:
        return len(self._entries)

    def add(self, key: Any, namespace: Any, timestamp: int, key_group: int) -> bool:
        ident = (key, namespace, timestamp)
        if ident in self._entries:
            return False
        seq = self._seq
        self._seq = seq + 1
        self._entries[ident] = (seq, key_group)
        heapq.heappush(self._heap, (timestamp, seq, key, namespace))
        return True

    def remove(self, key: Any, namespace: Any, timestamp: int) -> bool:
        if self._entries.pop((key, namespace, timestamp), None) is None:
            return False
        # Lazy deletion leaves the heap entry; compact when dead entries dominate.
        if len(self._heap) > 64 and len(self._heap) > 2 * len(self._entries):
            self._compact()
        return True

    def _compact(self) -> None:
        self._heap = [(ts, seq, key, ns) for (key, ns, ts), (seq, _kg) in self._entries.items()]
        heapq.heapify(self._heap)

    def peek_timestamp(self) -> int | None:
        heap = self._heap
        entries = self._entries
        while heap:
            ts, seq, key, ns = heap[0]
            live = entries.get((key, ns, ts))
            if live is not None and live[0] == seq:
                return ts
            heapq.heappop(heap)
        return None

    def poll_due(self, time: int) -> tuple[int, Any, Any] | None:
        """Remove and return the earliest live timer with timestamp <= ``time``, or None."""
        heap = self._heap
        entries = self._entries
        while heap and heap[0][0] <= time:
            ts, seq, key, ns = heapq.heappop(heap)
            ident = (key, ns, ts)
            live = entries.get(ident)
            if live is not None and live[0] == seq:
                del entries[ident]
                return ts, key, ns
        return None

    def items(self) -> list[tuple[int, int, Any, Any, int]]:
        """(sequence, key_group, key, namespace, timestamp) in registration order."""
        rows = [(seq, kg, key, ns, ts) for (key, ns, ts), (seq, kg) in self._entries.items()]
        rows.sort(key=lambda r: r[0])
        return rows

    def contains(self, key: Any, namespace: Any, timestamp: int) -> bool:
        return (key, namespace, timestamp) in self._entries

    def count_for_key_group(self, key_group: int) -> int:
        return sum(1 for _seq, kg in self._entries.values() if kg == key_group)


class TimerServiceSnapshot:
    """The timers at one instant (a copy of the entries, taken synchronously), materialized later to Arrow."""

    def __init__(self, max_parallelism: int, event_time: list, processing_time: list) -> None:
        self.max_parallelism = max_parallelism
        self._rows = ((EVENT_TIME, event_time), (PROCESSING_TIME, processing_time))

    def num_timers(self) -> int:
        return sum(len(rows) for _kind, rows in self._rows)

    def to_arrow_table(self) -> pa.Table:
        key_groups: list[int] = []
        keys: list[str] = []
        namespaces: list[str] = []
        timestamps: list[int] = []
        kinds: list[str] = []
        key_cache: dict[Any, str] = {}
        ns_cache: dict[Any, str] = {}
        for kind, rows in self._rows:
            for _seq, kg, key, ns, ts in rows:
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
        self._event_time.add(kc.get_current_key(), namespace, time, kc.current_key_group)

    def delete_event_time_timer(self, namespace: Any, time: int) -> None:
        self._event_time.remove(self._key_context.get_current_key(), namespace, time)

    def register_processing_time_timer(self, namespace: Any, time: int) -> None:
        kc = self._key_context
        self._processing_time.add(kc.get_current_key(), namespace, time, kc.current_key_group)

    def delete_processing_time_timer(self, namespace: Any, time: int) -> None:
        self._processing_time.remove(self._key_context.get_current_key(), namespace, time)

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
        """Copy the timer entries now (O(timers)); Arrow conversion happens in ``to_arrow_table`` later."""
        return TimerServiceSnapshot(self.max_parallelism, self._event_time.items(), self._processing_time.items())

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
                key = key_cache[ek] = _hashable(codec.decode(ek))
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
