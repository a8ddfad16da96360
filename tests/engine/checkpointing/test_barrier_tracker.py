"""CheckpointBarrierTracker (seed 003), element by element: counts barriers, never blocks."""

from __future__ import annotations

import pytest
from checkpoint_harness import RecordingTask

from engine.checkpointing.barrier_tracker import CheckpointBarrierTracker
from engine.clock import ManualClock
from engine.elements import AlignmentType, CancelCheckpointMarker, CheckpointBarrier, CheckpointOptions
from engine.errors import IllegalStateError

ALO = CheckpointOptions(alignment=AlignmentType.AT_LEAST_ONCE)


def barrier(n: int) -> CheckpointBarrier:
    return CheckpointBarrier(n, 0, ALO)


def make(channels=("a", "b", "c")):
    task = RecordingTask()
    return CheckpointBarrierTracker(list(channels), task, ManualClock(0)), task


def test_a_single_channel_triggers_on_its_barrier():
    tracker, task = make(("a",))
    tracker.process_barrier(barrier(1), "a")
    assert task.summary() == [("trigger", 1, "AT_LEAST_ONCE")]


def test_the_snapshot_is_triggered_only_when_every_channel_delivered_the_barrier_and_nothing_blocks():
    tracker, task = make()
    tracker.process_barrier(barrier(1), "a")
    assert task.events == [] and not tracker.is_blocked("a")
    tracker.process_barrier(barrier(1), "b")
    assert task.events == [] and tracker.pending_checkpoint_ids() == [1]
    tracker.process_barrier(barrier(1), "c")
    assert task.summary() == [("trigger", 1, "AT_LEAST_ONCE")]
    assert tracker.pending_checkpoint_ids() == []


def test_several_checkpoints_are_tracked_at_once_and_complete_in_order():
    tracker, task = make(("a", "b"))
    #  a: |1 |2
    #  b:        |1 |2
    tracker.process_barrier(barrier(1), "a")
    tracker.process_barrier(barrier(2), "a")
    assert tracker.pending_checkpoint_ids() == [1, 2]
    tracker.process_barrier(barrier(1), "b")
    assert task.summary() == [("trigger", 1, "AT_LEAST_ONCE")]
    tracker.process_barrier(barrier(2), "b")
    assert task.summary() == [("trigger", 1, "AT_LEAST_ONCE"), ("trigger", 2, "AT_LEAST_ONCE")]


def test_a_newer_completed_checkpoint_subsumes_and_aborts_older_pending_ones():
    tracker, task = make(("a", "b"))
    tracker.process_barrier(barrier(1), "a")      # b never delivers 1 (lost upstream)
    tracker.process_barrier(barrier(2), "a")
    tracker.process_barrier(barrier(2), "b")
    assert task.summary() == [("abort", 1, "CHECKPOINT_DECLINED_SUBSUMED"), ("trigger", 2, "AT_LEAST_ONCE")]
    tracker.process_barrier(barrier(1), "b")      # late: not newer than the latest -> ignored
    assert len(task.events) == 2


def test_a_repeated_barrier_on_one_channel_is_refused_instead_of_counted_twice():
    tracker, _ = make(("a", "b"))
    tracker.process_barrier(barrier(1), "a")
    with pytest.raises(IllegalStateError):
        tracker.process_barrier(barrier(1), "a")


def test_a_cancellation_marker_aborts_once_and_the_remaining_barriers_are_swallowed():
    tracker, task = make(("a", "b", "c"))
    tracker.process_barrier(barrier(1), "a")
    tracker.process_cancellation_barrier(CancelCheckpointMarker(1), "b")
    assert task.summary() == [("abort", 1, "CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER")]
    tracker.process_barrier(barrier(1), "c")
    assert len(task.events) == 1 and tracker.pending_checkpoint_ids() == []


def test_a_cancellation_marker_for_a_new_id_aborts_it_and_every_older_pending_checkpoint():
    tracker, task = make(("a", "b"))
    tracker.process_barrier(barrier(1), "a")
    tracker.process_cancellation_barrier(CancelCheckpointMarker(2), "b")
    assert task.summary() == [("abort", 1, "CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER"),
                              ("abort", 2, "CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER")]
    tracker.process_barrier(barrier(2), "a")
    assert len(task.events) == 2
    tracker.process_barrier(barrier(3), "a")
    tracker.process_barrier(barrier(3), "b")
    assert task.summary()[-1] == ("trigger", 3, "AT_LEAST_ONCE")


def test_end_of_partition_counts_the_channel_as_done_for_pending_and_later_checkpoints():
    tracker, task = make(("a", "b"))
    tracker.process_barrier(barrier(1), "a")
    tracker.process_end_of_partition("b")
    assert task.summary() == [("trigger", 1, "AT_LEAST_ONCE")]
    tracker.process_barrier(barrier(2), "a")
    assert task.summary()[-1] == ("trigger", 2, "AT_LEAST_ONCE")
    with pytest.raises(IllegalStateError):
        tracker.process_barrier(barrier(3), "b")   # nothing may follow an EndOfPartition
