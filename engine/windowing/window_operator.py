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
task.  A key selector that raises, or a record without timestamp reaching an event-time window, are data
problems: the record goes to ``context.dead_letter`` and is counted in ``num_dead_letter_records``.

Performance: :meth:`WindowOperator.process_batch` pre-aggregates a batch per (key, window) when that
cannot change the result (see its docstring), and for the same operators a watermark fires due
windows through :meth:`WindowOperator._advance_watermark_fast`, the timer loop with the built-in
EventTimeTrigger's decisions inlined.  With ``specialized=True`` (the runtimes pass it) two common
shapes keep their state in a layout made for them, with the same results and the same snapshots
and far fewer Python steps per element: the built-in ``sum`` on event-time tumbling/sliding windows
keeps its contents in arrays (engine/windowing/columnar.py), and event-time sessions with a fixed
gap and an incremental aggregate keep per-key session objects and bucketed timers
(engine/windowing/sessions.py); both only without allowed lateness, evictor or window function.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import itemgetter
from typing import Any, Callable

from engine.api.functions import KeyedStateStore, OutputTag, ProcessWindowContext, ProcessWindowFunction
from engine.elements import MAX_WATERMARK, StreamRecord, Watermark
from engine.errors import IllegalStateError, JobDefinitionError, MissingTimestampError
from engine.operators.base import (
    MaterializedOperatorSnapshot,
    OneInputStreamOperator,
    OperatorContext,
    OperatorSnapshot,
    Output,
    materialize_all,
)
from engine.operators.keyed_process import KeyedOperatorSnapshot
from engine.operators.keyed_restore import restore_keyed_snapshots
from engine.state.descriptors import AggregatingStateDescriptor, ListStateDescriptor, State, StateDescriptor
from engine.state.key_groups import KeyGroupRange
from engine.state.keyed_state import HeapKeyedStateBackend
from engine.state.snapshot import VOID_NAMESPACE
from engine.timers import InternalTimer, InternalTimerService
from engine.windowing.assigners import MergingWindowAssigner, WindowAssigner, WindowAssignerContext, default_trigger_of
from engine.windowing.evictors import Evictor, EvictorContext, TimestampedValue
from engine.windowing.internal_window_function import IncrementalAggregation, InternalWindowFunction
from engine.windowing.merging_window_set import MERGING_WINDOW_SET_STATE, MergingWindowSet
from engine.windowing.aggregations import SumAggregate, set_field
from engine.windowing.columnar import ColumnarWindows, GridTooSparse
from engine.windowing.sessions import SessionWindows
from engine.windowing.assigners import (
    EventTimeSessionWindows,
    GlobalWindows,
    SlidingEventTimeWindows,
    SlidingProcessingTimeWindows,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
)
from engine.windowing.triggers import CountTrigger, EventTimeTrigger, OnMergeContext, ProcessingTimeTrigger, Trigger, TriggerResult
from engine.windowing.windows import GLOBAL_WINDOW, TimeWindow

WINDOW_CONTENTS_STATE = "window-contents"

_DEAD = object()
_CONTINUE = TriggerResult.CONTINUE
_FIRE = TriggerResult.FIRE
_FIRE_AND_PURGE = TriggerResult.FIRE_AND_PURGE
#: bound of the sliding batch path's per-key table of registered runs (cleared wholesale when reached)
_SLIDING_RUNS_LIMIT = 1_000_000
#: bound of _TriggerContext's scoped-state cache (cleared wholesale when reached)
_SCOPED_STATE_CACHE_LIMIT = 4096


class _ScopedState:
    """A state object pinned to one namespace: the backend shares one state object per name, so every
    call re-selects the namespace before delegating (a trigger's and a function's state never collide)."""

    __slots__ = ("_state", "_namespace")

    def __init__(self, state: Any, namespace: Any) -> None:
        self._state = state
        self._namespace = namespace

    def __getattr__(self, name: str) -> Any:
        state = self._state
        state.set_current_namespace(self._namespace)
        return getattr(state, name)


