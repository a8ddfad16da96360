"""A job master told to stop by a signal suspends its job (Flink's JobStatus.SUSPENDED).

``sluice run`` is stopped the ordinary way by SIGTERM (Airflow killing or timing out its task,
systemd stopping the unit, Kubernetes terminating the pod) or SIGINT (Ctrl-C).  Flink's
JobManager in an HA setup, shut down that way, neither finishes nor cancels its jobs: it
suspends them, keeps their retained checkpoints and leaves them to the next JobManager.  A
Sluice master does the same (:meth:`engine.master.master.JobMaster.suspend`): no savepoint,
nothing new committed, retained checkpoints kept, the status document says SUSPENDED with the
signal and the time, and the lease is released once the job has stopped, so a successor
restoring the newest checkpoint starts at once.  The process then exits with 128 + the
signal's number (143 for SIGTERM, 130 for SIGINT), as a shell reports a process the signal
ended.

The handler only decides.  It runs in the main thread between two bytecodes, possibly while that
thread holds a lock (starting a thread, writing to stderr), so it takes none: it writes with
``os.write`` and sets attributes.

- before the master holds the job's lease nothing is held or running: exit at once;
- otherwise: ``master.request_suspend(signum)``.  ``master.wait()``, which the main thread runs
  once ``start()`` returned, notices the request within a fraction of a second and suspends the job;
- a second signal while suspending: exit at once; the lease then expires after its ttl.

A signal the process started with ignored stays ignored (:meth:`SuspendOnSignal.install`).
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any, Callable

#: the signals a job master suspends its job on; any other keeps its default action
SIGNALS = (signal.SIGTERM, signal.SIGINT)


def exit_status(signum: int) -> int:
    """128 + the signal's number: what a shell reports for a process that a signal ended (143, 130)."""
    return 128 + signum


def _to_stderr(line: str) -> None:
    """Straight to file descriptor 2: ``print`` could find the main thread's stderr buffer locked."""
    os.write(sys.stderr.fileno(), (line + "\n").encode("utf-8", "replace"))


class SuspendOnSignal:
    """Installed by ``sluice run`` for the life of its master (SIGTERM and SIGINT); see the module docstring.

    ``announce`` prints a line for operators (stderr); ``exit_now`` ends the process without clean-up
    (``os._exit``).  Both are parameters so the decisions can be tested without a process."""

    def __init__(self, master: Any, announce: Callable[[str], None] = _to_stderr,
                 exit_now: Callable[[int], Any] = os._exit) -> None:
        self.master = master
        self.announce = announce
        self.exit_now = exit_now
        #: the first signal received, if any
        self.signum: int | None = None
        self._previous: dict[int, Any] = {}

    def install(self) -> SuspendOnSignal:
        """Handle SIGTERM and SIGINT, except one the process started with ignored: ``sluice run ... &`` in a
        script (or under nohup) ignores SIGINT, so the script's Ctrl-C is not for the master (Python itself
        keeps an inherited SIG_IGN the same way)."""
        for signum in SIGNALS:
            if signal.getsignal(signum) is not signal.SIG_IGN:
                self._previous[signum] = signal.signal(signum, self.on_signal)
        return self

    def uninstall(self) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous.clear()

    def on_signal(self, signum: int, frame: Any) -> None:
        name = signal.Signals(signum).name
        status = exit_status(signum)
        if self.signum is not None:
            self.announce(f"{name} received again while suspending the job: exiting at once with status {status}. "
                          "The job's lease is not released; it expires after its ttl (--lease-ttl), so start the "
                          "next master with --lease-wait")
            self.exit_now(status)
            return
        self.signum = signum
        if self.master.lease is None and self.master.client is None:
            self.announce(f"{name} received before the job started: exiting with status {status}; nothing was "
                          "started and no lease is held")
            self.exit_now(status)
            return
        self.announce(f"{name} received: suspending the job (no savepoint, retained checkpoints kept, the lease "
                      f"released once the job has stopped), then exiting with status {status}. Send {name} "
                      "again to exit at once")
        self.master.request_suspend(signum)
