"""Prometheus exposition of a job's status, through prometheus_client (no hand-written text format)."""

from __future__ import annotations

from typing import Any, Callable, Iterable

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

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


class _StatusCollector:
    def __init__(self, job_id: str, status: Callable[[], dict[str, Any]]) -> None:
        self._job_id = job_id
        self._status = status

    def collect(self) -> Iterable[Any]:
        status = self._status()
        flat = dict(status)
        flat.update(status.get("metrics", {}) or {})
        for key, (name, help_text, kind) in _FIELDS.items():
            value = flat.get(key)
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                continue
            family = (CounterMetricFamily if kind == "counter" else GaugeMetricFamily)(
                name.removesuffix("_total") if kind == "counter" else name, help_text, labels=["job"])
            family.add_metric([self._job_id], float(value))
            yield family


def metrics_renderer(job_id: str, status: Callable[[], dict[str, Any]]) -> Callable[[], bytes]:
    registry = CollectorRegistry()
    registry.register(_StatusCollector(job_id, status))
    return lambda: generate_latest(registry)
