"""Keyed-state snapshots as Arrow tables: round trips, rescaling by key group, refusal of corrupt tables."""

from __future__ import annotations

import pyarrow as pa
import pytest

from engine.api.functions import AggregateFunction
from engine.errors import CorruptSnapshotError, UnsupportedFormatVersion
from engine.state import codec
from engine.state.descriptors import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    ValueStateDescriptor,
)
from engine.state.key_groups import KeyGroupRange, assign_to_key_group, key_group_range_for_operator
from engine.state.keyed_state import VOID_NAMESPACE, HeapKeyedStateBackend
from engine.state.snapshot import decode_namespace, encode_namespace
from engine.windowing.windows import GLOBAL_WINDOW, TimeWindow


class SumCount(AggregateFunction):
    def create_accumulator(self):
        return (0, 0)

    def add(self, value, acc):
        return (acc[0] + value, acc[1] + 1)

    def get_result(self, acc):
        return acc[0]

    def merge(self, a, b):
        return (a[0] + b[0], a[1] + b[1])


DESCRIPTORS = [
    ValueStateDescriptor("value"),
    ListStateDescriptor("list"),
    MapStateDescriptor("map"),
    ReducingStateDescriptor("reducing", reduce_function=lambda a, b: a + b),
    AggregatingStateDescriptor("aggregating", aggregate_function=SumCount()),
]
NAMESPACES = [TimeWindow(-10, 0), TimeWindow(0, 10), GLOBAL_WINDOW, VOID_NAMESPACE]
KEYS = ["alice", 42, ("bob", 3), "", -7]


def populate(backend: HeapKeyedStateBackend, keys=KEYS) -> None:
    states = [backend.get_partitioned_state(d) for d in DESCRIPTORS]
    value, lst, mp, red, agg = states
    for i, key in enumerate(keys):
        backend.set_current_key(key)
        for j, ns in enumerate(NAMESPACES):
            for s in states:
                s.set_current_namespace(ns)
            value.update({"n": i * 10 + j, "tags": ("a", b"\x00")} if j % 2 else i * 10 + j + 0.5)
            lst.add_all([(i, j), [None, True], {"x": float("inf")}])
            mp.put((i, j), {"$odd": 1})
            mp.put("plain", [1, 2])
            red.add(i)
            red.add(j)
            agg.add(i + j)


def dump(backend: HeapKeyedStateBackend) -> dict:
    return {name: sorted((g, repr(k), repr(ns), repr(v)) for g, k, ns, v in backend.snapshot().entries(name))
            for name in backend.state_names}


def fresh(range_: KeyGroupRange) -> HeapKeyedStateBackend:
    backend = HeapKeyedStateBackend(128, range_)
    for d in DESCRIPTORS:
        backend.get_partitioned_state(d)
    return backend


def test_every_state_kind_and_namespace_kind_round_trips_through_arrow():
    source = fresh(KeyGroupRange(0, 127))
    populate(source)
    tables = source.snapshot().to_arrow_tables()
    assert set(tables) == {d.name for d in DESCRIPTORS}
    target = fresh(KeyGroupRange(0, 127))
    target.restore_from_arrow(tables)
    assert dump(target) == dump(source)
    assert target.num_entries() == len(KEYS) * len(NAMESPACES) * len(DESCRIPTORS)
    # restored state is live state: it can be read and extended through the state objects
    agg = target.get_partitioned_state(DESCRIPTORS[4])
    target.set_current_key(("bob", 3))
    agg.set_current_namespace(TimeWindow(0, 10))
    assert agg.get_internal() == (2 + 1, 1)
    agg.add(100)
    assert agg.get() == 103


def test_arrow_tables_carry_kind_window_bounds_and_numeric_values():
    source = fresh(KeyGroupRange(0, 127))
    populate(source)
    tables = source.snapshot().to_arrow_tables()
    for d in DESCRIPTORS:
        kind = tables[d.name].schema.metadata[b"state_kind"].decode()
        assert kind == type(source.get_partitioned_state(d)).kind
    rows = tables["value"].to_pylist()
    time_rows = [r for r in rows if r["namespace"] == encode_namespace(TimeWindow(0, 10))]
    assert {(r["window_start"], r["window_end"]) for r in time_rows} == {(0, 10)}
    assert all(r["window_start"] is None for r in rows if '"time"' not in r["namespace"])
    assert all(r["key_group"] == assign_to_key_group(codec.decode(r["key"]), 128) for r in rows)
    numeric = [r for r in rows if r["value_num"] is not None]
    assert numeric and all(float(r["value"]) == r["value_num"] for r in numeric)
    assert all(r["value_num"] is None for r in tables["list"].to_pylist())


