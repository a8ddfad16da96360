"""State descriptors and the state interfaces user code and triggers see (PyFlink names).

A descriptor names a piece of keyed state; the backend scopes it to the
current key and namespace (a window, or the void namespace for global state).
Functions in descriptors (reduce, aggregate) are code and are never persisted:
snapshots hold only the values.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Callable, Generic, Iterable, Iterator, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class StateDescriptor:
    name: str


@dataclass(frozen=True)
class ValueStateDescriptor(StateDescriptor):
    default: Any = None


@dataclass(frozen=True)
class ListStateDescriptor(StateDescriptor):
    pass


@dataclass(frozen=True)
class MapStateDescriptor(StateDescriptor):
    pass


@dataclass(frozen=True)
class ReducingStateDescriptor(StateDescriptor):
    reduce_function: Callable[[Any, Any], Any] = None  # type: ignore[assignment]


@dataclass(frozen=True)
class AggregatingStateDescriptor(StateDescriptor):
    aggregate_function: Any = None  # an engine.api.functions.AggregateFunction


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
