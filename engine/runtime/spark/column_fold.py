"""The column fold: a column path window's epoch as Arrow tables from the reading task to the sink (issue 16).

engine/runtime/spark/preaggregation.py decides which windows take it (``PreAggregation.fold``: the column path's
shape, no allowed lateness, no late side output, no window function, a slide no longer than the size).  Nothing of such a window is a Python object per record or per
window on the way, unless the epoch needs the operator (below):

1. **Reading task** (engine/runtime/spark/column_path.py ``read_columns``): a read's records are folded per
   (key, pane) with pyarrow's group-by into :data:`PARTIAL_FIELDS` rows -- the key group, the encoded key, the
   pane's first record in arrival order (its position ``_seq`` in the task, its timestamp, its columns whole as
   the ``_record`` struct), the pane's aggregate and its record count -- and the rows of each window subtask
   travel as one Arrow IPC blob in one Spark row (``DEST_COLUMNS``, :func:`partial_rows`).  What crosses the
   shuffle is a few binary rows per task, not a row per record: the JVM moves bytes.
2. **Window stage** (engine/runtime/spark/stages.py ``_run_subtask``): the subtask's state is
   :data:`STATE_FIELDS` rows, one per (key, window) -- the window's first element (``_record``, ``_seq`` of the
   epoch it came in), its aggregate, and its registration order ``_order`` -- kept as one Arrow IPC blob in the
   subtask's state row between epochs (:func:`state_row`).  :func:`fold` merges the epoch's partials into it
   (``Table.group_by``) and fires the windows due at W(n) column-wise; the results go to a staged Parquet sink as
   one Arrow table (engine/io/formats.py ``ArrowRows``), or as records to anything else.
3. **Checkpoint** (engine/runtime/spark/state_files.py ``write_subtask_state``, in the window task at the barrier's
   epoch, or in the upload job): the state rows become the window operator's own general snapshot layout
   (:func:`to_general`): the same keyed
   state table (rows sorted by key group, encoded key and namespace text, engine/state/snapshot.py) and timers
   table (registration order, engine/timers.py) and metadata the operator writes for the same windows, so
   ``_metadata``, restores on either runtime at any parallelism and older checkpoints stay as they are
   (tests/runtime/spark/test_column_fold_unit.py and test_spark_column_fold.py compare both tables and metadata with
   the operator's).

**Exactness.**  The operator path of the same epoch (partials as whole records in (key group, channel,
sequence) order, the order the window stage sorts its rows) is the reference:
- a window's first element is its smallest (epoch, key group, channel, sequence) partial, and its result is
  that element with the field set to the window's aggregate (Flink's SumAggregator / ComparableAggregator);
- a pane whose windows all ended at W(n-1) (the watermark the epoch's records are processed under) is dropped
  and its records counted in ``num_late_records_dropped``; a window of a pane that ended is skipped;
- windows fire at W(n) in (end, registration order), the timer service's order; registration order is the
  order an element registered its window's timer in: across epochs by epoch, within one by (key group,
  channel, sequence, the assigner's descending-start rank of the window).  A restore from a checkpoint
  registers the restored timers key group by key group (engine/runtime/spark/state_files.py
  ``read_state_rows``), and so does :func:`from_general`.

**Figures** (bench/bench_spark.py ``--grid``, 2M events in 20 files = 20 epochs and micro-batches, local[2], 4 GB
driver heap, a checkpoint every epoch, one child process per cell, ``--repeat 1``, native Spark Structured Streaming
and the column form taking turns in one JVM; host load 6-9 from other work).  Events/s, column form vs native (ratio);
peak process-tree RSS column / native:

===========  =====  =================================  ==================================
keys         skew   tumbling 60 s                      sliding 60 s / 10 s
===========  =====  =================================  ==================================
1k           0      65.3k vs 48.5k (1.35); 2.6/3.1 GB  110.4k vs 122.1k (0.90); 2.7/2.6 GB
1k           1.1    66.6k vs 64.7k (1.03); 2.7/3.4 GB  114.7k vs 113.9k (1.01); 2.8/4.5 GB
100k         0      57.1k vs 43.6k (1.31); 3.9/4.4 GB  50.4k vs 24.9k (2.02); 5.7/13.1 GB
100k         1.1    70.9k vs 63.1k (1.12); 2.7/3.6 GB  91.1k vs 51.6k (1.77); 4.5/7.0 GB
1M           0      62.7k vs 46.2k (1.36); 4.1/7.3 GB  30.8k vs 20.2k (1.52); 6.3/14.3 GB
1M           1.1    65.3k vs 49.6k (1.32); 2.9/3.0 GB  55.6k vs 35.3k (1.58); 7.5/7.6 GB
===========  =====  =================================  ==================================

Before the fold (the column path through the operator, 4977412, same host an hour earlier): 2M/100k uniform
tumbling 58.4k vs native 90.6k (0.64), Python CPU 18.4 µs/event; with the fold 41.3k vs 54.5k (0.76) in a turn
on the loaded host, Python 10.1 µs/event, JVM 14.5 -> 11.6.  What bounds it now is not the data: at 1k events an
epoch the same job costs 2.4 s an epoch (1.34 s of JVM CPU, 0.41 s of Python workers): three Spark jobs an epoch
(the reads, the window stages, the checkpoint upload), each planned anew by the JVM, which in these short runs
spends most of its CPU in the JIT compiler warming up (JFR: 57.6 s of compilation in a 50 s run).

**When the operator runs instead** (:func:`partial_records` / :func:`to_general` feed it): an epoch whose rows
hold element rows for the window (a read the columns could not take: a null, a float, a naive timestamp...),
partials whose record columns differ in type between tasks, or restored state this layout cannot hold (another
state, processing-time timers).  The operator path gets the same records in the same order and its snapshot
is converted back by :func:`from_general` at the next epoch that can fold.
"""

