"""The reading task's router writes window-bound rows column by column; the record-by-record loop is the reference."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest

from engine.elements import StreamRecord
from engine.operators.base import Metrics, OperatorContext
from engine.runtime.spark.chains import Router, Routes
from engine.runtime.spark.rows import RowBuffer, decode_values

NODE = 7


def _selector(value):
    if value[0] == "boom":
        raise ValueError("no key for boom")
    return value[0]


def _router(selector) -> Router:
    routes = Routes(nodes={NODE: SimpleNamespace(key_selector=selector)})
    router = Router(routes, RowBuffer(), OperatorContext("t", 0, 1, 128, metrics=Metrics()), "split-0", 128)
    router.context.dead_letter = router.dead_letter
    return router


def _rows(router: Router) -> list[dict]:
    batch = router.rows.take()
    return [] if batch is None else batch.to_pylist()


def _batch(seed: int, kinds: str) -> list[StreamRecord]:
    rnd = random.Random(seed)
    keys = {"str": [f"k{i}" for i in range(5)] + ["é", ""], "mixed": ["k1", 1, True, ("t", 2), 2.5]}[kinds]
    records = []
    for i in range(rnd.randint(0, 60)):
        key = rnd.choice(keys)
        value = (key, rnd.randint(-5, 5), rnd.choice([1.5, "x", None, float("nan")]))
        records.append(StreamRecord(value, rnd.choice([i, -i, None])))
    return records


@pytest.mark.parametrize("kinds", ["str", "mixed"])
@pytest.mark.parametrize("seed", range(8))
def test_column_rows_equal_the_record_loop(kinds: str, seed: int, monkeypatch):
    records = _batch(seed, kinds)
    fast = _router(_selector)
    fast._to_window(NODE, records)
    fast._to_window(NODE, records)  # a second call: the task's key cache and sequence carry over
    slow = _router(_selector)
    monkeypatch.setattr(Router, "_to_window_columns", lambda *a: False)
    slow._to_window(NODE, records)
    slow._to_window(NODE, records)
    got, want = _rows(fast), _rows(slow)
    # texts may differ in spelling (msgspec writes flat tuples), never in value
    assert [decode_values([r.pop("_value")])[0].__repr__() for r in got] == \
        [decode_values([r.pop("_value")])[0].__repr__() for r in want]
    assert got == want
    assert len(got) == 2 * len(records)


def test_a_batch_with_a_failing_selector_is_dead_lettered_record_by_record():
    router = _router(_selector)
    records = [StreamRecord(("a", 1), 1), StreamRecord(("boom", 2), 2), StreamRecord(("b", 3), 3)]
    router._to_window(NODE, records)
    rows = _rows(router)
    windowed = [r for r in rows if r["_dest"] == NODE]
    dead = [r for r in rows if r["_dest"] != NODE]
    assert [r["_key"] for r in windowed] == ['"a"', '"b"']
    assert [r["_offset"] for r in windowed] == [1, 2]
    assert len(dead) == 1 and "no key for boom" in dead[0]["_value"]
