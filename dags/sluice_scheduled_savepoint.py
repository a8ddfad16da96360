"""Take a savepoint on a schedule, validate it, and apply the savepoint history policy.

Runbook: docs/runbooks/upgrade-with-savepoint.md.  The savepoint task is
idempotent: a retry re-attaches to the savepoint the first try started.
"""

from __future__ import annotations

from airflow.sdk import DAG, Param
from sluice.operators import (
    SluiceApplySavepointPolicyOperator,
    SluiceTriggerSavepointOperator,
    SluiceValidateSnapshotOperator,
)

with DAG(
    dag_id="sluice_scheduled_savepoint",
    description="Savepoint, Great Expectations validation (recorded in _metadata), savepoint history policy",
    schedule="@hourly",
    catchup=False,
    max_active_runs=1,
    render_template_as_native_obj=True,
    tags=["sluice"],
    params={"deployment": Param("purchases", type="string")},
) as dag:
    savepoint = SluiceTriggerSavepointOperator(
        task_id="savepoint",
        deployment="{{ params.deployment }}",
        deferrable=True,
        retries=2,
    )
    validate = SluiceValidateSnapshotOperator(
        task_id="validate",
        deployment="{{ params.deployment }}",
        snapshot="{{ ti.xcom_pull(task_ids='savepoint') }}",
    )
    apply_policy = SluiceApplySavepointPolicyOperator(
        task_id="apply_policy",
        deployment="{{ params.deployment }}",
    )

    savepoint >> validate >> apply_policy
