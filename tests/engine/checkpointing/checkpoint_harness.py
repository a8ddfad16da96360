from __future__ import annotations

from typing import Any

from engine.checkpointing.checkpoint_id_counter import StandaloneCheckpointIDCounter
from engine.checkpointing.completed_checkpoint_store import StandaloneCompletedCheckpointStore
from engine.checkpointing.config import CheckpointConfig
from engine.checkpointing.coordinator import CheckpointCoordinator, CheckpointTaskGateway
from engine.checkpointing.discarder import RecordingDiscarder
from engine.checkpointing.scheduler import ManualScheduler
from engine.clock import ManualClock

JOB = "job-1"
SOURCES = ("src-0", "src-1")
ALL_TASKS = ("src-0", "src-1", "win-0")


class FakeGateway(CheckpointTaskGateway):
    """Records every call the coordinator makes to the tasks, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.not_running: set[str] = set()
        self.fail_trigger = False

    def tasks_to_trigger(self):
        return SOURCES

    def tasks_to_acknowledge(self):
        return ALL_TASKS

    def is_task_running(self, task_id):
        return task_id not in self.not_running

    def trigger_checkpoint(self, task_id, checkpoint_id, timestamp_ms, options):
        if self.fail_trigger:
            raise ConnectionError("task unreachable")
        self.calls.append(("trigger", task_id, checkpoint_id, timestamp_ms, options))

    def checkpoint_starting(self, checkpoint_id, target_location):
        self.calls.append(("starting", checkpoint_id, target_location))

    def notify_checkpoint_complete(self, task_id, checkpoint_id, timestamp_ms):
        self.calls.append(("complete", task_id, checkpoint_id))

    def notify_checkpoint_aborted(self, task_id, checkpoint_id, timestamp_ms):
        self.calls.append(("aborted", task_id, checkpoint_id))

    def of(self, kind: str) -> list[tuple[Any, ...]]:
        return [c for c in self.calls if c[0] == kind]

    def triggered_ids(self) -> list[int]:
        return sorted({c[2] for c in self.of("trigger")})


class Harness:
    def __init__(self, config: CheckpointConfig | None = None, num_retained: int = 2,
                 store: StandaloneCompletedCheckpointStore | None = None,
                 counter: StandaloneCheckpointIDCounter | None = None) -> None:
        self.clock = ManualClock(1_000)
        self.scheduler = ManualScheduler(self.clock)
        self.gateway = FakeGateway()
        self.discarder = RecordingDiscarder()
        if config is None:
            config = CheckpointConfig()
            config.set_checkpoint_interval(100)
            config.set_checkpoint_timeout(1_000)
        self.config = config
        self.store = store or StandaloneCompletedCheckpointStore(num_retained, self.discarder)
        self.failures: list[Exception] = []
        self.coordinator = CheckpointCoordinator(
            JOB, config, self.gateway, self.store, counter or StandaloneCheckpointIDCounter(), self.discarder,
            self.clock, self.scheduler, self.failures.append)

    def ack_all(self, checkpoint_id: int, tasks=ALL_TASKS):
        from engine.checkpointing.task_state import TaskStateSnapshot

        results = []
        for t in tasks:
            state = TaskStateSnapshot({f"op-{t}": f"handle-{t}-{checkpoint_id}"},
                                      {f"split-{t}": checkpoint_id * 10} if t in SOURCES else {})
            results.append(self.coordinator.receive_acknowledge_message(JOB, t, checkpoint_id, state))
        return results



class RecordingTask:
    """A CheckpointableTask that records what the barrier handler told it, in order."""

    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []

    def trigger_checkpoint_on_barrier(self, barrier, metrics):
        self.events.append(("trigger", barrier.checkpoint_id, barrier.options.alignment.name, metrics))

    def abort_checkpoint_on_barrier(self, checkpoint_id, reason):
        self.events.append(("abort", checkpoint_id, reason.name))

    def summary(self) -> list[tuple[Any, ...]]:
        return [e[:3] if e[0] == "trigger" else e for e in self.events]
