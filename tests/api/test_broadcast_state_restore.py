"""Broadcast state and a keyed co-process in checkpoints and savepoints on the local runtime: a job restored,
also at another parallelism, commits exactly what an uninterrupted run commits (issue 19).

Both jobs give one answer whatever the interleaving of their inputs and the watermark cadence, so a restored run
(whose records and watermarks interleave differently) must match the uninterrupted one:

- ``limits``: test_broadcast_state.py's LimitCheck (rules versioned by time in broadcast state, items judged by a
  timer at their own time) over 4 colours, 1200 items and 40 rule changes.  A restore at a higher parallelism
  only gives the right alerts if every new subtask got the broadcast state (Flink's rule on rescale): rules
  broadcast before the checkpoint are not read again.
- ``totals``: a KeyedCoProcessFunction summing, per key, amounts from two streams into one ValueState and
  emitting the key's total at an event-time timer at the end of each 1 s period.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from engine import (
    KeyedCoProcessFunction,
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
from test_broadcast_state import RULES_DESCRIPTOR, LimitCheck

COLOURS = ["red", "blue", "green", "grey"]
ITEMS = [(COLOURS[i % 4], 10 * i, (i * 53) % 100) for i in range(1200)]
# a new limit per colour every 1200 ms (the first at 0); the limit cycles through 30..90
RULES = sorted(((c, 1200 * n, 30 + ((n * 7 + k * 13) % 7) * 10) for n in range(10) for k, c in enumerate(COLOURS)),
               key=lambda r: r[1])
LEFT = [(f"k{i % 5}", 7 * i, i % 13) for i in range(700)]
RIGHT = [(f"k{i % 5}", 9 * i, 100 + i % 17) for i in range(540)]


class PeriodTotals(KeyedCoProcessFunction):
    """Per key and 1 s period, the sum of both inputs' amounts, emitted at the period's end."""

    def open(self, runtime_context):
        self.totals = runtime_context.get_map_state(MapStateDescriptor("totals"))
        self.emitted = runtime_context.get_state(ValueStateDescriptor("emitted", default=0))

    def _add(self, value, ctx):
        period_end = (ctx.timestamp() // 1000 + 1) * 1000 - 1
        self.totals.put(period_end, (self.totals.get(period_end) or 0) + value[2])
        ctx.timer_service().register_event_time_timer(period_end)

    def process_element1(self, value, ctx):
        self._add(value, ctx)

    def process_element2(self, value, ctx):
        self._add(value, ctx)

    def on_timer(self, timestamp, ctx):
        self.emitted.update(self.emitted.value() + 1)
        yield [ctx.get_current_key(), timestamp, self.totals.get(timestamp), self.emitted.value()]
        self.totals.remove(timestamp)


def _strategy():
    return WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, ts: e[1])


def build(out: str, kind: str, parallelism: int = 2, storage: str | None = None,
          fault_plan: FaultPlan | None = None) -> StreamExecutionEnvironment:
    env = configured_env(parallelism, storage, fault_plan)
    if kind == "limits":
        items = env.from_source(CollectionSource(ITEMS, num_splits=3)).uid("items") \
            .assign_timestamps_and_watermarks(_strategy())
        rules = env.from_source(CollectionSource(RULES, num_splits=1)).uid("rules") \
            .assign_timestamps_and_watermarks(_strategy()).broadcast(RULES_DESCRIPTOR)
        result = items.key_by(lambda i: i[0]).connect(rules).process(LimitCheck()).uid("limits") \
            .map(lambda a: list(a))
    else:
        left = env.from_source(CollectionSource(LEFT, num_splits=2)).uid("left").assign_timestamps_and_watermarks(
            _strategy())
        right = env.from_source(CollectionSource(RIGHT, num_splits=2)).uid("right") \
            .assign_timestamps_and_watermarks(_strategy())
        result = left.connect(right).key_by(lambda e: e[0], lambda e: e[0]).process(PeriodTotals()).uid("totals")
    result.sink_to(FileSink(out, "jsonl", mode="exactly_once"))
    return env


@pytest.fixture(scope="module")
def golden() -> dict[str, list]:
    return uninterrupted_results(build, ("limits", "totals"))


def test_the_uninterrupted_results_are_the_hand_computed_ones(golden: dict[str, list]) -> None:
    alerts = []
    for colour, ts, amount in ITEMS:
        limit = [lim for c, since, lim in RULES if c == colour and since <= ts][-1]
        if amount > limit:
            alerts.append(["alert", colour, ts, amount, limit])
    assert golden["limits"] == sorted(alerts) and len(alerts) > 100

    totals: dict[tuple[str, int], int] = {}
    for key, ts, amount in LEFT + RIGHT:
        period_end = (ts // 1000 + 1) * 1000 - 1
        totals[key, period_end] = totals.get((key, period_end), 0) + amount
    expected = []
    for key in sorted({k for k, _ in totals}):
        for n, period_end in enumerate(sorted(p for k, p in totals if k == key)):
            expected.append([key, period_end, totals[key, period_end], n + 1])
    assert golden["totals"] == sorted(expected)


@pytest.mark.parametrize("kind", ["limits", "totals"])
@pytest.mark.parametrize("new_parallelism", [1, 2, 3])
def test_restoring_a_retained_checkpoint_commits_what_an_uninterrupted_run_commits(
        golden: dict[str, list], tmp_path: Path, kind: str, new_parallelism: int) -> None:
    assert_restoring_the_latest_checkpoint_commits_the_uninterrupted_results(
        build, golden[kind], tmp_path, kind, fail_at_record=900, new_parallelism=new_parallelism)


@pytest.mark.parametrize("kind", ["limits", "totals"])
def test_stop_with_savepoint_then_restore_at_three_subtasks_commits_what_an_uninterrupted_run_commits(
        golden: dict[str, list], tmp_path: Path, kind: str) -> None:
    assert_stop_with_savepoint_then_restore_commits_the_uninterrupted_results(
        build, golden[kind], tmp_path, kind, stop_after_records=700)
