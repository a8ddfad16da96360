"""A job for the per-operator metrics tests, run by a real ``sluice run`` (``PYTHONPATH`` names this folder).

``build``: ``records`` numbered records ``(user, n)`` with event time ``n``, read from two splits that stay
open after their last record (an unbounded source that has nothing more), so the job keeps running with
counts that no longer move; a filter keeps the even ones (half), a rolling sum per user adds them up (one
output per input) and the CLI writes the sums.  Everything a test expects follows from ``records``.
"""

from __future__ import annotations

from typing import Any

from engine.io.collection_source import CollectionSource
from engine.io.source import ReadBatch, SourceSplit, SplitReader
from engine.watermarks.strategy import WatermarkStrategy


class HeldOpenCollection(CollectionSource):
    """A collection whose splits never finish: after the last item a read returns nothing, as a live feed does."""

    def is_bounded(self) -> bool:
        return False

    def create_reader(self, split: SourceSplit, start_offset: int | None = None) -> SplitReader:
        return _HeldOpenReader(super().create_reader(split, start_offset))


class _HeldOpenReader(SplitReader):
    def __init__(self, inner: SplitReader) -> None:
        self.inner = inner

    def read(self, max_records: int) -> ReadBatch:
        got = self.inner.read(max_records)
        return ReadBatch(got.values, got.end_offset, False)

    def current_offset(self) -> int:
        return self.inner.current_offset()


def build(env: Any, records: int = 1000) -> dict[str, Any]:
    source = HeldOpenCollection([(f"user-{n % 5}", n) for n in range(records)], num_splits=2)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, _ts: e[1])
    evens = env.from_source(source, strategy, "numbers").filter(lambda e: e[1] % 2 == 0)
    totals = evens.key_by(lambda e: e[0]).reduce(lambda a, b: (a[0], a[1] + b[1])).name("totals").uid("totals")
    return {"totals": totals}
