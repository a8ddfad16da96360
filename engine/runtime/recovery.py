"""What both runtimes do between a failed attempt and the next (seed 002 "Recovery").

engine/runtime/local/job_run.py and engine/runtime/spark/job_run.py each run a job as attempts;
these are the steps they share: waiting out the restart strategy's delay, and deleting the staged
sink parts no completed checkpoint covers.
"""

from __future__ import annotations

import time
from typing import Any, Iterable


def restart_delay_after(failure: BaseException, backoff: Any, clock: Any) -> int | None:
    """How long to wait before restarting after ``failure``, or None when the job must not restart: its
    restart strategy allows no more, or the master was fenced (another master owns the job)."""
    from engine.errors import fenced_cause

    if fenced_cause(failure) is not None:
        return None
    return backoff.on_failure(clock.now_ms())


def wait_restart_delay(clock: Any, delay_ms: int) -> None:
    """The restart strategy's delay: a manual clock (tests) advances at once, a real one is slept on."""
    if delay_ms <= 0:
        return
    advance = getattr(clock, "advance", None)
    if advance is not None:
        advance(delay_ms)
    else:
        time.sleep(delay_ms / 1000)


def discard_orphaned_staging(roots: Iterable[Any]) -> None:
    """Staged parts of transactions that never reached a completed checkpoint are garbage (FileSink).

    ``roots``: the job's sink nodes; every sink reachable from them that stages parts discards its orphans.
    """
    from engine.api.graph import SinkTransformation, topological_order

    for node in topological_order(list(roots)):
        sink = getattr(node, "sink", None) if isinstance(node, SinkTransformation) else None
        if sink is not None and hasattr(sink, "discard_orphaned_staging"):
            sink.discard_orphaned_staging()
