"""A local job across its attempts: restarts from the latest completed checkpoint (seed 002 "Recovery").

:class:`JobRun` owns what outlives one attempt: the completed-checkpoint store and
the checkpoint id counter (ids continue across restarts, seed 001), the storage
adapter, the restart strategy, the writer thread pool, the fault plan, the
checkpoint history and the control mailbox through which another thread (the
job master's :class:`~engine.runtime.local.job_client.LocalJobClient`) asks for
savepoints or a cancel.  Each attempt is a fresh :class:`LocalJob` built from the
plan (``env.get_parallelism()`` now, so a restore may rescale) and restored from
the latest completed checkpoint, or from the savepoint the run started from,
or from scratch when there is neither, by the restart loop both runtimes share
(engine/runtime/attempts.py).
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable

from engine.api.restart import restart_strategy_of
from engine.checkpointing.checkpoint_id_counter import StandaloneCheckpointIDCounter
from engine.checkpointing.job_status import JobStatus
from engine.errors import JobFailedError
from engine.graph.plan import PhysicalPlan, build_plan
from engine.io.dead_letter_output import dead_letter_history
from engine.runtime.attempts import Attempts, RestartPoint
from engine.runtime.checkpoint_storage_adapter import CheckpointStorageAdapter
from engine.runtime.control import ControlQueue, ControlRequest
from engine.runtime.restore import RestorePoint, load_restore_point
from engine.runtime.handle import CheckpointRecord, JobExecutionResult, JobStatusReport, stable_job_id  # noqa: F401 - re-exported
from engine.histories import BoundedHistory, history_limits
from engine.runtime.local.checkpointing import Mailbox
from engine.runtime.local.faults import FaultKind
from engine.runtime.recovery import discard_orphaned_staging, persist_dead_letters, sinks_that_committed

log = logging.getLogger(__name__)

#: writer threads for the asynchronous part of snapshots
ASYNC_WRITER_THREADS = 2


class JobStopped(Exception):
    """Internal: the attempt ends on request (cancel, stop-with-savepoint); not a failure."""


class JobRun:
    """The run of one job: attempts, restarts, savepoint and cancel requests (see the module docstring).

    ``new_attempt(run, plan, restore)`` builds one attempt (``LocalJob``); it is passed in by
    ``LocalRuntime`` because the attempt's module builds this one.
    """

    def __init__(self, runtime: Any, job_name: str, roots: list[Any], collected: dict[int, list[Any]],
                 from_savepoint: str | None, *, new_attempt: Callable[[JobRun, PhysicalPlan, RestorePoint | None], Any]
                 ) -> None:
        self.runtime = runtime
        self._new_attempt = new_attempt
        self.env = runtime.env
        self.job_name = job_name
        self.roots = roots
        self.collected = collected
        self.from_savepoint = from_savepoint
        self.job_id = stable_job_id(job_name, self.env.get_runtime_options().get("job_id"))
        self.clock = self.env.get_clock()
        config = self.env.get_checkpoint_config()
        #: RuntimeExecutionMode.BATCH (engine/api/execution_mode.py): keyed inputs sorted, no checkpoints
        self.batch = self.env.is_batch(roots)
        self.checkpointing_enabled = self.env.is_checkpointing_enabled() and not self.batch
        if self.batch and self.env.is_checkpointing_enabled():
            log.warning("job %r runs in BATCH mode: it takes no checkpoints (as in Flink); a failed attempt "
                        "starts over from the beginning of its bounded input", job_name)
        self.adapter = CheckpointStorageAdapter(
            self.job_id, job_name, self.env.get_max_parallelism(), config.get_checkpoint_storage_dir(),
            config.get_num_retained_checkpoints(), fence=self.env.get_runtime_options().get("fence"))
        self.store = self.adapter.completed_store
        if from_savepoint:
            self.adapter.keep_restore_source(from_savepoint)
        self.initial_restore: RestorePoint | None = load_restore_point(from_savepoint) if from_savepoint else None
        start_after = self.initial_restore.checkpoint_id if self.initial_restore is not None else None
        self.counter = StandaloneCheckpointIDCounter.continue_after(start_after)
        self.executor: ThreadPoolExecutor | None = None
        self.control = Mailbox()
        #: savepoint, stop and cancel requests (engine/runtime/control.py), served on the scheduler thread through
        #: the mailbox, between two scheduling rounds
        self.requests = ControlQueue(wake=lambda: self.control.post(self.serve_control_requests))
        max_history, max_dead_letters = history_limits(self.env.get_runtime_options())
        #: the newest dead letters and checkpoint records, with exact totals (engine/histories.py)
        self.dead_letters: BoundedHistory[dict[str, Any]] = dead_letter_history(
            self.env.get_runtime_options(), max_dead_letters, job_name)
        self.history: BoundedHistory[CheckpointRecord] = BoundedHistory(max_history)
        #: completed checkpoints (not savepoints, not the final one) of every attempt
        self.num_completed_checkpoints = 0
        #: failed checkpoints of the attempts before the current one
        self.failed_checkpoints_before = 0
        self.records_before_attempt = 0
        self.attempts: Attempts[Any] = Attempts(  # the first attempt from initial_restore
            job_name, restart_strategy_of(self.env), self.clock, start=self._start_attempt, run=self._run_attempt,
            end=self._end_attempt, candidates=lambda: [(c.checkpoint_id, c) for c in
                                                       reversed(list(self.store.get_all_checkpoints()))],
            load=self.adapter.restore_point, committed=lambda cid: sinks_that_committed(self.roots, cid),
            on_end=self._end_run)
        self._alignment: dict[int, int] = {}
        self._savepoint_futures: dict[int, Future] = {}
        self._stop_after: set[int] = set()

    # -- attempts ----------------------------------------------------------------------------------
    state = property(lambda self: self.attempts.state, doc="created, running, restarting, finished, stopped, ...")
    attempt = property(lambda self: self.attempts.attempt)
    restarts = property(lambda self: self.attempts.restarts)
    job = property(lambda self: self.attempts.current, doc="the current attempt (a LocalJob)")

    def run(self) -> JobExecutionResult:
        started = time.monotonic()
        self.executor = ThreadPoolExecutor(ASYNC_WRITER_THREADS, thread_name_prefix=f"sluice-upload-{self.job_id}")
        try:
            self.attempts.run()
        finally:
            # control requests still queued, and any that come later, are answered (refused), not left waiting
            self.requests.close(self._serve_control)
            self.control.close()
            for future in self._savepoint_futures.values():
                if not future.done():
                    future.set_exception(JobFailedError(f"job {self.job_name!r} ended before the savepoint completed"))
            self.executor.shutdown(wait=True)
            persist_dead_letters(self.dead_letters, "end")  # finished, stopped or failed: nothing lost
        job = self.job
        return JobExecutionResult(
            job_name=self.job_name, job_id=self.job_id, runtime="local",
            net_runtime_ms=int((time.monotonic() - started) * 1000),
            metrics=job.metrics() if job is not None else {}, dead_letters=list(self.dead_letters),
            collected=self.collected,
            completed_checkpoints=[r.checkpoint_id for r in self.history], restarts=self.restarts,
            num_completed_checkpoints=self.history.total, num_dead_letters=self.dead_letters.total)

    def _start_attempt(self, choice: RestartPoint | None) -> Any:
        """Attempt n+1 from a retained checkpoint, or (``choice`` None) from the run's savepoint or scratch."""
        restore = choice.loaded if choice is not None else self.initial_restore
        if self.runtime.fault_plan is not None:
            self.runtime.fault_plan.attempt = self.attempt + 1
        if restore is None:
            for target in self.collected.values():
                target.clear()  # from scratch: nothing of a failed attempt counts
            discard_orphaned_staging(self.roots, self.adapter.storage)
        plan = build_plan(self.roots, self.env.get_parallelism(), self.env.get_max_parallelism(),
                          chaining=self.env.is_chaining_enabled())
        self.adapter.set_plan_nodes(n for v in plan.vertices for n in v.nodes)
        # a snapshot the Spark runtime took gets the per-task states it lacks from its portable core
        job = self._new_attempt(self, plan, restore.for_plan(plan) if restore is not None else None)
        if restore is not None:
            discard_orphaned_staging(self.roots, self.adapter.storage)  # sinks re-committed restore's handles in initialize_state
        if self.job is not None and self.checkpointing_enabled:  # the attempt before this one
            self.failed_checkpoints_before += self.job.coordinator.num_failed_checkpoints
        return job

    @staticmethod
    def _run_attempt(job: Any) -> str:
        try:
            job.run()
        except JobStopped as stop:  # a cancel or a stop-with-savepoint: not a failure
            return "cancelled" if str(stop) == "cancel" else "stopped"
        return "finished"

    def _end_attempt(self, job: Any, failure: Exception | None) -> None:
        if failure is not None:
            self.records_before_attempt += job.records_read()
        job.end(failure is not None)

    def _end_run(self, status: JobStatus | None) -> None:
        """Retention at the end of the whole run (the coordinator's shutdown); anything but a clean end is a
        failure: FINISHED would delete the retained checkpoints an operator needs."""
        if self.checkpointing_enabled and self.job is not None:
            self.job.coordinator.shutdown(status or JobStatus.FAILED)

    # -- checkpoint events (scheduler thread) ------------------------------------------------------
    def record_task_metrics(self, checkpoint_id: int, metrics: Any) -> None:
        if metrics is not None:
            self._alignment[checkpoint_id] = max(self._alignment.get(checkpoint_id, 0), metrics.alignment_duration_ms)

    def on_checkpoint_completed(self, job: Any, checkpoint_id: int, first_task: bool, final: bool = False) -> None:
        if not first_task:
            return
        latest = self.store.get_latest_checkpoint()
        pointer = self.adapter.external_pointers.pop(checkpoint_id, None)  # read once: here
        is_savepoint = latest is not None and latest.checkpoint_id == checkpoint_id and latest.is_savepoint()
        is_savepoint = is_savepoint or checkpoint_id in self._savepoint_futures
        kind = "final" if final else ("savepoint" if is_savepoint else "checkpoint")
        in_flight = 0
        if latest is not None and latest.checkpoint_id == checkpoint_id:
            for state in latest.task_states.values():
                channel_state = state.input_channel_state
                if channel_state is None:
                    continue
                if hasattr(channel_state, "elements"):
                    in_flight += sum(len(e) for e in channel_state.elements.values())
                else:
                    in_flight += sum(f.rows for f in channel_state.files)
        self.history.append(CheckpointRecord(checkpoint_id, kind, "completed", self.attempt, self.clock.now_ms(),
                                             pointer, self._alignment.pop(checkpoint_id, 0), in_flight,
                                             latest.timestamp_ms if latest is not None and latest.checkpoint_id == checkpoint_id
                                             else self.clock.now_ms(), self.adapter.sizes.pop(checkpoint_id, None)))
        if kind == "checkpoint":
            self.num_completed_checkpoints += 1
        persist_dead_letters(self.dead_letters, checkpoint_id)  # all so far: at least once (dead_letter_output.py)
        pending = job.coordinator.get_pending_checkpoints()
        for older in [cid for cid in self._alignment if cid < checkpoint_id and cid not in pending]:
            del self._alignment[older]  # aborted: it will never complete
        future = self._savepoint_futures.pop(checkpoint_id, None)
        if future is not None and not future.done():
            future.set_result(pointer)
        if checkpoint_id in self._stop_after:
            self._stop_after.discard(checkpoint_id)
            job.stop_requested = "savepoint"
        if self.runtime.fault_plan is not None:
            self.runtime.fault_plan.fire(FaultKind.BEFORE_COMMIT, checkpoint_id)

    # -- control (called on the scheduler thread through ``control``) -------------------------------
    def serve_control_requests(self) -> None:
        self.requests.serve(self._serve_control)

    def _serve_control(self, request: ControlRequest) -> None:
        if request.kind == "cancel":
            self.do_cancel()
            request.future.set_result(None)
        else:
            self.do_trigger_savepoint(request.target, request.future, request.kind == "stop", request.drain)

    def do_trigger_savepoint(self, target_dir: str, future: Future, stop: bool, drain: bool) -> None:
        job = self.job
        if job is None or not self.checkpointing_enabled or self.state != "running":
            future.set_exception(JobFailedError(
                f"cannot take a savepoint of job {self.job_name!r} in state {self.state!r}"
                + ("" if self.checkpointing_enabled else "; enable checkpointing (env.enable_checkpointing)")))
            return
        coordinator = job.coordinator
        for cid in [cid for cid, f in self._savepoint_futures.items() if f.done()]:
            del self._savepoint_futures[cid]  # failed or aborted savepoints: their callers have the answer
            self._stop_after.discard(cid)
        before = set(coordinator.get_pending_checkpoints())
        promise = (coordinator.trigger_synchronous_savepoint(terminate=drain, target_location=target_dir) if stop
                   else coordinator.trigger_savepoint(target_dir))
        new_ids = [cid for cid, p in coordinator.get_pending_checkpoints().items()
                   if cid not in before and p.target_location == target_dir]
        for cid in new_ids:  # the gateway registered its target before any barrier (checkpoint_starting)
            self._savepoint_futures[cid] = future
            if stop:
                self._stop_after.add(cid)
        promise.then(None, lambda exc: future.done() or future.set_exception(exc))
        if not new_ids and not promise.is_done():
            future.set_exception(JobFailedError("the savepoint request was queued behind running checkpoints; retry"))

    def do_cancel(self) -> None:
        if self.job is not None:
            self.job.stop_requested = "cancel"

    def status(self) -> JobStatusReport:
        job = self.job
        latest = self.history[-1].checkpoint_id if self.history else None
        return JobStatusReport(
            self.job_id, self.job_name, self.state, self.attempt, self.restarts, latest,
            job.current_watermark() if job is not None else 0,
            self.records_before_attempt + (job.records_read() if job is not None else 0),
            job.records_written() if job is not None else 0,
            num_completed_checkpoints=self.num_completed_checkpoints,
            num_failed_checkpoints=self.failed_checkpoints_before + (
                job.coordinator.num_failed_checkpoints if job is not None and self.checkpointing_enabled else 0),
            metrics=job.metrics() if job is not None else {},
            splits=job.split_watermarks() if job is not None else {},
            operators=job.operator_metrics() if job is not None else {},
            state_size_bytes=dict(self.adapter.last_operator_sizes), failures=tuple(self.attempts.failures))
