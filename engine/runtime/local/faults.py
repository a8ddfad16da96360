"""Faults as data (STYLE section 6): where a test kills an attempt of a local job.

A :class:`FaultPlan` lists :class:`Fault` points; each fires once, in whichever
attempt reaches it first, and raises :class:`~engine.errors.InjectedFault`
there, which fails the attempt exactly like a user function's exception would.
The job then restarts from its latest completed checkpoint (seed 002 "Recovery").

Kinds, and the moment of the protocol each one hits (issue 3 "Done means"):

- ``RECORDS``       mid-epoch: after ``at`` records were read by the job's sources
                    in total, counted across attempts.
- ``UPLOAD_ERROR``  during the asynchronous part of checkpoint ``at``: the state upload
                    raises in the writer thread (the task declines; the job fails
                    because the failure counts, seed 001's failure manager).
- ``BEFORE_ACK``    checkpoint ``at``'s upload finished but the attempt dies before
                    the acknowledgement reaches the coordinator.
- ``BEFORE_COMMIT`` checkpoint ``at`` completed (it is in the store) but the attempt dies
                    before any task is notified, so no sink committed it yet.

Pass the plan as the runtime option ``fault_plan``.  Not thread-safe by need:
``UPLOAD_ERROR`` is consulted from writer threads, so :meth:`fire` takes a lock.
"""

from __future__ import annotations

import enum
import random
import threading
from dataclasses import dataclass, field

from engine.errors import InjectedFault, JobDefinitionError


class FaultKind(enum.Enum):
    RECORDS = "records"
    UPLOAD_ERROR = "upload_error"
    BEFORE_ACK = "before_ack"
    BEFORE_COMMIT = "before_commit"


@dataclass(frozen=True, slots=True)
class Fault:
    kind: FaultKind
    at: int

    def __post_init__(self) -> None:
        if not isinstance(self.kind, FaultKind):
            raise JobDefinitionError("kind", self.kind, "must be a FaultKind")
        if isinstance(self.at, bool) or not isinstance(self.at, int) or self.at < 1:
            raise JobDefinitionError("at", self.at, "must be an int >= 1 (a record count or a checkpoint id)")


@dataclass
class FaultPlan:
    """The faults of one job run; ``fired`` lists those that went off, in order, and ``fired_attempts`` the
    attempt each one hit (two faults can hit one attempt: an upload error fails the attempt through the
    checkpoint failure manager, and another task's fault may go off before the attempt has ended)."""

    faults: list[Fault] = field(default_factory=list)
    fired: list[Fault] = field(default_factory=list)
    fired_attempts: list[int] = field(default_factory=list)
    #: the attempt now running, set by the runtime when it starts one
    attempt: int = 0
    _fired_index: set[int] = field(default_factory=set, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @staticmethod
    def random(seed: int, count: int, max_records: int, max_checkpoint: int) -> FaultPlan:
        """``count`` faults of random kinds: record counts in [1, max_records], checkpoint ids in [1, max_checkpoint]."""
        rng = random.Random(seed)
        faults = []
        for _ in range(count):
            kind = rng.choice(list(FaultKind))
            at = rng.randint(1, max_records) if kind is FaultKind.RECORDS else rng.randint(1, max_checkpoint)
            faults.append(Fault(kind, at))
        return FaultPlan(faults)

    def fire(self, kind: FaultKind, value: int) -> None:
        """Raise InjectedFault if an unfired fault of ``kind`` is due at ``value`` (a count reached, an id hit)."""
        with self._lock:
            for i, fault in enumerate(self.faults):
                if fault.kind is not kind or i in self._fired_index:
                    continue
                due = value >= fault.at if kind is FaultKind.RECORDS else value == fault.at
                if due:
                    self._fired_index.add(i)
                    self.fired.append(fault)
                    self.fired_attempts.append(self.attempt)
                    raise InjectedFault(f"injected {kind.value} fault at {fault.at} (observed {value})")

    def next_record_threshold(self) -> int | None:
        """The smallest record count at which an unfired RECORDS fault is due (a cheap check per round)."""
        with self._lock:
            pending = [f.at for i, f in enumerate(self.faults)
                       if f.kind is FaultKind.RECORDS and i not in self._fired_index]
        return min(pending) if pending else None
