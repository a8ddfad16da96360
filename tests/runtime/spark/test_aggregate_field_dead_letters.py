"""A record whose aggregated field is not a number is a dead letter, not the end of the job (new-user trial).

A CSV read with ``read_files(path, "csv")`` turns an empty cell into None and ``abc`` into the str ``'abc'``.
Summed (or, for None, compared by ``min``/``max``/``min_by``/``max_by``) such a field raised a bare TypeError
inside the window and failed the whole job.  A str is what Flink's ComparableAggregator compares: ``min``/``max``
of a key whose field is text fold it (user ``c`` below), only ``sum`` refuses it.  Flink fails there too; Sluice's rule (README, "Records that cannot be
processed") is that malformed records go to the dead-letter output with the reason, and the job carries on.  This holds on both runtimes,
for every window operator variant that folds built-in aggregates (engine/windowing/variant.py: general,
slicing heap, slicing columnar, session) and for the rolling ``KeyedStream`` aggregates.  (Here, not in
tests/runtime/, because Spark's workers import this module's functions: tests/conftest.py.)
"""

from __future__ import annotations

import json

import pytest

from engine import (
    CountEvictor,
    EventTimeSessionWindows,
    SlidingEventTimeWindows,
    StreamExecutionEnvironment,
    Time,
    TumblingEventTimeWindows,
    WatermarkStrategy,
)
from engine.windowing.variant import WindowOperatorVariant, window_operator_variant
from engine.windowing.aggregations import builtin_aggregation

CSV = """user,qty,ts
a,1,1000
a,,2000
b,4,2500
c,abc,3000
b,5,3500
a,2,4000
"""
BAD = [{"user": "a", "qty": None, "ts": 2000}, {"user": "c", "qty": "abc", "ts": 3000}]


def _ts(e, _):
    return e["ts"]


def _user(e):
    return e["user"]


def _gap(_):
    return 10_000


def _jobs(env: StreamExecutionEnvironment, folder: str) -> dict:
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(_ts)
    keyed = env.read_files(folder, "csv").assign_timestamps_and_watermarks(strategy).key_by(_user)
    tumbling = TumblingEventTimeWindows.of(Time.seconds(10))
    return {
        "columnar_sum": keyed.window(tumbling).sum("qty"),
        "heap_max": keyed.window(tumbling).max("qty"),
        "heap_sum_lateness": keyed.window(tumbling).allowed_lateness(Time.seconds(1)).sum("qty"),
        "sliding_min_by": keyed.window(SlidingEventTimeWindows.of(Time.seconds(10), Time.seconds(5))).min_by("qty"),
        "session_sum": keyed.window(EventTimeSessionWindows.with_gap(Time.seconds(10))).sum("qty"),
        "general_min": keyed.window(tumbling).evictor(CountEvictor.of(100)).min("qty"),
        "general_max_by": keyed.window(EventTimeSessionWindows.with_dynamic_gap(_gap)).max_by("qty"),
        "rolling_sum": keyed.sum("qty"),
    }


def test_the_jobs_cover_every_variant_that_folds_built_in_aggregates() -> None:
    tumbling = TumblingEventTimeWindows.of(Time.seconds(10))
    variant = lambda assigner, kind, **kw: window_operator_variant(  # noqa: E731
        assigner, incremental_aggregate=builtin_aggregation(kind, "qty"), specialized=True, **kw)
    assert variant(tumbling, "sum") is WindowOperatorVariant.SLICING_COLUMNAR
    assert variant(tumbling, "max") is WindowOperatorVariant.SLICING
    assert variant(EventTimeSessionWindows.with_gap(Time.seconds(10)), "sum") is WindowOperatorVariant.SESSION
    assert variant(tumbling, "min", evictor=CountEvictor.of(100)) is WindowOperatorVariant.GENERAL
    assert variant(EventTimeSessionWindows.with_dynamic_gap(_gap), "max_by") is WindowOperatorVariant.GENERAL


def _run(runtime: str, folder: str) -> tuple[dict, list, int]:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime(runtime)
    got, result = env.execute_and_collect_streams(_jobs(env, folder))
    order = lambda rows: sorted(rows, key=lambda r: json.dumps(r, sort_keys=True))  # noqa: E731
    dead = order([(d["value"], d["error"], d["stage"]) for d in result.dead_letters])
    return {name: order(rows) for name, rows in got.items()}, dead, result.dead_letter_count


