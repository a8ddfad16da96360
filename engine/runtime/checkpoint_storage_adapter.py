"""Where a runtime's checkpoint state goes: memory, or the ``checkpoints`` storage package (seed 001, 002).

One small class keeps persistence apart from the protocol, so the local runtime
(and later the Spark runtime) never touches storage layout:

- :meth:`CheckpointStorageAdapter.write_task_state` runs in a writer thread (seed 002's
  asynchronous part): it materializes each operator snapshot of a task and either
  keeps it in memory (no ``checkpoint_storage_dir``) or writes its Arrow tables as
  state files through :class:`checkpoints.CheckpointStorageLocation`; the returned
  :class:`TaskStateSnapshot` holds the handles the task acknowledges with.
- :class:`AdapterCompletedCheckpointStore` is the coordinator's CompletedCheckpointStore:
  N retention in memory (recovery within a run) and, when persistent, ``_metadata``
  finalized (built by the ``MetadataBuilder`` both runtimes share, engine/runtime/checkpoint_storage.py,
  from the tasks' ``OperatorStateAck``) and the retained-handles index updated by
  :class:`checkpoints.CompletedCheckpointStore`.
  Savepoints always go to their own self-contained folder under the requested directory.
- :meth:`restore_point` turns a completed checkpoint of this run into a :class:`RestorePoint`
  (in memory, or read back through the one restore path, engine/runtime/restore.py).

Everything persisted is Arrow/Parquet or JSON (STYLE section 9).  Task ids are
``v<vertex>.<subtask>``; the subtask index is read back from them.

Partial: state of a declined or expired checkpoint written to storage is left for
``checkpoints.orphans`` to collect (the protocol only discards task state in memory).
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any, Sequence

from checkpoints import CheckpointStorage, RetainedCheckpointStore as PersistentStore, open_store
from engine.checkpointing.channel_state import InputChannelState
from engine.checkpointing.completed_checkpoint import CompletedCheckpoint
from engine.checkpointing.completed_checkpoint_store import CompletedCheckpointStore, StandaloneCompletedCheckpointStore
from engine.checkpointing.discarder import CheckpointDiscarder
from engine.checkpointing.job_status import JobStatus
from engine.checkpointing.properties import CheckpointProperties
from engine.checkpointing.task_state import TaskSnapshot, TaskStateSnapshot
from engine.operators.base import OPERATOR_SNAPSHOT_FORMAT_VERSION, MaterializedOperatorSnapshot, OperatorSnapshot
from engine.runtime.checkpoint_storage import (
    CHANNEL_STATE_SUFFIX,
    CHANNEL_STATE_TABLE,
    MetadataBuilder,
    OperatorStateAck,
    encode_channel_state,
    write_operator_snapshot,
)
from engine.runtime.operator_metrics import operator_state_sizes
from engine.runtime.restore import RestorePoint, load_restore_point
from engine.runtime.snapshot_metadata import SOURCE_STAGE_SUFFIX, split_states_of_stage


def subtask_of(task_id: str) -> int:
    return int(task_id.rsplit(".", 1)[1])


def _channel_state_snapshot(task_id: str, checkpoint_id: int, state: InputChannelState,
                            max_parallelism: int) -> MaterializedOperatorSnapshot:
    return MaterializedOperatorSnapshot(
        {"format_version": OPERATOR_SNAPSHOT_FORMAT_VERSION, "operator_id": task_id.rsplit(".", 1)[0] + CHANNEL_STATE_SUFFIX,
         "operator_class": "InputChannelState", "checkpoint_id": checkpoint_id, "max_parallelism": max_parallelism,
         "key_group_range": [0, max_parallelism - 1]},
        {CHANNEL_STATE_TABLE: encode_channel_state(state)})


def deletes_retained_checkpoints_at_end(latest: CheckpointProperties | None, job_status: JobStatus) -> bool:
    """Whether the retained checkpoints are deleted when a whole run ends in ``job_status`` (both runtimes).

    ``latest``: the properties of the newest checkpoint or savepoint the run completed (None: it completed
    none, and the index keeps what it holds, such as the checkpoints of an earlier run it restored from).
    As Flink's CompletedCheckpointStore.shutdown, a checkpoint's properties decide per the job's
    ExternalizedCheckpointRetention: deleted on FINISHED always, on CANCELED unless RETAIN_ON_CANCELLATION,
    on FAILED only with NO_EXTERNALIZED_CHECKPOINTS; never on SUSPENDED (the job is not over).  Unlike
    Flink, a run whose newest snapshot is a savepoint (stop-with-savepoint) keeps its retained checkpoints:
    savepoints never discard (as the local runtime always did: a stopped job's checkpoints stay beside its
    savepoint).
    Applied once, when the run ends, never when one attempt fails and the next restarts from them.
    """
    return latest is not None and job_status.is_globally_terminal() and latest.should_discard_on_shutdown(job_status)


class _NoDiscard(CheckpointDiscarder):
    """In memory, dropping the references is the discard; on storage, the checkpoints store deletes."""

    def discard_task_state(self, job_id: str, checkpoint_id: int, task_id: str, state: Any) -> None:
        pass

    def discard_completed_checkpoint(self, checkpoint: CompletedCheckpoint) -> None:
        pass


class CheckpointStorageAdapter:
    """One job's bridge from task snapshots to memory or the ``checkpoints`` package; see the module docstring."""

    def __init__(self, job_id: str, job_name: str, max_parallelism: int, storage_dir: str | None,
                 num_retained: int, fence: Any = None) -> None:
        self.job_id = job_id
        self.job_name = job_name
        self.max_parallelism = max_parallelism
        self.storage_dir = storage_dir
        self.num_retained = num_retained
        self.discarder: CheckpointDiscarder = _NoDiscard()
        self._lock = threading.Lock()
        self._savepoint_targets: dict[int, str] = {}
        self._locations: dict[int, Any] = {}
        self._storage: Any = None
        self._persistent_store: Any = None
        #: checkpoint id -> URI of its finalized folder (savepoints and persisted checkpoints)
        self.external_pointers: dict[int, str] = {}
        #: checkpoint id -> bytes of state it wrote, until the run records it in its history
        self.sizes: dict[int, int] = {}
        #: bytes per operator uid of the newest finalized checkpoint or savepoint (sluice_state_size_bytes)
        self.last_operator_sizes: dict[str, int] = {}
        if storage_dir is not None:
            self._storage = CheckpointStorage(open_store(storage_dir), job_id)
            self._persistent_store = PersistentStore(self._storage, retained=num_retained, fence=fence)
            self._persistent_store.recover()
        self.completed_store = AdapterCompletedCheckpointStore(self)
        #: builds each checkpoint's _metadata (set per attempt from the plan: set_plan_nodes)
        self.metadata_builder = MetadataBuilder(job_id, job_name, max_parallelism, ())

    def set_plan_nodes(self, nodes: Any) -> None:
        """The attempt's plan nodes, in plan order: the operators' names and window configs for ``_metadata``."""
        self.metadata_builder = MetadataBuilder(self.job_id, self.job_name, self.max_parallelism, nodes)

    @property
    def storage(self) -> Any:
        """The job's ``checkpoints.CheckpointStorage``, or None when the job keeps no checkpoints."""
        return self._storage

    # -- fencing (checkpoints.lease) ----------------------------------------------------------------
    def has_fence(self) -> bool:
        return self._persistent_store is not None and self._persistent_store.fence is not None

    def keep_restore_source(self, uri: str) -> None:
        """The persistent store must not sweep ``uri``'s folder as a stray (see ``CompletedCheckpointStore``)."""
        if self._persistent_store is not None:
            self._persistent_store.keep_restore_source(uri)

    def check_fence(self, action: str) -> None:
        """Raise JobMasterFenced unless the job master still holds the job's lease (no-op without one)."""
        if self._persistent_store is not None:
            self._persistent_store.check_fence(action)

    # -- where each checkpoint goes --------------------------------------------------------------
    def register_savepoint(self, checkpoint_id: int, target_dir: str) -> None:
        """Savepoint ``checkpoint_id`` is written under ``target_dir`` (call before its barrier is injected)."""
        with self._lock:
            self._savepoint_targets[checkpoint_id] = target_dir

    def is_persistent(self, checkpoint_id: int) -> bool:
        return self._storage is not None or checkpoint_id in self._savepoint_targets

    def _location(self, checkpoint_id: int) -> Any:
        with self._lock:
            location = self._locations.get(checkpoint_id)
            if location is None:
                target = self._savepoint_targets.get(checkpoint_id)
                if target is not None:
                    storage = CheckpointStorage(open_store(target), self.job_id)
                    location = storage.initialize_savepoint_location(checkpoint_id)
                else:
                    location = self._storage.initialize_location(checkpoint_id)
                self._locations[checkpoint_id] = location
            return location

    # -- the asynchronous part (writer thread) ----------------------------------------------------
    def write_task_state(self, task_id: str, snapshot: TaskSnapshot) -> TaskStateSnapshot:
        """Materialize and (if persistent) upload one task's snapshot; returns the handles to acknowledge with."""
        cid = snapshot.checkpoint_id
        channel_state = snapshot.input_channel_state
        if not self.is_persistent(cid):
            # in memory the copy-on-write snapshot itself is the handle (seed 002: later writes do not change
            # it); it is materialized only if a restore needs it, which keeps in-memory checkpoints cheap
            return TaskStateSnapshot(dict(snapshot.operator_snapshots), dict(snapshot.source_positions), channel_state)
        materialized: dict[str, MaterializedOperatorSnapshot] = {}
        for uid, snap in snapshot.operator_snapshots.items():
            materialized[uid] = snap.materialize() if isinstance(snap, OperatorSnapshot) else snap
        if cid not in self._savepoint_targets:  # a fenced master's files could land in the new holder's chk-<id>
            self.check_fence(f"write the state of task {task_id} for checkpoint {cid}")
        location = self._location(cid)
        subtask = subtask_of(task_id)
        handles: dict[str, Any] = {uid: write_operator_snapshot(location, uid, subtask, m) for uid, m in materialized.items()}
        channel_handle = None
        if channel_state is not None and not channel_state.is_empty():
            uid = task_id.rsplit(".", 1)[0] + CHANNEL_STATE_SUFFIX
            channel_handle = write_operator_snapshot(location, uid, subtask,
                                         _channel_state_snapshot(task_id, cid, channel_state, self.max_parallelism))
        return TaskStateSnapshot(handles, dict(snapshot.source_positions), channel_handle)

    # -- completion ----------------------------------------------------------------------------
    def finalize(self, completed: CompletedCheckpoint) -> str | None:
        """Write ``_metadata`` of a persisted checkpoint or savepoint; add checkpoints to the retained index."""
        cid = completed.checkpoint_id
        if not self.is_persistent(cid):
            return None
        acks: list[OperatorStateAck] = []
        splits: dict[str, dict[str, Any]] = {}
        for state in completed.task_states.values():
            acks.extend(state.operator_states.values())
            if state.input_channel_state is not None:
                acks.append(state.input_channel_state)
            if state.source_positions:  # the portable core (engine/runtime/snapshot_metadata.py): the splits
                stage = next((dict(h.metadata)["task_state"] for uid, h in state.operator_states.items()
                              if uid.endswith(SOURCE_STAGE_SUFFIX)), None)
                splits.update(split_states_of_stage(state.source_positions, stage))
        metadata = self.metadata_builder.build(completed, acks, splits)
        savepoint = completed.is_savepoint()
        if not savepoint:  # a fenced master must not even write _metadata into chk-<id>: the id may be taken
            self._persistent_store.check_fence(f"finalize checkpoint {cid}")
        uri = self._location(cid).finalize(metadata)
        if not savepoint:
            self._persistent_store.add_checkpoint(metadata)
        self.sizes[cid] = metadata.total_bytes()
        self.last_operator_sizes = operator_state_sizes(metadata)
        with self._lock:
            self._locations.pop(cid, None)
            self._savepoint_targets.pop(cid, None)
            # a completed checkpoint subsumes every older pending checkpoint (they were aborted): their
            # locations would otherwise stay for the job's life; pending savepoints are never subsumed
            for older in [c for c in self._locations if c < cid and c not in self._savepoint_targets]:
                del self._locations[older]
            self.external_pointers[cid] = uri
        return uri

    # -- restore -------------------------------------------------------------------------------
    def restore_point(self, completed: CompletedCheckpoint) -> RestorePoint:
        """A RestorePoint from a completed checkpoint of this run (persisted ones are read back and validated)."""
        if completed.external_pointer is not None:
            return load_restore_point(completed.external_pointer)
        point = RestorePoint(completed.checkpoint_id, dict(completed.source_positions),
                             is_savepoint=completed.is_savepoint())
        for task_id, state in completed.task_states.items():
            subtask = subtask_of(task_id)
            for uid, snap in state.operator_states.items():
                if isinstance(snap, OperatorSnapshot):
                    snap = snap.materialize()
                point.operators.setdefault(uid, []).append((subtask, snap))
            if state.input_channel_state is not None:
                point.channel_state[task_id] = state.input_channel_state
        return point

    def shutdown(self, job_status: JobStatus, latest: CompletedCheckpoint | None) -> None:
        """The whole run ended (called once, never between restart attempts): apply the job's retention."""
        if self._persistent_store is not None:
            delete = deletes_retained_checkpoints_at_end(latest.properties if latest is not None else None, job_status)
            self._persistent_store.shutdown(delete_checkpoints=delete)

    def retained_checkpoint_ids(self) -> list[int]:
        """Ids in the persistent retained-handles index (empty when in memory)."""
        if self._persistent_store is None:
            return []
        return [h.checkpoint_id for h in self._persistent_store.all_checkpoints()]


