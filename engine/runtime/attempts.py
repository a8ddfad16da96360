"""One job run as attempts: the restart loop both runtimes share (seed 002 "Recovery").

The first attempt starts from the run's savepoint, or from scratch.  After a failure the restart strategy
(engine/api/restart.py) decides: its delay, then the next attempt from the newest retained checkpoint that
reads and verifies (else the run's start); or a JobFailedError naming the restarts and the last cause (also
when the master was fenced).  States: ``created`` → ``running`` (→ ``restarting`` → ``running`` ...) →
``finished``/``stopped``/``cancelled``/``failed`` (or ``running``: Spark's ``max_epochs``).  ``on_end(status)``
runs once, when the whole run has ended: retention is applied there, never between attempts.  The runtime
(engine/runtime/{local,spark}/job_run.py) says what an attempt is: ``start(choice)`` builds one (``choice``
None: the run's start), ``run`` returns the state it ended in or raises, ``end(attempt, failure)`` follows it;
``candidates()`` are ``(checkpoint id, retained checkpoint)`` newest first, ``load`` reads and verifies one,
``committed(checkpoint_id)`` names the exactly-once sinks that already committed its output.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, Generic, NamedTuple, TypeVar

from checkpoints.errors import SnapshotNotFound, StorageUnavailable
from engine.checkpointing.job_status import JobStatus
from engine.errors import CorruptSnapshotError, JobFailedError, fenced_cause

log = logging.getLogger(__name__)

A = TypeVar("A")  # one attempt

#: the run's JobStatus by the state it ended in (retention is decided by it); a run left running has none
END_STATUS = {"finished": JobStatus.FINISHED, "stopped": JobStatus.FINISHED, "cancelled": JobStatus.CANCELED,
              "failed": JobStatus.FAILED}
#: failures kept for status(), newest last
FAILURES_KEPT = 10


class RestartPoint(NamedTuple):
    """The restore point of a restarted attempt: a retained checkpoint and what ``load`` read from it."""
    checkpoint_id: int
    retained: Any
    loaded: Any


class Attempts(Generic[A]):
    """The restart loop of one run (see the module docstring); ``strategy``: the job's restart strategy
    (``restart_strategy_of(env)``).  ``restart_when_start_fails``: a restarted
    attempt that cannot be built (a sink failing to re-commit, storage down) is restarted like a failed one,
    when the strategy allows; otherwise the run fails at once, as it does when the first cannot be built."""

    def __init__(self, job_name: str, strategy: Any, clock: Any, *, start: Callable[[RestartPoint | None], A],
                 run: Callable[[A], str], end: Callable[[A, Exception | None], None],
                 candidates: Callable[[], list[tuple[int, Any]]], load: Callable[[Any], Any],
                 committed: Callable[[int], list[str]], on_end: Callable[[JobStatus | None], None],
                 restart_when_start_fails: bool = False) -> None:
        self.job_name, self.backoff, self.clock = job_name, strategy.backoff(), clock
        self._start, self._run, self._end, self._on_end = start, run, end, on_end
        self._candidates, self._load, self._committed = candidates, load, committed
        self.restart_when_start_fails = restart_when_start_fails
        self.state = "created"
        self.attempt = 0  # attempts built, 1 for the first
        self.restarts = 0
        #: the running attempt; after a failure, the failed one until the next is built
        self.current: A | None = None
        #: "Type: message" of the newest failures, oldest first
        self.failures: list[str] = []
        #: notified on every change of state or attempt
        self.changed = threading.Condition()

    def run(self) -> A:
        """Attempts until one ends, or the strategy allows no more restarts; returns the last attempt."""
        try:
            attempt = self._started(None)  # a restore the run was asked for that fails, fails it
            while True:
                try:
                    state = self._run(attempt)
                except Exception as exc:  # noqa: BLE001 - any failure fails the attempt (seed 002 "Recovery")
                    self._end(attempt, exc)
                    self._restart_or_fail(exc)
                else:
                    self._set_state(state)
                    self._end(attempt, None)
                    return attempt
                attempt = self._restarted()
        except BaseException:
            if self.state not in ("finished", "stopped", "cancelled"):
                self._set_state("failed")
            raise
        finally:
            self._on_end(END_STATUS.get(self.state))

    def _restarted(self) -> A:
        while True:
            choice = self._restore_point()
            try:
                return self._started(choice)
            except (JobFailedError, CorruptSnapshotError):
                raise
            except Exception as exc:  # noqa: BLE001 - building the attempt failed: restart it again, if allowed
                if not self.restart_when_start_fails:
                    raise
                self._restart_or_fail(exc)

    def _started(self, choice: RestartPoint | None) -> A:
        attempt = self._start(choice)
        with self.changed:
            self.attempt += 1
            self.current = attempt
            self.state = "running"
            self.changed.notify_all()
        return attempt

    def _restart_or_fail(self, exc: Exception) -> None:
        """Count the failure and wait the strategy's delay, or fail the run: the strategy allows no more
        restarts, or the master was fenced (another master owns the job).  Logged either way."""
        self.failures = (self.failures + [f"{type(exc).__name__}: {exc}"])[-FAILURES_KEPT:]
        fenced = fenced_cause(exc) is not None
        delay_ms = None if fenced else self.backoff.on_failure(self.clock.now_ms())
        if delay_ms is None:
            log.error("job %s: %s: %s: %s", self.job_name, "fenced, not restarting" if fenced else
                      "attempt failed and the restart strategy allows no more restarts", type(exc).__name__, exc)
            self._set_state("failed")
            raise JobFailedError(
                f"job {self.job_name!r} failed after {self.restarts} restart(s) "
                f"({self.backoff.describe()}): {type(exc).__name__}: {exc}"
            ) from exc
        log.warning("job %s: attempt failed (%s: %s); restarting in %d ms", self.job_name, type(exc).__name__, exc,
                    delay_ms)
        self.restarts += 1
        self._set_state("restarting")
        self._wait(delay_ms)

    def _restore_point(self) -> RestartPoint | None:
        """The newest retained checkpoint that loads, or None when there is none (the run's start then).  An
        unreadable one (corrupt, or its ``_metadata`` gone) is passed over, as a restarted Flink master passes over
        one its CompletedCheckpointStore cannot retrieve -- unless an exactly-once sink committed its output (the
        span between the two would be written twice): then, or when none is readable, the run fails naming the
        problems and the ways out.  While storage is unreachable the same one is read again after the strategy's
        backoff: an outage costs restart attempts, not the job."""
        problems: list[str] = []
        for checkpoint_id, candidate in self._candidates():
            while True:
                try:
                    try:
                        return RestartPoint(checkpoint_id, candidate, self._load(candidate))
                    except (CorruptSnapshotError, SnapshotNotFound) as exc:
                        unreadable: Exception = exc
                    holders = self._committed(checkpoint_id)
                except StorageUnavailable as exc:
                    delay_ms = self.backoff.on_failure(self.clock.now_ms())
                    if delay_ms is None:
                        raise JobFailedError(
                            f"job {self.job_name!r} could not read checkpoint {checkpoint_id} to restart "
                            f"({self.backoff.describe()}): {exc}; once storage answers, restart the job from its "
                            "retained checkpoints (sluice run --from-savepoint <chk folder>)") from exc
                    log.warning("job %s: storage unreachable while restarting (%s); retrying in %d ms",
                                self.job_name, exc, delay_ms)
                    self._wait(delay_ms)
                    continue
                if holders:
                    raise CorruptSnapshotError(
                        f"job {self.job_name!r}: retained checkpoint {checkpoint_id} is unreadable ({unreadable}), "
                        f"and exactly-once sinks already committed its output ({', '.join(holders)}): restoring an "
                        "older checkpoint would write the records between the two a second time. Repair the "
                        "checkpoint's files (sluice inspect <folder> --verify names them), or restore an older "
                        "snapshot by hand accepting those duplicates (sluice run --from-savepoint <older chk "
                        "folder>)") from unreadable
                problems.append(f"checkpoint {checkpoint_id}: {unreadable}")
                log.warning("job %s: retained checkpoint %d is unreadable, trying the previous one: %s",
                            self.job_name, checkpoint_id, unreadable)
                break
        if problems:
            raise CorruptSnapshotError(
                f"job {self.job_name!r}: no retained checkpoint can be restored, and starting over would emit "
                f"committed results again: {'; '.join(problems)}. Restore an older savepoint by hand "
                "(sluice run --from-savepoint <folder>) or inspect the checkpoints (sluice inspect <folder> --verify)")
        return None

    def _set_state(self, state: str) -> None:
        with self.changed:
            self.state = state
            self.changed.notify_all()

    def _wait(self, delay_ms: int) -> None:
        """The strategy's delay: a manual clock (tests) advances at once, a real one is slept on."""
        if delay_ms > 0 and hasattr(self.clock, "advance"):
            self.clock.advance(delay_ms)
        elif delay_ms > 0:
            time.sleep(delay_ms / 1000)
