"""The window operator, element by element, through the keyed operator harness (seed 000).

Every scenario runs twice: uninterrupted, and snapshotted + restored into a fresh operator at the
point marked ``run.midway()`` (Flink's WindowOperatorTest does the same); both must give the same
output.  Values are ``(key, number)`` tuples keyed by position 0 unless said otherwise.
"""

from __future__ import annotations

from typing import Any, Callable

import pytest

from engine.api.functions import AggregateFunction, OutputTag, ProcessWindowFunction, ReduceFunction, WindowFunction
from engine.elements import MAX_WATERMARK, StreamRecord, Watermark
from engine.errors import CorruptSnapshotError, JobDefinitionError
from engine.state.descriptors import ReducingStateDescriptor, ValueStateDescriptor
from engine.state.key_groups import assign_to_key_group, key_group_range_for_operator
from engine.testing.operator_harness import KeyedOneInputStreamOperatorTestHarness
from engine.windowing.assigners import (
    EventTimeSessionWindows,
    GlobalWindows,
    ProcessingTimeSessionWindows,
    SlidingEventTimeWindows,
    SlidingProcessingTimeWindows,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
    WindowAssigner,
)
from engine.windowing.evictors import CountEvictor, Evictor, TimeEvictor
from engine.windowing.triggers import CountTrigger, EventTimeTrigger, PurgingTrigger, Trigger, TriggerResult
from engine.windowing.window_operator import WindowOperator
from engine.windowing.windows import GlobalWindow, TimeWindow

LATE = OutputTag("late")


def key_of(value: Any) -> Any:
    return value[0]


def sum_pairs(a: tuple, b: tuple) -> tuple:
    return (a[0], a[1] + b[1])


class Run:
    """A harness that is optionally snapshotted and restored into a fresh operator at ``midway()``.

    Output, side outputs and metrics are accumulated across the restore.
    """

    def __init__(self, factory: Callable[[], WindowOperator], restore: bool, **harness_kwargs: Any) -> None:
        self.factory = factory
        self.restore = restore
        self.h = KeyedOneInputStreamOperatorTestHarness(factory(), **harness_kwargs)
        self.h.open()
        self._output: list[Any] = []
        self._side: dict[str, list[StreamRecord]] = {}
        self.restored = False

    def element(self, value: Any, timestamp: int | None = None) -> None:
        self.h.process_element(value, timestamp)

    def watermark(self, timestamp: int) -> None:
        self.h.process_watermark(timestamp)

    def processing_time(self, now_ms: int) -> None:
        self.h.set_processing_time(now_ms)

    def midway(self) -> None:
        if not self.restore:
            return
        self._drain()
        metrics = self.h.metrics
        fresh = self.h.restored(self.factory())
        fresh.metrics = metrics
        fresh.context.metrics = metrics
        self.h = fresh
        self.restored = True

    def _drain(self) -> None:
        self._output.extend(self.h.get_output())
        for tag_id, records in self.h.output.side_outputs.items():
            self._side.setdefault(tag_id, []).extend(records)
        self.h.clear_output()

    def output(self) -> list[Any]:
        self._drain()
        return list(self._output)

    def records(self) -> list[tuple[Any, int | None]]:
        """Main-output records as (value, timestamp), watermarks left out."""
        return [(e.value, e.timestamp) for e in self.output() if isinstance(e, StreamRecord)]

    def take_records(self) -> list[tuple[Any, int | None]]:
        """Records emitted since the last take (exactly these, then nothing)."""
        records = self.records()
        self._output.clear()
        return records

    def side(self, tag: OutputTag) -> list[StreamRecord]:
        self._drain()
        return list(self._side.get(tag.tag_id, []))


@pytest.fixture(params=[False, True], ids=["uninterrupted", "restored-midway"])
def restore(request: pytest.FixtureRequest) -> bool:
    return request.param


