"""Savepoints through the job master's control API: trigger (and wait), stop with savepoint.

Both are idempotent per task instance: the trigger id is derived from
dag_id/run_id/task_id (:func:`task_trigger_id`), so a retry re-attaches to the
operation the first try started instead of taking a second savepoint.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk.exceptions import AirflowException

from sluice.exceptions import ControlApiUnavailable, SluiceAirflowError
from sluice.operators.base import SluiceBaseOperator, task_trigger_id
from sluice.triggers.operation import SluiceOperationTrigger


class _OperationOperator(SluiceBaseOperator):
    kind = "savepoint"

    def __init__(self, *, target_directory: str | None = None, deferrable: bool = True,
                 poll_interval_s: float = 2.0, operation_timeout_s: float = 1800.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.target_directory = target_directory
        self.deferrable = deferrable
        self.poll_interval_s = poll_interval_s
        self.operation_timeout_s = operation_timeout_s

    def _wait(self, job_id: str, operation_id: str) -> str:
        if self.deferrable:
            url = self.hook.control_url(job_id)
            if url is None:
                raise SluiceAirflowError(f"job {job_id!r}: no control URL to wait on")
            self.defer(trigger=SluiceOperationTrigger(sluice_conn_id=self.conn_id, job_id=job_id, kind=self.kind,
                                                      operation_id=operation_id, control_url=url,
                                                      poll_interval_s=self.poll_interval_s,
                                                      timeout_s=self.operation_timeout_s),
                       method_name="execute_complete")
        return self.hook.wait_for_operation(self.kind, operation_id, job_id=job_id, timeout_s=self.operation_timeout_s,
                                            poll_interval_s=self.poll_interval_s)

    def execute_complete(self, context: Any, event: dict[str, Any]) -> str:
        if event.get("status") != "success":
            raise AirflowException(event.get("message", f"{self.kind} failed: {event}"))
        self.log.info("%s %s completed: %s", self.kind, event.get("operation_id"), event["location"])
        return str(event["location"])


class SluiceTriggerSavepointOperator(_OperationOperator):
    """Take a savepoint of a running job and wait for it; returns the savepoint URI (XCom).

    :param target_directory: savepoint root (templated); the connection's ``savepoint_dir`` by default.
    :param deferrable: wait in the triggerer (:class:`SluiceOperationTrigger`) instead of
        holding a worker slot; with False the task polls the control API itself.
    :param poll_interval_s: seconds between status polls.
    :param operation_timeout_s: give up (and fail the task) after this long; the
        savepoint may still complete later, and a retry re-attaches to it.
    """

    template_fields = (*SluiceBaseOperator.template_fields, "target_directory")
    kind = "savepoint"

    def execute(self, context: Any) -> str:
        job_id = self.resolved_job_id
        trigger_id = task_trigger_id(context, "savepoint")
        request_id = self.hook.trigger_savepoint(trigger_id, job_id=job_id, target_directory=self.target_directory)
        self.log.info("savepoint of job %s requested (trigger id %s)", job_id, request_id)
        return self._wait(job_id, request_id)


class SluiceStopJobOperator(_OperationOperator):
    """Stop a job with a savepoint; returns the savepoint URI, or None when nothing was running.

    :param drain: send MAX_WATERMARK first so every window fires (Flink's ``--drain``);
        use it only when the job will not be resumed from this savepoint.
    :param if_running: with True, a job whose master is unreachable (not running) is
        not an error: the task succeeds and returns None (the restore DAG's first step).
    """

    template_fields = (*SluiceBaseOperator.template_fields, "target_directory")
    kind = "stop"

    def __init__(self, *, drain: bool = False, if_running: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.drain = drain
        self.if_running = if_running

    def execute(self, context: Any) -> str | None:
        job_id = self.resolved_job_id
        trigger_id = task_trigger_id(context, "stop")
        try:
            request_id = self.hook.stop_with_savepoint(trigger_id, job_id=job_id, drain=self.drain,
                                                       target_directory=self.target_directory)
        except ControlApiUnavailable as exc:
            if self.if_running:
                self.log.info("job %s is not running (%s): nothing to stop", job_id, exc)
                return None
            raise
        self.log.info("stop-with-savepoint of job %s requested (trigger id %s)", job_id, request_id)
        return self._wait(job_id, request_id)
