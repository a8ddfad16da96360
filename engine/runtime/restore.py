"""One restore path for both runtimes: a snapshot, or a completed checkpoint of this run, read into a
:class:`RestorePoint` (issue 15).

:func:`load_restore_point` opens a savepoint or retained checkpoint folder (validated by
``checkpoints.load_snapshot``; its checksums verified unless the caller already did) and reads its
``_metadata`` once for either runtime: the source positions Sk, the portable core
(engine/runtime/snapshot_metadata.py: per-split watermark states, the window operators' watermark,
the transactional sinks' pending commits), the snapshot's id (ids continue after it:
``CheckpointCoordinator.restore_checkpoint_id_counter``) and, with ``materialize``, every operator
subtask's snapshot and in-flight channel state.

- The local runtime materializes: per operator uid the snapshots of every former subtask, handed to the
  operators it builds (engine/runtime/local/subtask_builder.py); :meth:`RestorePoint.for_plan` rebuilds
  the per-task states a Spark snapshot lacks from the core.
- The Spark runtime does not (``materialize=False``): its tasks read their own key groups' state files
  (engine/runtime/spark/restore.py), and the driver restores its splits, valve and sinks from the same
  RestorePoint.

Per-subtask snapshot metadata comes from ``config.subtask_metadata`` (both runtimes write it,
engine/runtime/checkpoint_storage.py); Spark snapshots written before it get it rebuilt from the
operator's config, the subtask's key groups and its watermark.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from checkpoints import load_snapshot
from engine.checkpointing.channel_state import InputChannelState
from engine.errors import CorruptSnapshotError
from engine.graph.transformations import SinkTransformation
from engine.operators.base import OPERATOR_SNAPSHOT_FORMAT_VERSION, MaterializedOperatorSnapshot
from engine.runtime.checkpoint_storage import CHANNEL_STATE_SUFFIX, CHANNEL_STATE_TABLE, decode_channel_state
from engine.runtime.snapshot_metadata import (
    SOURCE_STAGE_SUFFIX,
    VALVE_SUFFIX,
    restored_watermark,
    match_sink_states,
    sink_states,
    sink_subtask_metadata,
    split_states,
    stage_state_for_splits,
    state_table_name,
)


def task_id_of(vertex_key: str, subtask: int) -> str:
    """A local task's id, ``v<vertex>.<subtask>``: what its channel state is stored under."""
    return f"{vertex_key}.{subtask}"


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
    #: a stored snapshot's sinks' two-phase-commit states by operator uid (snapshot_metadata.sink_states)
    sink_states: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: where a stored snapshot was read from, and its ``_metadata`` (checkpoints.CheckpointMetadata); None for
    #: this run's in-memory checkpoints
    snapshot_uri: str | None = None
    metadata: Any = None

    def snapshots_of(self, uid: str) -> list[tuple[int, MaterializedOperatorSnapshot]]:
        return sorted(self.operators.get(uid, []), key=lambda e: e[0])

    def for_plan(self, plan: Any) -> RestorePoint:
        """This restore point with the local runtime's per-task states it lacks rebuilt from the portable core.

        A snapshot the Spark runtime took has no ``v<vertex>.watermarks`` (one watermark stage per source
        subtask) and no ``v<vertex>.valve``: each source vertex gets one stage holding its source's unfinished
        splits (the runtime hands each subtask its own splits' entries), and each other vertex a valve whose
        output stands at the snapshot's watermark (with fresh channels, as after a rescale: it never regresses);
        a transactional sink whose pending transactions the snapshot holds under another uid (an older Spark
        snapshot's ``"kind": "sink"``, a sink renamed without ``.uid(...)``) gets them by plan order
        (``match_sink_states``), for subtask 0 to commit.  What the snapshot has is kept as it is; in-memory
        checkpoints of this run are returned unchanged.
        """
        if not self.split_states and self.watermark is None and not self.sink_states:
            return self
        operators = dict(self.operators)
        # the job's transactional sinks in plan order (collect targets are no sinks)
        sinks = [(n.operator_uid(), n) for v in plan.vertices for n in v.nodes
                 if type(n) is SinkTransformation and hasattr(n.sink, "create_writer")]
        for node, state in match_sink_states(self.sink_states, sinks, self.snapshot_uri or str(self.checkpoint_id)):
            uid = node.operator_uid()
            if uid not in operators:
                operators[uid] = [(0, MaterializedOperatorSnapshot(
                    sink_subtask_metadata(uid, self.checkpoint_id, plan.max_parallelism, state), {}))]
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


def load_restore_point(uri: str, *, snapshot: Any = None, materialize: bool = True,
                       **store_options: Any) -> RestorePoint:
    """Open a savepoint or retained checkpoint folder for restore (see the module docstring).

    ``snapshot``: the folder already opened and verified (``checkpoints.load_snapshot``), else it is opened here
    with full validation and every checksum verified; ``materialize``: also read every operator subtask's state
    files into the point (False: the caller's tasks read their own); ``store_options`` go to ``open_store``.
    """
    if snapshot is None:
        snapshot = load_snapshot(uri, **store_options)
    meta = snapshot.metadata
    point = RestorePoint(meta.checkpoint_id, dict(meta.source_positions), is_savepoint=meta.is_savepoint(),
                         split_states=split_states(meta), watermark=restored_watermark(meta),
                         sink_states=sink_states(meta),
                         snapshot_uri=snapshot.uri, metadata=meta)
    if not materialize:
        return point
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
