"""``connect`` with CoMap/CoFlatMap/KeyedCoProcess functions on the local runtime, as PyFlink writes them (issue 19).

The keyed job matches orders with payments (PyFlink's KeyedCoProcessFunction, keyed state and an event-time
timer ``PAY_WITHIN_MS`` after each order).  Its output depends on the two-input watermark being the MINIMUM of
both inputs' (Flink, seed 004)::

    orders     o1@100        o2@200                                  o3@5000
    payments              o1@300                                          o3@5100
    timers     o1@1100       o2@1200                                 o3@6000

The timer o1@1100 may fire only once the payments' watermark passed 1100, i.e. after payment o1@300 was
processed (a channel is FIFO): o1 is paid.  A watermark that followed the orders alone could reach 4999 first and
report o1 unpaid.  o2 has no payment: its timer reports it (at 1200, with the timer's timestamp); o3 is paid.
"""

from __future__ import annotations

import pytest

from engine import (
    CoFlatMapFunction,
    CoMapFunction,
    JobDefinitionError,
    KeyedCoProcessFunction,
    KeyedProcessFunction,
    OutputTag,
    StreamExecutionEnvironment,
    Types,
    ValueStateDescriptor,
    WatermarkStrategy,
)

PAY_WITHIN_MS = 1000
ORDERS = [("o1", 100), ("o2", 200), ("o3", 5000)]
PAYMENTS = [("o1", 300), ("o3", 5100)]


def _env(parallelism: int = 1, bundle_size: int = 1) -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism)
    env.set_runtime_option("bundle_size", bundle_size)
    return env


def _stamped(env: StreamExecutionEnvironment, events):
    return env.from_collection(events).assign_timestamps_and_watermarks(
        WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, ts: e[1]))


class Tagger(CoMapFunction):
    def map1(self, value):
        return f"number {value}"

    def map2(self, value):
        return f"word {value}"


class Splitter(CoFlatMapFunction):
    def flat_map1(self, value):
        yield from range(value)

    def flat_map2(self, value):
        return value.split()


@pytest.mark.parametrize("parallelism", [1, 2])
def test_co_map_calls_map1_for_the_first_stream_and_map2_for_the_second(parallelism: int) -> None:
    env = _env(parallelism)
    numbers, words = env.from_collection([1, 2, 3]), env.from_collection(["x", "y"])
    result = numbers.connect(words).map(Tagger(), output_type=Types.STRING()).execute_and_collect()
    assert sorted(result) == ["number 1", "number 2", "number 3", "word x", "word y"]


@pytest.mark.parametrize("parallelism", [1, 2])
def test_co_flat_map_emits_every_result_of_both_functions(parallelism: int) -> None:
    env = _env(parallelism)
    counts, lines = env.from_collection([2, 3]), env.from_collection(["a b", "c"])
    result = counts.connect(lines).flat_map(Splitter()).execute_and_collect()
    assert sorted(map(str, result)) == ["0", "0", "1", "1", "2", "a", "b", "c"]


def test_a_keyed_co_map_routes_both_inputs_by_key_to_one_subtask() -> None:
    env = _env(3)
    left, right = env.from_collection([("k1", 1), ("k2", 2)]), env.from_collection([("k1", 10), ("k2", 20)])

    class KeyAndSubtask(CoMapFunction):
        def map1(self, value):
            return value[0], "left", value[1]

        def map2(self, value):
            return value[0], "right", value[1]

    result = left.connect(right).key_by(lambda e: e[0], lambda e: e[0]).map(KeyAndSubtask()).execute_and_collect()
    assert sorted(result) == [("k1", "left", 1), ("k1", "right", 10), ("k2", "left", 2), ("k2", "right", 20)]


class MatchPayments(KeyedCoProcessFunction):
    """An order is ("id", ts), a payment ("id", ts); emits ("paid", id) or, PAY_WITHIN_MS after an unpaid order,
    ("unpaid", id, timer time); every payment also goes to the audit side output."""

    AUDIT = OutputTag("payments-audit", Types.STRING())

    def open(self, runtime_context):
        self.order = runtime_context.get_state(ValueStateDescriptor("order", Types.LONG()))
        self.paid = runtime_context.get_state(ValueStateDescriptor("paid", Types.BOOLEAN(), default=False))

    def process_element1(self, value, ctx: KeyedCoProcessFunction.Context):
        self.order.update(ctx.timestamp())
        if self.paid.value():
            yield "paid", value[0]
        else:
            ctx.timer_service().register_event_time_timer(ctx.timestamp() + PAY_WITHIN_MS)

    def process_element2(self, value, ctx: KeyedCoProcessFunction.Context):
        assert ctx.get_current_key() == value[0]
        yield self.AUDIT, f"{value[0]}@{ctx.timestamp()}"
        self.paid.update(True)
        if self.order.value() is not None:
            yield "paid", value[0]

    def on_timer(self, timestamp, ctx: KeyedCoProcessFunction.OnTimerContext):
        if not self.paid.value():
            yield "unpaid", ctx.get_current_key(), timestamp


