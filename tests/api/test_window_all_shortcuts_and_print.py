"""``count_window_all`` / ``time_window_all`` on a DataStream and ``print()``'s subtask prefix (issue 19).

Hand-computed windows over all records (one window subtask)::

    count_window_all(3)       1 2 3 | 4 5 6 | 7        -> 6, 15 (7 never fills its window)
    count_window_all(3, 2)    fires every 2nd record with the last 3: [1 2] [2 3 4] [4 5 6]  -> 3, 9, 15
    time_window_all(10 s)     1@1s 2@9s | 3@12s | 4@25s                                       -> 3, 3, 4
    time_window_all(10 s, 5 s)  [-5,5): 1  [0,10): 3  [5,15): 5  [10,20): 3  [20,30): 4  [25,35): 4
"""

from __future__ import annotations

import pytest

from engine import JobDefinitionError, StreamExecutionEnvironment, Time, WatermarkStrategy

TIMED = [(1, 1_000), (2, 9_000), (3, 12_000), (4, 25_000)]


def _env(parallelism: int = 1) -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism)
    return env


def test_count_window_all_tumbles_over_every_record() -> None:
    env = _env()
    result = env.from_collection(list(range(1, 8))).count_window_all(3).reduce(lambda a, b: a + b)
    assert result.execute_and_collect() == [6, 15]


def test_count_window_all_with_a_slide_fires_every_slide_with_the_last_size_records() -> None:
    env = _env()
    result = env.from_collection(list(range(1, 8))).count_window_all(3, 2).reduce(lambda a, b: a + b)
    assert result.execute_and_collect() == [3, 9, 15]


@pytest.mark.parametrize("parallelism", [1, 2])
@pytest.mark.parametrize("slide, expected", [(None, [3, 3, 4]), (Time.seconds(5), [1, 3, 5, 3, 4, 4])])
def test_time_window_all_follows_event_time(parallelism: int, slide, expected: list) -> None:
    env = _env(parallelism)
    stream = env.from_collection(TIMED).assign_timestamps_and_watermarks(
        WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, ts: e[1]))
    result = stream.map(lambda e: e[0]).time_window_all(Time.seconds(10), slide).reduce(lambda a, b: a + b)
    assert sorted(result.execute_and_collect()) == sorted(expected)


def test_count_window_all_refuses_a_size_that_is_not_a_count() -> None:
    env = _env()
    with pytest.raises(JobDefinitionError, match="`size` must be an int >= 1"):
        env.from_collection([1]).count_window_all(0)
    with pytest.raises(JobDefinitionError, match="`slide` must be an int >= 1"):
        env.from_collection([1]).count_window_all(2, 1.5)


def test_print_has_no_prefix_at_parallelism_1_and_the_subtask_number_above(capsys) -> None:
    env = _env(1)
    env.from_collection([1, 2]).map(lambda x: x * 10).print()
    env.execute("one subtask")
    assert capsys.readouterr().out.splitlines() == ["10", "20"]

    env = _env(2)
    env.from_collection([1, 2, 3, 4]).rebalance().map(lambda x: x * 10).print()
    env.execute("two subtasks")
    lines = capsys.readouterr().out.splitlines()
    assert sorted(line.split("> ")[1] for line in lines) == ["10", "20", "30", "40"]
    assert {line.split("> ")[0] for line in lines} == {"1", "2"}  # round-robin: both subtasks print
