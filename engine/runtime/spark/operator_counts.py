"""The Spark driver's per-operator counts: what its tasks report, summed into each vertex's records in and
out (engine/runtime/operator_metrics.py).

A Spark task does not run a vertex: a source task reads one split and runs everything downstream that
needs no shuffle, a keyed task runs one subtask of each keyed vertex and what follows it
(engine/runtime/spark/chains.py).  So tasks count what they can see — the records each batch hands to a
consumer, by ``(producer node, side-output tag, consumer node)`` — and ship the counts as one
``DEST_OPERATOR_COUNTS`` row per router.  The driver maps them onto the plan: a vertex's records in are
the counts of its input edges (a source's, the records its splits read), its records out the counts of
its output edges plus what its sink nodes were handed; the same definitions the local runtime counts
directly, so both runtimes report the same numbers for the same job.

Per subtask: a keyed task runs one subtask, and its router says which; a source task reads one split, and its
counts go to the source subtask that reads that split on the local runtime (the same assignment,
engine/io/source.py ``assigned_splits``), so a source vertex lists subtasks as it does there.

Bounded: one int per plan edge and consumer, per keyed subtask, per source split, per source vertex.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Container

from engine.elements import MAX_WATERMARK, MIN_WATERMARK
from engine.graph.transformations import Partitioning, SinkTransformation
from engine.io.source import assigned_splits
from engine.runtime.operator_metrics import MAX_SUBTASKS_LISTED, operator_entry, vertex_key

if TYPE_CHECKING:
    from engine.runtime.spark.splits import SplitEntry

Edge = tuple[int, str | None, int]


class OperatorCounts:
    def __init__(self) -> None:
        #: records handed to each consumer, in all and per keyed-vertex subtask
        self.edges: dict[Edge, int] = {}
        self.edges_by_subtask: dict[tuple[int, Edge], int] = {}
        #: (keyed node id, subtask) -> records its operator was given (not reported when pre-aggregated)
        self.keyed_in: dict[tuple[int, int], int] = {}
        #: records handed to each consumer by the source task of a split (its key in the job)
        self.edges_by_split: dict[tuple[str, Edge], int] = {}
        #: records handed to each consumer while a custom partitioner's subtask t of a stateless vertex ran, by t
        self.edges_by_target: dict[tuple[int, Edge], int] = {}
        #: source vertex id -> records its splits read, and split key -> records that split read
        self.read: dict[int, int] = {}
        self.read_by_split: dict[str, int] = {}

    def add_read(self, vertex_id: int, records: int, split_key: str | None = None) -> None:
        self.read[vertex_id] = self.read.get(vertex_id, 0) + records
        if split_key is not None:
            self.read_by_split[split_key] = self.read_by_split.get(split_key, 0) + records

    def add_task_counts(self, doc: dict[str, Any]) -> None:
        """One router's row (engine/runtime/spark/chains.py ``Router.close``)."""
        subtask, split = doc.get("subtask"), doc.get("split")
        for producer, tag, consumer, n in doc["edges"]:
            edge = (int(producer), tag, int(consumer))
            self.edges[edge] = self.edges.get(edge, 0) + int(n)
            if subtask is not None:
                key = (int(subtask), edge)
                self.edges_by_subtask[key] = self.edges_by_subtask.get(key, 0) + int(n)
            elif split is not None:
                at = (str(split), edge)
                self.edges_by_split[at] = self.edges_by_split.get(at, 0) + int(n)
        for target, producer, tag, consumer, n in doc.get("by_target", ()):
            at_target = (int(target), (int(producer), tag, int(consumer)))
            self.edges_by_target[at_target] = self.edges_by_target.get(at_target, 0) + int(n)
        for node, index, n in doc.get("keyed_in", ()):
            at = (int(node), int(index))
            self.keyed_in[at] = self.keyed_in.get(at, 0) + int(n)
        if subtask is not None and doc.get("in") is not None:
            node, n = doc["in"]
            at = (int(node), int(subtask))
            self.keyed_in[at] = self.keyed_in.get(at, 0) + int(n)

    def report(self, plan: Any, splits: dict[str, SplitEntry], watermark: int, keyed: tuple[type, ...],
               monitored: Container[int] = ()) -> dict[str, dict[str, Any]]:
        """``JobStatusReport.operators``: ``splits`` are the driver's split entries by split key (splits.py
        SplitEntry), ``watermark`` is W(n), ``keyed`` the head types of keyed vertices, ``monitored`` the ids of
        source vertices that list new splits as they run.  A keyed subtask's records in are what its tasks were
        given, or for a pre-aggregated window what the reading tasks sent its key groups (chains.py
        ``Router.keyed_in``).  Called from the status thread: reads copies."""
        edges, by_subtask, keyed_in, read = (dict(self.edges), dict(self.edges_by_subtask), dict(self.keyed_in),
                                             dict(self.read))
        by_split, read_by_split = dict(self.edges_by_split), dict(self.read_by_split)
        by_target = dict(self.edges_by_target)
        job_mark = watermark if watermark > MIN_WATERMARK else None
        # which source subtask reads each split, as on the local runtime
        split_sets: dict[int, list[set[str]]] = {}
        subtask_of_split: dict[str, int] = {}
        for v in plan.vertices:
            if v.is_source():
                own = {key: s for key, s in splits.items() if s.vertex == v.id}
                split_sets[v.id] = _splits_per_subtask(own, v.parallelism, v.id in monitored)
                subtask_of_split.update({k: index for index, keys in enumerate(split_sets[v.id]) for k in keys})
        # records each subtask handed over each edge: a keyed task's by its subtask, a source task's by its split's
        per_subtask = dict(by_subtask)
        for (k, edge), n in by_split.items():
            if k in subtask_of_split:
                at = (subtask_of_split[k], edge)
                per_subtask[at] = per_subtask.get(at, 0) + n
        out: dict[str, dict[str, Any]] = {}
        for v in plan.vertices:
            sinks = {n.id for n in v.nodes if isinstance(n, SinkTransformation)}
            records_out = sum(edges.get(_key(e), 0) for e in v.outputs) + sum(
                n for (_, _, c), n in edges.items() if c in sinks)

            def sent(index: int, v: Any = v, sinks: set[int] = sinks) -> int:
                return sum(per_subtask.get((index, _key(e)), 0) for e in v.outputs) + sum(
                    n for (i, (_, _, c)), n in per_subtask.items() if i == index and c in sinks)

            subtasks: list[dict[str, Any]] = []
            if v.is_source():
                own = {key: s for key, s in splits.items() if s.vertex == v.id}
                records_in, mark = read.get(v.id, 0), _source_watermark(list(own.values()))
                subtasks = [{"index": index, "records_in": sum(read_by_split.get(k, 0) for k in keys),
                             "records_out": sent(index), "watermark_ms": _source_watermark([own[k] for k in keys])}
                            for index, keys in enumerate(split_sets[v.id])]
            else:
                records_in, mark = sum(edges.get(_key(e), 0) for e in v.inputs), job_mark
            if isinstance(v.head, keyed):  # every keyed subtask runs to W(n) at each epoch end
                for index in range(min(v.parallelism, MAX_SUBTASKS_LISTED + 1)):
                    got = keyed_in.get((v.head.id, index), 0)
                    subtasks.append({"index": index, "records_in": got, "records_out": sent(index),
                                     "watermark_ms": job_mark})
            elif not v.is_source() and v.inputs and all(e.partitioning is Partitioning.CUSTOM for e in v.inputs):
                # a stateless chain fed by custom partitioners: the tasks ran each subtask's records apart and
                # counted them by the subtask the partitioner picked, as the local runtime's subtask i gets them
                def by(index: int, edges: Any) -> int:
                    return sum(by_target.get((index, e), 0) for e in edges)
                in_edges = [_key(e) for e in v.inputs]
                out_edges = {_key(e) for e in v.outputs} | {e for (_, e) in by_target if e[2] in sinks}
                subtasks = [{"index": index, "records_in": by(index, in_edges), "records_out": by(index, out_edges),
                             "watermark_ms": job_mark}
                            for index in range(min(v.parallelism, MAX_SUBTASKS_LISTED + 1))]
            elif not v.is_source() and v.inputs and all(e.partitioning is Partitioning.FORWARD for e in v.inputs):
                # a stateless chain fed over FORWARD edges runs in its producers' tasks: subtask i gets subtask i's
                # records, as on the local runtime (over a REBALANCE edge the local runtime deals records round
                # robin, which a Spark task cannot mirror: no subtasks listed)
                subtasks = [{"index": index,
                             "records_in": sum(per_subtask.get((index, _key(e)), 0) for e in v.inputs),
                             "records_out": sent(index), "watermark_ms": job_mark}
                            for index in range(min(v.parallelism, MAX_SUBTASKS_LISTED + 1))]
            out[vertex_key(v)] = operator_entry(v, records_in, records_out, mark, subtasks)
        return out


def _splits_per_subtask(own: dict[str, SplitEntry], parallelism: int, monitored: bool) -> list[set[str]]:
    """The keys of the splits each source subtask reads on the local runtime (engine/io/source.py
    ``assigned_splits``): a Spark task reads one split, and its counts go to the subtask that split belongs to."""
    key_of = {s.split.split_id: key for key, s in own.items()}
    ordered = [s.split for s in own.values()]
    return [{key_of[s.split_id] for s in assigned_splits(ordered, parallelism, index, monitored)}
            for index in range(min(parallelism, MAX_SUBTASKS_LISTED + 1))]


def _key(edge: Any) -> Edge:
    return (edge.source_node.id, None if edge.tag is None else edge.tag.tag_id, edge.target_vertex.head.id)


def _source_watermark(splits: list[SplitEntry]) -> int | None:
    """The smallest watermark of the source's active splits: MAX_WATERMARK once all finished, None while none
    has one (or all are idle)."""
    if all(s.finished for s in splits):
        return MAX_WATERMARK
    marks = [s.watermark for s in splits if not s.finished and not s.idle]
    mark = min(marks) if marks else None
    return mark if mark is not None and mark > MIN_WATERMARK else None
