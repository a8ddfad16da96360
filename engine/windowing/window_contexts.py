"""The contexts a window operator hands to user code: Flink's ``WindowOperator.Context`` for triggers, the
ProcessWindowFunction's context, and the time view for assigners and evictors (seed 000).

Every window operator variant (engine/windowing/window_operator.py, engine/windowing/slicing/) builds the
same three, so a trigger or function sees the same state and time whichever variant runs it.  They read
the operator's current ``keyed_state_backend``, ``timer_service``, ``context`` and ``output`` on every
call: a restore at another key-group range replaces the backend after they were built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.api.functions import KeyedStateStore, OutputTag, ProcessWindowContext
from engine.elements import StreamRecord
from engine.errors import JobDefinitionError
from engine.state.descriptors import State, StateDescriptor
from engine.state.keyed_state import HeapKeyedStateBackend
from engine.state.snapshot import VOID_NAMESPACE
from engine.windowing.assigners import WindowAssignerContext
from engine.windowing.evictors import EvictorContext
from engine.windowing.triggers import OnMergeContext

if TYPE_CHECKING:
    from engine.windowing.window_operator import WindowOperator

#: bound of WindowTriggerContext's scoped-state cache (cleared wholesale when reached)
_SCOPED_STATE_CACHE_LIMIT = 4096


class ScopedState:
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


class WindowStateStore(KeyedStateStore):
    def __init__(self, backend: HeapKeyedStateBackend, namespace: Any) -> None:
        self._backend = backend
        self._namespace = namespace

    def get_state(self, descriptor: StateDescriptor) -> State:
        return ScopedState(self._backend.get_partitioned_state(descriptor), self._namespace)  # type: ignore[return-value]


class AssignerEvictorContext(WindowAssignerContext, EvictorContext):
    """Processing time and watermark for assigners and evictors."""

    def __init__(self, op: WindowOperator) -> None:
        self._op = op

    def get_current_processing_time(self) -> int:
        return self._op.context.clock.now_ms()

    def get_current_watermark(self) -> int:
        return self._op.timer_service.current_watermark()


class WindowTriggerContext(OnMergeContext):
    """Flink's WindowOperator.Context: the trigger's view of the current key and window."""

    def __init__(self, op: WindowOperator) -> None:
        self._op = op
        self.window: Any = None
        self.merged_windows: list = []
        self._scoped: dict[tuple[str, type, Any], ScopedState] = {}

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
        # the backend returns one state object per name (checking the kind), and a ScopedState only pins
        # that object and a namespace, so one per (name, kind, window) serves every call
        cache_key = (state_descriptor.name, type(state_descriptor), self.window)
        try:
            return self._scoped[cache_key]  # type: ignore[return-value]
        except KeyError:
            pass
        except TypeError:  # an unhashable window: no caching
            return ScopedState(self._op.keyed_state_backend.get_partitioned_state(state_descriptor), self.window)  # type: ignore[return-value]
        scoped = ScopedState(self._op.keyed_state_backend.get_partitioned_state(state_descriptor), self.window)
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


class WindowProcessContext(ProcessWindowContext):
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
        return WindowStateStore(self._op.keyed_state_backend, self.current_window)

    def global_state(self) -> KeyedStateStore:
        return WindowStateStore(self._op.keyed_state_backend, VOID_NAMESPACE)

    def output(self, output_tag: OutputTag, value: Any) -> None:
        self._op.output.collect_side(output_tag, StreamRecord(value, self.current_window.max_timestamp()))

