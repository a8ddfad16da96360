"""``JobClient``: the handle ``env.execute_async()`` returns (PyFlink's JobClient shape).

It wraps a runtime's own handle (LocalJobClient, or the Spark runtime's) and
adds what the job master needs on top: a flat status dict with throughput and
event-time lag, and the checkpoint history as plain JSON data.
"""

from __future__ import annotations

import collections
import dataclasses
import threading
import time
from concurrent.futures import Future
from typing import Any

from engine.elements import MAX_WATERMARK, MIN_WATERMARK
from engine.errors import JobDefinitionError

#: Flink's JobStatus names for the runtimes' lower-case states
_FLINK_STATE = {
    "created": "CREATED", "running": "RUNNING", "restarting": "RESTARTING", "finished": "FINISHED",
    "stopped": "FINISHED", "cancelled": "CANCELED", "canceled": "CANCELED", "failed": "FAILED",
}


#: the window ``records_per_second`` is measured over (Flink's meters use a minute; a status page wants less)
RATE_WINDOW_S = 10.0


class JobClient:
    def __init__(self, handle: Any, job_name: str, default_savepoint_dir: str | None, parallelism: int) -> None:
        self._handle = handle
        self._job_name = job_name
        self._default_savepoint_dir = default_savepoint_dir
        self._parallelism = parallelism
        self._rate_lock = threading.Lock()
        #: (time, records_in) samples of the last RATE_WINDOW_S, oldest first
        self._rate_samples: collections.deque[tuple[float, int]] = collections.deque()
        self._result: Future = Future()
        threading.Thread(target=self._await_result, name=f"sluice-client-{handle.job_id}", daemon=True).start()

    def _await_result(self) -> None:
        try:
            self._result.set_result(self._handle.wait())
        except BaseException as exc:  # noqa: BLE001 - handed to whoever asks for the result
            self._result.set_exception(exc)

    # -- PyFlink's JobClient ---------------------------------------------------------------------
    def get_job_id(self) -> str:
        return self._handle.job_id

    def get_job_status(self) -> str:
        return _FLINK_STATE.get(self._handle.status().state, self._handle.status().state.upper())

    def cancel(self) -> None:
        self._handle.cancel()

    def _target(self, savepoint_directory: str | None) -> str:
        target = savepoint_directory or self._default_savepoint_dir
        if not target:
            raise JobDefinitionError("savepoint_directory", savepoint_directory,
                                     "is required: the job was started without a default savepoint directory",
                                     "Pass a target directory (file:///... or s3://...)")
        return target

    def trigger_savepoint(self, savepoint_directory: str | None = None) -> Future:
        """Future of the savepoint's folder URI."""
        return self._handle.trigger_savepoint(self._target(savepoint_directory))

    def stop_with_savepoint(self, advance_to_end_of_event_time: bool = False,
                            savepoint_directory: str | None = None) -> Future:
        """Future of the savepoint's folder URI; the job stops after it (drains first when asked)."""
        return self._handle.stop_with_savepoint(self._target(savepoint_directory), drain=advance_to_end_of_event_time)

    def get_job_execution_result(self) -> Future:
        return self._result

    # -- for the job master ----------------------------------------------------------------------
    def _records_per_second(self, now: float, records_in: int) -> float:
        """Input rate over the last RATE_WINDOW_S.  Between two calls a moment apart the count may not move
        (the Spark runtime counts once per epoch): a rate between consecutive calls read 0.0 there, then spiked."""
        samples = self._rate_samples
        samples.append((now, records_in))
        while len(samples) > 2 and now - samples[1][0] >= RATE_WINDOW_S:
            samples.popleft()  # keep one sample at least the window old: the rate spans the whole window
        then, before = samples[0]
        if now <= then or records_in < before:  # one sample yet, or a restart counted from an older position
            return 0.0
        return (records_in - before) / (now - then)

    def status_details(self) -> dict[str, Any]:
        report = self._handle.status()
        history = self._handle.checkpoint_history()
        completed = [r for r in history if r.status == "completed"]
        now = time.time()
        with self._rate_lock:
            rate = self._records_per_second(now, report.records_in)
        watermark = report.watermark_ms
        has_watermark = MIN_WATERMARK < watermark < MAX_WATERMARK
        return {
            "job_id": report.job_id,
            "job_name": report.job_name,
            "state": _FLINK_STATE.get(report.state, report.state.upper()),
            "attempt": report.attempt,
            "restarts": report.restarts,
            "parallelism": self._parallelism,
            "last_completed_checkpoint": report.last_completed_checkpoint_id,
            "last_completed_ms": completed[-1].completed_ms if completed else None,
            "num_completed_checkpoints": report.num_completed_checkpoints,  # exact; the history is bounded
            "num_failed_checkpoints": report.num_failed_checkpoints,
            "watermark_ms": watermark if has_watermark else None,
            "lag_ms": int(now * 1000) - watermark if has_watermark else None,
            "records_in": report.records_in,
            "records_out": report.records_out,
            "records_per_second": round(rate, 1),
            "epoch": report.epoch,
            "failures": [{"message": f} for f in report.failures],
            "metrics": dict(report.metrics),
            "splits": {sid: dict(s) for sid, s in report.splits.items()},
            "operators": {uid: {**op, "subtasks": [dict(st) for st in op.get("subtasks", ())]}
                          for uid, op in report.operators.items()},
            "state_size_bytes": dict(report.state_size_bytes),
            "epoch_durations": None if report.epoch_durations is None else dict(report.epoch_durations),
        }

    def checkpoint_history(self) -> list[dict[str, Any]]:
        return [dataclasses.asdict(r) for r in self.checkpoint_records()]

    def checkpoint_records(self) -> list[Any]:
        """The history as CheckpointRecords, unconverted: what the master's metrics read every few seconds."""
        return self._handle.checkpoint_history()
