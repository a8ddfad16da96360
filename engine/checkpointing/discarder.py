"""Where discarded checkpoint state goes: an injected deleter, so the protocol never does I/O.

Seed 001: an UNKNOWN or DISCARDED acknowledgement's state handles are cleaned
up, an aborted PendingCheckpoint's collected state is dropped, and the
completed-checkpoint store drops the checkpoints that fall out of its N most
recent.  Checkpoint storage implements this protocol (deleting files, keeping
shared files still referenced); :class:`RecordingDiscarder` records calls for tests.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine.checkpointing.completed_checkpoint import CompletedCheckpoint


class CheckpointDiscarder(ABC):
    """Deletes checkpoint state; implementations must be idempotent (a handle may be discarded twice)."""

    @abstractmethod
    def discard_task_state(self, job_id: str, checkpoint_id: int, task_id: str, state: Any) -> None:
        """Delete what one task reported for one checkpoint (``state`` may be None)."""

    @abstractmethod
    def discard_completed_checkpoint(self, checkpoint: CompletedCheckpoint) -> None:
        """Delete a whole completed checkpoint that is subsumed or not retained after shutdown."""


class RecordingDiscarder(CheckpointDiscarder):
    """Remembers every discard, in order; for tests and dry runs."""

    def __init__(self) -> None:
        #: (job_id, checkpoint_id, task_id, state) per discarded task state
        self.task_states: list[tuple[str, int, str, Any]] = []
        #: completed checkpoints discarded, in order
        self.checkpoints: list[CompletedCheckpoint] = []

    def discard_task_state(self, job_id: str, checkpoint_id: int, task_id: str, state: Any) -> None:
        self.task_states.append((job_id, checkpoint_id, task_id, state))

    def discard_completed_checkpoint(self, checkpoint: CompletedCheckpoint) -> None:
        self.checkpoints.append(checkpoint)

    def discarded_checkpoint_ids(self) -> list[int]:
        return [c.checkpoint_id for c in self.checkpoints]
