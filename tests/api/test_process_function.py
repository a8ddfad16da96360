"""Non-keyed ``DataStream.process(ProcessFunction)`` and ``ConnectedStreams.process(CoProcessFunction)`` on the local
runtime, as PyFlink writes them (issue 19).

A ProcessFunction runs per record with the record's timestamp (``ctx.timestamp()``), the clocks
(``ctx.timer_service().current_processing_time()`` / ``current_watermark()``) and side outputs (``yield tag,
value``); it has no keyed state and no timers: registering or deleting a timer raises, as in PyFlink ("Register
timers is only supported on a keyed stream.").  It chains like a flat_map.

The watermark a chained function sees, derived by hand for a one-subtask job reading one record per step
(``bundle_size`` 1) with monotonous timestamps: the source emits ``ts - 1`` after each record, so record i sees
the watermark of record i-1 (the first one MIN_WATERMARK).
"""

from __future__ import annotations

import pytest

from engine import (
    MIN_WATERMARK,
    CoProcessFunction,
    JobDefinitionError,
    KeyedCoProcessFunction,
    KeyedProcessFunction,
    OutputTag,
    ProcessFunction,
    StreamExecutionEnvironment,
    Types,
    ValueStateDescriptor,
    WatermarkStrategy,
)
from engine.errors import JobFailedError

LOW = OutputTag("low", Types.TUPLE([Types.STRING(), Types.INT()]))
EVENTS = [("a", 100, 5), ("b", 200, -1), ("c", 300, 7), ("d", 400, -3)]


def _env(parallelism: int = 1, bundle_size: int = 1) -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism)
    env.set_runtime_option("bundle_size", bundle_size)
    return env


def _stamped(env: StreamExecutionEnvironment, events=EVENTS):
    return env.from_collection(events).assign_timestamps_and_watermarks(
        WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, ts: e[1]))


class Annotate(ProcessFunction):
    """Each record with its timestamp and the watermark it was processed under; negative values to ``LOW``."""

    def open(self, runtime_context):
        self.opened = runtime_context.get_number_of_parallel_subtasks() >= 1

    def process_element(self, value, ctx):
        assert self.opened, "open() must run before the first record"
        name, ts, v = value
        if v < 0:
            yield LOW, (name, v)
        else:
            yield name, v, ctx.timestamp(), ctx.timer_service().current_watermark()


def _with_side(stream):
    return stream.union(stream.get_side_output(LOW).map(lambda low: ("low",) + low))


def test_process_yields_main_and_side_outputs_with_the_records_timestamp_and_watermark() -> None:
    result = _with_side(_stamped(_env()).process(Annotate())).execute_and_collect()
    assert sorted(result) == sorted([("a", 5, 100, MIN_WATERMARK), ("c", 7, 300, 199),
                                     ("low", "b", -1), ("low", "d", -3)])


def test_process_without_timestamps_gives_none_and_the_current_processing_time() -> None:
    class Now(ProcessFunction):
        def process_element(self, value, ctx):
            return [(value, ctx.timestamp(), isinstance(ctx.timer_service().current_processing_time(), int))]

    assert _env().from_collection([1, 2]).process(Now()).execute_and_collect() == [(1, None, True), (2, None, True)]


def test_a_process_function_chains_into_its_producers_task_like_a_flat_map() -> None:
    from engine.graph.plan import build_plan

    env = _env(parallelism=2)
    stream = _stamped(env).process(Annotate()).map(lambda r: r)
    plan = build_plan([stream._node], 2, 128)
    assert len(plan.vertices) == 1
    assert [n.name for n in plan.vertices[0].nodes][-2:] == ["Process", "Map"]


@pytest.mark.parametrize("call", ["register_event_time_timer", "register_processing_time_timer",
                                  "delete_event_time_timer", "delete_processing_time_timer"])
def test_timers_on_a_non_keyed_stream_fail_the_job_saying_they_need_a_key(call: str) -> None:
    class Timer(ProcessFunction):
        def process_element(self, value, ctx):
            getattr(ctx.timer_service(), call)(1000)
            yield value

    with pytest.raises((JobDefinitionError, JobFailedError)) as err:
        _stamped(_env()).process(Timer()).execute_and_collect()
    text = str(err.value) + str(err.value.__cause__)
    assert "only supported on a keyed stream" in text and "KeyedProcessFunction" in text, text


def test_keyed_state_in_a_process_function_is_refused_naming_the_way_out() -> None:
    class Stateful(ProcessFunction):
        def open(self, runtime_context):
            self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.INT()))

        def process_element(self, value, ctx):
            yield value

    with pytest.raises((JobDefinitionError, JobFailedError)) as err:
        _env().from_collection([1]).process(Stateful()).execute_and_collect()
    text = str(err.value) + str(err.value.__cause__)
    assert "key_by" in text and "state_descriptor" in text, text


