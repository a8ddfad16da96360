"""SubtaskCheckpointCoordinator: a task's part of a checkpoint (seeds 001, 002, 003).

When the barrier handler (or, for a source task, the coordinator's trigger)
says checkpoint n starts here, the task:

1. broadcasts barrier n downstream **first** (seed 001: "we immediately emit the
   checkpoint barriers, so the downstream operators can start their checkpoint
   work as soon as possible"),
2. takes the synchronous part: each operator's ``snapshot_state(n)``, copy-on-write
   (seed 002 "Asynchronous State Snapshots"), and, for a source task, its
   positions Sn,
3. hands the snapshot to the injected ``async_writer`` -- the runtime uploads in the
   background -- once the in-flight channel state of an unaligned checkpoint is
   complete (``finish_input``),
4. acknowledges n to the coordinator with the handles when the upload finishes
   (seed 002: "once the background copy process has completed, it acknowledges"),
   or declines it if any part fails.

An abort decided by the barrier handler declines n and forwards a
CancelCheckpointMarker downstream (seed 003 ``abortCheckpointOnBarrier``).
Completion / abort notifications from the coordinator are forwarded to every
operator (sinks commit on completion).  A late upload of an aborted checkpoint
is still acknowledged: the coordinator answers DISCARDED and discards the handles.
Pure: callbacks in, callbacks out, time from the injected clock.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping

from engine.checkpointing.barrier_handler import CheckpointableTask
from engine.checkpointing.channel_state import InMemoryChannelStateWriter
from engine.checkpointing.failure_reason import CheckpointFailureReason
from engine.checkpointing.promise import Promise
from engine.checkpointing.task_state import CheckpointMetrics, TaskSnapshot, TaskStateSnapshot
from engine.elements import AlignmentType, CancelCheckpointMarker, CheckpointBarrier, CheckpointOptions, StreamElement

#: async_writer(checkpoint_id, snapshot, on_done(state_handles), on_error(exception))
AsyncWriter = Callable[[int, TaskSnapshot, Callable[[TaskStateSnapshot], None], Callable[[BaseException], None]], None]
#: acknowledge(task_id, checkpoint_id, state_handles, metrics)
Acknowledge = Callable[[str, int, TaskStateSnapshot, CheckpointMetrics], None]
#: decline(task_id, checkpoint_id, reason, cause)
Decline = Callable[[str, int, CheckpointFailureReason, "BaseException | None"], None]

#: how many aborted checkpoint ids a task remembers, to skip a late barrier of one
NUM_REMEMBERED_ABORTS = 16


class SubtaskCheckpointCoordinator(CheckpointableTask):
    def __init__(
        self,
        task_id: str,
        operators: Mapping[str, Any],
        broadcast_event: Callable[[StreamElement], None],
        async_writer: AsyncWriter,
        acknowledge: Acknowledge,
        decline: Decline,
        clock: Any,
        channel_state_writer: InMemoryChannelStateWriter | None = None,
        source_positions: Callable[[], Mapping[str, Any]] | None = None,
    ) -> None:
        self.task_id = task_id
        self._operators = dict(operators)
        self._broadcast = broadcast_event
        self._async_writer = async_writer
        self._acknowledge = acknowledge
        self._decline = decline
        self._clock = clock
        self._channel_state_writer = channel_state_writer
        self._source_positions = source_positions
        self._running: set[int] = set()
        self._aborted: list[int] = []

    # -- triggers --------------------------------------------------------------------------------
    def trigger_checkpoint(self, checkpoint_id: int, timestamp_ms: int, options: CheckpointOptions) -> None:
        """A source task: the coordinator asks to inject barrier n at the current position Sn."""
        self._perform_checkpoint(CheckpointBarrier(checkpoint_id, timestamp_ms, options),
                                 CheckpointMetrics(unaligned=options.is_unaligned()))

    def snapshot_as_finished(self, checkpoint_id: int, timestamp_ms: int, options: CheckpointOptions) -> None:
        """The task finished (all input consumed) while the job runs on: snapshot its final state for checkpoint
        ``checkpoint_id`` and acknowledge, without a barrier -- its outputs ended, so nobody downstream waits for
        one (Flink's checkpoints after tasks finished, FLIP-147).  No-op when the snapshot already runs."""
        if checkpoint_id in self._running:
            return
        if options.is_unaligned():  # no input left, so no channel state to wait for
            options = dataclasses.replace(options, alignment=AlignmentType.ALIGNED)
        self._perform_checkpoint(CheckpointBarrier(checkpoint_id, timestamp_ms, options), CheckpointMetrics(),
                                 broadcast=False)

    def trigger_checkpoint_on_barrier(self, barrier: CheckpointBarrier, metrics: CheckpointMetrics | None) -> None:
        self._perform_checkpoint(barrier, metrics or CheckpointMetrics(unaligned=barrier.options.is_unaligned()))

    def abort_checkpoint_on_barrier(self, checkpoint_id: int, reason: CheckpointFailureReason) -> None:
        self._remember_abort(checkpoint_id)
        self._decline(self.task_id, checkpoint_id, reason, None)
        self._broadcast(CancelCheckpointMarker(checkpoint_id))
        # operators hear of the abort once, from the coordinator's notify_checkpoint_aborted

    @property
    def state_operators(self) -> dict[str, Any]:
        """uid -> what this task snapshots (its operators, its watermark stage or valve)."""
        return dict(self._operators)

    def is_checkpoint_running(self, checkpoint_id: int) -> bool:
        """True between the synchronous part and the ack/decline of ``checkpoint_id``."""
        return checkpoint_id in self._running

    # -- the four steps --------------------------------------------------------------------------
    def _perform_checkpoint(self, barrier: CheckpointBarrier, metrics: CheckpointMetrics,
                            broadcast: bool = True) -> None:
        checkpoint_id = barrier.checkpoint_id
        if checkpoint_id in self._aborted:
            # the coordinator aborted it before the barrier got here: do not snapshot, tell downstream
            if broadcast:
                self._broadcast(CancelCheckpointMarker(checkpoint_id))
            return
        # (1) barrier first
        if broadcast:
            self._broadcast(barrier)
        # (2) synchronous part
        sync_start = self._clock.now_ms()
        try:
            positions = dict(self._source_positions()) if self._source_positions is not None else {}
            snapshots = {op_id: op.snapshot_state(checkpoint_id) for op_id, op in self._operators.items()}
        except Exception as exc:
            self._decline(self.task_id, checkpoint_id, CheckpointFailureReason.TASK_CHECKPOINT_FAILURE, exc)
            return
        sync_ms = self._clock.now_ms() - sync_start
        self._running.add(checkpoint_id)
        # (3) asynchronous part, after the channel state of an unaligned checkpoint is complete
        if barrier.options.is_unaligned() and self._channel_state_writer is not None:
            channel_state: Promise[Any] = self._channel_state_writer.get_result(checkpoint_id)
        else:
            channel_state = Promise.resolved(None)

        def upload(input_channel_state: Any) -> None:
            if self._channel_state_writer is not None and input_channel_state is not None:
                self._channel_state_writer.release(checkpoint_id)
            snapshot = TaskSnapshot(checkpoint_id, barrier.timestamp, snapshots, positions, input_channel_state)
            self._start_async_part(snapshot, metrics, sync_ms)

        def channel_state_aborted(_: BaseException) -> None:
            # the handler aborted the checkpoint and already declined it
            self._running.discard(checkpoint_id)

        channel_state.then(upload, channel_state_aborted)

    def _start_async_part(self, snapshot: TaskSnapshot, metrics: CheckpointMetrics, sync_ms: int) -> None:
        checkpoint_id = snapshot.checkpoint_id
        async_start = self._clock.now_ms()
        settled = [False]

        def on_done(state: TaskStateSnapshot) -> None:
            if settled[0]:
                return
            settled[0] = True
            self._running.discard(checkpoint_id)
            # (4) acknowledge only now that the upload finished
            self._acknowledge(self.task_id, checkpoint_id, state, CheckpointMetrics(
                alignment_duration_ms=metrics.alignment_duration_ms,
                checkpoint_start_delay_ms=metrics.checkpoint_start_delay_ms,
                sync_duration_ms=sync_ms,
                async_duration_ms=self._clock.now_ms() - async_start,
                unaligned=metrics.unaligned))

        def on_error(exc: BaseException) -> None:
            if settled[0]:
                return
            settled[0] = True
            self._running.discard(checkpoint_id)
            self._decline(self.task_id, checkpoint_id, CheckpointFailureReason.CHECKPOINT_ASYNC_EXCEPTION, exc)

        try:
            self._async_writer(checkpoint_id, snapshot, on_done, on_error)
        except Exception as exc:
            on_error(exc)

    # -- notifications from the coordinator ------------------------------------------------------
    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """Every operator learns that n completed: sinks publish what they staged for n."""
        for op in self._operators.values():
            op.notify_checkpoint_complete(checkpoint_id)

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        self._remember_abort(checkpoint_id)
        for op in self._operators.values():
            op.notify_checkpoint_aborted(checkpoint_id)

    def _remember_abort(self, checkpoint_id: int) -> None:
        if checkpoint_id not in self._aborted:
            self._aborted.append(checkpoint_id)
            del self._aborted[:-NUM_REMEMBERED_ABORTS]
