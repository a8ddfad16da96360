"""The job view (issue 18): a real ``sluice run`` master on the local runtime serves ``GET /jobs/<id>/view``, an
HTML page of inline SVG charts drawn from what the master sampled; what it shows is checked against the
control API's status and checkpoint history, in headless Chromium too (no console error, no request
leaving the master), with job strings escaped.  Pure parts (bounded timeline, failed checkpoints, incremental
sizes, escaping of failure reasons) are tested on the timeline and renderer directly.

The job (tests/master/view_jobs.py) has two live generator splits; split 1 produces nothing for a few seconds,
so it goes idle and comes back, and the view must show that idle period on its lane.
"""

from __future__ import annotations

import html
import logging
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from browser_shots import visit
from engine.master.timeline import CheckpointFailureLog, JobTimeline
from engine.master.view import render_view
from master_run import get, sluice_run, wait_for

CHARTS_WITH_DATA = ("throughput", "operator-rates", "watermarks", "subtask-watermarks", "checkpoint-durations",
                    "checkpoint-sizes", "late-dead-letters")


@contextmanager
def _sluice_run(tmp_path: Path, *, name: str, **params: Any) -> Iterator[dict[str, Any]]:
    """``sluice run view_jobs:build`` (tests/master/master_run.py), sampling every 200 ms from now on."""
    with sluice_run("view_jobs:build", name, tmp_path, "--checkpoint-interval", "400", "--status-interval", "200",
                    params={"start_timestamp_ms": int(time.time() * 1000), **params}) as job:
        yield job


@pytest.fixture(scope="module")
def idle_job(tmp_path_factory) -> Iterator[dict[str, Any]]:
    """A running job whose split-1 was idle and is active again, with a few checkpoints taken."""
    tmp_path = tmp_path_factory.mktemp("view")
    with _sluice_run(tmp_path, name="viewjob", idle_from=30, idle_to=200) as job:  # idle ~8 s: polls on a loaded host see it
        base = job["base"]
        seen_idle: set[str] = set()

        def idle_then_active() -> bool:
            status = get(base).json()
            seen_idle.update(sid for sid, s in status["splits"].items() if s["idle"])
            return ("split-1" in seen_idle and not status["splits"]["split-1"]["idle"]
                    and (status["last_completed_checkpoint"] or 0) >= 4)

        wait_for(idle_then_active, timeout_s=240, what="split-1 idle, then active again, and 4 checkpoints")  # a loaded 2-core host is slow
        yield {**job, "base": base, "storage": (tmp_path / "chk").as_uri()}


def _points(page: str, chart: str) -> dict[str, list[tuple[int, float]]]:
    """``{series: [(time_ms, value), ...]}`` of one chart's plotted points."""
    svg = re.search(rf'<svg [^>]*data-chart="{chart}".*?</svg>', page, re.S)
    assert svg is not None, f"no SVG for chart {chart}"
    out: dict[str, list[tuple[int, float]]] = {}
    for series, t, v in re.findall(r'<circle class="point"[^>]*data-series="([^"]*)" data-time-ms="(\d+)" '
                                   r'data-value="([^"]+)"', svg.group(0)):
        out.setdefault(html.unescape(series), []).append((int(t), float(v)))
    return out


