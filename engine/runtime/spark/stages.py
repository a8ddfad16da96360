"""The two kinds of Spark task an epoch runs: reading split slices, and a window vertex per key group.

Both are plain functions of Arrow batches (``mapInArrow``) built from plain data the driver
ships with the closure (cloudpickle, Spark's transport; nothing here is persisted).

**Source stage** (:func:`source_stage`): one task per split.  It restores the split's
:class:`SourceTimestampsAndWatermarks` from the JSON snapshot the driver carried over from the
previous epoch, reads at most ``epoch_records`` records from the split's offset S(n-1), stamps
them, runs the chain that needs no shuffle (engine/runtime/spark/chains.py), and ends with a
split report row: the offset S(n), whether the split finished, the split's watermark after the
epoch's periodic emission (the epoch boundary is the watermark interval, ARCHITECTURE section 4)
and the generator snapshot for the next epoch.

**Window stage** (:func:`window_stage`): one call per (window vertex, subtask), in the Spark
partition that holds the subtask's key groups.  The shared WindowOperator
(engine/graph/operator_factory.py) is built for the subtask's key-group range, restored from
its state rows (one per subtask, or one per key group after a restore: rescaling), brought to
W(n-1) (a subtask without state starts there), fed the epoch's records in (key group, channel,
sequence) order with ``process_batch`` — so every record of epoch n is judged against W(n-1) and
each key sees its records in arrival order — then given W(n), which fires due timers.  Its new
snapshot leaves as one state row; what it emits is routed like any task output.  A
``KeyedStream.process`` / rolling-aggregate vertex runs in this stage the same way, with the
KeyedProcessOperator (engine/operators/keyed_process.py): keyed state and timers as state rows.  So does a
broadcast process vertex (engine/operators/broadcast_process.py): its broadcast-side rows reach every
subtask (``DEST_BROADCAST``, copied by the job master), and each subtask processes them after W(n-1) and
**before** its keyed records of the epoch, in (channel, sequence) order; its state row also holds its copy
of the broadcast state.
"""

from __future__ import annotations

import json
from typing import Any, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.clock import ManualClock
from engine.elements import MAX_WATERMARK, MIN_WATERMARK, StreamRecord, Watermark
from engine.graph.operator_factory import keyed_operator
from engine.io.formats import table_to_pylist
from engine.io.source import source_monitor_interval_ms
from engine.operators.base import Metrics, OperatorContext
from engine.operators.timestamps_watermarks import SourceTimestampsAndWatermarks
from engine.runtime.gc_pause import paused_iteration
from engine.runtime.spark.chains import Router, Routes, _NodeOutput
from engine.runtime.spark.column_path import read_columns
from engine.runtime.spark.rows import (
    DEST_BROADCAST,
    DEST_COLUMNS,
    DEST_METRICS,
    DEST_SPLIT,
    DEST_STATE,
    DEST_STATE_ACK,
    STATE_CHANNEL,
    RowBuffer,
    decode_values,
    is_empty_snapshot,
    snapshot_from_row_parts,
    snapshot_to_row_parts,
)
from engine.state.key_groups import KeyGroupRange

_FLUSH_ROWS = 8192

#: the input columns :func:`window_stage` reads (the job master selects them: epoch_frames.py and epoch_rdds.py
#: ``_window_frame``)
WINDOW_STAGE_COLUMNS = ("_dest", "_kg", "_node", "_ts", "_value", "_blob", "_num")


def _metrics_row(rows: RowBuffer, metrics: Metrics) -> None:
    if metrics.counters:
        rows.add(DEST_METRICS, value=json.dumps(dict(metrics.counters)))


# ---- source stage ------------------------------------------------------------------------------------------


