"""The broadcast process operators fed tagged elements one by one: which side sees which state view, what a
snapshot holds, and that every new subtask restores the same copy (Flink's broadcast state on rescale)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from engine import BroadcastProcessFunction, KeyedBroadcastProcessFunction, ManualClock, MapStateDescriptor
from engine.elements import StreamRecord, Watermark
from engine.errors import CorruptSnapshotError
from engine.operators.base import ListOutput, MaterializedOperatorSnapshot, OperatorContext
from engine.operators.broadcast_process import BroadcastProcessOperator, KeyedBroadcastProcessOperator
from engine.operators.co_functions import TaggedKeySelector
from engine.state.key_groups import KeyGroupRange

PREFIXES = MapStateDescriptor("prefixes")


class Prefix(BroadcastProcessFunction):
    """Broadcast records ("set", key, prefix) set a prefix; other records (key, text) get their key's prefix."""

    def process_broadcast_element(self, value, ctx):
        _, key, prefix = value
        ctx.get_broadcast_state(PREFIXES).put(key, {"prefix": prefix, "since": ctx.timestamp()})
        return None

    def process_element(self, value, ctx):
        entry = ctx.get_broadcast_state(PREFIXES).get(value[0])
        yield (entry["prefix"] if entry else "?") + value[1], ctx.current_watermark()


def _non_keyed(subtask: int = 0, parallelism: int = 1):
    op = BroadcastProcessOperator(Prefix(), [PREFIXES])
    out = ListOutput()
    op.open(OperatorContext("prefix", subtask, parallelism, clock=ManualClock(0)), out)
    return op, out


def test_broadcast_records_write_the_state_that_other_records_read() -> None:
    op, out = _non_keyed()
    op.process_element(StreamRecord((1, ("a", "x")), 1))
    op.process_element(StreamRecord((2, ("set", "a", "A:")), 2))
    op.process_watermark(Watermark(5))
    op.process_element(StreamRecord((1, ("a", "y")), 6))
    assert [(r.value, r.timestamp) for r in out.records()] == [(("?x", -(2 ** 63)), 1), (("A:y", 5), 6)]


def test_every_new_subtask_restores_the_same_copy_of_the_broadcast_state() -> None:
    op, _ = _non_keyed()
    op.process_element(StreamRecord((2, ("set", "a", "A:")), 2))
    op.process_element(StreamRecord((2, ("set", ("b", 1), "B:")), 3))
    snapshot = op.snapshot_state(7)
    op.process_element(StreamRecord((2, ("set", "a", "changed later:")), 4))  # not in the snapshot taken before
    stored = snapshot.materialize()
    assert stored.metadata["broadcast_states"] == ["prefixes"]
    assert stored.tables["broadcast/prefixes"].num_rows == 2
    for subtask in range(3):  # the job restored at parallelism 3: each subtask from the one former copy
        restored, out = _non_keyed(subtask, 3)
        restored.initialize_state([stored])
        restored.process_element(StreamRecord((1, ("a", "x")), 9))
        restored.process_element(StreamRecord((1, (("b", 1), "y")), 9))
        assert [r.value[0] for r in out.records()] == ["A:x", "B:y"]


def test_a_broadcast_table_with_unknown_columns_is_refused() -> None:
    op, _ = _non_keyed()
    stored = op.snapshot_state(1).materialize()
    tampered = MaterializedOperatorSnapshot(stored.metadata, {"broadcast/prefixes": pa.table({"k": ["x"]})})
    fresh, _ = _non_keyed()
    with pytest.raises(CorruptSnapshotError, match="broadcast state table 'broadcast/prefixes' has columns"):
        fresh.initialize_state([tampered])


class KeyedPrefix(KeyedBroadcastProcessFunction):
    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(PREFIXES).put(value[1], value[2])

    def process_element(self, value, ctx):
        ctx.timer_service().register_event_time_timer(ctx.timestamp() + 10)
        return None

    def on_timer(self, timestamp, ctx):
        yield ctx.get_broadcast_state(PREFIXES).get(ctx.get_current_key()), ctx.get_current_key(), timestamp


def test_the_keyed_operator_snapshots_broadcast_state_beside_keyed_timers_and_restores_both() -> None:
    def operator(key_groups):
        op = KeyedBroadcastProcessOperator(KeyedPrefix(), TaggedKeySelector(lambda v: v, None), [PREFIXES])
        out = ListOutput()
        op.open(OperatorContext("keyed-prefix", max_parallelism=8, key_group_range=key_groups,
                                clock=ManualClock(0)), out)
        return op, out

    op, _ = operator(KeyGroupRange(0, 7))
    op.process_element(StreamRecord((2, ("set", "k1", "one")), 0))
    op.process_element(StreamRecord((2, ("set", "k2", "two")), 0))
    for key in ("k1", "k2", "k3"):
        op.process_element(StreamRecord((1, key), 5))
    stored = op.snapshot_state(3).materialize()
    assert {"broadcast/prefixes", "timers"} <= set(stored.tables)
    # rescaled to two subtasks: each restores its keys' timers and the whole broadcast state
    fired = []
    for key_groups in (KeyGroupRange(0, 3), KeyGroupRange(4, 7)):
        restored, out = operator(key_groups)
        restored.initialize_state([stored], key_groups)
        restored.process_watermark(Watermark(100))
        fired += [r.value for r in out.records()]
    assert sorted(fired, key=repr) == sorted([("one", "k1", 15), ("two", "k2", 15), (None, "k3", 15)], key=repr)
