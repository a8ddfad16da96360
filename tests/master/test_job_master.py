"""The job master runs a real job on the local runtime and serves its control API over HTTP."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from engine.errors import JobDefinitionError
from engine.master.client import ControlApiError, ControlClient, discover_control_url
from engine.master.master import JobMaster, MasterConfig

UNBOUNDED = {"events_per_split": None, "events_per_second": 50, "num_keys": 20}


def _config(tmp_path: Path, **kw) -> MasterConfig:
    base = dict(job_spec="engine.examples.purchases:build", job_name="purchases", params=dict(UNBOUNDED),
                checkpoint_interval_ms=200, storage_uri=(tmp_path / "chk").as_uri(),
                savepoint_dir=(tmp_path / "sp").as_uri(), output_dir=str(tmp_path / "out"),
                status_interval_ms=100, linger_after_end_s=0.5, runtime_options={"bundle_size": 64})
    base.update(kw)
    return MasterConfig(**base)


def _wait_for(predicate, timeout_s: float = 30.0, what: str = "condition"):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@contextmanager
def _started(config: MasterConfig) -> Iterator[JobMaster]:
    """A started master that is cancelled however the test ends: a master left running would slow every later test."""
    master = JobMaster(config).start()
    try:
        yield master
    finally:
        if not master.client.get_job_execution_result().done():
            master.client.cancel()
            master.wait()


@pytest.fixture
def running(tmp_path: Path):
    with _started(_config(tmp_path)) as master:
        client = ControlClient(master.url, "purchases")
        try:
            _wait_for(lambda: (client.status().get("last_completed_checkpoint") or 0) >= 2, timeout_s=120,
                      what="two checkpoints")
            yield master, client
        finally:
            client.close()


def test_status_reports_checkpoints_watermark_and_throughput(running) -> None:
    _, client = running
    status = client.status()
    assert status["state"] == "RUNNING" and status["job_id"] == "purchases"
    assert status["last_completed_checkpoint"] >= 2
    assert status["watermark_ms"] > 1_600_000_000_000
    assert status["records_in"] > 0
    history = client.checkpoints()
    assert [h["checkpoint_id"] for h in history] == sorted(h["checkpoint_id"] for h in history)


def test_a_retried_savepoint_request_with_the_same_trigger_id_takes_one_savepoint(running, tmp_path: Path) -> None:
    _, client = running
    first = client.trigger_savepoint(trigger_id="airflow-run-1")
    again = client.trigger_savepoint(trigger_id="airflow-run-1")
    assert first == again == "airflow-run-1"
    op = client.wait("savepoint", first)
    assert op["status"]["id"] == "COMPLETED"
    assert len(list((tmp_path / "sp" / "purchases").iterdir())) == 1
    other = client.wait("savepoint", client.trigger_savepoint())
    assert other["operation"]["location"] != op["operation"]["location"]


def test_the_status_document_in_storage_leads_clients_to_the_control_api(running, tmp_path: Path) -> None:
    master, _ = running
    url = _wait_for(lambda: _try_discover(tmp_path), what="status document")
    assert url == master.url


def _try_discover(tmp_path: Path):
    try:
        return discover_control_url((tmp_path / "chk").as_uri(), "purchases")
    except ControlApiError:
        return None


def test_metrics_are_served_in_prometheus_text_format(running) -> None:
    master, _ = running
    text = httpx.get(f"{master.url}/metrics").text
    assert 'sluice_records_in_total{job="purchases"}' in text
    assert "# TYPE sluice_completed_checkpoints_total counter" in text


def test_checkpoint_histograms_count_every_completed_checkpoint_and_savepoint(running) -> None:
    """Issue 18: checkpoint durations, sizes and alignments as Prometheus histograms, as a scraper reads them."""
    from prometheus_client.parser import text_string_to_metric_families

    master, client = running
    op = client.wait("savepoint", client.trigger_savepoint())
    assert op["status"]["id"] == "COMPLETED"
    _wait_for(lambda: client.status().get("num_completed_checkpoints", 0) >= 3, 60, "three checkpoints")

    def samples() -> dict:
        text = httpx.get(f"{master.url}/metrics").text
        return {(s.name, tuple(sorted(s.labels.items()))): s.value
                for family in text_string_to_metric_families(text) for s in family.samples}

    scraped = samples()
    history = master.client.checkpoint_history()
    for kind in ("checkpoint", "savepoint"):
        labels = (("job", "purchases"), ("kind", kind))
        seen = [r for r in history if r["kind"] == kind]
        assert seen and scraped[("sluice_checkpoint_duration_seconds_count", labels)] >= len(seen)
        total_s = sum(r["completed_ms"] - r["triggered_ms"] for r in seen) / 1000
        assert scraped[("sluice_checkpoint_duration_seconds_sum", labels)] >= total_s - 1e-6
        assert scraped[("sluice_checkpoint_alignment_seconds_count", labels)] >= len(seen)
    completed = scraped[("sluice_checkpoints_total", (("job", "purchases"), ("status", "completed")))]
    assert completed >= 3 and ("sluice_checkpoints_total", (("job", "purchases"), ("status", "failed"))) in scraped
    # per split (seed 004): the generator's four splits, each with its watermark, none idle
    split_marks = {dict(k[1])["split"]: v for k, v in scraped.items() if k[0] == "sluice_split_watermark_ms"}
    assert len(split_marks) == 4 and all(v > 1_600_000_000_000 for v in split_marks.values()), split_marks
    assert {dict(k[1])["split"]: v for k, v in scraped.items() if k[0] == "sluice_split_idle"} == \
        dict.fromkeys(split_marks, 0.0)
    assert client.status()["splits"].keys() == split_marks.keys()
    # observed once each: a second scrape counts only what completed since
    again = samples()
    labels = (("job", "purchases"), ("kind", "savepoint"))
    assert again[("sluice_checkpoint_duration_seconds_count", labels)] == \
        scraped[("sluice_checkpoint_duration_seconds_count", labels)] == 1


def test_stop_with_savepoint_drains_and_the_savepoint_restores_at_another_parallelism(running, tmp_path: Path) -> None:
    master, client = running
    op = client.wait("stop", client.stop(drain=True))
    assert op["status"]["id"] == "COMPLETED"
    result = master.wait()
    assert result.job_id == "purchases"
    location = op["operation"]["location"]
    with _started(_config(tmp_path, parallelism=3, from_savepoint=location)) as restored:
        rclient = ControlClient(restored.url, "purchases")

        def checkpointed():
            s = rclient.status()
            return s if (s.get("last_completed_checkpoint") or 0) > 0 else None

        status = _wait_for(checkpointed, timeout_s=120, what="first checkpoint after restore")
        assert status["parallelism"] == 3
        # checkpoint ids continue after the savepoint's id
        assert status["last_completed_checkpoint"] > int(location.rsplit("savepoint-", 1)[1].split("-")[0])
        rclient.close()


def test_a_job_started_without_a_savepoint_dir_takes_its_savepoints_under_its_checkpoint_storage(tmp_path: Path) -> None:
    """A new user's ``sluice run --storage CKPT`` without ``--savepoint-dir`` could not be stopped with a savepoint:
    the job had no default directory, and a ``--savepoint-dir`` given to ``stop`` was refused as outside the
    master's savepoint root, which was CKPT already.  The root is now also the default directory."""
    with _started(_config(tmp_path, savepoint_dir=None)) as master:
        client = ControlClient(master.url, "purchases")
        try:
            _wait_for(lambda: (client.status().get("last_completed_checkpoint") or 0) >= 1, timeout_s=120,
                      what="a checkpoint")
            op = client.wait("stop", client.stop())
        finally:
            client.close()
        assert op["status"]["id"] == "COMPLETED", op
        master.wait()
    assert op["operation"]["location"].startswith((tmp_path / "chk").as_uri() + "/purchases/savepoint-")