def source_stage(source: Any, strategy: Any, routes: Routes, head_node_id: int, slices: list[dict],
                 epoch_records: int, now_ms: int, max_parallelism: int, watermark_before: int = MIN_WATERMARK,
                 staging: dict[int, Any] | None = None, periodic_watermarks: bool = True):
    """The ``mapInArrow`` function of a source vertex: input rows carry the slice index (one per partition).
    ``periodic_watermarks=False`` (an auto-watermark interval of 0) skips the epoch's periodic emission.

    ``slices[i]``: ``{"split": SourceSplit JSON, "key": the split's name in the job (source uid / split id,
    engine/runtime/snapshot_metadata.py ``source_split_key``), "offset": S(n-1) or None, "watermarks": snapshot
    or None}``.  The key is the records' channel: split ids are unique within their source only, and the
    channel orders records downstream and names the parts they stage.
    """

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from engine.io.source import SourceSplit

        for batch in batches:
            for index in batch.column(0).to_pylist():
                piece = slices[index]
                split = SourceSplit.from_json(piece["split"])
                yield from _read_slice(source, strategy, routes, head_node_id, split, piece, epoch_records,
                                       now_ms, max_parallelism, watermark_before, staging, periodic_watermarks)

    return lambda batches: paused_iteration(run(batches), freeze_survivors=True)


def _offsets_consumed(before: Any, after: Any, got: Any) -> int:
    """How many offsets a read moved a split on: by its integer offsets, else one per record and dead letter."""
    if type(before) is int and type(after) is int:
        return after - before
    return len(got.values) + len(got.dead_letters)


def _read_slice(source: Any, strategy: Any, routes: Routes, head_node_id: int, split: Any, piece: dict,
                epoch_records: int, now_ms: int, max_parallelism: int,
                watermark_before: int, staging: dict[int, Any] | None,
                periodic_watermarks: bool = True) -> Iterator[pa.RecordBatch]:
    rows = RowBuffer()
    metrics = Metrics()
    clock = ManualClock(now_ms)
    context = OperatorContext(f"source-{head_node_id}", 0, 1, max_parallelism, clock=clock, metrics=metrics)
    router = Router(routes, rows, context, piece["key"], max_parallelism, watermark_before, staging)
    context.dead_letter = router.dead_letter
    monitored = source_monitor_interval_ms(source) is not None
    stage = SourceTimestampsAndWatermarks(
        strategy, clock, lambda dl: router.dead_letter(dl.value, dl.error, f"timestamp_assigner:{dl.split_id}"),
        monitored=monitored, auto_watermark_interval_ms=None if periodic_watermarks else 0)
    if piece["watermarks"] is not None:
        stage.restore(piece["watermarks"])
    else:
        stage.add_split(split.split_id)
    reader = source.create_reader(split, piece["offset"])
    # the column path (engine/runtime/spark/column_path.py): the window its records reach, when the job's shape
    # allows it (preaggregation.py ColumnPath) and the reader has an Arrow read
    column_window = routes.column_paths.get(head_node_id)
    if column_window is not None and not reader.supports_arrow():
        column_window = None
    remaining = epoch_records
    finished = False
    read = 0
    try:
        while remaining > 0:
            before = reader.current_offset()
            got = reader.read(remaining) if column_window is None else reader.read_arrow(remaining)
            for dl in got.dead_letters:
                router.dead_letter(dl.raw, ValueError(dl.error), f"source:{split.split_id}@{dl.offset}")
            if column_window is None:
                values = got.values
            elif read_columns(got.records, routes.preaggregations[column_window], column_window, router, stage,
                              split.split_id):
                values = ()
                read += got.records.num_rows
            else:  # a read the columns cannot take exactly: the element path, on the same dicts read() gives
                values = table_to_pylist(pa.Table.from_batches([got.records]))
            # one stamping loop per read (per-record watermarks are not observable inside an epoch:
            # the driver combines split watermarks at epoch ends only)
            records = [e for e in stage.on_records(split.split_id, values) if type(e) is StreamRecord] \
                if values or column_window is None else ()
            if records:
                router.emit(head_node_id, None, records)
            read += len(values)
            # an epoch is epoch_records offsets, as on the local runtime's epoch mode: a malformed line is an
            # offset too (counting only the records kept read past S(n) and judged later records against W(n-1))
            remaining -= _offsets_consumed(before, reader.current_offset(), got)
            if len(rows) >= _FLUSH_ROWS:
                yield rows.take()
            if got.finished:
                finished = True
                break
            if not (got.values if column_window is None else got.records.num_rows) and not got.dead_letters:
                break  # nothing now (idle split or unbounded source waiting): the epoch ends here
        offset = reader.current_offset()
    finally:
        reader.close()
        router.close()
    if finished and monitored:
        # the split leaves with the epoch's periodic emission below, its progress counted (the stage's rule for
        # splits that come and go): the report's watermark is the one it leaves with
        stage.on_split_finished(split.split_id)
    stage.on_periodic_emit()
    report = {
        "key": piece["key"],
        "split_id": split.split_id,
        "offset": offset,
        "finished": finished,
        "records": read,
        "watermark": stage.current_watermark,
        "idle": stage.status.is_idle(),
        "watermarks": stage.snapshot(),
    }
    rows.add(DEST_SPLIT, split=piece["key"], value=json.dumps(report))
    _metrics_row(rows, metrics)
    out = rows.take()
    if out is not None:
        yield out


