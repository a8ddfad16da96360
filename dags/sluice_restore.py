"""
### Restore a Sluice job from a snapshot, optionally rescaled

1. **stop_with_savepoint** (deferrable) — if the job runs, stop it with a savepoint
   (never drained), which records the job as suspended on purpose;
2. **restore** — choose the snapshot (`latest`: the newest restorable one across retained
   checkpoints and savepoints by completion time — normally the stop savepoint just
   taken), validate it with Great Expectations (refused if invalid or drained: nothing
   starts), and start the job from it at the chosen parallelism;
3. **confirm_checkpoint** (deferrable) — the first checkpoint after the restore.

Runbooks: `docs/runbooks/rollback.md`, `docs/runbooks/rescale.md`.
"""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import DAG, Param
from sluice.operators import SluiceRestoreOperator, SluiceStopJobOperator
from sluice.sensors import SluiceCheckpointCompletedSensor

with DAG(
    dag_id="sluice_restore",
    description="Stop with savepoint, validate a snapshot, redeploy from it, confirm the first checkpoint",
    doc_md=__doc__,
    schedule=None,
    catchup=False,
    render_template_as_native_obj=True,
    tags=["sluice"],
    # every task is idempotent (a retried deploy or restore re-attaches to the master it started)
    default_args={"retries": 1, "retry_delay": timedelta(seconds=15)},
    params={
        "deployment": Param("purchases", type="string", description="A deployment name in sluice_deployments.yaml"),
        "snapshot": Param("latest", type="string",
                          description="Checkpoint or savepoint URI to restore, or 'latest' (the newest restorable "
                                      "snapshot by completion time)"),
        "parallelism": Param(None, type=["null", "integer"], minimum=1,
                             description="New parallelism (rescale); empty: the deployment's"),
        "allow_drained": Param(False, type="boolean",
                               description="Restore a drained savepoint (taken with stop --drain: its watermark is "
                                           "MAX, so the restored job drops every new record as late)"),
    },
) as dag:
    stop = SluiceStopJobOperator(
        task_id="stop_with_savepoint",
        deployment="{{ params.deployment }}",
        if_running=True,
        deferrable=True,
        retries=2,  # Airflow 3.3 can resume a deferred task with a stale event: retry, idempotently
        retry_delay=timedelta(seconds=15),
    )
    restore = SluiceRestoreOperator(
        task_id="restore",
        deployment="{{ params.deployment }}",
        snapshot="{{ params.snapshot }}",
        parallelism="{{ params.parallelism }}",
        allow_drained="{{ params.allow_drained }}",
        live_grace_s=60,
    )
    confirm = SluiceCheckpointCompletedSensor(
        task_id="confirm_checkpoint",
        deployment="{{ params.deployment }}",
        since="{{ ti.xcom_pull(task_ids='restore')['started_ms'] }}",
        deferrable=True,
        poke_interval=2,
        timeout=600,
        retries=2,  # Airflow 3.3 can resume a deferred task with a stale event: retry, idempotently
        retry_delay=timedelta(seconds=15),
    )

    stop >> restore >> confirm
