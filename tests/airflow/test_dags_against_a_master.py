"""Every DAG run with dag.test() against a job master process and a moto S3 server over HTTP.

The master is tests/airflow/fake_master.py (real control API, real checkpoints,
retention, status document and savepoints; synthetic state) because
``sluice run`` is not available yet; the same story with the real purchases job
is test_end_to_end_real_job.py.
"""

from __future__ import annotations

import os
import signal

import pytest

from airflow_support import wait_until
from dag_helpers import run_dag

pytestmark = pytest.mark.airflow


def now_ms():
    import time

    return int(time.time() * 1000)


def hook():
    from sluice.hook import SluiceHook

    return SluiceHook("sluice_test")


def retained_ids(job_id):
    from checkpoints.index import read_index

    return read_index(hook().store, job_id).index.ids()


def status_doc(job_id):
    return hook().read_status_document(job_id)


def test_deploy_checkpoints_savepoint_supervise_restore_housekeeping(sluice_env):
    job_id = sluice_env["job_id"]

    # deploy: the master starts, its first checkpoint completes
    state, tasks, values = run_dag("sluice_deploy", deployment="purchases")
    assert (state, tasks) == ("success", {"deploy": "success", "first_checkpoint": "success"})
    first = values["deploy"]
    assert first["from_snapshot"] is None and first["control_url"].startswith("http://127.0.0.1:")
    assert hook().get_status(job_id).source == "control-api"

    # never two masters for one job
    state, tasks, _ = run_dag("sluice_deploy", deployment="purchases")
    assert (state, tasks["deploy"]) == ("failed", "failed")
    assert status_doc(job_id).extra["pid"] == first["pid"]

    # checkpoints retained = N
    wait_until(lambda: len(retained_ids(job_id)) == 3 and max(retained_ids(job_id)) > 3, what="retention at N=3")

    # scheduled savepoint: triggered, validated (outcome recorded), policy applied (max_count 2)
    savepoints = []
    for _ in range(3):
        state, tasks, values = run_dag("sluice_scheduled_savepoint", deployment="purchases")
        assert state == "success", tasks
        assert values["job.validate"]["status"] == "passed"
        savepoints.append(values["job.savepoint"])
    listed = hook().list_savepoints(job_id)
    assert [s.uri for s in listed] == savepoints[1:]
    assert all(s.metadata.validation_passed() for s in listed)

    # the job dies: supervise restarts it from the latest retained checkpoint and alerts
    os.kill(first["pid"], signal.SIGKILL)
    os.waitpid(first["pid"], 0)
    latest_before = max(retained_ids(job_id))
    wait_until(lambda: hook().get_status(job_id).source == "status-document", what="master unreachable")
    wait_until(lambda: now_ms() - status_doc(job_id).heartbeat_ms > 5_500, timeout_s=15,
               what="heartbeat older than the deployment's max_heartbeat_age_s (5)")
    state, tasks, values = run_dag("sluice_supervise", deployment="purchases")
    assert tasks == {"deployments": "success", "job.desired_state": "success", "job.check_health": "failed",
                     "job.restart_from_latest": "success", "job.confirm_checkpoint": "success", "job.alert": "success"}
    restarted = values["job.restart_from_latest"]
    assert restarted["from_snapshot"].endswith(f"/{job_id}/chk-{latest_before}")
    assert status_doc(job_id).extra["restored_from"] == restarted["from_snapshot"]

    # a healthy job: supervise does nothing
    state, tasks, _ = run_dag("sluice_supervise", deployment="purchases")
    assert (state, tasks["job.check_health"], tasks["job.restart_from_latest"]) == ("success", "success", "skipped")

    # restore to an older savepoint with a new parallelism
    older = savepoints[1]
    state, tasks, values = run_dag("sluice_restore", deployment="purchases", snapshot=older, parallelism=4)
    assert (state, tasks) == ("success", {"stop_with_savepoint": "success", "restore": "success",
                                          "confirm_checkpoint": "success"}), tasks
    assert values["stop_with_savepoint"].startswith(sluice_env["savepoint_dir"])
    restored = values["restore"]
    assert (restored["from_snapshot"], restored["parallelism"]) == (older, "4")
    assert restored["validation"]["status"] == "passed"
    doc = status_doc(job_id)
    assert (doc.extra["restored_from"], doc.extra["parallelism"], doc.extra["pid"]) == (older, 4, restored["pid"])

    # housekeeping while the job runs: the grace period cannot drop below the live minimum
    store = hook().store
    store.put_bytes(f"{job_id}/chk-999999/counts/0/contents.kg0.parquet", b"left behind by an aborted checkpoint")
    state, tasks, values = run_dag("sluice_housekeeping", deployment="purchases", grace_period_s=0)
    assert state == "success", tasks
    assert values["job.clean_orphans"]["orphans"] == [] and values["job.retention_audit"]["ok"] is True
    assert list(store.list(f"{job_id}/chk-999999/"))

    # housekeeping after the job stopped: the orphaned folder is removed, retention holds
    hook().cancel(job_id)
    wait_until(lambda: hook().get_status(job_id).source != "control-api", what="job stopped")
    store.put_bytes(f"{job_id}/chk-999999/counts/0/contents.kg0.parquet", b"left behind by an aborted checkpoint")
    state, tasks, values = run_dag("sluice_housekeeping", deployment="purchases", grace_period_s=0)
    assert state == "success", tasks
    orphans = {o["key"] for o in values["job.clean_orphans"]["orphans"]}
    assert f"{job_id}/chk-999999/counts/0/contents.kg0.parquet" in orphans
    assert values["job.retention_audit"]["ok"] is True
    assert not list(store.list(f"{job_id}/chk-999999/"))