# ---- window stage ------------------------------------------------------------------------------------------


def window_stage(nodes: dict[int, Any], routes: Routes, *, epoch: int, parallelism: int, max_parallelism: int,
                 watermark_before: int, watermark_after: int, now_ms: int, staging: dict[int, Any] | None = None,
                 checkpoint: tuple[Any, int] | None = None):
    """The ``mapInArrow`` function of window vertices sharing a stage (rows sorted by node, key group).

    A partition holds one subtask's key groups; each window vertex runs as one WindowOperator over
    the subtask's whole key-group range (restored from its key groups' state rows), so the
    framework's fixed cost per epoch — building the operator, restoring and snapshotting it — is
    paid once per subtask, and the per-record work is the operator's own batch path.  The task
    runs with Python's cycle collector paused (engine/runtime/gc_pause.py) and its worker keeps
    freed memory for the next epoch's operator (engine/runtime/spark/worker_memory.py).  Fired
    windows that the columnar layout hands over as columns go to a staged file sink without
    becoming records (engine/elements.py TupleColumns).  ``checkpoint`` (storage location, checkpoint id): this
    epoch ends at that checkpoint's barrier, and each subtask writes its new state's files there itself
    (:func:`_emit_state`).
    """

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from engine.errors import IllegalStateError
        from engine.runtime.spark.worker_memory import keep_freed_memory
        from engine.state.key_groups import key_group_range_for_operator, operator_index_for_key_group

        keep_freed_memory()

        # The subtask comes from the data, not TaskContext.partitionId(): the stage may be computed
        # inside a union with other stages (its local checkpoint materializes lazily), which renumbers
        # partitions.  Every key group of one partition must belong to the same subtask.
        rows = RowBuffer()
        metrics = Metrics()
        for node_id, table in _runs(batches):
            kgs = pc.unique(table.column("_kg")).to_pylist()
            owners = {operator_index_for_key_group(max_parallelism, parallelism, kg) for kg in kgs}
            if len(owners) != 1:
                raise IllegalStateError(f"Bug: key groups {sorted(kgs)} of subtasks {sorted(owners)} share a partition")
            subtask = owners.pop()
            node = nodes[node_id]
            _run_subtask(node, node.operator_uid(), node_id, routes, rows, metrics,
                         key_group_range_for_operator(max_parallelism, parallelism, subtask), subtask, table,
                         epoch=epoch, parallelism=parallelism, max_parallelism=max_parallelism,
                         watermark_before=watermark_before, watermark_after=watermark_after, now_ms=now_ms,
                         staging=staging, checkpoint=checkpoint)
            if len(rows) >= _FLUSH_ROWS:
                yield rows.take()
        _metrics_row(rows, metrics)
        out = rows.take()
        if out is not None:
            yield out

    return lambda batches: paused_iteration(run(batches), freeze_survivors=True)


def _runs(batches: Iterator[pa.RecordBatch]) -> Iterator[tuple[int, pa.Table]]:
    """Cut a stream sorted by ``_node`` into one table per window vertex, holding one at a time."""
    pending: list[pa.RecordBatch] = []
    current: int | None = None
    for batch in batches:
        n = batch.num_rows
        if n == 0:
            continue
        nodes = batch.column("_node").to_numpy(zero_copy_only=False)
        start = 0
        while start < n:
            node = int(nodes[start])
            if current is not None and node != current:
                yield current, pa.Table.from_batches(pending)
                pending = []
            current = node
            rest = nodes[start:] != node
            end = start + int(rest.argmax()) if rest.any() else n
            pending.append(batch.slice(start, end - start))
            start = end
    if current is not None and pending:
        yield current, pa.Table.from_batches(pending)


