"""What the UI shows about one deployment, as plain data (also served as JSON under ``/api``).

Everything comes through :class:`SluiceHook`: health from the control API or the
status document, retained handles from the index, durations and sizes from each
retained checkpoint's ``_metadata``, savepoints with their recorded validation.
A part that fails (storage down, no savepoint root) becomes an ``errors`` entry
instead of failing the page.
"""

from __future__ import annotations

from typing import Any

from sluice.deployments import Deployment
from sluice.health import health_problems, is_live
from sluice.hook import SluiceHook, now_ms


def deployment_view(deployment: Deployment) -> dict[str, Any]:
    from checkpoints.index import read_index
    from checkpoints.metadata import CheckpointMetadata

    hook = SluiceHook(deployment.conn_id, timeout_s=3.0)
    now = now_ms()
    view: dict[str, Any] = {"name": deployment.name, "job_id": deployment.job_id, "job": deployment.job,
                            "runtime": deployment.runtime, "parallelism": deployment.parallelism,
                            "retained_expected": deployment.retained, "now_ms": now, "errors": [],
                            "status": None, "problems": [], "live": False, "checkpoints": [], "savepoints": []}
    try:
        status = hook.get_status(deployment.job_id)
        view["status"] = status.to_dict()
        view["live"] = is_live(status, now, deployment.health_thresholds()["max_heartbeat_age_s"])
        view["problems"] = health_problems(status, deployment.health_thresholds(), now)
    except Exception as exc:  # the page shows what failed instead of failing
        view["errors"].append(f"status: {type(exc).__name__}: {exc}")
    try:
        store = hook.store
        for handle in read_index(store, deployment.job_id).index.checkpoints:
            entry = {"checkpoint_id": handle.checkpoint_id, "completed_ms": handle.completed_ms,
                     "bytes": handle.total_bytes, "duration_ms": None,
                     "uri": store.key_uri(handle.metadata_key.rsplit("/", 1)[0])}
            try:
                metadata = CheckpointMetadata.from_json(store.get_bytes(handle.metadata_key))
                entry["duration_ms"] = metadata.complete_timestamp_ms - metadata.trigger_timestamp_ms
                entry["bytes"] = metadata.total_bytes()
            except Exception as exc:  # a corrupt handle is shown as such
                entry["problem"] = f"{type(exc).__name__}: {exc}"
            view["checkpoints"].append(entry)
    except Exception as exc:  # likewise
        view["errors"].append(f"checkpoints: {type(exc).__name__}: {exc}")
    try:
        for s in hook.list_savepoints(deployment.job_id):
            validation = (s.metadata.validation or {}) if s.metadata else {}
            view["savepoints"].append({
                "checkpoint_id": s.checkpoint_id, "uri": s.uri,
                "completed_ms": s.metadata.complete_timestamp_ms if s.metadata else None,
                "bytes": s.metadata.total_bytes() if s.metadata else None,
                "validation": validation.get("status"), "problem": s.problem,
                "data_docs": _data_docs_link(validation),
            })
    except Exception as exc:  # likewise
        view["errors"].append(f"savepoints: {type(exc).__name__}: {exc}")
    return view


def _data_docs_link(validation: dict[str, Any]) -> str | None:
    for key in ("data_docs_url", "data_docs", "docs_url", "data_docs_uri"):
        value = validation.get(key)
        if isinstance(value, str) and value:
            return value
        if isinstance(value, dict):
            for v in value.values():
                if isinstance(v, str) and v:
                    return v
    return None
