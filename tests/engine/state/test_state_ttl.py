"""State time-to-live (engine/state/ttl.py) against Flink's TTL rules, on a ManualClock.

Flink's rules (``AbstractTtlDecorator``, ``TtlValueState``, ``TtlListState``, ``TtlMapState``): an entry expires
once ``last stamp + ttl <= now``; reading an expired entry removes it and returns it only under
``ReturnExpiredIfNotCleanedUp``; writes stamp, reads stamp only under ``OnReadAndWrite``; list elements and map
entries expire one by one; a state cannot gain or lose TTL across a restore.
"""

from __future__ import annotations

import pytest

from engine import StateTtlConfig, Time
from engine.api.functions import AggregateFunction
from engine.clock import ManualClock
from engine.errors import CorruptSnapshotError, JobDefinitionError
from engine.state.descriptors import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    ValueStateDescriptor,
)
from engine.state.key_groups import KeyGroupRange
from engine.state.keyed_state import HeapKeyedStateBackend


class Average(AggregateFunction):
    def create_accumulator(self):
        return (0, 0)

    def add(self, value, acc):
        return (acc[0] + value, acc[1] + 1)

    def get_result(self, acc):
        return acc[0] / acc[1]

    def merge(self, a, b):
        return (a[0] + b[0], a[1] + b[1])


def ttl(seconds: float = 10, *, on_read: bool = False, return_expired: bool = False) -> StateTtlConfig:
    builder = StateTtlConfig.new_builder(Time.seconds(seconds))
    if on_read:
        builder.update_ttl_on_read_and_write()
    if return_expired:
        builder.return_expired_if_not_cleaned_up()
    return builder.build()


def backend(clock: ManualClock) -> HeapKeyedStateBackend:
    b = HeapKeyedStateBackend(128, KeyGroupRange(0, 127))
    b.ttl_clock = clock
    b.set_current_key("alice")
    return b


def value_state(b: HeapKeyedStateBackend, config: StateTtlConfig, name: str = "v"):
    d = ValueStateDescriptor(name)
    d.enable_time_to_live(config)
    return b.get_partitioned_state(d)


def test_a_value_expires_ttl_after_its_last_write_and_a_write_renews_it():
    clock = ManualClock(1_000)
    b = backend(clock)
    state = value_state(b, ttl(10))
    state.update(5)
    clock.advance(9_999)
    assert state.value() == 5
    state.update(6)  # stamped at 10_999
    clock.advance(9_999)
    assert state.value() == 6
    clock.advance(1)  # 10_999 + 10_000 <= now
    assert state.value() is None
    assert b.num_entries("v") == 0  # the read removed it


def test_reads_do_not_renew_under_on_create_and_write_but_do_under_on_read_and_write():
    clock = ManualClock(0)
    b = backend(clock)
    write_only, read_too = value_state(b, ttl(10), "w"), value_state(b, ttl(10, on_read=True), "r")
    write_only.update("x")
    read_too.update("x")
    clock.advance(6_000)
    assert write_only.value() == "x" and read_too.value() == "x"  # the second read stamps 6_000
    clock.advance(6_000)
    assert write_only.value() is None
    assert read_too.value() == "x"


def test_an_expired_value_is_returned_once_only_if_visibility_allows_it():
    clock = ManualClock(0)
    b = backend(clock)
    never, once = value_state(b, ttl(1), "never"), value_state(b, ttl(1, return_expired=True), "once")
    never.update(1)
    once.update(1)
    clock.advance(1_000)
    assert never.value() is None
    assert once.value() == 1
    assert once.value() is None  # cleaned up by the first read


def test_a_value_state_default_is_returned_for_an_expired_entry():
    clock = ManualClock(0)
    b = backend(clock)
    d = ValueStateDescriptor("count", default=0)
    d.enable_time_to_live(ttl(1))
    state = b.get_partitioned_state(d)
    state.update(7)
    clock.advance(1_000)
    assert state.value() == 0