def windowed(assigner: WindowAssigner, **kwargs: Any) -> Callable[[], WindowOperator]:
    kwargs.setdefault("key_selector", key_of)
    if "window_function" not in kwargs and "incremental_aggregate" not in kwargs:
        kwargs["incremental_aggregate"] = sum_pairs
    return lambda: WindowOperator(assigner, **kwargs)


# ---- event-time windows ------------------------------------------------------------------------------


def test_tumbling_event_time_window_sums_each_key_and_fires_when_the_watermark_reaches_its_max_timestamp(restore):
    #   a: 1@0  2@5  3@9 | 4@10        windows [0,10) and [10,20)
    #   b: 10@3
    #   wm 8: nothing;  wm 9: a=6, b=10 (both stamped 9);  wm 19: a=4 (stamped 19)
    run = Run(windowed(TumblingEventTimeWindows.of(10)), restore)
    run.element(("a", 1), 0)
    run.element(("a", 2), 5)
    run.element(("b", 10), 3)
    run.midway()
    run.element(("a", 3), 9)
    run.element(("a", 4), 10)
    assert run.h.num_event_time_timers() == 3
    run.watermark(8)
    assert run.take_records() == []
    run.watermark(9)
    assert run.take_records() == [(("a", 6), 9), (("b", 10), 9)]
    assert run.h.num_event_time_timers() == 1
    run.watermark(19)
    assert run.take_records() == [(("a", 4), 19)]
    assert run.h.num_event_time_timers() == 0
    assert run.h.num_keyed_state_entries() == 0


def test_the_watermark_is_forwarded_after_the_windows_it_closed():
    run = Run(windowed(TumblingEventTimeWindows.of(10)), False)
    run.element(("a", 1), 0)
    run.watermark(9)
    assert run.output() == [StreamRecord(("a", 1), 9), Watermark(9)]


def test_sliding_event_time_window_puts_each_element_into_size_over_slide_windows(restore):
    #            0    5    10   15   20
    #   [0,10)   |---------|
    #   [5,15)        |---------|
    #   [10,20)            |---------|
    #   1@7 is in [0,10) and [5,15); 2@12 in [5,15) and [10,20)
    run = Run(windowed(SlidingEventTimeWindows.of(10, 5)), restore)
    run.element(("a", 1), 7)
    run.midway()
    run.element(("a", 2), 12)
    run.watermark(9)
    assert run.take_records() == [(("a", 1), 9)]
    run.watermark(14)
    assert run.take_records() == [(("a", 3), 14)]
    run.watermark(19)
    assert run.take_records() == [(("a", 2), 19)]
    assert run.h.num_keyed_state_entries() == 0


def test_session_windows_merge_when_an_element_bridges_the_gap_and_the_merged_window_keeps_one_timer(restore):
    #   gap 10
    #   1@1   -> [1,11)                     timer 10
    #   2@20  -> [20,30)                    timer 29        (two sessions, two timers)
    #   3@10  -> [10,20) touches both -> [1,30), timer 29 only
    run = Run(windowed(EventTimeSessionWindows.with_gap(10)), restore)
    run.element(("a", 1), 1)
    run.element(("a", 2), 20)
    assert run.h.num_event_time_timers() == 2
    run.midway()
    assert run.h.num_event_time_timers() == 2
    run.element(("a", 3), 10)
    assert run.h.num_event_time_timers() == 1
    # one contents entry (the merged window's state window) + the merging window set
    assert run.h.num_keyed_state_entries() == 2
    run.watermark(28)
    assert run.take_records() == []
    run.watermark(29)
    assert run.take_records() == [(("a", 6), 29)]
    assert run.h.num_event_time_timers() == 0
    assert run.h.num_keyed_state_entries() == 0


def test_sessions_of_different_keys_never_merge(restore):
    run = Run(windowed(EventTimeSessionWindows.with_gap(10)), restore)
    run.element(("a", 1), 1)
    run.element(("b", 2), 5)
    run.midway()
    run.watermark(MAX_WATERMARK)
    assert sorted(run.records()) == [(("a", 1), 10), (("b", 2), 14)]


