"""Restore a Sluice job from a chosen snapshot, optionally rescaled (runbooks: rollback.md, rescale.md).

Stops the job with a savepoint if it runs, validates the chosen snapshot (refused
if invalid: nothing starts), redeploys from it, and waits for the first
checkpoint after the restore.
"""

from __future__ import annotations

from airflow.sdk import DAG, Param
from sluice.operators import SluiceRestoreOperator, SluiceStopJobOperator
from sluice.sensors import SluiceCheckpointCompletedSensor

with DAG(
    dag_id="sluice_restore",
    description="Stop with savepoint, validate a snapshot, redeploy from it, confirm the first checkpoint",
    schedule=None,
    catchup=False,
    render_template_as_native_obj=True,
    tags=["sluice"],
    params={
        "deployment": Param("purchases", type="string"),
        "snapshot": Param("latest", type="string", description="checkpoint/savepoint URI, or 'latest'"),
        "parallelism": Param(None, type=["null", "integer"], minimum=1, description="new parallelism (rescale)"),
    },
) as dag:
    stop = SluiceStopJobOperator(
        task_id="stop_with_savepoint",
        deployment="{{ params.deployment }}",
        if_running=True,
        deferrable=True,
    )
    restore = SluiceRestoreOperator(
        task_id="restore",
        deployment="{{ params.deployment }}",
        snapshot="{{ params.snapshot }}",
        parallelism="{{ params.parallelism }}",
        live_grace_s=60,
    )
    confirm = SluiceCheckpointCompletedSensor(
        task_id="confirm_checkpoint",
        deployment="{{ params.deployment }}",
        since="{{ ti.xcom_pull(task_ids='restore')['started_ms'] }}",
        deferrable=True,
        poke_interval=2,
        timeout=600,
    )

    stop >> restore >> confirm