def test_list_elements_expire_one_by_one():
    clock = ManualClock(0)
    b = backend(clock)
    d = ListStateDescriptor("l")
    d.enable_time_to_live(ttl(10))
    state = b.get_partitioned_state(d)
    state.add("a")
    clock.advance(5_000)
    state.add_all(["b", "c"])
    assert list(state.get()) == ["a", "b", "c"]
    clock.advance(5_000)  # "a" expires
    assert list(state.get()) == ["b", "c"]
    clock.advance(5_000)
    assert state.get() is None
    assert b.num_entries("l") == 0


def test_map_entries_expire_one_by_one_and_iteration_skips_expired_ones():
    clock = ManualClock(0)
    b = backend(clock)
    d = MapStateDescriptor("m")
    d.enable_time_to_live(ttl(10))
    state = b.get_partitioned_state(d)
    state.put("old", 1)
    clock.advance(5_000)
    state.put_all({"new": 2, "newer": 3})
    clock.advance(5_000)
    assert state.get("old") is None
    assert not state.contains("old")
    assert dict(state.items()) == {"new": 2, "newer": 3}
    assert sorted(state.keys()) == ["new", "newer"] and sorted(state.values()) == [2, 3]
    clock.advance(5_000)
    assert state.is_empty()


def test_reducing_and_aggregating_state_restart_from_nothing_once_expired():
    clock = ManualClock(0)
    b = backend(clock)
    rd = ReducingStateDescriptor("r", lambda a, c: a + c)
    rd.enable_time_to_live(ttl(10))
    ad = AggregatingStateDescriptor("a", Average())
    ad.enable_time_to_live(ttl(10))
    reducing, aggregating = b.get_partitioned_state(rd), b.get_partitioned_state(ad)
    for v in (1, 2, 3):
        reducing.add(v)
        aggregating.add(v)
    assert reducing.get() == 6 and aggregating.get() == 2
    clock.advance(10_000)
    reducing.add(10)
    aggregating.add(10)
    assert reducing.get() == 10 and aggregating.get() == 10


def test_entries_are_per_key():
    clock = ManualClock(0)
    b = backend(clock)
    state = value_state(b, ttl(10))
    state.update("a")
    clock.advance(5_000)
    b.set_current_key("bob")
    state.update("b")
    clock.advance(5_000)
    assert state.value() == "b"
    b.set_current_key("alice")
    assert state.value() is None


def test_ttl_entries_survive_a_snapshot_with_their_stamps_and_expire_on_restore():
    clock = ManualClock(0)
    source = backend(clock)
    state = value_state(source, ttl(10))
    state.update("early")
    clock.advance(6_000)
    source.set_current_key("bob")
    state.update("late")
    tables = source.snapshot().to_arrow_tables()
    assert tables["v"].schema.metadata[b"state_kind"] == b"value-ttl"

    clock.advance(5_000)  # alice's entry (stamped 0) expired, bob's (6_000) has not
    target = HeapKeyedStateBackend(128, KeyGroupRange(0, 127))
    target.ttl_clock = clock
    target.restore_from_arrow(tables)
    restored = value_state(target, ttl(10))
    assert target.num_entries("v") == 1  # cleaned at restore, before any read
    target.set_current_key("bob")
    assert restored.value() == "late"
    clock.advance(5_000)
    assert restored.value() is None  # the stamp survived the snapshot: 6_000 + 10_000


def test_a_state_cannot_gain_or_lose_ttl_across_a_restore():
    clock = ManualClock(0)
    with_ttl = backend(clock)
    value_state(with_ttl, ttl(10)).update(1)
    plain = backend(clock)
    plain.get_partitioned_state(ValueStateDescriptor("v")).update(1)

    for tables, descriptor in ((with_ttl.snapshot().to_arrow_tables(), ValueStateDescriptor("v")),
                               (plain.snapshot().to_arrow_tables(), None)):
        target = backend(clock)
        target.restore_from_arrow(tables)
        if descriptor is None:
            descriptor = ValueStateDescriptor("v")
            descriptor.enable_time_to_live(ttl(10))
        with pytest.raises(JobDefinitionError, match="time-to-live"):
            target.get_partitioned_state(descriptor)


