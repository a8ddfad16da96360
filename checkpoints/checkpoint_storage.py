"""Where the tasks of a checkpoint write their state, and where its ``_metadata`` goes last (seed 001).

:class:`CheckpointStorage` / :class:`CheckpointStorageLocation` (Flink's names): the tasks of checkpoint n
write their state through the location (``write_state_file`` returns the :class:`StateFileHandle` a task
acknowledges with), and the coordinator writes ``_metadata`` last (``finalize``).  A location is plain
configuration: it is sent to Spark executors and writes from there.  The completed checkpoints that are kept,
and their retention, are checkpoints/completed_store.py's.

Incremental checkpoints (``write_state_file(..., incremental_key=...)``): the runtime splits each operator's
keyed state into one file per key group (and state name) and passes a stable ``incremental_key`` such as
``"<uid>/kg<group>/<state>"``.  Such a file is stored content-addressed as ``shared/<sha256>.<ext>``; when a
retained checkpoint already references that content, nothing is uploaded and the handle just points at it.
If 1% of keys change, only the key groups holding them are uploaded again.  A shared file is deleted only when
no retained checkpoint references it (checkpoints/completed_store.py counts references over the retained
checkpoints' ``_metadata``).
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import pyarrow as pa

from checkpoints import layout
from checkpoints.backends import ObjectStore, open_store
from checkpoints.errors import (
    ObjectNotFound,
    PreconditionFailed,
)
from checkpoints.metadata import CheckpointMetadata, StateFileHandle
from checkpoints.state_files import EXTENSIONS, encode_table
from engine.errors import IllegalStateError, JobDefinitionError

log = logging.getLogger(__name__)

def _as_store(store: ObjectStore | str) -> ObjectStore:
    return open_store(store) if isinstance(store, str) else store


class CheckpointStorage:
    """Checkpoint and savepoint storage of one job: hands out locations and knows the layout.

    ``checkpoint_store`` is the checkpoint root (e.g. ``open_store("s3://bucket/checkpoints")``);
    ``savepoint_store`` the savepoint root (defaults to the checkpoint root, under the same job folder).
    """

    def __init__(
        self,
        checkpoint_store: ObjectStore | str,
        job_id: str,
        *,
        savepoint_store: ObjectStore | str | None = None,
        file_format: str = "parquet",
    ) -> None:
        self.store = _as_store(checkpoint_store)
        self.job_id = layout.check_name("job_id", job_id)
        self.savepoint_store = _as_store(savepoint_store) if savepoint_store is not None else self.store
        if file_format not in EXTENSIONS:
            raise JobDefinitionError("file_format", file_format, f"must be one of {sorted(EXTENSIONS)}")
        self.file_format = file_format

    def __repr__(self) -> str:
        return f"CheckpointStorage({self.store.uri!r}, job_id={self.job_id!r})"

    def initialize_location(
        self, checkpoint_id: int, known_shared: Iterable[str] | None = None
    ) -> CheckpointStorageLocation:
        """Where checkpoint ``checkpoint_id`` is written (Flink's initializeLocationForCheckpoint).

        ``known_shared``: the ``shared/...`` paths retained checkpoints reference
        (``RetainedCheckpointStore.shared_files_in_use()``); with it, incremental
        reuse needs no request to the store, without it each incremental file costs a HEAD.
        """
        return CheckpointStorageLocation(
            store=self.store,
            job_id=self.job_id,
            checkpoint_id=layout.check_checkpoint_id(checkpoint_id),
            snapshot_dir=layout.checkpoint_dir(self.job_id, checkpoint_id),
            shared_dir=layout.shared_dir(self.job_id),
            is_savepoint=False,
            file_format=self.file_format,
            known_shared=frozenset(known_shared) if known_shared is not None else None,
        )

    def initialize_savepoint_location(self, checkpoint_id: int, suffix: str | None = None) -> CheckpointStorageLocation:
        """A fresh, self-contained savepoint folder ``<job>/savepoint-<id>-<suffix>/`` in the savepoint root."""
        suffix = suffix or uuid.uuid4().hex[:8]
        return CheckpointStorageLocation(
            store=self.savepoint_store,
            job_id=self.job_id,
            checkpoint_id=layout.check_checkpoint_id(checkpoint_id),
            snapshot_dir=layout.savepoint_dir(self.job_id, checkpoint_id, suffix),
            shared_dir=None,
            is_savepoint=True,
            file_format=self.file_format,
        )

    def checkpoint_uri(self, checkpoint_id: int) -> str:
        return self.store.key_uri(layout.checkpoint_dir(self.job_id, checkpoint_id).rstrip("/"))

    def discard_checkpoint(self, checkpoint_id: int) -> int:
        """Delete everything of an aborted or failed checkpoint (``_metadata`` first); returns objects deleted.

        Shared files it uploaded are left: another checkpoint may reference the same
        content.  Unreferenced ones are collected by :mod:`checkpoints.orphans`."""
        return delete_snapshot_dir(self.store, layout.checkpoint_dir(self.job_id, checkpoint_id))


@dataclass
class CheckpointStorageLocation:
    """Where one checkpoint's (or savepoint's) files go.  Plain data: safe to send to Spark executors,
    each of which creates its own store client on first write.

    Counters ``uploaded_bytes`` / ``reused_bytes`` describe the writes made through
    this copy of the location (per process).
    """

    store: ObjectStore
    job_id: str
    checkpoint_id: int
    snapshot_dir: str
    shared_dir: str | None
    is_savepoint: bool
    file_format: str = "parquet"
    known_shared: frozenset[str] | None = None
    uploaded_bytes: int = field(default=0)
    reused_bytes: int = field(default=0)

    @property
    def uri(self) -> str:
        return self.store.key_uri(self.snapshot_dir.rstrip("/"))

    def write_state_file(
        self,
        operator_uid: str,
        subtask: int,
        table_name: str,
        table: pa.Table,
        *,
        key_group: int | None = None,
        incremental_key: str | None = None,
        file_format: str | None = None,
    ) -> StateFileHandle:
        """Store one state table and return its handle (what the task acknowledges with).

        With ``incremental_key`` in a checkpoint, the file is content-addressed in
        ``shared/`` and not uploaded again when a retained checkpoint has the same
        content.  In a savepoint the key is recorded but the file is always written
        into the savepoint folder, which must be self-contained.
        """
        encoded = encode_table(table, file_format or self.file_format)
        ext = EXTENSIONS[encoded.format]
        if incremental_key is not None and not self.is_savepoint:
            relative = self._put_shared(encoded)
        else:
            relative = layout.state_file_path(operator_uid, subtask, table_name, ext, key_group)
            self.store.put_bytes(self.snapshot_dir + relative, encoded.data)
            self.uploaded_bytes += encoded.size
        return StateFileHandle(
            path=relative,
            bytes=encoded.size,
            rows=encoded.rows,
            sha256=encoded.sha256,
            table=table_name,
            format=encoded.format,
            incremental_key=incremental_key,
        )

    def write_state_changes(
        self,
        operator_uid: str,
        subtask: int,
        table_name: str,
        changes: pa.Table,
        *,
        previous: Sequence[StateFileHandle],
        merge_key: Sequence[str],
        incremental_key: str,
        file_format: str | None = None,
    ) -> tuple[StateFileHandle, ...]:
        """Store only what changed in one incremental state file since the previous checkpoint.

        ``previous`` is the chain of handles this ``incremental_key`` had in the
        previous checkpoint (a full file, possibly followed by deltas); ``changes``
        holds the rows upserted since then, keyed by the ``merge_key`` columns, and
        may carry a boolean ``_deleted`` column marking removed keys.  Returns the new
        chain (``previous`` + one delta) to acknowledge in place of a full file.
        Restore applies the chain in order (:meth:`Snapshot.state_tables`).  This is
        Flink's changelog idea: when 1% of keys change, ~1% of the bytes are uploaded,
        however the keys are spread over key groups.  Keep chains short: once
        ``len(previous)`` exceeds a few deltas, write a full file instead.
        """
        if self.is_savepoint:
            raise IllegalStateError("Bug: savepoints are self-contained; write full state files into them")
        if not previous or previous[0].is_delta() or any(
            h.incremental_key != incremental_key or h.table != table_name or not layout.is_shared_path(h.path)
            for h in previous
        ):
            raise IllegalStateError(
                f"Bug: `previous` must be the shared chain of {incremental_key!r} (a full file first), got "
                f"{[h.path for h in previous]}"
            )
        missing = [c for c in merge_key if c not in changes.column_names]
        if not merge_key or missing:
            raise JobDefinitionError("merge_key", tuple(merge_key), f"must name columns of `changes`; missing {missing}")
        encoded = encode_table(changes, file_format or self.file_format)
        relative = self._put_shared(encoded)
        delta = StateFileHandle(
            path=relative,
            bytes=encoded.size,
            rows=encoded.rows,
            sha256=encoded.sha256,
            table=table_name,
            format=encoded.format,
            incremental_key=incremental_key,
            kind="delta",
            merge_key=tuple(merge_key),
        )
        return (*previous, delta)

    def _put_shared(self, encoded: Any) -> str:
        """Store ``encoded`` under ``shared/`` by its content hash (upload once, reuse after); its relative path."""
        relative = f"{layout.SHARED_PREFIX}{encoded.sha256}.{EXTENSIONS[encoded.format]}"
        key = layout.resolve(self.snapshot_dir, self.shared_dir, relative)
        if self._already_stored(relative, key, encoded.size):
            self.reused_bytes += encoded.size
        else:
            self.store.put_bytes(key, encoded.data)
            self.uploaded_bytes += encoded.size
        return relative

    def _already_stored(self, relative: str, key: str, size: int) -> bool:
        if self.known_shared is not None:
            return relative in self.known_shared
        try:
            return self.store.head(key).size == size
        except ObjectNotFound:
            return False

    def finalize(self, metadata: CheckpointMetadata) -> str:
        """Write ``_metadata`` last, making the checkpoint exist; returns the snapshot's URI.

        Refuses metadata of another job or id, a savepoint that references
        ``shared/``, and a second ``_metadata`` for the same folder."""
        if metadata.job_id != self.job_id or metadata.checkpoint_id != self.checkpoint_id:
            raise IllegalStateError(
                f"Bug: metadata of job {metadata.job_id!r} checkpoint {metadata.checkpoint_id} finalized into "
                f"the location of job {self.job_id!r} checkpoint {self.checkpoint_id}"
            )
        if metadata.is_savepoint() != self.is_savepoint:
            kind = "savepoint" if self.is_savepoint else "checkpoint"
            raise IllegalStateError(f"Bug: {metadata.properties.type} metadata finalized into a {kind} location")
        if self.is_savepoint:
            shared = sorted(p for p in metadata.referenced_paths() if layout.is_shared_path(p))
            if shared:
                raise IllegalStateError(f"Bug: a savepoint must be self-contained but references {shared[:3]}")
        key = self.snapshot_dir + layout.METADATA_FILE
        data = metadata.to_json()
        try:
            self.store.put_if_absent(key, data)
        except PreconditionFailed:
            if self.store.get_bytes(key) != data:  # a retried finalize of the same metadata is fine
                raise IllegalStateError(
                    f"Bug: {self.store.key_uri(key)} already exists with different content; "
                    f"checkpoint {self.checkpoint_id} was finalized twice"
                ) from None
        return self.uri

    def discard(self) -> int:
        """Delete the files written here (an aborted checkpoint or failed savepoint).

        A checkpoint folder that holds a ``_metadata`` is left alone: an aborted checkpoint
        never finalized, so that file belongs to a completed checkpoint of the same id
        (a job master that took this one's lease over), which only its index may delete."""
        if not self.is_savepoint and self.store.exists(self.snapshot_dir + layout.METADATA_FILE):
            log.warning("not discarding %s: it holds a completed checkpoint's _metadata", self.uri)
            return 0
        return delete_snapshot_dir(self.store, self.snapshot_dir)


def delete_snapshot_dir(store: ObjectStore, snapshot_dir: str) -> int:
    """``_metadata`` first, so an interrupted delete leaves a folder that no longer counts as a snapshot."""
    store.delete(snapshot_dir + layout.METADATA_FILE)
    keys = [info.key for info in store.list(snapshot_dir)]
    store.delete_many(keys)
    return len(keys) + 1
