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


def reference_tumbling(max_window_end: int, events_per_second: int) -> dict[tuple[str, int], int]:
    """Per (user, window start) total qty of every 1-minute window of the unbounded purchases generator
    (no late, no malformed events) ending by ``max_window_end``: what its tumbling output must be."""
    from collections import defaultdict

    from engine.examples.purchases import PurchaseJobConfig, purchase_source

    config = PurchaseJobConfig(events_per_split=None, late_fraction=0.0, malformed_fraction=0.0,
                               events_per_second=events_per_second)
    source = purchase_source(config)
    names = source._key_names()
    start = source.start_timestamp_ms
    stop = int((max_window_end + 10_000 - start) * config.events_per_second / 1000) + 1
    totals: dict[tuple[str, int], int] = defaultdict(int)
    for split in range(config.num_splits):
        cols = source.columns(split, 0, stop)
        keep = cols["present"] & (cols["ts"] < max_window_end)
        windows = cols["ts"][keep] - cols["ts"][keep] % 60_000
        for key, window, qty in zip(cols["key"][keep].tolist(), windows.tolist(), cols["qty"][keep].tolist()):
            totals[(names[key], window)] += qty
    return dict(totals)


#: the unbounded purchases job without late or malformed events: every tumbling result has one right value
REAL_JOB_PARAMS = {"events_per_split": None, "late_fraction": 0.0, "malformed_fraction": 0.0, "events_per_second": 20}


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
