"""State files: one Arrow table per file, as Parquet (default) or Arrow IPC, with size, rows and sha256.

Why a checksum of the encoded bytes and not of the rows: the file is what
travels and what can be truncated or tampered with; the handle in ``_metadata``
records ``bytes`` and ``sha256`` of exactly what was stored, and a reader checks
both before it parses anything (ARCHITECTURE section 5, STYLE section 9: restore
reads data only, and a tampered snapshot is refused with its reason).

Encoding is deterministic (same table, same bytes: Parquet without write
timestamps, IPC without compression dictionaries that vary), which is what lets
incremental checkpoints recognise an unchanged key group by its hash.
"""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from checkpoints.metadata import FILE_FORMATS, StateFileHandle
from engine.errors import CorruptSnapshotError, JobDefinitionError

EXTENSIONS = {"parquet": "parquet", "arrow": "arrow"}


@dataclass(frozen=True, slots=True)
class EncodedStateFile:
    """A table encoded for storage, before it has a path."""

    data: bytes
    sha256: str
    rows: int
    format: str

    @property
    def size(self) -> int:
        return len(self.data)


def encode_table(table: pa.Table, file_format: str = "parquet") -> EncodedStateFile:
    if file_format not in FILE_FORMATS:
        raise JobDefinitionError("file_format", file_format, f"must be one of {FILE_FORMATS}")
    if not isinstance(table, pa.Table):
        raise JobDefinitionError("table", type(table).__name__, "must be a pyarrow.Table")
    sink = io.BytesIO()
    if file_format == "parquet":
        pq.write_table(table, sink, compression="zstd", write_statistics=True)
    else:
        with ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
    data = sink.getvalue()
    return EncodedStateFile(data, hashlib.sha256(data).hexdigest(), table.num_rows, file_format)


def verify_bytes(data: bytes, handle: StateFileHandle, where: str) -> None:
    """Refuse bytes that are not what ``_metadata`` recorded; the message names the object and problem."""
    if len(data) != handle.bytes:
        problem = "truncated" if len(data) < handle.bytes else "longer than recorded"
        raise CorruptSnapshotError(
            f"state file {where} is {problem}: {len(data)} bytes, _metadata records {handle.bytes}"
        )
    digest = hashlib.sha256(data).hexdigest()
    if digest != handle.sha256:
        raise CorruptSnapshotError(
            f"state file {where} fails its checksum: sha256 {digest}, _metadata records {handle.sha256}"
        )


def decode_table(data: bytes, handle: StateFileHandle, where: str) -> pa.Table:
    """Verify and parse one state file; the row count must match the handle too."""
    verify_bytes(data, handle, where)
    try:
        if handle.format == "parquet":
            # One thread, no dataset scan: Arrow's thread pools can drop their last reference to the Python
            # buffer after the read returned, and one dropped while the interpreter exits kills the process
            # with SIGABRT (seen: a CLI restore refused by validation; apache/arrow#34314). Read so, nothing
            # holds the buffer once this returns.
            with pq.ParquetFile(pa.BufferReader(data)) as parquet_file:
                table = parquet_file.read(use_threads=False)
        else:
            table = ipc.open_file(pa.BufferReader(data)).read_all()
    except (pa.ArrowException, OSError) as exc:
        raise CorruptSnapshotError(f"state file {where} is not a readable {handle.format} file: {exc}") from exc
    if table.num_rows != handle.rows:
        raise CorruptSnapshotError(
            f"state file {where} has {table.num_rows} rows, _metadata records {handle.rows}"
        )
    return table
