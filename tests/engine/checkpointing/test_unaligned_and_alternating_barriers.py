"""Unaligned mode and the alternating handler (seed 003), element by element, with a ManualClock."""

from __future__ import annotations

from checkpoint_harness import RecordingTask

from engine.checkpointing.barrier_handlers import create_checkpoint_barrier_handler
from engine.checkpointing.channel_state import InMemoryChannelStateWriter
from engine.checkpointing.config import CheckpointConfig, CheckpointingMode
from engine.checkpointing.barrier_tracker import CheckpointBarrierTracker
from engine.checkpointing.scheduler import ManualScheduler
from engine.checkpointing.single_checkpoint_barrier_handler import (
    AlternatingCheckpointBarrierHandler,
    CheckpointBarrierAligner,
)
from engine.clock import ManualClock
from engine.elements import (
    AlignmentType,
    CancelCheckpointMarker,
    CheckpointBarrier,
    CheckpointOptions,
    CheckpointType,
    StreamRecord,
    Watermark,
)

UNALIGNED = CheckpointOptions(alignment=AlignmentType.UNALIGNED)
TIMEOUTABLE = CheckpointOptions(alignment=AlignmentType.ALIGNED, aligned_checkpoint_timeout_ms=50)
SAVEPOINT = CheckpointOptions(CheckpointType.SAVEPOINT, AlignmentType.FORCED_ALIGNED)


def make(channels=("a", "b", "c"), now: int = 0):
    clock = ManualClock(now)
    scheduler = ManualScheduler(clock)
    writer = InMemoryChannelStateWriter()
    task = RecordingTask()
    handler = AlternatingCheckpointBarrierHandler(list(channels), task, clock, writer, scheduler)
    return handler, task, writer, clock, scheduler


def settled(writer, checkpoint_id):
    result = writer.get_result(checkpoint_id)
    return result.result() if result.is_done() and not result.is_failed() else None


# -- unaligned ----------------------------------------------------------------------------------

def test_the_first_unaligned_barrier_triggers_the_snapshot_at_once_and_blocks_nothing():
    handler, task, writer, _, _ = make()
    handler.process_barrier(CheckpointBarrier(1, 0, UNALIGNED), "a")
    assert task.summary() == [("trigger", 1, "UNALIGNED")]
    assert handler.blocked_channels() == frozenset() and writer.collecting_checkpoints() == [1]


def test_records_from_channels_that_have_not_delivered_the_barrier_are_captured_exactly_as_channel_state():
    """a: |B1 a1        b: b1 w5 |B1 b2        c: c1 c2 <end>"""
    handler, task, writer, _, _ = make()
    handler.process_barrier(CheckpointBarrier(1, 0, UNALIGNED), "a")
    handler.process_element(StreamRecord("a1"), "a")        # after B1 on a: next checkpoint's data
    handler.process_element(StreamRecord("b1"), "b")        # in flight
    handler.process_element(StreamRecord("c1"), "c")        # in flight
    handler.process_element(Watermark(5), "b")              # in flight (watermarks too)
    handler.process_barrier(CheckpointBarrier(1, 0, UNALIGNED), "b")
    handler.process_element(StreamRecord("b2"), "b")        # after B1 on b
    handler.process_element(StreamRecord("c2"), "c")        # in flight
    assert settled(writer, 1) is None
    handler.process_end_of_partition("c")
    state = settled(writer, 1)
    assert dict(state.elements) == {
        "b": (StreamRecord("b1"), Watermark(5)),
        "c": (StreamRecord("c1"), StreamRecord("c2")),
    }
    assert state.elements_for("a") == ()
    assert task.summary() == [("trigger", 1, "UNALIGNED")]   # triggered once, at the first barrier
    handler.process_element(StreamRecord("b3"), "b")         # nothing pending: not captured
    assert dict(settled(writer, 1).elements)["b"] == (StreamRecord("b1"), Watermark(5))


def test_a_newer_unaligned_barrier_aborts_the_unfinished_channel_state_of_the_older_one():
    handler, task, writer, _, _ = make(("a", "b"))
    handler.process_barrier(CheckpointBarrier(1, 0, UNALIGNED), "a")
    handler.process_element(StreamRecord("b1"), "b")
    handler.process_barrier(CheckpointBarrier(2, 0, UNALIGNED), "a")
    assert task.summary() == [("trigger", 1, "UNALIGNED"), ("abort", 1, "CHECKPOINT_DECLINED_SUBSUMED"),
                              ("trigger", 2, "UNALIGNED")]
    assert writer.get_result(1).is_failed()
    handler.process_element(StreamRecord("b2"), "b")
    handler.process_barrier(CheckpointBarrier(2, 0, UNALIGNED), "b")
    assert dict(settled(writer, 2).elements) == {"b": (StreamRecord("b2"),)}


