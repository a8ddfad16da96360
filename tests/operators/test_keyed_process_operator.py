"""The keyed process operator fed element by element (Flink's KeyedOneInputStreamOperatorTestHarness style):
timers of both domains, the timestamps of what on_timer emits, and snapshot -> fresh operator -> restore."""

from __future__ import annotations

from engine import KeyedProcessFunction, ManualClock, TimeDomain, ValueStateDescriptor
from engine.elements import MAX_WATERMARK, StreamRecord, Watermark
from engine.operators.base import ListOutput, OperatorContext
from engine.operators.keyed_process import KeyedProcessOperator
from engine.state.key_groups import KeyGroupRange


class Reminders(KeyedProcessFunction):
    """Counts per key; an event-time timer at ts + 10 and a processing-time timer at now + 100 per element;
    each timer emits (key, domain, timer time, count); a processing-time timer also clears the count."""

    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count", default=0))

    def process_element(self, value, ctx):
        self.count.update(self.count.value() + 1)
        ts = ctx.timer_service()
        ts.register_event_time_timer(ctx.timestamp() + 10)
        ts.register_processing_time_timer(ts.current_processing_time() + 100)
        yield ("seen", value[0], self.count.value())

    def on_timer(self, timestamp, ctx):
        domain = "event" if ctx.time_domain() == TimeDomain.EVENT_TIME else "processing"
        yield (ctx.get_current_key(), domain, timestamp, self.count.value())
        if ctx.time_domain() == TimeDomain.PROCESSING_TIME:
            self.count.clear()


def _operator(clock: ManualClock, key_group_range: KeyGroupRange | None = None):
    op = KeyedProcessOperator(Reminders(), key_selector=lambda v: v[0])
    out = ListOutput()
    op.open(OperatorContext(operator_id="reminders", clock=clock, max_parallelism=128,
                            key_group_range=key_group_range), out)
    return op, out


def _emitted(out: ListOutput) -> list:
    return [(r.value, r.timestamp) for r in out.records()]


def test_event_and_processing_time_timers_fire_with_their_domain_and_timestamps() -> None:
    clock = ManualClock(1000)
    op, out = _operator(clock)
    op.process_element(StreamRecord(("a", 1), 5))
    op.process_element(StreamRecord(("b", 1), 7))
    clock.set(1050)
    op.process_element(StreamRecord(("a", 2), 8))
    assert _emitted(out) == [(("seen", "a", 1), 5), (("seen", "b", 1), 7), (("seen", "a", 2), 8)]
    out.clear()
    op.process_watermark(Watermark(15))  # a@15 and b@17 are not both due: only a@15
    assert _emitted(out) == [(("a", "event", 15, 2), 15)]
    assert out.elements[-1] == Watermark(15)  # forwarded after the timers it made due
    out.clear()
    op.advance_processing_time(1100)  # a@1100 and b@1100 are due; a@1150 is not
    # processing-time output carries no timestamp (Flink erases it)
    assert _emitted(out) == [(("a", "processing", 1100, 2), None), (("b", "processing", 1100, 1), None)]
    out.clear()
    op.advance_processing_time(1150)
    assert _emitted(out) == [(("a", "processing", 1150, 0), None)]  # cleared: the default again


def test_a_snapshot_restores_state_and_both_kinds_of_timers_into_a_fresh_operator() -> None:
    def after_snapshot(op, out, clock) -> list:
        out.clear()
        op.process_element(StreamRecord(("b", 50), 50))
        op.process_watermark(Watermark(MAX_WATERMARK))
        clock.set(100)
        op.advance_processing_time(100)
        return _emitted(out)

    clock = ManualClock(0)
    op, out = _operator(clock)
    for key, ts in (("a", 5), ("b", 7), ("a", 30)):
        op.process_element(StreamRecord((key, ts), ts))
    op.process_watermark(Watermark(16))
    snapshot = op.snapshot_state(1).materialize()
    assert sorted(snapshot.tables) == ["keyed/count", "timers"]
    expected = after_snapshot(op, out, clock)
    # a@15 fired before the snapshot; a@40, b@17 and b@60 after; the processing-time timers at 100 too
    assert expected == [
        (("seen", "b", 2), 50),
        (("b", "event", 17, 2), 17), (("a", "event", 40, 2), 40), (("b", "event", 60, 2), 60),
        (("a", "processing", 100, 2), None), (("b", "processing", 100, 2), None)]

    restored_clock = ManualClock(0)
    restored, restored_out = _operator(restored_clock)
    restored.initialize_state([snapshot])
    assert restored.timer_service.current_watermark() == 16
    assert after_snapshot(restored, restored_out, restored_clock) == expected


def test_restoring_at_another_parallelism_keeps_every_key_exactly_once() -> None:
    clock = ManualClock(0)
    op, _ = _operator(clock)
    keys = [f"k{i}" for i in range(20)]
    for i, key in enumerate(keys):
        op.process_element(StreamRecord((key, i), i))
    snapshot = op.snapshot_state(3).materialize()
    fired: list = []
    for key_group_range in (KeyGroupRange(0, 63), KeyGroupRange(64, 127)):
        part, out = _operator(ManualClock(0), key_group_range)
        part.initialize_state([snapshot], key_group_range)
        part.process_watermark(Watermark(MAX_WATERMARK))
        fired += [r.value for r in out.records()]
    assert sorted(fired) == sorted((key, "event", i + 10, 1) for i, key in enumerate(keys))
