"""Prometheus exposition of a job's status, through prometheus_client (no hand-written text format).

Gauges and counters come from the job's status on every scrape.  Checkpoint histograms
(``sluice_checkpoint_duration_seconds``, ``..._size_bytes``, ``..._alignment_seconds``) are fed from the
checkpoint history: :meth:`CheckpointHistograms.update` observes every record newer than the last one
it saw; the job master calls it with every status publication and every scrape, so a record is counted
even when the bounded history (``max_checkpoint_history``) turns over between two scrapes.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Iterable

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.utils import floatToGoString

from engine.elements import MAX_WATERMARK, MIN_WATERMARK

#: checkpoint durations from tens of milliseconds (local, small state) to minutes (large Spark state on S3)
DURATION_BUCKETS_S = (0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
SIZE_BUCKETS_BYTES = tuple(float(4 ** k * 1024) for k in range(12))  # 1 KiB .. 4 GiB

#: status field -> (metric name, help, kind)
_FIELDS = {
    "watermark_ms": ("sluice_watermark_ms", "Current event-time watermark of the job (ms)", "gauge"),
    "last_completed_checkpoint": ("sluice_last_completed_checkpoint_id", "Id of the last completed checkpoint", "gauge"),
    "records_per_second": ("sluice_records_per_second", "Input records per second over the last interval", "gauge"),
    "lag_ms": ("sluice_event_time_lag_ms", "Processing time minus watermark (ms)", "gauge"),
    "records_in": ("sluice_records_in_total", "Records read from sources", "counter"),
    "records_out": ("sluice_records_out_total", "Records written by sinks and collectors", "counter"),
    "num_completed_checkpoints": ("sluice_completed_checkpoints_total", "Completed checkpoints", "counter"),
    "num_failed_checkpoints": ("sluice_failed_checkpoints_total", "Failed checkpoints", "counter"),
    "restarts": ("sluice_restarts_total", "Restarts from a checkpoint after a failure", "counter"),
    "num_late_records_dropped": ("sluice_late_records_dropped_total", "Late records dropped by windows", "counter"),
    "num_dead_letter_records": ("sluice_dead_letter_records_total", "Records sent to the dead-letter output", "counter"),
}


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class _StatusCollector:
    """Every series read from the job's status, one status read per scrape: job-level gauges and counters,
    ``sluice_checkpoints_total{status}``, and seed 004's per-split watermarks and idleness
    (``sluice_split_watermark_ms{job,split}``, ``sluice_split_idle{job,split}``)."""

    def __init__(self, job_id: str, status: Callable[[], dict[str, Any]]) -> None:
        self._job_id = job_id
        self._status = status

    def collect(self) -> Iterable[Any]:
        status = self._status()
        flat = {**status, **(status.get("metrics", {}) or {})}
        yield from self._job_level(flat)
        yield self._checkpoints_by_status(flat)
        yield from self._splits(status.get("splits") or {})
        yield from self._operators(status.get("operators") or {})
        yield self._state_sizes(status.get("state_size_bytes") or {})
        epochs = status.get("epoch_durations")
        if epochs:
            yield self._epoch_durations(epochs)

    def _job_level(self, flat: dict[str, Any]) -> Iterable[Any]:
        for key, (name, help_text, kind) in _FIELDS.items():
            value = flat.get(key)
            if not _number(value):
                continue
            family = (CounterMetricFamily if kind == "counter" else GaugeMetricFamily)(
                name.removesuffix("_total") if kind == "counter" else name, help_text, labels=["job"])
            family.add_metric([self._job_id], float(value))
            yield family

    def _checkpoints_by_status(self, flat: dict[str, Any]) -> Any:
        family = CounterMetricFamily("sluice_checkpoints", "Checkpoints that completed or failed",
                                     labels=["job", "status"])
        for label, key in (("completed", "num_completed_checkpoints"), ("failed", "num_failed_checkpoints")):
            if _number(flat.get(key)):
                family.add_metric([self._job_id, label], float(flat[key]))
        return family

    def _splits(self, splits: dict[str, Any]) -> Iterable[Any]:
        watermark = GaugeMetricFamily("sluice_split_watermark_ms", "Watermark of a source split (ms); absent "
                                      "before its first", labels=["job", "split"])
        idle = GaugeMetricFamily("sluice_split_idle", "1 while a source split is idle", labels=["job", "split"])
        for split, state in sorted(splits.items()):
            value = state.get("watermark_ms")
            if isinstance(value, int) and MIN_WATERMARK < value < MAX_WATERMARK:
                watermark.add_metric([self._job_id, split], float(value))
            idle.add_metric([self._job_id, split], 1.0 if state.get("idle") else 0.0)
        yield watermark
        yield idle


    def _operators(self, operators: dict[str, Any]) -> Iterable[Any]:
        """Records in and out per operator chain (vertex), and each listed subtask's input watermark
        (engine/runtime/operator_metrics.py): Flink's numRecordsIn/Out and currentInputWatermark."""
        labels = ["job", "operator", "operator_name"]
        records_in = CounterMetricFamily("sluice_operator_records_in", "Records an operator chain received "
                                         "(a source chain: records its splits read)", labels=labels)
        records_out = CounterMetricFamily("sluice_operator_records_out", "Records an operator chain sent "
                                          "downstream or handed to its sinks", labels=labels)
        watermark = GaugeMetricFamily("sluice_operator_watermark_ms", "Input watermark of an operator subtask "
                                      "(ms); absent before its first and after the end of input",
                                      labels=[*labels, "subtask"])
        for uid, op in sorted(operators.items()):
            names = [self._job_id, uid, str(op.get("name", uid))]
            if _number(op.get("records_in")):
                records_in.add_metric(names, float(op["records_in"]))
            if _number(op.get("records_out")):
                records_out.add_metric(names, float(op["records_out"]))
            for sub in op.get("subtasks") or ():
                value = sub.get("watermark_ms")
                if isinstance(value, int) and MIN_WATERMARK < value < MAX_WATERMARK:
                    watermark.add_metric([*names, str(sub.get("index"))], float(value))
        yield records_in
        yield records_out
        yield watermark

    def _state_sizes(self, sizes: dict[str, Any]) -> Any:
        family = GaugeMetricFamily("sluice_state_size_bytes", "Bytes of an operator's state in the last completed "
                                   "checkpoint or savepoint", labels=["job", "operator"])
        for uid, size in sorted(sizes.items()):
            if _number(size):
                family.add_metric([self._job_id, uid], float(size))
        return family

    def _epoch_durations(self, epochs: dict[str, Any]) -> Any:
        """The Spark runtime's epoch durations, bucketed by the runtime (engine/runtime/duration_histogram.py):
        the master samples every few seconds and would miss most epochs if it observed them itself."""
        family = HistogramMetricFamily("sluice_epoch_duration_seconds", "Wall time of a Spark epoch (this attempt)",
                                       labels=["job"])
        buckets = [(bound if bound == "+Inf" else floatToGoString(bound), float(n)) for bound, n in epochs["buckets"]]
        family.add_metric([self._job_id], buckets, sum_value=float(epochs.get("sum_s", 0.0)))
        return family


