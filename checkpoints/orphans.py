"""Finding and removing what no checkpoint owns: files of aborted or failed checkpoints, folders
without ``_metadata``, subsumed folders whose deletion was interrupted, unreferenced shared files;
with ``outputs``, sinks' staged parts no snapshot names; with ``scratch_dir``, Spark scratch folders
whose driver is gone.

Retention deletes after it has updated the index (seed 001's order, see
:mod:`checkpoints.retention`), and tasks of an aborted checkpoint may still be
uploading when it is declined.  Both leave files behind that nothing points
at; a grace period keeps in-flight checkpoints (folders written to recently)
safe.  ``dry_run`` (the default) only lists.

**Staged sink parts** (``<sink folder>/_staging/<txn>/<part>``, engine/io/file_sink.py).  A process
that dies leaves the parts of its open transaction, and of transactions pre-committed for
checkpoints that never completed.  A restore of the job discards them (engine/runtime/recovery.py);
a job stopped for good is never restored, so they stay.  Sink folders are not recorded in
``_metadata`` (a commit handle names its parts relative to its sink's folder), so the caller names
the job's output folders; every ``_staging/<txn>/<part>`` at any depth below one is a staged part
(``sluice run --output DIR`` writes each stream to ``DIR/<name>``).  A staged part is kept when a
commit handle of a snapshot that may still be restored names it: a retained checkpoint, a
completed checkpoint above the index while the job may still add it, or a savepoint (under the
job's folder of the savepoint root or of the checkpoint storage), since restoring that snapshot
commits the part.  Otherwise it is an orphan once its whole transaction is older than the grace
period, which protects the transactions a running job still has open or pending; ``job_stopped``
does not lift it, as it does not for checkpoint folders (pass a grace period of 0 for that).

**Spark scratch folders** (``sluice-spark-*`` under a temp dir, engine/runtime/spark/scratch.py)
belong to a host, not to a job: they are examined only when ``scratch_dir`` is given, and then
whatever ``job_id`` is.  An owner whose process still runs keeps its folder whatever its age.

Not supported: outputs shared with another job (its staged parts would look orphaned: give only
this job's folders); savepoints taken to a ``target_directory`` other than the savepoint root
(their handles are not read); a local folder's temporary file of a write a kill cut short
(``.tmp-*``) is invisible to listing, so it is neither reported nor removed (a restore removes
those under ``_staging/``).
"""

from __future__ import annotations

import enum
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from checkpoints import layout
from checkpoints.backends import ObjectInfo, ObjectStore
from checkpoints.errors import ObjectNotFound, StorageUnavailable
from checkpoints.index import read_index
from checkpoints.metadata import CheckpointMetadata
from checkpoints.retention import shared_files_in_use
from engine.errors import CorruptSnapshotError, JobDefinitionError

DEFAULT_GRACE_PERIOD_MS = 60 * 60 * 1000


#: the folder a file sink stages its transactions' parts in (engine/io/file_sink.py ``STAGING``)
STAGING_DIR = "_staging"


class OrphanKind(enum.Enum):
    """What an orphan is, and what its ``key`` names (``kind`` in ``sluice checkpoints clean --json``)."""

    #: key relative to the checkpoint storage root
    CHECKPOINT_FILE = "checkpoint_file"
    #: key relative to the savepoint root
    SAVEPOINT_FILE = "savepoint_file"
    #: key is the part's URI (``file:///...`` or ``s3://...``) in a sink's output folder
    STAGED_PART = "staged_part"
    #: key is a folder's path on this host
    SCRATCH_FOLDER = "scratch_folder"


@dataclass(frozen=True, slots=True)
class Orphan:
    """One object (or scratch folder) nobody owns, and why it is considered an orphan."""

    key: str
    reason: str
    bytes: int
    last_modified_ms: int
    kind: OrphanKind = OrphanKind.CHECKPOINT_FILE


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
        orphans.extend(Orphan(i.key, f"{folder} has no _metadata (failed savepoint)", i.size, i.last_modified_ms,
                              OrphanKind.SAVEPOINT_FILE) for i in infos)
    return OrphanReport(tuple(orphans), False)


