"""PendingCheckpoint: triggered, not yet acknowledged by every task (seed 001).

Seed 001 lists what it tracks: the tasks that must still acknowledge, the tasks
that did, and the operator states their acks carried.  An ack has one of four
outcomes (``TaskAcknowledgeResult``); the coordinator acts on them (a duplicate
is ignored, an unknown or discarded one has its state handles cleaned up).  Once
no task is left to acknowledge, :meth:`finalize_checkpoint` turns it into a
:class:`CompletedCheckpoint`.  A pending checkpoint ends exactly once: finalized
or aborted (then it is *disposed* and every later ack is DISCARDED).
"""

from __future__ import annotations

import enum
from typing import Any, Iterable, Mapping

from engine.checkpointing.completed_checkpoint import CompletedCheckpoint
from engine.checkpointing.discarder import CheckpointDiscarder
from engine.checkpointing.failure_reason import CheckpointFailureReason, checkpoint_exception
from engine.checkpointing.promise import Promise
from engine.checkpointing.properties import CheckpointProperties
from engine.checkpointing.scheduler import ScheduledTask
from engine.checkpointing.task_state import CheckpointMetrics, TaskStateSnapshot
from engine.elements import CheckpointOptions
from engine.errors import IllegalStateError


class TaskAcknowledgeResult(enum.Enum):
    """Outcome of :meth:`PendingCheckpoint.acknowledge_task` (seed 001)."""

    SUCCESS = "SUCCESS"
    #: the task already acknowledged: ignore the message
    DUPLICATE = "DUPLICATE"
    #: the task is not part of this checkpoint: discard its state handles
    UNKNOWN = "UNKNOWN"
    #: the checkpoint was already disposed: discard the state handles
    DISCARDED = "DISCARDED"


class PendingCheckpoint:
    """One checkpoint between trigger and completion or abort."""

    def __init__(
        self,
        job_id: str,
        checkpoint_id: int,
        timestamp_ms: int,
        tasks_to_acknowledge: Iterable[str],
        properties: CheckpointProperties,
        options: CheckpointOptions,
        result: Promise[CompletedCheckpoint] | None = None,
        target_location: str | None = None,
    ) -> None:
        self.job_id = job_id
        self.checkpoint_id = checkpoint_id
        self.timestamp_ms = timestamp_ms
        self.properties = properties
        self.options = options
        self.result: Promise[CompletedCheckpoint] = result if result is not None else Promise()
        self.target_location = target_location
        self._not_yet_acknowledged: set[str] = set(tasks_to_acknowledge)
        if not self._not_yet_acknowledged:
            raise IllegalStateError(f"Bug: checkpoint {checkpoint_id} has no task to acknowledge it")
        self._acknowledged: dict[str, TaskStateSnapshot | None] = {}
        self._metrics: dict[str, CheckpointMetrics | None] = {}
        self._disposed = False
        self._failure_reason: CheckpointFailureReason | None = None
        self._canceller: ScheduledTask | None = None

    # -- questions -----------------------------------------------------------------------------
    def is_disposed(self) -> bool:
        return self._disposed

    def are_tasks_fully_acknowledged(self) -> bool:
        return not self._not_yet_acknowledged and not self._disposed

    def can_be_subsumed(self) -> bool:
        """A pending savepoint is not aborted when a newer checkpoint completes (seed 001)."""
        return self.properties.can_be_subsumed()

    def not_yet_acknowledged_tasks(self) -> frozenset[str]:
        return frozenset(self._not_yet_acknowledged)

    def acknowledged_tasks(self) -> Mapping[str, TaskStateSnapshot | None]:
        return dict(self._acknowledged)

    def task_metrics(self) -> Mapping[str, CheckpointMetrics | None]:
        return dict(self._metrics)

    @property
    def failure_reason(self) -> CheckpointFailureReason | None:
        return self._failure_reason

    # -- protocol steps ------------------------------------------------------------------------
    def set_cancellation_handle(self, canceller: ScheduledTask) -> None:
        """The timeout timer; cancelled when the checkpoint ends."""
        self._canceller = canceller

    def acknowledge_task(
        self, task_id: str, state: TaskStateSnapshot | None, metrics: CheckpointMetrics | None = None
    ) -> TaskAcknowledgeResult:
        """Record one task's ack (seed 001's four outcomes)."""
        if self._disposed:
            return TaskAcknowledgeResult.DISCARDED
        if task_id in self._not_yet_acknowledged:
            self._not_yet_acknowledged.discard(task_id)
            self._acknowledged[task_id] = state
            self._metrics[task_id] = metrics
            return TaskAcknowledgeResult.SUCCESS
        if task_id in self._acknowledged:
            return TaskAcknowledgeResult.DUPLICATE
        return TaskAcknowledgeResult.UNKNOWN

    def finalize_checkpoint(
        self, completion_timestamp_ms: int, metadata: Mapping[str, Any] | None = None,
        external_pointer: str | None = None,
    ) -> CompletedCheckpoint:
        """Turn into a CompletedCheckpoint; the result promise is resolved by the coordinator once stored."""
        if self._disposed:
            raise IllegalStateError(f"Bug: checkpoint {self.checkpoint_id} finalized after being disposed")
        if self._not_yet_acknowledged:
            raise IllegalStateError(
                f"Bug: checkpoint {self.checkpoint_id} finalized while tasks {sorted(self._not_yet_acknowledged)} "
                "have not acknowledged")
        completed = CompletedCheckpoint(
            job_id=self.job_id,
            checkpoint_id=self.checkpoint_id,
            timestamp_ms=self.timestamp_ms,
            completion_timestamp_ms=completion_timestamp_ms,
            properties=self.properties,
            task_states={t: s if s is not None else TaskStateSnapshot() for t, s in self._acknowledged.items()},
            external_pointer=external_pointer if external_pointer is not None else self.target_location,
            metadata=metadata or {},
        )
        self._dispose()
        return completed

    def abort(
        self, reason: CheckpointFailureReason, discarder: CheckpointDiscarder, cause: BaseException | None = None
    ) -> None:
        """Dispose, discard every acknowledged task's state and fail the result promise with ``reason``."""
        if self._disposed:
            return
        self._failure_reason = reason
        self._dispose()
        for task_id, state in self._acknowledged.items():
            discarder.discard_task_state(self.job_id, self.checkpoint_id, task_id, state)
        if not self.result.is_done():
            self.result.reject(checkpoint_exception(reason, self.checkpoint_id, cause))

    def _dispose(self) -> None:
        self._disposed = True
        if self._canceller is not None:
            self._canceller.cancel()
            self._canceller = None

    def __repr__(self) -> str:
        return (f"PendingCheckpoint(id={self.checkpoint_id}, savepoint={self.properties.is_savepoint()}, "
                f"acked={sorted(self._acknowledged)}, waiting={sorted(self._not_yet_acknowledged)}, "
                f"disposed={self._disposed})")
