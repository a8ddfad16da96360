"""The session layout (engine/windowing/sessions.py) behaves exactly like the general merging path.

Random runs with out-of-order and late elements, small gaps (so sessions grow on both sides,
bridge two or three others, and fire together at one timestamp) go through a WindowOperator with
``specialized=True`` fed in batches and one without, fed element by element.  Output order, side
outputs, metrics, dead letters and every snapshot must be identical (the timers table row for row,
keyed tables as row sets); snapshots restore across the two layouts and across parallelism.
"""

from __future__ import annotations

import random
from typing import Any, Callable

import pytest

from engine.api.functions import AggregateFunction, OutputTag
from engine.elements import MAX_WATERMARK, StreamRecord
from engine.testing.operator_harness import KeyedOneInputStreamOperatorTestHarness
from engine.windowing.aggregations import builtin_aggregation
from engine.windowing.assigners import EventTimeSessionWindows
from engine.windowing.window_operator import WindowOperator
from tests.engine.windowing.test_columnar_windows import comparable, feed, harness, observable

LATE = OutputTag("late")


class MeanAndCount(AggregateFunction):
    """Float rounding depends on the fold and merge order."""

    def create_accumulator(self):
        return (0.0, 0)

    def add(self, value, accumulator):
        return (accumulator[0] + value[1], accumulator[1] + 1)

    def get_result(self, accumulator):
        return (accumulator[0] / accumulator[1], accumulator[1])

    def merge(self, acc_a, acc_b):
        return (acc_a[0] + acc_b[0], acc_a[1] + acc_b[1])


def concat(a, b):
    """A reduce whose result shows the order of every fold and merge."""
    return (a[0], f"{a[1]}|{b[1]}")


def _key(v: Any) -> Any:
    if v[0] == "boom":
        raise ValueError("key selector fails on 'boom'")
    return v[0]


CONFIGS: dict[str, tuple[Callable[[bool], WindowOperator], str]] = {
    "int sum, gap 5": (lambda s: WindowOperator(
        EventTimeSessionWindows.with_gap(5), incremental_aggregate=builtin_aggregation("sum", 1),
        key_selector=_key, specialized=s), "int"),
    "float sum, gap 3, late tag": (lambda s: WindowOperator(
        EventTimeSessionWindows.with_gap(3), incremental_aggregate=builtin_aggregation("sum", 1),
        late_data_output_tag=LATE, key_selector=_key, specialized=s), "float"),
    "order-showing reduce, gap 4": (lambda s: WindowOperator(
        EventTimeSessionWindows.with_gap(4), incremental_aggregate=concat, late_data_output_tag=LATE,
        key_selector=_key, specialized=s), "str"),
    "aggregate function, gap 6": (lambda s: WindowOperator(
        EventTimeSessionWindows.with_gap(6), incremental_aggregate=MeanAndCount(), key_selector=_key,
        specialized=s), "float"),
    # a gap of 40 ms: timer buckets 5 ms wide, so the watermark's own bucket holds timers not yet due
    "int sum, gap 40, late tag": (lambda s: WindowOperator(
        EventTimeSessionWindows.with_gap(40), incremental_aggregate=builtin_aggregation("sum", 1),
        late_data_output_tag=LATE, key_selector=_key, specialized=s), "int"),
    # lists among the tuples: the running sum hands over to the element list and back (sessions.py _add)
    "float sum, tuples and lists, gap 4": (lambda s: WindowOperator(
        EventTimeSessionWindows.with_gap(4), incremental_aggregate=builtin_aggregation("sum", 1),
        key_selector=_key, specialized=s), "mixed"),
    "max_by, gap 2": (lambda s: WindowOperator(
        EventTimeSessionWindows.with_gap(2), incremental_aggregate=builtin_aggregation("max_by", 1),
        key_selector=_key, specialized=s), "int"),
}


def random_run(seed: int, kind: str, dead: bool = True) -> list[tuple[list[StreamRecord], int]]:
    rnd = random.Random(seed)
    keys = [f"k{i}" for i in range(rnd.randint(1, 5))] + [7, ("t", 1)]
    run = []
    watermark = -25
    for _ in range(rnd.randint(8, 25)):
        batch = []
        for _ in range(rnd.randint(0, 40)):
            ts = watermark + rnd.randint(-8, 25)
            key = rnd.choice(keys)
            number = {"int": rnd.randint(-50, 50), "float": rnd.uniform(-100, 100), "str": rnd.choice("abcdef"),
                      "mixed": rnd.choice([rnd.randint(-50, 50), rnd.uniform(-1, 1)])}[kind]
            record = StreamRecord((key, number), ts)
            if kind == "mixed" and rnd.random() < 0.2:
                record = StreamRecord([key, number], ts)
            if dead and rnd.random() < 0.03:
                record = rnd.choice([StreamRecord(("boom", number), ts), StreamRecord((key, number), None)])
            batch.append(record)
        watermark += rnd.randint(0, 9)
        run.append((batch, watermark))
    return run


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("seed", range(12))
def test_sessions_emit_and_snapshot_exactly_what_the_general_merging_path_does(config: str, seed: int):
    factory, kind = CONFIGS[config]
    run = random_run(seed, kind)
    general, special = harness(factory(False)), harness(factory(True))
    general_snaps: list = []
    special_snaps: list = []
    feed(general, run, batched=False, snapshots=general_snaps)
    feed(special, run, batched=True, snapshots=special_snaps)
    assert special.operator._sessions is not None and general.operator._sessions is None
    assert observable(special) == observable(general)
    assert [comparable(s) for s in special_snaps] == [comparable(s) for s in general_snaps]
    general.process_watermark(MAX_WATERMARK)
    special.process_watermark(MAX_WATERMARK)
    assert special.get_output() == general.get_output()
    assert sum(isinstance(e, StreamRecord) for e in general.get_output()) >= 3