def _staged_part(info: ObjectInfo) -> tuple[str, str, str] | None:
    """(sink folder, transaction id, ``_staging/<txn>/<part>``) of a key in an output folder, or None when the key
    is not a staged part."""
    segments = info.key.split("/")
    if len(segments) < 3 or segments[-3] != STAGING_DIR:
        return None
    return "/".join(segments[:-3]), segments[-2], "/".join(segments[-3:])


def _staged_names(document: Any, found: set[str]) -> set[str]:
    """Every staged part a file-sink commit handle anywhere in ``document`` (a ``_metadata``) names.

    Read without checking the handles (restore does that): a name here only keeps a part."""
    if isinstance(document, dict):
        files = document.get("files")
        if document.get("sink") == "file" and isinstance(files, list):
            found.update(entry[0] for entry in files if isinstance(entry, list) and entry and isinstance(entry[0], str))
        for value in document.values():
            _staged_names(value, found)
    elif isinstance(document, list):
        for value in document:
            _staged_names(value, found)
    return found


def staged_parts_in_use(
    store: ObjectStore, job_id: str, savepoint_store: ObjectStore | None, *, job_stopped: bool = False
) -> tuple[set[str] | None, str | None]:
    """The staged parts (``_staging/<txn>/<part>``) named by a snapshot a restore may still commit: retained
    checkpoints, completed checkpoints above the index unless ``job_stopped``, and savepoints of the job under
    ``savepoint_store`` and ``store``.  ``(None, why)`` when one of them cannot be read: no part is free then."""
    job_dir = layout.job_dir(job_id)
    index = read_index(store, job_id).index
    retained = set(index.ids())
    # (store, _metadata key, must exist): a savepoint or newer checkpoint deleted meanwhile is restored by nobody
    sources: list[tuple[ObjectStore, str, bool]] = [(store, h.metadata_key, True) for h in index.checkpoints]
    if not job_stopped:
        highest_indexed = max([index.max_checkpoint_id, *retained], default=0)
        for info in store.list(job_dir + layout.CHECKPOINT_DIR_PREFIX):
            folder, _, name = info.key[len(job_dir):].partition("/")
            chk = layout.parse_checkpoint_dir(folder)
            if chk is not None and chk > highest_indexed and name == layout.METADATA_FILE:
                sources.append((store, info.key, False))
    for root in [store] + ([savepoint_store] if savepoint_store is not None and savepoint_store != store else []):
        for info in root.list(job_dir + layout.SAVEPOINT_DIR_PREFIX):
            folder, _, name = info.key[len(job_dir):].partition("/")
            if name == layout.METADATA_FILE and layout.parse_savepoint_dir(folder) is not None:
                sources.append((root, info.key, False))
    named: set[str] = set()
    for root, key, must_exist in sources:
        try:
            _staged_names(json.loads(root.get_bytes(key)), named)
        except ObjectNotFound:
            if must_exist:
                return None, f"retained {root.key_uri(key)} is missing"
        except ValueError as exc:
            return None, f"{root.key_uri(key)} is not readable JSON ({exc})"
    return named, None


