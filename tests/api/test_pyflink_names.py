"""PyFlink names a new user met missing (issue 19, a new user's trial): function base classes, window_all
functions without a key, ``print(sink_identifier)``, ``execute_and_collect`` as a CloseableIterator, state
interfaces and backends, the dynamic session assigners, and Spark refusing what it cannot run before it starts."""

from __future__ import annotations

import time

import pytest

import engine
from engine import (
    AllWindowFunction,
    DynamicEventTimeSessionWindows,
    EmbeddedRocksDBStateBackend,
    EventTimeSessionWindows,
    FilterFunction,
    FlatMapFunction,
    HashMapStateBackend,
    KeySelector,
    MapFunction,
    ProcessAllWindowFunction,
    StreamExecutionEnvironment,
    Time,
    TumblingEventTimeWindows,
    WatermarkStrategy,
)
from engine.errors import JobDefinitionError


def _env(parallelism: int = 1) -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism)
    return env


def _stamped(env, data):
    return env.from_collection(data).assign_timestamps_and_watermarks(
        WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, _: e[1]))


def test_pyflink_function_base_classes_run_as_they_do_in_pyflink():
    class Double(MapFunction):
        def map(self, value):
            return value * 2

    class Split(FlatMapFunction):
        def flat_map(self, value):
            yield value
            yield -value

    class Positive(FilterFunction):
        def filter(self, value):
            return value > 0

    class Parity(KeySelector):
        def get_key(self, value):
            return value % 2

    out = _env().from_collection([1, 2, 3]).map(Double()).flat_map(Split()).filter(Positive()) \
        .key_by(Parity()).reduce(lambda a, b: a + b).execute_and_collect()
    assert out == [2, 6, 12]


def test_window_all_takes_pyflink_all_window_functions_without_a_key():
    class Count(ProcessAllWindowFunction):
        def process(self, context, elements):
            yield "all", context.window().start, len(list(elements))

    class Sum(AllWindowFunction):
        def apply(self, window, inputs):
            yield window.start, sum(e[0] for e in inputs)

    data = [(1, 1000), (2, 2000), (3, 12000)]
    windowed = _stamped(_env(), data).window_all(TumblingEventTimeWindows.of(Time.seconds(10)))
    assert windowed.process(Count()).execute_and_collect() == [("all", 0, 2), ("all", 10000, 1)]
    windowed = _stamped(_env(), data).window_all(TumblingEventTimeWindows.of(Time.seconds(10)))
    assert windowed.apply(Sum()).execute_and_collect() == [(0, 3), (10000, 3)]
    windowed = _stamped(_env(), data).window_all(TumblingEventTimeWindows.of(Time.seconds(10)))
    assert windowed.reduce(lambda a, b: (a[0] + b[0], b[1]), window_function=Count()).execute_and_collect() == \
        [("all", 0, 1), ("all", 10000, 1)]


@pytest.mark.parametrize("parallelism, expected", [(1, ["rows> 1", "rows> 2"]), (2, ["rows:1> 1", "rows:2> 2"])])
def test_print_with_a_sink_identifier_leads_every_line_as_flink_does(capsys, parallelism, expected):
    env = _env(parallelism)
    env.from_collection([1, 2]).rebalance().print("rows")
    env.execute()
    assert sorted(capsys.readouterr().out.splitlines()) == expected
    with pytest.raises(JobDefinitionError) as err:
        env.from_collection([1]).print(7)
    assert err.value.parameter == "sink_identifier"


def test_execute_and_collect_is_a_list_and_pyflinks_closeable_iterator():
    env = _env()
    with env.from_collection([1, 2, 3]).map(lambda x: x * 2).execute_and_collect() as results:
        assert next(results) == 2
        assert [r for r in results] == [2, 4, 6]  # iterating a list: from the start, whatever next() took
        assert next(results) == 4
    with pytest.raises(StopIteration):
        next(results)  # closed
    assert results == [2, 4, 6]
    assert _env().from_collection([1, 2, 3]).execute_and_collect(limit=2) == [1, 2]


def test_state_interfaces_backends_and_dynamic_sessions_are_pyflinks_names(caplog):
    assert all(hasattr(engine, n) for n in ("ValueState", "ListState", "MapState", "ReducingState", "AggregatingState"))
    env = _env()
    assert isinstance(env.get_state_backend(), HashMapStateBackend)
    env.set_state_backend(EmbeddedRocksDBStateBackend())
    assert "heap" in caplog.text
    with pytest.raises(JobDefinitionError) as err:
        env.set_state_backend("rocksdb")
    assert err.value.parameter == "state_backend"
    assigner = DynamicEventTimeSessionWindows.with_dynamic_gap(lambda e: 5)
    assert isinstance(assigner, EventTimeSessionWindows) and assigner.gap_extractor is not None
    assert isinstance(DynamicEventTimeSessionWindows(lambda e: 5), EventTimeSessionWindows)


@pytest.mark.spark
def test_spark_refuses_a_watermark_assigner_after_a_map_before_starting_spark():
    env = _env()
    env.set_runtime("spark")
    stream = env.from_collection([(1, 1000)]).map(lambda x: x).assign_timestamps_and_watermarks(
        WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, _: e[1]))
    started = time.monotonic()
    with pytest.raises(JobDefinitionError, match="follow the source directly"):
        stream.key_by(lambda e: e[0]).window(TumblingEventTimeWindows.of(Time.seconds(5))) \
            .reduce(lambda a, b: a).execute_and_collect()
    assert time.monotonic() - started < 10  # refused from the plan, before a Spark session (which takes ~20 s)
