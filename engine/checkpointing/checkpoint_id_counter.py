"""Checkpoint ids: strictly increasing, also across restarts (seed 001, "globally increasing checkpointID").

On recovery the job master seeds the counter with one past the highest id found
in checkpoint storage, so a restarted job never reuses ``chk-<id>`` of an earlier
attempt.  The storage issue may supply a persistent counter behind the same interface.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from engine.errors import IllegalStateError

#: Flink's INITIAL_CHECKPOINT_ID
INITIAL_CHECKPOINT_ID = 1


class CheckpointIDCounter(ABC):
    """Hands out checkpoint ids."""

    @abstractmethod
    def get_and_increment(self) -> int:
        """The next id to use; never returns the same id twice."""

    @abstractmethod
    def get(self) -> int:
        """The id the next :meth:`get_and_increment` returns."""

    @abstractmethod
    def set_count(self, next_id: int) -> None:
        """Continue from ``next_id`` (recovery); refuses to go backwards."""


class StandaloneCheckpointIDCounter(CheckpointIDCounter):
    """An in-memory counter, seeded on recovery with :meth:`continue_after`."""

    def __init__(self, next_id: int = INITIAL_CHECKPOINT_ID) -> None:
        if next_id < INITIAL_CHECKPOINT_ID:
            raise IllegalStateError(f"checkpoint ids start at {INITIAL_CHECKPOINT_ID}, asked to start at {next_id}")
        self._next = next_id

    @staticmethod
    def continue_after(max_stored_checkpoint_id: int | None) -> StandaloneCheckpointIDCounter:
        """A counter for a restarted job whose storage's highest checkpoint id is ``max_stored_checkpoint_id``."""
        if max_stored_checkpoint_id is None:
            return StandaloneCheckpointIDCounter()
        return StandaloneCheckpointIDCounter(max_stored_checkpoint_id + 1)

    def get_and_increment(self) -> int:
        current = self._next
        self._next += 1
        return current

    def get(self) -> int:
        return self._next

    def set_count(self, next_id: int) -> None:
        if next_id < self._next:
            raise IllegalStateError(
                f"Bug: checkpoint ids must strictly increase; counter is at {self._next}, asked to set {next_id}")
        self._next = next_id
