"""The bookkeeping of Flink's ``TwoPhaseCommitSinkFunction``, once, for both runtimes.

A runtime owns one :class:`TwoPhaseCommitDriver` per sink subtask and only
forwards protocol events to it; the driver decides which transaction to
pre-commit, which handles are pending, and what to commit when (seed 001's
"notify" phase, seed 002's recovery):

- ``snapshot_state(n)`` (barrier n reached the sink): pre-commit the open
  transaction, remember its handle as pending under n, begin the next one, and
  return the JSON state to store in checkpoint n: every handle still pending,
  including n's own.
- ``notify_checkpoint_complete(n)``: commit every pending handle with id <= n,
  in id order.  A checkpoint that was aborted keeps its handle pending; the next
  completed checkpoint commits it, because the state was not rolled back and its
  records will not be replayed (Flink does the same).
- ``initialize_state(state)`` on restore from checkpoint k: commit the handles
  k recorded (k completed, but the commit may not have happened before the
  crash; commit is idempotent), then begin a fresh transaction.  Transactions
  pre-committed after k are not in k's state: they are the sink's orphans
  (see ``FileSink.discard_orphaned_staging``).

No I/O of its own and no clock: the sink does the writing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from engine.errors import CorruptSnapshotError, IllegalStateError, UnsupportedFormatVersion

if TYPE_CHECKING:
    # annotations only: engine.io.sink builds drivers (TwoPhaseCommitSink.create_writer), so it imports this module
    from engine.io.sink import CommitHandle, Transaction, TwoPhaseCommitSink

STATE_FORMAT_VERSION = 1


class TwoPhaseCommitDriver:
    """Drives one subtask's :class:`TwoPhaseCommitSink` through checkpoints; see the module docstring."""

    def __init__(self, sink: TwoPhaseCommitSink) -> None:
        self.sink = sink
        self._pending: list[tuple[int, CommitHandle]] = []
        self._current: Transaction | None = None

    @property
    def pending_checkpoint_ids(self) -> list[int]:
        return [checkpoint_id for checkpoint_id, _ in self._pending]

    def initialize_state(self, state: dict | None = None) -> None:
        """Start fresh (``None``) or restore: commit what the restored checkpoint left pending."""
        if state is not None:
            if state.get("format_version") != STATE_FORMAT_VERSION:
                raise UnsupportedFormatVersion(
                    f"two-phase commit sink state has format_version {state.get('format_version')!r}; "
                    f"this Sluice reads version {STATE_FORMAT_VERSION}")
            pending = state.get("pending")
            if not isinstance(pending, list) or any(
                    not isinstance(p, list) or len(p) != 2 or type(p[0]) is not int
                    or (isinstance(p[1], dict) and p[1].get("checkpoint_id") not in (p[0], None)) for p in pending):
                raise CorruptSnapshotError(
                    "two-phase commit sink state: every pending entry must be [checkpoint id, handle] with the "
                    "handle's own checkpoint id; the snapshot was edited or is corrupt")
            self.sink.recover_and_commit(handle for _, handle in pending)
        if self._current is not None:  # started fresh by create_writer, now restored: drop the unused one
            self.sink.abort_transaction(self._current)
        self._pending = []
        self._current = self.sink.begin_transaction()

    def invoke(self, values: Sequence[Any]) -> None:
        if self._current is None:
            raise IllegalStateError("Bug: the sink was written to before initialize_state()")
        self.sink.write(self._current, values)

    #: the runtime's sink operator calls ``write(values)``
    write = invoke

    def open_transaction(self) -> Transaction:
        """The transaction records go to now; a runtime whose tasks stage data themselves (Spark) adds to it."""
        if self._current is None or self._current.is_closed:
            raise IllegalStateError("Bug: the sink has no open transaction (before initialize_state() or after finish())")
        return self._current

    def snapshot_state(self, checkpoint_id: int) -> dict:
        if self._current is None:
            raise IllegalStateError("Bug: snapshot_state() before initialize_state()")
        if self._pending and checkpoint_id <= self._pending[-1][0]:
            raise IllegalStateError(
                f"Bug: checkpoint ids must increase at the sink; got {checkpoint_id} after {self._pending[-1][0]}")
        self._pending.append((checkpoint_id, self.sink.pre_commit(self._current, checkpoint_id)))
        self._current = self.sink.begin_transaction()
        return {"format_version": STATE_FORMAT_VERSION,
                "pending": [[cid, handle] for cid, handle in self._pending]}

    def notify_checkpoint_complete(self, checkpoint_id: int) -> int:
        """Commit every pending transaction up to ``checkpoint_id``; returns how many were committed."""
        ready = [(cid, handle) for cid, handle in self._pending if cid <= checkpoint_id]
        for _, handle in ready:
            self.sink.commit(handle)
        self._pending = [(cid, handle) for cid, handle in self._pending if cid > checkpoint_id]
        return len(ready)

    def abort_current(self) -> None:
        """On cancel or failure: drop the open transaction (pending ones stay for recovery to decide)."""
        if self._current is not None:
            self.sink.abort_transaction(self._current)
            self._current = None

    def finish(self, final_checkpoint_id: int) -> None:
        """End of bounded input: pre-commit and commit everything, as a last checkpoint would."""
        self.snapshot_state(final_checkpoint_id)
        self.notify_checkpoint_complete(final_checkpoint_id)
        self.abort_current()  # the empty transaction begun after the final snapshot
