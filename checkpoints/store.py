"""Checkpoint storage for the runtimes, and the completed-checkpoint store with N-most-recent retention.

Two roles, as in Flink (seed 001):

- :class:`CheckpointStorage` / :class:`CheckpointStorageLocation`: where the
  tasks of checkpoint n write their state (``write_state_file`` returns the
  :class:`StateFileHandle` a task acknowledges with), and where the coordinator
  writes ``_metadata`` last (``finalize``).  A location is plain configuration:
  it is sent to Spark executors and writes from there.
- :class:`RetainedCheckpointStore`: seed 001's ZooKeeperCompletedCheckpointStore
  with S3 in place of ZooKeeper.  ``add_checkpoint`` checks the checkpoint is
  complete, replaces the retained-handles index with a conditional write, drops
  the oldest handles beyond ``retained`` and only THEN deletes their files,
  keeping every ``shared/`` file a retained checkpoint still references.
  Recovery (``get_latest``) reads the index and picks the newest readable
  checkpoint, falling back to older ones and saying so.

What the coordinator does with ``add_checkpoint``'s errors: IncompleteCheckpoint
or a plain StorageUnavailable: the checkpoint failed, discard its folder.
ConcurrentIndexUpdate: this master is fenced, stop the job.
IndexUpdateOutcomeUnknown: report the checkpoint failed but do NOT discard its
folder (the index may already point at it); the next add resolves the outcome
and orphan clean-up removes the folder if it was not retained.

Incremental checkpoints (``write_state_file(..., incremental_key=...)``): the
runtime splits each operator's keyed state into one file per key group (and
state name) and passes a stable ``incremental_key`` such as
``"<uid>/kg<group>/<state>"``.  Such a file is stored content-addressed as
``shared/<sha256>.<ext>``; when a retained checkpoint already references that
content, nothing is uploaded and the handle just points at it.  If 1% of keys
change, only the key groups holding them are uploaded again.  A shared file is
deleted only when no retained checkpoint references it (reference counting over
the retained checkpoints' ``_metadata``).

Partial: a shared file referenced by a still-pending checkpoint is not
protected from deletion by retention of an older one (Flink's
SharedStateRegistry does that); instead ``add_checkpoint`` checks every file of
the new checkpoint exists and refuses it with :class:`IncompleteCheckpoint` if
not, so the checkpoint fails rather than the index pointing at missing state.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

import pyarrow as pa

from checkpoints import layout
from checkpoints.backends import ObjectStore, open_store
from checkpoints.errors import (
    IncompleteCheckpoint,
    IndexUpdateOutcomeUnknown,
    LeaseLost,
    LeaseNotHeld,
    ObjectNotFound,
    PreconditionFailed,
)
from checkpoints.index import IndexView, RetainedCheckpoint, RetainedCheckpointsIndex, read_index, write_index
from checkpoints.metadata import CheckpointMetadata, StateFileHandle
from checkpoints.retention import shared_files_in_use, split_retained, unreferenced_shared_files
from checkpoints.state_files import EXTENSIONS, encode_table
from engine.errors import CorruptSnapshotError, IllegalStateError, JobDefinitionError

log = logging.getLogger(__name__)

DEFAULT_RETAINED = 3


def _wall_clock_ms() -> int:
    return int(time.time() * 1000)


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
        return _delete_snapshot_dir(self.store, layout.checkpoint_dir(self.job_id, checkpoint_id))


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
        return _delete_snapshot_dir(self.store, self.snapshot_dir)


def _delete_snapshot_dir(store: ObjectStore, snapshot_dir: str) -> int:
    """``_metadata`` first, so an interrupted delete leaves a folder that no longer counts as a snapshot."""
    store.delete(snapshot_dir + layout.METADATA_FILE)
    keys = [info.key for info in store.list(snapshot_dir)]
    store.delete_many(keys)
    return len(keys) + 1


@dataclass(frozen=True, slots=True)
class AddResult:
    """What ``add_checkpoint`` did: ids that left the index, objects deleted, problems while deleting."""

    subsumed_ids: tuple[int, ...]
    deleted_objects: int
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class LatestCheckpoint:
    """The checkpoint recovery should restore, and what was skipped to get there."""

    metadata: CheckpointMetadata
    uri: str
    warnings: tuple[str, ...] = ()

    @property
    def checkpoint_id(self) -> int:
        return self.metadata.checkpoint_id


class RetainedCheckpointStore:
    """Seed 001's CompletedCheckpointStore, persisted: the N most recent completed checkpoints of one job.

    One instance per job master.  Its view of the index (read by ``recover`` or
    the first ``add_checkpoint``) is what its conditional writes are based on:
    once another master changed the index, every add raises
    :class:`ConcurrentIndexUpdate` until ``recover`` is called again, which a
    fenced master must not do.
    """

    def __init__(
        self,
        storage: CheckpointStorage,
        retained: int = DEFAULT_RETAINED,
        *,
        writer_id: str | None = None,
        clock_ms: Callable[[], int] = _wall_clock_ms,
        verify_files: bool = True,
        fence: Any = None,
    ) -> None:
        if type(retained) is not int or retained < 1:
            raise JobDefinitionError(
                "retained", retained, "must be an int >= 1", "set_num_retained_checkpoints takes the number to keep"
            )
        self.storage = storage
        self.store = storage.store
        self.job_id = storage.job_id
        self.retained = retained
        #: the master's checkpoints.lease.LeaseKeeper: checked before every write, its token goes into the index
        self.fence = fence
        self.writer_id = writer_id or (fence.holder if fence is not None else uuid.uuid4().hex)
        self.clock_ms = clock_ms
        self.verify_files = verify_files
        self._view: IndexView | None = None
        #: set when an index write ended with an unknown outcome; resolved by re-reading before the next write
        self._outcome_unknown = False
        self._metadata_cache: dict[int, CheckpointMetadata] = {}
        self._lock = threading.Lock()
        #: checkpoint folders the stray sweep leaves alone although the index does not name them (what this
        #: master restored from: a user may restore it again, as Flink's default NO_CLAIM restore mode promises)
        self._kept_unretained: set[int] = set()
        self._strays_swept = False

    # -- recovery ------------------------------------------------------------------------------

    def recover(self) -> list[RetainedCheckpoint]:
        """(Re)read the index: the retained checkpoints, oldest first.  Call once when the master starts."""
        with self._lock:
            self._view = read_index(self.store, self.job_id)
            self._metadata_cache = {
                k: v for k, v in self._metadata_cache.items() if k in set(self._view.index.ids())
            }
            return list(self._view.index.checkpoints)

    def _ensure_view(self) -> IndexView:
        if self._view is None:
            self._view = read_index(self.store, self.job_id)
        elif self._outcome_unknown:
            # Our last write may have landed.  If the index is still ours (our writer id, or
            # unchanged) adopt it; if another master wrote since, keep the stale view: fenced.
            current = read_index(self.store, self.job_id)
            if current.etag == self._view.etag or current.index.writer_id == self.writer_id:
                self._view = current
                self._metadata_cache = {k: v for k, v in self._metadata_cache.items() if k in set(current.index.ids())}
            self._outcome_unknown = False
        return self._view

    def all_checkpoints(self) -> list[RetainedCheckpoint]:
        """The retained handles as this store last saw them, oldest first."""
        with self._lock:
            return list(self._ensure_view().index.checkpoints)

    def max_checkpoint_id(self) -> int:
        """The highest checkpoint id the job ever used: the index's record and every ``chk-<id>/`` folder
        (also aborted ones).  After recovery the next checkpoint id is this + 1, so ids never repeat."""
        with self._lock:
            highest = self._ensure_view().index.max_checkpoint_id
        highest = max([highest, *self._ensure_view().index.ids()])
        for info in self.store.list(layout.job_dir(self.job_id) + layout.CHECKPOINT_DIR_PREFIX):
            folder = info.key[len(layout.job_dir(self.job_id)) :].split("/", 1)[0]
            parsed = layout.parse_checkpoint_dir(folder)
            if parsed is not None and parsed > highest:
                highest = parsed
        return highest

    def get_latest(self) -> LatestCheckpoint | None:
        """The newest retained checkpoint that is readable and complete; None when none was retained.

        If the newest cannot be read (metadata unreadable, a state file missing or
        of the wrong size), the previous retained one is used and the returned
        ``warnings`` (also logged) say which was skipped and why.  If none is
        readable this raises CorruptSnapshotError listing every reason.
        """
        with self._lock:
            handles = list(self._ensure_view().index.checkpoints)
        warnings: list[str] = []
        for handle in reversed(handles):
            try:
                metadata = self._load_metadata(handle)
                self._check_complete(metadata)
            except (CorruptSnapshotError, ObjectNotFound) as exc:
                warnings.append(f"checkpoint {handle.checkpoint_id} of job {self.job_id!r} is unreadable: {exc}")
                log.warning("%s; falling back to the previous retained checkpoint", warnings[-1])
                continue
            if warnings:
                warnings.append(f"recovering from checkpoint {handle.checkpoint_id} instead")
                log.warning(warnings[-1])
            return LatestCheckpoint(metadata, self.storage.checkpoint_uri(handle.checkpoint_id), tuple(warnings))
        if handles:
            raise CorruptSnapshotError(
                f"no retained checkpoint of job {self.job_id!r} is readable: " + "; ".join(warnings)
            )
        return None

    def shared_files_in_use(self) -> frozenset[str]:
        """``shared/...`` paths the retained checkpoints reference; pass to ``initialize_location(known_shared=)``."""
        with self._lock:
            handles = list(self._ensure_view().index.checkpoints)
        in_use: set[str] = set()
        for h in handles:
            try:
                in_use |= shared_files_in_use([self._load_metadata(h)])
            except (CorruptSnapshotError, ObjectNotFound):
                continue  # then its files are simply not reused
        return frozenset(in_use)

    # -- fencing -------------------------------------------------------------------------------

    def check_fence(self, action: str) -> None:
        """Raise LeaseLost (a JobMasterFenced) unless this master still holds the job's lease; no-op without one."""
        if self.fence is not None:
            self.fence.check(action)

    def _fencing_token(self, view: IndexView) -> int:
        if self.fence is None:
            return view.index.fencing_token
        token = self.fence.fencing_token
        if view.index.fencing_token > token:
            raise LeaseLost(f"job {self.job_id!r}: the retained-checkpoints index was written under fencing token "
                            f"{view.index.fencing_token}, newer than this master's {token}: another master "
                            "owns the job now")
        return token

    # -- adding --------------------------------------------------------------------------------

    def add_checkpoint(self, metadata: CheckpointMetadata) -> AddResult:
        """Retain a completed checkpoint (its ``_metadata`` already finalized); subsume the oldest beyond N.

        Order (seed 001, index first): check the checkpoint is complete; write the
        new index conditionally; then delete the subsumed checkpoints' folders and
        the shared files no retained checkpoint references.  Failures while
        deleting are warnings (orphan clean-up finds the rest), never errors: the
        checkpoint is already retained.
        """
        if metadata.is_savepoint():
            raise IllegalStateError(
                "Bug: savepoints are never added to the completed-checkpoint store (seed 001: only a completed "
                "checkpoint that is not a savepoint is stored there); they are never subsumed"
            )
        if metadata.job_id != self.job_id:
            raise IllegalStateError(
                f"Bug: checkpoint of job {metadata.job_id!r} added to the store of job {self.job_id!r}"
            )
        with self._lock:
            view = self._ensure_view()
            ids = view.index.ids()
            if ids and metadata.checkpoint_id <= max(ids):
                raise IllegalStateError(
                    f"Bug: checkpoint {metadata.checkpoint_id} of job {self.job_id!r} completed after checkpoint "
                    f"{max(ids)} was retained; completed checkpoints must be added in increasing id order"
                )
            self._check_complete(metadata, must_have_metadata_file=True)
            handle = RetainedCheckpoint(
                checkpoint_id=metadata.checkpoint_id,
                metadata_key=layout.checkpoint_dir(self.job_id, metadata.checkpoint_id) + layout.METADATA_FILE,
                completed_ms=metadata.complete_timestamp_ms or self.clock_ms(),
                total_bytes=metadata.total_bytes(),
            )
            kept, subsumed = split_retained([*view.index.checkpoints, handle], self.retained)
            token = self._fencing_token(view)
            self.check_fence(f"retain checkpoint {metadata.checkpoint_id}")
            new_index = RetainedCheckpointsIndex(
                job_id=self.job_id,
                version=view.index.version + 1,
                writer_id=self.writer_id,
                updated_ms=self.clock_ms(),
                checkpoints=tuple(kept),
                max_checkpoint_id=max(view.index.max_checkpoint_id, metadata.checkpoint_id),
                fencing_token=token,
            )
            try:
                self._view = write_index(self.store, view, new_index)  # ConcurrentIndexUpdate leaves the view stale
            except IndexUpdateOutcomeUnknown:
                self._outcome_unknown = True
                raise
            self._metadata_cache[metadata.checkpoint_id] = metadata
            result = self._discard_subsumed(subsumed, kept)
            if not self._strays_swept:
                self._strays_swept = True
                result = self._discard_strays(metadata.checkpoint_id, kept, result)
            return result

    def keep_restore_source(self, uri: str) -> None:
        """Never sweep the folder ``uri`` names as a stray, when it is one of this job's checkpoints (call with
        what the master restores from; a savepoint or another storage's checkpoint is never swept anyway)."""
        folder = uri.rstrip("/").removesuffix("/" + layout.METADATA_FILE)
        checkpoint_id = layout.parse_checkpoint_dir(folder.rsplit("/", 1)[-1])
        if checkpoint_id is not None and folder == self.storage.checkpoint_uri(checkpoint_id):
            with self._lock:
                self._kept_unretained.add(checkpoint_id)

    def _discard_strays(self, first_id: int, kept: list[RetainedCheckpoint], result: AddResult) -> AddResult:
        """Once per master, after its first checkpoint is retained: delete every ``chk-<n>/`` folder with
        ``n < first_id`` that the index does not name.

        A master killed between writing a checkpoint's ``_metadata`` and the index leaves a completed folder
        nothing will ever retain or subsume (ids continue above every folder), and one killed mid-upload leaves
        a partial one.  Holding the lease, with its own checkpoint retained, this master is the only writer:
        such folders are no longer candidates for anything (a restore that wanted one has already happened).
        ``keep_unretained`` ids are spared.  Failures are warnings: ``sluice checkpoints clean`` finds the rest.
        """
        keep = {h.checkpoint_id for h in kept} | self._kept_unretained
        job_dir = layout.job_dir(self.job_id)
        try:
            self.check_fence("delete stray checkpoint folders")
            strays = sorted({
                n for info in self.store.list(job_dir + layout.CHECKPOINT_DIR_PREFIX)
                if (n := layout.parse_checkpoint_dir(info.key[len(job_dir):].split("/", 1)[0])) is not None
                and n < first_id and n not in keep
            })
            deleted = 0
            for n in strays:
                deleted += _delete_snapshot_dir(self.store, layout.checkpoint_dir(self.job_id, n))
        except Exception as exc:  # noqa: BLE001 - the checkpoint is retained already; leftovers are orphans
            log.warning("job %r: deleting stray checkpoint folders failed: %s", self.job_id, exc)
            return AddResult(result.subsumed_ids, result.deleted_objects, (*result.warnings, str(exc)))
        if strays:
            log.info("job %r: deleted stray checkpoint folders %s (no index names them)", self.job_id,
                     ", ".join(f"chk-{n}" for n in strays))
        return AddResult(result.subsumed_ids, result.deleted_objects + deleted, result.warnings)

    def _discard_subsumed(self, subsumed: list[RetainedCheckpoint], kept: list[RetainedCheckpoint]) -> AddResult:
        if not subsumed:
            return AddResult((), 0)
        warnings: list[str] = []
        deleted = 0
        subsumed_meta: list[CheckpointMetadata] = []
        shared_known = True
        # the checkpoint is in the index already: nothing here may fail add_checkpoint (a storage error raised from
        # here made the runtime believe the new checkpoint was not retained, restart from an older one and delete
        # the staged sink parts the index's newest checkpoint still names)
        for h in subsumed:
            try:
                subsumed_meta.append(self._load_metadata(h))
            except Exception as exc:  # noqa: BLE001 - see above: a warning, orphan clean-up collects the rest
                warnings.append(f"cannot read subsumed checkpoint {h.checkpoint_id} to release its shared files: {exc}")
        retained_meta: list[CheckpointMetadata] = []
        for h in kept:
            try:
                retained_meta.append(self._load_metadata(h))
            except Exception as exc:  # noqa: BLE001 - see above
                shared_known = False  # we cannot tell what it references: delete no shared file
                warnings.append(f"cannot read retained checkpoint {h.checkpoint_id}; keeping all shared files: {exc}")
        try:
            self.check_fence(f"delete subsumed checkpoints {[h.checkpoint_id for h in subsumed]}")
        except LeaseNotHeld as exc:  # out of the index already: orphan clean-up collects them later
            log.warning("job %r: %s", self.job_id, exc)
            return AddResult(tuple(h.checkpoint_id for h in subsumed), 0, (str(exc),))
        for h in subsumed:
            self._metadata_cache.pop(h.checkpoint_id, None)
            try:
                deleted += _delete_snapshot_dir(self.store, layout.checkpoint_dir(self.job_id, h.checkpoint_id))
            except Exception as exc:  # already out of the index: leftovers are orphans, not errors
                warnings.append(f"deleting subsumed checkpoint {h.checkpoint_id} failed: {exc}")
        if shared_known:
            shared_dir = layout.shared_dir(self.job_id)
            unreferenced = sorted(unreferenced_shared_files(subsumed_meta, retained_meta))
            try:
                deleted += self.store.delete_many(shared_dir + p[len(layout.SHARED_PREFIX) :] for p in unreferenced)
            except Exception as exc:
                warnings.append(f"deleting {len(unreferenced)} unreferenced shared files failed: {exc}")
        for w in warnings:
            log.warning("job %r: %s", self.job_id, w)
        return AddResult(tuple(h.checkpoint_id for h in subsumed), deleted, tuple(warnings))

    def shutdown(self, delete_checkpoints: bool) -> AddResult:
        """When the job ends: with ``delete_checkpoints`` (DELETE_ON_CANCELLATION, or a checkpoint whose
        properties discard on finish) every retained checkpoint leaves the index and is deleted; otherwise
        they stay for a later ``--from-checkpoint`` restore (RETAIN_ON_CANCELLATION)."""
        if not delete_checkpoints:
            return AddResult((), 0)
        with self._lock:
            view = self._ensure_view()
            token = self._fencing_token(view)
            try:
                self.check_fence("delete the retained checkpoints at job end")
            except LeaseNotHeld as exc:  # they stay; orphan clean-up or the next holder decides
                log.warning("job %r: %s", self.job_id, exc)
                return AddResult((), 0, (str(exc),))
            new_index = RetainedCheckpointsIndex(
                job_id=self.job_id,
                version=view.index.version + 1,
                writer_id=self.writer_id,
                updated_ms=self.clock_ms(),
                checkpoints=(),
                max_checkpoint_id=max([view.index.max_checkpoint_id, *view.index.ids()]),
                fencing_token=token,
            )
            self._view = write_index(self.store, view, new_index)
            return self._discard_subsumed(list(view.index.checkpoints), [])

    # -- helpers -------------------------------------------------------------------------------

    def _load_metadata(self, handle: RetainedCheckpoint) -> CheckpointMetadata:
        cached = self._metadata_cache.get(handle.checkpoint_id)
        if cached is not None:
            return cached
        where = self.store.key_uri(handle.metadata_key)
        metadata = CheckpointMetadata.from_json(self.store.get_bytes(handle.metadata_key), where)
        if metadata.job_id != self.job_id or metadata.checkpoint_id != handle.checkpoint_id:
            raise CorruptSnapshotError(
                f"{where} describes job {metadata.job_id!r} checkpoint {metadata.checkpoint_id}, "
                f"expected job {self.job_id!r} checkpoint {handle.checkpoint_id}"
            )
        self._metadata_cache[handle.checkpoint_id] = metadata
        return metadata

    def _check_complete(self, metadata: CheckpointMetadata, must_have_metadata_file: bool = False) -> None:
        snapshot_dir = layout.checkpoint_dir(self.job_id, metadata.checkpoint_id)
        if must_have_metadata_file:
            key = snapshot_dir + layout.METADATA_FILE
            try:
                stored = CheckpointMetadata.from_json(self.store.get_bytes(key), self.store.key_uri(key))
            except ObjectNotFound:
                raise IncompleteCheckpoint(
                    f"checkpoint {metadata.checkpoint_id} of job {self.job_id!r} has no {self.store.key_uri(key)}: "
                    "finalize() the location before adding it to the completed-checkpoint store"
                ) from None
            if stored.to_json() != metadata.to_json():
                raise IncompleteCheckpoint(f"{self.store.key_uri(key)} differs from the metadata being added")
        if not self.verify_files:
            return
        shared_dir = layout.shared_dir(self.job_id)
        for uid, subtask, handle in metadata.files():
            key = layout.resolve(snapshot_dir, shared_dir, handle.path)
            try:
                size = self.store.head(key).size
            except ObjectNotFound:
                raise IncompleteCheckpoint(
                    f"checkpoint {metadata.checkpoint_id} of job {self.job_id!r}: state file {self.store.key_uri(key)} "
                    f"(operator {uid!r}, subtask {subtask}) is missing"
                ) from None
            if size != handle.bytes:
                raise IncompleteCheckpoint(
                    f"checkpoint {metadata.checkpoint_id} of job {self.job_id!r}: state file {self.store.key_uri(key)} "
                    f"has {size} bytes, _metadata records {handle.bytes}"
                )
