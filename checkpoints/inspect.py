"""Plain data for ``sluice checkpoints list <job>`` and ``sluice inspect <snapshot>`` (issue 4 "Inspection").

Functions return dicts and lists of JSON-able values, so the CLI can print them
as a table or as JSON and the Airflow view can serve them unchanged.
"""

from __future__ import annotations

from typing import Any

from checkpoints import layout
from checkpoints.backends import ObjectStore, open_store
from checkpoints.drained import SnapshotWatermarks, drained_reason
from checkpoints.index import read_index
from checkpoints.restore import key_group_problems, open_snapshot, split_snapshot_uri
from checkpoints.savepoints import list_savepoints
from checkpoints.status import read_status


def list_checkpoints(store: ObjectStore, job_id: str, savepoint_store: ObjectStore | None = None) -> dict[str, Any]:
    """The job's retained checkpoints (newest last), its status document and, when given, its savepoints."""
    view = read_index(store, job_id)
    index = view.index
    status = read_status(store, job_id)
    result: dict[str, Any] = {
        "job_id": job_id,
        "storage": store.key_uri(layout.job_dir(job_id).rstrip("/")),
        "index_version": index.version,
        "max_checkpoint_id": index.max_checkpoint_id,
        "checkpoints": [
            {
                "checkpoint_id": c.checkpoint_id,
                "completed_ms": c.completed_ms,
                "total_bytes": c.total_bytes,
                "uri": store.key_uri(c.metadata_key.rsplit("/", 1)[0]),
                "latest": i == len(index.checkpoints) - 1,
            }
            for i, c in enumerate(index.checkpoints)
        ],
        "status": None,
        "savepoints": [],
    }
    if status is not None:
        result["status"] = {
            "state": status.state,
            "heartbeat_ms": status.heartbeat_ms,
            "last_completed_checkpoint": status.last_completed_checkpoint,
            "watermark_ms": status.watermark_ms,
        }
    if savepoint_store is not None:
        result["savepoints"] = [
            {
                "checkpoint_id": s.checkpoint_id,
                "uri": s.uri,
                "completed_ms": s.metadata.complete_timestamp_ms if s.metadata else None,
                "total_bytes": s.metadata.total_bytes() if s.metadata else None,
                "validation": (s.metadata.validation or {}).get("status") if s.metadata else None,
                "problem": s.problem,
            }
            for s in list_savepoints(savepoint_store, job_id)
        ]
    return result


def inspect_snapshot(uri: str, *, verify_checksums: bool = False, **store_options: Any) -> dict[str, Any]:
    """Metadata summary, sizes, key-group coverage, per-operator state counts and watermarks of one snapshot.

    ``event_time`` holds the watermarks (ms) of the job, each operator subtask and each split;
    ``drained`` says why the snapshot is drained (:mod:`checkpoints.drained`), or is None.

    Problems (missing files, bad sizes, key-group gaps...) are listed under
    ``"problems"`` rather than raised, so a broken snapshot can be looked at."""
    parent, name = split_snapshot_uri(uri)
    store = open_store(parent, **store_options)
    snapshot, problems = open_snapshot(store, name, verify_checksums=verify_checksums)
    m = snapshot.metadata
    operators = []
    for op in m.operators:
        tables: dict[str, dict[str, int]] = {}
        for _, handle in op.files():
            entry = tables.setdefault(
                handle.table, {"files": 0, "rows": 0, "bytes": 0, "shared_files": 0, "delta_files": 0, "delta_rows": 0}
            )
            entry["files"] += 1
            if handle.is_delta():  # rows of a delta are changes, not state entries
                entry["delta_files"] += 1
                entry["delta_rows"] += handle.rows
            else:
                entry["rows"] += handle.rows
            entry["bytes"] += handle.bytes
            entry["shared_files"] += int(layout.is_shared_path(handle.path))
        ranges = sorted(s.key_group_range for s in op.subtasks if s.key_group_range is not None)
        operators.append({
            "uid": op.uid,
            "name": op.name,
            "parallelism": op.parallelism,
            "max_parallelism": op.max_parallelism,
            "config": op.config,
            "keyed": op.is_keyed(),
            "key_group_ranges": [list(r) for r in ranges],
            "key_groups_covered": sum(max(0, e - s + 1) for s, e in ranges),
            "key_group_problems": [p for p in key_group_problems(m) if f"operator {op.uid!r}" in p],
            "states": tables,
            "bytes": sum(t["bytes"] for t in tables.values()),
            "rows": sum(t["rows"] for t in tables.values()),
        })
    return {
        "uri": snapshot.uri,
        "format_version": m.format_version,
        "job_id": m.job_id,
        "job_name": m.job_name,
        "checkpoint_id": m.checkpoint_id,
        "type": m.properties.type,
        "properties": m.properties.to_dict(),
        "trigger_timestamp_ms": m.trigger_timestamp_ms,
        "complete_timestamp_ms": m.complete_timestamp_ms,
        "source_positions": m.source_positions,
        "watermarks": m.watermarks,
        "event_time": _event_time(SnapshotWatermarks.of(m)),
        "drained": drained_reason(m),
        "ledger": m.ledger.to_dict(),
        "validation": m.validation,
        "total_bytes": m.total_bytes(),
        "total_files": sum(1 for _ in m.files()),
        "operators": operators,
        "problems": problems,
        "checksums_verified": verify_checksums,
    }


def _event_time(marks: SnapshotWatermarks) -> dict[str, Any]:
    return {"job_ms": marks.job_ms,
            "operators": {uid: {str(sub): wm for sub, wm in subs.items()} for uid, subs in marks.operators.items()},
            "splits": dict(marks.splits)}