def test_merging_sessions_adds_up_their_count_trigger_state(restore):
    #   CountTrigger(3) on sessions (gap 10): [1,11) count 1, [20,30) count 1;
    #   3@10 merges both into [1,30): counts merge to 2, the element makes 3 -> FIRE at once.
    run = Run(windowed(EventTimeSessionWindows.with_gap(10), trigger=CountTrigger.of(3)), restore)
    run.element(("a", 1), 1)
    run.element(("a", 2), 20)
    run.midway()
    assert run.take_records() == []
    run.element(("a", 3), 10)
    assert run.take_records() == [(("a", 6), 29)]
    # only the merged window's cleanup timer is left (the old windows' ones were deleted)
    assert run.h.num_event_time_timers() == 1
    run.watermark(29)
    assert run.take_records() == []
    assert run.h.num_keyed_state_entries() == 0
    assert run.h.num_event_time_timers() == 0


# ---- processing-time windows ---------------------------------------------------------------------------


def test_tumbling_processing_time_windows_fire_when_processing_time_reaches_the_window_end(restore):
    run = Run(windowed(TumblingProcessingTimeWindows.of(10)), restore)
    run.processing_time(3)
    run.element(("a", 1))
    run.element(("a", 2))
    run.watermark(1_000)  # watermarks do not close processing-time windows
    assert run.take_records() == []
    run.midway()
    run.processing_time(9)
    assert run.take_records() == [(("a", 3), 9)]
    run.processing_time(12)
    run.element(("a", 5))
    run.processing_time(19)
    assert run.take_records() == [(("a", 5), 19)]
    assert run.h.num_processing_time_timers() == 0
    assert run.h.num_keyed_state_entries() == 0


def test_sliding_processing_time_window_of_the_seed_fires_the_earlier_window_first(restore):
    #   seed 000: size 10, slide 5; a record at processing time 0 lands in [-5,5) and [0,10);
    #   [-5,5) is evaluated when processing time reaches its end, then [0,10).
    run = Run(windowed(SlidingProcessingTimeWindows.of(10, 5)), restore)
    run.element(("a", 1))
    run.midway()
    run.processing_time(4)
    assert run.take_records() == [(("a", 1), 4)]
    run.processing_time(9)
    assert run.take_records() == [(("a", 1), 9)]
    assert run.h.num_keyed_state_entries() == 0


def test_processing_time_sessions_merge_and_fire_at_the_merged_end(restore):
    run = Run(windowed(ProcessingTimeSessionWindows.with_gap(10)), restore)
    run.element(("a", 1))  # now 0 -> [0,10)
    run.processing_time(5)
    run.midway()
    run.element(("a", 2))  # [5,15) merges -> [0,15)
    assert run.h.num_processing_time_timers() == 1
    run.processing_time(9)
    assert run.take_records() == []
    run.processing_time(14)
    assert run.take_records() == [(("a", 3), 14)]


# ---- count windows (seed 000) -------------------------------------------------------------------------------


def test_tumbling_count_window_is_global_windows_with_a_purging_count_trigger(restore):
    run = Run(windowed(GlobalWindows.create(), trigger=PurgingTrigger.of(CountTrigger.of(3))), restore)
    for v in (1, 2, 3, 4):
        run.element(("k", v), v)
    run.midway()
    for v in (5, 6, 7):
        run.element(("k", v), v)
    assert [v for v, _ts in run.records()] == [("k", 6), ("k", 15)]
    # the global window never ends: results carry its max timestamp and no cleanup timer exists
    assert {ts for _v, ts in run.records()} == {GlobalWindow().max_timestamp()}
    assert run.h.num_event_time_timers() == 0
    # 7 is waiting: one contents entry and one count entry
    assert run.h.num_keyed_state_entries() == 2


