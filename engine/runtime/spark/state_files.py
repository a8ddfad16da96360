"""The task side of Spark checkpoints: window state files written from inside Spark tasks, and read back.

A checkpoint's upload (engine/runtime/spark/checkpointing.py) runs :func:`write_state_files` over a keyed
vertex's state rows: each subtask's Spark task writes one file per state table through
``checkpoints.CheckpointStorageLocation.write_state_file`` and returns its handles as its acknowledgement row
(``ACK_DDL``).  A restore (engine/runtime/spark/restore.py) runs :func:`read_state_rows`: each new subtask's
task reads the files of the old subtasks overlapping its key-group range, rows filtered by key group.
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Iterator

import pyarrow as pa

from engine.graph.transformations import safe_name
from engine.runtime.spark.rows import DEST_STATE, RowBuffer, snapshot_from_row_parts, snapshot_to_row_parts

ACK_DDL = "subtask int, ack string"


def window_uid(v: Any) -> str:
    """The id a window vertex's state is stored under: the user's uid, else its place in the plan.

    build_plan assigns it (Transformation.operator_uid), for both runtimes, so a savepoint names the
    same operators whichever runtime took it and the job can be rebuilt between runs.
    """
    return v.head.operator_uid()


def storage_uid(uid: str) -> str:
    """An operator uid as a storage path segment: the local runtime's ``safe_name``, so both agree."""
    return safe_name(uid)


def _file_table(name: str) -> str:
    from engine.runtime.snapshot_metadata import stored_table_name

    return stored_table_name(name)


def _state_table(name: str) -> str:
    from engine.runtime.snapshot_metadata import state_table_name

    return state_table_name(name)


def _one_copy(table: pa.Table) -> pa.Table:
    """A broadcast state table read from every former subtask overlapping a new one: each held the same map, so
    the rows are that map once per copy; keep each key's first row."""
    keys = table.column("key").to_pylist()
    first: dict[str, int] = {}
    for i, k in enumerate(keys):
        first.setdefault(k, i)
    return table if len(first) == len(keys) else table.take(sorted(first.values()))


def write_state_files(location: Any, uid: str, parallelism: int, max_parallelism: int, checkpoint_id: int,
                      node: Any = None):
    """``mapInArrow`` over a window vertex's state rows (partition i = subtask i): one file per table.

    Each task acknowledges with its files and the snapshot metadata the local runtime's window subtask would
    have written for the same key groups (engine/runtime/checkpoint_storage.py ``OperatorStateAck``): the key
    groups' snapshots merged, their entry counts summed and their lowest watermark.  A column fold's state row
    (engine/runtime/spark/column_fold.py) is written in the window operator's general layout, converted here,
    in the background upload (``node``: the window vertex's node).
    """

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        subtask = TaskContext.get().partitionId()
        parts = ((header, blob) for batch in batches
                 for header, blob in zip(batch.column("_value").to_pylist(), batch.column("_blob").to_pylist()))
        ack = write_subtask_state(location, uid, subtask, parallelism, max_parallelism, checkpoint_id, node, parts)
        yield pa.RecordBatch.from_pydict({"subtask": [subtask], "ack": [json.dumps(ack)]},
                                         schema=pa.schema([("subtask", pa.int32()), ("ack", pa.string())]))

    return run


