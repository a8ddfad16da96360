"""Two inputs as one tagged stream: how ``connect`` runs on the engine's one-input operators.

``a.connect(b)`` becomes, in the logical graph (engine/api/connected_streams.py)::

    a -> map(InputTag(1)) --\\
                             union -> co-operator (map / flat_map / process / keyed process / broadcast process)
    b -> map(InputTag(2)) --/

Every record travels as ``(input, value)`` with ``input`` 1 or 2, a plain tuple the state codec and the
channel-state writer already encode; the co-operator dispatches on it to ``map1``/``map2``,
``process_element1``/``process_element2`` and so on.  PyFlink runs its co-functions the same way (one Python
operator fed a row that says which side a record came from).

The watermark is Flink's rule for two-input operators (seed 004: ``min(input1Watermark, input2Watermark)``,
engine/watermarks/multi_input.py): the union's channels all go through the consuming task's
StatusWatermarkValve, whose output is the minimum over the channels of both inputs, which is the minimum of the
two inputs' own minima; an idle input is left out exactly as the InputWatermarkCombiner leaves it out.  Keyed
inputs are partitioned before the union, each by its own key selector applied to the tagged record
(:class:`InputKeySelector`), so records of both inputs with equal keys meet in the same key group; the operator
keys a record with :class:`TaggedKeySelector`, which picks the selector of the record's input.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from engine.api.functions import (
    CoFlatMapFunction,
    CoMapFunction,
    CoProcessFunction,
    KeyedCoProcessFunction,
    KeyedProcessFunction,
    ProcessFunction,
)
from engine.errors import IllegalStateError

FIRST = 1
SECOND = 2


class InputTag:
    """The map that marks a record with the input it came from: ``value -> (input, value)``."""

    __slots__ = ("input",)

    def __init__(self, input: int) -> None:
        self.input = input

    def __call__(self, value: Any) -> tuple[int, Any]:
        return (self.input, value)

    def __repr__(self) -> str:
        return f"InputTag({self.input})"


def _untag(tagged: Any) -> tuple[int, Any]:
    if type(tagged) is not tuple or len(tagged) != 2 or tagged[0] not in (FIRST, SECOND):
        raise IllegalStateError(f"Bug: a two-input operator got an untagged record {tagged!r}")
    return tagged


def dead_letter_of(tagged: Any) -> tuple[Any, str]:
    """A tagged record whose key selector raised, as its dead letter shows it: the user's record, and the stage
    ``key_selector:input1`` / ``key_selector:input2`` (engine/runtime/keyed_edges.py ``key_failure``)."""
    if type(tagged) is tuple and len(tagged) == 2 and tagged[0] in (FIRST, SECOND):
        return tagged[1], f"key_selector:input{tagged[0]}"
    return tagged, "key_selector"


class InputKeySelector:
    """One input's key selector applied to its tagged records (the hash edge of that input)."""

    __slots__ = ("key_selector",)

    def __init__(self, key_selector: Callable[[Any], Any]) -> None:
        self.key_selector = key_selector

    def __call__(self, tagged: tuple[int, Any]) -> Any:
        return self.key_selector(tagged[1])

    def dead_letter_of(self, tagged: tuple[int, Any]) -> tuple[Any, str]:
        return dead_letter_of(tagged)


class TaggedKeySelector:
    """The key of a tagged record from either input: the first input's selector or the second's."""

    __slots__ = ("key_selector1", "key_selector2")

    def __init__(self, key_selector1: Callable[[Any], Any], key_selector2: Callable[[Any], Any] | None) -> None:
        self.key_selector1 = key_selector1
        self.key_selector2 = key_selector2

    def __call__(self, tagged: tuple[int, Any]) -> Any:
        input, value = tagged
        if input == FIRST:
            return self.key_selector1(value)
        if self.key_selector2 is None:
            raise IllegalStateError("Bug: the broadcast input has no key; it must not be keyed")
        return self.key_selector2(value)

    def dead_letter_of(self, tagged: tuple[int, Any]) -> tuple[Any, str]:
        return dead_letter_of(tagged)


class UntaggedKeySelector:
    """One input's key selector on its records once untagged (the keyed broadcast operator keys them so); a
    record it cannot key is a dead letter naming that input."""

    __slots__ = ("key_selector", "input")

    def __init__(self, key_selector: Callable[[Any], Any], input: int) -> None:
        self.key_selector = key_selector
        self.input = input

    def __call__(self, value: Any) -> Any:
        return self.key_selector(value)

    def dead_letter_of(self, value: Any) -> tuple[Any, str]:
        return value, f"key_selector:input{self.input}"


class CoMap:
    """``ConnectedStreams.map``: ``map1`` or ``map2`` by the record's input (a plain callable for MapOperator)."""

    __slots__ = ("function",)

    def __init__(self, function: CoMapFunction) -> None:
        self.function = function

    def __call__(self, tagged: tuple[int, Any]) -> Any:
        input, value = _untag(tagged)
        return self.function.map1(value) if input == FIRST else self.function.map2(value)


class CoFlatMap:
    """``ConnectedStreams.flat_map``: ``flat_map1`` or ``flat_map2`` by the record's input."""

    __slots__ = ("function",)

    def __init__(self, function: CoFlatMapFunction) -> None:
        self.function = function

    def __call__(self, tagged: tuple[int, Any]) -> Iterable[Any] | None:
        input, value = _untag(tagged)
        return self.function.flat_map1(value) if input == FIRST else self.function.flat_map2(value)


class _ByInput:
    """A two-input process function as a one-input one: elements go to ``process_element1``/``process_element2``
    by the input their tag names; ``open``/``close`` are the function's."""

    def __init__(self, function: Any) -> None:
        self.function = function

    def open(self, runtime_context: Any) -> None:
        self.function.open(runtime_context)

    def close(self) -> None:
        self.function.close()

    def process_element(self, value: Any, ctx: Any) -> Iterable[Any] | None:
        input, record = _untag(value)
        if input == FIRST:
            return self.function.process_element1(record, ctx)
        return self.function.process_element2(record, ctx)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({type(self.function).__name__})"


class KeyedCoProcess(_ByInput, KeyedProcessFunction):
    """A :class:`KeyedCoProcessFunction` as the KeyedProcessFunction the keyed process operator runs: the
    same state backend, timer service, contexts, snapshots and rescaling; timers go to ``on_timer``."""

    def __init__(self, function: KeyedCoProcessFunction) -> None:
        super().__init__(function)

    def on_timer(self, timestamp: int, ctx: Any) -> Iterable[Any] | None:
        return self.function.on_timer(timestamp, ctx)


class CoProcess(_ByInput, ProcessFunction):
    """A :class:`CoProcessFunction` as the ProcessFunction the non-keyed process operator runs
    (engine/operators/process.py): its context, outputs and side outputs."""

    def __init__(self, function: CoProcessFunction) -> None:
        super().__init__(function)
