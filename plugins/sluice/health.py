"""Health of a job as a pure decision over its status and thresholds (no I/O, time injected).

Supervision asks four questions (issue 7): is the heartbeat fresh, how old is the
last completed checkpoint, how many checkpoints failed, how far behind is the job.
Each threshold may be None (not checked).  An empty list of problems means healthy.
"""

from __future__ import annotations

from typing import Any

from sluice.hook import SupervisedJobStatus

RUNNING_STATES = frozenset({"RUNNING", "CREATED", "RESTARTING"})
#: the master is gone or going (Flink's JobStatus.isTerminalState): SUSPENDED included, which a master stopped by
#: a signal publishes (checkpoints.status.SUSPENDED).  The job is still meant to run then, and supervision
#: restores it from its newest snapshot as it does after a crash; a stop on purpose is the desired state's say.
TERMINAL_STATES = frozenset({"FINISHED", "STOPPED", "CANCELED", "CANCELLED", "FAILED", "SUSPENDED"})


def is_live(status: SupervisedJobStatus, now_ms: int, max_heartbeat_age_s: float) -> bool:
    """A master is live when it answered, or published a heartbeat recently and is not in a terminal state.

    This is what "never two masters for one job" is checked against: a live master
    must be stopped before another one starts."""
    if status.source == "none":
        return False
    if (status.state or "").upper() in TERMINAL_STATES:
        return False
    if status.source == "control-api":
        return True
    age = status.heartbeat_age_ms(now_ms)
    return age is not None and age <= max_heartbeat_age_s * 1000


def health_problems(status: SupervisedJobStatus, thresholds: dict[str, Any], now_ms: int) -> list[str]:
    """Why the job is unhealthy (empty: healthy), one sentence per failed check."""
    problems: list[str] = []
    if status.source == "none":
        return [f"job {status.job_id!r} has never published a status document (not deployed?)"]
    state = (status.state or "").upper()
    if state and state not in RUNNING_STATES:
        problems.append(f"state is {status.state}")
    max_hb = thresholds.get("max_heartbeat_age_s")
    age = status.heartbeat_age_ms(now_ms)
    if max_hb is not None and (age is None or age > max_hb * 1000):
        problems.append(f"heartbeat is {_s(age)} old (limit {max_hb}s); control API unreachable: the master is dead or hung")
    max_ckpt = thresholds.get("max_checkpoint_age_s")
    ckpt_age = status.checkpoint_age_ms(now_ms)
    if max_ckpt is not None and ckpt_age is not None and ckpt_age > max_ckpt * 1000:
        problems.append(f"last completed checkpoint {status.last_completed_checkpoint} is {_s(ckpt_age)} old "
                        f"(limit {max_ckpt}s)")
    max_failed = thresholds.get("max_failed_checkpoints")
    if max_failed is not None and status.failed_checkpoints > max_failed:
        problems.append(f"{status.failed_checkpoints} failed checkpoints (limit {max_failed})")
    max_lag = thresholds.get("max_lag_s")
    if max_lag is not None and status.lag_ms is not None and status.lag_ms > max_lag * 1000:
        problems.append(f"lag is {_s(status.lag_ms)} (limit {max_lag}s)")
    return problems


def _s(ms: int | None) -> str:
    return "unknown" if ms is None else f"{ms / 1000:.1f}s"
