"""Hold a local job's sources after N records, so a test can act on a running job without racing its end.

A job of a few hundred records ends within tens of milliseconds; a test that polls ``records_in`` and then asks
for a savepoint loses that race on a loaded host (CI saw "cannot take a savepoint of job ... in state
'finished'"). Flink's own tests hold such a job with a source that blocks; here every source split of the local
runtime is made to answer "nothing to read now" (an empty, unfinished ``ReadBatch``, which the ``SplitReader``
contract allows: an idle stretch) from the moment the job has read ``after_records`` records in total until the
test opens the gate. Barriers, control requests and timers go on as usual while the sources are held.

    with SourceGate(after_records=120) as gate:
        client = LocalRuntime(env).submit(...)
        gate.wait_held()
        future = client.stop_with_savepoint(target)   # queued before the sources go on
        gate.open()
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from engine.io.source import ReadBatch
from engine.runtime.local.tasks import SourceTask


class _Idle:
    """A split reader that has nothing to read now; everything else goes to the real reader."""

    def __init__(self, reader: Any) -> None:
        self._reader = reader

    def read(self, max_records: int) -> ReadBatch:
        return ReadBatch([], self._reader.current_offset(), False)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._reader, name)


class SourceGate:
    """A context manager: source tasks are gated inside the ``with`` block (the gate opens on leaving it)."""

    def __init__(self, after_records: int) -> None:
        self.after_records = after_records
        self._patch = pytest.MonkeyPatch()
        self._held = threading.Event()
        self._open = threading.Event()
        self._read: dict[int, int] = {}  # records read per source task (by id), for the job's total
        step = SourceTask.step
        gate = self

        def gated_step(task: SourceTask, budget: int) -> int:
            gate._read[id(task)] = task.records_read
            if gate._open.is_set() or sum(gate._read.values()) < gate.after_records:
                return step(task, budget)
            gate._held.set()
            readers = [(split, split.reader) for split in task.splits]
            for split, reader in readers:
                split.reader = _Idle(reader)
            try:
                return step(task, budget)
            finally:
                for split, reader in readers:
                    split.reader = reader

        self._patch.setattr(SourceTask, "step", gated_step)

    def __enter__(self) -> SourceGate:
        return self

    def __exit__(self, *exc: object) -> None:
        self.open()
        self._patch.undo()

    def wait_held(self, timeout_s: float = 120.0) -> None:
        """Block until the sources are held; fail the test if the job never read ``after_records`` records."""
        if not self._held.wait(timeout_s):
            raise AssertionError(f"the job's sources did not read {self.after_records} records in {timeout_s} s "
                                 f"(read so far: {sum(self._read.values())})")

    def open(self) -> None:
        """Let the sources read on, to the end of their input."""
        self._open.set()


def savepoint_after(submit: Callable[[], Any], records: int, target: str, stop: bool = True,
                    timeout_s: float = 60.0) -> tuple[Any, str]:
    """Submit a local job (``submit()`` returns its client), take a savepoint under ``target`` once it has read
    ``records`` records (and stop it, with ``stop``); returns the client and the savepoint's URI."""
    with SourceGate(after_records=records) as gate:
        client = submit()
        gate.wait_held()
        future = client.stop_with_savepoint(target) if stop else client.trigger_savepoint(target)
        gate.open()
    return client, future.result(timeout=timeout_s)
