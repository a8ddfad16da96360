"""``KeyedStream.process(KeyedProcessFunction)``: keyed state and timers as PyFlink writes them (issue 19).

The first job is Flink's documented ProcessFunction example (``CountWithTimeoutFunction``): a per-key count in
a ValueState and an event-time timer ``TIMEOUT_MS`` after each event; when the timer fires and the key saw no
later event, the function alerts.  Timeline (timestamps ascending, ``for_monotonous_timestamps``, one record
per bundle so a watermark ``ts - 1`` follows every record)::

    record   state after               timer   watermark   timers due -> alert?
    a@0      a: 1, last 0              a@1000  -1
    b@100    b: 1, last 100            b@1100  99
    a@500    a: 2, last 500            a@1500  499
    c@1200   c: 1, last 1200           c@2200  1199        a@1000 (last 500: no), b@1100 (last 100: yes)
    b@1400   b: 2, last 1400           b@2400  1399
    c@2600   c: 2, last 2600           c@3600  2599        a@1500 (yes), c@2200 (no), b@2400 (yes)
    a@2700   a: 3, last 2700           a@3700  2699
    c@4000   c: 3, last 4000           c@5000  (the input ends: no watermark 3999, MAX_WATERMARK instead)
    end of input: MAX_WATERMARK                            c@3600 (no), a@3700 (yes), c@5000 (yes)
"""

from __future__ import annotations

import pytest

from engine import (
    AggregateFunction,
    AggregatingStateDescriptor,
    JobDefinitionError,
    KeyedProcessFunction,
    ListStateDescriptor,
    MAX_WATERMARK,
    ManualClock,
    MapStateDescriptor,
    OutputTag,
    ProcessWindowFunction,
    ReducingStateDescriptor,
    RuntimeContext,
    StreamExecutionEnvironment,
    TimeDomain,
    Types,
    ValueStateDescriptor,
    WatermarkStrategy,
)

TIMEOUT_MS = 1000
EVENTS = [("a", 0), ("b", 100), ("a", 500), ("c", 1200), ("b", 1400), ("c", 2600), ("a", 2700), ("c", 4000)]


class CountWithTimeoutFunction(KeyedProcessFunction):
    """Flink's example, in PyFlink's spelling: emits (key, count, last_modified) after TIMEOUT_MS of quiet."""

    def open(self, runtime_context: RuntimeContext) -> None:
        self.state = runtime_context.get_state(ValueStateDescriptor(
            "my_state", Types.TUPLE([Types.STRING(), Types.LONG(), Types.LONG()])))

    def process_element(self, value, ctx: KeyedProcessFunction.Context):
        current = self.state.value()
        if current is None:
            current = (value[0], 0, 0)
        current = (current[0], current[1] + 1, ctx.timestamp())
        self.state.update(current)
        ctx.timer_service().register_event_time_timer(current[2] + TIMEOUT_MS)

    def on_timer(self, timestamp: int, ctx: KeyedProcessFunction.OnTimerContext):
        key, count, last_modified = self.state.value()
        assert ctx.get_current_key() == key and ctx.time_domain() == TimeDomain.EVENT_TIME
        if timestamp == last_modified + TIMEOUT_MS:
            yield key, count, last_modified


def _env(parallelism: int = 1) -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism)
    env.set_runtime_option("bundle_size", 1)  # a watermark after every record: the timeline above
    return env


def _stamped(env: StreamExecutionEnvironment, events=EVENTS):
    return env.from_collection(events).assign_timestamps_and_watermarks(
        WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, ts: e[1]))


def test_the_count_with_timeout_example_alerts_exactly_as_the_timeline_says() -> None:
    env = _env()
    alerts = _stamped(env).key_by(lambda e: e[0]).process(
        CountWithTimeoutFunction(), output_type=Types.TUPLE([Types.STRING(), Types.LONG(), Types.LONG()]))
    assert alerts.execute_and_collect() == [("b", 1, 100), ("a", 2, 500), ("b", 2, 1400), ("a", 3, 2700),
                                            ("c", 3, 4000)]


def test_alerts_per_key_do_not_depend_on_the_parallelism() -> None:
    env = _env(parallelism=3)
    alerts = _stamped(env).key_by(lambda e: e[0]).process(CountWithTimeoutFunction()).execute_and_collect()
    assert sorted(alerts) == sorted([("b", 1, 100), ("a", 2, 500), ("b", 2, 1400), ("a", 3, 2700), ("c", 3, 4000)])


class _Everything(KeyedProcessFunction):
    """Every state kind, both contexts, both timer kinds and a side output through ``yield tag, value``."""

    LATE = OutputTag("odd", Types.TUPLE([Types.STRING(), Types.INT()]))

    class _Avg(AggregateFunction):
        def create_accumulator(self):
            return (0, 0)

        def add(self, value, acc):
            return acc[0] + value, acc[1] + 1

        def get_result(self, acc):
            return acc[0] / acc[1]

        def merge(self, a, b):
            return a[0] + b[0], a[1] + b[1]

    def open(self, runtime_context: RuntimeContext) -> None:
        self.seen = runtime_context.get_list_state(ListStateDescriptor("seen", Types.INT()))
        self.by_parity = runtime_context.get_map_state(MapStateDescriptor("parity", Types.STRING(), Types.INT()))
        self.total = runtime_context.get_reducing_state(ReducingStateDescriptor("total", lambda a, b: a + b))
        self.avg = runtime_context.get_aggregating_state(AggregatingStateDescriptor("avg", self._Avg()))

    def process_element(self, value, ctx):
        key, n = value
        assert ctx.get_current_key() == key
        self.seen.add(n)
        parity = "odd" if n % 2 else "even"
        self.by_parity.put(parity, (self.by_parity.get(parity) or 0) + 1)
        self.total.add(n)
        self.avg.add(n)
        if n % 2:
            yield self.LATE, (key, n)
        ctx.timer_service().register_event_time_timer(ctx.timestamp() + 10)
        ctx.timer_service().register_event_time_timer(ctx.timestamp() + 10)  # deduplicated: fires once
        ctx.timer_service().register_event_time_timer(ctx.timestamp() + 20)
        ctx.timer_service().delete_event_time_timer(ctx.timestamp() + 20)  # deleted: never fires

    def on_timer(self, timestamp, ctx):
        yield (ctx.get_current_key(), timestamp, ctx.timestamp(), list(self.seen.get()),
               dict(self.by_parity.items()), self.total.get(), self.avg.get(), ctx.timer_service().current_watermark())


