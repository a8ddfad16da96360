"""What both runtimes write about each operator into a snapshot's ``_metadata``.

Validation (checkpoints.validation) and compatibility checks read how the state
was produced from ``_metadata`` only, never from the job's code: the window
operator's configuration (assigner, trigger, evictor, function, allowed
lateness), its live entry counts per state at snapshot time, the state kinds,
and each subtask's watermark.  One module so the local and Spark runtimes write
the same document and name state files the same way.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from engine.api.graph import WindowTransformation


def stored_table_name(name: str) -> str:
    """The table name a state file is stored under: ``keyed/<state>`` -> ``keyed.<state>``, ``timers``."""
    return name.replace("/", ".")


def window_configs(nodes: Iterable[Any]) -> dict[str, dict[str, Any]]:
    """uid -> static config of every window operator among ``nodes`` (after build_plan assigned uids)."""
    from checkpoints.validation.operator_config import window_operator_config

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
