"""The window operator: assigner, trigger, evictor and window function working together (seed 000).

Seed 000 describes the flow this module implements, one step per method:

* every element goes to the :class:`WindowAssigner`, which names its window(s) — "Window 本身只是一个ID
  标识符"; the contents live in keyed state with the window as namespace;
* every window has its own :class:`Trigger` (its state in keyed state, its timers in the timer service);
  its result CONTINUE / FIRE / PURGE / FIRE_AND_PURGE decides whether the contents are evaluated and/or
  dropped ("一个窗口可以被重复计算多次直到它被 purge");
* on FIRE the contents go through the :class:`Evictor` (if any), then the window function, then the
  evictor again (``evict_after``); the remaining elements are written back (Flink's
  EvictingWindowOperator);
* incremental functions (reduce/aggregate/sum...) keep one accumulator per window, unless an evictor is
  set, in which case all elements are kept.

Behaviour follows Flink's Java ``WindowOperator`` / ``EvictingWindowOperator``:

* a window is *late* (``is_window_late``) when it is event-time and ``max_timestamp + allowed_lateness``
  <= watermark; its element is not added there;
* an element all of whose windows were late, and that is itself late (``is_element_late``: ``timestamp +
  allowed_lateness <= watermark``) goes to the late-data side output if set, else it is dropped and
  counted in ``num_late_records_dropped``;
* every window gets a cleanup timer at ``max_timestamp + allowed_lateness`` (event time) or
  ``max_timestamp`` (processing time), never for a window that does not end (GlobalWindow); at cleanup
  the contents, the trigger state and the function's per-window state are cleared;
* merging (session) assigners go through :class:`MergingWindowSet`: merged windows' contents and trigger
  state are merged, their timers cleared, the merge result gets new ones;
* results carry the timestamp ``window.max_timestamp()`` (Flink's TimestampedCollector).

Errors: exceptions of user functions (assigner, trigger, evictor, window function) propagate and fail the
task.  A key selector that raises, a record without timestamp reaching an event-time window, or a field a
built-in ``sum``/``min``/``max``/``min_by``/``max_by`` cannot fold (None; a str under ``sum``: stage
``aggregate``) are data problems: the record goes to ``context.dead_letter`` and is counted in ``num_dead_letter_records``.

Variants: this is the general operator, for any assigner, trigger, evictor and function, element by
element (count windows fold a batch with CountTrigger inlined).  Common shapes run in variants beside
it, chosen by one predicate (engine/windowing/variant.py): the slicing operator (non-merging
windows with the built-in time trigger and an incremental aggregate, heap or columnar layout) and the
session operator (event-time sessions with a fixed gap).  They subclass this one, keep its element
path for the elements they cannot fold (late but allowed ones, a layout that gave up), and write and
read this operator's snapshot format, so a snapshot restores across variants.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Callable, ClassVar

from engine.api.functions import OutputTag
from engine.elements import MAX_WATERMARK, StreamRecord, Watermark
from engine.errors import IllegalStateError, JobDefinitionError, MissingTimestampError
from engine.operators.base import (
    MaterializedOperatorSnapshot,
    OneInputStreamOperator,
    OperatorContext,
    Output,
    checking_key_selector,
    dead_letter_stage,
    materialize_all,
)
from engine.operators.keyed_process import KeyedOperatorSnapshot
from engine.operators.keyed_restore import restore_keyed_snapshots
from engine.state.descriptors import AggregatingStateDescriptor, ListStateDescriptor, StateDescriptor
from engine.state.key_identity import key_identity
from engine.state.key_groups import KeyGroupRange
from engine.state.keyed_state import HeapKeyedStateBackend
from engine.timers import InternalTimer, InternalTimerService
from engine.windowing.assigners import GlobalWindows, MergingWindowAssigner, WindowAssigner, default_trigger_of
from engine.windowing.evictors import Evictor, TimestampedValue
from engine.windowing.internal_window_function import IncrementalAggregation, InternalWindowFunction
from engine.windowing.merging_window_set import MERGING_WINDOW_SET_STATE, MergingWindowSet
from engine.windowing.triggers import CountTrigger, Trigger, TriggerResult
from engine.windowing.variant import WindowOperatorVariant, window_operator_variant
from engine.windowing.window_contexts import AssignerEvictorContext, WindowProcessContext, WindowTriggerContext
from engine.windowing.windows import GLOBAL_WINDOW

WINDOW_CONTENTS_STATE = "window-contents"

#: what a key selector gives for a record it cannot key (the record went to the dead-letter output)
DEAD = object()
_CONTINUE = TriggerResult.CONTINUE
_FIRE = TriggerResult.FIRE
_FIRE_AND_PURGE = TriggerResult.FIRE_AND_PURGE


class WindowOperatorSnapshot(KeyedOperatorSnapshot):
    """Keyed state (copy-on-write) + timers (copied) + watermark, materialized to Arrow on demand: a keyed
    operator's snapshot layout (engine/operators/keyed_process.py), which every window operator variant shares."""


