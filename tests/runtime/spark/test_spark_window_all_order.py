"""``window_all`` results come back in window order on Spark as on the local runtime (issue 19).

Flink runs windowAll with parallelism 1 and collects through a non-parallel sink, so the results of a
bounded job arrive in window order; both runtimes give that order at any parallelism.
"""

from __future__ import annotations

import pytest

from engine.api.environment import StreamExecutionEnvironment
from engine.api.time import Time
from engine.watermarks.strategy import WatermarkStrategy
from engine.windowing.assigners import TumblingEventTimeWindows

pytestmark = pytest.mark.spark

EVENTS = [(f"k{i % 7}", 1, i * 1_000) for i in range(120)]  # 12 windows of 10 s


def _ts(e, _):
    return e[2]


def _run(runtime: str, parallelism: int) -> list:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime(runtime)
    env.set_parallelism(parallelism)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(_ts)
    return (env.from_collection(EVENTS).assign_timestamps_and_watermarks(strategy)
            .window_all(TumblingEventTimeWindows.of(Time.seconds(10))).sum(1).execute_and_collect())


def test_both_runtimes_collect_window_all_results_in_window_order(spark):
    expected = [("k" + str(w % 7), 10, w * 1_000) for w in range(0, 120, 10)]
    assert _run("local", 2) == expected
    assert _run("spark", 2) == expected