@pytest.mark.parametrize("parallelism", [1, 2, 3])
@pytest.mark.parametrize("how", ["key_by after connect", "two keyed streams"])
def test_keyed_co_process_matches_orders_and_payments_under_the_minimum_watermark(parallelism: int, how: str) -> None:
    env = _env(parallelism)
    orders, payments = _stamped(env, ORDERS), _stamped(env, PAYMENTS)
    if how == "key_by after connect":
        connected = orders.connect(payments).key_by(lambda o: o[0], lambda p: p[0])
    else:
        connected = orders.key_by(lambda o: o[0]).connect(payments.key_by(lambda p: p[0]))
    result = connected.process(MatchPayments()).execute_and_collect()
    assert sorted(result) == [("paid", "o1"), ("paid", "o3"), ("unpaid", "o2", 1200)]


def test_process_element2_yields_to_a_side_output_with_the_record_timestamp() -> None:
    env = _env(2)
    orders, payments = _stamped(env, ORDERS), _stamped(env, PAYMENTS)
    matched = orders.key_by(lambda o: o[0]).connect(payments.key_by(lambda p: p[0])).process(MatchPayments())
    audit = matched.get_side_output(MatchPayments.AUDIT)
    assert sorted(audit.execute_and_collect()) == ["o1@300", "o3@5100"]


def test_co_map_and_flat_map_refuse_other_functions_naming_the_parameter() -> None:
    env = _env()
    connected = env.from_collection([1]).connect(env.from_collection([2]))
    with pytest.raises(JobDefinitionError, match="`func` must be a CoMapFunction"):
        connected.map(lambda x: x)
    with pytest.raises(JobDefinitionError, match="`func` must be a CoFlatMapFunction"):
        connected.flat_map(Tagger())


def test_process_on_connected_streams_needs_a_keyed_co_process_function_and_keys() -> None:
    env = _env()
    connected = env.from_collection([1]).connect(env.from_collection([2]))

    class OneInput(KeyedProcessFunction):
        def process_element(self, value, ctx):
            yield value

    with pytest.raises(JobDefinitionError,
                       match="`func` must be a KeyedCoProcessFunction or a CoProcessFunction on ConnectedStreams"):
        connected.key_by(lambda x: x, lambda x: x).process(OneInput())
    with pytest.raises(JobDefinitionError, match="`func` needs two keyed inputs"):
        connected.process(MatchPayments())
    with pytest.raises(JobDefinitionError, match="`ds` must be a DataStream or a BroadcastStream"):
        env.from_collection([1]).connect([2])
    with pytest.raises(JobDefinitionError, match="`key_selector2`"):
        connected.key_by(lambda x: x, 3.5)


class Pair(KeyedCoProcessFunction):
    def process_element1(self, value, ctx):
        yield "first", value

    def process_element2(self, value, ctx):
        yield "second", value


def _by_id(record):
    return record["id"]


def keyless_records_job(env: StreamExecutionEnvironment, how: str):
    """Records without an ``id`` on both inputs of a keyed connect (``how``: two KeyedStreams, ``key_by`` after
    connect) and on the keyed side of a broadcast connect."""
    from engine import KeyedBroadcastProcessFunction, MapStateDescriptor

    first = env.from_collection([{"id": 1}, {"no_id": 2}])
    second = env.from_collection([{"id": 1}, {"no_id": 3}])
    if how == "broadcast":
        class Pass(KeyedBroadcastProcessFunction):
            def process_element(self, value, ctx):
                yield "first", value

            def process_broadcast_element(self, value, ctx):
                return None

        return first.key_by(_by_id).connect(second.broadcast(MapStateDescriptor("seen"))).process(Pass())
    if how == "two keyed":
        return first.key_by(_by_id).connect(second.key_by(_by_id)).process(Pair())
    return first.connect(second).key_by(_by_id, _by_id).process(Pair())


KEYLESS_DEAD_LETTERS = {
    "two keyed": [({"no_id": 2}, "key_selector:input1"), ({"no_id": 3}, "key_selector:input2")],
    "key_by after connect": [({"no_id": 2}, "key_selector:input1"), ({"no_id": 3}, "key_selector:input2")],
    "broadcast": [({"no_id": 2}, "key_selector:input1")],
}


def dead_letters_of(env: StreamExecutionEnvironment) -> list:
    letters = env.get_last_result().dead_letters
    assert all(d["error"] == "KeyError: 'id'" for d in letters), letters
    return sorted(((d["value"], d["stage"]) for d in letters), key=repr)


@pytest.mark.parametrize("how", ["two keyed", "key_by after connect", "broadcast"])
def test_a_record_whose_key_selector_raises_is_a_dead_letter_naming_its_input(how: str) -> None:
    """The user's record, not the internal ``(input, value)`` pair, with the input it came on in the stage."""
    env = _env(2)
    result = keyless_records_job(env, how).execute_and_collect()
    assert sorted(result) == ([("first", {"id": 1})] if how == "broadcast"
                              else [("first", {"id": 1}), ("second", {"id": 1})])
    assert dead_letters_of(env) == KEYLESS_DEAD_LETTERS[how]