def test_a_cancellation_marker_aborts_an_unaligned_checkpoint_and_its_channel_state():
    handler, task, writer, _, _ = make(("a", "b"))
    handler.process_barrier(CheckpointBarrier(1, 0, UNALIGNED), "a")
    handler.process_cancellation_barrier(CancelCheckpointMarker(1), "b")
    assert task.summary()[-1] == ("abort", 1, "CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER")
    assert writer.get_result(1).is_failed()
    handler.process_element(StreamRecord("b1"), "b")
    assert writer.collecting_checkpoints() == []


# -- alternating ----------------------------------------------------------------------------------

def test_an_alignment_that_lasts_past_the_timeout_switches_to_unaligned_on_the_clock():
    """t=0 B1 on a (aligned, a blocked) ... t=50 the timer fires: unaligned, a released."""
    handler, task, writer, clock, scheduler = make(("a", "b"))
    handler.process_barrier(CheckpointBarrier(1, 0, TIMEOUTABLE), "a")
    assert handler.is_blocked("a") and task.events == []
    handler.process_element(StreamRecord("b-before"), "b")   # processed before the snapshot: not channel state
    scheduler.advance(49)
    assert handler.is_blocked("a") and task.events == []
    scheduler.advance(1)
    assert task.summary() == [("trigger", 1, "UNALIGNED")]
    assert task.events[0][3].alignment_duration_ms == 50
    assert not handler.is_blocked("a")
    handler.process_element(StreamRecord("a-after"), "a")    # a delivered B1 already: not in flight
    handler.process_element(StreamRecord("b-late"), "b")
    handler.process_barrier(CheckpointBarrier(1, 0, TIMEOUTABLE), "b")
    assert dict(settled(writer, 1).elements) == {"b": (StreamRecord("b-late"),)}
    assert len(task.events) == 1


def test_the_timeout_is_also_noticed_on_input_without_a_scheduler():
    clock, writer, task = ManualClock(0), InMemoryChannelStateWriter(), RecordingTask()
    handler = AlternatingCheckpointBarrierHandler(["a", "b"], task, clock, writer, scheduler=None)
    handler.process_barrier(CheckpointBarrier(1, 0, TIMEOUTABLE), "a")
    clock.set(60)
    handler.process_element(StreamRecord("b1"), "b")
    assert task.summary() == [("trigger", 1, "UNALIGNED")]
    assert writer.peek(1) == {"b": [StreamRecord("b1")]}


def test_an_alignment_that_completes_before_the_timeout_stays_aligned_and_cancels_the_timer():
    handler, task, writer, clock, scheduler = make(("a", "b"))
    handler.process_barrier(CheckpointBarrier(1, 0, TIMEOUTABLE), "a")
    clock.set(30)
    handler.process_barrier(CheckpointBarrier(1, 0, TIMEOUTABLE), "b")
    assert task.summary() == [("trigger", 1, "ALIGNED")]
    assert scheduler.pending_delays_ms() == []
    scheduler.advance(100)
    assert len(task.events) == 1 and writer.collecting_checkpoints() == []


def test_a_barrier_that_arrives_already_past_the_timeout_starts_unaligned():
    handler, task, _, _, _ = make(("a", "b"), now=80)
    handler.process_barrier(CheckpointBarrier(1, 20, TIMEOUTABLE), "a")    # created at 20, 60 ms late
    assert task.summary() == [("trigger", 1, "UNALIGNED")] and not handler.is_blocked("a")


def test_the_timer_counts_from_the_barrier_timestamp_not_from_its_arrival():
    handler, task, _, _, scheduler = make(("a", "b"), now=30)
    handler.process_barrier(CheckpointBarrier(1, 0, TIMEOUTABLE), "a")
    assert scheduler.pending_delays_ms() == [20]


def test_savepoints_are_always_aligned_and_never_switch():
    handler, task, writer, clock, scheduler = make(("a", "b"), now=1_000)
    handler.process_barrier(CheckpointBarrier(1, 0, SAVEPOINT), "a")       # very late: still aligned
    scheduler.advance(10_000)
    assert handler.is_blocked("a") and task.events == []
    handler.process_barrier(CheckpointBarrier(1, 0, SAVEPOINT), "b")
    assert task.summary() == [("trigger", 1, "FORCED_ALIGNED")]
    assert writer.collecting_checkpoints() == []


# -- handler selection (seed 003) -------------------------------------------------------------------

def test_the_handler_is_chosen_by_mode_and_unaligned_setting():
    clock, task = ManualClock(0), RecordingTask()
    config = CheckpointConfig()
    assert isinstance(create_checkpoint_barrier_handler(config, ["a"], task, clock), CheckpointBarrierAligner)
    config.enable_unaligned_checkpoints()
    assert isinstance(create_checkpoint_barrier_handler(config, ["a"], task, clock), AlternatingCheckpointBarrierHandler)
    config.enable_unaligned_checkpoints(False)
    config.set_checkpointing_mode(CheckpointingMode.AT_LEAST_ONCE)
    assert isinstance(create_checkpoint_barrier_handler(config, ["a"], task, clock), CheckpointBarrierTracker)