def find_staged_orphans(
    store: ObjectStore,
    job_id: str,
    outputs: Sequence[ObjectStore],
    savepoint_store: ObjectStore,
    *,
    grace_period_ms: int = DEFAULT_GRACE_PERIOD_MS,
    now_ms: int | None = None,
    job_stopped: bool = False,
) -> tuple[list[tuple[ObjectStore, str, Orphan]], tuple[str, ...]]:
    """Staged parts under ``outputs`` that no snapshot names and whose transaction is older than the grace period,
    each with its output store and key there; deletes nothing.  See the module docstring for the rules."""
    named, unreadable = staged_parts_in_use(store, job_id, savepoint_store, job_stopped=job_stopped)
    if named is None:
        return [], (f"staged sink parts were not examined: {unreadable}",)
    cutoff = (int(time.time() * 1000) if now_ms is None else now_ms) - grace_period_ms
    found: list[tuple[ObjectStore, str, Orphan]] = []
    notes: list[str] = []
    seen: set[str] = set()  # an output named twice, or inside another one
    for output in outputs:
        transactions: dict[tuple[str, str], list[tuple[ObjectInfo, str]]] = {}
        try:
            for info in output.list(""):
                part = _staged_part(info)
                if part is not None and output.key_uri(info.key) not in seen:
                    seen.add(output.key_uri(info.key))
                    transactions.setdefault(part[:2], []).append((info, part[2]))
        except (StorageUnavailable, ObjectNotFound) as exc:  # no such bucket, no s3:ListBucket: the rest runs
            notes.append(f"staged sink parts under {output.uri} were not examined ({exc}); grant list and delete "
                         "there, or leave that output out")
            continue
        for (_sink, txn), parts in sorted(transactions.items()):
            if max(info.last_modified_ms for info, _ in parts) > cutoff:
                continue  # a transaction a running job may still have open or pending
            reason = (f"staged part of transaction {txn} that no retained checkpoint or savepoint names (its "
                      "checkpoint never completed: the process died or the checkpoint was aborted)")
            found.extend((output, info.key, Orphan(output.key_uri(info.key), reason, info.size, info.last_modified_ms,
                                                   OrphanKind.STAGED_PART))
                         for info, name in parts if name not in named)
    return found, tuple(notes)


def clean_orphans(
    store: ObjectStore,
    job_id: str,
    *,
    grace_period_ms: int = DEFAULT_GRACE_PERIOD_MS,
    dry_run: bool = True,
    now_ms: int | None = None,
    savepoint_store: ObjectStore | None = None,
    job_stopped: bool = False,
    outputs: Sequence[ObjectStore] = (),
    scratch_dir: str | None = None,
) -> OrphanReport:
    """Find orphans (checkpoint storage, the savepoint root when given, the staged parts under ``outputs``, Spark
    scratch folders under ``scratch_dir``) and, unless ``dry_run``, delete them.

    ``outputs`` needs ``savepoint_store`` (the checkpoint store when savepoints go there): a staged part may be
    named by a savepoint's commit handle only, and deleting it would leave that savepoint unrestorable."""
    if outputs and savepoint_store is None:
        raise JobDefinitionError("savepoint_store", None, "must be given with outputs: a staged part may be named "
                                 "only by a savepoint's commit handle",
                                 "Pass the job's savepoint root, or its checkpoint store when savepoints go there")
    report = find_orphans(store, job_id, grace_period_ms=grace_period_ms, now_ms=now_ms, job_stopped=job_stopped)
    savepoint_report = (
        find_savepoint_orphans(savepoint_store, job_id, grace_period_ms=grace_period_ms, now_ms=now_ms)
        if savepoint_store is not None
        else OrphanReport((), False)
    )
    staged, staged_notes = (
        find_staged_orphans(store, job_id, outputs, savepoint_store, grace_period_ms=grace_period_ms, now_ms=now_ms,
                            job_stopped=job_stopped)
        if outputs and savepoint_store is not None
        else ([], ())
    )
    scratch: list = []
    scratch_notes: list[str] = []
    if scratch_dir is not None:
        from engine.runtime.spark.scratch import find_orphaned_scratch_folders

        scratch, scratch_notes = find_orphaned_scratch_folders(scratch_dir)
    notes = [*report.notes, *staged_notes, *scratch_notes]
    if not dry_run:
        # _metadata first, as everywhere: a half-deleted folder must not look completed
        keys = sorted((o.key for o in report.orphans), key=lambda k: not k.endswith(layout.METADATA_FILE))
        store.delete_many(keys)
        if savepoint_store is not None:
            savepoint_store.delete_many(o.key for o in savepoint_report.orphans)
        for output in outputs:
            output.delete_many(key for owner, key, _ in staged if owner is output)
        if scratch:
            from engine.runtime.spark.scratch import remove_scratch_folder

            for folder in scratch:
                remove_scratch_folder(folder.path)
    scratch_orphans = tuple(Orphan(f.path, f.reason, f.bytes, f.last_modified_ms, OrphanKind.SCRATCH_FOLDER)
                            for f in scratch)
    return OrphanReport(report.orphans + savepoint_report.orphans + tuple(o for _, _, o in staged) + scratch_orphans,
                        not dry_run, tuple(notes))
