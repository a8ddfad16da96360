"""A client for a job master's control API, found directly by URL or through the job's status document."""

from __future__ import annotations

import time
from typing import Any

import httpx

from engine.errors import SluiceError


class ControlApiError(SluiceError):
    """The job master refused a request or could not be reached (is the job running? is the token right?)."""


def discover_control_url(storage_uri: str, job_id: str, **store_options: Any) -> str:
    """The control URL the job's master last published in ``_status.json``."""
    from checkpoints.backends import open_store
    from checkpoints.status import read_status

    status = read_status(open_store(storage_uri, **store_options), job_id)
    if status is None:
        raise ControlApiError(f"job {job_id!r} has published no status document under {storage_uri}: "
                              "it never ran with this --storage, or its master has not started yet")
    url = status.extra.get("control_url")
    if not url:
        raise ControlApiError(f"the status document of job {job_id!r} names no control URL (state {status.state})")
    return str(url)


class ControlClient:
    def __init__(self, url: str, job_id: str, token: str | None = None, timeout_s: float = 10.0) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.job_id = job_id
        self._http = httpx.Client(base_url=url, headers=headers, timeout=timeout_s)

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise ControlApiError(f"cannot reach the job master at {self._http.base_url}: {exc}") from exc
        if response.status_code >= 400:
            raise ControlApiError(f"{method} {path} -> {response.status_code}: {response.text[:300]}")
        return response.json()

    def status(self) -> dict[str, Any]:
        return self._call("GET", f"/jobs/{self.job_id}")

    def checkpoints(self) -> list[dict[str, Any]]:
        return self._call("GET", f"/jobs/{self.job_id}/checkpoints")["history"]

    def trigger_savepoint(self, target_dir: str | None = None, trigger_id: str | None = None) -> str:
        body = {"target_directory": target_dir, "trigger_id": trigger_id}
        return self._call("POST", f"/jobs/{self.job_id}/savepoints", json=body)["request-id"]

    def stop(self, target_dir: str | None = None, drain: bool = False, trigger_id: str | None = None) -> str:
        body = {"target_directory": target_dir, "drain": drain, "trigger_id": trigger_id}
        return self._call("POST", f"/jobs/{self.job_id}/stop", json=body)["request-id"]

    def cancel(self) -> None:
        self._call("PATCH", f"/jobs/{self.job_id}", params={"mode": "cancel"})

    def operation(self, kind: str, trigger_id: str) -> dict[str, Any]:
        path = "savepoints" if kind == "savepoint" else "stop"
        return self._call("GET", f"/jobs/{self.job_id}/{path}/{trigger_id}")

    def wait(self, kind: str, trigger_id: str, timeout_s: float = 600.0, poll_s: float = 0.5) -> dict[str, Any]:
        """Poll until the operation leaves IN_PROGRESS; returns its final document."""
        deadline = time.monotonic() + timeout_s
        while True:
            op = self.operation(kind, trigger_id)
            if op["status"]["id"] != "IN_PROGRESS":
                return op
            if time.monotonic() > deadline:
                raise ControlApiError(f"{kind} {trigger_id} still in progress after {timeout_s}s")
            time.sleep(poll_s)

    def close(self) -> None:
        self._http.close()
