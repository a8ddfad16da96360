"""The Spark checkpointing's storage side: the coordinator's completed-checkpoint store and discarder, and
the ``_metadata`` of a completed checkpoint (engine/runtime/spark/checkpointing.py takes the checkpoints).

On completion :class:`StorageCompletedCheckpointStore` writes ``_metadata`` last (:func:`build_metadata`) and
adds the checkpoint to the persistent ``checkpoints.CompletedCheckpointStore`` (N retained, subsumed ones
deleted); savepoints go to a self-contained savepoint folder and are never retained or subsumed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

from engine.checkpointing.completed_checkpoint import CompletedCheckpoint
from engine.checkpointing.completed_checkpoint_store import CompletedCheckpointStore
from engine.checkpointing.discarder import CheckpointDiscarder
from engine.checkpointing.job_status import JobStatus
from engine.runtime.checkpoint_storage import OperatorStateAck
from engine.runtime.operator_metrics import operator_state_sizes
from engine.runtime.recovery import persist_dead_letters
from engine.runtime.snapshot_metadata import sink_subtask_metadata
from engine.runtime.spark.state_files import window_uid

if TYPE_CHECKING:
    from engine.runtime.spark.checkpointing import SparkCheckpointing


class StorageDiscarder(CheckpointDiscarder):
    def __init__(self, owner: SparkCheckpointing) -> None:
        self.owner = owner

    def discard_task_state(self, job_id: str, checkpoint_id: int, task_id: str, state: Any) -> None:
        location = self.owner.locations.pop(checkpoint_id, None)
        if location is None:
            return
        if not location.is_savepoint:
            from checkpoints.errors import LeaseNotHeld

            try:  # a fenced master deletes nothing: chk-<id> may be the new holder's checkpoint in progress
                self.owner.store.persistent.check_fence(f"discard aborted checkpoint {checkpoint_id}")
            except LeaseNotHeld:
                return
        location.discard()

    def discard_completed_checkpoint(self, checkpoint: CompletedCheckpoint) -> None:
        pass  # the persistent store deletes subsumed checkpoints itself (index first, then files)


class StorageCompletedCheckpointStore(CompletedCheckpointStore):
    """The coordinator's store, backed by ``checkpoints.CompletedCheckpointStore`` (N retention in storage)."""

    def __init__(self, owner: SparkCheckpointing, persistent: Any, retained: int) -> None:
        self.owner = owner
        self.persistent = persistent
        self._retained = retained
        self._checkpoints: list[CompletedCheckpoint] = []
        #: (id, folder) of the checkpoint or savepoint added last: savepoints are not kept in ``_checkpoints``
        self._last_written: tuple[int, str] | None = None

    @property
    def max_retained(self) -> int:
        return self._retained

    def add_checkpoint_and_subsume_oldest(self, checkpoint: CompletedCheckpoint) -> list[CompletedCheckpoint]:
        epoch = self.owner.boundaries[checkpoint.checkpoint_id]["epoch"]  # popped by build_metadata
        metadata = build_metadata(self.owner, checkpoint)
        if not checkpoint.is_savepoint():  # a fenced master must not write _metadata into chk-<id>: the id may be taken
            self.persistent.check_fence(f"finalize checkpoint {checkpoint.checkpoint_id}")
        location = self.owner.locations.pop(checkpoint.checkpoint_id)
        uri = location.finalize(metadata)
        self._last_written = (checkpoint.checkpoint_id, uri)
        owner, checkpoint_id = self.owner, checkpoint.checkpoint_id
        owner.latest_properties = checkpoint.properties
        entry = {
            "checkpoint_id": checkpoint_id, "savepoint": checkpoint.is_savepoint(), "uri": uri,
            "bytes": metadata.total_bytes(), "epoch": epoch,
            "triggered_ms": checkpoint.timestamp_ms, "completed_ms": checkpoint.completion_timestamp_ms,
            "upload_ms": owner.upload_ms.pop(checkpoint_id, None),
            "duration_ms": checkpoint.completion_timestamp_ms - checkpoint.timestamp_ms}
        owner.last_operator_sizes = operator_state_sizes(metadata)
        marks = owner.output_marks.pop(checkpoint_id, None)
        if checkpoint.is_savepoint():
            owner.history.append(entry)
            owner.savepoint_uris[checkpoint_id] = uri  # until take_savepoint hands it to the caller
            return []
        result = self.persistent.add_checkpoint(metadata)  # retained from here on: a restart may restore it
        if marks is not None:  # exactly the dead letters before the barrier (engine/io/dead_letter_output.py)
            persist_dead_letters(owner.job.dead_letters, checkpoint_id, marks["dead_letters"])
        owner.history.append(entry)
        owner.num_completed += 1
        owner.retained.append(RestorableCheckpoint(checkpoint_id, uri, marks))
        self._checkpoints.append(checkpoint)
        dropped = [c for c in self._checkpoints if c.checkpoint_id in set(result.subsumed_ids)]
        self._checkpoints = [c for c in self._checkpoints if c.checkpoint_id not in set(result.subsumed_ids)]
        return dropped

    def get_all_checkpoints(self) -> Sequence[CompletedCheckpoint]:
        return tuple(self._checkpoints)

    def location_of(self, checkpoint_id: int) -> str | None:
        last = self._last_written
        return last[1] if last is not None and last[0] == checkpoint_id else super().location_of(checkpoint_id)

    def max_checkpoint_id(self) -> int | None:
        highest = self.persistent.max_checkpoint_id()
        return highest or None

    def shutdown(self, job_status: JobStatus) -> None:
        """One attempt ended: a stand-alone SparkJob is its own run and applies the retention now; an attempt of
        a SparkJobRun leaves that to the run's end (the next attempt may restart from these checkpoints)."""
        if self.owner.applies_retention_at_end:
            self.owner.apply_retention(job_status, self.owner.latest_properties)


