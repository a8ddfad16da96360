"""Wait for a job to be healthy, or for a checkpoint to complete since a point in time.

A poke is one status read (status document + two control API calls, or one
index read), cheap enough for short poke intervals.  With ``deferrable=True`` a
first poke that fails hands the waiting to :class:`SluiceJobConditionTrigger`
and frees the worker slot, as ``S3KeySensor`` does.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from airflow.sdk import BaseSensorOperator
from airflow.sdk.exceptions import AirflowException

from sluice.triggers.condition import JobEnded, SluiceJobConditionTrigger, evaluate
from sluice.operators.base import SluiceBaseOperator


class _JobConditionSensor(BaseSensorOperator, SluiceBaseOperator):
    condition = ""

    def __init__(self, *, deferrable: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.deferrable = deferrable

    def arguments(self, context: Any) -> dict[str, Any]:
        raise NotImplementedError

    def poke(self, context: Any) -> bool:
        try:
            done, details = evaluate(self.condition, self.conn_id, self.resolved_job_id, self.arguments(context))
        except JobEnded as exc:
            raise AirflowException(str(exc)) from exc
        self.log.info("%s: %s (%s)", self.condition, "yes" if done else "not yet", details)
        if done:
            context["ti"].xcom_push(key="details", value=details)
        return done

    def execute(self, context: Any) -> Any:
        if not self.deferrable:
            return super().execute(context)
        if self.poke(context):
            return None
        self.defer(
            trigger=SluiceJobConditionTrigger(sluice_conn_id=self.conn_id, job_id=self.resolved_job_id,
                                              condition=self.condition, arguments=self.arguments(context),
                                              poll_interval_s=float(self.poke_interval), timeout_s=float(self.timeout)),
            method_name="execute_complete",
        )

    def execute_complete(self, context: Any, event: dict[str, Any]) -> Any:
        if event.get("status") != "success":
            raise AirflowException(event.get("message", str(event)))
        context["ti"].xcom_push(key="details", value=event.get("details"))
        return event.get("details")


class SluiceJobHealthySensor(_JobConditionSensor):
    """Succeeds when the job is healthy: fresh heartbeat, recent checkpoint, few failed checkpoints, low lag.

    Thresholds default to the deployment's ``health`` entry; each may be None (not
    checked).  In supervision use a short ``timeout``: the sensor failing is the
    signal that triggers a restart.

    :param max_heartbeat_age_s: the status heartbeat (or a control API answer) must be this fresh.
    :param max_checkpoint_age_s: the last completed checkpoint must be this recent.
    :param max_failed_checkpoints: at most this many failed checkpoints in the history.
    :param max_lag_s: at most this much lag (event time behind processing time).
    """

    template_fields = (*SluiceBaseOperator.template_fields,)
    condition = "healthy"

    def __init__(self, *, max_heartbeat_age_s: float | None = None, max_checkpoint_age_s: float | None = None,
                 max_failed_checkpoints: int | None = None, max_lag_s: float | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.overrides = {"max_heartbeat_age_s": max_heartbeat_age_s, "max_checkpoint_age_s": max_checkpoint_age_s,
                          "max_failed_checkpoints": max_failed_checkpoints, "max_lag_s": max_lag_s}

    def poke(self, context: Any) -> bool:
        """Like any poke, except that a dead master fails at once: it does not come back by waiting."""
        # imported when poking: DAG files import this module at parse time, and the hook loads the engine
        from sluice.health import is_live
        from sluice.hook import now_ms

        thresholds = self.arguments(context)["thresholds"]
        status = self.hook.get_status(self.resolved_job_id)
        if not is_live(status, now_ms(), thresholds["max_heartbeat_age_s"]):
            raise AirflowException(f"job {self.resolved_job_id!r} has no live master (state {status.state}, "
                                   f"source {status.source}, heartbeat {status.heartbeat_ms})")
        return super().poke(context)

    def arguments(self, context: Any) -> dict[str, Any]:
        from sluice.deployments import DEFAULT_HEALTH

        thresholds = self.spec.health_thresholds() if self.spec else dict(DEFAULT_HEALTH)
        thresholds.update({k: v for k, v in self.overrides.items() if v is not None})
        return {"thresholds": thresholds}


class SluiceCheckpointCompletedSensor(_JobConditionSensor):
    """Succeeds when a retained checkpoint completed at or after ``since`` (read from the retained-handles index).

    Fails at once when the job's status document reports a terminal state (FAILED,
    CANCELED, ...) published after ``since``: a job that ended never completes one.

    :param since: an ISO datetime or epoch milliseconds (templated); by default the
        start of the DAG run.  ``"{{ ti.xcom_pull(task_ids='deploy')['started_ms'] }}"``
        waits for the first checkpoint of that deployment.
    """

    template_fields = (*SluiceBaseOperator.template_fields, "since")
    condition = "checkpoint_completed"

    def __init__(self, *, since: str | int | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.since = since

    def arguments(self, context: Any) -> dict[str, Any]:
        since = self.since
        if since in (None, "", "None"):
            start = context["dag_run"].start_date
            return {"since_ms": int(start.timestamp() * 1000) if start else 0}
        if isinstance(since, (int, float)) or str(since).isdigit():
            return {"since_ms": int(since)}
        return {"since_ms": int(datetime.fromisoformat(str(since)).timestamp() * 1000)}