def test_the_random_runs_merge_bridge_tie_and_drop_late_elements(monkeypatch):
    """Guards the comparison above: merges that join two or more sessions, ties, late elements."""
    from engine.windowing.sessions import SessionWindows

    factory, kind = CONFIGS["float sum, gap 3, late tag"]
    joined = []
    original = SessionWindows._add_general

    def spy(self, key, entry, value, ts, end, watermark):
        before = len(entry.sessions)
        taken = original(self, key, entry, value, ts, end, watermark)
        joined.append(before - len(entry.sessions))
        return taken

    monkeypatch.setattr(SessionWindows, "_add_general", spy)
    h = harness(factory(True))
    feed(h, random_run(1, kind), batched=True)
    assert max(joined) >= 1  # an element joined two sessions into one
    ends = [r.timestamp for r in h.get_output_records()]
    assert len(ends) > len(set(ends))
    assert h.side_output(LATE)


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("first_special, second_special", [(True, False), (False, True), (True, True)])
def test_a_session_snapshot_restores_across_layouts_and_continues_identically(config, seed, first_special,
                                                                             second_special):
    factory, kind = CONFIGS[config]
    run = random_run(seed, kind)
    expected = harness(factory(False))
    feed(expected, run, batched=False)
    half = len(run) // 2
    first = harness(factory(first_special))
    feed(first, run[:half], batched=True)
    second = harness(factory(second_special))
    second.initialize_state(first.snapshot())
    second.open()
    if second_special:
        assert second.operator._sessions is not None
        assert second.num_keyed_state_entries() == 0 and second.num_event_time_timers() == 0
    feed(second, run[half:], batched=True)
    assert first.get_output() + second.get_output() == expected.get_output()
    assert first.side_output(LATE) + second.side_output(LATE) == expected.side_output(LATE)


@pytest.mark.parametrize("seed", range(4))
def test_rescaling_a_session_snapshot_splits_keys_by_key_group(seed: int):
    from engine.state.key_groups import assign_to_key_group

    factory, kind = CONFIGS["int sum, gap 5"]
    run = random_run(seed, kind, dead=False)
    expected = harness(factory(False))
    feed(expected, run, batched=False)
    half = len(run) // 2
    first = harness(factory(True))
    feed(first, run[:half], batched=True)
    snapshot = first.snapshot()
    got = []
    for subtask in range(2):
        part = harness(factory(True), parallelism=2, subtask=subtask)
        part.initialize_state(snapshot)
        part.open()
        mine = part.context.key_group_range
        for batch, watermark in run[half:]:
            part.process_elements([r for r in batch if mine.contains(assign_to_key_group(r.value[0], 8))])
            part.process_watermark(watermark)
        assert part.operator._sessions is not None
        got.extend(part.get_output_records())
    later = expected.get_output_records()[len(first.get_output_records()):]
    assert sorted(got, key=repr) == sorted(later, key=repr)


def test_other_session_windows_keep_the_general_layout():
    assert WindowOperator(EventTimeSessionWindows.with_gap(5), incremental_aggregate=builtin_aggregation("sum", 1),
                          key_selector=_key, specialized=True)._session_gap == 5
    for op in (
        WindowOperator(EventTimeSessionWindows.with_dynamic_gap(lambda v: 5),
                       incremental_aggregate=builtin_aggregation("sum", 1), key_selector=_key, specialized=True),
        WindowOperator(EventTimeSessionWindows.with_gap(5), incremental_aggregate=builtin_aggregation("sum", 1),
                       allowed_lateness_ms=3, key_selector=_key, specialized=True),
        WindowOperator(EventTimeSessionWindows.with_gap(5), window_function=lambda k, w, inputs: inputs,
                       key_selector=_key, specialized=True),
    ):
        assert op._session_gap is None


def test_a_timer_in_the_watermarks_own_bucket_waits_for_its_time():
    """Timer buckets are gap // 8 wide: a watermark inside a bucket must leave that bucket's later timers."""
    factory, _kind = CONFIGS["int sum, gap 40, late tag"]
    general, special = harness(factory(False)), harness(factory(True))
    for h in (general, special):
        h.process_elements([StreamRecord(("a", 1), 0), StreamRecord(("b", 2), 1)])  # timers 39 and 40
        h.process_watermark(36)  # bucket 35..39 comes up; 39 is not due yet
        h.process_elements([StreamRecord(("a", 3), 30)])  # grows a's session to [0, 70)
        h.process_watermark(40)
        h.process_watermark(69)
    assert special.operator._sessions.bucket_width == 5
    assert observable(special) == observable(general)
    assert [r.value for r in special.get_output_records()] == [("b", 2), ("a", 4)]
