"""The job master's HTTP control API (ARCHITECTURE section 7), shaped after Flink's REST API.

=======  ====================================  ==========================================
GET      /healthz                              liveness, no token needed
GET      /jobs                                 the job this master runs
GET      /jobs/{job_id}                        status: state, watermark, checkpoints, rates
GET      /jobs/{job_id}/checkpoints            completed/failed checkpoint history
POST     /jobs/{job_id}/savepoints             ``{"target_directory", "trigger_id"}`` -> trigger id
GET      /jobs/{job_id}/savepoints/{trigger}   savepoint status / location / failure cause
POST     /jobs/{job_id}/stop                   stop with savepoint ``{"target_directory", "drain", "trigger_id"}``
GET      /jobs/{job_id}/stop/{trigger}         stop status
PATCH    /jobs/{job_id}?mode=cancel            cancel without savepoint
GET      /jobs/{job_id}/view                   the job view: an HTML page of inline SVG charts (engine/master/view.py)
GET      /metrics                              Prometheus text format
GET      /openapi.json                         the API's OpenAPI document
=======  ====================================  ==========================================

Every route but ``/healthz`` requires ``Authorization: Bearer <token>`` when the
master was given a token (always, when it is bound to a non-loopback address),
``/openapi.json`` and the job view included (a browser opens the view of a master without a token;
with one, through the Airflow plugin's job page, which fetches it server-side); the browsable
``/docs`` and ``/redoc`` pages are served only without a token (they fetch the document without one).

Savepoint and stop requests may name a ``target_directory`` only inside the
master's savepoint root (``--savepoint-dir``; without one, its checkpoint storage):
a request cannot make the master write a snapshot to another bucket or, with
``..``, outside its folder (:func:`engine.master.targets.confine_target`).
"""

from __future__ import annotations

import hmac
from typing import Any, Protocol

from fastapi import Depends, FastAPI, HTTPException, Request, Response
from fastapi.responses import HTMLResponse
from pydantic import BaseModel

from engine.master.client import ControlRoutes
from engine.master.operations import OperationRegistry
from engine.master.targets import confine_target
from engine.master.timeline import JobTimeline
from engine.master.view import CONTENT_SECURITY_POLICY, JobView


class JobControl(Protocol):
    """What a running job offers its master; implemented by both runtimes' job handles."""

    job_id: str

    def status(self) -> dict[str, Any]: ...

    def checkpoint_history(self) -> list[dict[str, Any]]: ...

    def trigger_savepoint(self, target_dir: str | None) -> Any: ...  # Future[str location]

    def stop_with_savepoint(self, target_dir: str | None, drain: bool) -> Any: ...  # Future[str location]

    def cancel(self) -> None: ...


class SavepointRequest(BaseModel):
    target_directory: str | None = None
    trigger_id: str | None = None


class StopRequest(BaseModel):
    target_directory: str | None = None
    drain: bool = False
    trigger_id: str | None = None


#: sent with the job view: its own policy (no script, no load), never framed, never cached
VIEW_HEADERS = {"Content-Security-Policy": CONTENT_SECURITY_POLICY + "; frame-ancestors 'none'",
                "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer", "Cache-Control": "no-store"}


