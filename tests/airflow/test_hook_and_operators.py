"""SluiceHook and the operators' transactions against a master process and moto S3 (no scheduler needed)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import types
from pathlib import Path

import pytest

from airflow_support import FAKE_MASTER, wait_until
from dag_helpers import run_dag

pytestmark = pytest.mark.airflow


@pytest.fixture
def hook(sluice_env):
    from sluice.hook import SluiceHook

    return SluiceHook("sluice_test")


@pytest.fixture
def master(sluice_env, hook):
    """A master for the job, started directly (not through the deploy operator); killed afterwards."""
    env = {**os.environ, **hook.process_environment(), "SLUICE_CONTROL_TOKEN": hook.token}
    process = subprocess.Popen([sys.executable, str(FAKE_MASTER), "run", "x", "--job-id", sluice_env["job_id"],
                                "--storage", sluice_env["storage_uri"], "--retained", "3",
                                "--checkpoint-interval", "500"], env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True)
    wait_until(lambda: hook.get_status(sluice_env["job_id"]).source == "control-api", what="master up")
    yield process
    if process.poll() is None:
        process.kill()
    process.wait()


def fake_context(run_id="run-1", task_id="savepoint"):
    return {"ti": types.SimpleNamespace(dag_id="d", run_id=run_id, task_id=task_id, map_index=-1)}


def test_a_retried_savepoint_task_reattaches_to_the_savepoint_of_its_first_try(sluice_env, hook, master):
    from sluice.operators import SluiceTriggerSavepointOperator

    op = SluiceTriggerSavepointOperator(task_id="savepoint", deployment="purchases", deferrable=False)
    first = op.execute(fake_context())
    retried = op.execute(fake_context())
    other_run = op.execute(fake_context(run_id="run-2"))

    assert retried == first
    assert other_run != first
    assert sorted(s.uri for s in hook.list_savepoints(sluice_env["job_id"])) == sorted([first, other_run])


def test_status_comes_from_the_control_api_and_falls_back_to_the_status_document(sluice_env, hook, master):
    job_id = sluice_env["job_id"]
    wait_until(lambda: hook.get_status(job_id).last_completed_checkpoint, what="a checkpoint")
    live = hook.get_status(job_id)
    master.kill()
    master.wait()
    dead = hook.get_status(job_id)

    assert (live.source, live.state) == ("control-api", "RUNNING")
    assert dead.source == "status-document"
    assert dead.heartbeat_ms <= live.heartbeat_ms
    assert dead.last_completed_checkpoint >= 1


def test_a_wrong_token_is_refused_by_the_control_api(sluice_env, hook, master, monkeypatch):
    from sluice.exceptions import ControlApiError
    from sluice.hook import SluiceHook

    conn = json.loads(os.environ["AIRFLOW_CONN_SLUICE_TEST"])
    conn["password"] = "wrong"
    monkeypatch.setenv("AIRFLOW_CONN_SLUICE_WRONG", json.dumps(conn))

    with pytest.raises(ControlApiError) as refused:
        SluiceHook("sluice_wrong").checkpoint_history(sluice_env["job_id"])
    assert refused.value.status_code == 401


def test_the_restore_point_passes_over_a_corrupt_latest_checkpoint(sluice_env, hook, master):
    from checkpoints.index import read_index

    job_id = sluice_env["job_id"]
    wait_until(lambda: len(read_index(hook.store, job_id).index.ids()) == 3, what="3 retained")
    master.kill()
    master.wait()
    ids = read_index(hook.store, job_id).index.ids()
    victim = next(info.key for info in hook.store.list(f"{job_id}/chk-{ids[-1]}/") if info.key.endswith(".parquet"))
    hook.store.put_bytes(victim, b"not parquet any more")

    point = hook.restore_point(job_id)

    assert (point.kind, point.checkpoint_id) == ("checkpoint", ids[-2])
    assert len(point.passed_over) == 1 and f"chk-{ids[-1]}" in point.passed_over[0]


def test_restore_refuses_a_tampered_savepoint_and_starts_nothing(sluice_env, hook, master):
    job_id = sluice_env["job_id"]
    trigger = hook.trigger_savepoint("manual-1", job_id=job_id)
    savepoint = hook.wait_for_operation("savepoint", trigger, job_id=job_id, timeout_s=60)
    hook.cancel(job_id)
    master.wait(timeout=30)
    folder = savepoint.split(f"s3://{sluice_env['bucket']}/savepoints/", 1)[1]
    savepoints = hook.savepoint_store
    victim = next(i.key for i in savepoints.list(folder + "/") if i.key.endswith(".parquet"))
    savepoints.put_bytes(victim, b"tampered")

    state, tasks, _ = run_dag("sluice_restore", deployment="purchases", snapshot=savepoint, parallelism=3)

    assert (state, tasks["stop_with_savepoint"], tasks["restore"]) == ("failed", "success", "failed")
    assert tasks["confirm_checkpoint"] == "upstream_failed"
    assert hook.read_status_document(job_id).state == "CANCELLED"  # no master was started


def test_a_retried_deploy_reattaches_and_any_other_deploy_is_refused_while_the_master_lives(sluice_env, hook):
    from sluice.operators import JobAlreadyRunning, SluiceDeployJobOperator

    op = SluiceDeployJobOperator(task_id="deploy", deployment="purchases")
    first = op.execute(fake_context(task_id="deploy"))
    try:
        retried = op.execute(fake_context(task_id="deploy"))
        with pytest.raises(JobAlreadyRunning, match="never two masters"):
            op.execute(fake_context(run_id="another-run", task_id="deploy"))
    finally:
        os.kill(first["pid"], signal.SIGKILL)
        os.waitpid(first["pid"], 0)

    assert retried["pid"] == first["pid"]
    assert hook.read_status_document(sluice_env["job_id"]).extra["pid"] == first["pid"]


def test_waiting_for_a_checkpoint_fails_at_once_when_the_job_ended(sluice_env, hook):
    import time

    from checkpoints.status import StatusDocument, write_status
    from sluice.triggers.condition import JobEnded, evaluate

    since = int(time.time() * 1000) - 1_000
    write_status(hook.store, StatusDocument(job_id=sluice_env["job_id"], heartbeat_ms=since + 500, state="FAILED",
                                            failures=({"time_ms": since, "kind": "checkpoint", "message": "boom"},)))

    with pytest.raises(JobEnded, match="ended \\(FAILED\\).*boom"):
        evaluate("checkpoint_completed", "sluice_test", sluice_env["job_id"], {"since_ms": since})
    done, details = evaluate("checkpoint_completed", "sluice_test", sluice_env["job_id"], {"since_ms": since + 600})
    assert (done, details["retained"]) == (False, [])  # an older terminal status says nothing about a newer deploy


def test_a_deployment_declared_suspended_is_stopped_with_a_savepoint_and_not_supervised(sluice_env, hook, master):
    from airflow.sdk.exceptions import AirflowSkipException

    from sluice.operators import SluiceCheckDesiredStateOperator

    job_id = sluice_env["job_id"]
    deployments = Path(os.environ["SLUICE_DEPLOYMENTS_FILE"])
    spec = json.loads(deployments.read_text())
    spec["purchases"]["state"] = "suspended"
    deployments.write_text(json.dumps(spec))
    op = SluiceCheckDesiredStateOperator(task_id="desired_state", deployment="purchases")

    with pytest.raises(AirflowSkipException, match="declared suspended.*stopped with savepoint"):
        op.execute(fake_context(task_id="desired_state"))
    wait_until(lambda: hook.get_status(job_id).source != "control-api", what="master stopped")
    assert len(hook.list_savepoints(job_id)) == 1
    with pytest.raises(AirflowSkipException, match="declared suspended"):  # already down: nothing more to do
        SluiceCheckDesiredStateOperator(task_id="desired_state", deployment="purchases").execute(fake_context())
    assert len(hook.list_savepoints(job_id)) == 1


def test_the_hook_keeps_its_token_from_a_control_url_in_storage_that_is_not_an_allowed_host(sluice_env, hook,
                                                                                           monkeypatch):
    from checkpoints.status import StatusDocument, write_status
    from engine.master.client import UntrustedControlUrl
    from sluice.hook import SluiceHook, now_ms

    job_id = sluice_env["job_id"]
    write_status(hook.store, StatusDocument(job_id=job_id, heartbeat_ms=now_ms(),
                                            extra={"control_url": "http://203.0.113.7:8081"}))
    with pytest.raises(UntrustedControlUrl, match="not sent there"):
        hook.client(job_id)
    status = hook.get_status(job_id)  # supervision still reads the document; it just does not call the URL
    assert status.source == "status-document" and status.control_url is None

    connection = json.loads(os.environ["AIRFLOW_CONN_SLUICE_TEST"])
    connection["extra"]["control_hosts"] = "198.51.100.0/24, 203.0.113.0/24"
    monkeypatch.setenv("AIRFLOW_CONN_SLUICE_TEST", json.dumps(connection))
    allowed = SluiceHook("sluice_test")
    assert allowed.control_hosts == ["198.51.100.0/24", "203.0.113.0/24"]
    assert allowed.control_url(job_id) == "http://203.0.113.7:8081"