def test_the_seeds_sliding_count_window_every_2_elements_over_the_last_4_sums_7_then_23_then_22(restore):
    #   seed 000: countWindow(4, 2) = GlobalWindows + CountEvictor.of(4) + CountTrigger.of(2), sum.
    #   arrivals  2  5 | 7  9 | 4  2
    #   fire 1 on 5: window [2,5]           -> 7
    #   fire 2 on 9: window [2,5,7,9]       -> 23
    #   fire 3 on 2: [2,5,7,9,4,2], the evictor drops 2 and 5 -> [7,9,4,2] -> 22
    run = Run(
        windowed(GlobalWindows.create(), trigger=CountTrigger.of(2), evictor=CountEvictor.of(4)),
        restore,
    )
    arrivals = [2, 5, 7, 9, 4, 2]
    for i, v in enumerate(arrivals[:3]):
        run.element(("k", v), i)
    run.midway()
    for i, v in enumerate(arrivals[3:], start=3):
        run.element(("k", v), i)
    assert [v for (_k, v), _ts in run.records()] == [7, 23, 22]
    # the window kept [7, 9, 4, 2]; two more elements (1, 1) evict 7 and 9: 4 + 2 + 1 + 1
    run.element(("k", 1), 6)
    run.element(("k", 1), 7)
    assert [v for (_k, v), _ts in run.records()][-1] == 8


def test_evict_after_lets_the_function_see_everything_and_trims_afterwards(restore):
    #   GlobalWindows + CountTrigger(3) + CountEvictor(2, do_evict_after=True)
    #   1 2 3 -> sum 6, keep [2,3];  4 5 6 -> [2,3,4,5,6] sum 20, keep [5,6]
    run = Run(
        windowed(GlobalWindows.create(), trigger=CountTrigger.of(3), evictor=CountEvictor.of(2, do_evict_after=True)),
        restore,
    )
    for v in (1, 2, 3, 4):
        run.element(("k", v), v)
    run.midway()
    for v in (5, 6):
        run.element(("k", v), v)
    assert [v for (_k, v), _ts in run.records()] == [6, 20]


def test_evict_before_trims_before_the_function_runs(restore):
    #   same windows with CountEvictor(2): 1 2 3 -> [2,3] = 5;  4 5 6 -> [2,3,4,5,6] -> [5,6] = 11
    run = Run(windowed(GlobalWindows.create(), trigger=CountTrigger.of(3), evictor=CountEvictor.of(2)), restore)
    for v in (1, 2, 3, 4):
        run.element(("k", v), v)
    run.midway()
    for v in (5, 6):
        run.element(("k", v), v)
    assert [v for (_k, v), _ts in run.records()] == [5, 11]


def test_time_evictor_keeps_elements_within_size_of_the_newest_timestamp(restore):
    #   tumbling [0,100), TimeEvictor(10): newest ts 50, keeps ts > 40: 45 and 50
    run = Run(windowed(TumblingEventTimeWindows.of(100), evictor=TimeEvictor.of(10)), restore)
    run.element(("a", 1), 10)
    run.element(("a", 2), 45)
    run.midway()
    run.element(("a", 4), 50)
    run.watermark(99)
    assert run.records() == [(("a", 6), 99)]


# ---- lateness --------------------------------------------------------------------------------------------------


def test_allowed_lateness_refires_with_the_updated_result_and_later_data_goes_to_the_side_output(restore):
    #   window [0,10): max_ts 9, allowed lateness 5 -> cleanup at 14
    #   0   3   5   9        14
    #   |---a1--|---|--wm 9: fire (a,1)
    #       a2@3 arrives at wm 9: late but allowed -> fires again at once (a,3)
    #                        wm 14: cleanup, no state, no timers
    #           a4@5 at wm 14: window gone and 5 + 5 <= 14 -> side output
    run = Run(windowed(TumblingEventTimeWindows.of(10), allowed_lateness_ms=5, late_data_output_tag=LATE), restore)
    run.element(("a", 1), 1)
    run.watermark(9)
    assert run.take_records() == [(("a", 1), 9)]
    run.element(("a", 2), 3)
    assert run.take_records() == [(("a", 3), 9)]
    run.midway()
    run.watermark(13)
    assert run.h.num_keyed_state_entries() == 1
    run.watermark(14)
    assert run.take_records() == []
    assert run.h.num_keyed_state_entries() == 0
    assert run.h.num_event_time_timers() == 0
    run.element(("a", 4), 5)
    assert run.side(LATE) == [StreamRecord(("a", 4), 5)]
    assert run.take_records() == []
    assert run.h.metrics.get("num_late_records_dropped") == 0