def test_the_view_shows_every_split_its_idle_period_and_the_checkpoint_history_of_the_running_job(idle_job):
    base = idle_job["base"]
    page_response = get(f"{base}/view")
    page = page_response.text
    status = get(base).json()
    history = get(f"{base}/checkpoints").json()["history"]

    assert page_response.headers["content-type"].startswith("text/html")
    assert "default-src 'none'" in page_response.headers["content-security-policy"]
    # an SVG per chart with data; the local runtime has no epochs, and says so
    for chart in CHARTS_WITH_DATA:
        assert page.count(f'data-chart="{chart}"') == 1, chart
    assert 'data-chart="epochs"' not in page and "no epochs: the local runtime" in page

    # watermarks: one line per split the status reports, every value a real event time not past the status's
    marks = _points(page, "watermarks")
    assert set(marks) == set(status["splits"]) == {"split-0", "split-1"}
    for split, points in marks.items():
        assert len(points) >= 5 and [t for t, _ in points] == sorted(t for t, _ in points)
        assert all(1_600_000_000_000 < v <= status["splits"][split]["watermark_ms"] for _, v in points), split
    # each split has a lane; split-1's lane shows its idle period, split-0 was never idle
    assert re.search(r'class="lane-label"[^>]*>split-0<', page) and re.search(r'class="lane-label"[^>]*>split-1<', page)
    idle = re.findall(r'<rect class="idle"[^>]*><title>([^<]*)</title>', page)
    assert idle and all(t.startswith("split-1 idle ") for t in idle), idle

    # checkpoint rows: exactly the history's completed checkpoints up to the newest one the master sampled
    rows = [int(i) for i in re.findall(r'<tr class="checkpoint completed" data-checkpoint-id="(\d+)"', page)]
    assert len(rows) >= 4 and rows == sorted(rows, reverse=True)
    assert sorted(rows) == [h["checkpoint_id"] for h in history if h["checkpoint_id"] <= max(rows)]
    durations = re.findall(r'<rect class="bar checkpoint"[^>]*><title>checkpoint (\d+): (\d+) ms</title>', page)
    by_id = {h["checkpoint_id"]: h for h in history}
    assert {int(i) for i, _ in durations} == set(rows)
    for cid, ms in durations:
        assert int(ms) == by_id[int(cid)]["completed_ms"] - by_id[int(cid)]["triggered_ms"]
    assert re.search(r'<line class="rule"[^>]*><title>interval 400 ms</title>', page)
    sizes = re.findall(r'<rect class="bar full"[^>]*><title>checkpoint (\d+): full ', page)
    assert {int(i) for i in sizes} == set(rows)

    # the operator table: the planned chains with their parallelism
    assert re.search(r"<td>events -&gt; Map</td><td class=\"parallelism\">1</td>", page), page[:3000]
    assert "per-second counts" in page