def write_subtask_state(location: Any, uid: str, subtask: int, parallelism: int, max_parallelism: int,
                        checkpoint_id: int, node: Any, parts: Iterable[tuple[str, bytes]]) -> dict[str, Any]:
    """Write one keyed subtask's state rows (``parts``: their (header, blob)) as checkpoint ``checkpoint_id``'s
    files, one per state table; its acknowledgement (``{"subtask", "files", "metadata"}``).

    The upload job (:func:`write_state_files`) calls it per subtask, and so does the window task itself when the
    epoch ends at a checkpoint's barrier (stages.py, runtime option ``snapshot_in_window_tasks``): both write the
    same files.  A column fold's state row is converted to the window operator's general layout here.
    """
    from engine.operators.base import OPERATOR_SNAPSHOT_FORMAT_VERSION
    from engine.runtime.spark.column_fold import is_state_row
    from engine.state.key_groups import key_group_range_for_operator

    rng = key_group_range_for_operator(max_parallelism, parallelism, subtask)
    tables: dict[str, list[pa.Table]] = {}
    rows: dict[str, int] = {}
    kinds: dict[str, str] = {}
    watermarks: list[int] = []
    metadata: dict[str, Any] = {"format_version": OPERATOR_SNAPSHOT_FORMAT_VERSION,
                                "operator_class": "WindowOperator"}
    for header, blob in parts:
        if is_state_row(header):
            snap = general_snapshot(node, uid, subtask, parallelism, max_parallelism, header, blob, checkpoint_id)
        else:
            snap = snapshot_from_row_parts(header, blob)
        for name, table in snap.tables.items():
            tables.setdefault(name, []).append(table)
        # one snapshot per key group: the subtask's counts are their sum, its watermark their min
        for name, n in (snap.metadata.get("state_rows") or {}).items():
            rows[name] = rows.get(name, 0) + int(n)
        kinds.update(snap.metadata.get("state_kinds") or {})
        if "current_watermark" in snap.metadata:
            watermarks.append(int(snap.metadata["current_watermark"]))
        metadata.update({k: v for k, v in snap.metadata.items() if k not in _PER_KEY_GROUP})
    files = []
    stored_names: dict[str, str] = {}
    for name in sorted(tables):
        table = pa.concat_tables(tables[name], promote_options="default")
        handle = location.write_state_file(uid, subtask, _file_table(name), table)
        stored_names[handle.table] = name
        files.append(handle.to_dict())
    metadata.update({"operator_id": uid, "checkpoint_id": checkpoint_id, "max_parallelism": max_parallelism,
                     "key_group_range": [rng.start_key_group, rng.end_key_group], "state_rows": rows,
                     "state_kinds": kinds, "__tables__": stored_names})
    if watermarks:
        metadata["current_watermark"] = min(watermarks)
    return {"subtask": subtask, "files": files, "metadata": metadata}


def operator_state_ack(uid: str, subtask: int, ack: dict[str, Any], parallelism: int, max_parallelism: int) -> Any:
    """The ``OperatorStateAck`` of a window subtask from its task's acknowledgement row."""
    from checkpoints import StateFileHandle
    from checkpoints._documents import Fields
    from engine.runtime.checkpoint_storage import OperatorStateAck
    from engine.state.key_groups import key_group_range_for_operator

    rng = key_group_range_for_operator(max_parallelism, parallelism, subtask)
    files = tuple(StateFileHandle.from_dict(Fields(f, "ack")) for f in ack["files"])
    return OperatorStateAck(uid, subtask, ack["metadata"], files, (rng.start_key_group, rng.end_key_group))


def keyless_subtask_ack(location: Any, node: Any, uid: str, subtask: int, parallelism: int, max_parallelism: int,
                        checkpoint_id: int, watermark: int) -> Any:
    """The acknowledgement of a keyed vertex's subtask that holds no key at a checkpoint, written by the driver.

    Its task had no state rows, so it wrote nothing; the local runtime's subtask of the same key groups snapshots
    its operator all the same (empty state tables, zero entry counts, its watermark).  So does this: the vertex's
    operator (the class the tasks run) is opened for the subtask's key groups, brought to ``watermark`` (on Spark
    every keyed operator runs at the job's watermark) and snapshotted, and its tables are written as a local
    subtask's are (engine/runtime/checkpoint_storage.py ``write_operator_snapshot``).
    """
    from engine.runtime.checkpoint_storage import write_operator_snapshot

    return write_operator_snapshot(location, uid, subtask,
                                   _empty_snapshot(node, uid, subtask, parallelism, max_parallelism, checkpoint_id,
                                                   watermark))


def _empty_snapshot(node: Any, uid: str, subtask: int, parallelism: int, max_parallelism: int, checkpoint_id: int,
                    watermark: int) -> Any:
    """The snapshot of keyed vertex ``node``'s operator (the class the tasks run) holding no key: opened for the
    subtask's key groups, brought to ``watermark`` and snapshotted for ``checkpoint_id``."""
    from engine.clock import ManualClock
    from engine.elements import StreamRecord, Watermark
    from engine.errors import IllegalStateError
    from engine.graph.operator_factory import keyed_operator
    from engine.operators.base import ListOutput, OperatorContext
    from engine.state.key_groups import key_group_range_for_operator

    operator = keyed_operator(node)
    output = ListOutput()
    operator.open(OperatorContext(uid, subtask, parallelism, max_parallelism,
                                  key_group_range_for_operator(max_parallelism, parallelism, subtask),
                                  clock=ManualClock(0)), output)
    if watermark > operator.current_watermark():
        operator.process_watermark(Watermark(watermark))
    snapshot = operator.snapshot_now(checkpoint_id)
    operator.close()
    emitted = [e for e in output.elements if isinstance(e, StreamRecord)]
    if emitted or output.side_outputs:
        raise IllegalStateError(f"Bug: the keyless subtask {subtask} of {uid!r} emitted records: {emitted[:3]}")
    return snapshot


