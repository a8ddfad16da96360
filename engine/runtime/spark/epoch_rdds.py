"""An epoch's Spark plumbing on the RDD layer (runtime option ``epoch_shape="rdd"``, the default; issue 16).

:class:`EpochRdds` places an epoch's work as :class:`engine.runtime.spark.epoch_frames.EpochFrames` does — the
same stage functions (engine/runtime/spark/stages.py), the same rows (engine/runtime/spark/rows.py ``ROW_SCHEMA``),
the same placement of key group g on subtask ``g * parallelism // max_parallelism``, the same order within a
subtask — but without Spark SQL: every element of its RDDs is one Arrow IPC stream of rows, which the JVM moves
as opaque bytes.

* a source vertex's reads: ``parallelize(range(n), n)``, one partition per unfinished split, each running the
  source stage over its slice index;
* a window stage's input: each read or state element is cut by subtask in the producing task (numpy: the record
  rows' key groups are hashed there, engine/state/key_hash.py, the function Spark SQL's ``xxhash64`` computes
  for the DataFrame shape), ``partitionBy`` with the identity partitioner, and each subtask's rows sorted by
  (node, key group, channel, sequence) with pyarrow before the window stage reads them;
* outputs cut from their lineage with ``RDD.localCheckpoint``, as the DataFrame shape's ``localCheckpoint``;
* the driver's rows: one ``collect`` of a union, filtered in the tasks.

**Why.**  The DataFrame shape pays Catalyst on every epoch: each epoch's inputs are new local checkpoints, so its
SQL is parsed, analysed, optimized and planned again, and the generated code keeps the JIT compiler busy.
bench/probe_epoch_shapes.py measured the two plumbings on almost no data: 546 ms of CPU an epoch as DataFrames
against 251 ms as RDDs.

A window whose reading tasks' partials the DataFrame shape folds again in Spark SQL (engine/runtime/spark/
preaggregation.py ``preaggregate``; the lambda form's built-in min/max) has them folded by its window task, with
pyarrow's hash aggregate, before its operator reads them (:func:`_fold_partials`).

A broadcast process vertex's broadcast-side rows are copied to each of its subtasks by the placing task, as the
subtask's first key group (the DataFrame shape's ``explode``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.graph.transformations import BroadcastProcessTransformation
from engine.runtime.snapshot_metadata import source_split_key
from engine.runtime.spark.epoch_frames import DRIVER_DESTS, EpochFrames
from engine.runtime.spark.rows import DEST_BROADCAST, DEST_COLUMNS, DEST_STATE, ipc_table
from engine.runtime.spark.stages import WINDOW_STAGE_COLUMNS, source_stage, window_stage
from engine.watermarks.strategy import WatermarkStrategy

_DRIVER_DESTS = np.array(DRIVER_DESTS, np.int32)
#: the order of a subtask's rows, as the DataFrame shape's ``SORT BY _node, _kg, _split, _offset`` (nulls first)
_ORDER = [(name, "ascending", "at_start") for name in ("_node", "_kg", "_split", "_offset")]


def batch_bytes(batch: pa.RecordBatch) -> bytes:
    """One record batch as an Arrow IPC stream."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


def _id_batch(ids: list[int]) -> pa.RecordBatch:
    """The input a stage function reads from ``spark.range``: one int64 column ``id``."""
    return pa.RecordBatch.from_arrays([pa.array(ids, pa.int64())], names=["id"])


def _over_ids(fn: Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]) -> Callable:
    """A partition function of ``parallelize(range(n), n)`` running ``fn`` (a ``mapInArrow`` function over
    ``spark.range``'s ids) and giving its batches as IPC bytes."""
    def run(ids: Iterator[int]) -> Iterator[bytes]:
        batch = _id_batch(list(ids))
        for out in fn(iter([batch] if batch.num_rows else [])):
            if out.num_rows:
                yield batch_bytes(out)
    return run


def _collecting(fn: Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]) -> Callable:
    """A partition function over IPC elements running ``fn`` and giving each of its rows as a tuple."""
    def run(blobs: Iterator[bytes]) -> Iterator[tuple]:
        batches = (b for blob in blobs for b in ipc_table(blob).to_batches())
        for out in fn(batches):
            yield from zip(*(out.column(i).to_pylist() for i in range(out.num_columns)))
    return run


