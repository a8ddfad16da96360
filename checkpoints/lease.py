"""One job, one master: the job's lease in storage, with a fencing token.

Flink's high-availability services elect one JobManager per job (a ZooKeeper
session, or a Kubernetes Lease renewed every few seconds), and a leader that
loses its session stops writing.  Sluice keeps that role in ``<job>/_lease.json``
beside the retained-checkpoints index, using the store's conditional writes the
way the index does:

- **acquire**: a master writes the lease with If-None-Match (no lease yet) or
  If-Match on the entity tag it read (the lease was released or expired).  A
  lease renewed less than ``ttl_ms`` ago by another holder is live: the master is
  refused with :class:`LeaseHeld`, naming the holder (or waits up to
  ``wait_s`` for a crashed holder's lease to run out).  Every acquisition raises
  the **fencing token** by one.
- **fence the index**: right after acquiring, the new holder rewrites the
  retained-checkpoints index (same handles, its writer id and token), so any
  index write a former holder still has in flight fails its If-Match and raises
  ConcurrentIndexUpdate.  A paused master that wakes up cannot retain a checkpoint.
- **renew**: the holder rewrites the lease with If-Match four times per ``ttl_ms``,
  from a thread of its own (engine/master).  A lost race means somebody took the
  lease (:class:`LeaseLost`), unless the lease now holds this master's own write
  (a retried request whose first attempt landed), which is adopted.
- **check**: before anything that changes the job's storage or output (retaining a
  checkpoint, deleting subsumed ones, committing sink transactions at end of input),
  the holder checks its lease *locally*: valid until the monotonic time of its last
  successful renewal + ``ttl_ms`` - ``safety_margin_ms``.  A master paused past its
  lease (GC, SIGSTOP, a frozen VM) finds it expired the moment it wakes, before
  any write, even if it never got to renew (:class:`LeaseExpired`).  Expiry alone
  is not the end: storage may just have been unreachable.  The next renewal is a
  conditional write on the entity tag this master last wrote, so it succeeds only
  if nobody acquired the lease since, and then writes resume; if somebody did, it
  fails and the master is fenced for good (:class:`LeaseLost`).

Liveness across masters compares the holder's ``renewed_ms`` with the reader's
wall clock, so the hosts' clocks must agree to within ``safety_margin_ms`` (NTP
does far better).  The holder's own check uses the monotonic clock only.

Residual window (documented, not closed): a write already past its check when the
master freezes lands when it wakes.  For the index that write fails its If-Match,
and ``_metadata`` is written with If-None-Match, so neither can replace a
checkpoint of the new holder (whose ids continue after every ``chk-<id>`` folder
it finds).  A state file of an id the old holder had triggered but not yet
written could still land in a folder the new holder reuses; that checkpoint then
fails its size check and is refused, never restored wrong.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass, replace
from typing import Callable

from checkpoints._documents import Fields, check_version, dumps, loads
from checkpoints.backends.base import ObjectStore
from checkpoints.errors import (
    LeaseExpired,
    LeaseHeld,
    LeaseLost,
    ObjectNotFound,
    PreconditionFailed,
)
from checkpoints.layout import lease_key
from engine.errors import JobDefinitionError

log = logging.getLogger(__name__)

FORMAT_VERSION = "1.0"
#: Kubernetes HA's default lease duration in Flink (high-availability.kubernetes.leader-election.lease-duration)
DEFAULT_TTL_MS = 15_000


@dataclass(frozen=True, slots=True)
class JobLease:
    job_id: str
    #: unique per master process (a uuid); the index's writer id while this master holds the lease
    holder: str
    #: raised by one on every acquisition: a higher token always means a later holder
    fencing_token: int
    acquired_ms: int
    renewed_ms: int
    ttl_ms: int
    host: str = ""
    pid: int = 0
    started_by: str = ""
    control_url: str | None = None
    #: set by a master that ended cleanly: the next master need not wait for the ttl
    released: bool = False
    format_version: str = FORMAT_VERSION

    def expires_ms(self) -> int:
        return self.renewed_ms + self.ttl_ms

    def is_live(self, now_ms: int) -> bool:
        return not self.released and now_ms < self.expires_ms()

    def describe(self, now_ms: int) -> str:
        where = f"pid {self.pid} on {self.host or '?'}"
        control = f", control API {self.control_url}" if self.control_url else ""
        age = max(0, now_ms - self.renewed_ms) / 1000
        return (f"master {self.holder} ({where}, started by {self.started_by or '?'}{control}; fencing token "
                f"{self.fencing_token}, renewed {age:.1f} s ago, expires in "
                f"{max(0, self.expires_ms() - now_ms) / 1000:.1f} s)")

    def to_json(self) -> bytes:
        return dumps({"format_version": self.format_version, "job_id": self.job_id, "holder": self.holder,
                      "fencing_token": self.fencing_token, "acquired_ms": self.acquired_ms,
                      "renewed_ms": self.renewed_ms, "ttl_ms": self.ttl_ms, "host": self.host, "pid": self.pid,
                      "started_by": self.started_by, "control_url": self.control_url, "released": self.released})

    @staticmethod
    def from_json(data: bytes | str, where: str = "_lease.json") -> JobLease:
        doc = loads(data, where)
        version = check_version(doc, where, FORMAT_VERSION)
        f = Fields(doc, where)
        return JobLease(format_version=version, job_id=f.get("job_id", str), holder=f.get("holder", str),
                        fencing_token=f.get("fencing_token", int), acquired_ms=f.get("acquired_ms", int),
                        renewed_ms=f.get("renewed_ms", int), ttl_ms=f.get("ttl_ms", int),
                        host=f.get("host", str, optional=True, default=""),
                        pid=f.get("pid", int, optional=True, default=0),
                        started_by=f.get("started_by", str, optional=True, default=""),
                        control_url=f.get("control_url", str, optional=True),
                        released=f.get("released", bool, optional=True, default=False))


@dataclass(frozen=True, slots=True)
class LeaseView:
    lease: JobLease
    etag: str


def read_lease(store: ObjectStore, job_id: str) -> LeaseView | None:
    """The job's lease and its entity tag, or None when no master ever held one."""
    key = lease_key(job_id)
    try:
        data, etag = store.get_with_etag(key)
    except ObjectNotFound:
        return None
    return LeaseView(JobLease.from_json(data, store.key_uri(key)), etag)