def test_without_a_late_tag_data_beyond_lateness_is_dropped_and_counted(restore):
    run = Run(windowed(TumblingEventTimeWindows.of(10)), restore)
    run.element(("a", 1), 1)
    run.watermark(9)
    run.midway()
    run.element(("a", 2), 5)  # 5 + 0 <= 9: late, window [0,10) is late too
    run.element(("a", 3), 10)  # on time for [10,20)
    run.watermark(19)
    assert run.records() == [(("a", 1), 9), (("a", 3), 19)]
    assert run.h.metrics.get("num_late_records_dropped") == 1


def test_an_element_late_for_one_sliding_window_but_on_time_for_another_is_not_dropped(restore):
    #   size 10 slide 5, wm 9: element @7 belongs to [0,10) (late) and [5,15) (on time)
    run = Run(windowed(SlidingEventTimeWindows.of(10, 5), late_data_output_tag=LATE), restore)
    run.watermark(9)
    run.midway()
    run.element(("a", 1), 7)
    run.watermark(14)
    assert run.records() == [(("a", 1), 14)]
    assert run.side(LATE) == []


def test_cleanup_clears_window_state_of_a_process_function_but_not_its_global_state(restore):
    class CountFirings(ProcessWindowFunction):
        per_window = ValueStateDescriptor("firings-in-window", default=0)
        per_key = ValueStateDescriptor("firings-of-key", default=0)

        def process(self, key, context, elements):
            w = context.window_state().get_state(self.per_window)
            g = context.global_state().get_state(self.per_key)
            w.update(w.value() + 1)
            g.update(g.value() + 1)
            yield (key, sum(v for _k, v in elements), w.value(), g.value())

        def clear(self, context):
            context.window_state().get_state(self.per_window).clear()

    run = Run(windowed(TumblingEventTimeWindows.of(10), window_function=CountFirings(), allowed_lateness_ms=10), restore)
    run.element(("a", 1), 1)
    run.watermark(9)
    run.midway()
    run.element(("a", 2), 2)  # late within lateness: fires again, second firing of this window
    assert [v for v, _ts in run.records()] == [("a", 1, 1, 1), ("a", 3, 2, 2)]
    run.watermark(19)  # cleanup at 9 + 10
    # contents, trigger timers and per-window state are gone; the key's global counter stays
    assert run.h.num_keyed_state_entries() == 1
    assert run.h.num_keyed_state_entries("firings-of-key") == 1
    assert run.h.num_event_time_timers() == 0


# ---- window functions -------------------------------------------------------------------------------------------


class Average(AggregateFunction):
    def create_accumulator(self):
        return (0, 0)

    def add(self, value, accumulator):
        return (accumulator[0] + value[1], accumulator[1] + 1)

    def get_result(self, accumulator):
        return accumulator[0] / accumulator[1]

    def merge(self, acc_a, acc_b):
        return (acc_a[0] + acc_b[0], acc_a[1] + acc_b[1])


class SumReduce(ReduceFunction):
    def reduce(self, value1, value2):
        return (value1[0], value1[1] + value2[1])


class DescribeWindow(ProcessWindowFunction):
    def process(self, key, context, elements):
        w = context.window()
        return [(key, w.start, w.end, list(elements), context.current_watermark())]


def test_a_reduce_function_subclass_and_a_plain_callable_give_the_same_result(restore):
    for reduce in (SumReduce(), sum_pairs):
        run = Run(windowed(TumblingEventTimeWindows.of(10), incremental_aggregate=reduce), restore)
        run.element(("a", 1), 1)
        run.midway()
        run.element(("a", 2), 2)
        run.watermark(9)
        assert run.records() == [(("a", 3), 9)]


