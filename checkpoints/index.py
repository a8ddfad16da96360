"""The retained-handles index: seed 001's ZooKeeper node list, kept as one S3 object per job.

Seed 001 (ZooKeeperCompletedCheckpointStore): the completed checkpoint is first
written to the file system, then its handle is written to ZooKeeper; at most N
handles are kept, and when there are more the oldest handle is removed "and its
state cleaned".  Here ``<job>/_retained.json`` plays ZooKeeper's part.  It is
only ever replaced with a conditional write (If-Match on the entity tag read
before, If-None-Match for the first one), so of two job masters working from the
same view exactly one wins and the other is fenced with
:class:`ConcurrentIndexUpdate`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from checkpoints._documents import Fields, check_version, dumps, loads
from checkpoints.backends.base import ObjectStore
from checkpoints.errors import (
    ConcurrentIndexUpdate,
    IndexUpdateOutcomeUnknown,
    LeaseLost,
    ObjectNotFound,
    PreconditionFailed,
    StorageUnavailable,
)
from checkpoints.layout import index_key

FORMAT_VERSION = "1.0"


@dataclass(frozen=True, slots=True)
class RetainedCheckpoint:
    """One handle in the index: enough to find and order the checkpoint without reading its metadata."""

    checkpoint_id: int
    #: store key of the checkpoint's ``_metadata``
    metadata_key: str
    completed_ms: int
    total_bytes: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"checkpoint_id": self.checkpoint_id, "metadata_key": self.metadata_key,
                "completed_ms": self.completed_ms, "total_bytes": self.total_bytes}

    @staticmethod
    def from_dict(f: Fields) -> RetainedCheckpoint:
        return RetainedCheckpoint(f.get("checkpoint_id", int), f.get("metadata_key", str),
                                  f.get("completed_ms", int), f.get("total_bytes", int, optional=True, default=0))


@dataclass(frozen=True, slots=True)
class RetainedCheckpointsIndex:
    """The index document; ``checkpoints`` are oldest first."""

    job_id: str
    version: int = 0
    writer_id: str = ""
    updated_ms: int = 0
    checkpoints: tuple[RetainedCheckpoint, ...] = ()
    #: highest id ever completed for the job, so ids keep increasing even after all handles were dropped
    max_checkpoint_id: int = 0
    #: the writer's lease token (checkpoints.lease); 0 when written without a lease
    fencing_token: int = 0
    format_version: str = FORMAT_VERSION

    def ids(self) -> list[int]:
        return [c.checkpoint_id for c in self.checkpoints]

    def to_json(self) -> bytes:
        return dumps({
            "format_version": self.format_version,
            "job_id": self.job_id,
            "version": self.version,
            "writer_id": self.writer_id,
            "updated_ms": self.updated_ms,
            "checkpoints": [c.to_dict() for c in self.checkpoints],
            "max_checkpoint_id": self.max_checkpoint_id,
            "fencing_token": self.fencing_token,
        })

    @staticmethod
    def from_json(data: bytes | str, where: str = "_retained.json") -> RetainedCheckpointsIndex:
        doc = loads(data, where)
        version = check_version(doc, where, FORMAT_VERSION)
        f = Fields(doc, where)
        entries = f.get("checkpoints", list)
        return RetainedCheckpointsIndex(
            format_version=version,
            job_id=f.get("job_id", str),
            version=f.get("version", int),
            writer_id=f.get("writer_id", str, optional=True, default=""),
            updated_ms=f.get("updated_ms", int, optional=True, default=0),
            checkpoints=tuple(RetainedCheckpoint.from_dict(f.sub("checkpoints", i)) for i in range(len(entries))),
            max_checkpoint_id=f.get("max_checkpoint_id", int, optional=True, default=0),
            fencing_token=f.get("fencing_token", int, optional=True, default=0),
        )


@dataclass(frozen=True, slots=True)
class IndexView:
    """An index as read, with the entity tag that a conditional replace must match (None: no index yet)."""

    index: RetainedCheckpointsIndex
    etag: str | None = field(default=None)


def read_index(store: ObjectStore, job_id: str) -> IndexView:
    """The current index of ``job_id`` and its entity tag; an empty view when none was written yet."""
    key = index_key(job_id)
    try:  # the tag must describe these bytes: re-read while a write lands in between, a bounded number of times
        data, etag = store.get_with_etag(key)
    except ObjectNotFound:
        return IndexView(RetainedCheckpointsIndex(job_id=job_id), None)
    return IndexView(RetainedCheckpointsIndex.from_json(data, store.key_uri(key)), etag)


def fence_index(store: ObjectStore, job_id: str, writer_id: str, fencing_token: int, clock_ms: int) -> IndexView:
    """A new lease holder takes the index over: the same handles rewritten with its writer id and token.

    Any index write a former holder still has in flight was based on the old entity
    tag, so it now fails (ConcurrentIndexUpdate): a master paused past its lease
    cannot retain a checkpoint when it wakes.  A job without an index gets none."""
    view = read_index(store, job_id)
    if view.etag is None:
        return view
    if view.index.fencing_token > fencing_token:
        raise LeaseLost(f"job {job_id!r}: the index was already written under fencing token "
                        f"{view.index.fencing_token}, newer than this master's {fencing_token}")
    fenced = RetainedCheckpointsIndex(
        job_id=job_id, version=view.index.version + 1, writer_id=writer_id, updated_ms=clock_ms,
        checkpoints=view.index.checkpoints, max_checkpoint_id=view.index.max_checkpoint_id,
        fencing_token=fencing_token)
    return write_index(store, view, fenced)


def write_index(store: ObjectStore, view: IndexView, new_index: RetainedCheckpointsIndex) -> IndexView:
    """Replace the index only if it is still the one in ``view``; raises ConcurrentIndexUpdate otherwise.

    A conditional write can be retried by the client after a timeout although the
    first attempt landed, and then "lose" against itself.  Documents carry the
    writer id and a version, so if the object now holds exactly our bytes, we won.
    The same read-back resolves a write that failed with retries exhausted
    (StorageUnavailable): our bytes there mean it landed; the old version there
    means it did not (StorageUnavailable is re-raised); an unreadable index
    leaves the outcome unknown (:class:`IndexUpdateOutcomeUnknown`).
    """
    key = index_key(new_index.job_id)
    data = new_index.to_json()
    try:
        if view.etag is None:
            etag = store.put_if_absent(key, data)
        else:
            etag = store.put_if_match(key, data, view.etag)
    except StorageUnavailable as exc:
        try:
            if store.get_bytes(key) == data:
                return IndexView(new_index, store.head(key).etag)
            current_etag: str | None = store.head(key).etag
        except ObjectNotFound:
            current_etag = None
        except StorageUnavailable as read_exc:
            raise IndexUpdateOutcomeUnknown(
                f"job {new_index.job_id!r}: writing index version {new_index.version} to {store.key_uri(key)} failed "
                f"({exc}) and reading it back failed too ({read_exc}); it may or may not have landed. Do not discard "
                f"checkpoint files now; the next add_checkpoint resolves it"
            ) from exc
        if current_etag == view.etag:
            raise  # nothing landed: a clean failure
        raise ConcurrentIndexUpdate(
            f"job {new_index.job_id!r}: while writing index version {new_index.version} failed ({exc}), another "
            f"job master replaced {store.key_uri(key)}. This writer is fenced and must stop"
        ) from exc
    except PreconditionFailed as exc:
        try:
            if store.get_bytes(key) == data:
                return IndexView(new_index, store.head(key).etag)
        except ObjectNotFound:
            pass
        try:
            current = read_index(store, new_index.job_id).index
            who = f"now version {current.version} by writer {current.writer_id!r}, retaining {current.ids()}"
        except Exception as read_exc:  # the message matters, not a second failure
            who = f"unreadable now ({read_exc})"
        raise ConcurrentIndexUpdate(
            f"job {new_index.job_id!r}: the retained-checkpoints index {store.key_uri(key)} was changed by "
            f"another job master since this one read version {view.index.version} ({who}). "
            f"This writer is fenced and must stop; only one job master may run per job id"
        ) from exc
    return IndexView(new_index, etag)
