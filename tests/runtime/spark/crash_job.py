"""The job the SIGKILL test runs in a subprocess (tests/runtime/spark/test_spark_driver_kill.py).

``python crash_job.py <work dir>``: a keyed tumbling sum over two generated splits, an exactly-once
file sink, a checkpoint after every epoch (file:// storage, 3 retained).  It restores from the
latest retained checkpoint when there is one (the recovery a supervisor performs after a driver
crash) and prints ``EPOCH <n>`` after each epoch and ``DONE`` at the end, so the test can kill
it at random points of its progress.
"""

from __future__ import annotations

import json
import os
import random
import sys

from engine.api.environment import StreamExecutionEnvironment
from engine.api.time import Duration, Time
from engine.watermarks.strategy import WatermarkStrategy
from engine.windowing.assigners import TumblingEventTimeWindows
from window_jobs import SplitCollection

JOB_NAME = "driver-kill"
EPOCH_RECORDS = 6


def events() -> list[list[tuple]]:
    rng = random.Random(42)
    splits = []
    for s in range(2):
        t, rows = 0, []
        for _ in range(110):
            t += rng.randrange(0, 1500)
            # keys stay in their split: per-key arrival order is the split's on every runtime
            rows.append((f"s{s}k{rng.randrange(3)}", max(0, t - rng.randrange(0, 4000)), rng.randrange(1, 100)))
        splits.append(rows)
    return splits


def _timestamp(e, _):
    return e[1]


def _key(e):
    return e[0]


def _row(e):
    return [e[0], e[1], e[2]]


def build(env: StreamExecutionEnvironment, output: str | None):
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(2)).with_timestamp_assigner(_timestamp)
    sums = env.from_source(SplitCollection(events(), "crash"), strategy, "events").key_by(_key).window(
        TumblingEventTimeWindows.of(Time.seconds(5))).sum(2).map(_row)
    if output is not None:
        sums.write_files(output, "jsonl")
    return sums


def latest_checkpoint(storage: str, job_id: str) -> str | None:
    from checkpoints import CheckpointStorage, RetainedCheckpointStore, open_store

    completed = RetainedCheckpointStore(CheckpointStorage(open_store(storage), job_id), retained=3)
    completed.recover()
    latest = completed.get_latest()
    return None if latest is None else latest.uri


def main(work: str) -> None:
    from engine.runtime.handle import stable_job_id
    from engine.runtime.spark.runtime import SparkRuntime

    storage = f"file://{work}/checkpoints"
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime("spark")
    env.set_parallelism(2)
    env.set_max_parallelism(8)
    env.set_runtime_option("epoch_records", EPOCH_RECORDS)
    env.enable_checkpointing(10)
    env.get_checkpoint_config().set_checkpoint_storage_dir(storage)
    env.get_checkpoint_config().set_num_retained_checkpoints(3)
    for name, value in json.loads(os.environ.get("SLUICE_CRASH_JOB_OPTIONS", "{}")).items():
        env.set_runtime_option(name, value)  # to run the same crashes with other runtime options
    build(env, f"file://{work}/output")
    restore = latest_checkpoint(storage, stable_job_id(JOB_NAME))
    print(f"RESTORE {restore}", flush=True)
    job = SparkRuntime(env).start(JOB_NAME, list(env._sinks), [], from_savepoint=restore)
    while job.run_epoch():
        print(f"EPOCH {job.epoch}", flush=True)
    print("DONE", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
