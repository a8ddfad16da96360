"""From the logical graph to a physical plan: vertices (operator chains) joined by network edges.

Both runtimes use this plan.  Chaining follows Flink's rules in their simple
form: a one-input node whose single input has the same parallelism and a
forward connection (implicit, or an explicit ``forward()``) runs in its
producer's task (map, filter, flat_map, timestamps/watermarks, side-output
selection, sinks), unless chaining is off for the job
(``disable_operator_chaining``) or the node (``disable_chaining``,
``start_new_chain``).  An explicit ``forward()`` between different
parallelisms is refused, as Flink refuses it.  ``key_by``, ``rebalance``,
``rescale``, ``shuffle``, ``partition_custom`` and ``broadcast`` become network
edges; a union is virtual (its consumer reads channels from every union input);
a window starts a new vertex after its hash edge.  A timestamps/watermarks
node directly after a source is folded into the source so watermarks are
generated per split (ARCHITECTURE section 4), whatever the chaining settings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.errors import JobDefinitionError
from engine.graph.transformations import (
    MapTransformation,
    Partitioning,
    PartitionTransformation,
    SideOutputTransformation,
    SinkTransformation,
    SourceTransformation,
    TimestampsAndWatermarksTransformation,
    Transformation,
    UnionTransformation,
    WindowTransformation,
    safe_name,
    topological_order,
)


@dataclass(eq=False)
class Edge:
    """Records of ``source_vertex`` (main output of node ``source_node``, or its side output ``tag``)
    travel to ``target_vertex`` with ``partitioning``."""

    source_vertex: Vertex
    source_node: Transformation
    target_vertex: Vertex
    partitioning: Partitioning
    key_selector: Any = None
    tag: Any = None  # OutputTag when the edge carries a side output

    @property
    def name(self) -> str:
        return f"{self.source_vertex.name}->{self.target_vertex.name}"


@dataclass(eq=False)
class Vertex:
    """A chain of nodes running in one task per subtask index."""

    id: int
    head: Transformation
    parallelism: int
    nodes: list[Transformation] = field(default_factory=list)
    inputs: list[Edge] = field(default_factory=list)
    outputs: list[Edge] = field(default_factory=list)
    #: per-split watermark strategy folded into a source vertex
    source_watermark_strategy: Any = None

    @property
    def name(self) -> str:
        return " -> ".join(n.name for n in self.nodes)

    def is_source(self) -> bool:
        return isinstance(self.head, SourceTransformation)


@dataclass
class PhysicalPlan:
    vertices: list[Vertex]
    #: node id -> vertex holding it
    vertex_of: dict[int, Vertex]
    #: nodes folded away (partition/union) resolved to their producers
    max_parallelism: int

    def vertex_by_uid(self) -> dict[str, Vertex]:
        return {v.head.operator_uid(): v for v in self.vertices}


def _resolve_producers(node: Transformation) -> list[tuple[Transformation, Partitioning, Any, Any, Any]]:
    """Real producer nodes behind virtual nodes (partition, union, side-output selection on a network edge):
    ``(producer, partitioning, key selector, side-output tag, the partition node that set it or None)``; the
    partition nearest the consumer wins, as in Flink."""
    if isinstance(node, UnionTransformation):
        out: list[tuple[Transformation, Partitioning, Any, Any, Any]] = []
        for inp in node.inputs:
            out.extend(_resolve_producers(inp))
        return out
    if isinstance(node, PartitionTransformation):
        inner = []
        for producer, _, _, tag, _ in _resolve_producers(node.inputs[0]):
            inner.append((producer, node.partitioning, node.key_selector, tag, node))
        return inner
    if isinstance(node, SideOutputTransformation):
        return [(p, part, ks, node.tag, by) for p, part, ks, _, by in _resolve_producers(node.inputs[0])]
    return [(node, Partitioning.FORWARD, None, None, None)]


def build_plan(sinks: list[Transformation], default_parallelism: int, max_parallelism: int,
               chaining: bool = True) -> PhysicalPlan:
    """``chaining=False`` (``env.disable_operator_chaining()``) gives every node but a source's per-split
    timestamps/watermarks its own vertex, as Flink's chaining switch does."""
    order = topological_order(sinks)
    vertex_of: dict[int, Vertex] = {}
    vertices: list[Vertex] = []

    def parallelism_of(node: Transformation) -> int:
        p = node.parallelism or default_parallelism
        if isinstance(node, WindowTransformation) and node.non_keyed:
            p = 1
        if p > max_parallelism and not isinstance(node, (SourceTransformation, MapTransformation, SinkTransformation)):
            raise JobDefinitionError("parallelism", p, f"must not exceed max_parallelism ({max_parallelism}) for keyed operators")
        if node.max_parallelism is not None and p > node.max_parallelism:
            raise JobDefinitionError("parallelism", p, f"of operator {node.name!r} must not exceed its own max "
                                     f"parallelism ({node.max_parallelism}, set_max_parallelism)")
        return p

    def new_vertex(node: Transformation) -> Vertex:
        v = Vertex(id=len(vertices), head=node, parallelism=parallelism_of(node), nodes=[node])
        vertices.append(v)
        vertex_of[node.id] = v
        return v

    for node in order:
        if isinstance(node, (PartitionTransformation, UnionTransformation)):
            continue  # virtual: resolved by consumers
        if isinstance(node, SideOutputTransformation):
            continue  # virtual: a consumer reads the producer's side output
        if isinstance(node, SourceTransformation):
            new_vertex(node)
            continue
        producers = _resolve_producers(node.inputs[0]) if len(node.inputs) == 1 else [
            p for inp in node.inputs for p in _resolve_producers(inp)
        ]
        for producer, partitioning, _, _, by in producers:
            if by is not None and partitioning is Partitioning.FORWARD and not isinstance(node, WindowTransformation) \
                    and parallelism_of(node) != vertex_of[producer.id].parallelism:
                raise JobDefinitionError(
                    "forward", by.name,
                    f"Forward partitioning does not allow change of parallelism. Upstream operation: {producer.name} "
                    f"parallelism: {vertex_of[producer.id].parallelism}, downstream operation: {node.name} "
                    f"parallelism: {parallelism_of(node)}",
                    "Use another partitioning strategy, such as broadcast(), rebalance(), rescale() or shuffle(), or "
                    "give both operators the same parallelism")
        folds_into_source = _folds_into_source(node, producers, vertex_of)
        chainable = (
            not isinstance(node, WindowTransformation)
            and len(producers) == 1
            and producers[0][1] is Partitioning.FORWARD
            and parallelism_of(node) == vertex_of[producers[0][0].id].parallelism
            and not _has_network_input(node)
            and (folds_into_source or (chaining and node.chaining == "always"
                                       and producers[0][0].chaining != "never"))
        )
        if chainable:
            producer, _, _, tag, _ = producers[0]
            v = vertex_of[producer.id]
            # a timestamps/watermarks node right after the source runs per split inside the source
            if (isinstance(node, TimestampsAndWatermarksTransformation) and v.is_source()
                    and v.nodes[-1] is producer and producer is v.head and tag is None
                    and v.source_watermark_strategy is None and v.head.watermark_strategy is None):
                v.source_watermark_strategy = node.watermark_strategy
            v.nodes.append(node)
            vertex_of[node.id] = v
            node._chained_input = (producer, tag)  # type: ignore[attr-defined]
            continue
        v = new_vertex(node)
        for producer, partitioning, key_selector, tag, _ in producers:
            src = vertex_of[producer.id]
            if isinstance(node, WindowTransformation):
                partitioning, key_selector = Partitioning.HASH, node.key_selector
            elif partitioning is Partitioning.FORWARD and src.parallelism != v.parallelism:
                partitioning = Partitioning.REBALANCE
            edge = Edge(src, producer, v, partitioning, key_selector, tag)
            src.outputs.append(edge)
            v.inputs.append(edge)
    for v in vertices:
        if v.is_source() and v.head.watermark_strategy is not None:
            v.source_watermark_strategy = v.head.watermark_strategy
        for position, node in enumerate(v.nodes):
            node.planned_uid = _planned_uid(v, position, node)
    return PhysicalPlan(vertices, vertex_of, max_parallelism)