class CheckpointHistograms:
    """Duration, size and alignment of every completed checkpoint and savepoint, as Prometheus histograms.
    ``history`` returns CheckpointRecords (engine/runtime/handle.py), oldest first."""

    def __init__(self, job_id: str, history: Callable[[], list[Any]], registry: CollectorRegistry) -> None:
        self._job_id = job_id
        self._history = history
        self._lock = threading.Lock()
        self._newest_seen = 0
        labels = ["job", "kind"]
        self.duration = Histogram("sluice_checkpoint_duration_seconds", "From trigger to completion",
                                  labels, registry=registry, buckets=DURATION_BUCKETS_S)
        self.size = Histogram("sluice_checkpoint_size_bytes", "State bytes written (where the runtime measures it)",
                              labels, registry=registry, buckets=SIZE_BUCKETS_BYTES)
        self.alignment = Histogram("sluice_checkpoint_alignment_seconds", "Longest barrier alignment of a task",
                                   labels, registry=registry, buckets=DURATION_BUCKETS_S)

    def update(self) -> int:
        """Observe the records newer than the last one seen; returns how many."""
        with self._lock:
            fresh = [r for r in self._history() if r.checkpoint_id > self._newest_seen]
            for record in fresh:
                labels = (self._job_id, record.kind)
                if record.triggered_ms:
                    self.duration.labels(*labels).observe(max(0, record.completed_ms - record.triggered_ms) / 1000)
                if record.size_bytes is not None:
                    self.size.labels(*labels).observe(record.size_bytes)
                self.alignment.labels(*labels).observe(record.alignment_ms_max / 1000)
                self._newest_seen = max(self._newest_seen, record.checkpoint_id)
            return len(fresh)


class JobMetrics:
    """A job master's Prometheus registry: :meth:`render` is the ``/metrics`` body, :meth:`update` feeds the
    checkpoint histograms from ``history`` (CheckpointRecord list, oldest first) between scrapes."""

    def __init__(self, job_id: str, status: Callable[[], dict[str, Any]],
                 history: Callable[[], list[Any]] | None = None) -> None:
        self.registry = CollectorRegistry()
        self.registry.register(_StatusCollector(job_id, status))
        self.histograms = CheckpointHistograms(job_id, history, self.registry) if history is not None else None

    def update(self) -> None:
        if self.histograms is not None:
            self.histograms.update()

    def render(self) -> bytes:
        self.update()
        return generate_latest(self.registry)
