"""File formats for event files: decoding rows with exact row offsets, encoding sink output.

Reading: a file is decoded once into *rows*, and a row's index is its offset,
so a reader created at row k resumes exactly there (seed 002).  A row that is
not a record (invalid JSON, a CSV row of the wrong width) becomes a
:class:`MalformedInput` at its offset instead of failing the job; blank lines are
rows that carry nothing.

- ``jsonl``: one row per physical line (``\\n``-separated); each non-blank line
  must be a JSON object.
- ``csv``: the first row is the header; each following CSV row (a quoted field
  may span lines) is one row; with ``infer_types`` (the default) each cell on its own becomes None
  (empty), an int (``-12``), a float (``0.5``, ``1e3``, ``.5``) or stays str — ``007`` stays text, as does
  anything with a leading zero before a digit; a column can hold both numbers and text.  Without
  ``infer_types`` every cell is a str (``read_files(..., infer_types=False)``).
- ``parquet``: one row per table row, read a row group at a time.
- ``text``: one row per line, the record being the line as a ``str`` without its line ending
  (PyFlink's ``StreamFormat.text_line_format()``); a line that is not UTF-8 is a MalformedInput.

Writing (sinks): dict values become rows; a tuple or list becomes
``{"f0": .., "f1": ..}`` for Parquet and a JSON array for JSON lines; a ``Row``
is written as the dict of its fields (as a tuple when it has no names); any
other value becomes ``{"value": v}`` for Parquet.
"""

from __future__ import annotations

import csv
import functools
import io
import json
import re
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from engine.elements import StreamRecord, TupleColumns
from engine.errors import JobDefinitionError
from engine.io.source import MalformedInput
from engine.row import Row

if TYPE_CHECKING:
    import pyarrow as pa

FORMATS = ("parquet", "jsonl", "csv", "text")
EXTENSIONS = {"parquet": "parquet", "jsonl": "jsonl", "csv": "csv", "text": "txt"}

#: CSV cells read as numbers (``infer_types``): an integer without leading zeros, or such an integer part (or
#: none) with a fraction and/or an exponent.  ``007``, ``0012.5`` stay text: a leading zero marks an identifier
#: (a zip code, an account number), and reading it as 7 would merge it with ``7``
_INT = re.compile(r"[+-]?(0|[1-9][0-9]*)")
_FLOAT = re.compile(r"[+-]?((0|[1-9][0-9]*)(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?")


def check_format(fmt: str, allowed: Sequence[str] = FORMATS) -> str:
    if fmt not in allowed:
        raise JobDefinitionError("format", fmt, f"must be one of {', '.join(repr(f) for f in allowed)}")
    return fmt


class RowFile:
    """A decoded file: ``len(rows)`` offsets; ``row(i)`` is a record dict, a MalformedInput, or None (blank)."""

    def __len__(self) -> int:
        raise NotImplementedError

    def rows(self, start: int, stop: int) -> tuple[list[dict], list[MalformedInput]]:
        raise NotImplementedError

    def arrow(self, start: int, stop: int) -> tuple[pa.RecordBatch, list[MalformedInput]]:
        import pyarrow as pa

        records, dead = self.rows(start, stop)
        return pa.RecordBatch.from_pylist(records), dead


class JsonLinesFile(RowFile):
    def __init__(self, data: bytes) -> None:
        self._lines = data.split(b"\n")
        if self._lines and self._lines[-1] == b"":
            self._lines.pop()  # the final newline ends the last line; it does not start a new one

    def __len__(self) -> int:
        return len(self._lines)

    def rows(self, start: int, stop: int) -> tuple[list[dict], list[MalformedInput]]:
        records: list[dict] = []
        dead: list[MalformedInput] = []
        for offset in range(start, stop):
            line = self._lines[offset]
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except (ValueError, UnicodeDecodeError) as exc:
                dead.append(MalformedInput(line.decode("utf-8", "replace"), f"invalid JSON: {exc}", offset))
                continue
            if not isinstance(value, dict):
                dead.append(MalformedInput(line.decode("utf-8", "replace"),
                                       f"expected a JSON object per line, got {type(value).__name__}", offset))
                continue
            records.append(value)
        return records, dead


