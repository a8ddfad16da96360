"""The desired state of a deployment's job: supervision and scheduled savepoints skip a job meant to be down."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from airflow.sdk.exceptions import AirflowSkipException

from sluice.operators.base import SluiceBaseOperator, task_trigger_id


class SluiceCheckDesiredStateOperator(SluiceBaseOperator):
    """Succeed when the job is meant to run; skip (and so skip what follows) when it is meant to be down.

    A job is meant to be down when its deployment says ``state: suspended``, or when
    the intent recorded in storage (:mod:`checkpoints.desired_state`) is ``suspended``:
    somebody stopped it on purpose through its master (CLI, a DAG, the plugin page).
    Supervision then does not resurrect it; deploying or restoring it records
    ``running`` again.  Returns the recorded intent (or ``{"state": "running"}``).

    A deployment declared ``suspended`` whose job still runs is brought down first, as the
    Flink Kubernetes Operator suspends a job: with a savepoint under ``upgrade_mode:
    savepoint``, cancelled (its retained checkpoints kept) under ``last-state`` and
    ``stateless``.  Either way the master records the job as suspended.
    """

    ui_color = "#e0e0e0"

    def execute(self, context: Any) -> dict[str, Any]:
        job_id = self.resolved_job_id
        if self.spec is not None and self.spec.is_suspended():
            how = self._suspend_if_running(context, job_id)
            raise AirflowSkipException(f"deployment {self.spec.name!r} is declared suspended in the deployments "
                                       f"file: job {job_id!r} is not supervised{how}")
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

    def _suspend_if_running(self, context: Any, job_id: str) -> str:
        """Bring a still-running job of a suspended deployment down; says what was done."""
        assert self.spec is not None
        if self.hook.get_status(job_id).source != "control-api":
            return ""
        if self.spec.upgrade_mode == "savepoint":
            operation = self.hook.stop_with_savepoint(task_trigger_id(context, "suspend"), job_id=job_id)
            location = self.hook.wait_for_operation("stop", operation, job_id=job_id)
            self.log.warning("job %s of suspended deployment %s stopped with savepoint %s", job_id, self.spec.name,
                             location)
            return f"; it was running and was stopped with savepoint {location}"
        self.hook.cancel(job_id)
        self.log.warning("job %s of suspended deployment %s cancelled (upgrade_mode %s)", job_id, self.spec.name,
                         self.spec.upgrade_mode)
        return f"; it was running and was cancelled (upgrade_mode {self.spec.upgrade_mode})"