def test_namespaces_encode_distinguishably_and_decode_back():
    encoded = [encode_namespace(ns) for ns in NAMESPACES + [("custom", 1)]]
    assert len(set(encoded)) == len(encoded)
    assert [decode_namespace(e) for e in encoded] == NAMESPACES + [("custom", 1)]


def test_rescaling_two_backends_into_three_keeps_every_entry_exactly_once():
    keys = [f"user-{i}" for i in range(300)]
    old = [fresh(KeyGroupRange(0, 63)), fresh(KeyGroupRange(64, 127))]
    for backend in old:
        populate(backend, [k for k in keys if backend.key_group_range.contains(assign_to_key_group(k, 128))])
    all_tables = [b.snapshot().to_arrow_tables() for b in old]
    merged = {name: pa.concat_tables([t[name] for t in all_tables]) for name in all_tables[0]}
    new = [fresh(key_group_range_for_operator(128, 3, i)) for i in range(3)]
    for backend in new:
        backend.restore_from_arrow(merged)
    combined_old = {n: sorted(sum((dump(b)[n] for b in old), [])) for n in dump(old[0])}
    combined_new = {n: sorted(sum((dump(b)[n] for b in new), [])) for n in dump(new[0])}
    assert combined_new == combined_old
    assert sum(b.num_entries() for b in new) == sum(b.num_entries() for b in old) == 300 * 4 * 5
    for backend in new:
        for name in backend.state_names:
            assert all(backend.key_group_range.contains(g) for g, *_ in backend.snapshot().entries(name))


def test_restoring_a_table_without_a_column_names_table_and_column():
    source = fresh(KeyGroupRange(0, 127))
    populate(source)
    tables = source.snapshot().to_arrow_tables()
    tables["list"] = tables["list"].drop_columns(["namespace"])
    with pytest.raises(CorruptSnapshotError, match=r"'list'.*'namespace'"):
        fresh(KeyGroupRange(0, 127)).restore_from_arrow(tables)


def test_restoring_a_column_of_the_wrong_type_names_table_and_column():
    source = fresh(KeyGroupRange(0, 127))
    populate(source)
    tables = source.snapshot().to_arrow_tables()
    t = tables["value"]
    tables["value"] = t.set_column(t.column_names.index("key_group"), pa.field("key_group", pa.int64()),
                                   t.column("key_group").cast(pa.int64())).replace_schema_metadata(t.schema.metadata)
    with pytest.raises(CorruptSnapshotError, match=r"'value'.*'key_group'.*int64"):
        fresh(KeyGroupRange(0, 127)).restore_from_arrow(tables)


def test_a_row_placed_in_the_wrong_key_group_is_refused():
    source = fresh(KeyGroupRange(0, 127))
    populate(source)
    t = source.snapshot().to_arrow_tables()["reducing"]
    groups = [(g + 1) % 128 for g in t.column("key_group").to_pylist()]
    tampered = t.set_column(0, t.schema.field("key_group"), pa.array(groups, pa.int32()))
    with pytest.raises(CorruptSnapshotError, match=r"'reducing'.*'key_group'"):
        fresh(KeyGroupRange(0, 127)).restore_from_arrow({"reducing": tampered})


def test_unknown_state_kind_and_format_version_are_refused():
    source = fresh(KeyGroupRange(0, 127))
    populate(source)
    t = source.snapshot().to_arrow_tables()["value"]
    bad_kind = t.replace_schema_metadata({**t.schema.metadata, b"state_kind": b"pickled"})
    with pytest.raises(CorruptSnapshotError, match="state_kind"):
        fresh(KeyGroupRange(0, 127)).restore_from_arrow({"value": bad_kind})
    newer = t.replace_schema_metadata({**t.schema.metadata, b"format_version": b"99"})
    with pytest.raises(UnsupportedFormatVersion):
        fresh(KeyGroupRange(0, 127)).restore_from_arrow({"value": newer})


def test_a_value_that_is_not_codec_json_is_refused():
    source = fresh(KeyGroupRange(0, 127))
    populate(source)
    t = source.snapshot().to_arrow_tables()["value"]
    idx = t.column_names.index("value")
    tampered = t.set_column(idx, t.schema.field("value"), pa.array(["\x80gASV"] * t.num_rows, pa.string()))
    with pytest.raises(CorruptSnapshotError, match=r"'value' column 'value'|column 'value'"):
        fresh(KeyGroupRange(0, 127)).restore_from_arrow({"value": tampered})


def test_declaring_a_restored_state_with_another_kind_is_refused():
    source = fresh(KeyGroupRange(0, 127))
    populate(source)
    tables = source.snapshot().to_arrow_tables()
    target = HeapKeyedStateBackend(128, KeyGroupRange(0, 127))
    target.restore_from_arrow(tables)
    with pytest.raises(Exception, match="list"):
        target.get_partitioned_state(ValueStateDescriptor("list"))