def test_aggregate_function_keeps_an_accumulator_and_emits_its_result(restore):
    run = Run(windowed(TumblingEventTimeWindows.of(10), incremental_aggregate=Average()), restore)
    run.element(("a", 1), 1)
    run.element(("a", 2), 2)
    run.midway()
    run.element(("a", 6), 3)
    run.watermark(9)
    assert run.records() == [(3.0, 9)]


def test_aggregate_with_a_process_window_function_passes_the_single_result_with_the_window(restore):
    run = Run(
        windowed(TumblingEventTimeWindows.of(10), incremental_aggregate=Average(), window_function=DescribeWindow()),
        restore,
    )
    run.element(("a", 1), 1)
    run.midway()
    run.element(("a", 3), 2)
    run.watermark(9)
    assert run.records() == [(("a", 0, 10, [2.0], 9), 9)]


def test_process_window_function_sees_all_elements_in_arrival_order_and_can_write_side_outputs(restore):
    tag = OutputTag("sizes")

    class WithSide(ProcessWindowFunction):
        def process(self, key, context, elements):
            elements = list(elements)
            context.output(tag, (key, len(elements)))
            return [(key, [v for _k, v in elements])]

    run = Run(windowed(TumblingEventTimeWindows.of(10), window_function=WithSide()), restore)
    run.element(("a", 3), 5)
    run.element(("a", 1), 1)
    run.midway()
    run.element(("a", 2), 9)
    run.watermark(9)
    assert run.records() == [(("a", [3, 1, 2]), 9)]
    assert run.side(tag) == [StreamRecord(("a", 3), 9)]


def test_apply_accepts_a_window_function_subclass_and_a_callable_of_key_window_inputs(restore):
    class Count(WindowFunction):
        def apply(self, key, window, inputs):
            return [(key, window.start, len(list(inputs)))]

    def count(key, window, inputs):
        return [(key, window.start, len(list(inputs)))]

    for fn in (Count(), count):
        run = Run(windowed(TumblingEventTimeWindows.of(10), window_function=fn), restore)
        run.element(("a", 1), 11)
        run.midway()
        run.element(("a", 1), 12)
        run.watermark(19)
        assert run.records() == [(("a", 10, 2), 19)]


def test_reduce_with_an_evictor_keeps_elements_and_reduces_what_remains_at_fire_time(restore):
    run = Run(
        windowed(TumblingEventTimeWindows.of(100), evictor=CountEvictor.of(2), incremental_aggregate=sum_pairs),
        restore,
    )
    for i, v in enumerate((1, 10, 100)):
        run.element(("a", v), i)
        if i == 1:
            run.midway()
    # with an evictor the window holds all three elements (seed 000), not one accumulator
    assert run.h.num_keyed_state_entries("window-contents") == 1
    run.watermark(99)
    assert run.records() == [(("a", 110), 99)]


# ---- user-defined trigger, evictor, assigner --------------------------------------------------------------------


class FireOnBigValue(Trigger):
    """Fires and purges when an element above 100 arrives; keeps a running element count in state."""

    seen = ReducingStateDescriptor("seen", reduce_function=lambda a, b: a + b)

    def on_element(self, element, timestamp, window, ctx):
        ctx.get_partitioned_state(self.seen).add(1)
        return TriggerResult.FIRE_AND_PURGE if element[1] > 100 else TriggerResult.CONTINUE

    def on_processing_time(self, time, window, ctx):
        return TriggerResult.CONTINUE

    def on_event_time(self, time, window, ctx):
        return TriggerResult.CONTINUE

    def clear(self, window, ctx):
        ctx.get_partitioned_state(self.seen).clear()


class DropOddValues(Evictor):
    def evict_before(self, elements, size, window, ctx):
        elements[:] = [e for e in elements if e.value[1] % 2 == 0]

    def evict_after(self, elements, size, window, ctx):
        pass


class EvenOddWindows(WindowAssigner):
    """Even values go to [0,100), odd ones to [100,200), whatever their timestamp."""

    def assign_windows(self, element, timestamp, context):
        return [TimeWindow(0, 100) if element[1] % 2 == 0 else TimeWindow(100, 200)]

    def get_default_trigger(self):
        return EventTimeTrigger()

    def is_event_time(self):
        return True


