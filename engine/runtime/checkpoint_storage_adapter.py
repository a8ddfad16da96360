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
  finalized and the retained-handles index updated by :class:`checkpoints.CompletedCheckpointStore`.
  Savepoints always go to their own self-contained folder under the requested directory.
- :meth:`restore_point` / :func:`load_restore_point` turn a completed checkpoint, or a
  savepoint / retained checkpoint folder (validated by :func:`checkpoints.load_snapshot`),
  into a :class:`RestorePoint`: per operator uid the materialized snapshots of every former
  subtask, the source positions Sk and the in-flight channel state.

Everything persisted is Arrow/Parquet or JSON (STYLE section 9).  Task ids are
``v<vertex>.<subtask>``; the subtask index is read back from them.

Partial: state of a declined or expired checkpoint written to storage is left for
``checkpoints.orphans`` to collect (the protocol only discards task state in memory).
"""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import pyarrow as pa

from checkpoints import (
    CheckpointMetadata,
    CheckpointStorage,
    OperatorState as StoredOperator,
    RetainedCheckpointStore as PersistentStore,
    SnapshotProperties as StoredProperties,
    SubtaskState,
    load_snapshot,
    open_store,
)
from engine.checkpointing.channel_state import InputChannelState
from engine.checkpointing.completed_checkpoint import CompletedCheckpoint
from engine.checkpointing.completed_checkpoint_store import CompletedCheckpointStore, StandaloneCompletedCheckpointStore
from engine.checkpointing.discarder import CheckpointDiscarder
from engine.checkpointing.job_status import JobStatus
from engine.checkpointing.properties import CheckpointProperties
from engine.checkpointing.task_state import TaskSnapshot, TaskStateSnapshot
from engine.elements import StreamRecord, Watermark, WatermarkStatus, WatermarkStatusElement
from engine.errors import CorruptSnapshotError
from engine.graph.transformations import SinkTransformation, safe_name
from engine.operators.base import OPERATOR_SNAPSHOT_FORMAT_VERSION, MaterializedOperatorSnapshot, OperatorSnapshot
from engine.runtime.operator_metrics import operator_state_sizes
from engine.runtime.snapshot_metadata import (
    SOURCE_STAGE_SUFFIX,
    VALVE_SUFFIX,
    operator_config,
    operator_watermarks,
    restored_watermark,
    snapshot_watermark,
    split_states,
    split_states_of_stage,
    stage_state_for_splits,
    state_table_name,
    stored_table_name,
)
from engine.state import codec

CHANNEL_STATE_SUFFIX = ".channel-state"
CHANNEL_STATE_TABLE = "channel_state"


def task_id_of(vertex_key: str, subtask: int) -> str:
    return f"{vertex_key}.{subtask}"


def subtask_of(task_id: str) -> int:
    return int(task_id.rsplit(".", 1)[1])


@dataclass(frozen=True, slots=True)
class PersistedOperatorState:
    """The handle of one operator's state of one subtask in checkpoint storage."""

    uid: str
    subtask: int
    metadata: Mapping[str, Any]
    files: tuple[Any, ...]  # checkpoints.StateFileHandle
    #: [start, end] for keyed operators, None otherwise
    key_group_range: tuple[int, int] | None


