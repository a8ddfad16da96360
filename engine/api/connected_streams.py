"""``connect`` and broadcast state: ConnectedStreams, BroadcastStream, BroadcastConnectedStream (PyFlink names).

Both inputs are tagged and unioned into one stream (engine/operators/co_functions.py explains why that gives
Flink's results, watermark included), so a connected job is made of parts both runtimes already run: maps,
a union, key_by edges and the keyed process operator.  Broadcast state adds a BROADCAST edge and its own
operator (engine/operators/broadcast_process.py), which both runtimes run (on Spark every subtask applies an
epoch's broadcast records before its other records: engine/runtime/spark/stages.py).

Supported: ``connect(other)`` with ``map(CoMapFunction)`` / ``flat_map(CoFlatMapFunction)``, keyed or not;
``process(KeyedCoProcessFunction)`` on two keyed inputs (``connect`` then ``key_by(k1, k2)``, or two
KeyedStreams connected); ``process(CoProcessFunction)`` otherwise (no keyed state, no timers: the non-keyed
process operator, engine/operators/process.py); ``broadcast(MapStateDescriptor, ...)`` then
``keyed.connect(broadcast_stream).process(KeyedBroadcastProcessFunction)`` or
``stream.connect(broadcast_stream).process(BroadcastProcessFunction)``.
Not supported: Java Flink's ``applyToKeyedState`` in ``process_broadcast_element`` (PyFlink 2.3 does not offer it
either).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from engine.api.fields import FieldKeySelector, is_field
from engine.api.functions import (
    BroadcastProcessFunction,
    CoFlatMapFunction,
    CoMapFunction,
    CoProcessFunction,
    KeyedBroadcastProcessFunction,
    KeyedCoProcessFunction,
    check_callable,
)
from engine.api.typeinfo import check_type_info
from engine.errors import JobDefinitionError
from engine.graph.transformations import (
    BroadcastProcessTransformation,
    KeyedProcessTransformation,
    MapTransformation,
    Partitioning,
    PartitionTransformation,
    Transformation,
    UnionTransformation,
)
from engine.operators.co_functions import (
    FIRST,
    SECOND,
    CoFlatMap,
    CoMap,
    CoProcess,
    InputKeySelector,
    InputTag,
    KeyedCoProcess,
    TaggedKeySelector,
)
from engine.state.descriptors import MapStateDescriptor

if TYPE_CHECKING:
    from engine.api.datastream import DataStream, SingleOutputStreamOperator


def _key_selector_of(key_selector: Any, parameter: str) -> Callable[[Any], Any]:
    if is_field(key_selector):
        return FieldKeySelector(key_selector).get_key
    return check_callable(key_selector, parameter, "get_key")


def _tagged(stream: DataStream, input: int, key_selector: Callable[[Any], Any] | None) -> Transformation:
    """``stream``'s records as ``(input, value)``; hash-partitioned by ``key_selector`` when it is given.

    A KeyedStream is tagged before its key_by edge (the tag map then runs in the producer's task) and
    partitioned again by its own selector applied to the tagged record."""
    node = stream._node
    if stream._key_selector is not None and isinstance(node, PartitionTransformation):
        node = node.inputs[0]
    real = not isinstance(node, (PartitionTransformation, UnionTransformation))
    tag = MapTransformation(name=f"Tag(input {input})", inputs=[node], kind="map", fn=InputTag(input),
                            parallelism=node.parallelism if real else None)
    if key_selector is None:
        return tag
    return PartitionTransformation(name="KeyBy", inputs=[tag], partitioning=Partitioning.HASH,
                                   key_selector=InputKeySelector(key_selector))


class ConnectedStreams:
    """Two streams that share one operator (``first.connect(second)``), each keeping its own type."""

    def __init__(self, stream1: DataStream, stream2: DataStream,
                 key_selector1: Callable[[Any], Any] | None = None,
                 key_selector2: Callable[[Any], Any] | None = None) -> None:
        self.stream1 = stream1
        self.stream2 = stream2
        self._key_selector1 = key_selector1
        self._key_selector2 = key_selector2

    def is_keyed(self) -> bool:
        return self._key_selector1 is not None and self._key_selector2 is not None

    def key_by(self, key_selector1: Any, key_selector2: Any, key_type: Any = None) -> ConnectedStreams:
        """Key both inputs (a function, a KeySelector or a field each): records with equal keys meet in the same
        subtask and share keyed state."""
        check_type_info(key_type, "key_type")
        return ConnectedStreams(self.stream1, self.stream2, _key_selector_of(key_selector1, "key_selector1"),
                                _key_selector_of(key_selector2, "key_selector2"))

    def _union(self) -> UnionTransformation:
        # a keyed input is partitioned by its key, the other goes forward (or round-robin), as in Flink
        inputs = [_tagged(self.stream1, FIRST, self._key_selector1),
                  _tagged(self.stream2, SECOND, self._key_selector2)]
        return UnionTransformation(name="Connect", inputs=inputs)

    def map(self, func: Any, output_type: Any = None) -> SingleOutputStreamOperator:
        """``map1`` for the first stream's records, ``map2`` for the second's."""
        if not isinstance(func, CoMapFunction):
            raise JobDefinitionError("func", func, "must be a CoMapFunction (with map1 and map2)",
                                     "Subclass engine.CoMapFunction; for one input use DataStream.map")
        node = MapTransformation(name="CoMap", inputs=[self._union()], kind="map", fn=CoMap(func),
                                 output_type=check_type_info(output_type, "output_type"))
        return self.stream1._result(node)

    def flat_map(self, func: Any, output_type: Any = None) -> SingleOutputStreamOperator:
        """``flat_map1`` / ``flat_map2``, each returning or yielding any number of results."""
        if not isinstance(func, CoFlatMapFunction):
            raise JobDefinitionError("func", func, "must be a CoFlatMapFunction (with flat_map1 and flat_map2)",
                                     "Subclass engine.CoFlatMapFunction; for one input use DataStream.flat_map")
        node = MapTransformation(name="CoFlatMap", inputs=[self._union()], kind="flat_map", fn=CoFlatMap(func),
                                 output_type=check_type_info(output_type, "output_type"))
        return self.stream1._result(node)

    def process(self, func: Any, output_type: Any = None) -> SingleOutputStreamOperator:
        """A KeyedCoProcessFunction on two keyed inputs (keyed state and timers shared by both), or a
        CoProcessFunction on inputs that are not both keyed (no keyed state, no timers; it chains like a
        flat_map, engine/operators/process.py), as PyFlink picks by ``is_keyed``."""
        output_type = check_type_info(output_type, "output_type")
        if isinstance(func, CoProcessFunction):
            if self.is_keyed():
                raise JobDefinitionError(
                    "func", func, "must be a KeyedCoProcessFunction on two keyed inputs",
                    "Subclass engine.KeyedCoProcessFunction, or connect the streams without key_by for a "
                    "CoProcessFunction")
            node = MapTransformation(name="CoProcess", inputs=[self._union()], kind="process", fn=CoProcess(func),
                                     output_type=output_type)
            return self.stream1._result(node)
        if not isinstance(func, KeyedCoProcessFunction):
            raise JobDefinitionError(
                "func", func, "must be a KeyedCoProcessFunction or a CoProcessFunction on ConnectedStreams",
                "Subclass engine.KeyedCoProcessFunction (keyed inputs: process_element1, process_element2, "
                "on_timer) or engine.CoProcessFunction (process_element1, process_element2)")
        if not self.is_keyed():
            raise JobDefinitionError(
                "func", func, "needs two keyed inputs: a KeyedCoProcessFunction has keyed state and timers",
                "Connect two KeyedStreams (a.key_by(k1).connect(b.key_by(k2))) or call .key_by(k1, k2) after "
                "connect; without keys use a CoProcessFunction")
        node = KeyedProcessTransformation(
            name="KeyedCoProcess", inputs=[self._union()],
            key_selector=TaggedKeySelector(self._key_selector1, self._key_selector2),  # type: ignore[arg-type]
            function=KeyedCoProcess(func), description="process", output_type=output_type)
        return self.stream1._result(node)


class BroadcastStream:
    """A stream whose every record reaches every subtask of the operator it is connected to, with the broadcast
    states named by ``descriptors`` (``stream.broadcast(MapStateDescriptor(...))``)."""

    def __init__(self, stream: DataStream, descriptors: tuple[MapStateDescriptor, ...]) -> None:
        if not descriptors:
            raise JobDefinitionError("broadcast_state_descriptors", descriptors,
                                     "must name at least one MapStateDescriptor")
        names = set()
        for i, d in enumerate(descriptors):
            if not isinstance(d, MapStateDescriptor):
                raise JobDefinitionError(f"broadcast_state_descriptors[{i}]", d, "must be a MapStateDescriptor",
                                         "Broadcast state is a map: MapStateDescriptor('rules', Types.STRING(), ...)")
            if d.name in names:
                raise JobDefinitionError(f"broadcast_state_descriptors[{i}]", d, "must have a name of its own")
            names.add(d.name)
        self.stream = stream
        self.descriptors = descriptors


class BroadcastConnectedStream:
    """A (keyed or non-keyed) stream connected to a BroadcastStream; ``process`` runs the broadcast function."""

    def __init__(self, stream: DataStream, broadcast_stream: BroadcastStream,
                 key_selector: Callable[[Any], Any] | None) -> None:
        self.stream = stream
        self.broadcast_stream = broadcast_stream
        self._key_selector = key_selector

    def process(self, func: Any, output_type: Any = None) -> SingleOutputStreamOperator:
        """A KeyedBroadcastProcessFunction after a KeyedStream, a BroadcastProcessFunction otherwise."""
        check_type_info(output_type, "output_type")
        keyed = self._key_selector is not None
        expected = KeyedBroadcastProcessFunction if keyed else BroadcastProcessFunction
        if not isinstance(func, expected):
            other = "BroadcastProcessFunction" if keyed else "KeyedBroadcastProcessFunction"
            raise JobDefinitionError(
                "func", func, f"must be a {expected.__name__} on a {'keyed' if keyed else 'non-keyed'} stream "
                "connected to a BroadcastStream",
                f"Subclass engine.{expected.__name__}" + (
                    f"; a {other} needs {'no key_by' if keyed else 'key_by(...) before connect'}"
                    if isinstance(func, (BroadcastProcessFunction, KeyedBroadcastProcessFunction)) else ""))
        main = _tagged(self.stream, FIRST, self._key_selector)
        side = PartitionTransformation(name="Broadcast", inputs=[_tagged(self.broadcast_stream.stream, SECOND, None)],
                                       partitioning=Partitioning.BROADCAST)
        node = BroadcastProcessTransformation(
            name="KeyedBroadcastProcess" if keyed else "BroadcastProcess",
            inputs=[UnionTransformation(name="Connect", inputs=[main, side])],
            key_selector=TaggedKeySelector(self._key_selector, None) if keyed else None,  # type: ignore[arg-type]
            function=func, descriptors=self.broadcast_stream.descriptors, output_type=output_type)
        return self.stream._result(node)


__all__ = ["BroadcastConnectedStream", "BroadcastStream", "ConnectedStreams"]
