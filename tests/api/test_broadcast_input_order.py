"""The local runtime reads a connected operator's broadcast input before its other input when both have data.

Flink leaves the order between two inputs open; for the textbook pattern (rules broadcast to a keyed stream of
events, both bounded collections) PyFlink 2.3.0 and Sluice's Spark runtime both applied the rules to every event,
while the local runtime read the events first and applied none (a new user's trial).  The local runtime's input
gate now polls broadcast channels first (engine/runtime/local/channels.py ``InputGate``).
"""

from __future__ import annotations

import pytest

from engine import KeyedBroadcastProcessFunction, MapStateDescriptor, StreamExecutionEnvironment, Types

RULES = MapStateDescriptor("limits", Types.STRING(), Types.INT())


class LimitCheck(KeyedBroadcastProcessFunction):
    def process_broadcast_element(self, rule, ctx):
        ctx.get_broadcast_state(RULES).put(rule[0], rule[1])

    def process_element(self, item, ctx):
        limit = ctx.get_broadcast_state(RULES).get(item[0])
        yield f"check {item[0]} {item[1]} limit={limit} alert={limit is not None and item[1] > limit}"


#: PyFlink 2.3.0's output for this job (parallelism 1)
PYFLINK = ["check apple 3 limit=5 alert=False", "check apple 9 limit=5 alert=True",
           "check fig 2 limit=1 alert=True", "check kiwi 8 limit=None alert=False"]


@pytest.mark.parametrize("parallelism", [1, 2])
def test_rules_broadcast_to_events_apply_to_every_event_on_the_local_runtime(parallelism: int) -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism)
    t = Types.TUPLE([Types.STRING(), Types.INT()])
    rules = env.from_collection([("apple", 5), ("fig", 1)], type_info=t)
    items = env.from_collection([("apple", 3), ("apple", 9), ("fig", 2), ("kiwi", 8)], type_info=t)
    checked = items.key_by(lambda i: i[0], key_type=Types.STRING()).connect(rules.broadcast(RULES)) \
        .process(LimitCheck(), output_type=Types.STRING())
    assert sorted(checked.execute_and_collect()) == PYFLINK
