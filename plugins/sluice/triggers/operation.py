"""Wait for a savepoint or stop-with-savepoint operation of a job master, asynchronously.

Polls ``GET /jobs/{job}/{savepoints|stop}/{operation_id}`` through the engine's
:class:`~engine.master.client.AsyncControlClient` until the operation is
COMPLETED or FAILED.  The token is read from the connection in the triggerer
(``aget_connection``), so it is never serialized into the trigger's kwargs.  A
master that is briefly unreachable is retried until ``timeout_s``.

The operation's id is ``operation_id``, never ``trigger_id``: Airflow's triggerer
sets ``trigger_id`` on every trigger it runs to the id of the trigger's row, and
an attribute of that name would be overwritten before ``run`` polls.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from engine.master.client import AsyncControlClient, ControlApiError, ControlApiUnavailable

#: answers that no amount of waiting changes: a wrong token, or an operation the master does not know
_FINAL_STATUS_CODES = frozenset({401, 403, 404})


class SluiceOperationTrigger(BaseTrigger):
    """Fires one event: ``{"status": "success", "location": ...}`` or ``{"status": "error", "message": ...}``.

    :param sluice_conn_id: connection of the job (for the bearer token).
    :param job_id: the job whose master runs the operation.
    :param kind: ``"savepoint"`` or ``"stop"``.
    :param operation_id: the operation's id, as the master's POST answered it (``request-id``).
    :param control_url: base URL of the master's control API (resolved by the operator).
    """

    def __init__(self, *, sluice_conn_id: str, job_id: str, kind: str, operation_id: str, control_url: str,
                 poll_interval_s: float = 2.0, timeout_s: float = 1800.0) -> None:
        super().__init__()
        if kind not in ("savepoint", "stop"):
            raise ValueError(f"kind must be 'savepoint' or 'stop', got {kind!r}")
        self.sluice_conn_id = sluice_conn_id
        self.job_id = job_id
        self.kind = kind
        self.operation_id = operation_id
        self.control_url = control_url
        self.poll_interval_s = poll_interval_s
        self.timeout_s = timeout_s

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            "sluice.triggers.operation.SluiceOperationTrigger",
            {"sluice_conn_id": self.sluice_conn_id, "job_id": self.job_id, "kind": self.kind,
             "operation_id": self.operation_id, "control_url": self.control_url,
             "poll_interval_s": self.poll_interval_s, "timeout_s": self.timeout_s},
        )

    async def _token(self) -> str | None:
        from sluice.hook import SluiceHook

        conn = await SluiceHook.aget_connection(self.sluice_conn_id)
        return conn.password or None

    async def run(self) -> AsyncIterator[TriggerEvent]:
        deadline = time.monotonic() + self.timeout_s
        last = "no answer yet"
        what = f"{self.kind} {self.operation_id} of job {self.job_id!r}"
        async with AsyncControlClient(self.control_url, self.job_id, await self._token()) as client:
            while time.monotonic() < deadline:
                try:
                    op = await client.operation(self.kind, self.operation_id)  # type: ignore[arg-type]
                except ControlApiUnavailable as exc:  # the master may be restarting its server: keep trying
                    last = str(exc)
                except ControlApiError as exc:
                    last = str(exc)
                    if exc.status_code in _FINAL_STATUS_CODES:
                        yield TriggerEvent({"status": "error", "message": f"{what}: {last}"})
                        return
                else:
                    state = op.get("status", {}).get("id")
                    last = str(state)
                    if state == "COMPLETED":
                        yield TriggerEvent({"status": "success", "location": op["operation"]["location"],
                                            "operation_id": self.operation_id})
                        return
                    if state == "FAILED":
                        cause = op.get("operation", {}).get("failure-cause")
                        yield TriggerEvent({"status": "error", "message": f"{what} failed: {cause}"})
                        return
                await asyncio.sleep(self.poll_interval_s)
        yield TriggerEvent({"status": "error", "message": f"{what} not finished after {self.timeout_s}s "
                            f"(last seen: {last})"})
