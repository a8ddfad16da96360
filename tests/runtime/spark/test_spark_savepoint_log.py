"""The Spark runtime's completion log line of a savepoint names the savepoint's own folder, the path
``sluice restore`` takes (it named the savepoint root, as on the local runtime: tests/runtime/local/test_recovery.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from checkpoints import load_snapshot
from engine.api.environment import StreamExecutionEnvironment
from engine.api.time import Time
from engine.watermarks.strategy import WatermarkStrategy
from engine.windowing.assigners import TumblingEventTimeWindows

EVENTS = [(("a", "b", "c")[i % 3], i, 1_000 * i) for i in range(40)]


def _timestamp(e, ts):
    return e[2]


def _key(e):
    return e[0]


def test_a_savepoints_completion_log_names_its_folder_on_spark(spark, tmp_path: Path,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    from engine.runtime.spark.runtime import SparkRuntime

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime("spark")
    env.set_parallelism(2)
    env.enable_checkpointing(10)
    env.get_checkpoint_config().set_checkpoint_storage_dir(f"file://{tmp_path}/checkpoints")
    env.set_runtime_option("epoch_records", 8)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(_timestamp)
    sums = (env.from_collection(EVENTS).assign_timestamps_and_watermarks(strategy).key_by(_key)
            .window(TumblingEventTimeWindows.of(Time.seconds(10))).reduce(lambda x, y: (x[0], x[1] + y[1], x[2])))
    job = SparkRuntime(env).start("logged", [], [sums._node])
    assert job.run_epoch()
    with caplog.at_level("INFO", logger="engine.checkpointing.coordinator"):
        savepoint = job.stop_with_savepoint(f"file://{tmp_path}/savepoints").result(timeout=120)
    completed = [r for r in caplog.records if getattr(r, "event", None) == "savepoint_completed"]
    assert [r.location for r in completed] == [savepoint]
    assert load_snapshot(savepoint).metadata.is_savepoint()
