"""The one row shape every Spark stage of an epoch reads and writes, and keyed state as rows.

Why one shape: an epoch is a short chain of Spark stages (the source stage, then one stage
per window vertex); their outputs are unioned and filtered by destination, so every stage
speaks the same schema.  ``_dest`` says where a row goes:

* ``>= 0``  a record for the window vertex with that id (``_key`` set, ``_kg`` computed in SQL);
* :data:`DEST_STATE` keyed state of one key group, or of one subtask, of a window vertex (``_tag`` = vertex id,
  ``_value`` = the operator snapshot's metadata JSON, ``_blob`` = its Arrow tables; or a column fold's state,
  engine/runtime/spark/column_fold.py ``state_row``);
* :data:`DEST_BROADCAST` a broadcast-side record of a broadcast process vertex (``_tag`` = vertex id): the job
  master copies it to every subtask of the vertex (``_kg`` = the subtask's first key group);
* :data:`DEST_DRIVER` a record for a sink or collect target on the driver (``_tag`` = node id);
* :data:`DEST_DEAD_LETTER` a dead letter (``_value`` = JSON ``{value, error, stage}``);
* :data:`DEST_SPLIT` the end-of-slice report of one source split (``_value`` = JSON);
* :data:`DEST_METRICS` a task's counters (``_value`` = JSON);
* :data:`DEST_STAGED` a sink part a task staged itself (``_tag`` = sink node id, ``_value`` = JSON
  ``{key, records}``; engine/runtime/spark/staged_sinks.py);
* :data:`DEST_COLUMNS` a reading task's partials for one subtask of a column fold window (``_tag`` = vertex id,
  ``_kg`` = the subtask's first key group, ``_blob`` = Arrow IPC; engine/runtime/spark/column_fold.py);
* :data:`DEST_OPERATOR_COUNTS` records a task handed to each consumer (``_value`` = JSON ``{subtask, in,
  edges: [[producer node, tag, consumer node, count], ...]}``; engine/runtime/operator_metrics.py);
* :data:`DEST_STATE_ACK` a keyed subtask's acknowledgement of the checkpoint whose barrier ends the epoch, after it
  wrote its state files itself (``_tag`` = vertex id, ``_value`` = JSON ``{checkpoint_id, ack, write_ms}`` or
  ``{checkpoint_id, subtask, operator, error}``; engine/runtime/spark/checkpointing.py "Window tasks write their state").

A record row for a window whose aggregate Spark SQL pre-aggregates (engine/runtime/spark/preaggregation.py)
also carries ``_num``, the aggregated field as a long; ``_value`` is then only set on the first record
of its (key, pane) in its task, the only one whose other fields can reach a result.

Values travel as codec JSON (engine/state/codec.py), never pickle: a spilled shuffle or a
state row holds data only (ARCHITECTURE section 5).  State tables travel as Arrow IPC.  Records,
which cross a stage once and are never persisted, are written by :func:`encode_record`: the
codec's text for any value, written and read by msgspec (C) when it is a flat tuple of plain
scalars — the usual record, and the shape Python's own JSON module handles slowest.
"""

from __future__ import annotations

import json
from typing import Any, Union

import msgspec
import pyarrow as pa

from engine.errors import CorruptSnapshotError
from engine.operators.base import MaterializedOperatorSnapshot
from engine.state import codec

DEST_STATE = -1
DEST_DRIVER = -2
DEST_DEAD_LETTER = -3
DEST_SPLIT = -4
DEST_METRICS = -5
DEST_STAGED = -6
DEST_OPERATOR_COUNTS = -7
DEST_BROADCAST = -8
DEST_COLUMNS = -9
DEST_STATE_ACK = -10

ROW_SCHEMA = pa.schema([
    pa.field("_dest", pa.int32()),
    pa.field("_kg", pa.int32()),
    pa.field("_split", pa.string()),
    pa.field("_offset", pa.int64()),
    pa.field("_ts", pa.int64()),
    pa.field("_key", pa.string()),
    pa.field("_value", pa.string()),
    pa.field("_blob", pa.binary()),
    pa.field("_tag", pa.string()),
    pa.field("_num", pa.int64()),
])
ROW_DDL = ("_dest int, _kg int, _split string, _offset long, _ts long, _key string, _value string, "
           "_blob binary, _tag string, _num long")
COLUMNS = tuple(ROW_SCHEMA.names)

#: state rows sort before every record of their key group (their channel name is the smallest string)
STATE_CHANNEL = ""


