"""
### Deploy a Sluice job

Starts the job master of one deployment (`sluice run` as a detached process on the
worker, or spark-submit when the deployment names a Spark connection) and waits, in the
triggerer, for its first completed checkpoint. Never two masters for one job: a live
master fails the deploy. Deploying records the job's desired state as `running`, so
supervision looks after it again.

Runbook: `docs/runbooks/deploy.md`.
"""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import DAG, Param
from sluice.operators import SluiceDeployJobOperator
from sluice.sensors import SluiceCheckpointCompletedSensor

with DAG(
    dag_id="sluice_deploy",
    description="Start a Sluice job master for a deployment; wait for its first completed checkpoint",
    doc_md=__doc__,
    schedule=None,
    catchup=False,
    render_template_as_native_obj=True,
    tags=["sluice"],
    # every task is idempotent (a retried deploy or restore re-attaches to the master it started)
    default_args={"retries": 1, "retry_delay": timedelta(seconds=15)},
    params={
        "deployment": Param("purchases", type="string", description="A deployment name in sluice_deployments.yaml"),
        "from_snapshot": Param(None, type=["null", "string"],
                               description="Start from this checkpoint/savepoint URI, or 'latest' (the newest "
                                           "restorable snapshot); empty: start with empty state"),
        "parallelism": Param(None, type=["null", "integer"], minimum=1,
                             description="Override the deployment's parallelism (state is rescaled by key group)"),
    },
) as dag:
    deploy = SluiceDeployJobOperator(
        task_id="deploy",
        deployment="{{ params.deployment }}",
        from_snapshot="{{ params.from_snapshot }}",
        parallelism="{{ params.parallelism }}",
    )
    first_checkpoint = SluiceCheckpointCompletedSensor(
        task_id="first_checkpoint",
        deployment="{{ params.deployment }}",
        since="{{ ti.xcom_pull(task_ids='deploy')['started_ms'] }}",
        deferrable=True,
        poke_interval=2,
        timeout=600,
        retries=2,  # Airflow 3.3 can resume a deferred task with a stale event: retry, idempotently
        retry_delay=timedelta(seconds=15),
    )

    deploy >> first_checkpoint
