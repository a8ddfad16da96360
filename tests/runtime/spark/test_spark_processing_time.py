"""Epochs that carry no data still move time: processing-time timers fire and idle splits release the watermark.

Issue 5: "Processing-time timers and idle-split detection advance on epochs that carry no data."
An unbounded source that has nothing new still gets an epoch: its split tasks report (no records,
the generator's idleness judged at the epoch's processing time) and every processing-time window
vertex advances to the epoch's clock reading.  Time comes from an injected ManualClock, so the
test decides exactly when each epoch happens.
"""

from __future__ import annotations

from engine.api.environment import StreamExecutionEnvironment
from engine.api.time import Duration, Time
from engine.clock import ManualClock
from engine.io.source import ReadBatch, Source, SourceSplit, SplitReader, check_int_offset
from engine.watermarks.strategy import WatermarkStrategy
from engine.windowing.assigners import TumblingEventTimeWindows, TumblingProcessingTimeWindows


class Trickle(Source):
    """Unbounded: each split returns its given records, then nothing — forever (no end of input)."""

    def __init__(self, splits: dict[str, list]) -> None:
        self.splits = {k: tuple(v) for k, v in splits.items()}

    def discover_splits(self):
        return [SourceSplit(name, i) for i, name in enumerate(sorted(self.splits))]

    def is_bounded(self) -> bool:
        return False

    def create_reader(self, split, start_offset=None) -> SplitReader:
        records = self.splits[split.split_id]
        return _TrickleReader(records, check_int_offset(split, start_offset, len(records)))


class _TrickleReader(SplitReader):
    def __init__(self, records: tuple, offset: int) -> None:
        self.records, self.offset = records, offset

    def read(self, max_records: int) -> ReadBatch:
        values = list(self.records[self.offset:self.offset + max_records])
        self.offset += len(values)
        return ReadBatch(values, self.offset, finished=False)

    def current_offset(self) -> int:
        return self.offset


def _key(e):
    return e[0]


def _ts(e, _):
    return e[1]


def _spark_env(clock: ManualClock) -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime("spark")
    env.set_parallelism(2)
    env.set_max_parallelism(8)
    env.set_clock(clock)
    return env


def test_a_processing_time_window_fires_on_an_epoch_without_data(spark):
    from engine.runtime.spark.runtime import SparkRuntime

    clock = ManualClock(1_000)
    env = _spark_env(clock)
    events = env.from_source(Trickle({"only": [("a", 0, 1), ("b", 0, 2), ("a", 0, 3)]}),
                             WatermarkStrategy.no_watermarks(), "trickle")
    sums = events.key_by(_key).window(TumblingProcessingTimeWindows.of(Time.seconds(10))).sum(2)
    job = SparkRuntime(env).start("processing-time", [], [sums._node])
    out = job.collected[sums._node.id]

    assert job.run_epoch()  # t = 1 s: the records arrive in processing-time window [0 s, 10 s)
    assert job.records_read == 3 and out == []
    clock.advance(5_000)
    assert job.run_epoch()  # t = 6 s: no data, window still open
    assert job.records_read == 3 and out == []
    clock.advance(4_000)
    assert job.run_epoch()  # t = 10 s: no data, yet the window's end has passed: it fires
    assert job.records_read == 3
    assert sorted(out) == [("a", 0, 4), ("b", 0, 2)]
    clock.advance(20_000)
    assert job.run_epoch() and len(out) == 2  # nothing fires twice


def test_an_idle_split_releases_the_watermark_on_an_epoch_without_data(spark):
    from engine.runtime.spark.runtime import SparkRuntime

    clock = ManualClock(0)
    env = _spark_env(clock)
    strategy = (WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(1))
                .with_timestamp_assigner(_ts).with_idleness(Duration.of_seconds(5)))
    events = env.from_source(Trickle({"busy": [("a", 1_000, 1), ("a", 12_000, 2)], "quiet": []}), strategy, "trickle")
    sums = events.key_by(_key).window(TumblingEventTimeWindows.of(Time.seconds(10))).sum(2)
    job = SparkRuntime(env).start("idleness", [], [sums._node])
    out = job.collected[sums._node.id]

    assert job.run_epoch()  # "quiet" has no watermark yet: the combined watermark stays at its minimum
    assert out == [] and job.watermark < 0
    clock.advance(2_000)
    assert job.run_epoch()  # 2 s without data: not idle yet
    assert out == [] and job.watermark < 0
    clock.advance(6_000)
    assert job.run_epoch()  # 8 s: both splits idle now, no data anywhere; the watermark still moves on
    assert job.records_read == 2
    assert job.watermark >= 10_999 and out == [("a", 1_000, 1)]
    # what the status and /metrics show per split (issue 18): both idle, "busy" with its own watermark
    splits = {sid.rsplit("/", 1)[-1]: s for sid, s in job.status().splits.items()}
    assert splits.keys() == {"busy", "quiet"} and all(s["idle"] for s in splits.values())
    assert splits["busy"]["watermark_ms"] == 12_000 - 1_000 - 1


def test_epoch_interval_spaces_the_epochs_of_an_idle_job_and_a_cancel_cuts_the_wait_short(spark):
    import time

    from engine.runtime.spark.runtime import SparkRuntime

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime("spark")
    env.set_parallelism(2)
    env.set_max_parallelism(8)
    env.set_runtime_option("epoch_interval_ms", 60_000)
    events = env.from_source(Trickle({"only": [("a", 0, 1)]}), WatermarkStrategy.no_watermarks(), "trickle")
    sums = events.key_by(_key).window(TumblingProcessingTimeWindows.of(Time.seconds(10))).sum(2)
    job = SparkRuntime(env).start("paced", [], [sums._node])
    job.run_in_background()
    try:
        deadline = time.monotonic() + 120
        while not job.last_epoch_ms and time.monotonic() < deadline:  # the first epoch (worker start-up) ended
            time.sleep(0.05)
        assert job.epoch == 1
        time.sleep(5)  # back to back, idle epochs take about a second here even under load: several would have run
        assert job.epoch == 1
    finally:
        asked = time.monotonic()
        job.cancel()
        job.wait(60)
    assert time.monotonic() - asked < 30 and job.epoch == 1  # not the 60 s the interval would have waited


def test_a_negative_epoch_interval_is_refused_naming_the_option():
    import pytest

    from engine.errors import JobDefinitionError
    from engine.runtime.spark.runtime import SparkRuntime

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime("spark")
    env.set_runtime_option("epoch_interval_ms", -5)
    with pytest.raises(JobDefinitionError, match="epoch_interval_ms"):
        SparkRuntime(env)
