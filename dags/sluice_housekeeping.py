"""Storage housekeeping: delete orphaned checkpoint files, then audit retention (runbook: cleanup-storage.md)."""

from __future__ import annotations

from airflow.sdk import DAG, Param
from sluice.operators import SluiceCleanOrphansOperator, SluiceRetentionAuditOperator

with DAG(
    dag_id="sluice_housekeeping",
    description="Orphaned checkpoint files out; exactly N retained handles, all loadable, nothing dangling",
    schedule="@daily",
    catchup=False,
    max_active_runs=1,
    render_template_as_native_obj=True,
    tags=["sluice"],
    params={
        "deployment": Param("purchases", type="string"),
        "grace_period_s": Param(3600, type="integer", minimum=0),
        "dry_run": Param(False, type="boolean"),
    },
) as dag:
    clean = SluiceCleanOrphansOperator(
        task_id="clean_orphans",
        deployment="{{ params.deployment }}",
        grace_period_s="{{ params.grace_period_s }}",
    )
    audit = SluiceRetentionAuditOperator(
        task_id="retention_audit",
        deployment="{{ params.deployment }}",
    )

    clean >> audit
