"""Columnar window contents (engine/windowing/slicing/columnar.py) behave exactly like the general layout.

The same random runs (out-of-order and late timestamps, negative ones, random batches, a
watermark after each) go through the window operator ``create_window_operator`` builds with
``specialized=True`` (the slicing operator's columnar layout) and one without (its heap layout), fed
element by element.  Output order, side outputs, metrics, dead letters and every snapshot must be
identical: the timers table row for row (it fixes the firing order of ties after a restore), the
keyed-state table as a set of rows (its row order is dict order, not observable).  Snapshots
restore across the two layouts and across parallelism changes; values the arrays cannot hold
make the operator spill to the general layout without changing a result.
"""

from __future__ import annotations

from fractions import Fraction

import random
from typing import Any, Callable

import pytest

from engine.api.functions import OutputTag
from engine.clock import ManualClock
from engine.elements import MAX_WATERMARK, StreamRecord, TupleColumns, Watermark
from engine.operators.base import ListOutput, MaterializedOperatorSnapshot, Metrics, OperatorContext
from engine.state.key_groups import KeyGroupRange
from engine.testing.operator_harness import KeyedOneInputStreamOperatorTestHarness
from engine.windowing.aggregations import builtin_aggregation
from engine.windowing.assigners import SlidingEventTimeWindows, TumblingEventTimeWindows
from engine.operators.keyed_restore import TIMERS_TABLE
from engine.windowing.slicing import ColumnarSlicingWindowOperator, SlicingWindowOperator, create_window_operator
from engine.windowing.window_operator import WindowOperator

LATE = OutputTag("late")


def _first(v: Any) -> Any:
    if isinstance(v, dict):
        return v["user"]
    if v[0] == "boom":
        raise ValueError("key selector fails on 'boom'")
    return v[0]


CONFIGS: dict[str, tuple[Callable[..., WindowOperator], str]] = {
    "tumbling int sum": (lambda c: create_window_operator(
        TumblingEventTimeWindows.of(10), incremental_aggregate=builtin_aggregation("sum", 1),
        key_selector=_first, specialized=c), "tuple-int"),
    "tumbling float sum, offset, late tag": (lambda c: create_window_operator(
        TumblingEventTimeWindows.of(10, 3), incremental_aggregate=builtin_aggregation("sum", 1),
        late_data_output_tag=LATE, key_selector=_first, specialized=c), "tuple-float"),
    "sliding float sum": (lambda c: create_window_operator(
        SlidingEventTimeWindows.of(15, 5), incremental_aggregate=builtin_aggregation("sum", 1),
        key_selector=_first, specialized=c), "tuple-float"),
    "sliding size not a multiple of the slide, offset, late tag": (lambda c: create_window_operator(
        SlidingEventTimeWindows.of(14, 4, 3), incremental_aggregate=builtin_aggregation("sum", 1),
        late_data_output_tag=LATE, key_selector=_first, specialized=c), "tuple-mixed"),
    "sliding with gaps (size < slide), late tag": (lambda c: create_window_operator(
        SlidingEventTimeWindows.of(3, 7), incremental_aggregate=builtin_aggregation("sum", 1),
        late_data_output_tag=LATE, key_selector=_first, specialized=c), "tuple-int"),
    "sliding sum of a dict field": (lambda c: create_window_operator(
        SlidingEventTimeWindows.of(20, 5), incremental_aggregate=builtin_aggregation("sum", "amount"),
        key_selector=_first, specialized=c), "dict"),
    "tumbling sum of a list field": (lambda c: create_window_operator(
        TumblingEventTimeWindows.of(7), incremental_aggregate=builtin_aggregation("sum", 2),
        key_selector=_first, specialized=c), "list"),
}


def _value(rnd: random.Random, kind: str, key: Any) -> Any:
    number = rnd.uniform(-100, 100) if kind == "tuple-float" else rnd.randint(-50, 50)
    if kind == "tuple-mixed" and rnd.random() < 0.5:
        number = rnd.uniform(-1, 1)
    if kind == "dict":
        return {"user": key, "amount": number, "note": rnd.choice("ab")}
    if kind == "list":
        return [key, rnd.randint(0, 3), number]
    return (key, number, rnd.choice("xyz"))


