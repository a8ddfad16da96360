"""The completed-checkpoint store: the N most recent completed checkpoints of a job, persisted (seed 001).

:class:`RetainedCheckpointStore` is seed 001's ZooKeeperCompletedCheckpointStore with S3 in place of
ZooKeeper.  ``add_checkpoint`` checks the checkpoint is complete, replaces the retained-handles index with a
conditional write, drops the oldest handles beyond ``retained`` and only THEN deletes their files, keeping
every ``shared/`` file a retained checkpoint still references.  Recovery (``get_latest``) reads the index and
picks the newest readable checkpoint, falling back to older ones and saying so.  Where the state files are
written is checkpoints/checkpoint_storage.py's.

What the coordinator does with ``add_checkpoint``'s errors: IncompleteCheckpoint or a plain
StorageUnavailable: the checkpoint failed, discard its folder.  ConcurrentIndexUpdate: this master is fenced,
stop the job.  IndexUpdateOutcomeUnknown: report the checkpoint failed but do NOT discard its folder (the index
may already point at it); the next add resolves the outcome and orphan clean-up removes the folder if it was
not retained.

Partial: a shared file referenced by a still-pending checkpoint is not protected from deletion by retention of
an older one (Flink's SharedStateRegistry does that); instead ``add_checkpoint`` checks every file of the new
checkpoint exists and refuses it with :class:`IncompleteCheckpoint` if not, so the checkpoint fails rather than
the index pointing at missing state.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable

from checkpoints import layout
from checkpoints.checkpoint_storage import CheckpointStorage, delete_snapshot_dir
from checkpoints.errors import (
    IncompleteCheckpoint,
    IndexUpdateOutcomeUnknown,
    LeaseLost,
    LeaseNotHeld,
    ObjectNotFound,
)
from checkpoints.index import IndexView, RetainedCheckpoint, RetainedCheckpointsIndex, read_index, write_index
from checkpoints.metadata import CheckpointMetadata
from checkpoints.retention import shared_files_in_use, split_retained, unreferenced_shared_files
from engine.errors import CorruptSnapshotError, IllegalStateError, JobDefinitionError

log = logging.getLogger(__name__)

DEFAULT_RETAINED = 3


def _wall_clock_ms() -> int:
    return int(time.time() * 1000)


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
                deleted += delete_snapshot_dir(self.store, layout.checkpoint_dir(self.job_id, n))
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
                deleted += delete_snapshot_dir(self.store, layout.checkpoint_dir(self.job_id, h.checkpoint_id))
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
