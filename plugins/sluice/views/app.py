"""The Sluice page in the Airflow 3 UI: a FastAPI sub-application rendered server-side.

Mounted by :class:`sluice.plugin.SluicePlugin` under ``/sluice`` and linked from
the navigation through an external view.  Pages: ``/sluice/`` (every deployment,
its health, running and configured parallelism) and ``/sluice/jobs/{deployment}``
(health, checkpoint history as an inline SVG chart of sizes and durations,
retained handles, savepoints with their validation and a link to their Data
Docs).  ``/sluice/jobs/{deployment}/data-docs/{path}`` serves the Data Docs site
from the connection's ``data_docs_dir`` (:func:`sluice.views.data.data_docs_file`),
so the link works in a browser, unlike the ``file://`` URL the validation records.
``/sluice/api/jobs/{deployment}`` serves the page's data as JSON.  ``POST
/sluice/jobs/{deployment}/actions/{savepoint|restore|stop}`` are the page's buttons:
the first two trigger the Sluice DAGs as the logged-in user (after the auth manager
allows that user to trigger them), the stop goes to the job's master.  No scripts, no
external assets: the page works offline and under a strict content security policy.

The job page embeds the **job view** its master serves (``GET /jobs/{job_id}/view``, docs/observability.md):
fetched here, server-side, through the deployment's hook (its token and control-host allow list), and shown
in a sandboxed ``<iframe srcdoc>``.  The master's token stays on the server, the master need not be
reachable from the browser (it listens on a worker's loopback), and the embedded page (which has no script
of its own) can neither run one nor reach Airflow's session.

Authentication is Airflow's own.  Airflow puts none in front of plugin apps, so
every route here depends on ``airflow.api_fastapi.core_api.security.get_user``,
which accepts what Airflow's REST API accepts: ``Authorization: Bearer <jwt>`` or
the UI's JWT cookie (``_token``), checked by the global auth manager (this app is
mounted, so ``request.app.state`` holds no auth manager; ``get_user`` does not use it).
``/sluice/api/...`` uses ``requires_authenticated()`` and answers 401 (403 for an
invalid token).  A page asked for without a bearer header and without a valid
cookie, as a browser does before logging in, is redirected (307) to the auth
manager's ``get_url_login(next_url=...)`` with ``next`` set to the page's path, so
the login form returns there.

Authorization is checked only for the actions.  Any logged-in Airflow user sees every deployment,
its storage locations and its Data Docs; no role or team is checked.
"""

from __future__ import annotations

import html
import time
from datetime import datetime, timezone
from typing import Any
from urllib.parse import quote, urlsplit

from airflow.api_fastapi.app import get_auth_manager
from airflow.api_fastapi.auth.managers.models.base_user import BaseUser
from airflow.api_fastapi.core_api.security import bearer_scheme, get_user, requires_authenticated
from fastapi import APIRouter, Depends, FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.security import HTTPAuthorizationCredentials

from sluice.deployments import Deployment, load_deployments
from sluice.hook import SluiceHook
from sluice.links import data_docs_page, job_page
from sluice.views.data import data_docs_file, deployment_view, job_view_html

#: served with every Data Docs file.  The site is HTML and scripts rendered by Great Expectations
#: from job and state values (its index fills its tables with HTML strings from inline data),
#: served on Airflow's origin, where the UI keeps its JWT in a cookie that scripts can read.  The
#: sandbox lets its scripts run (the index needs them, and they load from CDNs) in an opaque
#: origin: they cannot read Airflow's cookies or call its API as the user.  The price: requests
#: for the site's own files from a sandboxed page carry no cookie, so its favicon (the only one
#: the site links; links between pages are navigations, which do carry it) does not load.
DATA_DOCS_HEADERS = {
    "Content-Security-Policy": "sandbox allow-scripts allow-popups allow-popups-to-escape-sandbox",
    "X-Content-Type-Options": "nosniff",
}

STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5rem;color:#1d2330}
h1{font-size:1.4rem} h2{font-size:1.1rem;margin-top:1.6rem}
table{border-collapse:collapse;margin:.5rem 0} td,th{border:1px solid #ccd;padding:.25rem .6rem;text-align:left}
th{background:#eef1f7} .ok{color:#18794e;font-weight:600} .bad{color:#b42318;font-weight:600}
.muted{color:#667} code{font-size:.85em}
"""


def _when(ms: int | None) -> str:
    if not ms:
        return "-"
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _page(title: str, body: str) -> HTMLResponse:
    return HTMLResponse(f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
                        f"<style>{STYLE}</style></head><body>{body}</body></html>")


def checkpoint_chart(checkpoints: list[dict[str, Any]], width: int = 640, height: int = 220) -> str:
    """Inline SVG: one bar per checkpoint, height = size, label = id and duration."""
    if not checkpoints:
        return "<p class='muted'>no retained checkpoints yet</p>"
    pad, top, bottom = 50, 20, 40
    biggest = max((c.get("bytes") or 0) for c in checkpoints) or 1
    slot = (width - pad - 10) / len(checkpoints)
    bar = max(4.0, slot * 0.6)
    parts = [f"<svg xmlns='http://www.w3.org/2000/svg' role='img' aria-label='checkpoint sizes and durations' "
             f"width='{width}' height='{height}' viewBox='0 0 {width} {height}'>",
             f"<line x1='{pad}' y1='{height - bottom}' x2='{width - 10}' y2='{height - bottom}' stroke='#889'/>",
             f"<text x='4' y='{top + 4}' font-size='10'>{biggest} B</text>"]
    for i, c in enumerate(checkpoints):
        size = c.get("bytes") or 0
        h = (height - top - bottom) * size / biggest
        x = pad + i * slot + (slot - bar) / 2
        y = height - bottom - h
        duration = c.get("duration_ms")
        label = f"{duration} ms" if duration is not None else "?"
        parts.append(f"<rect class='bar' x='{x:.1f}' y='{y:.1f}' width='{bar:.1f}' height='{h:.1f}' fill='#4b77be'>"
                     f"<title>chk-{c['checkpoint_id']}: {size} bytes, {label}</title></rect>")
        parts.append(f"<text x='{x + bar / 2:.1f}' y='{height - bottom + 14}' font-size='10' "
                     f"text-anchor='middle'>chk-{c['checkpoint_id']}</text>")
        parts.append(f"<text x='{x + bar / 2:.1f}' y='{height - bottom + 28}' font-size='9' fill='#556' "
                     f"text-anchor='middle'>{html.escape(label)}</text>")
    parts.append("</svg>")
    return "".join(parts)


def _health_cell(view: dict[str, Any]) -> str:
    if view["status"] is None or view["status"].get("source") == "none":
        return "<span class='bad'>not deployed</span>"
    if not view["problems"]:
        return "<span class='ok'>healthy</span>"
    return "<span class='bad'>unhealthy</span>: " + html.escape("; ".join(view["problems"]))


def _running_parallelism(v: dict[str, Any]) -> str:
    return str(v["running_parallelism"]) if v["running_parallelism"] is not None else "unknown"


def _configured_parallelism(v: dict[str, Any]) -> str:
    return str(v["configured_parallelism"]) if v["configured_parallelism"] is not None else "job default"


def _parallelism_note(v: dict[str, Any]) -> str:
    """A deploy or restore may override the deployment's parallelism (a rescale): say when they differ."""
    running, configured = v["running_parallelism"], v["configured_parallelism"]
    if running is None or configured is None or running == configured:
        return ""
    return " (differs from the running job's, e.g. after a rescale)"


def render_index(views: list[dict[str, Any]]) -> HTMLResponse:
    rows = "".join(
        f"<tr><td><a href='jobs/{quote(v['name'])}'>{html.escape(v['name'])}</a></td>"
        f"<td><code>{html.escape(v['job_id'])}</code></td><td>{html.escape(str((v['status'] or {}).get('state')))}</td>"
        f"<td>{_health_cell(v)}</td><td class='running-parallelism'>{_running_parallelism(v)}</td>"
        f"<td class='configured-parallelism'>{_configured_parallelism(v)}</td>"
        f"<td>{len(v['checkpoints'])}/{v['retained_expected']}</td><td>{len(v['savepoints'])}</td></tr>"
        for v in views
    )
    return _page("Sluice jobs", "<h1>Sluice jobs</h1><table><tr><th>deployment</th><th>job id</th><th>state</th>"
                 "<th>health</th><th>parallelism (running job)</th><th>parallelism (deployment)</th>"
                 f"<th>retained</th><th>savepoints</th></tr>{rows}</table>")


def _data_docs_cell(sp: dict[str, Any]) -> str:
    if sp.get("data_docs"):
        return f"<a class='data-docs' href='{html.escape(sp['data_docs'])}'>Data Docs</a>"
    if sp.get("data_docs_recorded"):  # written outside the connection's data_docs_dir: say where
        return f"<span class='muted'>not served; written to <code>{html.escape(sp['data_docs_recorded'])}</code></span>"
    return "-"


def _action(name: str, action: str, label: str, snapshot: str | None = None) -> str:
    """A button that POSTs one of the page's actions (``/jobs/{name}/actions/{action}``)."""
    query = f"?snapshot={quote(snapshot, safe='')}" if snapshot else ""
    target = f"{quote(name, safe='')}/actions/{action}{query}"
    return (f"<form class='action' method='post' action='{html.escape(target)}'"
            f" style='display:inline'><button type='submit'>{html.escape(label)}</button></form>")


#: the embedded job view's frame height: its page is about this tall with a few splits (it scrolls beyond)
JOB_VIEW_HEIGHT_PX = 2300


def job_view_frame(page: str | None, problem: str | None) -> str:
    """The master's job view in a sandboxed frame (no script, opaque origin), or why there is none."""
    if page is None:
        return (f"<p class='muted job-view-missing'>no job view: no job master answers "
                f"({html.escape(problem or 'unknown')}); a running master serves it</p>")
    return (f"<iframe class='job-view' title='job view' sandbox='' referrerpolicy='no-referrer' "
            f"style='width:100%;max-width:840px;height:{JOB_VIEW_HEIGHT_PX}px;border:1px solid #ccd' "
            f"srcdoc=\"{html.escape(page, quote=True)}\"></iframe>")


def render_job(v: dict[str, Any], notice: str | None = None, job_view: str = "") -> HTMLResponse:
    s = v["status"] or {}
    now = v["now_ms"]
    facts = [
        ("state", s.get("state")), ("status source", s.get("source")), ("control API", s.get("control_url")),
        ("heartbeat", f"{_when(s.get('heartbeat_ms'))} ({max(0, now - s['heartbeat_ms']) / 1000:.0f}s ago)"
         if s.get("heartbeat_ms") else "-"),
        ("last completed checkpoint", f"{s.get('last_completed_checkpoint')} at {_when(s.get('last_completed_ms'))}"),
        ("failed checkpoints", s.get("failed_checkpoints")), ("lag", f"{s['lag_ms']} ms" if s.get("lag_ms") is not None else "-"),
        ("watermark", _when(s.get("watermark_ms"))), ("job spec", v["job"]), ("runtime", v["runtime"]),
        ("parallelism (running job)", _running_parallelism(v)),
        ("parallelism (deployment)", _configured_parallelism(v) + _parallelism_note(v)),
    ]
    fact_rows = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(str(val))}</td></tr>" for k, val in facts)
    retained = "".join(
        f"<tr><td>chk-{c['checkpoint_id']}</td><td>{_when(c['completed_ms'])}</td><td>{c['bytes']}</td>"
        f"<td>{c['duration_ms'] if c['duration_ms'] is not None else '-'}</td><td><code>{html.escape(c['uri'])}</code>"
        f"{' <span class=bad>' + html.escape(c['problem']) + '</span>' if c.get('problem') else ''}</td></tr>"
        for c in v["checkpoints"]
    )
    savepoints = "".join(
        f"<tr><td>{sp['checkpoint_id']}</td><td>{_when(sp['completed_ms'])}</td><td>{sp['bytes']}</td>"
        f"<td class='{'ok' if sp['validation'] == 'passed' else 'bad'}'>{html.escape(str(sp['validation']))}</td>"
        f"<td>{_data_docs_cell(sp)}</td>"
        f"<td><code>{html.escape(sp['uri'])}</code></td>"
        f"<td>{_action(v['name'], 'restore', 'Restore from this', sp['uri'])}</td></tr>"
        for sp in v["savepoints"]
    )
    actions = (f"<p>{_action(v['name'], 'savepoint', 'Take a savepoint')} "
               f"{_action(v['name'], 'stop', 'Stop with a savepoint')}</p>")
    errors = "".join(f"<li class='bad'>{html.escape(e)}</li>" for e in v["errors"])
    body = (
        f"<p><a href='../'>all jobs</a></p><h1>{html.escape(v['name'])} <span class='muted'>job "
        f"{html.escape(v['job_id'])}</span></h1><p>health: {_health_cell(v)}</p>"
        f"{'<p class=notice>' + html.escape(notice) + '</p>' if notice else ''}{actions}"
        f"{'<ul>' + errors + '</ul>' if errors else ''}<table>{fact_rows}</table>"
        f"<h2>Checkpoint history (size; duration below)</h2>{checkpoint_chart(v['checkpoints'])}"
        f"<h2>Retained handles ({len(v['checkpoints'])} of {v['retained_expected']})</h2>"
        f"<table><tr><th>id</th><th>completed</th><th>bytes</th><th>duration ms</th><th>location</th></tr>{retained}</table>"
        f"<h2>Savepoints</h2><table><tr><th>checkpoint</th><th>completed</th><th>bytes</th><th>validation</th>"
        f"<th>report</th><th>location</th><th></th></tr>{savepoints}</table>"
        f"<h2>Job view</h2>{job_view}"
    )
    return _page(f"Sluice job {v['name']}", body)


class LoginRequired(Exception):
    """A browser asked for a page without a valid Airflow session: it is sent to Airflow's login form."""

    def __init__(self, next_url: str) -> None:
        super().__init__(next_url)
        self.next_url = next_url


async def page_user(request: Request,
                    bearer: HTTPAuthorizationCredentials | None = Depends(bearer_scheme)) -> BaseUser:
    """Airflow's ``get_user`` for HTML pages: a request without a bearer header and without a
    valid session cookie (none, expired or revoked) raises :class:`LoginRequired` instead of
    401/403.  A caller that sent a bearer header is a script, and gets Airflow's error."""
    try:
        # get_user's own dependencies, given explicitly (airflow 3.3's signature)
        return await get_user(request, _oauth_token=None, bearer_credentials=bearer)
    except HTTPException as exc:
        if bearer is not None or exc.status_code not in (401, 403):
            raise
        raise LoginRequired(_path_and_query(request)) from exc


def _path_and_query(request: Request) -> str:
    """The page's own path (mount prefix included) and query, for ``next``: a path passes the
    login form's same-origin check behind a proxy too, where the host the API server sees is
    not the one the browser uses."""
    url = request.url
    return url.path + (f"?{url.query}" if url.query else "")


async def redirect_to_login(request: Request, exc: LoginRequired) -> RedirectResponse:
    return RedirectResponse(get_auth_manager().get_url_login(next_url=exc.next_url))


def data_docs_href(request: Request, name: str, path: str | None) -> str | None:
    """The URL path under which this app serves a deployment's Data Docs file (None: not servable)."""
    if path is None:
        return None
    return data_docs_page(name, path, request.scope.get("root_path", ""))


def _same_origin(request: Request) -> None:
    """Refuse a cross-site POST (Airflow's session cookie is SameSite=Lax; this says it twice)."""
    origin = request.headers.get("origin")
    if origin and urlsplit(origin).netloc != request.headers.get("host"):
        raise HTTPException(403, f"cross-origin request from {origin} refused")


def _authorize(user: BaseUser, dag_id: str) -> None:
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity, DagDetails

    if not get_auth_manager().is_authorized_dag(method="POST", access_entity=DagAccessEntity.RUN,
                                                details=DagDetails(id=dag_id), user=user):
        raise HTTPException(403, f"{user.get_name()} may not trigger runs of {dag_id}")


def _trigger(user: BaseUser, dag_id: str, conf: dict[str, Any]) -> str:
    """Trigger a run of ``dag_id`` as ``user`` (after checking the user may); says what was done."""
    from airflow.api.common.trigger_dag import trigger_dag
    from airflow.utils.types import DagRunTriggeredByType

    _authorize(user, dag_id)
    run = trigger_dag(dag_id, triggered_by=DagRunTriggeredByType.UI, triggering_user_name=user.get_name(),
                      conf=conf)
    run_id = run.run_id if run is not None else "?"
    return f"triggered {dag_id} run {run_id} with {conf}"


def create_app() -> FastAPI:
    app = FastAPI(title="Sluice", description="Sluice jobs, checkpoints and savepoints")
    app.add_exception_handler(LoginRequired, redirect_to_login)
    pages = APIRouter(dependencies=[Depends(page_user)])
    api = APIRouter(prefix="/api", dependencies=[Depends(requires_authenticated())])

    def deployment(name: str) -> Deployment:
        deployments = load_deployments()
        if name not in deployments:
            raise HTTPException(404, f"no deployment {name!r}; known: {sorted(deployments)}")
        return deployments[name]

    def one(request: Request, name: str) -> dict[str, Any]:
        view = deployment_view(deployment(name))
        for sp in view["savepoints"]:
            sp["data_docs"] = data_docs_href(request, name, sp["data_docs_path"])
        return view

    @pages.get("/", response_class=HTMLResponse)
    def index() -> HTMLResponse:
        return render_index([deployment_view(d) for d in load_deployments().values()])

    @pages.get("/jobs/{name}", response_class=HTMLResponse)
    def job(request: Request, name: str, notice: str | None = None) -> HTMLResponse:
        view = one(request, name)
        return render_job(view, notice, job_view_frame(*job_view_html(deployment(name))))

    @pages.post("/jobs/{name}/actions/{action}")
    def act(request: Request, name: str, action: str, user: BaseUser = Depends(page_user),
            snapshot: str | None = None) -> RedirectResponse:
        """The page's buttons: a savepoint and a restore run their DAGs (so Airflow keeps their history),
        a stop goes to the job's master (which records the job as suspended)."""
        _same_origin(request)
        spec = deployment(name)
        if action == "savepoint":
            notice = _trigger(user, "sluice_scheduled_savepoint", {"deployment": name})
        elif action == "restore":
            known = {sp["uri"] for sp in deployment_view(spec)["savepoints"]}
            if snapshot not in known:  # only what the page offered: never a URI made up by the request
                raise HTTPException(400, f"snapshot {snapshot!r} is not a savepoint of deployment {name!r}")
            notice = _trigger(user, "sluice_restore", {"deployment": name, "snapshot": snapshot})
        elif action == "stop":
            _authorize(user, "sluice_restore")  # stopping a job is the restore DAG's first step
            hook = SluiceHook(spec.conn_id)
            operation = hook.stop_with_savepoint(f"ui-{user.get_name()}-{int(time.time() * 1000)}",
                                                 job_id=spec.job_id)
            notice = f"stop with savepoint requested (operation {operation}); the job will be recorded as suspended"
        else:
            raise HTTPException(404, f"no action {action!r}: savepoint, stop or restore")
        target = f"{job_page(name, request.scope.get('root_path', ''))}?notice={quote(notice, safe='')}"
        return RedirectResponse(target, status_code=303)

    @pages.get("/jobs/{name}/data-docs/{path:path}", name="data_docs")
    def data_docs(name: str, path: str) -> Response:
        """One file of the deployment's Data Docs site; ``data-docs/`` is its index."""
        try:
            content, media_type = data_docs_file(deployment(name), path)
        except FileNotFoundError:  # refused or missing alike: the answer does not reveal which
            raise HTTPException(404, f"no Data Docs file {path!r} for deployment {name!r}") from None
        return Response(content, media_type=media_type, headers=DATA_DOCS_HEADERS)

    @api.get("/jobs/{name}")
    def job_json(request: Request, name: str) -> dict[str, Any]:
        return one(request, name)

    app.include_router(pages)
    app.include_router(api)
    return app


app = create_app()
