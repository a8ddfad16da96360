"""The previous retained snapshot of a job, whose source offsets a new one must not be behind.

Seed 001: checkpoint n+1's barrier is injected after checkpoint n's at every
source split, so its offsets Sn+1 are >= Sn split by split; a snapshot whose
offset of some split went backwards would replay (or, at a sink, duplicate)
input.  The previous snapshot is the one with the largest checkpoint id below
this one's among the ``chk-<id>`` and ``savepoint-<id>-*`` folders beside it
(retention deletes subsumed checkpoints, so those left are the retained ones).
"""

from __future__ import annotations

import posixpath
from typing import Any

from checkpoints import layout
from checkpoints.errors import ObjectNotFound
from checkpoints.metadata import CheckpointMetadata
from checkpoints.restore import Snapshot
from engine.errors import CorruptSnapshotError


def previous_snapshot_metadata(snap: Snapshot) -> CheckpointMetadata | None:
    """The metadata of the newest readable snapshot beside ``snap`` with a smaller checkpoint id, or None."""
    parent = posixpath.dirname(snap.snapshot_dir.rstrip("/"))
    prefix = parent + "/" if parent else ""
    candidates: dict[str, int] = {}
    for info in snap.store.list(prefix):
        rest = info.key[len(prefix):]
        folder, _, name = rest.partition("/")
        if name != layout.METADATA_FILE:
            continue
        checkpoint_id = layout.parse_checkpoint_dir(folder)
        if checkpoint_id is None:
            checkpoint_id = layout.parse_savepoint_dir(folder)
        if checkpoint_id is not None and checkpoint_id < snap.metadata.checkpoint_id:
            candidates[prefix + folder] = checkpoint_id
    for folder in sorted(candidates, key=lambda f: candidates[f], reverse=True):
        key = f"{folder}/{layout.METADATA_FILE}"
        try:
            metadata = CheckpointMetadata.from_json(snap.store.get_bytes(key), snap.store.key_uri(key))
        except (CorruptSnapshotError, ObjectNotFound):
            continue
        if metadata.job_id == snap.metadata.job_id:
            return metadata
    return None


def previous_source_positions(snap: Snapshot) -> dict[str, Any] | None:
    previous = previous_snapshot_metadata(snap)
    return dict(previous.source_positions) if previous is not None else None