def test_process_refuses_what_is_not_a_process_function_naming_the_parameter() -> None:
    env = _env()
    stream = env.from_collection([1])

    class Keyed(KeyedProcessFunction):
        def process_element(self, value, ctx):
            yield value

    with pytest.raises(JobDefinitionError, match="key_by") as err:
        stream.process(Keyed())
    assert err.value.parameter == "func"
    for bad in (lambda v, ctx: [v], None):
        with pytest.raises(JobDefinitionError, match="ProcessFunction") as err:
            stream.process(bad)
        assert err.value.parameter == "func"
    with pytest.raises(JobDefinitionError, match="KeyedProcessFunction") as err:
        stream.key_by(lambda v: v).process(Annotate())
    assert err.value.parameter == "func"


# ---- CoProcessFunction --------------------------------------------------------------------------------------

ORDERS = [("o1", 100), ("o2", 200), ("o3", 5000)]
PAYMENTS = [("o1", 300), ("o3", 5100)]
LATE = OutputTag("late-payment", Types.STRING())


class Ledger(CoProcessFunction):
    """Orders and payments in one stream; a payment of an order not seen yet in this subtask goes to ``LATE``
    (plain fields are allowed: a CoProcessFunction has no keyed state, only what the subtask's copy holds)."""

    def open(self, runtime_context):
        self.orders = set()

    def process_element1(self, value, ctx):
        self.orders.add(value[0])
        yield "order", value[0], ctx.timestamp()

    def process_element2(self, value, ctx):
        if value[0] not in self.orders:
            yield LATE, value[0]
        yield "payment", value[0], ctx.timestamp(), ctx.timer_service().current_watermark() <= ctx.timestamp()


def test_co_process_calls_process_element1_and_2_with_timestamps_and_side_outputs() -> None:
    env = _env()
    stream = _stamped(env, ORDERS).connect(_stamped(env, PAYMENTS)).process(Ledger())
    result = stream.union(stream.get_side_output(LATE).map(lambda o: ("late", o))).execute_and_collect()
    orders = [("order", o, ts) for o, ts in ORDERS]
    payments = [("payment", o, ts, True) for o, ts in PAYMENTS]
    assert sorted(r for r in result if r[0] != "late") == sorted(orders + payments)
    # a payment processed before its order goes to the side output: which ones depends on the interleaving
    assert {r[1] for r in result if r[0] == "late"} <= {"o1", "o3"}


def test_co_process_sees_the_minimum_of_both_inputs_watermarks() -> None:
    """The orders' own watermark reaches 199 before they end; the second input's 20 records are all at 10, so its
    watermark stays at 9 while it runs (past the orders' end, one record a step): the operator's watermark, the
    minimum of both, stays below 10 for every record (Flink, seed 004); the orders' alone gives o2 99, o3 199."""

    class Marks(CoProcessFunction):
        def process_element1(self, value, ctx):
            yield "1", value[0], ctx.timer_service().current_watermark()

        def process_element2(self, value, ctx):
            yield "2", value[0], ctx.timer_service().current_watermark()

    env = _env()
    steady = [(f"p{i:02d}", 10) for i in range(20)]
    result = _stamped(env, ORDERS).connect(_stamped(env, steady)).process(Marks()).execute_and_collect()
    assert sorted(name for _, name, _ in result) == ["o1", "o2", "o3"] + [p for p, _ in steady]
    assert all(watermark < 10 for _, _, watermark in result), result


def test_co_process_refuses_keyed_inputs_and_other_functions() -> None:
    env = _env()
    connected = env.from_collection([1]).connect(env.from_collection([2]))

    class Both(KeyedCoProcessFunction):
        def process_element1(self, value, ctx):
            yield value

        def process_element2(self, value, ctx):
            yield value

    with pytest.raises(JobDefinitionError, match="KeyedCoProcessFunction") as err:
        connected.key_by(lambda x: x, lambda x: x).process(Ledger())
    assert err.value.parameter == "func"
    with pytest.raises(JobDefinitionError, match="needs two keyed inputs"):
        connected.process(Both())
    with pytest.raises(JobDefinitionError, match="CoProcessFunction") as err:
        connected.process(Annotate())
    assert err.value.parameter == "func"


CLOSED: list = []


def test_open_and_close_bracket_each_subtasks_copy_of_the_function() -> None:
    class Counting(ProcessFunction):
        def open(self, runtime_context):
            self.subtask = runtime_context.get_index_of_this_subtask()
            self.seen = 0

        def process_element(self, value, ctx):
            self.seen += 1
            yield value

        def close(self):
            CLOSED.append((self.subtask, self.seen))

    CLOSED.clear()
    env = _env(parallelism=2)
    assert sorted(env.from_collection(list(range(10))).rebalance().process(Counting()).execute_and_collect()) == \
        list(range(10))
    assert sorted(s for s, _ in CLOSED) == [0, 1] and sum(n for _, n in CLOSED) == 10