def create_app(job: JobControl, operations: OperationRegistry, token: str | None,
               metrics_text: Any = None, savepoint_roots: tuple[str, ...] | None = None,
               view: Any = None) -> FastAPI:
    """``savepoint_roots``: where a request's ``target_directory`` may point (None: anywhere, for tests of
    the protocol alone; the job master always passes its roots).  ``view``: the job's
    :class:`~engine.master.view.JobView` (the job master's is fed at every status publication); without
    one, a view that samples the job once per request."""
    if view is None:
        view = JobView(job, JobTimeline(job.job_id), sample_on_render=True)
    browsable = token is None
    app = FastAPI(title="Sluice job master", version="1", openapi_url="/openapi.json" if browsable else None,
                  docs_url="/docs" if browsable else None, redoc_url="/redoc" if browsable else None)

    def authorize(request: Request) -> None:
        if token is None:
            return
        header = request.headers.get("authorization", "")
        supplied = header[7:] if header.lower().startswith("bearer ") else ""
        if not hmac.compare_digest(supplied.encode(), token.encode()):
            raise HTTPException(status_code=401, detail="missing or wrong bearer token (Authorization: Bearer <token>)")

    def check_job(job_id: str) -> None:
        if job_id != job.job_id:
            raise HTTPException(status_code=404, detail=f"this master runs job {job.job_id!r}, not {job_id!r}")

    def target(requested: str | None) -> str | None:
        if requested is None or savepoint_roots is None:
            return requested
        try:
            return confine_target(requested, savepoint_roots)
        except ValueError as exc:
            raise HTTPException(status_code=400, detail=str(exc)) from None

    if not browsable:
        @app.get("/openapi.json", dependencies=[Depends(authorize)], include_in_schema=False)
        def openapi() -> dict[str, Any]:
            return app.openapi()

    @app.get(ControlRoutes.HEALTH)
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get(ControlRoutes.JOBS, dependencies=[Depends(authorize)])
    def jobs() -> dict[str, Any]:
        return {"jobs": [{"id": job.job_id, "status": job.status().get("state")}]}

    @app.get(ControlRoutes.JOB, dependencies=[Depends(authorize)])
    def status(job_id: str) -> dict[str, Any]:
        check_job(job_id)
        return job.status()

    @app.get(ControlRoutes.CHECKPOINTS, dependencies=[Depends(authorize)])
    def checkpoints(job_id: str) -> dict[str, Any]:
        check_job(job_id)
        return {"history": job.checkpoint_history()}

    @app.post(ControlRoutes.SAVEPOINTS, status_code=202, dependencies=[Depends(authorize)])
    def trigger_savepoint(job_id: str, body: SavepointRequest) -> dict[str, Any]:
        check_job(job_id)
        directory = target(body.target_directory)
        op, _ = operations.start("savepoint", body.trigger_id, body.model_dump(),
                                 lambda: job.trigger_savepoint(directory))
        return {"request-id": op.trigger_id}

    @app.post(ControlRoutes.STOP, status_code=202, dependencies=[Depends(authorize)])
    def stop(job_id: str, body: StopRequest) -> dict[str, Any]:
        check_job(job_id)
        directory = target(body.target_directory)
        op, _ = operations.start("stop", body.trigger_id, body.model_dump(),
                                 lambda: job.stop_with_savepoint(directory, body.drain))
        return {"request-id": op.trigger_id}

    def operation(job_id: str, trigger_id: str, kind: str) -> dict[str, Any]:
        check_job(job_id)
        op = operations.get(trigger_id)
        if op is None or op.kind != kind:
            raise HTTPException(status_code=404, detail=f"no {kind} operation with trigger id {trigger_id!r}")
        return op.to_json()

    @app.get(ControlRoutes.SAVEPOINT, dependencies=[Depends(authorize)])
    def savepoint_status(job_id: str, trigger_id: str) -> dict[str, Any]:
        return operation(job_id, trigger_id, "savepoint")

    @app.get(ControlRoutes.STOP_STATUS, dependencies=[Depends(authorize)])
    def stop_status(job_id: str, trigger_id: str) -> dict[str, Any]:
        return operation(job_id, trigger_id, "stop")

    @app.patch(ControlRoutes.JOB, status_code=202, dependencies=[Depends(authorize)])
    def cancel(job_id: str, mode: str = "cancel") -> dict[str, str]:
        check_job(job_id)
        if mode != "cancel":
            raise HTTPException(status_code=400, detail=f"mode must be 'cancel', got {mode!r}")
        job.cancel()
        return {"status": "cancelling"}

    @app.get(ControlRoutes.VIEW, dependencies=[Depends(authorize)], response_class=HTMLResponse)
    def job_view(job_id: str) -> HTMLResponse:
        check_job(job_id)
        return HTMLResponse(view.render(), headers=VIEW_HEADERS)

    @app.get(ControlRoutes.METRICS, dependencies=[Depends(authorize)])
    def metrics() -> Response:
        body = metrics_text() if metrics_text is not None else b""
        return Response(content=body, media_type="text/plain; version=0.0.4; charset=utf-8")

    return app
