"""``env.from_collection(items)``: a bounded source over an in-memory list.

Items are cut into ``num_splits`` *contiguous* chunks (split k holds
``items[k*n//num_splits : (k+1)*n//num_splits]``), not dealt round-robin, so
that with one split, or when the chunks are read one after the other, the
stream order is the list order: a job over ``from_collection`` reads like the
list it was given.  The offset is the index within the chunk.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from engine.errors import JobDefinitionError
from engine.io.source import ReadBatch, Source, SourceSplit, SplitReader, check_int_offset, check_max_records


class CollectionSource(Source):
    """A bounded source over ``items`` cut into ``num_splits`` contiguous splits ``"collection-<k>"``."""

    def __init__(self, items: Iterable, num_splits: int = 1) -> None:
        if isinstance(num_splits, bool) or not isinstance(num_splits, int) or num_splits < 1:
            raise JobDefinitionError("num_splits", num_splits, "must be an int >= 1")
        if isinstance(items, (str, bytes, dict)):
            raise JobDefinitionError("items", items, "must be a list or other iterable of records",
                                     "Wrap a single record in a list: from_collection([record])")
        self._items: tuple = tuple(items)
        self._num_splits = num_splits

    @property
    def items(self) -> tuple:
        return self._items

    def discover_splits(self) -> list[SourceSplit]:
        return [SourceSplit(f"collection-{k}", k) for k in range(self._num_splits)]

    def is_bounded(self) -> bool:
        return True

    def chunk(self, split: SourceSplit) -> Sequence:
        """The items ``split`` reads, in order."""
        n = len(self._items)
        k = split.index
        if not 0 <= k < self._num_splits:
            raise JobDefinitionError("split", split, f"is not one of this collection's {self._num_splits} splits")
        return self._items[k * n // self._num_splits:(k + 1) * n // self._num_splits]

    def create_reader(self, split: SourceSplit, start_offset: int | None = None) -> SplitReader:
        chunk = self.chunk(split)
        return _CollectionReader(chunk, check_int_offset(split, start_offset, len(chunk)))


class _CollectionReader(SplitReader):
    __slots__ = ("_chunk", "_offset")

    def __init__(self, chunk: Sequence, offset: int) -> None:
        self._chunk = chunk
        self._offset = offset

    def read(self, max_records: int) -> ReadBatch:
        check_max_records(max_records)
        end = min(len(self._chunk), self._offset + max_records)
        values = list(self._chunk[self._offset:end])
        self._offset = end
        return ReadBatch(values, end, end >= len(self._chunk))

    def current_offset(self) -> int:
        return self._offset