def random_run(seed: int, kind: str, dead: bool = True) -> list[tuple[list[StreamRecord], int]]:
    """Batches of records, each followed by a watermark; timestamps jitter behind and ahead of it."""
    rnd = random.Random(seed)
    keys = [f"k{i}" for i in range(rnd.randint(1, 6))] + [7, ("t", 1)]
    run = []
    watermark = -25
    for _ in range(rnd.randint(8, 25)):
        batch = []
        for _ in range(rnd.randint(0, 40)):
            ts = watermark + rnd.randint(-20, 15)
            key = rnd.choice(keys)
            record = StreamRecord(_value(rnd, kind, key), ts)
            if dead and kind.startswith("tuple") and rnd.random() < 0.03:
                record = rnd.choice([StreamRecord(("boom", 1, "x"), ts), StreamRecord((key, 1, "x"), None)])
            batch.append(record)
        watermark += rnd.randint(0, 12)
        run.append((batch, watermark))
    return run


def harness(operator: WindowOperator, parallelism: int = 1, subtask: int = 0) -> KeyedOneInputStreamOperatorTestHarness:
    return KeyedOneInputStreamOperatorTestHarness(operator, max_parallelism=8, parallelism=parallelism,
                                                  subtask_index=subtask)


def feed(h: KeyedOneInputStreamOperatorTestHarness, run, batched: bool, snapshots: list | None = None) -> None:
    for batch, watermark in run:
        if batched:
            h.process_elements(batch)
        else:
            for record in batch:
                h.process_element(record)
        h.process_watermark(watermark)
        if snapshots is not None:
            snapshots.append(h.snapshot())


def observable(h: KeyedOneInputStreamOperatorTestHarness) -> dict[str, Any]:
    return {
        "output": h.get_output(),
        "late": h.side_output(LATE),
        "metrics": dict(h.metrics.counters),
        "dead_letters": [(v, type(e).__name__, stage) for v, e, stage in h.dead_letters],
    }


def comparable(snapshot: MaterializedOperatorSnapshot) -> dict[str, Any]:
    """The snapshot with keyed tables as row sets; the timers table and the metadata as they are."""
    out: dict[str, Any] = {"metadata": snapshot.metadata}
    for name, table in snapshot.tables.items():
        rows = table.to_pylist()
        out[name] = rows if name == TIMERS_TABLE else sorted(rows, key=repr)
        out[name + "/schema"] = table.schema
    return out


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("seed", range(10))
def test_columnar_contents_emit_and_snapshot_exactly_what_the_general_layout_does(config: str, seed: int):
    factory, kind = CONFIGS[config]
    run = random_run(seed, kind)
    general, columnar = harness(factory(False)), harness(factory(True))
    general_snaps: list = []
    columnar_snaps: list = []
    feed(general, run, batched=False, snapshots=general_snaps)
    feed(columnar, run, batched=True, snapshots=columnar_snaps)
    assert columnar.operator._columns is not None  # the arrays held everything: no spill happened
    assert type(general.operator) is SlicingWindowOperator  # the heap layout
    assert observable(columnar) == observable(general)
    assert [comparable(s) for s in columnar_snaps] == [comparable(s) for s in general_snaps]
    general.process_watermark(MAX_WATERMARK)
    columnar.process_watermark(MAX_WATERMARK)
    assert columnar.get_output() == general.get_output()
    assert sum(isinstance(e, StreamRecord) for e in general.get_output()) > 3


def test_the_random_runs_exercise_ties_late_elements_and_dead_letters():
    """Guards the comparison above: ties between keys at one window end, late elements, dead letters."""
    factory, kind = CONFIGS["tumbling float sum, offset, late tag"]
    h = harness(factory(True))
    feed(h, random_run(2, kind), batched=True)
    ends = [r.timestamp for r in h.get_output_records()]
    assert len(ends) > len(set(ends))
    assert h.side_output(LATE)
    assert h.dead_letters


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("first_columnar, second_columnar", [(True, False), (False, True), (True, True)])
def test_a_snapshot_restores_across_layouts_and_continues_identically(config, seed, first_columnar, second_columnar):
    factory, kind = CONFIGS[config]
    check_restore_across_layouts(factory, random_run(seed, kind), first_columnar, second_columnar, "_columns")


def check_restore_across_layouts(factory: Callable[[bool], WindowOperator], run, first_special: bool,
                                 second_special: bool, layout: str) -> None:
    """Half the run on ``factory(first_special)``, its snapshot restored into ``factory(second_special)``
    for the rest: the outputs together equal the general layout's uninterrupted run.  ``layout`` names
    the operator attribute that holds the specialized layout when it took the restored state over."""
    expected = harness(factory(False))
    feed(expected, run, batched=False)
    half = len(run) // 2
    first = harness(factory(first_special))
    feed(first, run[:half], batched=True)
    second = harness(factory(second_special))
    second.initialize_state(first.snapshot())
    second.open()
    if second_special:
        assert getattr(second.operator, layout) is not None  # restored state taken over by the layout
        assert second.num_keyed_state_entries() == 0 and second.num_event_time_timers() == 0
    feed(second, run[half:], batched=True)
    assert first.get_output() + second.get_output() == expected.get_output()
    assert first.side_output(LATE) + second.side_output(LATE) == expected.side_output(LATE)


