"""
### Storage housekeeping of every Sluice deployment

Daily, once per deployment (one mapped task group each; give `deployment` for one only):

1. **clean_orphans** — files that no retained checkpoint or savepoint owns and that are
   older than `grace_period_s` are deleted, and so are the staged sink parts under the
   deployment's `output` that none names; with `dry_run` they are only listed (in the
   task log and its XCom), and nothing is deleted;
2. **retention_audit** — fails unless exactly N handles are retained (the deployment's
   `retained`), each loads, and nothing dangles (in a dry run it reports and does not fail).

Runbook: `docs/runbooks/cleanup-storage.md` (run with `dry_run` first).
"""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import DAG, Param, task_group
from sluice.operators import SluiceCleanOrphansOperator, SluiceRetentionAuditOperator
from sluice.tasks import deployments

with DAG(
    dag_id="sluice_housekeeping",
    description="Orphaned checkpoint files out; exactly N retained handles, all loadable, nothing dangling",
    doc_md=__doc__,
    schedule="@daily",
    catchup=False,
    max_active_runs=1,
    render_template_as_native_obj=True,
    tags=["sluice"],
    # every task is idempotent (a retried deploy or restore re-attaches to the master it started)
    default_args={"retries": 1, "retry_delay": timedelta(seconds=15)},
    params={
        "deployment": Param(None, type=["null", "string"],
                            description="Clean only this deployment's storage; empty: every deployment"),
        "grace_period_s": Param(3600, type="integer", minimum=0,
                                description="Leave files younger than this alone (they may belong to a checkpoint "
                                            "in flight or a sink transaction still open); keep it well above "
                                            "the checkpoint timeout and interval"),
        "dry_run": Param(False, type="boolean",
                         description="Only list what would be deleted; delete nothing"),
    },
) as dag:

    @task_group(group_id="job")
    def housekeeping(deployment: str) -> None:
        clean = SluiceCleanOrphansOperator(
            task_id="clean_orphans",
            deployment=deployment,
            grace_period_s="{{ params.grace_period_s }}",
            dry_run="{{ params.dry_run }}",
        )
        audit = SluiceRetentionAuditOperator(
            task_id="retention_audit",
            deployment=deployment,
            fail_on_problems="{{ not params.dry_run }}",  # a dry run left the orphans it listed in place
        )

        clean >> audit

    housekeeping.expand(deployment=deployments())
