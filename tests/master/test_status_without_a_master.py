"""``sluice status --storage`` shows a job whose master is gone from the status document it left (a user found
that after SIGTERM, ``stop`` or ``kill -9`` status only said the master could not be reached, while the document
said SUSPENDED with the signal)."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from checkpoints.backends import open_store
from checkpoints.status import StatusDocument, Suspension, read_status, write_status
from engine.cli import main as sluice


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens once the socket is closed


def test_status_falls_back_to_the_status_document_when_no_master_answers(tmp_path: Path) -> None:
    storage = (tmp_path / "chk").as_uri()
    now = int(time.time() * 1000)
    write_status(open_store(storage), StatusDocument(
        job_id="purchases", heartbeat_ms=now, state="SUSPENDED", last_completed_checkpoint=12,
        extra={"control_url": f"http://127.0.0.1:{_closed_port()}"},
        suspension=Suspension(signal="SIGTERM", received_ms=now, exit_status=143, stopped_ms=now)))
    result = CliRunner().invoke(sluice, ["status", "purchases", "--storage", storage, "--json"])
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    assert shown["state"] == "SUSPENDED" and shown["suspension"]["signal"] == "SIGTERM"
    assert shown["last_completed_checkpoint"] == 12 and shown["source"] == "status document"
    assert "no job master answers" in shown["note"]


def test_status_of_a_job_that_never_ran_still_says_so(tmp_path: Path) -> None:
    result = CliRunner().invoke(sluice, ["status", "purchases", "--storage", (tmp_path / "chk").as_uri()])
    assert result.exit_code != 0
    assert "has published no status document" in str(result.exception) + result.output


def test_human_status_of_a_status_document_says_what_happened_in_a_few_lines(tmp_path: Path) -> None:
    storage = (tmp_path / "chk").as_uri()
    now = int(time.time() * 1000)
    write_status(open_store(storage), StatusDocument(
        job_id="purchases", heartbeat_ms=now - 30_000, state="SUSPENDED", last_completed_checkpoint=12,
        last_completed_ms=now - 40_000, extra={"control_url": f"http://127.0.0.1:{_closed_port()}", "runtime": "spark"},
        suspension=Suspension(signal="SIGTERM", received_ms=now, exit_status=143, stopped_ms=now)))

    result = CliRunner().invoke(sluice, ["status", "purchases", "--storage", storage])  # human by default

    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("job purchases: SUSPENDED (from the status document, heartbeat ")
    assert lines[0].endswith(("(30 s ago))", "(31 s ago))"))  # the second it took to get here
    assert "  runtime spark" in lines and "  suspended on SIGTERM" in lines
    assert any(line.startswith("  last checkpoint 12 at ") and ("(40 s ago)" in line or "(41 s ago)" in line)
               for line in lines)
    assert any(line.startswith("  note: no job master answers") for line in lines)
    # --json for scripts; the older --format json still works and says it is deprecated
    assert json.loads(CliRunner().invoke(sluice, ["status", "purchases", "--storage", storage, "--json"]).stdout)[
        "state"] == "SUSPENDED"
    old = CliRunner().invoke(sluice, ["status", "purchases", "--storage", storage, "--format", "json"])
    assert json.loads(old.stdout)["state"] == "SUSPENDED"
    assert "DeprecationWarning: --format is deprecated; use --json" in old.stderr
    old_human = CliRunner().invoke(sluice, ["status", "purchases", "--storage", storage, "--format", "human"])
    assert old_human.stdout.startswith("job purchases: SUSPENDED (from the status document, heartbeat ")


def test_list_shows_every_job_under_the_storage_root_with_its_state_and_last_checkpoint(tmp_path: Path) -> None:
    storage = (tmp_path / "chk").as_uri()
    store = open_store(storage)
    now = int(time.time() * 1000)
    write_status(store, StatusDocument(job_id="purchases", heartbeat_ms=now - 5_000, state="RUNNING",
                                       last_completed_checkpoint=7, last_completed_ms=now - 9_000,
                                       extra={"runtime": "local"}))
    write_status(store, StatusDocument(job_id="clicks", heartbeat_ms=now - 600_000, state="FINISHED"))
    store.put_bytes("clicks/chk-3/_metadata", b"{}")  # not a status document
    store.put_bytes("orphan/chk-1/_metadata", b"{}")  # a folder without one is no job the CLI can show
    store.put_bytes("broken/_status.json", b"not json")

    shown = json.loads(CliRunner().invoke(sluice, ["list", "--storage", storage, "--json"]).stdout)
    human = CliRunner().invoke(sluice, ["list", "--storage", storage])  # human by default

    assert [(j["job_id"], j["state"]) for j in shown["jobs"]] == [
        ("broken", "UNREADABLE"), ("clicks", "FINISHED"), ("purchases", "RUNNING")]
    assert shown["jobs"][2]["last_completed_checkpoint"] == 7 and shown["jobs"][2]["runtime"] == "local"
    assert human.exit_code == 0, human.output
    rows = [line.split() for line in human.output.splitlines()]
    assert rows[0] == ["JOB", "STATE", "HEARTBEAT", "LAST", "CHECKPOINT", "RUNTIME"]
    assert rows[2] == ["clicks", "FINISHED", "10", "min", "ago", "-", "-"]
    assert rows[3] in (["purchases", "RUNNING", "5", "s", "ago", "7", "(9", "s", "ago)", "local"],
                       ["purchases", "RUNNING", "6", "s", "ago", "7", "(10", "s", "ago)", "local"])
    empty = CliRunner().invoke(sluice, ["list", "--storage", (tmp_path / "none").as_uri()])
    assert empty.exit_code == 0 and "no job has published a status document" in empty.output


def test_status_and_history_fall_back_with_a_hint_when_the_master_wants_a_token(tmp_path: Path) -> None:
    """A new user's ``status`` / ``checkpoints history`` of a master run with a token failed outright ("answered
    401") instead of showing what needs no token: the status document and the retained checkpoints."""
    from engine.master.master import JobMaster, MasterConfig

    storage = (tmp_path / "chk").as_uri()
    master = JobMaster(MasterConfig(
        job_spec="engine.examples.purchases:build", job_name="purchases", storage_uri=storage,
        params={"events_per_split": None, "events_per_second": 50, "num_keys": 20}, checkpoint_interval_ms=200,
        output_dir=str(tmp_path / "out"), status_interval_ms=100, linger_after_end_s=0.5, token="s3cret",
        runtime_options={"bundle_size": 64})).start()
    runner = CliRunner(env={"SLUICE_CONTROL_TOKEN": None})
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            document = read_status(open_store(storage), "purchases")
            if document is not None and (document.last_completed_checkpoint or 0) >= 1:
                break
            time.sleep(0.1)
        status = runner.invoke(sluice, ["status", "purchases", "--storage", storage])
        assert status.exit_code == 0, status.output
        assert "RUNNING" in status.output and "bearer token (--token or SLUICE_CONTROL_TOKEN)" in status.output
        history = runner.invoke(sluice, ["checkpoints", "history", "purchases", "--storage", storage])
        assert history.exit_code == 0, history.output
        assert "retained checkpoint(s)" in history.output and "bearer token" in history.output
    finally:
        master.client.cancel()
        master.wait()


