"""``KeyedStream.process`` and the rolling keyed aggregates on Spark give the local runtime's results (issue 19).

On Spark a keyed process vertex runs like a window vertex: one KeyedProcessOperator per subtask and epoch,
its keyed state and timers carried between epochs as state rows, every record of epoch n processed under
W(n-1), then W(n) fires the due timers.  The local runtime's ``epoch_records`` option reproduces that cadence,
so even the cadence-dependent classic example must agree; the jobs of test_keyed_process_restore.py agree
whatever the cadence.  A restore from a Spark checkpoint at another parallelism commits what an
uninterrupted run commits.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from engine import (
    KeyedProcessFunction,
    ManualClock,
    StreamExecutionEnvironment,
    ValueStateDescriptor,
    WatermarkStrategy,
)
from engine.io.collection_source import CollectionSource

pytestmark = pytest.mark.spark

# Spark's Python workers cannot import this folder's modules: ship their functions by value
pytest.importorskip("pyspark")
from pyspark import cloudpickle  # noqa: E402

import test_keyed_process as classic  # noqa: E402
import test_keyed_process_restore as restore_jobs  # noqa: E402

for _module in (sys.modules[__name__], classic, restore_jobs):
    cloudpickle.register_pickle_by_value(_module)

EPOCH_RECORDS = 50


def _ts(e, _):
    return e[-1]


def _env(runtime: str, parallelism: int) -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime(runtime)
    env.set_parallelism(parallelism)
    env.set_runtime_option("epoch_records", EPOCH_RECORDS)  # the same watermark cadence on both runtimes
    return env


def _alerts(runtime: str, parallelism: int) -> list:
    env = _env(runtime, parallelism)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, ts: e[2])
    stream = env.from_source(CollectionSource(restore_jobs.EVENTS, num_splits=3)).assign_timestamps_and_watermarks(
        strategy)
    return stream.key_by(lambda e: e[0]).process(restore_jobs.QuietAlerts()).execute_and_collect()


def _classic(runtime: str, parallelism: int) -> list:
    env = _env(runtime, parallelism)
    events = [(f"k{(i * 7) % 5}", 100 * i + (400 if i % 11 == 0 else 0)) for i in range(300)]
    events.sort(key=lambda e: e[1])
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(_ts)
    stream = env.from_collection(events).assign_timestamps_and_watermarks(strategy)
    return stream.key_by(lambda e: e[0]).process(classic.CountWithTimeoutFunction()).execute_and_collect()


def _rolling(runtime: str, parallelism: int) -> list:
    env = _env(runtime, parallelism)
    records = [{"user": f"u{i % 4}", "amount": (i * 37) % 11, "i": i} for i in range(240)]
    keyed = env.from_collection(records).key_by("user")
    return (keyed.sum("amount").key_by("user").min_by("amount").map(lambda r: (r["user"], r["amount"], r["i"]))
            .execute_and_collect())


def _side_output(runtime: str, parallelism: int) -> list:
    env = _env(runtime, parallelism)
    return classic._everything(env).get_side_output(classic._Everything.LATE).execute_and_collect()


@pytest.mark.parametrize("job", [_alerts, _classic, _rolling, _side_output])
def test_spark_gives_the_local_runtimes_results(spark, job) -> None:
    local = job("local", 2)
    assert local, "the job must produce something to compare"
    assert sorted(job("spark", 2)) == sorted(local)


def test_spark_alerts_are_the_hand_computed_ones(spark) -> None:
    expected = []
    for k in range(4):
        blocks = [b for b in range(60) if b % 4 == k]
        expected += [[f"k{k}", n + 1, 100 * (20 * b + 19)] for n, b in enumerate(blocks)]
    assert sorted(_alerts("spark", 3)) == sorted(expected)


def test_a_spark_savepoint_restores_state_and_timers_at_another_parallelism_on_both_runtimes(
        spark, tmp_path: Path) -> None:
    from engine.runtime.spark.runtime import SparkRuntime

    def build(parallelism: int, options: dict, runtime: str = "spark") -> tuple[StreamExecutionEnvironment, object]:
        env = _env(runtime, parallelism)
        env.enable_checkpointing(10)
        env.get_checkpoint_config().set_checkpoint_storage_dir(f"file://{tmp_path}/chk")
        for name, value in options.items():
            env.set_runtime_option(name, value)
        strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, ts: e[2])
        stream = env.from_source(CollectionSource(restore_jobs.EVENTS[:600], num_splits=2)) \
            .assign_timestamps_and_watermarks(strategy)
        return env, stream.key_by(lambda e: e[0]).process(restore_jobs.QuietAlerts())

    golden = sorted(_alerts_of(restore_jobs.EVENTS[:600]))
    env, stream = build(2, {})
    job = SparkRuntime(env).start("keyed-process", [], [stream._node])
    for _ in range(3):
        assert job.run_epoch()
    savepoint = job.stop_with_savepoint(f"file://{tmp_path}/savepoints").result(timeout=120)
    before_stop = list(job.collected[stream._node.id])
    assert before_stop and len(before_stop) < len(golden)  # stopped midway, timers pending in the savepoint

    _, resumed = build(3, {"from_savepoint": savepoint})
    assert sorted(before_stop + resumed.execute_and_collect()) == golden
    # the snapshot layout is the operator's, not the runtime's: the same savepoint restores on the local runtime
    _, resumed_locally = build(2, {"from_savepoint": savepoint}, runtime="local")
    assert sorted(before_stop + resumed_locally.execute_and_collect()) == golden


def _alerts_of(events: list) -> list:
    env = _env("local", 1)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, ts: e[2])
    stream = env.from_collection(events).assign_timestamps_and_watermarks(strategy)
    return stream.key_by(lambda e: e[0]).process(restore_jobs.QuietAlerts()).execute_and_collect()


def _trickle(records: list):
    """An unbounded source with one split returning ``records`` once, then nothing, forever."""
    from engine.io.source import ReadBatch, Source, SourceSplit, SplitReader, check_int_offset

    class Reader(SplitReader):
        def __init__(self, offset: int) -> None:
            self.offset = offset

        def read(self, max_records: int) -> ReadBatch:
            values = list(records[self.offset:self.offset + max_records])
            self.offset += len(values)
            return ReadBatch(values, self.offset, finished=False)

        def current_offset(self) -> int:
            return self.offset

    class Trickle(Source):
        def discover_splits(self):
            return [SourceSplit("only", 0)]

        def is_bounded(self) -> bool:
            return False

        def create_reader(self, split, start_offset=None) -> SplitReader:
            return Reader(check_int_offset(split, start_offset, len(records)))

    return Trickle()


class _RemindLater(KeyedProcessFunction):
    """A processing-time timer 5 s after each element; it emits (key, time, elements so far, domain)."""

    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count", default=0))

    def process_element(self, value, ctx):
        self.count.update(self.count.value() + 1)
        ctx.timer_service().register_processing_time_timer(ctx.timer_service().current_processing_time() + 5_000)

    def on_timer(self, timestamp, ctx):
        yield ctx.get_current_key(), timestamp, self.count.value(), ctx.time_domain().name


def test_processing_time_timers_fire_on_the_epoch_whose_clock_passed_them(spark) -> None:
    from engine.runtime.spark.runtime import SparkRuntime

    clock = ManualClock(1_000)
    env = _env("spark", 2)
    env.set_clock(clock)
    events = env.from_source(_trickle([("a", 1), ("b", 2), ("a", 3)]), WatermarkStrategy.no_watermarks(), "trickle")
    reminders = events.key_by(lambda e: e[0]).process(_RemindLater())
    job = SparkRuntime(env).start("reminders", [], [reminders._node])
    out = job.collected[reminders._node.id]
    assert job.run_epoch() and out == []  # t = 1 s: timers at 6 s
    clock.advance(3_000)
    assert job.run_epoch() and out == []  # t = 4 s
    clock.advance(2_000)
    assert job.run_epoch()  # t = 6 s: both keys' timers (a's registered twice: one timer) fire
    assert sorted(out) == [("a", 6_000, 2, "PROCESSING_TIME"), ("b", 6_000, 1, "PROCESSING_TIME")]
    clock.advance(10_000)
    assert job.run_epoch() and len(out) == 2  # nothing fires twice
    job.cancel()
