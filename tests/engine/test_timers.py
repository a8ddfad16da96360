"""The internal timer service fires timers in timestamp order when time advances (seed 004)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from engine.elements import MIN_WATERMARK
from engine.errors import CorruptSnapshotError
from engine.state.key_groups import KeyGroupRange, assign_to_key_group
from engine.timers import InternalTimer, InternalTimerService
from engine.windowing.windows import TimeWindow

MAX_PARALLELISM = 16


class FakeKeyContext:
    """The smallest key context: remembers the current key and derives its key group."""

    def __init__(self) -> None:
        self.key = None

    def set_current_key(self, key):
        self.key = key

    def get_current_key(self):
        return self.key

    @property
    def current_key_group(self) -> int:
        return assign_to_key_group(self.key, MAX_PARALLELISM)


class RecordingTarget:
    def __init__(self, key_context: FakeKeyContext) -> None:
        self.key_context = key_context
        self.fired: list[tuple[str, int, object, object]] = []
        self.on_fire = None

    def on_event_time(self, timer: InternalTimer) -> None:
        # the service must have set the timer's key as current key before calling back
        assert self.key_context.get_current_key() == timer.key
        self.fired.append(("event", timer.timestamp, timer.key, timer.namespace))
        if self.on_fire:
            self.on_fire(timer)

    def on_processing_time(self, timer: InternalTimer) -> None:
        assert self.key_context.get_current_key() == timer.key
        self.fired.append(("proc", timer.timestamp, timer.key, timer.namespace))
        if self.on_fire:
            self.on_fire(timer)


def make_service(key_group_range: KeyGroupRange | None = None):
    kc = FakeKeyContext()
    target = RecordingTarget(kc)
    service = InternalTimerService(kc, target, key_group_range or KeyGroupRange(0, MAX_PARALLELISM - 1), MAX_PARALLELISM)
    return kc, target, service


def register(kc, service, key, ns, ts, kind="event"):
    kc.set_current_key(key)
    if kind == "event":
        service.register_event_time_timer(ns, ts)
    else:
        service.register_processing_time_timer(ns, ts)


def test_event_time_timers_fire_in_timestamp_order_up_to_and_including_the_watermark():
    kc, target, service = make_service()
    for key, ts in [("a", 30), ("b", 10), ("c", 20), ("a", 40)]:
        register(kc, service, key, "ns", ts)
    service.advance_watermark(30)
    assert [(ts, key) for _k, ts, key, _ns in target.fired] == [(10, "b"), (20, "c"), (30, "a")]
    assert service.num_event_time_timers() == 1
    assert service.current_watermark() == 30


def test_a_timer_registered_twice_for_the_same_key_namespace_and_time_fires_once():
    kc, target, service = make_service()
    for _ in range(3):
        register(kc, service, "k", TimeWindow(0, 10), 9)
    assert service.num_event_time_timers() == 1
    service.advance_watermark(100)
    assert len(target.fired) == 1


def test_same_time_different_namespace_or_key_are_distinct_timers_and_ties_fire_in_registration_order():
    kc, target, service = make_service()
    register(kc, service, "k", TimeWindow(0, 10), 9)
    register(kc, service, "j", TimeWindow(0, 10), 9)
    register(kc, service, "k", TimeWindow(5, 10), 9)
    service.advance_watermark(9)
    assert [(key, ns) for _k, _ts, key, ns in target.fired] == [
        ("k", TimeWindow(0, 10)),
        ("j", TimeWindow(0, 10)),
        ("k", TimeWindow(5, 10)),
    ]


def test_a_deleted_timer_never_fires_and_a_re_registered_one_fires_once():
    kc, target, service = make_service()
    register(kc, service, "k", "w", 5)
    register(kc, service, "k", "w", 6)
    kc.set_current_key("k")
    service.delete_event_time_timer("w", 5)
    service.delete_event_time_timer("w", 6)
    register(kc, service, "k", "w", 6)
    assert service.num_event_time_timers() == 1
    service.advance_watermark(10)
    assert [ts for _k, ts, _key, _ns in target.fired] == [6]


def test_timers_registered_while_firing_that_are_already_due_fire_in_the_same_advance():
    #   watermark 50 fires t=10, which registers t=20 (due) and t=60 (not due)
    kc, target, service = make_service()
    register(kc, service, "k", "w", 10)

    def on_fire(timer):
        if timer.timestamp == 10:
            service.register_event_time_timer("w", 20)
            service.register_event_time_timer("w", 60)

    target.on_fire = on_fire
    service.advance_watermark(50)
    assert [ts for _k, ts, _key, _ns in target.fired] == [10, 20]
    assert service.num_event_time_timers() == 1
    assert service.next_event_time() == 60


def test_processing_time_timers_fire_only_when_processing_time_advances_not_on_watermarks():
    kc, target, service = make_service()
    register(kc, service, "k", "w", 100, kind="proc")
    register(kc, service, "k", "w", 50, kind="event")
    service.advance_watermark(1_000)
    assert [k for k, *_ in target.fired] == ["event"]
    assert service.next_processing_time() == 100
    service.advance_processing_time(99)
    assert len(target.fired) == 1
    service.advance_processing_time(100)
    assert target.fired[-1] == ("proc", 100, "k", "w")
    assert service.next_processing_time() is None
    assert service.num_processing_time_timers() == 0


def test_the_watermark_starts_at_min_and_never_moves_back():
    _kc, _target, service = make_service()
    assert service.current_watermark() == MIN_WATERMARK
    service.advance_watermark(10)
    service.advance_watermark(5)
    assert service.current_watermark() == 10


def test_a_snapshot_is_an_arrow_table_and_does_not_see_later_registrations():
    kc, _target, service = make_service()
    register(kc, service, ("user", 1), TimeWindow(0, 10), 9)
    register(kc, service, "b", TimeWindow(10, 20), 19, kind="proc")
    snapshot = service.snapshot()
    register(kc, service, "c", TimeWindow(0, 10), 9)
    table = snapshot.to_arrow_table()
    assert table.num_rows == 2
    rows = table.to_pylist()
    assert {r["kind"] for r in rows} == {"event_time", "processing_time"}
    assert rows[0]["key_group"] == assign_to_key_group(("user", 1), MAX_PARALLELISM)


def test_restore_keeps_only_timers_of_the_new_key_group_range_and_they_fire_with_their_keys():
    kc, _target, service = make_service()
    keys = [f"key-{i}" for i in range(40)]
    for i, key in enumerate(keys):
        register(kc, service, key, TimeWindow(0, 10), 9 + i)
    table = service.snapshot().to_arrow_table()

    low = KeyGroupRange(0, MAX_PARALLELISM // 2 - 1)
    high = KeyGroupRange(MAX_PARALLELISM // 2, MAX_PARALLELISM - 1)
    fired = []
    for krange in (low, high):
        kc2, target2, restored = make_service(krange)
        count = restored.restore_from_arrow(table)
        assert count == restored.num_event_time_timers()
        restored.advance_watermark(1_000)
        assert all(krange.contains(assign_to_key_group(key, MAX_PARALLELISM)) for _k, _ts, key, _ns in target2.fired)
        fired.extend(target2.fired)
    assert sorted(key for _k, _ts, key, _ns in fired) == sorted(keys)
    assert all(ns == TimeWindow(0, 10) for *_x, ns in fired)


def test_a_tuple_key_survives_the_round_trip_as_a_tuple():
    kc, _target, service = make_service()
    register(kc, service, ("a", 1), TimeWindow(0, 10), 9)
    kc2, target2, restored = make_service()
    restored.restore_from_arrow(service.snapshot().to_arrow_table())
    restored.advance_watermark(9)
    assert target2.fired == [("event", 9, ("a", 1), TimeWindow(0, 10))]


def test_a_timer_table_with_a_missing_column_is_refused_naming_the_column():
    _kc, _target, service = make_service()
    table = pa.table({"key": ["x"], "timestamp": [1]})
    with pytest.raises(CorruptSnapshotError, match="key_group"):
        service.restore_from_arrow(table)


def test_a_timer_table_from_another_max_parallelism_is_refused():
    kc, _target, service = make_service()
    register(kc, service, "k", "w", 1)
    table = service.snapshot().to_arrow_table()
    other = InternalTimerService(FakeKeyContext(), RecordingTarget(FakeKeyContext()), KeyGroupRange(0, 7), 8)
    with pytest.raises(CorruptSnapshotError, match="max_parallelism"):
        other.restore_from_arrow(table)


def test_many_deletions_compact_the_heap_without_losing_live_timers():
    kc, target, service = make_service()
    kc.set_current_key("k")
    for ts in range(500):
        service.register_event_time_timer("w", ts)
    for ts in range(0, 500, 2):
        service.delete_event_time_timer("w", ts)
    assert service.num_event_time_timers() == 250
    service.advance_watermark(10_000)
    assert [ts for _k, ts, *_ in target.fired] == list(range(1, 500, 2))
