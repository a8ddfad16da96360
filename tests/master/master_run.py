"""Start a real ``sluice run`` master in a subprocess for the job-view and operator-metrics tests: the job module
(tests/master/view_jobs.py, operator_jobs.py) is importable by the child, the control token is unset, and the
job id and control URL come from the master's first JSON line on stderr.  The process is killed however the
test ends."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).parent


def wait_for(predicate, timeout_s: float = 60.0, what: str = "condition"):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def get(url: str) -> httpx.Response:
    response = httpx.get(url, timeout=30)
    assert response.status_code == 200, response.text
    return response


@contextmanager
def sluice_run(job_spec: str, job_id: str, tmp_path: Path, *flags: str,
               params: dict[str, Any] | None = None) -> Iterator[dict[str, Any]]:
    """``sluice run JOB_SPEC --job-id JOB_ID`` with storage and output under ``tmp_path``, WARNING logs, ``flags``
    and each of ``params`` as ``--param key=<JSON>``.  Yields the master's ``job_id`` and ``control_url``, the
    job's control ``base`` URL and the ``process``."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1",
           "PYTHONPATH": os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH")) if p)}
    env.pop("SLUICE_CONTROL_TOKEN", None)
    args = [sys.executable, "-m", "engine.cli", "run", job_spec, "--job-id", job_id,
            "--storage", (tmp_path / "chk").as_uri(), "--output", str(tmp_path / "out"), "--log-level", "WARNING",
            *flags]
    for key, value in (params or {}).items():
        args += ["--param", f"{key}={json.dumps(value)}"]
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        started = None
        while started is None:
            line = process.stderr.readline()
            if not line:
                raise AssertionError(f"sluice run ended before starting: {process.wait()} {process.stdout.read()}")
            if line.startswith('{"job_id"'):
                started = json.loads(line)
        yield {**started, "base": f"{started['control_url']}/jobs/{started['job_id']}", "process": process}
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
