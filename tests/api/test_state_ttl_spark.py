"""State with a time-to-live on Spark (engine/state/ttl.py): TTL tables cross Spark's epochs as state rows,
and a Spark savepoint holding them restores on Spark at another parallelism and on the local runtime.

The TTL here (an hour of processing time) never runs out during the test, so every runtime must give the
uninterrupted local run's results exactly; expiry itself is tested on a ManualClock in
tests/engine/state/test_state_ttl.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from engine import (
    KeyedProcessFunction,
    ListStateDescriptor,
    MapStateDescriptor,
    StateTtlConfig,
    StreamExecutionEnvironment,
    Time,
    ValueStateDescriptor,
    WatermarkStrategy,
)
from engine.io.collection_source import CollectionSource

pytestmark = pytest.mark.spark
pytest.importorskip("pyspark")
from pyspark import cloudpickle  # noqa: E402

cloudpickle.register_pickle_by_value(sys.modules[__name__])

EVENTS = [(f"k{(i * 7) % 5}", i % 9, 10 * i) for i in range(400)]


def _ttl() -> StateTtlConfig:
    return StateTtlConfig.new_builder(Time.hours(1)).update_ttl_on_read_and_write().build()


class RunningTotals(KeyedProcessFunction):
    """Per key: (key, running total, distinct values seen, last three values) on every record."""

    def open(self, runtime_context):
        total, seen, recent = ValueStateDescriptor("total", default=0), MapStateDescriptor("seen"), \
            ListStateDescriptor("recent")
        for d in (total, seen, recent):
            d.enable_time_to_live(_ttl())
        self.total = runtime_context.get_state(total)
        self.seen = runtime_context.get_map_state(seen)
        self.recent = runtime_context.get_list_state(recent)

    def process_element(self, value, ctx):
        key, amount, _ = value
        self.total.update(self.total.value() + amount)
        self.seen.put(amount, True)
        self.recent.update((list(self.recent.get() or []) + [amount])[-3:])
        yield key, self.total.value(), len(list(self.seen.keys())), list(self.recent.get())


def _build(runtime: str, parallelism: int, tmp_path: Path, options: dict | None = None):
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime(runtime)
    env.set_parallelism(parallelism)
    env.set_runtime_option("epoch_records", 50)
    env.enable_checkpointing(10)
    env.get_checkpoint_config().set_checkpoint_storage_dir(f"file://{tmp_path}/chk")
    for name, value in (options or {}).items():
        env.set_runtime_option(name, value)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, ts: e[2])
    stream = env.from_source(CollectionSource(EVENTS, num_splits=2)).assign_timestamps_and_watermarks(strategy)
    return env, stream.key_by(lambda e: e[0]).process(RunningTotals())


def test_ttl_state_on_spark_gives_the_local_results_and_its_savepoint_restores_on_both_runtimes(
        spark, tmp_path: Path) -> None:
    from engine.runtime.spark.runtime import SparkRuntime

    _, local = _build("local", 1, tmp_path / "golden")
    golden = sorted(local.execute_and_collect())
    assert len(golden) == len(EVENTS)

    _, on_spark = _build("spark", 2, tmp_path / "whole")
    assert sorted(on_spark.execute_and_collect()) == golden

    env, stream = _build("spark", 2, tmp_path)
    job = SparkRuntime(env).start("ttl-state", [], [stream._node])
    for _ in range(2):
        assert job.run_epoch()
    savepoint = job.stop_with_savepoint(f"file://{tmp_path}/savepoints").result(timeout=120)
    before_stop = list(job.collected[stream._node.id])
    assert before_stop and len(before_stop) < len(golden)
    metadata = (Path(savepoint.removeprefix("file://")) / "_metadata").read_text()
    assert "value-ttl" in metadata and "map-ttl" in metadata and "list-ttl" in metadata

    _, resumed = _build("spark", 3, tmp_path, {"from_savepoint": savepoint})
    assert sorted(before_stop + resumed.execute_and_collect()) == golden
    _, resumed_locally = _build("local", 2, tmp_path, {"from_savepoint": savepoint})
    assert sorted(before_stop + resumed_locally.execute_and_collect()) == golden
