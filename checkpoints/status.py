"""The status document a job master publishes to storage, so supervision works from storage alone (ARCHITECTURE 7).

One writer, the master holding the job's lease: it writes compare-and-set under its
fencing token (:func:`write_status`), so a master that wakes from a pause after
another took the job over cannot put its stale document over the new holder's.  A
stale status is recognised by its old ``heartbeat_ms``, and ``epoch`` tells a
restarted master's documents from its predecessor's.

A master stopped by a signal (SIGTERM, SIGINT) publishes ``state`` :data:`SUSPENDED` with a
:class:`Suspension` saying which signal and when (format 1.1; 1.0 documents read as without one).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from checkpoints._documents import Fields, check_version, dumps, loads
from checkpoints.backends.base import ObjectStore
from checkpoints.errors import CorruptSnapshotError, LeaseLost, ObjectNotFound, PreconditionFailed
from checkpoints.layout import status_key

FORMAT_VERSION = "1.1"

#: the master stopped on a signal without ending the job (Flink's JobStatus.SUSPENDED, what a JobManager shut
#: down in an HA setup leaves): no savepoint, retained checkpoints and pending sink transactions kept for the
#: next master, which restores the newest checkpoint.  Not an intent to stop: supervision restores the job.
SUSPENDED = "SUSPENDED"


@dataclass(frozen=True, slots=True)
class Suspension:
    """Why and when a master suspended its job (engine/master/signals.py)."""

    #: the signal's name, ``SIGTERM`` or ``SIGINT``
    signal: str
    received_ms: int
    #: the master process's exit status: 128 + the signal's number (143, 130), as a shell reports a signal
    exit_status: int
    #: when the job had stopped, after which the lease was released so a successor starts at once; None while
    #: it stops, or when the master gave up waiting (see ``note``): the lease then expires after its ttl
    stopped_ms: int | None = None
    #: why the job was not (or not yet) stopped, for operators; empty when it stopped
    note: str = ""

    def to_json_obj(self) -> dict[str, Any]:
        return {"signal": self.signal, "received_ms": self.received_ms, "exit_status": self.exit_status,
                "stopped_ms": self.stopped_ms, "note": self.note}

    @staticmethod
    def from_fields(f: Fields) -> Suspension:
        return Suspension(signal=f.get("signal", str), received_ms=f.get("received_ms", int),
                          exit_status=f.get("exit_status", int), stopped_ms=f.get("stopped_ms", int, optional=True),
                          note=f.get("note", str, optional=True, default=""))


@dataclass(frozen=True, slots=True)
class StatusDocument:
    job_id: str
    heartbeat_ms: int
    state: str = "RUNNING"
    #: the Spark runtime's epoch number (one epoch = one slice [S(n-1), S(n)))
    epoch: int = 0
    last_completed_checkpoint: int | None = None
    last_completed_ms: int | None = None
    watermark_ms: int | None = None
    lag_ms: int | None = None
    records_per_second: float | None = None
    #: recent failures, newest last: ``{"time_ms", "kind", "message"}``
    failures: tuple[dict[str, Any], ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)
    #: set with ``state`` SUSPENDED: the master stopped on a signal
    suspension: Suspension | None = None
    format_version: str = FORMAT_VERSION

    def to_json(self) -> bytes:
        return dumps({
            "format_version": self.format_version,
            "job_id": self.job_id,
            "heartbeat_ms": self.heartbeat_ms,
            "state": self.state,
            "epoch": self.epoch,
            "last_completed_checkpoint": self.last_completed_checkpoint,
            "last_completed_ms": self.last_completed_ms,
            "watermark_ms": self.watermark_ms,
            "lag_ms": self.lag_ms,
            "records_per_second": self.records_per_second,
            "failures": list(self.failures),
            "extra": self.extra,
            "suspension": self.suspension.to_json_obj() if self.suspension is not None else None,
        })

    @staticmethod
    def from_json(data: bytes | str, where: str = "_status.json") -> StatusDocument:
        doc = loads(data, where)
        version = check_version(doc, where, FORMAT_VERSION)
        f = Fields(doc, where)
        return StatusDocument(
            format_version=version,
            job_id=f.get("job_id", str),
            heartbeat_ms=f.get("heartbeat_ms", int),
            state=f.get("state", str, optional=True, default="RUNNING"),
            epoch=f.get("epoch", int, optional=True, default=0),
            last_completed_checkpoint=f.get("last_completed_checkpoint", int, optional=True),
            last_completed_ms=f.get("last_completed_ms", int, optional=True),
            watermark_ms=f.get("watermark_ms", int, optional=True),
            lag_ms=f.get("lag_ms", int, optional=True),
            records_per_second=f.get("records_per_second", (int, float), optional=True),
            failures=tuple(f.get("failures", list, optional=True, default=[])),
            extra=f.get("extra", dict, optional=True, default={}),
            suspension=Suspension.from_fields(f.sub("suspension")) if doc.get("suspension") is not None else None,
        )


_WRITE_ATTEMPTS = 8


def write_status(store: ObjectStore, status: StatusDocument, fencing_token: int | None = None) -> None:
    """Publish ``status``.  With the writer's lease ``fencing_token`` (what a job master passes) the write is
    compare-and-set over the document it read, and refused with :class:`LeaseLost` when that document was written
    under a newer token; a writer paused between its read and its write loses the race.  Without a token the
    write simply replaces the document (tools and tests publishing for a master that is not running)."""
    key = status_key(status.job_id)
    data = status.to_json()
    if fencing_token is None:
        store.put_bytes(key, data)
        return
    for _ in range(_WRITE_ATTEMPTS):
        try:
            current, etag = store.get_with_etag(key)
        except ObjectNotFound:
            etag = None
        if etag is not None:
            try:
                written_by = (StatusDocument.from_json(current, store.key_uri(key)).extra or {}).get("fencing_token")
            except CorruptSnapshotError:
                written_by = None  # a broken document is replaced by the holder's
            if type(written_by) is int and written_by > fencing_token:
                raise LeaseLost(f"job {status.job_id!r}: the status document was written under fencing token "
                                f"{written_by}, newer than this master's {fencing_token}; not publishing over it")
        try:
            if etag is None:
                store.put_if_absent(key, data)
            else:
                store.put_if_match(key, data, etag)
            return
        except PreconditionFailed:
            continue  # another write landed in between: judge that one
    raise PreconditionFailed(f"{store.key_uri(key)} changed under each of {_WRITE_ATTEMPTS} conditional writes")


def read_status(store: ObjectStore, job_id: str) -> StatusDocument | None:
    """The last published status, or None when the job never published one."""
    key = status_key(job_id)
    try:
        return StatusDocument.from_json(store.get_bytes(key), store.key_uri(key))
    except ObjectNotFound:
        return None
