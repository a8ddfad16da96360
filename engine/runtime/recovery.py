"""What both runtimes do between a failed attempt and the next (seed 002 "Recovery").

engine/runtime/local/job_run.py and engine/runtime/spark/job_run.py each run a job as attempts;
these are the steps they share: waiting out the restart strategy's delay, reading the restore point
of the next attempt, and deleting the staged sink parts no completed checkpoint covers.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable, Iterable, Iterator, TypeVar

from checkpoints.errors import SnapshotNotFound, StorageUnavailable
from checkpoints.orphans import staged_parts_in_use
from engine.errors import CorruptSnapshotError, JobFailedError, fenced_cause
from engine.graph.transformations import SinkTransformation, topological_order

log = logging.getLogger(__name__)

C = TypeVar("C")
R = TypeVar("R")


def restart_delay_after(failure: BaseException, backoff: Any, clock: Any, job_name: str = "?") -> int | None:
    """How long to wait before restarting after ``failure``, or None when the job must not restart: its
    restart strategy allows no more, or the master was fenced (another master owns the job).  Logged either
    way: a restart's cause is otherwise lost once the next attempt runs."""
    if fenced_cause(failure) is not None:
        log.error("job %s: fenced, not restarting: %s", job_name, failure)
        return None
    delay_ms = backoff.on_failure(clock.now_ms())
    if delay_ms is None:
        log.error("job %s: attempt failed and the restart strategy allows no more restarts: %s: %s",
                  job_name, type(failure).__name__, failure)
    else:
        log.warning("job %s: attempt failed (%s: %s); restarting in %d ms", job_name, type(failure).__name__,
                    failure, delay_ms)
    return delay_ms


def wait_restart_delay(clock: Any, delay_ms: int) -> None:
    """The restart strategy's delay: a manual clock (tests) advances at once, a real one is slept on."""
    if delay_ms <= 0:
        return
    advance = getattr(clock, "advance", None)
    if advance is not None:
        advance(delay_ms)
    else:
        time.sleep(delay_ms / 1000)


def newest_readable_restore_point(job_name: str, candidates: Iterable[tuple[int, C]], load: Callable[[C], R],
                                  backoff: Any, clock: Any,
                                  committed: Callable[[int], list[str]] | None = None) -> tuple[int, R] | None:
    """The restore point of the next attempt: ``(checkpoint id, load(candidate))`` of the newest candidate that
    loads, or None when there are no candidates (the caller then starts from its savepoint, or from scratch).

    ``candidates``: ``(checkpoint id, candidate)`` of the run's retained checkpoints, newest first; ``load``
    reads and verifies one (files present, sizes and checksums right) before anything is restored.
    ``committed``: which of the job's exactly-once sinks already hold output committed by a checkpoint id
    (:func:`sinks_that_committed`).

    - An unreadable one (``CorruptSnapshotError``, or ``SnapshotNotFound``: its ``_metadata`` is gone) is logged
      and passed over for the one before it, as a restarted Flink master passes over a checkpoint its
      CompletedCheckpointStore cannot retrieve -- unless an exactly-once sink already committed its
      transactions: restoring an older checkpoint would then write the records between the two a second time,
      so the job fails instead, naming the sinks and the ways out.
    - While storage is unreachable (``StorageUnavailable``), the same candidate is read again after the restart
      strategy's backoff: reading the checkpoint is part of restarting, so an outage costs restart attempts,
      not the job.  When the strategy allows no more, the job fails (``JobFailedError``).
    - When candidates exist but none is readable, the job fails with a ``CorruptSnapshotError`` naming each
      problem: starting over instead would emit results the sinks already committed a second time.
    """
    problems: list[str] = []
    for checkpoint_id, candidate in candidates:
        while True:
            try:
                try:
                    return checkpoint_id, load(candidate)
                except (CorruptSnapshotError, SnapshotNotFound) as exc:
                    unreadable: Exception = exc
                holders = committed(checkpoint_id) if committed is not None else []
            except StorageUnavailable as exc:
                delay_ms = backoff.on_failure(clock.now_ms())
                if delay_ms is None:
                    raise JobFailedError(
                        f"job {job_name!r} could not read checkpoint {checkpoint_id} to restart "
                        f"({backoff.describe()}): {exc}; once storage answers, restart the job from its retained "
                        "checkpoints (sluice run --from-savepoint <chk folder>)") from exc
                log.warning("job %s: storage unreachable while restarting (%s); retrying in %d ms",
                            job_name, exc, delay_ms)
                wait_restart_delay(clock, delay_ms)
                continue
            if holders:
                raise CorruptSnapshotError(
                    f"job {job_name!r}: retained checkpoint {checkpoint_id} is unreadable ({unreadable}), and "
                    f"exactly-once sinks already committed its output ({', '.join(holders)}): restoring an older "
                    "checkpoint would write the records between the two a second time. Repair the checkpoint's "
                    "files (sluice inspect <folder> --verify names them), or restore an older snapshot by hand "
                    "accepting those duplicates (sluice run --from-savepoint <older chk folder>)") from unreadable
            problems.append(f"checkpoint {checkpoint_id}: {unreadable}")
            log.warning("job %s: retained checkpoint %d is unreadable, trying the previous one: %s",
                        job_name, checkpoint_id, unreadable)
            break
    if problems:
        raise CorruptSnapshotError(
            f"job {job_name!r}: no retained checkpoint can be restored, and starting over would emit committed "
            f"results again: {'; '.join(problems)}. Restore an older savepoint by hand "
            "(sluice run --from-savepoint <folder>) or inspect the checkpoints (sluice inspect <folder> --verify)")
    return None