@dataclass
class RestorePoint:
    """What a restarted job restores: seed 002 "Recovery" (operator state and source positions Sk)."""

    checkpoint_id: int
    source_positions: dict[str, Any]
    #: operator uid -> [(former subtask, snapshot)]
    operators: dict[str, list[tuple[int, MaterializedOperatorSnapshot]]] = field(default_factory=dict)
    #: task id -> in-flight input of an unaligned checkpoint
    channel_state: dict[str, InputChannelState] = field(default_factory=dict)
    is_savepoint: bool = False
    #: the portable core of a stored snapshot (engine/runtime/snapshot_metadata.py): per split key its watermark
    #: state, and the watermark the window operators had reached; empty / None for this run's in-memory checkpoints
    split_states: dict[str, dict[str, Any]] = field(default_factory=dict)
    watermark: int | None = None
    #: a Spark snapshot's sinks' two-phase-commit states (None: not transactional), in plan order
    spark_sink_states: list[dict[str, Any] | None] = field(default_factory=list)

    def snapshots_of(self, uid: str) -> list[tuple[int, MaterializedOperatorSnapshot]]:
        return sorted(self.operators.get(uid, []), key=lambda e: e[0])

    def for_plan(self, plan: Any) -> RestorePoint:
        """This restore point with the local runtime's per-task states it lacks rebuilt from the portable core.

        A snapshot the Spark runtime took has no ``v<vertex>.watermarks`` (one watermark stage per source
        subtask) and no ``v<vertex>.valve``: each source vertex gets one stage holding its source's unfinished
        splits (the runtime hands each subtask its own splits' entries), and each other vertex a valve whose
        output stands at the snapshot's watermark (with fresh channels, as after a rescale: it never regresses);
        each transactional sink gets the pending transactions Spark's driver-side writer held (matched in plan
        order, which is how Spark lists them), for subtask 0 to commit.  What the snapshot has is kept as it is;
        in-memory checkpoints of this run are returned unchanged.
        """
        if not self.split_states and self.watermark is None and not self.spark_sink_states:
            return self
        operators = dict(self.operators)
        # the job's transactional sinks in plan order, as the Spark runtime lists them (collect targets are no sinks)
        sinks = [n for v in plan.vertices for n in v.nodes if type(n) is SinkTransformation]
        if len(sinks) == len(self.spark_sink_states):
            for node, state in zip(sinks, self.spark_sink_states):
                uid = node.operator_uid()
                if state is not None and uid not in operators:
                    operators[uid] = [(0, MaterializedOperatorSnapshot(
                        {"format_version": OPERATOR_SNAPSHOT_FORMAT_VERSION, "operator_id": uid,
                         "operator_class": "SinkOperator", "checkpoint_id": self.checkpoint_id,
                         "max_parallelism": plan.max_parallelism, "key_group_range": [0, plan.max_parallelism - 1],
                         "sink_state": state}, {}))]
        elif self.spark_sink_states:
            raise CorruptSnapshotError(
                f"snapshot {self.checkpoint_id} holds the pending transactions of {len(self.spark_sink_states)} "
                f"sink(s) but the job has {len(sinks)}; the same program must be restored so each is committed")
        for v in plan.vertices:
            vkey = f"v{v.id}"
            if v.is_source():
                uid, name = v.head.operator_uid(), vkey + SOURCE_STAGE_SUFFIX
                mine = [st for key, st in sorted(self.split_states.items()) if key.split("/", 1)[0] == uid]
                if name not in operators and mine:
                    operators[name] = [(0, _json_state(name, stage_state_for_splits(mine), self.checkpoint_id,
                                                       plan.max_parallelism))]
            elif vkey + VALVE_SUFFIX not in operators and self.watermark is not None:
                name = vkey + VALVE_SUFFIX
                valve = {"format_version": 1, "channels": [], "last_output_watermark": int(self.watermark),
                         "last_output_status": "ACTIVE"}
                operators[name] = [(0, _json_state(name, valve, self.checkpoint_id, plan.max_parallelism))]
        return dataclasses.replace(self, operators=operators)


def _json_state(uid: str, state: dict[str, Any], checkpoint_id: int,
                max_parallelism: int) -> MaterializedOperatorSnapshot:
    """A per-task JSON state in the form the local runtime's JsonStateOperator snapshots it."""
    return MaterializedOperatorSnapshot(
        {"format_version": OPERATOR_SNAPSHOT_FORMAT_VERSION, "operator_id": uid, "operator_class": "JsonState",
         "checkpoint_id": checkpoint_id, "max_parallelism": max_parallelism,
         "key_group_range": [0, max_parallelism - 1], "task_state": state}, {})


# -- channel state as a table ----------------------------------------------------------------------

def encode_channel_state(state: InputChannelState) -> pa.Table:
    channels, seqs, kinds, payloads = [], [], [], []
    for channel, elements in state.elements.items():
        for seq, element in enumerate(elements):
            if isinstance(element, list):
                kind, payload = "records", codec.encode([[r.value, r.timestamp] for r in element])
            elif isinstance(element, StreamRecord):
                kind, payload = "records", codec.encode([[element.value, element.timestamp]])
            elif isinstance(element, Watermark):
                kind, payload = "watermark", str(element.timestamp)
            elif isinstance(element, WatermarkStatusElement):
                kind, payload = "status", element.status.value
            else:
                raise CorruptSnapshotError(f"cannot persist in-flight element {element!r} of channel {channel}")
            channels.append(int(channel))
            seqs.append(seq)
            kinds.append(kind)
            payloads.append(payload)
    return pa.table({"channel": pa.array(channels, pa.int64()), "seq": pa.array(seqs, pa.int64()),
                     "kind": pa.array(kinds, pa.string()), "payload": pa.array(payloads, pa.string())})


