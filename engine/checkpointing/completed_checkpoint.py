"""CompletedCheckpoint: one successful distributed snapshot (seed 001).

Seed 001: once every task has acknowledged, the PendingCheckpoint becomes a
CompletedCheckpoint, which the job master keeps (in the CompletedCheckpointStore)
to restore from.  Seed 002: a snapshot is, per source, the position Sn and, per
operator, a pointer to its stored state.  Immutable: the store and recovery
share it freely.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

from engine.checkpointing.job_status import JobStatus
from engine.checkpointing.properties import CheckpointProperties
from engine.checkpointing.task_state import TaskStateSnapshot


@dataclass(frozen=True, slots=True)
class CompletedCheckpoint:
    """A finished checkpoint or savepoint."""

    job_id: str
    checkpoint_id: int
    #: when the coordinator triggered it (the barrier timestamp), ms
    timestamp_ms: int
    completion_timestamp_ms: int
    properties: CheckpointProperties
    #: task id -> everything that task reported
    task_states: Mapping[str, TaskStateSnapshot] = field(default_factory=dict)
    #: where storage keeps it (``chk-<id>`` folder or savepoint path); None for in-memory checkpoints
    external_pointer: str | None = None
    #: extra metadata for ``_metadata`` (watermarks, operator ids, key-group ranges, ...)
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "task_states", MappingProxyType(dict(self.task_states)))
        object.__setattr__(self, "metadata", MappingProxyType(dict(self.metadata)))

    def is_savepoint(self) -> bool:
        return self.properties.is_savepoint()

    @property
    def source_positions(self) -> Mapping[str, Any]:
        """Sn: every source split's position when barrier n was injected (seed 002), merged over tasks."""
        merged: dict[str, Any] = {}
        for state in self.task_states.values():
            merged.update(state.source_positions)
        return MappingProxyType(merged)

    def operator_states(self) -> dict[str, dict[str, Any]]:
        """operator id -> {task id -> handle}: seed 001's OperatorID -> OperatorState view."""
        view: dict[str, dict[str, Any]] = {}
        for task_id, state in self.task_states.items():
            for operator_id, handle in state.operator_states.items():
                view.setdefault(operator_id, {})[task_id] = handle
        return view

    def should_discard_on_subsume(self) -> bool:
        return self.properties.discard_subsumed

    def should_discard_on_shutdown(self, job_status: JobStatus) -> bool:
        return self.properties.should_discard_on_shutdown(job_status)
