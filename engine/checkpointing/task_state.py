"""What one task reports with its acknowledgement (Flink's ``TaskStateSnapshot``, seed 001).

Seed 001: an ack carries the snapshot handles of every operator chained in the
task; the PendingCheckpoint collects them into its operator-state view.  The
handles are opaque here (whatever checkpoint storage returned for the uploaded
files); only storage and the discarder look inside.  Source tasks also report
the positions Sn where they injected barrier n (seed 002), and tasks of an
unaligned checkpoint the handle of their persisted in-flight input data.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping


def _frozen(mapping: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(mapping or {}))


@dataclass(frozen=True, slots=True)
class TaskStateSnapshot:
    """The state handles of one task for one checkpoint."""

    #: operator id -> handle of that operator's uploaded snapshot
    operator_states: Mapping[str, Any] = field(default_factory=dict)
    #: source split id -> offset Sn (source tasks only)
    source_positions: Mapping[str, Any] = field(default_factory=dict)
    #: handle of the in-flight input data of an unaligned checkpoint, else None
    input_channel_state: Any = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "operator_states", _frozen(self.operator_states))
        object.__setattr__(self, "source_positions", _frozen(self.source_positions))

    def is_empty(self) -> bool:
        return not self.operator_states and not self.source_positions and self.input_channel_state is None


@dataclass(frozen=True, slots=True)
class CheckpointMetrics:
    """Timings a task reports with its ack (Flink's CheckpointMetrics); all in ms."""

    alignment_duration_ms: int = 0
    checkpoint_start_delay_ms: int = 0
    sync_duration_ms: int = 0
    async_duration_ms: int = 0
    bytes_persisted_of_this_checkpoint: int = 0
    unaligned: bool = False


@dataclass(frozen=True, slots=True)
class TaskSnapshot:
    """A task's snapshot after the synchronous part, before upload: what the async writer persists.

    ``operator_snapshots`` are the objects ``snapshot_state(checkpoint_id)`` returned
    (copy-on-write views, seed 002: later state changes do not affect them).
    """

    checkpoint_id: int
    timestamp_ms: int
    #: operator id -> the operator's (not yet materialized) snapshot, in chain order
    operator_snapshots: Mapping[str, Any]
    #: source split id -> Sn, for source tasks
    source_positions: Mapping[str, Any] = field(default_factory=dict)
    #: the in-flight input data of an unaligned checkpoint (an InputChannelState), else None
    input_channel_state: Any = None
