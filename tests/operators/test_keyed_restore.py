"""Every keyed operator restores through one function (engine/operators/keyed_restore.py): the keyed process
operator and the window operator refuse the same broken snapshots with the same errors, and take a
snapshot written by the other kind's layout rules (keyed/<state> tables, a timers table, the watermark)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from engine import KeyedProcessFunction, ManualClock, ValueStateDescriptor
from engine.elements import StreamRecord, Watermark
from engine.errors import CorruptSnapshotError, IllegalStateError
from engine.operators.base import ListOutput, MaterializedOperatorSnapshot, OperatorContext
from engine.operators.keyed_process import KeyedProcessOperator
from engine.windowing.aggregations import builtin_aggregation
from engine.windowing.assigners import TumblingEventTimeWindows
from engine.windowing.window_operator import WindowOperator


class Counting(KeyedProcessFunction):
    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count", default=0))

    def process_element(self, value, ctx):
        self.count.update(self.count.value() + 1)
        ctx.timer_service().register_event_time_timer(ctx.timestamp() + 10)
        yield self.count.value()


OPERATORS = {
    "keyed process operator": lambda: KeyedProcessOperator(Counting(), key_selector=lambda v: v[0]),
    "window operator": lambda: WindowOperator(TumblingEventTimeWindows.of(10),
                                              incremental_aggregate=builtin_aggregation("sum", 1),
                                              key_selector=lambda v: v[0]),
}


def _opened(kind: str, max_parallelism: int = 128):
    op = OPERATORS[kind]()
    op.open(OperatorContext(operator_id=kind, clock=ManualClock(0), max_parallelism=max_parallelism), ListOutput())
    return op


def _snapshot(kind: str) -> MaterializedOperatorSnapshot:
    op = _opened(kind)
    op.process_element(StreamRecord(("a", 1), 3))
    op.process_watermark(Watermark(1))
    return op.snapshot_state(7).materialize()


@pytest.mark.parametrize("kind", list(OPERATORS))
def test_a_snapshot_with_an_unknown_table_is_refused_naming_the_table(kind: str):
    snap = _snapshot(kind)
    broken = MaterializedOperatorSnapshot(snap.metadata, {**snap.tables, "junk": snap.tables["timers"]})
    with pytest.raises(CorruptSnapshotError, match=f"{kind} snapshot has an unknown table 'junk'"):
        _opened(kind).initialize_state([broken])


@pytest.mark.parametrize("kind", list(OPERATORS))
def test_a_snapshot_of_another_max_parallelism_is_refused(kind: str):
    with pytest.raises(CorruptSnapshotError, match="max_parallelism 128, the job now has 64"):
        _opened(kind, max_parallelism=64).initialize_state([_snapshot(kind)])


@pytest.mark.parametrize("kind", list(OPERATORS))
def test_restoring_after_elements_were_processed_is_refused(kind: str):
    op = _opened(kind)
    op.process_element(StreamRecord(("b", 2), 4))
    with pytest.raises(IllegalStateError, match="before any element"):
        op.initialize_state([_snapshot(kind)])


@pytest.mark.parametrize("kind", list(OPERATORS))
def test_rescaling_restores_the_smallest_watermark_of_the_snapshots(kind: str):
    early, late = _snapshot(kind), _snapshot(kind)
    late = replace(late, metadata={**late.metadata, "current_watermark": 2})
    op = _opened(kind)
    op.initialize_state([late, early])
    assert op.timer_service.current_watermark() == 1
