"""An unbounded source with nothing to read costs next to no CPU (issue 17, found by a user: a job on a live feed
kept a core busy between records, because any runnable source counted as progress and the runtime's idle
back-off, ``_IDLE_SLEEP_MIN_S`` to ``_IDLE_SLEEP_MAX_S``, was never reached)."""

from __future__ import annotations

import time

import psutil

from engine import StreamExecutionEnvironment, Time, TumblingEventTimeWindows, WatermarkStrategy
from engine.io import GeneratorSource
from engine.io.sink import PrintSink
from engine.runtime.local.runtime import LocalRuntime


def test_a_job_waiting_on_a_live_feed_backs_off_instead_of_polling() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    # a live feed whose first record is an hour away: every read finds nothing
    source = GeneratorSource(num_splits=4, events_per_split=None, live=True,
                             start_timestamp_ms=int(time.time() * 1000) + 3_600_000)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, ts: e["ts"])
    (env.from_source(source, strategy).key_by(lambda e: e["user_id"])
        .window(TumblingEventTimeWindows.of(Time.seconds(10))).reduce(lambda a, b: a).sink_to(PrintSink()))
    client = LocalRuntime(env).submit("idle live feed", list(env._sinks))
    try:
        time.sleep(1.0)
        process = psutil.Process()
        before, started = process.cpu_times(), time.monotonic()
        time.sleep(3.0)
        after, elapsed = process.cpu_times(), time.monotonic() - started
        share = (after.user + after.system - before.user - before.system) / elapsed
        assert client.status().state == "running" and client.status().records_in == 0
        # polling flat out took a whole core (0.5 of one even on a host busy with other work); backing off
        # between 1 and 20 ms takes about 1 %
        assert share < 0.15, f"the idle job used {share:.0%} of a core"
    finally:
        client.cancel()
        client.wait(60)