def _planned_uid(v: Vertex, position: int, node: Transformation) -> str:
    """The user's uid, else the node's place in the plan: vertex id, position in the chain, name."""
    return safe_name(node.uid) if node.uid else safe_name(f"v{v.id}.n{position}.{node.name}")


def _has_network_input(node: Transformation) -> bool:
    """Whether ``node`` reads over a network edge: a union or a partitioning other than an explicit ``forward()``."""
    inp = node.inputs[0]
    if isinstance(inp, PartitionTransformation):
        return inp.partitioning is not Partitioning.FORWARD
    return isinstance(inp, UnionTransformation)


def _folds_into_source(node: Transformation, producers: list[Any], vertex_of: dict[int, Vertex]) -> bool:
    """A timestamps/watermarks node right after its source: it runs per split inside the source (ARCHITECTURE
    section 4), whatever the chaining settings say."""
    if not isinstance(node, TimestampsAndWatermarksTransformation) or len(producers) != 1:
        return False
    producer, partitioning, _, tag, _ = producers[0]
    v = vertex_of[producer.id]
    return (partitioning is Partitioning.FORWARD and tag is None and v.is_source() and producer is v.head
            and v.nodes[-1] is producer and v.source_watermark_strategy is None
            and v.head.watermark_strategy is None and node.parallelism in (None, v.parallelism))
