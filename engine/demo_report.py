"""The report ``sluice demo`` ends with: one self-contained HTML file a browser opens offline.

It is the job view (engine/master/view.py) of the demo's whole run, the masters' timelines of the run
before the stop and of the restored run joined in time order, so the same charts (throughput, watermarks
per split with idle lanes, checkpoint durations and sizes, epochs, late records and dead letters) show
the demo as an operator would have watched it; above them, the demo's own section: what happened, the
savepoint's Great Expectations validation summary and a link to its Data Docs.

Nothing here draws a chart: the page is :func:`engine.master.view.render_view`'s, with the demo section
(rendered by its own small Jinja2 template, autoescape on) put right after its heading.  The page keeps the
view's Content-Security-Policy (no script, no load of any kind), so the report makes no request; the Data
Docs link is a plain link the reader follows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2

from engine.master.view import render_view

_SECTION = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined).from_string("""
<section id="demo">
<h2>The demo</h2>
<p class="muted">{{ story }}</p>
<table class="demo">
{% for name, value in facts %}<tr><th>{{ name }}</th><td>{{ value }}</td></tr>
{% endfor %}
</table>
<h2>Savepoint validation (Great Expectations)</h2>
<table class="validation" data-status="{{ validation.status }}">
<tr><th>savepoint</th><td>{{ validation.snapshot_uri }}</td></tr>
<tr><th>status</th><td class="{{ 'failed' if validation.status != 'passed' else '' }}">{{ validation.status }}</td></tr>
<tr><th>rows validated</th><td>{{ validation.rows }}</td></tr>
<tr><th>engine, duration</th><td>{{ validation.engine }}, {{ validation.duration_ms }} ms</td></tr>
<tr><th>failed expectations</th><td>{{ validation.failed | length }}</td></tr>
</table>
<table class="assets">
<tr><th>asset</th><th>rows</th><th>expectations evaluated</th><th>failed</th></tr>
{% for a in validation.assets %}
<tr class="asset"><td>{{ a.asset }}</td><td>{{ a.rows }}</td><td>{{ a.evaluated }}</td><td>{{ a.failed }}</td></tr>
{% endfor %}
</table>
{% for f in validation.failed %}<p class="failed">{{ f.asset }}: {{ f.expectation }}: {{ f.rule }}</p>
{% endfor %}
{% if validation.reason %}<p class="failed">{{ validation.reason }}</p>{% endif %}
{% if validation.data_docs_url %}
<p>Data Docs: <a class="data-docs" href="{{ validation.data_docs_url }}">{{ validation.data_docs_url }}</a></p>
{% else %}
<p class="muted">no Data Docs were built</p>
{% endif %}
</section>
""")


def join_timelines(views: list[Any]) -> tuple[list[Any], list[Any]]:
    """The samples (in time order) and checkpoint rows (by id) of several masters' job views of one job."""
    samples, rows = [], []
    for view in views:
        s, r = view.timeline.snapshot()
        samples += s
        rows += r
    samples.sort(key=lambda s: s.time_ms)
    rows.sort(key=lambda r: (r.checkpoint_id, r.status != "completed"))
    return samples, rows


def render_report(job_id: str, status: dict[str, Any], views: list[Any], validation: Any,
                  facts: list[tuple[str, str]], story: str, interval_ms: int | None) -> str:
    """The report page: the job view of ``views`` joined, with the demo's section after the heading."""
    samples, rows = join_timelines(views)
    operators = next((v.operators for v in reversed(views) if v.operators is not None), None)
    page = render_view(job_id, status, samples, rows, operators, interval_ms, views[-1].sample_interval_ms)
    page = page.replace("<title>Sluice job ", "<title>Sluice demo report: job ", 1)
    heading_end = page.index("</h1>") + len("</h1>")
    section = _SECTION.render(story=story, facts=facts, validation=validation)
    return page[:heading_end] + section + page[heading_end:]


def write_report(path: Path, page: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page, encoding="utf-8")
    return path
