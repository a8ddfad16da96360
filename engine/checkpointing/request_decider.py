"""CheckpointRequestDecider: whether, and which, checkpoint request runs now (Flink's class of that name).

Seed 001's pre-checks, in the order this class applies them to a request:

1. the coordinator is shut down                    -> CHECKPOINT_COORDINATOR_SHUTDOWN
2. too many requests queued (1000)                 -> TOO_MANY_CHECKPOINT_REQUESTS (lowest priority dropped)
3. too many concurrent checkpoints, unless forced  -> a periodic request fails with
   TOO_MANY_CONCURRENT_CHECKPOINTS (the periodic scheduler tries again); a
   non-periodic one waits in the queue until a checkpoint ends
4. min pause since the last completion not reached (periodic, not forced)
                                                   -> MINIMUM_TIME_BETWEEN_CHECKPOINTS, and the
   decision carries the remaining delay so the coordinator re-schedules its timer
5. a task to trigger or acknowledge is not running -> NOT_ALL_REQUIRED_TASKS_RUNNING

Queue order: forced requests (savepoints) first, then other user requests, then
periodic ones; FIFO within a class.  Refused requests are failed through their
Promise with a CheckpointDeclinedError carrying the reason (all pre-flight).
Pure: the coordinator passes its state in, time comes from the injected clock.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from engine.checkpointing.completed_checkpoint import CompletedCheckpoint
from engine.checkpointing.failure_reason import CheckpointFailureReason, checkpoint_exception
from engine.checkpointing.promise import Promise
from engine.checkpointing.properties import CheckpointProperties
from engine.elements import CheckpointOptions
from engine.errors import JobDefinitionError

DEFAULT_MAX_QUEUED_REQUESTS = 1000
_sequence = itertools.count()


@dataclass(eq=False)
class CheckpointTriggerRequest:
    """One request to take a checkpoint or savepoint; its outcome arrives through ``result``."""

    properties: CheckpointProperties
    options: CheckpointOptions
    is_periodic: bool
    target_location: str | None = None
    result: Promise[CompletedCheckpoint] = field(default_factory=Promise)
    sequence: int = field(default_factory=lambda: next(_sequence))

    def is_force(self) -> bool:
        return self.properties.forced

    def priority(self) -> tuple[int, int, int]:
        return (0 if self.is_force() else 1, 1 if self.is_periodic else 0, self.sequence)

    def fail(self, reason: CheckpointFailureReason) -> None:
        if not self.result.is_done():
            self.result.reject(checkpoint_exception(reason))


@dataclass(frozen=True, slots=True)
class CoordinatorState:
    """What the pre-checks look at, as the coordinator sees it now."""

    is_shut_down: bool
    num_pending_checkpoints: int
    last_checkpoint_completion_ms: int | None
    tasks_not_running: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RequestDecision:
    """The request to execute now (or None) and, after a min-pause refusal, when to try the periodic trigger again."""

    execute: CheckpointTriggerRequest | None = None
    retry_periodic_after_ms: int | None = None


class CheckpointRequestDecider:
    def __init__(self, max_concurrent_checkpoints: int, min_pause_between_checkpoints_ms: int, clock: Any,
                 max_queued_requests: int = DEFAULT_MAX_QUEUED_REQUESTS) -> None:
        if max_concurrent_checkpoints < 1:
            raise JobDefinitionError("max_concurrent_checkpoints", max_concurrent_checkpoints, "must be >= 1")
        if min_pause_between_checkpoints_ms < 0:
            raise JobDefinitionError("min_pause_between_checkpoints", min_pause_between_checkpoints_ms, "must be >= 0")
        if max_queued_requests < 1:
            raise JobDefinitionError("max_queued_requests", max_queued_requests, "must be >= 1")
        self._max_concurrent = max_concurrent_checkpoints
        self._min_pause_ms = min_pause_between_checkpoints_ms
        self._clock = clock
        self._max_queued = max_queued_requests
        self._queue: list[CheckpointTriggerRequest] = []

    def num_queued_requests(self) -> int:
        return len(self._queue)

    def next_trigger_delay_ms(self, last_completion_ms: int | None) -> int:
        """How long until the min pause since the last completion has passed (<= 0: it has)."""
        if last_completion_ms is None:
            return 0
        return last_completion_ms + self._min_pause_ms - self._clock.now_ms()

    def choose_request_to_execute(self, request: CheckpointTriggerRequest, state: CoordinatorState) -> RequestDecision:
        """Queue ``request`` and pick what to run now (pre-checks 1-5)."""
        if state.is_shut_down:
            request.fail(CheckpointFailureReason.CHECKPOINT_COORDINATOR_SHUTDOWN)
            return RequestDecision()
        self._queue.append(request)
        self._queue.sort(key=CheckpointTriggerRequest.priority)
        if len(self._queue) > self._max_queued:
            self._queue.pop().fail(CheckpointFailureReason.TOO_MANY_CHECKPOINT_REQUESTS)
        return self.choose_queued_request_to_execute(state)

    def choose_queued_request_to_execute(self, state: CoordinatorState) -> RequestDecision:
        """Pick a queued request (called again whenever a checkpoint ends and frees a slot)."""
        if state.is_shut_down:
            self.abort_all(CheckpointFailureReason.CHECKPOINT_COORDINATOR_SHUTDOWN)
            return RequestDecision()
        if not self._queue:
            return RequestDecision()
        first = self._queue[0]
        if state.num_pending_checkpoints >= self._max_concurrent and not first.is_force():
            # periodic requests do not wait: the scheduler fires again; user requests wait for a free slot
            for periodic in [r for r in self._queue if r.is_periodic and not r.is_force()]:
                self._queue.remove(periodic)
                periodic.fail(CheckpointFailureReason.TOO_MANY_CONCURRENT_CHECKPOINTS)
            return RequestDecision()
        if not first.is_force() and first.is_periodic:
            delay = self.next_trigger_delay_ms(state.last_checkpoint_completion_ms)
            if delay > 0:
                self._queue.pop(0).fail(CheckpointFailureReason.MINIMUM_TIME_BETWEEN_CHECKPOINTS)
                return RequestDecision(retry_periodic_after_ms=delay)
        self._queue.pop(0)
        if state.tasks_not_running:
            first.fail(CheckpointFailureReason.NOT_ALL_REQUIRED_TASKS_RUNNING)
            return RequestDecision()
        return RequestDecision(execute=first)

    def abort_all(self, reason: CheckpointFailureReason) -> None:
        queued, self._queue = self._queue, []
        for r in queued:
            r.fail(reason)
