"""``env.read_files(path, format)``: a folder of event files, one split per file (ARCHITECTURE section 2).

A split is a file, its ``split_id`` the file name, its offset the row index in
the file (see :mod:`engine.io.formats` for what a row is per format), so Sn is
"file + row" and recovery re-reads from that row (seed 002).  Files are taken in
name order, from the folder itself (not sub-folders), skipping names that start
with ``_`` or ``.`` (staging folders, markers).

Files must land atomically and never change afterwards: S3 puts are atomic;
locally, write to a hidden name and rename.  A reader decodes its file once.

``continuous=True`` (or a ``monitor_interval_ms``) makes the source unbounded, Flink's
``FileSource.monitorContinuously``: a running job lists the folder again every
``monitor_interval_ms`` (default 1 s) and reads each file that appeared, once.  Which files were
read, and how far, is the source position in every checkpoint (a finished file is recorded at its
end), so a restore reads exactly the files and rows the checkpoint had not, plus every file that
landed since.  A file read to its end is released; its offset stays.  A continuous source over a
folder that does not exist yet has no splits; a bounded one refuses it.  An ``s3://bucket/prefix`` is
monitored the same way (a ListObjectsV2 listing of the prefix per interval; objects directly under it); the
source sent to a Spark task carries the S3 endpoint and region its driver resolved (``__getstate__``).
How a finished file's watermark counts, and when a subtask with nothing to read is idle, is the source
stage's rule (engine/operators/timestamps_watermarks.py, ``monitored=True``).

After a restore neither runtime fetches a file the checkpoint had read to its end (no GET on S3): the Spark
runtime keeps a finished flag per split, the local runtime knows them as the saved positions its restored
watermark stage no longer holds (engine/runtime/local/subtask_builder.py).

``path`` may also name one local file (PyFlink's ``FileSource`` takes files and folders): the source then
reads that file alone, as a folder holding only it.  ``FileSource.for_record_stream_format(
StreamFormat.text_line_format(), path)...build()`` is PyFlink's way to build the source (lines as ``str``).

Partial: the positions of finished files stay in every snapshot for the life of the job (Flink keeps
the processed paths in its enumerator state the same way); a folder of very many small files makes
snapshots grow with it.  A bounded (not monitored) file source still decodes every file when restored,
finished ones included.
"""

from __future__ import annotations

from typing import Any

from engine.durations import positive_millis
from engine.errors import JobDefinitionError
from engine.io.formats import FORMATS, RowFile, check_format, decode
from engine.io.source import (
    ArrowReadBatch,
    ReadBatch,
    Source,
    SourceSplit,
    SplitReader,
    check_int_offset,
    check_max_records,
)
from engine.io.storage import check_folder_uri, is_visible_name, open_folder, options_for_another_process


#: how often a continuous file source lists its folder when no interval is given
DEFAULT_MONITOR_INTERVAL_MS = 1000


def _local_file(path: str) -> Any:
    """``path`` as a local file's Path when it names an existing file, else None (a folder, an s3:// prefix)."""
    from pathlib import Path

    if path.startswith("s3://"):
        return None
    local = Path(path.removeprefix("file://"))
    return local if local.is_file() else None


class StreamFormat:
    """PyFlink's record formats for ``FileSource.for_record_stream_format`` (``text_line_format`` only)."""

    def __init__(self, format: str) -> None:  # noqa: A002 - the engine's format name
        self.format = format

    @staticmethod
    def text_line_format(charset_name: str = "UTF-8") -> StreamFormat:
        if charset_name.replace("-", "").upper() != "UTF8":
            raise JobDefinitionError("charset_name", charset_name, "must be UTF-8: the text format reads UTF-8 lines")
        return StreamFormat("text")


class FileSourceBuilder:
    """``FileSource.for_record_stream_format(fmt, path)[.monitor_continuously(d) | .process_static_file_set()]
    .build()`` (PyFlink's builder)."""

    def __init__(self, format: str, path: str) -> None:  # noqa: A002
        self._format, self._path, self._interval_ms = format, path, None

    def monitor_continuously(self, discovery_interval: Any) -> FileSourceBuilder:
        """List the folder again every ``discovery_interval`` (a Duration, Time, timedelta or int of ms, > 0)."""
        self._interval_ms = positive_millis(discovery_interval, "discovery_interval")
        return self

    def process_static_file_set(self) -> FileSourceBuilder:
        self._interval_ms = None
        return self

    def build(self) -> FileSource:
        return FileSource(self._path, format=self._format, monitor_interval_ms=self._interval_ms)


