"""Broadcast state on the local runtime, as PyFlink writes it (issue 19): ``broadcast(MapStateDescriptor)``,
``keyed.connect(broadcast_stream).process(KeyedBroadcastProcessFunction)`` and the non-keyed form.

The keyed job checks items against per-colour limits that change over event time.  Rules arrive on the broadcast
side, items on the keyed side; an item waits in keyed state for an event-time timer at its own timestamp, and
the timer judges it by the newest rule at or before that time.  The operator's watermark is the minimum of both
inputs', so when the timer at T fires every rule up to T has been processed; rules after T may have been too,
which is why a rule is kept with its time (a versioned lookup).  Hence one answer whatever the interleaving::

    rules   red<=10 @0    blue<=100 @0    red<=5 @1000
    items   red 7 @100 (limit 10: ok)     blue 150 @200 (limit 100: ALERT)
            red 7 @1500 (limit 5: ALERT)  red 3 @2000 (ok)   blue 50 @3000 (ok)
"""

from __future__ import annotations

import pytest

from engine import (
    BroadcastProcessFunction,
    JobDefinitionError,
    KeyedBroadcastProcessFunction,
    KeyedProcessFunction,
    ListStateDescriptor,
    MapStateDescriptor,
    StreamExecutionEnvironment,
    Types,
    ValueStateDescriptor,
    WatermarkStrategy,
)

RULES_DESCRIPTOR = MapStateDescriptor("rules", Types.STRING(), Types.PICKLED_BYTE_ARRAY())
RULES = [("red", 0, 10), ("blue", 0, 100), ("red", 1000, 5)]
ITEMS = [("red", 100, 7), ("blue", 200, 150), ("red", 1500, 7), ("red", 2000, 3), ("blue", 3000, 50)]
ALERTS = [("alert", "blue", 200, 150, 100), ("alert", "red", 1500, 7, 5)]


class LimitCheck(KeyedBroadcastProcessFunction):
    """Alerts for items over their colour's limit at the item's time; also counts the key's items (keyed state)."""

    def open(self, runtime_context):
        self.waiting = runtime_context.get_list_state(ListStateDescriptor("waiting", Types.TUPLE([])))
        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG(), default=0))

    def process_broadcast_element(self, value, ctx: KeyedBroadcastProcessFunction.Context):
        colour, since, limit = value
        rules = ctx.get_broadcast_state(RULES_DESCRIPTOR)
        rules.put(colour, sorted((rules.get(colour) or []) + [[since, limit]]))

    def process_element(self, value, ctx: KeyedBroadcastProcessFunction.ReadOnlyContext):
        assert ctx.get_current_key() == value[0]
        self.waiting.add(value)
        self.count.update(self.count.value() + 1)
        ctx.timer_service().register_event_time_timer(ctx.timestamp())

    def on_timer(self, timestamp, ctx: KeyedBroadcastProcessFunction.OnTimerContext):
        rules = ctx.get_broadcast_state(RULES_DESCRIPTOR).get(ctx.get_current_key()) or []
        limits = [limit for since, limit in rules if since <= timestamp]
        keep = []
        for colour, ts, amount in self.waiting.get():
            if ts != timestamp:
                keep.append((colour, ts, amount))
            elif limits and amount > limits[-1]:
                yield "alert", colour, ts, amount, limits[-1]
        self.waiting.update(keep)


def _env(parallelism: int, bundle_size: int = 1) -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism)
    env.set_runtime_option("bundle_size", bundle_size)
    return env


def _stamped(env, events):
    return env.from_collection(events).assign_timestamps_and_watermarks(
        WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, ts: e[1]))


@pytest.mark.parametrize("parallelism", [1, 2, 3])
def test_keyed_broadcast_process_judges_each_item_by_the_rule_at_its_time(parallelism: int) -> None:
    env = _env(parallelism)
    rules = _stamped(env, RULES).broadcast(RULES_DESCRIPTOR)
    result = _stamped(env, ITEMS).key_by(lambda i: i[0]).connect(rules).process(LimitCheck()).execute_and_collect()
    assert sorted(result) == ALERTS


