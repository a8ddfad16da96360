"""Columnar window contents: event-time tumbling/sliding ``sum`` windows kept in numpy arrays, not dicts.

The window operator's general layout keeps one dict entry per (key, window) in keyed state and
one timer per (key, window) in the timer service; every element then costs a dict read and write
per window it belongs to (six for a 60 s window sliding by 10 s), and every firing a heap pop.
For the commonest window job -- the built-in ``sum(field)`` on event-time tumbling or sliding
windows with the default EventTimeTrigger, no evictor, no window function, no allowed lateness --
:class:`ColumnarWindows` keeps the same contents in arrays, one row per key and one column per
open window:

* ``seq``: the (key, window)'s timer registration number, -1 for no entry.  Its order is the order
  in which the general path registers the window's end-of-window timer (elements in arrival order,
  each one's windows in the assigner's descending-start order), so ties between keys fire in the
  same order (engine/timers.py: ties fire in registration order);
* ``carrier``: the window's first element (Flink's SumAggregator returns the first element with the
  field replaced by the sum);
* ``acc``: the running sum, an object array, so ``np.add.at`` calls Python's ``+`` on the very
  operands in the very order of the general fold (ints stay exact, floats round identically);
* ``count``: elements in the window (one element: the element itself is the result, as ``add``
  keeps it).

A batch is processed with a few array operations whatever its size; a watermark fires each due
window (ascending end, then registration order) as one column.  Snapshots are written in the
general layout (the same keyed-state table and timers table, timers in registration order), so a
snapshot taken here restores into the general operator and vice versa; :meth:`adopt` takes over
restored state when it has exactly this shape.

Values the arrays cannot hold exactly (a field that is not an ``int``/``float``, an element that is
not a tuple, list or dict), and a batch that would make the grid large and mostly empty
(:class:`GridTooSparse`: a backfill spanning days of event time, say), make the operator hand
everything to the general layout for good before it processes that batch; the results are the
same, only slower.
"""

from __future__ import annotations

from operator import itemgetter
from typing import Any, Callable, Sequence

import numpy as np

from engine.elements import StreamRecord, TupleColumns
from engine.errors import IllegalStateError
from engine.state.key_groups import KeyGroupRange
from engine.state.snapshot import KeyedStateSnapshot, StateTableSnapshot
from engine.timers import TimerServiceSnapshot, _rows_in_registration_order
from engine.windowing.aggregations import set_field
from engine.windowing.windows import TimeWindow

_EMPTY = -1
#: timestamps beyond this magnitude take the general path (window ends must not overflow int64)
_TS_LIMIT = 2**62
#: a batch whose window starts span more slides than this maps them through np.unique instead of a table
_START_TABLE_LIMIT = 1 << 16
#: a grid up to this many cells is always fine; a bigger one must be at least 1/8 full (GridTooSparse)
_DENSE_CELLS = 1 << 22
_FIELD_TYPES = frozenset((int, float))
_CONTAINER_TYPES = frozenset((tuple, list, dict))


class GridTooSparse(Exception):
    """A batch would make the key x window grid mostly empty and large (say a backfill spanning days of
    event time in one batch): the operator moves to the general layout instead of allocating it."""


def _object_array(values: Sequence[Any]) -> np.ndarray:
    """A 1-d object array of ``values`` (tuples stay elements, not rows)."""
    return np.fromiter(values, dtype=object, count=len(values))


