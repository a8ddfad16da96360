"""Replayable split sources: the contract every runtime reads through (seed 002, "Barriers" and "Recovery").

Seed 002 asks one thing of a source for exactly-once: it "must be able to rewind
the stream to a defined recent point".  A source here is a set of *splits*
(Kafka partitions, files, generator streams), each read by a :class:`SplitReader`
from an exact *offset*.  The runtime injects barrier n after the records it has
read, and the reader's offset at that moment is the split's position Sn; on
recovery the runtime builds a new reader at Sk and the same records come back in
the same order.

Offsets are JSON values (an ``int`` record or row index for every source in this
package) because they go into the checkpoint's ``_metadata`` verbatim; an offset
always names the *next* record to read, so a reader created at the offset a
previous reader reported continues exactly where that one stopped.

Determinism is part of the contract, not a nicety: the exactly-once tests compare
a failure-free run's committed output with a crashed-and-restored run's bit for
bit, which only works when ``create_reader(split, k)`` reproduces the records
from k identically, in any process.
"""

from __future__ import annotations

import abc
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.errors import JobDefinitionError, UnsupportedFormatVersion

if TYPE_CHECKING:  # pyarrow is imported where Arrow batches are built, not to define the contract
    import pyarrow as pa

#: JSON-able position in a split: the index of the next record to read.
Offset = Any


@dataclass(frozen=True, slots=True, order=True)
class SourceSplit:
    """One independently readable part of a source, identified by a stable ``split_id``.

    ``split_id`` is what the runtime keys offsets and watermark channels by, so it
    must be the same in every process and across restarts (a file's name, a
    generator's ``"split-3"``).  ``index`` is the split's ordinal where the source
    numbers its splits (collection, generator); ``location`` is the object the
    split reads (a file key relative to the source folder).
    """

    split_id: str
    index: int = 0
    location: str | None = None

    FORMAT_VERSION = 1

    def to_json(self) -> dict:
        return {"format_version": self.FORMAT_VERSION, "split_id": self.split_id, "index": self.index,
                "location": self.location}

    @staticmethod
    def from_json(data: dict) -> SourceSplit:
        version = data.get("format_version")
        if version != SourceSplit.FORMAT_VERSION:
            raise UnsupportedFormatVersion(
                f"source split {data.get('split_id')!r} has format_version {version!r}; this Sluice reads "
                f"version {SourceSplit.FORMAT_VERSION} only")
        return SourceSplit(str(data["split_id"]), int(data["index"]), data.get("location"))


@dataclass(frozen=True, slots=True)
class MalformedInput:
    """Input that could not be turned into a record (bad JSON line, CSV row with the wrong width).

    It is not fatal: the reader skips it, keeps its position (``offset`` is where it
    was) so replay skips it again, and hands it to the runtime's dead-letter sink.
    """

    raw: str
    error: str
    offset: Offset


@dataclass(frozen=True, slots=True)
class ReadBatch:
    """What one ``read`` returned: the records, the position after them, and whether the split ended.

    ``values`` may be empty while ``finished`` is false: the split has nothing now
    (it is idle, or an unbounded source is waiting for data).  ``end_offset`` is
    always the position of the next record, also after dead letters, so Sn taken
    after this batch is exact.
    """

    values: list
    end_offset: Offset
    finished: bool
    dead_letters: tuple[MalformedInput, ...] = ()


@dataclass(frozen=True, slots=True)
class ArrowReadBatch:
    """The Arrow twin of :class:`ReadBatch`, for the Spark runtime's vectorised path.

    ``records`` holds the same records, in the same order, that ``read`` would have
    returned as dicts from the same offset (one column per field).
    """

    records: pa.RecordBatch
    end_offset: Offset
    finished: bool
    dead_letters: tuple[MalformedInput, ...] = ()

    @property
    def num_records(self) -> int:
        return self.records.num_rows