def test_control_verbs_on_an_ended_job_say_what_the_status_document_knows(tmp_path: Path) -> None:
    """savepoint / stop / view of a FINISHED or CANCELED job said "cannot reach the job master ... is the job
    running?" while its status document said it had ended."""
    storage = (tmp_path / "chk").as_uri()
    write_status(open_store(storage), StatusDocument(
        job_id="purchases", heartbeat_ms=int(time.time() * 1000), state="CANCELED", last_completed_checkpoint=3,
        extra={"control_url": f"http://127.0.0.1:{_closed_port()}"}))
    for verb in (["savepoint"], ["stop"], ["view"]):
        result = CliRunner().invoke(sluice, [*verb, "purchases", "--storage", storage])
        assert result.exit_code != 0, result.output
        said = result.output + str(result.exception)  # the console entry point prints a SluiceError's message
        assert "job 'purchases' is CANCELED" in said and "is the job running" not in said, (verb, said)


def test_list_marks_a_job_whose_master_was_killed_stale_once_its_lease_expires(tmp_path: Path) -> None:
    """A master killed with SIGKILL publishes nothing more: its status document says RUNNING forever, and
    ``sluice list`` showed the job as running.  The lease it stopped renewing says it is gone."""
    import signal

    from master_run import sluice_run, wait_for

    storage = (tmp_path / "chk").as_uri()

    def listed() -> dict:
        result = CliRunner().invoke(sluice, ["list", "--storage", storage, "--json"])
        assert result.exit_code == 0, result.output
        return {job["job_id"]: job for job in json.loads(result.stdout)["jobs"]}

    with sluice_run("engine.examples.purchases:build", "killed", tmp_path, "--lease-ttl", "2",
                    "--status-interval", "200",
                    params={"events_per_split": None, "events_per_second": 50, "num_keys": 20}) as master:
        running = wait_for(lambda: listed().get("killed", {}).get("state") == "RUNNING" and listed()["killed"],
                           60, "the master's first status document")
        assert "stale" not in running  # a live master renews its lease
        master["process"].send_signal(signal.SIGKILL)
        master["process"].wait()
    assert read_status(open_store(storage), "killed").state == "RUNNING"  # what the dead master left
    stale = wait_for(lambda: listed()["killed"].get("state") == "STALE" and listed()["killed"], 30,
                     "the job listed as stale")
    assert stale["published_state"] == "RUNNING" and "lease" in stale["note"]
    human = CliRunner().invoke(sluice, ["list", "--storage", storage])
    rows = [line.split() for line in human.output.splitlines()]
    assert rows[1][:2] == ["killed", "STALE"], human.output
    assert any(line.startswith("STALE killed: its master stopped renewing its lease")
               for line in human.output.splitlines()), human.output


