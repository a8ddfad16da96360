"""Savepoints: self-contained, relocatable snapshots that retention never touches (seed 001, ARCHITECTURE 6).

Seed 001: a savepoint is forced, externalized and never subsumed, and it is not
stored in the RetainedCheckpointStore.  So savepoints have their own history
policy (:class:`SavepointHistoryPolicy`), applied only when asked
(:func:`apply_savepoint_policy`), and the newest savepoint whose validation
passed is never deleted by it.

Self-contained and relocatable: every path in a savepoint's ``_metadata`` is
relative to its folder, and none points into ``shared/``.  A savepoint written
through ``CheckpointStorage.initialize_savepoint_location`` is so by
construction; :func:`savepoint_from_checkpoint` copies a retained checkpoint
(its shared files included) into a new savepoint folder.  Copying the folder
anywhere (:func:`copy_snapshot`) gives a snapshot that restores from the copy.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import uuid
from dataclasses import dataclass
from typing import Any

from checkpoints import layout
from checkpoints.backends import ObjectStore, open_store
from checkpoints.checkpoint_storage import CheckpointStorage, delete_snapshot_dir
from checkpoints.errors import NotASavepoint, ObjectNotFound, PreconditionFailed, SnapshotNotFound
from checkpoints.metadata import CheckpointMetadata, OperatorSubtaskState, SnapshotProperties, StateFileHandle
from checkpoints.restore import _read_metadata, split_snapshot_uri
from checkpoints.retention import SavepointHistoryPolicy, SavepointSummary, savepoints_to_discard
from engine.errors import CorruptSnapshotError

log = logging.getLogger(__name__)

__all__ = [
    "SavepointHistoryPolicy",
    "SavepointInfo",
    "apply_savepoint_policy",
    "copy_snapshot",
    "dispose_savepoint",
    "list_savepoints",
    "record_validation",
    "savepoint_from_checkpoint",
]


@dataclass(frozen=True, slots=True)
class SavepointInfo:
    """One savepoint folder as listed: its metadata, or why it could not be read."""

    folder: str
    uri: str
    checkpoint_id: int
    metadata: CheckpointMetadata | None
    problem: str | None = None

    def summary(self) -> SavepointSummary:
        m = self.metadata
        return SavepointSummary(
            checkpoint_id=self.checkpoint_id,
            path=self.folder,
            completed_ms=m.complete_timestamp_ms if m else 0,
            validation_passed=bool(m and m.validation_passed()),
        )


def list_savepoints(savepoint_store: ObjectStore, job_id: str) -> list[SavepointInfo]:
    """Every completed savepoint folder of the job (those with ``_metadata``), oldest first."""
    job_dir = layout.job_dir(job_id)
    folders: set[str] = set()
    for info in savepoint_store.list(job_dir + layout.SAVEPOINT_DIR_PREFIX):
        rest = info.key[len(job_dir) :]
        folder, _, name = rest.partition("/")
        if name == layout.METADATA_FILE and layout.parse_savepoint_dir(folder) is not None:
            folders.add(folder)
    found: list[SavepointInfo] = []
    for folder in folders:
        key = f"{job_dir}{folder}/{layout.METADATA_FILE}"
        uri = savepoint_store.key_uri(job_dir + folder)
        checkpoint_id = layout.parse_savepoint_dir(folder) or 0
        try:
            metadata = CheckpointMetadata.from_json(savepoint_store.get_bytes(key), savepoint_store.key_uri(key))
            found.append(SavepointInfo(job_dir + folder, uri, checkpoint_id, metadata))
        except (CorruptSnapshotError, ObjectNotFound) as exc:
            found.append(SavepointInfo(job_dir + folder, uri, checkpoint_id, None, str(exc)))
    found.sort(key=lambda s: (s.metadata.complete_timestamp_ms if s.metadata else 0, s.checkpoint_id, s.folder))
    return found


def apply_savepoint_policy(
    savepoint_store: ObjectStore,
    job_id: str,
    policy: SavepointHistoryPolicy,
    *,
    now_ms: int | None = None,
    dry_run: bool = False,
) -> list[SavepointInfo]:
    """Delete the savepoints ``policy`` removes (or only list them with ``dry_run``); returns them.

    Savepoints whose metadata cannot be read are never deleted here: they are
    reported by ``list_savepoints`` and left for an operator to look at."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    readable = [s for s in list_savepoints(savepoint_store, job_id) if s.metadata is not None]
    doomed_paths = {s.path for s in savepoints_to_discard([s.summary() for s in readable], policy, now)}
    doomed = [s for s in readable if s.folder in doomed_paths]
    if not dry_run:
        for s in doomed:
            delete_snapshot_dir(savepoint_store, s.folder + "/")
            log.info("savepoint policy of job %r deleted %s", job_id, s.uri)
    return doomed


