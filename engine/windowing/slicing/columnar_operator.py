"""The slicing operator's columnar layout: window contents and end-of-window timers in arrays.

For SLICING_COLUMNAR configurations (engine/windowing/variant.py: event-time tumbling/sliding
windows, exactly EventTimeTrigger and the built-in ``sum``, no evictor, window function or allowed
lateness) the contents live in :class:`~engine.windowing.slicing.columnar.ColumnarWindows` and a batch
is folded with a few numpy operations.  A batch the arrays cannot hold exactly (a value they cannot
read, a grid too sparse) moves everything to the heap layout for good first, and so does a restore of
state they cannot take over; from then on the operator is the heap-layout slicing operator it extends.
Results, their order and snapshots are the general operator's (tests/engine/windowing/
test_columnar_windows.py compares them run for run).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine.elements import StreamRecord, Watermark
from engine.operators.base import MaterializedOperatorSnapshot
from engine.state.key_groups import KeyGroupRange
from engine.windowing.slicing.columnar import ColumnarWindows, GridTooSparse
from engine.windowing.slicing.slicing_operator import SlicingWindowOperator
from engine.windowing.variant import WindowOperatorVariant
from engine.windowing.window_operator import DEAD, WINDOW_CONTENTS_STATE, WindowOperatorSnapshot
from engine.state.key_identity import key_identity


class _ColumnarSnapshot(WindowOperatorSnapshot):
    """A snapshot of array contents (frozen copies), turned into the general layout when materialized."""

    def __init__(self, metadata: dict[str, Any], frozen: ColumnarWindows) -> None:
        self.metadata = metadata
        self._frozen = frozen

    def materialize(self) -> MaterializedOperatorSnapshot:
        keyed, timers = self._frozen.snapshot_parts()
        return WindowOperatorSnapshot(self.metadata, keyed, timers).materialize()


class ColumnarSlicingWindowOperator(SlicingWindowOperator):
    """The slicing operator with its windows in arrays, for SLICING_COLUMNAR configurations (module docstring)."""

    RUNS = frozenset({WindowOperatorVariant.SLICING_COLUMNAR})
    REFUSAL = ("incremental_aggregate", "must be the built-in sum on event-time tumbling/sliding windows with exactly "
                                        "EventTimeTrigger and no evictor, window function or allowed lateness for "
                                        "the columnar layout")

    def _build_runtime(self, key_group_range: KeyGroupRange) -> None:
        super()._build_runtime(key_group_range)
        size, slide, offset = self._geometry  # type: ignore[misc]
        #: the arrays, or None once the operator moved to the heap layout (module docstring)
        self._columns: ColumnarWindows | None = ColumnarWindows(
            size=size, slide=slide, offset=offset, field=self.incremental.user_function.field,  # type: ignore[union-attr]
            state_name=WINDOW_CONTENTS_STATE,
            state_kind=self.keyed_state_backend.state_kinds()[WINDOW_CONTENTS_STATE],
            max_parallelism=self.context.max_parallelism, key_group_range=key_group_range,
            key_group_of=self._key_group,
        )

    def process_element(self, record: StreamRecord) -> None:
        if self._columns is None:
            super().process_element(record)
        else:
            self._columnar_batch((record,))

    def process_batch(self, records: Sequence[StreamRecord]) -> None:
        if self._columns is None:
            super().process_batch(records)
        else:
            self._columnar_batch(records)

    def process_watermark(self, watermark: Watermark) -> None:
        if self._columns is None:
            super().process_watermark(watermark)
            return
        self._columnar_watermark(watermark.timestamp)
        self.output.emit_watermark(watermark)

    def _columnar_batch(self, records: Sequence[StreamRecord]) -> None:
        """process_batch with the contents in arrays: the same keys, dead letters, windows, late handling and
        fold as the general batch path; a batch the arrays cannot hold exactly spills them first."""
        columns = self._columns
        values = [r.value for r in records]
        timestamps = [r.timestamp for r in records]
        live: Sequence[StreamRecord] = records
        keys: list[Any] | None = None
        if None not in timestamps:
            try:
                keys = list(map(key_identity, map(self.key_selector, values)))  # type: ignore[arg-type]
            except Exception:  # noqa: BLE001 - a failing selector: the loop below dead-letters it
                pass
        if keys is None:
            # some record goes to the dead-letter output: _key_of takes them one by one
            key_of = self._key_of
            live, keys = [], []
            for record in records:
                key = key_of(record)
                if key is not DEAD:
                    live.append(record)  # type: ignore[attr-defined]
                    keys.append(key)
            if not live:
                return
            values = [r.value for r in live]
            timestamps = [r.timestamp for r in live]
        xs = columns.readable(values)  # type: ignore[union-attr]
        skipped = None
        if xs is not None and columns.timestamps_fit(timestamps):  # type: ignore[union-attr]
            try:
                skipped = columns.add_batch(keys, values, xs, timestamps, self.timer_service.current_watermark())  # type: ignore[union-attr]
            except GridTooSparse:
                pass  # raised before any window was touched
        if skipped is None:
            self._spill_columns()
            set_key = self.keyed_state_backend.set_current_key
            for key, record in zip(keys, live):  # the per-element steps, keys already taken
                set_key(key)
                self._process_keyed(key, record)
            return
        for i in skipped.tolist():
            self._on_skipped_element(live[i])


    def _columnar_watermark(self, time: int) -> None:
        """Raise the watermark, then fire every due window as the timer service would: ascending end, ties in
        timer registration order.  An output that takes columns (a Spark task's router) gets each window's
        results as they come out of the arrays, window by window in the same order; any other output gets
        the watermark's results as one buffer (no window function here, so no side output between them)."""
        svc = self.timer_service
        if time > svc.current_watermark():
            svc.set_current_watermark(time)
        columns = self._columns
        output = self.output
        as_columns = output.takes_columns
        out: list[StreamRecord] = []
        for start in columns.due_starts(time):  # type: ignore[union-attr]
            fired = columns.fire(start, as_columns=as_columns)  # type: ignore[union-attr]
            if not as_columns:
                out.extend(fired)  # type: ignore[arg-type]
            elif len(fired):
                output.collect_columns(fired)
        columns.maybe_compact()  # type: ignore[union-attr]
        if out:
            output.collect_batch(out)

    def _spill_columns(self) -> None:
        """Move the array contents into the general layout for good (registration order kept)."""
        columns, self._columns = self._columns, None
        if columns is None:
            return
        set_key = self.keyed_state_backend.set_current_key
        state = self._contents
        register = self.timer_service.register_event_time_timer_for_key
        for _seq, key, kg, window, value in columns.entries():
            set_key(key)
            state.set_current_namespace(window)
            state.update_internal(value)
            register(key, kg, window, window.end - 1)


    # ---- snapshots --------------------------------------------------------------------------------------
    def _snapshot(self, checkpoint_id: int, frozen: bool) -> WindowOperatorSnapshot:
        columns = self._columns
        if columns is None:
            return super()._snapshot(checkpoint_id, frozen)
        metadata = self._snapshot_base_metadata(checkpoint_id)
        metadata["state_rows"][WINDOW_CONTENTS_STATE] = columns.num_entries()
        # the arrays change in place: frozen copies for a snapshot written while processing goes on
        return _ColumnarSnapshot(metadata, columns.frozen() if frozen else columns)

    def _adopt_restored(self) -> None:
        """Move restored state into the arrays when it has their shape; otherwise the heap layout keeps it."""
        columns = self._columns
        if columns is None:
            return
        backend, svc = self.keyed_state_backend, self.timer_service
        keyed, timers, watermark = backend.snapshot(), svc.snapshot(), svc.current_watermark()
        adopted = False
        if not (set(keyed.state_names) - {WINDOW_CONTENTS_STATE}) and not svc.num_processing_time_timers():
            contents = {(key, ns): value for _kg, key, ns, value in keyed.entries(WINDOW_CONTENTS_STATE)}
            adopted = columns.adopt(contents, timers.event_time_groups(), watermark)
        if not adopted:
            self._columns = None
            return
        self._new_heap(self.context.key_group_range)  # type: ignore[arg-type]
        self.timer_service.set_current_watermark(watermark)
