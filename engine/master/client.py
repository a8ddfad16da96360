"""The one client of a job master's control API, sync and async, used by the CLI, the Airflow hook and triggers.

The routes are declared once, here, and the server (:mod:`engine.master.api`)
registers its handlers on the same templates, so a client and the server cannot
drift apart.  Both clients build each request with the same functions and map
answers to errors with the same :func:`_decode`:

* :class:`ControlApiUnavailable` — nothing answered (no URL known, refused, timeout);
* :class:`ControlApiError` — the master answered with an error status (``status_code`` set).

A client talks to the URL it was given.  :func:`discover_control_url` reads the
URL a master published in storage.  Storage is not an authority on where a token
may go (anyone who can write the bucket could name their own server), so a caller
holding a token uses such a URL only through :func:`trusted_control_url`: a
loopback address, or a host on the operator's allow list.
"""

from __future__ import annotations

import asyncio
import ipaddress
import time
from typing import Any, Final, Iterable, Literal
from urllib.parse import urlsplit

import httpx

from checkpoints.backends import open_store
from checkpoints.status import read_status
from engine.errors import SluiceError

OperationKind = Literal["savepoint", "stop"]


class ControlRoutes:
    """Path templates of the control API (ARCHITECTURE section 7); ``{job_id}``/``{trigger_id}`` are filled in."""

    HEALTH: Final = "/healthz"
    JOBS: Final = "/jobs"
    JOB: Final = "/jobs/{job_id}"
    CHECKPOINTS: Final = "/jobs/{job_id}/checkpoints"
    SAVEPOINTS: Final = "/jobs/{job_id}/savepoints"
    SAVEPOINT: Final = "/jobs/{job_id}/savepoints/{trigger_id}"
    STOP: Final = "/jobs/{job_id}/stop"
    STOP_STATUS: Final = "/jobs/{job_id}/stop/{trigger_id}"
    VIEW: Final = "/jobs/{job_id}/view"
    METRICS: Final = "/metrics"


