"""HeapKeyedStateBackend: state per (key, namespace), key groups, merging, copy-on-write snapshots."""

from __future__ import annotations

import random

import pytest

from engine.api.functions import AggregateFunction
from engine.errors import IllegalStateError, JobDefinitionError
from engine.state.descriptors import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    ValueStateDescriptor,
)
from engine.state.key_groups import KeyGroupRange, assign_to_key_group
from engine.state.keyed_state import VOID_NAMESPACE, HeapKeyedStateBackend
from engine.windowing.windows import GLOBAL_WINDOW, TimeWindow


class AverageAggregate(AggregateFunction):
    def create_accumulator(self):
        return [0, 0]

    def add(self, value, accumulator):
        accumulator[0] += value  # mutates in place on purpose: snapshots must survive it
        accumulator[1] += 1
        return accumulator

    def get_result(self, accumulator):
        return accumulator[0] / accumulator[1]

    def merge(self, a, b):
        return [a[0] + b[0], a[1] + b[1]]


def full_backend(max_parallelism: int = 128) -> HeapKeyedStateBackend:
    return HeapKeyedStateBackend(max_parallelism, KeyGroupRange(0, max_parallelism - 1))


def test_value_state_is_scoped_by_key_and_namespace():
    backend = full_backend()
    state = backend.get_partitioned_state(ValueStateDescriptor("v", default=-1))
    w1, w2 = TimeWindow(0, 10), TimeWindow(10, 20)
    backend.set_current_key("a")
    state.set_current_namespace(w1)
    state.update(1)
    state.set_current_namespace(w2)
    state.update(2)
    backend.set_current_key("b")
    assert state.value() == -1
    state.update(3)
    backend.set_current_key("a")
    assert state.value() == 2
    state.set_current_namespace(w1)
    assert state.value() == 1
    state.update(None)
    assert state.value() == -1
    assert backend.num_entries() == 2


def test_same_descriptor_name_returns_same_object_and_conflicting_kind_is_refused():
    backend = full_backend()
    a = backend.get_partitioned_state(ListStateDescriptor("x"))
    assert backend.get_partitioned_state(ListStateDescriptor("x")) is a
    with pytest.raises(JobDefinitionError, match="x"):
        backend.get_partitioned_state(ValueStateDescriptor("x"))


def test_set_current_key_computes_the_key_group_and_refuses_foreign_groups():
    backend = HeapKeyedStateBackend(128, KeyGroupRange(0, 63))
    keys = [f"k{i}" for i in range(200)]
    mine = next(k for k in keys if assign_to_key_group(k, 128) <= 63)
    foreign = next(k for k in keys if assign_to_key_group(k, 128) > 63)
    backend.set_current_key(mine)
    assert backend.current_key_group == assign_to_key_group(mine, 128)
    assert backend.get_current_key() == mine
    with pytest.raises(IllegalStateError, match="outside this backend's range"):
        backend.set_current_key(foreign)


def test_tuple_keys_work_and_unhashable_keys_are_refused_with_a_hint():
    backend = full_backend()
    state = backend.get_partitioned_state(ValueStateDescriptor("v"))
    backend.set_current_key(("user", 7))
    state.update("x")
    assert backend.current_key_group == assign_to_key_group(("user", 7), 128)
    assert list(backend.get_keys("v", VOID_NAMESPACE)) == [("user", 7)]
    with pytest.raises(JobDefinitionError, match="tuple"):
        backend.set_current_key(["user", 7])


def test_list_state_returns_none_when_empty_and_update_with_empty_list_clears():
    backend = full_backend()
    state = backend.get_partitioned_state(ListStateDescriptor("l"))
    backend.set_current_key(1)
    state.set_current_namespace(GLOBAL_WINDOW)
    assert state.get() is None
    state.add(1)
    state.add_all([2, 3])
    assert state.get() == [1, 2, 3]
    state.update([9])
    assert state.get() == [9]
    state.update([])
    assert state.get() is None
    assert backend.num_entries() == 0


def test_map_state_operations():
    backend = full_backend()
    state = backend.get_partitioned_state(MapStateDescriptor("m"))
    backend.set_current_key("k")
    assert state.is_empty()
    state.put("a", 1)
    state.put(("t", 1), 2)
    assert state.get("a") == 1 and state.contains(("t", 1)) and not state.contains("z")
    assert dict(state.items()) == {"a": 1, ("t", 1): 2}
    state.remove("a")
    state.remove(("t", 1))
    assert state.is_empty() and backend.num_entries() == 0


def test_reducing_state_reduces_and_merges_namespaces_target_first():
    backend = full_backend()
    state = backend.get_partitioned_state(ReducingStateDescriptor("r", reduce_function=lambda a, b: f"{a}{b}"))
    backend.set_current_key("k")
    for ns, value in [(TimeWindow(0, 5), "a"), (TimeWindow(3, 8), "b"), (TimeWindow(6, 9), "c")]:
        state.set_current_namespace(ns)
        state.add(value)
    state.set_current_namespace(TimeWindow(0, 5))
    state.add("A")
    assert state.get() == "aA"
    state.merge_namespaces(TimeWindow(0, 5), [TimeWindow(3, 8), TimeWindow(6, 9)])
    assert state.get() == "aAbc"
    state.set_current_namespace(TimeWindow(3, 8))
    assert state.get() is None
    assert backend.num_entries() == 1