class AdapterCompletedCheckpointStore(CompletedCheckpointStore):
    """N retention in memory plus, through the adapter, ``_metadata`` and the retained index on storage."""

    def __init__(self, adapter: CheckpointStorageAdapter) -> None:
        self._adapter = adapter
        self._memory = StandaloneCompletedCheckpointStore(adapter.num_retained, adapter.discarder)

    @property
    def max_retained(self) -> int:
        return self._memory.max_retained

    def add_checkpoint_and_subsume_oldest(self, checkpoint: CompletedCheckpoint) -> list[CompletedCheckpoint]:
        uri = self._adapter.finalize(checkpoint)
        if uri is not None:
            checkpoint = dataclasses.replace(checkpoint, external_pointer=uri)
        return self._memory.add_checkpoint_and_subsume_oldest(checkpoint)

    def get_all_checkpoints(self) -> Sequence[CompletedCheckpoint]:
        return self._memory.get_all_checkpoints()

    def max_checkpoint_id(self) -> int | None:
        """Highest id in memory or in the storage index: ids continue after both (seed 001).

        After a rollback to an older savepoint the index still holds the newer checkpoints
        of the previous run; a new id at or below them would collide with their folders.
        """
        ids = [self._memory.max_checkpoint_id()]
        persistent = self._adapter._persistent_store
        if persistent is not None:
            ids.append(persistent.max_checkpoint_id() or None)
        return max((i for i in ids if i is not None), default=None)

    def shutdown(self, job_status: JobStatus) -> None:
        self._adapter.shutdown(job_status, self._memory.get_latest_checkpoint())
        self._memory.shutdown(job_status)