def savepoint_from_checkpoint(
    storage: CheckpointStorage, metadata: CheckpointMetadata, *, suffix: str | None = None, now_ms: int | None = None
) -> str:
    """Copy a completed checkpoint into a new self-contained savepoint folder; returns its URI.

    Task files keep their relative paths; ``shared/<x>`` files are copied to
    ``incremental/<x>`` inside the savepoint, and ``_metadata`` is rewritten with
    savepoint properties and the new paths, written last."""
    if metadata.is_savepoint():
        raise CorruptSnapshotError(f"checkpoint {metadata.checkpoint_id} is already a savepoint")
    location = storage.initialize_savepoint_location(metadata.checkpoint_id, suffix or uuid.uuid4().hex[:8])
    source_dir = layout.checkpoint_dir(storage.job_id, metadata.checkpoint_id)
    shared_dir = layout.shared_dir(storage.job_id)
    copied: dict[str, str] = {}

    def relocated(handle: StateFileHandle) -> StateFileHandle:
        if handle.path not in copied:
            target = handle.path
            if layout.is_shared_path(handle.path):
                target = layout.SAVEPOINT_INCREMENTAL_DIR + "/" + handle.path[len(layout.SHARED_PREFIX) :]
            source_key = layout.resolve(source_dir, shared_dir, handle.path)
            location.store.copy(source_key, location.snapshot_dir + target, source_store=storage.store)
            copied[handle.path] = target
        return dataclasses.replace(handle, path=copied[handle.path])

    operators = tuple(
        dataclasses.replace(
            op,
            subtasks=tuple(
                OperatorSubtaskState(s.subtask, s.key_group_range, tuple(relocated(h) for h in s.files)) for s in op.subtasks
            ),
        )
        for op in metadata.operators
    )
    savepoint = dataclasses.replace(
        metadata,
        properties=SnapshotProperties.savepoint(),
        operators=operators,
        complete_timestamp_ms=now_ms if now_ms is not None else int(time.time() * 1000),
        validation=None,
    )
    return location.finalize(savepoint)


def copy_snapshot(source_store: ObjectStore, source_folder: str, target_store: ObjectStore, target_folder: str) -> int:
    """Copy a self-contained snapshot folder (a savepoint) elsewhere, ``_metadata`` last; returns objects copied.

    Refuses a checkpoint that references ``shared/``: its copy would not restore."""
    src = source_folder.strip("/") + "/"
    dst = target_folder.strip("/") + "/"
    metadata = CheckpointMetadata.from_json(source_store.get_bytes(src + layout.METADATA_FILE))
    outside = sorted(p for p in metadata.referenced_paths() if layout.is_shared_path(p))
    if outside:
        raise CorruptSnapshotError(
            f"{source_store.key_uri(src)} references {outside[0]} outside its folder; make a savepoint to relocate it"
        )
    count = 0
    for info in source_store.list(src):
        relative = info.key[len(src) :]
        if relative == layout.METADATA_FILE:
            continue
        target_store.copy(info.key, dst + relative, source_store=source_store)
        count += 1
    target_store.copy(src + layout.METADATA_FILE, dst + layout.METADATA_FILE, source_store=source_store)
    return count + 1


def record_validation(store: ObjectStore, folder: str, validation: dict[str, Any]) -> CheckpointMetadata:
    """Store a validation outcome (``{"status": "passed"|"failed", ...}``) in a snapshot's ``_metadata``.

    A conditional replace: if ``_metadata`` changed since it was read, the update
    is retried on the new content, so two validators cannot erase each other."""
    key = folder.strip("/") + "/" + layout.METADATA_FILE
    for _ in range(5):
        info = store.head(key)
        metadata = CheckpointMetadata.from_json(store.get_bytes(key), store.key_uri(key))
        updated = metadata.with_validation(validation)
        try:
            store.put_if_match(key, updated.to_json(), info.etag)
            return updated
        except PreconditionFailed:
            continue
    raise PreconditionFailed(f"{store.key_uri(key)} kept changing while recording its validation outcome")


def dispose_savepoint(uri: str, **store_options: Any) -> int:
    """Delete the savepoint folder at ``uri`` (Flink's ``flink savepoint --dispose``); returns objects deleted.

    Only a savepoint: the folder's ``_metadata`` must be readable and of kind savepoint, else
    :class:`NotASavepoint` says why and nothing is deleted (a retained checkpoint belongs to its job's index,
    and a folder without ``_metadata`` may be a savepoint root holding many).  ``_metadata`` goes first, so an
    interrupted delete leaves a folder no longer taken for a savepoint.  ``store_options`` go to the S3 store."""
    parent_uri, name = split_snapshot_uri(uri)
    if not name:
        raise NotASavepoint(f"{uri!r} names no folder: give a savepoint's own folder, as `sluice savepoint` "
                            "printed it")
    store = open_store(parent_uri, **store_options)
    folder = name + "/"
    try:
        metadata = _read_metadata(store, folder)
    except SnapshotNotFound:
        raise NotASavepoint(
            f"{store.key_uri(name)} is not a savepoint: it holds no {layout.METADATA_FILE} (a savepoint root, or "
            "a savepoint that never completed?). Give a savepoint's own folder, as `sluice savepoint` printed "
            "it; nothing was deleted") from None
    except CorruptSnapshotError as exc:
        raise NotASavepoint(f"{store.key_uri(name)} is not a readable savepoint: {exc}; nothing was deleted") \
            from None
    if not metadata.is_savepoint():
        raise NotASavepoint(
            f"{store.key_uri(name)} is checkpoint {metadata.checkpoint_id} of job {metadata.job_id!r}, not a "
            "savepoint: retained checkpoints belong to their job's index, which deletes them itself (orphans: "
            "`sluice checkpoints clean`); nothing was deleted")
    deleted = delete_snapshot_dir(store, folder)
    log.info("disposed of savepoint %s (%d objects)", store.key_uri(name), deleted)
    return deleted