def _run_subtask(node: Any, uid: str, node_id: int, routes: Routes, rows: RowBuffer, metrics: Metrics,
                 key_groups: KeyGroupRange, subtask: int, table: pa.Table, *, epoch: int, parallelism: int,
                 max_parallelism: int, watermark_before: int, watermark_after: int, now_ms: int,
                 staging: dict[int, Any] | None = None, checkpoint: tuple[Any, int] | None = None) -> None:
    """One window vertex's subtask for one epoch: restore, W(n-1), the epoch's records, W(n), snapshot."""
    context = OperatorContext(uid, subtask, parallelism, max_parallelism, key_groups,
                              clock=ManualClock(now_ms), metrics=metrics)
    router = Router(routes, rows, context, f"{node_id}/{subtask:05d}", max_parallelism, watermark_before, staging)
    context.dead_letter = router.dead_letter
    router.subtask = subtask
    dests = table.column("_dest").to_numpy()
    state_rows = table.take(np.nonzero(dests == DEST_STATE)[0])
    pre = routes.preaggregations.get(node_id)
    fold_input = None
    if pre is not None and pre.fold:
        fold_input = _fold_subtask(pre, node, node_id, router, rows, metrics, key_groups, table, dests, state_rows,
                                   epoch=epoch, parallelism=parallelism, max_parallelism=max_parallelism,
                                   watermark_before=watermark_before, watermark_after=watermark_after,
                                   checkpoint=checkpoint)
        if fold_input is None:
            return
    operator = keyed_operator(node)
    operator.open(context, _NodeOutput(router, node_id))
    if fold_input is not None and fold_input.state is not None:
        operator.initialize_state([fold_input.general_state(operator)])
    elif state_rows.num_rows:
        operator.initialize_state([snapshot_from_row_parts(header, blob) for header, blob in
                                   zip(state_rows.column("_value").to_pylist(), state_rows.column("_blob").to_pylist())])
    if operator.current_watermark() < watermark_before:
        operator.process_watermark(Watermark(watermark_before))
    operator.advance_processing_time(now_ms)
    # a broadcast process vertex: the epoch's broadcast records first, in (channel, sequence) order, then its keyed
    # ones (the order both runtimes' differential tests rely on: tests/api/test_broadcast_state_spark.py)
    broadcast = table.take(np.nonzero(dests == DEST_BROADCAST)[0])
    broadcast_records = list(map(StreamRecord, decode_values(broadcast.column("_value").to_pylist()),
                                 broadcast.column("_ts").to_pylist())) if broadcast.num_rows else []
    if broadcast_records:
        operator.process_batch(broadcast_records)
    mine = table.take(np.nonzero(dests == node_id)[0])
    decoded = decode_values(mine.column("_value").to_pylist())
    if pre is not None:
        nums = mine.column("_num").to_pylist()
        firsts = decoded
        decoded = pre.apply_all(decoded, nums)
        operator.key_selector = _PartialKeys.of(operator.key_selector, firsts, decoded,
                                                [num is not None for num in nums])
    records = list(map(StreamRecord, decoded, mine.column("_ts").to_pylist()))
    if fold_input is not None:
        records, firsts, partials = fold_input.with_partials(records, mine)
        operator.key_selector = _PartialKeys.of(operator.key_selector, firsts, partials, [True] * len(partials))
    if pre is None:  # pre-aggregated rows are folded records: their count is not the records sent here
        router.subtask_records_in = (node_id, len(broadcast_records) + len(records))
    if records:
        operator.process_batch(records)
    if watermark_after > operator.current_watermark():
        operator.process_watermark(Watermark(watermark_after))
    if watermark_after == MAX_WATERMARK:
        operator.finish()
    snapshot = operator.snapshot_now(epoch)  # built before anything else runs: no frozen copy
    operator.close()
    operator.release()  # its state is garbage now: free it before the next subtask, not at the task's end
    router.close()
    if not is_empty_snapshot(snapshot):
        header, blob = snapshot_to_row_parts(snapshot)
        _emit_state(rows, node, node_id, key_groups, subtask, parallelism, max_parallelism, header, blob, checkpoint)


