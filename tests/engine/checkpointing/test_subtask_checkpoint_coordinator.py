"""SubtaskCheckpointCoordinator: barrier first, sync snapshot, async upload, then the ack (seeds 001, 002)."""

from __future__ import annotations

from checkpoint_harness import JOB, Harness

from engine.checkpointing.channel_state import InMemoryChannelStateWriter
from engine.checkpointing.failure_reason import CheckpointFailureReason
from engine.checkpointing.single_checkpoint_barrier_handler import AlternatingCheckpointBarrierHandler
from engine.checkpointing.subtask_checkpoint_coordinator import SubtaskCheckpointCoordinator
from engine.checkpointing.task_state import TaskStateSnapshot
from engine.clock import ManualClock
from engine.elements import (
    AlignmentType,
    CancelCheckpointMarker,
    CheckpointBarrier,
    CheckpointOptions,
    StreamRecord,
)

ALIGNED = CheckpointOptions(alignment=AlignmentType.ALIGNED)
UNALIGNED = CheckpointOptions(alignment=AlignmentType.UNALIGNED)


class Operator:
    def __init__(self, name, log, fail=False):
        self.name, self.log, self.fail = name, log, fail
        self.counter = 0

    def snapshot_state(self, checkpoint_id):
        self.log.append(("snapshot", self.name, checkpoint_id))
        if self.fail:
            raise RuntimeError("state too large")
        return {"counter": self.counter}

    def notify_checkpoint_complete(self, checkpoint_id):
        self.log.append(("complete", self.name, checkpoint_id))

    def notify_checkpoint_aborted(self, checkpoint_id):
        self.log.append(("aborted", self.name, checkpoint_id))


class Setup:
    def __init__(self, fail_sync=False, writer=None, positions=None, acknowledge=None):
        self.log: list = []
        self.clock = ManualClock(0)
        self.uploads: dict[int, tuple] = {}
        self.ops = {"map": Operator("map", self.log), "window": Operator("window", self.log, fail_sync)}

        def async_writer(checkpoint_id, snapshot, on_done, on_error):
            self.log.append(("upload-started", checkpoint_id))
            self.uploads[checkpoint_id] = (snapshot, on_done, on_error)

        self.subtask = SubtaskCheckpointCoordinator(
            "win-0", self.ops,
            broadcast_event=lambda e: self.log.append(("emit", e)),
            async_writer=async_writer,
            acknowledge=acknowledge or (lambda t, c, s, m: self.log.append(("ack", t, c, s))),
            decline=lambda t, c, r, e: self.log.append(("decline", t, c, r)),
            clock=self.clock, channel_state_writer=writer, source_positions=positions)

    def kinds(self):
        return [e[0] for e in self.log]


def test_the_barrier_is_emitted_before_any_operator_snapshots():
    s = Setup()
    s.subtask.trigger_checkpoint_on_barrier(CheckpointBarrier(1, 0, ALIGNED), None)
    assert s.log[:3] == [("emit", CheckpointBarrier(1, 0, ALIGNED)), ("snapshot", "map", 1), ("snapshot", "window", 1)]


def test_the_ack_is_sent_only_after_the_async_part_completes():
    s = Setup()
    from engine.checkpointing.task_state import CheckpointMetrics

    s.subtask.trigger_checkpoint_on_barrier(CheckpointBarrier(1, 0, ALIGNED), CheckpointMetrics())
    assert "ack" not in s.kinds() and s.subtask.is_checkpoint_running(1)
    snapshot, on_done, _ = s.uploads[1]
    assert dict(snapshot.operator_snapshots) == {"map": {"counter": 0}, "window": {"counter": 0}}
    s.ops["map"].counter = 99                       # processing goes on during the upload
    handles = TaskStateSnapshot({"map": "h-map", "window": "h-window"})
    s.clock.advance(7)
    on_done(handles)
    assert s.log[-1] == ("ack", "win-0", 1, handles)
    assert not s.subtask.is_checkpoint_running(1)
    on_done(handles)                                # a second completion is ignored
    assert s.kinds().count("ack") == 1