class TextLinesFile(RowFile):
    """Lines as records (``str``): ``\\n`` ends a line, a ``\\r`` before it is dropped, as Java's line reader does."""

    def __init__(self, data: bytes) -> None:
        self._lines = data.split(b"\n")
        if self._lines and self._lines[-1] == b"":
            self._lines.pop()

    def __len__(self) -> int:
        return len(self._lines)

    def rows(self, start: int, stop: int) -> tuple[list, list[MalformedInput]]:  # type: ignore[override]
        records: list[str] = []
        dead: list[MalformedInput] = []
        for offset in range(start, stop):
            line = self._lines[offset]
            try:
                records.append(line.removesuffix(b"\r").decode("utf-8"))
            except UnicodeDecodeError as exc:
                dead.append(MalformedInput(line.decode("utf-8", "replace"), f"not UTF-8 text: {exc}", offset))
        return records, dead


class CsvFile(RowFile):
    def __init__(self, data: bytes, infer_types: bool = True) -> None:
        text = data.decode("utf-8-sig", "replace")
        consumed: list[str] = []

        def lines():
            for line in io.StringIO(text, newline=""):
                consumed.append(line)
                yield line

        self._infer = infer_types
        # one entry per CSV row after the header: (fields, raw text, error or None)
        self._rows: list[tuple[list[str], str, str | None]] = []
        self._header: list[str] | None = None
        try:
            for row in csv.reader(lines()):
                raw = "".join(consumed).rstrip("\r\n")
                consumed.clear()
                if self._header is None:
                    if row:
                        self._header = row
                    continue
                self._rows.append((row, raw, None))
        except csv.Error as exc:  # e.g. an unterminated quote swallowed the rest of the file: one dead letter
            self._rows.append(([], "".join(consumed), f"malformed CSV: {exc}"))

    def __len__(self) -> int:
        return len(self._rows)

    def rows(self, start: int, stop: int) -> tuple[list[dict], list[MalformedInput]]:
        records: list[dict] = []
        dead: list[MalformedInput] = []
        header = self._header or []
        for offset in range(start, stop):
            row, raw, error = self._rows[offset]
            if error is not None:
                dead.append(MalformedInput(raw, error, offset))
                continue
            if not row:
                continue  # a blank line
            if len(row) != len(header):
                dead.append(MalformedInput(raw, f"CSV row has {len(row)} fields, the header has {len(header)}", offset))
                continue
            if self._infer:
                records.append({name: _infer(cell) for name, cell in zip(header, row)})
            else:
                records.append(dict(zip(header, row)))
        return records, dead


#: decoded Parquet row groups a process keeps for the next reader of the same file (bytes), at most this many bytes
ROW_GROUP_CACHE_BYTES = 256 << 20
_row_groups: dict[tuple[bytes, int], pa.Table] = {}  # least recently used first
_row_groups_lock = threading.Lock()  # the local runtime reads splits in threads


def clear_row_group_cache() -> None:
    """Forget every decoded row group this process keeps (:class:`ParquetFile`)."""
    _row_groups.clear()


def row_group_cache_bytes() -> int:
    """The bytes of the decoded row groups this process keeps."""
    return sum(t.nbytes for t in _row_groups.values())


class ParquetFile(RowFile):
    """Rows of a Parquet file, a row group decoded at a time.

    Decoded groups are kept per process, least recently used dropped first beyond ``ROW_GROUP_CACHE_BYTES`` (the
    group read last is always kept),
    keyed by a 128-bit hash of the file's bytes and the group: a Spark source task reads one slice of a split
    per epoch through a fresh reader, and a group holds up to a million rows by pyarrow's default, so without
    the cache every epoch decoded the whole group again to take its slice (issue 16: 8 of the 15 s the column
    path's source tasks spent on 2M events over 20 epochs).  Only equal bytes share a group.
    """

    def __init__(self, data: bytes) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq
        import xxhash

        self._file = pq.ParquetFile(pa.BufferReader(data))
        self._digest = xxhash.xxh3_128_digest(data) + len(data).to_bytes(8, "little")
        self._starts = [0]
        for i in range(self._file.num_row_groups):
            self._starts.append(self._starts[-1] + self._file.metadata.row_group(i).num_rows)

    def __len__(self) -> int:
        return self._starts[-1]

    def _group(self, i: int) -> pa.Table:
        key = (self._digest, i)
        with _row_groups_lock:
            table = _row_groups.pop(key, None)
            if table is not None:
                _row_groups[key] = table  # the most recently used last
                return table
        table = self._file.read_row_group(i)
        with _row_groups_lock:
            budget = ROW_GROUP_CACHE_BYTES - table.nbytes
            while _row_groups and row_group_cache_bytes() > budget:
                del _row_groups[next(iter(_row_groups))]
            _row_groups[key] = table
        return table

    def _slice(self, start: int, stop: int) -> pa.Table:
        import bisect

        import pyarrow as pa

        pieces = []
        pos = start
        while pos < stop:
            g = bisect.bisect_right(self._starts, pos) - 1
            group_start, group_stop = self._starts[g], self._starts[g + 1]
            take = min(stop, group_stop) - pos
            pieces.append(self._group(g).slice(pos - group_start, take))
            pos += take
        if not pieces:
            return self._file.schema_arrow.empty_table()
        return pa.concat_tables(pieces) if len(pieces) > 1 else pieces[0]

    def rows(self, start: int, stop: int) -> tuple[list[dict], list[MalformedInput]]:
        return table_to_pylist(self._slice(start, stop)), []

    def arrow(self, start: int, stop: int) -> tuple[pa.RecordBatch, list[MalformedInput]]:
        table = self._slice(start, stop).combine_chunks()
        batches = table.to_batches()
        if not batches:
            import pyarrow as pa

            return pa.RecordBatch.from_pylist([], schema=table.schema), []
        return batches[0], []


