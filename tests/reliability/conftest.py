"""The reliability tests' storage fixture: a file store, or a bucket on a moto S3 server for the Spark variant."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest

from reliability_support import Where


@pytest.fixture(params=["local-file", pytest.param("spark-moto-s3", marks=pytest.mark.spark)])
def where(request, tmp_path: Path, monkeypatch):
    if request.param == "local-file":
        yield Where(tmp_path)
        return
    import boto3
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": f"http://{host}:{port}",
                        "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}.items():
        monkeypatch.setenv(name, value)
    # a bucket of its own: moto's servers in one process share their state, so a fixed name handed each test
    # the index, lease and checkpoints of the test before it in the same xdist worker (seen in CI: a
    # "fresh" master continued another test's checkpoint ids, and the test's wait for three retained
    # checkpoints was met by the old ones before the master had taken any)
    bucket = f"sluice-reliability-{uuid.uuid4().hex[:12]}"
    boto3.client("s3").create_bucket(Bucket=bucket)
    try:
        yield Where(tmp_path, "spark", bucket)
    finally:
        server.stop()
