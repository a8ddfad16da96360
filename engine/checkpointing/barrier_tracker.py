"""CheckpointBarrierTracker: AT_LEAST_ONCE, never blocks a channel (seed 003).

Seed 003 (class comment): it "keeps track of what checkpoint barriers have been
received from which input channels. Once it has observed all checkpoint barriers
for a checkpoint ID, it notifies its listener"; it "does not block the input
channels that have sent barriers, so it cannot be used to gain exactly-once
processing guarantees", and "strictly assumes that newer checkpoints have
higher checkpoint IDs".

Kept as the seed lays it out: a queue of pending checkpoint ids in ascending
order; the first barrier of an id newer than the latest seen opens an entry
(at most ``MAX_CHECKPOINTS_TO_TRACK``); when every channel delivered id n, n and
every older entry leave the queue and n is triggered unless it was aborted.
Differences, each for a reason:

- channels are counted as a set, so a repeated barrier on one channel cannot
  trigger early (the seed's first precondition), and raises instead;
- an EndOfPartition counts its channel as done for every pending and future id
  (the issue's rule), so a finished input does not hold checkpoints back;
- older entries that leave the queue because a newer id completed (or were
  pushed out by the tracking limit) are reported aborted (DECLINED_SUBSUMED),
  so the coordinator hears about them instead of waiting for the timeout.
"""

from __future__ import annotations

from typing import Any, Hashable, Sequence

from engine.checkpointing.barrier_handler import CheckpointableTask, CheckpointBarrierHandler
from engine.checkpointing.failure_reason import CheckpointFailureReason
from engine.elements import CancelCheckpointMarker, CheckpointBarrier
from engine.errors import IllegalStateError

#: seed 003: "make sure we do not track too many checkpoints"
MAX_CHECKPOINTS_TO_TRACK = 50


class _CheckpointBarrierCount:
    __slots__ = ("checkpoint_id", "channels", "aborted", "barrier")

    def __init__(self, checkpoint_id: int, barrier: CheckpointBarrier | None) -> None:
        self.checkpoint_id = checkpoint_id
        self.channels: set[Hashable] = set()
        self.aborted = False
        self.barrier = barrier

    def mark_aborted(self) -> bool:
        """True the first time (the caller then notifies)."""
        first = not self.aborted
        self.aborted = True
        return first


class CheckpointBarrierTracker(CheckpointBarrierHandler):
    def __init__(self, channels: Sequence[Hashable], task: CheckpointableTask, clock: Any) -> None:
        super().__init__(channels, task, clock)
        self._pending: list[_CheckpointBarrierCount] = []
        self._latest_pending_id = -1

    def get_latest_checkpoint_id(self) -> int:
        return self._latest_pending_id

    def is_checkpoint_pending(self) -> bool:
        return bool(self._pending)

    def pending_checkpoint_ids(self) -> list[int]:
        return [c.checkpoint_id for c in self._pending]

    def _is_complete(self, count: _CheckpointBarrierCount) -> bool:
        return all(c in count.channels or c in self._ended for c in self.channels)

    def process_barrier(self, barrier: CheckpointBarrier, channel: Hashable) -> None:
        self._check_channel(channel)
        barrier_id = barrier.checkpoint_id
        count = next((c for c in self._pending if c.checkpoint_id == barrier_id), None)
        if count is None:
            if barrier_id <= self._latest_pending_id:
                return  # not newer than the latest: there cannot be a successful checkpoint for it any more
            self._mark_checkpoint_start(barrier)
            self._latest_pending_id = barrier_id
            count = _CheckpointBarrierCount(barrier_id, barrier)
            self._pending.append(count)
            if len(self._pending) > MAX_CHECKPOINTS_TO_TRACK:
                dropped = self._pending.pop(0)
                if dropped.mark_aborted():
                    self._notify_abort(dropped.checkpoint_id, CheckpointFailureReason.CHECKPOINT_DECLINED_SUBSUMED)
        elif channel in count.channels:
            raise IllegalStateError(f"Stream corrupt: repeated barrier {barrier_id} on input channel {channel!r}")
        if count.barrier is None:
            count.barrier = barrier
        count.channels.add(channel)
        if self._is_complete(count):
            self._complete(count)

    def _complete(self, count: _CheckpointBarrierCount) -> None:
        """Remove ``count`` and every older entry (now subsumed); trigger ``count`` unless aborted."""
        position = self._pending.index(count)
        older, self._pending = self._pending[:position], self._pending[position + 1:]
        for stale in older:
            if stale.mark_aborted():
                self._notify_abort(stale.checkpoint_id, CheckpointFailureReason.CHECKPOINT_DECLINED_SUBSUMED)
        if not count.aborted:
            assert count.barrier is not None
            self._notify_checkpoint(count.barrier, 0)

    def process_cancellation_barrier(self, marker: CancelCheckpointMarker, channel: Hashable) -> None:
        self._check_channel(channel)
        checkpoint_id = marker.checkpoint_id
        # abort every pending checkpoint older than this one (seed 003)
        while self._pending and self._pending[0].checkpoint_id < checkpoint_id:
            stale = self._pending.pop(0)
            if stale.mark_aborted():
                self._notify_abort(stale.checkpoint_id, CheckpointFailureReason.CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER)
        first = self._pending[0] if self._pending else None
        if first is not None and first.checkpoint_id == checkpoint_id:
            if first.mark_aborted():
                self._notify_abort(checkpoint_id, CheckpointFailureReason.CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER)
            # still count the marker as that channel's barrier, to drop the entry once all arrived
            first.channels.add(channel)
            if self._is_complete(first):
                self._pending.pop(0)
        elif checkpoint_id > self._latest_pending_id:
            self._notify_abort(checkpoint_id, CheckpointFailureReason.CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER)
            self._latest_pending_id = checkpoint_id
            aborted = _CheckpointBarrierCount(checkpoint_id, None)
            aborted.mark_aborted()
            aborted.channels.add(channel)
            if not self._is_complete(aborted):
                self._pending.insert(0, aborted)
        # else: a trailing cancellation of a checkpoint already cancelled

    def process_end_of_partition(self, channel: Hashable) -> None:
        self._check_channel(channel)
        self._ended.add(channel)
        for count in list(self._pending):
            if count in self._pending and self._is_complete(count):
                if count.aborted:
                    self._pending.remove(count)
                else:
                    self._complete(count)
