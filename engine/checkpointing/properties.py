"""CheckpointProperties: what kind of snapshot this is and when its state may be discarded (seed 001).

Seed 001 names four of Flink's properties: *forced* (a savepoint or a user
request: skips the concurrency and min-pause pre-checks), *externalized*
(kept outside the job's life: savepoints and retained checkpoints), *savepoint*,
and *subsumed* (a newer checkpoint completed, so this one may go).  The discard
flags say, per way of ending, whether the snapshot's files are deleted.
Savepoints discard nothing, ever: they belong to the user.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.checkpointing.config import ExternalizedCheckpointRetention
from engine.checkpointing.job_status import JobStatus
from engine.elements import CheckpointType


@dataclass(frozen=True, slots=True)
class CheckpointProperties:
    """Flink's CheckpointProperties (without the claim mode)."""

    forced: bool
    checkpoint_type: CheckpointType
    discard_subsumed: bool
    discard_finished: bool
    discard_cancelled: bool
    discard_failed: bool
    discard_suspended: bool

    # -- factories -----------------------------------------------------------------------------
    @staticmethod
    def for_checkpoint(retention: ExternalizedCheckpointRetention) -> CheckpointProperties:
        """A periodic checkpoint: never forced, discarded when subsumed; shutdown per ``retention``."""
        R = ExternalizedCheckpointRetention
        return CheckpointProperties(
            forced=False,
            checkpoint_type=CheckpointType.CHECKPOINT,
            discard_subsumed=True,
            discard_finished=True,
            discard_cancelled=retention is not R.RETAIN_ON_CANCELLATION,
            discard_failed=retention is R.NO_EXTERNALIZED_CHECKPOINTS,
            discard_suspended=retention is R.NO_EXTERNALIZED_CHECKPOINTS,
        )

    @staticmethod
    def for_savepoint(checkpoint_type: CheckpointType = CheckpointType.SAVEPOINT) -> CheckpointProperties:
        """A savepoint (or stop-with-savepoint): forced, one-shot, never subsumed, never discarded."""
        if not checkpoint_type.is_savepoint():
            raise ValueError(f"for_savepoint needs a savepoint type, got {checkpoint_type}")
        return CheckpointProperties(True, checkpoint_type, False, False, False, False, False)

    @staticmethod
    def for_forced_checkpoint(retention: ExternalizedCheckpointRetention) -> CheckpointProperties:
        """A user-requested checkpoint that skips the pacing pre-checks but is otherwise a checkpoint."""
        base = CheckpointProperties.for_checkpoint(retention)
        return CheckpointProperties(True, base.checkpoint_type, base.discard_subsumed, base.discard_finished,
                                    base.discard_cancelled, base.discard_failed, base.discard_suspended)

    # -- questions -----------------------------------------------------------------------------
    def is_savepoint(self) -> bool:
        return self.checkpoint_type.is_savepoint()

    def is_synchronous_savepoint(self) -> bool:
        return self.checkpoint_type.is_synchronous()

    def is_externalized(self) -> bool:
        """Kept beyond the job in some way of ending (savepoints always)."""
        return self.is_savepoint() or not (self.discard_cancelled and self.discard_failed and self.discard_suspended)

    def can_be_subsumed(self) -> bool:
        """Savepoints are never subsumed (seed 001); pending savepoints are not aborted by a newer completion."""
        return not self.is_savepoint()

    def should_discard_on_shutdown(self, job_status: JobStatus) -> bool:
        return {
            JobStatus.FINISHED: self.discard_finished,
            JobStatus.CANCELED: self.discard_cancelled,
            JobStatus.FAILED: self.discard_failed,
            JobStatus.SUSPENDED: self.discard_suspended,
        }[job_status]
