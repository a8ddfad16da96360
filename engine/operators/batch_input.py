"""BATCH execution of a keyed operator (Flink's ``RuntimeExecutionMode.BATCH``, engine/api/execution_mode.py).

In BATCH mode Flink sorts a keyed operator's input by key and timestamp, and runs each key's records with the
watermark at its minimum; then, per key, every event-time timer fires (the watermark at its maximum), then every
processing-time timer.  No record is late, a rolling ``reduce``/``sum``/... emits only its final value per key,
and the final results equal those of STREAMING mode without late data.  Measured with apache-flink 2.3.0
(a keyed process function printing ``current_watermark()`` and its timers; reduce and windows on the same input).

:class:`BatchKeyedInput` does this around any keyed operator: it keeps the subtask's records until the end of
input, hands them to the operator stably sorted by timestamp (a key's records in timestamp order, records
without a timestamp in arrival order first), then MAX_WATERMARK (event-time timers and windows fire), then moves
processing time to its end (processing-time timers fire).  Each key sees exactly Flink's sequence; keys are
interleaved where Flink takes them one after another, so only the order *between* keys' outputs differs.
Watermarks and watermark statuses before the end are dropped.  The records are held in memory (Flink sorts
externally, spilling to disk): a BATCH job's keyed input must fit the subtask's memory.
"""

from __future__ import annotations

from typing import Any, Sequence

from engine.elements import MAX_WATERMARK, StreamRecord, Watermark, WatermarkStatus
from engine.operators.base import OneInputStreamOperator, OperatorContext, Output, OutputTag

__all__ = ["BatchKeyedInput"]

_NO_TIMESTAMP = float("-inf")


class _FinalPerKey(Output):
    """A rolling aggregate's output in BATCH mode: only the last record per key, emitted at the end."""

    def __init__(self, downstream: Output, operator: Any) -> None:
        self._downstream = downstream
        self._operator = operator
        self._last: dict[Any, StreamRecord] = {}

    def collect(self, record: StreamRecord) -> None:
        key = self._operator.keyed_state_backend.get_current_key()
        self._last.pop(key, None)  # re-inserted: a key's position is that of its last update
        self._last[key] = record

    def collect_side(self, tag: OutputTag, record: StreamRecord) -> None:
        self._downstream.collect_side(tag, record)

    def emit_watermark(self, watermark: Watermark) -> None:
        self._downstream.emit_watermark(watermark)

    def emit_watermark_status(self, status: WatermarkStatus) -> None:
        self._downstream.emit_watermark_status(status)

    def flush(self) -> None:
        for record in self._last.values():
            self._downstream.collect(record)
        self._last.clear()


class BatchKeyedInput(OneInputStreamOperator):
    """``operator`` run the BATCH way: its input sorted by timestamp and released at the end of input.

    Every step of the operator protocol (engine/operators/base.py) is delegated explicitly, and so is the one
    attribute a runtime reads off a keyed operator: ``keyed_state_backend``, by which a restore (a BATCH job may
    start from a STREAMING job's savepoint) hands each subtask the former subtasks whose key groups meet its own.
    Anything else the wrapped operator has is reached as ``.operator``."""

    def __init__(self, operator: OneInputStreamOperator, final_only: bool = False) -> None:
        self.operator = operator
        #: a rolling aggregate: emit only each key's final value
        self.final_only = final_only
        self._records: list[StreamRecord] = []

    def open(self, context: OperatorContext, output: Output) -> None:
        super().open(context, output)
        self._final = _FinalPerKey(output, self.operator) if self.final_only else None
        self.operator.open(context, self._final or output)

    def process_element(self, record: StreamRecord) -> None:
        self._records.append(record)

    def process_batch(self, records: Sequence[StreamRecord]) -> None:
        self._records.extend(records)

    def process_watermark(self, watermark: Watermark) -> None:
        if watermark.timestamp < MAX_WATERMARK:
            return  # BATCH: no progressive watermark; the operator's stays at its minimum
        records, self._records = self._records, []
        records.sort(key=lambda r: _NO_TIMESTAMP if r.timestamp is None else r.timestamp)
        self.operator.process_batch(records)
        self.operator.process_watermark(watermark)  # event-time timers and windows fire
        self.operator.advance_processing_time(MAX_WATERMARK)  # then the processing-time timers
        if self._final is not None:
            self._final.flush()

    def process_watermark_status(self, status: WatermarkStatus) -> None:
        pass  # idleness does not exist without progressive watermarks

    def advance_processing_time(self, now_ms: int) -> None:
        pass  # processing-time timers fire at the end of input, after the event-time ones

    @property
    def keyed_state_backend(self) -> Any:
        """The wrapped operator's (set when it is opened)."""
        return self.operator.keyed_state_backend

    def snapshot_state(self, checkpoint_id: int) -> Any:
        return self.operator.snapshot_state(checkpoint_id)

    def snapshot_now(self, checkpoint_id: int) -> Any:
        return self.operator.snapshot_now(checkpoint_id)

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        self.operator.notify_checkpoint_complete(checkpoint_id)

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        self.operator.notify_checkpoint_aborted(checkpoint_id)

    def initialize_state(self, snapshots: Any, key_group_range: Any = None) -> None:
        self.operator.initialize_state(snapshots, key_group_range)

    def finish(self) -> None:
        self.operator.finish()

    def close(self) -> None:
        self.operator.close()

    def release(self) -> None:
        self.operator.release()
        super().release()
