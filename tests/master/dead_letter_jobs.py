"""A job with its own sink (so ``sluice run`` needs no ``--output``) and one record its key selector rejects."""

from __future__ import annotations

from typing import Any

EVENTS = [{"k": "a", "v": 1}, {"v": 2}, {"k": "b", "v": 3}]


def _key(e: dict) -> Any:
    return e["k"]


def _v(e: dict) -> Any:
    return e["v"]


def build(env: Any) -> None:
    env.from_collection(EVENTS).key_by(_key).map(_v).print()
