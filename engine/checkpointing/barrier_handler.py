"""CheckpointBarrierHandler: decides, from the barriers a task's input gate delivers, when it snapshots (seed 003).

The input gate (``CheckpointedInputGate#pollNext`` in seed 003) hands the
handler every event of the four kinds it cares about:

- ``process_barrier(barrier, channel)``             a CheckpointBarrier
- ``process_cancellation_barrier(marker, channel)`` a CancelCheckpointMarker
- ``process_end_of_partition(channel)``             the channel's EndOfPartition
- ``process_element(element, channel)``             any other element, *before* the operator sees it
  (only the unaligned mode cares: in-flight data goes to the channel state)

and must not read a channel while ``is_blocked(channel)`` is True (aligned mode:
the channel already delivered barrier n; its data waits in the channel).  The
handler tells the task through :class:`CheckpointableTask` (seed 003's
``notifyCheckpoint`` / ``notifyAbortOnCancellationBarrier``).  Pure: no
threads, time from the injected clock.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Hashable, Sequence

from engine.checkpointing.failure_reason import CheckpointFailureReason
from engine.checkpointing.task_state import CheckpointMetrics
from engine.elements import CancelCheckpointMarker, CheckpointBarrier, StreamElement
from engine.errors import IllegalStateError


class CheckpointableTask(ABC):
    """The task the handler notifies (Flink's AbstractInvokable side of it)."""

    @abstractmethod
    def trigger_checkpoint_on_barrier(self, barrier: CheckpointBarrier, metrics: CheckpointMetrics) -> None:
        """All barriers needed are in: emit the barrier downstream, snapshot, acknowledge (seed 001 task side)."""

    @abstractmethod
    def abort_checkpoint_on_barrier(self, checkpoint_id: int, reason: CheckpointFailureReason) -> None:
        """The checkpoint cannot complete here: decline it and forward a CancelCheckpointMarker downstream."""


class CheckpointBarrierHandler(ABC):
    """Base of the tracker, aligner and alternating handlers."""

    def __init__(self, channels: Sequence[Hashable], task: CheckpointableTask, clock: Any) -> None:
        if not channels:
            raise IllegalStateError("a barrier handler needs at least one input channel")
        if len(set(channels)) != len(channels):
            raise IllegalStateError(f"input channels must be distinct, got {list(channels)}")
        self.channels: tuple[Hashable, ...] = tuple(channels)
        self._task = task
        self._clock = clock
        self._ended: set[Hashable] = set()
        self._latest_start_delay_ms = 0

    # -- the gate's calls ------------------------------------------------------------------------
    @abstractmethod
    def process_barrier(self, barrier: CheckpointBarrier, channel: Hashable) -> None: ...

    @abstractmethod
    def process_cancellation_barrier(self, marker: CancelCheckpointMarker, channel: Hashable) -> None: ...

    @abstractmethod
    def process_end_of_partition(self, channel: Hashable) -> None: ...

    def process_element(self, element: StreamElement, channel: Hashable) -> None:
        """Called for every non-event element before the operator processes it; no-op unless unaligned."""
        self._check_channel(channel)

    def is_blocked(self, channel: Hashable) -> bool:
        """True while the gate must not read ``channel`` (aligned: it delivered barrier n)."""
        return False

    @abstractmethod
    def get_latest_checkpoint_id(self) -> int: ...

    @abstractmethod
    def is_checkpoint_pending(self) -> bool: ...

    def is_finished(self) -> bool:
        """Every input channel delivered its EndOfPartition."""
        return len(self._ended) == len(self.channels)

    # -- helpers -------------------------------------------------------------------------------
    def _check_channel(self, channel: Hashable) -> None:
        if channel not in self.channels:
            raise IllegalStateError(f"unknown input channel {channel!r}; this gate reads {list(self.channels)}")
        if channel in self._ended:
            raise IllegalStateError(f"input channel {channel!r} delivered an element after its EndOfPartition")

    def _mark_checkpoint_start(self, barrier: CheckpointBarrier) -> None:
        self._latest_start_delay_ms = max(0, self._clock.now_ms() - barrier.timestamp)

    def _notify_checkpoint(self, barrier: CheckpointBarrier, alignment_duration_ms: int) -> None:
        self._task.trigger_checkpoint_on_barrier(barrier, CheckpointMetrics(
            alignment_duration_ms=alignment_duration_ms,
            checkpoint_start_delay_ms=self._latest_start_delay_ms,
            unaligned=barrier.options.is_unaligned()))

    def _notify_abort(self, checkpoint_id: int, reason: CheckpointFailureReason) -> None:
        self._task.abort_checkpoint_on_barrier(checkpoint_id, reason)
