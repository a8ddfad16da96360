"""Keys Python calls equal but Flink keeps apart: ``1``, ``1.0`` and ``True`` (and tuples holding them) are three
keys, as they are three Java objects of three types in Flink (and three pickles in PyFlink's ``key_by``).

Each is encoded with its type (engine/state/codec.py ``encode_key``: ``1``, ``1.0``, ``true``) and so has a key
group of its own.  The local runtime's keyed edge cached targets by Python equality: ``1.0`` went to the subtask of
``1``, whose keyed state backend refused it as a routing bug, and the job failed at any parallelism above 1.

Partial: the window operators still group a batch's records by Python equality (per-key dicts, timers), so within
one subtask a window merges ``1``, ``1.0`` and ``True`` (the strict xfail below shows it; the fix is a type-exact
key identity in every per-key dict of engine/windowing and engine/state, not done yet)."""

from __future__ import annotations

import sys

import pytest

from engine import StreamExecutionEnvironment, Time, TumblingEventTimeWindows, WatermarkStrategy
from engine.state.codec import encode_key
from engine.state.key_groups import key_group_for_encoded_key

KEYS = [1, 1.0, True, (1, "a"), (1.0, "a"), (True, "a"), 2, 2.0]
# key, amount, timestamp: every key twice, the second time later in the same window
EVENTS = [(k, 10 ** i, 1_000 * i) for i, k in enumerate(KEYS)]
EVENTS = EVENTS + [(k, n * 2, ts + 10_000) for k, n, ts in EVENTS]


def _typed(key):
    """The key with its type made visible (``1 == 1.0 == True`` in Python)."""
    if isinstance(key, tuple):
        return tuple(_typed(k) for k in key)
    return (type(key).__name__, key)


def _run(runtime: str, parallelism: int, stream: str) -> list:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime(runtime)
    env.set_parallelism(parallelism)
    env.set_runtime_option("epoch_records", 4)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, ts: e[2])
    keyed = env.from_collection(EVENTS).assign_timestamps_and_watermarks(strategy).key_by(lambda e: e[0])
    out = keyed.sum(1) if stream == "rolling" else keyed.window(TumblingEventTimeWindows.of(Time.seconds(60))).sum(1)
    return sorted(((_typed(k), n) for k, n, _ in out.execute_and_collect()), key=repr)


FIRSTS = EVENTS[:len(KEYS)]
EXPECTED = {"rolling": sorted([(_typed(k), n) for k, n, _ in FIRSTS] + [(_typed(k), n * 3) for k, n, _ in FIRSTS],
                              key=repr),
            "window": sorted(((_typed(k), n * 3) for k, n, _ in FIRSTS), key=repr)}


def test_the_keys_have_key_groups_of_their_own() -> None:
    # what makes the rolling sums below checkable at all: no two of these keys share a key group (128), so
    # keyed state, which keeps one dict per key group, cannot merge them even by Python equality
    groups = [key_group_for_encoded_key(encode_key(k), 128) for k in KEYS]
    assert len(set(groups)) == len(KEYS), groups


@pytest.mark.parametrize("parallelism", [1, 4])
def test_keys_equal_in_python_but_of_other_types_are_routed_apart_locally(parallelism: int) -> None:
    assert _run("local", parallelism, "rolling") == EXPECTED["rolling"]


@pytest.mark.spark
def test_keys_equal_in_python_but_of_other_types_are_routed_apart_on_spark(spark) -> None:
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    assert _run("spark", 2, "rolling") == EXPECTED["rolling"]


@pytest.mark.xfail(strict=True, reason="the window operators group by Python equality within a subtask (module doc)")
def test_a_window_keeps_keys_equal_in_python_but_of_other_types_apart() -> None:
    assert _run("local", 1, "window") == EXPECTED["window"]