class _PartialKeys:
    """The window operator's key selector for an epoch of pre-aggregated rows (preaggregation.py).

    A partial record is its pane's first record with the aggregated field set to the pane's sum/min/max: a record
    that never existed, which the user's selector may key otherwise than the records it stands for, or reject (a
    selector that reads the aggregated field).  Its key is the one the reading task computed for those records:
    the selector's key of the first record as it came, before the field was set.  Any other record (an element
    row) is keyed by the selector itself."""

    def __init__(self, selector: Any, keys: dict[int, Any], values: list[Any]) -> None:
        self.selector = selector
        #: id of a partial record -> its key (``values`` keeps the records, and so their ids, alive)
        self.keys = keys
        self.values = values
        explain = getattr(selector, "dead_letter_of", None)
        if explain is not None:
            self.dead_letter_of = explain

    @classmethod
    def of(cls, selector: Any, firsts: list[Any], values: list[Any], partial: list[bool]) -> Any:
        """``selector``, or the selector of ``values`` when one of them is a partial record (``partial``: which are;
        ``firsts``: the records they were built from, as they came)."""
        keys: dict[int, Any] = {}
        for first, value, is_partial in zip(firsts, values, partial):
            if is_partial:
                try:
                    keys[id(value)] = selector(first)
                except Exception:  # noqa: BLE001, S110 - the operator calls the selector on it again, dead-letters it
                    pass
        return cls(selector, keys, values) if keys else selector

    def __call__(self, value: Any) -> Any:
        key = self.keys.get(id(value), _NO_KEY)
        return self.selector(value) if key is _NO_KEY else key


_NO_KEY = object()


def _emit_state(rows: RowBuffer, node: Any, node_id: int, key_groups: KeyGroupRange, subtask: int, parallelism: int,
                max_parallelism: int, header: str, blob: bytes, checkpoint: tuple[Any, int] | None) -> None:
    """A subtask's new state row; when the epoch ends at checkpoint ``checkpoint``'s barrier, also its state files,
    written by this task (state_files.py ``write_subtask_state``, the files the upload job would write), and its
    acknowledgement row.  A failed write is reported, not raised: the driver declines the checkpoint, and the job's
    tolerable checkpoint failures decide, as for a failed upload (checkpointing.py)."""
    rows.add(DEST_STATE, kg=key_groups.start_key_group, split=STATE_CHANNEL, offset=-1, value=header, blob=blob,
             tag=str(node_id))
    if checkpoint is None:
        return
    import time

    from engine.runtime.spark.state_files import write_subtask_state

    location, checkpoint_id = checkpoint
    started = time.monotonic()
    try:
        ack = write_subtask_state(location, node.operator_uid(), subtask, parallelism, max_parallelism,
                                  checkpoint_id, node, [(header, blob)])
    except Exception as exc:  # noqa: BLE001 - reported to the driver, which declines the checkpoint
        doc: dict[str, Any] = {"checkpoint_id": checkpoint_id, "subtask": subtask, "operator": node.operator_uid(),
                               "error": f"{type(exc).__name__}: {exc}"}
    else:
        doc = {"checkpoint_id": checkpoint_id, "ack": ack, "write_ms": int((time.monotonic() - started) * 1000)}
    rows.add(DEST_STATE_ACK, kg=key_groups.start_key_group, split="", offset=-1, value=json.dumps(doc),
             tag=str(node_id))


# ---- the column fold (engine/runtime/spark/column_fold.py) ---------------------------------------------------

class _FoldInput:
    """What the operator path needs of a column fold window's epoch it could not fold: the subtask's state in the
    fold's layout (None: general-layout rows, restored as they are) and the partials, as records."""

    def __init__(self, pre: Any, state: pa.Table | None, watermark: int | None, partials: list[pa.Table]) -> None:
        self.pre = pre
        self.state = state
        self.watermark = watermark
        #: the blob rows' partials (column_fold.py blob_tables)
        self.partials = partials

    def general_state(self, operator: Any) -> Any:
        """The state as the window operator's snapshot (its own empty snapshot is the template)."""
        from engine.runtime.spark.column_fold import to_general

        template = operator.snapshot_now(0)
        template.metadata["current_watermark"] = self.watermark
        return to_general(self.state, template, field=self.pre.field, size=self.pre.size)

    def with_partials(self, records: list[StreamRecord], elements: pa.Table
                      ) -> tuple[list[StreamRecord], list[Any], list[Any]]:
        """The element rows' records and the partials' in the window stage's (key group, channel, sequence) order;
        and the partials' values with the first records they were built from (to key them: :class:`_PartialKeys`)."""
        from engine.runtime.spark.column_fold import partial_records

        if not self.partials:
            return records, [], []
        values: list[Any] = []
        stamps: list[int] = []
        keys: list[tuple[int, str, int]] = []
        firsts: list[Any] = []
        for part in self.partials:
            v, t, k, f = partial_records(part, self.pre.field)
            values += v
            stamps += t
            keys += k
            firsts += f
        element_keys = list(zip(elements.column("_kg").to_pylist(), elements.column("_split").to_pylist(),
                                elements.column("_offset").to_pylist()))
        both = sorted(zip(keys + element_keys, range(len(keys) + len(element_keys))))
        merged = [StreamRecord(v, t) for v, t in zip(values, stamps)] + records
        return [merged[i] for _, i in both], firsts, values


