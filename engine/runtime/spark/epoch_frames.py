"""Where an epoch's rows go in Spark: the DataFrames and SQL the job master builds for each epoch.

This is the ``epoch_shape="dataframe"`` plumbing; the default, ``"rdd"``, places the same rows on the RDD layer
(engine/runtime/spark/epoch_rdds.py, a subclass of :class:`EpochFrames`).

:class:`EpochFrames` places an epoch's work (engine/runtime/spark/job.py runs the epoch loop):

* a source vertex's unfinished splits as one Spark partition each (``range(n)`` in n partitions, through the
  vertex's ``mapInArrow`` source stage, engine/runtime/spark/stages.py);
* the keyed vertices (windows, ``KeyedStream.process``, rolling aggregates, broadcast process), level by level:
  the records routed to them — built-in min/max, and a sum the columnar layout does not take, first folded per
  (key, pane) in Spark SQL (engine/runtime/spark/preaggregation.py), except the column path's partials, already
  folded per (key, pane) by the reading task — plus their state rows of the epoch before,
  ``_kg`` computed in Spark SQL and shuffled so Spark partition i holds subtask i's key groups
  (:func:`subtask_expr`, :func:`partition_preimages`), a broadcast row copied to every subtask; the new state rows are
  materialized with ``localCheckpoint`` so lineage never grows across epochs;
* the rows the driver collects (sink records, dead letters, counters, split reports), one Spark job per call.

**Driver cost (issue 16).**  The job master builds these frames on every epoch, since each epoch's inputs (the
source stage's output, the state rows of the epoch before) are new localCheckpointed RDDs: whatever reads them is
analysed and planned again.  A DataFrame call costs the driver one py4j round trip or more (one per Column object,
per literal, per element of a list PySpark sends) and the JVM an analysis of its own, so the window stage's input
— per part a filter, a projection and a shuffle, then a union, a shuffle, a sort and a projection — and the driver
rows' filter are each written as one SQL text (:meth:`EpochFrames.sql`): one parse, one analysis, a handful of
round trips (a temporary view per input frame, dropped at once).  Same logical plan, same physical plan.

Measured with bench/bench_spark_driver.py (column form, tumbling, medians over the epochs after the second; this
2-core host shared, load 5 to 15 while measuring, so times are noisy and counts are not):

* py4j round trips of the job master's thread per epoch: 472 before, 107 after (500k events / 10k keys and 2M /
  100k alike: the count does not depend on the data);
* the window stage's input built alone on the same two inputs, interleaved, 15 times each: 116 ms before, 51 ms
  after (minimum; medians 180 and 105), with its ``mapInArrow`` and ``localCheckpoint`` 241 ms and 126 ms;
* the driver's part of a whole epoch (step minus the time inside its two Spark jobs) did not move beyond the
  noise: 724 and 656 ms before, 753 and 609 ms after (500k / 10k, two rounds taking turns), 564 ms before and
  557 ms after (2M / 100k).  cProfile says why: the
  driver thread spends about 96% of an epoch's step waiting on the JVM, of which the epoch's two ``collect``
  calls about 100 ms each beyond their jobs (planning, the SQL execution's events, serving the rows), a
  ``localCheckpoint`` about 90 ms (optimizing and physical planning of the plan it cuts), each SQL text about
  70 ms (parse, analysis, the views), each ``mapInArrow`` about 40 ms (its closure pickled: about 6.8 KB each,
  the routes and plan nodes included every epoch; a new Python UDF created in the JVM).  What would cut the
  epoch further is fewer Spark actions, not fewer calls: epoch n's window stage and epoch n+1's read in one job
  (the read needs only W(n) and S(n), known after epoch n's first job) — which moves the checkpoint barrier's
  bookkeeping and is not done here — and the closures' epoch-varying parameters passed as data so one UDF
  serves every epoch (not done either: it changes what the window stage reads, being rewritten meanwhile).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.errors import IllegalStateError
from engine.graph.transformations import (
    BroadcastProcessTransformation,
    KeyedProcessTransformation,
    WindowTransformation,
)
from engine.runtime.snapshot_metadata import source_split_key
from engine.runtime.spark.preaggregation import preaggregate
from engine.runtime.spark.rows import (
    COLUMNS as ROW_DDL_COLUMNS,
)
from engine.runtime.spark.rows import (
    DEST_BROADCAST,
    DEST_COLUMNS,
    DEST_DEAD_LETTER,
    DEST_DRIVER,
    DEST_METRICS,
    DEST_OPERATOR_COUNTS,
    DEST_SPLIT,
    DEST_STAGED,
    DEST_STATE,
    DEST_STATE_ACK,
    ROW_DDL,
)
from engine.runtime.spark.splits import SplitEntry
from engine.runtime.spark.stages import WINDOW_STAGE_COLUMNS, source_stage, window_stage
from engine.state.key_groups import check_parallelism
from engine.watermarks.strategy import WatermarkStrategy

#: vertices that run per key group with state carried between epochs (stages.py window_stage)
KEYED_VERTICES = (WindowTransformation, KeyedProcessTransformation, BroadcastProcessTransformation)


def upstream_of(v: Any) -> list[Any]:
    """The vertices upstream of vertex ``v`` reached without passing through a keyed vertex (window, keyed
    process): the keyed ones where the walk stops, and every other one on the way."""
    reached: list[Any] = []
    stack = [e.source_vertex for e in v.inputs]
    seen: set[int] = set()
    while stack:
        u = stack.pop()
        if u.id in seen:
            continue
        seen.add(u.id)
        reached.append(u)
        if not isinstance(u.head, KEYED_VERTICES):
            stack.extend(e.source_vertex for e in u.inputs)
    return reached


def upstream_keyed(v: Any) -> set[int]:
    """Keyed vertex (window, keyed process) node ids whose output reaches vertex ``v`` without another one in
    between."""
    return {u.head.id for u in upstream_of(v) if isinstance(u.head, KEYED_VERTICES)}


#: the destinations whose rows the driver collects (:meth:`EpochFrames.driver_rows`; epoch_rdds.py filters by them too)
DRIVER_DESTS = (DEST_DRIVER, DEST_DEAD_LETTER, DEST_METRICS, DEST_SPLIT, DEST_STAGED, DEST_OPERATOR_COUNTS,
                DEST_STATE_ACK)
_DRIVER_DESTS = ", ".join(str(d) for d in DRIVER_DESTS)


def union(frames: list[Any]) -> Any:
    out = frames[0]
    for f in frames[1:]:
        out = out.unionByName(f)
    return out



# ---- placement by subtask -----------------------------------------------------------------------------------
# Flink's placement: key group g belongs to subtask ``g * parallelism // max_parallelism``
# (``operator_index_for_key_group``), and Spark partition i *is* subtask i.  ``repartition(n, col)`` places a
# row at ``pmod(murmur3(col), n)``, so each subtask index is replaced by a *preimage*: an int whose murmur3
# hash lands in that partition.  The shuffle stays in the JVM.

_PREIMAGES: dict[int, tuple[int, ...]] = {}


def partition_preimages(spark: Any, parallelism: int) -> tuple[int, ...]:
    """For each partition i < parallelism, an int v with ``pmod(hash(v), parallelism) == i``.

    ``hash`` is Spark's Murmur3 (seed 42), the function ``repartition(n, col)`` places rows with,
    so repartitioning by v sends the row to partition i exactly.  Computed once per parallelism
    with a tiny Spark query, so it is whatever this Spark version really does.
    """
    if parallelism in _PREIMAGES:
        return _PREIMAGES[parallelism]
    found: dict[int, int] = {}
    width = 64 * parallelism
    while len(found) < parallelism:
        rows = (
            spark.range(0, width, numPartitions=1)
            .selectExpr("CAST(id AS INT) AS v", f"pmod(hash(CAST(id AS INT)), {parallelism}) AS part")
            .groupBy("part").min("v").collect()
        )
        found = {int(r[0]): int(r[1]) for r in rows}
        width *= 4
    _PREIMAGES[parallelism] = tuple(found[i] for i in range(parallelism))
    return _PREIMAGES[parallelism]


def subtask_expr(parallelism: int, max_parallelism: int, kg_col: str = "_kg") -> str:
    """Spark SQL for ``operator_index_for_key_group`` (Flink's computeOperatorIndexForKeyGroup)."""
    check_parallelism(parallelism, max_parallelism)
    return f"CAST(({kg_col} * {parallelism}) DIV {max_parallelism} AS INT)"


class EpochFrames:
    """The DataFrames of one job's epochs on ``spark``: ``routes`` (chains.py build_routes), the plan's
    ``max_parallelism`` and its keyed vertices (``windows``)."""

    def __init__(self, spark: Any, routes: Any, max_parallelism: int, windows: list[Any]) -> None:
        self.spark = spark
        self.routes = routes
        self.max_parallelism = max_parallelism
        #: keyed node id -> the keyed node ids upstream of it (without another keyed vertex between)
        self.upstream_windows = {v.head.id: upstream_keyed(v) for v in windows}
        self._range_frames: dict[int, Any] = {}
        self._row_struct: Any = None
        self._empty: Any = None
        #: False when ``env.get_config().set_auto_watermark_interval(0)`` turned periodic watermarks off
        self.periodic_watermarks = True

    def source_frame(self, v: Any, pieces: list[SplitEntry], epoch_records: int, now_ms: int,
                     watermark_before: int, staging: Callable[[], dict[int, Any]]) -> Any:
        """Source vertex ``v``'s stage over its unfinished splits (``pieces``, SplitTracker entries); None if none.
        ``staging``: the epoch's staging targets (each executor-staged sink's open transaction), asked when needed."""
        if not pieces:
            return None
        slices = [{"split": s.split.to_json(), "key": source_split_key(s.source_uid, s.split.split_id),
                   "offset": s.offset, "watermarks": s.watermarks} for s in pieces]
        strategy = v.source_watermark_strategy or WatermarkStrategy.no_watermarks()
        fn = source_stage(v.head.source, strategy, self.routes, v.head.id, slices, epoch_records,
                          now_ms, self.max_parallelism, watermark_before, staging(),
                          periodic_watermarks=self.periodic_watermarks)
        return self._slice_ids(len(slices)).mapInArrow(fn, self._row_schema())

    def _slice_ids(self, n: int) -> Any:
        """``range(n)`` in n partitions, built once per n: a DataFrame is immutable, and building one costs
        the driver a round of JVM analysis every epoch."""
        ids = self._range_frames.get(n)
        if ids is None:
            ids = self._range_frames[n] = self.spark.range(0, n, numPartitions=n)
        return ids

    def _row_schema(self) -> Any:
        """ROW_DDL parsed once (``mapInArrow`` would parse the DDL text in the JVM on every call)."""
        if self._row_struct is None:
            from pyspark.sql.types import StructType

            self._row_struct = StructType.fromDDL(ROW_DDL)
        return self._row_struct

    def driver_rows(self, frames: list[Any]) -> list[Any]:
        """One Spark job: the rows of ``frames`` for the driver; it also materializes their local checkpoints."""
        return [row for rows in self.driver_rows_by_frame(frames) for row in rows]

    def driver_rows_by_frame(self, frames: list[Any]) -> list[list[Any]]:
        """:meth:`driver_rows` in one Spark job, told apart by frame: each frame's rows, in ``frames`` order."""
        names = {f"f{i}": f for i, f in enumerate(frames)}
        query = " UNION ALL ".join(f"SELECT _dest, _value, _tag, {i} AS _frame FROM {{{name}}} "
                                   f"WHERE _dest IN ({_DRIVER_DESTS})" for i, name in enumerate(names))
        out: list[list[Any]] = [[] for _ in frames]
        for dest, value, tag, frame in self.sql(query, names).collect():
            out[frame].append((dest, value, tag))
        return out

    def checkpointed_union(self, frames: list[Any]) -> Any:
        """``frames`` as one, materialized as a local checkpoint by the first job that computes it."""
        return union(frames).localCheckpoint(eager=False)

    def state_of(self, out: Any, node_id: int) -> Any:
        """Keyed vertex ``node_id``'s state rows among a window stage's output ``out``."""
        return out.where(f"_dest = {DEST_STATE} AND _tag = '{node_id}'")

    def collect_over(self, rows: Any, fn: Callable, ddl: str) -> list[tuple]:
        """One Spark job: ``fn`` (a ``mapInArrow`` function) over each partition of ``rows``, its rows (schema
        ``ddl``) collected as tuples."""
        return [tuple(r) for r in rows.mapInArrow(fn, ddl).collect()]

    def task_rows(self, n: int, fn: Callable) -> Any:
        """The rows ``fn`` (a ``mapInArrow`` function over ``range(n)``'s ids, one per task) gives, computed and
        locally checkpointed now."""
        return self.spark.range(0, n, numPartitions=n).mapInArrow(fn, self._row_schema()).localCheckpoint(eager=True)

    def sql(self, query: str, frames: dict[str, Any]) -> Any:
        """``query`` over ``frames`` (each named ``{name}`` in it; no other brace in the text): a chain of
        DataFrame calls as one SQL text, parsed and analysed once, in a handful of py4j round trips — a DataFrame
        call costs one or more, plus one per Column object and list element it passes, and an analysis of its
        own (the module docstring's figures).  PySpark names each frame with a temporary view for the call and
        drops it after: the DataFrame returned holds the analysed plan, not the view."""
        return self.spark.sql(query, **frames)

    def run_windows(self, vertices: list[Any], state: dict[int, Any], stage_outputs: list[Any], before: int,
                    after: int, now_ms: int, epoch: int, staging: Callable[[], dict[int, Any]],
                    checkpoint: Any = None) -> list[Any]:
        """Run window vertices level by level: one Spark stage per (level, parallelism), not one per vertex.

        A vertex is ready when every window vertex upstream of it ran in this epoch; ready vertices
        with the same parallelism share one shuffle and one ``mapInArrow``, each task running its
        (vertex, key group) runs one after another — the per-epoch cost grows with the depth of
        the plan, not with the number of windows.  ``state`` (keyed node id -> state rows) gets each
        vertex's new state rows; ``stage_outputs`` gets every window stage's output.  ``checkpoint``: (storage
        location, checkpoint id) of the checkpoint whose barrier ends this epoch, or None: each window task then
        also writes its subtask's state files and acknowledges (``DEST_STATE_ACK``, checkpointing.py).
        """
        pending = list(vertices)
        done: set[int] = set()
        window_outputs: list[Any] = []
        while pending:
            ready = [v for v in pending if all(u in done or u not in {p.head.id for p in pending}
                                               for u in self.upstream_windows[v.head.id])]
            if not ready:
                raise IllegalStateError("Bug: window vertices form a cycle")
            by_parallelism: dict[int, list[Any]] = {}
            for v in ready:
                by_parallelism.setdefault(v.parallelism, []).append(v)
            outs = [self._window_frame(group, state, stage_outputs, before, after, now_ms, epoch, staging(),
                                       checkpoint)
                    for group in by_parallelism.values()]
            for group, out in zip(by_parallelism.values(), outs):
                for v in group:
                    state[v.head.id] = self.state_of(out, v.head.id)
            stage_outputs.extend(outs)
            window_outputs.extend(outs)
            done.update(v.head.id for v in ready)
            pending = [v for v in pending if v.head.id not in done]
        return window_outputs

    def _window_frame(self, group: list[Any], state: dict[int, Any], stage_outputs: list[Any], before: int,
                      after: int, now_ms: int, epoch: int, staging: dict[int, Any], checkpoint: Any = None) -> Any:
        from pyspark.sql import functions as F

        from engine.state.key_groups import key_group_range_for_operator

        parallelism = group[0].parallelism
        ids = [v.head.id for v in group]
        broadcast_ids = [str(v.head.id) for v in group if isinstance(v.head, BroadcastProcessTransformation)]
        mine = f"_dest IN ({', '.join(str(i) for i in ids)})"
        fold_ids = [str(i) for i in ids if i in self.routes.preaggregations and self.routes.preaggregations[i].fold]
        if fold_ids:
            mine = f"({mine} OR (_dest = {DEST_COLUMNS} AND _tag IN ({', '.join(repr(t) for t in fold_ids)})))"
        if broadcast_ids:
            mine = f"({mine} OR (_dest = {DEST_BROADCAST} AND _tag IN ({', '.join(repr(t) for t in broadcast_ids)})))"
        mp = self.max_parallelism
        kg = f"CASE WHEN _dest IN ({DEST_STATE}, {DEST_COLUMNS}) THEN _kg ELSE CAST(pmod(xxhash64(_key), {mp}) AS INT) END"
        lookup = "array(" + ", ".join(str(x) for x in partition_preimages(self.spark, parallelism)) + ")"
        columns = ", ".join(c for c in ROW_DDL_COLUMNS if c != "_kg")
        node = (f"CASE WHEN _dest IN ({DEST_STATE}, {DEST_BROADCAST}, {DEST_COLUMNS}) THEN CAST(_tag AS INT) "
                f"ELSE _dest END AS _node")

        def placed(name: str, where: str | None = None) -> str:
            # A part shuffled by _pk, the partition preimage of its key group's subtask, in one projection.  A union
            # of parts partitioned alike stays so: Spark adds no exchange for the union, nor for folding
            # pre-aggregated records, which it does where they land (one shuffle per epoch, not two).
            source = f"{{{name}}}" + (f" WHERE {where}" if where else "")
            if broadcast_ids:
                # a broadcast row is copied to every subtask, as the first key group of each (one more projection,
                # only in a stage with a broadcast process vertex)
                firsts = ", ".join(str(key_group_range_for_operator(mp, parallelism, i).start_key_group)
                                   for i in range(parallelism))
                source = (f"(SELECT {columns}, explode(CASE WHEN _dest = {DEST_BROADCAST} THEN array({firsts}) "
                          f"ELSE array({kg}) END) AS _kg FROM {source}) AS b")
                key_group = "_kg"
            else:
                key_group = f"{kg} AS _kg"
            return (f"SELECT /*+ REPARTITION({parallelism}, _pk) */ {columns}, {key_group}, {node}, "
                    f"element_at({lookup}, {subtask_expr(parallelism, mp, '_kg' if broadcast_ids else f'({kg})')} + 1)"
                    f" AS _pk FROM {source}")

        frames: dict[str, Any] = {}
        parts: list[str] = []
        # the column path's partials are whole (each carries its first element) and reach the window stage as they
        # are: its operator folds a (key, pane)'s partials of several tasks like records (preaggregation.py)
        pre_ids = [i for i in ids if i in self.routes.preaggregations and self.routes.preaggregations[i].column is None
                   and self.routes.preaggregations[i].sql]
        if stage_outputs and pre_ids:
            records = union(stage_outputs).where(mine)
            partial = F.col("_dest").isin(*pre_ids) & F.col("_num").isNotNull()
            frames["records"] = records.where(~partial)
            parts.append(placed("records"))
            for i in pre_ids:
                frames[f"pre{i}"] = preaggregate(
                    self.sql(placed("part"), {"part": records.where(partial & (F.col("_dest") == i))}),
                    self.routes.preaggregations[i], placed=("_pk", "_kg", "_node"))
                parts.append(f"SELECT {columns}, _kg, _node, _pk FROM {{pre{i}}}")
        else:
            for n, df in enumerate(stage_outputs):
                frames[f"out{n}"] = df
                parts.append(placed(f"out{n}", mine))
        for i in ids:
            if state[i] is not None:
                frames[f"state{i}"] = state[i]
                parts.append(placed(f"state{i}"))
        if not parts:
            frames["empty"] = self._empty_rows()
            parts.append(placed("empty"))
        # the window stage reads only these (stages.py WINDOW_STAGE_COLUMNS): Spark prunes the others — the
        # encoded key, the channel and sequence once sorted — from the shuffle and the Arrow batches; a column fold
        # window keeps the channel and sequence (its blob rows' partials and any element rows are merged in that
        # order).  One SQL text for the whole input (:meth:`sql`): the parts' union, placed by _pk, sorted within
        # each partition
        union_all = " UNION ALL ".join(f"({p})" for p in parts)
        selected = ", ".join((*WINDOW_STAGE_COLUMNS, *(("_split", "_offset") if fold_ids else ())))
        placed_input = self.sql(
            f"SELECT {selected} FROM (SELECT /*+ REPARTITION({parallelism}, _pk) */ * "
            f"FROM ({union_all}) AS u SORT BY _node, _kg, _split, _offset) AS s", frames)
        fn = window_stage({v.head.id: v.head for v in group}, self.routes, epoch=epoch, parallelism=parallelism,
                          max_parallelism=mp, watermark_before=before, watermark_after=after, now_ms=now_ms,
                          staging=staging, checkpoint=checkpoint)
        return placed_input.mapInArrow(fn, self._row_schema()).localCheckpoint(eager=False)

    def _empty_rows(self) -> Any:
        """No row, in the row schema (built once)."""
        if self._empty is None:
            self._empty = self.spark.createDataFrame([], self._row_schema())
        return self._empty
