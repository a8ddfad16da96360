"""Checkpoints on Spark end to end, against a moto S3 server over HTTP (the executors reach it too).

A job checkpoints at every epoch boundary with retention 3, takes a savepoint while stopping,
and is restored from it with another parallelism; its output before the stop plus the restored
run's output equals an uninterrupted run's (computed by the local runtime: a differential check).
"""

from __future__ import annotations


import pytest

from engine.api.environment import StreamExecutionEnvironment
from engine.api.time import Duration, Time
from engine.watermarks.strategy import WatermarkStrategy
from engine.windowing.assigners import SlidingEventTimeWindows, TumblingEventTimeWindows
from window_jobs import SplitCollection, generate_events

CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}


def _timestamp(e, ts):
    return e[1]


def _key(e):
    return e[0]


def build(runtime: str, splits, parallelism: int, storage: str | None = None, options: dict | None = None):
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime(runtime)
    env.set_parallelism(parallelism)
    env.set_max_parallelism(16)
    if storage is not None:
        env.enable_checkpointing(10)
        env.get_checkpoint_config().set_checkpoint_storage_dir(storage)
        env.get_checkpoint_config().set_num_retained_checkpoints(3)
    for k, v in (options or {}).items():
        env.set_runtime_option(k, v)
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(2)).with_timestamp_assigner(_timestamp)
    keyed = env.from_source(SplitCollection(splits, "p"), strategy, "events").key_by(_key)
    tumbling = keyed.window(TumblingEventTimeWindows.of(Time.seconds(10))).sum(2).map(lambda e: ("t", e[0], e[1], e[2]))
    sliding = keyed.window(SlidingEventTimeWindows.of(Time.seconds(20), Time.seconds(10))).max(2).map(
        lambda e: ("s", e[0], e[1], e[2]))
    return env, tumbling.union(sliding)


@pytest.fixture()
def s3(moto_s3):
    """A bucket of its own on the suite's moto server (tests/conftest.py), and the store options naming it."""
    return moto_s3.client, moto_s3.bucket, {"endpoint_url": moto_s3.endpoint, "region": "us-east-1",
                                            "client_options": dict(CREDENTIALS)}


def _checkpoint_folders(client, bucket: str, job_id: str) -> set[str]:
    keys = [o["Key"] for page in client.get_paginator("list_objects_v2").paginate(
        Bucket=bucket, Prefix=f"checkpoints/{job_id}/") for o in page.get("Contents", [])]
    return {k.split("/")[2] for k in keys if k.split("/")[2].startswith("chk-") and k.endswith("/_metadata")}


@pytest.mark.parametrize("in_tasks, seen, last_retained, completed", [
    # window tasks write the state: a checkpoint is triggered when an epoch starts (the first is due one interval
    # after the job started, during epoch 1) and taken at that epoch's end
    (True, [0, 1, 2, 3, 3], {"chk-2", "chk-3", "chk-4"}, [1, 2, 3, 4]),
    # an upload job after the barrier: triggered and taken at the epoch's end
    (False, [1, 2, 3, 3, 3], {"chk-3", "chk-4", "chk-5"}, [1, 2, 3, 4, 5]),
], ids=["window-tasks-write", "upload-job"])
def test_checkpoint_retention_savepoint_stop_and_rescaled_restore_on_s3(spark, s3, in_tasks, seen, last_retained,
                                                                        completed):
    from engine.runtime.spark.runtime import SparkRuntime

    client, bucket, options = s3
    splits = generate_events(seed=3, n_splits=2, per_split=40, keys_per_split=4)
    golden_env, golden_stream = build("local", splits, 1)
    golden = sorted(golden_stream.execute_and_collect(), key=repr)

    env, stream = build("spark", splits, 2, f"s3://{bucket}/checkpoints",
                        {"epoch_records": 6, "storage_options": options, "snapshot_in_window_tasks": in_tasks})
    job = SparkRuntime(env).start("e2e", [], [stream._node])
    retained_seen = []
    for _ in range(5):
        assert job.run_epoch()
        job.await_checkpoints()  # the upload overlaps the next epoch; here we look at storage after each one
        retained_seen.append(_checkpoint_folders(client, bucket, job.job_id))
    assert [len(r) for r in retained_seen] == seen
    assert retained_seen[-1] == last_retained  # the oldest were subsumed and deleted
    history = job.checkpoint_history()
    assert [h.checkpoint_id for h in history] == completed and all(h.size_bytes > 0 for h in history)

    savepoint = job.stop_with_savepoint(f"s3://{bucket}/savepoints").result(timeout=120)
    assert savepoint.startswith(f"s3://{bucket}/savepoints/") and job.status().state == "stopped"
    assert not job.run_epoch()
    before_stop = list(job.collected[stream._node.id])
    assert before_stop and len(before_stop) < len(golden)

    restored_env, restored_stream = build("spark", splits, 3, f"s3://{bucket}/checkpoints",
                                          {"epoch_records": 8, "storage_options": options,
                                           "from_savepoint": savepoint})
    after_restore = restored_stream.execute_and_collect()
    assert sorted(before_stop + after_restore, key=repr) == golden
