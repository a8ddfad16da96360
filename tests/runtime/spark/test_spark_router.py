"""The reading task's router turns window-bound records into rows and dead-letters a record whose key fails."""

from __future__ import annotations

from types import SimpleNamespace

from engine.elements import StreamRecord
from engine.operators.base import Metrics, OperatorContext
from engine.runtime.spark.chains import Router, Routes
from engine.runtime.spark.rows import RowBuffer

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


def test_a_record_whose_selector_fails_is_dead_lettered_and_the_others_go_on():
    router = _router(_selector)
    records = [StreamRecord(("a", 1), 1), StreamRecord(("boom", 2), 2), StreamRecord(("b", 3), 3)]
    router._to_window(NODE, records)
    rows = _rows(router)
    windowed = [r for r in rows if r["_dest"] == NODE]
    dead = [r for r in rows if r["_dest"] != NODE]
    assert [r["_key"] for r in windowed] == ['"a"', '"b"']
    assert [r["_offset"] for r in windowed] == [1, 2]
    assert len(dead) == 1 and "no key for boom" in dead[0]["_value"]