@pytest.mark.parametrize("seed", range(4))
def test_rescaling_a_columnar_snapshot_splits_keys_by_key_group(seed: int):
    factory, kind = CONFIGS["sliding float sum"]
    check_rescaled_restore(factory, random_run(seed, kind, dead=False), _first, "_columns")


def check_rescaled_restore(factory: Callable[[bool], WindowOperator], run, key_of: Callable[[Any], Any],
                           layout: str) -> None:
    """Half the run on one specialized subtask, its snapshot restored into two (each keeping its key
    groups) for the rest: together they emit what the general layout's uninterrupted run emits then."""
    from engine.state.key_groups import assign_to_key_group

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
            part.process_elements([r for r in batch if mine.contains(assign_to_key_group(key_of(r.value), 8))])
            part.process_watermark(watermark)
        assert getattr(part.operator, layout) is not None
        got.extend(part.get_output_records())
    later = expected.get_output_records()[len(first.get_output_records()):]
    assert sorted(got, key=repr) == sorted(later, key=repr)


def test_a_value_the_arrays_cannot_hold_spills_to_the_general_layout_with_the_same_results():
    """A number the int/float arrays cannot hold (a Fraction) spills; the results are the general layout's."""
    factory, kind = CONFIGS["sliding float sum"]
    run = random_run(5, kind, dead=False)
    at = len(run) // 2
    odd = StreamRecord(("k0", Fraction(1, 3), "x"), run[at][1] + 1)
    odd_run = run[:at] + [([odd] + run[at][0], run[at][1])] + run[at + 1:]
    general = harness(factory(False))
    columnar = harness(factory(True))
    feed(general, odd_run, batched=False)
    feed(columnar, odd_run, batched=True)
    assert columnar.operator._columns is None  # spilled before that batch
    assert observable(columnar) == observable(general)


def test_a_field_that_is_not_a_number_is_a_dead_letter_in_both_layouts_and_nothing_spills():
    """It used to raise TypeError in both (a str added to a number); now it never reaches a window
    (engine/windowing/aggregations.py, "Bad data")."""
    factory, kind = CONFIGS["sliding float sum"]
    run = random_run(5, kind, dead=False)
    at = len(run) // 2
    bad = StreamRecord(("k0", "not a number", "x"), run[at][1] + 1)
    bad_run = run[:at] + [([bad] + run[at][0], run[at][1])] + run[at + 1:]
    general = harness(factory(False))
    columnar = harness(factory(True))
    feed(general, bad_run, batched=False)
    feed(columnar, bad_run, batched=True)
    assert columnar.operator._columns is not None  # the arrays never saw it
    assert observable(columnar) == observable(general)
    assert observable(general)["dead_letters"] == [(bad.value, "MalformedRecordError", "aggregate")]
    assert observable(general)["output"] == observable(harness_fed(factory(False), run))["output"]


def harness_fed(operator: WindowOperator, run) -> KeyedOneInputStreamOperatorTestHarness:
    h = harness(operator)
    feed(h, run, batched=False)
    return h


def test_a_spill_keeps_pending_windows_and_their_firing_order():
    """A dict element arriving in a tuple stream (readable, but not by position) spills; nothing changes."""
    factory, kind = CONFIGS["sliding float sum"]
    run = random_run(6, kind, dead=False)
    at = len(run) // 2
    odd = StreamRecord({0: "k1", 1: 2.5}, run[at][1] + 2)  # key "k1", field 1 = 2.5: a dict with int keys
    odd_run = run[:at] + [(run[at][0] + [odd], run[at][1])] + run[at + 1:]
    general = harness(create_window_operator(SlidingEventTimeWindows.of(15, 5), incremental_aggregate=builtin_aggregation("sum", 1),
                                             key_selector=lambda v: v[0], specialized=False))
    columnar = harness(create_window_operator(SlidingEventTimeWindows.of(15, 5), incremental_aggregate=builtin_aggregation("sum", 1),
                                              key_selector=lambda v: v[0], specialized=True))
    feed(general, odd_run, batched=False)
    feed(columnar, odd_run[:at], batched=True)
    assert columnar.operator._columns is not None
    feed(columnar, odd_run[at:], batched=True)
    general.process_watermark(MAX_WATERMARK)
    columnar.process_watermark(MAX_WATERMARK)
    assert observable(columnar) == observable(general)