def test_a_failed_upload_declines_and_a_failed_synchronous_part_declines_before_any_upload():
    s = Setup()
    s.subtask.trigger_checkpoint_on_barrier(CheckpointBarrier(1, 0, ALIGNED), None)
    s.uploads[1][2](OSError("S3 unavailable"))
    assert s.log[-1] == ("decline", "win-0", 1, CheckpointFailureReason.CHECKPOINT_ASYNC_EXCEPTION)
    broken = Setup(fail_sync=True)
    broken.subtask.trigger_checkpoint_on_barrier(CheckpointBarrier(2, 0, ALIGNED), None)
    assert broken.log[-1] == ("decline", "win-0", 2, CheckpointFailureReason.TASK_CHECKPOINT_FAILURE)
    assert broken.uploads == {} and broken.log[0][0] == "emit"


def test_a_source_task_reports_its_positions_sn_taken_after_the_barrier_is_emitted():
    position = {"offset": 41}
    s = Setup(positions=lambda: {"split-0": position["offset"]})
    s.subtask.trigger_checkpoint(3, 500, ALIGNED)
    assert s.log[0] == ("emit", CheckpointBarrier(3, 500, ALIGNED))
    assert dict(s.uploads[3][0].source_positions) == {"split-0": 41}
    assert s.uploads[3][0].timestamp_ms == 500


def test_an_abort_on_barrier_declines_and_forwards_a_cancellation_marker_downstream():
    s = Setup()
    s.subtask.abort_checkpoint_on_barrier(4, CheckpointFailureReason.CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER)
    assert s.log == [("decline", "win-0", 4, CheckpointFailureReason.CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER),
                     ("emit", CancelCheckpointMarker(4))]


def test_a_barrier_of_a_checkpoint_the_coordinator_already_aborted_is_replaced_by_a_cancellation_marker():
    s = Setup()
    s.subtask.notify_checkpoint_aborted(5)
    s.subtask.trigger_checkpoint_on_barrier(CheckpointBarrier(5, 0, ALIGNED), None)
    assert s.log == [("aborted", "map", 5), ("aborted", "window", 5), ("emit", CancelCheckpointMarker(5))]


def test_completion_and_abort_notifications_reach_every_operator():
    s = Setup()
    s.subtask.notify_checkpoint_complete(1)
    assert s.log == [("complete", "map", 1), ("complete", "window", 1)]


def test_an_unaligned_checkpoint_uploads_only_once_its_channel_state_is_complete():
    writer = InMemoryChannelStateWriter()
    s = Setup(writer=writer)
    handler = AlternatingCheckpointBarrierHandler(["a", "b"], s.subtask, s.clock, writer)
    handler.process_barrier(CheckpointBarrier(1, 0, UNALIGNED), "a")
    assert s.log[:3] == [("emit", CheckpointBarrier(1, 0, UNALIGNED)), ("snapshot", "map", 1), ("snapshot", "window", 1)]
    assert s.uploads == {}
    handler.process_element(StreamRecord("in-flight"), "b")
    handler.process_barrier(CheckpointBarrier(1, 0, UNALIGNED), "b")
    snapshot = s.uploads[1][0]
    assert snapshot.input_channel_state.elements_for("b") == (StreamRecord("in-flight"),)


def test_end_to_end_a_task_acks_to_the_coordinator_and_completion_reaches_its_operators():
    h = Harness()
    s = Setup(acknowledge=lambda t, c, st, m: h.coordinator.receive_acknowledge_message(JOB, t, c, st, m))
    h.coordinator.trigger_checkpoint()
    for task_id in ("src-0", "src-1"):
        h.coordinator.receive_acknowledge_message(JOB, task_id, 1, TaskStateSnapshot())
    s.subtask.trigger_checkpoint_on_barrier(CheckpointBarrier(1, 1_000, ALIGNED), None)
    assert h.coordinator.get_number_of_pending_checkpoints() == 1
    s.uploads[1][1](TaskStateSnapshot({"window": "h"}))
    assert h.store.get_latest_checkpoint().checkpoint_id == 1
    assert ("complete", "win-0", 1) in h.gateway.calls