_TIMEDELTA_UNITS = {"s": "seconds", "ms": "milliseconds", "us": "microseconds"}
_UTC_NAMES = (None, "UTC", "Etc/UTC")


def _timestamps_to_pylist(column: Any) -> list | None:
    """``column.to_pylist()`` of a UTC or naive timestamp column without nulls, or None (not handled).

    pyarrow builds each tz-aware datetime through its time zone, several microseconds a value;
    ``epoch + timedelta`` gives the same value (UTC and naive time have no transitions) with the
    very tzinfo object pyarrow attaches, which the first and last values are checked against.
    """
    import datetime as dt

    import pyarrow as pa

    unit = getattr(column.type, "unit", None)
    if column.null_count or unit not in _TIMEDELTA_UNITS or column.type.tz not in _UTC_NAMES or not len(column):
        return None
    first, last = column[0].as_py(), column[len(column) - 1].as_py()
    if type(first) is not dt.datetime:
        return None
    epoch = dt.datetime(1970, 1, 1, tzinfo=first.tzinfo)
    step = dt.timedelta(**{_TIMEDELTA_UNITS[unit]: 1})
    ints = column.cast(pa.int64()).to_pylist()
    values = [epoch + step * i for i in ints]
    for got, want in ((values[0], first), (values[-1], last)):
        if got != want or got.tzinfo is not want.tzinfo or type(got) is not type(want):
            return None
    return values


class ArrowRows:
    """Window results that are dicts, kept as one Arrow table of their fields (a column fold's fired windows,
    engine/runtime/spark/column_fold.py), with one timestamp each (an Arrow array, read only by ``records()``).

    An output that can take them (a Spark task staging a Parquet part) writes the table; ``values()`` and
    ``records()`` give the dicts the row-wise path would have emitted (:func:`table_to_pylist`).
    """

    __slots__ = ("table", "timestamps")

    def __init__(self, table: Any, timestamps: Any) -> None:
        self.table = table
        self.timestamps = timestamps

    def __len__(self) -> int:
        return self.table.num_rows

    def values(self) -> list[dict]:
        return table_to_pylist(self.table)

    def records(self) -> list[StreamRecord]:
        return [StreamRecord(v, ts) for v, ts in zip(self.values(), self.timestamps.to_pylist())]


