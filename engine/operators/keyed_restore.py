"""One restore for every keyed operator: keyed state tables, timers and the watermark out of snapshots.

The keyed process operator (engine/operators/keyed_process.py) and every window operator variant
(engine/windowing/) write the same layout: ``keyed/<state name>`` tables, one ``timers`` table and
``current_watermark`` in the metadata.  They read it back here, so the checks a restore makes (the number
of key groups is fixed for the job's life; no unknown table is silently dropped) cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from engine.errors import CorruptSnapshotError, IllegalStateError
from engine.operators.base import MaterializedOperatorSnapshot
from engine.state.keyed_state import HeapKeyedStateBackend
from engine.timers import InternalTimerService

KEYED_TABLE_PREFIX = "keyed/"
TIMERS_TABLE = "timers"


def restore_keyed_snapshots(
    snapshots: Sequence[MaterializedOperatorSnapshot],
    backend: HeapKeyedStateBackend,
    timer_service: InternalTimerService,
    max_parallelism: int,
    operator_kind: str,
) -> None:
    """Load one or more former subtasks' snapshots into an empty ``backend`` and ``timer_service``.

    Rescaling passes several: the backend keeps only its own key groups' rows, and the watermark restored
    is the smallest of theirs, so no timer fires earlier than it would have and no element the old
    subtasks would have accepted is dropped.  ``operator_kind`` names the operator in error messages.
    """
    if backend.num_entries() or timer_service.num_event_time_timers() or timer_service.num_processing_time_timers():
        raise IllegalStateError("initialize_state must be called before any element is processed")
    keyed: dict[str, list[pa.Table]] = {}
    timer_tables: list[pa.Table] = []
    watermarks: list[int] = []
    for snap in snapshots:
        if snap.metadata["max_parallelism"] != max_parallelism:
            raise CorruptSnapshotError(
                f"snapshot of operator {snap.operator_id!r} was taken with max_parallelism "
                f"{snap.metadata['max_parallelism']}, the job now has {max_parallelism}: the number of key "
                "groups cannot change across a restore")
        for name, table in snap.tables.items():
            if name == TIMERS_TABLE:
                timer_tables.append(table)
            elif name.startswith(KEYED_TABLE_PREFIX):
                keyed.setdefault(name[len(KEYED_TABLE_PREFIX):], []).append(table)
            else:
                raise CorruptSnapshotError(f"{operator_kind} snapshot has an unknown table {name!r}")
        if "current_watermark" in snap.metadata:
            watermarks.append(int(snap.metadata["current_watermark"]))
    backend.restore_from_arrow(
        {name: tables[0] if len(tables) == 1 else pa.concat_tables(tables) for name, tables in keyed.items()})
    for table in timer_tables:
        timer_service.restore_from_arrow(table)
    if watermarks:
        timer_service.set_current_watermark(min(watermarks))
