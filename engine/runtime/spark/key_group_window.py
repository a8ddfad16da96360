"""The shared WindowOperator for one key group of one epoch: the minimal call site, kept as a building block.

It shows ARCHITECTURE section 3's call site in isolation: the very WindowOperator the local runtime
drives (engine/windowing/window_operator.py, seed 000) runs inside a Spark task for one key group
at a time (``OperatorContext.key_group_range`` is that single key group), fed with
``process_batch(records)`` — the epoch's records in (split, offset) order — then with one
watermark; what it emits leaves as rows.  tests/runtime/spark/test_spark_key_group_window.py runs
it on bounded, single-epoch input (the watermark is then MAX_WATERMARK and every window fires).

The job master does not use this module: its window stage (engine/runtime/spark/stages.py
``window_stage``) is the same call plus what a long-running job needs — keyed state and timers
carried between epochs as state rows, W(n-1) before the records and W(n) after them, processing
time, side outputs and dead letters routed as rows, pre-aggregated records
(engine/runtime/spark/preaggregation.py).
"""

from __future__ import annotations

from typing import Any, Callable

import pyarrow as pa

from engine.elements import StreamRecord, Watermark
from engine.operators.base import ListOutput, OneInputStreamOperator, OperatorContext
from engine.runtime.spark.epochs import (
    KEY_COL,
    KEY_GROUP_COL,
    OFFSET_COL,
    PARTITION_KEY_COL,
    SPLIT_COL,
    SUBTASK_COL,
    VALUE_COL,
    map_key_groups,
)
from engine.state import codec
from engine.state.key_groups import KeyGroupRange

#: rows a key-group call emits: the key group, the result's timestamp and the result as codec JSON
WINDOW_OUTPUT_SCHEMA = f"{KEY_GROUP_COL} int, timestamp long, value string"

_INTERNAL = {SPLIT_COL, OFFSET_COL, KEY_COL, KEY_GROUP_COL, SUBTASK_COL, PARTITION_KEY_COL}


def _records(rows: pa.Table, timestamp_field: str) -> list[StreamRecord]:
    if VALUE_COL in rows.column_names:
        values = [codec.decode(v) for v in rows.column(VALUE_COL).to_pylist()]
    else:
        values = rows.select([c for c in rows.column_names if c not in _INTERNAL]).to_pylist()
    return [StreamRecord(v, v.get(timestamp_field)) for v in values]


def window_epoch_call(
    operator_factory: Callable[[], OneInputStreamOperator],
    *,
    operator_id: str,
    parallelism: int,
    max_parallelism: int,
    timestamp_field: str,
    watermark_after_epoch: int,
) -> Callable[[int, int, pa.Table], pa.Table]:
    """The per-key-group function for :func:`epochs.map_key_groups` (runs in the Spark task)."""

    def call(key_group: int, subtask: int, rows: pa.Table) -> pa.Table:
        operator = operator_factory()
        output = ListOutput()
        context = OperatorContext(
            operator_id, subtask, parallelism, max_parallelism, key_group_range=KeyGroupRange(key_group, key_group)
        )
        operator.open(context, output)
        try:
            operator.process_batch(_records(rows, timestamp_field))
            operator.process_watermark(Watermark(watermark_after_epoch))
            operator.finish()
        finally:
            operator.close()
        results = output.records()
        return pa.table({
            KEY_GROUP_COL: pa.array([key_group] * len(results), pa.int32()),
            "timestamp": pa.array([r.timestamp for r in results], pa.int64()),
            "value": pa.array([codec.encode(r.value) for r in results], pa.string()),
        })

    return call


def run_window_epoch(
    placed_epoch: Any,
    operator_factory: Callable[[], OneInputStreamOperator],
    *,
    operator_id: str,
    parallelism: int,
    max_parallelism: int,
    timestamp_field: str,
    watermark_after_epoch: int,
) -> Any:
    """The DataFrame of window results of one epoch (``placed_epoch`` from ``partition_by_subtask``)."""
    call = window_epoch_call(
        operator_factory,
        operator_id=operator_id,
        parallelism=parallelism,
        max_parallelism=max_parallelism,
        timestamp_field=timestamp_field,
        watermark_after_epoch=watermark_after_epoch,
    )
    return map_key_groups(placed_epoch, call, WINDOW_OUTPUT_SCHEMA, parallelism=parallelism,
                          max_parallelism=max_parallelism)
