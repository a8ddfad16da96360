"""What both runtimes write into a snapshot's ``_metadata``, and how either reads what the other wrote.

Validation (checkpoints.validation) and compatibility checks read how the state
was produced from ``_metadata`` only, never from the job's code: the window
operator's configuration (assigner, trigger, evictor, function, allowed
lateness), its live entry counts per state at snapshot time, the state kinds,
and each subtask's watermark.  The pieces of that document, and the functions that read either runtime's,
live here; the one ``MetadataBuilder`` both runtimes build it with is engine/runtime/checkpoint_storage.py,
and the one restore path that reads it back is engine/runtime/restore.py.

**The portable core.**  A snapshot taken on one runtime restores on the other (issue 15), so
both write, besides ``source_positions`` and the window operators' state files:

- ``watermarks.splits``: per split (``source_split_key``) ``{"watermarks": the split's
  watermark-generator state (a one-split SourceTimestampsAndWatermarks snapshot, or null before
  its first record), "finished", "idle", "watermark"}`` -- what a source needs to resume;
- ``watermarks.watermark``: the watermark the window operators had reached (every record after
  the snapshot is judged against it); ``watermarks.operators``: each window subtask's;
- ``"kind": "window"`` in each window operator's config;
- each two-phase-commit sink's pending transactions: the sink is an operator named as its plan node,
  each subtask's ``sink_state`` in its metadata (:func:`sink_subtask_metadata`; Spark's one
  driver-side writer is subtask 0 of 1), read through :func:`sink_states`, which merges the subtasks
  as the local SinkOperator merges them when rescaled.  Spark snapshots written before both runtimes
  wrote sinks alike list a sink as ``"kind": "sink"`` with ``two_phase_commit``; they are still read.

Both write each operator subtask's snapshot metadata (``config.subtask_metadata``).  Neither writes its own
watermark machinery (engine/runtime/checkpoint_storage.py): a restore rebuilds the local runtime's valve per task
and watermark stage per source subtask, and Spark's valve over all splits, from the core
(:func:`split_states`, :func:`restored_watermark`, :func:`valve_state_for_splits`,
:func:`stage_state_for_splits`): the one path every snapshot is read through.  Snapshots written before that
(local ones with ``v<vertex>.valve`` and ``v<vertex>.watermarks`` operators, Spark ones with
``watermarks.valve`` and ``watermarks.epoch``) still restore: what they have is kept, and local ones written
before the core existed (without ``watermarks.splits``) get it derived from their stages.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from checkpoints.validation.operator_config import window_operator_config
from engine.elements import MAX_WATERMARK, MIN_WATERMARK, WatermarkStatus
from engine.errors import CorruptSnapshotError
from engine.graph.transformations import WindowTransformation
from engine.operators.base import OPERATOR_SNAPSHOT_FORMAT_VERSION
from engine.operators.timestamps_watermarks import FORMAT_VERSION as STAGE_FORMAT_VERSION
from engine.state import codec
from engine.watermarks.valve import VALVE_FORMAT_VERSION

#: suffixes of the local runtime's per-task JSON states (engine/runtime/local/subtask_builder.py)
SOURCE_STAGE_SUFFIX = ".watermarks"
VALVE_SUFFIX = ".valve"


def stored_table_name(name: str) -> str:
    """The table name a state file is stored under: ``keyed/<state>`` -> ``keyed.<state>``, ``timers``."""
    return name.replace("/", ".")


def state_table_name(stored: str) -> str:
    """The state table a stored file holds, for files without a recorded name: ``keyed.<state>`` -> ``keyed/<state>``.

    The inverse of :func:`stored_table_name` for the tables a keyed operator writes (``keyed/<state>``,
    ``timers``) and a broadcast process operator's ``broadcast/<state>``; the local runtime also records each
    name (``__tables__``), Spark does not.
    """
    for prefix in ("keyed", "broadcast"):
        if stored.startswith(prefix + "."):
            return f"{prefix}/{stored[len(prefix) + 1:]}"
    return stored


def window_configs(nodes: Iterable[Any]) -> dict[str, dict[str, Any]]:
    """uid -> static config of every window operator among ``nodes`` (after build_plan assigned uids)."""
    return {n.operator_uid(): window_operator_config(n) for n in nodes if isinstance(n, WindowTransformation)}


def operator_config(static: dict[str, Any] | None, subtask_metadata: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """The static config plus what the subtasks' snapshots counted: rows and kinds per state."""
    config = dict(static or {})
    rows: dict[str, int] = {}
    kinds: dict[str, str] = {}
    for meta in subtask_metadata.values():
        for name, n in (meta.get("state_rows") or {}).items():
            rows[name] = rows.get(name, 0) + int(n)
        kinds.update(meta.get("state_kinds") or {})
    if rows or any("state_rows" in m for m in subtask_metadata.values()):
        config["state_rows"] = rows
    if kinds:
        config["state_kinds"] = kinds
    return config