def test_a_changed_ttl_applies_to_restored_entries():
    clock = ManualClock(0)
    source = backend(clock)
    value_state(source, ttl(100)).update(1)
    tables = source.snapshot().to_arrow_tables()
    clock.advance(20_000)
    target = backend(clock)
    target.restore_from_arrow(tables)
    assert value_state(target, ttl(10)).value() is None  # 0 + 10 s <= 20 s


def test_a_ttl_table_whose_entry_lacks_a_stamp_is_refused_on_restore():
    import pyarrow as pa

    from engine.state import codec

    clock = ManualClock(0)
    source = backend(clock)
    value_state(source, ttl(10)).update(1)
    table = source.snapshot().to_arrow_tables()["v"]
    forged = table.set_column(table.schema.get_field_index("value"), "value",
                              pa.array([codec.encode(1)] * table.num_rows, table.schema.field("value").type))
    target = backend(clock)
    with pytest.raises(CorruptSnapshotError, match="not a .value, stamp ms. pair"):
        target.restore_from_arrow({"v": forged})


def test_builder_checks_its_arguments_and_disabled_means_no_ttl():
    with pytest.raises(JobDefinitionError, match="ttl"):
        StateTtlConfig.new_builder("10 s")
    with pytest.raises(JobDefinitionError, match="ttl"):
        StateTtlConfig.new_builder(Time.seconds(0))
    d = ValueStateDescriptor("v")
    with pytest.raises(JobDefinitionError, match="ttl_config"):
        d.enable_time_to_live({"ttl": 10})
    d.enable_time_to_live(StateTtlConfig.new_builder(Time.seconds(1))
                          .set_update_type(StateTtlConfig.UpdateType.Disabled).build())
    assert d.ttl_config is None
    config = (StateTtlConfig.new_builder(Time.seconds(1)).cleanup_full_snapshot()
              .cleanup_incrementally(10, False).disable_cleanup_in_background().build())
    assert config.get_cleanup_strategies().in_full_snapshot()
    assert not config.get_cleanup_strategies().is_cleanup_in_background()
    assert config.get_state_visibility() is StateTtlConfig.StateVisibility.NeverReturnExpired
    assert config.get_update_type() is StateTtlConfig.UpdateType.OnCreateAndWrite


def test_a_keyed_process_function_sees_its_ttl_state_expire_as_the_runtimes_clock_advances():
    """End to end on the local runtime: the state's clock is the job's processing-time clock (engine.clock)."""
    from engine import KeyedProcessFunction, StreamExecutionEnvironment, ValueStateDescriptor

    class LastSeen(KeyedProcessFunction):
        def open(self, runtime_context):
            d = ValueStateDescriptor("last")
            d.enable_time_to_live(StateTtlConfig.new_builder(Time.milliseconds(35)).build())
            self.last = runtime_context.get_state(d)

        def process_element(self, value, ctx):
            yield value, self.last.value()
            self.last.update(value)

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_clock(ManualClock(0))
    env.set_runtime_option("bundle_size", 1)
    env.set_runtime_option("clock_step_ms", 10)  # one record per round, 10 ms of processing time per round
    keys = ["a", "a", "b", "a", "b", "b", "b", "a"]
    out = env.from_collection(list(enumerate(keys))).key_by(lambda v: v[1]).process(LastSeen()).execute_and_collect()
    # record i is processed at 10 * (i + 1) ms; an entry written at t is gone from t + 35 ms on
    expected, written = [], {}
    for i, key in enumerate(keys):
        now = 10 * (i + 1)
        previous = written.get(key)
        expected.append(((i, key), previous[0] if previous and previous[1] + 35 > now else None))
        written[key] = ((i, key), now)
    assert out == expected
    assert [seen for _, seen in out].count(None) > 2  # some expired: the check above is not vacuous
