"""Smoke test of the LiveAirflow harness: a real api-server, scheduler, dag-processor and triggerer
run a deferrable sensor (through the triggerer) and a Python task, driven over the REST API."""

from __future__ import annotations

import sqlite3
import textwrap
import time

import pytest

from live_airflow import LiveAirflow

# one live Airflow at a time (pyproject.toml runs the suite with --dist loadgroup)
pytestmark = [pytest.mark.airflow, pytest.mark.slow, pytest.mark.xdist_group("live_airflow")]

DAG_ID = "live_airflow_smoke"
DAG_FILE = textwrap.dedent('''
    import os
    from datetime import datetime

    from airflow.providers.standard.operators.python import PythonOperator
    from airflow.providers.standard.sensors.date_time import DateTimeSensorAsync
    from airflow.sdk import DAG


    def answer(**context):
        return {"answer": 42, "conf": context["dag_run"].conf, "marker": os.environ.get("LIVE_AIRFLOW_MARKER")}


    # retries: under load Airflow 3.3 can fail a finished task whose state update raced ("success, but queued")
    with DAG("live_airflow_smoke", schedule=None, start_date=datetime(2024, 1, 1), catchup=False,
             default_args={"retries": 2, "retry_delay": 5}):
        # DateTimeSensorAsync always defers, even when the moment has passed (the trigger then fires at once)
        wait = DateTimeSensorAsync(task_id="wait",
                                   target_time="{{ macros.datetime.utcnow() + macros.timedelta(seconds=3) }}")
        wait >> PythonOperator(task_id="answer", python_callable=answer)
''')


@pytest.mark.timeout(420)
def test_triggerer_runs_a_deferred_sensor(tmp_path):
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "smoke_dag.py").write_text(DAG_FILE)
    started = time.monotonic()
    with LiveAirflow(tmp_path / "home", dags, extra_env={"LIVE_AIRFLOW_MARKER": "from-extra-env"}) as af:
        af.wait_dags([DAG_ID], timeout=120)
        parsed_s = time.monotonic() - started
        af.unpause(DAG_ID)
        run_id = af.trigger(DAG_ID, {"n": 7})
        # on a loaded host a writer can hold SQLite's lock for seconds (CI saw the scheduler die of "database is
        # locked"); every service must wait for it, not fail, and Python's sqlite3 gives up after 5 s by default.
        # Held for longer while the scheduler has a new run to schedule, so it must write.
        held_s = _hold_the_metadata_db_write_lock(af, 8.0)
        af.wait_healthy()
        state = af.wait_run(DAG_ID, run_id, timeout=240)
        run_s = time.monotonic() - started - parsed_s
        assert state == "success", f"{af.task_instances(DAG_ID, run_id)}\n{af.diagnostics()}"
        assert af.task_instances(DAG_ID, run_id) == {"wait": "success", "answer": "success"}
        assert af.xcom(DAG_ID, run_id, "answer") == {"answer": 42, "conf": {"n": 7}, "marker": "from-extra-env"}

        # the sensor went through the triggerer.  Airflow 3.3's triggerer writes what a trigger logs
        # to a file of the task's own, <task log>.trigger.<triggerer job id>.log (its process log only
        # says "Starting the triggerer"); that file must exist, name our triggerer's job and show the
        # DateTimeTrigger firing, and the task log served over REST must include it
        triggerers = {job["id"] for job in af.get("/api/v2/jobs", job_type="TriggererJob")["jobs"]}
        # the last try's: under load Airflow can fail a finished try (the DAG retries), so it may not be the first
        tries = af.get(f"/api/v2/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/wait")["try_number"]
        trigger_logs = list((af.home / "logs").rglob(f"task_id=wait/attempt={tries}.log.trigger.*.log"))
        assert trigger_logs, af.diagnostics()
        assert {int(path.name.split(".")[-2]) for path in trigger_logs} <= triggerers, (trigger_logs, triggerers)
        fired = trigger_logs[0].read_text()
        assert "DateTimeTrigger" in fired and "Trigger fired event" in fired, fired
        log = af.task_log(DAG_ID, run_id, "wait", try_number=tries)
        assert "Pausing task as DEFERRED" in log and "Trigger fired event" in log, log
        print(f"\nLiveAirflow: started in {af.startup_s:.1f}s, DAG parsed after {parsed_s:.1f}s, "
              f"DB write lock held {held_s:.1f}s, run took {run_s:.1f}s")


def _hold_the_metadata_db_write_lock(af: LiveAirflow, seconds: float) -> float:
    """Take SQLite's write lock on the deployment's database (as a long write transaction would), keep it for
    ``seconds`` while the services go on heartbeating, then release it; returns how long it was held."""
    db = sqlite3.connect(af.home / "airflow.db", timeout=60.0, isolation_level=None)
    try:
        db.execute("BEGIN IMMEDIATE")  # the RESERVED lock: every other writer waits (or fails) until it ends
        taken = time.monotonic()
        time.sleep(seconds)
        db.execute("ROLLBACK")
        return time.monotonic() - taken
    finally:
        db.close()
