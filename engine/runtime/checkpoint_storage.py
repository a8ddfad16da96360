"""The one ``_metadata`` builder both runtimes use, fed by one acknowledgement type (issue 15).

A task acknowledges a persisted checkpoint with one :class:`OperatorStateAck` per operator it runs
(Flink's OperatorSubtaskState handle): the operator's uid, the subtask, the key groups it covers,
the state files it wrote and its snapshot metadata.  The local runtime's writer threads produce
them (engine/runtime/checkpoint_storage_adapter.py), the Spark tasks return them as rows
(engine/runtime/spark/state_files.py).  :class:`MetadataBuilder` turns a completed checkpoint's acks
plus the portable core the driver recorded (``watermarks.splits``, engine/runtime/snapshot_metadata.py)
into the ``checkpoints.CheckpointMetadata`` both runtimes finalize, so for the same job and the same
snapshot point they write the same document (tests/runtime/spark/test_metadata_golden.py compares
both with tests/runtime/spark/metadata_golden.json):

- operators in plan order (then the runtime's own states, sorted by uid), each named as its plan
  node (``Window(sum)``); an operator whose subtasks wrote no file and hold nothing beyond the base
  snapshot metadata (a collect, a map) is left out: there is nothing to restore;
- per operator ``config``: window operators' static config and ``"kind": "window"``
  (checkpoints.validation reads them), ``state_rows``/``state_kinds`` summed over subtasks, and
  ``subtask_metadata`` (each subtask's snapshot metadata, ``__tables__`` naming its state files'
  tables), which is what a restore on either runtime hands back to the operator;
- ``watermarks``: ``watermark`` (the lowest window subtask's, else the given one), ``splits``,
  ``operators`` (each window subtask's watermark).

Neither runtime writes its own watermark machinery: the local runtime's valve per task and watermark stage
per source subtask, Spark's one valve over all splits, follow from the portable core (each split's watermark
state, the window operators' watermarks), and a restore on either runtime rebuilds them from it
(engine/runtime/snapshot_metadata.py); Flink persists no valve either.  The one part only one runtime
writes is a local unaligned checkpoint's in-flight data (``v<vertex>.channel-state``), which Spark, whose
checkpoints are aligned by construction, refuses to restore.  Snapshots written before (with ``.valve`` and
``.watermarks`` operators, or Spark's ``watermarks.valve`` and ``watermarks.epoch``) are still read.

Two-phase-commit sinks are alike too: a sink subtask acknowledges as its plan node's operator with
``sink_state`` (``snapshot_metadata.sink_subtask_metadata``) in its metadata; Spark's one driver-side
writer acknowledges as subtask 0 of 1, so a sink of parallelism 1 is written identically (the golden
test's second job, tests/runtime/spark/metadata_golden_sink.json, normalising only the pending
transactions' random ids and the writer's own part files).  A local sink of parallelism p lists p subtasks,
Spark's always one; ``snapshot_metadata.sink_states`` merges them and ``match_sink_states`` hands them
to the job's sinks by uid, else by plan order, so either restores the other's.

A window subtask that holds no key (e.g. the golden job with the window at parallelism 4: key groups 0-1 and
4-5 get no key) is alike too: the local subtask snapshots its empty operator, and Spark's driver, whose task
had no state rows for it, snapshots the same operator for the same key groups at the job's watermark
(engine/runtime/spark/state_files.py ``keyless_subtask_ack``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import pyarrow as pa

from checkpoints import CheckpointMetadata, OperatorState, OperatorSubtaskState, SnapshotProperties, StateFileHandle
from engine.checkpointing.channel_state import InputChannelState
from engine.checkpointing.completed_checkpoint import CompletedCheckpoint
from engine.elements import StreamRecord, Watermark, WatermarkStatus, WatermarkStatusElement
from engine.errors import CorruptSnapshotError
from engine.graph.transformations import safe_name
from engine.runtime.snapshot_metadata import (
    SOURCE_STAGE_SUFFIX,
    VALVE_SUFFIX,
    operator_config,
    operator_watermarks,
    snapshot_watermark,
    stored_table_name,
    window_configs,
)
from engine.state import codec

#: uid suffix of the local runtime's in-flight channel state of an unaligned checkpoint, and its table
CHANNEL_STATE_SUFFIX = ".channel-state"
CHANNEL_STATE_TABLE = "channel_state"

#: uid suffixes of the local runtime's per-task watermark states: acknowledged (the builder reads the valves when
#: no window subtask has a watermark) but not written, since a restore rebuilds them from the portable core
DERIVED_SUFFIXES = (VALVE_SUFFIX, SOURCE_STAGE_SUFFIX)

#: keys every operator snapshot's metadata has (engine/operators/base.py); an operator with nothing else and
#: no state file holds no state
_BASE_METADATA = frozenset({"format_version", "operator_id", "operator_class", "checkpoint_id", "max_parallelism",
                            "key_group_range", "__tables__"})


@dataclass(frozen=True, slots=True)
class OperatorStateAck:
    """One operator's persisted state of one subtask: what a task acknowledges a checkpoint with, on either runtime."""

    uid: str
    subtask: int
    #: the operator's snapshot metadata (``__tables__``: stored table name -> the operator's table name)
    metadata: Mapping[str, Any]
    files: tuple[StateFileHandle, ...]
    #: [start, end] for keyed operators, None otherwise
    key_group_range: tuple[int, int] | None

    def holds_state(self) -> bool:
        return bool(self.files) or any(k not in _BASE_METADATA for k in self.metadata)


