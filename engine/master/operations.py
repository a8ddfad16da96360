"""Asynchronous operations of a job master (savepoint, stop-with-savepoint), tracked by trigger id.

Flink's REST API answers a savepoint request with a request id and lets the
client poll it.  Sluice does the same, and also accepts a client-chosen
``trigger_id``: a retried request with the same id returns the same operation
instead of taking a second savepoint (Airflow tasks are retried; STYLE section 8
asks them to be idempotent).

A master runs for the job's life, so finished operations are not kept forever: the
newest :data:`MAX_FINISHED_OPERATIONS` are (Flink keeps them for
``rest.async.store-duration``, 5 minutes); running ones always are.  A retry is
idempotent as long as its operation is among those.
"""

from __future__ import annotations

import collections
import enum
import threading
import uuid
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from engine.errors import JobDefinitionError


class OperationStatus(enum.Enum):
    IN_PROGRESS = "IN_PROGRESS"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"


@dataclass
class Operation:
    trigger_id: str
    kind: str  # "savepoint" | "stop"
    status: OperationStatus = OperationStatus.IN_PROGRESS
    location: str | None = None
    failure_cause: str | None = None
    request: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """Flink's shape: ``{"status": {"id": ...}, "operation": {"location" | "failure-cause": ...}}``."""
        operation: dict[str, Any] = {}
        if self.location is not None:
            operation["location"] = self.location
        if self.failure_cause is not None:
            operation["failure-cause"] = self.failure_cause
        return {"trigger_id": self.trigger_id, "kind": self.kind, "status": {"id": self.status.value},
                "operation": operation}


#: finished (completed or failed) operations a registry keeps; the oldest finished ones are forgotten first
MAX_FINISHED_OPERATIONS = 1000


class OperationRegistry:
    """Thread-safe: the HTTP server's threads register operations, the job's thread completes them."""

    def __init__(self, max_finished: int = MAX_FINISHED_OPERATIONS) -> None:
        if isinstance(max_finished, bool) or not isinstance(max_finished, int) or max_finished < 1:
            raise JobDefinitionError("max_finished", max_finished, "must be an int >= 1 (finished operations kept)")
        self._lock = threading.Lock()
        self._ops: dict[str, Operation] = {}
        self._max_finished = max_finished
        #: trigger ids of finished operations, oldest first
        self._finished: collections.OrderedDict[str, None] = collections.OrderedDict()

    def get(self, trigger_id: str) -> Operation | None:
        with self._lock:
            return self._ops.get(trigger_id)

    def start(self, kind: str, trigger_id: str | None, request: dict[str, Any],
              launch: Any) -> tuple[Operation, bool]:
        """Start ``launch() -> Future[str location]`` once per trigger id; returns (operation, created)."""
        with self._lock:
            if trigger_id is not None and trigger_id in self._ops:
                return self._ops[trigger_id], False
            op = Operation(trigger_id or uuid.uuid4().hex, kind, request=dict(request))
            self._ops[op.trigger_id] = op
        try:
            future: Future = launch()
        except Exception as exc:  # refused synchronously (job not running, ...): the operation failed
            self._fail(op, exc)
            return op, True
        future.add_done_callback(lambda f: self._done(op, f))
        return op, True

    def _done(self, op: Operation, future: Future) -> None:
        exc = future.exception()
        if exc is not None:
            self._fail(op, exc)
            return
        with self._lock:
            op.location = str(future.result())
            op.status = OperationStatus.COMPLETED
            self._finished_locked(op)

    def _fail(self, op: Operation, exc: BaseException) -> None:
        with self._lock:
            op.failure_cause = f"{type(exc).__name__}: {exc}"
            op.status = OperationStatus.FAILED
            self._finished_locked(op)

    def _finished_locked(self, op: Operation) -> None:
        self._finished[op.trigger_id] = None
        while len(self._finished) > self._max_finished:
            oldest, _ = self._finished.popitem(last=False)
            self._ops.pop(oldest, None)

    def all(self) -> list[Operation]:
        with self._lock:
            return list(self._ops.values())