def general_snapshot(node: Any, uid: str, subtask: int, parallelism: int, max_parallelism: int, header: str,
                     blob: bytes, checkpoint_id: int) -> Any:
    """A column fold state row of window ``node``'s subtask as the window operator's snapshot for checkpoint
    ``checkpoint_id`` (its metadata from the operator itself, opened for the subtask at the row's watermark)."""
    from engine.errors import IllegalStateError
    from engine.runtime.spark.column_fold import read_state_row, to_general
    from engine.windowing.variant import window_geometry

    state, watermark = read_state_row(header, blob)
    vectorized = getattr(node.function.aggregate_function, "vectorized", None)
    geometry = window_geometry(node.assigner)
    if vectorized is None or geometry is None:
        raise IllegalStateError(f"Bug: a column fold state row for window {uid!r}, which does not fold")
    template = _empty_snapshot(node, uid, subtask, parallelism, max_parallelism, checkpoint_id, watermark)
    return to_general(state, template, field=vectorized.field, size=geometry[0])


#: snapshot metadata a key group's snapshot has of its own, merged per subtask by :func:`write_state_files`
_PER_KEY_GROUP = frozenset({"state_rows", "state_kinds", "current_watermark", "key_group_range", "checkpoint_id",
                            "operator_id", "max_parallelism"})


def read_state_rows(uri: str, options: dict, uid: str, node_id: int, parallelism: int, max_parallelism: int,
                    watermark: int, checkpoint_id: int):
    """``mapInArrow`` over ``range(parallelism)``: task i reads its key groups' state rows from storage, one row per
    key group, and one more with a copy of the broadcast state when the operator has some."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow.compute as pc

        from checkpoints import load_snapshot
        from engine.operators.base import OPERATOR_SNAPSHOT_FORMAT_VERSION, MaterializedOperatorSnapshot
        from engine.operators.broadcast_process import BROADCAST_TABLE_PREFIX
        from engine.state.key_groups import key_group_range_for_operator

        for batch in batches:
            for subtask in batch.column(0).to_pylist():
                rng = key_group_range_for_operator(max_parallelism, parallelism, subtask)
                # the driver verified every file; this task's own files are verified again as they are read
                snapshot = load_snapshot(uri, verify_checksums=False, **options)
                tables = {_state_table(n): t for n, t in snapshot.state_tables(uid, rng).items()}
                broadcast = {n: _one_copy(tables.pop(n)) for n in list(tables) if n.startswith(BROADCAST_TABLE_PREFIX)}
                groups: set[int] = set()
                for t in tables.values():
                    groups.update(t.column("key_group").to_pylist())
                rows = RowBuffer()

                def add(kg_range: list[int], state: dict[str, pa.Table], **extra: Any) -> None:
                    metadata = {
                        "format_version": OPERATOR_SNAPSHOT_FORMAT_VERSION, "operator_id": uid,
                        "operator_class": "WindowOperator", "checkpoint_id": checkpoint_id,
                        "max_parallelism": max_parallelism, "key_group_range": kg_range,
                        "current_watermark": watermark, **extra,
                    }
                    header, blob = snapshot_to_row_parts(MaterializedOperatorSnapshot(metadata, state))
                    rows.add(DEST_STATE, kg=kg_range[0], split="", offset=-1, value=header, blob=blob,
                             tag=str(node_id))

                if broadcast:  # every new subtask gets one copy of the broadcast state (Flink's rule on rescale)
                    add([rng.start_key_group, rng.end_key_group], broadcast,
                        broadcast_states=sorted(n[len(BROADCAST_TABLE_PREFIX):] for n in broadcast))
                for kg in sorted(groups):
                    add([kg, kg], {n: t.filter(pc.equal(t.column("key_group"), kg)) for n, t in tables.items()})
                out = rows.take()
                if out is not None:
                    yield out

    return run
