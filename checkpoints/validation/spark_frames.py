"""The validation frames as Spark DataFrames, derived inside Spark tasks (issue 6: large state).

Each task gets a list of state files (plain JSON: the :class:`FileTask`, the
file's handle and its store key), reads them through the snapshot's object
store (``file://`` or ``s3://`` via boto3 from the executor, ARCHITECTURE
section 8: no Hadoop S3 connector here), verifies size, checksum and row count
(:func:`checkpoints.state_files.decode_table`) and yields the frames of
:func:`checkpoints.validation.frames.derive_file`: the same code as the pandas
path, so both give the same verdict.  Nothing is collected to the driver but
the per-file layout rows.
"""

from __future__ import annotations

import json
from typing import Any, Iterator

import pyarrow as pa

from checkpoints.restore import Snapshot
from checkpoints.validation import frames as F
from checkpoints.validation.suite_builder import FILES, SOURCE_OFFSETS, SuitePlan

_SPARK_TYPES = {pa.int64(): "bigint", pa.float64(): "double", pa.string(): "string"}


def spark_schema(schema: pa.Schema) -> str:
    return ", ".join(f"`{f.name}` {_SPARK_TYPES[f.type]}" for f in schema)


def _file_rows(snap: Snapshot, tasks: list[F.FileTask]) -> list[tuple[int, str, str, str]]:
    handles = {(uid, h.path): h for uid, _, h in snap.metadata.files()}
    rows = []
    for task in tasks:
        handle = handles[(task.operator_uid, task.path)]
        rows.append((task.file_index, task.to_json(), json.dumps(handle.to_dict()), snap.file_key(handle)))
    return rows


def _reader(store: Any, kind: str | None) -> Any:
    """The mapInArrow function: per input row (one file) yield that file's frame of ``kind``
    (None: one layout row ``(file_index, column_types)``)."""

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from checkpoints.metadata import StateFileHandle as Handle
        from checkpoints.state_files import decode_table
        from checkpoints._documents import Fields

        for batch in batches:
            columns = batch.to_pydict()
            for index, task_json, handle_json, key in zip(
                    columns["file_index"], columns["task"], columns["handle"], columns["key"]):
                task = F.FileTask.from_json(task_json)
                handle = Handle.from_dict(Fields(json.loads(handle_json), f"state file {key}"))
                table = decode_table(store.get_bytes(key), handle, store.key_uri(key))
                if kind is None:
                    yield pa.RecordBatch.from_pydict(
                        {"file_index": [index], "column_types": [F.column_types(table)]},
                        schema=pa.schema([("file_index", pa.int64()), ("column_types", pa.string())]))
                    continue
                frame = F.derive_file(task, table).get(kind)
                if frame is not None and frame.num_rows:
                    yield from frame.to_batches()

    return read


def spark_frames(spark: Any, snap: Snapshot, plan: SuitePlan, tasks: list[F.FileTask]) -> dict[str, tuple[str, Any]]:
    """``{asset: ("spark", DataFrame) | ("pandas", DataFrame)}``: state, timers and sessions on Spark,
    the small per-file layout frame collected to pandas."""
    from checkpoints.validation.runner import _file_row, asset_of, files_frame

    rows = _file_rows(snap, tasks)
    by_task = {t.file_index: t for t in tasks}
    schema = "file_index bigint, task string, handle string, key string"
    out: dict[str, tuple[str, Any]] = {}
    for name, suite in plan.assets.items():
        if suite.kind in (FILES, SOURCE_OFFSETS):
            continue
        mine = [r for r in rows if suite.kind in by_task[r[0]].frame_kinds() and asset_of(by_task[r[0]], suite.kind) == name]
        files = spark.createDataFrame(mine or [], schema).repartition(max(1, min(len(mine), _parallelism(spark))))
        # cached: GX computes each expectation's metrics in its own Spark job; the files are read once
        frame = files.mapInArrow(_reader(snap.store, suite.kind), spark_schema(F.COLUMNS[suite.kind])).cache()
        out[name] = ("spark", frame)
    if any(s.kind == FILES for s in plan.assets.values()):
        files = spark.createDataFrame(rows or [], schema).repartition(max(1, min(len(rows), _parallelism(spark))))
        layout = files.mapInArrow(_reader(snap.store, None), "file_index bigint, column_types string").collect()
        types = {r["file_index"]: r["column_types"] for r in layout}
        from checkpoints.validation.suite_builder import FILES_ASSET

        out[FILES_ASSET] = ("pandas", files_frame([_file_row(t, types.get(t.file_index, "")) for t in tasks]))
    return out


def _parallelism(spark: Any) -> int:
    try:
        return max(1, int(spark.sparkContext.defaultParallelism))
    except Exception:  # Spark Connect has no SparkContext
        return 2

