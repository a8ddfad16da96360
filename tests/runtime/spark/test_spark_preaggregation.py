"""Pre-aggregation in Spark SQL gives exactly the element path's results (engine/runtime/spark/preaggregation.py).

The comparison is Spark with pre-aggregation against Spark without it, on input built to hit every
rule: keys spread over several splits (the partial must carry the first element across channels),
heavy disorder with allowed lateness and a side output (panes behind W(n-1) take the element
path), fields that are not plain ints (floats, bools, huge ints: element path), tuple and dict
records, tumbling and sliding windows with a slide that does not divide the size.
"""

from __future__ import annotations

import random

from hypothesis import given, settings, strategies as st

from engine.api.environment import StreamExecutionEnvironment
from engine.api.functions import OutputTag
from engine.api.time import Duration, Time
from engine.runtime.spark.preaggregation import PreAggregation, preaggregation_for
from engine.watermarks.strategy import WatermarkStrategy
from engine.windowing.assigners import SlidingEventTimeWindows, TumblingEventTimeWindows
from engine.windowing.evictors import CountEvictor
from engine.windowing.triggers import CountTrigger, EventTimeTrigger
from window_jobs import SplitCollection


@settings(max_examples=200, deadline=None)
@given(size=st.integers(1, 50), slide=st.integers(1, 50), offset=st.integers(0, 49), ts=st.integers(-500, 500))
def test_pane_and_oldest_window_arithmetic_agree_with_the_assigner(size, slide, offset, ts):
    if slide > size:
        slide = size
    offset %= slide
    pre = PreAggregation("sum", 0, size, slide, offset)
    assigner = SlidingEventTimeWindows.of(Time.milliseconds(size), Time.milliseconds(slide), Time.milliseconds(offset))
    windows = assigner.assign_windows(None, ts, None)
    assert pre.oldest_window_max_timestamp(ts) == min(w.max_timestamp() for w in windows)
    pane = pre.pane_start(ts)
    # every timestamp of the pane belongs to exactly the same windows
    for other in (pane, pane + pre.pane - 1):
        assert set(assigner.assign_windows(None, other, None)) == set(windows)


def _node(windowed):
    return windowed._node


def test_only_builtin_sum_min_max_with_the_default_trigger_and_no_evictor_qualify():
    env = StreamExecutionEnvironment.get_execution_environment()
    keyed = env.from_collection([("a", 1, 1)]).assign_timestamps_and_watermarks(
        WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, ts: e[2])).key_by(lambda e: e[0])
    tumbling = TumblingEventTimeWindows.of(Time.seconds(10))
    late_sum = keyed.window(tumbling).allowed_lateness(Time.seconds(1)).sum(2)
    assert preaggregation_for(_node(late_sum)) == PreAggregation("sum", 2, 10_000, 10_000, 0)
    # a sum the columnar layout takes: the reading tasks fold it, Spark SQL does not (preaggregation.py)
    assert preaggregation_for(_node(keyed.window(tumbling).sum(2))) == PreAggregation(
        "sum", 2, 10_000, 10_000, 0, sql=False)
    assert preaggregation_for(_node(keyed.window(SlidingEventTimeWindows.of(Time.seconds(15), Time.seconds(10)))
                                    .sum(2))) == PreAggregation("sum", 2, 15_000, 10_000, 0, sql=False)
    assert preaggregation_for(_node(keyed.window(tumbling).trigger(EventTimeTrigger.create()).max(2))).kind == "max"
    assert preaggregation_for(_node(keyed.window(SlidingEventTimeWindows.of(Time.seconds(15), Time.seconds(10))).min(2))) \
        == PreAggregation("min", 2, 15_000, 10_000, 0)
    for windowed in (keyed.window(tumbling).min_by(2), keyed.window(tumbling).reduce(lambda a, b: a),
                     keyed.window(tumbling).trigger(CountTrigger.of(2)).sum(2),
                     keyed.window(tumbling).evictor(CountEvictor.of(2)).sum(2)):
        assert preaggregation_for(_node(windowed)) is None