def test_aggregating_state_exposes_result_and_raw_accumulator_and_merges():
    backend = full_backend()
    state = backend.get_partitioned_state(AggregatingStateDescriptor("avg", aggregate_function=AverageAggregate()))
    backend.set_current_key("k")
    state.set_current_namespace(TimeWindow(0, 10))
    assert state.get() is None
    for v in (1, 2, 3):
        state.add(v)
    assert state.get() == 2
    assert state.get_internal() == [6, 3]
    state.set_current_namespace(TimeWindow(5, 15))
    state.update_internal([10, 1])
    state.set_current_namespace(TimeWindow(0, 15))
    state.merge_namespaces(TimeWindow(0, 15), [TimeWindow(0, 10), TimeWindow(5, 15)])
    assert state.get_internal() == [16, 4]
    assert state.get() == 4


def test_list_state_merge_appends_sources_after_target():
    backend = full_backend()
    state = backend.get_partitioned_state(ListStateDescriptor("l"))
    backend.set_current_key("k")
    state.set_current_namespace(TimeWindow(0, 1))
    state.add("t")
    state.set_current_namespace(TimeWindow(1, 2))
    state.add("s")
    state.merge_namespaces(TimeWindow(0, 1), [TimeWindow(1, 2), TimeWindow(7, 8)])
    state.set_current_namespace(TimeWindow(0, 1))
    assert state.get() == ["t", "s"]


def test_get_keys_lists_keys_of_one_namespace():
    backend = full_backend()
    state = backend.get_partitioned_state(ValueStateDescriptor("v"))
    for key in ("a", "b", "c"):
        backend.set_current_key(key)
        state.set_current_namespace(TimeWindow(0, 10) if key != "c" else TimeWindow(10, 20))
        state.update(key)
    assert sorted(backend.get_keys("v", TimeWindow(0, 10))) == ["a", "b"]
    assert list(backend.get_keys("missing", TimeWindow(0, 10))) == []


def _dump(backend_snapshot):
    return {
        name: sorted((g, repr(k), repr(ns), repr(v)) for g, k, ns, v in backend_snapshot.entries(name))
        for name in backend_snapshot.state_names
    }


def _fill_and_mutate(backend, rng, rounds):
    value = backend.get_partitioned_state(ValueStateDescriptor("value"))
    lst = backend.get_partitioned_state(ListStateDescriptor("list"))
    mp = backend.get_partitioned_state(MapStateDescriptor("map"))
    agg = backend.get_partitioned_state(AggregatingStateDescriptor("agg", aggregate_function=AverageAggregate()))
    for _ in range(rounds):
        backend.set_current_key(f"key-{rng.randrange(50)}")
        ns = TimeWindow(rng.randrange(3) * 10, rng.randrange(3) * 10 + 10)
        for s in (value, lst, mp, agg):
            s.set_current_namespace(ns)
        op = rng.randrange(6)
        if op == 0:
            value.update(rng.randrange(1000))
        elif op == 1:
            lst.add(rng.randrange(1000))
        elif op == 2:
            mp.put(rng.randrange(5), [rng.randrange(9)])
        elif op == 3:
            agg.add(rng.randrange(100))
        elif op == 4:
            lst.clear()
        else:
            got = lst.get()
            if got:
                got.append(-1)  # a caller mutating what it read must not reach the snapshot either
                lst.update(got)


def test_snapshot_reflects_exactly_the_state_at_snapshot_time_despite_heavy_mutation():
    rng = random.Random(7)
    backend = full_backend()
    _fill_and_mutate(backend, rng, 3000)
    snapshot = backend.snapshot()
    expected = _dump(backend.snapshot())  # a second snapshot of the same instant, read right away
    expected_tables = snapshot.to_arrow_tables()
    _fill_and_mutate(backend, rng, 5000)
    later = backend.snapshot()
    _fill_and_mutate(backend, rng, 2000)
    assert _dump(snapshot) == expected
    assert snapshot.to_arrow_tables() == expected_tables
    assert _dump(later) != expected


def test_snapshot_materialized_after_mutation_equals_a_deep_copy_taken_before():
    import copy

    backend = full_backend()
    agg = backend.get_partitioned_state(AggregatingStateDescriptor("agg", aggregate_function=AverageAggregate()))
    backend.set_current_key("k")
    agg.add(1)
    deep_before = copy.deepcopy(agg.get_internal())
    snapshot = backend.snapshot()
    agg.add(5)  # AverageAggregate.add mutates the accumulator list in place
    assert agg.get_internal() == [6, 2]
    (_, _, _, snap_value), = snapshot.entries("agg")
    assert snap_value == deep_before == [1, 1]
