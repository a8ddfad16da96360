"""The Sluice page in the Airflow 3 UI: a FastAPI sub-application rendered server-side.

Mounted by :class:`sluice.plugin.SluicePlugin` under ``/sluice`` and linked from
the navigation through an external view.  Pages: ``/sluice/`` (every deployment,
its health) and ``/sluice/jobs/{deployment}`` (health, checkpoint history as an
inline SVG chart of sizes and durations, retained handles, savepoints with their
validation and a link to their Data Docs).  ``/sluice/api/jobs/{deployment}``
serves the same data as JSON.  No scripts, no external assets: the page works
offline and under a strict content security policy.

Caveat: Airflow does not put its own authentication in front of plugin apps;
put the API server behind your usual auth, or keep this page on a trusted network.
"""

from __future__ import annotations

import html
from datetime import datetime, timezone
from typing import Any

from fastapi import FastAPI, HTTPException
from fastapi.responses import HTMLResponse

from sluice.deployments import load_deployments
from sluice.views.data import deployment_view

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


def render_index(views: list[dict[str, Any]]) -> HTMLResponse:
    rows = "".join(
        f"<tr><td><a href='jobs/{html.escape(v['name'])}'>{html.escape(v['name'])}</a></td>"
        f"<td><code>{html.escape(v['job_id'])}</code></td><td>{html.escape(str((v['status'] or {}).get('state')))}</td>"
        f"<td>{_health_cell(v)}</td><td>{len(v['checkpoints'])}/{v['retained_expected']}</td>"
        f"<td>{len(v['savepoints'])}</td></tr>"
        for v in views
    )
    return _page("Sluice jobs", "<h1>Sluice jobs</h1><table><tr><th>deployment</th><th>job id</th><th>state</th>"
                 f"<th>health</th><th>retained</th><th>savepoints</th></tr>{rows}</table>")


def render_job(v: dict[str, Any]) -> HTMLResponse:
    s = v["status"] or {}
    now = v["now_ms"]
    facts = [
        ("state", s.get("state")), ("status source", s.get("source")), ("control API", s.get("control_url")),
        ("heartbeat", f"{_when(s.get('heartbeat_ms'))} ({max(0, now - s['heartbeat_ms']) / 1000:.0f}s ago)"
         if s.get("heartbeat_ms") else "-"),
        ("last completed checkpoint", f"{s.get('last_completed_checkpoint')} at {_when(s.get('last_completed_ms'))}"),
        ("failed checkpoints", s.get("failed_checkpoints")), ("lag", f"{s['lag_ms']} ms" if s.get("lag_ms") is not None else "-"),
        ("watermark", _when(s.get("watermark_ms"))), ("job spec", v["job"]),
        ("runtime / parallelism", f"{v['runtime']} / {v['parallelism']}"),
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
        f"<td>{('<a href=' + chr(39) + html.escape(sp['data_docs']) + chr(39) + '>Data Docs</a>') if sp['data_docs'] else '-'}</td>"
        f"<td><code>{html.escape(sp['uri'])}</code></td></tr>"
        for sp in v["savepoints"]
    )
    errors = "".join(f"<li class='bad'>{html.escape(e)}</li>" for e in v["errors"])
    body = (
        f"<p><a href='../'>all jobs</a></p><h1>{html.escape(v['name'])} <span class='muted'>job "
        f"{html.escape(v['job_id'])}</span></h1><p>health: {_health_cell(v)}</p>"
        f"{'<ul>' + errors + '</ul>' if errors else ''}<table>{fact_rows}</table>"
        f"<h2>Checkpoint history (size; duration below)</h2>{checkpoint_chart(v['checkpoints'])}"
        f"<h2>Retained handles ({len(v['checkpoints'])} of {v['retained_expected']})</h2>"
        f"<table><tr><th>id</th><th>completed</th><th>bytes</th><th>duration ms</th><th>location</th></tr>{retained}</table>"
        f"<h2>Savepoints</h2><table><tr><th>checkpoint</th><th>completed</th><th>bytes</th><th>validation</th>"
        f"<th>report</th><th>location</th></tr>{savepoints}</table>"
    )
    return _page(f"Sluice job {v['name']}", body)


def create_app() -> FastAPI:
    app = FastAPI(title="Sluice", description="Sluice jobs, checkpoints and savepoints")

    def one(name: str) -> dict[str, Any]:
        deployments = load_deployments()
        if name not in deployments:
            raise HTTPException(404, f"no deployment {name!r}; known: {sorted(deployments)}")
        return deployment_view(deployments[name])

    @app.get("/", response_class=HTMLResponse)
    def index() -> HTMLResponse:
        return render_index([deployment_view(d) for d in load_deployments().values()])

    @app.get("/jobs/{name}", response_class=HTMLResponse)
    def job(name: str) -> HTMLResponse:
        return render_job(one(name))

    @app.get("/api/jobs/{name}")
    def job_json(name: str) -> dict[str, Any]:
        return one(name)

    return app


app = create_app()