def _killed_master(storage: str, now: int) -> None:
    """What a SIGKILLed master leaves: a status document saying RUNNING and a lease nobody renews any more."""
    from checkpoints.lease import JobLease, lease_key

    store = open_store(storage)
    write_status(store, StatusDocument(job_id="purchases", heartbeat_ms=now - 40_000, state="RUNNING",
                                       extra={"control_url": f"http://127.0.0.1:{_closed_port()}"}))
    store.put_bytes(lease_key("purchases"), JobLease(
        job_id="purchases", holder="dead-master", fencing_token=1, acquired_ms=now - 60_000,
        renewed_ms=now - 40_000, ttl_ms=10_000, host="here", pid=4242).to_json())


def test_status_of_a_job_whose_master_was_killed_says_stale_as_list_does(tmp_path: Path) -> None:
    """`sluice status` printed RUNNING from a killed master's status document while `sluice list` said STALE."""
    storage = (tmp_path / "chk").as_uri()
    _killed_master(storage, int(time.time() * 1000))

    shown = json.loads(CliRunner().invoke(sluice, ["status", "purchases", "--storage", storage, "--json"]).stdout)
    human = CliRunner().invoke(sluice, ["status", "purchases", "--storage", storage])
    listed = CliRunner().invoke(sluice, ["list", "--storage", storage])

    assert shown["state"] == "STALE" and shown["published_state"] == "RUNNING"
    assert shown["stale"].startswith("its master stopped renewing its lease 40 s ago (ttl 10 s; pid 4242 on here)")
    assert human.exit_code == 0, human.output
    assert human.output.startswith("job purchases: STALE (from the status document, heartbeat "), human.output
    explained = [line for line in listed.output.splitlines() if line.startswith("STALE purchases: ")]
    assert explained and f"  STALE: {explained[0].removeprefix('STALE purchases: ')}" in human.output.splitlines()


def test_the_stale_hint_names_a_command_that_runs_as_printed(tmp_path: Path) -> None:
    """The hint said `sluice checkpoints list purchases`, which fails: Missing option '--storage'."""
    import re
    import shlex

    storage = (tmp_path / "a dir" / "chk").as_uri()
    _killed_master(storage, int(time.time() * 1000))
    listed = CliRunner().invoke(sluice, ["list", "--storage", storage])
    hinted = re.search(r"`sluice (checkpoints list [^`]+)`", listed.output)
    assert hinted, listed.output

    result = CliRunner().invoke(sluice, shlex.split(hinted.group(1)))

    assert result.exit_code == 0, result.output
    assert result.output.startswith("job purchases: 0 retained checkpoint(s)"), result.output


