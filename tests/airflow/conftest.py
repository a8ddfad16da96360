"""Airflow test fixtures: an isolated AIRFLOW_HOME with a SQLite metadata DB, a bucket on the suite's moto S3
server (``moto_endpoint`` in tests/conftest.py), the Sluice and AWS connections as environment variables, and a deployments file.

Airflow reads its configuration when first imported, so the environment is set
here, at collection time, before any test module imports Airflow.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

from airflow_support import ARTIFACTS, FAKE_MASTER, REPO, kill_masters, wait_until  # noqa: F401 - fixtures use them

_HOME = Path(tempfile.mkdtemp(prefix="sluice-airflow-home-"))
os.environ.update({
    "AIRFLOW_HOME": str(_HOME),
    "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
    # the plugin registers through its entry point (pyproject.toml); an empty plugins folder avoids
    # loading it twice ("already registered")
    "AIRFLOW__CORE__PLUGINS_FOLDER": str(_HOME / "plugins"),
    "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
    "AIRFLOW__CORE__UNIT_TEST_MODE": "True",
    "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{_HOME / 'airflow.db'}",
    "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
    "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
    "SLUICE_STATE_DIR": str(_HOME / "sluice"),
    "GX_ANALYTICS_ENABLED": "false",
})
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
if str(REPO / "plugins") not in sys.path:
    sys.path.insert(0, str(REPO / "plugins"))



@pytest.fixture(scope="session")
def airflow_db():
    """``airflow db migrate`` into the temporary SQLite database, once per session."""
    from airflow.utils import db

    db.resetdb()
    yield _HOME


@pytest.fixture
def sluice_env(airflow_db, moto_endpoint, tmp_path, monkeypatch):
    """A fresh bucket, the AWS + Sluice connections, and a deployments file naming the fake master.

    Yields a dict with the bucket, URIs, job id and deployment name; kills every
    master the test started (by the pids the deploy operator recorded)."""
    import boto3

    bucket = f"sluice-{uuid.uuid4().hex[:10]}"
    boto3.client("s3", endpoint_url=moto_endpoint, region_name="us-east-1", aws_access_key_id="testing",
                 aws_secret_access_key="testing").create_bucket(Bucket=bucket)
    job_id = f"purchases-{uuid.uuid4().hex[:6]}"
    monkeypatch.setenv("AIRFLOW_CONN_AWS_MOTO", json.dumps({
        "conn_type": "aws", "login": "testing", "password": "testing",
        "extra": {"endpoint_url": moto_endpoint, "region_name": "us-east-1"}}))
    monkeypatch.setenv("AIRFLOW_CONN_SLUICE_TEST", json.dumps({
        "conn_type": "generic", "password": "s3cret-token",
        "extra": {"storage_uri": f"s3://{bucket}/checkpoints", "savepoint_dir": f"s3://{bucket}/savepoints",
                  "aws_conn_id": "aws_moto", "data_docs_dir": str(tmp_path / "data_docs")}}))
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(var, raising=False)
    deployments = tmp_path / "sluice_deployments.yaml"
    deployments.write_text(json.dumps({"purchases": {
        "conn_id": "sluice_test", "job_id": job_id, "job": "engine.examples.purchases:build",
        "parallelism": 2, "retained": 3, "checkpoint_interval_ms": 700,
        "command": [sys.executable, str(FAKE_MASTER)], "startup_timeout_s": 60,
        "health": {"max_heartbeat_age_s": 5, "max_checkpoint_age_s": 30, "max_failed_checkpoints": 0},
        "savepoint_policy": {"max_count": 2},
    }}))
    monkeypatch.setenv("SLUICE_DEPLOYMENTS_FILE", str(deployments))
    env = {"bucket": bucket, "job_id": job_id, "deployment": "purchases", "endpoint": moto_endpoint,
           "storage_uri": f"s3://{bucket}/checkpoints", "savepoint_dir": f"s3://{bucket}/savepoints"}
    yield env
    kill_masters(job_id)