@dataclass(frozen=True, slots=True)
class RestorableCheckpoint:
    """A completed checkpoint a restart may restore: where it is, and the driver's output marks at its barrier
    (SparkJob.output_marks: what the collect lists and dead letters held; None: cut back to nothing)."""

    checkpoint_id: int
    pointer: str
    marks: dict[str, Any] | None


def build_metadata(owner: SparkCheckpointing, checkpoint: CompletedCheckpoint) -> Any:
    """The ``_metadata`` of a completed checkpoint or savepoint (engine/runtime/checkpoint_storage.py
    ``MetadataBuilder``, as on the local runtime): every window subtask's acknowledged state, the sinks'
    two-phase-commit states and the driver's state at its barrier (``owner.boundaries``, taken by
    SparkCheckpointing._snapshot): the splits and the job's watermark (its valve follows from them)."""
    job = owner.job
    acks = [checkpoint.task_states[f"{window_uid(v)}#{i}"].operator_states[window_uid(v)]
            for v in job.windows for i in range(v.parallelism)]
    nodes = {n.id: n for v in job.plan.vertices for n in v.nodes}
    for task_id in owner.sink_tasks:  # the one driver-side writer: subtask 0 of 1, as a local sink subtask acks
        state = checkpoint.task_states[task_id].operator_states[task_id]
        if state is not None:  # a sink without transactions holds nothing
            uid = nodes[int(task_id.split("-", 1)[1])].operator_uid()
            meta = {**sink_subtask_metadata(uid, checkpoint.checkpoint_id, job.max_parallelism, state), "__tables__": {}}
            acks.append(OperatorStateAck(uid, 0, meta, (), None))
    boundary = owner.boundaries.pop(checkpoint.checkpoint_id)
    return owner.metadata_builder.build(checkpoint, acks, boundary["splits"], watermark=boundary["watermark"])
