"""A deterministic purchase-event generator: the input of the demo, the tests and the benchmarks.

Record ``i`` of split ``s`` is a pure function of ``(seed, s, i)``: every field
is drawn from a counter-based hash (SplitMix64's finaliser over the record's
coordinates), not from a stateful random stream.  So a reader created at any
offset reproduces exactly the records a reader that got there by reading
produced, in any process and on any machine (seed 002: recovery rewinds the
source to Sk and replays), and the hash runs vectorised in numpy over a whole
batch, which keeps the Arrow path well above a million events a second.

The records are seed 000's purchase example::

    {"user_id": "user-17", "item": "book", "qty": 2, "price": 12.5, "ts": 1700000001234}

Event time, per split (splits share the time base, so they stay aligned)::

    nominal(i) = start_timestamp_ms + i * 1000 // events_per_second
    ts(i)      = nominal(i) - delay(i)
    delay(i)   = uniform [0, out_of_orderness_ms]                       (on time)
               | out_of_orderness_ms + uniform [1, late_by_max_ms]      (late, with late_fraction)

A record within the bound is never late for a per-split bounded-out-of-orderness
watermark of the same bound (its ts is >= nominal(i) - bound, and the largest ts
seen so far is <= nominal(i)); a record of the late fraction always is, once
later records arrived.

Idle stretches: ``idle_splits`` maps a split (index or id) to ``[start, end)``
offset ranges that produce no record.  The offsets still exist and are read
through (a read inside one returns an empty batch and advances by up to
``max_records``), so idleness is as replayable as data: while the other splits
deliver ``end - start`` records, this one delivers none, and its event time
afterwards has moved on as if the time had passed.  ``events_per_split`` counts
offsets, idle ones included.

Live mode (``live=True``): offset ``i`` becomes readable only once the wall clock has reached
``nominal(i)``, so the source behaves like a feed whose events happen now, at
``events_per_second`` per split, instead of a backlog read as fast as the job can.  The schedule
is absolute (``start_timestamp_ms`` is the wall-clock time of offset 0, and must be the same on
every restore), so it survives readers being re-created (the Spark runtime makes one per epoch)
and restores: a job restored after an outage finds the offsets released meanwhile and catches
up, as it would on a real feed with a backlog.  A read with nothing released returns an empty
batch, which both runtimes treat as an unbounded source with nothing right now.  Replay is
unchanged: record ``i`` is the same record whenever it is read.  ``now - watermark`` is then
the job's event-time lag, which the soak test measures.

Malformed events (``malformed_fraction``) lack ``"ts"`` or carry it as a
string, to exercise dead letters at timestamp assignment.  In the Arrow form
both kinds have a null ``ts`` (a typed int64 column cannot hold the string).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from engine.errors import JobDefinitionError
from engine.io.source import (
    ArrowReadBatch,
    ReadBatch,
    Source,
    SourceSplit,
    SplitReader,
    check_int_offset,
    check_max_records,
)

if TYPE_CHECKING:
    import pyarrow as pa

DEFAULT_ITEMS: tuple[str, ...] = (
    "apple", "book", "camera", "desk", "earbuds", "fan", "guitar", "headphones", "ink", "jacket",
    "kettle", "lamp", "mouse", "notebook", "oven", "pen", "quilt", "router", "shoes", "tablet",
)
#: 2023-11-14T22:13:20Z: a fixed, realistic start so runs compare bit for bit.
DEFAULT_START_TIMESTAMP_MS = 1_700_000_000_000

_MASK = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15
# one salt per drawn field so the fields of one record are independent
_F_KEY, _F_ITEM, _F_QTY, _F_PRICE, _F_LATE, _F_DELAY, _F_BAD, _F_BADKIND = range(1, 9)


def _splitmix_int(z: int) -> int:
    z = (z + _GOLDEN) & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 31)


def _mix(z: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser on a uint64 array (wrapping arithmetic, as the algorithm intends)."""
    z = z ^ (z >> np.uint64(30))
    z = z * np.uint64(0xBF58476D1CE4E5B9)
    z = z ^ (z >> np.uint64(27))
    z = z * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _uniform(h: np.ndarray) -> np.ndarray:
    """Floats in [0, 1) from the hash's top 53 bits (exact, platform independent)."""
    return (h >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))