from __future__ import annotations

import json
from typing import Any, Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.runtime.spark.rows import ipc_bytes, ipc_table

#: the header of a column fold state row says this (a general-layout state row's header has none)
STATE_LAYOUT = "column-fold/1"

#: one partial: a (key, pane) of one reading task's read (module docstring, step 1)
PARTIAL_FIELDS = ("_kg", "_key", "_seq", "_ts", "_num", "_count", "_record")

#: one (key, window) of a subtask's state (module docstring, step 2)
STATE_FIELDS = ("_kg", "_key", "_start", "_order", "_num", "_record")

#: registration orders of epoch n start at ``(n + 1) << ORDER_SHIFT``, above a restored state's ranks (a subtask
#: registers fewer than 2^40 windows in one epoch; epochs below 2^23 - 1)
ORDER_SHIFT = 40

_KINDS = ("sum", "min", "max")

#: :func:`from_general` of snapshots holding no window: the fold starts from the partials' record type
NO_STATE = pa.table({})


# ---- 1. the reading task ------------------------------------------------------------------------------------

def key_groups_of(encoded_keys: pa.Array, max_parallelism: int) -> np.ndarray:
    """The key group of each encoded key (engine/state/key_groups.py, Spark SQL's ``pmod(xxhash64(_key), mp)``),
    each distinct key hashed once."""
    encoded = pc.dictionary_encode(encoded_keys)
    return distinct_key_groups(encoded.dictionary, max_parallelism)[encoded.indices.to_numpy(zero_copy_only=False)]


def distinct_key_groups(distinct: pa.Array, max_parallelism: int) -> np.ndarray:
    """:func:`key_groups_of` of encoded keys already distinct (a dictionary's values), hashed in numpy
    (engine/state/key_hash.py).  It replaced a per-process cache of known keys looked up with ``pc.index_in``,
    which rebuilt a hash table of every key the process had seen on each read: 287 ms for a read of 50k keys
    once a worker knew 1M, against 3.9 ms hashing them (2M events over 1M keys spent half of the reading tasks'
    time there)."""
    from engine.state.key_hash import key_groups_of as hashed_key_groups

    return hashed_key_groups(distinct, max_parallelism).astype(np.int32)


def partial_rows(partials: pa.Table, *, parallelism: int, max_parallelism: int) -> Iterable[tuple[int, bytes]]:
    """``(first key group of the subtask, IPC blob)`` per window subtask the partials go to."""
    from engine.state.key_groups import key_group_range_for_operator, operator_index_for_key_group

    if partials.num_rows == 0:
        return []
    kgs = partials.column("_kg").to_numpy()
    # key group -> subtask, for the key groups present
    owner = np.array([operator_index_for_key_group(max_parallelism, parallelism, g)
                      for g in range(max_parallelism)], np.int32)
    subtasks = owner[kgs]
    out = []
    present = np.unique(subtasks)
    for s in present:
        part = partials.filter(pa.array(subtasks == s)) if len(present) > 1 else partials
        first = key_group_range_for_operator(max_parallelism, parallelism, int(s)).start_key_group
        out.append((first, ipc_bytes(part)))
    return out


