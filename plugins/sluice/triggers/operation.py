"""Wait for a savepoint or stop-with-savepoint operation of a job master, asynchronously.

Polls ``GET /jobs/{job}/{savepoints|stop}/{trigger_id}`` with ``httpx.AsyncClient``
until the operation is COMPLETED or FAILED.  The token is read from the
connection in the triggerer (``aget_connection``), so it is never serialized
into the trigger's kwargs.  A master that is briefly unreachable is retried
until ``timeout_s``; a stop operation whose master went away after reporting
nothing is reported as an error with the last thing seen.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx

from airflow.triggers.base import BaseTrigger, TriggerEvent


class SluiceOperationTrigger(BaseTrigger):
    """Fires one event: ``{"status": "success", "location": ...}`` or ``{"status": "error", "message": ...}``.

    :param sluice_conn_id: connection of the job (for the bearer token).
    :param job_id: the job whose master runs the operation.
    :param kind: ``"savepoints"`` or ``"stop"``.
    :param trigger_id: the operation's trigger id (as returned by the POST).
    :param control_url: base URL of the master's control API (resolved by the operator).
    """

    def __init__(self, *, sluice_conn_id: str, job_id: str, kind: str, trigger_id: str, control_url: str,
                 poll_interval_s: float = 2.0, timeout_s: float = 1800.0) -> None:
        super().__init__()
        self.sluice_conn_id = sluice_conn_id
        self.job_id = job_id
        self.kind = kind
        self.trigger_id = trigger_id
        self.control_url = control_url
        self.poll_interval_s = poll_interval_s
        self.timeout_s = timeout_s

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            "sluice.triggers.operation.SluiceOperationTrigger",
            {"sluice_conn_id": self.sluice_conn_id, "job_id": self.job_id, "kind": self.kind,
             "trigger_id": self.trigger_id, "control_url": self.control_url,
             "poll_interval_s": self.poll_interval_s, "timeout_s": self.timeout_s},
        )

    async def _headers(self) -> dict[str, str]:
        from sluice.hook import SluiceHook

        conn = await SluiceHook.aget_connection(self.sluice_conn_id)
        return {"Authorization": f"Bearer {conn.password}"} if conn.password else {}

    async def run(self) -> AsyncIterator[TriggerEvent]:
        url = f"{self.control_url.rstrip('/')}/jobs/{self.job_id}/{self.kind}/{self.trigger_id}"
        deadline = time.monotonic() + self.timeout_s
        last = "no answer yet"
        headers = await self._headers()
        async with httpx.AsyncClient(headers=headers, timeout=10.0) as client:
            while time.monotonic() < deadline:
                try:
                    response = await client.get(url)
                    if response.status_code >= 400:
                        last = f"{response.status_code}: {response.text[:300]}"
                        if response.status_code in (401, 403, 404):
                            yield TriggerEvent({"status": "error", "message": f"GET {url} answered {last}"})
                            return
                    else:
                        body = response.json()
                        state = body.get("status", {}).get("id")
                        last = str(state)
                        if state == "COMPLETED":
                            yield TriggerEvent({"status": "success", "location": body["operation"]["location"],
                                                "trigger_id": self.trigger_id})
                            return
                        if state == "FAILED":
                            cause = body.get("operation", {}).get("failure-cause")
                            yield TriggerEvent({"status": "error", "message": f"{self.kind} {self.trigger_id} "
                                                f"of job {self.job_id!r} failed: {cause}"})
                            return
                except httpx.TransportError as exc:
                    last = f"{type(exc).__name__}: {exc}"
                await asyncio.sleep(self.poll_interval_s)
        yield TriggerEvent({"status": "error", "message": f"{self.kind} {self.trigger_id} of job {self.job_id!r} "
                            f"not finished after {self.timeout_s}s (last seen: {last})"})
