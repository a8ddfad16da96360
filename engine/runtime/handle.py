"""What a running job's handle reports, the same for every runtime (the job master and JobClient read it).

Both runtimes' handles (``LocalJobClient``, the Spark runtime's ``SparkJobRun``; a ``SparkJob``, one
attempt built by ``SparkRuntime.start``, offers the same) offer
``job_id``, ``status() -> JobStatusReport``, ``checkpoint_history() -> list[CheckpointRecord]``,
``trigger_savepoint(target_dir) -> Future[str]``, ``stop_with_savepoint(target_dir, drain) -> Future[str]``,
``cancel()``, ``wait(timeout_s) -> JobExecutionResult`` and ``done()``.  ``checkpoint_history()`` holds the
newest ``max_checkpoint_history`` records only (engine/histories.py); counts in the status are exact.
:class:`JobHandle` states that contract as a protocol; :class:`JobExecutionResult` is what ``wait`` and
``StreamExecutionEnvironment.execute`` return.  Both live here, below the API and the runtimes, so a runtime
never imports the API that chose it (engine/runtime/registry.py).
"""

from __future__ import annotations

import re
import uuid
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol, runtime_checkable


@dataclass(frozen=True, slots=True)
class CheckpointRecord:
    """One line of ``checkpoint_history()``."""

    checkpoint_id: int
    kind: str  # "checkpoint" | "savepoint" | "final"
    status: str  # "completed"
    attempt: int
    completed_ms: int
    external_pointer: str | None
    alignment_ms_max: int = 0
    #: in-flight buffers and watermarks persisted as channel state (unaligned checkpoints, seed 003)
    in_flight_elements: int = 0
    #: when the coordinator triggered it (the barrier timestamp)
    triggered_ms: int = 0
    #: bytes of state written (None where the runtime does not measure it)
    size_bytes: int | None = None
    #: the Spark runtime's epoch at the barrier (None on the local runtime)
    epoch: int | None = None


@dataclass(frozen=True, slots=True)
class JobStatusReport:
    """What ``status()`` reports."""

    job_id: str
    job_name: str
    state: str  # "created" | "running" | "restarting" | "finished" | "stopped" | "cancelled" | "failed"
    attempt: int
    restarts: int
    last_completed_checkpoint_id: int | None
    watermark_ms: int
    records_in: int
    records_out: int
    #: the Spark runtime's epoch number (0 on the local runtime)
    epoch: int = 0
    #: recent failures, newest last, as "ExceptionType: message"
    failures: tuple[str, ...] = ()
    #: completed checkpoints (not savepoints) of every attempt: exact, while checkpoint_history() keeps
    #: only the newest records (engine/histories.py)
    num_completed_checkpoints: int = 0
    #: checkpoints and savepoints that failed, of every attempt (subsumed ones are not failures)
    num_failed_checkpoints: int = 0
    #: the current attempt's counters (num_late_records_dropped, num_dead_letter_records, ...)
    metrics: Mapping[str, int] = field(default_factory=dict)
    #: each unfinished source split's {"watermark_ms": int, "idle": bool} (seed 004's per-split generation)
    splits: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: each operator chain (vertex) by its head's uid: name, parallelism, records_in, records_out, watermark_ms
    #: and per-subtask readings (engine/runtime/operator_metrics.py)
    operators: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: bytes each operator's state took in the last completed checkpoint, by operator uid (where measured)
    state_size_bytes: Mapping[str, int] = field(default_factory=dict)
    #: the Spark runtime's epoch durations of this attempt as cumulative buckets (engine/runtime/duration_histogram.py
    #: ``to_json``); None on the local runtime, which has no epochs
    epoch_durations: Mapping[str, Any] | None = None


def stable_job_id(job_name: str, explicit: str | None = None) -> str:
    """The id checkpoints, savepoints and the status document are stored under.

    It must survive restarts of the master (supervision restarts a job from the
    checkpoints of its previous run), so it is the job name — or the ``job_id``
    runtime option — when that is a valid storage path segment, like Flink's fixed
    job id in application mode; only an unusable name falls back to a random id.
    """
    for candidate in (explicit, job_name):
        if candidate and re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}", candidate):
            return candidate
    return uuid.uuid4().hex[:16]


@dataclass
class JobExecutionResult:
    """What a finished (bounded) job reports."""

    job_name: str
    job_id: str
    runtime: str
    net_runtime_ms: int
    #: counters summed over subtasks: records in/out, late records dropped, dead letters, checkpoints ...
    metrics: dict[str, int] = field(default_factory=dict)
    #: records that could not be processed: dicts with value, error, stage; the newest ``max_dead_letters``
    #: (runtime option, 10,000 by default: engine/histories.py), oldest first
    dead_letters: list[dict[str, Any]] = field(default_factory=list)
    #: collected records per collect target node id (execute_and_collect)
    collected: dict[int, list[Any]] = field(default_factory=dict)
    #: ids of the newest ``max_checkpoint_history`` completed checkpoints (runtime option, 1000 by default)
    completed_checkpoints: list[int] = field(default_factory=list)
    restarts: int = 0
    #: how many ids ``completed_checkpoints`` would hold unbounded (None when built: its length)
    num_completed_checkpoints: int | None = None
    #: dead letters in total, kept or not (None when built: the length of ``dead_letters``)
    num_dead_letters: int | None = None

    def __post_init__(self) -> None:
        if self.num_completed_checkpoints is None:
            self.num_completed_checkpoints = len(self.completed_checkpoints)
        if self.num_dead_letters is None:
            self.num_dead_letters = len(self.dead_letters)

    def get_job_id(self) -> str:
        return self.job_id

    def get_net_runtime(self) -> int:
        return self.net_runtime_ms

    @property
    def dead_letter_count(self) -> int:
        """Every dead letter of the run, also those no longer kept in ``dead_letters``."""
        return self.num_dead_letters  # type: ignore[return-value]


@runtime_checkable
class JobHandle(Protocol):
    """The control handle of a submitted job (``Runtime.submit``), the same for every runtime.

    The job master and :class:`engine.api.job_client.JobClient` use nothing else of it.
    ``trigger_savepoint``/``stop_with_savepoint`` complete with the savepoint's path;
    ``target_dir=None`` means the configured default (a runtime that has none refuses it).
    """

    @property
    def job_id(self) -> str: ...

    def status(self) -> JobStatusReport: ...

    def checkpoint_history(self) -> list[CheckpointRecord]: ...

    def trigger_savepoint(self, target_dir: str) -> Future: ...

    def stop_with_savepoint(self, target_dir: str, drain: bool = False) -> Future: ...

    def cancel(self) -> None: ...

    def wait(self, timeout_s: float | None = None) -> JobExecutionResult: ...

    def done(self) -> bool: ...
