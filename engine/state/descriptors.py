"""State descriptors and the state interfaces user code and triggers see (PyFlink names).

A descriptor names a piece of keyed state; the backend scopes it to the
current key and namespace (a window, or the void namespace for global state).
Functions in descriptors (reduce, aggregate) are code and are never persisted:
snapshots hold only the values.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, Iterable, Iterator, TypeVar

from engine.api.typeinfo import TypeInformation, check_type_info
from engine.errors import JobDefinitionError
from engine.state.ttl_config import StateTtlConfig

T = TypeVar("T")


@dataclass(frozen=True)
class StateDescriptor:
    name: str
    #: set by :meth:`enable_time_to_live` (engine/state/ttl.py); takes no part in equality
    ttl_config: Any = field(default=None, compare=False, kw_only=True, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise JobDefinitionError("name", self.name, "must be a non-empty string")

    def enable_time_to_live(self, ttl_config: Any) -> None:
        """Let this state's entries expire (PyFlink's ``StateDescriptor.enable_time_to_live``; engine/state/ttl.py).
        A config whose update type is ``Disabled`` leaves the state without TTL, as in Flink."""
        if not isinstance(ttl_config, StateTtlConfig):
            raise JobDefinitionError("ttl_config", ttl_config, "must be a StateTtlConfig",
                                     "StateTtlConfig.new_builder(Time.seconds(10)).build()")
        object.__setattr__(self, "ttl_config", ttl_config if ttl_config.is_enabled() else None)


# The type informations below are PyFlink's positional arguments (``ValueStateDescriptor("n", Types.INT())``):
# accepted and checked for shape so PyFlink programs port, otherwise unused (Sluice state is dynamically
# typed; engine.state.codec decides how a value is stored).  They take no part in equality.


@dataclass(frozen=True)
class ValueStateDescriptor(StateDescriptor):
    """``ValueStateDescriptor(name, value_type_info=None, *, default=None)``.

    PyFlink's second argument is the value's type; ``default`` (keyword only, a Sluice extension) is what
    ``value()`` returns while nothing was stored.
    """

    value_type_info: Any = field(default=None, compare=False)
    default: Any = field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_type(self.value_type_info, "value_type_info",
                    f"A default value goes in the keyword: ValueStateDescriptor({self.name!r}, default=...)")


@dataclass(frozen=True)
class ListStateDescriptor(StateDescriptor):
    """``ListStateDescriptor(name, elem_type_info=None)``."""

    elem_type_info: Any = field(default=None, compare=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_type(self.elem_type_info, "elem_type_info")


@dataclass(frozen=True)
class MapStateDescriptor(StateDescriptor):
    """``MapStateDescriptor(name, key_type_info=None, value_type_info=None)``."""

    key_type_info: Any = field(default=None, compare=False)
    value_type_info: Any = field(default=None, compare=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_type(self.key_type_info, "key_type_info")
        _check_type(self.value_type_info, "value_type_info")


@dataclass(frozen=True)
class ReducingStateDescriptor(StateDescriptor):
    """``ReducingStateDescriptor(name, reduce_function, type_info=None)``; the function is a callable
    ``(a, b) -> c`` or a ReduceFunction (its ``reduce`` is used)."""

    reduce_function: Callable[[Any, Any], Any] = None  # type: ignore[assignment]
    type_info: Any = field(default=None, compare=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        fn = self.reduce_function
        if fn is not None and not callable(fn) and callable(getattr(fn, "reduce", None)):
            object.__setattr__(self, "reduce_function", fn.reduce)
        _check_type(self.type_info, "type_info")


@dataclass(frozen=True)
class AggregatingStateDescriptor(StateDescriptor):
    """``AggregatingStateDescriptor(name, aggregate_function, state_type_info=None)`` (PyFlink's second
    parameter is ``agg_function``; positionally the same)."""

    aggregate_function: Any = None  # an engine.api.functions.AggregateFunction
    state_type_info: Any = field(default=None, compare=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_type(self.state_type_info, "state_type_info")


def _check_type(value: Any, parameter: str, hint: str | None = None) -> None:
    if value is not None and not isinstance(value, TypeInformation) and hint:
        raise JobDefinitionError(parameter, value, "must be a TypeInformation (from engine.Types)", hint)
    check_type_info(value, parameter)


class State(ABC):
    @abstractmethod
    def clear(self) -> None:
        """Remove the value for the current key and namespace."""


class ValueState(State, Generic[T]):
    @abstractmethod
    def value(self) -> T | None: ...

    @abstractmethod
    def update(self, value: T) -> None: ...


class AppendingState(State, Generic[T]):
    @abstractmethod
    def get(self) -> Any: ...

    @abstractmethod
    def add(self, value: T) -> None: ...


class ListState(AppendingState[T]):
    @abstractmethod
    def get(self) -> Iterable[T]: ...

    @abstractmethod
    def update(self, values: list[T]) -> None: ...

    def add_all(self, values: Iterable[T]) -> None:
        for v in values:
            self.add(v)


class ReducingState(AppendingState[T]):
    pass


class AggregatingState(AppendingState[T]):
    pass


class MapState(State, Generic[T]):
    @abstractmethod
    def get(self, key: Any) -> Any: ...

    @abstractmethod
    def put(self, key: Any, value: Any) -> None: ...

    @abstractmethod
    def remove(self, key: Any) -> None: ...

    @abstractmethod
    def contains(self, key: Any) -> bool: ...

    @abstractmethod
    def items(self) -> Iterator[tuple[Any, Any]]: ...

    @abstractmethod
    def is_empty(self) -> bool: ...
