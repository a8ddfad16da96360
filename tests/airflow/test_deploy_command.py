"""What the deploy operator starts: `sluice run` flags from the deployment, or spark-submit through the Spark provider."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest


@pytest.fixture
def deployment(sluice_env, monkeypatch):
    def write(**spec):
        base = {"conn_id": "sluice_test", "job_id": sluice_env["job_id"], "job": "engine.examples.purchases:build",
                "parallelism": 2, "retained": 4, "checkpoint_interval_ms": 2500, "output": "/data/out",
                "params": {"events_per_split": None, "late_fraction": 0.5, "label": "a b"}}
        Path(os.environ["SLUICE_DEPLOYMENTS_FILE"]).write_text(json.dumps({"purchases": {**base, **spec}}))
    return write


def test_the_local_command_is_sluice_run_with_the_deployments_flags_and_json_params(sluice_env, deployment):
    from sluice.operators import SluiceDeployJobOperator

    deployment()
    op = SluiceDeployJobOperator(task_id="deploy", deployment="purchases", parallelism=3)
    argv = op.command(sluice_env["job_id"], "s3://b/savepoints/x/savepoint-4-ab")

    assert argv[:4] == [sys.executable, "-m", "engine.cli", "run"]
    flags = dict(zip(argv[5::2], argv[6::2]))
    assert argv[4] == "engine.examples.purchases:build"
    assert flags["--job-id"] == sluice_env["job_id"] and flags["--parallelism"] == "3"
    assert flags["--storage"] == sluice_env["storage_uri"] and flags["--savepoint-dir"] == sluice_env["savepoint_dir"]
    assert (flags["--retained"], flags["--checkpoint-interval"]) == ("4", "2500")
    assert flags["--lease-wait"] == "20"  # a restarted master outwaits its dead predecessor's lease
    assert flags["--from-savepoint"] == "s3://b/savepoints/x/savepoint-4-ab"
    params = [argv[i + 1] for i, a in enumerate(argv) if a == "--param"]
    assert params == ["events_per_split=null", "label=a b", "late_fraction=0.5"]
    assert "s3cret-token" not in " ".join(argv)  # the token travels in the environment, never on the command line
    assert "--validated-digest" not in argv and "--allow-drained" not in argv

    started_by = {"dag_id": "sluice_restore", "run_id": "r1", "task_id": "restore", "map_index": -1}
    argv = SluiceDeployJobOperator(task_id="restore", deployment="purchases", allow_drained=True).command(
        sluice_env["job_id"], "s3://b/savepoints/x/savepoint-4-ab", started_by, validated_digest="ab12")
    def value(flag):
        return argv[argv.index(flag) + 1]

    assert (value("--validated-digest"), value("--started-by")) == ("ab12", "airflow:sluice_restore/r1/restore")
    assert "--allow-drained" in argv


def test_without_a_spark_connection_the_deployments_spark_conf_goes_to_the_embedded_session(sluice_env, deployment):
    from sluice.operators import SluiceDeployJobOperator

    deployment(runtime="spark", spark_conf={"spark.ui.enabled": True, "spark.sql.shuffle.partitions": 8})
    argv = SluiceDeployJobOperator(task_id="deploy", deployment="purchases").command(sluice_env["job_id"], None)

    assert argv[:4] == [sys.executable, "-m", "engine.cli", "run"]
    conf = [argv[i + 1] for i, a in enumerate(argv) if a == "--spark-conf"]
    assert conf == ["spark.sql.shuffle.partitions=8", "spark.ui.enabled=true"]


def test_the_spark_runtime_is_spark_submitted_through_the_spark_providers_hook(sluice_env, deployment, monkeypatch):
    import engine.cli
    from sluice.operators import SluiceDeployJobOperator

    monkeypatch.setenv("AIRFLOW_CONN_SPARK_TEST", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    deployment(runtime="spark", spark_conn_id="spark_test", spark_conf={"spark.sql.shuffle.partitions": "8"})
    op = SluiceDeployJobOperator(task_id="deploy", deployment="purchases")
    argv = op.command(sluice_env["job_id"], None)

    assert Path(argv[0]).name.startswith("spark-submit")
    assert "--master" in argv and argv[argv.index("--master") + 1] == "local[2]"
    assert "spark.sql.shuffle.partitions=8" in argv
    app = argv.index(engine.cli.__file__)
    assert argv[app + 1:app + 3] == ["run", "engine.examples.purchases:build"]
    assert "--from-savepoint" not in argv
