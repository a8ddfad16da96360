"""A Spark job across its attempts: restarts from the latest completed checkpoint (seed 002 "Recovery").

The Spark runtime's counterpart of engine/runtime/local/job_run.py: one SparkJob per attempt, run by
the restart loop both runtimes share (engine/runtime/attempts.py; the restore point is verified on the
driver, sizes and checksums, before the attempt is built).  A restart is the restore a new job master
does after a crash (sources rewound to S(k), keyed state and valve from k, exactly-once sinks
re-committing k's pre-committed transactions); checkpoint ids continue across attempts.  A failure
while building a restarted attempt fails that attempt like any other.

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
from engine.errors import JobFailedError
from engine.histories import BoundedHistory, history_limits
from engine.io.dead_letter_output import dead_letter_history
from engine.runtime.attempts import Attempts, RestartPoint
from engine.runtime.handle import CheckpointRecord, JobExecutionResult, JobStatusReport, stable_job_id
from engine.runtime.recovery import discard_orphaned_staging, persist_dead_letters, sinks_that_committed
from engine.runtime.spark.checkpoint_store import RestorableCheckpoint

log = logging.getLogger(__name__)


class SparkJobRun:
    def __init__(self, runtime: Any, job_name: str, sinks: list[Any], collect: list[Any],
                 from_savepoint: str | None = None) -> None:
        self.runtime = runtime
        self.env = runtime.env
        self.job_name = job_name
        self.sinks = sinks
        self.collect = collect
        self.job_id = stable_job_id(job_name, self.env.get_runtime_options().get("job_id"))
        self.initial_restore = from_savepoint or runtime.restore_from
        max_history, max_dead_letters = history_limits(self.env.get_runtime_options())
        #: collect node id -> values, and the newest dead letters with their total: one each for the whole run
        self.collected: dict[int, list[Any]] = {}
        self.dead_letters: BoundedHistory[dict[str, Any]] = dead_letter_history(
            self.env.get_runtime_options(), max_dead_letters, job_name)
        #: the restart loop (engine/runtime/attempts.py); a restarted attempt that cannot be built is restarted
        self.attempts: Attempts[Any] = Attempts(
            job_name, restart_strategy_of(self.env), self.env.get_clock(), start=self._start_attempt, run=self._run_attempt,
            end=self._end_attempt, candidates=lambda: [(r.checkpoint_id, r) for r in reversed(self._retained)],
            load=self._verified, committed=lambda cid: sinks_that_committed(self.sinks, cid),
            on_end=self._apply_retention, restart_when_start_fails=True)
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

    # ---- running -----------------------------------------------------------------------------------------------
    state = property(lambda self: self.attempts.state)
    attempt = property(lambda self: self.attempts.attempt)
    restarts = property(lambda self: self.attempts.restarts)
    job = property(lambda self: self.attempts.current, doc="the current attempt (a SparkJob)")

    def run(self) -> JobExecutionResult:
        """Attempts until one ends (finished, stopped, cancelled) or the strategy allows no more restarts."""
        started = time.monotonic()
        try:
            job = self.attempts.run()
        finally:
            persist_dead_letters(self.dead_letters, "end")  # finished, stopped or failed: nothing lost
        result = job.result(int((time.monotonic() - started) * 1000))
        return dataclasses.replace(result, restarts=self.restarts, dead_letters=list(self.dead_letters),
                                   num_dead_letters=self.dead_letters.total, collected=self.collected,
                                   completed_checkpoints=[r.checkpoint_id for r in self.checkpoint_history()
                                                          if r.kind == "checkpoint"],
                                   num_completed_checkpoints=self._completed_before + job.checkpointing.num_completed)

    def _apply_retention(self, status: JobStatus | None) -> None:
        """ExternalizedCheckpointRetention once the whole run has ended (``on_end``), by the local runtime's rule
        (``deletes_retained_checkpoints_at_end``); a run left running (``max_epochs``, no status) deletes nothing."""
        job = self.job
        if job is None or status is None:
            return
        latest = job.checkpointing.latest_properties or self._latest_properties
        try:
            job.checkpointing.apply_retention(status, latest)
        except Exception:  # noqa: BLE001 - the run's outcome stands; what stays is left to orphan clean-up
            log.warning("job %r: applying the checkpoint retention at its end failed", self.job_name, exc_info=True)

    def _verified(self, retained: RestorableCheckpoint) -> Any:
        """A retained checkpoint's snapshot, read and verified (sizes and checksums) on the driver."""
        uri = retained.pointer
        options = self.runtime.storage_options
        return load_snapshot(uri, verify_checksums=True, **(options if uri.startswith(("s3://", "s3a://")) else {}))

    def _start_attempt(self, choice: RestartPoint | None) -> Any:
        """Build attempt n+1 from the restore point ``choice`` (None: the run's savepoint, or scratch) with the
        driver's outputs cut back to what they held at its barrier (to nothing without one)."""
        restore, snapshot, kept = self.initial_restore, None, {"collected": {}, "dead_letters": 0}
        if choice is not None:
            while self._retained[-1].checkpoint_id != choice.checkpoint_id:
                self._retained.pop()  # passed over as unreadable: not worth reading again at the next restart
            restore, snapshot, kept = choice.retained.pointer, choice.loaded, choice.retained.marks or kept
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
        return job

    @staticmethod
    def _run_attempt(job: Any) -> str:
        job.run()
        return job.status().state

    def _end_attempt(self, job: Any, failure: Exception | None) -> None:
        if failure is None:
            return  # the last attempt: status() and the result read it directly
        for record in job.checkpoint_history():
            self._history.append(dataclasses.replace(record, attempt=self.attempt))
        self._completed_before += job.checkpointing.num_completed
        if job.checkpointing.coordinator is not None:
            self._failed_before += job.checkpointing.coordinator.num_failed_checkpoints
        self._retained.extend(job.checkpointing.retained)
        self._latest_properties = job.checkpointing.latest_properties or self._latest_properties

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
        with self.attempts.changed:
            while self.state in ("created", "restarting") and not self._result.done():
                self.attempts.changed.wait(0.1)
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
                                   failures=tuple(self.attempts.failures),
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
