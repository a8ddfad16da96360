"""What both runtimes do between a failed attempt and the next (seed 002 "Recovery").

Both runtimes run a job as attempts through the one restart loop (engine/runtime/attempts.py); these
are the steps around it they share: which sinks already committed a checkpoint's output, deleting the
staged sink parts no completed checkpoint covers, and persisting the run's dead letters.
"""

from __future__ import annotations

import logging
from typing import Any, Iterable, Iterator

from checkpoints.orphans import staged_parts_in_use
from engine.graph.transformations import SinkTransformation, topological_order

log = logging.getLogger(__name__)


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
