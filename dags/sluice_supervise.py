"""
### Supervise every Sluice deployment

Runs every five minutes, once per deployment in `sluice_deployments.yaml` (one mapped
task group each; give `deployment` to look after one only). For each job:

1. **desired_state** — skipped, with everything after it, when the job is meant to be
   down: the deployment says `state: suspended`, or somebody stopped the job on purpose
   (`sluice stop`, the restore DAG, the plugin page). A stopped job is never resurrected.
2. **check_health** — heartbeat, checkpoint age, failed checkpoints and lag against the
   deployment's `health` thresholds; a dead master fails at once, an unhealthy one gets
   two minutes to recover.
3. **restart_from_latest** — only when the check failed: replaces any live master, then
   starts the job from the newest restorable snapshot (retained checkpoints and savepoints,
   newest by completion time; the choice and what was passed over are logged). A
   `stateless` deployment starts empty.
4. **confirm_checkpoint** (deferrable) waits for the first checkpoint after the restart;
   **alert** says what happened.

Runbook: `docs/runbooks/deploy.md`.
"""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import DAG, Param, TriggerRule, task_group
from sluice.operators import SluiceAlertOperator, SluiceCheckDesiredStateOperator, SluiceDeployJobOperator
from sluice.sensors import SluiceCheckpointCompletedSensor, SluiceJobHealthySensor
from sluice.tasks import deployments

RESTART = "job.restart_from_latest"

with DAG(
    dag_id="sluice_supervise",
    description="Restart dead or unhealthy Sluice jobs that are meant to run, from their newest snapshot",
    doc_md=__doc__,
    schedule="*/5 * * * *",
    catchup=False,
    max_active_runs=1,
    render_template_as_native_obj=True,
    tags=["sluice"],
    params={
        "deployment": Param(None, type=["null", "string"],
                            description="Supervise only this deployment (a name in sluice_deployments.yaml); "
                                        "empty: every deployment"),
    },
) as dag:

    @task_group(group_id="job")
    def supervise(deployment: str) -> None:
        desired = SluiceCheckDesiredStateOperator(task_id="desired_state", deployment=deployment)
        check = SluiceJobHealthySensor(
            task_id="check_health",
            deployment=deployment,
            poke_interval=10,
            timeout=120,  # an alive but unhealthy job gets this long to recover; a dead one fails at once
            mode="poke",
        )
        restart = SluiceDeployJobOperator(
            task_id="restart_from_latest",
            deployment=deployment,
            from_snapshot="latest",
            replace_live=True,
            # its upstreams are the health check and the mapping's `deployments` task (which succeeded):
            # the check failing is what starts a restart
            trigger_rule=TriggerRule.ONE_FAILED,
        )
        confirm = SluiceCheckpointCompletedSensor(
            task_id="confirm_checkpoint",
            deployment=deployment,
            since="{{ ti.xcom_pull(task_ids='%s', map_indexes=ti.map_index)['started_ms'] }}" % RESTART,
            deferrable=True,
            poke_interval=2,
            timeout=600,
            retries=2,  # Airflow 3.3 can resume a deferred task with a stale event: retry, idempotently
            retry_delay=timedelta(seconds=15),
        )
        alert = SluiceAlertOperator(
            task_id="alert",
            message=(
                "Sluice job {{ (ti.xcom_pull(task_ids='%(r)s', map_indexes=ti.map_index) or {}).get('job_id') }} "
                "was dead or unhealthy and was restarted from "
                "{{ (ti.xcom_pull(task_ids='%(r)s', map_indexes=ti.map_index) or {}).get('from_snapshot') }} "
                "(passed over: "
                "{{ (ti.xcom_pull(task_ids='%(r)s', map_indexes=ti.map_index) or {}).get('snapshots_passed_over') }})"
            ) % {"r": RESTART},
            trigger_rule=TriggerRule.NONE_SKIPPED,
        )

        desired >> check >> restart >> confirm
        restart >> alert

    supervise.expand(deployment=deployments())