def test_a_user_trigger_fires_and_purges_on_its_own_condition(restore):
    run = Run(windowed(GlobalWindows.create(), trigger=FireOnBigValue()), restore)
    run.element(("a", 1), 1)
    run.midway()
    run.element(("a", 200), 2)
    run.element(("a", 5), 3)
    assert run.records() == [(("a", 201), MAX_WATERMARK)]
    # after the purge only the new element and the trigger's counter remain
    assert run.h.num_keyed_state_entries() == 2


def test_a_user_evictor_removes_elements_before_the_function(restore):
    run = Run(windowed(TumblingEventTimeWindows.of(10), evictor=DropOddValues()), restore)
    for v in (1, 2, 3):
        run.element(("a", v), v)
    run.midway()
    run.element(("a", 4), 4)
    run.watermark(9)
    assert run.records() == [(("a", 6), 9)]


def test_a_user_window_assigner_decides_the_windows(restore):
    run = Run(windowed(EvenOddWindows()), restore)
    for v in (1, 2, 3, 4):
        run.element(("a", v), 0)
        if v == 2:
            run.midway()
    run.watermark(99)
    assert run.take_records() == [(("a", 6), 99)]
    run.watermark(199)
    assert run.take_records() == [(("a", 4), 199)]


# ---- errors -------------------------------------------------------------------------------------------------------


def test_a_failing_key_selector_and_a_missing_timestamp_go_to_the_dead_letter_callback():
    def key(value):
        if value == "poison":
            raise KeyError("no key in poison")
        return value[0]

    h = KeyedOneInputStreamOperatorTestHarness(
        WindowOperator(TumblingEventTimeWindows.of(10), key_selector=key, incremental_aggregate=sum_pairs)
    )
    h.process_element("poison", 1)
    h.process_element(("a", 1), None)
    h.process_element(("a", 2), 2)
    h.process_watermark(9)
    assert h.extract_output_values() == [("a", 2)]
    assert [(value, stage) for value, _err, stage in h.dead_letters] == [("poison", "key_selector"), (("a", 1), "window_assign")]
    assert isinstance(h.dead_letters[0][1], KeyError)
    assert h.metrics.get("num_dead_letter_records") == 2


def test_an_exception_in_the_user_function_fails_the_task_instead_of_being_swallowed():
    def broken(a, b):
        raise ZeroDivisionError("user bug")

    h = KeyedOneInputStreamOperatorTestHarness(
        WindowOperator(TumblingEventTimeWindows.of(10), key_selector=key_of, incremental_aggregate=broken)
    )
    h.process_element(("a", 1), 1)
    with pytest.raises(ZeroDivisionError, match="user bug"):
        h.process_element(("a", 2), 2)


def test_invalid_definitions_are_refused_at_construction_naming_the_parameter():
    class NonMerging(FireOnBigValue):
        pass

    with pytest.raises(JobDefinitionError, match="trigger"):
        WindowOperator(EventTimeSessionWindows.with_gap(10), trigger=NonMerging(), incremental_aggregate=sum_pairs)
    with pytest.raises(JobDefinitionError, match="window_function"):
        WindowOperator(TumblingEventTimeWindows.of(10))
    with pytest.raises(JobDefinitionError, match="allowed_lateness_ms"):
        WindowOperator(TumblingEventTimeWindows.of(10), incremental_aggregate=sum_pairs, allowed_lateness_ms=-1)
    with pytest.raises(JobDefinitionError, match="incremental_aggregate"):
        WindowOperator(TumblingEventTimeWindows.of(10), incremental_aggregate=42)


# ---- snapshots -----------------------------------------------------------------------------------------------------


