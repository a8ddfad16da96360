"""
### Scheduled savepoints of every running Sluice deployment

Hourly, once per deployment (one mapped task group each; give `deployment` for one only):

1. **desired_state** — a job meant to be down is skipped (nothing to savepoint);
2. **savepoint** (deferrable) — asks the job master for a savepoint and waits in the
   triggerer; a retry re-attaches to the savepoint the first try started;
3. **validate** — Great Expectations validates the savepoint and records the outcome in
   its `_metadata` (Data Docs beside it);
4. **apply_policy** — deletes savepoints beyond the deployment's `savepoint_policy`
   (`max_count`, `max_age_hours`); the newest validated savepoint is always kept.

Runbook: `docs/runbooks/upgrade-with-savepoint.md`.
"""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import DAG, Param, task_group
from sluice.operators import (
    SluiceApplySavepointPolicyOperator,
    SluiceCheckDesiredStateOperator,
    SluiceTriggerSavepointOperator,
    SluiceValidateSnapshotOperator,
)
from sluice.tasks import deployments

with DAG(
    dag_id="sluice_scheduled_savepoint",
    description="Savepoint, Great Expectations validation (recorded in _metadata), savepoint history policy",
    doc_md=__doc__,
    schedule="@hourly",
    catchup=False,
    max_active_runs=1,
    render_template_as_native_obj=True,
    tags=["sluice"],
    # every task is idempotent (a retried deploy or restore re-attaches to the master it started)
    default_args={"retries": 1, "retry_delay": timedelta(seconds=15)},
    params={
        "deployment": Param(None, type=["null", "string"],
                            description="Savepoint only this deployment; empty: every deployment"),
    },
) as dag:

    @task_group(group_id="job")
    def savepoint_job(deployment: str) -> None:
        desired = SluiceCheckDesiredStateOperator(task_id="desired_state", deployment=deployment)
        savepoint = SluiceTriggerSavepointOperator(
            task_id="savepoint",
            deployment=deployment,
            deferrable=True,
            retries=2,  # Airflow 3.3 can resume a deferred task with a stale event: retry, idempotently
            retry_delay=timedelta(seconds=15),
        )
        validate = SluiceValidateSnapshotOperator(
            task_id="validate",
            deployment=deployment,
            snapshot="{{ ti.xcom_pull(task_ids='job.savepoint', map_indexes=ti.map_index) }}",
        )
        apply_policy = SluiceApplySavepointPolicyOperator(task_id="apply_policy", deployment=deployment)

        desired >> savepoint >> validate >> apply_policy

    savepoint_job.expand(deployment=deployments())