def blob_tables(blobs: list[bytes], channels: list[str]) -> list[pa.Table]:
    """The partials of a subtask's blob rows, each with its channel (``_ch``, a dictionary column whose index is
    the channel's rank among the subtask's channels: the index order is the channel texts' order)."""
    names = sorted(set(channels))
    rank = {c: i for i, c in enumerate(names)}
    dictionary = pa.array(names, pa.string())
    tables = []
    for blob, channel in zip(blobs, channels):
        t = ipc_table(blob)
        ch = pa.DictionaryArray.from_arrays(pa.repeat(pa.scalar(rank[channel], pa.int32()), t.num_rows), dictionary)
        tables.append(t.append_column("_ch", ch))
    return tables


def concat_partials(tables: list[pa.Table]) -> pa.Table | None:
    """The partials of :func:`blob_tables` in (key group, channel, sequence) order; None when the tasks' record
    columns differ in type (the operator path takes the epoch).  Sorted on the channel's rank, an int, not its
    text (they order alike, :func:`blob_tables`)."""
    try:
        both = pa.concat_tables(tables)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return None
    ranks = np.concatenate([c.indices.to_numpy(zero_copy_only=False) for c in both.column("_ch").chunks])
    order = np.lexsort((both.column("_seq").to_numpy(), ranks, both.column("_kg").to_numpy()))
    return both.take(pa.array(order))


# ---- 2. the window stage ------------------------------------------------------------------------------------

def empty_state(record_type: pa.DataType) -> pa.Table:
    return pa.table({"_kg": pa.array([], pa.int32()), "_key": pa.array([], pa.string()),
                     "_start": pa.array([], pa.int64()), "_order": pa.array([], pa.int64()),
                     "_num": pa.array([], pa.int64()), "_record": pa.array([], record_type)})


def state_row(state: pa.Table, *, watermark: int) -> tuple[str, bytes]:
    """The subtask's state row parts (``_value`` header, ``_blob``)."""
    return json.dumps({"layout": STATE_LAYOUT, "watermark": watermark}, sort_keys=True), ipc_bytes(state)


def is_state_row(header: str) -> bool:
    return header.startswith('{"layout":')  # sort_keys: "layout" is the first key of ours, absent in the others


def read_state_row(header: str, blob: bytes) -> tuple[pa.Table, int]:
    """(state, watermark) of a column fold state row; CorruptSnapshotError when it is not one."""
    from engine.errors import CorruptSnapshotError

    try:
        h = json.loads(header)
        if h.get("layout") != STATE_LAYOUT or type(h.get("watermark")) is not int:
            raise ValueError(f"layout {h.get('layout')!r}")
        table = ipc_table(blob)
    except (ValueError, pa.ArrowException) as exc:
        raise CorruptSnapshotError(f"column fold state row is malformed ({exc})") from exc
    if tuple(table.column_names) != STATE_FIELDS:
        raise CorruptSnapshotError(f"column fold state row has columns {table.column_names}, expected {STATE_FIELDS}")
    return table, h["watermark"]


