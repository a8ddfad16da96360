"""The column path of a reading task: a Parquet read stamped, judged and pre-aggregated as Arrow columns.

engine/runtime/spark/preaggregation.py decides which windows take it (``PreAggregation.column``, one
predicate with the pre-aggregation's) and says why the rows it writes give the element path's
results.  Per read of the split (engine/runtime/spark/stages.py ``_read_slice``), :func:`read_columns`:

1. takes the timestamp column as epoch milliseconds (an integer column as it is; a timestamp column
   with a time zone, in s/ms/us, floor-divided to ms, as ``FieldTimestampAssigner`` converts a zoned
   ``datetime``), and hands the split's watermark generator the read's highest timestamp once
   (``SourceTimestampsAndWatermarks.on_highest_timestamp``: the per-split max timestamp, as the
   element path's ``on_records`` does for the same generators);
2. decides lateness per record against W(n-1), the watermark at the epoch's start: a record whose pane's
   oldest window is at or behind it travels as an element row, exactly the row the Router's element path
   writes for it (so the window operator drops it, sends it to the late side output, or re-fires the window);
3. groups the other records per (key, pane) with pyarrow's hash aggregate (``Table.group_by``, C++): one
   row per group with the pane's sum/min/max as ``_num``, the group's first record in arrival order as
   ``_value`` and that record's timestamp and arrival position.  ``_value`` is the record's text as
   :func:`engine.runtime.spark.rows.encode_record` gives it for the dict the element path reads, written
   column-wise by :func:`record_texts` (no Python object per record or per group) when every column is a
   string of plain ASCII, an integer, a finite float, a bool or a UTC timestamp in s/ms/us; any other table
   builds the dicts (:func:`engine.io.formats.table_to_pylist`) and encodes them one by one
   (engine/runtime/spark/arrow_text.py).

Every row's ``_offset`` is its first record's position in the task's arrival order (the Router's sequence),
so the window stage's (channel, sequence) order among partials, elements and the other tasks' rows is the
element path's.  A read the columns cannot take exactly — a missing field, a null, a timestamp column that is
naive or in ns, an aggregated column that is not an integer within ±2^31, a key column that is neither a
string nor an integer, a generator that must see each record — returns False before changing anything, and
the caller takes the element path for that read (dead letters and all, as before).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.runtime.spark.arrow_text import _TO_MS, encode_key_column, record_texts
from engine.runtime.spark.preaggregation import INT_LIMIT, PreAggregation
from engine.runtime.spark.rows import DEST_COLUMNS

#: timestamps beyond this magnitude take the element path (the pane arithmetic must not overflow int64)
_TS_LIMIT = 2**62


def timestamps_ms(column: Any) -> np.ndarray | None:
    """The timestamp column as int64 epoch milliseconds, as ``FieldTimestampAssigner`` would give them per
    record, or None when the element path must judge it (nulls, a naive or ns timestamp, another type)."""
    if column.null_count:
        return None
    t = column.type
    if pa.types.is_timestamp(t):
        if t.tz is None or t.unit not in _TO_MS:
            return None  # naive: the element path makes each a dead letter saying why
        mul, div = _TO_MS[t.unit]
        ints = column.cast(pa.int64()).to_numpy(zero_copy_only=False)
        if mul != 1:
            if np.abs(ints).max(initial=0) >= _TS_LIMIT // 1000:
                return None
            return ints * mul
        return ints // div if div != 1 else ints  # numpy floors, as timedelta // 1 ms does
    if pa.types.is_integer(t) and t != pa.uint64():
        return column.cast(pa.int64()).to_numpy(zero_copy_only=False)
    return None


def read_columns(batch: pa.RecordBatch, pre: PreAggregation, window_id: int, router: Any, stage: Any,
                 split_id: Any) -> bool:
    """Write ``batch``'s rows for window ``window_id`` column-wise (module docstring); False: nothing was
    done, take the element path."""
    n = batch.num_rows
    if n == 0:
        return True
    col = pre.column
    names = batch.schema.names
    if col.ts_field not in names or col.key_field not in names or pre.field not in names:
        return False
    ts = timestamps_ms(batch.column(col.ts_field))
    if ts is None or int(ts.min()) <= -_TS_LIMIT or int(ts.max()) >= _TS_LIMIT:
        return False
    nums = batch.column(pre.field)
    if nums.null_count or not pa.types.is_integer(nums.type) or nums.type == pa.uint64():
        return False
    num_values = nums.cast(pa.int64()).to_numpy(zero_copy_only=False)
    if int(num_values.min()) <= -INT_LIMIT or int(num_values.max()) >= INT_LIMIT:
        return False
    keys = batch.column(col.key_field)
    kt = keys.type
    if keys.null_count or not (pa.types.is_string(kt) or pa.types.is_large_string(kt)
                               or (pa.types.is_integer(kt) and kt != pa.uint64())):
        return False
    if not stage.on_highest_timestamp(split_id, int(ts.max())):
        return False

    if pre.fold:
        _fold_read(batch, pre, window_id, router, keys, ts, num_values)
    else:
        _element_rows_read(batch, pre, window_id, router, keys, ts, num_values)
    received = router.received
    for edge in ((col.source, None, col.timestamps), (col.timestamps, None, window_id)):
        received[edge] = received.get(edge, 0) + n
    return True


def _fold_read(batch: pa.RecordBatch, pre: PreAggregation, window_id: int, router: Any, keys: Any, ts: np.ndarray,
               num_values: np.ndarray) -> None:
    """The column fold's rows of a read (engine/runtime/spark/column_fold.py, step 1): every record folded per
    (key, pane), late ones too (the window stage drops and counts a pane whose windows all ended), the partials
    of each window subtask in one blob row."""
    from engine.runtime.spark.column_fold import distinct_key_groups, partial_rows

    n = batch.num_rows
    first = router.sequence + 1
    router.sequence += n
    # The key column hashed once into a dictionary: the group-by then hashes ints, and each distinct key of the
    # read is encoded and looked up once, not once per (key, pane) (bench/probe_column_steps.py).
    dictionary = pc.dictionary_encode(keys)
    grouping = pa.table({"k": dictionary.indices, "p": pa.array(ts - (ts - pre.offset) % pre.pane),
                         "v": pa.array(num_values), "i": pa.array(np.arange(n, dtype=np.int64))})
    folded = grouping.group_by(["k", "p"], use_threads=False).aggregate(
        [("v", pre.kind), ("i", "min"), ("i", "count")])
    firsts = folded.column("i_min").to_numpy()
    order = np.argsort(firsts, kind="stable")
    firsts = firsts[order]
    picked = pa.array(firsts)
    taken = batch.take(picked)
    key_index = folded.column("k").to_numpy()[order]
    distinct = encode_key_column(dictionary.dictionary)
    encoded = distinct.take(pa.array(key_index))
    record = pa.StructArray.from_arrays(taken.columns, names=taken.schema.names)
    partials = pa.table({
        "_kg": pa.array(distinct_key_groups(distinct, router.max_parallelism)[key_index], pa.int32()),
        "_key": encoded,
        "_seq": pa.array(first + firsts, pa.int64()), "_ts": pa.array(ts[firsts], pa.int64()),
        "_num": pa.array(folded.column(f"v_{pre.kind}").to_numpy()[order], pa.int64()),
        "_count": pa.array(folded.column("i_count").to_numpy()[order], pa.int64()), "_record": record,
    })
    router.count_keyed_in_groups(window_id, partials.column("_kg").to_numpy(), partials.column("_count").to_numpy())
    for kg, blob in partial_rows(partials, parallelism=pre.column.parallelism, max_parallelism=router.max_parallelism):
        router.rows.add(DEST_COLUMNS, kg=kg, split=router.channel, offset=first, blob=blob, tag=str(window_id))


def _element_rows_read(batch: pa.RecordBatch, pre: PreAggregation, window_id: int, router: Any, keys: Any,
                       ts: np.ndarray, num_values: np.ndarray) -> None:
    """The column path's rows of a read for the window stage's operator: partials and element rows (module
    docstring, steps 2 and 3)."""
    from engine.runtime.spark.column_fold import distinct_key_groups

    n = batch.num_rows
    # each distinct key of the read encoded and hashed once, as _fold_read does
    dictionary = pc.dictionary_encode(keys)
    distinct = encode_key_column(dictionary.dictionary)
    key_index = dictionary.indices.to_numpy(zero_copy_only=False)
    router.count_keyed_in_groups(window_id, distinct_key_groups(distinct, router.max_parallelism)[key_index],
                                 np.ones(n, np.int64))
    # lateness against W(n-1), per record (preaggregation.py PreAggregation.oldest_window_max_timestamp)
    size, slide, offset, pane_ms = pre.size, pre.slide, pre.offset, pre.pane
    last = ts - (ts - offset) % slide
    oldest_max = last - ((last - ts + size - 1) // slide) * slide + size - 1
    late = oldest_max <= router.watermark_before
    first = router.sequence + 1
    router.sequence += n
    table = pa.Table.from_batches([batch])
    rows = router.rows

    if late.all():
        on_time = np.empty(0, np.int64)
    else:
        on_time = np.flatnonzero(~late) if late.any() else np.arange(n)
        grouping = pa.table({"k": keys.take(pa.array(on_time)) if len(on_time) != n else keys,
                             "p": pa.array(ts[on_time] - (ts[on_time] - offset) % pane_ms),
                             "v": pa.array(num_values[on_time]), "i": pa.array(on_time)})
        folded = grouping.group_by(["k", "p"], use_threads=False).aggregate([("v", pre.kind), ("i", "min")])
        firsts = folded.column("i_min").to_numpy()
        order = np.argsort(firsts, kind="stable")  # arrival order (rows are placed by _offset anyway)
        firsts = firsts[order]
        aggregates = folded.column(f"v_{pre.kind}").to_numpy()[order]
        picked = pa.array(firsts)
        texts = record_texts(table.take(picked))
        rows.extend(len(firsts), window_id, split=router.channel, offset=(first + firsts).tolist(),
                    ts=ts[firsts].tolist(), key=distinct.take(pa.array(key_index[firsts])).to_pylist(), value=texts,
                    num=aggregates.tolist())
    if len(on_time) != n:
        # late records: element rows, as the Router writes them (its pane test gives "late" for them too)
        behind = np.flatnonzero(late)
        picked = pa.array(behind)
        texts = record_texts(table.take(picked))
        rows.extend(len(behind), window_id, split=router.channel, offset=(first + behind).tolist(),
                    ts=ts[behind].tolist(), key=distinct.take(pa.array(key_index[behind])).to_pylist(), value=texts)
