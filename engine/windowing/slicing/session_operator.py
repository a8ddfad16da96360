"""The session operator: event-time session windows with a fixed gap and an incremental aggregate.

The general operator merges sessions through a MergingWindowSet in keyed state, loading and storing the
key's whole set for every element.  This variant keeps per-key session objects and bucketed end-of-window
timers instead (engine/windowing/slicing/sessions.py), with the same results in the same order and the
same snapshots.  It runs exactly :data:`WindowOperatorVariant.SESSION` configurations (variant.py): no
evictor, no window function, no allowed lateness, exactly EventTimeTrigger.

Restored state that the layout cannot take over (state a trigger or function kept beside the contents,
processing-time timers) stays in the general layout, and the operator then runs as the general one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine.elements import StreamRecord, Watermark
from engine.state.key_groups import KeyGroupRange
from engine.windowing.aggregations import SumAggregate
from engine.windowing.merging_window_set import MERGING_WINDOW_SET_STATE
from engine.windowing.slicing.batch_fold import batch_folder
from engine.windowing.slicing.sessions import SessionWindows
from engine.windowing.variant import WindowOperatorVariant
from engine.windowing.window_operator import WINDOW_CONTENTS_STATE, WindowOperator, WindowOperatorSnapshot


class SessionWindowOperator(WindowOperator):
    """The window operator for :data:`WindowOperatorVariant.SESSION` (module docstring)."""

    RUNS = frozenset({WindowOperatorVariant.SESSION})
    REFUSAL = ("assigner", "must be EventTimeSessionWindows with a fixed gap, with exactly EventTimeTrigger, an "
                           "incremental aggregate and no evictor, window function or allowed lateness for the session "
                           "operator")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._gap: int = self.assigner.gap_ms  # type: ignore[attr-defined]
        self._fold = batch_folder(self.incremental)  # type: ignore[arg-type]

    def _build_runtime(self, key_group_range: KeyGroupRange) -> None:
        super()._build_runtime(key_group_range)
        kinds = self.keyed_state_backend.state_kinds()
        #: the session layout, or None once restored state kept the general layout (module docstring)
        self._sessions: SessionWindows | None = SessionWindows(
            gap=self._gap, fold=self._fold, merge=self.incremental.merge,  # type: ignore[union-attr]
            get_result=self.incremental.get_result,  # type: ignore[union-attr]
            contents_state=(WINDOW_CONTENTS_STATE, kinds[WINDOW_CONTENTS_STATE]),
            merging_state=(MERGING_WINDOW_SET_STATE.name, kinds[MERGING_WINDOW_SET_STATE.name]),
            max_parallelism=self.context.max_parallelism, key_group_range=key_group_range,
            key_group_of=self._key_group, sum_position=self._sum_position(),
        )

    def _sum_position(self) -> int | None:
        """The tuple position of a built-in ``sum(position)``, which the session layout folds on arrival."""
        fn = self.incremental.user_function  # type: ignore[union-attr]
        if type(fn) is SumAggregate and type(fn.field) is int:
            return fn.field
        return None

    # ---- elements and watermarks ----------------------------------------------------------------------
    def process_element(self, record: StreamRecord) -> None:
        if self._sessions is None:
            super().process_element(record)
        else:
            self.process_batch((record,))

    def process_batch(self, records: Sequence[StreamRecord]) -> None:
        """Keys and dead letters as the general path takes them, then the sessions' per-element merging
        steps, then late handling of the elements no session took."""
        sessions = self._sessions
        if sessions is None:
            super().process_batch(records)
            return
        late = sessions.add_batch(records, self.key_selector, self._key_error,  # type: ignore[arg-type]
                                  self.timer_service.current_watermark())
        for record in late:
            self._on_skipped_element(record)

    def process_watermark(self, watermark: Watermark) -> None:
        """Raise the watermark, then fire every due session as the timer service would (ascending end, ties
        in timer registration order); the results of one watermark go downstream as one buffer."""
        sessions = self._sessions
        if sessions is None:
            super().process_watermark(watermark)
            return
        svc = self.timer_service
        if watermark.timestamp > svc.current_watermark():
            svc.set_current_watermark(watermark.timestamp)
        out = sessions.fire(watermark.timestamp)
        if out:
            self.output.collect_batch(out)
        self.output.emit_watermark(watermark)

    # ---- snapshots --------------------------------------------------------------------------------------
    def _snapshot(self, checkpoint_id: int, frozen: bool) -> WindowOperatorSnapshot:
        sessions = self._sessions
        if sessions is None:
            return super()._snapshot(checkpoint_id, frozen)
        metadata = self._snapshot_base_metadata(checkpoint_id)
        # built now (O(open sessions)): the session objects change in place as processing goes on
        keyed, timers = sessions.snapshot_parts()
        metadata["state_rows"] = {name: keyed.num_entries(name) for name in keyed.state_names}
        return WindowOperatorSnapshot(metadata, keyed, timers)

    def _adopt_restored(self) -> None:
        """Move restored state into the session layout when it has its shape; otherwise the general layout
        keeps it and the operator runs as the general one from now on."""
        backend, svc = self.keyed_state_backend, self.timer_service
        keyed, timers, watermark = backend.snapshot(), svc.snapshot(), svc.current_watermark()
        adopted = False
        if (not (set(keyed.state_names) - {WINDOW_CONTENTS_STATE, MERGING_WINDOW_SET_STATE.name})
                and not svc.num_processing_time_timers()):
            contents = {(key, ns): value for _kg, key, ns, value in keyed.entries(WINDOW_CONTENTS_STATE)}
            mapping = {key: rows for _kg, key, _ns, rows in keyed.entries(MERGING_WINDOW_SET_STATE.name)}
            adopted = self._sessions.adopt(contents, mapping, timers.event_time_groups(), watermark)  # type: ignore[union-attr]
        if not adopted:
            self._sessions = None
            return
        self._new_heap(self.context.key_group_range)  # type: ignore[arg-type]
        self.timer_service.set_current_watermark(watermark)