class Echo(BroadcastProcessFunction):
    """Every subtask reports each broadcast record it stored; records of the other side pass with their subtask's
    number of stored rules once the input ended (read-only there)."""

    def open(self, runtime_context):
        self.subtask = runtime_context.get_index_of_this_subtask()

    def process_broadcast_element(self, value, ctx: BroadcastProcessFunction.Context):
        ctx.get_broadcast_state(RULES_DESCRIPTOR).put(value[0], value[2])
        yield "stored", self.subtask, value[0], ctx.timestamp()

    def process_element(self, value, ctx: BroadcastProcessFunction.ReadOnlyContext):
        state = ctx.get_broadcast_state(RULES_DESCRIPTOR)
        assert not hasattr(state, "put"), "process_element sees the broadcast state read-only"
        yield "item", value[0], value[1]


@pytest.mark.parametrize("parallelism", [1, 3])
def test_every_subtask_processes_every_broadcast_record_and_each_item_once(parallelism: int) -> None:
    env = _env(parallelism)
    rules = _stamped(env, RULES).broadcast(RULES_DESCRIPTOR)
    result = _stamped(env, ITEMS).connect(rules).process(Echo()).execute_and_collect()
    stored = sorted(r for r in result if r[0] == "stored")
    assert stored == sorted(("stored", s, colour, since) for s in range(parallelism) for colour, since, _ in RULES)
    assert sorted(r for r in result if r[0] == "item") == sorted(("item", c, ts) for c, ts, _ in ITEMS)


def test_broadcast_without_descriptors_sends_every_record_to_every_subtask() -> None:
    env = _env(3)
    result = env.from_collection([1, 2]).broadcast().map(lambda x: x * 10).set_parallelism(3).execute_and_collect()
    assert sorted(result) == [10, 10, 10, 20, 20, 20]


def test_keyed_state_is_refused_in_process_broadcast_element() -> None:
    class Misuse(LimitCheck):
        def process_broadcast_element(self, value, ctx):
            self.count.update(1)

    env = _env(1)
    rules = _stamped(env, RULES).broadcast(RULES_DESCRIPTOR)
    job = _stamped(env, ITEMS).key_by(lambda i: i[0]).connect(rules).process(Misuse())
    with pytest.raises(Exception, match="keyed state 'count' is not available in process_broadcast_element"):
        job.execute_and_collect()


def test_a_descriptor_not_given_to_broadcast_is_refused_naming_it() -> None:
    class Unknown(BroadcastProcessFunction):
        def process_broadcast_element(self, value, ctx):
            ctx.get_broadcast_state(MapStateDescriptor("other"))

        def process_element(self, value, ctx):
            return None

    env = _env(1)
    rules = env.from_collection(RULES).broadcast(RULES_DESCRIPTOR)
    with pytest.raises(Exception, match=r"`state_descriptor` must be one of the MapStateDescriptors given to "
                                        r"broadcast\(...\): \['rules'\]"):
        env.from_collection(ITEMS).connect(rules).process(Unknown()).execute_and_collect()


def test_process_refuses_the_wrong_function_type_naming_the_parameter() -> None:
    env = _env(1)
    rules = env.from_collection(RULES).broadcast(RULES_DESCRIPTOR)
    items = env.from_collection(ITEMS)
    with pytest.raises(JobDefinitionError, match="`func` must be a KeyedBroadcastProcessFunction on a keyed stream"):
        items.key_by(lambda i: i[0]).connect(rules).process(Echo())
    with pytest.raises(JobDefinitionError, match="`func` must be a BroadcastProcessFunction on a non-keyed stream"):
        items.connect(rules).process(LimitCheck())

    class NotBroadcast(KeyedProcessFunction):
        def process_element(self, value, ctx):
            return None

    with pytest.raises(JobDefinitionError, match="`func` must be a KeyedBroadcastProcessFunction"):
        items.key_by(lambda i: i[0]).connect(rules).process(NotBroadcast())
    with pytest.raises(JobDefinitionError, match=r"`broadcast_state_descriptors\[0\]` must be a MapStateDescriptor"):
        items.broadcast(ValueStateDescriptor("v"))
    with pytest.raises(JobDefinitionError, match=r"`broadcast_state_descriptors\[1\]` must have a name of its own"):
        items.broadcast(RULES_DESCRIPTOR, MapStateDescriptor("rules"))