def sinks_that_committed(roots: Iterable[Any], checkpoint_id: int) -> list[str]:
    """The exactly-once sinks reachable from ``roots`` whose output already holds what checkpoint
    ``checkpoint_id`` committed (a sink that cannot tell, e.g. an at-least-once one, is not listed)."""
    return [getattr(sink, "path", None) or node.name for node, sink in _sinks(roots)
            if hasattr(sink, "has_committed") and sink.has_committed(checkpoint_id)]


def _sinks(roots: Iterable[Any]) -> Iterator[tuple[Any, Any]]:
    """(node, sink) of every sink reachable from ``roots``."""
    for node in topological_order(list(roots)):
        sink = getattr(node, "sink", None) if isinstance(node, SinkTransformation) else None
        if sink is not None:
            yield node, sink


def discard_orphaned_staging(roots: Iterable[Any], storage: Any = None) -> None:
    """Staged parts of transactions that never reached a completed checkpoint are garbage (FileSink).

    ``roots``: the job's sink nodes; every sink reachable from them that stages parts discards its orphans.
    ``storage``: the job's ``checkpoints.CheckpointStorage`` (None: the job keeps no checkpoints).  What storage
    says a restore may still commit is the truth, not what this process remembers: a part named by any retained
    checkpoint, a completed checkpoint above the index, or a savepoint of the job is kept, so a checkpoint this
    process did not take as retained (an index write it saw fail, an attempt that ended mid-completion) stays
    restorable.  When those snapshots cannot all be read, nothing is deleted (``sluice checkpoints clean
    --output`` removes what is left once the job has stopped).
    """
    keep: set[str] = set()
    if storage is not None:
        try:
            named, unreadable = staged_parts_in_use(storage.store, storage.job_id, storage.savepoint_store)
        except Exception as exc:  # noqa: BLE001 - storage down: keeping garbage is safe, deleting a named part is not
            named, unreadable = None, f"{type(exc).__name__}: {exc}"
        if named is None:
            log.warning("staged sink parts kept: the snapshots that may name them could not all be read (%s)",
                        unreadable)
            return
        keep = named
    for _, sink in _sinks(roots):
        if hasattr(sink, "discard_orphaned_staging"):
            deleted = sink.discard_orphaned_staging(keep_parts=keep)
            if deleted:
                log.info("deleted %d staged part(s) under %s that no restorable snapshot names", deleted,
                         getattr(sink, "path", "?"))


def persist_dead_letters(dead_letters: Any, checkpoint_id: int | str, up_to: int | None = None) -> None:
    """Write the run's pending dead letters as ``checkpoint_id``'s part (engine/io/dead_letter_output.py) when
    it keeps them in a folder.  Never raises: this runs after a checkpoint completed (a failure here must not
    make the runtime take it as failed); what could not be written stays pending for the next checkpoint."""
    persist = getattr(dead_letters, "persist", None)
    if persist is None:
        return
    try:
        persist(checkpoint_id, up_to)
    except Exception as exc:  # noqa: BLE001 - see above
        log.warning("dead letters of checkpoint %s not written yet (%s: %s); retried at the next checkpoint",
                    checkpoint_id, type(exc).__name__, exc)