def _placing(record_dests: tuple[int, ...], column_tags: tuple[str, ...], state_tags: tuple[str, ...],
             broadcast_tags: tuple[str, ...], parallelism: int, max_parallelism: int
             ) -> Callable[[bytes], Iterator[tuple[int, bytes]]]:
    """The map side of a window stage's shuffle: an element's rows for these vertices, cut by subtask.

    Rows taken: records for ``record_dests``, column fold partials tagged ``column_tags``, state rows tagged
    ``state_tags``, broadcast-side records of the broadcast process vertices tagged ``broadcast_tags``.  Each gets
    ``_kg`` (a record's from its key, the others carry theirs) and ``_node`` (the vertex it is for), as the DataFrame
    shape's projection writes them; a broadcast row goes to every subtask, as its first key group."""
    from engine.state.key_groups import key_group_range_for_operator

    dests = np.array(record_dests, np.int32)
    firsts = [key_group_range_for_operator(max_parallelism, parallelism, i).start_key_group
              for i in range(parallelism)]

    def place(blob: bytes) -> Iterator[tuple[int, bytes]]:
        from engine.state.key_hash import key_groups_of

        table = ipc_table(blob)
        dest = table.column("_dest").to_numpy()
        records = np.isin(dest, dests)
        mask = records.copy()
        for code, tags in ((DEST_COLUMNS, column_tags), (DEST_STATE, state_tags), (DEST_BROADCAST, broadcast_tags)):
            if tags:
                tagged = pc.fill_null(pc.is_in(table.column("_tag"), value_set=pa.array(tags)), False)
                mask |= (dest == code) & tagged.to_numpy(zero_copy_only=False)
        if not mask.any():
            return
        if not mask.all():
            table = table.filter(pa.array(mask))
            records = records[mask]
            dest = dest[mask]
        kg = pc.fill_null(table.column("_kg"), -1).to_numpy(zero_copy_only=False).astype(np.int32)
        if records.any():
            kg[records] = key_groups_of(table.column("_key").filter(pa.array(records)), max_parallelism)
        node = dest.astype(np.int32)
        if not records.all():
            tags = pc.cast(table.column("_tag").filter(pa.array(~records)), pa.int32())
            node[~records] = tags.to_numpy(zero_copy_only=False)
        broadcast = dest == DEST_BROADCAST
        kg[broadcast] = firsts[0]
        subtask = (kg.astype(np.int64) * parallelism) // max_parallelism
        placed = pa.table({"_dest": table.column("_dest"), "_kg": pa.array(kg, pa.int32()),
                           "_node": pa.array(node, pa.int32()), "_split": table.column("_split"),
                           "_offset": table.column("_offset"), "_ts": table.column("_ts"), "_key": table.column("_key"),
                           "_value": table.column("_value"), "_blob": table.column("_blob"),
                           "_num": table.column("_num")})
        if broadcast.any():
            copies = placed.filter(pa.array(broadcast))
            kg_index = copies.schema.get_field_index("_kg")
            for i, first in enumerate(firsts):
                copy = copies.set_column(kg_index, "_kg", pa.array(np.full(len(copies), first, np.int32)))
                yield i, batch_bytes(copy.combine_chunks().to_batches()[0])
            if broadcast.all():
                return
            placed = placed.filter(pa.array(~broadcast))
            subtask = subtask[~broadcast]
        for s in np.unique(subtask):
            part = placed if (subtask == s).all() else placed.filter(pa.array(subtask == s))
            yield int(s), batch_bytes(part.combine_chunks().to_batches()[0])
    return place


