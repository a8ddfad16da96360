"""Records in and out and the input watermark of every operator chain (vertex), per subtask: what
``JobStatusReport.operators`` carries, the same on both runtimes (issue 18).

A vertex is what Flink's web UI shows as one node of the job graph: a chain of operators running in one
task per subtask (engine/graph/plan.py).  Its counts mean what they mean there since FLIP-33:

- ``records_in``: records that reached the vertex over its input edges; for a source vertex, the records
  its splits read (malformed lines that became dead letters are not records);
- ``records_out``: records it sent over its output edges, plus the records its sinks (and collect
  targets) were handed.  A record that fails a keyed edge's key selector becomes a dead letter and is
  not sent.  So for a linear job every vertex's ``records_in`` is its producer's ``records_out``.
- ``watermark_ms``: a subtask's current input watermark (what its StatusWatermarkValve combined from its
  input channels); a source subtask's is the watermark it generates from its splits.  The vertex's is the
  smallest of its subtasks'.

Counting costs an integer add per batch: the local runtime counts buffers as its record writers flush
them and batches as its tasks read them; the Spark runtime counts each batch a task hands to a consumer
(engine/runtime/spark/chains.py) and ships the counts with the task's other rows.

**Supported**: both runtimes, counts of every vertex, per-subtask counts and watermarks on the local
runtime.  On Spark (engine/runtime/spark/operator_counts.py) a source reads one task per split and a
stateless vertex runs inside the task of its producer; the counts are mapped back onto subtasks: a split's
to the source subtask reading it locally, a FORWARD-fed stateless vertex's subtask i from its producers'
subtask i, a keyed vertex's from the keyed task that ran it, a ``partition_custom``-fed stateless vertex's by the
subtask its partitioner picked.  **Partial**: on Spark a stateless vertex fed over a REBALANCE, RESCALE or
SHUFFLE edge lists no subtasks (the local runtime deals its records round robin or at random), and a keyed
vertex's per-subtask ``records_in`` is None when Spark SQL pre-aggregated the input (the task sees folded rows).
At most :data:`MAX_SUBTASKS_LISTED` subtasks are listed per vertex, so a status stays small.
"""

from __future__ import annotations

from typing import Any, Iterable

#: subtasks listed per vertex (the first by index); the vertex totals always cover all of them
MAX_SUBTASKS_LISTED = 64


def vertex_key(vertex: Any) -> str:
    """The name a vertex is reported under: its head's operator uid (stable across restarts and runtimes)."""
    return str(vertex.head.operator_uid())


def operator_entry(vertex: Any, records_in: int, records_out: int, watermark_ms: int | None,
                   subtasks: Iterable[dict[str, Any]] = ()) -> dict[str, Any]:
    """One vertex of ``JobStatusReport.operators``; ``subtasks`` are ``{index, records_in, records_out,
    watermark_ms}`` by index (only the first MAX_SUBTASKS_LISTED are kept)."""
    listed = list(subtasks)
    entry: dict[str, Any] = {
        "name": vertex.name,
        "parallelism": vertex.parallelism,
        "records_in": int(records_in),
        "records_out": int(records_out),
        "watermark_ms": watermark_ms,
        "subtasks": listed[:MAX_SUBTASKS_LISTED],
    }
    if len(listed) > MAX_SUBTASKS_LISTED:
        entry["subtasks_truncated"] = True
    return entry


def smallest_watermark(marks: Iterable[int | None]) -> int | None:
    known = [m for m in marks if m is not None]
    return min(known) if known else None


def operator_state_sizes(metadata: Any) -> dict[str, int]:
    """Bytes of state each operator uid references in a checkpoint's ``_metadata`` (checkpoints/metadata.py),
    computed once when the runtime finalizes it: the handles already carry their sizes, nothing is read."""
    sizes: dict[str, int] = {}
    for uid, _, handle in metadata.files():
        sizes[uid] = sizes.get(uid, 0) + int(handle.bytes)
    for op in metadata.operators:  # an operator whose state is empty still has a size: 0
        sizes.setdefault(op.uid, 0)
    return sizes
