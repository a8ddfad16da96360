"""The logical job graph the DataStream API builds and both runtimes translate.

A job is a DAG of transformations (Flink's ``Transformation``s): the API only
records what the user asked for and validates it; ``engine.runtime.local`` and
``engine.runtime.spark`` decide how to run it.  Nodes hold user functions as
Python objects; nothing here is persisted (a job spec is re-imported by path,
never stored).
"""

from __future__ import annotations

import enum
import itertools
import re
from dataclasses import dataclass, field
from typing import Any, Callable

_ids = itertools.count(1)
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def next_node_id() -> int:
    return next(_ids)


def safe_name(text: str) -> str:
    """A storage-safe name (checkpoints.layout.check_name) for an operator uid or table name."""
    cleaned = _UNSAFE.sub("_", text)[:180]
    return cleaned if cleaned[:1].isalnum() else "x" + cleaned


class Partitioning(enum.Enum):
    """How records travel from one vertex's subtasks to the next one's."""

    FORWARD = "FORWARD"  # same subtask index, same parallelism (chained where possible)
    REBALANCE = "REBALANCE"  # round-robin
    HASH = "HASH"  # by key group of the key selector's result (key_by)
    BROADCAST = "BROADCAST"  # every record to every consumer subtask (broadcast state, ``broadcast()``)
    SHUFFLE = "SHUFFLE"  # a uniformly random consumer subtask per record (``shuffle()``)
    RESCALE = "RESCALE"  # round-robin over the consumer subtasks a producer subtask is wired to (``rescale()``)
    CUSTOM = "CUSTOM"  # the subtask a user partitioner picks from the record's key (``partition_custom``)


@dataclass(eq=False)
class Transformation:
    """A node of the logical graph."""

    name: str
    inputs: list[Transformation] = field(default_factory=list)
    parallelism: int | None = None  # None: the environment's default
    uid: str | None = None
    id: int = field(default_factory=next_node_id)

    #: set by engine.graph.plan.build_plan: the id this node's state is stored under
    planned_uid: str | None = field(default=None, repr=False, compare=False)
    #: the TypeInformation the job declared for this node's records (PyFlink's ``output_type`` /
    #: ``type_info``), None if none; only ``print()`` looks at it, see :func:`declared_output_type`
    output_type: Any = field(default=None, repr=False, compare=False, kw_only=True)
    #: PyFlink's chaining controls: "always" (chain where the plan can), "never" (``disable_chaining()``: neither
    #: into its producer nor its consumers), "head" (``start_new_chain()``: not into its producer)
    chaining: str = field(default="always", repr=False, compare=False, kw_only=True)
    #: ``DataStream.set_max_parallelism``: the operator's own upper bound of parallelism (None: the job's)
    max_parallelism: int | None = field(default=None, repr=False, compare=False, kw_only=True)
    #: ``set_description``: free text shown in ``get_execution_plan()``
    description_text: str | None = field(default=None, repr=False, compare=False, kw_only=True)

    def operator_uid(self) -> str:
        """The id state is stored under: the user's uid, else the node's position in the physical plan.

        Positions are stable when the same program is built again (a restart, a new
        master), unlike ``id``, which counts every node ever created in the process; so
        snapshots name the same operators whichever runtime took them.  Call it after
        ``build_plan``: before, only a user-set uid is stable.
        """
        if self.uid:
            return safe_name(self.uid)
        return self.planned_uid or safe_name(f"{self.name}-{self.id}")


@dataclass(eq=False)
class SourceTransformation(Transformation):
    source: Any = None  # engine.io.source.Source
    #: a strategy given at the source runs per split (Flink's per-split watermark generation)
    watermark_strategy: Any = None


@dataclass(eq=False)
class MapTransformation(Transformation):
    """map / filter / flat_map / process: ``kind`` says which; ``fn`` is the user callable, or for ``process`` the
    (non-keyed) ProcessFunction, which keeps no state and so chains like a flat_map (engine/operators/process.py)."""

    kind: str = "map"
    fn: Callable[..., Any] | None = None