def _fold_subtask(pre: Any, node: Any, node_id: int, router: Router, rows: RowBuffer, metrics: Metrics,
                  key_groups: KeyGroupRange, table: pa.Table, dests: np.ndarray, state_rows: pa.Table, *, epoch: int,
                  parallelism: int, max_parallelism: int, watermark_before: int, watermark_after: int,
                  checkpoint: tuple[Any, int] | None = None) -> _FoldInput | None:
    """A column fold window's subtask for one epoch, folded as Arrow (column_fold.py); None when done, else what
    the operator path needs to take the epoch (an element row, partials of differing types, a state of another
    shape)."""
    from engine.errors import IllegalStateError
    from engine.runtime.spark.column_fold import (
        NO_STATE,
        blob_tables,
        concat_partials,
        empty_state,
        fold,
        from_general,
        is_state_row,
        read_state_row,
        result_columns,
        result_timestamps,
        state_row,
    )

    state: pa.Table | None = None
    state_watermark: int | None = None
    general = []
    for header, blob in zip(state_rows.column("_value").to_pylist(), state_rows.column("_blob").to_pylist()):
        if is_state_row(header):
            if state is not None:
                raise IllegalStateError(f"Bug: two column fold state rows for subtask {router.subtask} of {node_id}")
            state, state_watermark = read_state_row(header, blob)
        else:
            general.append(snapshot_from_row_parts(header, blob))
    if state is not None and general:
        raise IllegalStateError(f"Bug: column fold and general state rows for subtask {router.subtask} of {node_id}")
    blob_rows = table.take(np.nonzero(dests == DEST_COLUMNS)[0])
    parts = blob_tables(blob_rows.column("_blob").to_pylist(), blob_rows.column("_split").to_pylist())
    partials = concat_partials(parts) if parts else None
    foldable = partials is not None or not parts
    if foldable and bool(np.any(dests == node_id)):
        foldable = False  # element rows: a read the columns could not take
    if foldable and general:
        restored = from_general(general, field=pre.field, size=pre.size)
        if restored is None:
            foldable = False
        elif restored is not NO_STATE:
            state = restored
            state_watermark = min(int(g.metadata.get("current_watermark", watermark_before)) for g in general)
    if foldable:
        if state is None:
            if partials is None:
                router.close()
                return None  # no state, no partials: nothing to fire or keep
            state = empty_state(partials.schema.field("_record").type)
        try:
            fired, kept, dropped = fold(state, partials, kind=pre.kind, size=pre.size, slide=pre.slide,
                                        offset=pre.offset, epoch=epoch, watermark_before=watermark_before,
                                        watermark_after=watermark_after)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            foldable = False  # record columns the state and the partials cannot share: the operator's records can
    if not foldable:
        if state is None and general:
            return _FoldInput(pre, None, None, parts)  # general rows: the operator restores them itself
        return _FoldInput(pre, state, state_watermark if state_watermark is not None else watermark_before, parts)
    if dropped:
        metrics.inc("num_late_records_dropped", dropped)
    if fired.num_rows:
        router.emit_table(node_id, result_columns(fired, pre.field), result_timestamps(fired, pre.size))
    router.close()
    if kept.num_rows:
        header, blob = state_row(kept, watermark=watermark_after)
        _emit_state(rows, node, node_id, key_groups, router.subtask, parallelism, max_parallelism, header, blob,
                    checkpoint)
    return None
