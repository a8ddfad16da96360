"""Which snapshot a job restarts from for ``latest``: a pure decision over retained checkpoints and savepoints.

Candidates are ordered by completion time, newest first, never by id: ids
continue from the snapshot a run was restored from, so two runs of one job can
both have written a ``chk-18`` and a ``savepoint-18`` (seen side by side), and
an operator's stop savepoint is newer than every retained checkpoint although
its id may be lower.  The first candidate that passes ``inspect`` wins; every
newer one is passed over with its reason, so a caller can log what it skipped.

A savepoint whose recorded validation failed is passed over; one that was never
validated is a candidate (the restore validates it before the job starts).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

SnapshotKind = Literal["checkpoint", "savepoint"]


@dataclass(frozen=True, slots=True)
class RestoreCandidate:
    uri: str
    kind: SnapshotKind
    checkpoint_id: int
    completed_ms: int
    #: True/False when a validation outcome is recorded in its ``_metadata``, None when never validated
    validation_passed: bool | None = None

    def describe(self) -> str:
        return f"{self.kind} {self.checkpoint_id} ({self.uri}, completed {self.completed_ms})"


@dataclass(frozen=True, slots=True)
class RestoreChoice:
    """The snapshot chosen, and the newer candidates passed over with their reasons."""

    uri: str
    kind: SnapshotKind
    checkpoint_id: int
    completed_ms: int
    passed_over: tuple[str, ...] = ()


class NoRestorePoint(LookupError):
    """No retained checkpoint or savepoint of the job can be restored; ``passed_over`` says why each was refused."""

    def __init__(self, job_id: str, passed_over: list[str]) -> None:
        super().__init__(f"job {job_id!r} has no restorable retained checkpoint or savepoint; passed over: "
                         f"{passed_over or 'nothing (none exists)'}. "
                         "See docs/runbooks/recover-corrupt-checkpoint.md")
        self.passed_over = tuple(passed_over)


def newest_first(candidates: Iterable[RestoreCandidate]) -> list[RestoreCandidate]:
    """By completion time, newest first; on a tie a savepoint before a checkpoint (it is self-contained)."""
    return sorted(candidates, key=lambda c: (c.completed_ms, c.kind == "savepoint", c.checkpoint_id), reverse=True)


def choose_restore_point(job_id: str, candidates: Iterable[RestoreCandidate],
                         inspect: Callable[[RestoreCandidate], str | None]) -> RestoreChoice:
    """The newest candidate that ``inspect`` finds no problem with (it returns the problem, or None).

    :raises NoRestorePoint: when every candidate was refused (or there is none)."""
    passed_over: list[str] = []
    for candidate in newest_first(candidates):
        if candidate.validation_passed is False:
            passed_over.append(f"{candidate.describe()}: its recorded validation failed")
            continue
        problem = inspect(candidate)
        if problem is not None:
            passed_over.append(f"{candidate.describe()}: {problem}")
            continue
        return RestoreChoice(candidate.uri, candidate.kind, candidate.checkpoint_id, candidate.completed_ms,
                            tuple(passed_over))
    raise NoRestorePoint(job_id, passed_over)
