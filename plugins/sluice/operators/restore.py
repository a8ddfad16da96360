"""Restore: validate a snapshot, refuse it if validation fails, then deploy the job from it."""

from __future__ import annotations

from typing import Any

from sluice.exceptions import SnapshotValidationFailed
from sluice.operators.deploy import SluiceDeployJobOperator, _started_by


class SluiceRestoreOperator(SluiceDeployJobOperator):
    """Validate ``snapshot`` (Great Expectations, outcome recorded in its ``_metadata``), then start from it.

    A snapshot that fails validation, or does not even load, is refused and nothing
    is started.  Stop the running job first (SluiceStopJobOperator): the never-two-
    masters check applies here as in a deploy.

    :param snapshot: checkpoint or savepoint URI to restore (templated), or ``"latest"``.
    :param parallelism: new parallelism (templated); state is redistributed by key group.
    """

    template_fields = (*SluiceDeployJobOperator.template_fields, "snapshot")
    ui_color = "#fce8b2"

    def __init__(self, *, snapshot: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.snapshot = snapshot

    def execute(self, context: Any) -> dict[str, Any]:
        job_id = self.resolved_job_id
        started_by = _started_by(context)
        attached = self._check_no_live_master(job_id, started_by)
        if attached is not None:
            return attached
        snapshot = str(self.snapshot)
        skipped: list[str] = []
        if snapshot == "latest":
            point = self.hook.restore_point(job_id, allow_drained=self.drained_allowed())
            snapshot, skipped = point.uri, list(point.passed_over)
        outcome = self.hook.validate_snapshot(snapshot, job_id=job_id, job_spec=self.spec.job if self.spec else None,
                                              allow_drained=self.drained_allowed())
        if outcome.get("status") != "passed":
            raise SnapshotValidationFailed(f"restore of job {job_id!r} refused: snapshot {snapshot} failed "
                                           f"validation ({outcome.get('reason') or outcome}); nothing was started")
        self.log.info("snapshot %s validated; deploying job %s from it", snapshot, job_id)
        record = self.start_master(job_id, snapshot, started_by, skipped,
                                   validated_digest=outcome.get("metadata_sha256"))
        record["validation"] = outcome
        return record
