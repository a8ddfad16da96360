"""Checkpointing plumbing of the local runtime: the protocol objects of engine/checkpointing, driven here.

Threads: the job's scheduler thread runs every task, the coordinator and every
protocol callback (Flink's mailbox model).  Only the asynchronous part of a
snapshot (seed 002: materialize the copy-on-write state, upload it) runs on a
small ThreadPoolExecutor; its outcome comes back through the thread-safe
:class:`Mailbox` and is acknowledged on the scheduler thread.

- :class:`LocalTaskGateway`   the coordinator's view of the tasks (seed 001 "trigger" and "notify").
- :class:`JsonStateOperator`  watermark state that is not an operator (a source's per-split
                              watermarks, a task's StatusWatermarkValve) snapshotted like one.
"""

from __future__ import annotations

import queue
import threading
from typing import Any, Callable

from engine.checkpointing.coordinator import CheckpointTaskGateway
from engine.elements import CheckpointOptions
from engine.operators.base import OPERATOR_SNAPSHOT_FORMAT_VERSION, MaterializedOperatorSnapshot, OperatorSnapshot


class Mailbox:
    """Actions posted from writer threads, run on the scheduler thread in order (Flink's mailbox).

    When the run ends it :meth:`close`\ s the mailbox: actions still queued run then, and an action posted
    later runs at once on the poster's thread, so a request that arrives after the last scheduling round
    (a savepoint asked of a job that just finished) is answered -- refused with the job's state -- instead
    of waiting for a round that never comes."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._closed = False

    def post(self, action: Callable[[], None]) -> None:
        with self._lock:
            if not self._closed:
                self._queue.put(action)
                return
        action()

    def close(self) -> None:
        """Run what is queued; from now on :meth:`post` runs its action at once."""
        with self._lock:
            self._closed = True
        self.drain()

    def drain(self, timeout_s: float | None = None) -> int:
        """Run every posted action; with ``timeout_s`` wait that long for the first one."""
        ran = 0
        if timeout_s is not None:
            try:
                action = self._queue.get(timeout=timeout_s)
            except queue.Empty:
                return 0
            action()
            ran += 1
        while True:
            try:
                action = self._queue.get_nowait()
            except queue.Empty:
                return ran
            action()
            ran += 1


class _JsonSnapshot(OperatorSnapshot):
    def __init__(self, metadata: dict[str, Any]) -> None:
        self._metadata = metadata

    def materialize(self) -> MaterializedOperatorSnapshot:
        return MaterializedOperatorSnapshot(dict(self._metadata), {})


class JsonStateOperator:
    """State that lives outside the operator chain, snapshotted with it (valve, per-split watermarks).

    Its JSON goes into the snapshot metadata under ``task_state``; restore reads it back from there.
    """

    def __init__(self, operator_id: str, snapshot_fn: Callable[[], dict[str, Any]], max_parallelism: int) -> None:
        self.operator_id = operator_id
        self._snapshot_fn = snapshot_fn
        self._max_parallelism = max_parallelism

    def snapshot_state(self, checkpoint_id: int) -> OperatorSnapshot:
        return _JsonSnapshot({
            "format_version": OPERATOR_SNAPSHOT_FORMAT_VERSION, "operator_id": self.operator_id,
            "operator_class": "JsonState", "checkpoint_id": checkpoint_id,
            "max_parallelism": self._max_parallelism, "key_group_range": [0, self._max_parallelism - 1],
            "task_state": self._snapshot_fn()})

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        pass

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        pass


class LocalTaskGateway(CheckpointTaskGateway):
    """Routes the coordinator's calls to the attempt's tasks; silent once the attempt has ended."""

    def __init__(self, job: Any) -> None:
        self._job = job
        self.enabled = True

    def tasks_to_trigger(self) -> list[str]:
        return [t.task_id for t in self._job.tasks if t.is_source_task]

    def tasks_to_acknowledge(self) -> list[str]:
        return [t.task_id for t in self._job.tasks]

    def is_task_running(self, task_id: str) -> bool:
        task = self._job.task_by_id.get(task_id)
        return self.enabled and task is not None and not task.finished and not task.suspended

    def checkpoint_starting(self, checkpoint_id: int, target_location: str | None) -> None:
        if target_location is not None:  # before the sources snapshot: their uploads go to the savepoint's folder
            self._job.run_.adapter.register_savepoint(checkpoint_id, target_location)

    def is_task_finished(self, task_id: str) -> bool:
        task = self._job.task_by_id.get(task_id)
        return self.enabled and task is not None and task.finished

    def snapshot_finished_task(self, task_id: str, checkpoint_id: int, timestamp_ms: int,
                               options: CheckpointOptions) -> None:
        # its final state: split positions at their end, sinks' open transaction (committed by this checkpoint)
        self._job.task_by_id[task_id].checkpointing.snapshot_as_finished(checkpoint_id, timestamp_ms, options)

    def trigger_checkpoint(self, task_id: str, checkpoint_id: int, timestamp_ms: int, options: CheckpointOptions) -> None:
        # injected at the source's next read (before_read), between two bundles: the position Sn is exact
        self._job.task_by_id[task_id].pending_triggers.append((checkpoint_id, timestamp_ms, options))

    def notify_checkpoint_complete(self, task_id: str, checkpoint_id: int, timestamp_ms: int) -> None:
        if self.enabled:
            self._job.notify_complete(task_id, checkpoint_id)

    def notify_checkpoint_aborted(self, task_id: str, checkpoint_id: int, timestamp_ms: int) -> None:
        if self.enabled:
            self._job.task_by_id[task_id].checkpointing.notify_checkpoint_aborted(checkpoint_id)
