"""Local-global aggregation on Spark: built-in sum/min/max folded in Spark SQL before Python sees them.

ARCHITECTURE section 3 and issue 5: "incremental aggregates without an evictor are pre-aggregated
per (key, window) in Spark SQL before Python sees them", the way Flink's local-global aggregation
splits one aggregation into a partial one before the shuffle and a final one after it.  Here the
local part is the reading task's (engine/runtime/spark/chains.py ``Router._to_window``: the records a
chain hands the window in one call are folded per (key, pane) as they come, in Python, one row per
pair carrying the pair's first record whole, at that record's sequence, and the pane's aggregate as
``_num``), and the job master folds in Spark SQL after its one shuffle by subtask, where the rows land
(epoch_frames.py ``_window_frame``; on the RDD layer, the window task folds them with pyarrow before its operator
reads them, epoch_rdds.py ``_fold_partials``): a separate Spark SQL partial fold before the shuffle cost a second
exchange and two more sorts per epoch for little.

**Which windows.**  A window vertex qualifies (:func:`preaggregation_for`) when the predicate that
picks the window operator (engine/windowing/variant.py) gives it the heap-layout slicing
operator, whose result can only depend on the fold of its elements, and in that set: a non-merging
event-time assigner Spark SQL can compute
(``TumblingEventTimeWindows``, ``SlidingEventTimeWindows``), the default ``EventTimeTrigger``
(seed 000: it registers one timer per window and fires only on it, so folding several elements
at once cannot skip a firing), no evictor, and a built-in ``sum``/``min``/``max`` (their
``vectorized`` kind, engine/windowing/aggregations.py).  Reduce functions and ``min_by``/
``max_by`` keep the element path: their result depends on which element won, which a partial
aggregate would have to carry whole.

**Except where Python folds faster.**  A ``sum`` that the window operator keeps in its columnar
layout (engine/windowing/slicing/columnar.py: no allowed lateness, no window function) is folded by
the reading tasks only (``PreAggregation.sql`` False): the window stage's operator folds their partial
rows as records, the layout a whole epoch with a few numpy operations, while the Spark SQL fold is a
sort-based aggregate (``min(struct(...))`` for the first element cannot be hash-aggregated) plus a sort.
Measured with bench/bench_spark.py's jobs, second run of a process, Spark SQL fold on vs off (when the
reading tasks still sent a row per record): 2M events over 100k keys, tumbling 60 s, 93k vs 124k
events/s (window phase 12.6 s vs 8.9 s); sliding 60/10 s, 68.6k vs 67.8k; 1M events over 1k keys (17
events per key and pane), tumbling, 86k vs 91k.  ``min``/``max`` and a ``sum`` with allowed lateness
keep the slicing operator's heap layout, a dict entry per (key, window), so folding in SQL first still
pays for them.  A partial row stands for several records, so the window stage cannot count a
pre-aggregated window's records in: the reading tasks count them per subtask of their key group
(chains.py ``Router.keyed_in``), for the status report's per-subtask figures.

**Panes, not windows.**  Records are grouped per (key, *pane*): the slices of width
``gcd(size, slide)`` aligned with the assigner's offset.  Every timestamp of a pane belongs to
exactly the same windows, so one partial per pane, given the timestamp of its first element, is
assigned by the shared WindowOperator to the very windows each of its elements would have been
(the operator's ``process_batch`` does the per-window fold and timer work as for any record).

**Exactness.**  The fold of the elements path is ``add`` in arrival order; its result is the
window's first element with the field replaced by the aggregate (Flink's SumAggregator /
ComparableAggregator).  A partial is the pane's first element in arrival order (the smallest
``(channel, sequence)``, the order the window stage sorts by) with the field set to the pane's
sum/min/max, and it sits at that first element's position.  Only Python ``int`` fields (not bool)
within ±2^31 take this path, so the SQL ``long`` arithmetic equals Python's and the sum cannot
overflow below 2^32 elements; any other value travels as an element.  Late-but-allowed elements
re-fire the window once each in Flink, so a pane whose oldest window is at or behind the epoch's
starting watermark W(n-1) takes the element path whole (the window stage judges every record of
epoch n against W(n-1); ARCHITECTURE section 4).

**The column path** (issue 16; engine/runtime/spark/column_path.py).  The same predicate, given the
physical plan, also picks windows whose records need no Python object per record: the job's shape is
exactly ``read_files(path, "parquet")`` -> ``assign_timestamps_and_watermarks`` with a field timestamp
assigner (``with_timestamp_assigner("ts")``, run per split in the source vertex) -> ``key_by("field")`` ->
a window the slicing operators run (above; this includes a ``sum`` of the columnar layout) with a built-in
``sum``/``min``/``max`` of a dict key (:func:`column_path_of`).  There the reading task reads each slice of a
split as one Arrow batch and, column-wise: stamps it, hands the split's watermark generator the batch's
highest timestamp (per-split generation and the driver's valve unchanged), sends every record whose pane is
behind W(n-1) as an element row (the element path's rule above), and folds the others per (key, pane) with
pyarrow's hash group-by into one row each — the group's first record in arrival order as ``_value``, its
position as ``_offset``, the pane's aggregate as ``_num``.  Each such partial is whole (it carries its first
element), so no Spark SQL fold follows (epoch_frames.py ``_window_frame``): the window stage sets the field of
each partial (``apply_all``) and hands them, with the element rows, to the same operator in the same (channel,
sequence) order, which folds a (key, pane)'s partials from several tasks as it folds records — sum of sums,
min of mins, the earliest first element — and keeps the same state rows (a snapshot taken on either path, or on
the local runtime, restores on the other, at any parallelism: tests/runtime/spark/test_spark_column_path.py).
A read the columns cannot take exactly (a null, a float or huge field, a naive timestamp, a generator that must
see every record...) takes the element path whole, as whole elements (the Router does not fold a column
path window's records).  The reading task writes each partial's first record as text column-wise
(column_path.py ``record_texts``; encoding one dict per partial with the codec was the largest single cost of the
Python workers).  Partial: the window stage still decodes one Python record per partial and folds it
through the operator's batch path, and restores and snapshots the operator's state through the general layout
every epoch; with many keys and few records per (key, pane) in an epoch the partials are nearly as many as the
records, and that part costs what the element path does.  Where the time went before ``record_texts``
(bench/bench_spark.py's column form, 1M events over 1k Zipf keys, sliding 60/10 s, 10 epochs; PySpark's
``spark.sql.pyspark.udf.profiler=perf`` in the workers, cProfile in the driver; one run on a host loaded far
beyond its 2 cores): of the workers' profiled time, encoding the partials' first records 35 %, decoding them in
the window stage 20 %, the operator's restore and snapshot each epoch 17 %, the fold itself under 2 %; the
driver spends about 1 s an epoch building the epoch's DataFrames (JVM analysis over py4j) and otherwise waits
for the two Spark jobs of each epoch; the JVM's CPU per event (12-17 µs) is above the workers' (11-12 µs).  Before and after ``record_texts``, column form only, one process per
run, the two versions taking turns (before, after, before, after) on a shared 2-core host whose load fell from
about 19 to 5 meanwhile: 5M events over 100k uniform keys, tumbling 60 s, 8.3k and 17.4k vs 27.5k and 35.5k
events/s, Python CPU per event 27.1 and 25.1 vs 17.4 and 16.2 µs, JVM 11.3 and 11.6 vs 11.4 and 10.5 µs (almost
every record is its own partial there); 2M events over 1k Zipf keys, sliding 60/10 s, with native Spark in the
same process: 17.7k (x1.34 native) and 8.6k (x0.93) vs 13.5k (x0.91) and 9.1k (x0.72), Python 12.3 and 14.8 vs
11.5 and 12.2 µs per event — there the partials are fewer than the records and the JVM's per-epoch work
dominates, and no throughput change shows through this host's noise.  Measured with
bench/bench_spark.py (2M events over 1k Zipf keys, 20 epochs, local[2], one run each on a shared, busy host):
the column path against the same column-form job on the element path, tumbling 60 s 48.7k vs 24.3k events/s,
sliding 60/10 s 56.0k vs 23.8k; Python worker CPU per event 6.0 vs 20.6 µs (tumbling).  Native Spark ran
67.6k events/s on tumbling minutes before: the JVM's per-epoch work, not Python, now bounds this path.

The next profile (column form, 1b93168; cProfile around each ``mapInArrow`` task in the workers and in the driver,
one run per cell on a host at load 6-18, so the shares count, not the seconds).  2M events over 1k Zipf keys,
sliding 60/10 s: of the window tasks' 38 s, the codec's generic walk over the records' dicts 18 s
(``from_jsonable`` 12 s: decoding the partials 8 s and the restored state; ``codec.encode`` of the snapshot 6 s:
a Parquet row's zoned ``ts`` sent every record and state entry through the walk), the restore and the snapshot
through the general layout 8 s each (the codec included), waiting on the JVM's Arrow stream 7 s, the fold itself
under 1 s; of the source tasks' 15 s, decoding a Parquet row group 8 s (each epoch's task read its slice through a
fresh reader and decoded the split's whole group, a million rows, to take 50k of them) and the column work 5 s;
the driver waited 80 of its 100 s in the epochs' Spark jobs and spent 16 s (0.8 s an epoch) building the window
stage's DataFrames over py4j.  5M events over 100k uniform keys, tumbling 60 s (almost every record its own
partial): of the window tasks' 627 s, ``from_jsonable`` 207 s (the partials 168 s), the snapshot 159 s
(``codec.encode`` 106 s), the restore 114 s, the columnar fold 36 s.  What changed: a flat dict whose other values are
dates, times or Decimals takes the codec's fast path (same text, same values; a zoned datetime built with
``datetime.combine``, not ``replace``), and decoded Parquet row groups are kept per process
(engine/io/formats.py ``ParquetFile``).  Not changed yet, and next: the window stage still decodes one Python
record per partial and round-trips its state through the general layout every epoch (a columnar snapshot and
restore straight from the arrays, with the partials folded as Arrow columns, would remove both), and the driver
builds each epoch's DataFrames anew.  Before (1b93168) and after, bench/bench_spark.py single cells (``--repeat 1
--files 20``), one process per run, the two taking turns (before, after, before, after), the host's 1-min load
at each run's start in brackets; throughput moved with the load far more than with the change, Python CPU per
event less so.  2M events over 1k Zipf keys, sliding 60/10 s, column: 35.7k (x0.92 native) [8.6] and 14.0k
(x0.67) [16.8] vs 17.9k (x0.32) [10.1] and 21.6k (x0.53) [24.0] events/s; Python 10.05 and 11.70 vs 9.16 and 8.93
µs/event, JVM 11.0 and 11.7 vs 12.3 and 11.9.  5M events over 100k uniform keys, tumbling 60 s, column: 11.2k
[25.3] and 9.5k [18.7] vs 13.8k [15.8] and 23.1k [12.5] events/s; Python 18.9 and 19.5 vs 15.9 and 14.6 µs/event.
2M events over 1M uniform keys, tumbling: 31.9k (x0.52) [8.6] and 25.9k (x0.52) [6.7] vs 27.7k (x0.53) [4.4]
and 35.8k (x0.41) [5.1] events/s; Python 25.3 and 24.9 vs 20.8 and 19.8 µs/event.  So the change takes about a
fifth of the workers' CPU per event; every cell is still below native and far from issue 16's targets.

**The column fold** (engine/runtime/spark/column_fold.py): a column path window with no allowed lateness, no late
side output, no window function and a slide no longer than its size (``PreAggregation.fold``; runtime option
``column_fold``) no longer goes through the window stage's operator at all: the reading task ships each window
subtask's partials (first records whole, as Arrow struct columns) as one Arrow IPC blob, and the window stage keeps
the subtask's windows as one Arrow table between epochs, folds, fires and stages a Parquet sink's part column-wise;
a checkpoint's background upload writes the operator's own snapshot layout from it, byte for byte.  That module's
docstring holds its figures.  The "Partial" above is the operator path's, for every other column path window.

Any other shape keeps the element path above, unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import gcd
from typing import Any

from engine.windowing.aggregations import peek_field

#: ints beyond this magnitude take the element path (see the module docstring, "Exactness")
INT_LIMIT = 2**31

_SQL_AGG = {"sum": "sum", "min": "min", "max": "max"}


@dataclass(frozen=True, slots=True)
class ColumnPath:
    """The column path of a window vertex (module docstring, "The column path"): its records come straight
    from a Parquet file source through a field timestamp assigner and a field key, so the reading task
    stamps, judges and pre-aggregates them as Arrow columns (engine/runtime/spark/column_path.py)."""

    #: the source node and the timestamps node folded into it (the record counts of the edges they hand on)
    source: int
    timestamps: int
    #: the dict keys of the timestamp and of the key
    ts_field: str
    key_field: str
    #: the window vertex's parallelism (a reading task places each partial on its window subtask)
    parallelism: int = 1


@dataclass(frozen=True, slots=True)
class PreAggregation:
    """How one window vertex's records are pre-aggregated (module docstring)."""

    kind: str
    field: int | str
    size: int
    slide: int
    offset: int
    #: set when the reading task pre-aggregates Arrow columns itself (None: the Router's element path)
    column: ColumnPath | None = None
    #: the column fold (engine/runtime/spark/column_fold.py): the column path's window folded as Arrow tables
    #: from the reading task to the sink -- no allowed lateness, no late side output, no window function
    fold: bool = False
    #: the job master folds the reading tasks' partial rows again in Spark SQL after the shuffle (heap layout);
    #: False: the window stage's operator folds them itself (the columnar layout, module docstring)
    sql: bool = True

    @property
    def pane(self) -> int:
        return gcd(self.size, self.slide)

    def pane_start(self, timestamp: int) -> int:
        pane = self.pane
        return timestamp - (timestamp - self.offset) % pane

    def oldest_window_max_timestamp(self, timestamp: int) -> int:
        """``max_timestamp()`` of the oldest window holding ``timestamp`` (the assigner's arithmetic)."""
        last = timestamp - (timestamp - self.offset) % self.slide
        oldest = last - ((last - timestamp + self.size - 1) // self.slide) * self.slide
        return oldest + self.size - 1

    def numeric(self, value: Any) -> int | None:
        """The aggregated field when it may be folded in SQL, else None (the element path)."""
        x = peek_field(value, self.field)
        return x if type(x) is int and -INT_LIMIT < x < INT_LIMIT else None

    def apply(self, first: Any, aggregate: int) -> Any:
        """The partial record: the pane's first element with the field set to the pane's aggregate."""
        from engine.windowing.aggregations import set_field

        return set_field(first, self.field, aggregate)

    def apply_all(self, values: list[Any], aggregates: list[int | None]) -> list[Any]:
        """``apply`` for each (value, aggregate) pair; a None aggregate leaves its value (an element) as is."""
        from engine.windowing.aggregations import set_field

        field = self.field
        out = []
        append = out.append
        for v, a in zip(values, aggregates):
            if a is None:
                append(v)
            elif type(v) is tuple:
                append(v[:field] + (a,) + v[field + 1:])  # set_field's tuple case
            else:
                append(set_field(v, field, a))
        return out


def preaggregation_for(node: Any, plan: Any = None, column_fold: bool = True) -> PreAggregation | None:
    """The pre-aggregation of a WindowTransformation, or None when its elements must reach Python.

    Asks the predicate that picks the window operator (engine/windowing/variant.py): only windows
    the slicing operators run qualify, so the pre-aggregation and the operator cannot disagree
    about which windows fold their elements in any order-preserving way.  Given the physical ``plan``,
    it also decides the column path (module docstring): a window of the heap layout or of the columnar
    layout whose input has the column path's shape (:func:`column_path_of`).  A columnar-layout sum
    without that shape keeps the element path unfolded (the arrays fold it faster than Spark SQL).
    """
    from engine.graph.operator_factory import window_variant_of
    from engine.windowing.variant import WindowOperatorVariant, window_geometry

    spec = getattr(node, "function", None)
    if spec is None or spec.kind != "aggregate":
        return None
    variant = window_variant_of(node)
    if not variant.is_slicing:
        return None  # GENERAL / SESSION: the elements must reach Python
    vectorized = getattr(spec.aggregate_function, "vectorized", None)
    if vectorized is None or vectorized.kind not in _SQL_AGG:
        return None
    assigner = node.assigner
    geometry = window_geometry(assigner)
    if geometry is None or not assigner.is_event_time():
        return None  # windows Spark SQL cannot compute, or processing time
    column = column_path_of(node, plan) if plan is not None and isinstance(vectorized.field, str) else None
    size, slide, offset = geometry
    if column is None and variant is not WindowOperatorVariant.SLICING:
        # SLICING_COLUMNAR fed elements: the reading task's fold only, the arrays fold its partials faster than
        # Spark SQL would (module docstring)
        return PreAggregation(vectorized.kind, vectorized.field, size, slide, offset, sql=False)
    # every timestamp has a window (slide <= size): a pane with none left at W(n-1) holds only late records
    fold = (column_fold and column is not None and node.allowed_lateness_ms == 0 and node.late_data_tag is None
            and spec.process_function is None and slide <= size)
    return PreAggregation(vectorized.kind, vectorized.field, size, slide, offset, column, fold)


def column_path_of(node: Any, plan: Any) -> ColumnPath | None:
    """The column path of window ``node`` in ``plan``, or None when its input has another shape.

    The shape: ``read_files(path, "parquet")`` whose vertex is exactly the source and its
    ``assign_timestamps_and_watermarks`` (run per split), the strategy's timestamp assigner a field
    (``with_timestamp_assigner("ts")``), and one HASH edge from it to the window, keyed by a field
    (``key_by("user_id")``); dict keys only (a Parquet row is a dict).  Whether the watermark generator
    takes a batch's highest timestamp at once is the source stage's rule, asked per read
    (engine/operators/timestamps_watermarks.py ``on_highest_timestamp``): a read it refuses takes the
    element path.
    """
    from engine.api.fields import FieldKeySelector
    from engine.graph.transformations import Partitioning, TimestampsAndWatermarksTransformation
    from engine.io.file_source import FileSource
    from engine.watermarks.strategy import FieldTimestampAssigner

    selector = getattr(node.key_selector, "__self__", node.key_selector)  # key_by keeps the bound get_key
    if type(selector) is not FieldKeySelector or not isinstance(selector.field, str):
        return None
    target = next((v for v in plan.vertices if v.head is node), None)
    if target is None or len(target.inputs) != 1:
        return None
    edge = target.inputs[0]
    source = edge.source_vertex
    if (edge.partitioning is not Partitioning.HASH or edge.tag is not None or not source.is_source()
            or len(source.nodes) != 2 or len(source.outputs) != 1 or source.outputs[0] is not edge):
        return None
    stamps = source.nodes[1]
    file_source = source.head.source
    if (type(file_source) is not FileSource or file_source.format != "parquet" or edge.source_node is not stamps
            or not isinstance(stamps, TimestampsAndWatermarksTransformation)
            or source.source_watermark_strategy is not stamps.watermark_strategy):
        return None
    strategy = stamps.watermark_strategy
    assigner = strategy.timestamp_assigner
    if (strategy.is_ingestion_time or type(assigner) is not FieldTimestampAssigner
            or not isinstance(assigner.field, str)):
        return None
    return ColumnPath(source.head.id, stamps.id, assigner.field, selector.field, target.parallelism)


def preaggregate(records: Any, pre: PreAggregation, placed: tuple[str, ...] = ()) -> Any:
    """Spark SQL: one row per (vertex, key, pane) out of the record rows that carry ``_num``.

    The row is the pane's first record (smallest ``(_split, _offset)``, whose ``_value`` the reading
    task kept) with ``_num`` = the pane's sum/min/max.  ``placed`` names columns that are functions
    of the key (the key group and the shuffle's partition column) kept as they are: when
    ``records`` are already partitioned by one of them, Spark folds each partition where it lies,
    with no shuffle of its own (without them, ``_kg`` is null and Spark folds partially before
    shuffling by the grouping columns).
    """
    from pyspark.sql import functions as F

    pane = f"_ts - pmod(_ts - {pre.offset}, {pre.pane})"
    first = F.min(F.struct("_split", "_offset", "_ts", "_value")).alias("_first")
    folded = F.expr(f"{_SQL_AGG[pre.kind]}(_num)").alias("_num")
    grouped = records.groupBy(*placed, "_dest", "_key", F.expr(pane).alias("_pane")).agg(first, folded)
    kg = F.col("_kg") if "_kg" in placed else F.lit(None).cast("int").alias("_kg")
    return grouped.select(
        "_dest", kg, F.col("_first._split").alias("_split"),
        F.col("_first._offset").alias("_offset"), F.col("_first._ts").alias("_ts"), "_key",
        F.col("_first._value").alias("_value"), F.lit(None).cast("binary").alias("_blob"),
        F.lit(None).cast("string").alias("_tag"), "_num", *[c for c in placed if c != "_kg"])
