"""Deploy a Sluice job and wait until its first checkpoint completes (runbook: docs/runbooks/deploy.md)."""

from __future__ import annotations

from airflow.sdk import DAG, Param
from sluice.operators import SluiceDeployJobOperator
from sluice.sensors import SluiceCheckpointCompletedSensor

with DAG(
    dag_id="sluice_deploy",
    description="Start a Sluice job master for a deployment; wait for its first completed checkpoint",
    schedule=None,
    catchup=False,
    render_template_as_native_obj=True,
    tags=["sluice"],
    params={
        "deployment": Param("purchases", type="string", description="name in sluice_deployments.yaml"),
        "from_snapshot": Param(None, type=["null", "string"], description="checkpoint/savepoint URI, or 'latest'"),
        "parallelism": Param(None, type=["null", "integer"], minimum=1),
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
    )

    deploy >> first_checkpoint