def _everything(env: StreamExecutionEnvironment):
    events = [("x", 1, 0), ("y", 2, 5), ("x", 4, 100), ("y", 3, 200)]
    stream = env.from_collection(events).assign_timestamps_and_watermarks(
        WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, ts: e[2]))
    return stream.map(lambda e: (e[0], e[1])).key_by(lambda e: e[0]).process(_Everything())


def test_every_state_kind_is_scoped_to_the_current_key() -> None:
    # x@10 and y@15 fire at watermark 99, after x@100 arrived; the last record ends the input, so no watermark
    # 199 follows it: x@110 and y@210 fire at the end (MAX_WATERMARK)
    assert _everything(_env()).execute_and_collect() == [
        ("x", 10, 10, [1, 4], {"odd": 1, "even": 1}, 5, 2.5, 99),
        ("y", 15, 15, [2], {"even": 1}, 2, 2.0, 99),
        ("x", 110, 110, [1, 4], {"odd": 1, "even": 1}, 5, 2.5, MAX_WATERMARK),
        ("y", 210, 210, [2, 3], {"even": 1, "odd": 1}, 5, 2.5, MAX_WATERMARK),
    ]


def test_yielding_an_output_tag_and_a_value_goes_to_that_side_output() -> None:
    assert _everything(_env()).get_side_output(_Everything.LATE).execute_and_collect() == [("x", 1), ("y", 3)]


def test_timers_fire_in_timestamp_order_across_keys_and_all_fire_at_end_of_input() -> None:
    class EchoTimers(KeyedProcessFunction):
        def process_element(self, value, ctx):
            ctx.timer_service().register_event_time_timer(value[1])
            return ()

        def on_timer(self, timestamp, ctx):
            return [(ctx.get_current_key(), timestamp)]

    env = _env()
    events = [("a", 0, 900), ("b", 1, 300), ("c", 2, 600), ("a", 3, 100)]
    stream = env.from_collection(events).assign_timestamps_and_watermarks(
        WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, ts: e[1]))
    out = stream.map(lambda e: (e[0], e[2])).key_by(lambda e: e[0]).process(EchoTimers()).execute_and_collect()
    assert out == [("a", 100), ("b", 300), ("c", 600), ("a", 900)]  # all due only at MAX_WATERMARK


def test_process_on_a_keyed_stream_needs_a_keyed_process_function() -> None:
    env = _env()
    keyed = _stamped(env).key_by(lambda e: e[0])

    class NotKeyed(ProcessWindowFunction):
        def process(self, key, context, elements):
            return []

    for bad in (NotKeyed(), lambda v, ctx: [v], None):
        with pytest.raises(JobDefinitionError) as err:
            keyed.process(bad)
        assert err.value.parameter == "func" and "KeyedProcessFunction" in str(err.value)


def test_ctx_timestamp_is_none_for_records_without_a_timestamp() -> None:
    """As in Flink: no timestamp assigner upstream, no element timestamp."""

    class Stamp(KeyedProcessFunction):
        def process_element(self, value, ctx):
            yield value, ctx.timestamp()

    env = _env()
    assert env.from_collection([1, 2]).key_by(lambda v: v).process(Stamp()).execute_and_collect() == [
        (1, None), (2, None)]


def test_process_on_a_stream_without_key_by_is_refused_naming_the_way_out() -> None:
    env = _env()
    with pytest.raises(JobDefinitionError, match="key_by") as err:
        _stamped(env).process(CountWithTimeoutFunction())
    assert err.value.parameter == "func"


def test_processing_time_timers_fire_as_the_local_runtimes_clock_advances() -> None:
    class Echo(KeyedProcessFunction):
        def process_element(self, value, ctx):
            ctx.timer_service().register_processing_time_timer(ctx.timer_service().current_processing_time() + 15)

        def on_timer(self, timestamp, ctx):
            yield ctx.get_current_key(), timestamp, ctx.time_domain()

    env = _env()
    env.set_clock(ManualClock(0))
    env.set_runtime_option("clock_step_ms", 10)  # one record per round, 10 ms of processing time per round
    out = env.from_collection([f"k{i % 3}" for i in range(30)]).key_by(lambda v: v).process(Echo()) \
        .execute_and_collect()
    # record i is processed in round i + 1, at 10 * (i + 1) ms: its timer is due at 10 * i + 25 ms, two rounds
    # later, while records still arrive; the last two are pending at the end of bounded input and do not fire
    # (Flink's behaviour)
    assert out == [(f"k{i % 3}", 10 * i + 25, TimeDomain.PROCESSING_TIME) for i in range(28)]
