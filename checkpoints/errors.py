"""Errors of the checkpoint storage package, one hierarchy under :class:`engine.errors.SluiceError` (STYLE section 5).

Library errors (botocore ``ClientError``, ``OSError``) are translated where they
enter, in the backends, the way httpx maps transport errors: a failed
conditional put becomes :class:`PreconditionFailed` (and, at the index,
:class:`ConcurrentIndexUpdate`), a missing key becomes :class:`ObjectNotFound`,
which is a ``FileNotFoundError`` so ordinary ``except FileNotFoundError`` works.
``CorruptSnapshotError`` and ``UnsupportedFormatVersion`` are the engine's own
and are re-exported here so callers need one import.
"""

from __future__ import annotations

from engine.errors import CorruptSnapshotError, JobMasterFenced, SluiceError, UnsupportedFormatVersion

__all__ = [
    "CheckpointStorageError",
    "ConcurrentIndexUpdate",
    "CorruptSnapshotError",
    "IncompleteCheckpoint",
    "IndexUpdateOutcomeUnknown",
    "InvalidStorageUri",
    "JobMasterFenced",
    "LeaseExpired",
    "LeaseHeld",
    "LeaseLost",
    "LeaseNotHeld",
    "ObjectNotFound",
    "PreconditionFailed",
    "SnapshotNotFound",
    "StorageUnavailable",
    "UnsupportedFormatVersion",
]


class CheckpointStorageError(SluiceError):
    """Base of errors raised while reading or writing checkpoint storage."""


class InvalidStorageUri(CheckpointStorageError, ValueError):
    """A storage location is not one of the accepted forms (s3://bucket/prefix, file:///path, a plain path)."""


class ObjectNotFound(CheckpointStorageError, FileNotFoundError):
    """An object the caller named does not exist in the store (deleted by retention, or never written)."""


class SnapshotNotFound(ObjectNotFound):
    """No checkpoint or savepoint exists at the given place: the folder has no ``_metadata`` (never completed)."""


class PreconditionFailed(CheckpointStorageError):
    """A conditional write lost: the object exists (If-None-Match) or changed since it was read (If-Match)."""


class ConcurrentIndexUpdate(PreconditionFailed, JobMasterFenced):
    """Another job master updated the retained-checkpoints index since this one read it; this writer is fenced."""


class LeaseHeld(CheckpointStorageError):
    """Another job master holds the job's lease and keeps renewing it: a second master is refused."""


class LeaseNotHeld(CheckpointStorageError):
    """This master may not write the job's storage now (see the two kinds below)."""


class LeaseExpired(LeaseNotHeld):
    """The lease ran out unrenewed (storage unreachable, or the process was paused): no write until a renewal
    succeeds, which it does only if no other master took the lease meanwhile.  A failure like any other."""


class LeaseLost(LeaseNotHeld, JobMasterFenced):
    """Another master took the lease over (or it was released): this master stops before writing anything more."""


class StorageUnavailable(CheckpointStorageError, OSError):
    """The store kept failing (throttling, 5xx, timeouts) after all retries; the operation did not take effect."""


class IncompleteCheckpoint(CorruptSnapshotError):
    """A checkpoint handed to the completed-checkpoint store lacks ``_metadata`` or a state file; it is
    reported as failed instead of being retained, so the index never points at an incomplete checkpoint."""


class IndexUpdateOutcomeUnknown(StorageUnavailable):
    """The index write failed ambiguously (it may have landed) and the index could not be read back.
    Do not discard the checkpoint's files: the index decides, and orphan clean-up removes them later if
    they were not retained.  The next ``add_checkpoint`` of the same store resolves the outcome."""


class NotASavepoint(CheckpointStorageError, ValueError):
    """A folder given to be disposed of as a savepoint is not one (no readable ``_metadata``, or a checkpoint's):
    nothing was deleted."""
