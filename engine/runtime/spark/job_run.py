"""A Spark job across its attempts: restarts from the latest completed checkpoint (seed 002 "Recovery").

The Spark runtime's counterpart of engine/runtime/local/job_run.py.  A :class:`SparkJobRun` runs
one :class:`~engine.runtime.spark.job.SparkJob` per attempt.  When an attempt fails (a task's
exception, a storage error, a declined checkpoint beyond the tolerable count) and the restart
strategy (``env.set_restart_strategy``, engine/api/restart.py) allows another, it waits the
strategy's delay and builds the next attempt from the newest completed checkpoint — the same
restore a new job master does after a crash (sources rewound to S(k), keyed state and valve from
k, exactly-once sinks re-committing k's pre-committed transactions) — or, without one, from the
savepoint the run started from, or from scratch.  Checkpoint ids continue across attempts.

The restore point is read and fully verified (sizes and checksums) on the driver before the attempt
is built, as on the local runtime (engine/runtime/recovery.py ``newest_readable_restore_point``):
an unreadable newest checkpoint is passed over for the retained one before it, with a warning; if
none of the run's retained checkpoints is readable the job fails rather than starting over; while
storage is unreachable the read is retried with the strategy's backoff.  A failure while building
a restarted attempt fails that attempt like any other.

What the driver itself holds is cut back to the restore point, so replayed epochs do not add it
twice: the ``execute_and_collect`` lists and the dead letters keep what they held at k's barrier
(:meth:`SparkJob.output_marks`, kept for each retained checkpoint, so a fall-back to an older one
cuts back to its marks), and everything when the attempt starts from a savepoint or from
scratch.  Staged parts of exactly-once file sinks that no completed checkpoint covers are deleted
(engine/runtime/recovery.py), as on the local runtime.  Sinks written on the driver
without transactions (console, at-least-once files) may repeat what the failed attempt wrote after
k — AT_LEAST_ONCE's promise.

The run is also the control handle ``submit`` returns (the shape of the local runtime's
LocalJobClient): savepoint, stop and cancel requests go to the attempt that is running, and one
that arrives while the run waits to restart is served by the next attempt.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import threading
import time
from concurrent.futures import Future
from typing import Any

from checkpoints import load_snapshot
from engine.api.restart import restart_strategy_of
from engine.checkpointing.job_status import JobStatus
from engine.errors import CorruptSnapshotError, JobFailedError
from engine.io.dead_letter_output import dead_letter_history
from engine.runtime.handle import CheckpointRecord, JobExecutionResult, JobStatusReport, stable_job_id
from engine.histories import BoundedHistory, history_limits
from engine.runtime.recovery import (
    discard_orphaned_staging,
    newest_readable_restore_point,
    persist_dead_letters,
    restart_delay_after,
    sinks_that_committed,
    wait_restart_delay,
)
from engine.runtime.spark.checkpoint_store import RestorableCheckpoint

log = logging.getLogger(__name__)

#: failures kept for status(), newest last
_FAILURES_KEPT = 10


class SparkJobRun:
    def __init__(self, runtime: Any, job_name: str, sinks: list[Any], collect: list[Any],
                 from_savepoint: str | None = None) -> None:
        self.runtime = runtime
        self.env = runtime.env
        self.job_name = job_name
        self.sinks = sinks
        self.collect = collect
        self.job_id = stable_job_id(job_name, self.env.get_runtime_options().get("job_id"))
        self.strategy = restart_strategy_of(self.env)
        self.backoff = self.strategy.backoff()
        self.clock = self.env.get_clock()
        self.initial_restore = from_savepoint or runtime.restore_from
        max_history, max_dead_letters = history_limits(self.env.get_runtime_options())
        #: collect node id -> values, and the newest dead letters with their total: one each for the whole run
        self.collected: dict[int, list[Any]] = {}
        self.dead_letters: BoundedHistory[dict[str, Any]] = dead_letter_history(
            self.env.get_runtime_options(), max_dead_letters, job_name)
        self.attempt = 0
        self.restarts = 0
        self.state = "created"
        self.job: Any = None
        self.failures: list[str] = []
        #: checkpoint records of the attempts that ended, oldest first: the newest ``max_checkpoint_history``
        self._history: BoundedHistory[CheckpointRecord] = BoundedHistory(max_history)
        #: completed checkpoints (not savepoints) of the attempts that ended
        self._completed_before = 0
        #: failed checkpoints of the attempts that ended
        self._failed_before = 0
        #: this run's completed checkpoints that storage retains, oldest first: the restore candidates
        retained = self.env.get_checkpoint_config().get_num_retained_checkpoints()
        self._retained: collections.deque[RestorableCheckpoint] = collections.deque(maxlen=max(1, retained))
        #: properties of the newest checkpoint or savepoint of the attempts that ended (retention at the end)
        self._latest_properties: Any = None
        self._result: Future = Future()
        self._changed = threading.Condition()

    # ---- running -----------------------------------------------------------------------------------------------
    def run(self) -> JobExecutionResult:
        """Attempts until one ends (finished, stopped, cancelled) or the strategy allows no more restarts."""
        try:
            return self._run_attempts()
        finally:
            self._apply_retention()
            persist_dead_letters(self.dead_letters, "end")  # finished, stopped or failed: nothing lost

    def _apply_retention(self) -> None:
        """ExternalizedCheckpointRetention, once the whole run has ended (never between attempts: a restart
        restores these checkpoints), by the local runtime's rule (checkpoint_storage_adapter
        ``deletes_retained_checkpoints_at_end``).  A run left running (``max_epochs``) deletes nothing."""
        job = self.job
        status = {"finished": JobStatus.FINISHED, "stopped": JobStatus.FINISHED, "cancelled": JobStatus.CANCELED,
                  "failed": JobStatus.FAILED}.get(self.state)
        if job is None or status is None:
            return
        latest = job.checkpointing.latest_properties or self._latest_properties
        try:
            job.checkpointing.apply_retention(status, latest)
        except Exception:  # noqa: BLE001 - the run's outcome stands; what stays is left to orphan clean-up
            log.warning("job %r: applying the checkpoint retention at its end failed", self.job_name, exc_info=True)

    def _run_attempts(self) -> JobExecutionResult:
        started = time.monotonic()
        job = self._next_attempt(self.initial_restore, None)  # a restore the run was asked for that fails, fails it
        while True:
            try:
                job.run()
                break
            except Exception as exc:  # noqa: BLE001 - any failure fails the attempt (seed 002 "Recovery")
                self._attempt_ended(job)
                self._restart_or_fail(exc)
            job = None
            while job is None:
                try:
                    job = self._restarted_attempt()
                except (JobFailedError, CorruptSnapshotError):
                    self._set_state("failed")
                    raise
                except Exception as exc:  # noqa: BLE001 - building the attempt failed: restart it again
                    self._restart_or_fail(exc)
        self._set_state(job.status().state)
        result = job.result(int((time.monotonic() - started) * 1000))
        return dataclasses.replace(result, restarts=self.restarts, dead_letters=list(self.dead_letters),
                                   num_dead_letters=self.dead_letters.total, collected=self.collected,
                                   completed_checkpoints=[r.checkpoint_id for r in self.checkpoint_history()
                                                          if r.kind == "checkpoint"],
                                   num_completed_checkpoints=self._completed_before + job.checkpointing.num_completed)

    def _restart_or_fail(self, exc: Exception) -> None:
        """Count the failed attempt and wait the strategy's delay, or fail the job when it allows no more."""
        self.failures = (self.failures + [f"{type(exc).__name__}: {exc}"])[-_FAILURES_KEPT:]
        delay_ms = restart_delay_after(exc, self.backoff, self.clock, self.job_name)
        if delay_ms is None:
            self._set_state("failed")
            raise JobFailedError(
                f"job {self.job_name!r} failed after {self.restarts} restart(s) "
                f"({self.backoff.describe()}): {type(exc).__name__}: {exc}"
            ) from exc
        self.restarts += 1
        self._set_state("restarting")
        wait_restart_delay(self.clock, delay_ms)

    def _restarted_attempt(self) -> Any:
        """The next attempt, from the newest of this run's retained checkpoints that reads and verifies, or
        from the savepoint the run started from (or scratch) when none completed."""
        options = self.runtime.storage_options

        def verified(retained: RestorableCheckpoint) -> Any:
            uri = retained.pointer
            return load_snapshot(uri, verify_checksums=True, **(options if uri.startswith(("s3://", "s3a://")) else {}))

        candidates = [(r.checkpoint_id, r) for r in reversed(self._retained)]
        found = newest_readable_restore_point(self.job_name, candidates, verified, self.backoff, self.clock,
                                              committed=lambda cid: sinks_that_committed(self.sinks, cid))
        if found is None:
            return self._next_attempt(self.initial_restore, None)
        checkpoint_id, snapshot = found
        while self._retained[-1].checkpoint_id != checkpoint_id:
            self._retained.pop()  # passed over as unreadable: not worth reading again at the next restart
        retained = self._retained[-1]
        return self._next_attempt(retained.pointer, retained.marks, snapshot)

    def _next_attempt(self, restore: str | None, marks: dict[str, Any] | None, snapshot: Any = None) -> Any:
        """Build attempt n+1 from ``restore`` (``snapshot``: already loaded and verified) with the driver's
        outputs cut back to ``marks`` (None: to nothing)."""
        kept = marks or {"collected": {}, "dead_letters": 0}
        for node, values in self.collected.items():
            del values[kept["collected"].get(node, 0):]
        self.dead_letters.take_back_to(kept["dead_letters"])
        previous = self.job
        job = self.runtime.start(self.job_name, self.sinks, self.collect, restore,
                                 collected=self.collected, dead_letters=self.dead_letters, restore_snapshot=snapshot)
        job.checkpointing.applies_retention_at_end = False  # the run applies it when it ends (_apply_retention)
        if previous is not None:
            old, new = previous.checkpointing.coordinator, job.checkpointing.coordinator
            if old is not None and new is not None:  # ids continue: a pending id of the failed attempt is not reused
                new.restore_checkpoint_id_counter(old.next_checkpoint_id() - 1)  # continue after its last id
        # parts staged by a failed attempt, or by a killed process before this one, that no restored handle
        # named are garbage: the restored handles were committed when the sinks were initialized just now
        discard_orphaned_staging(self.sinks, job.checkpointing.storage)
        with self._changed:
            self.attempt += 1
            self.job = job
            self.state = "running"
            self._changed.notify_all()
        return job

    def _attempt_ended(self, job: Any) -> None:
        for record in job.checkpoint_history():
            self._history.append(dataclasses.replace(record, attempt=self.attempt))
        self._completed_before += job.checkpointing.num_completed
        if job.checkpointing.coordinator is not None:
            self._failed_before += job.checkpointing.coordinator.num_failed_checkpoints
        self._retained.extend(job.checkpointing.retained)
        self._latest_properties = job.checkpointing.latest_properties or self._latest_properties

    def _set_state(self, state: str) -> None:
        with self._changed:
            self.state = state
            self._changed.notify_all()

    def run_in_background(self) -> threading.Thread:
        thread = threading.Thread(target=self._run_quietly, name=f"sluice-spark-{self.job_id}", daemon=True)
        thread.start()
        return thread

    def _run_quietly(self) -> None:
        try:
            self._result.set_result(self.run())
        except BaseException as exc:  # noqa: BLE001 - reported through status() and wait()
            self._result.set_exception(exc)

    # ---- control handle ----------------------------------------------------------------------------------------
    def _running_attempt(self) -> Any:
        """The attempt to hand a request to: while the run waits to restart, the next one."""
        with self._changed:
            while self.state in ("created", "restarting") and not self._result.done():
                self._changed.wait(0.1)
            return self.job

    def _ended_future(self) -> Future:
        future: Future = Future()
        future.set_exception(JobFailedError(f"job {self.job_name!r} has ended ({self.state})"))
        return future

    def trigger_savepoint(self, target_dir: str | None = None) -> Future:
        job = self._running_attempt()
        return self._ended_future() if job is None or self.state == "failed" else job.trigger_savepoint(target_dir)

    def stop_with_savepoint(self, target_dir: str | None = None, drain: bool = False) -> Future:
        job = self._running_attempt()
        return self._ended_future() if job is None or self.state == "failed" else \
            job.stop_with_savepoint(target_dir, drain)

    def cancel(self) -> None:
        job = self._running_attempt()
        if job is not None and self.state != "failed":
            job.cancel()

    def status(self) -> JobStatusReport:
        job = self.job
        if job is None:
            return JobStatusReport(job_id=self.job_id, job_name=self.job_name, state=self.state, attempt=0,
                                   restarts=0, last_completed_checkpoint_id=None, watermark_ms=0, records_in=0,
                                   records_out=0)
        report = job.status()
        state = self.state if self.state in ("restarting", "failed") else report.state
        completed = [r.checkpoint_id for r in self.checkpoint_history() if r.kind == "checkpoint"]
        current = report.num_completed_checkpoints if self.state not in ("restarting", "failed") else 0
        coordinator = job.checkpointing.coordinator
        failed_now = coordinator.num_failed_checkpoints if coordinator is not None and \
            self.state not in ("restarting", "failed") else 0
        return dataclasses.replace(report, state=state, attempt=self.attempt, restarts=self.restarts,
                                   num_failed_checkpoints=self._failed_before + failed_now,
                                   last_completed_checkpoint_id=completed[-1] if completed else None,
                                   failures=tuple(self.failures),
                                   num_completed_checkpoints=self._completed_before + current)

    def checkpoint_history(self) -> list[CheckpointRecord]:
        """Completed checkpoints and savepoints of every attempt, oldest first: the newest
        ``max_checkpoint_history`` (engine/histories.py)."""
        job = self.job
        current: list[CheckpointRecord] = []
        if job is not None and self.state not in ("restarting", "failed"):
            current = [dataclasses.replace(r, attempt=self.attempt) for r in job.checkpoint_history()]
        return (list(self._history) + current)[-self._history.capacity:]

    def records_written(self) -> int:
        return self.job.records_written() if self.job is not None else 0

    def wait(self, timeout_s: float | None = None) -> JobExecutionResult:
        """Block until a submitted run ends; its JobExecutionResult, or its failure raised."""
        return self._result.result(timeout_s)

    def done(self) -> bool:
        return self._result.done()