def test_the_preaggregation_and_the_window_operator_ask_the_same_predicate():
    """A window Spark SQL pre-aggregates is exactly one the heap-layout slicing operator runs, and one only the
    reading tasks pre-aggregate is one the columnar layout folds: never one whose elements the general operator
    needs."""
    from engine.graph.operator_factory import build_window_operator
    from engine.windowing.slicing import SlicingWindowOperator

    env = StreamExecutionEnvironment.get_execution_environment()
    keyed = env.from_collection([("a", 1, 1)]).assign_timestamps_and_watermarks(
        WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, ts: e[2])).key_by(lambda e: e[0])
    tumbling = TumblingEventTimeWindows.of(Time.seconds(10))
    sliding = SlidingEventTimeWindows.of(Time.seconds(15), Time.seconds(10))
    late = OutputTag("late")
    windowed_streams = [
        keyed.window(tumbling).sum(2), keyed.window(sliding).sum(2), keyed.window(tumbling).min(2),
        keyed.window(sliding).max(2), keyed.window(tumbling).allowed_lateness(Time.seconds(1)).sum(2),
        keyed.window(sliding).allowed_lateness(Time.seconds(1)).side_output_late_data(late).sum(2),
        keyed.window(tumbling).min_by(2), keyed.window(tumbling).reduce(lambda a, b: a),
        keyed.window(tumbling).trigger(CountTrigger.of(2)).sum(2), keyed.window(tumbling).evictor(CountEvictor.of(2)).sum(2),
    ]
    in_sql = in_tasks = 0
    for windowed in windowed_streams:
        node = _node(windowed)
        op = build_window_operator(node)
        heap_slicing = type(op) is SlicingWindowOperator  # not its columnar subclass
        pre = preaggregation_for(node)
        if pre is not None and pre.sql:
            in_sql += 1
            assert heap_slicing, node
        elif pre is not None:
            in_tasks += 1
            assert isinstance(op, SlicingWindowOperator) and not heap_slicing, node
    assert in_sql == 4  # min, max and the two sums with allowed lateness
    assert in_tasks == 2  # the two sums the columnar layout takes


def _events(seed: int) -> list[list]:
    rng = random.Random(seed)
    splits = []
    for s in range(3):
        t = rng.randrange(0, 2000)
        rows = []
        for i in range(60):
            t += rng.randrange(0, 900)
            ts = max(0, t - (rng.randrange(0, 12_000) if rng.random() < 0.3 else 0))
            amount = rng.choice([rng.randrange(1, 50)] * 6 + [1.5, True, 2**40])
            key = f"k{rng.randrange(4)}"  # every key in every split
            rows.append((key, ts, amount, f"s{s}-{i}") if s != 1 else {"k": key, "ts": ts, "n": amount, "id": f"s{s}-{i}"})
        splits.append(rows)
    return splits


def _key(e):
    return e["k"] if isinstance(e, dict) else e[0]


def _ts(e, _):
    return e["ts"] if isinstance(e, dict) else e[1]


def _as_tuple(e):
    return (e["k"], e["ts"], e["n"], e["id"]) if isinstance(e, dict) else e


