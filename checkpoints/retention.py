"""Retention decisions as pure functions: which checkpoints leave, which files become unreferenced,
which savepoints a history policy removes.  No I/O here; :mod:`checkpoints.completed_store` and
:mod:`checkpoints.savepoints` carry the decisions out.

Seed 001: "for a job the number of handles that can be written is a finite value
N; when the number of snapshots exceeds N, the oldest snapshot handle is removed
... (its distributed snapshot state is cleaned up too), then the newest is
written".  Sluice writes the new index first and deletes afterwards, so a crash
in between leaves garbage (found by :mod:`checkpoints.orphans`), never an index
pointing at deleted files.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence, TypeVar

from checkpoints.layout import is_shared_path
from checkpoints.metadata import CheckpointMetadata
from engine.errors import JobDefinitionError

T = TypeVar("T")


def split_retained(ordered: Sequence[T], max_retained: int) -> tuple[list[T], list[T]]:
    """``(kept, subsumed)`` of handles ordered oldest first: the newest ``max_retained`` stay."""
    if type(max_retained) is not int or max_retained < 1:
        raise JobDefinitionError("retained", max_retained, "must be an int >= 1")
    cut = max(0, len(ordered) - max_retained)
    return list(ordered[cut:]), list(ordered[:cut])


def shared_files_in_use(retained: Iterable[CheckpointMetadata]) -> set[str]:
    """Every ``shared/...`` path a retained checkpoint references: their reference count is at least one."""
    return {path for m in retained for path in m.referenced_paths() if is_shared_path(path)}


def unreferenced_shared_files(subsumed: Iterable[CheckpointMetadata], retained: Iterable[CheckpointMetadata]) -> set[str]:
    """Shared files the subsumed checkpoints referenced that no retained checkpoint references:
    their reference count drops to zero, so they may be deleted."""
    released = shared_files_in_use(subsumed)
    return released - shared_files_in_use(retained)


@dataclass(frozen=True, slots=True)
class SavepointHistoryPolicy:
    """How many savepoints of a job to keep, applied only on request (``apply_savepoint_policy``).

    ``max_count`` keeps the newest N; ``max_age_ms`` removes those completed longer
    ago.  Either or both may be set.  Whatever the policy, the newest savepoint
    whose validation passed is kept: it is the one a restore would fall back to.
    """

    max_count: int | None = None
    max_age_ms: int | None = None

    def __post_init__(self) -> None:
        if self.max_count is not None and (type(self.max_count) is not int or self.max_count < 1):
            raise JobDefinitionError("max_count", self.max_count, "must be None or an int >= 1")
        if self.max_age_ms is not None and (type(self.max_age_ms) is not int or self.max_age_ms < 1):
            raise JobDefinitionError("max_age_ms", self.max_age_ms, "must be None or a positive number of ms")


@dataclass(frozen=True, slots=True)
class SavepointSummary:
    """What the savepoint policy needs to know about one savepoint."""

    checkpoint_id: int
    path: str
    completed_ms: int
    validation_passed: bool


def savepoints_to_discard(
    savepoints: Sequence[SavepointSummary], policy: SavepointHistoryPolicy, now_ms: int
) -> list[SavepointSummary]:
    """The savepoints ``policy`` removes, oldest first; never the newest one whose validation passed."""
    ordered = sorted(savepoints, key=lambda s: (s.completed_ms, s.checkpoint_id))
    doomed: set[str] = set()
    if policy.max_count is not None:
        _, over = split_retained(ordered, policy.max_count)
        doomed.update(s.path for s in over)
    if policy.max_age_ms is not None:
        doomed.update(s.path for s in ordered if now_ms - s.completed_ms > policy.max_age_ms)
    validated = [s for s in ordered if s.validation_passed]
    if validated:
        doomed.discard(validated[-1].path)
    return [s for s in ordered if s.path in doomed]
