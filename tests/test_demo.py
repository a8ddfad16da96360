"""The README's main job, end to end: Spark run reading a monitored folder as a feeder lands files, savepoint,
stop, a file landing while the job is down, GE validation, rescaled restore, stop with drain, output identical
to an uninterrupted local-runtime run fed the same way (each file read once across the stop/restore), and the
HTML report the demo ends with, read as text and rendered in headless Chromium.  The demo runs once per
module (it takes a minute on Spark); each test reads what it left."""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

import pytest

from browser_shots import visit
from engine.demo import DemoConfig, run_demo

CHARTS_WITH_DATA = ("throughput", "operator-rates", "watermarks", "subtask-watermarks", "checkpoint-durations",
                    "checkpoint-sizes", "epochs", "late-dead-letters")
#: the demo's source is a monitored folder: a split per file the feeder landed (engine/examples/purchase_files.py)
SPLIT_NAME = re.compile(r"purchases-\d{5}\.jsonl$")


@pytest.fixture(scope="module")
def demo(tmp_path_factory, spark) -> dict[str, Any]:
    # ``spark``: the suite's session, started with the test folders on the workers' PYTHONPATH.  Without it,
    # a demo run first in a test process would start the session itself, without them, and the Spark
    # tests that process runs later would find their helper modules missing in the workers.
    lines: list[str] = []
    summary = run_demo(DemoConfig(tmp_path_factory.mktemp("demo"), events_per_split=3_000), lines.append)
    return {"summary": summary, "lines": lines}


@pytest.mark.spark
@pytest.mark.slow
def test_the_demo_story_restores_a_validated_savepoint_at_another_parallelism_exactly_once(demo) -> None:
    summary, lines = demo["summary"], demo["lines"]
    assert summary["savepoint_validation"] == "passed"
    assert summary["identical_to_uninterrupted_local_run"] is True, summary.get("differences")
    assert summary["checkpoints_before_stop"], "the job must have checkpointed before it was stopped"
    assert summary["files"] == 12  # 4 splits x 3000 events in files of 1000
    assert any(re.search(r"file 9 of 12 landed while the job was down", line) for line in lines), lines
    for kind in ("tumbling", "sliding", "session", "count"):
        assert summary[f"{kind}_results"] > 0, kind
    assert any(line.startswith("3. validating") for line in lines)
    assert lines[-1] == f"6. report: {summary['report']}"


@pytest.mark.spark
@pytest.mark.slow
def test_the_demo_report_has_the_charts_of_both_runs_the_validation_summary_and_the_data_docs_link(demo) -> None:
    report = Path(demo["summary"]["report"])
    page = report.read_text(encoding="utf-8")
    assert report.name == "report.html" and page.startswith("<!doctype html>")
    assert "<title>Sluice demo report: job purchases (demo)</title>" in page
    # one SVG per chart; Spark runs in epochs, so the epoch chart has data too
    assert re.findall(r'<svg [^>]*data-chart="([^"]+)"', page) == list(CHARTS_WITH_DATA)
    # the files being read on the watermark chart: a lane each (titled with its full id) for the files a status
    # sample caught open, and a line with points once a file had a watermark; a file is read within one epoch,
    # so a sample rarely sees it with one
    watermarks = re.search(r'<svg [^>]*data-chart="watermarks".*?</svg>', page, re.S).group(0)
    lines = re.findall(r'<g class="series" data-series="([^"]+)"', watermarks)
    lanes = re.findall(r'<rect class="lane"[^>]*><title>([^<]+)</title>', watermarks)
    assert lanes and all(SPLIT_NAME.search(lane) for lane in lanes), lanes
    assert set(lines) <= set(lanes), lines
    for split in lines:
        assert len(re.findall(rf'<circle class="point"[^>]*data-series="{re.escape(split)}"', watermarks)) >= 1
    # both runs: samples before the stop and after the restore; the savepoints among the checkpoint rows
    assert re.search(r'<tr class="checkpoint completed" data-checkpoint-id="\d+"><td>\d+</td><td>savepoint</td>',
                     page)
    # the validation summary, as Great Expectations reported it
    assert '<table class="validation" data-status="passed">' in page
    assert re.search(r"<tr><th>rows validated</th><td>[1-9]\d*</td></tr>", page)
    assert len(re.findall(r'<tr class="asset">', page)) >= 1
    link = re.search(r'<a class="data-docs" href="([^"]+)">', page)
    assert link, "no Data Docs link"
    docs = html.unescape(link.group(1))
    assert docs.startswith("file://") and Path(docs.removeprefix("file://")).is_file(), docs
    assert "<script" not in page and "http://" not in page.replace("http://www.w3.org/2000/svg", "")
    assert "https://" not in page


@pytest.mark.spark
@pytest.mark.slow
def test_the_demo_report_renders_offline_in_headless_chromium(demo) -> None:
    report = Path(demo["summary"]["report"])
    seen, shot = visit(report.as_uri(), "demo_report.png", {
        "charts": ("svg[data-chart]", "els => els.map(e => e.dataset.chart)"),
        "lanes": ("svg[data-chart=watermarks] rect.lane", "els => els.map(e => e.textContent)"),
        "lines": ("svg[data-chart=watermarks] g.series", "els => els.map(e => e.dataset.series)"),
        "validation": ("table.validation", "els => els.map(e => e.dataset.status)"),
        "data_docs": ("a.data-docs", "els => els.map(e => e.href)"),
    })
    assert seen.errors == []
    assert seen.requests == [report.as_uri()]  # the report itself, nothing else
    assert seen.probes["charts"] == list(CHARTS_WITH_DATA)
    assert seen.probes["lanes"] and all(SPLIT_NAME.search(lane) for lane in seen.probes["lanes"])
    assert set(seen.probes["lines"]) <= set(seen.probes["lanes"])
    assert seen.probes["validation"] == ["passed"] and seen.probes["data_docs"][0].startswith("file://")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
