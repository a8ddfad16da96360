"""Constants and helpers shared by the Airflow tests.

Tests import them from here, never from conftest: every test folder has a conftest, and when
folders run together ``from conftest import ...`` resolves to whichever one was imported first.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "tests" / "artifacts"
FAKE_MASTER = Path(__file__).with_name("fake_master.py")

from purchases_reference import REAL_JOB_PARAMS, reference_tumbling  # noqa: E402,F401 - re-exported


def kill_masters(job_id: str) -> None:
    """Stop every master process recorded for ``job_id`` (only processes the tests started)."""
    state = Path(os.environ["SLUICE_STATE_DIR"])
    for record in state.glob(f"{job_id}*.json"):
        pid = json.loads(record.read_text()).get("pid")
        if pid:
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass


def wait_until(predicate, timeout_s: float = 30.0, interval_s: float = 0.3, what: str = "condition"):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval_s)
    raise AssertionError(f"{what} not reached within {timeout_s}s")




def real_purchases_deployment(job_id: str, output: Path) -> dict:
    """A deployments-file entry running the real purchases job with ``sluice run`` (local runtime)."""
    return {"purchases": {
        "conn_id": "sluice_test", "job_id": job_id, "job": "engine.examples.purchases:build",
        "runtime": "local", "parallelism": 2, "retained": 3, "checkpoint_interval_ms": 1000,
        "output": str(output), "params": REAL_JOB_PARAMS, "startup_timeout_s": 120,
        "health": {"max_heartbeat_age_s": 8, "max_checkpoint_age_s": 60, "max_failed_checkpoints": 3,
                   "max_lag_s": None},
        "savepoint_policy": {"max_count": 3},
    }}
