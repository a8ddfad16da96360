"""The small deterministic job of the ``_metadata`` golden test (importable by Spark's Python workers)."""

from __future__ import annotations

from typing import Any

from engine.api.environment import StreamExecutionEnvironment
from engine.api.time import Duration, Time
from engine.io.source import ReadBatch, SourceSplit, SplitReader
from engine.io.collection_source import CollectionSource
from engine.watermarks.strategy import WatermarkStrategy
from engine.windowing.assigners import TumblingEventTimeWindows

#: per split, events (key, timestamp_ms, amount); each key lives in one split
SPLITS = [
    [("a", 1000, 1), ("b", 2500, 2), ("a", 4000, 3), ("a", 11000, 4), ("b", 12500, 5), ("a", 21000, 6)],
    [("c", 1500, 7), ("c", 3000, 8), ("d", 9000, 9), ("c", 14000, 10), ("d", 19500, 11), ("d", 23000, 12)],
]
NUM_RECORDS = sum(len(s) for s in SPLITS)


class HeldSplits(CollectionSource):
    """An unbounded source over given splits: after its records a split has nothing *now* (it never ends), so a
    job reads everything and then holds, and a snapshot taken then sees the same state on every runtime."""

    def __init__(self, splits: list[list[Any]]) -> None:
        super().__init__([e for s in splits for e in s], num_splits=len(splits))
        self._split_lists = [tuple(s) for s in splits]

    def discover_splits(self) -> list[SourceSplit]:
        return [SourceSplit(f"held-{i}", i) for i in range(len(self._split_lists))]

    def is_bounded(self) -> bool:
        return False

    def create_reader(self, split: SourceSplit, start_offset: int | None = None) -> SplitReader:
        return _HeldReader(self._split_lists[split.index], int(start_offset or 0))


class _HeldReader(SplitReader):
    def __init__(self, records: tuple, offset: int) -> None:
        self._records, self._offset = records, offset

    def read(self, max_records: int) -> ReadBatch:
        values = list(self._records[self._offset:self._offset + max_records])
        self._offset += len(values)
        return ReadBatch(values, self._offset, finished=False)

    def current_offset(self) -> int:
        return self._offset


def _timestamp(e: Any, ts: int) -> int:
    return e[1]


def _key(e: Any) -> str:
    return e[0]


def build(runtime: str, storage: str, window_parallelism: int = 2) -> tuple[StreamExecutionEnvironment, Any]:
    """Two splits of keyed events into a tumbling 10 s sum (uid ``sums``), parallelism 2, max parallelism 8; the
    window at ``window_parallelism`` (4: two of its subtasks get no key)."""
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime(runtime)
    env.set_parallelism(2)
    env.set_max_parallelism(8)
    if runtime == "spark":  # one epoch reads everything (the local runtime in epoch mode would wait for 100)
        env.set_runtime_option("epoch_records", 100)
    env.enable_checkpointing(3_600_000)  # no periodic checkpoint during the test: the savepoint is id 1
    env.get_checkpoint_config().set_checkpoint_storage_dir(storage)
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(1)) \
        .with_timestamp_assigner(_timestamp)
    sums = env.from_source(HeldSplits(SPLITS), strategy, "events").uid("events").key_by(_key) \
        .window(TumblingEventTimeWindows.of(Time.seconds(10))).sum(2).uid("sums")
    if window_parallelism != 2:
        sums.set_parallelism(window_parallelism)
    return env, sums
