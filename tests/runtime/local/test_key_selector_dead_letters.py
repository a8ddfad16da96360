"""A key selector that raises on a record makes that record a dead letter wherever the stream is keyed (issue 19).

Flink's ``keyBy`` calls the selector on every record to pick its key group, whatever the parallelism and
whatever consumes the keyed stream.  Sluice sends such a record to the dead-letter output (stage
``key_selector``, the exception's type and message) and goes on with the others.  The window operator did so,
but a keyed stream feeding anything else (a map, a sink) at parallelism 1 never called the selector: the record
went on with no key, and the job's results depended on its parallelism.
"""

from __future__ import annotations

import pytest

from engine import StreamExecutionEnvironment, Time, TumblingEventTimeWindows, WatermarkStrategy

EVENTS = [{"k": "a", "v": 1, "t": 1_000}, {"v": 2, "t": 2_000}, {"k": "b", "v": 3, "t": 3_000},
          {"k": "a", "v": 4, "t": 4_000}]
BAD = {"v": 2, "t": 2_000}
DEAD = [{"value": BAD, "error": "KeyError: 'k'", "stage": "key_selector"}]


def _events(parallelism: int):
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, _: e["t"])
    return env, env.from_collection(EVENTS).assign_timestamps_and_watermarks(strategy)


@pytest.mark.parametrize("parallelism", [1, 2, 4])
def test_a_keyed_stream_into_a_map_dead_letters_the_record_its_selector_rejects(parallelism: int) -> None:
    env, events = _events(parallelism)
    out = events.key_by(lambda e: e["k"]).map(lambda e: e["v"]).execute_and_collect()
    assert sorted(out) == [1, 3, 4]
    result = env.get_last_result()
    assert result.dead_letters == DEAD
    assert result.dead_letter_count == 1 == result.metrics["num_dead_letter_records"]


@pytest.mark.parametrize("parallelism", [1, 3])
def test_a_keyed_stream_collected_directly_dead_letters_the_record_its_selector_rejects(parallelism: int) -> None:
    env, events = _events(parallelism)
    out = events.key_by(lambda e: e["k"]).execute_and_collect()
    assert sorted(out, key=lambda e: e["t"]) == [e for e in EVENTS if e is not EVENTS[1]]
    assert env.get_last_result().dead_letters == DEAD


@pytest.mark.parametrize("parallelism", [1, 2])
def test_a_keyed_window_dead_letters_the_record_once(parallelism: int) -> None:
    env, events = _events(parallelism)
    out = (events.key_by(lambda e: e["k"]).window(TumblingEventTimeWindows.of(Time.minutes(1)))
           .reduce(lambda a, b: {**a, "v": a["v"] + b["v"]}).execute_and_collect())
    assert sorted(out, key=lambda e: e["k"]) == [{"k": "a", "v": 5, "t": 1_000}, {"k": "b", "v": 3, "t": 3_000}]
    result = env.get_last_result()
    assert result.dead_letters == DEAD and result.dead_letter_count == 1
