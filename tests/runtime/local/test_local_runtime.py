"""End-to-end behaviour of jobs on the local runtime: the DataStream API, planner, channels,
key-group exchange, valve and window operator together."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from engine import (
    Duration,
    EventTimeSessionWindows,
    OutputTag,
    ProcessWindowFunction,
    StreamExecutionEnvironment,
    Time,
    TumblingEventTimeWindows,
    WatermarkStrategy,
)


def env_with(parallelism: int = 1, bundle_size: int = 4) -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism)
    env.set_runtime_option("bundle_size", bundle_size)
    return env


def strategy(ooo_ms: int = 0) -> WatermarkStrategy:
    return WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(ooo_ms)).with_timestamp_assigner(
        lambda e, ts: e[2]
    )


EVENTS = [("a", 1, 1_000), ("b", 2, 2_000), ("a", 3, 59_999), ("a", 4, 60_000), ("b", 5, 61_000), ("c", 6, 125_000)]


def tumbling_sums(env: StreamExecutionEnvironment, events: list) -> list:
    return (
        env.from_collection(events)
        .assign_timestamps_and_watermarks(strategy())
        .key_by(lambda e: e[0])
        .window(TumblingEventTimeWindows.of(Time.minutes(1)))
        .sum(1)
        .execute_and_collect()
    )


def test_tumbling_sum_keeps_the_first_element_with_the_summed_field() -> None:
    out = tumbling_sums(env_with(), EVENTS)
    # Flink's sum(1): the window's first element with field 1 replaced by the sum
    assert sorted(out) == [("a", 4, 1_000), ("a", 4, 60_000), ("b", 2, 2_000), ("b", 5, 61_000), ("c", 6, 125_000)]


@pytest.mark.parametrize("parallelism", [1, 2, 3, 5])
def test_results_do_not_depend_on_parallelism(parallelism: int) -> None:
    rng = random.Random(3)
    events = [(f"k{rng.randrange(20)}", rng.randrange(10), i * 500) for i in range(400)]
    expected = sorted(tumbling_sums(env_with(1), events))
    assert sorted(tumbling_sums(env_with(parallelism), events)) == expected
    assert len(expected) > 20


def test_union_of_two_sources_takes_the_minimum_watermark() -> None:
    env = env_with(2)
    fast = env.from_collection([("a", 1, t) for t in range(0, 200_000, 10_000)]).assign_timestamps_and_watermarks(strategy())
    slow = env.from_collection([("a", 100, 5_000)]).assign_timestamps_and_watermarks(strategy())
    out = fast.union(slow).key_by(lambda e: e[0]).window(TumblingEventTimeWindows.of(Time.minutes(1))).sum(1)
    result = out.execute_and_collect()
    # the slow source's record at 5 s is not late: the union's watermark is the min of both inputs
    assert ("a", 106, 0) in result
    assert env.get_last_result().metrics.get("num_late_records_dropped", 0) == 0


def test_late_records_go_to_the_side_output_and_are_not_counted_as_dropped() -> None:
    env = env_with(1, bundle_size=1)
    late = OutputTag("late")
    # the watermark passes 60 s after the second record; the third (t=10 s) is then late for [0, 60 s)
    events = [("a", 1, 1_000), ("a", 2, 70_000), ("a", 3, 10_000)]
    windowed = (env.from_collection(events).assign_timestamps_and_watermarks(strategy())
                .key_by(lambda e: e[0]).window(TumblingEventTimeWindows.of(Time.minutes(1)))
                .side_output_late_data(late).sum(1))
    results, result = env.execute_and_collect_streams({"main": windowed, "late": windowed.get_side_output(late)})
    assert sorted(results["main"]) == [("a", 1, 1_000), ("a", 2, 70_000)]
    assert results["late"] == [("a", 3, 10_000)]
    assert result.metrics.get("num_late_records_dropped", 0) == 0


def test_late_records_without_side_output_are_dropped_and_counted() -> None:
    env = env_with(1, bundle_size=1)
    events = [("a", 1, 1_000), ("a", 2, 70_000), ("a", 3, 10_000)]
    out = (env.from_collection(events).assign_timestamps_and_watermarks(strategy())
           .key_by(lambda e: e[0]).window(TumblingEventTimeWindows.of(Time.minutes(1))).sum(1).execute_and_collect())
    assert sorted(out) == [("a", 1, 1_000), ("a", 2, 70_000)]
    assert env.get_last_result().metrics["num_late_records_dropped"] == 1


def test_records_whose_timestamp_or_key_cannot_be_extracted_become_dead_letters() -> None:
    env = env_with(2)
    events = [("a", 1, 1_000), ("b", 2, "not-a-time"), ("a", 3, 2_000), (None,), ("b", 4, 3_000)]
    out = (env.from_collection(events)
           .assign_timestamps_and_watermarks(strategy())
           .key_by(lambda e: e[0] + "!")  # raises TypeError for the key None
           .window(TumblingEventTimeWindows.of(Time.minutes(1))).sum(1).execute_and_collect())
    assert sorted(out) == [("a", 4, 1_000), ("b", 4, 3_000)]
    result = env.get_last_result()
    assert result.dead_letter_count == 2
    assert {d["value"] for d in result.dead_letters} == {("b", 2, "not-a-time"), (None,)}
    assert all(d["error"] and d["stage"] for d in result.dead_letters)


def test_the_seed_sliding_count_window_sums_22_on_its_third_firing() -> None:
    # seed 000: every 2 elements, the sum of the last 4; arrival order 2,5,7,9,4,2
    env = env_with(1)
    out = (env.from_collection([("u", v) for v in (2, 5, 7, 9, 4, 2)])
           .key_by(lambda e: e[0]).count_window(4, 2).reduce(lambda a, b: (a[0], a[1] + b[1])).execute_and_collect())
    assert [v for _, v in out] == [7, 23, 22]


def test_window_all_sees_every_key_in_one_window() -> None:
    env = env_with(3)
    out = (env.from_collection(EVENTS).assign_timestamps_and_watermarks(strategy())
           .window_all(TumblingEventTimeWindows.of(Time.minutes(1))).sum(1).execute_and_collect())
    assert sorted(out) == [("a", 6, 1_000), ("a", 9, 60_000), ("c", 6, 125_000)]


class SessionBounds(ProcessWindowFunction):
    def process(self, key, context, elements):
        w = context.window()
        yield (key, w.start, w.end, len(list(elements)))


def test_session_windows_merge_across_parallel_channels() -> None:
    env = env_with(3, bundle_size=2)
    events = [("a", 1, t) for t in (0, 10_000, 20_000, 100_000, 105_000)] + [("b", 1, 50_000)]
    out = (env.from_collection(events).assign_timestamps_and_watermarks(strategy(30_000))
           .key_by(lambda e: e[0]).window(EventTimeSessionWindows.with_gap(Time.seconds(30)))
           .process(SessionBounds()).execute_and_collect())
    assert sorted(out) == [("a", 0, 50_000, 3), ("a", 100_000, 135_000, 2), ("b", 50_000, 80_000, 1)]


def test_map_filter_flat_map_chain_before_the_exchange() -> None:
    env = env_with(2)
    out = (env.from_collection(range(10)).map(lambda x: x * 2).filter(lambda x: x % 3 != 0)
           .flat_map(lambda x: [x, -x]).execute_and_collect())
    assert Counter(out) == Counter(v for x in range(10) for v in (2 * x, -2 * x) if (2 * x) % 3 != 0)


def test_the_purchase_demo_job_produces_every_window_kind() -> None:
    from engine.examples import purchases

    env = env_with(2, bundle_size=256)
    config = purchases.PurchaseJobConfig(events_per_split=500)
    results, result = env.execute_and_collect_streams(purchases.build(env, config))
    for name in ("tumbling", "sliding", "session", "count"):
        assert results[name], name
    # generated malformed events (no usable "ts") are dead letters, and the run goes on
    assert result.dead_letter_count > 0
    # tumbling results sum to every well-formed, non-late purchase's quantity
    assert sum(r[1] for r in results["tumbling"]) + sum(r[1] for r in results["late"]) > 0


def test_epoch_mode_processes_each_epoch_under_the_previous_epochs_watermark() -> None:
    # one split, epochs of 2 records, bounded out-of-orderness 0:
    #   epoch 1: t=10s, t=70s        -> watermark after epoch 1 = 70s - 1
    #   epoch 2: t=20s (late: window [0,60s) fired at 70s), t=80s
    # per-bundle watermarks (bundle_size=1) would also drop t=20s; the point here is that a record is
    # judged against the watermark of the END of the previous epoch, never a mid-epoch one:
    #   epoch 1 holds t=70s and t=10s in this order -> t=10s is NOT late in epoch mode (watermark still
    #   at the end of epoch 0), though with per-bundle watermarks it would be.
    events = [("a", 1, 70_000), ("a", 2, 10_000), ("a", 4, 20_000), ("a", 8, 80_000)]

    def run(**options) -> tuple[list, int]:
        env = env_with(1, bundle_size=1)
        for k, v in options.items():
            env.set_runtime_option(k, v)
        out = (env.from_collection(events).assign_timestamps_and_watermarks(strategy())
               .key_by(lambda e: e[0]).window(TumblingEventTimeWindows.of(Time.minutes(1))).sum(1)
               .execute_and_collect())
        return sorted(out), env.get_last_result().metrics.get("num_late_records_dropped", 0)

    per_bundle, dropped_per_bundle = run()
    assert dropped_per_bundle == 2  # t=10s and t=20s arrive after the 70 s watermark
    epoch, dropped_epoch = run(epoch_records=2)
    assert dropped_epoch == 1  # only t=20s: in epoch 2, under the 70 s watermark of epoch 1's end
    assert epoch == [("a", 2, 10_000), ("a", 9, 70_000)]


def test_epoch_records_must_be_a_positive_int() -> None:
    from engine import JobDefinitionError

    env = env_with(1)
    env.set_runtime_option("epoch_records", 0)
    stream = env.from_collection([("a", 1, 0)]).map(lambda e: e)
    with pytest.raises(JobDefinitionError, match="`epoch_records`"):
        stream.execute_and_collect()
