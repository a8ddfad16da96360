"""Keyed process state and timers, and rolling aggregates, in checkpoints and savepoints on the local runtime:
a job restored (also at another parallelism) commits exactly what an uninterrupted run commits.

The process function here gives the same alerts whatever the watermark cadence, so a restored run, whose
records and watermarks interleave differently from the uninterrupted run's, must still match it: a timer at
T alerts when the key had no event in (T - QUIET_MS, T], and by the time the watermark passes T every event
at or before T has arrived (timestamps ascend per split), while later ones are ignored.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from engine import (
    KeyedProcessFunction,
    MapStateDescriptor,
    StreamExecutionEnvironment,
    ValueStateDescriptor,
    WatermarkStrategy,
)
from engine.io.collection_source import CollectionSource
from engine.io.file_sink import FileSink
from engine.runtime.local.faults import FaultPlan
from restore_comparison import (
    assert_restoring_the_latest_checkpoint_commits_the_uninterrupted_results,
    assert_stop_with_savepoint_then_restore_commits_the_uninterrupted_results,
    configured_env,
    uninterrupted_results,
)

QUIET_MS = 1500
# blocks of 20 records (2 s) per key in turn, so each key falls quiet for 6 s after each of its blocks
EVENTS = [(f"k{(i // 20) % 4}", i % 7, 100 * i) for i in range(1200)]


class QuietAlerts(KeyedProcessFunction):
    """(key, alert number, last event time) when a key had no event for QUIET_MS of event time."""

    def open(self, runtime_context):
        self.seen = runtime_context.get_map_state(MapStateDescriptor("seen"))
        self.alerts = runtime_context.get_state(ValueStateDescriptor("alerts", default=0))

    def process_element(self, value, ctx):
        self.seen.put(ctx.timestamp(), value[1])
        ctx.timer_service().register_event_time_timer(ctx.timestamp() + QUIET_MS)

    def on_timer(self, timestamp, ctx):
        since = timestamp - QUIET_MS
        times = list(self.seen.keys())
        for t in times:
            if t <= since:
                self.seen.remove(t)
        if not any(since < t <= timestamp for t in times):
            self.alerts.update(self.alerts.value() + 1)
            yield [ctx.get_current_key(), self.alerts.value(), since]


def build(out: str, kind: str, parallelism: int = 2, storage: str | None = None,
          fault_plan: FaultPlan | None = None) -> StreamExecutionEnvironment:
    env = configured_env(parallelism, storage, fault_plan)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, ts: e[2])
    # alerts: three splits, so the watermark reaching the keyed operator is the minimum of three channels;
    # rolling aggregates depend on the order of each key's records, which only one split fixes
    splits = 3 if kind == "alerts" else 1
    stream = env.from_source(CollectionSource(EVENTS, num_splits=splits)).assign_timestamps_and_watermarks(strategy)
    keyed = stream.key_by(lambda e: e[0])
    if kind == "alerts":
        result = keyed.process(QuietAlerts())
    else:  # a rolling sum and a rolling min_by, one after the other (state in two operators)
        result = keyed.sum(1).map(lambda e: (e[0], e[1], e[2] % 1000)).key_by(0).min_by(2) \
            .map(lambda e: [e[0], e[1], e[2]])
    result.sink_to(FileSink(out, "jsonl", mode="exactly_once"))
    return env


@pytest.fixture(scope="module")
def golden() -> dict[str, list]:
    return uninterrupted_results(build, ("alerts", "rolling"))


def test_the_uninterrupted_alerts_are_the_hand_computed_ones(golden: dict[str, list]) -> None:
    # key k at block b (b % 4 == k) has its last event at 100 * (20 * b + 19); every block but the last of each
    # key is followed by 6 s of quiet, and at the end of input (MAX_WATERMARK) every key's last block alerts too
    expected = []
    for k in range(4):
        blocks = [b for b in range(60) if b % 4 == k]
        expected += [[f"k{k}", n + 1, 100 * (20 * b + 19)] for n, b in enumerate(blocks)]
    assert golden["alerts"] == sorted(expected)


@pytest.mark.parametrize("kind", ["alerts", "rolling"])
@pytest.mark.parametrize("new_parallelism", [2, 3])
def test_restoring_a_retained_checkpoint_commits_what_an_uninterrupted_run_commits(
        golden: dict[str, list], tmp_path: Path, kind: str, new_parallelism: int) -> None:
    assert_restoring_the_latest_checkpoint_commits_the_uninterrupted_results(
        build, golden[kind], tmp_path, kind, fail_at_record=700, new_parallelism=new_parallelism)


@pytest.mark.parametrize("kind", ["alerts", "rolling"])
def test_stop_with_savepoint_then_restore_commits_what_an_uninterrupted_run_commits(
        golden: dict[str, list], tmp_path: Path, kind: str) -> None:
    assert_stop_with_savepoint_then_restore_commits_the_uninterrupted_results(
        build, golden[kind], tmp_path, kind, stop_after_records=500)
