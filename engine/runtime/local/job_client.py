"""The control handle of a running local job, for the job master (savepoints, stop, cancel, status).

The job runs on its own scheduler thread; every request is queued on the run's
control-request queue (engine/runtime/control.py, shared with the Spark runtime) and served there
between scheduling rounds, so the protocol
objects (coordinator, tasks) stay single-threaded (seed 001: the coordinator runs
in the job master's main thread).  Requests that take time return a
:class:`concurrent.futures.Future`.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import Any

from engine.checkpointing.config import validate_checkpoint_storage_dir
from engine.errors import JobDefinitionError


class LocalJobClient:
    """A handle on one submitted job: ``LocalRuntime(env).submit(job_name, sinks)``."""

    def __init__(self, run: Any) -> None:
        self._run = run
        self._result: Future = Future()
        self._thread = threading.Thread(target=self._main, name=f"sluice-job-{run.job_id}", daemon=True)

    @property
    def job_id(self) -> str:
        return self._run.job_id

    def start(self) -> None:
        self._thread.start()

    def _main(self) -> None:
        try:
            self._result.set_result(self._run.run())
        except BaseException as exc:  # noqa: BLE001 - delivered to whoever waits for the result
            self._result.set_exception(exc)

    def trigger_savepoint(self, target_dir: str) -> Future:
        """Take a savepoint under ``target_dir`` (``file:///...`` or ``s3://...``); the future gives its folder URI."""
        return self._savepoint(target_dir, stop=False, drain=False)

    def stop_with_savepoint(self, target_dir: str, drain: bool = False) -> Future:
        """Savepoint, then stop; ``drain`` first sends MAX_WATERMARK so every window fires (Flink's --drain)."""
        return self._savepoint(target_dir, stop=True, drain=drain)

    def _savepoint(self, target_dir: str, stop: bool, drain: bool) -> Future:
        if not isinstance(drain, bool):
            raise JobDefinitionError("drain", drain, "must be a bool")
        target = validate_checkpoint_storage_dir(target_dir)
        return self._run.requests.submit("stop" if stop else "savepoint", target, drain)

    def cancel(self) -> None:
        """Stop the job without a savepoint; retained checkpoints follow ExternalizedCheckpointRetention."""
        self._run.requests.submit("cancel")

    def status(self) -> Any:
        """A JobStatusReport: state, attempt, restarts, last completed checkpoint, watermark, records in/out."""
        return self._run.status()

    def checkpoint_history(self) -> list[Any]:
        """Completed checkpoints and savepoints of every attempt, oldest first (CheckpointRecord): the newest
        ``max_checkpoint_history`` (engine/histories.py)."""
        return list(self._run.history)

    def wait(self, timeout_s: float | None = None) -> Any:
        """Block until the job ends; returns its JobExecutionResult or raises its failure."""
        return self._result.result(timeout_s)

    def done(self) -> bool:
        return self._result.done()