def test_a_batch_that_would_make_a_huge_sparse_grid_takes_the_general_layout_with_the_same_results():
    """A backfill spanning thousands of windows in one batch, each key in a few of them: the arrays would be
    millions of mostly empty cells, so the operator moves to the general layout before placing anything."""
    rnd = random.Random(12)
    first = [StreamRecord((f"k{i % 40}", rnd.randint(1, 9)), rnd.randrange(0, 50)) for i in range(200)]
    # 3000 keys over 4000 tumbling windows of 10 ms: a 4096 x 4096 grid for about 6000 entries
    backfill = [StreamRecord((f"b{i}", rnd.randint(1, 9)), 100 + rnd.randrange(0, 40_000)) for i in range(3000)]
    backfill += [StreamRecord((f"b{i}", 1), 100 + rnd.randrange(0, 40_000)) for i in range(3000)]
    run = [(first, 40), (backfill, 20_000), ([StreamRecord(("k1", 5), 30_000)], 30_005)]
    factory, _kind = CONFIGS["tumbling int sum"]
    general = harness(factory(False))
    columnar = harness(factory(True))
    feed(general, run[:1], batched=False)
    feed(columnar, run[:1], batched=True)
    assert columnar.operator._columns is not None
    feed(general, run[1:], batched=False)
    feed(columnar, run[1:], batched=True)
    assert columnar.operator._columns is None  # moved to the general layout at the backfill
    general.process_watermark(MAX_WATERMARK)
    columnar.process_watermark(MAX_WATERMARK)
    assert observable(columnar) == observable(general)
    assert len(columnar.output.records()) > 5000


def test_the_grid_guard_lets_dense_grids_grow(monkeypatch):
    """The guard is about sparseness, not size: a grid beyond the dense limit, every cell used, still grows."""
    from engine.windowing.slicing import columnar as module

    monkeypatch.setattr(module, "_DENSE_CELLS", 1024)  # the real limit, 4M cells, is too big for a unit test
    factory, _kind = CONFIGS["tumbling int sum"]
    columnar = harness(factory(True))
    batch = [StreamRecord((f"k{k}", 1), w * 10) for w in range(64) for k in range(64)]
    columnar.process_elements(batch)
    grid = columnar.operator._columns
    assert grid is not None
    assert grid.rows_cap * grid.cols_cap == 4096


class _ColumnsOutput(ListOutput):
    """An output that takes fired windows as columns, as a Spark task's router does."""

    takes_columns = True

    def __init__(self) -> None:
        super().__init__()
        self.column_batches = 0

    def collect_columns(self, batch) -> None:
        if isinstance(batch, TupleColumns):
            self.column_batches += 1
            batch = batch.records()
        self.elements.extend(batch)


@pytest.mark.parametrize("config", sorted(CONFIGS))
@pytest.mark.parametrize("seed", range(4))
def test_an_output_that_takes_columns_gets_the_same_results_in_the_same_order(config: str, seed: int):
    factory, kind = CONFIGS[config]
    run = random_run(seed, kind, dead=False)  # dead letters need a harness; they do not reach the output
    plain = factory(True)
    plain.open(OperatorContext("w", 0, 1, 8, KeyGroupRange(0, 7), clock=ManualClock(0), metrics=Metrics()), ListOutput())
    taking = factory(True)
    out = _ColumnsOutput()
    taking.open(OperatorContext("w", 0, 1, 8, KeyGroupRange(0, 7), clock=ManualClock(0), metrics=Metrics()), out)
    for op in (plain, taking):
        for batch, watermark in run:
            op.process_batch(batch)
            op.process_watermark(Watermark(watermark))
        op.process_watermark(Watermark(MAX_WATERMARK))
    assert out.records() == plain.output.records()
    assert out.side_outputs == plain.output.side_outputs
    assert out.records()
    if kind.startswith("tuple"):
        assert out.column_batches > 0  # tuple results came as columns


def test_keys_that_come_and_go_are_compacted_away_without_changing_results():
    rnd = random.Random(9)
    factory = lambda c: create_window_operator(  # noqa: E731
        TumblingEventTimeWindows.of(100), incremental_aggregate=builtin_aggregation("sum", 1),
        key_selector=lambda v: v[0], specialized=c)
    general, columnar = harness(factory(False)), harness(factory(True))
    for window in range(12):
        batch = [StreamRecord((f"user-{window}-{rnd.randint(0, 999)}", rnd.randint(1, 9)), window * 100 + rnd.randint(0, 99))
                 for _ in range(3000)]
        for h, batched in ((general, False), (columnar, True)):
            if batched:
                h.process_elements(batch)
            else:
                for r in batch:
                    h.process_element(r)
            h.process_watermark(window * 100 + 99)
    assert observable(columnar) == observable(general)
    assert len(columnar.operator._columns.keys) < 4000  # rows of past windows' keys were dropped


