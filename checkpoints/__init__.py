"""Checkpoint and savepoint storage: layout, metadata format, state files, backends, retention, clean-up.

The engine's checkpoint protocol (``engine/checkpointing``: coordinator,
PendingCheckpoint, CompletedCheckpoint) decides *when* a checkpoint completes;
this package decides *where and how* it is stored (ARCHITECTURE sections 5-6,
seed 001).  The runtimes plug it in like this::

    from checkpoints import CheckpointStorage, RetainedCheckpointStore, open_store

    storage = CheckpointStorage(open_store("s3://bucket/checkpoints"), job_id,
                                savepoint_store=open_store("s3://bucket/savepoints"))
    completed = RetainedCheckpointStore(storage, retained=3)
    completed.recover()                                  # once, when the job master starts
    latest = completed.get_latest()                      # restore from latest.metadata (None: fresh start)
    next_id = completed.max_checkpoint_id() + 1          # ids continue after recovery

    # checkpoint n: the driver makes a location and ships it to the tasks (it is plain data)
    location = storage.initialize_location(n, known_shared=completed.shared_files_in_use())
    handle = location.write_state_file(uid, subtask, "window-contents", arrow_table,
                                       key_group=kg, incremental_key=f"{uid}/kg{kg}/window-contents")
    # ... tasks acknowledge with their StateFileHandles; the coordinator builds CheckpointMetadata
    location.finalize(metadata)                          # _metadata last: now it exists
    completed.add_checkpoint(metadata)                   # index (conditional) first, then subsumed files
    # a declined / expired checkpoint: location.discard()  (or storage.discard_checkpoint(n))

    # savepoint: storage.initialize_savepoint_location(n) ... finalize(metadata with
    # SnapshotProperties.savepoint()); never added to `completed`.

    snapshot = load_snapshot(uri, expected_job_id=job_id)   # full validation, or CorruptSnapshotError
    snapshot.state_tables(uid, key_group_range)           # Arrow per state name, filtered for rescaling
    snapshot.state_frames(uid)                            # pandas per state name (validation helper)

Modules, one concept each: ``backends`` (ObjectStore; LocalFileSystemStore,
S3Store, ``open_store``), ``layout`` (paths), ``metadata`` (``_metadata``
JSON), ``index`` (retained-handles index, conditional writes), ``status``
(status document), ``state_files`` (Parquet/Arrow + sha256), ``store``
(CheckpointStorage, RetainedCheckpointStore), ``retention`` (pure decisions),
``savepoints`` (history policy, relocation, validation outcome), ``restore``
(load and validate), ``drained`` (snapshots taken after ``stop --drain``),
``orphans`` (clean-up), ``inspect`` / ``cli`` (plain data and click commands
for ``sluice``), ``errors``.

Design decisions (deviations from the first sketch, and why):

- Incremental files are content-addressed (``shared/<sha256>.<ext>``): equal
  content is one object, so "same logical state, same hash" needs no lookup
  table; ``incremental_key`` is recorded in the handle for inspection.
- The completed-checkpoint store verifies that every file of a checkpoint it
  retains exists with the recorded size (:class:`IncompleteCheckpoint` if not),
  which is what keeps "the index never points at a missing checkpoint" true
  under faults and under concurrent shared-file deletion.
- A conditional index write that "loses" is re-checked: if the stored index is
  byte-equal to ours (a client retry after a timeout landed the first attempt),
  it counts as won.  Index documents carry writer id and version, so equal
  bytes mean the same write.
"""

from checkpoints.backends import LocalFileSystemStore, ObjectInfo, ObjectStore, S3Store, open_store
from checkpoints.checkpoint_storage import CheckpointStorage, CheckpointStorageLocation
from checkpoints.completed_store import AddResult, LatestCheckpoint, RetainedCheckpointStore
from checkpoints.errors import (
    ConcurrentIndexUpdate,
    CorruptSnapshotError,
    IncompleteCheckpoint,
    IndexUpdateOutcomeUnknown,
    InvalidStorageUri,
    ObjectNotFound,
    PreconditionFailed,
    SnapshotNotFound,
    StorageUnavailable,
    UnsupportedFormatVersion,
)
from checkpoints.index import RetainedCheckpoint, RetainedCheckpointsIndex, read_index
from checkpoints.metadata import (
    CheckpointMetadata,
    CompletenessLedger,
    OperatorState,
    OperatorSubtaskState,
    SnapshotProperties,
    SplitProgress,
    StateFileHandle,
)
from checkpoints.orphans import OrphanReport, clean_orphans, find_orphans
from checkpoints.restore import Snapshot, load_snapshot, load_snapshot_from
from checkpoints.retention import SavepointHistoryPolicy
from checkpoints.savepoints import (
    apply_savepoint_policy,
    copy_snapshot,
    list_savepoints,
    record_validation,
    savepoint_from_checkpoint,
)
from checkpoints.status import StatusDocument, read_status, write_status

__all__ = [
    "AddResult",
    "CheckpointMetadata",
    "SnapshotProperties",
    "CheckpointStorage",
    "CheckpointStorageLocation",
    "RetainedCheckpointStore",
    "CompletenessLedger",
    "ConcurrentIndexUpdate",
    "CorruptSnapshotError",
    "IncompleteCheckpoint",
    "IndexUpdateOutcomeUnknown",
    "InvalidStorageUri",
    "LatestCheckpoint",
    "LocalFileSystemStore",
    "ObjectInfo",
    "ObjectNotFound",
    "ObjectStore",
    "OperatorState",
    "OrphanReport",
    "PreconditionFailed",
    "RetainedCheckpoint",
    "RetainedCheckpointsIndex",
    "S3Store",
    "SavepointHistoryPolicy",
    "Snapshot",
    "SnapshotNotFound",
    "SplitProgress",
    "StateFileHandle",
    "StatusDocument",
    "StorageUnavailable",
    "OperatorSubtaskState",
    "UnsupportedFormatVersion",
    "apply_savepoint_policy",
    "clean_orphans",
    "copy_snapshot",
    "find_orphans",
    "list_savepoints",
    "load_snapshot",
    "load_snapshot_from",
    "open_store",
    "read_index",
    "read_status",
    "record_validation",
    "savepoint_from_checkpoint",
    "write_status",
]