def _fold_partials(table: pa.Table, folds: dict[int, tuple[str, int, int]]) -> pa.Table:
    """The partial rows of each window in ``folds`` (vertex id -> (sum/min/max, window offset, pane)) folded per
    (key, pane), as engine/runtime/spark/preaggregation.py ``preaggregate`` does in Spark SQL for the DataFrame shape:
    one row per pair, the first partial's by (channel, sequence) with ``_num`` the pane's aggregate."""
    dest = table.column("_dest").to_numpy()
    partial = np.isin(dest, np.array(list(folds), np.int32)) & \
        table.column("_num").is_valid().to_numpy(zero_copy_only=False)
    if not partial.any():
        return table
    parts = [table.filter(pa.array(~partial))]
    num_index = table.schema.get_field_index("_num")
    for node, (kind, offset, pane) in folds.items():
        mine = partial & (dest == node)
        if not mine.any():
            continue
        rows = table.filter(pa.array(mine)).sort_by(
            [("_split", "ascending", "at_start"), ("_offset", "ascending", "at_start")])
        ts = rows.column("_ts").to_numpy()
        grouping = pa.table({"k": rows.column("_key"), "p": pa.array(ts - (ts - offset) % pane),
                             "n": rows.column("_num"), "i": pa.array(np.arange(len(rows), dtype=np.int64))})
        folded = grouping.group_by(["k", "p"], use_threads=False).aggregate([("n", kind), ("i", "min")])
        firsts = rows.take(folded.column("i_min"))
        parts.append(firsts.set_column(num_index, "_num", folded.column(f"n_{kind}").cast(pa.int64())))
    return pa.concat_tables(parts)


def _windowing(fn: Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]], columns: tuple[str, ...],
               folds: dict[int, tuple[str, int, int]]) -> Callable[[Iterator[tuple[int, bytes]]], Iterator[bytes]]:
    """The reduce side: one subtask's rows — partials of ``folds`` folded (:func:`_fold_partials`) — sorted as the
    DataFrame shape sorts them, through the window stage."""
    def run(pairs: Iterator[tuple[int, bytes]]) -> Iterator[bytes]:
        tables = [ipc_table(blob) for _, blob in pairs]
        if tables:
            table = pa.concat_tables(tables)
            if folds:
                table = _fold_partials(table, folds)
            table = table.sort_by(_ORDER).select(list(columns))
            batches = iter(table.combine_chunks().to_batches())
        else:
            batches = iter(())
        for out in fn(batches):
            if out.num_rows:
                yield batch_bytes(out)
    return run


def _rows_for_driver(frame: int) -> Callable[[bytes], Iterator[tuple]]:
    def rows(blob: bytes) -> Iterator[tuple]:
        table = ipc_table(blob)
        mask = np.isin(table.column("_dest").to_numpy(), _DRIVER_DESTS)
        if not mask.any():
            return
        if not mask.all():
            table = table.filter(pa.array(mask))
        for dest, value, tag in zip(table.column("_dest").to_pylist(), table.column("_value").to_pylist(),
                                    table.column("_tag").to_pylist()):
            yield dest, value, tag, frame
    return rows


def _state_rows(tag: str) -> Callable[[bytes], Iterator[bytes]]:
    def rows(blob: bytes) -> Iterator[bytes]:
        table = ipc_table(blob)
        mask = (table.column("_dest").to_numpy() == DEST_STATE) & \
            pc.fill_null(pc.equal(table.column("_tag"), tag), False).to_numpy(zero_copy_only=False)
        if mask.any():
            yield blob if mask.all() else batch_bytes(table.filter(pa.array(mask)).combine_chunks().to_batches()[0])
    return rows


