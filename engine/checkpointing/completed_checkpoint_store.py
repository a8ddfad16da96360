"""CompletedCheckpointStore: the N most recent completed checkpoints (seed 001).

Seed 001: the store may hold a limited number N of checkpoint handles; when it
holds more, the oldest handle is dropped and *that checkpoint's state is cleaned
up*, then the newest is written; recovery uses the latest.  Savepoints are never
subsumed (seed 001 CheckpointProperties) and are not counted in N: a savepoint
stays in the store while it is the latest entry (so recovery may start from it)
and leaves it, without being discarded, once a newer checkpoint is added (a
savepoint completing after a newer checkpoint is not kept at all).

:class:`StandaloneCompletedCheckpointStore` keeps everything in memory; the
checkpoint storage package supplies a persistent store behind the same
interface (retained-handles index in S3 or on disk).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Sequence

from engine.checkpointing.completed_checkpoint import CompletedCheckpoint
from engine.checkpointing.discarder import CheckpointDiscarder
from engine.checkpointing.job_status import JobStatus
from engine.errors import IllegalStateError, JobDefinitionError


class CompletedCheckpointStore(ABC):
    """Where completed checkpoints live until subsumed; the source of truth for recovery."""

    @abstractmethod
    def add_checkpoint_and_subsume_oldest(self, checkpoint: CompletedCheckpoint) -> list[CompletedCheckpoint]:
        """Add ``checkpoint`` and drop what falls out of retention; returns the checkpoints it discarded."""

    @abstractmethod
    def get_all_checkpoints(self) -> Sequence[CompletedCheckpoint]:
        """Retained checkpoints (and a latest savepoint), oldest first."""

    @abstractmethod
    def shutdown(self, job_status: JobStatus) -> None:
        """Stop: discard what the job's ending asks for (CheckpointProperties), keep the rest."""

    @property
    @abstractmethod
    def max_retained(self) -> int:
        """N: how many (non-savepoint) checkpoints are kept."""

    def get_latest_checkpoint(self) -> CompletedCheckpoint | None:
        """The checkpoint to restore from (seed 002 "Recovery": the latest completed checkpoint k)."""
        checkpoints = self.get_all_checkpoints()
        return checkpoints[-1] if checkpoints else None

    def max_checkpoint_id(self) -> int | None:
        """Highest id in the store: seeds the id counter on recovery."""
        checkpoints = self.get_all_checkpoints()
        return max((c.checkpoint_id for c in checkpoints), default=None)

    def num_checkpoints(self) -> int:
        return len(self.get_all_checkpoints())

    def location_of(self, checkpoint_id: int) -> str | None:
        """Where checkpoint ``checkpoint_id``, just added, was written (a savepoint: its own folder, below the
        root it was asked for), or None when it is held in memory only."""
        return next((c.external_pointer for c in self.get_all_checkpoints() if c.checkpoint_id == checkpoint_id),
                    None)


class StandaloneCompletedCheckpointStore(CompletedCheckpointStore):
    """In-memory store with N retention; discards go through the injected discarder."""

    def __init__(self, max_retained: int, discarder: CheckpointDiscarder,
                 initial: Sequence[CompletedCheckpoint] = ()) -> None:
        if isinstance(max_retained, bool) or not isinstance(max_retained, int) or max_retained < 1:
            raise JobDefinitionError("num_retained_checkpoints", max_retained, "must be an int >= 1")
        self._max_retained = max_retained
        self._discarder = discarder
        self._checkpoints: list[CompletedCheckpoint] = sorted(initial, key=lambda c: c.checkpoint_id)
        self._shut_down = False

    @property
    def max_retained(self) -> int:
        return self._max_retained

    def add_checkpoint_and_subsume_oldest(self, checkpoint: CompletedCheckpoint) -> list[CompletedCheckpoint]:
        if self._shut_down:
            raise IllegalStateError(f"completed checkpoint store is shut down; cannot add checkpoint {checkpoint.checkpoint_id}")
        if self._checkpoints and checkpoint.is_savepoint() \
                and checkpoint.checkpoint_id < self._checkpoints[-1].checkpoint_id:
            # a savepoint that completes after a newer checkpoint is not the latest: not kept, never discarded
            return []
        if self._checkpoints and checkpoint.checkpoint_id <= self._checkpoints[-1].checkpoint_id:
            raise IllegalStateError(
                f"Bug: checkpoint {checkpoint.checkpoint_id} added after {self._checkpoints[-1].checkpoint_id}; "
                "ids must strictly increase")
        self._checkpoints.append(checkpoint)
        discarded: list[CompletedCheckpoint] = []
        # savepoints that are no longer the latest entry leave the store, never discarded
        kept: list[CompletedCheckpoint] = []
        for c in self._checkpoints:
            if c.is_savepoint() and c is not checkpoint:
                continue
            kept.append(c)
        regular = [c for c in kept if not c.is_savepoint()]
        excess = len(regular) - self._max_retained
        for oldest in regular[:max(0, excess)]:
            if oldest.is_savepoint():
                raise IllegalStateError("Bug: savepoints must never be subsumed")
            kept.remove(oldest)
            if oldest.should_discard_on_subsume():
                self._discarder.discard_completed_checkpoint(oldest)
                discarded.append(oldest)
        self._checkpoints = kept
        return discarded

    def get_all_checkpoints(self) -> Sequence[CompletedCheckpoint]:
        return tuple(self._checkpoints)

    def shutdown(self, job_status: JobStatus) -> None:
        if self._shut_down:
            return
        self._shut_down = True
        try:
            for c in self._checkpoints:
                if not c.is_savepoint() and c.should_discard_on_shutdown(job_status):
                    self._discarder.discard_completed_checkpoint(c)
        finally:
            self._checkpoints = []
