"""What a job run keeps in memory about its past, bounded (issue 17: the driver's histories grew without bound).

A streaming job runs for months: every checkpoint adds a record to its checkpoint history, every record that
cannot be processed a dead letter.  Flink keeps only the newest ``web.checkpoints.history`` (default 10)
checkpoint statistics for its web UI and REST API, next to counts that stay exact totals.  Both runtimes
do the same with :class:`BoundedHistory`: the newest N items stay in memory for ``checkpoint_history()``,
the control API and ``JobExecutionResult``, and ``total`` counts every item ever appended.

Runtime options (``env.set_runtime_option``):

- ``max_checkpoint_history`` (default 1000): checkpoint and savepoint records kept per job, also the ids
  ``JobExecutionResult.completed_checkpoints`` lists (``num_completed_checkpoints`` stays exact).  A
  record is ~200 bytes: the default costs ~200 KB, and a job checkpointing every second for a year no
  longer holds 31 million of them.
- ``max_dead_letters`` (default 10,000): dead letters kept in the driver's memory per job
  (``JobExecutionResult.dead_letters``); ``dead_letter_count`` and the ``num_dead_letter_records`` metric
  stay exact.  A bounded job that must report every dead letter raises the bound.

Not bounded: ``execute_and_collect`` lists, which hold what the caller asked to collect (bounded jobs).
"""

from __future__ import annotations

import collections
from typing import Any, Generic, Iterator, TypeVar, overload

from engine.errors import IllegalStateError, JobDefinitionError

T = TypeVar("T")

DEFAULT_MAX_CHECKPOINT_HISTORY = 1000
DEFAULT_MAX_DEAD_LETTERS = 10_000


class BoundedHistory(Generic[T]):
    """The newest ``capacity`` items appended, oldest first, and ``total``: how many were ever appended.

    Reads like a list (``len``, iteration, ``[i]``, slices) over the items kept; the oldest is evicted
    when a new one would exceed ``capacity``.
    """

    __slots__ = ("_items", "_total")

    def __init__(self, capacity: int) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise JobDefinitionError("capacity", capacity, "must be an int >= 1")
        self._items: collections.deque[T] = collections.deque(maxlen=capacity)
        self._total = 0

    @property
    def capacity(self) -> int:
        return self._items.maxlen  # type: ignore[return-value]

    @property
    def total(self) -> int:
        """Items ever appended (minus those taken back), kept or evicted."""
        return self._total

    def append(self, item: T) -> None:
        self._items.append(item)
        self._total += 1

    def take_back_to(self, total: int) -> None:
        """Forget the items appended after the ``total``-th: an in-process restart cuts the driver's outputs
        back to a checkpoint's marks (engine/runtime/spark/job_run.py).  Items evicted before are gone, so
        fewer may be kept afterwards than were kept when the mark was taken; ``total`` is exact again."""
        if isinstance(total, bool) or not isinstance(total, int) or not 0 <= total <= self._total:
            raise IllegalStateError(f"Bug: cannot take a history of {self._total} items back to {total!r}: "
                                    "a mark must be a total this history had earlier")
        for _ in range(min(self._total - total, len(self._items))):
            self._items.pop()
        self._total = total

    def clear(self) -> None:
        self._items.clear()
        self._total = 0

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[T]:
        return iter(self._items)

    def __bool__(self) -> bool:
        return bool(self._items)

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> list[T]: ...

    def __getitem__(self, index: int | slice) -> T | list[T]:
        if isinstance(index, slice):
            return list(self._items)[index]
        return self._items[index]

    def __repr__(self) -> str:
        return f"BoundedHistory(kept={len(self._items)}, capacity={self.capacity}, total={self._total})"


def history_limits(options: dict[str, Any]) -> tuple[int, int]:
    """``(max_checkpoint_history, max_dead_letters)`` from a job's runtime options, validated."""
    limits = []
    for name, default, what in (("max_checkpoint_history", DEFAULT_MAX_CHECKPOINT_HISTORY, "checkpoint records"),
                                ("max_dead_letters", DEFAULT_MAX_DEAD_LETTERS, "dead letters")):
        value = options.get(name, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise JobDefinitionError(
                name, value, f"must be an int >= 1 (the newest {what} the driver keeps in memory)",
                f"leave it unset for {default:,}; totals stay exact whatever the bound")
        limits.append(value)
    return limits[0], limits[1]
