"""Operators over a job's checkpoint storage: validate a snapshot, savepoint history policy, orphans, audit."""

from __future__ import annotations

from typing import Any

from airflow.sdk.exceptions import AirflowException

from sluice.exceptions import SnapshotValidationFailed
from sluice.links import SluiceDataDocsLink, SluiceJobPageLink, data_docs_page
from sluice.operators.base import SluiceBaseOperator, as_bool
from sluice.views.data import data_docs_path


class SluiceValidateSnapshotOperator(SluiceBaseOperator):
    """Validate a snapshot with Great Expectations and record the outcome in its ``_metadata``.

    Returns the outcome (``{"status": "passed"|"failed", ...}``, with the Data Docs
    location when the validator gives one).

    :param snapshot: the checkpoint or savepoint URI (templated; e.g. the XCom of a
        savepoint task).
    :param fail_on_invalid: fail the task when validation fails (the outcome is
        recorded either way, so the savepoint policy and restore see it).
    """

    template_fields = (*SluiceBaseOperator.template_fields, "snapshot")
    operator_extra_links = (SluiceJobPageLink(), SluiceDataDocsLink())

    def __init__(self, *, snapshot: str, fail_on_invalid: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.snapshot = snapshot
        self.fail_on_invalid = fail_on_invalid
        #: the Data Docs page of the validation, once it ran (SluiceDataDocsLink)
        self.data_docs_link: str | None = None

    def execute(self, context: Any) -> dict[str, Any]:
        if not self.snapshot or self.snapshot == "None":
            raise AirflowException(f"{self.task_id}: no snapshot URI given (did the upstream task return one?)")
        outcome = self.hook.validate_snapshot(self.snapshot, job_id=self.resolved_job_id,
                                             job_spec=self.spec.job if self.spec else None)
        path = data_docs_path(outcome.get("data_docs_url"), self.hook.extra.get("data_docs_dir"))
        if path and self.deployment:
            self.data_docs_link = data_docs_page(str(self.deployment), path)
        if outcome.get("status") != "passed" and self.fail_on_invalid:
            raise SnapshotValidationFailed(f"snapshot {self.snapshot} failed validation: "
                                           f"{outcome.get('reason') or outcome}")
        return outcome


class SluiceApplySavepointPolicyOperator(SluiceBaseOperator):
    """Delete savepoints beyond the history policy (max count / max age); returns the URIs deleted.

    The newest savepoint whose validation passed is never deleted, whatever the
    policy (it is the one a restore falls back to).  Idempotent: a retry finds
    nothing more to delete.

    :param max_count: keep at most this many savepoints; the deployment's
        ``savepoint_policy.max_count`` by default.
    :param max_age_hours: delete savepoints older than this; the deployment's by default.
    :param dry_run: only list what would be deleted.
    """

    template_fields = (*SluiceBaseOperator.template_fields, "max_count", "max_age_hours", "dry_run")

    def __init__(self, *, max_count: int | None = None, max_age_hours: float | None = None,
                 dry_run: bool | str = False,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.max_count = max_count
        self.max_age_hours = max_age_hours
        self.dry_run = dry_run

    def execute(self, context: Any) -> list[str]:
        policy = self.spec.savepoint_policy.model_dump() if self.spec else {}
        max_count = _int_or_none(self.max_count if self.max_count is not None else policy.get("max_count"))
        hours = self.max_age_hours if self.max_age_hours is not None else policy.get("max_age_hours")
        max_age_ms = int(float(hours) * 3_600_000) if hours not in (None, "", "None") else None
        if max_count is None and max_age_ms is None:
            self.log.info("no savepoint history policy configured: nothing to do")
            return []
        dry_run = as_bool("dry_run", self.dry_run)
        deleted = self.hook.apply_savepoint_policy(job_id=self.resolved_job_id, max_count=max_count,
                                                   max_age_ms=max_age_ms, dry_run=dry_run)
        self.log.info("savepoint policy (max_count=%s, max_age_ms=%s) %s %s", max_count, max_age_ms,
                      "would delete" if dry_run else "deleted", deleted)
        return deleted


class SluiceCleanOrphansOperator(SluiceBaseOperator):
    """Find (and unless ``dry_run``, delete) files no retained checkpoint or savepoint owns, and the staged
    sink parts under the job's output that none names (a job stopped for good after a crash keeps them).

    :param grace_period_s: files written more recently are left alone: they may belong
        to a checkpoint still in flight, or to a sink transaction a running job has open or
        pending.  Keep it well above the checkpoint timeout and interval.
    :param dry_run: only report.
    :param outputs: the job's output folders (local or s3://); the deployment's ``output`` by
        default.  Nothing but this job may write below them: another job's staged parts
        would look orphaned.  Empty: staged parts are not examined.
    """

    template_fields = (*SluiceBaseOperator.template_fields, "grace_period_s", "dry_run", "outputs")

    def __init__(self, *, grace_period_s: int | str = 3600, dry_run: bool | str = False,
                 outputs: list[str] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.grace_period_s = grace_period_s
        self.dry_run = dry_run
        self.outputs = outputs

    def execute(self, context: Any) -> dict[str, Any]:
        dry_run = as_bool("dry_run", self.dry_run)
        if self.outputs is not None:
            outputs = list(self.outputs)
        else:
            outputs = [self.spec.output] if self.spec and self.spec.output else []
        report = self.hook.clean_orphans(job_id=self.resolved_job_id, grace_period_ms=int(self.grace_period_s) * 1000,
                                         dry_run=dry_run, outputs=outputs)
        self.log.info("%d orphaned file(s), %d bytes, %s", len(report["orphans"]), report["total_bytes"],
                      "deleted" if report["deleted"] else "not deleted (dry run)" if dry_run else "not deleted")
        return report


class SluiceRetentionAuditOperator(SluiceBaseOperator):
    """Fail when the job's storage breaks retention: not exactly N handles, an unloadable handle, dangling files.

    :param expected_retained: N; the deployment's ``retained`` by default.
    :param fail_on_problems: with False only report the problems (a dry run's audit: the
        orphans it lists were deliberately left in place).
    """

    template_fields = (*SluiceBaseOperator.template_fields, "expected_retained", "fail_on_problems")

    def __init__(self, *, expected_retained: int | None = None, fail_on_problems: bool | str = True,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.expected_retained = expected_retained
        self.fail_on_problems = fail_on_problems

    def execute(self, context: Any) -> dict[str, Any]:
        expected = _int_or_none(self.expected_retained) or (self.spec.retained if self.spec else None)
        if not expected:
            raise AirflowException(f"{self.task_id}: expected_retained is not set and no deployment gives it")
        audit = self.hook.retention_audit(job_id=self.resolved_job_id, expected_retained=expected)
        if not audit["ok"] and not as_bool("fail_on_problems", self.fail_on_problems):
            self.log.warning("retention audit of job %s found problems (not failing: fail_on_problems is off): %s",
                             self.resolved_job_id, audit["problems"])
            return audit
        if not audit["ok"]:
            raise AirflowException(f"retention audit of job {self.resolved_job_id!r} failed: {audit['problems']}")
        self.log.info("retention audit ok: retained %s", audit["retained"])
        return audit


def _int_or_none(value: Any) -> int | None:
    return None if value in (None, "", "None") else int(value)
