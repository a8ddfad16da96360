"""A probe, not Sluice: what an epoch's Spark plumbing costs as DataFrames (today's shape) and as RDDs (issue 16).

Why it exists: at 2M events / 100k keys an epoch of the column form costs about 1.4 s whatever its data, and the
driver spends most of its part in Catalyst (stop 33's note: each ``spark.sql`` 87 ms, each ``localCheckpoint``
104 ms, each ``mapInArrow`` 45 ms).  The design change proposed there builds the per-epoch stages on the RDD layer,
which has no analysis or optimizer.  Before rewriting the data path, this measures what that saves, on the same
plumbing with almost no data, so the difference is the fixed cost alone.

Both shapes run the epoch Sluice runs (engine/runtime/spark/job.py, epoch_frames.py): job 1 reads ``--splits``
slices (one task each, a Python function emitting ``--rows`` rows in ``--subtasks`` groups plus a split report),
materializes them with a local checkpoint and collects the reports; job 2 shuffles the read rows and the previous
epoch's state to ``--subtasks`` partitions, sorts each partition, runs a Python function per partition that folds
the rows into its state and emits a driver row, local-checkpoints the output and collects the driver rows; the
state rows feed the next epoch.

* ``dataframe``: as Sluice does it: ``mapInArrow`` stages, SQL text over temporary views for the shuffle, sort and
  the driver rows' filter, ``localCheckpoint(eager=False)``;
* ``rdd``: ``mapPartitions`` over ``parallelize(range(splits))``, rows travelling as Arrow IPC bytes keyed by their
  subtask, ``partitionBy`` with the identity partitioner, the sort done by the partition's function (pyarrow),
  ``RDD.localCheckpoint``.

The shapes take turns (``--rounds`` rounds of ``--epochs`` epochs each) in one Spark session; the first
``--warmup`` epochs of each shape's first round are left out.  Last line: JSON with each shape's per-epoch median
and quartiles (ms) and, over the rounds after the first, its CPU per epoch by process kind and by JVM thread group
(bench/common.py ``CpuMeter`` and ``JvmThreadCpu``).

**Measured** (this 2-core host, quiet, local[2], 4 GB heap, 1,000 rows per split, 3 rounds of 8 epochs, medians
over 21 epochs): 10 splits: DataFrame 1,116 ms per epoch, RDD 1,530 ms; 2 splits: DataFrame 734 ms, RDD 703 ms.
The RDD shape saves nothing: what an almost empty epoch costs is Spark's jobs and tasks (about 50-100 ms per task
here: 8 fewer read tasks saved 380-830 ms), not Catalyst.  So the RDD rewrite proposed in stop 33's note is dropped;
reading several splits per task did not move the real job either (bench_spark.py, column form, 2M / 100k, 10 files:
114.7k and 126.6k ev/s one task per split, 129.2k and 127.4k one per core), as at that size the epoch is CPU-bound.

**CPU, not only wall time** (stop 35, quiet host, 2 splits, 3 rounds of 8 epochs, CPU per epoch over rounds 2-3):
wall 512 ms DataFrame against 476 ms RDD, but the JVM's CPU is 663 against 283 ms an epoch -- Catalyst on the
driver's threads 161 against 37, the JIT compiler 351 against 138, the tasks 81 against 64 -- while the Python
workers take 149 against 391 ms (PySpark's RDD shuffle hashes and batches in Python, ``partitionBy``), so 841
against 701 ms of CPU in all.  On a CPU-bound host (the real job at 2M events: both cores busy) that CPU is what
bounds throughput, so the RDD shape is not the dead end the wall times above suggested: its JVM part is a third of
the DataFrame shape's; its Python part is what a rewrite would have to cut.

**Most of the RDD shape's Python was PySpark's collector** (stop 36, 2 splits, 3 rounds of 8 epochs, CPU per epoch
over rounds 2-3).  PySpark's worker runs a full ``gc.collect()`` after every task, which walked a worker's ~90k
module objects each time (engine/runtime/gc_pause.py); the RDD shape runs more Python tasks (``partitionBy``'s
map side).  With each task freezing what survives it (``--freeze-survivors``, the default, as Sluice's stages now
do), against ``--no-freeze-survivors``:

=========================  =====================  =====================
CPU ms per epoch            DataFrame              RDD
=========================  =====================  =====================
Python workers, freeze      6.2                    17.5
Python workers, no freeze   156.9                  445.0
JVM, freeze                 516.9 (Catalyst 125)   210.6 (Catalyst 29)
all CPU, freeze             546.2                  250.6
wall median, freeze         360 ms                 301 ms
=========================  =====================  =====================

So with the collector's walk gone the RDD shape costs less than half the DataFrame shape's CPU per epoch: the
per-epoch plumbing on RDDs is the design change to make next.  Made on 2026-12-08: engine/runtime/spark/epoch_rdds.py,
the default ``epoch_shape``; together with the Python workers on a Unix domain socket (each Python task had waited
about 40 ms for its input over loopback TCP, which this probe's wall times include) it took the column form from
1.3-1.7x to 2.5-4.1x native Spark on issue 16's 2M cells (README, "Runtimes").

Usage: ``python -m bench.probe_epoch_shapes [--splits 10] [--subtasks 2] [--rows 1000] [--epochs 10] [--rounds 3]
[--no-freeze-survivors]``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any, Iterator

from bench.common import CpuMeter, JvmThreadCpu, print_result_line, spark_jvm_pid

_SCHEMA = "_dest INT, _pk INT, _kg INT, _value BIGINT, _blob BINARY"
_STATE, _DRIVER, _RECORD = 0, 1, 2


def _read_rows(split: int, epoch: int, rows: int, subtasks: int) -> Any:
    import numpy as np
    import pyarrow as pa

    keys = (np.arange(rows, dtype=np.int64) * 7919 + split) % 1000
    return pa.table({"_dest": np.full(rows + 1, _RECORD, np.int32),
                     "_pk": np.concatenate([keys % subtasks, [-1]]).astype(np.int32),
                     "_kg": np.concatenate([keys % 128, [-1]]).astype(np.int32),
                     "_value": np.concatenate([keys + epoch, [split]]),
                     "_blob": pa.array([None] * (rows + 1), pa.binary())})


def _fold(table: Any, state_blobs: list[bytes]) -> tuple[bytes, int]:
    """The partition's work: sort the records, sum them into the state (a count and a sum, as bytes)."""
    import pyarrow.compute as pc

    table = table.sort_by([("_kg", "ascending")])
    count, total = 0, 0
    for blob in state_blobs:
        c, t = blob.decode().split(",")
        count, total = count + int(c), total + int(t)
    count += table.num_rows
    total += int(pc.sum(table.column("_value")).as_py() or 0)
    return f"{count},{total}".encode(), count


