"""``sluice run``'s exit status says how the job ended (engine/cli_run.py): a job cancelled from another shell
(``sluice cancel``, ``sluice stop --no-savepoint``) ends CANCELED, as Flink's CLI reports it, and the master exits
with EXIT_CANCELED; a job stopped with a savepoint ends FINISHED and the master exits 0.  A real master runs the
live generator job of tests/master/view_jobs.py in a subprocess; the verbs run as a user would type them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from master_run import sluice_run, wait_for

from engine.cli_run import EXIT_CANCELED


def _verb(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "SLUICE_CONTROL_TOKEN"}
    return subprocess.run([sys.executable, "-m", "engine.cli", *args], capture_output=True, text=True, env=env,
                          timeout=120)


def _run_until_checkpointed(tmp_path: Path, name: str, *flags: str):
    return sluice_run("view_jobs:build", name, tmp_path, "--checkpoint-interval", "300", *flags,
                      params={"start_timestamp_ms": int(time.time() * 1000) - 60_000})


def _ended(process: subprocess.Popen) -> tuple[int, str, str]:
    code = process.wait(timeout=120)
    return code, process.stdout.read(), process.stderr.read()


def _state(job: dict) -> str:
    import httpx

    return httpx.get(job["base"], timeout=30).json()["state"]


def test_a_job_cancelled_from_another_shell_makes_sluice_run_exit_with_exit_canceled(tmp_path: Path) -> None:
    with _run_until_checkpointed(tmp_path, "cancelled") as job:
        wait_for(lambda: _state(job) == "RUNNING", 60, "the job running")
        cancel = _verb("cancel", job["job_id"], "--url", job["control_url"])
        assert cancel.returncode == 0, cancel.stderr
        code, out, err = _ended(job["process"])
    assert code == EXIT_CANCELED, f"exit status {code}\n{err[-3000:]}"
    assert EXIT_CANCELED not in (0, 1, 2), "a cancel must not look like success, a failure or a usage error"
    assert "CANCELED" in err, err[-3000:]
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["job_id"] == job["job_id"] and summary["state"] == "CANCELED", summary


def test_a_job_stopped_with_a_savepoint_makes_sluice_run_exit_0(tmp_path: Path) -> None:
    savepoints = (tmp_path / "sp").as_uri()
    with _run_until_checkpointed(tmp_path, "stopped", "--savepoint-dir", savepoints) as job:
        wait_for(lambda: _state(job) == "RUNNING", 60, "the job running")
        stop = _verb("stop", job["job_id"], "--url", job["control_url"])
        assert stop.returncode == 0, stop.stderr
        code, out, err = _ended(job["process"])
    assert code == 0, f"exit status {code}\n{err[-3000:]}"
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["state"] == "FINISHED", summary


def test_the_run_and_restore_help_name_the_cancelled_exit_status() -> None:
    for verb in ("run", "restore"):
        shown = _verb(verb, "--help")
        assert shown.returncode == 0, shown.stderr
        assert f"{EXIT_CANCELED} cancelled" in " ".join(shown.stdout.split()) or \
            f"{EXIT_CANCELED} it was cancelled" in " ".join(shown.stdout.split()), shown.stdout
