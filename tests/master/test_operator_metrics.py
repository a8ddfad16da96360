"""Per-operator counts, subtask watermarks and state sizes (issue 18) from a real ``sluice run`` master on the
local runtime: its control API status, its ``/metrics`` and its job view must show the values the job implies.

The job (tests/master/operator_jobs.py, parallelism 2) reads 1000 numbered records ``(user-(n % 5), n)`` with
event time ``n`` from two splits of 500 that then stay open, keeps the even ones and sums them per user::

    split collection-0: n = 0..499   -> subtask 0 of "numbers -> Filter": in 500, out 250, watermark 498
    split collection-1: n = 500..999 -> subtask 1 of "numbers -> Filter": in 500, out 250, watermark 998
    "totals -> Sink": in 500 (every even record), out 500 (a rolling sum emits one per input),
                      input watermark of both subtasks min(498, 998) = 498 (monotonous: max timestamp - 1)
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from master_run import get, sluice_run, wait_for

SOURCE, TOTALS = "v0.n0.numbers", "totals"


def _samples(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """``{(sample name, sorted labels without job): value}`` of a /metrics scrape."""
    out = {}
    for family in text_string_to_metric_families(get(url).text):
        for s in family.samples:
            labels = tuple(sorted((k, v) for k, v in s.labels.items() if k != "job"))
            out[(s.name, labels)] = s.value
    return out


@pytest.fixture(scope="module")
def settled_job(tmp_path_factory) -> Iterator[dict[str, Any]]:
    """The job once every record went through and a checkpoint holds the sums' state."""
    tmp_path = tmp_path_factory.mktemp("operators")
    with sluice_run("operator_jobs:build", "opjob", tmp_path, "--parallelism", "2", "--checkpoint-interval", "300",
                    "--status-interval", "200") as job:
        def settled() -> dict[str, Any] | None:
            status = get(job["base"]).json()
            ops = status.get("operators") or {}
            done = TOTALS in ops and ops[TOTALS]["records_out"] == 500 and status["state_size_bytes"].get(TOTALS)
            return status if done else None

        status = wait_for(settled, timeout_s=90, what="all 1000 records through and a checkpoint of the sums")
        yield {**job, "status": status, "storage": (tmp_path / "chk").as_uri()}


def test_the_status_reports_each_chains_records_and_subtask_watermarks_as_the_job_implies(settled_job):
    ops = settled_job["status"]["operators"]
    assert set(ops) == {SOURCE, TOTALS}
    source, totals = ops[SOURCE], ops[TOTALS]
    assert (source["name"], source["parallelism"]) == ("numbers -> Filter", 2)
    assert (source["records_in"], source["records_out"]) == (1000, 500)  # the filter drops half
    assert [(s["index"], s["records_in"], s["records_out"], s["watermark_ms"]) for s in source["subtasks"]] == \
        [(0, 500, 250, 498), (1, 500, 250, 998)]
    assert (totals["records_in"], totals["records_out"], totals["watermark_ms"]) == (500, 500, 498)
    # the five users' 100 sums each land on the subtask owning their key group
    assert sum(s["records_in"] for s in totals["subtasks"]) == 500
    assert all(s["records_in"] % 100 == 0 and s["records_in"] == s["records_out"] for s in totals["subtasks"])
    assert [s["watermark_ms"] for s in totals["subtasks"]] == [498, 498]
    assert settled_job["status"]["records_in"] == source["records_in"]


def test_metrics_expose_operator_counters_subtask_watermarks_and_the_last_checkpoints_state_sizes(settled_job):
    from checkpoints.restore import read_snapshot_metadata

    base = settled_job["base"]
    metrics = _samples(f"{settled_job['control_url']}/metrics")

    def value(name: str, **labels: str) -> float:
        return metrics[(name, tuple(sorted(labels.items())))]

    src = {"operator": SOURCE, "operator_name": "numbers -> Filter"}
    tot = {"operator": TOTALS, "operator_name": "totals -> Sink(FileSink)"}
    assert value("sluice_operator_records_in_total", **src) == 1000
    assert value("sluice_operator_records_out_total", **src) == 500
    assert value("sluice_operator_records_in_total", **tot) == 500
    assert value("sluice_operator_records_out_total", **tot) == 500
    assert value("sluice_operator_watermark_ms", **src, subtask="0") == 498
    assert value("sluice_operator_watermark_ms", **src, subtask="1") == 998
    assert value("sluice_operator_watermark_ms", **tot, subtask="0") == 498
    assert value("sluice_operator_watermark_ms", **tot, subtask="1") == 498
    assert not any(name == "sluice_epoch_duration_seconds_count" for name, _ in metrics)  # no epochs on local

    def sizes_match_the_last_checkpoint() -> bool:
        """Checkpoints go on while the test reads: compare a scrape with the checkpoint current at that scrape."""
        history = get(f"{base}/checkpoints").json()["history"]
        scraped = {dict(labels)["operator"]: v for (name, labels), v in
                   _samples(f"{settled_job['control_url']}/metrics").items() if name == "sluice_state_size_bytes"}
        after = get(f"{base}/checkpoints").json()["history"]
        if after[-1]["checkpoint_id"] != history[-1]["checkpoint_id"]:
            return False
        metadata = read_snapshot_metadata(history[-1]["external_pointer"])
        expected: dict[str, float] = {op.uid: 0.0 for op in metadata.operators}
        for uid, _, handle in metadata.files():
            expected[uid] += handle.bytes
        assert scraped == expected
        return expected[TOTALS] > 0

    wait_for(sizes_match_the_last_checkpoint, timeout_s=30, what="a scrape between two checkpoints")


def test_the_view_shows_each_chains_counts_and_each_subtasks_watermark(settled_job):
    page = get(f"{settled_job['base']}/view").text
    rows = dict(re.findall(r'<tr class="operator" data-operator="([^"]+)">(.*?)</tr>', page))
    for uid, (records_in, records_out) in {SOURCE: (1000, 500), TOTALS: (500, 500)}.items():
        assert f'<td class="records-in">{records_in}</td>' in rows[uid], rows[uid]
        assert f'<td class="records-out">{records_out}</td>' in rows[uid], rows[uid]
    assert '<td class="watermark">1970-01-01 00:00:00.498 UTC</td>' in rows[TOTALS]
    marks = re.findall(r'<tr class="subtask-watermark" data-operator="([^"]+)" data-subtask="(\d+)" '
                       r'data-watermark-ms="(\d*)"', page)
    assert sorted(marks) == [(TOTALS, "0", "498"), (TOTALS, "1", "498"), (SOURCE, "0", "498"), (SOURCE, "1", "998")]
    # one rate line per chain and one watermark line per subtask, drawn from the master's samples
    series = set(re.findall(r'<g class="series" data-series="([^"]+)"', page))
    assert {"numbers -&gt; Filter [v0.n0.numbers]", "totals -&gt; Sink(FileSink) [totals]"} <= series
    assert {f"totals -&gt; Sink(FileSink) [totals] #{i}" for i in (0, 1)} <= series
    svg = re.search(r'<svg [^>]*data-chart="subtask-watermarks".*?</svg>', page, re.S).group(0)
    newest = {}
    for name, t, v in re.findall(r'data-series="([^"]+)" data-time-ms="(\d+)" data-value="([^"]+)"', svg):
        newest[name] = float(v)  # points are in time order
    assert newest["numbers -&gt; Filter [v0.n0.numbers] #1"] == 998
