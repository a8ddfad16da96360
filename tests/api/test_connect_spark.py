"""``connect`` on Spark gives the local runtime's results; broadcast state is refused there, by name (issue 19).

A connected job is tagged maps, a union and the keyed process operator (engine/operators/co_functions.py), parts
the Spark runtime already runs; the local runtime's ``epoch_records`` option gives it Spark's watermark cadence,
so the keyed co-process job, whose timers depend on the cadence, must agree record for record.
"""

from __future__ import annotations

import sys

import pytest

from engine import (
    JobDefinitionError,
    KeyedBroadcastProcessFunction,
    MapStateDescriptor,
    StreamExecutionEnvironment,
    WatermarkStrategy,
)

pytestmark = pytest.mark.spark

pytest.importorskip("pyspark")
from pyspark import cloudpickle  # noqa: E402

import test_connect as connect_jobs  # noqa: E402

for _module in (sys.modules[__name__], connect_jobs):
    cloudpickle.register_pickle_by_value(_module)

EPOCH_RECORDS = 20
# 120 orders, one per 100 ms; order i is paid after (i * 37) % 1500 ms unless i % 7 == 0 (never paid): payments
# later than PAY_WITHIN_MS come after the timer and give ("unpaid", ...) and then ("paid", ...)
ORDERS = [(f"o{i}", 100 * i) for i in range(120)]
PAYMENTS = sorted(((f"o{i}", 100 * i + (i * 37) % 1500) for i in range(120) if i % 7), key=lambda p: p[1])


def _env(runtime: str, parallelism: int) -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime(runtime)
    env.set_parallelism(parallelism)
    env.set_runtime_option("epoch_records", EPOCH_RECORDS)
    return env


def _stamped(env, events):
    return env.from_collection(events).assign_timestamps_and_watermarks(
        WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, ts: e[1]))


def _co_map(runtime: str, parallelism: int) -> list:
    env = _env(runtime, parallelism)
    return env.from_collection(list(range(50))).connect(env.from_collection([f"w{i}" for i in range(30)])) \
        .map(connect_jobs.Tagger()).execute_and_collect()


def _co_flat_map(runtime: str, parallelism: int) -> list:
    env = _env(runtime, parallelism)
    return env.from_collection([i % 5 for i in range(40)]).connect(env.from_collection(["a b", "c d e"] * 10)) \
        .flat_map(connect_jobs.Splitter()).execute_and_collect()


def _payments(runtime: str, parallelism: int) -> list:
    env = _env(runtime, parallelism)
    return _stamped(env, ORDERS).key_by(lambda o: o[0]).connect(_stamped(env, PAYMENTS).key_by(lambda p: p[0])) \
        .process(connect_jobs.MatchPayments()).execute_and_collect()


@pytest.mark.parametrize("job", [_co_map, _co_flat_map, _payments])
def test_spark_gives_the_local_runtimes_results(spark, job) -> None:
    local = job("local", 2)
    assert local, "the job must produce something to compare"
    assert sorted(map(repr, job("spark", 2))) == sorted(map(repr, local))


def test_spark_payments_are_the_hand_derived_ones(spark) -> None:
    """Every paid order is reported paid, every never-paid one unpaid at its timer; an order paid later than
    PAY_WITHIN_MS may be reported unpaid first (whether its timer fires before the payment is processed depends on
    the cadence, the same on both runtimes), an order paid in time never."""
    result = _payments("spark", 3)
    paid = sorted(r[1] for r in result if r[0] == "paid")
    unpaid = {r[1]: r[2] for r in result if r[0] == "unpaid"}
    assert paid == sorted(f"o{i}" for i in range(120) if i % 7)
    never_paid = {f"o{i}": 100 * i + 1000 for i in range(120) if i % 7 == 0}
    paid_late = {f"o{i}": 100 * i + 1000 for i in range(120) if i % 7 and (i * 37) % 1500 > 1000}
    assert never_paid.items() <= unpaid.items() <= (never_paid | paid_late).items()


class _Rules(KeyedBroadcastProcessFunction):
    def process_element(self, value, ctx):
        yield value

    def process_broadcast_element(self, value, ctx):
        return None


def test_spark_refuses_broadcast_state_when_the_job_starts_naming_it(spark) -> None:
    env = _env("spark", 2)
    rules = env.from_collection([("r", 1)]).broadcast(MapStateDescriptor("rules"))
    stream = env.from_collection([("a", 1)]).key_by(lambda e: e[0]).connect(rules).process(_Rules())
    with pytest.raises(JobDefinitionError, match=r"cannot run broadcast state \('KeyedBroadcastProcess'"):
        stream.execute_and_collect()
    env = _env("spark", 2)
    plain = env.from_collection([1, 2]).broadcast().map(lambda x: x)
    with pytest.raises(JobDefinitionError, match="`partitioning` cannot run on Spark yet"):
        plain.execute_and_collect()