def _run(splits, preaggregation: bool, parallelism: int):
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime("spark")
    env.set_parallelism(parallelism)
    env.set_max_parallelism(8)
    env.set_runtime_option("epoch_records", 12)
    env.set_runtime_option("preaggregation", preaggregation)
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(1)).with_timestamp_assigner(_ts)
    events = env.from_source(SplitCollection(splits, "m"), strategy, "mixed")
    tuples = events.map(_as_tuple).key_by(_key)
    dicts = events.filter(lambda e: isinstance(e, dict)).key_by(_key)
    late = OutputTag("late")
    lateness = tuples.window(TumblingEventTimeWindows.of(Time.seconds(3))).allowed_lateness(
        Time.seconds(4)).side_output_late_data(late).sum(2)
    streams = {
        "tumbling_sum_late": lateness,
        "late": lateness.get_side_output(late),
        "sliding_min": tuples.window(SlidingEventTimeWindows.of(Time.seconds(5), Time.seconds(2))).min(2),
        "sliding_max_dicts": dicts.window(SlidingEventTimeWindows.of(Time.seconds(6), Time.seconds(3))).max("n"),
        # the columnar layout's sums: folded by the reading tasks only
        "tumbling_sum": tuples.window(TumblingEventTimeWindows.of(Time.seconds(3))).sum(2),
        "sliding_sum_dicts": dicts.window(SlidingEventTimeWindows.of(Time.seconds(5), Time.seconds(2))).sum("n"),
    }
    collected, result = env.execute_and_collect_streams(streams)
    return {name: sorted(values, key=repr) for name, values in collected.items()}, result


def test_preaggregated_results_equal_the_element_paths(spark):
    splits = _events(5)
    element, _ = _run(splits, preaggregation=False, parallelism=2)
    assert element["late"] and element["tumbling_sum_late"] and element["sliding_max_dicts"]
    assert element["tumbling_sum"] and element["sliding_sum_dicts"]
    folded, _ = _run(splits, preaggregation=True, parallelism=3)
    assert folded == element


def _key_unless_multiple_of_7(e):
    """A selector that reads the aggregated field: a record whose amount is a multiple of 7 has no key."""
    amount = e["n"] if isinstance(e, dict) else e[2]
    if type(amount) is int and amount % 7 == 0:
        raise ValueError("a multiple of 7")
    return _key(e)


def _run_field_keyed(splits, runtime: str, preaggregation: bool = True):
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime(runtime)
    env.set_parallelism(2)
    env.set_max_parallelism(8)
    env.set_runtime_option("epoch_records", 12)
    if runtime == "spark":
        env.set_runtime_option("preaggregation", preaggregation)
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(1)).with_timestamp_assigner(_ts)
    tuples = env.from_source(SplitCollection(splits, "m"), strategy, "mixed").map(_as_tuple)
    keyed = tuples.key_by(_key_unless_multiple_of_7)
    streams = {
        "columnar_sum": keyed.window(TumblingEventTimeWindows.of(Time.seconds(4))).sum(2),
        "heap_sum": keyed.window(TumblingEventTimeWindows.of(Time.seconds(4))).allowed_lateness(Time.seconds(2)).sum(2),
        "heap_min": keyed.window(SlidingEventTimeWindows.of(Time.seconds(6), Time.seconds(2))).min(2),
    }
    collected, result = env.execute_and_collect_streams(streams)
    return ({name: sorted(values, key=repr) for name, values in collected.items()},
            sorted(repr(d["value"]) for d in result.dead_letters))


def test_a_partial_is_keyed_as_its_records_even_when_the_selector_reads_the_aggregated_field(spark):
    """A partial record (its first record with the field set to the pane's aggregate) never existed: the selector
    must not be asked to key it.  Sums of 7s and 3s give multiples of 7 the selector rejects, so a window stage
    that keyed partials with the selector would drop whole panes as dead letters (it did, for the reading tasks'
    fold: tests/runtime/spark/test_spark_restart_strategy.py found it)."""
    rng = random.Random(11)
    splits = []
    for s in range(2):
        t, rows = 0, []
        for i in range(80):
            t += rng.randrange(0, 700)
            rows.append((f"k{rng.randrange(3)}", t, rng.choice([3, 4, 7, 14]), f"s{s}-{i}"))
        splits.append(rows)
    local, local_dead = _run_field_keyed(splits, "local")
    assert local["columnar_sum"] and local["heap_sum"] and local["heap_min"] and local_dead
    on_spark, spark_dead = _run_field_keyed(splits, "spark")
    assert on_spark == local
    assert spark_dead == local_dead