def test_human_status_of_a_running_job_shows_its_splits_counts_and_where_its_view_is(idle_job):
    url = idle_job["control_url"]
    done = subprocess.run([sys.executable, "-m", "engine.cli", "status", "viewjob", "--url", url],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "job viewjob: RUNNING (from the job master)"
    assert lines[1] == "  parallelism 1, attempt 1, restarts 0"
    assert re.fullmatch(r"  records in \d+, out \d+, \d+\.\d records/s in", lines[2]), lines[2]
    assert [line.split(":")[0] for line in lines if line.startswith("  split ")] == ["  split split-0",
                                                                                    "  split split-1"]
    assert re.search(r"^  late records dropped \d+, dead letters 0$", done.stdout, re.M)
    assert f"  control API {url}; job view {url}/jobs/viewjob/view" in lines
    # a watermark is an event time: how long "ago" it was from the wall clock means nothing (it printed
    # "(1281023421779.7 h ago)", measured from 2**62 ms)
    watermarks = [line for line in lines if "watermark" in line]
    assert watermarks and not any(" ago)" in line.split("watermark", 1)[1] for line in watermarks), watermarks


def test_sluice_view_saves_the_page_of_a_master_found_through_storage(idle_job, tmp_path: Path):
    target = tmp_path / "view.html"
    done = subprocess.run([sys.executable, "-m", "engine.cli", "view", "viewjob", "--storage", idle_job["storage"],
                           "--file", str(target)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(target)
    page = target.read_text()
    assert page.startswith("<!doctype html>") and "<title>Sluice job viewjob</title>" in page
    assert set(_points(page, "watermarks")) == {"split-0", "split-1"}


def test_the_view_renders_in_headless_chromium_without_errors_or_outside_requests(idle_job):
    url = f"{idle_job['base']}/view"
    seen, shot = visit(url, "job_view.png", {
        "charts": ("svg[data-chart]", "els => els.map(e => e.dataset.chart)"),
        "lanes": ("svg[data-chart=watermarks] .lane-label", "els => els.map(e => e.textContent)"),
        "idle_width": ("svg[data-chart=watermarks] rect.idle", "els => els.map(e => e.getBBox().width)"),
    })
    assert seen.errors == []
    assert seen.requests == [url]  # the page itself, nothing else: no script, style, font or image from anywhere
    assert seen.probes["charts"] == list(CHARTS_WITH_DATA)
    idle_width = seen.probes["idle_width"]
    assert seen.probes["lanes"] == ["split-0", "split-1"] and idle_width and all(w >= 3 for w in idle_width)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000


# last of the idle_job tests: it cancels the job
def test_the_views_last_points_equal_the_status_once_the_job_has_stopped(idle_job):
    """Stopped, the job's figures no longer move: the newest sample must show exactly what the status says."""
    base = idle_job["base"]
    httpx.patch(base, params={"mode": "cancel"}, timeout=30).raise_for_status()
    status = wait_for(lambda: (s := get(base).json())["state"] == "CANCELED" and s, what="CANCELED")

    def settled() -> str | None:  # the master's last sample is taken right after the job ends
        page = get(f"{base}/view").text
        late = _points(page, "late-dead-letters")
        return page if late["late dropped"][-1][1] == status["metrics"]["num_late_records_dropped"] else None

    page = wait_for(settled, timeout_s=2.5, what="the final sample (the master serves 3 s after the job ends)")
    late = _points(page, "late-dead-letters")
    assert status["metrics"]["num_late_records_dropped"] > 0  # the job sends late records on purpose
    assert late["dead letters"][-1][1] == status["metrics"]["num_dead_letter_records"]
    marks = _points(page, "watermarks")
    assert {s: p[-1][1] for s, p in marks.items()} == {s: v["watermark_ms"] for s, v in status["splits"].items()}
    assert f"<th>records in / out</th><td>{status['records_in']} / {status['records_out']}</td>" in page


def test_job_split_and_operator_names_are_shown_escaped(tmp_path: Path):
    evil = "<script>alert(1)</script>"
    with _sluice_run(tmp_path, name=evil, split_prefix=f"{evil}-", source_name=f"<img src=x onerror=alert(2)>") as job:
        base = f"{job['control_url']}/jobs/{job['job_id']}"
        assert job["job_id"] != evil  # not a storage path segment: the master picked an id
        wait_for(lambda: get(base).json()["splits"], what="splits reported")
        wait_for(lambda: 'data-series="' in get(f"{base}/view").text, what="a sample with splits")
        page = get(f"{base}/view").text

    escaped = html.escape(evil)
    assert "<script" not in page and "<img" not in page and "onerror=alert(2)>" not in page
    assert f"<title>Sluice job {escaped}</title>" in page
    assert f'data-series="{escaped}-0"' in page and f"<title>{escaped}-1</title>" in page
    assert "&lt;img src=x onerror=alert(2)&gt; -&gt; Map" in page


def test_failed_checkpoints_of_a_running_job_are_listed_with_their_reason_as_the_status_counts_them(tmp_path: Path):
    """A checkpoint timeout of 10 ms: most checkpoints expire, some complete; the job tolerates the failures."""
    with _sluice_run(tmp_path, name="failing", checkpoint_timeout_ms=10) as job:
        base = f"{job['control_url']}/jobs/{job['job_id']}"
        wait_for(lambda: (s := get(base).json())["num_failed_checkpoints"] >= 3 and s["num_completed_checkpoints"],
                  what="failed and completed checkpoints")
        # the view's timeline takes completed checkpoints from the history it samples, failures as they happen:
        # wait for its next sample to hold a completed one too
        wait_for(lambda: '<tr class="checkpoint completed"' in get(f"{base}/view").text,
                 what="a completed checkpoint in the view")
        before = get(base).json()["num_failed_checkpoints"]
        page = get(f"{base}/view").text
        after = get(base).json()["num_failed_checkpoints"]

    failed = re.findall(r'<tr class="checkpoint failed" data-checkpoint-id="(\d+)">.*?<td>([^<]*)</td></tr>', page)
    assert before <= len(failed) <= after  # every failure the job counted, itemised as it happened
    assert {reason for _, reason in failed} == {"CHECKPOINT_EXPIRED"}
    assert page.count('<rect class="bar failed"') == len(failed)
    assert "not itemised" not in page
    completed = set(re.findall(r'<tr class="checkpoint completed" data-checkpoint-id="(\d+)"', page))
    assert completed and not completed & {cid for cid, _ in failed}


# -- the timeline and the renderer, without a master ------------------------------------------------


def _status(n: int, **kw) -> dict[str, Any]:
    return {"state": "RUNNING", "records_in": 100 * n, "records_out": 10 * n, "records_per_second": 50.0,
            "watermark_ms": 1_700_000_000_000 + n, "metrics": {"num_late_records_dropped": n},
            "splits": {"s-0": {"watermark_ms": 1_700_000_000_000 + n, "idle": n % 2 == 1}}, **kw}


def test_the_timeline_keeps_only_its_newest_samples_and_checkpoints():
    timeline = JobTimeline("j", capacity=5, max_checkpoints=3)
    for n in range(20):
        timeline.sample(_status(n), [{"checkpoint_id": c, "completed_ms": 1000 * c, "triggered_ms": 1000 * c - 7,
                                      "kind": "checkpoint", "status": "completed"} for c in range(1, n + 1)],
                        now_ms=1_000 * n)
    samples, rows = timeline.snapshot()
    assert [s.records_in for s in samples] == [1500, 1600, 1700, 1800, 1900]
    assert [s.records_out_per_second for s in samples] == [10.0] * 5  # 10 records per 1000 ms
    assert [r.checkpoint_id for r in rows] == [17, 18, 19] and all(r.duration_ms == 7 for r in rows)
    with pytest.raises(Exception, match="capacity"):
        JobTimeline("j", capacity=0)


def test_failed_checkpoints_come_from_the_coordinators_log_events_with_their_reason_and_subsumed_ones_do_not():
    timeline = JobTimeline("j")
    failure_log = CheckpointFailureLog(timeline).attach()
    coordinator = logging.getLogger(CheckpointFailureLog.LOGGER)
    try:
        coordinator.warning("failed", extra={"event": "checkpoint_failed", "job_id": "j", "checkpoint_id": 4,
                                             "reason": "CHECKPOINT_EXPIRED", "cause": None})
        coordinator.warning("failed", extra={"event": "checkpoint_failed", "job_id": "other", "checkpoint_id": 5,
                                             "reason": "IO_EXCEPTION", "cause": "OSError: x"})
        coordinator.warning("subsumed", extra={"event": "checkpoint_failed", "job_id": "j", "checkpoint_id": 3,
                                               "reason": "CHECKPOINT_SUBSUMED", "cause": None})
        coordinator.warning("failed", extra={"event": "savepoint_failed", "job_id": "j", "checkpoint_id": 6,
                                             "reason": "IO_EXCEPTION", "cause": "OSError: <disk> full"})
    finally:
        failure_log.detach()
    coordinator.warning("after", extra={"event": "checkpoint_failed", "job_id": "j", "checkpoint_id": 7,
                                        "reason": "IO_EXCEPTION", "cause": None})
    timeline.sample(_status(1, num_failed_checkpoints=3))
    _, rows = timeline.snapshot()
    assert [(r.checkpoint_id, r.kind, r.status, r.reason) for r in rows] == [
        (4, "checkpoint", "failed", "CHECKPOINT_EXPIRED"),
        (6, "savepoint", "failed", "IO_EXCEPTION: OSError: <disk> full")]

    page = render_view("j", {"num_failed_checkpoints": 3, "job_name": "j"}, *timeline.snapshot())
    assert page.count('<rect class="bar failed"') == 2
    assert "IO_EXCEPTION: OSError: &lt;disk&gt; full" in page and "<disk>" not in page
    assert "1 failed checkpoint(s) counted by the job are not itemised" in page


class _Handle:
    def __init__(self, path: str, size: int) -> None:
        self.path, self.bytes = path, size


class _Metadata:
    def __init__(self, *handles: _Handle) -> None:
        self._handles = handles

    def files(self):
        return [("op", 0, h) for h in self._handles]


def test_the_incremental_size_counts_the_files_a_checkpoint_added():
    snapshots = {
        "chk-1": _Metadata(_Handle("shared/a", 100), _Handle("shared/b", 50), _Handle("op/0/private", 7)),
        "chk-2": _Metadata(_Handle("shared/a", 100), _Handle("shared/c", 30), _Handle("op/0/private", 8)),
        "sp-3": _Metadata(_Handle("op/0/everything", 200)),
    }
    timeline = JobTimeline("j", read_metadata=lambda uri: snapshots[uri])
    history = [{"checkpoint_id": 1, "external_pointer": "chk-1", "completed_ms": 1, "size_bytes": 157},
               {"checkpoint_id": 2, "external_pointer": "chk-2", "completed_ms": 2},
               {"checkpoint_id": 3, "external_pointer": "sp-3", "completed_ms": 3, "kind": "savepoint"},
               {"checkpoint_id": 4, "external_pointer": "gone", "completed_ms": 4, "size_bytes": 9}]
    timeline.sample(_status(1), history)
    _, rows = timeline.snapshot()
    assert [(r.checkpoint_id, r.full_bytes, r.incremental_bytes) for r in rows] == [
        (1, 157, 157),  # the first one seen: written in full
        (2, 138, 38),  # shared/c and its private file
        (3, 200, 200),  # a savepoint is self-contained
        (4, 9, None),  # its metadata cannot be read: unknown
    ]


class _Job:
    job_id = "j"

    def status(self) -> dict[str, Any]:
        return _status(3, job_name="j")

    def checkpoint_history(self) -> list[dict[str, Any]]:
        return [{"checkpoint_id": 1, "completed_ms": 1_000, "triggered_ms": 990}]


def test_the_view_needs_the_control_token_like_every_control_route():
    from engine.master.api import create_app
    from engine.master.operations import OperationRegistry
    from engine.master.server import ControlServer

    server = ControlServer(create_app(_Job(), OperationRegistry(), token="s3cret")).start()
    try:
        _check_view_auth(httpx.Client(base_url=server.url, timeout=30))
    finally:
        server.stop()


def _check_view_auth(client: httpx.Client) -> None:
    assert client.get("/jobs/j/view").status_code == 401
    assert client.get("/jobs/j/view", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert client.get("/jobs/other/view", headers={"Authorization": "Bearer s3cret"}).status_code == 404
    page = client.get("/jobs/j/view", headers={"Authorization": "Bearer s3cret"})
    assert page.status_code == 200 and 'data-checkpoint-id="1"' in page.text and "s3cret" not in page.text


def test_epoch_duration_is_the_time_between_two_samples_over_the_epochs_completed_in_between():
    timeline = JobTimeline("j")
    for time_ms, epoch in ((0, 0), (2_000, 4), (4_000, 5), (6_000, 5), (8_000, 9)):
        timeline.sample(_status(1, epoch=epoch), now_ms=time_ms)
    samples, rows = timeline.snapshot()
    assert [s.epoch_ms for s in samples] == [None, 500.0, 2000.0, None, 500.0]
    page = render_view("j", {}, samples, rows)
    epochs = _points(page, "epochs")["epoch"]
    assert [(t, v) for t, v in epochs] == [(2_000, 500.0), (4_000, 2000.0), (8_000, 500.0)]


def test_a_view_before_the_first_sample_says_so_and_a_long_timeline_is_thinned_per_chart():
    page = render_view("j", {"state": "CREATED"}, [], [])
    assert page.count("no samples yet") == 4 and "no checkpoint completed or failed yet" in page
    assert "<svg" not in page

    timeline = JobTimeline("j", capacity=720)
    for n in range(720):
        status = _status(n)
        status["splits"] = {f"s-{k:02}": {"watermark_ms": 1_700_000_000_000 + n, "idle": False} for k in range(64)}
        timeline.sample(status, now_ms=1_000 * n)
    page = render_view("j", {}, *timeline.snapshot())
    marks = _points(page, "watermarks")
    assert len(marks) == 64 and all(24 <= len(p) <= 40 for p in marks.values())
    assert all(p[-1] == (719_000, 1_700_000_000_719) for p in marks.values())  # the newest point is always drawn
    assert len(_points(page, "throughput")["in"]) <= 241
