"""A snapshot whose sink commit handles were edited is refused by validation and by restore, and the
committed output is left exactly as it was (issue 17: an edited handle used to pass validation, and the
restore then moved a committed file away: 457 records gone)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from checkpoints.metadata import seal
from engine.master.client import ControlClient
from engine.master.master import JobMaster, MasterConfig

UNBOUNDED = {"events_per_split": None, "events_per_second": 50, "num_keys": 20}


def _stopped_with_savepoint(tmp_path: Path) -> str:
    config = MasterConfig(job_spec="engine.examples.purchases:build", job_name="purchases", params=dict(UNBOUNDED),
                          checkpoint_interval_ms=300, storage_uri=(tmp_path / "chk").as_uri(),
                          savepoint_dir=(tmp_path / "sp").as_uri(), output_dir=str(tmp_path / "out"),
                          status_interval_ms=200, linger_after_end_s=0.2, runtime_options={"bundle_size": 64})
    master = JobMaster(config).start()
    try:
        with ControlClient(master.url, "purchases") as client:
            import time

            deadline = time.monotonic() + 120
            while (client.status().get("last_completed_checkpoint") or 0) < 3:
                assert time.monotonic() < deadline, "no checkpoints"
                time.sleep(0.1)
            op = client.wait("stop", client.stop(), timeout_s=120)
        master.wait()
    finally:
        if not master.client.get_job_execution_result().done():
            master.client.cancel()
    return op["operation"]["location"]


def _handles(document, found):
    if isinstance(document, dict):
        if document.get("sink") == "file" and document.get("files"):
            found.append(document)
        for value in document.values():
            _handles(value, found)
    elif isinstance(document, list):
        for value in document:
            _handles(value, found)
    return found


def _output(tmp_path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(tmp_path / "out")): p.read_bytes() for p in (tmp_path / "out").rglob("*") if p.is_file()}


def test_an_edited_commit_handle_fails_validation_and_restore_and_no_output_file_moves(tmp_path: Path) -> None:
    savepoint = _stopped_with_savepoint(tmp_path)
    metadata_path = Path(savepoint.removeprefix("file://")) / "_metadata"
    metadata = json.loads(metadata_path.read_text())
    handles = _handles(metadata, [])
    assert handles, "the stop savepoint recorded no file-sink transaction with parts"
    handle = handles[0]
    sink_dirs = sorted(p for p in (tmp_path / "out").iterdir() if p.is_dir())
    committed = next(sorted(d.glob("part-*"))[0].name for d in sink_dirs if list(d.glob("part-*")))
    handle["files"][0][0] = committed  # restore would have moved this committed file to the handle's final name
    metadata_path.write_bytes(seal(metadata))  # sealed again, as a tool would: the handle check must catch it
    before = _output(tmp_path)

    cli = [sys.executable, "-m", "engine.cli"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    validated = subprocess.run(cli + ["validate", savepoint], capture_output=True, text=True, env=env, timeout=300)
    assert validated.returncode != 0 and "refusing to commit" in validated.stdout + validated.stderr, \
        validated.stdout + validated.stderr
    restored = subprocess.run(
        cli + ["restore", "engine.examples.purchases:build", savepoint, "--job-id", "purchases",
               "--storage", (tmp_path / "chk").as_uri(), "--output", str(tmp_path / "out"),
               *[a for k, v in UNBOUNDED.items() for a in ("--param", f"{k}={json.dumps(v)}")]],
        capture_output=True, text=True, env=env, timeout=300)
    assert restored.returncode != 0 and "refusing to commit" in restored.stderr, restored.stderr[-3000:]
    assert _output(tmp_path) == before