def test_the_runtimes_ask_for_columnar_contents_and_other_windows_keep_another_layout():
    from engine.windowing.assigners import EventTimeSessionWindows
    from engine.windowing.slicing import WindowOperatorVariant, window_operator_variant

    sum_1 = builtin_aggregation("sum", 1)
    columnar = create_window_operator(TumblingEventTimeWindows.of(10), incremental_aggregate=sum_1,
                                      key_selector=_first, specialized=True)
    assert type(columnar) is ColumnarSlicingWindowOperator
    others = {
        "min": dict(assigner=TumblingEventTimeWindows.of(10), incremental_aggregate=builtin_aggregation("min", 1)),
        "lateness": dict(assigner=TumblingEventTimeWindows.of(10), incremental_aggregate=sum_1, allowed_lateness_ms=5),
        "sessions": dict(assigner=EventTimeSessionWindows.with_gap(10), incremental_aggregate=sum_1),
        "window function": dict(assigner=TumblingEventTimeWindows.of(10), incremental_aggregate=sum_1,
                                window_function=lambda key, window, inputs: inputs),
        "not asked for": dict(assigner=TumblingEventTimeWindows.of(10), incremental_aggregate=sum_1,
                              specialized=False),
    }
    for name, config in others.items():
        config = {"specialized": True, **config}
        assert window_operator_variant(**config) is not WindowOperatorVariant.SLICING_COLUMNAR, name
        op = create_window_operator(key_selector=_first, **config)
        assert not isinstance(op, ColumnarSlicingWindowOperator), name


def test_the_slicing_operator_refuses_a_configuration_it_cannot_run():
    from engine.errors import JobDefinitionError

    with pytest.raises(JobDefinitionError, match="create_window_operator"):
        ColumnarSlicingWindowOperator(TumblingEventTimeWindows.of(10), incremental_aggregate=builtin_aggregation("min", 1),
                                      key_selector=_first)


def test_a_restore_with_more_open_windows_than_the_first_grid_keeps_every_window():
    """Adopting restored state widens the grid while placing entries (found by the failure-injection job)."""
    factory = lambda c: create_window_operator(  # noqa: E731
        TumblingEventTimeWindows.of(10), incremental_aggregate=builtin_aggregation("sum", 1),
        key_selector=lambda v: v[0], specialized=c)
    # 60 windows open (watermark held back), each key's windows hit again after the restore
    records = [StreamRecord((f"k{i % 5}", i), (i * 3) % 600) for i in range(400)]
    expected = harness(factory(False))
    for r in records:
        expected.process_element(r)
    expected.process_watermark(MAX_WATERMARK)
    first = harness(factory(True))
    first.process_elements(records[:200])
    second = harness(factory(True))
    second.initialize_state(first.snapshot())
    second.open()
    assert second.operator._columns.num_entries() == first.operator._columns.num_entries() > 60
    second.process_elements(records[200:])
    second.process_watermark(MAX_WATERMARK)
    assert second.get_output() == expected.get_output()


@pytest.mark.parametrize("config", ["tumbling int sum", "sliding float sum", "sliding sum of a dict field"])
def test_snapshot_now_builds_the_same_snapshot_without_a_frozen_copy(config: str, monkeypatch):
    """snapshot_now (what a Spark task ends its epoch with) reads the arrays in place: the same tables as
    snapshot_state(...).materialize(), no copy taken, and processing goes on unchanged afterwards."""
    from engine.windowing.slicing.columnar import ColumnarWindows

    factory, kind = CONFIGS[config]
    run = random_run(3, kind)
    reference, now = harness(factory(True)), harness(factory(True))
    expected: list = []
    feed(reference, run, batched=True, snapshots=expected)

    def no_copy(self):
        raise AssertionError("snapshot_now must not freeze a copy")

    monkeypatch.setattr(ColumnarWindows, "frozen", no_copy)
    taken = []
    for checkpoint_id, (batch, watermark) in enumerate(run, start=1):  # the harness numbers from 1
        now.process_elements(batch)
        now.process_watermark(watermark)
        taken.append(now.operator.snapshot_now(checkpoint_id))
    assert now.operator._columns is not None
    assert [comparable(s) for s in taken] == [comparable(s) for s in expected]
    assert observable(now) == observable(reference)