@pytest.fixture
def csv_folder(tmp_path):
    (tmp_path / "events.csv").write_text(CSV)
    return str(tmp_path)


def _expect_local(results: dict, dead: list, count: int) -> None:
    a_first, b_first, c_text = {"user": "a", "qty": 1, "ts": 1000}, {"user": "b", "qty": 4, "ts": 2500}, BAD[1]
    results = {name: sorted(rows, key=lambda r: (r["user"], r["ts"])) for name, rows in results.items()}
    # the good records alone: a's qty 1 and 2, b's 4 and 5; c's text is compared, never summed
    assert results["columnar_sum"] == [{**a_first, "qty": 3}, {**b_first, "qty": 9}]
    assert results["heap_sum_lateness"] == results["columnar_sum"] == results["session_sum"]
    assert results["heap_max"] == [{**a_first, "qty": 2}, {**b_first, "qty": 5}, c_text]
    assert results["general_min"] == [a_first, b_first, c_text]
    assert results["general_max_by"] == [{"user": "a", "qty": 2, "ts": 4000}, {"user": "b", "qty": 5, "ts": 3500},
                                         c_text]
    # two sliding windows hold each record: [-5 s, 5 s) and [0, 10 s)
    assert results["sliding_min_by"] == [a_first, a_first, b_first, b_first, c_text, c_text]
    assert results["rolling_sum"] == [a_first, {**a_first, "qty": 3}, b_first, {**b_first, "qty": 9}]
    # the empty field once per consumer of the keyed stream (8), the text once per sum (4)
    assert count == len(dead) == 8 + 4
    reasons = {(json.dumps(v, sort_keys=True), e, s) for v, e, s in dead}
    assert reasons == {
        (json.dumps(BAD[0], sort_keys=True),
         f"MalformedRecordError: field 'qty' of the record is None (empty), {kind} needs {needs}", "aggregate")
        for kind, needs in (("sum", "a number"), ("max", _ORDERED), ("min_by", _ORDERED), ("min", _ORDERED),
                            ("max_by", _ORDERED))
    } | {
        (json.dumps(BAD[1], sort_keys=True),
         "MalformedRecordError: field 'qty' of the record is 'abc' (str), sum needs a number", "aggregate")
    }


_ORDERED = "a number, a date, a time or a str"


def test_the_local_runtime_dead_letters_records_whose_aggregated_field_is_empty_or_not_a_number(csv_folder):
    _expect_local(*_run("local", csv_folder))


def test_the_spark_runtime_dead_letters_the_same_records_and_gives_the_same_results(spark, csv_folder):
    on_spark = _run("spark", csv_folder)
    _expect_local(*on_spark)
    assert on_spark == _run("local", csv_folder)


def _parquet_run(runtime: str, folder: str) -> tuple[dict, list]:
    """The column path's shape (engine/runtime/spark/column_path.py): Parquet, a field timestamp assigner, a
    field key and a built-in aggregate of a dict key; a read holding a null takes the element path."""
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime(runtime)
    keyed = (env.read_files(folder, "parquet")
             .assign_timestamps_and_watermarks(WatermarkStrategy.for_monotonous_timestamps()
                                               .with_timestamp_assigner("ts"))
             .key_by("user"))
    tumbling = TumblingEventTimeWindows.of(Time.seconds(10))
    got, result = env.execute_and_collect_streams({"sum": keyed.window(tumbling).sum("qty"),
                                                   "max": keyed.window(tumbling).max("qty")})
    dead = sorted((json.dumps(d["value"], sort_keys=True), d["error"], d["stage"]) for d in result.dead_letters)
    return {name: sorted(rows, key=repr) for name, rows in got.items()}, dead


