"""Rows in checkpoints and savepoints on the local runtime (issue 19): a ``Row`` key, ``Row`` values in keyed
state and ``Row`` records in a rolling sum are written by the codec as ``$row`` (no pickle) and read back as
the same rows, so a job failed midway or stopped with a savepoint and restored, also at another parallelism
(the row keys' key groups redistributed), commits exactly what an uninterrupted run commits.

Results are written as ``[repr(...), ...]`` lists: a repr shows a row's names, order and kind, so a row that
came back from a snapshot different in any of them would not match.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from engine import KeyedProcessFunction, Row, RowKind, StreamExecutionEnvironment, Types, ValueStateDescriptor
from engine.io.file_sink import FileSink
from engine.runtime.local.faults import FaultPlan
from restore_comparison import (
    assert_restoring_the_latest_checkpoint_commits_the_uninterrupted_results,
    assert_stop_with_savepoint_then_restore_commits_the_uninterrupted_results,
    configured_env,
    uninterrupted_results,
)

CALLS = Types.ROW_NAMED(["country", "city", "tel"], [Types.STRING(), Types.STRING(), Types.INT()])
PLACES = [("China", "Shanghai"), ("China", "Hangzhou"), ("Germany", "Berlin"), ("USA", "NewYork"), ("Chile", "Lima")]
EVENTS = [(*PLACES[(i * 3) % 7 % 5], (i * 37) % 50) for i in range(900)]


class CityChanges(KeyedProcessFunction):
    """Per country (a Row key): the previous call, kept as a Row in state, and how often the city changed."""

    def open(self, runtime_context) -> None:
        self.last = runtime_context.get_state(ValueStateDescriptor("last", CALLS))
        self.changes = runtime_context.get_state(ValueStateDescriptor("changes", Types.INT()))

    def process_element(self, value, ctx):
        last, changes = self.last.value(), self.changes.value() or 0
        if last is not None and last.city != value.city:
            changes += 1
        self.last.update(Row.of_kind(RowKind.UPDATE_BEFORE, **value.as_dict()))
        self.changes.update(changes)
        yield [repr(ctx.get_current_key()), changes, repr(last), str(last.get_row_kind()) if last else None]


def build(out: str, kind: str, parallelism: int = 2, storage: str | None = None,
          fault_plan: FaultPlan | None = None) -> StreamExecutionEnvironment:
    env = configured_env(parallelism, storage, fault_plan)
    calls = env.from_collection(EVENTS, type_info=CALLS)
    if kind == "changes":
        result = calls.key_by(lambda r: Row(country=r.country)).process(CityChanges())
    else:
        result = calls.key_by(lambda r: r.city).sum("tel").map(lambda r: [repr(r), r.tel])
    result.sink_to(FileSink(out, "jsonl", mode="exactly_once"))
    return env


@pytest.fixture(scope="module")
def golden() -> dict[str, list]:
    return uninterrupted_results(build, ("changes", "rolling"))


@pytest.mark.parametrize("kind", ["changes", "rolling"])
@pytest.mark.parametrize("new_parallelism", [2, 3])
def test_a_failed_job_restored_from_its_checkpoint_keeps_its_rows(golden, tmp_path: Path, kind: str,
                                                                  new_parallelism: int) -> None:
    assert any("Row(country=" in line[0] for line in golden["changes"])
    assert_restoring_the_latest_checkpoint_commits_the_uninterrupted_results(
        build, golden[kind], tmp_path, kind, fail_at_record=500, new_parallelism=new_parallelism)


@pytest.mark.parametrize("kind", ["changes", "rolling"])
def test_a_job_stopped_with_a_savepoint_and_restored_keeps_its_rows(golden, tmp_path: Path, kind: str) -> None:
    assert_stop_with_savepoint_then_restore_commits_the_uninterrupted_results(
        build, golden[kind], tmp_path, kind, stop_after_records=400)
