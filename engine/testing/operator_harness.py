"""Drive one keyed operator subtask by hand (Flink's KeyedOneInputStreamOperatorTestHarness, STYLE section 6).

Feed elements, watermarks and processing time; read the output in order (records and watermarks
interleaved, as downstream would see them), the side outputs, the number of timers and of keyed
state entries.  ``snapshot()`` returns a harness-independent :class:`MaterializedOperatorSnapshot`
(Arrow tables + JSON-able metadata) that a fresh harness restores with ``initialize_state`` before
``open`` — every window scenario restores once midway, as Flink's WindowOperatorTest does.

The harness runs no threads and reads no wall clock: processing time is a ManualClock moved by
:meth:`set_processing_time`.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from engine.api.functions import OutputTag
from engine.clock import ManualClock
from engine.elements import StreamRecord, Watermark, WatermarkStatus
from engine.errors import IllegalStateError
from engine.operators.base import (
    ListOutput,
    MaterializedOperatorSnapshot,
    Metrics,
    OneInputStreamOperator,
    OperatorContext,
    OperatorSnapshot,
)
from engine.state.key_groups import DEFAULT_MAX_PARALLELISM, key_group_range_for_operator


class KeyedOneInputStreamOperatorTestHarness:
    """One subtask of a keyed one-input operator, with recorded output and manual time."""

    def __init__(
        self,
        operator: OneInputStreamOperator,
        key_selector: Callable[[Any], Any] | None = None,
        max_parallelism: int = DEFAULT_MAX_PARALLELISM,
        parallelism: int = 1,
        subtask_index: int = 0,
        operator_id: str = "window-operator",
        initial_processing_time_ms: int = 0,
    ) -> None:
        self.operator = operator
        if key_selector is not None and getattr(operator, "key_selector", None) is None:
            operator.key_selector = key_selector  # type: ignore[attr-defined]
        self.clock = ManualClock(initial_processing_time_ms)
        self.metrics = Metrics()
        self.dead_letters: list[tuple[Any, BaseException, str]] = []
        self.output = ListOutput()
        self.context = OperatorContext(
            operator_id=operator_id,
            subtask_index=subtask_index,
            parallelism=parallelism,
            max_parallelism=max_parallelism,
            key_group_range=key_group_range_for_operator(max_parallelism, parallelism, subtask_index),
            clock=self.clock,
            metrics=self.metrics,
            dead_letter=lambda value, error, stage: self.dead_letters.append((value, error, stage)),
        )
        self._pending_restore: list[Any] = []
        self._opened = False
        self._checkpoint_id = 0

    # ---- lifecycle -------------------------------------------------------------------------------
    def initialize_state(self, *snapshots: MaterializedOperatorSnapshot | OperatorSnapshot) -> None:
        """Restore from snapshots (several = rescaling); call before :meth:`open`."""
        if self._opened:
            raise IllegalStateError("initialize_state must be called before open(), as in Flink's harness")
        self._pending_restore.extend(snapshots)

    def open(self) -> None:
        if self._opened:
            return
        self.operator.open(self.context, self.output)
        if self._pending_restore:
            self.operator.initialize_state(self._pending_restore, self.context.key_group_range)
            self._pending_restore = []
        self._opened = True

    def close(self) -> None:
        self.operator.close()

    def _ensure_open(self) -> None:
        if not self._opened:
            self.open()

    # ---- input -------------------------------------------------------------------------------------
    def process_element(self, value: Any, timestamp: int | None = None) -> None:
        """``process_element(value, ts)`` or ``process_element(StreamRecord(...))``."""
        self._ensure_open()
        record = value if isinstance(value, StreamRecord) and timestamp is None else StreamRecord(value, timestamp)
        self.operator.process_element(record)

    def process_elements(self, records: Iterable[StreamRecord | tuple[Any, int | None]]) -> None:
        """One batch (no watermark between the records): goes to ``process_batch``."""
        self._ensure_open()
        batch = [r if isinstance(r, StreamRecord) else StreamRecord(*r) for r in records]
        self.operator.process_batch(batch)

    def process_watermark(self, watermark: int | Watermark) -> None:
        self._ensure_open()
        self.operator.process_watermark(watermark if isinstance(watermark, Watermark) else Watermark(watermark))

    def process_watermark_status(self, status: WatermarkStatus) -> None:
        self._ensure_open()
        self.operator.process_watermark_status(status)

    def set_processing_time(self, now_ms: int) -> None:
        """Move the clock and fire due processing-time timers."""
        self._ensure_open()
        self.clock.set(now_ms)
        self.operator.advance_processing_time(now_ms)

    def end_input(self) -> None:
        self._ensure_open()
        self.operator.finish()

    # ---- output --------------------------------------------------------------------------------------
    def get_output(self) -> list[Any]:
        """Records, watermarks and statuses in emission order."""
        return list(self.output.elements)

    def get_output_records(self) -> list[StreamRecord]:
        return self.output.records()

    def extract_output_values(self) -> list[Any]:
        return [r.value for r in self.output.records()]

    def side_output(self, tag: OutputTag) -> list[StreamRecord]:
        return list(self.output.side_outputs.get(tag.tag_id, []))

    def clear_output(self) -> None:
        self.output.clear()

    # ---- introspection ---------------------------------------------------------------------------------
    def num_event_time_timers(self) -> int:
        return self.operator.timer_service.num_event_time_timers()  # type: ignore[attr-defined]

    def num_processing_time_timers(self) -> int:
        return self.operator.timer_service.num_processing_time_timers()  # type: ignore[attr-defined]

    def num_keyed_state_entries(self, state_name: str | None = None) -> int:
        return self.operator.keyed_state_backend.num_entries(state_name)  # type: ignore[attr-defined]

    # ---- snapshots ---------------------------------------------------------------------------------------
    def snapshot(self, checkpoint_id: int | None = None) -> MaterializedOperatorSnapshot:
        """Snapshot now and materialize at once (a runtime would materialize later, off the hot path)."""
        self._ensure_open()
        if checkpoint_id is None:
            self._checkpoint_id += 1
            checkpoint_id = self._checkpoint_id
        return self.operator.snapshot_state(checkpoint_id).materialize()

    def restored(
        self, operator: OneInputStreamOperator, parallelism: int | None = None, subtask_index: int | None = None
    ) -> KeyedOneInputStreamOperatorTestHarness:
        """Snapshot this harness and return a fresh, opened harness of ``operator`` restored from it.

        Processing time carries over; output does not (the fresh harness starts empty).  With a
        different ``parallelism``/``subtask_index`` the new subtask keeps only its key groups (rescale).
        """
        snapshot = self.snapshot()
        fresh = KeyedOneInputStreamOperatorTestHarness(
            operator,
            key_selector=getattr(self.operator, "key_selector", None),
            max_parallelism=self.context.max_parallelism,
            parallelism=self.context.parallelism if parallelism is None else parallelism,
            subtask_index=self.context.subtask_index if subtask_index is None else subtask_index,
            operator_id=self.context.operator_id,
            initial_processing_time_ms=self.clock.now_ms(),
        )
        fresh.initialize_state(snapshot)
        fresh.open()
        return fresh
