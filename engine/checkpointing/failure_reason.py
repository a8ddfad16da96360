"""Why a checkpoint was not taken or did not complete (Flink's ``CheckpointFailureReason``).

Each reason carries its message, whether it is *pre-flight* (the checkpoint was
refused before any task was asked: seed 001's trigger pre-checks) and whether it
counts towards the tolerable failure number (Flink's CheckpointFailureManager:
a subsumed or refused checkpoint is not a failure of the job's checkpointing,
an expired or declined one is).
"""

from __future__ import annotations

import enum

from engine.errors import CheckpointDeclinedError


class CheckpointFailureReason(enum.Enum):
    """A checkpoint failure reason: ``(message, pre_flight, counts_as_failure)``."""

    # -- pre-flight: seed 001 "basic legality checks" -------------------------------------------
    CHECKPOINT_COORDINATOR_SHUTDOWN = ("Checkpoint coordinator is shut down.", True, False)
    PERIODIC_SCHEDULER_SHUTDOWN = ("Periodic checkpoint scheduler is shut down.", True, False)
    TOO_MANY_CHECKPOINT_REQUESTS = ("The maximum number of queued checkpoint requests exceeded.", True, False)
    TOO_MANY_CONCURRENT_CHECKPOINTS = ("The maximum number of concurrent checkpoints is exceeded.", True, False)
    MINIMUM_TIME_BETWEEN_CHECKPOINTS = ("The minimum time between checkpoints is still pending.", True, False)
    NOT_ALL_REQUIRED_TASKS_RUNNING = ("Not all required tasks are currently running.", True, False)
    CHECKPOINT_ID_COUNTER_FAILURE = ("The checkpoint id counter failed to produce the next id.", True, True)

    # -- in flight ------------------------------------------------------------------------------
    TRIGGER_CHECKPOINT_FAILURE = ("Trigger checkpoint failure.", False, True)
    CHECKPOINT_EXPIRED = ("Checkpoint expired before completing.", False, True)
    CHECKPOINT_SUBSUMED = ("Checkpoint has been subsumed.", False, False)
    CHECKPOINT_DECLINED = ("Checkpoint was declined.", False, True)
    CHECKPOINT_DECLINED_TASK_NOT_READY = ("Checkpoint was declined (tasks not ready).", False, False)
    CHECKPOINT_DECLINED_SUBSUMED = ("Checkpoint was canceled because a barrier from newer checkpoint was received.", False, False)
    CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER = ("Task received cancellation from one of its inputs.", False, False)
    CHECKPOINT_DECLINED_INPUT_END_OF_STREAM = ("Checkpoint was declined because one input stream is finished.", False, False)
    CHECKPOINT_COORDINATOR_SUSPEND = ("Checkpoint coordinator is suspending.", False, False)
    TASK_CHECKPOINT_FAILURE = ("Task local checkpoint failure (synchronous part).", False, True)
    CHECKPOINT_ASYNC_EXCEPTION = ("Asynchronous task checkpoint failed.", False, True)
    FINALIZE_CHECKPOINT_FAILURE = ("Failure to finalize checkpoint.", False, True)
    TASK_FAILURE = ("Task has failed.", False, False)

    def __init__(self, message: str, pre_flight: bool, counts_as_failure: bool) -> None:
        self.message = message
        self.pre_flight = pre_flight
        self.counts_as_failure = counts_as_failure

    def is_pre_flight(self) -> bool:
        return self.pre_flight


def checkpoint_exception(
    reason: CheckpointFailureReason, checkpoint_id: int | None = None, cause: BaseException | None = None
) -> CheckpointDeclinedError:
    """The error a failed trigger or checkpoint delivers through its Promise: it carries ``reason`` and ``checkpoint_id``."""
    where = "" if checkpoint_id is None else f" (checkpoint {checkpoint_id})"
    suffix = "" if cause is None else f": {cause!r}"
    error = CheckpointDeclinedError(f"{reason.name}: {reason.message}{where}{suffix}")
    error.reason = reason  # type: ignore[attr-defined]
    error.checkpoint_id = checkpoint_id  # type: ignore[attr-defined]
    if cause is not None:
        error.__cause__ = cause
    return error
