"""Non-keyed ``process(ProcessFunction)`` / ``process(CoProcessFunction)`` on Spark give the local runtime's results,
record timestamps, watermarks and side outputs included, and survive savepoints either way (issue 19).

On Spark a process function chains like a flat_map: it runs in the task of its producer (a split's slice, or a
keyed subtask), opened once per task and given the job's watermark W(n-1) before the epoch's records; the local
runtime's ``epoch_records`` option gives Spark's cadence (records of epoch n under W(n-1)), so the watermark each
record sees is the same on both.  The jobs read one split per source where the function is chained to the
source: a local source subtask's watermark is that of its own splits, Spark's W(n-1) that of all of them
(engine/operators/process.py); after a network edge both are the minimum over every split.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from engine import (
    CoProcessFunction,
    OutputTag,
    ProcessFunction,
    StreamExecutionEnvironment,
    Time,
    TumblingEventTimeWindows,
    Types,
    WatermarkStrategy,
)
from engine.io.collection_source import CollectionSource

pytestmark = pytest.mark.spark

pytest.importorskip("pyspark")
from pyspark import cloudpickle  # noqa: E402
from source_gate import savepoint_after

cloudpickle.register_pickle_by_value(sys.modules[__name__])

EPOCH_RECORDS = 7
LOW = OutputTag("low", Types.TUPLE([Types.STRING(), Types.INT()]))
# (name, timestamp, value): out of order within a bounded delay, some negative values for the side output
EVENTS = [(f"e{i:03d}", 100 * i + (250 if i % 5 == 0 else 0), (i * 37) % 11 - 3) for i in range(120)]


class Annotate(ProcessFunction):
    def open(self, runtime_context):
        self.opened = True

    def process_element(self, value, ctx):
        assert self.opened, "open() must run before the first record"
        name, ts, v = value
        if v < 0:
            yield LOW, (name, v)
        else:
            yield name, v, ctx.timestamp(), ctx.timer_service().current_watermark()


class Merge(CoProcessFunction):
    def process_element1(self, value, ctx):
        yield "1", value[0], ctx.timestamp(), ctx.timer_service().current_watermark()

    def process_element2(self, value, ctx):
        if value[2] < 0:
            yield LOW, (value[0], value[2])
        yield "2", value[0], ctx.timestamp(), ctx.timer_service().current_watermark()


class Tag(ProcessFunction):
    """No watermark in the output: a restored job's cadence differs from an uninterrupted one's."""

    def process_element(self, value, ctx):
        name, ts, v = value
        if v < 0:
            yield LOW, (name, v)
        else:
            yield name[-1], ts, v


def _env(runtime: str, parallelism: int, epoch_records: int = EPOCH_RECORDS) -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime(runtime)
    env.set_parallelism(parallelism)
    env.set_runtime_option("epoch_records", epoch_records)
    return env


def _strategy() -> WatermarkStrategy:
    return WatermarkStrategy.for_bounded_out_of_orderness(Time.milliseconds(300)).with_timestamp_assigner(
        lambda e, ts: e[1])


def _stamped(env, events, splits: int = 1, uid: str | None = None):
    source = env.from_source(CollectionSource(events, num_splits=splits))
    if uid is not None:
        source = source.uid(uid)
    return source.assign_timestamps_and_watermarks(_strategy())


def _with_side(stream):
    return stream.union(stream.get_side_output(LOW).map(lambda low: ("low",) + low))


def _chained(runtime: str, parallelism: int) -> list:
    env = _env(runtime, parallelism)
    return _with_side(_stamped(env, EVENTS).process(Annotate())).execute_and_collect()


def _after_rebalance(runtime: str, parallelism: int) -> list:
    env = _env(runtime, parallelism)
    return _with_side(_stamped(env, EVENTS, splits=3).rebalance().process(Annotate())).execute_and_collect()


def _after_window(runtime: str, parallelism: int) -> list:
    """Chained after a keyed vertex: window results with the window's end timestamp.  Not the watermark: results
    fired by a watermark see the one before it, on Spark W(n-1), on the local runtime the last one the window
    operator received, where the minimum over its channels moves channel by channel at an epoch's end."""
    env = _env(runtime, parallelism)
    sums = (_stamped(env, EVENTS, splits=3).map(lambda e: (e[0][-1], e[1], e[2])).key_by(lambda e: e[0])
            .window(TumblingEventTimeWindows.of(Time.seconds(1))).reduce(lambda a, b: (a[0], max(a[1], b[1]),
                                                                                       a[2] + b[2])))
    return _with_side(sums.process(Tag())).execute_and_collect()


def _co_process(runtime: str, parallelism: int) -> list:
    env = _env(runtime, parallelism)
    first = _stamped(env, EVENTS[::2])
    second = _stamped(env, EVENTS[1::2])
    return _with_side(first.connect(second).process(Merge())).execute_and_collect()