class ControlApiError(SluiceError):
    """The job master refused a request (``status_code``) or could not be reached (running? the token right?)."""

    def __init__(self, message: str, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


class ControlApiUnavailable(ControlApiError):
    """No job master answered at the control URL (not running, not yet started, or another address)."""


class UntrustedControlUrl(ControlApiUnavailable):
    """A control URL read from storage points at a host the client may not send its token to."""


def _host_allowed(host: str, allowed: Iterable[str]) -> bool:
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        address = None
    if host == "localhost" or (address is not None and address.is_loopback):
        return True
    for entry in (e.strip().lower() for e in allowed if e and e.strip()):
        if "/" in entry and address is not None:
            try:
                if address in ipaddress.ip_network(entry, strict=False):
                    return True
            except ValueError:
                continue
        elif entry.startswith(".") and host.lower().endswith(entry):
            return True
        elif host.lower() == entry:
            return True
    return False


def trusted_control_url(url: str, allowed_hosts: Iterable[str] = (), *, source: str = "storage") -> str:
    """``url`` if a token may be sent there: http(s) to a loopback host or to one on ``allowed_hosts``.

    ``allowed_hosts`` entries: a host name (``master-1.jobs.internal``), a domain suffix
    (``.jobs.internal``) or a network (``10.0.0.0/8``).  Anything else raises
    :class:`UntrustedControlUrl`, saying how to allow it."""
    parsed = urlsplit(url)
    host = parsed.hostname or ""
    if parsed.scheme in ("http", "https") and host and _host_allowed(host, allowed_hosts):
        return url
    raise UntrustedControlUrl(
        f"the control URL {url!r} read from {source} is not a loopback address or an allowed host, so the "
        "control token is not sent there. If that master is yours, allow its host (--control-hosts / "
        "SLUICE_CONTROL_HOSTS, or the Airflow connection's extra 'control_hosts'), or give the URL directly "
        "(--url, or the connection's extra 'control_url')")


#: states a master publishes as it ends (engine/master/master.py): no master answers at its URL afterwards
ENDED_STATES = frozenset({"FINISHED", "CANCELED", "FAILED", "SUSPENDED"})


def published_control_url(store: Any, job_id: str, status: Any) -> str | None:
    """The control URL storage names for the job's master, given its status document ``status``: the one the job's
    lease names when a later master than the one that wrote ``status`` holds it, else the one ``status`` names
    (None when it names none).  The CLI (:func:`discover_control_url`) and the Airflow hook both ask this.

    Why the lease first: a master frozen between its lease check and its status write (SIGSTOP, a long GC pause)
    finishes that write when it wakes, after a new master took the job over, and the status document then names a
    dead URL until the holder publishes again.  The lease is written compare-and-set, so only its holder's write
    lands there (tests/reliability/test_two_masters.py found this).

    Storage is not an authority on where to send a token: a client holding one
    passes the result through :func:`trusted_control_url`."""
    from checkpoints.lease import read_lease

    extra = status.extra or {}
    lease = read_lease(store, job_id)
    written_by = extra.get("fencing_token")
    if lease is not None and not lease.lease.released and lease.lease.control_url \
            and (type(written_by) is not int or lease.lease.fencing_token > written_by):
        return lease.lease.control_url
    url = extra.get("control_url")
    return str(url) if url else None


def discover_control_url(storage_uri: str, job_id: str, **store_options: Any) -> str:
    """The control URL of the job's master, as :func:`published_control_url` reads it from storage; an error
    saying why when the job published no status, has ended, or no URL is named."""
    store = open_store(storage_uri, **store_options)
    status = read_status(store, job_id)
    if status is None:
        raise ControlApiUnavailable(f"job {job_id!r} has published no status document under {storage_uri}: "
                                    "it never ran with this --storage, or its master has not started yet")
    if status.state in ENDED_STATES:  # its control URL is dead: say what the document knows
        raise ControlApiUnavailable(f"job {job_id!r} is {status.state} (the status document its last master "
                                    f"published under {storage_uri}): no job master runs to ask")
    url = published_control_url(store, job_id, status)
    if not url:
        raise ControlApiUnavailable(f"the status document of job {job_id!r} names no control URL "
                                    f"(state {status.state})")
    return url


# -- requests, shared by both clients ------------------------------------------------------------

_Request = tuple[str, str, dict[str, Any]]


def _operation_route(kind: OperationKind) -> str:
    if kind == "savepoint":
        return ControlRoutes.SAVEPOINT
    if kind == "stop":
        return ControlRoutes.STOP_STATUS
    raise ValueError(f"operation kind must be 'savepoint' or 'stop', got {kind!r}")


def _savepoint(job_id: str, target_dir: str | None, trigger_id: str | None) -> _Request:
    return "POST", ControlRoutes.SAVEPOINTS.format(job_id=job_id), {
        "json": {"target_directory": target_dir, "trigger_id": trigger_id}}


def _stop(job_id: str, target_dir: str | None, drain: bool, trigger_id: str | None) -> _Request:
    return "POST", ControlRoutes.STOP.format(job_id=job_id), {
        "json": {"target_directory": target_dir, "drain": drain, "trigger_id": trigger_id}}


def _operation(job_id: str, kind: OperationKind, trigger_id: str) -> _Request:
    return "GET", _operation_route(kind).format(job_id=job_id, trigger_id=trigger_id), {}


def _decode(method: str, url: str, response: httpx.Response) -> Any:
    if response.status_code >= 400:
        raise ControlApiError(f"{method} {url} answered {response.status_code}: {response.text[:500]}",
                              response.status_code)
    return response.json() if response.content else None


def _unreachable(base_url: Any, exc: Exception) -> ControlApiUnavailable:
    return ControlApiUnavailable(f"cannot reach the job master at {base_url} ({type(exc).__name__}: {exc}); "
                                 "is the job running?")


def _settled(kind: OperationKind, trigger_id: str, op: dict[str, Any], started: float, timeout_s: float) -> bool:
    if op["status"]["id"] != "IN_PROGRESS":
        return True
    if time.monotonic() - started > timeout_s:
        raise ControlApiError(f"{kind} {trigger_id} still in progress after {timeout_s}s")
    return False


def _headers(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


class ControlClient:
    """Blocking client of one job's control API (the CLI and the Airflow hook)."""

    def __init__(self, url: str, job_id: str, token: str | None = None, timeout_s: float = 10.0) -> None:
        self.job_id = job_id
        self.url = url.rstrip("/")
        self._http = httpx.Client(base_url=self.url, headers=_headers(token), timeout=timeout_s)

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise _unreachable(self.url, exc) from exc
        return _decode(method, self.url + path, response)

    def status(self) -> dict[str, Any]:
        return self._call("GET", ControlRoutes.JOB.format(job_id=self.job_id))

    def checkpoints(self) -> list[dict[str, Any]]:
        return self._call("GET", ControlRoutes.CHECKPOINTS.format(job_id=self.job_id))["history"]

    def view(self) -> str:
        """The job view's HTML page (engine/master/view.py)."""
        path = ControlRoutes.VIEW.format(job_id=self.job_id)
        try:
            response = self._http.get(path)
        except httpx.TransportError as exc:
            raise _unreachable(self.url, exc) from exc
        if response.status_code >= 400:
            _decode("GET", self.url + path, response)
        return response.text

    def trigger_savepoint(self, target_dir: str | None = None, trigger_id: str | None = None) -> str:
        method, path, kwargs = _savepoint(self.job_id, target_dir, trigger_id)
        return str(self._call(method, path, **kwargs)["request-id"])

    def stop(self, target_dir: str | None = None, drain: bool = False, trigger_id: str | None = None) -> str:
        method, path, kwargs = _stop(self.job_id, target_dir, drain, trigger_id)
        return str(self._call(method, path, **kwargs)["request-id"])

    def cancel(self) -> None:
        self._call("PATCH", ControlRoutes.JOB.format(job_id=self.job_id), params={"mode": "cancel"})

    def operation(self, kind: OperationKind, trigger_id: str) -> dict[str, Any]:
        method, path, kwargs = _operation(self.job_id, kind, trigger_id)
        return self._call(method, path, **kwargs)

    def wait(self, kind: OperationKind, trigger_id: str, timeout_s: float = 600.0,
             poll_s: float = 0.5) -> dict[str, Any]:
        """Poll until the operation leaves IN_PROGRESS; returns its final document."""
        started = time.monotonic()
        while True:
            op = self.operation(kind, trigger_id)
            if _settled(kind, trigger_id, op, started, timeout_s):
                return op
            time.sleep(poll_s)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ControlClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncControlClient:
    """The same client for an event loop (Airflow's triggerer): same routes, same errors."""

    def __init__(self, url: str, job_id: str, token: str | None = None, timeout_s: float = 10.0) -> None:
        self.job_id = job_id
        self.url = url.rstrip("/")
        self._http = httpx.AsyncClient(base_url=self.url, headers=_headers(token), timeout=timeout_s)

    async def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = await self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise _unreachable(self.url, exc) from exc
        return _decode(method, self.url + path, response)

    async def operation(self, kind: OperationKind, trigger_id: str) -> dict[str, Any]:
        method, path, kwargs = _operation(self.job_id, kind, trigger_id)
        return await self._call(method, path, **kwargs)

    async def wait(self, kind: OperationKind, trigger_id: str, timeout_s: float = 600.0,
                   poll_s: float = 0.5) -> dict[str, Any]:
        started = time.monotonic()
        while True:
            op = await self.operation(kind, trigger_id)
            if _settled(kind, trigger_id, op, started, timeout_s):
                return op
            await asyncio.sleep(poll_s)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncControlClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
