"""Fields instead of functions (ARCHITECTURE section 2): ``key_by("user")``, ``key_by(0)`` and
``with_timestamp_assigner("ts")`` / ``(2)`` give the function form's results on both runtimes, and a record
without the field is a dead letter with the reason, not a crash or a silent drop."""

from __future__ import annotations

import pytest

from engine.api.environment import StreamExecutionEnvironment
from engine.api.time import Time
from engine.errors import JobDefinitionError
from engine.watermarks.strategy import WatermarkStrategy
from engine.windowing.assigners import TumblingEventTimeWindows

pytestmark = pytest.mark.spark

DICTS = [{"user": f"u{i % 5}", "v": 1 + i % 3, "ts": i * 700} for i in range(200)] + [{"v": 9, "ts": 5_000}]
TUPLES = [(f"u{i % 5}", 1 + i % 3, i * 700) for i in range(200)] + [("short",)]


def _run(runtime: str, events: list, key, ts, value) -> tuple[list, list]:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime(runtime)
    env.set_parallelism(2)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(ts)
    stream = (env.from_collection(events).assign_timestamps_and_watermarks(strategy)
              .key_by(key).window(TumblingEventTimeWindows.of(Time.seconds(10))).sum(value))
    collected, result = env.execute_and_collect_streams({"sums": stream}, "fields")
    return sorted(collected["sums"], key=str), sorted((d["stage"].split(":")[0], d["error"].split(":")[0])
                                                      for d in result.dead_letters)


@pytest.mark.parametrize("runtime", ["local", "spark"])
def test_dict_and_tuple_fields_give_the_function_forms_results(runtime, spark):
    by_field, dead = _run(runtime, DICTS, "user", "ts", "v")
    by_function, _ = _run(runtime, DICTS, lambda e: e["user"], lambda e, _ts: e["ts"], "v")
    assert by_field == by_function and len(by_field) == 5 * 14
    assert dead == [("key_selector", "KeyError")]  # the dict without "user"
    by_position, dead = _run(runtime, TUPLES, 0, 2, 1)
    by_lambda, _ = _run(runtime, TUPLES, lambda e: e[0], lambda e, _ts: e[2], 1)
    assert by_position == by_lambda and len(by_position) == 5 * 14
    assert dead == [("timestamp_assigner", "KeyError")]  # the tuple without position 2


def test_a_field_that_is_not_one_is_refused_at_build_time():
    env = StreamExecutionEnvironment.get_execution_environment()
    stream = env.from_collection(DICTS)
    for bad in (-1, True, ""):
        with pytest.raises(JobDefinitionError, match="key_selector"):
            stream.key_by(bad)
    with pytest.raises(JobDefinitionError, match="timestamp_assigner"):
        WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(-3)


def test_a_timestamp_field_may_be_a_zoned_datetime_and_a_naive_one_is_a_dead_letter():
    """A Parquet timestamp column with a time zone reads as an aware datetime: ``with_timestamp_assigner("ts")``
    takes it as epoch ms; a naive one has no zone to convert from, so its record is a dead letter with why."""
    import datetime

    utc = datetime.timezone.utc
    aware = [{"user": "u", "v": 1, "ts": datetime.datetime.fromtimestamp(s, utc)} for s in (1, 2, 11)]
    naive = [{"user": "u", "v": 5, "ts": datetime.datetime(1970, 1, 1, 0, 0, 3)}]
    sums, dead = _run("local", aware + naive, "user", "ts", "v")
    assert [(s["v"], s["ts"]) for s in sums] == [(1, aware[2]["ts"]), (2, aware[0]["ts"])]
    assert dead == [("timestamp_assigner", "ValueError")]