# ---- the DataFrame shape -----------------------------------------------------------------------------------


def _task(fn: Any, args: Any) -> Any:
    """``fn`` as Sluice's stages run a task: the collector paused, and with ``--freeze-survivors`` (the default, as
    Sluice does) what survives the task frozen at its end (engine/runtime/gc_pause.py)."""
    freeze = args.freeze_survivors

    def run(items: Iterator[Any]) -> Iterator[Any]:
        from engine.runtime.gc_pause import paused_iteration

        return paused_iteration(fn(items), freeze_survivors=freeze)

    return run


def _dataframe_epoch(spark: Any, state: Any, epoch: int, args: Any, schema: Any, ids: Any) -> tuple[Any, list]:
    import pyarrow as pa

    rows, subtasks = args.rows, args.subtasks

    def read(batches: Iterator[Any]) -> Iterator[Any]:
        for batch in batches:
            for split in batch.column(0).to_pylist():
                t = _read_rows(split, epoch, rows, subtasks)
                dest = pa.array([_RECORD] * rows + [_DRIVER], pa.int32())
                yield from t.set_column(0, "_dest", dest).to_batches()

    src = ids.mapInArrow(_task(read, args), schema).localCheckpoint(eager=False)
    reports = spark.sql(f"SELECT _value FROM {{src}} WHERE _dest = {_DRIVER}", src=src).collect()
    frames = {"src": src}
    parts = [f"SELECT * FROM {{src}} WHERE _dest = {_RECORD}"]
    if state is not None:
        frames["state"] = state
        parts.append("SELECT * FROM {state}")
    union = " UNION ALL ".join(f"({p})" for p in parts)
    placed = spark.sql(f"SELECT /*+ REPARTITION({subtasks}, _pk) */ * FROM ({union}) AS u SORT BY _pk, _kg", **frames)

    def window(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        tables = [pa.Table.from_batches([b]) for b in batches]
        if not tables:
            return
        table = pa.concat_tables(tables)
        is_state = pa.compute.equal(table.column("_dest"), _STATE)
        blobs = table.filter(is_state).column("_blob").to_pylist()
        records = table.filter(pa.compute.invert(is_state))
        pk = int(table.column("_pk")[0].as_py())
        blob, count = _fold(records, blobs)
        yield pa.RecordBatch.from_pydict({"_dest": [_STATE, _DRIVER], "_pk": [pk, pk], "_kg": [0, 0],
                                          "_value": [0, count], "_blob": [blob, None]}, schema=pa.schema([
                                              ("_dest", pa.int32()), ("_pk", pa.int32()), ("_kg", pa.int32()),
                                              ("_value", pa.int64()), ("_blob", pa.binary())]))

    out = placed.mapInArrow(_task(window, args), schema).localCheckpoint(eager=False)
    driver = spark.sql(f"SELECT _value FROM {{out}} WHERE _dest = {_DRIVER}", out=out).collect()
    return out.where(f"_dest = {_STATE}"), [len(reports), sum(r[0] for r in driver)]


# ---- the RDD shape -----------------------------------------------------------------------------------------


def _ipc(table: Any) -> bytes:
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def _rdd_epoch(sc: Any, state: Any, epoch: int, args: Any) -> tuple[Any, list]:
    rows, subtasks = args.rows, args.subtasks

    def read(splits: Iterator[int]) -> Iterator[tuple[int, bytes]]:
        import pyarrow.compute as pc

        for split in splits:
            t = _read_rows(split, epoch, rows, subtasks)
            for pk in range(subtasks):
                yield pk, _ipc(t.filter(pc.equal(t.column("_pk"), pk)))
            yield -1, str(split).encode()  # the split report

    src = sc.parallelize(range(args.splits), args.splits).mapPartitions(_task(read, args))
    src.localCheckpoint()
    reports = src.filter(lambda kv: kv[0] < 0).collect()
    placed = src.filter(lambda kv: kv[0] >= 0)
    if state is not None:
        placed = placed.union(state)
    placed = placed.partitionBy(subtasks, lambda pk: pk)

    def window(pairs: Iterator[tuple[int, bytes]]) -> Iterator[tuple[int, bytes]]:
        import pyarrow as pa

        tables, blobs, pk = [], [], None
        for pk, data in pairs:
            if data.startswith(b"S:"):
                blobs.append(data[2:])
            else:
                tables.append(pa.ipc.open_stream(data).read_all())
        if pk is None:
            return
        blob, count = _fold(pa.concat_tables(tables) if tables else _read_rows(0, 0, 0, 1), blobs)
        yield pk, b"S:" + blob
        yield -1, str(count).encode()

    out = placed.mapPartitions(_task(window, args), preservesPartitioning=True)
    out.localCheckpoint()
    driver = out.filter(lambda kv: kv[0] < 0).collect()
    return out.filter(lambda kv: kv[0] >= 0), [len(reports), sum(int(v) for _, v in driver)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--splits", type=int, default=10)
    parser.add_argument("--subtasks", type=int, default=2)
    parser.add_argument("--rows", type=int, default=1000, help="rows each split reads per epoch")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--driver-memory", default="4g")
    parser.add_argument("--freeze-survivors", action=argparse.BooleanOptionalAction, default=True,
                        help="freeze what survives each task in its worker, as Sluice's stages do (default on)")
    args = parser.parse_args()

    from pyspark.sql.types import StructType

    from engine.runtime.spark.session import get_or_create_spark, stop_spark

    spark = get_or_create_spark("local[2]", driver_memory=args.driver_memory)
    schema = StructType.fromDDL(_SCHEMA)
    ids = spark.range(0, args.splits, numPartitions=args.splits).selectExpr("CAST(id AS INT) AS split")
    times: dict[str, list[float]] = {"dataframe": [], "rdd": []}
    checks: dict[str, list] = {"dataframe": [], "rdd": []}
    #: CPU seconds of the measured rounds (after the first), by process kind and by JVM thread group
    cpu: dict[str, dict[str, float]] = {"dataframe": {}, "rdd": {}}
    try:
        for round_ in range(args.rounds):
            for shape in ("dataframe", "rdd"):
                state = None
                meter, threads = CpuMeter(spark_jvm_pid()).start(), JvmThreadCpu(spark_jvm_pid()).start()
                for epoch in range(args.epochs):
                    start = time.perf_counter()
                    if shape == "dataframe":
                        state, check = _dataframe_epoch(spark, state, epoch, args, schema, ids)
                    else:
                        state, check = _rdd_epoch(spark.sparkContext, state, epoch, args)
                    ms = (time.perf_counter() - start) * 1000
                    if round_ > 0 or epoch >= args.warmup:
                        times[shape].append(ms)
                    checks[shape].append(check)
                    print(f"round {round_} {shape:9} epoch {epoch}: {ms:7.1f} ms  (reports, records) {check}")
                if round_ > 0:
                    spent = meter.stop()
                    for k, v in {**spent, **{f"jvm_{g}": s for g, s in threads.stop(spent["jvm"]).items()}}.items():
                        cpu[shape][k] = cpu[shape].get(k, 0.0) + v
    finally:
        stop_spark(spark)
    # both shapes did the same work: the same split reports and the same running record counts
    if checks["dataframe"] != checks["rdd"]:
        raise SystemExit(f"the shapes disagree: {checks['dataframe'][:3]} vs {checks['rdd'][:3]}")
    result: dict[str, Any] = {"splits": args.splits, "subtasks": args.subtasks, "rows_per_split": args.rows,
                              "epochs_measured": len(times["rdd"]), "freeze_survivors": args.freeze_survivors}
    for shape, values in times.items():
        q = statistics.quantiles(values, n=4)
        epochs = max(1, (args.rounds - 1) * args.epochs)
        cpu_ms = {k: round(v * 1000 / epochs, 1) for k, v in sorted(cpu[shape].items())}
        result[shape] = {"median_ms": round(statistics.median(values), 1), "q1_ms": round(q[0], 1),
                         "q3_ms": round(q[2], 1), "cpu_ms_per_epoch": cpu_ms}
        print(f"{shape:9}: median {result[shape]['median_ms']} ms per epoch (quartiles {q[0]:.0f} / {q[2]:.0f}); "
              f"CPU ms per epoch after round 1: {cpu_ms}")
    print_result_line(result)


if __name__ == "__main__":
    main()