class SplitReader(abc.ABC):
    """Reads one split from an exact offset.  Not thread-safe; one reader per split per subtask.

    Guarantees: consecutive ``read`` calls return consecutive records; the batch's
    ``end_offset`` equals ``current_offset()`` afterwards; a new reader created at
    any offset a reader reported returns the same records from there on.
    """

    @abc.abstractmethod
    def read(self, max_records: int) -> ReadBatch:
        """Up to ``max_records`` records from the current offset (fewer at a split's end or idle stretch)."""

    def read_arrow(self, max_records: int) -> ArrowReadBatch:
        """The next records as an Arrow batch; sources without a columnar path raise NotImplementedError."""
        raise NotImplementedError(f"{type(self).__name__} has no Arrow read path; use read()")

    def supports_arrow(self) -> bool:
        return type(self).read_arrow is not SplitReader.read_arrow

    @abc.abstractmethod
    def current_offset(self) -> Offset:
        """The position of the next record: what a checkpoint records as this split's Sn."""

    @property
    def dead_letter_count(self) -> int:
        """Dead letters this reader returned since it was created."""
        return 0

    def close(self) -> None:
        """Release files or clients; reading after close is undefined."""


class Source(abc.ABC):
    """A replayable, split source.

    ``discover_splits`` may be called repeatedly: a bounded source returns the same
    splits every time, an unbounded one may add splits (new files landing) but
    never changes or drops a split it returned.  Splits come back in a stable
    order so that assigning them to subtasks is deterministic.
    """

    @abc.abstractmethod
    def discover_splits(self) -> list[SourceSplit]: ...

    @abc.abstractmethod
    def is_bounded(self) -> bool:
        """Whether every split ends (then end of input sends MAX_WATERMARK, seed 004)."""

    @abc.abstractmethod
    def create_reader(self, split: SourceSplit, start_offset: Offset | None = None) -> SplitReader:
        """A reader positioned at ``start_offset`` (the split's start when None)."""

    def initial_offset(self, split: SourceSplit) -> Offset:
        """The offset of a split's first record."""
        return 0

    #: ms between two ``discover_splits`` calls of a running job, for a source that keeps finding splits
    #: (``read_files(..., monitor_interval=...)``); None: splits are discovered once, when the job starts
    monitor_interval_ms: int | None = None


def source_monitor_interval_ms(source: Source) -> int | None:
    """How often a running job lists ``source`` again; None when it never does (bounded sources never)."""
    interval = getattr(source, "monitor_interval_ms", None)
    return None if interval is None or source.is_bounded() else int(interval)


def assigned_splits(splits: list[SourceSplit], parallelism: int, index: int, monitored: bool) -> list[SourceSplit]:
    """The splits source subtask ``index`` of ``parallelism`` reads, in split-id order.

    Splits found at start go round-robin in split-id order.  A monitored source's splits go by a stable
    hash of their id instead (crc32), so a split found later lands on the same subtask whatever was found
    before it, and every subtask can list the folder itself without a coordinator."""
    ordered = sorted(splits, key=lambda s: s.split_id)
    if monitored:
        return [s for s in ordered if monitored_subtask(s.split_id, parallelism) == index]
    return [s for k, s in enumerate(ordered) if k % parallelism == index]


def monitored_subtask(split_id: Any, parallelism: int) -> int:
    """The source subtask (of ``parallelism``) that reads a monitored source's split: a stable hash of its id."""
    return zlib.crc32(str(split_id).encode()) % parallelism


def check_max_records(max_records: int) -> int:
    """Validate ``read``'s batch size; a zero or negative size would make a reader spin without progress."""
    if isinstance(max_records, bool) or not isinstance(max_records, int) or max_records <= 0:
        raise JobDefinitionError("max_records", max_records, "must be a positive int")
    return max_records


def check_int_offset(split: SourceSplit, offset: Offset | None, length: int | None) -> int:
    """Validate an int offset for a split of ``length`` records (None: unbounded)."""
    if offset is None:
        return 0
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise JobDefinitionError("start_offset", offset, f"must be a non-negative int for split {split.split_id!r}")
    if length is not None and offset > length:
        raise JobDefinitionError(
            "start_offset", offset, f"must not pass the end ({length}) of split {split.split_id!r}",
            "The checkpoint belongs to different input; restore it with the input it was taken on (a job built "
            "from parameters: the same --param values as the run that took it)")
    return offset


__all__ = [
    "ArrowReadBatch", "MalformedInput", "Offset", "ReadBatch", "Source", "SourceSplit", "SplitReader",
    "check_int_offset", "check_max_records",
]
