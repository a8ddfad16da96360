"""PyFlink's state backend names, for ``env.set_state_backend(...)``.

Sluice keeps keyed state in one layout on every runtime: per key group, in the heap of the process running the
subtask (the local runtime's task, a Spark task during an epoch, state rows between epochs), snapshotted to
Arrow files (engine/state/).  That is Flink's ``HashMapStateBackend``.  ``EmbeddedRocksDBStateBackend`` is
accepted so a program that sets it runs, with a warning: its state is not spilled to disk, so a job whose
keyed state outgrows memory fails where RocksDB would have kept going.
"""

from __future__ import annotations

import logging

__all__ = ["StateBackend", "HashMapStateBackend", "EmbeddedRocksDBStateBackend"]

log = logging.getLogger(__name__)


class StateBackend:
    """Base of the state backends ``set_state_backend`` takes."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class HashMapStateBackend(StateBackend):
    """Keyed state as objects on the heap: what Sluice does."""


class EmbeddedRocksDBStateBackend(StateBackend):
    """Accepted for portability; Sluice keeps the state on the heap all the same (module docstring)."""

    def __init__(self, enable_incremental_checkpointing: bool | None = None) -> None:
        self.enable_incremental_checkpointing = enable_incremental_checkpointing
        log.warning("EmbeddedRocksDBStateBackend: Sluice keeps keyed state on the heap (HashMapStateBackend); "
                    "state that outgrows memory is not spilled to disk")
