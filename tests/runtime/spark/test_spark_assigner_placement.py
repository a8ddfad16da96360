"""On Spark, an assigner away from the source is refused (partial), and the refusal says what to write instead.

A new user's first PyFlink-style program reads raw lines, parses them with ``map`` and then calls
``assign_timestamps_and_watermarks``; Spark generates watermarks per split as the source reads it, so that is
refused before anything runs -- with the rewrite that does run: the strategy given to ``from_source``.
"""

from __future__ import annotations

import pytest

from engine import Duration, StreamExecutionEnvironment, Time, TumblingEventTimeWindows, WatermarkStrategy
from engine.errors import JobDefinitionError


def _ts(e, _):
    return e[1]


def test_an_assigner_after_a_map_is_refused_naming_the_rewrite(spark) -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime("spark")
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(1)).with_timestamp_assigner(_ts)
    lines = env.from_collection(["a,1000", "b,2000", "a,12000"])
    (lines.map(lambda s: (s.split(",")[0], int(s.split(",")[1])))
     .assign_timestamps_and_watermarks(strategy)
     .key_by(lambda e: e[0]).window(TumblingEventTimeWindows.of(Time.seconds(10))).sum(1).print())
    with pytest.raises(JobDefinitionError) as refused:
        env.execute("assigner after map")
    message = str(refused.value)
    assert "must follow the source directly" in message and "from_source(source, strategy" in message, message
