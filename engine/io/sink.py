"""Sinks: where a job's results leave, and the two-phase commit that makes them exactly-once.

Seed 002's exactly-once covers state; output is exactly-once only when a sink
makes an epoch's results visible *after* the checkpoint covering them completed.
Flink's ``TwoPhaseCommitSinkFunction`` does that and :class:`TwoPhaseCommitSink`
follows its protocol step for step (seed 001's fourth phase: sinks commit on the
completion notification):

1. ``begin_transaction()`` opens a transaction; ``write(txn, values)`` adds to it.
2. On the barrier for checkpoint n (the snapshot), ``pre_commit(txn, n)`` flushes
   the transaction to a staged, invisible place and returns a JSON *handle*.  The
   runtime stores the handle in the sink's operator state of checkpoint n and
   begins the next transaction.
3. On ``notify_checkpoint_complete(n)``, ``commit(handle)`` makes it visible.
4. On restore from checkpoint k, ``recover_and_commit`` commits the handles
   recorded in k again (the job may have died between completion and commit),
   and ``recover_and_abort`` drops transactions that never reached a completed
   checkpoint.  Because of step 4 ``commit`` must be idempotent: committing a
   committed handle is a no-op.

:class:`Sink` is the plain, non-transactional kind (console, in-memory collect):
values are visible when written, so after a replay they may appear twice.
"""

from __future__ import annotations

import abc
import copy
import logging
import sys
from collections.abc import Iterable, Sequence
from typing import Any, TextIO

from engine.errors import JobDefinitionError
from engine.io.two_phase_commit import TwoPhaseCommitDriver

#: A JSON-able description of a pre-committed transaction, stored in checkpoint state.
CommitHandle = dict


class Sink(abc.ABC):
    """A non-transactional sink: ``write`` makes values visible at once (at-least-once after replay).

    One instance serves one subtask; ``open`` tells it which.
    """

    subtask_index: int = 0
    num_subtasks: int = 1

    def open(self, subtask_index: int = 0, num_subtasks: int = 1) -> None:
        """Called once before the first write, in the process that writes."""
        _check_subtask(subtask_index, num_subtasks)
        self.subtask_index = subtask_index
        self.num_subtasks = num_subtasks

    @abc.abstractmethod
    def write(self, values: Sequence[Any], epoch: int = 0) -> None:
        """Emit ``values`` in order; ``epoch`` is the epoch (Spark) or checkpoint interval (local) they belong to."""

    def close(self) -> None:
        """Flush and release; called when the job ends or the subtask is cancelled."""


class Transaction:
    """An open transaction of one subtask: values written since the last pre-commit.

    Not persisted: only the handle ``pre_commit`` returns goes into a checkpoint.
    """

    __slots__ = ("txn_id", "subtask_index", "values", "staged", "digests", "is_closed")

    def __init__(self, txn_id: str, subtask_index: int) -> None:
        self.txn_id = txn_id
        self.subtask_index = subtask_index
        self.values: list = []
        #: keys of parts already flushed to staging (a large transaction rolls files before pre-commit)
        self.staged: list[str] = []
        #: staged key -> (sha256 hex, bytes) of the part as written, carried into the commit handle
        self.digests: dict[str, tuple[str, int]] = {}
        self.is_closed = False

    def __repr__(self) -> str:
        return f"Transaction({self.txn_id!r}, buffered={len(self.values)}, staged={len(self.staged)})"


