"""CheckpointCoordinator: the job master's side of the snapshot protocol (seed 001).

Seed 001's four phases, and where they are here:

1. trigger      -- :meth:`trigger_checkpoint` / :meth:`trigger_savepoint` / the periodic timer;
                   pre-checks in :class:`CheckpointRequestDecider`; a :class:`PendingCheckpoint`
                   is registered, its timeout canceller scheduled, then every task to trigger
                   (the sources, seed 001 "input vertices") is asked to inject barrier n.
2. propagate    -- barriers flow through the tasks (barrier handlers, task side).
3. acknowledge  -- :meth:`receive_acknowledge_message` (SUCCESS / DUPLICATE / UNKNOWN / DISCARDED,
                   seed 001's ack strategy) and :meth:`receive_decline_message`.
4. commit       -- when every task acknowledged: finalize to a :class:`CompletedCheckpoint`, add
                   it to the :class:`CompletedCheckpointStore` (which keeps N), abort older pending
                   checkpoints (subsumed; savepoints excepted), notify every task that the checkpoint
                   completed (sinks commit on that notification) and resolve the request's Promise.

Everything leaves through injected collaborators: the :class:`CheckpointTaskGateway`
(trigger / notify tasks), the :class:`CheckpointDiscarder` (state clean-up), the
:class:`Scheduler` (periodic trigger, per-checkpoint timeout) and ``fail_job``
(too many failures, via :class:`CheckpointFailureManager`).  Time comes from the
injected clock.  Not thread-safe by design: the runtime calls it from one thread
(Flink's job master main thread), scheduler callbacks included.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections import OrderedDict
from typing import Any, Callable, Mapping, Sequence

from engine.checkpointing.checkpoint_id_counter import CheckpointIDCounter
from engine.checkpointing.completed_checkpoint import CompletedCheckpoint
from engine.checkpointing.completed_checkpoint_store import CompletedCheckpointStore
from engine.checkpointing.config import CheckpointConfig
from engine.checkpointing.discarder import CheckpointDiscarder
from engine.checkpointing.failure_manager import CheckpointFailureManager
from engine.checkpointing.failure_reason import CheckpointFailureReason, checkpoint_exception
from engine.checkpointing.job_status import JobStatus
from engine.checkpointing.pending_checkpoint import PendingCheckpoint, TaskAcknowledgeResult
from engine.checkpointing.promise import Promise
from engine.checkpointing.properties import CheckpointProperties
from engine.checkpointing.request_decider import (
    CheckpointRequestDecider,
    CheckpointTriggerRequest,
    CoordinatorState,
    RequestDecision,
)
from engine.checkpointing.scheduler import ScheduledTask, Scheduler
from engine.checkpointing.task_state import CheckpointMetrics, TaskStateSnapshot
from engine.elements import CheckpointOptions, CheckpointType
from engine.errors import IllegalStateError, JobFailedError, fenced_cause

log = logging.getLogger(__name__)

#: aborts because the coordinator stops with its job: expected on every stop, logged at INFO for checkpoints
_JOB_ENDING = frozenset({CheckpointFailureReason.CHECKPOINT_COORDINATOR_SUSPEND,
                         CheckpointFailureReason.CHECKPOINT_COORDINATOR_SHUTDOWN})

#: how many recently ended checkpoint ids are remembered to classify late acks (Flink keeps 16)
NUM_RECENT_CHECKPOINTS = 16


class CheckpointTaskGateway(ABC):
    """The coordinator's view of the job's tasks; implemented by each runtime."""

    @abstractmethod
    def tasks_to_trigger(self) -> Sequence[str]:
        """Tasks that inject barriers: the source tasks (seed 001: input vertices)."""

    @abstractmethod
    def tasks_to_acknowledge(self) -> Sequence[str]:
        """Tasks that must acknowledge every checkpoint and are notified of completion: all tasks."""

    @abstractmethod
    def is_task_running(self, task_id: str) -> bool: ...

    @abstractmethod
    def trigger_checkpoint(self, task_id: str, checkpoint_id: int, timestamp_ms: int,
                           options: CheckpointOptions) -> None:
        """Ask a source task to inject barrier ``checkpoint_id`` at its current position (Sn)."""

    @abstractmethod
    def notify_checkpoint_complete(self, task_id: str, checkpoint_id: int, timestamp_ms: int) -> None:
        """Checkpoint completed: the task's operators may commit (sinks publish staged output)."""

    @abstractmethod
    def notify_checkpoint_aborted(self, task_id: str, checkpoint_id: int, timestamp_ms: int) -> None:
        """Checkpoint aborted: the task drops what it prepared for it."""

    def checkpoint_starting(self, checkpoint_id: int, target_location: str | None) -> None:  # noqa: B027
        """Checkpoint ``checkpoint_id`` is about to be triggered; ``target_location`` is a savepoint's folder (None
        for a checkpoint).  Called before any barrier is injected: a source snapshots, and may start its upload,
        inside :meth:`trigger_checkpoint`, so where its state goes must be known by then."""

    # -- checkpoints after tasks finished (Flink's FLIP-147, on by default since Flink 1.15) ----------------------
    def is_task_finished(self, task_id: str) -> bool:
        """The task consumed all its input and ended while others still run (a source subtask with no split,
        or whose splits all ended).  A runtime that returns True must implement :meth:`snapshot_finished_task`."""
        return False

    def snapshot_finished_task(self, task_id: str, checkpoint_id: int, timestamp_ms: int,
                               options: CheckpointOptions) -> None:
        """Acknowledge ``checkpoint_id`` for a finished task with its final state (no barrier: its outputs ended)."""
        raise IllegalStateError(f"Bug: the gateway reported task {task_id} finished but cannot snapshot it")