def _windows(ts: np.ndarray, size: int, slide: int, offset: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rows, starts, ranks): each timestamp's windows, in the assigner's order (descending start, ``ranks``) per
    row."""
    last = ts - np.mod(ts - offset, slide)
    per = -(-size // slide)
    k = np.arange(per, dtype=np.int64)
    starts = last[:, None] - k[None, :] * slide
    keep = starts + size > ts[:, None]
    rows, cols = np.nonzero(keep)
    return rows, starts[rows, cols], cols


def fold(state: pa.Table, partials: pa.Table | None, *, kind: str, size: int, slide: int, offset: int, epoch: int,
         watermark_before: int, watermark_after: int) -> tuple[pa.Table, pa.Table, int]:
    """One epoch of one subtask: ``(fired, state, late records dropped)`` (module docstring, "Exactness").

    ``partials`` in (key group, channel, sequence) order (:func:`concat_partials`); ``fired`` in firing order.
    """
    if kind not in _KINDS:
        raise ValueError(f"kind must be one of {_KINDS}, got {kind!r}")
    if not 0 <= epoch < 2 ** (63 - ORDER_SHIFT) - 1:
        raise ValueError(f"epoch must be in [0, 2^{63 - ORDER_SHIFT} - 1), got {epoch}")
    dropped = 0
    merged = state
    if partials is not None and partials.num_rows:
        ts = partials.column("_ts").to_numpy()
        rows, starts, ranks = _windows(ts, size, slide, offset)
        on_time = starts + size - 1 > watermark_before
        # a pane with no window left at W(n-1): its records are late, dropped and counted (no allowed lateness)
        has_window = np.zeros(partials.num_rows, bool)
        has_window[rows[on_time]] = True
        if not has_window.all():
            dropped = int(partials.column("_count").to_numpy()[~has_window].sum())
        rows, starts, ranks = rows[on_time], starts[on_time], ranks[on_time]
        per = -(-size // slide)
        if partials.num_rows * per >= 2 ** ORDER_SHIFT:
            raise ValueError(f"an epoch of {partials.num_rows} partials exceeds the registration order's range")
        index = pa.array(rows)
        taken = partials.select(["_kg", "_key", "_num", "_record"]).take(index)
        new = pa.table({
            "_kg": taken.column("_kg"), "_key": taken.column("_key"), "_start": pa.array(starts, pa.int64()),
            "_order": pa.array(((epoch + 1) << ORDER_SHIFT) + rows.astype(np.int64) * per + ranks, pa.int64()),
            "_num": taken.column("_num"), "_record": taken.column("_record"),
        })
        if state.num_rows:
            if state.schema != new.schema:
                # a restored state's record columns as the reading tasks give them (same names; a safe cast, or
                # ArrowInvalid and the operator path takes the epoch)
                state = state.cast(new.schema)
            both = pa.concat_tables([state, new])
        else:
            both = new
        # state rows come first and are in _order already, new rows after them in _order: "first" is the earliest
        both = both.append_column("_row", pa.array(np.arange(both.num_rows, dtype=np.int64)))
        folded = both.group_by(["_key", "_start"], use_threads=False).aggregate(
            [("_num", kind), ("_row", "first")])
        picked = folded.column("_row_first")
        merged = both.select(["_kg", "_key", "_start", "_order"]).take(picked)
        merged = pa.table({
            "_kg": merged.column("_kg"), "_key": merged.column("_key"), "_start": merged.column("_start"),
            "_order": merged.column("_order"), "_num": folded.column(f"_num_{kind}").cast(pa.int64()),
            "_record": both.column("_record").take(picked),
        })
    if merged.num_rows == 0:
        return merged, merged, dropped
    due = pc.less_equal(pc.add(merged.column("_start"), size - 1), watermark_after)
    fired = merged.filter(due).sort_by([("_start", "ascending"), ("_order", "ascending")])
    kept = merged.filter(pc.invert(due)).sort_by([("_order", "ascending")])
    return fired, kept, dropped


def result_columns(fired: pa.Table, field: str) -> pa.Table:
    """The fired windows' results as a table of their records' columns: each window's first element with
    ``field`` set to its aggregate (``set_field`` on a dict keeps the field's place)."""
    record = fired.column("_record").combine_chunks()
    names = [f.name for f in record.type]
    columns = [fired.column("_num") if n == field else record.field(i) for i, n in enumerate(names)]
    return pa.Table.from_arrays(columns, names=names)


def result_timestamps(fired: pa.Table, size: int) -> pa.Array:
    return pc.add(fired.column("_start"), size - 1)


# ---- the operator path's view of the same data --------------------------------------------------------------

def partial_records(partials: pa.Table, field: str
                    ) -> tuple[list[Any], list[int], list[tuple[int, str, int]], list[Any]]:
    """(values, timestamps, (key group, channel, sequence) sort keys, firsts) of the partials as whole records:
    each the pane's first record with ``field`` set to the pane's aggregate, as the operator path folds them, and
    that first record as it came (what the key selector keys the partial by: stages._PartialKeys)."""
    from engine.io.formats import table_to_pylist

    record = partials.column("_record").combine_chunks()
    names = [f.name for f in record.type]
    table = pa.Table.from_arrays([record.field(i) for i in range(len(names))], names=names)
    firsts = table_to_pylist(table)
    values = [dict(v) for v in firsts]
    for v, num in zip(values, partials.column("_num").to_pylist()):
        v[field] = num
    keys = list(zip(partials.column("_kg").to_pylist(), partials.column("_ch").to_pylist(),
                    partials.column("_seq").to_pylist()))
    return values, partials.column("_ts").to_pylist(), keys, firsts


def to_general(state: pa.Table, template: Any, *, field: str, size: int) -> Any:
    """The general-layout snapshot (engine/operators/base.py MaterializedOperatorSnapshot) of the window operator
    holding ``state``: ``template`` is that operator's snapshot with no state (metadata and empty tables), taken
    at the watermark and checkpoint id the snapshot records."""
    from engine.io.formats import table_to_pylist
    from engine.operators.base import MaterializedOperatorSnapshot
    from engine.runtime.spark.arrow_text import codec_texts
    from engine.state import codec
    from engine.state.snapshot import state_table_schema
    from engine.timers import EVENT_TIME
    from engine.windowing.window_operator import WINDOW_CONTENTS_STATE

    contents_name = f"keyed/{WINDOW_CONTENTS_STATE}"
    timers_schema = template.tables["timers"].schema
    max_parallelism = int(template.metadata["max_parallelism"])
    n = state.num_rows
    starts = state.column("_start")
    ends = pc.add(starts, size)
    namespaces = pc.binary_join_element_wise('{"end":', pc.cast(ends, pa.string()), ',"start":',
                                             pc.cast(starts, pa.string()), ',"type":"time"}', "")
    values = None
    if n:
        records = result_columns(state, field)
        values = codec_texts(records)
        if values is None:
            values = pa.array([codec.encode(v) for v in table_to_pylist(records)], pa.string())
    keyed = pa.table({
        "key_group": state.column("_kg").cast(pa.int32()), "key": state.column("_key"), "namespace": namespaces,
        "window_start": starts, "window_end": ends, "value": values if n else pa.array([], pa.string()),
        "value_num": pa.nulls(n, pa.float64()),
    })
    # the heap layout writes each key group's rows sorted by (encoded key, encoded namespace): byte-equal files
    keyed = keyed.sort_by([("key_group", "ascending"), ("key", "ascending"), ("namespace", "ascending")])
    keyed = pa.Table.from_arrays(keyed.columns, schema=state_table_schema("aggregating", max_parallelism))
    by_order = pc.sort_indices(state.column("_order"))
    timers = pa.Table.from_arrays([
        state.column("_kg").cast(pa.int32()).take(by_order), state.column("_key").take(by_order),
        namespaces.take(by_order), pc.subtract(ends, 1).take(by_order),
        pa.repeat(pa.scalar(EVENT_TIME, pa.string()), n)], schema=timers_schema)
    metadata = dict(template.metadata)
    metadata["state_rows"] = {**(metadata.get("state_rows") or {}), WINDOW_CONTENTS_STATE: n}
    metadata["state_kinds"] = {**(metadata.get("state_kinds") or {}), WINDOW_CONTENTS_STATE: "aggregating"}
    tables = dict(template.tables)
    tables[contents_name] = keyed
    tables["timers"] = timers
    return MaterializedOperatorSnapshot(metadata, tables)


def from_general(snapshots: list[Any], *, field: str, size: int) -> pa.Table | None:
    """The state rows of the window operator's general-layout snapshots (one per key group, or one per subtask),
    timers registered snapshot by snapshot as the operator restores them; None when the state has another
    shape (:func:`to_general`'s inverse on what it writes)."""
    from engine.state import codec
    from engine.timers import EVENT_TIME
    from engine.windowing.window_operator import WINDOW_CONTENTS_STATE

    contents_name = f"keyed/{WINDOW_CONTENTS_STATE}"
    kgs: list[int] = []
    keys: list[str] = []
    starts: list[int] = []
    values: list[Any] = []
    nums: list[int] = []
    for snap in snapshots:
        if set(snap.tables) - {contents_name, "timers"}:
            return None
        contents = snap.tables.get(contents_name)
        timers = snap.tables.get("timers")
        n = 0 if contents is None else contents.num_rows
        if n == 0 and (timers is None or timers.num_rows == 0):
            continue
        if contents is None or timers is None or timers.num_rows != n:
            return None
        by_window = {(k, s): (e, v) for k, s, e, v in zip(
            contents.column("key").to_pylist(), contents.column("window_start").to_pylist(),
            contents.column("window_end").to_pylist(), contents.column("value").to_pylist())}
        for kg, key, ts, kind, ns in zip(timers.column("key_group").to_pylist(), timers.column("key").to_pylist(),
                                         timers.column("timestamp").to_pylist(), timers.column("kind").to_pylist(),
                                         timers.column("namespace").to_pylist()):
            if kind != EVENT_TIME or not ns.startswith('{"end":'):
                return None
            start = ts + 1 - size
            entry = by_window.get((key, start))
            if entry is None or entry[0] != ts + 1:
                return None
            value = codec.decode(entry[1])
            if type(value) is not dict or type(value.get(field)) is not int or not -2**63 <= value[field] < 2**63:
                return None
            kgs.append(kg)
            keys.append(key)
            starts.append(start)
            values.append(value)
            nums.append(value[field])
    if not values:
        return NO_STATE
    try:
        record = pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return None
    if not pa.types.is_struct(record.type):
        return None
    return pa.table({"_kg": pa.array(kgs, pa.int32()), "_key": pa.array(keys, pa.string()),
                     "_start": pa.array(starts, pa.int64()), "_order": pa.array(range(len(keys)), pa.int64()),
                     "_num": pa.array(nums, pa.int64()), "_record": record})
