"""Checkpointing plumbing of the local runtime: the protocol objects of engine/checkpointing, driven here.

Threads: the job's scheduler thread runs every task, the coordinator and every
protocol callback (Flink's mailbox model).  Only the asynchronous part of a
snapshot (seed 002: materialize the copy-on-write state, upload it) runs on a
small ThreadPoolExecutor; its outcome comes back through the thread-safe
:class:`Mailbox` and is acknowledged on the scheduler thread.

- :class:`LocalTaskGateway`   the coordinator's view of the tasks (seed 001 "trigger" and "notify").
- :class:`JsonStateOperator`  watermark state that is not an operator (a source's per-split
                              watermarks, a task's StatusWatermarkValve) snapshotted like one.
- :func:`make_async_writer`   the SubtaskCheckpointCoordinator's async part on the pool.
"""

from __future__ import annotations

import functools
import queue
import threading
from concurrent.futures import Executor
from typing import Any, Callable

from engine.checkpointing.coordinator import CheckpointTaskGateway
from engine.checkpointing.task_state import TaskSnapshot, TaskStateSnapshot
from engine.elements import CheckpointOptions
from engine.operators.base import OPERATOR_SNAPSHOT_FORMAT_VERSION, MaterializedOperatorSnapshot, OperatorSnapshot
from engine.runtime.local.faults import FaultKind, FaultPlan


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


def make_async_writer(task_id: str, executor: Executor, mailbox: Mailbox, write: Callable[[str, TaskSnapshot], TaskStateSnapshot],
                      faults: FaultPlan | None, on_fatal: Callable[[BaseException], None]) -> Callable[..., None]:
    """The SubtaskCheckpointCoordinator's ``async_writer``: upload on the pool, settle on the scheduler thread."""

    def async_writer(checkpoint_id: int, snapshot: TaskSnapshot, on_done: Callable[[TaskStateSnapshot], None],
                     on_error: Callable[[BaseException], None]) -> None:
        def upload() -> None:
            try:
                if faults is not None:
                    faults.fire(FaultKind.UPLOAD_ERROR, checkpoint_id)
                result = write(task_id, snapshot)
            except BaseException as exc:  # noqa: BLE001 - reported to the task as a decline
                mailbox.post(functools.partial(on_error, exc))  # a lambda would lose ``exc`` with the except block
                return

            def acknowledge() -> None:
                if faults is not None:
                    try:
                        faults.fire(FaultKind.BEFORE_ACK, checkpoint_id)
                    except BaseException as exc:  # noqa: BLE001 - the attempt dies here
                        on_fatal(exc)
                        return
                on_done(result)

            mailbox.post(acknowledge)

        executor.submit(upload)

    return async_writer


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