class GeneratorSource(Source):
    """Deterministic purchase events over ``num_splits`` splits ``"generator-<s>"``.

    ``events_per_split=None`` makes the source unbounded.  ``key_skew`` is the Zipf
    exponent over ``num_keys`` keys (0: uniform; 1.1: a few very hot keys).  ``live=True`` releases
    each offset when the wall clock reaches its nominal event time (module docstring); it needs an
    explicit ``start_timestamp_ms``.
    """

    def __init__(
        self,
        *,
        num_splits: int = 1,
        events_per_split: int | None = 1000,
        num_keys: int = 1000,
        key_skew: float = 0.0,
        events_per_second: int = 1000,
        out_of_orderness_ms: int = 0,
        late_fraction: float = 0.0,
        late_by_max_ms: int = 10_000,
        idle_splits: Mapping[int | str, Sequence[tuple[int, int]]] | None = None,
        malformed_fraction: float = 0.0,
        start_timestamp_ms: int | None = None,
        items: Sequence[str] = DEFAULT_ITEMS,
        seed: int = 0,
        live: bool = False,
    ) -> None:
        _positive_int("num_splits", num_splits)
        if events_per_split is not None:
            _non_negative_int("events_per_split", events_per_split)
        _positive_int("num_keys", num_keys)
        _positive_int("events_per_second", events_per_second)
        _non_negative_int("out_of_orderness_ms", out_of_orderness_ms)
        _positive_int("late_by_max_ms", late_by_max_ms)
        _non_negative_int("seed", seed)
        if not isinstance(live, bool):
            raise JobDefinitionError("live", live, "must be a bool")
        if start_timestamp_ms is None:
            if live:
                raise JobDefinitionError(
                    "start_timestamp_ms", None,
                    "is needed with live=True: the wall-clock time (ms since the epoch) of offset 0, the same on "
                    "every restore of the job (e.g. the time the job was first deployed)")
            start_timestamp_ms = DEFAULT_START_TIMESTAMP_MS
        if isinstance(start_timestamp_ms, bool) or not isinstance(start_timestamp_ms, int):
            raise JobDefinitionError("start_timestamp_ms", start_timestamp_ms, "must be an int (ms since the epoch)")
        if not isinstance(key_skew, (int, float)) or key_skew < 0:
            raise JobDefinitionError("key_skew", key_skew, "must be a Zipf exponent >= 0 (0 means uniform keys)")
        _fraction("late_fraction", late_fraction)
        _fraction("malformed_fraction", malformed_fraction)
        if not items or not all(isinstance(i, str) for i in items):
            raise JobDefinitionError("items", items, "must be a non-empty sequence of str")
        self.num_splits = num_splits
        self.events_per_split = events_per_split
        self.num_keys = num_keys
        self.key_skew = float(key_skew)
        self.events_per_second = events_per_second
        self.out_of_orderness_ms = out_of_orderness_ms
        self.late_fraction = float(late_fraction)
        self.late_by_max_ms = late_by_max_ms
        self.malformed_fraction = float(malformed_fraction)
        self.start_timestamp_ms = start_timestamp_ms
        self.items = tuple(items)
        self.seed = seed
        self.live = live
        self.idle_ranges = self._normalise_idle(idle_splits or {})
        self._cache: dict = {}

    # -- Source ---------------------------------------------------------------------------------

    def discover_splits(self) -> list[SourceSplit]:
        return [SourceSplit(f"generator-{s}", s) for s in range(self.num_splits)]

    def is_bounded(self) -> bool:
        return self.events_per_split is not None

    def create_reader(self, split: SourceSplit, start_offset: int | None = None) -> SplitReader:
        if not 0 <= split.index < self.num_splits:
            raise JobDefinitionError("split", split, f"is not one of this generator's {self.num_splits} splits")
        return _GeneratorReader(self, split.index, check_int_offset(split, start_offset, self.events_per_split))

    def released_offsets(self, now_ms: int) -> int:
        """Live mode: how many offsets of each split the wall clock ``now_ms`` has released (those with
        ``nominal(i) <= now_ms``); every offset when not live."""
        if not self.live:
            return 2**63 - 1
        if now_ms < self.start_timestamp_ms:
            return 0
        return (now_ms - self.start_timestamp_ms) * self.events_per_second // 1000 + 1

    # -- the pure record function ----------------------------------------------------------------

    def columns(self, split_index: int, start: int, stop: int) -> dict[str, np.ndarray]:
        """Every field of records [start, stop) of a split as numpy arrays, idle offsets included.

        ``present`` marks offsets that produce a record; ``bad`` marks malformed ones
        (``bad_kind`` 0: no ts, 1: string ts).  Everything else is a column of the record.
        """
        idx = np.arange(start, stop, dtype=np.uint64)
        idx_mixed = idx * np.uint64(_GOLDEN)
        base = _splitmix_int((self.seed * 0x100000001B3 + split_index) & _MASK)

        def draw(field_salt: int) -> np.ndarray:
            return _mix(idx_mixed + np.uint64(_splitmix_int(base ^ field_salt)))

        with np.errstate(over="ignore"):
            key_u = _uniform(draw(_F_KEY))
            key = np.minimum(np.searchsorted(self._key_cdf(), key_u, side="right"), self.num_keys - 1)
            item = (draw(_F_ITEM) % np.uint64(len(self.items))).astype(np.int64)
            qty = (draw(_F_QTY) % np.uint64(5)).astype(np.int64) + 1
            cents = (draw(_F_PRICE) % np.uint64(9900)).astype(np.int64) + 100
            late = _uniform(draw(_F_LATE)) < self.late_fraction
            delay_hash = draw(_F_DELAY)
            on_time_delay = (delay_hash % np.uint64(self.out_of_orderness_ms + 1)).astype(np.int64)
            late_delay = (delay_hash % np.uint64(self.late_by_max_ms)).astype(np.int64) + 1 + self.out_of_orderness_ms
            bad = _uniform(draw(_F_BAD)) < self.malformed_fraction
            bad_kind = (draw(_F_BADKIND) & np.uint64(1)).astype(np.int64)
        i64 = idx.astype(np.int64)
        nominal = self.start_timestamp_ms + (i64 * 1000) // self.events_per_second
        ts = nominal - np.where(late, late_delay, on_time_delay)
        present = np.ones(len(idx), dtype=bool)
        for lo, hi in self.idle_ranges.get(split_index, ()):
            present &= ~((i64 >= lo) & (i64 < hi))
        return {"key": key, "item": item, "qty": qty, "price": cents / 100.0, "ts": ts,
                "late": late, "bad": bad, "bad_kind": bad_kind, "present": present}

    def records(self, split_index: int, start: int, stop: int) -> list[dict]:
        """Records of offsets [start, stop) as dicts (idle offsets produce none)."""
        cols = self.columns(split_index, start, stop)
        names = self._key_names()
        items = self.items
        keep = np.flatnonzero(cols["present"])
        out = []
        bad = cols["bad"]
        if bad[keep].any():
            for j in keep.tolist():
                record = {"user_id": names[cols["key"][j]], "item": items[cols["item"][j]],
                          "qty": int(cols["qty"][j]), "price": float(cols["price"][j])}
                if not bad[j]:
                    record["ts"] = int(cols["ts"][j])
                elif cols["bad_kind"][j] == 1:
                    record["ts"] = str(int(cols["ts"][j]))
                out.append(record)
            return out
        for k, it, q, p, t in zip(cols["key"][keep].tolist(), cols["item"][keep].tolist(),
                                  cols["qty"][keep].tolist(), cols["price"][keep].tolist(),
                                  cols["ts"][keep].tolist()):
            out.append({"user_id": names[k], "item": items[it], "qty": q, "price": p, "ts": t})
        return out

    def record_batch(self, split_index: int, start: int, stop: int) -> pa.RecordBatch:
        """Records of offsets [start, stop) as an Arrow batch (schema :meth:`arrow_schema`)."""
        import pyarrow as pa

        cols = self.columns(split_index, start, stop)
        keep = np.flatnonzero(cols["present"])
        ts_mask = cols["bad"][keep]
        return pa.RecordBatch.from_arrays(
            [
                self._key_array().take(pa.array(cols["key"][keep])),
                self._item_array().take(pa.array(cols["item"][keep])),
                pa.array(cols["qty"][keep]),
                pa.array(cols["price"][keep]),
                pa.array(cols["ts"][keep], mask=ts_mask if ts_mask.any() else None),
            ],
            schema=self.arrow_schema(),
        )

    @staticmethod
    def arrow_schema() -> pa.Schema:
        import pyarrow as pa

        return pa.schema([("user_id", pa.string()), ("item", pa.string()), ("qty", pa.int64()),
                          ("price", pa.float64()), ("ts", pa.int64())])

    # -- cached lookup tables (rebuilt lazily in each process, never shipped) ---------------------

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_cache"] = {}
        return state

    def _key_cdf(self) -> np.ndarray:
        cdf = self._cache.get("cdf")
        if cdf is None:
            weights = np.arange(1, self.num_keys + 1, dtype=np.float64) ** -self.key_skew
            cdf = np.cumsum(weights)
            cdf /= cdf[-1]
            self._cache["cdf"] = cdf
        return cdf

    def _key_names(self) -> list[str]:
        names = self._cache.get("names")
        if names is None:
            names = self._cache["names"] = [f"user-{k}" for k in range(self.num_keys)]
        return names

    def _key_array(self) -> pa.Array:
        import pyarrow as pa

        array = self._cache.get("key_array")
        if array is None:
            array = self._cache["key_array"] = pa.array(self._key_names(), type=pa.string())
        return array

    def _item_array(self) -> pa.Array:
        import pyarrow as pa

        array = self._cache.get("item_array")
        if array is None:
            array = self._cache["item_array"] = pa.array(self.items, type=pa.string())
        return array

    def _normalise_idle(self, idle: Mapping) -> dict[int, tuple[tuple[int, int], ...]]:
        ids = {f"generator-{s}": s for s in range(self.num_splits)}
        out: dict[int, tuple[tuple[int, int], ...]] = {}
        for split, ranges in idle.items():
            index = ids.get(split, split)
            if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < self.num_splits:
                raise JobDefinitionError("idle_splits", split, f"must name a split index 0..{self.num_splits - 1} "
                                         "or a split id 'generator-<index>'")
            checked = []
            for r in ranges:
                if (not isinstance(r, (tuple, list)) or len(r) != 2 or not all(isinstance(x, int) for x in r)
                        or not 0 <= r[0] <= r[1]):
                    raise JobDefinitionError("idle_splits", {split: ranges},
                                             "must map a split to [start, end) offset pairs with 0 <= start <= end")
                checked.append((int(r[0]), int(r[1])))
            out[index] = tuple(sorted(checked))
        return out

    def next_idle_boundary(self, split_index: int, offset: int) -> tuple[bool, int | None]:
        """Whether ``offset`` is idle, and where the current stretch (idle or producing) ends (None: never)."""
        boundary = None
        for lo, hi in self.idle_ranges.get(split_index, ()):
            if lo <= offset < hi:
                # merge abutting or overlapping ranges so one stretch is one stretch
                end = hi
                for lo2, hi2 in self.idle_ranges[split_index]:
                    if lo2 <= end < hi2:
                        end = hi2
                return True, end
            if lo > offset and (boundary is None or lo < boundary):
                boundary = lo
        return False, boundary


