"""What the UI shows about one deployment, as plain data (also served as JSON under ``/api``), and
the Data Docs files the page serves.

Everything comes through :class:`SluiceHook`: health from the control API or the
status document, retained handles from the index, durations and sizes from each
retained checkpoint's ``_metadata``, savepoints with their recorded validation.
A part that fails (storage down, no savepoint root) becomes an ``errors`` entry
instead of failing the page.

Parallelism is shown twice because the two can differ: ``running_parallelism`` is the
running job's (the control API's ``status``, else the status document's
``extra.parallelism``), ``configured_parallelism`` the deployment's, which applies at
the next deploy or restore (``None`` when the deployment leaves it to the job).

Data Docs: the validation runner writes one Great Expectations site into the
connection's ``data_docs_dir`` and records its index (``file://<dir>/index.html``) in
the savepoint's ``_metadata`` ``validation.data_docs_url``
(:mod:`checkpoints.validation.records`).  A ``file://`` link is useless in a
browser, so the page serves the site itself: :func:`data_docs_path` turns the
recorded URL into a path under that root, and :func:`data_docs_file` reads one
file of it, confined to the root.
"""

from __future__ import annotations

import mimetypes
import posixpath
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import unquote, urlparse

from checkpoints.errors import ObjectNotFound
from checkpoints.index import read_index
from checkpoints.metadata import CheckpointMetadata
from sluice.deployments import Deployment
from sluice.health import health_problems, is_live
from sluice.hook import SupervisedJobStatus, SluiceHook, now_ms

#: the file a Data Docs site opens with (GX's DefaultSiteIndexBuilder)
DATA_DOCS_INDEX = "index.html"


def deployment_view(deployment: Deployment) -> dict[str, Any]:
    hook = SluiceHook(deployment.conn_id, timeout_s=3.0)
    now = now_ms()
    view: dict[str, Any] = {"name": deployment.name, "job_id": deployment.job_id, "job": deployment.job,
                            "runtime": deployment.runtime, "running_parallelism": None,
                            "configured_parallelism": deployment.parallelism,
                            "retained_expected": deployment.retained, "now_ms": now, "errors": [],
                            "status": None, "problems": [], "live": False, "checkpoints": [], "savepoints": []}
    try:
        status = hook.get_status(deployment.job_id)
        view["status"] = status.to_dict()
        view["running_parallelism"] = running_parallelism(status)
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
        docs_root = _data_docs_root(hook)
        for s in hook.list_savepoints(deployment.job_id):
            validation = (s.metadata.validation or {}) if s.metadata else {}
            recorded = _recorded_data_docs(validation)
            view["savepoints"].append({
                "checkpoint_id": s.checkpoint_id, "uri": s.uri,
                "completed_ms": s.metadata.complete_timestamp_ms if s.metadata else None,
                "bytes": s.metadata.total_bytes() if s.metadata else None,
                "validation": validation.get("status"), "problem": s.problem,
                # where the runner wrote them, and the path the page serves them under (None: not servable)
                "data_docs_recorded": recorded, "data_docs_path": data_docs_path(recorded, docs_root),
            })
    except Exception as exc:  # likewise
        view["errors"].append(f"savepoints: {type(exc).__name__}: {exc}")
    return view


def job_view_html(deployment: Deployment) -> tuple[str | None, str | None]:
    """``(page, None)``: the job view its master serves (``GET /jobs/{job_id}/view``, engine/master/view.py),
    fetched here, server-side, through the hook's control client (its token and control-host allow list);
    ``(None, why)`` when no master answers or it refuses."""
    hook = SluiceHook(deployment.conn_id, timeout_s=5.0)
    try:
        with hook.client(deployment.job_id) as client:
            return client.view(), None
    except Exception as exc:  # a stopped job has no master: the page says so
        return None, f"{type(exc).__name__}: {exc}"


def running_parallelism(status: SupervisedJobStatus) -> int | None:
    """The running job's parallelism: the control API's ``status`` answer, else the status document's
    ``extra.parallelism`` (:meth:`SluiceHook.get_status` keeps both in ``details``); None if neither says."""
    details = status.details or {}
    for value in (details.get("parallelism"), (details.get("extra") or {}).get("parallelism")):
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