class _StateStore(KeyedStateStore):
    def __init__(self, backend: HeapKeyedStateBackend, namespace: Any) -> None:
        self._backend = backend
        self._namespace = namespace

    def get_state(self, descriptor: StateDescriptor) -> State:
        return _ScopedState(self._backend.get_partitioned_state(descriptor), self._namespace)  # type: ignore[return-value]


class _Contexts(WindowAssignerContext, EvictorContext):
    """Processing time and watermark for assigners and evictors."""

    def __init__(self, op: WindowOperator) -> None:
        self._op = op

    def get_current_processing_time(self) -> int:
        return self._op.context.clock.now_ms()

    def get_current_watermark(self) -> int:
        return self._op.timer_service.current_watermark()


class _TriggerContext(OnMergeContext):
    """Flink's WindowOperator.Context: the trigger's view of the current key and window."""

    def __init__(self, op: WindowOperator) -> None:
        self._op = op
        self.window: Any = None
        self.merged_windows: list = []
        self._scoped: dict[tuple[str, type, Any], _ScopedState] = {}

    def get_current_processing_time(self) -> int:
        return self._op.context.clock.now_ms()

    def get_current_watermark(self) -> int:
        return self._op.timer_service.current_watermark()

    def register_processing_time_timer(self, time: int) -> None:
        self._op.timer_service.register_processing_time_timer(self.window, time)

    def register_event_time_timer(self, time: int) -> None:
        self._op.timer_service.register_event_time_timer(self.window, time)

    def delete_processing_time_timer(self, time: int) -> None:
        self._op.timer_service.delete_processing_time_timer(self.window, time)

    def delete_event_time_timer(self, time: int) -> None:
        self._op.timer_service.delete_event_time_timer(self.window, time)

    def get_partitioned_state(self, state_descriptor: StateDescriptor) -> State:
        # the backend returns one state object per name (checking the kind), and a _ScopedState only pins
        # that object and a namespace, so one per (name, kind, window) serves every call
        cache_key = (state_descriptor.name, type(state_descriptor), self.window)
        try:
            return self._scoped[cache_key]  # type: ignore[return-value]
        except KeyError:
            pass
        except TypeError:  # an unhashable window: no caching
            return _ScopedState(self._op.keyed_state_backend.get_partitioned_state(state_descriptor), self.window)  # type: ignore[return-value]
        scoped = _ScopedState(self._op.keyed_state_backend.get_partitioned_state(state_descriptor), self.window)
        if len(self._scoped) >= _SCOPED_STATE_CACHE_LIMIT:
            self._scoped.clear()
        self._scoped[cache_key] = scoped
        return scoped  # type: ignore[return-value]

    def merge_partitioned_state(self, state_descriptor: StateDescriptor) -> None:
        if self.merged_windows:
            state = self._op.keyed_state_backend.get_partitioned_state(state_descriptor)
            merge = getattr(state, "merge_namespaces", None)
            if merge is None:
                raise JobDefinitionError(
                    "state_descriptor",
                    state_descriptor,
                    "must describe list, reducing or aggregating state to be merged on window merge",
                )
            merge(self.window, self.merged_windows)


class _ProcessContext(ProcessWindowContext):
    """What a ProcessWindowFunction sees during a firing or a clear."""

    def __init__(self, op: WindowOperator) -> None:
        self._op = op
        self.current_window: Any = None

    def window(self) -> Any:
        return self.current_window

    def current_processing_time(self) -> int:
        return self._op.context.clock.now_ms()

    def current_watermark(self) -> int:
        return self._op.timer_service.current_watermark()

    def window_state(self) -> KeyedStateStore:
        return _StateStore(self._op.keyed_state_backend, self.current_window)

    def global_state(self) -> KeyedStateStore:
        return _StateStore(self._op.keyed_state_backend, VOID_NAMESPACE)

    def output(self, output_tag: OutputTag, value: Any) -> None:
        self._op.output.collect_side(output_tag, StreamRecord(value, self.current_window.max_timestamp()))


class WindowOperatorSnapshot(KeyedOperatorSnapshot):
    """Keyed state (copy-on-write) + timers (copied) + watermark, materialized to Arrow on demand: a keyed
    operator's snapshot layout (engine/operators/keyed_process.py), which the window operator shares."""


