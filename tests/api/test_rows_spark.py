"""Row records on Spark give the local runtime's results (issue 19).

A PyFlink program's ``Types.ROW_NAMED`` source hands out ``Row`` objects; on Spark they cross every stage as
the codec's ``$row`` text (engine/runtime/spark/rows.py), are keyed by a ``Row`` key whose key group Spark
computes from that text, kept in keyed state as ``Row`` values, summed in windows and rolling aggregates, and
dead-lettered (by a key selector that rejects them).  Each must come back as the same ``Row`` (names, order,
kind) as on the local runtime.
"""

from __future__ import annotations

import sys

import pytest

from engine import (
    KeyedProcessFunction,
    Row,
    RowKind,
    StreamExecutionEnvironment,
    Time,
    TumblingEventTimeWindows,
    Types,
    ValueStateDescriptor,
    WatermarkStrategy,
)

pytestmark = pytest.mark.spark

pytest.importorskip("pyspark")
from pyspark import cloudpickle  # noqa: E402

cloudpickle.register_pickle_by_value(sys.modules[__name__])

COUNTRY = Types.ROW_NAMED(["country"], [Types.STRING()])
CALLS = Types.ROW_NAMED(["country", "city", "tel", "t"], [Types.STRING(), Types.STRING(), Types.INT(), Types.LONG()])
PLACES = [("China", "Shanghai"), ("China", "Hangzhou"), ("Germany", "Berlin"), ("USA", "NewYork"), ("Chile", "Lima")]
EVENTS = [(*PLACES[(i * 3) % 5], (i * 37) % 50, 1_000 * i) for i in range(200)]


class CityChanges(KeyedProcessFunction):
    """Per country (a Row key): the previous record, kept as a Row in state, and how often the city changed."""

    def open(self, runtime_context) -> None:
        self.last = runtime_context.get_state(ValueStateDescriptor("last", CALLS))
        self.changes = runtime_context.get_state(ValueStateDescriptor("changes", Types.INT()))

    def process_element(self, value, ctx):
        last, changes = self.last.value(), self.changes.value() or 0
        if last is not None and last.city != value.city:
            changes += 1
        self.last.update(value)
        self.changes.update(changes)
        yield Row.of_kind(RowKind.UPDATE_AFTER, key=ctx.get_current_key(), changes=changes, previous=last)


def _by_country(r):
    return Row(country=r.country)


def _country_but_not_lima(r):
    if r.city == "Lima":
        raise ValueError(f"no calls to {r.city}")
    return Row(country=r.country)


def _run(runtime: str, parallelism: int):
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime(runtime)
    env.set_parallelism(parallelism)
    env.set_runtime_option("epoch_records", 40)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda r, ts: r.t)
    calls = env.from_collection(EVENTS, type_info=CALLS).assign_timestamps_and_watermarks(strategy)
    keyed = calls.key_by(_by_country)
    streams = {
        "process": keyed.process(CityChanges()),
        "window": keyed.window(TumblingEventTimeWindows.of(Time.seconds(30))).sum("tel"),
        "rolling": calls.key_by(lambda r: r.city).sum(2),
        "mapped": calls.key_by(_country_but_not_lima).map(lambda r: (r, r.as_dict())),  # Lima: a dead letter
        # a tuple key made a Row by its declared key_type
        "typed_key": calls.key_by(lambda r: (r.country,), key_type=COUNTRY).process(CityChanges()),
    }
    got, result = env.execute_and_collect_streams(streams)
    return got, result.dead_letters


def _canonical(rows: list) -> list:
    """Order-free, and sensitive to everything a Row carries (names in order, kind, nesting)."""
    def show(x):
        if isinstance(x, Row):
            return (str(x.get_row_kind()), x.get_field_names(), [show(v) for v in x])
        if isinstance(x, (tuple, list)):
            return [show(v) for v in x]
        if isinstance(x, dict):
            return sorted((k, show(v)) for k, v in x.items())
        return x
    return sorted((show(r) for r in rows), key=repr)


@pytest.mark.parametrize("parallelism", [1, 2])
def test_spark_gives_the_local_runtimes_rows(spark, parallelism: int) -> None:
    local, local_dead = _run("local", parallelism)
    on_spark, spark_dead = _run("spark", parallelism)
    assert set(local) == set(on_spark)
    for name in local:
        assert local[name], f"{name} must produce something to compare"
        assert _canonical(on_spark[name]) == _canonical(local[name]), name
    # the rows arrive as Rows, with their kinds and names, on Spark as locally
    first = next(r for r in on_spark["process"] if r.previous is not None)
    assert first.get_row_kind() is RowKind.UPDATE_AFTER and isinstance(first.key, Row)
    assert first.previous.get_field_names() == ["country", "city", "tel", "t"]
    assert all(isinstance(r, Row) for r in on_spark["window"] + on_spark["rolling"])
    assert _canonical(on_spark["typed_key"]) == _canonical(on_spark["process"])  # Row(country=...) keys either way
    # dead letters keep the Row on both runtimes
    assert len(local_dead) == len(spark_dead) == 40
    assert _canonical([(d["value"], d["stage"]) for d in spark_dead]) == \
        _canonical([(d["value"], d["stage"]) for d in local_dead])
    assert all(isinstance(d["value"], Row) and d["value"].city == "Lima" for d in spark_dead)


def test_window_and_rolling_sums_over_rows_are_the_hand_computed_ones(spark) -> None:
    got, _ = _run("spark", 2)
    rolling = {}
    for country, city, tel, t in EVENTS:
        rolling[city] = rolling.get(city, 0) + tel
    finals = {}
    for r in got["rolling"]:
        finals[r.city] = max(finals.get(r.city, 0), r.tel)
    assert finals == rolling
    windows = {}
    for country, city, tel, t in EVENTS:
        windows[(country, t // 30_000)] = windows.get((country, t // 30_000), 0) + tel
    assert sorted((r.country, r.t // 30_000, r.tel) for r in got["window"]) == \
        sorted((c, w, n) for (c, w), n in windows.items())
