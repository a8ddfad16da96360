"""The desired state of a deployment's job: supervision and scheduled savepoints skip a job meant to be down."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from airflow.sdk.exceptions import AirflowSkipException

from sluice.operators.base import SluiceBaseOperator


class SluiceCheckDesiredStateOperator(SluiceBaseOperator):
    """Succeed when the job is meant to run; skip (and so skip what follows) when it is meant to be down.

    A job is meant to be down when its deployment says ``state: suspended``, or when
    the intent recorded in storage (:mod:`checkpoints.desired_state`) is ``suspended``:
    somebody stopped it on purpose through its master (CLI, a DAG, the plugin page).
    Supervision then does not resurrect it; deploying or restoring it records
    ``running`` again.  Returns the recorded intent (or ``{"state": "running"}``).
    """

    ui_color = "#e0e0e0"

    def execute(self, context: Any) -> dict[str, Any]:
        job_id = self.resolved_job_id
        if self.spec is not None and self.spec.is_suspended():
            raise AirflowSkipException(f"deployment {self.spec.name!r} is declared suspended in the deployments "
                                       f"file: job {job_id!r} is not supervised")
        desired = self.hook.desired_state(job_id)
        if desired is not None and desired.is_suspended():
            when = datetime.fromtimestamp(desired.changed_ms / 1000, tz=timezone.utc).isoformat(timespec="seconds")
            raise AirflowSkipException(
                f"job {job_id!r} was suspended on purpose by {desired.changed_by} at {when} ({desired.reason}"
                + (f"; savepoint {desired.savepoint}" if desired.savepoint else "")
                + "): not restarted. Resume it with the sluice_restore DAG (snapshot 'latest') or sluice_deploy")
        if desired is None:
            return {"state": "running", "recorded": False}
        return {"state": desired.state.value, "recorded": True, "changed_by": desired.changed_by,
                "changed_ms": desired.changed_ms, "reason": desired.reason}