class WindowOperator(OneInputStreamOperator):
    """Flink's WindowOperator and EvictingWindowOperator in one class (the evictor is optional).

    Build window operators with :func:`engine.windowing.slicing.create_window_operator`, which picks the
    variant for the configuration; constructing this class directly always gives the general one.

    ``incremental_aggregate``: a reduce callable, ReduceFunction or AggregateFunction, or None.
    ``window_function``: a ProcessWindowFunction, WindowFunction or callable ``(key, window, inputs)``
    applied to each firing's inputs, or None to emit the aggregate's result as is.
    """

    #: the variants (engine/windowing/variant.py) a subclass runs, checked at construction; None: any
    RUNS: ClassVar[frozenset[WindowOperatorVariant] | None] = None
    #: the parameter named, and why, when a subclass is built for a configuration outside ``RUNS``
    REFUSAL: ClassVar[tuple[str, str]] = ("assigner", "")

    def __init__(
        self,
        assigner: WindowAssigner,
        trigger: Trigger | None = None,
        evictor: Evictor | None = None,
        window_function: Any = None,
        allowed_lateness_ms: int = 0,
        late_data_output_tag: OutputTag | None = None,
        key_selector: Callable[[Any], Any] | None = None,
        incremental_aggregate: Any = None,
    ) -> None:
        if not isinstance(assigner, WindowAssigner):
            raise JobDefinitionError("assigner", assigner, "must be a WindowAssigner")
        if trigger is None:
            trigger = default_trigger_of(assigner)  # a PyFlink-style assigner takes the env argument
        if not isinstance(trigger, Trigger):
            raise JobDefinitionError("trigger", trigger, "must be a Trigger")
        if evictor is not None and not isinstance(evictor, Evictor):
            raise JobDefinitionError("evictor", evictor, "must be an Evictor or None")
        if isinstance(allowed_lateness_ms, bool) or not isinstance(allowed_lateness_ms, int) or allowed_lateness_ms < 0:
            raise JobDefinitionError("allowed_lateness_ms", allowed_lateness_ms, "must be an int >= 0 (ms)")
        if late_data_output_tag is not None and not isinstance(late_data_output_tag, OutputTag):
            raise JobDefinitionError("late_data_output_tag", late_data_output_tag, "must be an OutputTag or None")
        if key_selector is not None and not callable(key_selector):
            raise JobDefinitionError("key_selector", key_selector, "must be a callable value -> key")
        self.merging = isinstance(assigner, MergingWindowAssigner)
        if self.merging and not trigger.can_merge():
            raise JobDefinitionError(
                "trigger",
                trigger,
                f"must support merging (can_merge() is True) with the merging assigner {assigner}",
                "Session windows merge, so their trigger state and timers must merge too",
            )
        self.assigner = assigner
        self.trigger = trigger
        self.evictor = evictor
        self.allowed_lateness_ms = allowed_lateness_ms
        self.late_data_output_tag = late_data_output_tag
        # a built-in sum/min/max... also rejects a record whose field it cannot fold: a dead letter, as an unkeyable
        # record is (engine/windowing/aggregations.py, "Bad data"), in this operator and every variant
        self.key_selector = checking_key_selector(key_selector, incremental_aggregate)
        self.incremental = None if incremental_aggregate is None else IncrementalAggregation(incremental_aggregate)
        self.function = InternalWindowFunction(window_function, self.incremental)
        self.is_event_time = assigner.is_event_time()
        #: the window keeps an accumulator (True) or its elements (False; always with an evictor)
        self.keeps_accumulator = self.incremental is not None and evictor is None
        if self.keeps_accumulator:
            self._contents_descriptor: StateDescriptor = AggregatingStateDescriptor(
                WINDOW_CONTENTS_STATE, aggregate_function=self.incremental
            )
        else:
            self._contents_descriptor = ListStateDescriptor(WINDOW_CONTENTS_STATE)
        #: GlobalWindows with exactly CountTrigger (count windows, sliding ones with CountEvictor): see
        #: _batch_count_trigger
        self._count_batch = type(assigner) is GlobalWindows and type(trigger) is CountTrigger
        if self.RUNS is not None:
            variant = window_operator_variant(assigner, trigger, evictor, window_function, allowed_lateness_ms,
                                              incremental_aggregate, specialized=True)
            if variant not in self.RUNS:
                parameter, why = self.REFUSAL
                raise JobDefinitionError(
                    parameter, {"assigner": assigner, "incremental_aggregate": incremental_aggregate}[parameter],
                    f"{why} (this configuration is a {variant.value} window)",
                    "Build window operators with engine.windowing.slicing.create_window_operator, which picks the "
                    "operator for the configuration")

    # ---- lifecycle ----------------------------------------------------------------------------------
    def open(self, context: OperatorContext, output: Output) -> None:
        super().open(context, output)
        if self.key_selector is None:
            raise JobDefinitionError("key_selector", None, "is required: a window operator runs on a keyed stream")
        self._build_runtime(context.key_group_range)  # type: ignore[arg-type]
        for fn in self.function.functions():
            fn.open(context)

    def _build_runtime(self, key_group_range: KeyGroupRange) -> None:
        """Everything tied to one key-group range: the state and timers, and the contexts user code sees.
        A variant extends it with its own layout (engine/windowing/slicing/)."""
        self._new_heap(key_group_range)
        self._contexts = AssignerEvictorContext(self)
        self._trigger_ctx = WindowTriggerContext(self)
        self._process_ctx = WindowProcessContext(self)

    def _new_heap(self, key_group_range: KeyGroupRange) -> None:
        """The general layout's keyed state backend and timer service (empty; the watermark starts over)."""
        ctx = self.context
        self.keyed_state_backend = HeapKeyedStateBackend(ctx.max_parallelism, key_group_range, ttl_clock=ctx.clock)
        self.timer_service = InternalTimerService(self.keyed_state_backend, self, key_group_range, ctx.max_parallelism)
        self._contents = self.keyed_state_backend.get_partitioned_state(self._contents_descriptor)
        self._merging_state = (
            self.keyed_state_backend.get_partitioned_state(MERGING_WINDOW_SET_STATE) if self.merging else None
        )

    def _key_group(self, key: Any) -> int:
        """The key's key group, checked against this subtask's range (raises as set_current_key does)."""
        backend = self.keyed_state_backend
        backend.set_current_key(key)
        return backend.current_key_group  # type: ignore[return-value]

    def close(self) -> None:
        for fn in self.function.functions():
            fn.close()

    # ---- time predicates (Flink names) ------------------------------------------------------------------
    def cleanup_time(self, window: Any) -> int:
        """When a window's state is dropped; MAX_WATERMARK means never (GlobalWindow, overflow)."""
        if self.is_event_time:
            t = window.max_timestamp() + self.allowed_lateness_ms
            return t if t < MAX_WATERMARK else MAX_WATERMARK
        return window.max_timestamp()

    def is_window_late(self, window: Any) -> bool:
        return self.is_event_time and self.cleanup_time(window) <= self.timer_service.current_watermark()

    def is_element_late(self, timestamp: int | None) -> bool:
        return (
            self.is_event_time
            and timestamp is not None
            and timestamp + self.allowed_lateness_ms <= self.timer_service.current_watermark()
        )

    def _register_cleanup_timer(self, window: Any) -> None:
        t = self.cleanup_time(window)
        if t == MAX_WATERMARK:
            return
        if self.is_event_time:
            self.timer_service.register_event_time_timer(window, t)
        else:
            self.timer_service.register_processing_time_timer(window, t)

    def _delete_cleanup_timer(self, window: Any) -> None:
        t = self.cleanup_time(window)
        if t == MAX_WATERMARK:
            return
        if self.is_event_time:
            self.timer_service.delete_event_time_timer(window, t)
        else:
            self.timer_service.delete_processing_time_timer(window, t)

    # ---- elements ---------------------------------------------------------------------------------------
    def _key_of(self, record: StreamRecord) -> Any:
        """The record's key, or DEAD after handing the record to the dead-letter callback."""
        if record.timestamp is None and self.is_event_time:
            self._dead_letter(
                record.value,
                MissingTimestampError(
                    "record has no timestamp, so an event-time window cannot place it; assign timestamps with "
                    "stream.assign_timestamps_and_watermarks(WatermarkStrategy...) before the window"
                ),
                "window_assign",
            )
            return DEAD
        try:
            # the key's identity (engine/state/key_identity.py): 1, 1.0 and True group apart, as in Flink
            return key_identity(self.key_selector(record.value))  # type: ignore[misc]
        except Exception as exc:  # noqa: BLE001 - a failing key selector is a data problem: dead letter
            self._dead_letter(record.value, exc, dead_letter_stage(exc))
            return DEAD

    def _key_error(self, record: StreamRecord, error: BaseException | None) -> None:
        """What _key_of does with a record it cannot key: no timestamp (``error`` None) or a failing selector."""
        if error is None:
            self._key_of(record)  # checks the timestamp first: the dead letter without calling the selector
        else:
            self._dead_letter(record.value, error, dead_letter_stage(error))

    def _dead_letter(self, value: Any, error: BaseException, stage: str) -> None:
        self.context.metrics.inc("num_dead_letter_records")
        self.context.dead_letter(value, error, stage)

    def process_element(self, record: StreamRecord) -> None:
        key = self._key_of(record)
        if key is DEAD:
            return
        self.keyed_state_backend.set_current_key(key)
        self._process_keyed(key, record)

    def _process_keyed(self, key: Any, record: StreamRecord) -> None:
        value, timestamp = record.value, record.timestamp
        windows = self.assigner.assign_windows(value, timestamp, self._contexts)
        trigger = self.trigger
        ctx = self._trigger_ctx
        skipped = True
        if self.merging:
            merging_windows = self._merging_window_set()
            for window in windows:
                actual = merging_windows.add_window(window, self._merge_function(key))
                if self.is_window_late(actual):
                    merging_windows.retire_window(actual)
                    continue
                skipped = False
                state_window = merging_windows.get_state_window(actual)
                if state_window is None:
                    raise IllegalStateError(f"Window {actual!r} is not in the in-flight window set")
                self._add_to_contents(state_window, value, timestamp)
                ctx.window = actual
                result = trigger.on_element(value, timestamp, actual, ctx)
                self._apply_trigger_result(result, key, actual, state_window)
                self._register_cleanup_timer(actual)
            merging_windows.persist()
        else:
            for window in windows:
                if self.is_window_late(window):
                    continue
                skipped = False
                self._add_and_trigger(key, window, value, timestamp)
        if skipped:
            self._on_skipped_element(record)

    def _add_and_trigger(self, key: Any, window: Any, value: Any, timestamp: int | None) -> None:
        """One (non-merging) window's part of processElement: add, ask the trigger, register cleanup."""
        self._add_to_contents(window, value, timestamp)
        ctx = self._trigger_ctx
        ctx.window = window
        result = self.trigger.on_element(value, timestamp, window, ctx)
        self._apply_trigger_result(result, key, window, window)
        self._register_cleanup_timer(window)

    def _on_skipped_element(self, record: StreamRecord) -> None:
        """No window took the element: if it is late, side output or drop and count (Flink's isSkippedElement)."""
        if self.is_element_late(record.timestamp):
            if self.late_data_output_tag is not None:
                self.output.collect_side(self.late_data_output_tag, record)
            else:
                self.context.metrics.inc("num_late_records_dropped")

    def _apply_trigger_result(self, result: Any, key: Any, window: Any, state_window: Any) -> None:
        # identity checks first: TriggerResult.is_fire()/is_purge() go through the enum's value property
        if result is _CONTINUE:
            return
        if result is _FIRE:
            fire, purge = True, False
        elif result is _FIRE_AND_PURGE:
            fire = purge = True
        else:
            fire, purge = result.is_fire(), result.is_purge()
        if fire:
            contents = self._get_contents(state_window)
            if contents is not None:
                self._emit_window_contents(key, window, state_window, contents)
        if purge:
            self._clear_contents(state_window)

    def _merging_window_set(self) -> MergingWindowSet:
        return MergingWindowSet(self.assigner, self._merging_state)  # type: ignore[arg-type]

    def _merge_function(self, key: Any) -> Callable[[Any, list, Any, list], None]:
        def merge(merge_result: Any, merged_windows: list, state_window_result: Any, merged_state_windows: list) -> None:
            if self.is_event_time and merge_result.max_timestamp() + self.allowed_lateness_ms <= self.timer_service.current_watermark():
                raise IllegalStateError(
                    "The end timestamp of an event-time window cannot become earlier than the current watermark "
                    f"by merging. Current watermark: {self.timer_service.current_watermark()} window: {merge_result!r}"
                )
            if not self.is_event_time and merge_result.max_timestamp() <= self.context.clock.now_ms():
                raise IllegalStateError(
                    "The end timestamp of a processing-time window cannot become earlier than the current "
                    f"processing time by merging. Current processing time: {self.context.clock.now_ms()} "
                    f"window: {merge_result!r}"
                )
            ctx = self._trigger_ctx
            ctx.window = merge_result
            ctx.merged_windows = merged_windows
            try:
                self.trigger.on_merge(merge_result, ctx)
            finally:
                ctx.merged_windows = []
            for merged in merged_windows:
                ctx.window = merged
                self.trigger.clear(merged, ctx)
                self._delete_cleanup_timer(merged)
            self._contents.merge_namespaces(state_window_result, merged_state_windows)  # type: ignore[attr-defined]

        return merge

    # ---- contents ---------------------------------------------------------------------------------------
    def _add_to_contents(self, namespace: Any, value: Any, timestamp: int | None) -> None:
        state = self._contents
        state.set_current_namespace(namespace)
        if self.keeps_accumulator:
            state.update_internal(self.incremental.fold(state.get_internal(), value))  # type: ignore[union-attr]
        elif self.evictor is not None:
            state.add((value, timestamp))  # type: ignore[attr-defined]
        else:
            state.add(value)  # type: ignore[attr-defined]

    def _get_contents(self, namespace: Any) -> Any:
        state = self._contents
        state.set_current_namespace(namespace)
        return state.get_internal()

    def _clear_contents(self, namespace: Any) -> None:
        state = self._contents
        state.set_current_namespace(namespace)
        state.clear()

    def _emit_window_contents(self, key: Any, window: Any, state_window: Any, contents: Any) -> None:
        pctx = self._process_ctx
        pctx.current_window = window
        timestamp = window.max_timestamp()
        collect = self.output.collect
        if self.keeps_accumulator:
            for out in self.function.emit_accumulator(key, window, pctx, contents):
                collect(StreamRecord(out, timestamp))
            return
        if self.evictor is None:
            for out in self.function.emit_elements(key, window, pctx, list(contents)):
                collect(StreamRecord(out, timestamp))
            return
        # EvictingWindowOperator.emitWindowContents: evict before, function, evict after, write back
        records = [TimestampedValue(v, t) for v, t in contents]
        self.evictor.evict_before(records, len(records), window, self._contexts)
        for out in self.function.emit_elements(key, window, pctx, [r.value for r in records]):
            collect(StreamRecord(out, timestamp))
        self.evictor.evict_after(records, len(records), window, self._contexts)
        state = self._contents
        state.set_current_namespace(state_window)
        state.update([(r.value, r.timestamp) for r in records])  # type: ignore[attr-defined]

    # ---- timers -----------------------------------------------------------------------------------------
    def on_event_time(self, timer: InternalTimer) -> None:
        self._on_timer(timer, event_time=True)

    def on_processing_time(self, timer: InternalTimer) -> None:
        self._on_timer(timer, event_time=False)

    def _on_timer(self, timer: InternalTimer, event_time: bool) -> None:
        key, window = timer.key, timer.namespace
        ctx = self._trigger_ctx
        ctx.window = window
        merging_windows = None
        if self.merging:
            merging_windows = self._merging_window_set()
            state_window = merging_windows.get_state_window(window)
            if state_window is None:
                # a timer of a window merged away: its trigger was cleared at the merge
                return
        else:
            state_window = window
        if event_time:
            result = self.trigger.on_event_time(timer.timestamp, window, ctx)
        else:
            result = self.trigger.on_processing_time(timer.timestamp, window, ctx)
        self._apply_trigger_result(result, key, window, state_window)
        if self.is_event_time == event_time and timer.timestamp == self.cleanup_time(window):
            self._clear_all_state(window, state_window, merging_windows)
        if merging_windows is not None:
            merging_windows.persist()

    def _clear_all_state(self, window: Any, state_window: Any, merging_windows: MergingWindowSet | None) -> None:
        self._clear_contents(state_window)
        ctx = self._trigger_ctx
        ctx.window = window
        self.trigger.clear(window, ctx)
        self._process_ctx.current_window = window
        self.function.clear(self._process_ctx)
        if merging_windows is not None:
            merging_windows.retire_window(window)

    def process_watermark(self, watermark: Watermark) -> None:
        """Fire due event-time timers, then forward the watermark (Flink's AbstractStreamOperator, seed 004)."""
        self.timer_service.advance_watermark(watermark.timestamp)
        self.output.emit_watermark(watermark)

    def advance_processing_time(self, now_ms: int) -> None:
        self.timer_service.advance_processing_time(now_ms)

    def current_watermark(self) -> int:
        return self.timer_service.current_watermark()

    # ---- batches ----------------------------------------------------------------------------------------
    def process_batch(self, records: Sequence[StreamRecord]) -> None:
        """Process records that arrived with no watermark between them; same result as one by one.

        Count windows (GlobalWindows with exactly CountTrigger) take :meth:`_batch_count_trigger`; every
        other window of this general operator takes the per-element steps.  The shapes a batch can fold
        per (key, window) have their own operators (engine/windowing/slicing/).
        """
        if self._count_batch and not self.is_window_late(GLOBAL_WINDOW):
            self._batch_count_trigger(records)
            return
        for record in records:
            self.process_element(record)

    def _batch_count_trigger(self, records: Sequence[StreamRecord]) -> None:
        """process_batch for GlobalWindows with exactly CountTrigger (any contents, any evictor, any function).

        Per element, in order, the steps of :meth:`_process_keyed` with CountTrigger.on_element inlined:
        GlobalWindows assigns the one GLOBAL_WINDOW; it is not late (the caller checked, and the
        watermark does not move inside a batch); the element is added to the contents; the trigger's
        ReducingState "count" gets ``reduce(count, 1)`` and, on reaching ``max_count``, is cleared
        and the window FIREs through the same :meth:`_apply_trigger_result` (evictor, function,
        write-back); GLOBAL_WINDOW's cleanup time is MAX_WATERMARK, so no cleanup timer is
        registered.  Only the assigner call, the trigger-context and scoped-state indirections and
        the TriggerResult dispatch of a CONTINUE are skipped.
        """
        backend = self.keyed_state_backend
        set_key = backend.set_current_key
        key_of = self._key_of
        add = self._add_to_contents
        apply_result = self._apply_trigger_result
        trigger = self.trigger
        descriptor = trigger.state_descriptor  # type: ignore[attr-defined]
        reduce = descriptor.reduce_function
        max_count = trigger.max_count  # type: ignore[attr-defined]
        count = None  # created at the first element, as the trigger's first get_partitioned_state would
        window = GLOBAL_WINDOW
        for record in records:
            key = key_of(record)
            if key is DEAD:
                continue
            set_key(key)
            add(window, record.value, record.timestamp)
            if count is None:
                count = backend.get_partitioned_state(descriptor)
            count.set_current_namespace(window)
            current = count.get_internal()
            current = 1 if current is None else reduce(current, 1)
            if current >= max_count:
                count.clear()
                apply_result(_FIRE, key, window, window)
            else:
                count.update_internal(current)

    # ---- snapshots --------------------------------------------------------------------------------------
    def _snapshot_metadata(self, checkpoint_id: int) -> dict[str, Any]:
        metadata = super()._snapshot_metadata(checkpoint_id)
        # one snapshot format for every variant (engine/windowing/slicing/): any of them restores any other's
        metadata["operator_class"] = "WindowOperator"
        return metadata

    def snapshot_state(self, checkpoint_id: int) -> WindowOperatorSnapshot:
        return self._snapshot(checkpoint_id, frozen=True)

    def snapshot_now(self, checkpoint_id: int) -> MaterializedOperatorSnapshot:
        """The snapshot materialized at once: nothing runs before it is built, so a variant may read its
        layout in place instead of freezing a copy first (a Spark task ends its epoch this way)."""
        return self._snapshot(checkpoint_id, frozen=False).materialize()

    def _snapshot(self, checkpoint_id: int, frozen: bool) -> WindowOperatorSnapshot:
        """The general layout's snapshot; ``frozen`` matters to variants whose layout is not copy-on-write."""
        metadata = self._snapshot_base_metadata(checkpoint_id)
        return WindowOperatorSnapshot(metadata, self.keyed_state_backend.snapshot(), self.timer_service.snapshot())

    def _snapshot_base_metadata(self, checkpoint_id: int) -> dict[str, Any]:
        metadata = self._snapshot_metadata(checkpoint_id)
        metadata["current_watermark"] = self.timer_service.current_watermark()
        backend = self.keyed_state_backend
        # entry counts taken from the live backend, independently of the files written later, so a
        # validator can tell a lost row (checkpoints.validation: row count against the metadata)
        metadata["state_rows"] = {name: backend.num_entries(name) for name in backend.state_names}
        metadata["state_kinds"] = backend.state_kinds()
        return metadata

    def initialize_state(
        self,
        snapshots: Any,
        key_group_range: KeyGroupRange | None = None,
    ) -> None:
        """Restore keyed state, merging window sets, timers and the watermark from one or more snapshots.

        With several snapshots (rescaling) each one's rows outside this subtask's key groups are
        dropped, and the watermark restored is the smallest of theirs (never drops an element the
        old subtasks would have accepted).  Any variant's snapshot restores here (one format).
        """
        materialized = materialize_all(snapshots)
        if key_group_range is not None and key_group_range != self.context.key_group_range:
            self.context.key_group_range = key_group_range
            self._build_runtime(key_group_range)
        restore_keyed_snapshots(materialized, self.keyed_state_backend, self.timer_service,
                                self.context.max_parallelism, "window operator")
        self._adopt_restored()

    def _adopt_restored(self) -> None:
        """Called after a restore into the general layout: a variant moves the state into its own layout
        here when the state has its shape (the general operator keeps it as it is)."""