class _ColumnarSnapshot(WindowOperatorSnapshot):
    """A snapshot of array contents (frozen copies), turned into the general layout when materialized."""

    def __init__(self, metadata: dict[str, Any], frozen: ColumnarWindows) -> None:
        self.metadata = metadata
        self._frozen = frozen

    def materialize(self) -> MaterializedOperatorSnapshot:
        keyed, timers = self._frozen.snapshot_parts()
        return WindowOperatorSnapshot(self.metadata, keyed, timers).materialize()


class WindowOperator(OneInputStreamOperator):
    """Flink's WindowOperator and EvictingWindowOperator in one class (the evictor is optional).

    ``incremental_aggregate``: a reduce callable, ReduceFunction or AggregateFunction, or None.
    ``window_function``: a ProcessWindowFunction, WindowFunction or callable ``(key, window, inputs)``
    applied to each firing's inputs, or None to emit the aggregate's result as is.
    """

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
        specialized: bool = False,
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
        self.key_selector = key_selector
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
        self._batch_geometry = _window_geometry(assigner)
        self._batch_fold = _batch_folder(self.incremental) if self.incremental is not None else None
        #: firings may go downstream as one buffer: no ProcessWindowFunction, so no side outputs while firing
        self._fire_in_buffers = not isinstance(window_function, ProcessWindowFunction)
        self._fast_batch = (
            self.keeps_accumulator
            and not self.merging
            and (
                (type(trigger) is EventTimeTrigger and self.is_event_time)
                or (type(trigger) is ProcessingTimeTrigger and not self.is_event_time)
            )
        )
        self._fast_fire = self._fast_batch and self.is_event_time
        #: GlobalWindows with exactly CountTrigger (count windows, sliding ones with CountEvictor): see
        #: _batch_count_trigger
        self._count_batch = type(assigner) is GlobalWindows and type(trigger) is CountTrigger
        #: (size, slide, offset, field) when the contents live in arrays (engine/windowing/columnar.py): asked
        #: for (``specialized``; the runtimes do), event-time tumbling/sliding, exactly EventTimeTrigger, no
        #: evictor, exactly the built-in sum with no window function, no allowed lateness
        self._columnar_spec: tuple[int, int, int, int | str] | None = None
        #: the gap when sessions live in per-key objects (engine/windowing/sessions.py): asked for, event-time
        #: sessions with a fixed gap, exactly EventTimeTrigger, an incremental aggregate, no evictor, no
        #: window function, no allowed lateness
        self._session_gap: int | None = None
        if (
            specialized
            and type(assigner) is EventTimeSessionWindows
            and assigner.gap_extractor is None  # type: ignore[attr-defined]
            and type(trigger) is EventTimeTrigger
            and self.keeps_accumulator
            and window_function is None
            and allowed_lateness_ms == 0
        ):
            self._session_gap = assigner.gap_ms  # type: ignore[attr-defined]
        if (
            specialized
            and self.is_event_time
            and self._batch_geometry is not None
            and type(trigger) is EventTimeTrigger
            and evictor is None
            and window_function is None
            and allowed_lateness_ms == 0
            and self.incremental is not None
            and type(self.incremental.user_function) is SumAggregate
        ):
            self._columnar_spec = (*self._batch_geometry, self.incremental.user_function.field)

    @property
    def folds_in_arrays(self) -> bool:
        """Whether this operator keeps its windows in the columnar layout (engine/windowing/columnar.py)."""
        return self._columnar_spec is not None

    # ---- lifecycle ----------------------------------------------------------------------------------
    def open(self, context: OperatorContext, output: Output) -> None:
        super().open(context, output)
        if self.key_selector is None:
            raise JobDefinitionError("key_selector", None, "is required: a window operator runs on a keyed stream")
        self._build_runtime(context.key_group_range)  # type: ignore[arg-type]
        for fn in self.function.functions():
            fn.open(context)

    def _build_runtime(self, key_group_range: KeyGroupRange) -> None:
        self._new_heap(key_group_range)
        ctx = self.context
        spec = self._columnar_spec
        self._columns: ColumnarWindows | None = None
        self._sessions: SessionWindows | None = None
        if self._session_gap is not None:
            backend = self.keyed_state_backend
            kinds = backend.state_kinds()
            self._sessions = SessionWindows(
                gap=self._session_gap, fold=self._batch_fold, merge=self.incremental.merge,  # type: ignore[arg-type, union-attr]
                get_result=self.incremental.get_result,  # type: ignore[union-attr]
                contents_state=(WINDOW_CONTENTS_STATE, kinds[WINDOW_CONTENTS_STATE]),
                merging_state=(MERGING_WINDOW_SET_STATE.name, kinds[MERGING_WINDOW_SET_STATE.name]),
                max_parallelism=ctx.max_parallelism, key_group_range=key_group_range, key_group_of=self._key_group,
                sum_position=self._session_sum_position(),
            )
        if spec is not None:
            size, slide, offset, field = spec
            self._columns = ColumnarWindows(
                size=size, slide=slide, offset=offset, field=field, state_name=WINDOW_CONTENTS_STATE,
                state_kind=self.keyed_state_backend.state_kinds()[WINDOW_CONTENTS_STATE],
                max_parallelism=ctx.max_parallelism, key_group_range=key_group_range, key_group_of=self._key_group,
            )
        self._contexts = _Contexts(self)
        self._trigger_ctx = _TriggerContext(self)
        self._process_ctx = _ProcessContext(self)
        #: process_batch's windows by start, and the keys whose timers they are known to have (see
        #: _batch_register); tied to this timer service
        self._batch_windows: dict[int, TimeWindow] = {}
        self._batch_registered: dict[int, set] = {}
        #: the sliding event-time batch path's per-key runs of windows known to have their timers (see
        #: _batch_sliding_event_time); tied to this timer service
        self._sliding_registered: dict[Any, tuple[int, int]] = {}

    def _new_heap(self, key_group_range: KeyGroupRange) -> None:
        """The general layout's keyed state backend and timer service (empty; the watermark starts over)."""
        ctx = self.context
        self.keyed_state_backend = HeapKeyedStateBackend(ctx.max_parallelism, key_group_range)
        self.timer_service = InternalTimerService(self.keyed_state_backend, self, key_group_range, ctx.max_parallelism)
        self._contents = self.keyed_state_backend.get_partitioned_state(self._contents_descriptor)
        self._merging_state = (
            self.keyed_state_backend.get_partitioned_state(MERGING_WINDOW_SET_STATE) if self.merging else None
        )

    def _session_sum_position(self) -> int | None:
        """The tuple position of a built-in ``sum(position)``, which the session layout folds on arrival."""
        fn = self.incremental.user_function if self.incremental is not None else None
        if type(fn) is SumAggregate and type(fn.field) is int:
            return fn.field
        return None

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
        """The record's key, or _DEAD after handing the record to the dead-letter callback."""
        if record.timestamp is None and self.is_event_time:
            self._dead_letter(
                record.value,
                MissingTimestampError(
                    "record has no timestamp, so an event-time window cannot place it; assign timestamps with "
                    "stream.assign_timestamps_and_watermarks(WatermarkStrategy...) before the window"
                ),
                "window_assign",
            )
            return _DEAD
        try:
            return self.key_selector(record.value)  # type: ignore[misc]
        except Exception as exc:  # noqa: BLE001 - a failing key selector is a data problem: dead letter
            self._dead_letter(record.value, exc, "key_selector")
            return _DEAD

    def _key_error(self, record: StreamRecord, error: BaseException | None) -> None:
        """What _key_of does with a record it cannot key: no timestamp (``error`` None) or a failing selector."""
        if error is None:
            self._key_of(record)  # checks the timestamp first: the dead letter without calling the selector
        else:
            self._dead_letter(record.value, error, "key_selector")

    def _dead_letter(self, value: Any, error: BaseException, stage: str) -> None:
        self.context.metrics.inc("num_dead_letter_records")
        self.context.dead_letter(value, error, stage)

    def process_element(self, record: StreamRecord) -> None:
        if self._columns is not None or self._sessions is not None:
            self.process_batch((record,))
            return
        key = self._key_of(record)
        if key is _DEAD:
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
        if self._columns is not None or self._sessions is not None:
            self._specialized_watermark(watermark.timestamp)
            self.output.emit_watermark(watermark)
            return
        if self._fast_fire:
            self._advance_watermark_fast(watermark.timestamp)
        else:
            self.timer_service.advance_watermark(watermark.timestamp)
        if self._batch_windows:
            self._prune_batch_windows(self.timer_service.current_watermark())
        self.output.emit_watermark(watermark)

    def _advance_watermark_fast(self, time: int) -> None:
        """``timer_service.advance_watermark`` with ``_on_timer`` inlined, for the batch path's operators
        (incremental contents, not merging, the trigger exactly EventTimeTrigger, event time).

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

    def advance_processing_time(self, now_ms: int) -> None:
        self.timer_service.advance_processing_time(now_ms)
        if self._batch_windows and not self.is_event_time:
            self._prune_batch_windows(self.timer_service.current_processing_time())

    def current_watermark(self) -> int:
        return self.timer_service.current_watermark()

    # ---- batches ----------------------------------------------------------------------------------------
    def process_batch(self, records: Sequence[StreamRecord]) -> None:
        """Process records that arrived with no watermark between them; same result as one by one.

        Fast path (incremental contents, no evictor, non-merging assigner, the trigger exactly the
        built-in EventTimeTrigger or ProcessingTimeTrigger): elements are grouped per (key, window) and
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
        if self._columns is not None:
            self._columnar_batch(records)
            return
        if self._sessions is not None:
            self._sessions_batch(records)
            return
        if not self._fast_batch:
            if self._count_batch and not self.is_window_late(GLOBAL_WINDOW):
                self._batch_count_trigger(records)
                return
            for record in records:
                self.process_element(record)
            return
        backend = self.keyed_state_backend
        timers = self.timer_service
        event_time = self.is_event_time
        lateness = self.allowed_lateness_ms
        watermark = timers.current_watermark()
        key_of = self._key_of
        geometry = self._batch_geometry
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
                if key is _DEAD:
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
            groups.items(), self._batch_fold, None if geometry is None else self._batch_windows
        )

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
            if key is _DEAD:
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
        size, slide, offset = self._batch_geometry  # type: ignore[misc]
        lateness = self.allowed_lateness_ms
        windows = self._batch_windows
        runs = self._sliding_registered
        # the lowest start whose window ends after the watermark: start + size - 1 > watermark
        first_ahead = watermark - size + 2
        per_key: dict[Any, list] = {}
        for record in records:
            key = key_of(record)
            if key is _DEAD:
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

        fold = self._batch_fold

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
        slide = self._batch_geometry[1]  # type: ignore[index]
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
        if windows and self._batch_geometry is not None:
            size = self._batch_geometry[0]
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
            if key is _DEAD:
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

    # ---- columnar contents (engine/windowing/columnar.py) -------------------------------------------------
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
                keys = list(map(self.key_selector, values))  # type: ignore[arg-type]
            except Exception:  # noqa: BLE001 - a failing selector: the loop below dead-letters it
                pass
        if keys is None:
            # some record goes to the dead-letter output: _key_of takes them one by one
            key_of = self._key_of
            live, keys = [], []
            for record in records:
                key = key_of(record)
                if key is not _DEAD:
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

    def _sessions_batch(self, records: Sequence[StreamRecord]) -> None:
        """process_batch for the session layout: keys and dead letters as the general path takes them, then
        the sessions' per-element merging steps, then late handling of the elements no session took."""
        late = self._sessions.add_batch(records, self.key_selector, self._key_error,  # type: ignore[union-attr, arg-type]
                                        self.timer_service.current_watermark())
        for record in late:
            self._on_skipped_element(record)

    def _specialized_watermark(self, time: int) -> None:
        """Raise the watermark, then fire every due window as the timer service would: ascending end, ties in
        timer registration order; the results of one watermark go downstream as one buffer."""
        svc = self.timer_service
        if time > svc.current_watermark():
            svc.set_current_watermark(time)
        columns = self._columns
        out: list[StreamRecord] = []
        if columns is not None:
            # an output that takes columns (a Spark task's router) gets each window's results as they come
            # out of the arrays, window by window in the same order; any other output gets one buffer
            output = self.output
            collect_columns = output.collect_columns if self._fire_in_buffers and output.takes_columns else None
            for start in columns.due_starts(time):
                fired = columns.fire(start, as_columns=collect_columns is not None)
                if collect_columns is None:
                    out.extend(fired)  # type: ignore[arg-type]
                elif len(fired):
                    collect_columns(fired)
            columns.maybe_compact()
        else:
            out = self._sessions.fire(time)  # type: ignore[union-attr]
        if not out:
            return
        if self._fire_in_buffers:
            self.output.collect_batch(out)
        else:
            collect = self.output.collect
            for r in out:
                collect(r)

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
    def snapshot_state(self, checkpoint_id: int) -> WindowOperatorSnapshot:
        return self._snapshot(checkpoint_id, frozen=True)

    def snapshot_now(self, checkpoint_id: int) -> MaterializedOperatorSnapshot:
        """The snapshot materialized at once: nothing runs before it is built, so the array layout is read in
        place instead of frozen into a copy first (a Spark task ends its epoch this way)."""
        return self._snapshot(checkpoint_id, frozen=False).materialize()

    def _snapshot(self, checkpoint_id: int, frozen: bool) -> WindowOperatorSnapshot:
        metadata = self._snapshot_metadata(checkpoint_id)
        metadata["current_watermark"] = self.timer_service.current_watermark()
        backend = self.keyed_state_backend
        # entry counts taken from the live backend, independently of the files written later, so a
        # validator can tell a lost row (checkpoints.validation: row count against the metadata)
        metadata["state_rows"] = {name: backend.num_entries(name) for name in backend.state_names}
        metadata["state_kinds"] = backend.state_kinds()
        if self._columns is not None:
            metadata["state_rows"][WINDOW_CONTENTS_STATE] = self._columns.num_entries()
            return _ColumnarSnapshot(metadata, self._columns.frozen() if frozen else self._columns)
        if self._sessions is not None:
            # built now (O(open sessions)): the session objects change in place as processing goes on
            keyed, timers = self._sessions.snapshot_parts()
            metadata["state_rows"] = {name: keyed.num_entries(name) for name in keyed.state_names}
            return WindowOperatorSnapshot(metadata, keyed, timers)
        return WindowOperatorSnapshot(metadata, backend.snapshot(), self.timer_service.snapshot())

    def initialize_state(
        self,
        snapshots: Any,
        key_group_range: KeyGroupRange | None = None,
    ) -> None:
        """Restore keyed state, merging window sets, timers and the watermark from one or more snapshots.

        With several snapshots (rescaling) each one's rows outside this subtask's key groups are
        dropped, and the watermark restored is the smallest of theirs (never drops an element the
        old subtasks would have accepted).
        """
        materialized = materialize_all(snapshots)
        if key_group_range is not None and key_group_range != self.context.key_group_range:
            self.context.key_group_range = key_group_range
            self._build_runtime(key_group_range)
        restore_keyed_snapshots(materialized, self.keyed_state_backend, self.timer_service,
                                self.context.max_parallelism, "window operator")
        if self._columns is not None or self._sessions is not None:
            self._adopt_restored()

    def _adopt_restored(self) -> None:
        """Move restored state into the specialized layout when it has its shape; otherwise the general layout
        keeps it (and the operator stays general)."""
        backend, svc = self.keyed_state_backend, self.timer_service
        keyed = backend.snapshot()
        timers = svc.snapshot()
        watermark = svc.current_watermark()
        expected = {WINDOW_CONTENTS_STATE} if self._columns is not None else {WINDOW_CONTENTS_STATE, MERGING_WINDOW_SET_STATE.name}
        adopted = False
        if not (set(keyed.state_names) - expected) and not svc.num_processing_time_timers():
            contents = {(key, ns): value for _kg, key, ns, value in keyed.entries(WINDOW_CONTENTS_STATE)}
            if self._columns is not None:
                adopted = self._columns.adopt(contents, timers.event_time_groups(), watermark)
            else:
                mapping = {key: rows for _kg, key, _ns, rows in keyed.entries(MERGING_WINDOW_SET_STATE.name)}
                adopted = self._sessions.adopt(contents, mapping, timers.event_time_groups(), watermark)  # type: ignore[union-attr]
        if not adopted:
            self._columns = self._sessions = None
            return
        self._new_heap(self.context.key_group_range)  # type: ignore[arg-type]
        self.timer_service.set_current_watermark(watermark)


