"""Supervise a Sluice job every few minutes; restart a dead or unhealthy one (runbook: docs/runbooks/deploy.md).

Healthy: the check succeeds and nothing else runs.  Dead or unhealthy: the job is
restarted from its latest loadable retained checkpoint (else the latest validated
savepoint), replacing any live master first (never two masters), the first
checkpoint after the restart is awaited, and an alert says what happened.
"""

from __future__ import annotations

from airflow.sdk import DAG, Param, TriggerRule
from sluice.operators import SluiceAlertOperator, SluiceDeployJobOperator
from sluice.sensors import SluiceCheckpointCompletedSensor, SluiceJobHealthySensor

with DAG(
    dag_id="sluice_supervise",
    description="Check a Sluice job's heartbeat, checkpoints, failures and lag; restart it when unhealthy",
    schedule="*/5 * * * *",
    catchup=False,
    max_active_runs=1,
    render_template_as_native_obj=True,
    tags=["sluice"],
    params={
        "deployment": Param("purchases", type="string"),
    },
) as dag:
    check = SluiceJobHealthySensor(
        task_id="check_health",
        deployment="{{ params.deployment }}",
        poke_interval=10,
        timeout=120,  # an alive but unhealthy job gets this long to recover; a dead one fails at once
        mode="poke",
    )
    restart = SluiceDeployJobOperator(
        task_id="restart_from_latest",
        deployment="{{ params.deployment }}",
        from_snapshot="latest",
        replace_live=True,
        trigger_rule=TriggerRule.ALL_FAILED,
    )
    confirm = SluiceCheckpointCompletedSensor(
        task_id="confirm_checkpoint",
        deployment="{{ params.deployment }}",
        since="{{ ti.xcom_pull(task_ids='restart_from_latest')['started_ms'] }}",
        deferrable=True,
        poke_interval=2,
        timeout=600,
    )
    alert = SluiceAlertOperator(
        task_id="alert",
        message=(
            "Sluice job {{ params.deployment }} was dead or unhealthy and was restarted "
            "from {{ (ti.xcom_pull(task_ids='restart_from_latest') or {}).get('from_snapshot') }} "
            "(passed over: {{ (ti.xcom_pull(task_ids='restart_from_latest') or {}).get('snapshots_passed_over') }})"
        ),
        trigger_rule=TriggerRule.NONE_SKIPPED,
    )

    check >> restart >> confirm
    restart >> alert
