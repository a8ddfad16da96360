"""A raising key selector gives the same results and the same dead letters on Spark as locally (issue 19).

Flink's ``keyBy`` calls the selector on every record, whatever consumes the keyed stream; a record it
rejects is a dead letter (stage ``key_selector``, the exception's type and message) and the job goes on.
Spark called the selector only for a keyed window, so a keyed stream feeding a map or a sink kept the
record, keyless, where the local runtime dead-letters it.
"""

from __future__ import annotations

import json

import pytest

from engine.api.environment import StreamExecutionEnvironment
from engine.api.time import Time
from engine.watermarks.strategy import WatermarkStrategy
from engine.windowing.assigners import TumblingEventTimeWindows

pytestmark = pytest.mark.spark

EVENTS = [{"k": "a", "v": 1, "t": 1_000}, {"v": 2, "t": 2_000}, {"k": "b", "v": 3, "t": 3_000},
          {"k": "a", "v": 4, "t": 4_000}, {"key": "c", "v": 5, "t": 5_000}]


def _ts(e, _):
    return e["t"]


def _key(e):
    return e["k"]


def _v(e):
    return e["v"]


def _add(a, b):
    return {**a, "v": a["v"] + b["v"]}


def _run(runtime: str, parallelism: int) -> tuple[dict[str, list], list, int]:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime(runtime)
    env.set_parallelism(parallelism)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(_ts)
    keyed = env.from_collection(EVENTS).assign_timestamps_and_watermarks(strategy).key_by(_key)
    streams = {"mapped": keyed.map(_v),
               "windowed": keyed.window(TumblingEventTimeWindows.of(Time.minutes(1))).reduce(_add)}
    got, result = env.execute_and_collect_streams(streams)
    order = lambda rows: sorted(rows, key=lambda r: json.dumps(r, sort_keys=True))  # noqa: E731
    dead = order([(d["value"], d["error"], d["stage"]) for d in result.dead_letters])
    return {name: order(rows) for name, rows in got.items()}, dead, result.dead_letter_count


@pytest.mark.parametrize("parallelism", [1, 2])
def test_both_runtimes_dead_letter_what_the_key_selector_rejects_and_keep_the_rest(spark, parallelism):
    local = _run("local", parallelism)
    on_spark = _run("spark", parallelism)
    results, dead, count = local
    assert results == {"mapped": [1, 3, 4],
                       "windowed": [{"k": "a", "t": 1_000, "v": 5}, {"k": "b", "t": 3_000, "v": 3}]}
    # the two rejected records, once per keyed consumer (the map's and the window's edge each key them)
    rejected = [({"key": "c", "t": 5_000, "v": 5}, "KeyError: 'k'", "key_selector"),
                ({"t": 2_000, "v": 2}, "KeyError: 'k'", "key_selector")]
    assert dead == sorted(rejected * 2, key=lambda r: json.dumps(r, sort_keys=True)) and count == 4
    assert on_spark == local


UNHASHABLE = [{"k": "a", "v": 1, "t": 1_000}, {"k": ["x"], "v": 2, "t": 2_000}, {"k": "b", "v": 3, "t": 3_000},
              {"k": {"y": 1}, "v": 4, "t": 4_000}, {"k": "a", "v": 5, "t": 5_000}]


def _unhashable_run(runtime: str, folder: str, parallelism: int) -> tuple[dict, list]:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime(runtime)
    env.set_parallelism(parallelism)
    keyed = env.read_files(folder, "jsonl").assign_timestamps_and_watermarks(
        WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner("t")).key_by("k")
    tumbling = TumblingEventTimeWindows.of(Time.seconds(10))
    got, result = env.execute_and_collect_streams({"sum": keyed.window(tumbling).sum("v"),
                                                   "max": keyed.window(tumbling).max("v"), "rolling": keyed.sum("v")})
    dead = sorted((json.dumps(d["value"], sort_keys=True), d["error"], d["stage"]) for d in result.dead_letters)
    return {name: sorted(rows, key=repr) for name, rows in got.items()}, dead


@pytest.mark.parametrize("parallelism", [1, 2])
def test_a_key_field_holding_a_list_or_a_dict_is_a_dead_letter_on_both_runtimes(spark, tmp_path, parallelism):
    """A JSON field holding a list or an object, keyed by: it cannot be a key, and the job failed (a
    JobDefinitionError "must be hashable" per record, or a bare TypeError in the window's dict), on both runtimes."""
    (tmp_path / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in UNHASHABLE))
    local = _unhashable_run("local", str(tmp_path), parallelism)
    assert _unhashable_run("spark", str(tmp_path), parallelism) == local
    results, dead = local
    assert results["sum"] == [{"k": "a", "v": 6, "t": 1_000}, {"k": "b", "v": 3, "t": 3_000}]
    assert results["max"] == [{"k": "a", "v": 5, "t": 1_000}, {"k": "b", "v": 3, "t": 3_000}]
    assert results["rolling"] == sorted([{"k": "a", "v": 1, "t": 1_000}, {"k": "b", "v": 3, "t": 3_000},
                                         {"k": "a", "v": 6, "t": 1_000}], key=repr)
    reasons = {"list": "MalformedRecordError: its key ['x'] (list) cannot be a key: it is not hashable (key by a str, "
                       "a number or a tuple)",
               "dict": "MalformedRecordError: its key {'y': 1} (dict) cannot be a key: it is not hashable (key by a "
                       "str, a number or a tuple)"}
    # one dead letter per consumer of the keyed stream (3) and bad record (2)
    assert dead == sorted((json.dumps(e, sort_keys=True), reasons[type(e["k"]).__name__], "key_selector")
                          for e in (UNHASHABLE[1], UNHASHABLE[3]) for _ in range(3))
