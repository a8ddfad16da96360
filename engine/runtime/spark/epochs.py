"""Epochs on Spark: read source slices as partitions, shuffle by key group, call per key group.

The building blocks of one epoch's data path (ARCHITECTURE section 3, issue 5), usable on their
own (tests/runtime/spark/test_spark_epochs.py).  The job master (engine/runtime/spark/job.py, epoch_frames.py)
uses the placement by subtask below (:func:`partition_preimages`, :func:`subtask_expr`); its
reading, stamping and per-key-group calls live in engine/runtime/spark/stages.py, where a task
also carries watermarks, keyed state rows and routing (see "Where the rest lives" at the end).

An *epoch* is the slice [S(n-1), S(n)) of every source split (seed 002: the barrier after the
records a source read; on Spark the epoch boundary *is* barrier n, aligned by construction).

1. :func:`read_epoch` — one Spark partition per :class:`SplitSlice` (one channel per split).  The
   slices travel with the task closure (cloudpickle, Spark's own transport, never persisted); each
   task builds the split's reader at ``start_offset`` inside the Python worker and reads up to
   ``end_offset``.  Rows carry ``_split`` and ``_offset`` so every record stays traceable to its
   source position, then either the record's columns (sources with an Arrow read path) or its
   codec-encoded JSON text in ``_value`` (every other source; JSON, not pickle, so a spilled
   shuffle never holds code).  With a key (a column name, vectorised, or a key selector, called
   per record as the user function it is) the task also writes ``_key``: the canonical key
   encoding :func:`engine.state.codec.encode_key` whose bytes key groups are hashed from.
2. :func:`with_key_groups` — ``_kg = pmod(xxhash64(_key), max_parallelism)`` in Spark SQL, which is
   bit-for-bit :func:`engine.state.key_groups.assign_to_key_group` (proved in
   tests/runtime/spark/test_spark_key_group_parity.py), so no Python runs per record for it.
3. :func:`partition_by_subtask` — Flink's placement: key group g belongs to subtask
   ``g * parallelism // max_parallelism`` (``operator_index_for_key_group``), and Spark partition
   i *is* subtask i.  ``repartition(n, col)`` places a row at ``pmod(murmur3(col), n)``, so each
   subtask index is replaced by a *preimage* ``_pk``: an int whose murmur3 hash lands in that
   partition (found once per parallelism by :func:`partition_preimages`).  The shuffle stays in the
   JVM; rows are then sorted by ``(_kg, _split, _offset)`` within each partition, which keeps each
   split's order (a channel is FIFO) and makes the interleaving across splits deterministic.
4. :func:`map_key_groups` — one ``mapInArrow`` over the partitioned data that cuts each partition's
   sorted stream at key-group boundaries and calls ``fn(key_group, subtask, table)`` once per key
   group: the framework's work is per key group, never per key or per record.  Each call checks
   that its key group lies in ``key_group_range_for_operator(max_parallelism, parallelism,
   partition)``, so a placement bug fails loudly instead of splitting state.

Where the rest lives (all built):

* **Offsets and watermarks** — engine/runtime/spark/stages.py ``source_stage``: each split task
  reads up to ``epoch_records`` from S(n-1), stamps records with the split's generator and ends
  with a report row (S(n), finished, idle, watermark, generator snapshot); the driver combines
  split watermarks with the StatusWatermarkValve at epoch ends (splits.py).
* **State between epochs** — stages.py ``window_stage``: a key group's operator snapshot travels as
  one state row (engine/runtime/spark/rows.py), unioned with the next epoch's records before the
  shuffle and locally checkpointed so lineage never grows.
* **Checkpoints** — engine/runtime/spark/checkpointing.py and state_files.py: tasks write their key groups' state
  through ``checkpoints`` and acknowledge with the handles.
* **Pre-aggregation** — engine/runtime/spark/preaggregation.py: built-in min/max (and a sum the
  columnar layout does not take) grouped per (key, pane) in Spark SQL before the window stage.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import IllegalStateError, JobDefinitionError
from engine.io.source import Source, SourceSplit
from engine.state import codec
from engine.state.key_groups import check_parallelism, key_group_range_for_operator

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

SPLIT_COL = "_split"
OFFSET_COL = "_offset"
VALUE_COL = "_value"
KEY_COL = "_key"
KEY_GROUP_COL = "_kg"
SUBTASK_COL = "_subtask"
PARTITION_KEY_COL = "_pk"

DEFAULT_MAX_RECORDS_PER_READ = 8192


@dataclass(frozen=True, slots=True)
class SplitSlice:
    """The part of one split an epoch reads: offsets [start_offset, end_offset) (int offsets)."""

    split: SourceSplit
    start_offset: int
    end_offset: int

    def __post_init__(self) -> None:
        for name in ("start_offset", "end_offset"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise JobDefinitionError(name, value, f"must be a non-negative int for split {self.split.split_id!r}")
        if self.end_offset < self.start_offset:
            raise JobDefinitionError(
                "end_offset", self.end_offset, f"must not be before start_offset {self.start_offset}",
                "An epoch reads [S(n-1), S(n)); offsets never move backwards")

    def to_json(self) -> dict:
        return {"split": self.split.to_json(), "start_offset": self.start_offset, "end_offset": self.end_offset}

    @staticmethod
    def from_json(data: dict) -> SplitSlice:
        return SplitSlice(SourceSplit.from_json(data["split"]), int(data["start_offset"]), int(data["end_offset"]))


# ---- key encoding ------------------------------------------------------------------------------------------


def encode_key_column(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    """``encode_key`` of every value of an Arrow column, vectorised where the encoding is trivial.

    ints encode as their decimal text; strings made only of printable ASCII without ``"`` or ``\\``
    encode as the string in double quotes (that is exactly what ``json.dumps`` writes for them);
    anything else falls back to :func:`codec.encode_key` per value, so the result always equals it.
    """
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if pa.types.is_integer(column.type) and column.null_count == 0:
        return pc.cast(column, pa.string())
    if (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)) and column.null_count == 0:
        column = pc.cast(column, pa.string())
        simple = pc.match_substring_regex(column, r'^[\x20\x21\x23-\x5b\x5d-\x7e]*$')
        quoted = pc.binary_join_element_wise('"', column, '"', "")
        if pc.all(simple).as_py() is not False:
            return quoted
        fallback = pa.array([codec.encode_key(v) for v in column.to_pylist()], pa.string())
        return pc.if_else(simple, quoted, fallback)
    return pa.array([codec.encode_key(v) for v in column.to_pylist()], pa.string())


# ---- 1. reading an epoch -----------------------------------------------------------------------------------


def _arrow_schema_to_ddl(schema: pa.Schema) -> str:
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(schema).simpleString()[len("struct<"):-1]


def probe_record_schema(source: Source, slices: Sequence[SplitSlice]) -> pa.Schema | None:
    """The Arrow schema of the source's records, read on the driver from the first non-empty slice;
    None when the source has no Arrow path (records then travel as JSON text in ``_value``)."""
    for s in slices:
        if s.end_offset <= s.start_offset:
            continue
        reader = source.create_reader(s.split, s.start_offset)
        try:
            if not reader.supports_arrow():
                return None
            batch = reader.read_arrow(1)
            if batch.num_records:
                return batch.records.schema
        finally:
            reader.close()
    return None


def read_epoch(
    spark: SparkSession,
    source: Source,
    slices: Sequence[SplitSlice],
    *,
    key_field: str | None = None,
    key_selector: Callable[[Any], Any] | None = None,
    record_schema: pa.Schema | None = None,
    max_records_per_read: int = DEFAULT_MAX_RECORDS_PER_READ,
) -> DataFrame:
    """A DataFrame of the epoch's records, one partition per slice (see the module docstring, step 1).

    Columns: ``_split`` string, ``_offset`` long, then the record columns (Arrow sources) or
    ``_value`` string (codec JSON of the record), then ``_key`` string when a key is given.
    ``key_field`` needs an Arrow source; ``key_selector`` works with both.
    """
    if not slices:
        raise JobDefinitionError("slices", slices, "must name at least one split slice")
    if key_field is not None and key_selector is not None:
        raise JobDefinitionError("key_field", key_field, "cannot be combined with key_selector; give one")
    if isinstance(max_records_per_read, bool) or not isinstance(max_records_per_read, int) or max_records_per_read < 1:
        raise JobDefinitionError("max_records_per_read", max_records_per_read, "must be a positive int")
    if record_schema is None:
        record_schema = probe_record_schema(source, slices)
    arrow = record_schema is not None
    if key_field is not None and (not arrow or key_field not in record_schema.names):
        raise JobDefinitionError(
            "key_field", key_field, "must name a column of an Arrow-capable source's records",
            "Use key_selector=lambda record: record[...] for other sources")
    with_key = key_field is not None or key_selector is not None
    ddl = f"{SPLIT_COL} string, {OFFSET_COL} long, "
    ddl += _arrow_schema_to_ddl(record_schema) if arrow else f"{VALUE_COL} string"
    if with_key:
        ddl += f", {KEY_COL} string"
    slice_docs = [json.dumps(s.to_json()) for s in slices]

    def read_slices(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for ids in batches:
            for slice_index in ids.column(0).to_pylist():
                yield from _read_slice(
                    source, SplitSlice.from_json(json.loads(slice_docs[slice_index])), arrow,
                    key_field, key_selector, max_records_per_read)

    ids = spark.range(0, len(slices), numPartitions=len(slices))
    return ids.mapInArrow(read_slices, ddl)


def _read_slice(
    source: Source,
    piece: SplitSlice,
    arrow: bool,
    key_field: str | None,
    key_selector: Callable[[Any], Any] | None,
    max_records: int,
) -> Iterator[pa.RecordBatch]:
    """Runs inside a Spark task: read one slice and yield Arrow batches (module docstring, step 1)."""
    reader = source.create_reader(piece.split, piece.start_offset)
    split_id = piece.split.split_id
    try:
        offset = reader.current_offset()
        while offset < piece.end_offset:
            want = min(max_records, piece.end_offset - offset)
            if arrow:
                got = reader.read_arrow(want)
                records = got.records
                n = records.num_rows
            else:
                got = reader.read(want)
                n = len(got.values)
            if n:
                # int offsets name rows: the records of a read are consecutive from ``offset``
                columns: dict[str, pa.Array] = {
                    SPLIT_COL: pa.array([split_id] * n, pa.string()),
                    OFFSET_COL: pa.array(range(offset, offset + n), pa.int64()),
                }
                if arrow:
                    for name in records.schema.names:
                        columns[name] = records.column(name)
                else:
                    columns[VALUE_COL] = pa.array([codec.encode(v) for v in got.values], pa.string())
                if key_field is not None:
                    columns[KEY_COL] = encode_key_column(records.column(key_field))
                elif key_selector is not None:
                    values = records.to_pylist() if arrow else got.values
                    columns[KEY_COL] = pa.array([codec.encode_key(key_selector(v)) for v in values], pa.string())
                yield pa.RecordBatch.from_pydict(columns)
            new_offset = got.end_offset
            if got.finished or new_offset == offset:
                break
            offset = new_offset
    finally:
        reader.close()


# ---- 2. key groups -----------------------------------------------------------------------------------------


def key_group_expr(max_parallelism: int, key_col: str = KEY_COL) -> str:
    """Spark SQL for the key group of an encoded key column (equals engine.state.key_groups)."""
    check_parallelism(1, max_parallelism)
    return f"CAST(pmod(xxhash64({key_col}), {max_parallelism}) AS INT)"


def with_key_groups(df: DataFrame, max_parallelism: int, key_col: str = KEY_COL) -> DataFrame:
    return df.withColumn(KEY_GROUP_COL, _expr(key_group_expr(max_parallelism, key_col)))


def _expr(sql: str):
    from pyspark.sql import functions as F

    return F.expr(sql)


# ---- 3. placement by subtask -------------------------------------------------------------------------------

_PREIMAGES: dict[int, tuple[int, ...]] = {}


def partition_preimages(spark: SparkSession, parallelism: int) -> tuple[int, ...]:
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


def subtask_expr(parallelism: int, max_parallelism: int, kg_col: str = KEY_GROUP_COL) -> str:
    """Spark SQL for ``operator_index_for_key_group`` (Flink's computeOperatorIndexForKeyGroup)."""
    check_parallelism(parallelism, max_parallelism)
    return f"CAST(({kg_col} * {parallelism}) DIV {max_parallelism} AS INT)"


def partition_by_subtask(spark: SparkSession, df: DataFrame, parallelism: int, max_parallelism: int) -> DataFrame:
    """Shuffle so that Spark partition i holds exactly the key groups of subtask i, sorted by key group.

    Needs ``_kg``; adds ``_subtask`` and the helper ``_pk`` (step 3 of the module docstring).
    """
    preimages = partition_preimages(spark, parallelism)
    lookup = "array(" + ", ".join(str(v) for v in preimages) + ")"
    placed = (
        df.withColumn(SUBTASK_COL, _expr(subtask_expr(parallelism, max_parallelism)))
        .withColumn(PARTITION_KEY_COL, _expr(f"element_at({lookup}, {SUBTASK_COL} + 1)"))
        .repartition(parallelism, PARTITION_KEY_COL)
    )
    return placed.sortWithinPartitions(KEY_GROUP_COL, SPLIT_COL, OFFSET_COL)


# ---- 4. one call per key group -----------------------------------------------------------------------------

KeyGroupFunction = Callable[[int, int, pa.Table], "pa.Table | pa.RecordBatch | None"]


def map_key_groups(
    df: DataFrame,
    fn: KeyGroupFunction,
    output_schema: str,
    *,
    parallelism: int,
    max_parallelism: int,
) -> DataFrame:
    """Call ``fn(key_group, subtask, rows)`` once per key group present in the epoch (step 4).

    ``df`` must come from :func:`partition_by_subtask`.  ``rows`` is an Arrow table of that key
    group's rows in (split, offset) order; ``fn`` returns a table or batch matching
    ``output_schema`` (a Spark DDL string), or None for no output.
    """
    check_parallelism(parallelism, max_parallelism)

    def per_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        subtask = TaskContext.get().partitionId()
        owned = key_group_range_for_operator(max_parallelism, parallelism, subtask)
        for kg, table in _key_group_runs(batches):
            if not owned.contains(kg):
                raise IllegalStateError(
                    f"Bug: key group {kg} reached partition {subtask}, which owns key groups {owned}; "
                    "records were shuffled without partition_by_subtask")
            result = fn(kg, subtask, table)
            if result is None:
                continue
            if isinstance(result, pa.Table):
                yield from result.to_batches()
            else:
                yield result

    return df.mapInArrow(per_partition, output_schema)


def _key_group_runs(batches: Iterator[pa.RecordBatch]) -> Iterator[tuple[int, pa.Table]]:
    """Cut a stream sorted by ``_kg`` into (key group, rows) runs, holding one key group at a time."""
    pending: list[pa.RecordBatch] = []
    current: int | None = None
    for batch in batches:
        if batch.num_rows == 0:
            continue
        kgs = batch.column(KEY_GROUP_COL).to_numpy(zero_copy_only=False)
        start = 0
        n = len(kgs)
        while start < n:
            kg = int(kgs[start])
            if current is not None and kg != current:
                yield current, pa.Table.from_batches(pending)
                pending = []
            current = kg
            end = start + int((kgs[start:] != kg).argmax()) if (kgs[start:] != kg).any() else n
            pending.append(batch.slice(start, end - start))
            start = end
    if current is not None and pending:
        yield current, pa.Table.from_batches(pending)