def _ns_to_us(column: Any) -> Any:
    """A nanosecond timestamp column floored to microseconds, as Python's datetime arithmetic floors: pyarrow's
    unsafe cast truncates toward zero, which moves 1969-12-31 23:59:59.999999999 to 1970-01-01.  Not
    ``pc.floor_temporal(column, unit="microsecond")``: on a column with a zone that has summer time (Europe/Berlin)
    it floors the local time and fails on the hour a clock change repeats ("Local time is ambiguous"), where
    flooring the instant is exact in every zone (checked with pyarrow 26)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    ns = column.cast(pa.int64())
    us = pc.divide(ns, 1000)  # integer division truncates toward zero
    us = pc.subtract(us, pc.cast(pc.less(pc.subtract(ns, pc.multiply(us, 1000)), 0), pa.int64()))
    return us.cast(pa.timestamp("us", column.type.tz))


def table_to_pylist(table: Any) -> list[dict]:
    """``table.to_pylist()``, the same dicts, with UTC/naive timestamp columns converted faster, and a nanosecond
    timestamp as the ``datetime`` it is to the microsecond (the nanoseconds cut, as the state codec stores it)
    instead of the ``pandas.Timestamp`` pyarrow gives: on Spark such a value reached the window as a datetime
    once it crossed between stages, locally it stayed a Timestamp, and a restore changed it."""
    import pyarrow as pa

    names = table.column_names
    if any(pa.types.is_timestamp(t) and t.unit == "ns" for t in table.schema.types):
        table = pa.table([_ns_to_us(c) if pa.types.is_timestamp(c.type) and c.type.unit == "ns" else c
                          for c in table.columns], names=names)
    if not table.num_rows or len(set(names)) != len(names):
        return table.to_pylist()
    columns = []
    converted = False
    for column in table.columns:
        values = _timestamps_to_pylist(column.combine_chunks()) if pa.types.is_timestamp(column.type) else None
        converted = converted or values is not None
        columns.append(column if values is None else values)
    if not converted:
        return table.to_pylist()
    columns = [c if type(c) is list else c.to_pylist() for c in columns]
    return _dict_rows(len(names))(names, columns)


@functools.lru_cache(maxsize=64)
def _dict_rows(width: int) -> Any:
    """``lambda names, columns: [dict(zip(names, row)) for row in zip(*columns)]`` for ``width`` columns,
    written as a dict display (about twice as fast as ``dict(zip(...))`` per row).

    Only the arity is generated code: the names arrive as arguments, so no file content is ever
    compiled.
    """
    names = ", ".join(f"n{i}" for i in range(width))
    values = ", ".join(f"v{i}" for i in range(width))
    pairs = ", ".join(f"n{i}: v{i}" for i in range(width))
    source = (f"def rows(names, columns):\n    {names}, = names\n"
              f"    return [{{{pairs}}} for {values}, in zip(*columns)]\n")
    scope: dict[str, Any] = {}
    exec(compile(source, f"<dict rows of {width}>", "exec"), scope)  # noqa: S102 - arity only, see above
    return scope["rows"]


class UnreadableFile(RowFile):
    """A file that cannot be decoded at all: one row, a dead letter, so the job goes on and replay skips it too."""

    def __init__(self, data: bytes, error: str) -> None:
        self._raw = data[:200].decode("utf-8", "replace")
        self._error = error

    def __len__(self) -> int:
        return 1

    def rows(self, start: int, stop: int) -> tuple[list[dict], list[MalformedInput]]:
        return [], [MalformedInput(self._raw, self._error, 0)] if start <= 0 < stop else []


def decode(fmt: str, data: bytes, *, infer_types: bool = True) -> RowFile:
    if fmt == "jsonl":
        return JsonLinesFile(data)
    if fmt == "csv":
        return CsvFile(data, infer_types)
    if fmt == "text":
        return TextLinesFile(data)
    if fmt == "parquet":
        import pyarrow as pa

        try:
            return ParquetFile(data)
        except (pa.ArrowException, OSError) as exc:
            return UnreadableFile(data, f"not a readable Parquet file: {exc}")
    raise JobDefinitionError("format", fmt, f"must be one of {FORMATS}")


def _infer(cell: str) -> Any:
    if cell == "":
        return None
    if _INT.fullmatch(cell):
        return int(cell)
    if _FLOAT.fullmatch(cell):
        return float(cell)
    return cell


# -- writing -----------------------------------------------------------------------------------


def _as_row(value: Any) -> dict:
    if isinstance(value, Row):
        value = _plain_row(value)
    if isinstance(value, dict):
        return value
    if isinstance(value, (tuple, list)):
        return {f"f{i}": v for i, v in enumerate(value)}
    return {"value": value}


def _tuples_table(values: Sequence[Any]) -> Any:
    """``Table.from_pylist([_as_row(v) ...])`` built column-wise when every value is a tuple of one
    length (the usual window result), else None.  ``from_pylist`` takes the names of the first row
    and one ``pa.array`` per name, which is what this does without a dict per row.
    """
    columns = _chunk_columns([values])
    return None if columns is None else _columns_table(columns)


def _columns_table(columns: list[list]) -> Any:
    import pyarrow as pa

    return pa.Table.from_arrays([pa.array(c) for c in columns], names=[f"f{i}" for i in range(len(columns))])


def _parquet_bytes(table: Any) -> bytes:
    import pyarrow.parquet as pq

    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


def _chunk_columns(chunks: Sequence[Any]) -> list[list] | None:
    """The columns of the chunks' values when every value is a tuple of one width, else None.

    A chunk is a list of values or an engine/elements.py ``TupleColumns``.  No values at all is
    None; tuples of width 0 give no columns (an empty-column table, as before).
    """
    width: int | None = None
    parts: list[list] = []
    for chunk in chunks:
        if type(chunk) is ArrowRows:
            return None
        if type(chunk) is TupleColumns:
            if not len(chunk):
                continue
            columns = chunk.columns
        else:
            if not chunk:
                continue
            first = chunk[0]
            if type(first) is not tuple:
                return None
            w = len(first)
            for v in chunk:
                if type(v) is not tuple or len(v) != w:
                    return None
            columns = [list(c) for c in zip(*chunk)] if w else []
        if width is None:
            width = len(columns)
        elif len(columns) != width:
            return None
        parts.append(columns)
    if width is None:
        return None
    if len(parts) == 1:
        return parts[0]
    return [[v for part in parts for v in part[j]] for j in range(width)]


def encode_chunks(fmt: str, chunks: Sequence[Any], text_of: Callable[[Any], str] | None = None) -> bytes:
    """``encode(fmt, values, text_of)`` of the values of ``chunks`` in order, the same bytes.

    A chunk is a list of values, an engine/elements.py ``TupleColumns`` or an :class:`ArrowRows`; Parquet is written from
    the columns directly when every value is a tuple of one width (what ``encode`` would do with
    the tuples), without building the tuples first, or from the tables when every chunk is ``ArrowRows``.
    """
    if fmt == "parquet":
        table = _arrow_rows_table(chunks)
        if table is not None:
            return _parquet_bytes(table)
        columns = _chunk_columns(chunks)
        if columns is not None:
            return _parquet_bytes(_columns_table(columns))
    values: list[Any] = []
    for chunk in chunks:
        values.extend(chunk.values() if type(chunk) in (TupleColumns, ArrowRows) else chunk)
    return encode(fmt, values, text_of)


def _arrow_rows_table(chunks: Sequence[Any]) -> Any:
    """The table ``encode("parquet", values)`` writes for chunks that are all :class:`ArrowRows`, or
    None: their tables, cast to the types ``pa.Table.from_pylist`` gives their dicts (a timestamp in ms becomes
    the microseconds of a ``datetime``, an int32 an int64...), so the part's bytes are the same."""
    import pyarrow as pa

    tables = [c.table for c in chunks if len(c)] if all(type(c) is ArrowRows for c in chunks) else []
    if not tables:
        return None
    try:
        table = pa.concat_tables(tables)
        inferred = pa.Table.from_pylist(table_to_pylist(table.slice(0, 1))).schema
        if inferred.names != table.schema.names:
            return None
        return table.cast(inferred)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        return None


