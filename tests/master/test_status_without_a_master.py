"""``sluice status --storage`` shows a job whose master is gone from the status document it left (a user found
that after SIGTERM, ``stop`` or ``kill -9`` status only said the master could not be reached, while the document
said SUSPENDED with the signal)."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

from click.testing import CliRunner

from checkpoints.backends import open_store
from checkpoints.status import StatusDocument, Suspension, write_status
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
    result = CliRunner().invoke(sluice, ["status", "purchases", "--storage", storage])
    assert result.exit_code == 0, result.output
    shown = json.loads(result.output)
    assert shown["state"] == "SUSPENDED" and shown["suspension"]["signal"] == "SIGTERM"
    assert shown["last_completed_checkpoint"] == 12 and shown["source"] == "status document"
    assert "no job master answers" in shown["note"]


def test_status_of_a_job_that_never_ran_still_says_so(tmp_path: Path) -> None:
    result = CliRunner().invoke(sluice, ["status", "purchases", "--storage", (tmp_path / "chk").as_uri()])
    assert result.exit_code != 0
    assert "has published no status document" in str(result.exception) + result.output