def _window_geometry(assigner: WindowAssigner) -> tuple[int, int, int] | None:
    """(size, slide, offset) of the built-in tumbling/sliding assigners, whose windows process_batch computes itself.

    Same arithmetic and the same (descending start) order as their assign_windows.
    """
    t = type(assigner)
    if t is TumblingEventTimeWindows or t is TumblingProcessingTimeWindows:
        return assigner.size_ms, assigner.size_ms, assigner.offset_ms  # type: ignore[attr-defined]
    if t is SlidingEventTimeWindows or t is SlidingProcessingTimeWindows:
        return assigner.size_ms, assigner.slide_ms, assigner.offset_ms  # type: ignore[attr-defined]
    return None


#: element types whose field the batch folds read with itemgetter (others go through add(), e.g. a str is a
#: scalar element, not a sequence of fields)
_FIELD_CONTAINERS = (tuple, list, dict)


def _batch_folder(incremental: IncrementalAggregation) -> Callable[[Any, list], Any]:
    """``fold(existing_accumulator_or_None, values) -> accumulator`` for process_batch.

    For the built-in field aggregations the field is folded directly, doing exactly the additions
    and comparisons of their ``add`` in the same order (so float sums round identically); any
    element the fast fold cannot read (a scalar stream, a missing field) falls back to calling
    ``add`` per element, which also raises the proper JobDefinitionError.
    """
    generic = incremental.fold_all
    vectorized = incremental.vectorized
    if vectorized is None:
        return generic
    kind, field = vectorized.kind, vectorized.field
    getter = itemgetter(field)

    if kind in ("sum", "min", "max"):
        def fold_field(acc: Any, values: list) -> Any:
            try:
                if acc is None:
                    base = values[0]
                    if not isinstance(base, _FIELD_CONTAINERS):
                        return generic(acc, values)  # a scalar stream: add() reads the value itself
                    if len(values) == 1:
                        # what add() does with a first element: check the field is there, keep the element
                        getter(base)
                        return base
                    it = iter(values)
                    next(it)
                else:
                    base = acc
                    if not isinstance(base, _FIELD_CONTAINERS):
                        return generic(acc, values)
                    if len(values) == 1:
                        x = getter(values[0])
                        running = getter(base)
                        if kind == "sum":
                            return set_field(base, field, running + x)
                        if kind == "min":
                            return set_field(base, field, running if running < x else x)
                        return set_field(base, field, running if running > x else x)
                    it = iter(values)
                running = getter(base)
                if kind == "sum":
                    for v in it:
                        running += getter(v)
                elif kind == "min":
                    for v in it:
                        x = getter(v)
                        if not running < x:
                            running = x
                else:
                    for v in it:
                        x = getter(v)
                        if not running > x:
                            running = x
                return set_field(base, field, running)
            except (TypeError, IndexError, KeyError):
                return generic(acc, values)

        return fold_field

    if kind in ("min_by", "max_by"):
        by_min = kind == "min_by"

        def fold_by(acc: Any, values: list) -> Any:
            try:
                it = iter(values)
                best = next(it) if acc is None else acc
                if not isinstance(best, _FIELD_CONTAINERS):
                    return generic(acc, values)  # a scalar stream: add() reads the value itself
                best_field = getter(best)
                for v in it:
                    x = getter(v)
                    if (x < best_field) if by_min else (x > best_field):
                        best, best_field = v, x
                return best
            except (TypeError, IndexError, KeyError):
                return generic(acc, values)

        return fold_by
    return generic
