"""Exactly-once barrier handling, one checkpoint at a time: aligned, unaligned and alternating (seed 003).

Seed 003 lists four handlers; the three exactly-once ones share one state
machine here (as Flink's later ``SingleCheckpointBarrierHandler`` does), and
the public classes fix what it may do:

- :class:`CheckpointBarrierAligner` -- aligned only (seed 002 "aligning"):
  a channel that delivered barrier n is blocked (``is_blocked``: the gate stops
  reading it, its records wait in the channel); once every live channel delivered
  n the task snapshots, then the channels are released.
- :class:`AlternatingCheckpointBarrierHandler` -- EXACTLY_ONCE with unaligned
  checkpoints enabled.  Per barrier, from its options:
    * UNALIGNED: *unaligned mode* -- the first barrier n triggers the snapshot at
      once, overtaking the data queued in the other channels; every element the
      task then consumes from a channel that has not delivered n yet is in-flight
      data of n and goes to the :class:`ChannelStateWriter`; when every channel
      delivered n (or ended), ``finish_input(n)``.
    * ALIGNED with ``aligned_checkpoint_timeout_ms``: starts aligned and switches to
      unaligned once ``now - barrier.timestamp >= timeout`` (time from the injected
      clock; checked on every input call and by a timer on the injected scheduler),
      or at once if the first barrier arrives already that late.  Switching releases
      the blocked channels (their queued data follows barrier n: not channel state).
    * FORCED_ALIGNED (savepoints) and ALIGNED without timeout: aligned, never switched.

Common rules (Flink's CheckpointBarrierAligner):

- a barrier newer than the one being aligned aborts the current checkpoint
  (CHECKPOINT_DECLINED_SUBSUMED), releases the channels and starts the new one;
  an older barrier is a trailing one and ignored;
- CancelCheckpointMarker n aborts n if it is in progress, or marks n as cancelled
  so its later barriers are ignored; the task is told once
  (CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER) and forwards the marker downstream;
- EndOfPartition counts its channel as done for the current and every later
  alignment (the issue's rule; Flink 1.11 aborted instead).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Hashable, Sequence

from engine.checkpointing.barrier_handler import CheckpointableTask, CheckpointBarrierHandler
from engine.checkpointing.channel_state import ChannelStateWriter
from engine.checkpointing.failure_reason import CheckpointFailureReason
from engine.checkpointing.scheduler import ScheduledTask, Scheduler
from engine.elements import AlignmentType, CancelCheckpointMarker, CheckpointBarrier, StreamElement
from engine.errors import IllegalStateError

R = CheckpointFailureReason


class SingleCheckpointBarrierHandler(CheckpointBarrierHandler):
    """The shared state machine; use one of the public subclasses."""

    def __init__(
        self,
        channels: Sequence[Hashable],
        task: CheckpointableTask,
        clock: Any,
        allow_unaligned: bool,
        channel_state_writer: ChannelStateWriter | None = None,
        scheduler: Scheduler | None = None,
    ) -> None:
        super().__init__(channels, task, clock)
        if allow_unaligned and channel_state_writer is None:
            raise IllegalStateError("unaligned checkpoints need a ChannelStateWriter for the in-flight data")
        self._allow_unaligned = allow_unaligned
        self._writer = channel_state_writer
        self._scheduler = scheduler
        self._current_id = -1
        self._pending = False
        self._barrier: CheckpointBarrier | None = None
        self._received: set[Hashable] = set()
        self._blocked: set[Hashable] = set()
        self._unaligned = False
        self._alignment_start_ms = 0
        self._timer: ScheduledTask | None = None

    # -- questions -------------------------------------------------------------------------------
    def get_latest_checkpoint_id(self) -> int:
        return self._current_id

    def is_checkpoint_pending(self) -> bool:
        return self._pending

    def is_blocked(self, channel: Hashable) -> bool:
        return channel in self._blocked

    def blocked_channels(self) -> frozenset[Hashable]:
        return frozenset(self._blocked)

    def is_unaligned(self) -> bool:
        """The checkpoint in progress runs unaligned (started so, or switched after the timeout)."""
        return self._pending and self._unaligned

    def has_inflight_data(self, checkpoint_id: int, channel: Hashable) -> bool:
        """Seed 003: True iff the unaligned checkpoint still expects barrier ``checkpoint_id`` on ``channel``."""
        return (self._pending and self._unaligned and checkpoint_id == self._current_id
                and channel not in self._received and channel not in self._ended)

    # -- the gate's calls ------------------------------------------------------------------------
    def process_barrier(self, barrier: CheckpointBarrier, channel: Hashable) -> None:
        self._check_readable(channel)
        barrier_id = barrier.checkpoint_id
        if self._pending and barrier_id == self._current_id:
            if channel in self._received:
                raise IllegalStateError(f"Stream corrupt: repeated barrier {barrier_id} on input channel {channel!r}")
            self._received.add(channel)
            if not self._unaligned:
                self._blocked.add(channel)
                self.check_alignment_timeout()
        elif barrier_id > self._current_id:
            if self._pending:
                # a newer checkpoint started before this one completed here: abort it (seed 003)
                self._abort_current(R.CHECKPOINT_DECLINED_SUBSUMED)
            self._begin(barrier, channel)
        else:
            return  # trailing barrier of an older, completed or cancelled checkpoint
        self._complete_if_all_arrived()

    def process_element(self, element: StreamElement, channel: Hashable) -> None:
        self._check_readable(channel)
        if not self._pending:
            return
        if not self._unaligned:
            self.check_alignment_timeout()
        if self._unaligned and channel not in self._received:
            assert self._writer is not None
            self._writer.add_input_data(self._current_id, channel, element)

    def process_cancellation_barrier(self, marker: CancelCheckpointMarker, channel: Hashable) -> None:
        self._check_readable(channel)
        checkpoint_id = marker.checkpoint_id
        if self._pending:
            if checkpoint_id == self._current_id:
                self._abort_current(R.CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER)
            elif checkpoint_id > self._current_id:
                # the newer checkpoint is cancelled, so is the current one
                self._abort_current(R.CHECKPOINT_DECLINED_SUBSUMED)
                self._current_id = checkpoint_id
                self._notify_abort(checkpoint_id, R.CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER)
            # else: trailing cancellation of an older checkpoint
        elif checkpoint_id > self._current_id:
            # the first event of a new checkpoint is its cancellation: its barriers will be ignored
            self._current_id = checkpoint_id
            self._notify_abort(checkpoint_id, R.CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER)

    def process_end_of_partition(self, channel: Hashable) -> None:
        self._check_readable(channel)
        self._ended.add(channel)
        self._complete_if_all_arrived()

    def check_alignment_timeout(self) -> bool:
        """Switch the aligned checkpoint in progress to unaligned if its barrier is late enough; True if it did."""
        if not self._pending or self._unaligned or self._barrier is None:
            return False
        if not (self._can_time_out(self._barrier) and self._is_timed_out(self._barrier)):
            return False
        self._start_unaligned(replace(self._barrier, options=self._barrier.options.with_unaligned()))
        return True

    # -- internals -------------------------------------------------------------------------------
    def _check_readable(self, channel: Hashable) -> None:
        self._check_channel(channel)
        if channel in self._blocked:
            raise IllegalStateError(
                f"input channel {channel!r} is blocked for the alignment of checkpoint {self._current_id}; "
                "the input gate must not read it until is_blocked() is False")

    def _can_time_out(self, barrier: CheckpointBarrier) -> bool:
        options = barrier.options
        return (self._allow_unaligned and options.alignment is AlignmentType.ALIGNED
                and options.aligned_checkpoint_timeout_ms is not None)

    def _is_timed_out(self, barrier: CheckpointBarrier) -> bool:
        timeout = barrier.options.aligned_checkpoint_timeout_ms
        assert timeout is not None
        return self._clock.now_ms() - barrier.timestamp >= timeout

    def _begin(self, barrier: CheckpointBarrier, channel: Hashable) -> None:
        self._current_id = barrier.checkpoint_id
        self._pending = True
        self._barrier = barrier
        self._received = {channel}
        self._alignment_start_ms = self._clock.now_ms()
        self._mark_checkpoint_start(barrier)
        if barrier.options.is_unaligned():
            if not self._allow_unaligned:
                raise IllegalStateError(
                    f"Bug: unaligned barrier {barrier.checkpoint_id} reached a CheckpointBarrierAligner; a job with "
                    "unaligned checkpoints must use the AlternatingCheckpointBarrierHandler")
            self._start_unaligned(barrier)
        elif self._can_time_out(barrier) and self._is_timed_out(barrier):
            self._start_unaligned(replace(barrier, options=barrier.options.with_unaligned()))
        else:
            self._unaligned = False
            self._blocked.add(channel)
            if self._can_time_out(barrier) and self._scheduler is not None:
                timeout = barrier.options.aligned_checkpoint_timeout_ms
                assert timeout is not None
                delay = max(0, timeout - (self._clock.now_ms() - barrier.timestamp))
                checkpoint_id = barrier.checkpoint_id
                self._timer = self._scheduler.schedule(delay, lambda: self._on_alignment_timer(checkpoint_id))

    def _on_alignment_timer(self, checkpoint_id: int) -> None:
        if self._pending and self._current_id == checkpoint_id:
            self.check_alignment_timeout()

    def _start_unaligned(self, barrier: CheckpointBarrier) -> None:
        """Trigger now; channels that delivered the barrier are released, the others' data becomes channel state."""
        assert self._writer is not None
        self._cancel_timer()
        self._unaligned = True
        self._barrier = barrier
        self._blocked.clear()
        self._writer.start(barrier.checkpoint_id, barrier.options)
        self._notify_checkpoint(barrier, self._clock.now_ms() - self._alignment_start_ms)

    def _all_arrived(self) -> bool:
        return all(c in self._received or c in self._ended for c in self.channels)

    def _complete_if_all_arrived(self) -> None:
        if not self._pending or not self._all_arrived():
            return
        checkpoint_id, barrier = self._current_id, self._barrier
        assert barrier is not None
        self._pending = False
        self._received = set()
        self._cancel_timer()
        if self._unaligned:
            assert self._writer is not None
            self._writer.finish_input(checkpoint_id)
            return
        try:
            self._notify_checkpoint(barrier, self._clock.now_ms() - self._alignment_start_ms)
        finally:
            self._blocked.clear()  # snapshot first, then the blocked channels' data flows again

    def _abort_current(self, reason: CheckpointFailureReason) -> None:
        checkpoint_id = self._current_id
        was_unaligned = self._unaligned
        self._pending = False
        self._received = set()
        self._blocked.clear()
        self._cancel_timer()
        if was_unaligned and self._writer is not None:
            self._writer.abort(checkpoint_id, reason)
        self._notify_abort(checkpoint_id, reason)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


class CheckpointBarrierAligner(SingleCheckpointBarrierHandler):
    """EXACTLY_ONCE without unaligned checkpoints: every checkpoint is aligned (seeds 002, 003)."""

    def __init__(self, channels: Sequence[Hashable], task: CheckpointableTask, clock: Any) -> None:
        super().__init__(channels, task, clock, allow_unaligned=False)


class AlternatingCheckpointBarrierHandler(SingleCheckpointBarrierHandler):
    """EXACTLY_ONCE with unaligned checkpoints: unaligned, aligned-then-unaligned after a timeout, or aligned for savepoints."""

    def __init__(self, channels: Sequence[Hashable], task: CheckpointableTask, clock: Any,
                 channel_state_writer: ChannelStateWriter, scheduler: Scheduler | None = None) -> None:
        super().__init__(channels, task, clock, allow_unaligned=True,
                         channel_state_writer=channel_state_writer, scheduler=scheduler)
