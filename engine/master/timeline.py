"""What the job view draws: a bounded time series of the job's status, sampled by the job master.

The job master already knows, at every status publication, the job's records in and out, its input rate,
the watermark and idleness of every source split (seed 004), the late-record and dead-letter counters, the
epoch (Spark) and its checkpoint history.  :class:`JobTimeline` keeps the newest ``capacity`` of those
readings (a ring buffer: memory stays bounded however long the job runs, like Flink's web UI keeps only
``web.checkpoints.history`` checkpoint statistics) and the newest ``max_checkpoints`` checkpoint rows, so
the view (:mod:`engine.master.view`) can draw them over time.

Checkpoint rows come from two places:

- completed checkpoints and savepoints from the job's checkpoint history, with their full size (every state
  file the snapshot references) and, where the master can read the snapshot's ``_metadata`` when it first
  sees it, the incremental size: the bytes of the files this checkpoint added (its private files and the
  ``shared/`` files the previous checkpoint did not reference);
- failed ones from the coordinator's ``*_failed`` log events (engine/checkpointing/coordinator.py), caught
  by :class:`CheckpointFailureLog` with their reason.  Subsumed checkpoints are not failures (Flink does not
  count them either).  A failure logged while the coordinator's logger is quieter than WARNING is not seen;
  the view then says how many failures the status counts that it cannot itemise.

Each sample also keeps every operator chain's records in and out with their rates since the previous
sample, and the input watermark of its listed subtasks (engine/runtime/operator_metrics.py), so the view
draws rates and watermarks per operator over time.

**Supported**: both runtimes' status and history; masters that know no operator graph or no sizes (the
fields stay None).  **Limits**: at most :data:`MAX_OPERATORS` operator chains and
:data:`MAX_SUBTASK_WATERMARKS` subtask watermarks per sample (the first by uid and index), so a wide job
does not grow every sample.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable
from checkpoints.layout import is_shared_path
from engine.errors import JobDefinitionError

#: samples kept: at the default status interval (2 s) the last 24 minutes
DEFAULT_CAPACITY = 720
#: checkpoint rows kept (completed and failed)
DEFAULT_MAX_CHECKPOINTS = 100
#: splits kept per sample, the first by id: a source with thousands of splits must not grow every sample
MAX_SPLITS = 64
#: operator chains kept per sample, the first by uid
MAX_OPERATORS = 64
#: subtask watermarks kept per sample, the first by (operator uid, subtask index)
MAX_SUBTASK_WATERMARKS = 64
#: failed-checkpoint events that are not failures (engine/checkpointing/failure_reason.py)
_NOT_A_FAILURE = ("CHECKPOINT_SUBSUMED",)


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


@dataclass(frozen=True, slots=True)
class SplitReading:
    split_id: str
    watermark_ms: int | None
    idle: bool


@dataclass(frozen=True, slots=True)
class OperatorReading:
    """One operator chain's counts in a sample; rates are per second since the previous sample (None for the
    first sample that has the operator, or after its counts went back: a restart)."""

    uid: str
    name: str
    parallelism: int | None
    records_in: int | None
    records_out: int | None
    in_per_second: float | None = None
    out_per_second: float | None = None
    watermark_ms: int | None = None


@dataclass(frozen=True, slots=True)
class SubtaskWatermark:
    uid: str
    index: int
    watermark_ms: int | None


@dataclass(frozen=True, slots=True)
class TimelineSample:
    """One reading of the job's status (``JobClient.status_details``'s fields; None where not reported)."""

    time_ms: int
    state: str
    records_in: int | None = None
    records_out: int | None = None
    records_per_second: float | None = None
    #: records out per second since the previous sample (None for the first one, or after a restart)
    records_out_per_second: float | None = None
    watermark_ms: int | None = None
    epoch: int | None = None
    #: mean epoch duration since the previous sample (Spark: time / epochs completed), None without epochs
    epoch_ms: float | None = None
    late_records_dropped: int | None = None
    dead_letters: int | None = None
    completed_checkpoints: int | None = None
    failed_checkpoints: int | None = None
    splits: tuple[SplitReading, ...] = ()
    operators: tuple[OperatorReading, ...] = ()
    subtask_watermarks: tuple[SubtaskWatermark, ...] = ()


@dataclass(slots=True)
class CheckpointRow:
    """One checkpoint or savepoint, completed or failed."""

    checkpoint_id: int
    kind: str  # "checkpoint" | "savepoint" | "final"
    status: str  # "completed" | "failed"
    time_ms: int  # completion, or when the failure was logged
    triggered_ms: int | None = None
    duration_ms: int | None = None
    full_bytes: int | None = None
    incremental_bytes: int | None = None
    reason: str | None = None


@dataclass
class JobTimeline:
    """The newest ``capacity`` samples and ``max_checkpoints`` checkpoint rows of one job.

    ``sample()`` is called by the job master at every status publication; the view reads :meth:`snapshot`.
    ``read_metadata(uri)`` returns a snapshot's CheckpointMetadata (None: incremental sizes stay unknown)."""

    job_id: str
    capacity: int = DEFAULT_CAPACITY
    max_checkpoints: int = DEFAULT_MAX_CHECKPOINTS
    read_metadata: Callable[[str], Any] | None = None
    samples: collections.deque[TimelineSample] = field(init=False)
    _checkpoints: dict[tuple[int, str], CheckpointRow] = field(init=False, default_factory=dict)
    _newest_completed: int = field(init=False, default=0)
    #: shared/ paths of the last completed checkpoint whose metadata was read (for the next one's increment)
    _previous_shared: frozenset[str] | None = field(init=False, default=None)
    _lock: threading.Lock = field(init=False, default_factory=threading.Lock)

    def __post_init__(self) -> None:
        for name in ("capacity", "max_checkpoints"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 2:
                raise JobDefinitionError(name, value, "must be an int >= 2")
        self.samples = collections.deque(maxlen=self.capacity)

    # -- feeding ---------------------------------------------------------------------------------
    def sample(self, status: dict[str, Any], history: Iterable[dict[str, Any]] = (),
               now_ms: int | None = None) -> TimelineSample:
        """Append one reading of ``status`` (the control API's status document) and take the history's new
        completed checkpoints; returns the sample."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        metrics = status.get("metrics") or {}
        splits = status.get("splits") or {}
        readings = tuple(SplitReading(str(sid), _int((s or {}).get("watermark_ms")), bool((s or {}).get("idle")))
                         for sid, s in sorted(splits.items())[:MAX_SPLITS])
        with self._lock:
            previous = self.samples[-1] if self.samples else None
            records_out, epoch = _int(status.get("records_out")), _int(status.get("epoch"))
            sample = TimelineSample(
                time_ms=now, state=str(status.get("state") or "UNKNOWN"),
                records_in=_int(status.get("records_in")), records_out=records_out,
                records_per_second=_float(status.get("records_per_second")),
                records_out_per_second=_rate(previous, now, records_out, "records_out"),
                watermark_ms=_int(status.get("watermark_ms")), epoch=epoch,
                epoch_ms=_epoch_ms(previous, now, epoch),
                late_records_dropped=_int(metrics.get("num_late_records_dropped")),
                dead_letters=_int(metrics.get("num_dead_letter_records")),
                completed_checkpoints=_int(status.get("num_completed_checkpoints")),
                failed_checkpoints=_int(status.get("num_failed_checkpoints")),
                splits=readings,
                operators=_operator_readings(status.get("operators") or {}, previous, now),
                subtask_watermarks=_subtask_watermarks(status.get("operators") or {}),
            )
            self.samples.append(sample)
        self._take_history(history)
        return sample

    def _take_history(self, history: Iterable[dict[str, Any]]) -> None:
        fresh = sorted((h for h in history if _int(h.get("checkpoint_id")) is not None
                        and str(h.get("status", "completed")).lower() == "completed"
                        and h["checkpoint_id"] > self._newest_completed), key=lambda h: h["checkpoint_id"])
        for h in fresh:  # metadata is read outside the lock: storage may be slow
            cid = int(h["checkpoint_id"])
            triggered, completed = _int(h.get("triggered_ms")), _int(h.get("completed_ms")) or 0
            row = CheckpointRow(cid, str(h.get("kind") or "checkpoint"), "completed", completed,
                                triggered_ms=triggered or None,
                                duration_ms=max(0, completed - triggered) if triggered and completed else None,
                                full_bytes=_int(h.get("size_bytes")))
            row.incremental_bytes = self._incremental_bytes(h.get("external_pointer"), row)
            with self._lock:
                self._keep(row)
                self._newest_completed = max(self._newest_completed, cid)

    def _incremental_bytes(self, pointer: Any, row: CheckpointRow) -> int | None:
        """Bytes of the files this snapshot added; None when its metadata cannot be read (already subsumed
        and deleted, storage down) or the previous checkpoint's was not read (the first one seen is full)."""
        if self.read_metadata is None or not pointer:
            return None
        try:
            metadata = self.read_metadata(str(pointer))
        except Exception as exc:  # noqa: BLE001 - a size the view cannot show is not the job's problem
            logging.getLogger(__name__).debug("no incremental size for %s: %s", pointer, exc)
            self._previous_shared = None
            return None
        handles = [h for _, _, h in metadata.files()]
        if row.full_bytes is None:
            row.full_bytes = sum(h.bytes for h in handles)
        if row.kind != "checkpoint":  # a savepoint is self-contained: all of it is written
            return sum(h.bytes for h in handles)
        shared = frozenset(h.path for h in handles if is_shared_path(h.path))
        previous, self._previous_shared = self._previous_shared, shared
        if previous is None:
            return sum(h.bytes for h in handles)  # the first checkpoint this master saw: written in full
        return sum(h.bytes for h in handles if not is_shared_path(h.path) or h.path not in previous)

    def record_failure(self, checkpoint_id: int, kind: str, reason: str, cause: str | None,
                       now_ms: int | None = None) -> None:
        """A checkpoint (or savepoint) failed with ``reason`` (a CheckpointFailureReason name)."""
        if reason in _NOT_A_FAILURE:
            return
        row = CheckpointRow(int(checkpoint_id), kind, "failed", int(time.time() * 1000) if now_ms is None else now_ms,
                            reason=f"{reason}: {cause}" if cause else reason)
        with self._lock:
            self._keep(row)

    def _keep(self, row: CheckpointRow) -> None:
        self._checkpoints[(row.checkpoint_id, row.status)] = row
        while len(self._checkpoints) > self.max_checkpoints:
            del self._checkpoints[min(self._checkpoints, key=lambda k: (self._checkpoints[k].time_ms, k))]

    # -- reading ---------------------------------------------------------------------------------
    def snapshot(self) -> tuple[list[TimelineSample], list[CheckpointRow]]:
        """The samples (oldest first) and checkpoint rows (by id, then completed before failed)."""
        with self._lock:
            rows = sorted(self._checkpoints.values(), key=lambda r: (r.checkpoint_id, r.status != "completed"))
            return list(self.samples), [CheckpointRow(**{f: getattr(r, f) for f in r.__slots__}) for r in rows]


def _rate(previous: TimelineSample | None, now_ms: int, value: int | None, name: str) -> float | None:
    before = getattr(previous, name) if previous is not None else None
    if value is None or before is None or now_ms <= previous.time_ms or value < before:  # type: ignore[union-attr]
        return None
    return (value - before) * 1000 / (now_ms - previous.time_ms)  # type: ignore[union-attr]


def _operator_readings(operators: dict[str, Any], previous: TimelineSample | None,
                       now_ms: int) -> tuple[OperatorReading, ...]:
    before = {r.uid: r for r in previous.operators} if previous is not None else {}
    readings = []
    for uid, op in sorted(operators.items())[:MAX_OPERATORS]:
        op = op or {}
        records_in, records_out = _int(op.get("records_in")), _int(op.get("records_out"))
        last = before.get(uid)
        elapsed_ms = now_ms - previous.time_ms if previous is not None else 0
        readings.append(OperatorReading(
            str(uid), str(op.get("name") or uid), _int(op.get("parallelism")), records_in, records_out,
            _per_second(last.records_in if last else None, records_in, elapsed_ms),
            _per_second(last.records_out if last else None, records_out, elapsed_ms),
            _int(op.get("watermark_ms"))))
    return tuple(readings)


def _per_second(before: int | None, value: int | None, elapsed_ms: int) -> float | None:
    if before is None or value is None or elapsed_ms <= 0 or value < before:
        return None
    return (value - before) * 1000 / elapsed_ms


def _subtask_watermarks(operators: dict[str, Any]) -> tuple[SubtaskWatermark, ...]:
    marks = [SubtaskWatermark(str(uid), int(sub.get("index", i)), _int(sub.get("watermark_ms")))
             for uid, op in sorted(operators.items()) for i, sub in enumerate((op or {}).get("subtasks") or ())]
    return tuple(marks[:MAX_SUBTASK_WATERMARKS])


def _epoch_ms(previous: TimelineSample | None, now_ms: int, epoch: int | None) -> float | None:
    if previous is None or epoch is None or previous.epoch is None or epoch <= previous.epoch:
        return None
    return (now_ms - previous.time_ms) / (epoch - previous.epoch)


class CheckpointFailureLog(logging.Handler):
    """Feeds a timeline the coordinator's failed-checkpoint log events of one job (with their reasons).

    :meth:`attach` adds it to the coordinator's logger; :meth:`detach` removes it (a master that ends)."""

    LOGGER = "engine.checkpointing.coordinator"

    def __init__(self, timeline: JobTimeline) -> None:
        super().__init__(logging.NOTSET)
        self.timeline = timeline

    def emit(self, record: logging.LogRecord) -> None:
        event = getattr(record, "event", None)
        if not isinstance(event, str) or not event.endswith("_failed"):
            return
        if getattr(record, "job_id", None) != self.timeline.job_id or getattr(record, "checkpoint_id", None) is None:
            return
        self.timeline.record_failure(record.checkpoint_id, event.removesuffix("_failed"),  # type: ignore[attr-defined]
                                     str(getattr(record, "reason", "UNKNOWN")), getattr(record, "cause", None),
                                     now_ms=int(record.created * 1000))

    def attach(self) -> CheckpointFailureLog:
        logging.getLogger(self.LOGGER).addHandler(self)
        return self

    def detach(self) -> None:
        logging.getLogger(self.LOGGER).removeHandler(self)
