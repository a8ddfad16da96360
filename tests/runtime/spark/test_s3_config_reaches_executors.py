"""S3 configuration reaches Spark executors explicitly (issue 17).

Spark's Python workers keep the environment they started with.  A driver that learns its S3
endpoint after the executors started (set later in the process, or an executor on another host)
must still have its tasks write snapshots to that endpoint: the store a task receives carries the
endpoint and region the driver resolved; credentials come from boto3's chain on each executor.

The scenario runs in its own process, because it needs its own ``local-cluster`` session (two
executor JVMs) whose executors start before the endpoint is set."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SCENARIO = textwrap.dedent('''
    import json, os, sys
    from engine.runtime.spark.session import get_or_create_spark

    endpoint, bucket, out = sys.argv[1], sys.argv[2], sys.argv[3]
    spark = get_or_create_spark("local-cluster[2,1,1024]")
    # the executors and their Python workers are up now, with no S3 endpoint in their environment
    assert spark.sparkContext.parallelize(range(4), 4).map(lambda _: os.environ.get("AWS_ENDPOINT_URL")).collect() \\
        == [None] * 4
    os.environ["AWS_ENDPOINT_URL"] = endpoint  # the driver learns the endpoint only now

    from engine.api.environment import StreamExecutionEnvironment
    from engine.examples.purchases import build

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime("spark")
    env.set_parallelism(2)
    env.set_runtime_option("master", "local-cluster[2,1,1024]")
    env.set_runtime_option("epoch_records", 300)
    # stopped after 3 of its 5 epochs, before it FINISHES: a finished run deletes its retained checkpoints
    # (ExternalizedCheckpointRetention), and the state files are what this test looks for
    env.set_runtime_option("max_epochs", 3)
    env.enable_checkpointing(10)
    env.get_checkpoint_config().set_checkpoint_storage_dir(f"s3://{bucket}/checkpoints")
    for name, stream in build(env, events_per_split=1500, late_fraction=0.0, malformed_fraction=0.0).items():
        stream.write_files(f"{out}/{name}", "jsonl")
    result = env.execute("late-endpoint")
    print(json.dumps({"checkpoints": result.completed_checkpoints}))
''')


def test_executors_started_before_the_endpoint_was_set_still_write_snapshots_to_it(tmp_path: Path,
                                                                                   moto_endpoint: str) -> None:
    import boto3

    credentials = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                   "AWS_DEFAULT_REGION": "us-east-1"}
    bucket = "sluice-" + uuid.uuid4().hex[:10]
    s3 = boto3.client("s3", endpoint_url=moto_endpoint, region_name="us-east-1",
                      aws_access_key_id="testing", aws_secret_access_key="testing")
    s3.create_bucket(Bucket=bucket)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(credentials, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    run = subprocess.run([sys.executable, "-c", SCENARIO, moto_endpoint, bucket, str(tmp_path / "out")],
                         capture_output=True, text=True, env=env, timeout=900, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-4000:]
    checkpoints = json.loads(run.stdout.strip().splitlines()[-1])["checkpoints"]
    assert checkpoints, "the job completed no checkpoint"
    keys = [o["Key"] for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket)
            for o in page.get("Contents", [])]
    state_files = [k for k in keys if "/chk-" in k and k.endswith(".parquet")]
    assert state_files, f"no state file reached the endpoint: {keys[:20]}"
