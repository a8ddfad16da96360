"""Supervision's decisions over a job's status (plugins/sluice/health.py), without Airflow running.

A master stopped by a signal publishes SUSPENDED (engine/master/signals.py) and is gone a moment
later.  Supervision must treat it as it treats a dead master: no live master (so check_health fails
at once and restart_from_latest starts a new master from the newest snapshot, without trying to
replace the old one), even while the document's heartbeat is still fresh.
"""

from __future__ import annotations

import pytest

NOW_MS = 1_800_000_000_000
THRESHOLDS = {"max_heartbeat_age_s": 30.0, "max_checkpoint_age_s": 300.0, "max_failed_checkpoints": 3,
              "max_lag_s": None}


def _from_storage(state: str, heartbeat_age_s: float = 1.0):
    from sluice.hook import SupervisedJobStatus

    return SupervisedJobStatus(job_id="purchases", source="status-document", state=state,
                     heartbeat_ms=NOW_MS - int(heartbeat_age_s * 1000), last_completed_checkpoint=7,
                     last_completed_ms=NOW_MS - 2_000)


def test_a_running_master_with_a_fresh_heartbeat_is_live_and_healthy() -> None:
    from sluice.health import health_problems, is_live

    status = _from_storage("RUNNING")
    assert is_live(status, NOW_MS, THRESHOLDS["max_heartbeat_age_s"])
    assert health_problems(status, THRESHOLDS, NOW_MS) == []


def test_a_suspended_master_is_not_live_even_with_a_fresh_heartbeat() -> None:
    from sluice.health import health_problems, is_live

    status = _from_storage("SUSPENDED", heartbeat_age_s=0.5)
    assert not is_live(status, NOW_MS, THRESHOLDS["max_heartbeat_age_s"])
    assert health_problems(status, THRESHOLDS, NOW_MS) == ["state is SUSPENDED"]


@pytest.mark.parametrize("state", ["FAILED", "CANCELED", "FINISHED"])
def test_a_master_in_a_terminal_state_is_not_live_either(state: str) -> None:
    from sluice.health import is_live

    assert not is_live(_from_storage(state), NOW_MS, THRESHOLDS["max_heartbeat_age_s"])
