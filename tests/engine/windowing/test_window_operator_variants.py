"""The contract every window operator variant keeps: a snapshot of any variant restores into any other
variant that can run the same window, and the run continues as the general operator's uninterrupted run.

Variants (engine/windowing/variant.py): the general WindowOperator, the slicing operator's heap
and columnar layouts, the session operator.  Half a random run (late elements, dead letters, ties) goes
through one, its snapshot is restored into another for the rest; outputs, late side output and the
snapshot taken at the end must equal the general operator's.
"""

from __future__ import annotations

from itertools import product
from typing import Any, Callable

import pytest

from engine.windowing.aggregations import builtin_aggregation
from engine.windowing.assigners import EventTimeSessionWindows, SlidingEventTimeWindows, TumblingEventTimeWindows
from engine.windowing.slicing import (
    ColumnarSlicingWindowOperator,
    SessionWindowOperator,
    SlicingWindowOperator,
    WindowOperatorVariant,
    window_operator_variant,
)
from engine.windowing.window_operator import WindowOperator
from tests.engine.windowing.test_columnar_windows import LATE, comparable, feed, harness
from tests.engine.windowing.test_columnar_windows import random_run as tuple_run
from tests.engine.windowing.test_session_layout import random_run as session_run


def _key(v: Any) -> Any:
    if v[0] == "boom":
        raise ValueError("key selector fails on 'boom'")
    return v[0]


#: window configuration, the random run it is fed, and the variants that can run it
WINDOWS: dict[str, tuple[dict[str, Any], Callable[[int], list], list[str]]] = {
    "tumbling int sum, late tag": (
        dict(assigner=TumblingEventTimeWindows.of(10), incremental_aggregate=builtin_aggregation("sum", 1),
             late_data_output_tag=LATE),
        lambda seed: tuple_run(seed, "tuple-int"), ["general", "slicing", "columnar"]),
    "sliding float sum, offset": (
        dict(assigner=SlidingEventTimeWindows.of(20, 5, 3), incremental_aggregate=builtin_aggregation("sum", 1)),
        lambda seed: tuple_run(seed, "tuple-float"), ["general", "slicing", "columnar"]),
    "sliding min, lateness": (
        dict(assigner=SlidingEventTimeWindows.of(15, 5), incremental_aggregate=builtin_aggregation("min", 1),
             allowed_lateness_ms=7, late_data_output_tag=LATE),
        lambda seed: tuple_run(seed, "tuple-int"), ["general", "slicing"]),
    "sessions, float sum, late tag": (
        dict(assigner=EventTimeSessionWindows.with_gap(3), incremental_aggregate=builtin_aggregation("sum", 1),
             late_data_output_tag=LATE),
        lambda seed: session_run(seed, "float"), ["general", "session"]),
}

BUILDERS: dict[str, Callable[..., WindowOperator]] = {
    "general": WindowOperator,
    "slicing": SlicingWindowOperator,
    "columnar": ColumnarSlicingWindowOperator,
    "session": SessionWindowOperator,
}


def _cases() -> list[Any]:
    return [pytest.param(window, first, second, seed, id=f"{window}: {first} -> {second}, seed {seed}")
            for window, (_config, _run, variants) in WINDOWS.items()
            for first, second in product(variants, variants) if first != second
            for seed in range(3)]


def _build(window: str, variant: str) -> WindowOperator:
    config = WINDOWS[window][0]
    return BUILDERS[variant](key_selector=_key, **config)


@pytest.mark.parametrize(("window", "first", "second", "seed"), _cases())
def test_a_snapshot_of_one_variant_restores_into_another_and_continues_as_the_general_operator(
        window: str, first: str, second: str, seed: int):
    run = WINDOWS[window][1](seed)
    expected = harness(_build(window, "general"))
    feed(expected, run, batched=False)
    half = len(run) // 2
    a = harness(_build(window, first))
    feed(a, run[:half], batched=True)
    b = harness(_build(window, second))
    b.initialize_state(a.snapshot())
    b.open()
    feed(b, run[half:], batched=True)
    assert a.get_output() + b.get_output() == expected.get_output()
    assert a.side_output(LATE) + b.side_output(LATE) == expected.side_output(LATE)
    assert comparable(b.snapshot()) == comparable(expected.snapshot())
    assert len(expected.get_output_records()) >= 3  # the comparison is about something


def test_the_windows_above_are_the_variants_they_claim():
    picked = {window: window_operator_variant(**{k: v for k, v in config.items() if k != "late_data_output_tag"},
                                              specialized=True)
              for window, (config, _run, _variants) in WINDOWS.items()}
    assert picked == {
        "tumbling int sum, late tag": WindowOperatorVariant.SLICING_COLUMNAR,
        "sliding float sum, offset": WindowOperatorVariant.SLICING_COLUMNAR,
        "sliding min, lateness": WindowOperatorVariant.SLICING,
        "sessions, float sum, late tag": WindowOperatorVariant.SESSION,
    }