class _GeneratorReader(SplitReader):
    __slots__ = ("_source", "_split", "_offset")

    def __init__(self, source: GeneratorSource, split_index: int, offset: int) -> None:
        self._source = source
        self._split = split_index
        self._offset = offset

    def _next_stop(self, max_records: int) -> tuple[int, bool]:
        """Where this read stops, and whether the stretch read is idle.

        A read never mixes idle and producing offsets, so the runtime sees an empty
        batch exactly while the split is idle.
        """
        check_max_records(max_records)
        stop = self._offset + max_records
        if self._source.events_per_split is not None:
            stop = min(stop, self._source.events_per_split)
        if self._source.live:
            stop = max(self._offset, min(stop, self._source.released_offsets(int(time.time() * 1000))))
        idle, boundary = self._source.next_idle_boundary(self._split, self._offset)
        if boundary is not None:
            stop = min(stop, boundary)
        return stop, idle

    def _is_finished(self) -> bool:
        return self._source.events_per_split is not None and self._offset >= self._source.events_per_split

    def read(self, max_records: int) -> ReadBatch:
        stop, idle = self._next_stop(max_records)
        values = [] if idle or stop <= self._offset else self._source.records(self._split, self._offset, stop)
        self._offset = max(stop, self._offset)
        return ReadBatch(values, self._offset, self._is_finished())

    def read_arrow(self, max_records: int) -> ArrowReadBatch:
        stop, idle = self._next_stop(max_records)
        start = self._offset
        if idle or stop <= start:
            stop = max(stop, start)
            start = stop  # an empty batch with the right schema
        batch = self._source.record_batch(self._split, start, stop)
        self._offset = max(stop, self._offset)
        return ArrowReadBatch(batch, self._offset, self._is_finished())

    def current_offset(self) -> int:
        return self._offset


def _positive_int(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise JobDefinitionError(name, value, "must be a positive int")


def _non_negative_int(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise JobDefinitionError(name, value, "must be an int >= 0")


def _fraction(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise JobDefinitionError(name, value, "must be a fraction between 0 and 1")