class RowBuffer:
    """Collects rows column-wise inside a task and hands them out as Arrow batches."""

    __slots__ = ("_cols",)

    def __init__(self) -> None:
        self._cols: dict[str, list[Any]] = {c: [] for c in COLUMNS}

    def add(self, dest: int, *, kg: int | None = None, split: str | None = None, offset: int | None = None,
            ts: int | None = None, key: str | None = None, value: str | None = None, blob: bytes | None = None,
            tag: str | None = None, num: int | None = None) -> None:
        c = self._cols
        c["_dest"].append(dest)
        c["_kg"].append(kg)
        c["_split"].append(split)
        c["_offset"].append(offset)
        c["_ts"].append(ts)
        c["_key"].append(key)
        c["_value"].append(value)
        c["_blob"].append(blob)
        c["_tag"].append(tag)
        c["_num"].append(num)

    def extend(self, n: int, dest: int, *, split: str | None = None, offset: Any = None, ts: Any = None,
               key: Any = None, value: Any = None, num: Any = None, tag: str | None = None) -> None:
        """``n`` rows at once for one destination: ``split`` and ``tag`` are shared, the others are sequences of
        ``n``."""
        c = self._cols
        c["_dest"].extend([dest] * n)
        c["_kg"].extend([None] * n)
        c["_split"].extend([split] * n)
        c["_blob"].extend([None] * n)
        c["_tag"].extend([tag] * n)
        for name, column in (("_offset", offset), ("_ts", ts), ("_key", key), ("_value", value), ("_num", num)):
            if column is None:
                c[name].extend([None] * n)
            else:
                if len(column) != n:
                    raise ValueError(f"Bug: column {name} holds {len(column)} values for {n} rows")
                c[name].extend(column)

    def __len__(self) -> int:
        return len(self._cols["_dest"])

    def take(self) -> pa.RecordBatch | None:
        if not len(self):
            return None
        batch = pa.RecordBatch.from_pydict(self._cols, schema=ROW_SCHEMA)
        self._cols = {c: [] for c in COLUMNS}
        return batch


# ---- keyed state as a row ----------------------------------------------------------------------------------


def ipc_bytes(table: pa.Table) -> bytes:
    """``table`` as one Arrow IPC stream (what a state row's or a column fold's blob holds)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def ipc_table(blob: Any) -> pa.Table:
    """The table of one Arrow IPC stream (:func:`ipc_bytes`)."""
    return pa.ipc.open_stream(pa.py_buffer(blob)).read_all()


def snapshot_to_row_parts(snapshot: MaterializedOperatorSnapshot) -> tuple[str, bytes]:
    """(metadata JSON, blob): each table as an Arrow IPC stream, lengths recorded in the metadata."""
    names = sorted(snapshot.tables)
    chunks = [ipc_bytes(snapshot.tables[name]) for name in names]
    header = {"metadata": snapshot.metadata, "tables": names, "sizes": [len(c) for c in chunks]}
    return json.dumps(header, sort_keys=True, separators=(",", ":")), b"".join(chunks)


def snapshot_from_row_parts(header_json: str, blob: bytes) -> MaterializedOperatorSnapshot:
    try:
        header = json.loads(header_json)
        names, sizes = header["tables"], header["sizes"]
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptSnapshotError(f"state row header is malformed ({exc!r})") from exc
    if sum(sizes) != len(blob):
        raise CorruptSnapshotError(f"state row holds {len(blob)} bytes, its header announces {sum(sizes)}")
    tables: dict[str, pa.Table] = {}
    pos = 0
    for name, size in zip(names, sizes):
        tables[name] = ipc_table(blob[pos:pos + size])
        pos += size
    return MaterializedOperatorSnapshot.from_parts(json.dumps(header["metadata"]), tables)


def is_empty_snapshot(snapshot: MaterializedOperatorSnapshot) -> bool:
    return all(t.num_rows == 0 for t in snapshot.tables.values())


# ---- record values, many at a time ---------------------------------------------------------------------

_Scalar = Union[str, int, float, bool, None]


class _FlatTuple(msgspec.Struct, forbid_unknown_fields=True):
    """The codec's form of a flat tuple, ``{"$t": [scalars]}``: anything else fails to decode as one."""

    items: tuple[_Scalar, ...] = msgspec.field(name="$t")


_FLAT_TUPLES = msgspec.json.Decoder(list[_FlatTuple])
_RECORD_ENCODER = msgspec.json.Encoder()


def encode_record(value: Any) -> str:
    """Text of a record crossing a Spark stage: ``codec.encode(value)``'s value, not always its bytes.

    A flat tuple of exact ``str``/``int``/``bool``/``None``/finite ``float`` is written by msgspec as
    ``{"$t": [...]}``; it differs from the codec's text only where JSON allows (non-ASCII characters
    unescaped, float spelling), so :func:`engine.state.codec.decode` and :func:`decode_values` give
    the same tuple.  Anything else is the codec's text.  Only for records in flight: state and
    anything persisted keep the codec's canonical text.
    """
    if type(value) is tuple and codec.all_plain(value):
        try:
            return _RECORD_ENCODER.encode({"$t": value}).decode()
        except (msgspec.EncodeError, UnicodeError, ValueError, OverflowError):
            pass  # e.g. a lone surrogate in a string: the codec escapes it
    return codec.encode(value)


def decode_values(texts: list[str | None]) -> list[Any]:
    """``[codec.decode(t) for t in texts]`` (None stays None) with one JSON parse for the whole list.

    A list of flat tuples is read by msgspec in one call; otherwise the joined list is parsed once
    (:func:`engine.state.codec.parse_json`) and each item rebuilt by
    :func:`engine.state.codec.from_jsonable`, so the result is always the codec's.
    """
    if not texts:
        return []
    if any(t is None for t in texts):
        return [None if t is None else decode_values([t])[0] for t in texts]
    joined = "[" + ",".join(texts) + "]"
    try:
        return [t.items for t in _FLAT_TUPLES.decode(joined)]
    except msgspec.MsgspecError:
        pass  # not all flat tuples (or text msgspec refuses, e.g. an escaped lone surrogate)
    return [codec.from_jsonable(x) for x in codec.parse_json(joined)]
