"""The slicing operator: non-merging windows, the built-in time trigger and an incremental aggregate.

Flink's Table runtime runs such windows on a slicing window operator; this is ours.  It runs exactly the
:data:`~engine.windowing.variant.WindowOperatorVariant.SLICING` and ``SLICING_COLUMNAR``
configurations (variant.py): an incremental aggregate, no evictor, a non-merging assigner and exactly
the built-in trigger of its time domain (EventTimeTrigger / ProcessingTimeTrigger).  Those triggers only
register one timer per window and fire on it, so:

* a batch is folded per (key, window), with one state read and write per group, in arrival order, and
  the timers a group's first element would register (:meth:`SlicingWindowOperator.process_batch`);
  tumbling and sliding windows are computed arithmetically (sliding event-time ones keep one entry per
  element, not per window), other assigners' windows come from ``assign_windows``;
* a watermark fires due windows with the trigger's decisions inlined
  (:meth:`SlicingWindowOperator._advance_watermark_fast`).

Two layouts: this class, the heap layout, keeps contents and timers in the general operator's keyed
state backend and timer service; its subclass in columnar_operator.py (SLICING_COLUMNAR: event-time
tumbling/sliding, exactly the built-in ``sum``, no window function, no allowed lateness) keeps them in
arrays (engine/windowing/slicing/columnar.py) and spills to the heap layout for good when a batch does
not fit them.  Both give the general operator's results in the same order and write its snapshot format; an
element the batch path cannot fold (its window is at or behind the watermark) takes the general
operator's per-element steps, which this class inherits.

Not here: sessions (engine/windowing/slicing/session_operator.py), evictors, custom or count triggers
(engine/windowing/window_operator.py).  Panes shared by sliding windows (Flink's slices of
gcd(size, slide)) are what the Spark pre-aggregation folds; this operator still keeps one accumulator
per window.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Callable

from engine.api.functions import ProcessWindowFunction
from engine.elements import MAX_WATERMARK, StreamRecord, Watermark
from engine.state.key_groups import KeyGroupRange
from engine.windowing.slicing.batch_fold import batch_folder
from engine.windowing.variant import WindowOperatorVariant, window_geometry
from engine.windowing.window_operator import DEAD, WindowOperator
from engine.windowing.windows import TimeWindow

#: bound of the sliding batch path's per-key table of registered runs (cleared wholesale when reached)
_SLIDING_RUNS_LIMIT = 1_000_000


class SlicingWindowOperator(WindowOperator):
    """The window operator for SLICING configurations, heap layout (module docstring); the columnar layout
    is :class:`~engine.windowing.slicing.columnar_operator.ColumnarSlicingWindowOperator`."""

    RUNS = frozenset({WindowOperatorVariant.SLICING, WindowOperatorVariant.SLICING_COLUMNAR})
    REFUSAL = ("assigner", "must be a non-merging window with exactly its domain's time trigger, an incremental "
                           "aggregate and no evictor for the slicing operator")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._geometry = window_geometry(self.assigner)
        self._fold = batch_folder(self.incremental)  # type: ignore[arg-type]
        #: firings may go downstream as one buffer: no ProcessWindowFunction, so no side outputs while firing
        self._fire_in_buffers = not isinstance(self.function.window_function, ProcessWindowFunction)

    def _build_runtime(self, key_group_range: KeyGroupRange) -> None:
        super()._build_runtime(key_group_range)
        #: process_batch's windows by start, and the keys whose timers they are known to have (see
        #: _batch_register); tied to this timer service
        self._batch_windows: dict[int, TimeWindow] = {}
        self._batch_registered: dict[int, set] = {}
        #: the sliding event-time batch path's per-key runs of windows known to have their timers (see
        #: _batch_sliding_event_time); tied to this timer service
        self._sliding_registered: dict[Any, tuple[int, int]] = {}

    # ---- watermarks and processing time ----------------------------------------------------------------
    def process_watermark(self, watermark: Watermark) -> None:
        """Fire due windows, then forward the watermark (seed 004)."""
        if self.is_event_time:
            self._advance_watermark_fast(watermark.timestamp)
        else:
            self.timer_service.advance_watermark(watermark.timestamp)
        if self._batch_windows:
            self._prune_batch_windows(self.timer_service.current_watermark())
        self.output.emit_watermark(watermark)

    def advance_processing_time(self, now_ms: int) -> None:
        super().advance_processing_time(now_ms)
        if self._batch_windows and not self.is_event_time:
            self._prune_batch_windows(self.timer_service.current_processing_time())

    def _advance_watermark_fast(self, time: int) -> None:
        """``timer_service.advance_watermark`` with ``_on_timer`` inlined (event time, so the trigger is
        exactly EventTimeTrigger).

        Same steps in the same order: the watermark rises first, then due timers fire in timestamp
        order, each with its key current; EventTimeTrigger.on_event_time FIREs exactly when the
        timer is the window's max timestamp; the cleanup timer clears the window's state.  Only
        the InternalTimer objects, the trigger call and the TriggerResult checks are skipped.
        Without a ProcessWindowFunction (the only function that can also write side outputs while
        firing) the results of one watermark go downstream as one buffer, in firing order.
        """
        svc = self.timer_service
        if time > svc.current_watermark():
            svc.set_current_watermark(time)
        poll = svc.poll_due_event_time
        delete_timer = svc.delete_event_time_timer
        set_key = self.keyed_state_backend.set_current_key
        state = self._contents
        function = self.function
        # no window function: a firing emits the aggregate's result as is (InternalWindowFunction.emit_inputs)
        get_result = self.incremental.get_result if function.window_function is None else None  # type: ignore[union-attr]
        emit = function.emit_accumulator
        clear_function = function.clear if isinstance(function.window_function, ProcessWindowFunction) else None
        pctx = self._process_ctx
        lateness = self.allowed_lateness_ms
        collect_batch = self.output.collect_batch if self._fire_in_buffers else None
        collect = self.output.collect
        out: list[StreamRecord] = []
        while True:
            due = poll(time)
            if due is None:
                break
            ts, key, window = due
            set_key(key)
            max_ts = window.max_timestamp()
            cleanup = max_ts + lateness
            is_cleanup = ts == (cleanup if cleanup < MAX_WATERMARK else MAX_WATERMARK)  # cleanup_time(window)
            state.set_current_namespace(window)
            if ts == max_ts:  # EventTimeTrigger.on_event_time: FIRE
                if get_result is not None and collect_batch is not None and is_cleanup:
                    # fire, then clear the contents: one removal instead of a read and a removal
                    contents = state.pop_internal()
                    if contents is not None:
                        out.append(StreamRecord(get_result(contents), max_ts))
                    # EventTimeTrigger.clear deletes the max-timestamp timer: the one just polled
                    continue
                contents = state.get_internal()
                if contents is not None:
                    pctx.current_window = window
                    if collect_batch is None:
                        for v in emit(key, window, pctx, contents):
                            collect(StreamRecord(v, max_ts))
                    elif get_result is not None:
                        out.append(StreamRecord(get_result(contents), max_ts))
                    else:
                        out.extend([StreamRecord(v, max_ts) for v in emit(key, window, pctx, contents)])
            if is_cleanup:
                # _clear_all_state, not merging: contents, EventTimeTrigger.clear (its timer), the function's state
                state.set_current_namespace(window)
                state.clear()
                if ts != max_ts:  # at max_ts, the timer EventTimeTrigger.clear deletes is the one just polled
                    delete_timer(window, max_ts)
                if clear_function is not None:
                    pctx.current_window = window
                    clear_function(pctx)
        if out:
            collect_batch(out)  # type: ignore[misc]


    def process_batch(self, records: Sequence[StreamRecord]) -> None:
        """Process records that arrived with no watermark between them; same result as one by one.

        Elements are grouped per (key, window) and
        folded into the accumulator with one state read and one write per group, in arrival order, so
        even a non-associative aggregate gives the per-element result.  Timers are registered when a
        group is first seen, in the order per-element processing would register them, so ties fire in
        the same order.  Those two triggers only register a timer per element (Flink's EventTimeTrigger
        / ProcessingTimeTrigger), which is why skipping the per-element trigger call is exact.

        A window at or behind the watermark takes the per-element steps for that element: late but
        allowed, each such element fires the window again in Flink; beyond lateness, the window is
        skipped and an element no window took goes to the side output or is dropped.  Such a window is
        never also in the batch's groups (a window is behind the watermark or not, and the watermark
        does not move inside a batch), so the groups' fold order is still the arrival order.

        Tumbling and sliding assigners have their windows computed arithmetically, and built-in
        sum/min/max/min_by/max_by fold the field directly (engine.windowing.aggregations, ``vectorized``)
        with the very comparisons and additions ``add`` would do, in the same order.
        """
        backend = self.keyed_state_backend
        timers = self.timer_service
        event_time = self.is_event_time
        lateness = self.allowed_lateness_ms
        watermark = timers.current_watermark()
        key_of = self._key_of
        geometry = self._geometry
        # (key, window start or window) -> values, in first-seen order (dicts keep insertion order)
        groups: dict[tuple[Any, Any], list] = {}
        if geometry is None:
            self._batch_by_assigner(records, groups, watermark)
        elif event_time and geometry[0] != geometry[1]:
            self._batch_sliding_event_time(records, watermark)
            return
        else:
            size, slide, offset = geometry
            registered = self._batch_registered
            now = self.context.clock.now_ms()
            for record in records:
                key = key_of(record)
                if key is DEAD:
                    continue
                value = record.value
                ts = record.timestamp if event_time else now
                start = ts - (ts - offset) % slide
                if size == slide:
                    if event_time and start + size - 1 <= watermark:
                        # behind the watermark: exactly the per-element path (fires at once, or is late)
                        backend.set_current_key(key)
                        self._process_keyed(key, record)
                        continue
                    group = (key, start)
                    values = groups.get(group)
                    if values is None:
                        groups[group] = [value]
                        keys = registered.get(start)
                        if keys is None or key not in keys:
                            self._batch_register(key, start, size, lateness)
                    else:
                        values.append(value)
                    continue
                kept = False
                lowest = ts - size
                while start > lowest:  # the assigner's windows, in its (descending start) order
                    if event_time and start + size - 1 <= watermark:
                        # a window behind the watermark takes the per-element steps; no group holds it
                        window = TimeWindow(start, start + size)
                        start -= slide
                        if self.cleanup_time(window) <= watermark:
                            continue
                        kept = True
                        backend.set_current_key(key)
                        self._add_and_trigger(key, window, value, record.timestamp)
                        continue
                    kept = True
                    group = (key, start)
                    values = groups.get(group)
                    if values is None:
                        groups[group] = [value]
                        keys = registered.get(start)
                        if keys is None or key not in keys:
                            self._batch_register(key, start, size, lateness)
                    else:
                        values.append(value)
                    start -= slide
                if not kept:
                    self._on_skipped_element(record)
        if not groups:
            return
        self._contents.fold_entries(  # type: ignore[attr-defined]
            groups.items(), self._fold, None if geometry is None else self._batch_windows
        )


    def _batch_sliding_event_time(self, records: Sequence[StreamRecord], watermark: int) -> None:
        """process_batch for the built-in sliding event-time assigner: one entry per element, not per window.

        Per element, in arrival order, exactly what the per-(key, window) grouping does: windows in
        the assigner's (descending start) order; those ahead of the watermark have their timers
        registered at the element that first reaches them, then those behind it take the
        per-element steps at once (fire again if within allowed lateness, else skipped); an
        element no window took is late.  The element itself is kept once, with the run of window
        starts ahead of the watermark it belongs to, per key in arrival order; at the end every
        (key, window) is folded with the values of the elements in that window, in arrival order,
        so each accumulator sees the very fold of per-element processing.

        Which timers to register: ``_sliding_registered`` keeps per key one run [lo, hi] of window
        starts whose end-of-window and cleanup timers are registered.  Registering a timer that
        exists is a no-op (the timer service deduplicates), and with exactly EventTimeTrigger,
        non-merging, nothing but firing (at watermark >= the window's end) removes them, so for a
        window still ahead of the watermark "in the run" means "registered".  A window outside the
        run is registered (a no-op if it was after all); a run that an element's windows neither
        overlap nor touch is replaced by the element's, which only forgets, never invents, a
        registration.  The table is cleared whole when it reaches its bound (forgetting again).
        """
        backend = self.keyed_state_backend
        timers = self.timer_service
        register = timers.register_event_time_timer_for_key
        key_of = self._key_of
        size, slide, offset = self._geometry  # type: ignore[misc]
        lateness = self.allowed_lateness_ms
        windows = self._batch_windows
        runs = self._sliding_registered
        # the lowest start whose window ends after the watermark: start + size - 1 > watermark
        first_ahead = watermark - size + 2
        per_key: dict[Any, list] = {}
        for record in records:
            key = key_of(record)
            if key is DEAD:
                continue
            value = record.value
            ts = record.timestamp
            hi = ts - (ts - offset) % slide
            # the assigner's lowest start: the last of hi, hi - slide, ... still > ts - size
            lo = hi - ((hi - ts + size - 1) // slide) * slide
            if lo > hi:  # no window at all (size < slide leaves gaps)
                self._on_skipped_element(record)
                continue
            ahead_lo = lo
            if lo < first_ahead:
                # some windows are at or behind the watermark: the lowest start of those ahead
                ahead_lo = hi - ((hi - first_ahead) // slide) * slide if hi >= first_ahead else hi + slide
            if ahead_lo <= hi:
                entries = per_key.get(key)
                if entries is None:
                    per_key[key] = [(hi, ahead_lo, value)]
                else:
                    entries.append((hi, ahead_lo, value))
                run = runs.get(key)
                if run is None or ahead_lo < run[0] or hi > run[1]:
                    self._sliding_register(key, hi, ahead_lo, run, size, lateness, register)
            if ahead_lo > lo:
                # windows behind the watermark, in the assigner's order: exactly the per-element steps
                kept = ahead_lo <= hi
                start = ahead_lo - slide
                while start >= lo:
                    window = TimeWindow(start, start + size)
                    start -= slide
                    if self.cleanup_time(window) <= watermark:
                        continue
                    kept = True
                    backend.set_current_key(key)
                    self._add_and_trigger(key, window, value, ts)
                if not kept:
                    self._on_skipped_element(record)
        if not per_key:
            return

        fold = self._fold

        def window_at(start: int) -> TimeWindow:
            # every window in a run was put in _batch_windows when registered and is only pruned once behind
            # the watermark; this is the belt to those braces
            window = windows[start] = TimeWindow(start, start + size)
            return window

        def entries_by_key():
            for key, entries in per_key.items():
                if len(entries) == 1:
                    hi, ahead_lo, value = entries[0]
                    values = [value]
                    yield key, [(windows.get(start) or window_at(start), values)
                                for start in range(hi, ahead_lo - 1, -slide)]
                    continue
                by_start: dict[int, list] = {}
                for hi, ahead_lo, value in entries:
                    for start in range(hi, ahead_lo - 1, -slide):
                        vs = by_start.get(start)
                        if vs is None:
                            by_start[start] = [value]
                        else:
                            vs.append(value)
                yield key, [(windows.get(start) or window_at(start), vs) for start, vs in by_start.items()]

        self._contents.fold_key_entries(entries_by_key(), fold)  # type: ignore[attr-defined]

    def _sliding_register(self, key: Any, hi: int, lo: int, run: tuple[int, int] | None, size: int,
                          lateness: int, register: Callable) -> None:
        """Register the timers of the windows [lo, hi] (starts) of one element outside the key's known run, in
        the assigner's (descending start) order, and update the run (see _batch_sliding_event_time)."""
        slide = self._geometry[1]  # type: ignore[index]
        backend = self.keyed_state_backend
        backend.set_current_key(key)
        kg = backend.current_key_group
        windows = self._batch_windows
        for start in range(hi, lo - 1, -slide):
            if run is not None and run[0] <= start <= run[1]:
                continue
            window = windows.get(start)
            if window is None:
                window = windows[start] = TimeWindow(start, start + size)
            # EventTimeTrigger.on_element registers max_timestamp, then comes the cleanup timer (the same
            # timer again without allowed lateness: registering it twice is a no-op)
            max_ts = start + size - 1
            register(key, kg, window, max_ts)
            cleanup = max_ts + lateness
            if cleanup != max_ts and cleanup < MAX_WATERMARK:
                register(key, kg, window, cleanup)
        runs = self._sliding_registered
        if run is not None and lo <= run[1] + slide and hi >= run[0] - slide:
            runs[key] = (min(lo, run[0]), max(hi, run[1]))
        else:
            if run is None and len(runs) >= _SLIDING_RUNS_LIMIT:
                runs.clear()
            runs[key] = (lo, hi)

    def _batch_register(self, key: Any, start: int, size: int, lateness: int) -> None:
        """Register the timers per-element processing would register for a (key, window) group's first element.

        ``_batch_windows`` maps a window start to its one TimeWindow object (so state and timer
        dicts match it by identity, not by calling the dataclass ``__eq__``); in event time,
        ``_batch_registered`` maps it to the keys whose end-of-window and cleanup timers are known
        to be registered.  Those timers are exactly what the trigger and the cleanup would register
        again, and they cannot have fired or been deleted while the window is ahead of the
        watermark (only firing, at watermark >= their time, and the cleanup after it remove them;
        this operator's trigger is exactly EventTimeTrigger, non-merging), so registering them
        again would be a no-op.  :meth:`_prune_batch_windows` forgets windows the watermark has
        passed; elements of such windows take the per-element path anyway.
        """
        window = self._batch_windows.get(start)
        if window is None:
            window = self._batch_windows[start] = TimeWindow(start, start + size)
        backend = self.keyed_state_backend
        backend.set_current_key(key)
        kg = backend.current_key_group
        max_ts = start + size - 1
        timers = self.timer_service
        if self.is_event_time:
            keys = self._batch_registered.get(start)
            if keys is None:
                keys = self._batch_registered[start] = set()
            keys.add(key)
            # EventTimeTrigger.on_element registers max_timestamp, then comes the cleanup timer (the same
            # timer again without allowed lateness: registering it twice is a no-op)
            timers.register_event_time_timer_for_key(key, kg, window, max_ts)  # type: ignore[arg-type]
            cleanup = max_ts + lateness
            if cleanup != max_ts and cleanup < MAX_WATERMARK:
                timers.register_event_time_timer_for_key(key, kg, window, cleanup)  # type: ignore[arg-type]
        else:
            timers.register_processing_time_timer_for_key(key, kg, window, max_ts)  # type: ignore[arg-type]

    def _prune_batch_windows(self, time: int) -> None:
        """Forget the batch path's windows whose end the watermark (processing time) has reached (see
        :meth:`_batch_register`), so the tables stay as small as the set of open windows."""
        windows = self._batch_windows
        if windows and self._geometry is not None:
            size = self._geometry[0]
            for start in [s for s in windows if s + size - 1 <= time]:
                del windows[start]
                self._batch_registered.pop(start, None)

    def _batch_by_assigner(self, records: Sequence[StreamRecord], groups: dict, watermark: int) -> None:
        """process_batch's grouping for assigners whose windows only ``assign_windows`` knows."""
        backend = self.keyed_state_backend
        timers = self.timer_service
        assign = self.assigner.assign_windows
        actx = self._contexts
        key_of = self._key_of
        event_time = self.is_event_time
        lateness = self.allowed_lateness_ms
        now = self.context.clock.now_ms()
        key_groups: dict[Any, int] = {}
        for record in records:
            key = key_of(record)
            if key is DEAD:
                continue
            value, timestamp = record.value, record.timestamp
            kept = False
            for window in assign(value, timestamp, actx):
                if event_time and window.max_timestamp() <= watermark:
                    # a window behind the watermark takes the per-element steps; no group holds it
                    if self.cleanup_time(window) <= watermark:
                        continue
                    kept = True
                    backend.set_current_key(key)
                    self._add_and_trigger(key, window, value, timestamp)
                    continue
                kept = True
                group = (key, window)
                values = groups.get(group)
                if values is None:
                    groups[group] = [value]
                    kg = key_groups.get(key)
                    if kg is None:
                        backend.set_current_key(key)
                        kg = key_groups[key] = backend.current_key_group  # type: ignore[assignment]
                    max_ts = window.max_timestamp()
                    if event_time:
                        timers.register_event_time_timer_for_key(key, kg, window, max_ts)
                        cleanup = max_ts + lateness
                        if cleanup < MAX_WATERMARK:
                            timers.register_event_time_timer_for_key(key, kg, window, cleanup)
                    else:
                        timers.register_processing_time_timer_for_key(key, kg, window, max_ts)
                else:
                    values.append(value)
            if not kept:
                self._on_skipped_element(record)