def decode_channel_state(checkpoint_id: int, table: pa.Table) -> InputChannelState:
    per_channel: dict[int, list[tuple[int, Any]]] = {}
    for row in table.to_pylist():
        kind, payload = row["kind"], row["payload"]
        if kind == "records":
            element: Any = [StreamRecord(v, ts) for v, ts in codec.decode(payload)]
        elif kind == "watermark":
            element = Watermark(int(payload))
        elif kind == "status":
            element = WatermarkStatusElement(WatermarkStatus(payload))
        else:
            raise CorruptSnapshotError(f"unknown in-flight element kind {kind!r} in channel state")
        per_channel.setdefault(int(row["channel"]), []).append((int(row["seq"]), element))
    return InputChannelState(checkpoint_id, {c: [e for _, e in sorted(items, key=lambda t: t[0])]
                                             for c, items in per_channel.items()})


def _channel_state_snapshot(task_id: str, checkpoint_id: int, state: InputChannelState,
                            max_parallelism: int) -> MaterializedOperatorSnapshot:
    return MaterializedOperatorSnapshot(
        {"format_version": OPERATOR_SNAPSHOT_FORMAT_VERSION, "operator_id": task_id.rsplit(".", 1)[0] + CHANNEL_STATE_SUFFIX,
         "operator_class": "InputChannelState", "checkpoint_id": checkpoint_id, "max_parallelism": max_parallelism,
         "key_group_range": [0, max_parallelism - 1]},
        {CHANNEL_STATE_TABLE: encode_channel_state(state)})


def _is_keyed(snapshot: MaterializedOperatorSnapshot) -> bool:
    return any(name.startswith("keyed/") or name == "timers" for name in snapshot.tables)


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
        #: uid -> static window-operator config for _metadata (set per attempt from the plan)
        self.operator_configs: dict[str, dict[str, Any]] = {}

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
        handles: dict[str, Any] = {uid: self._write(location, uid, subtask, m) for uid, m in materialized.items()}
        channel_handle = None
        if channel_state is not None and not channel_state.is_empty():
            uid = task_id.rsplit(".", 1)[0] + CHANNEL_STATE_SUFFIX
            channel_handle = self._write(location, uid, subtask,
                                         _channel_state_snapshot(task_id, cid, channel_state, self.max_parallelism))
        return TaskStateSnapshot(handles, dict(snapshot.source_positions), channel_handle)

    def _write(self, location: Any, uid: str, subtask: int, snap: MaterializedOperatorSnapshot) -> PersistedOperatorState:
        names: dict[str, str] = {}
        files = []
        for name, table in sorted(snap.tables.items()):
            stored = safe_name(stored_table_name(name))
            names[stored] = name
            files.append(location.write_state_file(safe_name(uid), subtask, stored, table))
        metadata = dict(snap.metadata)
        metadata["__tables__"] = names
        krange = tuple(snap.metadata["key_group_range"]) if _is_keyed(snap) else None
        return PersistedOperatorState(uid, subtask, metadata, tuple(files), krange)  # type: ignore[arg-type]

    # -- completion ----------------------------------------------------------------------------
    def finalize(self, completed: CompletedCheckpoint) -> str | None:
        """Write ``_metadata`` of a persisted checkpoint or savepoint; add checkpoints to the retained index."""
        cid = completed.checkpoint_id
        if not self.is_persistent(cid):
            return None
        subtasks: dict[str, list[Any]] = {}
        configs: dict[str, dict[str, Any]] = {}
        for task_id, state in completed.task_states.items():
            handles = list(state.operator_states.values())
            if state.input_channel_state is not None:
                handles.append(state.input_channel_state)
            for h in handles:
                uid = safe_name(h.uid)
                subtasks.setdefault(uid, []).append(SubtaskState(h.subtask, h.key_group_range, h.files))
                configs.setdefault(uid, {})[str(h.subtask)] = dict(h.metadata)
        by_subtask = {uid: {int(k): v for k, v in metas.items()} for uid, metas in configs.items()}
        operators = tuple(
            StoredOperator(uid=uid, name=uid, parallelism=len(subs), max_parallelism=self.max_parallelism,
                           config={**({"kind": "window"} if uid in self.operator_configs else {}),
                                   **operator_config(self.operator_configs.get(uid), by_subtask[uid]),
                                   "subtask_metadata": configs[uid]},
                           subtasks=tuple(sorted(subs, key=lambda s: s.subtask)))
            for uid, subs in sorted(subtasks.items()))
        operator_marks = {uid: wm for uid, metas in sorted(by_subtask.items()) if (wm := operator_watermarks(metas))}
        # the portable core both runtimes write (engine/runtime/snapshot_metadata.py): splits and the watermark
        splits: dict[str, dict[str, Any]] = {}
        for state in completed.task_states.values():
            if state.source_positions:
                stage = next((dict(h.metadata)["task_state"] for uid, h in state.operator_states.items()
                              if uid.endswith(SOURCE_STAGE_SUFFIX)), None)
                splits.update(split_states_of_stage(state.source_positions, stage))
        valves = [m["task_state"] for uid, metas in configs.items() if uid.endswith(VALVE_SUFFIX)
                  for m in metas.values() if "task_state" in m]
        watermarks = {"watermark": snapshot_watermark(
            {u: m for u, m in operator_marks.items() if u in self.operator_configs} or operator_marks, valves),
            "splits": dict(sorted(splits.items())), "operators": operator_marks}
        savepoint = completed.is_savepoint()
        properties = StoredProperties.savepoint() if savepoint else StoredProperties.checkpoint(
            retain_on_cancellation=not completed.properties.discard_cancelled)
        metadata = CheckpointMetadata(
            job_id=self.job_id, checkpoint_id=cid, job_name=self.job_name, properties=properties,
            trigger_timestamp_ms=completed.timestamp_ms, complete_timestamp_ms=completed.completion_timestamp_ms,
            source_positions=dict(completed.source_positions), operators=operators, watermarks=watermarks)
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