def test_a_snapshot_does_not_change_when_processing_continues_copy_on_write():
    h = KeyedOneInputStreamOperatorTestHarness(windowed(TumblingEventTimeWindows.of(10))())
    h.process_element(("a", 1), 1)
    pending = h.operator.snapshot_state(1)
    h.process_element(("a", 2), 2)
    h.process_element(("b", 5), 12)
    snapshot = pending.materialize()
    contents = snapshot.tables["keyed/window-contents"].to_pylist()
    assert [(r["key"], r["value"]) for r in contents] == [('"a"', '{"$t":["a",1]}')]
    assert snapshot.tables["timers"].num_rows == 1
    restored = KeyedOneInputStreamOperatorTestHarness(windowed(TumblingEventTimeWindows.of(10))())
    restored.initialize_state(snapshot)
    restored.process_watermark(MAX_WATERMARK)
    assert restored.extract_output_values() == [("a", 1)]


def test_the_watermark_is_restored_so_late_data_stays_late_after_a_restore():
    h = KeyedOneInputStreamOperatorTestHarness(windowed(TumblingEventTimeWindows.of(10))())
    h.process_watermark(50)
    fresh = h.restored(windowed(TumblingEventTimeWindows.of(10))())
    fresh.process_element(("a", 1), 5)
    assert fresh.metrics.get("num_late_records_dropped") == 1
    assert fresh.num_keyed_state_entries() == 0


def test_restoring_into_two_subtasks_splits_state_and_timers_by_key_group_and_loses_nothing():
    factory = windowed(EventTimeSessionWindows.with_gap(10))
    h = KeyedOneInputStreamOperatorTestHarness(factory(), max_parallelism=16)
    keys = [f"user-{i}" for i in range(30)]
    for i, key in enumerate(keys):
        h.process_element((key, i), i)
    outputs = []
    for subtask in (0, 1):
        part = h.restored(factory(), parallelism=2, subtask_index=subtask)
        key_range = key_group_range_for_operator(16, 2, subtask)
        owned = [k for k in keys if key_range.contains(assign_to_key_group(k, 16))]
        assert part.num_event_time_timers() == len(owned)
        part.process_watermark(MAX_WATERMARK)
        values = part.extract_output_values()
        assert sorted(k for k, _v in values) == sorted(owned)
        outputs.extend(values)
    assert sorted(outputs) == sorted((key, i) for i, key in enumerate(keys))


def test_a_snapshot_from_another_max_parallelism_is_refused():
    h = KeyedOneInputStreamOperatorTestHarness(windowed(TumblingEventTimeWindows.of(10))(), max_parallelism=16)
    h.process_element(("a", 1), 1)
    snapshot = h.snapshot()
    other = KeyedOneInputStreamOperatorTestHarness(windowed(TumblingEventTimeWindows.of(10))(), max_parallelism=32)
    other.initialize_state(snapshot)
    with pytest.raises(CorruptSnapshotError, match="max_parallelism"):
        other.open()


def test_a_materialized_snapshot_round_trips_through_arrow_ipc_bytes_and_json_metadata():
    import pyarrow as pa

    from engine.errors import UnsupportedFormatVersion
    from engine.operators.base import MaterializedOperatorSnapshot

    factory = windowed(EventTimeSessionWindows.with_gap(10))
    h = KeyedOneInputStreamOperatorTestHarness(factory())
    h.process_element(("a", 1), 1)
    h.process_element(("a", 2), 5)
    snapshot = h.snapshot()
    stored = {}
    for name, table in snapshot.tables.items():
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        stored[name] = sink.getvalue().to_pybytes()
    metadata_json = snapshot.metadata_json()

    tables = {name: pa.ipc.open_stream(data).read_all() for name, data in stored.items()}
    reloaded = MaterializedOperatorSnapshot.from_parts(metadata_json, tables)
    fresh = KeyedOneInputStreamOperatorTestHarness(factory())
    fresh.initialize_state(reloaded)
    fresh.process_watermark(MAX_WATERMARK)
    assert fresh.extract_output_values() == [("a", 3)]

    with pytest.raises(UnsupportedFormatVersion):
        MaterializedOperatorSnapshot.from_parts(metadata_json.replace('"format_version":1', '"format_version":99'), tables)