# ---- Data Docs ---------------------------------------------------------------------------------------


def _data_docs_root(hook: SluiceHook) -> str | None:
    root = hook.extra.get("data_docs_dir")
    return str(root) if root else None


def _is_s3(uri: str) -> bool:
    return uri.startswith(("s3://", "s3a://"))


def _local_root(root: str) -> Path:
    """A local ``data_docs_dir`` (a plain path, as the runner takes it, or a ``file://`` URI) as an absolute path."""
    parsed = urlparse(root)
    return Path(unquote(parsed.path) if parsed.scheme == "file" else root).absolute()


def _recorded_data_docs(validation: dict[str, Any]) -> str | None:
    """The Data Docs location a validation outcome recorded (``data_docs_url``; older spellings tolerated)."""
    for key in ("data_docs_url", "data_docs", "docs_url", "data_docs_uri"):
        value = validation.get(key)
        if isinstance(value, str) and value:
            return value
        if isinstance(value, dict):
            for v in value.values():
                if isinstance(v, str) and v:
                    return v
    return None


def data_docs_path(recorded: str | None, root: str | None) -> str | None:
    """The path of a recorded Data Docs location under the connection's ``data_docs_dir``, e.g. ``index.html``.

    None when there is nothing to serve: no recorded location, no ``data_docs_dir``, or a
    location outside it (written under another root, e.g. before the connection changed)."""
    if not recorded or not root:
        return None
    if _is_s3(root):
        prefix = root.rstrip("/") + "/"
        relative = recorded[len(prefix):] if recorded.startswith(prefix) else None
    else:
        parsed = urlparse(recorded)
        if parsed.scheme not in ("file", ""):
            return None
        location = PurePosixPath(posixpath.normpath(unquote(parsed.path)))
        try:
            relative = str(location.relative_to(posixpath.normpath(str(_local_root(root)))))
        except ValueError:
            return None
    return relative if relative and _safe_parts(relative) else None


def _safe_parts(path: str) -> list[str] | None:
    """The segments of a relative path, or None if one could leave the root (``..``, ``.``, empty
    segments, an absolute path, backslashes, NUL)."""
    if not path or path.startswith("/") or "\\" in path or "\x00" in path:
        return None
    parts = path.split("/")
    if any(p in ("", ".", "..") for p in parts):
        return None
    return parts


def data_docs_file(deployment: Deployment, path: str) -> tuple[bytes, str]:
    """``(content, media type)`` of one file of the deployment's Data Docs site (``""`` is its index).

    Confined to the connection's ``data_docs_dir``: ``..``, ``.``, empty segments and absolute
    paths are refused, and a local path is resolved (symlinks followed) and must stay inside the
    resolved root.  An ``s3://`` root is read through the hook's store, whose keys cannot leave
    the prefix once those segments are refused.  Anything refused or missing raises
    :class:`ObjectNotFound` (the page answers 404 and does not say which)."""
    hook = SluiceHook(deployment.conn_id, timeout_s=3.0)
    root = _data_docs_root(hook)
    if root is None:
        raise ObjectNotFound(f"deployment {deployment.name!r}: connection {deployment.conn_id!r} has no extra "
                             "'data_docs_dir', so there are no Data Docs to serve")
    path = path or DATA_DOCS_INDEX
    parts = _safe_parts(path)
    if parts is None:
        raise ObjectNotFound(f"Data Docs path {path!r} refused: it must be relative, without '.', '..' or "
                             "empty segments")
    media_type = mimetypes.guess_type(parts[-1])[0] or "application/octet-stream"
    if _is_s3(root):
        return hook.open_store(root).get_bytes("/".join(parts)), media_type
    base = _local_root(root).resolve()
    try:
        target = base.joinpath(*parts).resolve(strict=True)
    except (OSError, RuntimeError) as exc:  # missing, or a symlink loop
        raise ObjectNotFound(f"no Data Docs file {path!r} under {base}") from exc
    if not target.is_relative_to(base) or not target.is_file():
        raise ObjectNotFound(f"Data Docs path {path!r} is not a file inside {base}")
    try:
        return target.read_bytes(), media_type
    except OSError as exc:
        raise ObjectNotFound(f"Data Docs file {path!r} under {base} cannot be read: {exc}") from exc