class CheckpointCoordinator:
    """One job's checkpoint coordinator."""

    def __init__(
        self,
        job_id: str,
        config: CheckpointConfig,
        gateway: CheckpointTaskGateway,
        completed_store: CompletedCheckpointStore,
        id_counter: CheckpointIDCounter,
        discarder: CheckpointDiscarder,
        clock: Any,
        scheduler: Scheduler,
        fail_job: Callable[[JobFailedError], None],
        metadata_supplier: Callable[[PendingCheckpoint], Mapping[str, Any]] | None = None,
    ) -> None:
        config.validate()
        self.job_id = job_id
        self._config = config
        self._gateway = gateway
        self._store = completed_store
        self._counter = id_counter
        self._discarder = discarder
        self._clock = clock
        self._scheduler = scheduler
        self._metadata_supplier = metadata_supplier
        self._decider = CheckpointRequestDecider(
            config.get_max_concurrent_checkpoints(), config.get_min_pause_between_checkpoints(), clock)
        self._fail_job = fail_job
        self._failure_manager = CheckpointFailureManager(config.get_tolerable_checkpoint_failure_number(), fail_job)
        self._pending: dict[int, PendingCheckpoint] = {}
        self._recent_aborted: OrderedDict[int, None] = OrderedDict()
        self._recent_completed: OrderedDict[int, frozenset[str]] = OrderedDict()
        self._last_completion_ms: int | None = None
        #: checkpoints and savepoints that failed (aborted, declined, expired, not stored); subsumed ones excepted
        self.num_failed_checkpoints = 0
        self._shut_down = False
        self._periodic_scheduling = False
        self._periodic_task: ScheduledTask | None = None
        # ids continue across restarts: never hand out an id at or below one already stored (seed 001)
        stored_max = completed_store.max_checkpoint_id()
        if stored_max is not None and id_counter.get() <= stored_max:
            id_counter.set_count(stored_max + 1)

    # -- queries -------------------------------------------------------------------------------
    def get_number_of_pending_checkpoints(self) -> int:
        return len(self._pending)

    def get_pending_checkpoints(self) -> Mapping[int, PendingCheckpoint]:
        return dict(self._pending)

    def get_completed_checkpoint_store(self) -> CompletedCheckpointStore:
        return self._store

    def get_latest_completed_checkpoint(self) -> CompletedCheckpoint | None:
        """What a restarting job restores from (seed 002 "Recovery": the latest completed checkpoint k)."""
        return self._store.get_latest_checkpoint()

    def next_checkpoint_id(self) -> int:
        """The id the next checkpoint or savepoint will get (the counter does not move)."""
        return self._counter.get()

    def restore_checkpoint_id_counter(self, restored_checkpoint_id: int) -> None:
        """A restore from snapshot ``restored_checkpoint_id``: ids continue after it (Flink's restoreSavepoint sets
        the CheckpointIDCounter to the savepoint's id + 1), so no new checkpoint reuses its id; the counter never
        moves back (ids already handed out, or stored, stay behind it)."""
        if restored_checkpoint_id < 0:
            raise IllegalStateError(f"restored_checkpoint_id must be >= 0, got {restored_checkpoint_id}")
        if self._counter.get() <= restored_checkpoint_id:
            self._counter.set_count(restored_checkpoint_id + 1)

    def get_failure_manager(self) -> CheckpointFailureManager:
        return self._failure_manager

    def is_shut_down(self) -> bool:
        return self._shut_down

    def is_periodic_checkpointing_started(self) -> bool:
        return self._periodic_scheduling

    # -- periodic scheduling -------------------------------------------------------------------
    def start_checkpoint_scheduler(self, initial_delay_ms: int | None = None) -> None:
        """Trigger a periodic checkpoint every interval, the first after ``initial_delay_ms`` (default: one interval)."""
        if self._shut_down:
            raise IllegalStateError("checkpoint coordinator is shut down; cannot start the checkpoint scheduler")
        if not self._config.is_checkpointing_enabled():
            raise IllegalStateError("checkpointing is not enabled (no interval); call enable_checkpointing(interval_ms)")
        self._cancel_periodic_task()
        self._periodic_scheduling = True
        delay = self._config.get_checkpoint_interval() if initial_delay_ms is None else initial_delay_ms
        self._periodic_task = self._scheduler.schedule(delay, self._on_periodic_timer)

    def stop_checkpoint_scheduler(self) -> None:
        """Stop periodic triggering and abort pending checkpoints (CHECKPOINT_COORDINATOR_SUSPEND)."""
        self._periodic_scheduling = False
        self._cancel_periodic_task()
        self._abort_pending_checkpoints(CheckpointFailureReason.CHECKPOINT_COORDINATOR_SUSPEND)

    def _cancel_periodic_task(self) -> None:
        if self._periodic_task is not None:
            self._periodic_task.cancel()
            self._periodic_task = None

    def _on_periodic_timer(self) -> None:
        if not self._periodic_scheduling or self._shut_down:
            return
        self._periodic_task = self._scheduler.schedule(self._config.get_checkpoint_interval(), self._on_periodic_timer)
        self._submit(CheckpointTriggerRequest(
            CheckpointProperties.for_checkpoint(self._config.get_externalized_checkpoint_retention()),
            self._config.checkpoint_options(), is_periodic=True))

    def _reschedule_periodic(self, delay_ms: int) -> None:
        if self._periodic_scheduling:
            self._cancel_periodic_task()
            self._periodic_task = self._scheduler.schedule(delay_ms, self._on_periodic_timer)

    # -- triggering ----------------------------------------------------------------------------
    def trigger_checkpoint(self, force: bool = False, is_periodic: bool = False) -> Promise[CompletedCheckpoint]:
        """Request a checkpoint now; ``force`` skips the concurrency and min-pause pre-checks."""
        retention = self._config.get_externalized_checkpoint_retention()
        props = (CheckpointProperties.for_forced_checkpoint(retention) if force
                 else CheckpointProperties.for_checkpoint(retention))
        return self._submit(CheckpointTriggerRequest(props, self._config.checkpoint_options(), is_periodic))

    def trigger_savepoint(self, target_location: str | None = None) -> Promise[CompletedCheckpoint]:
        """A savepoint: forced, one-shot, always aligned, never subsumed (seed 001)."""
        return self._submit(CheckpointTriggerRequest(
            CheckpointProperties.for_savepoint(CheckpointType.SAVEPOINT),
            self._config.savepoint_options(CheckpointType.SAVEPOINT), False, target_location))

    def trigger_synchronous_savepoint(self, terminate: bool = False,
                                      target_location: str | None = None) -> Promise[CompletedCheckpoint]:
        """Stop-with-savepoint (``terminate``: drain, MAX_WATERMARK before the barrier).

        Periodic checkpoints stop first (pending ones are aborted); if the savepoint
        fails, periodic checkpointing resumes, as in Flink.
        """
        was_scheduling = self._periodic_scheduling
        if was_scheduling:
            self.stop_checkpoint_scheduler()
        ctype = CheckpointType.SAVEPOINT_TERMINATE if terminate else CheckpointType.SAVEPOINT_SUSPEND
        promise = self._submit(CheckpointTriggerRequest(
            CheckpointProperties.for_savepoint(ctype), self._config.savepoint_options(ctype), False, target_location))

        def resume(_: BaseException) -> None:
            if was_scheduling and not self._shut_down:
                self.start_checkpoint_scheduler()

        promise.then(None, resume)
        return promise

    def _coordinator_state(self) -> CoordinatorState:
        required = list(dict.fromkeys([*self._gateway.tasks_to_trigger(), *self._gateway.tasks_to_acknowledge()]))
        return CoordinatorState(
            is_shut_down=self._shut_down,
            num_pending_checkpoints=len(self._pending),
            last_checkpoint_completion_ms=self._last_completion_ms,
            tasks_not_running=self._tasks_not_running(required),
        )

    def _tasks_not_running(self, required: Sequence[str]) -> tuple[str, ...]:
        """Tasks that keep a checkpoint from being triggered.  A finished task does not (it acknowledges with its
        final state), unless every source task finished: then nothing injects barriers and the job is ending."""
        gateway = self._gateway
        finished = {t for t in required if gateway.is_task_finished(t)}
        triggers = list(gateway.tasks_to_trigger())
        if triggers and all(t in finished for t in triggers):
            finished = set()
        return tuple(t for t in required if t not in finished and not gateway.is_task_running(t))

    def _submit(self, request: CheckpointTriggerRequest) -> Promise[CompletedCheckpoint]:
        self._apply(self._decider.choose_request_to_execute(request, self._coordinator_state()))
        return request.result

    def _trigger_queued_requests(self) -> None:
        if self._decider.num_queued_requests():
            self._apply(self._decider.choose_queued_request_to_execute(self._coordinator_state()))

    def _apply(self, decision: RequestDecision) -> None:
        if decision.retry_periodic_after_ms is not None:
            self._reschedule_periodic(decision.retry_periodic_after_ms)
        if decision.execute is not None:
            self._start_trigger(decision.execute)

    def _start_trigger(self, request: CheckpointTriggerRequest) -> None:
        try:
            checkpoint_id = self._counter.get_and_increment()
        except Exception as exc:  # the counter may live in storage
            reason = CheckpointFailureReason.CHECKPOINT_ID_COUNTER_FAILURE
            request.result.reject(checkpoint_exception(reason, None, exc))
            self._failure_manager.handle_checkpoint_failure(None, reason, request.properties.is_savepoint())
            return
        timestamp_ms = self._clock.now_ms()
        pending = PendingCheckpoint(
            self.job_id, checkpoint_id, timestamp_ms, self._gateway.tasks_to_acknowledge(),
            request.properties, request.options, request.result, request.target_location)
        self._pending[checkpoint_id] = pending
        pending.set_cancellation_handle(self._scheduler.schedule(
            self._config.get_checkpoint_timeout(), lambda: self._abort_expired(checkpoint_id)))
        gateway = self._gateway
        gateway.checkpoint_starting(checkpoint_id, request.target_location)
        for task_id in gateway.tasks_to_trigger():
            if pending.is_disposed():
                break  # declined (or completed) while triggering: the remaining sources need no barrier
            try:
                if not gateway.is_task_finished(task_id):
                    gateway.trigger_checkpoint(task_id, checkpoint_id, timestamp_ms, request.options)
            except Exception as exc:
                self._abort_pending(pending, CheckpointFailureReason.TRIGGER_CHECKPOINT_FAILURE, exc)
                return
        for task_id in pending.not_yet_acknowledged_tasks():
            if not pending.is_disposed() and gateway.is_task_finished(task_id):
                self._snapshot_finished(pending, task_id)

    def report_task_finished(self, task_id: str) -> None:
        """A task ended while the job runs on: every pending checkpoint it has not snapshotted for (its barrier
        can no longer reach it, or, for a source, was never injected) takes its final state instead."""
        for pending in list(self._pending.values()):
            if not pending.is_disposed() and task_id in pending.not_yet_acknowledged_tasks():
                self._snapshot_finished(pending, task_id)

    def _snapshot_finished(self, pending: PendingCheckpoint, task_id: str) -> None:
        try:
            self._gateway.snapshot_finished_task(task_id, pending.checkpoint_id, pending.timestamp_ms,
                                                 pending.options)
        except Exception as exc:
            self._abort_pending(pending, CheckpointFailureReason.TRIGGER_CHECKPOINT_FAILURE, exc)

    def _abort_expired(self, checkpoint_id: int) -> None:
        pending = self._pending.get(checkpoint_id)
        if pending is not None and not pending.is_disposed():
            self._abort_pending(pending, CheckpointFailureReason.CHECKPOINT_EXPIRED)

    # -- acknowledgements ----------------------------------------------------------------------
    def receive_acknowledge_message(
        self, job_id: str, task_id: str, checkpoint_id: int,
        state: TaskStateSnapshot | None = None, metrics: CheckpointMetrics | None = None,
    ) -> TaskAcknowledgeResult:
        """Seed 001's ack strategy; UNKNOWN and DISCARDED acks have their state handles discarded."""
        if job_id != self.job_id:
            raise IllegalStateError(
                f"acknowledgement for job {job_id!r} reached the coordinator of job {self.job_id!r} "
                f"(task {task_id}, checkpoint {checkpoint_id}): routing bug in the runtime")
        if self._shut_down:
            self._discarder.discard_task_state(job_id, checkpoint_id, task_id, state)
            return TaskAcknowledgeResult.DISCARDED
        pending = self._pending.get(checkpoint_id)
        if pending is not None:
            if pending.is_disposed():
                raise IllegalStateError(f"Bug: disposed checkpoint {checkpoint_id} still registered as pending")
            result = pending.acknowledge_task(task_id, state, metrics)
            if result is TaskAcknowledgeResult.SUCCESS:
                if pending.are_tasks_fully_acknowledged():
                    self._complete_pending_checkpoint(pending)
            elif result in (TaskAcknowledgeResult.UNKNOWN, TaskAcknowledgeResult.DISCARDED):
                self._discarder.discard_task_state(job_id, checkpoint_id, task_id, state)
            return result
        completed_tasks = self._recent_completed.get(checkpoint_id)
        if completed_tasks is not None and task_id in completed_tasks:
            # a repeated ack of a completed checkpoint: its handles are part of that checkpoint, keep them
            return TaskAcknowledgeResult.DUPLICATE
        self._discarder.discard_task_state(job_id, checkpoint_id, task_id, state)
        if checkpoint_id in self._recent_aborted or completed_tasks is not None:
            return TaskAcknowledgeResult.DISCARDED  # late ack of a checkpoint that already ended
        return TaskAcknowledgeResult.UNKNOWN

    def receive_decline_message(
        self, job_id: str, task_id: str, checkpoint_id: int,
        reason: CheckpointFailureReason = CheckpointFailureReason.CHECKPOINT_DECLINED,
        cause: BaseException | None = None,
    ) -> bool:
        """A task could not take its part of ``checkpoint_id``: abort it. Returns False if it was no longer pending."""
        if job_id != self.job_id:
            raise IllegalStateError(f"decline for job {job_id!r} reached the coordinator of job {self.job_id!r}")
        pending = self._pending.get(checkpoint_id)
        if self._shut_down or pending is None or pending.is_disposed():
            return False
        self._abort_pending(pending, reason, cause)
        return True

    # -- completion ----------------------------------------------------------------------------
    def _complete_pending_checkpoint(self, pending: PendingCheckpoint) -> None:
        checkpoint_id = pending.checkpoint_id
        metadata = self._metadata_supplier(pending) if self._metadata_supplier is not None else None
        completed = pending.finalize_checkpoint(self._clock.now_ms(), metadata)
        del self._pending[checkpoint_id]
        self._remember(self._recent_completed, checkpoint_id, frozenset(completed.task_states))
        try:
            self._store.add_checkpoint_and_subsume_oldest(completed)
        except Exception as exc:
            reason = CheckpointFailureReason.FINALIZE_CHECKPOINT_FAILURE
            if fenced_cause(exc) is not None:
                # another master owns the job: never a tolerable failure, and nothing of ours is deleted
                # (a folder of the same id may be the new holder's); the job stops at once
                pending.result.reject(checkpoint_exception(reason, checkpoint_id, exc))
                self._shut_down_fenced(exc)
                return
            self._discarder.discard_completed_checkpoint(completed)
            self.num_failed_checkpoints += 1
            log.warning("job %s: checkpoint %d failed: %s (%s: %s)", self.job_id, checkpoint_id, reason.message,
                        type(exc).__name__, exc, extra={"event": "checkpoint_failed", "job_id": self.job_id,
                                                        "checkpoint_id": checkpoint_id, "reason": reason.name,
                                                        "cause": f"{type(exc).__name__}: {exc}"})
            pending.result.reject(checkpoint_exception(reason, checkpoint_id, exc))
            self._failure_manager.handle_checkpoint_failure(checkpoint_id, reason, completed.is_savepoint(), exc)
            self._notify_aborted(checkpoint_id, pending.timestamp_ms)
            self._trigger_queued_requests()
            return
        self._last_completion_ms = completed.completion_timestamp_ms
        self._failure_manager.handle_checkpoint_success(checkpoint_id)
        self._log_completed(pending, completed)
        # older pending checkpoints can no longer be useful: subsumed (savepoints are kept)
        for older in sorted(self._pending.values(), key=lambda p: p.checkpoint_id):
            if older.checkpoint_id < checkpoint_id and older.can_be_subsumed():
                self._abort_pending(older, CheckpointFailureReason.CHECKPOINT_SUBSUMED, trigger_queued=False)
        for task_id in self._gateway.tasks_to_acknowledge():
            self._gateway.notify_checkpoint_complete(task_id, checkpoint_id, completed.timestamp_ms)
        pending.result.resolve(completed)
        self._trigger_queued_requests()

    def _log_completed(self, pending: PendingCheckpoint, completed: CompletedCheckpoint) -> None:
        metrics = [m for m in pending.task_metrics().values() if m is not None]
        kind = "savepoint" if completed.is_savepoint() else "checkpoint"
        duration_ms = completed.completion_timestamp_ms - completed.timestamp_ms
        alignment_ms = max((m.alignment_duration_ms for m in metrics), default=0)
        unaligned = any(m.unaligned for m in metrics)
        # the store names the folder the checkpoint was written to; ``completed`` names only where it was asked
        # for: a savepoint's root (the folder ``sluice restore`` takes is a level below)
        location = self._store.location_of(completed.checkpoint_id) or completed.external_pointer
        log.info("job %s: %s %d completed in %d ms (alignment %d ms%s, %d tasks)%s", self.job_id, kind,
                 completed.checkpoint_id, duration_ms, alignment_ms, ", unaligned" if unaligned else "",
                 len(completed.task_states), f" at {location}" if location else "",
                 extra={"event": f"{kind}_completed", "job_id": self.job_id, "checkpoint_id": completed.checkpoint_id,
                        "duration_ms": duration_ms, "alignment_ms": alignment_ms, "unaligned": unaligned,
                        "location": location})

    def _shut_down_fenced(self, exc: BaseException) -> None:
        self._periodic_scheduling = False
        self._cancel_periodic_task()
        failure = JobFailedError(f"this job master was fenced and stops without writing anything more: {exc}")
        failure.__cause__ = exc
        self._fail_job(failure)

    # -- aborts --------------------------------------------------------------------------------
    def _abort_pending(self, pending: PendingCheckpoint, reason: CheckpointFailureReason,
                       cause: BaseException | None = None, trigger_queued: bool = True) -> None:
        """Abort + discard collected state, account the failure, tell tasks (seed 001 step 4/5)."""
        if pending.is_disposed():
            return
        pending.abort(reason, self._discarder, cause)
        self._pending.pop(pending.checkpoint_id, None)
        kind = "savepoint" if pending.properties.is_savepoint() else "checkpoint"
        if reason is CheckpointFailureReason.CHECKPOINT_SUBSUMED:
            level = logging.DEBUG
        elif reason in _JOB_ENDING and kind == "checkpoint":
            # a periodic checkpoint cut short because the job stops (stop --savepoint, cancel): nothing to act
            # on, so INFO; it still counts as failed, as in Flink's checkpoint statistics.  A savepoint the user
            # asked for stays a WARNING: it was not taken
            level = logging.INFO
        else:
            level = logging.WARNING
        if reason is not CheckpointFailureReason.CHECKPOINT_SUBSUMED:
            self.num_failed_checkpoints += 1
        log.log(level, "job %s: %s %d failed: %s%s", self.job_id, kind, pending.checkpoint_id, reason.message,
                f" ({type(cause).__name__}: {cause})" if cause is not None else "",
                extra={"event": f"{kind}_failed", "job_id": self.job_id, "checkpoint_id": pending.checkpoint_id,
                       "reason": reason.name, "cause": None if cause is None else f"{type(cause).__name__}: {cause}"})
        self._remember(self._recent_aborted, pending.checkpoint_id, None)
        if fenced_cause(cause) is not None:  # e.g. a task's upload refused by the lease check
            self._notify_aborted(pending.checkpoint_id, pending.timestamp_ms)
            self._shut_down_fenced(cause)  # type: ignore[arg-type]
            return
        self._failure_manager.handle_checkpoint_failure(pending.checkpoint_id, reason,
                                                        pending.properties.is_savepoint(), cause)
        self._notify_aborted(pending.checkpoint_id, pending.timestamp_ms)
        if trigger_queued:
            self._trigger_queued_requests()

    def _notify_aborted(self, checkpoint_id: int, timestamp_ms: int) -> None:
        for task_id in self._gateway.tasks_to_acknowledge():
            self._gateway.notify_checkpoint_aborted(task_id, checkpoint_id, timestamp_ms)

    def _abort_pending_checkpoints(self, reason: CheckpointFailureReason) -> None:
        for pending in sorted(self._pending.values(), key=lambda p: p.checkpoint_id):
            self._abort_pending(pending, reason, trigger_queued=False)

    @staticmethod
    def _remember(recent: OrderedDict, checkpoint_id: int, value: Any) -> None:
        recent[checkpoint_id] = value
        while len(recent) > NUM_RECENT_CHECKPOINTS:
            recent.popitem(last=False)

    # -- shutdown ------------------------------------------------------------------------------
    def shutdown(self, job_status: JobStatus) -> None:
        """Stop for good: abort pending checkpoints, fail queued requests, shut the store down per ``job_status``."""
        if self._shut_down:
            return
        self._periodic_scheduling = False
        self._cancel_periodic_task()
        self._abort_pending_checkpoints(CheckpointFailureReason.CHECKPOINT_COORDINATOR_SHUTDOWN)
        self._shut_down = True
        self._decider.abort_all(CheckpointFailureReason.CHECKPOINT_COORDINATOR_SHUTDOWN)
        self._store.shutdown(job_status)
