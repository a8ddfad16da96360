"""What the operators want a job to be: ``running`` or ``suspended`` (the Flink Kubernetes Operator's ``job.state``).

Supervision must tell a job that died from a job somebody stopped on purpose.
The status document cannot: it is written by the master, and a master stopped
with a savepoint and one that crashed both end up without a fresh heartbeat.
So every Sluice client that stops a job on purpose (``sluice stop``, the Airflow
operators, the plugin page) records the intent here, beside the status
document, and every client that starts one records ``running``.  Supervision
restarts a job only while the recorded intent is ``running``; a job with no
record is taken to be meant to run (it was deployed).

Many writers (CLI, DAGs, page), last write wins: each write says who made it,
when, why, and the savepoint a suspend ended with, so ``resume`` knows where
to continue from.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from checkpoints._documents import Fields, check_version, dumps, loads
from checkpoints.backends.base import ObjectStore
from checkpoints.errors import ObjectNotFound
from checkpoints.layout import desired_state_key
from engine.errors import CorruptSnapshotError

FORMAT_VERSION = "1.0"


class JobState(str, Enum):
    """The desired state of a deployment's job."""

    RUNNING = "running"
    SUSPENDED = "suspended"


@dataclass(frozen=True, slots=True)
class DesiredState:
    job_id: str
    state: JobState
    changed_ms: int
    #: who asked: ``"cli"``, ``"airflow:<dag_id>/<run_id>/<task_id>"``, ``"ui:<user>"``
    changed_by: str
    reason: str = ""
    #: the savepoint a suspend ended with (None for a cancel or a resume)
    savepoint: str | None = None
    format_version: str = FORMAT_VERSION

    def is_suspended(self) -> bool:
        return self.state is JobState.SUSPENDED

    def to_json(self) -> bytes:
        return dumps({"format_version": self.format_version, "job_id": self.job_id, "state": self.state.value,
                      "changed_ms": self.changed_ms, "changed_by": self.changed_by, "reason": self.reason,
                      "savepoint": self.savepoint})

    @staticmethod
    def from_json(data: bytes | str, where: str = "_desired_state.json") -> DesiredState:
        doc = loads(data, where)
        version = check_version(doc, where, FORMAT_VERSION)
        f = Fields(doc, where)
        raw_state = f.get("state", str)
        try:
            state = JobState(raw_state)
        except ValueError:
            raise CorruptSnapshotError(f"{where}: state must be one of {[s.value for s in JobState]}, "
                                       f"found {raw_state!r}") from None
        return DesiredState(format_version=version, job_id=f.get("job_id", str), state=state,
                            changed_ms=f.get("changed_ms", int), changed_by=f.get("changed_by", str),
                            reason=f.get("reason", str, optional=True, default=""),
                            savepoint=f.get("savepoint", str, optional=True))


def write_desired_state(store: ObjectStore, desired: DesiredState) -> None:
    store.put_bytes(desired_state_key(desired.job_id), desired.to_json())


def read_desired_state(store: ObjectStore, job_id: str) -> DesiredState | None:
    """The last recorded intent, or None when nobody recorded one (the job is meant to run)."""
    key = desired_state_key(job_id)
    try:
        return DesiredState.from_json(store.get_bytes(key), store.key_uri(key))
    except ObjectNotFound:
        return None
