"""One control-request queue for both runtimes, served by the job's own thread at a safe point (issue 15).

A job's control handle (the local runtime's LocalJobClient, a SparkJob) is called from other threads:
the job master's HTTP API, the CLI, a test.  The protocol objects (coordinator, tasks, the Spark
driver's epoch state) are not thread-safe, so a request only queues here; the job's thread serves
the queue where the job is consistent -- between two scheduling rounds on the local runtime, at an
epoch boundary on Spark -- by calling its handler with each :class:`ControlRequest`, oldest first.
The handler owns the request's future: it may answer at once (Spark's savepoint completes at the
boundary) or later (a local savepoint completes when its barrier went round); an exception it raises
fails the future.

``wake`` is called on every submission, so a job thread that sleeps (a Spark epoch loop waiting out
``epoch_interval_ms``, a local scheduler idling on its mailbox) serves the request at once.

When the job has ended the owner :meth:`ControlQueue.close`\\ s the queue with a last handler: what is
still queued is served by it, and later requests are served by it at once on the caller's thread, so
a request that comes after the last safe point is answered (refused with the job's state) instead of
waiting for a safe point that never comes.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Callable

from engine.errors import JobDefinitionError

#: the requests a job's control handle takes: a savepoint, stop with a savepoint, cancel
CONTROL_KINDS = ("savepoint", "stop", "cancel")


@dataclass(frozen=True, slots=True)
class ControlRequest:
    """One request: ``kind`` (CONTROL_KINDS), the savepoint's target folder (None: the job's default) and
    whether a stop drains (ends event time first, Flink's ``--drain``)."""

    kind: str
    target: str | None = None
    drain: bool = False
    future: Future = field(default_factory=Future)


Handler = Callable[[ControlRequest], None]


class ControlQueue:
    """Control requests from any thread, served by the job's thread; see the module docstring."""

    def __init__(self, wake: Callable[[], None] | None = None) -> None:
        self._lock = threading.Lock()
        self._pending: list[ControlRequest] = []
        self._closed_by: Handler | None = None
        self._wake = wake

    def submit(self, kind: str, target: str | None = None, drain: bool = False) -> Future:
        """Queue a request; its future gets the handler's answer."""
        if kind not in CONTROL_KINDS:
            raise JobDefinitionError("kind", kind, f"must be one of {', '.join(CONTROL_KINDS)}")
        if not isinstance(drain, bool):
            raise JobDefinitionError("drain", drain, "must be a bool")
        request = ControlRequest(kind, target, drain)
        with self._lock:
            closed_by = self._closed_by
            if closed_by is None:
                self._pending.append(request)
        if closed_by is not None:
            _serve_one(closed_by, request)
        elif self._wake is not None:
            self._wake()
        return request.future

    def pending(self) -> bool:
        with self._lock:
            return bool(self._pending)

    def serve(self, handler: Handler) -> int:
        """Serve every queued request with ``handler``, oldest first (on the job's thread, at a safe point);
        returns how many were served."""
        with self._lock:
            requests, self._pending = self._pending, []
        for request in requests:
            _serve_one(handler, request)
        return len(requests)

    def close(self, handler: Handler) -> None:
        """The job ended: serve what is queued with ``handler``, and every later request at once."""
        with self._lock:
            self._closed_by = handler
            requests, self._pending = self._pending, []
        for request in requests:
            _serve_one(handler, request)


def _serve_one(handler: Handler, request: ControlRequest) -> None:
    try:
        handler(request)
    except BaseException as exc:  # noqa: BLE001 - whoever waits on the request gets the error
        if not request.future.done():
            request.future.set_exception(exc)
