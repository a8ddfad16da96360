"""All five DAGs under a real Airflow (api-server, scheduler, dag-processor, triggerer) against a real job master.

Driven only through Airflow's REST API, as an operator would: deploy; a scheduled
savepoint whose waiting runs in the triggerer, validated by Great Expectations;
a stop through ``sluice stop`` that supervision respects; housekeeping as a dry
run that deletes nothing, then for real; a restore of ``latest`` — the stop
savepoint — at another parallelism; and at the end every committed tumbling
result exactly once and equal to a reference computed from the generator.

``dag.test()`` runs triggers inline and so never showed that the triggerer
overwrites a trigger's ``trigger_id`` (every deferrable savepoint failed with
404); this test is the one that would have.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path

import pytest

from airflow_support import (REAL_JOB_PARAMS, REPO, kill_masters, real_purchases_deployment, reference_tumbling,
                             wait_until)
from live_airflow import LiveAirflow

pytestmark = [pytest.mark.airflow, pytest.mark.slow, pytest.mark.timeout(1500),
              pytest.mark.xdist_group("live_airflow")]  # one live Airflow at a time

DAG_IDS = ["sluice_deploy", "sluice_scheduled_savepoint", "sluice_supervise", "sluice_housekeeping",
           "sluice_restore"]


@pytest.fixture
def live(sluice_env, tmp_path, monkeypatch):
    """Airflow's four services with the Sluice connections and a deployments file for the real purchases job."""
    output = tmp_path / "output"
    state_dir = tmp_path / "sluice-state"
    deployments = tmp_path / "sluice_deployments.yaml"
    spec = real_purchases_deployment(sluice_env["job_id"], output)
    spec["purchases"]["savepoint_policy"] = {"max_count": 2}  # the third savepoint prunes the first
    deployments.write_text(json.dumps(spec))
    monkeypatch.setenv("SLUICE_DEPLOYMENTS_FILE", str(deployments))
    monkeypatch.setenv("SLUICE_STATE_DIR", str(state_dir))
    env = {name: os.environ[name] for name in ("AIRFLOW_CONN_AWS_MOTO", "AIRFLOW_CONN_SLUICE_TEST")}
    env.update({"SLUICE_DEPLOYMENTS_FILE": str(deployments), "SLUICE_STATE_DIR": str(state_dir),
                "GX_ANALYTICS_ENABLED": "false",
                # runs only when the test triggers them: a scheduled supervise run in the middle of the story
                # would make its outcome depend on timing
                "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "False"})
    with LiveAirflow(tmp_path / "airflow", REPO / "dags", extra_env=env) as af:
        af.wait_dags(DAG_IDS, timeout=180)
        for dag_id in DAG_IDS:
            af.unpause(dag_id)
        yield af, {**sluice_env, "output": output}
    kill_masters(sluice_env["job_id"])


def hook():
    from sluice.hook import SluiceHook

    return SluiceHook("sluice_test")


def run(af: LiveAirflow, dag_id: str, conf: dict | None = None, expect: str = "success") -> tuple[str, dict]:
    run_id = af.trigger(dag_id, conf or {})
    state = af.wait_run(dag_id, run_id, timeout=600)
    # one deployment: one map index; a task whose group was skipped before expanding has none
    tasks = {task.removesuffix("[0]"): state for task, state in af.task_instances(dag_id, run_id).items()}
    assert state == expect, f"{dag_id} {run_id}: {state} {tasks}\n{af.diagnostics()}"
    return run_id, tasks


def deferred_through_the_triggerer(af: LiveAirflow, task_id: str) -> bool:
    """Airflow 3.3's triggerer writes what a trigger logs beside the task's log: ``...log.trigger.<job>.log``."""
    return any(af.home.rglob(f"task_id={task_id}/**/*.log.trigger.*.log")) or any(
        af.home.rglob(f"task_id={task_id}/*.log.trigger.*.log"))


def sluice_cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **hook().process_environment(), "SLUICE_CONTROL_TOKEN": hook().token}
    return subprocess.run([sys.executable, "-m", "engine.cli", *args], capture_output=True, text=True, env=env,
                          timeout=180)


def committed_rows(folder: Path) -> list[list]:
    rows = []
    for part in sorted(folder.glob("part-*.jsonl")):  # committed files only (pending ones live in _staging)
        rows.extend(json.loads(line) for line in part.read_text().splitlines() if line.strip())
    return rows


def test_the_five_dags_under_a_real_airflow_keep_a_job_exactly_once(live):
    af, env = live
    job_id = env["job_id"]

    # deploy: the master starts and its first checkpoint completes
    _, tasks = run(af, "sluice_deploy", {"deployment": "purchases"})
    assert tasks == {"deploy": "success", "first_checkpoint": "success"}
    desired = hook().desired_state(job_id)
    assert desired.state.value == "running" and desired.changed_by.startswith("airflow:sluice_deploy/")

    # scheduled savepoint: waited for in the triggerer, validated, policy applied
    run_id, tasks = run(af, "sluice_scheduled_savepoint")
    assert tasks == {"deployments": "success", "job.desired_state": "success", "job.savepoint": "success",
                     "job.validate": "success", "job.apply_policy": "success"}
    assert deferred_through_the_triggerer(af, "job.savepoint")
    scheduled = af.xcom("sluice_scheduled_savepoint", run_id, "job.savepoint", map_index=0)
    assert scheduled.startswith(env["savepoint_dir"] + f"/{job_id}/savepoint-")
    assert af.xcom("sluice_scheduled_savepoint", run_id, "job.validate", map_index=0)["status"] == "passed"
    listed = {s.uri: s for s in hook().list_savepoints(job_id)}
    assert listed[scheduled].metadata.validation_passed()
    # the validate task's extra links, as the UI asks for them: the job page and the Data Docs it wrote
    links = af.get(f"/api/v2/dags/sluice_scheduled_savepoint/dagRuns/{run_id}/taskInstances/job.validate/links",
                   map_index=0)["extra_links"]
    assert links["Sluice job page"] == "/sluice/jobs/purchases", links
    assert links["Data Docs"].startswith("/sluice/jobs/purchases/data-docs/"), links
    assert af.client.get(links["Data Docs"]).status_code == 200  # served by the plugin page, behind the login

    # an operator stops the job with a savepoint: supervision leaves it down
    stop = sluice_cli("stop", job_id, "--storage", env["storage_uri"])
    assert stop.returncode == 0, stop.stderr
    stop_savepoint = stop.stdout.strip().splitlines()[-1]
    desired = hook().desired_state(job_id)
    assert desired.is_suspended() and desired.savepoint == stop_savepoint
    wait_until(lambda: hook().get_status(job_id).source == "status-document", timeout_s=60, what="master gone")
    masters_before = sorted(Path(os.environ["SLUICE_STATE_DIR"]).glob(f"{job_id}-*.log"))
    _, tasks = run(af, "sluice_supervise")
    assert tasks == {"deployments": "success", "job.desired_state": "skipped", "job.check_health": "skipped",
                     "job.restart_from_latest": "skipped", "job.confirm_checkpoint": "skipped",
                     "job.alert": "skipped"}
    assert sorted(Path(os.environ["SLUICE_STATE_DIR"]).glob(f"{job_id}-*.log")) == masters_before
    assert hook().get_status(job_id).source == "status-document"

    # housekeeping: a dry run lists the orphan and deletes nothing; the real run deletes it
    store = hook().store
    orphan = f"{job_id}/chk-999999/window/0/contents.kg0.parquet"
    store.put_bytes(orphan, b"left behind by an aborted checkpoint")
    run_id, tasks = run(af, "sluice_housekeeping", {"grace_period_s": 0, "dry_run": True})
    report = af.xcom("sluice_housekeeping", run_id, "job.clean_orphans", map_index=0)
    assert orphan in {o["key"] for o in report["orphans"]} and report["deleted"] is False
    assert [i.key for i in store.list(f"{job_id}/chk-999999/")] == [orphan]
    run_id, tasks = run(af, "sluice_housekeeping", {"grace_period_s": 0})
    assert af.xcom("sluice_housekeeping", run_id, "job.retention_audit", map_index=0)["ok"] is True
    assert not list(store.list(f"{job_id}/chk-999999/"))

    # restore "latest" at another parallelism: the stop savepoint, newer than every checkpoint
    run_id, tasks = run(af, "sluice_restore", {"deployment": "purchases", "parallelism": 3})
    assert tasks == {"stop_with_savepoint": "success", "restore": "success", "confirm_checkpoint": "success"}
    restored = af.xcom("sluice_restore", run_id, "restore")
    assert restored["from_snapshot"] == stop_savepoint, restored
    assert restored["validation"]["status"] == "passed"
    wait_until(lambda: hook().get_status(job_id).details.get("parallelism") == 3, what="parallelism 3")
    assert hook().desired_state(job_id).state.value == "running"

    # supervision sees a healthy job and does nothing
    _, tasks = run(af, "sluice_supervise")
    assert (tasks["job.check_health"], tasks["job.restart_from_latest"]) == ("success", "skipped"), tasks

    # a second scheduled savepoint: three savepoints now, the policy (max_count 2) prunes the oldest
    run_id, _ = run(af, "sluice_scheduled_savepoint")
    second = af.xcom("sluice_scheduled_savepoint", run_id, "job.savepoint", map_index=0)
    assert af.xcom("sluice_scheduled_savepoint", run_id, "job.apply_policy", map_index=0) == [scheduled]
    assert [s.uri for s in hook().list_savepoints(job_id)] == [stop_savepoint, second]

    # the end: stop with a savepoint (commits pending output); every result exactly once, each right
    final = hook().stop_with_savepoint(f"live-final-{uuid.uuid4().hex[:6]}", job_id=job_id)
    hook().wait_for_operation("stop", final, job_id=job_id, timeout_s=120)
    rows = committed_rows(env["output"] / "tumbling")
    assert rows, "no committed tumbling results"
    counts = Counter((user, start) for user, start, _end, _items in rows)
    assert max(counts.values()) == 1, {k: n for k, n in counts.items() if n > 1}
    produced = {(user, start): items for user, start, _end, items in rows}
    last_end = max(start for _, start in produced) + 60_000
    reference = reference_tumbling(last_end, REAL_JOB_PARAMS["events_per_second"])
    assert produced == {k: v for k, v in reference.items() if k[1] + 60_000 <= last_end}
