"""Keys Python calls equal but Flink keeps apart: ``1``, ``1.0`` and ``True`` (and tuples holding them) are three
keys, as they are three Java objects of three types in Flink (and three pickles in PyFlink's ``key_by``).

Each is encoded with its type (engine/state/codec.py ``encode_key``: ``1``, ``1.0``, ``true``) and so has a key
group of its own.  Inside a keyed subtask, state, timers and the window operators hold a key's identity
(engine/state/key_identity.py), so keys that meet in one subtask stay apart too; functions get the key as it came.
Two defects this covers: the local runtime's keyed edge cached targets by Python equality (``1.0`` went to the
subtask of ``1``, whose backend refused it, and the job failed at parallelism above 1), and a window merged such
keys when they met in one subtask."""

from __future__ import annotations

import sys

import pytest

from engine import (
    EventTimeSessionWindows,
    KeyedProcessFunction,
    ProcessWindowFunction,
    StreamExecutionEnvironment,
    Time,
    TumblingEventTimeWindows,
    Types,
    ValueStateDescriptor,
    WatermarkStrategy,
)
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


@pytest.mark.parametrize("parallelism", [1, 4])
def test_a_window_keeps_keys_equal_in_python_but_of_other_types_apart(parallelism: int) -> None:
    assert _run("local", parallelism, "window") == EXPECTED["window"]


class _KeyAndCount(ProcessWindowFunction):
    def process(self, key, context, elements):
        yield _typed(key), len(list(elements))


class _CountPerKey(KeyedProcessFunction):
    def open(self, runtime_context) -> None:
        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.INT()))

    def process_element(self, value, ctx):
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        ctx.timer_service().register_event_time_timer(ctx.timestamp() + 100_000)
        yield _typed(ctx.get_current_key()), n

    def on_timer(self, timestamp, ctx):
        yield _typed(ctx.get_current_key()), -self.count.value()


@pytest.mark.parametrize("runtime", ["local", "spark"])
def test_functions_get_each_key_as_it_came_and_state_and_timers_keep_them_apart(runtime: str, request) -> None:
    if runtime == "spark":
        request.getfixturevalue("spark")
        from pyspark import cloudpickle

        cloudpickle.register_pickle_by_value(sys.modules[__name__])
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime(runtime)
    env.set_parallelism(1)
    env.set_runtime_option("epoch_records", 4)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, ts: e[2])
    keyed = env.from_collection(EVENTS).assign_timestamps_and_watermarks(strategy).key_by(lambda e: e[0])
    got, _ = env.execute_and_collect_streams({
        "sessions": keyed.window(EventTimeSessionWindows.with_gap(Time.seconds(30))).process(_KeyAndCount()),
        "process": keyed.process(_CountPerKey())})
    typed = [_typed(k) for k in KEYS]
    assert sorted(got["sessions"], key=repr) == sorted(((k, 2) for k in typed), key=repr)
    expected = [(k, n) for k in typed for n in (1, 2, -2, -2)]  # two timers per key (two timestamps)
    assert sorted(got["process"], key=repr) == sorted(expected, key=repr)