class FileSource(Source):
    """Event files under ``path`` (local folder, ``file:///`` or ``s3://bucket/prefix``) in ``format``."""

    def __init__(
        self,
        path: str,
        format: str = "parquet",  # noqa: A002 - PyFlink's and the contract's name
        *,
        continuous: bool = False,
        monitor_interval_ms: int | None = None,
        infer_types: bool = True,
        storage_options: dict[str, Any] | None = None,
    ) -> None:
        self.path = check_folder_uri("path", path)
        #: the one file read when ``path`` names a local file (then ``path`` becomes its folder)
        self.only_file: str | None = None
        single = _local_file(self.path)
        if single is not None:
            self.path, self.only_file = str(single.parent), single.name
        self.format = check_format(format, FORMATS)
        if monitor_interval_ms is not None and (type(monitor_interval_ms) is not int or monitor_interval_ms <= 0):
            raise JobDefinitionError("monitor_interval", monitor_interval_ms, "must be a positive number of ms",
                                     "e.g. Duration.of_seconds(1), or leave it out to read the folder once")
        self.continuous = bool(continuous) or monitor_interval_ms is not None
        self.monitor_interval_ms = (monitor_interval_ms or DEFAULT_MONITOR_INTERVAL_MS) if self.continuous else None
        self.infer_types = bool(infer_types)
        self.storage_options = dict(storage_options or {})
        self._store = None

    @staticmethod
    def for_record_stream_format(stream_format: StreamFormat, *paths: str) -> FileSourceBuilder:
        """PyFlink's builder: ``FileSource.for_record_stream_format(StreamFormat.text_line_format(), path)``."""
        if not isinstance(stream_format, StreamFormat):
            raise JobDefinitionError("stream_format", stream_format, "must be a StreamFormat",
                                     "StreamFormat.text_line_format()")
        if len(paths) != 1:
            raise JobDefinitionError("paths", list(paths), "must be exactly one folder, s3:// prefix or local file",
                                     "Union two sources to read two folders")
        return FileSourceBuilder(stream_format.format, paths[0])

    def _folder(self):
        if self._store is None:
            self._store = open_folder(self.path, self.storage_options)
        return self._store

    def __getstate__(self) -> dict:
        """Shipped to a Spark task: the store is re-opened there, with the S3 endpoint and region this process
        resolved (an executor's environment may not name them; credentials come from its own chain)."""
        state = dict(self.__dict__)
        state["_store"] = None
        state["storage_options"] = options_for_another_process(self.path, self.storage_options, self._folder())
        return state

    def discover_splits(self) -> list[SourceSplit]:
        names = sorted(info.key for info in self._folder().list("")
                       if "/" not in info.key and is_visible_name(info.key)
                       and (self.only_file is None or info.key == self.only_file))
        if not names and not self.continuous and not self._folder_exists():
            raise JobDefinitionError("path", self.path, "must name an existing folder of event files",
                                     "Create it, or wait for files to land in it: read_files(path, format, "
                                     "monitor_interval=...) or FileSource(path, continuous=True)")
        return [SourceSplit(name, 0, name) for name in names]

    def _folder_exists(self) -> bool:
        # imported here: the engine package loads this module, and checkpoints imports engine (engine/io/storage.py)
        from checkpoints.backends import LocalFileSystemStore

        store = self._folder()
        if isinstance(store, LocalFileSystemStore):
            return store.root.is_dir()
        return True  # an S3 prefix exists as soon as it is named

    def is_bounded(self) -> bool:
        return not self.continuous

    def create_reader(self, split: SourceSplit, start_offset: int | None = None) -> SplitReader:
        if self.continuous:
            # a monitored folder's restore creates a reader for every file ever read: decode each only when
            # it is first read (a finished one then ends at once and is released), never all at once
            return _FileReader(None, check_int_offset(split, start_offset, None), lambda: self._decode(split))
        rows = self._decode(split)
        return _FileReader(rows, check_int_offset(split, start_offset, len(rows)))

    def _decode(self, split: SourceSplit) -> RowFile:
        key = split.location or split.split_id
        return decode(self.format, self._folder().get_bytes(key), infer_types=self.infer_types)


class _FileReader(SplitReader):
    __slots__ = ("_rows", "_offset", "_dead", "_load")

    def __init__(self, rows: RowFile | None, offset: int, load: Any = None) -> None:
        self._rows = rows
        self._offset = offset
        self._dead = 0
        self._load = load

    def _advance(self, max_records: int) -> tuple[int, int]:
        check_max_records(max_records)
        if self._rows is None and self._load is not None:
            self._rows, self._load = self._load(), None
            if self._offset > len(self._rows):
                raise JobDefinitionError(
                    "start_offset", self._offset, f"must not pass the end ({len(self._rows)}) of its file",
                    "The checkpoint belongs to different input; restore it with the input it was taken on "
                    "(a job built from parameters: the same --param values as the run that took it)")
        start = self._offset
        stop = min(len(self._rows), start + max_records)
        self._offset = stop
        return start, stop

    def read(self, max_records: int) -> ReadBatch:
        start, stop = self._advance(max_records)
        records, dead = self._rows.rows(start, stop)
        self._dead += len(dead)
        return ReadBatch(records, stop, stop >= len(self._rows), tuple(dead))

    def read_arrow(self, max_records: int) -> ArrowReadBatch:
        start, stop = self._advance(max_records)
        batch, dead = self._rows.arrow(start, stop)
        self._dead += len(dead)
        return ArrowReadBatch(batch, stop, stop >= len(self._rows), tuple(dead))

    def current_offset(self) -> int:
        return self._offset

    @property
    def dead_letter_count(self) -> int:
        return self._dead

    def close(self) -> None:
        self._rows = None  # type: ignore[assignment]
