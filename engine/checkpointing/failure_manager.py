"""CheckpointFailureManager: when repeated checkpoint failures fail the job (Flink's class of that name).

Counts *consecutive* failures that count (``CheckpointFailureReason.counts_as_failure``:
expired, declined, async/sync snapshot failure, finalize failure, ...), each
checkpoint id at most once and only if newer than the last success; pre-flight
refusals, subsumption and aborts caused by cancellation markers do not count.
A success resets the count.  More than ``tolerable_failure_number`` failures
call ``fail_job``.  Savepoint failures never fail the job (the user retries them).
"""

from __future__ import annotations

from typing import Callable

from engine.checkpointing.failure_reason import CheckpointFailureReason
from engine.errors import JobDefinitionError, JobFailedError


class CheckpointFailureManager:
    def __init__(self, tolerable_failure_number: int, fail_job: Callable[[JobFailedError], None]) -> None:
        if isinstance(tolerable_failure_number, bool) or not isinstance(tolerable_failure_number, int) \
                or tolerable_failure_number < 0:
            raise JobDefinitionError("tolerable_checkpoint_failure_number", tolerable_failure_number, "must be an int >= 0")
        self._tolerable = tolerable_failure_number
        self._fail_job = fail_job
        self._continuous_failures = 0
        self._counted_ids: set[int] = set()
        self._last_succeeded_id = 0
        self._job_failed = False

    @property
    def continuous_failure_count(self) -> int:
        return self._continuous_failures

    def handle_checkpoint_failure(self, checkpoint_id: int | None, reason: CheckpointFailureReason,
                                  is_savepoint: bool = False, cause: BaseException | None = None) -> bool:
        """Account one failed checkpoint; returns True if this call failed the job.

        ``cause`` (the task's or the store's error) becomes the job failure's ``__cause__`` and is named in
        its message, so the reason a checkpoint failed is not lost behind the threshold."""
        if is_savepoint or not reason.counts_as_failure:
            return False
        if checkpoint_id is not None:
            if checkpoint_id <= self._last_succeeded_id or checkpoint_id in self._counted_ids:
                return False
            self._counted_ids.add(checkpoint_id)
        self._continuous_failures += 1
        if self._continuous_failures > self._tolerable and not self._job_failed:
            self._job_failed = True
            because = f": {type(cause).__name__}: {cause}" if cause is not None else ""
            failure = JobFailedError(
                f"Exceeded checkpoint tolerable failure threshold: {self._continuous_failures} consecutive "
                f"checkpoint failures (last: {reason.name} for checkpoint {checkpoint_id}{because}), "
                f"tolerable_checkpoint_failure_number={self._tolerable}. Raise it with "
                "set_tolerable_checkpoint_failure_number(n) or find why checkpoints fail.")
            failure.__cause__ = cause
            self._fail_job(failure)
            return True
        return False

    def handle_checkpoint_success(self, checkpoint_id: int) -> None:
        """A completed checkpoint resets the count (failures of older ids no longer count)."""
        self._last_succeeded_id = max(self._last_succeeded_id, checkpoint_id)
        self._continuous_failures = 0
        self._counted_ids = {i for i in self._counted_ids if i > checkpoint_id}
        self._job_failed = False