def test_the_chained_job_gives_watermarks_that_trail_the_records() -> None:
    """A sanity check of what the comparison below compares: every main record, its own timestamp, and a
    watermark that never passes the timestamp of a record not yet late by the 300 ms bound."""
    result = _chained("local", 2)
    main = [r for r in result if r[0] != "low"]
    assert len(result) == len(EVENTS)
    assert {r[1] for r in result if r[0] == "low"} == {e[0] for e in EVENTS if e[2] < 0}
    by_name = {e[0]: e for e in EVENTS}
    for name, v, ts, watermark in main:
        assert ts == by_name[name][1] and v == by_name[name][2]
        assert watermark < ts + 300
    assert len({w for *_, w in main}) > 5  # the watermark advanced epoch by epoch


@pytest.mark.parametrize("job", [_chained, _after_rebalance, _after_window, _co_process])
@pytest.mark.parametrize("parallelism", [2, 3])
def test_spark_gives_the_local_runtimes_results(spark, job, parallelism: int) -> None:
    local = job("local", parallelism)
    assert local, "the job must produce something to compare"
    assert sorted(map(repr, job("spark", parallelism))) == sorted(map(repr, local))


def test_timers_on_a_non_keyed_stream_fail_a_spark_job_saying_they_need_a_key(spark) -> None:
    class Timer(ProcessFunction):
        def process_element(self, value, ctx):
            ctx.timer_service().register_event_time_timer(ctx.timestamp() + 10)
            yield value

    with pytest.raises(Exception) as err:
        _stamped(_env("spark", 2), EVENTS).process(Timer()).execute_and_collect()
    text = repr(err.value) + repr(err.value.__cause__)
    assert "only supported on a keyed stream" in text, text


# ---- savepoints ----------------------------------------------------------------------------------------------


# 1200 events in 2 splits, at most 250 ms out of order: under the 300 ms bound no event is late, so the window sums
# do not depend on the cadence (an uninterrupted run, a restored one, either runtime)
MANY = [(f"e{i:04d}", 10 * i + (250 if i % 7 == 0 else 0), (i * 37) % 11 - 3) for i in range(1200)]


def _savepoint_job(env: StreamExecutionEnvironment, storage: Path, savepoint: str | None = None):
    env.get_checkpoint_config().set_checkpoint_storage_dir(f"file://{storage}/chk")
    if savepoint is not None:
        env.set_runtime_option("from_savepoint", savepoint)
    tagged = _stamped(env, MANY, splits=2, uid="events").process(Tag()).uid("tag")
    sums = (tagged.key_by(lambda r: r[0]).window(TumblingEventTimeWindows.of(Time.seconds(2)))
            .reduce(lambda a, b: (a[0], max(a[1], b[1]), a[2] + b[2])).uid("sums"))
    return sums.union(tagged.get_side_output(LOW).map(lambda low: ("low",) + low).uid("low"))


def _epochs_env(runtime: str, parallelism: int) -> StreamExecutionEnvironment:
    env = _env(runtime, parallelism, epoch_records=100)
    env.enable_checkpointing(10)
    return env


def _state_tables(savepoint: str, uid: str) -> dict:
    from checkpoints import load_snapshot

    snapshot = load_snapshot(savepoint)
    return snapshot.state_tables(uid) if uid in {op.uid for op in snapshot.metadata.operators} else {}


def _golden(tmp_path: Path) -> list:
    return sorted(map(repr, _savepoint_job(_epochs_env("local", 2), tmp_path / "golden").execute_and_collect()))


def test_a_spark_savepoint_of_a_job_with_a_process_function_resumes_on_both_runtimes(spark, tmp_path: Path) -> None:
    from engine.runtime.spark.runtime import SparkRuntime

    golden = _golden(tmp_path)
    stream = _savepoint_job(_epochs_env("spark", 2), tmp_path)
    job = SparkRuntime(stream._env).start("process", [], [stream._node])
    for _ in range(2):
        assert job.run_epoch()
    savepoint = job.stop_with_savepoint(f"file://{tmp_path}/savepoints").result(timeout=120)
    before_stop = list(job.collected[stream._node.id])
    assert 0 < len(before_stop) < len(golden)
    assert not _state_tables(savepoint, "tag"), "a ProcessFunction keeps no state"

    for runtime, parallelism in (("spark", 3), ("local", 1)):
        resumed = _savepoint_job(_epochs_env(runtime, parallelism), tmp_path / runtime, savepoint)
        assert sorted(map(repr, before_stop + resumed.execute_and_collect())) == golden, runtime


def test_a_local_savepoint_of_a_job_with_a_process_function_resumes_on_spark(spark, tmp_path: Path) -> None:
    """The local run checkpoints on a manual clock, as the other restore tests do."""

    from engine.runtime.local.runtime import LocalRuntime
    from restore_comparison import configured_env

    golden = _golden(tmp_path)
    stream = _savepoint_job(configured_env(2), tmp_path)
    client, savepoint = savepoint_after(lambda: LocalRuntime(stream._env).submit("process", [], [stream._node]),
                                        700, f"file://{tmp_path}/savepoints")
    before_stop = list(client.wait(60).collected[stream._node.id])
    assert client.status().state == "stopped" and len(before_stop) < len(golden)
    assert not _state_tables(savepoint, "tag"), "a ProcessFunction keeps no state"

    resumed = _savepoint_job(_epochs_env("spark", 3), tmp_path / "resumed", savepoint)
    assert sorted(map(repr, before_stop + resumed.execute_and_collect())) == golden