@dataclass(eq=False)
class TimestampsAndWatermarksTransformation(Transformation):
    watermark_strategy: Any = None


@dataclass(eq=False)
class PartitionTransformation(Transformation):
    """A virtual node: how records reach the next operator.  A FORWARD one is the user's explicit ``forward()``
    (build_plan refuses it between different parallelisms, as Flink does); for CUSTOM ``key_selector`` is an
    engine.graph.partitioners.CustomPartitioning."""

    partitioning: Partitioning = Partitioning.HASH
    key_selector: Callable[[Any], Any] | None = None


@dataclass(eq=False)
class UnionTransformation(Transformation):
    pass


@dataclass(eq=False)
class WindowTransformation(Transformation):
    """A (keyed or all-) window: assigner, trigger, evictor, lateness, late tag and the window function."""

    key_selector: Callable[[Any], Any] | None = None
    assigner: Any = None
    trigger: Any = None
    evictor: Any = None
    allowed_lateness_ms: int = 0
    late_data_tag: Any = None
    #: normalized function spec, see engine.api.windowed_stream.WindowFunctionSpec
    function: Any = None
    non_keyed: bool = False


@dataclass(eq=False)
class KeyedProcessTransformation(Transformation):
    """``KeyedStream.process(KeyedProcessFunction)`` and the rolling aggregates (``reduce``, ``sum``, ``min``...),
    which run as a built-in KeyedProcessFunction: keyed state and timers per key (engine/operators/keyed_process.py).

    ``description`` names what the user called, for messages: "process", "reduce", "sum", "min_by", ...
    """

    key_selector: Callable[[Any], Any] | None = None
    function: Any = None  # an engine.api.functions.KeyedProcessFunction
    description: str = "process"


@dataclass(eq=False)
class BroadcastProcessTransformation(Transformation):
    """``connect(broadcast_stream).process(...)``: a (Keyed)BroadcastProcessFunction with broadcast state
    (engine/operators/broadcast_process.py).

    Its one input is the union of the two tagged inputs (engine/operators/co_functions.py): the non-broadcast
    side, keyed by ``key_selector`` when it is a KeyedStream, and the broadcast side on a BROADCAST edge.
    ``key_selector`` (None for the non-keyed form) reads tagged records; ``descriptors`` are the
    MapStateDescriptors given to ``broadcast(...)``.
    """

    key_selector: Callable[[Any], Any] | None = None
    function: Any = None
    descriptors: tuple[Any, ...] = ()


@dataclass(eq=False)
class AsyncTransformation(Transformation):
    async_function: Any = None
    timeout_ms: int = 0
    capacity: int = 100
    ordered: bool = True


@dataclass(eq=False)
class SideOutputTransformation(Transformation):
    tag: Any = None


@dataclass(eq=False)
class SinkTransformation(Transformation):
    sink: Any = None


def declared_output_type(node: Transformation) -> Any:
    """The type declared for ``node``'s records, following PyFlink: set on the node, else kept through
    nodes that pass records on unchanged (key_by, filter, timestamps, union, rebalance), else the side
    output tag's type; None (PyFlink's PICKLED_BYTE_ARRAY) otherwise."""
    while node.output_type is None:
        if isinstance(node, SideOutputTransformation):
            return getattr(node.tag, "type_info", None)
        passes_through = isinstance(node, (PartitionTransformation, TimestampsAndWatermarksTransformation,
                                           UnionTransformation)) or (
            isinstance(node, MapTransformation) and node.kind == "filter")
        if not passes_through or not node.inputs:
            return None
        node = node.inputs[0]
    return node.output_type


def topological_order(sinks: list[Transformation]) -> list[Transformation]:
    """Every node reachable from ``sinks``, inputs before consumers, in a deterministic order."""
    seen: dict[int, Transformation] = {}
    order: list[Transformation] = []

    def visit(node: Transformation) -> None:
        if node.id in seen:
            return
        seen[node.id] = node
        for inp in node.inputs:
            visit(inp)
        order.append(node)

    for s in sorted(sinks, key=lambda n: n.id):
        visit(s)
    return order