class ColumnarWindows:
    """The window contents and end-of-window timers of one WindowOperator subtask (module docstring)."""

    def __init__(self, *, size: int, slide: int, offset: int, field: int | str, state_name: str,
                 state_kind: str, max_parallelism: int, key_group_range: KeyGroupRange,
                 key_group_of: Callable[[Any], int]) -> None:
        self.size, self.slide, self.offset = size, slide, offset
        self.field = field
        self.state_name, self.state_kind = state_name, state_kind
        self.max_parallelism = max_parallelism
        self.key_group_range = key_group_range
        #: the backend's key-group lookup: checks the range and raises the general path's errors
        self._key_group_of = key_group_of
        self._getter = itemgetter(field)
        self._per_element = -(-size // slide)  # the most windows one element can belong to
        self.keys: list[Any] = []
        self.key_groups: list[int] = []
        self.key_ids: dict[Any, int] = {}
        self.start_of_col: list[int | None] = []
        self.col_of_start: dict[int, int] = {}
        self._free_cols: list[int] = []
        self.rows_cap = 0
        self.cols_cap = 0
        self.seq = np.empty(0, np.int64)
        self.count = np.empty(0, np.int64)
        self.acc = np.empty(0, object)
        self.carrier = np.empty(0, object)
        self.next_seq = 0
        self._compact_at = 4096
        self._grow(64, 8)

    # ---- layout -----------------------------------------------------------------------------------------
    def _grow(self, rows: int, cols: int) -> None:
        rows = max(rows, self.rows_cap)
        cols = max(cols, self.cols_cap)
        if rows == self.rows_cap and cols == self.cols_cap:
            return
        old = (self.rows_cap, self.cols_cap)

        def regrid(a: np.ndarray, fill: Any) -> np.ndarray:
            out = np.full((rows, cols), fill, dtype=a.dtype)
            if old[0] and old[1]:
                out[: old[0], : old[1]] = a.reshape(old)
            return out.reshape(-1)

        self.seq = regrid(self.seq, _EMPTY)
        self.count = regrid(self.count, 0)
        self.acc = regrid(self.acc, None)
        self.carrier = regrid(self.carrier, None)
        self._free_cols.extend(range(cols - 1, old[1] - 1, -1))
        self.start_of_col.extend([None] * (cols - old[1]))
        self.rows_cap, self.cols_cap = rows, cols

    def _reserve(self, rows: int, cols: int, expected_entries: int = 0) -> None:
        """Room for ``rows`` keys and ``cols`` open windows, grown once to powers of two.

        A batch knows how many new keys and windows it brings before placing them; growing once
        instead of doubling step by step matters because every regrid allocates and fills the
        whole grid (a Spark window task starts each epoch from restored state and may open a
        hundred windows at once).  Raises :class:`GridTooSparse`, before anything is placed, when
        the grid would be large and less than 1/8 full with ``expected_entries`` more entries.
        """
        if rows > self.rows_cap or cols > self.cols_cap:
            rows = 1 << max(0, rows - 1).bit_length() if rows > self.rows_cap else self.rows_cap
            cols = 1 << max(0, cols - 1).bit_length() if cols > self.cols_cap else self.cols_cap
            if rows * cols > _DENSE_CELLS and rows * cols > 8 * (self.num_entries() + expected_entries):
                raise GridTooSparse(f"{rows} keys x {cols} windows for {expected_entries} new entries")
            self._grow(rows, cols)

    def _col_for(self, start: int) -> int:
        col = self.col_of_start.get(start)
        if col is None:
            if not self._free_cols:
                raise IllegalStateError(f"Bug: no free column for window {start}: _reserve_starts must run first")
            col = self._free_cols.pop()
            self.col_of_start[start] = col
            self.start_of_col[col] = start
        return col

    def _reserve_starts(self, starts: Any, expected_entries: int) -> None:
        col_of_start = self.col_of_start
        new = sum(1 for s in starts if s not in col_of_start)
        if new:
            self._reserve(self.rows_cap, len(col_of_start) + new, expected_entries)

    def _row_for_new_key(self, key: Any, group: int | None = None) -> int:
        if group is None:
            group = self._key_group_of(key)  # raises for unhashable keys and keys of other subtasks
        row = len(self.keys)
        if row >= self.rows_cap:
            raise IllegalStateError(f"Bug: no free row for key {key!r}: _reserve must run first")
        self.keys.append(key)
        self.key_groups.append(group)
        self.key_ids[key] = row
        return row

    def num_entries(self) -> int:
        return int(np.count_nonzero(self.seq >= 0))

    def is_empty(self) -> bool:
        return not self.col_of_start

    # ---- elements ---------------------------------------------------------------------------------------
    def readable(self, values: Sequence[Any]) -> list | None:
        """The batch's field values if every element holds an int/float field the arrays can sum, else None."""
        if not values:
            return []
        if not set(map(type, values)) <= _CONTAINER_TYPES:
            return None
        try:
            xs = list(map(self._getter, values))
        except (IndexError, KeyError, TypeError):
            return None
        if not set(map(type, xs)) <= _FIELD_TYPES:
            return None
        return xs

    @staticmethod
    def timestamps_fit(timestamps: Sequence[Any]) -> bool:
        if not timestamps:
            return True
        if set(map(type, timestamps)) != {int}:
            return False
        return -_TS_LIMIT < min(timestamps) and max(timestamps) < _TS_LIMIT

    def add_batch(self, keys: list, values: list, xs: list, timestamps: list, watermark: int) -> np.ndarray:
        """Fold one batch (live records only, in arrival order); returns the indexes of elements no window took.

        Windows at or behind ``watermark`` are skipped (without allowed lateness their cleanup time is
        their end): an element all of whose windows are skipped is returned for the late-data handling.
        """
        n = len(keys)
        size, slide, k = self.size, self.slide, self._per_element
        key_ids = self.key_ids
        try:
            rows_of = list(map(key_ids.get, keys))
        except TypeError:  # an unhashable key: the backend raises the general path's JobDefinitionError
            for key in keys:
                self._key_group_of(key)
            raise
        if None in rows_of:
            fresh = len({key for key, row in zip(keys, rows_of) if row is None})
            self._reserve(len(self.keys) + fresh, self.cols_cap, n * self._per_element)
            new_row = self._row_for_new_key
            for i, row in enumerate(rows_of):
                if row is None:
                    key = keys[i]
                    row = key_ids.get(key)  # an earlier element of this batch may have added it
                    rows_of[i] = new_row(key) if row is None else row
        ts = np.fromiter(timestamps, dtype=np.int64, count=n)
        hi = ts - (ts - self.offset) % slide
        starts = hi[:, None] - np.arange(k, dtype=np.int64)[None, :] * slide
        # the assigner's windows (start + size > ts) that are still ahead of the watermark (end - 1 > watermark)
        take = (starts > (ts - size)[:, None]) & (starts > watermark - size + 1)
        kept = take.any(axis=1)
        skipped = np.nonzero(~kept)[0]
        e_rec, _e_j = np.nonzero(take)  # row-major: element by element, each one's windows by descending start
        m = e_rec.size
        if m == 0:
            return skipped
        e_start = starts[take]
        lo = int(e_start.min())
        span = (int(e_start.max()) - lo) // slide + 1
        if span <= _START_TABLE_LIMIT:
            slot = (e_start - lo) // slide
            present = np.nonzero(np.bincount(slot, minlength=span))[0]
            self._reserve_starts((lo + s * slide for s in present.tolist()), m)
            table = np.empty(span, np.int64)
            for s in present.tolist():
                table[s] = self._col_for(lo + s * slide)
            cols = table[slot]
        else:
            uniq, inverse = np.unique(e_start, return_inverse=True)
            self._reserve_starts(uniq.tolist(), m)
            cols = np.fromiter((self._col_for(int(s)) for s in uniq.tolist()), dtype=np.int64,
                               count=uniq.size)[inverse]
        rows = np.fromiter(rows_of, dtype=np.int64, count=n)[e_rec]
        cells = rows * self.cols_cap + cols
        seq = self.seq
        new = np.nonzero(seq[cells] < 0)[0]  # entry positions whose (key, window) has no entry yet
        firsts = new
        if new.size:
            # the first entry of each new (key, window), in entry order: the new cells' seq (-1 until now)
            # serves as scratch, every one of them gets its real number just below
            new_cells = cells[new]
            seq[new_cells] = m
            np.minimum.at(seq, new_cells, new)
            firsts = new[seq[new_cells] == new]
            first_cells = cells[firsts]
            seq[first_cells] = np.arange(self.next_seq, self.next_seq + firsts.size, dtype=np.int64)
            self.next_seq += int(firsts.size)
            first_recs = e_rec[firsts]
            self.carrier[first_cells] = _object_array(values)[first_recs]
            self.acc[first_cells] = _object_array(xs)[first_recs]
            self.count[first_cells] = 1
        if firsts.size < m:
            rest = np.ones(m, bool)
            rest[firsts] = False
            rest_cells = cells[rest]
            np.add.at(self.acc, rest_cells, _object_array(xs)[e_rec[rest]])
            np.add.at(self.count, rest_cells, 1)
        return skipped

    # ---- firing -----------------------------------------------------------------------------------------
    def due_starts(self, watermark: int) -> list[int]:
        last = self.size - 1
        return sorted(s for s in self.col_of_start if s + last <= watermark)

    def fire(self, start: int, as_columns: bool = False) -> list[StreamRecord] | TupleColumns:
        """Results of window ``start`` for every key that has it (registration order), and drop its column.

        ``as_columns``: results that are tuples of one width come back as :class:`TupleColumns`
        (the same values, not built row by row); other results are records either way.
        """
        col = self.col_of_start.pop(start)
        self.start_of_col[col] = None
        self._free_cols.append(col)
        cells = np.arange(col, self.rows_cap * self.cols_cap, self.cols_cap)
        seqs = self.seq[cells]
        live = np.nonzero(seqs >= 0)[0]
        if live.size == 0:
            return []
        cells = cells[live[np.argsort(seqs[live], kind="stable")]]
        max_ts = start + self.size - 1
        columns = self._result_columns(cells) if as_columns else None
        out: list[StreamRecord] | TupleColumns = (
            TupleColumns(columns, max_ts) if columns is not None
            else [StreamRecord(v, max_ts) for v in self._results(cells)])
        self.seq[cells] = _EMPTY
        self.count[cells] = 0
        self.acc[cells] = None
        self.carrier[cells] = None
        return out

    def _result_columns(self, cells: np.ndarray, carriers: list | None = None,
                        accs: list | None = None) -> list[list] | None:
        """The results as columns when they are all tuples of one width holding the field, else None.

        Built column-wise, in C.  A window of one element gets a tuple equal to the element (its acc
        is the element's field), as add() keeps it.
        """
        field = self.field
        if type(field) is not int:
            return None
        if carriers is None:
            carriers = self.carrier[cells].tolist()
        if set(map(type, carriers)) != {tuple}:
            return None
        widths = set(map(len, carriers))
        if len(widths) != 1:
            return None
        width = widths.pop()
        if field >= width:
            return None
        if accs is None:
            accs = self.acc[cells].tolist()
        return [accs if j == field else list(map(itemgetter(j), carriers)) for j in range(width)]

    def _results(self, cells: np.ndarray) -> list:
        carriers = self.carrier[cells].tolist()
        accs = self.acc[cells].tolist()
        columns = self._result_columns(cells, carriers, accs)
        if columns is not None:
            return list(zip(*columns))
        counts = self.count[cells].tolist()
        field = self.field
        return [c if n == 1 else set_field(c, field, a) for c, a, n in zip(carriers, accs, counts)]

    def maybe_compact(self) -> None:
        """Drop rows of keys without any open window once they are the majority (keys come and go)."""
        if len(self.keys) < self._compact_at:
            return
        grid = self.seq.reshape(self.rows_cap, self.cols_cap)[: len(self.keys)]
        live = np.nonzero((grid >= 0).any(axis=1))[0]
        if live.size * 2 > len(self.keys):
            self._compact_at = len(self.keys) * 2
            return
        rows, cols = self.rows_cap, self.cols_cap

        def keep(a: np.ndarray, fill: Any) -> np.ndarray:
            out = np.full((rows, cols), fill, dtype=a.dtype)
            out[: live.size] = a.reshape(rows, cols)[live]
            return out.reshape(-1)

        self.seq = keep(self.seq, _EMPTY)
        self.count = keep(self.count, 0)
        self.acc = keep(self.acc, None)
        self.carrier = keep(self.carrier, None)
        order = live.tolist()
        self.keys = [self.keys[i] for i in order]
        self.key_groups = [self.key_groups[i] for i in order]
        self.key_ids = {key: i for i, key in enumerate(self.keys)}
        self._compact_at = max(4096, len(self.keys) * 2)

    # ---- the general layout -----------------------------------------------------------------------------
    def entries(self) -> list[tuple[int, Any, int, TimeWindow, Any]]:
        """``(seq, key, key_group, window, accumulator)`` of every (key, window), in registration order."""
        cells = np.nonzero(self.seq >= 0)[0]
        cells = cells[np.argsort(self.seq[cells], kind="stable")]
        if cells.size == 0:
            return []
        values = self._results(cells)
        windows = {s: TimeWindow(s, s + self.size) for s in self.col_of_start}
        cols_cap = self.cols_cap
        keys, groups, start_of_col = self.keys, self.key_groups, self.start_of_col
        return [(q, keys[c // cols_cap], groups[c // cols_cap], windows[start_of_col[c % cols_cap]], v)  # type: ignore[index]
                for q, c, v in zip(self.seq[cells].tolist(), cells.tolist(), values)]

    def frozen(self) -> "ColumnarWindows":
        """A copy that later processing does not change (arrays copied, elements shared: they are immutable
        to the operator), for a snapshot materialized later, maybe in another thread."""
        copy = ColumnarWindows.__new__(ColumnarWindows)
        copy.__dict__.update(self.__dict__)
        copy.keys = list(self.keys)
        copy.key_groups = list(self.key_groups)
        copy.start_of_col = list(self.start_of_col)
        copy.col_of_start = dict(self.col_of_start)
        copy.seq = self.seq.copy()
        copy.count = self.count.copy()
        copy.acc = self.acc.copy()
        copy.carrier = self.carrier.copy()
        return copy

    def snapshot_parts(self) -> tuple[KeyedStateSnapshot, TimerServiceSnapshot]:
        """The keyed-state and timer snapshots the general operator would hold for the same contents."""
        first = self.key_group_range.start_key_group
        groups: tuple[dict, ...] = tuple({} for _ in range(len(self.key_group_range)))
        timers: dict[int, dict] = {}
        for seq, key, kg, window, value in self.entries():
            groups[kg - first][(key, window)] = value
            per_group = timers.get(kg)
            if per_group is None:
                per_group = timers[kg] = {}
            per_group[(key, window, window.end - 1)] = seq
        keyed = KeyedStateSnapshot(self.max_parallelism, self.key_group_range,
                                   {self.state_name: StateTableSnapshot(self.state_name, self.state_kind, groups)})
        return keyed, TimerServiceSnapshot(self.max_parallelism, timers, {})

    def adopt(self, contents: dict[tuple[Any, Any], Any], event_timers: dict, watermark: int) -> bool:
        """Take over restored general-layout state if it has exactly this layout's shape; False leaves it.

        ``contents``: (key, window) -> accumulator; ``event_timers``: the timer queue's frozen groups.
        Every entry needs exactly its end-of-window timer, ahead of the watermark, and an accumulator
        whose field the arrays can hold.
        """
        rows = _rows_in_registration_order(event_timers)
        if len(rows) != len(contents) or not self.is_empty():
            return False
        size, slide, offset = self.size, self.slide, self.offset
        keys, groups, starts, values = [], [], [], []
        get = contents.get
        for _seq, kg, key, window, ts in rows:
            if type(window) is not TimeWindow or window.end - window.start != size or ts != window.end - 1:
                return False
            if (window.start - offset) % slide != 0 or ts <= watermark:
                return False
            value = get((key, window))
            if value is None:
                return False
            keys.append(key)
            groups.append(kg)
            starts.append(window.start)
            values.append(value)
        xs = self.readable(values)
        if xs is None:
            return False
        known = self.key_ids
        # the restore placed each key in its key group (keyed state checks it against the key's hash); new keys
        # get rows in first-appearance order, as placing the entries one by one would give them
        group_of = {key: kg for key, kg in zip(keys, groups) if key not in known}
        new_starts = list(dict.fromkeys(starts))
        rows_needed = len(self.keys) + len(group_of)
        try:
            self._reserve(rows_needed, len(new_starts), len(values))
        except GridTooSparse:
            return False
        for key, kg in group_of.items():
            self._row_for_new_key(key, kg)
        col_of = {start: self._col_for(start) for start in new_starts}
        n = len(values)
        cells = (np.fromiter(map(known.__getitem__, keys), np.int64, n) * self.cols_cap
                 + np.fromiter(map(col_of.__getitem__, starts), np.int64, n))
        self.seq[cells] = np.arange(self.next_seq, self.next_seq + n, dtype=np.int64)
        self.next_seq += n
        self.carrier[cells] = _object_array(values)
        self.acc[cells] = _object_array(xs)
        self.count[cells] = 1
        return True