class EpochRdds(EpochFrames):
    """:class:`EpochFrames`' interface on RDDs of Arrow IPC elements (module docstring)."""

    def __init__(self, spark: Any, routes: Any, max_parallelism: int, windows: list[Any]) -> None:
        super().__init__(spark, routes, max_parallelism, windows)
        self.sc = spark.sparkContext
        #: window stage outputs built since the last Spark job: the next ``driver_rows`` computes them
        self._uncomputed: list[Any] = []

    def _cut(self, rdd: Any) -> Any:
        """``rdd`` marked for a local checkpoint, behind a plain RDD: PySpark would otherwise fuse the next
        Python function into ``rdd``'s own and compute it from ``rdd``'s parent, past the checkpoint."""
        from pyspark import RDD

        rdd.localCheckpoint()
        return RDD(rdd._jrdd, rdd.ctx, rdd._jrdd_deserializer)

    def source_frame(self, v: Any, pieces: list[Any], epoch_records: int, now_ms: int, watermark_before: int,
                     staging: Callable[[], dict[int, Any]]) -> Any:
        if not pieces:
            return None
        slices = [{"split": s.split.to_json(), "key": source_split_key(s.source_uid, s.split.split_id),
                   "offset": s.offset, "watermarks": s.watermarks} for s in pieces]
        strategy = v.source_watermark_strategy or WatermarkStrategy.no_watermarks()
        fn = source_stage(v.head.source, strategy, self.routes, v.head.id, slices, epoch_records,
                          now_ms, self.max_parallelism, watermark_before, staging(),
                          periodic_watermarks=self.periodic_watermarks)
        return self.sc.parallelize(range(len(slices)), len(slices)).mapPartitions(_over_ids(fn))

    def checkpointed_union(self, frames: list[Any]) -> Any:
        return self._cut(frames[0] if len(frames) == 1 else self.sc.union(frames))

    def state_of(self, out: Any, node_id: int) -> Any:
        return out.flatMap(_state_rows(str(node_id)))

    def driver_rows_by_frame(self, frames: list[Any]) -> list[list[Any]]:
        parts = [f.flatMap(_rows_for_driver(i)) for i, f in enumerate(frames)]
        out: list[list[Any]] = [[] for _ in frames]
        rows = (parts[0] if len(parts) == 1 else self.sc.union(parts)).collect()
        self._uncomputed.clear()
        for dest, value, tag, frame in rows:
            out[frame].append((dest, value, tag))
        return out

    def collect_over(self, rows: Any, fn: Callable, ddl: str) -> list[tuple]:
        return rows.mapPartitions(_collecting(fn)).collect()

    def task_rows(self, n: int, fn: Callable) -> Any:
        rdd = self._cut(self.sc.parallelize(range(n), n).mapPartitions(_over_ids(fn)))
        rdd.count()  # materialized now, as ``localCheckpoint(eager=True)``: a restore's errors surface here
        return rdd

    def _window_frame(self, group: list[Any], state: dict[int, Any], stage_outputs: list[Any], before: int,
                      after: int, now_ms: int, epoch: int, staging: dict[int, Any], checkpoint: Any = None) -> Any:
        parallelism = group[0].parallelism
        ids = tuple(v.head.id for v in group)
        mp = self.max_parallelism
        fold_tags = tuple(str(i) for i in ids if i in self.routes.preaggregations
                          and self.routes.preaggregations[i].fold)
        broadcast_tags = tuple(str(v.head.id) for v in group if isinstance(v.head, BroadcastProcessTransformation))
        # One Python pass per input partition would be a Python task per read split and state partition on the
        # shuffle's map side (the DataFrame shape's runs in the JVM): coalesced, the map side is ``parallelism``
        # tasks, each placing its share of the inputs' elements.  Only what an earlier Spark job computed is
        # coalesced: an upstream window stage of this epoch is computed by the placing task that reads it, and
        # coalesced it would run several of its subtasks one after another in one task.  A read holds no state row of
        # these vertices, and a state part nothing else, so one placing function takes both.
        parts = [*stage_outputs, *(state[i] for i in ids if state[i] is not None)]
        computed = [p for p in parts if not any(p is w for w in self._uncomputed)]
        inputs = [p for p in parts if any(p is w for w in self._uncomputed)]
        if computed:
            inputs.insert(0, (computed[0] if len(computed) == 1 else self.sc.union(computed)).coalesce(parallelism))
        if inputs:
            placed = (inputs[0] if len(inputs) == 1 else self.sc.union(inputs)).flatMap(
                _placing(ids, fold_tags, tuple(str(i) for i in ids), broadcast_tags, parallelism, mp))
        else:
            placed = self.sc.emptyRDD()
        columns = (*WINDOW_STAGE_COLUMNS, *(("_split", "_offset") if fold_tags else ()))
        fn = window_stage({v.head.id: v.head for v in group}, self.routes, epoch=epoch, parallelism=parallelism,
                          max_parallelism=mp, watermark_before=before, watermark_after=after, now_ms=now_ms,
                          staging=staging, checkpoint=checkpoint)
        shuffled = placed.partitionBy(parallelism, _identity)
        # a window whose reading tasks' partials Spark SQL folds again in the DataFrame shape: folded by the window
        # task before its operator reads them
        pres = self.routes.preaggregations
        folds = {i: (pres[i].kind, pres[i].offset, pres[i].pane) for i in ids
                 if i in pres and pres[i].column is None and pres[i].sql and stage_outputs}
        out = self._cut(shuffled.mapPartitions(_windowing(fn, columns, folds), preservesPartitioning=True))
        self._uncomputed.append(out)
        return out


def _identity(subtask: int) -> int:
    return subtask