def _plain_row(row: Row) -> Any:
    """A Row as a struct is written: its fields by name, or a list for a row without names; rows nested in it,
    also in its lists and dicts, alike."""
    def plain(v: Any) -> Any:
        if isinstance(v, Row):
            return _plain_row(v)
        if isinstance(v, list):
            return [plain(x) for x in v]
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        return v

    values = [plain(v) for v in row]
    names = row.get_field_names()
    return values if names is None else dict(zip(names, values))


def _json_default(value: Any) -> Any:
    """What JSON lacks, written the way Spark's JSON writer does: dates and times as ISO 8601 text,
    decimals as exact text (a float would round them), durations as seconds, bytes as base64, a ``Row`` as
    the object of its fields (an array when it has no names)."""
    import base64
    import datetime as dt
    import decimal

    if isinstance(value, Row):
        return _plain_row(value)
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode("ascii")
    raise TypeError(f"a JSON lines file cannot hold {type(value).__module__}.{type(value).__qualname__} "
                    f"({value!r:.60}); map it to a str, number, list or dict before the sink")


def encode(fmt: str, values: Sequence[Any], text_of: Callable[[Any], str] | None = None) -> bytes:
    """Bytes of one output file holding ``values`` in order.  ``text_of``: a ``text`` file's line for a value (the
    stream's declared type's Java ``toString``, engine/api/typeinfo.py), else a string is written as it is and
    anything else as Python's ``str``."""
    if fmt == "jsonl":
        return "".join(json.dumps(v, ensure_ascii=False, separators=(",", ":"), allow_nan=True, default=_json_default)
                       + "\n" for v in values).encode("utf-8")
    if fmt == "parquet":
        import pyarrow as pa

        table = _tuples_table(values)
        if table is None:
            table = pa.Table.from_pylist([_as_row(v) for v in values])
        return _parquet_bytes(table)
    if fmt == "text":  # Flink's SimpleStringEncoder: each record's string, then a newline
        if text_of is not None:
            return "".join(text_of(v) + "\n" for v in values).encode("utf-8")
        return "".join((v if isinstance(v, str) else str(v)) + "\n" for v in values).encode("utf-8")
    raise JobDefinitionError("format", fmt, "must be 'parquet', 'jsonl' or 'text' for a file sink")