def test_status_of_a_finished_job_shows_its_counts_but_no_rate_and_no_dead_urls(tmp_path: Path) -> None:
    """A FINISHED job printed `records in -, out -, 3544.1 records/s in` and the control API and job view URLs
    no master answers at any more."""
    storage = (tmp_path / "chk").as_uri()
    now = int(time.time() * 1000)
    control_url = f"http://127.0.0.1:{_closed_port()}"
    write_status(open_store(storage), StatusDocument(
        job_id="purchases", heartbeat_ms=now, state="FINISHED", records_per_second=3544.1,
        extra={"control_url": control_url}))
    write_status(open_store(storage), StatusDocument(
        job_id="counted", heartbeat_ms=now, state="FINISHED", records_per_second=3544.1,
        extra={"control_url": control_url, "records_in": 1200, "records_out": 40}))

    uncounted = CliRunner().invoke(sluice, ["status", "purchases", "--storage", storage])
    counted = CliRunner().invoke(sluice, ["status", "counted", "--storage", storage])

    assert uncounted.exit_code == 0 and counted.exit_code == 0, uncounted.output + counted.output
    assert uncounted.output.startswith("job purchases: FINISHED (from the status document")
    assert "records" not in uncounted.output.replace("records dropped", ""), uncounted.output
    assert "  records in 1200, out 40" in counted.output.splitlines(), counted.output
    for shown in (uncounted.output, counted.output):
        assert "records/s" not in shown and "control API" not in shown and "/view" not in shown, shown


def test_status_of_a_running_job_still_shows_its_rate_and_urls() -> None:
    from engine.cli_control import _human_status

    shown = _human_status({"job_id": "purchases", "state": "RUNNING", "records_in": 10, "records_out": 2,
                           "records_per_second": 5.0, "control_url": "http://127.0.0.1:8081"})

    assert "  records in 10, out 2, 5.0 records/s in" in shown.splitlines()
    assert "  control API http://127.0.0.1:8081; job view http://127.0.0.1:8081/jobs/purchases/view" in shown


def test_a_finished_jobs_status_document_carries_its_record_counts(tmp_path: Path) -> None:
    """The status document had no record counts, so `sluice status` of a finished job could show none."""
    from engine.master.master import JobMaster, MasterConfig

    storage = (tmp_path / "chk").as_uri()
    master = JobMaster(MasterConfig(
        job_spec="engine.examples.purchases:build", job_name="purchases", storage_uri=storage,
        params={"events_per_split": 200, "num_keys": 20}, checkpoint_interval_ms=200,
        output_dir=str(tmp_path / "out"), status_interval_ms=100, linger_after_end_s=0.2,
        runtime_options={"bundle_size": 64})).start()
    master.wait()

    document = read_status(open_store(storage), "purchases")
    shown = CliRunner().invoke(sluice, ["status", "purchases", "--storage", storage])

    assert document is not None and document.state == "FINISHED", document
    assert document.extra["records_in"] > 0 and document.extra["records_out"] > 0, document.extra
    assert (f"  records in {document.extra['records_in']}, out {document.extra['records_out']}"
            in shown.output.splitlines()), shown.output
    assert "control API" not in shown.output, shown.output


@pytest.mark.parametrize("watermark_ms, shown_lag", [(None, None), (-1, None), (0, None),
                                                     (1_700_000_000_000, "event-time lag 2.0 h")])
def test_the_event_time_lag_is_shown_only_beside_a_watermark(watermark_ms, shown_lag) -> None:
    """A new user saw ``watermark - (event-time lag 498815.3 h)``: a lag measured from 1970 beside no watermark."""
    from engine.cli_control import _human_status

    status = {"job_id": "purchases", "state": "RUNNING", "watermark_ms": watermark_ms,
              "lag_ms": None if watermark_ms is None else 7_200_000 if watermark_ms > 0 else 1_795_735_000_000}
    line = next(x for x in _human_status(status).splitlines() if x.startswith("  watermark"))
    assert (shown_lag in line) if shown_lag else ("lag" not in line and line == "  watermark -"), line
