"""The terminal (or suspending) states a job stops in, as far as checkpoint clean-up cares (Flink's JobStatus)."""

from __future__ import annotations

import enum


class JobStatus(enum.Enum):
    """How the job ended: decides which retained checkpoints are discarded on shutdown (seed 001)."""

    FINISHED = "FINISHED"
    CANCELED = "CANCELED"
    FAILED = "FAILED"
    #: the job master stopped without ending the job (fail-over to another master): nothing is discarded
    SUSPENDED = "SUSPENDED"

    def is_globally_terminal(self) -> bool:
        return self is not JobStatus.SUSPENDED