def operator_watermarks(subtask_metadata: dict[int, dict[str, Any]]) -> dict[str, int]:
    """subtask (as str) -> the operator's current watermark at the snapshot."""
    return {str(sub): int(meta["current_watermark"]) for sub, meta in sorted(subtask_metadata.items())
            if "current_watermark" in meta}


def source_split_key(source_uid: str, split_id: str) -> str:
    """The name a source split goes by in a snapshot (``source_positions``, per-split watermarks): ``<uid>/<split>``.

    A split id is unique within its source only: two ``from_collection`` sources both have
    ``collection-0``, two folders can both hold ``part-0.jsonl``.  As in Flink, where a split is
    state of its source operator, the source's uid (storage-safe, so never containing ``/``) makes
    the name unique in the job; the runtimes also use it where splits of all sources meet.
    """
    return f"{source_uid}/{split_id}"


def saved_split_key(saved: Mapping[str, Any], source_uid: str, split_id: str) -> str | None:
    """The key ``saved`` (a snapshot's ``source_positions`` or per-split watermarks) holds a source's split
    under, or None when the snapshot never saw the split (it then starts from its beginning).

    Snapshots written before splits were named per source key them by the bare split id; those
    come from jobs whose split ids were unique across sources (Spark refused others), so there
    the bare id still names the split.
    """
    key = source_split_key(source_uid, split_id)
    if key in saved:
        return key
    return split_id if split_id in saved else None


# -- the portable core (see the module docstring) ---------------------------------------------------------------

