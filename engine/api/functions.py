"""User function interfaces for windowed streams (PyFlink names, Java Flink behaviour).

``reduce``/``aggregate``/``sum``... are incremental: the window keeps one
accumulator.  ``process``/``apply`` see all elements.  With an evictor every
window keeps its elements, incremental or not (seed 000).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Iterable, TypeVar

if TYPE_CHECKING:
    from engine.state.descriptors import State, StateDescriptor
    from engine.windowing.windows import Window

IN = TypeVar("IN")
ACC = TypeVar("ACC")
OUT = TypeVar("OUT")
KEY = TypeVar("KEY")
W = TypeVar("W")


class Function:
    """Marker base of user functions; ``open``/``close`` bracket their use in a subtask."""

    def open(self, runtime_context: Any) -> None:  # noqa: B027 - optional hook
        pass

    def close(self) -> None:  # noqa: B027 - optional hook
        pass


class ReduceFunction(Function, Generic[IN]):
    @abstractmethod
    def reduce(self, value1: IN, value2: IN) -> IN: ...


class AggregateFunction(Function, Generic[IN, ACC, OUT]):
    """Incremental aggregation with an accumulator (Flink's AggregateFunction).

    Accumulators are stored in snapshots, so they must be plain data (numbers,
    str, tuples, lists, dicts): see :mod:`engine.state.codec`.
    """

    @abstractmethod
    def create_accumulator(self) -> ACC: ...

    @abstractmethod
    def add(self, value: IN, accumulator: ACC) -> ACC: ...

    @abstractmethod
    def get_result(self, accumulator: ACC) -> OUT: ...

    @abstractmethod
    def merge(self, acc_a: ACC, acc_b: ACC) -> ACC: ...


@dataclass(frozen=True)
class OutputTag:
    """Names a side output, e.g. late data: ``OutputTag("late")`` or, as PyFlink writes it,
    ``OutputTag("late", Types.TUPLE([Types.STRING(), Types.INT()]))``.

    Tags are equal by ``tag_id`` alone (Flink compares ids; the type only describes the records).
    """

    tag_id: str
    type_info: Any = field(default=None, compare=False)

    def __post_init__(self) -> None:
        from engine.api.typeinfo import check_type_info
        from engine.errors import JobDefinitionError

        if not isinstance(self.tag_id, str) or not self.tag_id:
            raise JobDefinitionError("tag_id", self.tag_id, "must be a non-empty string")
        check_type_info(self.type_info, "type_info")


class KeyedStateStore(ABC):
    """Keyed state for a ProcessWindowFunction: per window or global for the key."""

    @abstractmethod
    def get_state(self, descriptor: StateDescriptor) -> State: ...

    # PyFlink spells the typed getters separately; they all resolve to get_state
    def get_list_state(self, descriptor: StateDescriptor) -> State:
        return self.get_state(descriptor)

    def get_map_state(self, descriptor: StateDescriptor) -> State:
        return self.get_state(descriptor)

    def get_reducing_state(self, descriptor: StateDescriptor) -> State:
        return self.get_state(descriptor)

    def get_aggregating_state(self, descriptor: StateDescriptor) -> State:
        return self.get_state(descriptor)


class ProcessWindowContext(ABC, Generic[W]):
    """What a ProcessWindowFunction sees about the window it is called for."""

    @abstractmethod
    def window(self) -> W: ...

    @abstractmethod
    def current_processing_time(self) -> int: ...

    @abstractmethod
    def current_watermark(self) -> int: ...

    @abstractmethod
    def window_state(self) -> KeyedStateStore:
        """State scoped to this key and window; cleared by :meth:`ProcessWindowFunction.clear`."""

    @abstractmethod
    def global_state(self) -> KeyedStateStore:
        """State scoped to this key across all windows."""

    @abstractmethod
    def output(self, output_tag: OutputTag, value: Any) -> None:
        """Emit ``value`` to the side output ``output_tag``."""


class ProcessWindowFunction(Function, Generic[IN, OUT, KEY, W]):
    """Sees all elements of a fired window (or the one pre-aggregated result when combined with ``aggregate``)."""

    #: PyFlink's nested name for the context, so ``context: ProcessWindowFunction.Context[TimeWindow]`` ports
    Context = ProcessWindowContext

    @abstractmethod
    def process(self, key: KEY, context: ProcessWindowContext[W], elements: Iterable[IN]) -> Iterable[OUT]:
        """Return (or yield) the results for this firing."""

    def clear(self, context: ProcessWindowContext[W]) -> None:  # noqa: B027 - optional hook
        """Called when the window is purged; remove per-window state here."""


class WindowFunction(Function, Generic[IN, OUT, KEY, W]):
    """The older ``apply`` interface: ``apply(key, window, inputs)`` returns results."""

    @abstractmethod
    def apply(self, key: KEY, window: W, inputs: Iterable[IN]) -> Iterable[OUT]: ...