def load_restore_point(uri: str, **store_options: Any) -> RestorePoint:
    """Open a savepoint or retained checkpoint folder (full validation, checkpoints.load_snapshot) for restore."""
    snapshot = load_snapshot(uri, **store_options)
    meta = snapshot.metadata
    point = RestorePoint(meta.checkpoint_id, dict(meta.source_positions), is_savepoint=meta.is_savepoint(),
                         split_states=split_states(meta), watermark=restored_watermark(meta),
                         spark_sink_states=[op.config.get("two_phase_commit") for op in meta.operators
                                            if op.config.get("kind") == "sink"])
    for op in meta.operators:
        configs = op.config.get("subtask_metadata")
        for sub in op.subtasks:
            metadata = dict(configs[str(sub.subtask)]) if configs is not None else _subtask_metadata(meta, op, sub)
            names = metadata.pop("__tables__", {})
            tables = {names.get(h.table, state_table_name(h.table)): snapshot.read_file(h) for h in sub.files}
            materialized = MaterializedOperatorSnapshot.from_parts(
                MaterializedOperatorSnapshot(metadata, {}).metadata_json(), tables)
            if op.uid.endswith(CHANNEL_STATE_SUFFIX):
                task_id = task_id_of(op.uid[: -len(CHANNEL_STATE_SUFFIX)], sub.subtask)
                point.channel_state[task_id] = decode_channel_state(meta.checkpoint_id, tables[CHANNEL_STATE_TABLE])
            else:
                point.operators.setdefault(metadata["operator_id"], []).append((sub.subtask, materialized))
    return point


def _subtask_metadata(meta: Any, op: Any, sub: Any) -> dict[str, Any]:
    """An operator subtask's snapshot metadata where ``_metadata`` records none per subtask (a Spark snapshot):
    what the operator's config, the subtask's key groups and its watermark say."""
    if sub.key_group_range is None:
        raise CorruptSnapshotError(
            f"snapshot {meta.checkpoint_id} of job {meta.job_id!r}: operator {op.uid!r} subtask {sub.subtask} has "
            "state files but neither per-subtask metadata nor key groups; it cannot be restored")
    metadata: dict[str, Any] = {
        "format_version": OPERATOR_SNAPSHOT_FORMAT_VERSION, "operator_id": op.uid,
        "operator_class": op.config.get("operator_class", "WindowOperator"), "checkpoint_id": meta.checkpoint_id,
        "max_parallelism": op.max_parallelism, "key_group_range": list(sub.key_group_range)}
    watermark = (meta.watermarks.get("operators") or {}).get(op.uid, {}).get(str(sub.subtask))
    if watermark is not None:
        metadata["current_watermark"] = int(watermark)
    return metadata
