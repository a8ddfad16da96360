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

import tempfile
import time
from pathlib import Path

import pytest

from engine import (
    CheckpointingMode,
    ExternalizedCheckpointRetention,
    KeyedCoProcessFunction,
    ManualClock,
    MapStateDescriptor,
    StreamExecutionEnvironment,
    ValueStateDescriptor,
    WatermarkStrategy,
)
from engine.api.restart import RestartStrategies
from engine.errors import JobFailedError
from engine.io.collection_source import CollectionSource
from engine.io.file_sink import FileSink, read_committed
from engine.runtime.local.faults import Fault, FaultKind, FaultPlan
from engine.runtime.local.runtime import LocalRuntime
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
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism)
    env.set_clock(ManualClock())
    env.set_runtime_option("bundle_size", 16)
    env.set_runtime_option("clock_step_ms", 10)
    env.enable_checkpointing(50, CheckpointingMode.EXACTLY_ONCE)
    env.set_runtime_option("restart_strategy", RestartStrategies.fixed_delay_restart(0, 0))
    if storage is not None:
        config = env.get_checkpoint_config()
        config.set_checkpoint_storage_dir(storage)
        config.set_externalized_checkpoint_retention(ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION)
    if fault_plan is not None:
        env.set_runtime_option("fault_plan", fault_plan)
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
    out = {}
    for kind in ("limits", "totals"):
        folder = tempfile.mkdtemp()
        build(folder, kind).execute(f"golden {kind}")
        out[kind] = sorted(read_committed(folder))
    return out


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
    out, storage = str(tmp_path / "out"), f"file://{tmp_path}/chk"
    with pytest.raises(JobFailedError):
        build(out, kind, storage=storage, fault_plan=FaultPlan([Fault(FaultKind.RECORDS, 900)])).execute("fails")
    (job_dir,) = [p for p in (tmp_path / "chk").iterdir() if p.is_dir()]
    (latest,) = [p for p in job_dir.iterdir() if p.name.startswith("chk-") and (p / "_metadata").exists()]
    assert 0 < len(read_committed(out)) < len(golden[kind])  # failed midway

    resumed = build(out, kind, parallelism=new_parallelism)
    resumed.set_runtime_option("from_savepoint", f"file://{latest}")
    resumed.execute("resumed")
    assert sorted(read_committed(out)) == golden[kind]


@pytest.mark.parametrize("kind", ["limits", "totals"])
def test_stop_with_savepoint_then_restore_at_three_subtasks_commits_what_an_uninterrupted_run_commits(
        golden: dict[str, list], tmp_path: Path, kind: str) -> None:
    out = str(tmp_path / "out")
    env = build(out, kind)
    client = LocalRuntime(env).submit("to be stopped", list(env._sinks))
    while client.status().records_in < 700 and not client.done():
        time.sleep(0.0002)
    uri = client.stop_with_savepoint(f"file://{tmp_path}/savepoints").result(timeout=30)
    client.wait(30)
    assert client.status().state == "stopped"
    assert 0 < len(read_committed(out)) < len(golden[kind])

    resumed = build(out, kind, parallelism=3)
    resumed.set_runtime_option("from_savepoint", uri)
    resumed.execute("resumed")
    assert sorted(read_committed(out)) == golden[kind]
