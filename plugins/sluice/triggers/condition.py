"""Wait until a job condition holds (healthy, or a checkpoint completed since T), asynchronously.

The checks read the job's storage (retained-handles index, status document) and
its control API through :class:`SluiceHook`; those calls are blocking (boto3),
so each poll runs in a worker thread and the triggerer's event loop stays free.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

CONDITIONS = ("healthy", "checkpoint_completed")


class JobEnded(Exception):
    """The job reached a terminal state while a condition was awaited: waiting longer cannot help."""


def evaluate(condition: str, sluice_conn_id: str, job_id: str, arguments: dict[str, Any]) -> tuple[bool, Any]:
    """``(done, details)`` of one poll; shared by the sensors' ``poke`` and the trigger."""
    # imported when polling, not with this module: DAG files import the sensors, and so this module, at parse
    # time, and the hook brings in checkpoints and the engine (seconds); the same for the imports below
    from sluice.health import health_problems
    from sluice.hook import SluiceHook, now_ms

    hook = SluiceHook(sluice_conn_id)
    if condition == "healthy":
        status = hook.get_status(job_id)
        problems = health_problems(status, arguments.get("thresholds", {}), now_ms())
        return not problems, {"problems": problems, "status": status.to_dict()}
    if condition == "checkpoint_completed":
        from checkpoints.index import read_index

        from sluice.health import TERMINAL_STATES

        since = int(arguments.get("since_ms") or 0)
        index = read_index(hook.store, job_id).index
        newer = [c for c in index.checkpoints if c.completed_ms >= since]
        if not newer:
            doc = hook.read_status_document(job_id)
            if doc is not None and doc.heartbeat_ms >= since and doc.state.upper() in TERMINAL_STATES:
                raise JobEnded(f"job {job_id!r} ended ({doc.state}) before completing a checkpoint after {since}; "
                               f"recent failures: {list(doc.failures)[-3:]}")
            return False, {"retained": index.ids(), "since_ms": since}
        c = newer[-1]
        return True, {"checkpoint_id": c.checkpoint_id, "completed_ms": c.completed_ms,
                      "uri": hook.store.key_uri(c.metadata_key.rsplit("/", 1)[0]), "retained": index.ids()}
    raise ValueError(f"condition must be one of {CONDITIONS}, got {condition!r}")


class SluiceJobConditionTrigger(BaseTrigger):
    """Fires ``{"status": "success", "details": ...}`` once the condition holds, or an error at the timeout.

    :param condition: ``"healthy"`` (``arguments["thresholds"]``) or ``"checkpoint_completed"``
        (``arguments["since_ms"]``).
    """

    def __init__(self, *, sluice_conn_id: str, job_id: str, condition: str, arguments: dict[str, Any],
                 poll_interval_s: float = 5.0, timeout_s: float = 600.0) -> None:
        super().__init__()
        if condition not in CONDITIONS:
            raise ValueError(f"condition must be one of {CONDITIONS}, got {condition!r}")
        self.sluice_conn_id = sluice_conn_id
        self.job_id = job_id
        self.condition = condition
        self.arguments = arguments
        self.poll_interval_s = poll_interval_s
        self.timeout_s = timeout_s

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            "sluice.triggers.condition.SluiceJobConditionTrigger",
            {"sluice_conn_id": self.sluice_conn_id, "job_id": self.job_id, "condition": self.condition,
             "arguments": self.arguments, "poll_interval_s": self.poll_interval_s, "timeout_s": self.timeout_s},
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        deadline = time.monotonic() + self.timeout_s
        details: Any = None
        while time.monotonic() < deadline:
            try:
                done, details = await asyncio.to_thread(evaluate, self.condition, self.sluice_conn_id, self.job_id,
                                                        self.arguments)
            except JobEnded as exc:
                yield TriggerEvent({"status": "error", "message": str(exc)})
                return
            except Exception as exc:  # storage or API hiccup: keep polling until the timeout, report the last one
                done, details = False, f"{type(exc).__name__}: {exc}"
            if done:
                yield TriggerEvent({"status": "success", "details": details})
                return
            await asyncio.sleep(self.poll_interval_s)
        yield TriggerEvent({"status": "error", "message": f"job {self.job_id!r}: {self.condition} not reached "
                            f"within {self.timeout_s}s; last seen: {details}"})
