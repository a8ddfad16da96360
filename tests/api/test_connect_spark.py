"""``connect`` and a plain ``broadcast()`` edge on Spark give the local runtime's results (issue 19).

A connected job is tagged maps, a union and the keyed process operator (engine/operators/co_functions.py), parts
the Spark runtime already runs; the local runtime's ``epoch_records`` option gives it Spark's watermark cadence,
so the keyed co-process job, whose timers depend on the cadence, must agree record for record.
"""

from __future__ import annotations

import sys

import pytest

from engine import (
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


def _plain_broadcast(runtime: str, parallelism: int) -> list:
    """DataStream.broadcast() without descriptors: every record reaches each of the map's 3 subtasks, and a co-map
    after a broadcast input sees each of its records once per subtask too."""
    env = _env(runtime, parallelism)
    mapped = env.from_collection([1, 2]).broadcast().map(lambda x: x * 10).set_parallelism(3)
    return mapped.connect(env.from_collection(["w"]).broadcast()).map(connect_jobs.Tagger()).execute_and_collect()


def test_a_plain_broadcast_edge_gives_every_subtask_every_record_on_spark_as_locally(spark) -> None:
    local = _plain_broadcast("local", 2)
    assert sorted(local) == ["number 10"] * 3 + ["number 20"] * 3 + ["word w"] * 2
    assert sorted(_plain_broadcast("spark", 2)) == sorted(local)


def test_a_spark_savepoint_of_a_keyed_co_process_restores_at_another_parallelism_on_both_runtimes(
        spark, tmp_path) -> None:
    """test_broadcast_state_restore.py's PeriodTotals (its answer does not depend on the cadence): stopped with a
    savepoint once the first periods were emitted on Spark, resumed at 3 subtasks on Spark and at 1 on the local runtime."""
    from engine.io.collection_source import CollectionSource
    from engine.runtime.spark.runtime import SparkRuntime

    import test_broadcast_state_restore as restore_jobs

    cloudpickle.register_pickle_by_value(restore_jobs)

    def build(runtime: str, parallelism: int, options: dict):
        env = _env(runtime, parallelism)
        env.enable_checkpointing(10)
        env.get_checkpoint_config().set_checkpoint_storage_dir(f"file://{tmp_path}/chk")
        for name, value in options.items():
            env.set_runtime_option(name, value)
        strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, ts: e[1])
        left = env.from_source(CollectionSource(restore_jobs.LEFT, num_splits=2)).uid("left") \
            .assign_timestamps_and_watermarks(strategy)
        right = env.from_source(CollectionSource(restore_jobs.RIGHT, num_splits=2)).uid("right") \
            .assign_timestamps_and_watermarks(strategy)
        return env, left.connect(right).key_by(lambda e: e[0], lambda e: e[0]) \
            .process(restore_jobs.PeriodTotals()).uid("totals")

    _, uninterrupted = build("local", 2, {})
    golden = sorted(map(repr, uninterrupted.execute_and_collect()))
    env, stream = build("spark", 2, {})
    job = SparkRuntime(env).start("totals", [], [stream._node])
    for _ in range(30):  # until the first periods were emitted
        assert job.run_epoch()
        if job.collected[stream._node.id]:
            break
    savepoint = job.stop_with_savepoint(f"file://{tmp_path}/savepoints").result(timeout=120)
    before_stop = list(job.collected[stream._node.id])
    assert before_stop and len(before_stop) < len(golden)  # stopped midway, state and timers in the savepoint

    for runtime, parallelism in (("spark", 3), ("local", 1)):
        _, resumed = build(runtime, parallelism, {"from_savepoint": savepoint})
        assert sorted(map(repr, before_stop + resumed.execute_and_collect())) == golden, runtime
