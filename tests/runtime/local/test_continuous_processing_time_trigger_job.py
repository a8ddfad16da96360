"""A job with ContinuousProcessingTimeTrigger on an event-time window runs to its end (issue 19).

The local runtime hung on it: the trigger's timer, capped at the event-time window's end, was due at once and
registered itself again at the same time (engine/windowing/triggers.py says why).  Now the window fires every
interval of processing time while records arrive; at the end of input the watermark's jump to MAX purges the
window through its cleanup timer, and the pending processing-time timer does not fire (Flink's behaviour:
processing-time timers do not fire once the input has ended).
"""

from __future__ import annotations

import itertools

import pytest

from engine import (
    ContinuousProcessingTimeTrigger,
    StreamExecutionEnvironment,
    Time,
    TumblingEventTimeWindows,
    WatermarkStrategy,
)
from engine.clock import ManualClock

EVENTS = [("a", i, i * 1_000) for i in range(1, 13)]  # all in the event-time window [0, 60 s)
PREFIX_SUMS = list(itertools.accumulate(v for _, v, _ in EVENTS))


def _job(env: StreamExecutionEnvironment) -> list:
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, _: e[2])
    return (env.from_collection(EVENTS).assign_timestamps_and_watermarks(strategy)
            .key_by(lambda e: e[0]).window(TumblingEventTimeWindows.of(Time.minutes(1)))
            .trigger(ContinuousProcessingTimeTrigger.of(Time.seconds(1))).sum(1).execute_and_collect())


@pytest.mark.timeout(120)
def test_the_window_fires_every_second_of_simulated_processing_time_and_the_end_of_input_purges_it():
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    env.set_runtime_option("bundle_size", 1)  # one record per scheduling round
    env.set_clock(ManualClock(1_000_000))  # processing time far past the window's end (59 999)
    env.set_runtime_option("clock_step_ms", 250)  # each round moves processing time by 250 ms
    out = _job(env)
    # the first record comes in at 1 000 000, so firings at 1 001 000, 1 002 000 and 1 003 000, four rounds
    # (records) apart: the sums of records 1-3, 1-7 and 1-11.  Record 12 arrives after the last firing and
    # the end of input purges the window without firing it: 78 is never emitted, as in Flink.
    assert [v for _, v, _ in out] == [6, 28, 66]
    assert {(k, ts) for k, _, ts in out} == {("a", 1_000)}  # sum keeps the window's first record
    assert env.get_last_result().metrics.get("num_late_records_dropped", 0) == 0


@pytest.mark.timeout(120)
def test_with_the_real_clock_a_bounded_job_ends_and_each_firing_sums_a_prefix_of_the_input():
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime_option("bundle_size", 1)  # many scheduling rounds, each advancing processing time
    out = _job(env)
    sums = [v for _, v, _ in out]
    assert all(s in PREFIX_SUMS for s in sums) and sums == sorted(sums)
    assert env.get_last_result().dead_letter_count == 0

