"""The reliability tests' storage fixture: a file store, or a bucket on a moto S3 server for the Spark variant."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from reliability_support import Where


@pytest.fixture(params=["local-file", pytest.param("spark-moto-s3", marks=pytest.mark.spark)])
def where(request, tmp_path: Path, monkeypatch):
    if request.param == "local-file":
        return Where(tmp_path)
    # a bucket of its own (moto_s3, tests/conftest.py): moto's servers in one process share their state, so a
    # fixed name handed each test the index, lease and checkpoints of the test before it in the same xdist
    # worker (seen in CI: a "fresh" master continued another test's checkpoint ids, and the test's wait for
    # three retained checkpoints was met by the old ones before the master had taken any)
    s3 = request.getfixturevalue("moto_s3")  # also points boto3's environment (the masters') at the server
    for name in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON"):
        monkeypatch.setenv(name, sys.executable)
    return Where(tmp_path, "spark", s3.bucket)
