"""CheckpointBarrierAligner (seeds 002, 003), element by element: block, align, snapshot, release."""

from __future__ import annotations

from collections import deque

import pytest
from checkpoint_harness import RecordingTask

from engine.checkpointing.single_checkpoint_barrier_handler import CheckpointBarrierAligner
from engine.clock import ManualClock
from engine.elements import (
    END_OF_PARTITION,
    AlignmentType,
    CancelCheckpointMarker,
    CheckpointBarrier,
    CheckpointOptions,
    EndOfPartition,
    StreamRecord,
)
from engine.errors import IllegalStateError

ALIGNED = CheckpointOptions(alignment=AlignmentType.ALIGNED)


def barrier(n: int, ts: int = 0) -> CheckpointBarrier:
    return CheckpointBarrier(n, ts, ALIGNED)


def make(channels=("a", "b"), now: int = 0):
    task, clock = RecordingTask(), ManualClock(now)
    return CheckpointBarrierAligner(list(channels), task, clock), task, clock


def test_a_channel_that_delivered_barrier_n_is_blocked_until_all_channels_delivered_it():
    aligner, task, _ = make(("a", "b", "c"))
    aligner.process_barrier(barrier(1), "a")
    assert aligner.is_blocked("a") and not aligner.is_blocked("b") and task.events == []
    aligner.process_element(StreamRecord("b1"), "b")
    aligner.process_barrier(barrier(1), "b")
    assert aligner.blocked_channels() == {"a", "b"}
    aligner.process_barrier(barrier(1), "c")
    assert task.summary() == [("trigger", 1, "ALIGNED")]
    assert aligner.blocked_channels() == frozenset()


def test_the_snapshot_is_triggered_before_the_channels_are_released():
    seen = []

    class Task(RecordingTask):
        def trigger_checkpoint_on_barrier(self, b, metrics):
            seen.append(sorted(aligner.blocked_channels()))

    aligner = CheckpointBarrierAligner(["a", "b"], Task(), ManualClock(0))
    aligner.process_barrier(barrier(1), "a")
    aligner.process_barrier(barrier(1), "b")
    assert seen == [["a", "b"]] and aligner.blocked_channels() == frozenset()


def test_the_alignment_duration_comes_from_the_injected_clock():
    aligner, task, clock = make()
    clock.set(100)
    aligner.process_barrier(barrier(1, ts=90), "a")
    clock.set(130)
    aligner.process_barrier(barrier(1, ts=90), "b")
    metrics = task.events[0][3]
    assert metrics.alignment_duration_ms == 30 and metrics.checkpoint_start_delay_ms == 10


def test_reading_a_blocked_channel_is_a_gate_bug():
    aligner, _, _ = make()
    aligner.process_barrier(barrier(1), "a")
    with pytest.raises(IllegalStateError):
        aligner.process_element(StreamRecord("x"), "a")


def test_a_gate_that_honours_is_blocked_processes_exactly_the_pre_barrier_records_before_the_snapshot():
    """a: 1 2 |B1 3     b: 10 11 12 |B1 13  -> snapshot after {1,2,10,11,12}, then 3 and 13."""
    channels = {
        "a": deque([StreamRecord(1), StreamRecord(2), barrier(1), StreamRecord(3), END_OF_PARTITION]),
        "b": deque([StreamRecord(10), StreamRecord(11), StreamRecord(12), barrier(1), StreamRecord(13), END_OF_PARTITION]),
    }
    processed: list[int] = []
    snapshot_at: list[list[int]] = []

    class Task(RecordingTask):
        def trigger_checkpoint_on_barrier(self, b, metrics):
            snapshot_at.append(sorted(processed))

    aligner = CheckpointBarrierAligner(["a", "b"], Task(), ManualClock(0))
    while any(channels.values()):
        for name, queue in channels.items():   # round-robin gate: one element per readable channel
            if not queue or aligner.is_blocked(name):
                continue
            element = queue.popleft()
            if isinstance(element, CheckpointBarrier):
                aligner.process_barrier(element, name)
            elif isinstance(element, EndOfPartition):
                aligner.process_end_of_partition(name)
            else:
                aligner.process_element(element, name)
                processed.append(element.value)
    assert snapshot_at == [[1, 2, 10, 11, 12]]
    assert sorted(processed) == [1, 2, 3, 10, 11, 12, 13]


def test_a_newer_barrier_before_the_alignment_completes_aborts_it_and_starts_the_new_one():
    aligner, task, _ = make(("a", "b", "c"))
    aligner.process_barrier(barrier(1), "a")
    aligner.process_barrier(barrier(2), "b")
    assert task.summary() == [("abort", 1, "CHECKPOINT_DECLINED_SUBSUMED")]
    assert aligner.blocked_channels() == {"b"}           # a is released: its barrier 1 is obsolete
    aligner.process_barrier(barrier(2), "a")
    aligner.process_barrier(barrier(1), "c")              # trailing: ignored, c stays readable
    assert not aligner.is_blocked("c") and aligner.get_latest_checkpoint_id() == 2
    aligner.process_barrier(barrier(2), "c")
    assert task.summary()[-1] == ("trigger", 2, "ALIGNED")


def test_a_cancellation_marker_aborts_the_alignment_unblocks_and_later_barriers_of_that_id_are_ignored():
    aligner, task, _ = make(("a", "b", "c"))
    aligner.process_barrier(barrier(1), "a")
    aligner.process_cancellation_barrier(CancelCheckpointMarker(1), "b")
    assert task.summary() == [("abort", 1, "CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER")]
    assert aligner.blocked_channels() == frozenset()
    aligner.process_barrier(barrier(1), "c")
    assert not aligner.is_blocked("c") and len(task.events) == 1
    aligner.process_cancellation_barrier(CancelCheckpointMarker(1), "c")   # trailing cancellation
    assert len(task.events) == 1


def test_a_cancellation_marker_as_the_first_event_of_a_checkpoint_cancels_it_in_advance():
    aligner, task, _ = make(("a", "b"))
    aligner.process_cancellation_barrier(CancelCheckpointMarker(4), "a")
    aligner.process_barrier(barrier(4), "b")
    assert task.summary() == [("abort", 4, "CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER")]
    assert not aligner.is_blocked("b")


def test_a_cancellation_of_a_newer_checkpoint_also_aborts_the_current_alignment():
    aligner, task, _ = make(("a", "b"))
    aligner.process_barrier(barrier(1), "a")
    aligner.process_cancellation_barrier(CancelCheckpointMarker(2), "b")
    assert task.summary() == [("abort", 1, "CHECKPOINT_DECLINED_SUBSUMED"),
                              ("abort", 2, "CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER")]
    assert aligner.blocked_channels() == frozenset()


def test_end_of_partition_counts_its_channel_as_aligned_now_and_for_later_checkpoints():
    aligner, task, _ = make(("a", "b"))
    aligner.process_barrier(barrier(1), "a")
    aligner.process_end_of_partition("b")
    assert task.summary() == [("trigger", 1, "ALIGNED")] and not aligner.is_blocked("a")
    aligner.process_barrier(barrier(2), "a")
    assert task.summary()[-1] == ("trigger", 2, "ALIGNED")
    assert aligner.is_finished() is False
    aligner.process_end_of_partition("a")
    assert aligner.is_finished()


def test_an_aligner_refuses_an_unaligned_barrier():
    aligner, _, _ = make()
    with pytest.raises(IllegalStateError):
        aligner.process_barrier(CheckpointBarrier(1, 0, CheckpointOptions(alignment=AlignmentType.UNALIGNED)), "a")