def test_cancelling_a_running_job_ends_it_canceled(running) -> None:
    master, _ = running
    master.client.cancel()
    master.wait()
    assert master.client.get_job_status() == "CANCELED"


def test_a_token_protected_master_refuses_requests_without_the_token(tmp_path: Path) -> None:
    with _started(_config(tmp_path, token="s3cret", checkpoint_interval_ms=None)) as master:
        assert httpx.get(f"{master.url}/jobs/purchases").status_code == 401
        assert httpx.get(f"{master.url}/healthz").status_code == 200
        assert ControlClient(master.url, "purchases", token="s3cret").status()["state"] in ("RUNNING", "CREATED")
        with pytest.raises(ControlApiError, match="401"):
            ControlClient(master.url, "purchases", token="wrong").status()


@pytest.mark.parametrize("change, parameter", [
    ({"host": "0.0.0.0"}, "token"),  # a control API off loopback without a token
    ({"job_spec": "engine.examples.purchases"}, "job"),  # no :function
    # a job whose plan cannot be built: refused in the job's thread after the lease and the desired state
    # 'running' were written (a new user's `sluice restore ... --parallelism 200` of a stopped job: supervision
    # would have restarted it, and its FINISHED status became FAILED)
    ({"parallelism": 200}, "parallelism"),
])
def test_a_master_refuses_a_bad_config_naming_the_parameter_before_it_touches_storage(
        tmp_path: Path, change: dict, parameter: str) -> None:
    """Library callers (and Airflow) got these refusals only from ``sluice run``: JobMaster.start() took the
    lease and recorded the desired state 'running' first, and then failed (the token one left the lease held)."""
    master = JobMaster(_config(tmp_path, token=None, **change))
    with pytest.raises(JobDefinitionError, match=f"`{parameter}`"):
        master.start()
    assert not (tmp_path / "chk").exists() or not any((tmp_path / "chk").rglob("*")), \
        sorted(str(p) for p in (tmp_path / "chk").rglob("*"))
    assert master.lease is None


