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

Bounded: one int per plan edge and consumer, per keyed subtask, per source vertex.
"""

from __future__ import annotations

from typing import Any, Container

from engine.elements import MAX_WATERMARK, MIN_WATERMARK
from engine.graph.transformations import SinkTransformation
from engine.runtime.operator_metrics import MAX_SUBTASKS_LISTED, operator_entry, vertex_key

Edge = tuple[int, str | None, int]


class OperatorCounts:
    def __init__(self) -> None:
        #: records handed to each consumer, in all and per keyed-vertex subtask
        self.edges: dict[Edge, int] = {}
        self.edges_by_subtask: dict[tuple[int, Edge], int] = {}
        #: (keyed node id, subtask) -> records its operator was given (not reported when pre-aggregated)
        self.keyed_in: dict[tuple[int, int], int] = {}
        #: source vertex id -> records its splits read
        self.read: dict[int, int] = {}

    def add_read(self, vertex_id: int, records: int) -> None:
        self.read[vertex_id] = self.read.get(vertex_id, 0) + records

    def add_task_counts(self, doc: dict[str, Any]) -> None:
        """One router's row (engine/runtime/spark/chains.py ``Router.close``)."""
        subtask = doc.get("subtask")
        for producer, tag, consumer, n in doc["edges"]:
            edge = (int(producer), tag, int(consumer))
            self.edges[edge] = self.edges.get(edge, 0) + int(n)
            if subtask is not None:
                key = (int(subtask), edge)
                self.edges_by_subtask[key] = self.edges_by_subtask.get(key, 0) + int(n)
        if subtask is not None and doc.get("in") is not None:
            node, n = doc["in"]
            at = (int(node), int(subtask))
            self.keyed_in[at] = self.keyed_in.get(at, 0) + int(n)

    def report(self, plan: Any, splits: list[dict[str, Any]], watermark: int, keyed: tuple[type, ...],
               preaggregated: Container[int]) -> dict[str, dict[str, Any]]:
        """``JobStatusReport.operators``: ``splits`` are the driver's split entries (vertex, watermark, idle,
        finished), ``watermark`` is W(n), ``keyed`` the head types of keyed vertices, ``preaggregated`` the
        keyed node ids whose input Spark SQL folds.  Called from the status thread: reads copies."""
        edges, by_subtask, keyed_in, read = (dict(self.edges), dict(self.edges_by_subtask), dict(self.keyed_in),
                                             dict(self.read))
        job_mark = watermark if watermark > MIN_WATERMARK else None
        out: dict[str, dict[str, Any]] = {}
        for v in plan.vertices:
            sinks = {n.id for n in v.nodes if isinstance(n, SinkTransformation)}
            records_out = sum(edges.get(_key(e), 0) for e in v.outputs) + sum(
                n for (_, _, c), n in edges.items() if c in sinks)
            if v.is_source():
                records_in, mark = read.get(v.id, 0), _source_watermark([s for s in splits if s["vertex"] == v.id])
            else:
                records_in, mark = sum(edges.get(_key(e), 0) for e in v.inputs), job_mark
            subtasks: list[dict[str, Any]] = []
            if isinstance(v.head, keyed):  # every keyed subtask runs to W(n) at each epoch end
                for index in range(min(v.parallelism, MAX_SUBTASKS_LISTED + 1)):
                    sent = sum(by_subtask.get((index, _key(e)), 0) for e in v.outputs) + sum(
                        n for (i, (_, _, c)), n in by_subtask.items() if i == index and c in sinks)
                    got = None if v.head.id in preaggregated else keyed_in.get((v.head.id, index), 0)
                    subtasks.append({"index": index, "records_in": got, "records_out": sent, "watermark_ms": job_mark})
            out[vertex_key(v)] = operator_entry(v, records_in, records_out, mark, subtasks)
        return out


def _key(edge: Any) -> Edge:
    return (edge.source_node.id, None if edge.tag is None else edge.tag.tag_id, edge.target_vertex.head.id)


def _source_watermark(splits: list[dict[str, Any]]) -> int | None:
    """The smallest watermark of the source's active splits: MAX_WATERMARK once all finished, None while none
    has one (or all are idle)."""
    if all(s["finished"] for s in splits):
        return MAX_WATERMARK
    marks = [s["watermark"] for s in splits if not s["finished"] and not s["idle"]]
    mark = min(marks) if marks else None
    return mark if mark is not None and mark > MIN_WATERMARK else None