def split_states_of_stage(positions: Mapping[str, Any], stage: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    """The core's ``watermarks.splits`` entries of one local source subtask.

    ``positions``: the subtask's split positions by ``source_split_key``; ``stage``: its
    SourceTimestampsAndWatermarks snapshot, which holds its unfinished splits only -- a split with a
    position but no entry there has been read to its end.
    """
    entries = {}
    for entry in (stage or {}).get("splits", []):
        entries[codec.decode(entry["split_id"])] = entry
    out: dict[str, dict[str, Any]] = {}
    for key in positions:
        entry = entries.get(key.split("/", 1)[-1])
        if entry is None:
            out[key] = {"watermarks": None, "finished": True, "idle": False, "watermark": MAX_WATERMARK}
            continue
        idle, watermark = bool(entry["idle"]), int(entry["watermark"])
        out[key] = {"watermarks": {"format_version": STAGE_FORMAT_VERSION, "combined_watermark": watermark,
                                   "status": (WatermarkStatus.IDLE if idle else WatermarkStatus.ACTIVE).value,
                                   "ended": False, "num_dead_letters": 0, "splits": [dict(entry)]},
                    "finished": False, "idle": idle, "watermark": watermark}
    return out


def local_states(meta: Any, suffix: str) -> list[tuple[str, int, dict[str, Any]]]:
    """``(uid, subtask, state)`` of every local per-task JSON state whose uid ends with ``suffix``."""
    out = []
    for op in meta.operators:
        if op.uid.endswith(suffix):
            for sub, m in sorted((op.config.get("subtask_metadata") or {}).items()):
                if isinstance(m, Mapping) and isinstance(m.get("task_state"), Mapping):
                    out.append((op.uid, int(sub), dict(m["task_state"])))
    return out


def split_states(meta: Any) -> dict[str, dict[str, Any]]:
    """``watermarks.splits`` of a snapshot from either runtime (``meta``: a checkpoints.CheckpointMetadata).

    Local snapshots written before the portable core have only their per-subtask stages; a stage names a
    split by its id alone.  Where sources share a split id, the stage's vertex (``v<id>``, the prefix of the
    source's planned uid) tells them apart; a split that stays ambiguous is left out (a restore that needs
    it says so; the local runtime reads the stages themselves).
    """
    saved = meta.watermarks.get("splits")
    if isinstance(saved, Mapping):
        return {str(k): dict(v) for k, v in saved.items()}
    positions = meta.source_positions
    by_split: dict[str, list[str]] = {}
    for key in positions:
        by_split.setdefault(key.split("/", 1)[-1], []).append(key)
    out: dict[str, dict[str, Any]] = {}
    ambiguous: set[str] = set()
    for uid, _, stage in local_states(meta, SOURCE_STAGE_SUFFIX):
        for entry in stage.get("splits", []):
            split_id = str(codec.decode(entry["split_id"]))
            keys = by_split.get(split_id, [])
            if len(keys) > 1:
                vertex = uid[: -len(SOURCE_STAGE_SUFFIX)] + "."
                keys = [k for k in keys if k.startswith(vertex)]
            if len(keys) == 1:
                out.update(split_states_of_stage({keys[0]: None}, {"splits": [entry]}))
            else:
                ambiguous.update(by_split.get(split_id, []))
    for key in positions:
        if key not in ambiguous:  # a position without a stage entry: read to its end
            out.setdefault(key, {"watermarks": None, "finished": True, "idle": False, "watermark": MAX_WATERMARK})
    return out


def restored_watermark(meta: Any) -> int:
    """The watermark the snapshot's window operators had reached, from either runtime's ``_metadata``."""
    saved = meta.watermarks.get("watermark")
    if saved is not None:
        return int(saved)
    operators = [int(w) for marks in (meta.watermarks.get("operators") or {}).values() for w in marks.values()]
    if operators:
        return min(operators)
    valves = [int(st["last_output_watermark"]) for _, _, st in local_states(meta, VALVE_SUFFIX)]
    return min(valves, default=MIN_WATERMARK)


def snapshot_watermark(operator_marks: Mapping[str, Mapping[str, int]],
                       valve_states: Iterable[Mapping[str, Any]]) -> int:
    """``watermarks.watermark`` for the local runtime's ``_metadata``: the lowest window subtask's watermark (the
    one records after the snapshot are judged against), else the lowest valve output, else MIN_WATERMARK."""
    operators = [int(w) for marks in operator_marks.values() for w in marks.values()]
    if operators:
        return min(operators)
    return min((int(st["last_output_watermark"]) for st in valve_states), default=MIN_WATERMARK)


def valve_state_for_splits(splits: Sequence[Mapping[str, Any] | None], watermark: int) -> dict[str, Any]:
    """A StatusWatermarkValve snapshot with one channel per split, in ``splits``' order (None: a split the snapshot
    never saw, which starts from nothing), whose output stands at ``watermark``: Spark's valve over all splits,
    rebuilt from the portable core.  A finished split's channel is at MAX_WATERMARK, as it was when it ended."""
    channels = []
    for s in splits:
        if s is None:
            channels.append({"watermark": MIN_WATERMARK, "status": WatermarkStatus.ACTIVE.value,
                             "is_watermark_aligned": True})
        elif s.get("finished"):
            channels.append({"watermark": MAX_WATERMARK, "status": WatermarkStatus.ACTIVE.value,
                             "is_watermark_aligned": True})
        else:
            idle = bool(s.get("idle"))
            channels.append({"watermark": int(s["watermark"]),
                             "status": (WatermarkStatus.IDLE if idle else WatermarkStatus.ACTIVE).value,
                             "is_watermark_aligned": not idle})
    all_idle = bool(channels) and all(c["status"] == WatermarkStatus.IDLE.value for c in channels)
    return {"format_version": VALVE_FORMAT_VERSION, "channels": channels, "last_output_watermark": int(watermark),
            "last_output_status": (WatermarkStatus.IDLE if all_idle else WatermarkStatus.ACTIVE).value}


def stage_state_for_splits(splits: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """One local source subtask's SourceTimestampsAndWatermarks snapshot holding ``splits``' unfinished ones (their
    generators, watermarks and idleness), rebuilt from the portable core."""
    entries = [entry for s in splits if not s.get("finished") and s.get("watermarks")
               for entry in s["watermarks"].get("splits", [])]
    active = [int(e["watermark"]) for e in entries if not e["idle"]]
    idle = bool(entries) and not active
    return {"format_version": STAGE_FORMAT_VERSION,
            "combined_watermark": min(active or [int(e["watermark"]) for e in entries] or [MIN_WATERMARK]),
            "status": (WatermarkStatus.IDLE if idle else WatermarkStatus.ACTIVE).value, "ended": False,
            "num_dead_letters": 0, "splits": entries}


def sink_subtask_metadata(uid: str, checkpoint_id: int, max_parallelism: int,
                          state: Mapping[str, Any]) -> dict[str, Any]:
    """The snapshot metadata the local SinkOperator writes (engine/operators/simple.py) for the subtask of a sink of
    parallelism 1 (every key group), as Spark's one driver-side writer is: the base operator metadata and the
    two-phase-commit ``sink_state``."""
    return {"format_version": OPERATOR_SNAPSHOT_FORMAT_VERSION, "operator_id": uid, "operator_class": "SinkOperator",
            "checkpoint_id": checkpoint_id, "max_parallelism": max_parallelism,
            "key_group_range": [0, max_parallelism - 1], "sink_state": dict(state)}


def match_sink_states(saved: Mapping[str, Any], sinks: Sequence[tuple[str, Any]], snapshot: str) -> list[tuple[Any, Any]]:
    """``(sink, state)`` for each of a job's transactional sinks (``(operator uid, sink)`` in plan order) that the
    snapshot's ``saved`` states (:func:`sink_states`) hold pending transactions for: by operator uid, and the states
    no uid claims by plan order -- a sink without ``.uid(...)`` is named by its plan position and class, and an older
    Spark snapshot named its writers by task id.  Pending transactions nobody would commit are refused, never dropped."""
    uids = {uid for uid, _ in sinks}
    matched = [(sink, saved[uid]) for uid, sink in sinks if uid in saved]
    unclaimed = [(uid, state) for uid, state in saved.items() if uid not in uids]
    rest = [sink for uid, sink in sinks if uid not in saved]
    if unclaimed and len(unclaimed) != len(rest):
        raise CorruptSnapshotError(
            f"snapshot {snapshot} holds pending sink transactions of {[u for u, _ in unclaimed]}, which the job's "
            f"sinks {sorted(uids)} do not match one for one; restore the same program (give each sink .uid(...)) so "
            "each is committed")
    return matched + list(zip(rest, [state for _, state in unclaimed])) if unclaimed else matched


def sink_states(meta: Any) -> dict[str, dict[str, Any]]:
    """uid -> two-phase-commit state (``{"format_version", "pending"}``) of each transactional sink in a snapshot of
    either runtime, in the snapshot's order: the sink subtasks' ``sink_state``, whose pending transactions are merged
    in subtask order, as the local SinkOperator merges them when a restore changes the sink's parallelism (or, in an
    older Spark snapshot, its driver-side writer's ``"kind": "sink"`` operator)."""
    out: dict[str, dict[str, Any]] = {}
    for op in meta.operators:
        if op.config.get("kind") == "sink":
            if op.config.get("two_phase_commit") is not None:
                out[op.uid] = op.config["two_phase_commit"]
            continue
        metas = op.config.get("subtask_metadata") or {}
        states = [m["sink_state"] for _, m in sorted(metas.items(), key=lambda kv: int(kv[0]))
                  if isinstance(m, Mapping) and isinstance(m.get("sink_state"), Mapping)]
        if states:
            out[op.uid] = {"format_version": states[0].get("format_version"),
                           "pending": [p for st in states for p in (st.get("pending") or [])]}
    return out
