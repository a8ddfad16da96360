"""The Grafana dashboard shipped in infra/grafana/ (issue 18) queries only series a real job master serves.

No Grafana runs here, so the dashboard's real client is checked from both ends: its JSON has the shape
Grafana imports (panels on a 24-column grid, Prometheus targets, the job and data-source variables), and
every metric and label its PromQL names is in what a running job master's ``/metrics`` answers after a few
checkpoints and a savepoint, parsed with prometheus_client's own parser.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from engine.master.client import ControlClient
from engine.master.master import JobMaster, MasterConfig

DASHBOARD = Path(__file__).resolve().parents[2] / "infra" / "grafana" / "sluice-job.json"
SELECTOR = re.compile(r"(sluice_[a-z_]+)(\{([^}]*)\})?")
#: series only the Spark runtime has (its epochs): checked against a Spark master below
SPARK_ONLY = {"sluice_epoch_duration_seconds_bucket"}


def _expressions(dashboard: dict) -> list[str]:
    return [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]


def test_the_dashboard_has_the_shape_grafana_imports() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] and dashboard["title"] and isinstance(dashboard["schemaVersion"], int)
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    assert "label_values(" in variables["job"]["definition"]
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids)) >= 8
    for panel in dashboard["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["w"] > 0 and grid["x"] + grid["w"] <= 24, panel["title"]
        assert panel["targets"] and all(t["datasource"]["uid"] == "${datasource}" for t in panel["targets"])
    for expr in _expressions(dashboard):
        assert expr.count("(") == expr.count(")") and expr.count("{") == expr.count("}"), expr
        assert 'job=~"$job"' in expr, f"every query is scoped to the chosen jobs: {expr}"


def _served_by_a_running_master(tmp_path: Path, runtime: str, **options: object) -> dict[str, set[str]]:
    """Metric name -> label names that a real master's ``/metrics`` answers after a savepoint and 3 checkpoints."""
    config = MasterConfig(job_spec="engine.examples.purchases:build", job_name="purchases",
                          params={"events_per_split": None, "events_per_second": 50, "num_keys": 20},
                          checkpoint_interval_ms=200, storage_uri=(tmp_path / "chk").as_uri(),
                          savepoint_dir=(tmp_path / "sp").as_uri(), output_dir=str(tmp_path / "out"),
                          status_interval_ms=100, linger_after_end_s=0.5, runtime=runtime, runtime_options=options)
    master = JobMaster(config).start()
    try:
        client = ControlClient(master.url, "purchases")
        assert client.wait("savepoint", client.trigger_savepoint(), timeout_s=300)["status"]["id"] == "COMPLETED"
        deadline = time.monotonic() + 120
        while client.status().get("num_completed_checkpoints", 0) < 3 and time.monotonic() < deadline:
            time.sleep(0.1)
        text = httpx.get(f"{master.url}/metrics").text
    finally:
        master.client.cancel()
        master.wait()
    served: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            served.setdefault(sample.name, set()).update(sample.labels)
    return served


def test_every_series_the_dashboard_queries_is_served_by_a_running_master(tmp_path: Path) -> None:
    served = _served_by_a_running_master(tmp_path, "local", bundle_size=64)
    dashboard = json.loads(DASHBOARD.read_text())
    queried = 0
    for expr in _expressions(dashboard) + [dashboard["templating"]["list"][1]["definition"]]:
        for name, _, labels in SELECTOR.findall(expr):
            if name in SPARK_ONLY:
                assert name not in served, f"{name} is served by the local runtime: drop it from SPARK_ONLY"
                continue
            assert name in served, f"{name} (in {expr}) is not served; served: {sorted(served)}"
            for matcher in filter(None, (m.strip() for m in labels.split(","))):
                label = re.split(r"[=!~]", matcher, maxsplit=1)[0]
                assert label in served[name], f"{name} has no label {label!r} (in {expr})"
            queried += 1
    assert queried >= 15


def test_the_spark_only_series_the_dashboard_queries_are_served_by_a_spark_master(spark, tmp_path: Path) -> None:
    served = _served_by_a_running_master(tmp_path, "spark", epoch_records=20, epoch_interval_ms=100)
    queried = [name for expr in _expressions(json.loads(DASHBOARD.read_text()))
               for name, _, _ in SELECTOR.findall(expr) if name in SPARK_ONLY]
    assert set(queried) == SPARK_ONLY
    for name in SPARK_ONLY:
        assert name in served and "le" in served[name] and "job" in served[name], sorted(served)
    assert "sluice_operator_records_in_total" in served and "operator" in served["sluice_operator_records_in_total"]