def write_operator_snapshot(location: Any, uid: str, subtask: int, snapshot: Any) -> OperatorStateAck:
    """Write one operator subtask's materialized snapshot (engine/operators/base.py) to a checkpoint location, a
    file per state table, and acknowledge it: the local runtime's writers and Spark's driver (for a window subtask
    that holds no key, engine/runtime/spark/state_files.py) write operator snapshots alike."""
    names: dict[str, str] = {}
    files = []
    for name, table in sorted(snapshot.tables.items()):
        stored = safe_name(stored_table_name(name))
        names[stored] = name
        files.append(location.write_state_file(safe_name(uid), subtask, stored, table))
    metadata = {**snapshot.metadata, "__tables__": names}
    keyed = any(name.startswith("keyed/") or name == "timers" for name in snapshot.tables)
    krange = tuple(snapshot.metadata["key_group_range"]) if keyed else None
    return OperatorStateAck(uid, subtask, metadata, tuple(files), krange)  # type: ignore[arg-type]


class MetadataBuilder:
    """Builds the ``_metadata`` of one job's completed checkpoints and savepoints; see the module docstring.

    ``nodes``: the plan's transformations in plan order (after build_plan assigned their uids).
    """

    def __init__(self, job_id: str, job_name: str, max_parallelism: int, nodes: Iterable[Any]) -> None:
        self.job_id = job_id
        self.job_name = job_name
        self.max_parallelism = max_parallelism
        nodes = list(nodes)
        #: uid -> static window-operator config (checkpoints.validation reads it)
        self.window_configs = window_configs(nodes)
        #: stored uid -> the plan node's name, in plan order
        self.names = {safe_name(n.operator_uid()): n.name for n in nodes}

    def build(self, checkpoint: CompletedCheckpoint, acks: Iterable[OperatorStateAck],
              splits: Mapping[str, Mapping[str, Any]], watermark: int | None = None) -> CheckpointMetadata:
        """The ``_metadata`` of ``checkpoint``.

        ``splits``: the portable core's per-split states (``watermarks.splits``); ``watermark``: the job's
        watermark, given by a runtime that keeps one (Spark: its valve's output, which every window operator
        runs at); else the lowest window subtask's (records after the snapshot are judged against it), else the
        lowest operator's, else the lowest valve output.
        """
        by_uid: dict[str, list[OperatorStateAck]] = {}
        for ack in acks:
            by_uid.setdefault(safe_name(ack.uid), []).append(ack)
        order = {uid: i for i, uid in enumerate(self.names)}
        operators = []
        operator_marks: dict[str, dict[str, int]] = {}
        for uid in sorted(by_uid, key=lambda u: (u not in order, order.get(u, 0), u)):
            subtask_acks = sorted(by_uid[uid], key=lambda a: a.subtask)
            if uid.endswith(DERIVED_SUFFIXES) or not any(a.holds_state() for a in subtask_acks):
                continue
            metas = {a.subtask: dict(a.metadata) for a in subtask_acks}
            window = uid in self.window_configs
            config = {**({"kind": "window"} if window else {}), **operator_config(self.window_configs.get(uid), metas),
                      "subtask_metadata": {str(s): m for s, m in metas.items()}}
            if marks := operator_watermarks(metas):
                operator_marks[uid] = marks
            operators.append(OperatorState(
                uid=uid, name=self.names.get(uid, uid), parallelism=len(subtask_acks),
                max_parallelism=self.max_parallelism, config=config,
                subtasks=tuple(OperatorSubtaskState(a.subtask, a.key_group_range, a.files) for a in subtask_acks)))
        if watermark is None:  # the lowest window subtask's, else any operator's, else the lowest valve output
            windows = {u: m for u, m in operator_marks.items() if u in self.window_configs}
            valves = [m["task_state"] for uid, subtask_acks in by_uid.items() if uid.endswith(VALVE_SUFFIX)
                      for a in subtask_acks for m in [a.metadata] if "task_state" in m]
            watermark = snapshot_watermark(windows or operator_marks, valves)
        watermarks: dict[str, Any] = {"watermark": watermark, "splits": {k: dict(v) for k, v in sorted(splits.items())},
                                      "operators": operator_marks}
        properties = SnapshotProperties.savepoint() if checkpoint.is_savepoint() else SnapshotProperties.checkpoint(
            retain_on_cancellation=not checkpoint.properties.discard_cancelled)
        return CheckpointMetadata(
            job_id=self.job_id, checkpoint_id=checkpoint.checkpoint_id, job_name=self.job_name, properties=properties,
            trigger_timestamp_ms=checkpoint.timestamp_ms, complete_timestamp_ms=checkpoint.completion_timestamp_ms,
            source_positions=dict(checkpoint.source_positions), operators=tuple(operators), watermarks=watermarks)


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
