"""``sluice run`` tells an operator what the job does (issue 18, "Logs"): a real master process on the local
runtime, its stderr read as an operator's log shipper would.

Before, the master's log had one line while the job ran and nothing configured logging.  Now: the job's start
and restore source, every completed checkpoint with its duration and alignment, every failed checkpoint with
its reason, every restart with its cause; JSON lines carry the figures as keys; libraries stay quiet.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

JOB = "engine.examples.purchases:build"
# bounded, a few seconds on the local runtime, a checkpoint every 200 ms
PARAMS = {"events_per_split": 20_000, "num_keys": 50}


def _run(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    args = [sys.executable, "-m", "engine.cli", "run", JOB, "--job-id", "purchases", "--runtime", "local",
            "--storage", (tmp_path / "chk").as_uri(), "--savepoint-dir", (tmp_path / "sp").as_uri(),
            "--output", str(tmp_path / "out"), "--checkpoint-interval", "200", *extra]
    for key, value in PARAMS.items():
        args += ["--param", f"{key}={json.dumps(value)}"]
    return subprocess.run(args, capture_output=True, text=True, timeout=300)


def _json_lines(stderr: str) -> list[dict]:
    events = []
    for line in stderr.splitlines():
        if line.startswith("{") and '"level"' in line:
            events.append(json.loads(line))
    return events


def test_json_logs_name_the_job_its_checkpoints_and_their_figures(tmp_path: Path) -> None:
    done = _run(tmp_path, "--log-format", "json")
    assert done.returncode == 0, done.stderr[-3000:]
    events = _json_lines(done.stderr)
    started = [e for e in events if e.get("event") == "job_started"]
    assert len(started) == 1 and started[0]["job_id"] == "purchases" and started[0]["restored_from"] is None
    completed = [e for e in events if e.get("event") == "checkpoint_completed"]
    assert len(completed) >= 3, [e["message"] for e in events]
    ids = [e["checkpoint_id"] for e in completed]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    for event in completed:
        assert event["level"] == "INFO" and event["logger"] == "engine.checkpointing.coordinator"
        assert isinstance(event["duration_ms"], int) and event["duration_ms"] >= 0
        assert isinstance(event["alignment_ms"], int) and event["time"]
        assert event["location"].startswith((tmp_path / "chk").as_uri())
        assert f"checkpoint {event['checkpoint_id']} completed in {event['duration_ms']} ms" in event["message"]
    # nothing but Sluice's own lines at INFO: libraries are kept at WARNING
    assert all(e["logger"].split(".")[0] in ("engine", "checkpoints", "plugins") for e in events
               if e["level"] in ("DEBUG", "INFO")), {e["logger"] for e in events}


def test_warning_level_keeps_checkpoint_lines_out_and_human_lines_are_plain_on_a_pipe(tmp_path: Path) -> None:
    quiet = _run(tmp_path, "--log-level", "WARNING")
    assert quiet.returncode == 0, quiet.stderr[-3000:]
    assert "completed in" not in quiet.stderr
    human = _run(tmp_path / "again", "--log-level", "info")
    assert human.returncode == 0, human.stderr[-3000:]
    lines = [line for line in human.stderr.splitlines() if "engine.checkpointing.coordinator:" in line]
    assert lines and all(" INFO " in line and "checkpoint" in line for line in lines)
    assert not any(line.startswith("{") for line in lines)


def test_sluice_says_its_version() -> None:
    from importlib.metadata import version

    done = subprocess.run([sys.executable, "-m", "engine.cli", "--version"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == f"sluice {version('sluice')}"
