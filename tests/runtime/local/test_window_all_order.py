"""``window_all`` results come back in window order at any parallelism (issue 19).

Flink runs windowAll as a non-parallel operator (parallelism 1), and its collect sink is non-parallel too, so
``execute_and_collect`` gives the windows in the order they fired.  The local runtime ran the collect target at
the job's parallelism: the window results were dealt round-robin to its subtasks and came back one subtask's
share after another (at parallelism 2 the odd windows first, then the even ones).
"""

from __future__ import annotations

import pytest

from engine import (
    ProcessWindowFunction,
    StreamExecutionEnvironment,
    Time,
    TumblingEventTimeWindows,
    WatermarkStrategy,
)

EVENTS = [(f"k{i % 7}", 1, i * 1_000) for i in range(200)]  # 20 windows of 10 s, 10 records each


def _windowed(parallelism: int):
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, _: e[2])
    events = env.from_collection(EVENTS).assign_timestamps_and_watermarks(strategy)
    return env, events.window_all(TumblingEventTimeWindows.of(Time.seconds(10)))


class Bounds(ProcessWindowFunction):
    def process(self, key, context, elements):
        yield (context.window().start, len(list(elements)))


@pytest.mark.parametrize("parallelism", [1, 2, 4])
def test_window_all_sums_are_collected_in_window_order(parallelism: int) -> None:
    env, windowed = _windowed(parallelism)
    out = windowed.sum(1).execute_and_collect()
    # sum keeps the window's first record with the summed field
    assert out == [("k" + str(w % 7), 10, w * 1_000) for w in range(0, 200, 10)]


@pytest.mark.parametrize("parallelism", [2, 4])
def test_window_all_process_results_are_collected_in_window_order(parallelism: int) -> None:
    env, windowed = _windowed(parallelism)
    got, _ = env.execute_and_collect_streams({"bounds": windowed.process(Bounds())})
    assert got["bounds"] == [(start, 10) for start in range(0, 200_000, 10_000)]
