"""The Output protocol's buffer methods: ``collect_batch`` and ``collect_columns`` have defaults, so an
operator calls them on any output instead of probing for them; an output that can take a fired window's
results as columns says so with ``takes_columns``."""

from __future__ import annotations

from engine.elements import MAX_WATERMARK, StreamRecord, TupleColumns, Watermark
from engine.operators.base import ListOutput, Metrics, OperatorContext, Output
from engine.state.key_groups import KeyGroupRange
from engine import ManualClock
from engine.windowing.aggregations import builtin_aggregation
from engine.windowing.assigners import TumblingEventTimeWindows
from engine.windowing.slicing import create_window_operator


class OnlyCollect(Output):
    """An output implementing only the abstract methods."""

    def __init__(self) -> None:
        self.got: list = []

    def collect(self, record):
        self.got.append(record)

    def collect_side(self, tag, record):
        self.got.append((tag.tag_id, record))

    def emit_watermark(self, watermark):
        self.got.append(watermark)

    def emit_watermark_status(self, status):
        self.got.append(status)


def test_collect_batch_defaults_to_collect_in_order():
    out = OnlyCollect()
    records = [StreamRecord(("a", i), i) for i in range(3)]
    out.collect_batch(records)
    assert out.got == records
    assert out.takes_columns is False


def test_collect_columns_defaults_to_the_records_the_columns_stand_for():
    out = OnlyCollect()
    out.collect_columns(TupleColumns([["a", "b"], [1, 2]], 9))
    out.collect_columns([StreamRecord(("c", 3), 9)])
    assert out.got == [StreamRecord(("a", 1), 9), StreamRecord(("b", 2), 9), StreamRecord(("c", 3), 9)]


def test_every_window_operator_variant_emits_through_an_output_with_only_the_abstract_methods():
    records = [StreamRecord((f"k{i % 3}", i), i) for i in range(30)]
    outputs = []
    for out in (OnlyCollect(), ListOutput()):
        op = create_window_operator(TumblingEventTimeWindows.of(10), incremental_aggregate=builtin_aggregation("sum", 1),
                                    key_selector=lambda v: v[0], specialized=True)
        op.open(OperatorContext("w", 0, 1, 8, KeyGroupRange(0, 7), clock=ManualClock(0), metrics=Metrics()), out)
        op.process_batch(records)
        op.process_watermark(Watermark(MAX_WATERMARK))
        outputs.append(out.got if isinstance(out, OnlyCollect) else out.elements)
    assert outputs[0] == outputs[1]
    assert len(outputs[0]) == 10  # 9 windows' sums, then the watermark
