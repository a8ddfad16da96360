"""Finding and removing what no checkpoint owns: files of aborted or failed checkpoints, folders
without ``_metadata``, subsumed folders whose deletion was interrupted, unreferenced shared files.

Retention deletes after it has updated the index (seed 001's order, see
:mod:`checkpoints.retention`), and tasks of an aborted checkpoint may still be
uploading when it is declined.  Both leave files behind that nothing points
at; a grace period keeps in-flight checkpoints (folders written to recently)
safe.  ``dry_run`` (the default) only lists.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from checkpoints import layout
from checkpoints.backends import ObjectStore
from checkpoints.errors import ObjectNotFound
from checkpoints.index import read_index
from checkpoints.metadata import CheckpointMetadata
from checkpoints.retention import shared_files_in_use
from engine.errors import CorruptSnapshotError, JobDefinitionError

DEFAULT_GRACE_PERIOD_MS = 60 * 60 * 1000


@dataclass(frozen=True, slots=True)
class Orphan:
    """One object nobody owns, and why it is considered an orphan."""

    key: str
    reason: str
    bytes: int
    last_modified_ms: int


@dataclass(frozen=True, slots=True)
class OrphanReport:
    orphans: tuple[Orphan, ...]
    deleted: bool
    #: why something was deliberately not considered (e.g. unreadable retained metadata)
    notes: tuple[str, ...] = ()

    @property
    def total_bytes(self) -> int:
        return sum(o.bytes for o in self.orphans)


def find_orphans(
    store: ObjectStore, job_id: str, *, grace_period_ms: int = DEFAULT_GRACE_PERIOD_MS, now_ms: int | None = None,
    job_stopped: bool = False,
) -> OrphanReport:
    """List the job's orphans in checkpoint storage older than ``grace_period_ms``; deletes nothing.

    A ``chk-<n>`` folder with ``n`` above the index's highest id may be a checkpoint that
    completed a moment ago and is about to be added to the index, however old its files
    are (a slow upload): it is never an orphan while the job may still run.  Pass
    ``job_stopped=True`` once no master runs for the job to collect such folders too.
    """
    if type(grace_period_ms) is not int or grace_period_ms < 0:
        raise JobDefinitionError("grace_period_ms", grace_period_ms, "must be a non-negative int of milliseconds")
    now = int(time.time() * 1000) if now_ms is None else now_ms
    cutoff = now - grace_period_ms
    job_dir = layout.job_dir(job_id)
    index = read_index(store, job_id).index
    retained_ids = set(index.ids())
    highest_indexed = max([index.max_checkpoint_id, *retained_ids], default=0)
    notes: list[str] = []

    retained_meta: list[CheckpointMetadata] = []
    shared_known = True
    for handle in index.checkpoints:
        try:
            retained_meta.append(
                CheckpointMetadata.from_json(store.get_bytes(handle.metadata_key), store.key_uri(handle.metadata_key))
            )
        except (CorruptSnapshotError, ObjectNotFound) as exc:
            shared_known = False
            notes.append(f"retained checkpoint {handle.checkpoint_id} is unreadable ({exc}); shared files were not examined")
    in_use = shared_files_in_use(retained_meta)

    folders: dict[int, list] = {}
    shared: list = []
    for info in store.list(job_dir):
        rest = info.key[len(job_dir) :]
        top, _, _ = rest.partition("/")
        chk = layout.parse_checkpoint_dir(top)
        if chk is not None:
            if chk not in retained_ids:
                folders.setdefault(chk, []).append(info)
        elif top == layout.SHARED_DIR and shared_known:
            shared.append(info)

    orphans: list[Orphan] = []
    for chk, infos in sorted(folders.items()):
        if chk > highest_indexed and not job_stopped:
            notes.append(f"chk-{chk} is newer than every indexed checkpoint: left alone while the job may add it")
            continue
        if max(i.last_modified_ms for i in infos) > cutoff:
            continue  # possibly still being written or added: wait for the grace period
        has_metadata = any(i.key.endswith("/" + layout.METADATA_FILE) for i in infos)
        reason = (
            f"chk-{chk} is completed but not retained (subsumed; its deletion was interrupted)"
            if has_metadata
            else f"chk-{chk} has no _metadata (aborted or failed checkpoint)"
        )
        orphans.extend(Orphan(i.key, reason, i.size, i.last_modified_ms) for i in infos)
    for info in shared:
        relative = layout.SHARED_PREFIX + info.key[len(job_dir) + len(layout.SHARED_PREFIX) :]
        if relative not in in_use and info.last_modified_ms <= cutoff:
            orphans.append(Orphan(info.key, "shared file referenced by no retained checkpoint", info.size, info.last_modified_ms))
    return OrphanReport(tuple(orphans), False, tuple(notes))


def find_savepoint_orphans(
    savepoint_store: ObjectStore, job_id: str, *, grace_period_ms: int = DEFAULT_GRACE_PERIOD_MS, now_ms: int | None = None
) -> OrphanReport:
    """Savepoint folders without ``_metadata`` (failed savepoints) older than the grace period."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    job_dir = layout.job_dir(job_id)
    folders: dict[str, list] = {}
    for info in savepoint_store.list(job_dir + layout.SAVEPOINT_DIR_PREFIX):
        folder = info.key[len(job_dir) :].partition("/")[0]
        folders.setdefault(folder, []).append(info)
    orphans: list[Orphan] = []
    for folder, infos in sorted(folders.items()):
        if any(i.key.endswith("/" + layout.METADATA_FILE) for i in infos):
            continue
        if max(i.last_modified_ms for i in infos) > now - grace_period_ms:
            continue
        orphans.extend(Orphan(i.key, f"{folder} has no _metadata (failed savepoint)", i.size, i.last_modified_ms) for i in infos)
    return OrphanReport(tuple(orphans), False)


def clean_orphans(
    store: ObjectStore,
    job_id: str,
    *,
    grace_period_ms: int = DEFAULT_GRACE_PERIOD_MS,
    dry_run: bool = True,
    now_ms: int | None = None,
    savepoint_store: ObjectStore | None = None,
    job_stopped: bool = False,
) -> OrphanReport:
    """Find orphans (checkpoint storage, and the savepoint root when given) and, unless ``dry_run``, delete them."""
    report = find_orphans(store, job_id, grace_period_ms=grace_period_ms, now_ms=now_ms, job_stopped=job_stopped)
    savepoint_report = (
        find_savepoint_orphans(savepoint_store, job_id, grace_period_ms=grace_period_ms, now_ms=now_ms)
        if savepoint_store is not None
        else OrphanReport((), False)
    )
    if not dry_run:
        # _metadata first, as everywhere: a half-deleted folder must not look completed
        keys = sorted((o.key for o in report.orphans), key=lambda k: not k.endswith(layout.METADATA_FILE))
        store.delete_many(keys)
        if savepoint_store is not None:
            savepoint_store.delete_many(o.key for o in savepoint_report.orphans)
    return OrphanReport(report.orphans + savepoint_report.orphans, not dry_run, report.notes)