def _wall_ms() -> int:
    return int(time.time() * 1000)


class LeaseKeeper:
    """A job master's side of the lease: acquire once, renew every heartbeat, check before every write.

    Thread-safe: the heartbeat thread renews, the checkpointing threads check."""

    def __init__(self, store: ObjectStore, job_id: str, *, ttl_ms: int = DEFAULT_TTL_MS,
                 safety_margin_ms: int | None = None, started_by: str = "", holder: str | None = None,
                 wall_ms: Callable[[], int] = _wall_ms, monotonic: Callable[[], float] = time.monotonic) -> None:
        if type(ttl_ms) is not int or ttl_ms < 1000:
            raise JobDefinitionError("lease_ttl_ms", ttl_ms, "must be an int >= 1000",
                                     "the lease must outlive a few heartbeats")
        self.store = store
        self.job_id = job_id
        self.ttl_ms = ttl_ms
        self.safety_margin_ms = safety_margin_ms if safety_margin_ms is not None else max(500, ttl_ms // 5)
        self.started_by = started_by
        self.holder = holder or uuid.uuid4().hex
        self._wall_ms = wall_ms
        self._monotonic = monotonic
        self._lock = threading.Lock()
        #: serializes the conditional writes of renew and release: a release that lands between a renewal's
        #: read of the entity tag and its write made the renewal fail and call the master's own clean end a
        #: take-over (seen: ``sluice demo`` fenced itself at exit under load)
        self._write_lock = threading.Lock()
        self._released = False
        self._view: LeaseView | None = None
        #: monotonic seconds until which this master may write, from its last successful renewal
        self._valid_until = 0.0
        self._lost: str | None = None

    # -- queries ---------------------------------------------------------------------------------

    @property
    def fencing_token(self) -> int:
        return self._view.lease.fencing_token if self._view is not None else 0

    @property
    def held(self) -> bool:
        return self._view is not None and self._lost is None

    def check(self, action: str) -> None:
        """Raise unless this master may ``action`` (a short description) now: :class:`LeaseLost` once another
        master took the lease (for good), :class:`LeaseExpired` while the lease is out of date (until a
        renewal succeeds)."""
        with self._lock:
            if self._view is None:
                raise LeaseLost(f"job {self.job_id!r}: cannot {action}: this master never acquired the job's lease")
            if self._lost is not None:
                raise LeaseLost(f"job {self.job_id!r}: this master (fencing token {self.fencing_token}) may no "
                                f"longer {action}: {self._lost}. It stops without writing; another master "
                                "owns the job now")
            if self._monotonic() >= self._valid_until:
                raise LeaseExpired(
                    f"job {self.job_id!r}: this master may not {action} now: its lease was last renewed "
                    f"{self._since_renewal_s():.1f} s ago and its ttl is {self.ttl_ms / 1000:.1f} s (storage "
                    "unreachable, or the process was paused). Writes resume once a renewal succeeds, which it "
                    "does only if no other master took the lease meanwhile")

    def _since_renewal_s(self) -> float:
        return self._monotonic() - (self._valid_until - (self.ttl_ms - self.safety_margin_ms) / 1000)

    # -- acquire / renew / release -----------------------------------------------------------------

    def acquire(self, wait_s: float = 0.0, control_url: str | None = None) -> JobLease:
        """Take the job's lease, or raise :class:`LeaseHeld` naming the live holder.

        ``wait_s``: how long to wait for a holder's lease to expire (a crashed master's
        lease lasts up to ``ttl_ms`` after its last heartbeat); a holder that keeps
        renewing is refused when the wait is over."""
        deadline = self._monotonic() + max(0.0, wait_s)
        key = lease_key(self.job_id)
        attempted: int | None = None  # the token of a write whose outcome we did not learn
        sent = self._monotonic()
        next_note = self._monotonic()  # when to say again what this master is waiting for
        while True:
            current = read_lease(self.store, self.job_id)
            now = self._wall_ms()
            if current is not None and current.lease.holder == self.holder and not current.lease.released \
                    and attempted is not None and current.lease.fencing_token == attempted:
                # our conditional write landed although its answer was lost (the client retried and lost)
                with self._lock:
                    self._view = current
                    self._valid_until = sent + (self.ttl_ms - self.safety_margin_ms) / 1000
                    self._lost = None
                    self._released = False
                return current.lease
            if current is not None and current.lease.is_live(now) and current.lease.holder != self.holder:
                remaining = deadline - self._monotonic()
                if remaining <= 0:
                    raise LeaseHeld(
                        f"job {self.job_id!r} already has a running job master: {current.lease.describe(now)}. "
                        "Only one master may run per job id. Stop that one first (`sluice stop "
                        f"{self.job_id} --storage ...`), or, if it died, start this one again after its lease "
                        "expires (or with --lease-wait SECONDS)")
                if self._monotonic() >= next_note:
                    log.info("job %s: waiting up to %.0f s more for the lease: %s", self.job_id, remaining,
                             current.lease.describe(now))
                    next_note = self._monotonic() + 10.0
                time.sleep(min(1.0, remaining, max(0.05, (current.lease.expires_ms() - now) / 1000)))
                continue
            token = (current.lease.fencing_token if current is not None else 0) + 1
            sent = self._monotonic()
            lease = JobLease(job_id=self.job_id, holder=self.holder, fencing_token=token, acquired_ms=now,
                             renewed_ms=now, ttl_ms=self.ttl_ms, host=socket.gethostname(), pid=os.getpid(),
                             started_by=self.started_by, control_url=control_url)
            data = lease.to_json()
            try:
                etag = (self.store.put_if_absent(key, data) if current is None
                        else self.store.put_if_match(key, data, current.etag))
            except PreconditionFailed:
                attempted = token
                continue  # another master raced us, or our own retried write landed: look again
            with self._lock:
                self._view = LeaseView(lease, etag)
                self._valid_until = sent + (self.ttl_ms - self.safety_margin_ms) / 1000
                self._lost = None
                self._released = False
            log.info("job %s: lease acquired (fencing token %d, ttl %.1f s)%s", self.job_id, token,
                     self.ttl_ms / 1000, "" if current is None else
                     f"; previous holder {current.lease.holder} "
                     + ("released it" if current.lease.released else "let it expire"))
            return lease

    def renew(self, control_url: str | None = None) -> None:
        """Extend the lease by ``ttl_ms``; :class:`LeaseLost` if somebody else wrote it meanwhile.

        A storage outage (:class:`StorageUnavailable`) propagates and leaves the local
        validity where it was: renewing again later may still succeed, ``check`` fails
        once the lease ran out."""
        with self._write_lock:
            self._renew(control_url)

    def _renew(self, control_url: str | None) -> None:
        with self._lock:
            view, lost = self._view, self._lost
        if self._released:
            return  # the job ended cleanly: nothing to renew, and nothing was lost
        if view is None or lost is not None:
            self.check("renew its lease")
            return
        sent = self._monotonic()
        # past its validity the conditional write is still safe: it succeeds only if nobody took the lease
        # since (an acquisition changes the entity tag), and then this master is the holder again
        lease = replace(view.lease, renewed_ms=self._wall_ms(),
                        control_url=control_url if control_url is not None else view.lease.control_url)
        try:
            etag = self.store.put_if_match(lease_key(self.job_id), lease.to_json(), view.etag)
        except PreconditionFailed:
            now = self._wall_ms()
            try:
                current = read_lease(self.store, self.job_id)
                who = current.lease.describe(now) if current is not None else "nobody (the lease was deleted)"
            except Exception as exc:  # the message matters, not a second failure
                current, who = None, f"unreadable ({exc})"
            if current is not None and self._is_ours(current.lease):
                # a retried request whose first attempt had landed: the lease holds our own renewal
                with self._lock:
                    self._view = current
                    self._valid_until = sent + (self.ttl_ms - self.safety_margin_ms) / 1000
                return
            with self._lock:
                self._lost = f"the lease was taken over; it is now held by {who}"
            self.check("renew its lease")
            return
        with self._lock:
            self._view = LeaseView(lease, etag)
            self._valid_until = sent + (self.ttl_ms - self.safety_margin_ms) / 1000

    def _is_ours(self, lease: JobLease) -> bool:
        return (self._view is not None and lease.holder == self.holder and not lease.released
                and lease.fencing_token == self._view.lease.fencing_token)

    def release(self) -> None:
        """Mark the lease released (a clean end), so the next master need not wait; never raises."""
        with self._write_lock:  # after any renewal in flight, from the entity tag it left
            with self._lock:
                view, lost = self._view, self._lost
            if view is None or lost is not None or self._released:
                return
            lease = replace(view.lease, renewed_ms=self._wall_ms(), released=True)
            try:
                self.store.put_if_match(lease_key(self.job_id), lease.to_json(), view.etag)
            except Exception:  # noqa: BLE001 - the lease then simply expires after ttl_ms
                log.warning("job %s: could not release the lease; the next master waits for it to expire",
                            self.job_id, exc_info=True)
            with self._lock:
                self._released = True
                self._lost = "the lease was released (the job ended)"