class TwoPhaseCommitSink(abc.ABC):
    """Flink's two-phase commit protocol; see the module docstring for when each step runs.

    Handles are plain JSON (a dict), so any instance of the sink (a fresh one after
    a crash, or the driver's when the transaction was written in an executor) can
    commit or abort them.
    """

    subtask_index: int = 0
    num_subtasks: int = 1

    def open(self, subtask_index: int = 0, num_subtasks: int = 1) -> None:
        _check_subtask(subtask_index, num_subtasks)
        self.subtask_index = subtask_index
        self.num_subtasks = num_subtasks

    @abc.abstractmethod
    def begin_transaction(self) -> Transaction: ...

    @abc.abstractmethod
    def write(self, txn: Transaction, values: Sequence[Any]) -> None: ...

    @abc.abstractmethod
    def pre_commit(self, txn: Transaction, checkpoint_id: int) -> CommitHandle:
        """Flush ``txn`` to a staged place (invisible) and describe it; ``txn`` takes no more writes."""

    @abc.abstractmethod
    def commit(self, handle: CommitHandle) -> None:
        """Make a pre-committed transaction visible.  Idempotent: a committed handle commits as a no-op."""

    @abc.abstractmethod
    def abort(self, handle: CommitHandle) -> None:
        """Drop a pre-committed transaction (its checkpoint failed).  Idempotent."""

    @abc.abstractmethod
    def abort_transaction(self, txn: Transaction) -> None:
        """Drop an open transaction that was never pre-committed (cancel, failure mid-epoch)."""

    def create_writer(self, subtask_index: int = 0, num_subtasks: int = 1) -> TwoPhaseCommitDriver:
        """A started driver for one subtask, over its own copy of this sink (subtasks must not share one).

        The driver begins with a fresh transaction; on restore call its
        ``initialize_state(state)`` before the first write.
        """
        sink = copy.copy(self)
        sink.open(subtask_index, num_subtasks)
        driver = TwoPhaseCommitDriver(sink)
        driver.initialize_state(None)
        return driver

    def recover_and_commit(self, handles: Iterable[CommitHandle]) -> None:
        """On restore: commit the handles the restored checkpoint recorded as pending, again."""
        for handle in handles:
            self.commit(handle)

    def recover_and_abort(self, handles: Iterable[CommitHandle]) -> None:
        """On restore: abort transactions pre-committed for checkpoints that never completed."""
        for handle in handles:
            self.abort(handle)

    def close(self) -> None:
        """Release resources; open transactions are the runtime's to abort or pre-commit first."""


def is_transactional(sink: object) -> bool:
    """Whether the runtime must drive ``sink`` through the two-phase commit protocol."""
    return isinstance(sink, TwoPhaseCommitSink)


class PrintSink(Sink):
    """Prints each value on a line, prefixed ``"<subtask+1>> "`` when parallelism > 1 (as Flink's print()).

    The prefix needs ``open(subtask_index, num_subtasks)``: the local runtime opens a copy per subtask; the Spark
    runtime writes every sink that is not staged on the driver, unopened, so there lines have no prefix.

    With ``logger`` the lines go to that logger at INFO instead of a stream.  ``sink_identifier`` (PyFlink's
    ``print(sink_identifier)``) leads every line: ``rows> v``, and ``rows:2> v`` above parallelism 1 (Flink's
    PrintSinkOutputWriter).
    """

    def __init__(self, stream: TextIO | None = None, *, logger: logging.Logger | None = None,
                 prefix: str = "", sink_identifier: str | None = None) -> None:
        self._stream = stream
        self._logger = logger
        self._prefix = prefix
        self._identifier = sink_identifier or ""

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_stream"] = None  # a stream cannot travel to another process; print to its stdout there
        return state

    def write(self, values: Sequence[Any], epoch: int = 0) -> None:
        tag = self._identifier
        if self.num_subtasks > 1:
            tag = f"{tag}:{self.subtask_index + 1}" if tag else str(self.subtask_index + 1)
        lead = self._prefix + (f"{tag}> " if tag else "")
        if self._logger is not None:
            for value in values:
                self._logger.info("%s%s", lead, value)
            return
        stream = self._stream if self._stream is not None else sys.stdout
        for value in values:
            print(f"{lead}{value}", file=stream)
        stream.flush()


class CollectSink(Sink):
    """Keeps every value in memory, in arrival order, for ``execute_and_collect`` of bounded jobs.

    Lives in the process that runs the subtask (the local runtime's, or the Spark
    driver's after results were collected there).  Not transactional: a replay
    after failure appends again, so exactly-once jobs use a committing sink.
    """

    def __init__(self) -> None:
        self.values: list = []

    def write(self, values: Sequence[Any], epoch: int = 0) -> None:
        self.values.extend(values)

    def clear(self) -> None:
        self.values.clear()


def _check_subtask(subtask_index: int, num_subtasks: int) -> None:
    if isinstance(num_subtasks, bool) or not isinstance(num_subtasks, int) or num_subtasks < 1:
        raise JobDefinitionError("num_subtasks", num_subtasks, "must be an int >= 1")
    if isinstance(subtask_index, bool) or not isinstance(subtask_index, int) or not 0 <= subtask_index < num_subtasks:
        raise JobDefinitionError("subtask_index", subtask_index, f"must be in 0..{num_subtasks - 1}")