def test_the_sluice_cli_runs_savepoints_and_stops_a_job(tmp_path: Path) -> None:
    storage = (tmp_path / "chk").as_uri()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    run = subprocess.Popen(
        [sys.executable, "-m", "engine.cli", "run", "engine.examples.purchases:build", "--storage", storage,
         "--savepoint-dir", (tmp_path / "sp").as_uri(), "--output", str(tmp_path / "out"),
         "--checkpoint-interval", "300", "--param", "events_per_split=null", "--param", "events_per_second=50",
         "--option", "bundle_size=64"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        cli = [sys.executable, "-m", "engine.cli"]
        _wait_for(lambda: _try_discover(tmp_path), what="status document")
        sp = subprocess.run(cli + ["savepoint", "purchases", "--storage", storage], capture_output=True, text=True,
                            env=env, timeout=120)
        assert sp.returncode == 0, sp.stderr
        assert sp.stdout.strip().startswith((tmp_path / "sp").as_uri())
        stop = subprocess.run(cli + ["stop", "purchases", "--storage", storage], capture_output=True, text=True,
                              env=env, timeout=120)
        assert stop.returncode == 0, stop.stderr
        out, _ = run.communicate(timeout=60)
        assert run.returncode == 0
        assert json.loads(out.strip().splitlines()[-1])["job_id"] == "purchases"
        # without --savepoint-dir, `checkpoints list` finds them where the master put them (its status document
        # names the folder); a new user saw only the checkpoints and took the savepoints for lost
        listed = subprocess.run(cli + ["checkpoints", "list", "purchases", "--storage", storage, "--json"],
                                capture_output=True, text=True, env=env, timeout=60)
        assert listed.returncode == 0, listed.stderr
        uris = [s["uri"] for s in json.loads(listed.stdout)["savepoints"]]
        assert len(uris) == 2 and all(u.startswith((tmp_path / "sp").as_uri()) for u in uris), uris
        missing = subprocess.run(cli + ["status", "nosuchjob", "--storage", storage], capture_output=True,
                                 text=True, env=env, timeout=60)
        assert missing.returncode == 1 and missing.stderr.startswith("error: job 'nosuchjob'")
    finally:
        if run.poll() is None:
            run.kill()


def test_checkpoints_of_a_cancelled_supervised_job_are_retained_for_restarts(running, tmp_path: Path) -> None:
    master, client = running
    client.cancel()
    master.wait()
    from checkpoints import CheckpointStorage, RetainedCheckpointStore

    store = RetainedCheckpointStore(CheckpointStorage((tmp_path / "chk").as_uri(), "purchases"), retained=3)
    retained = store.recover()
    assert 1 <= len(retained) <= 3
    latest = store.get_latest()
    assert latest is not None and latest.metadata.checkpoint_id == max(r.checkpoint_id for r in retained)


@pytest.mark.parametrize(("args", "named"), [
    (["--parallelism", "0"], "--parallelism"),
    (["--retained", "0"], "--retained"),
    (["--output", "hdfs://cluster/out"], "--output"),
    (["--savepoint-dir", "gs://bucket/sp"], "--savepoint-dir"),
    (["--storage", "s3:///no-bucket"], "--storage"),
])
def test_bad_run_options_are_refused_before_anything_starts(args: list[str], named: str) -> None:
    from click.testing import CliRunner

    from engine.cli import main

    result = CliRunner().invoke(main, ["run", "engine.examples.purchases:build", *args])
    assert result.exit_code == 2 and f"Invalid value for '{named}'" in result.output, result.output


@pytest.mark.parametrize("lease_token, released, expected", [(2, False, "new"), (1, False, "old"), (2, True, "old")])
def test_a_status_written_by_a_superseded_master_does_not_lead_clients_to_it(tmp_path: Path, lease_token: int,
                                                                              released: bool, expected: str) -> None:
    """A master frozen between its lease check and its status write finishes the write when it wakes, after another
    master took the lease: the status then names the dead master's URL.  The lease (written compare-and-set) names
    the holder's, and a later holder's lease wins; the status stays the answer otherwise."""
    from checkpoints.backends import open_store
    from checkpoints.layout import lease_key
    from checkpoints.lease import JobLease
    from checkpoints.status import StatusDocument, write_status

    store = open_store((tmp_path / "chk").as_uri())
    urls = {"old": "http://127.0.0.1:1111", "new": "http://127.0.0.1:2222"}
    write_status(store, StatusDocument(job_id="purchases", heartbeat_ms=1,
                                       extra={"control_url": urls["old"], "fencing_token": 1}))
    store.put_bytes(lease_key("purchases"), JobLease(
        job_id="purchases", holder="h", fencing_token=lease_token, acquired_ms=1, renewed_ms=1, ttl_ms=10_000,
        control_url=urls["new"] if lease_token == 2 else urls["old"], released=released).to_json())
    assert discover_control_url((tmp_path / "chk").as_uri(), "purchases") == urls[expected]