def test_a_null_in_a_parquet_column_the_column_path_would_fold_is_a_dead_letter_on_both_runtimes(spark, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"user": "a", "qty": 1, "ts": 1000}, {"user": "a", "qty": None, "ts": 2000},
            {"user": "b", "qty": 4, "ts": 2500}, {"user": "a", "qty": 2, "ts": 4000}]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "events.parquet")
    on_spark = _parquet_run("spark", str(tmp_path))
    assert on_spark == _parquet_run("local", str(tmp_path))
    results, dead = on_spark
    assert results == {"sum": [{"user": "a", "qty": 3, "ts": 1000}, {"user": "b", "qty": 4, "ts": 2500}],
                       "max": [{"user": "a", "qty": 2, "ts": 1000}, {"user": "b", "qty": 4, "ts": 2500}]}
    reason = "MalformedRecordError: field 'qty' of the record is None (empty), "
    assert dead == sorted((json.dumps(rows[1], sort_keys=True), reason + f"{kind} needs {needs}", "aggregate")
                          for kind, needs in (("sum", "a number"), ("max", _ORDERED)))


def _jsonl_run(runtime: str, folder: str) -> tuple[dict, list]:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime(runtime)
    keyed = env.read_files(folder, "jsonl").assign_timestamps_and_watermarks(
        WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner("ts")).key_by("user")
    tumbling = TumblingEventTimeWindows.of(Time.seconds(10))
    got, result = env.execute_and_collect_streams({"sum": keyed.window(tumbling).sum("qty"),
                                                   "min_by": keyed.window(tumbling).min_by("qty"),
                                                   "rolling_max": keyed.max("qty")})
    dead = sorted((json.dumps(d["value"], sort_keys=True), d["error"], d["stage"]) for d in result.dead_letters)
    return {name: sorted(rows, key=repr) for name, rows in got.items()}, dead


def test_a_record_without_the_aggregated_field_is_a_dead_letter_on_both_runtimes(spark, tmp_path):
    """Before, a JSON line lacking the summed key failed the whole job with a JobDefinitionError ("`field` does
    not exist in the element"), on both runtimes; now it is a malformed record like an empty cell."""
    rows = [{"user": "a", "qty": 1, "ts": 1000}, {"user": "a", "ts": 2000}, {"user": "b", "qty": 4, "ts": 2500},
            {"user": "a", "qty": 2, "ts": 4000}]
    (tmp_path / "events.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    local = _jsonl_run("local", str(tmp_path))
    assert _jsonl_run("spark", str(tmp_path)) == local
    results, dead = local
    assert results == {"sum": [{"user": "a", "qty": 3, "ts": 1000}, {"user": "b", "qty": 4, "ts": 2500}],
                       "min_by": [{"user": "a", "qty": 1, "ts": 1000}, {"user": "b", "qty": 4, "ts": 2500}],
                       "rolling_max": sorted([{"user": "a", "qty": 1, "ts": 1000}, {"user": "b", "qty": 4, "ts": 2500},
                                              {"user": "a", "qty": 2, "ts": 1000}], key=repr)}
    assert dead == sorted((json.dumps(rows[1], sort_keys=True),
                           f"MalformedRecordError: the record has no field 'qty', {kind} needs {needs}", "aggregate")
                          for kind, needs in (("sum", "a number"), ("min_by", _ORDERED), ("max", _ORDERED)))


def test_a_json_boolean_is_no_number_for_sum_but_min_by_and_max_order_it_on_both_runtimes(spark, tmp_path):
    """Before, ``sum`` of 5, true and false gave 6 (a bool is a Python int); Flink's SumAggregator has no
    Boolean.  ``min``/``max`` order bools (False < True), as Java's Boolean.compareTo does."""
    rows = [{"user": "a", "qty": 5, "ts": 1000}, {"user": "a", "qty": True, "ts": 2000},
            {"user": "a", "qty": False, "ts": 3000}]
    (tmp_path / "events.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    local = _jsonl_run("local", str(tmp_path))
    assert _jsonl_run("spark", str(tmp_path)) == local
    results, dead = local
    assert results["sum"] == [{"user": "a", "qty": 5, "ts": 1000}]
    assert results["min_by"] == [{"user": "a", "qty": False, "ts": 3000}]
    assert dead == sorted((json.dumps(r, sort_keys=True),
                           f"MalformedRecordError: field 'qty' of the record is {r['qty']!r} (bool), sum needs a number",
                           "aggregate") for r in rows[1:])
