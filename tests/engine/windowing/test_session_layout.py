"""The session layout (engine/windowing/slicing/sessions.py) behaves exactly like the general merging path.

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

from engine.api.functions import OutputTag
from engine.elements import MAX_WATERMARK, StreamRecord
from engine.windowing.aggregations import builtin_aggregation
from engine.errors import JobDefinitionError
from engine.windowing.assigners import EventTimeSessionWindows
from engine.windowing.slicing import SessionWindowOperator, WindowOperatorVariant, create_window_operator, window_operator_variant
from engine.windowing.window_operator import WindowOperator
from tests.engine.windowing.test_columnar_windows import (
    check_rescaled_restore,
    check_restore_across_layouts,
    comparable,
    feed,
    harness,
    observable,
)
from tests.engine.windowing.test_window_operator_batch import MeanAndCount, concat

LATE = OutputTag("late")


def _key(v: Any) -> Any:
    if v[0] == "boom":
        raise ValueError("key selector fails on 'boom'")
    return v[0]


CONFIGS: dict[str, tuple[Callable[[bool], WindowOperator], str]] = {
    "int sum, gap 5": (lambda s: create_window_operator(
        EventTimeSessionWindows.with_gap(5), incremental_aggregate=builtin_aggregation("sum", 1),
        key_selector=_key, specialized=s), "int"),
    "float sum, gap 3, late tag": (lambda s: create_window_operator(
        EventTimeSessionWindows.with_gap(3), incremental_aggregate=builtin_aggregation("sum", 1),
        late_data_output_tag=LATE, key_selector=_key, specialized=s), "float"),
    "order-showing reduce, gap 4": (lambda s: create_window_operator(
        EventTimeSessionWindows.with_gap(4), incremental_aggregate=concat, late_data_output_tag=LATE,
        key_selector=_key, specialized=s), "str"),
    "aggregate function, gap 6": (lambda s: create_window_operator(
        EventTimeSessionWindows.with_gap(6), incremental_aggregate=MeanAndCount(), key_selector=_key,
        specialized=s), "float"),
    # a gap of 40 ms: timer buckets 5 ms wide, so the watermark's own bucket holds timers not yet due
    "int sum, gap 40, late tag": (lambda s: create_window_operator(
        EventTimeSessionWindows.with_gap(40), incremental_aggregate=builtin_aggregation("sum", 1),
        late_data_output_tag=LATE, key_selector=_key, specialized=s), "int"),
    # lists among the tuples: the running sum hands over to the element list and back (sessions.py _add)
    "float sum, tuples and lists, gap 4": (lambda s: create_window_operator(
        EventTimeSessionWindows.with_gap(4), incremental_aggregate=builtin_aggregation("sum", 1),
        key_selector=_key, specialized=s), "mixed"),
    "max_by, gap 2": (lambda s: create_window_operator(
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
    assert special.operator._sessions is not None  # the session layout held everything
    assert type(general.operator) is WindowOperator
    assert observable(special) == observable(general)
    assert [comparable(s) for s in special_snaps] == [comparable(s) for s in general_snaps]
    general.process_watermark(MAX_WATERMARK)
    special.process_watermark(MAX_WATERMARK)
    assert special.get_output() == general.get_output()
    assert sum(isinstance(e, StreamRecord) for e in general.get_output()) >= 3


def test_the_random_runs_merge_bridge_tie_and_drop_late_elements(monkeypatch):
    """Guards the comparison above: merges that join two or more sessions, ties, late elements."""
    from engine.windowing.slicing.sessions import SessionWindows

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
    check_restore_across_layouts(factory, random_run(seed, kind), first_special, second_special, "_sessions")


@pytest.mark.parametrize("seed", range(4))
def test_rescaling_a_session_snapshot_splits_keys_by_key_group(seed: int):
    factory, kind = CONFIGS["int sum, gap 5"]
    check_rescaled_restore(factory, random_run(seed, kind, dead=False), lambda v: v[0], "_sessions")


def test_other_session_windows_keep_the_general_operator():
    sum_1 = builtin_aggregation("sum", 1)
    assert window_operator_variant(EventTimeSessionWindows.with_gap(5), incremental_aggregate=sum_1,
                                   specialized=True) is WindowOperatorVariant.SESSION
    assert type(create_window_operator(EventTimeSessionWindows.with_gap(5), incremental_aggregate=sum_1,
                                       key_selector=_key, specialized=True)) is SessionWindowOperator
    for op in (
        create_window_operator(EventTimeSessionWindows.with_dynamic_gap(lambda v: 5), incremental_aggregate=sum_1,
                               key_selector=_key, specialized=True),
        create_window_operator(EventTimeSessionWindows.with_gap(5), incremental_aggregate=sum_1,
                               allowed_lateness_ms=3, key_selector=_key, specialized=True),
        create_window_operator(EventTimeSessionWindows.with_gap(5), window_function=lambda k, w, inputs: inputs,
                               key_selector=_key, specialized=True),
        create_window_operator(EventTimeSessionWindows.with_gap(5), incremental_aggregate=sum_1, key_selector=_key),
    ):
        assert type(op) is WindowOperator


def test_the_session_operator_refuses_a_configuration_it_cannot_run():
    with pytest.raises(JobDefinitionError, match="create_window_operator"):
        SessionWindowOperator(EventTimeSessionWindows.with_gap(5), incremental_aggregate=builtin_aggregation("sum", 1),
                              allowed_lateness_ms=3, key_selector=_key)


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
