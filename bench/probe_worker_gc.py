"""What a reused Spark Python worker's garbage collection costs after Sluice's tasks (engine/runtime/gc_pause.py).

PySpark's worker runs a full ``gc.collect()`` after every task (pyspark/daemon.py).  This probe runs the column
form of bench_spark's tumbling job ``--runs`` times on ``--events`` events, then one probe task per worker
slot, which reports what the worker's collector tracks (objects, in the generations a collection walks, and
the most common types) and how long two ``gc.collect()`` calls take there.

Usage: ``python -m bench.probe_worker_gc [--events 400000] [--keys 1000] [--runs 2]``; the last line is one JSON
object with every probe task's figures.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from typing import Any, Iterator

PROBE_DDL = "pid long, tracked long, first_ms double, second_ms double, frozen long, top string"


def probe(batches: Iterator[Any]) -> Iterator[Any]:
    """A task that reports its worker's collector state (see the module docstring)."""
    import collections
    import gc
    import os
    import time

    import pyarrow as pa

    for _ in batches:
        pass
    tracked = gc.get_objects()
    top = collections.Counter(type(o).__name__ for o in tracked).most_common(8)
    n = len(tracked)
    del tracked
    started = time.perf_counter()
    gc.collect()
    first = time.perf_counter() - started
    started = time.perf_counter()
    gc.collect()
    second = time.perf_counter() - started
    yield pa.RecordBatch.from_pydict({
        "pid": [os.getpid()], "tracked": [n], "first_ms": [round(first * 1000, 2)],
        "second_ms": [round(second * 1000, 2)], "frozen": [gc.get_freeze_count()], "top": [json.dumps(top)]})


def main(argv: list[str] | None = None) -> None:
    from bench.bench_spark import run_sluice
    from bench.bench_spark_native import bench_spark_conf
    from bench.common import generate_purchase_events, interleave_into_splits
    from engine.runtime.spark.session import get_or_create_spark, stop_spark

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=400_000)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args(argv)
    spark = get_or_create_spark("local[2]", app_name="probe-worker-gc", conf=bench_spark_conf(2),
                                shuffle_partitions=2, driver_memory="4g")
    runs = []
    try:
        with tempfile.TemporaryDirectory(prefix="sluice-probe-gc-") as work:
            dataset = generate_purchase_events(f"{work}/data", events=args.events, keys=args.keys, files=20, skew=0)
            splits = interleave_into_splits(dataset, f"{work}/splits", 2)
            for i in range(args.runs):
                r = run_sluice(dataset, "tumbling", f"{work}/run{i}", 2, splits, form="column")
                runs.append({"events_per_s": r["events_per_s"], "cpu_us_per_event": r["cpu_us_per_event"]})
                print(f"run {i}: {r['events_per_s']:.0f} events/s, CPU us/event {r['cpu_us_per_event']}", flush=True)
        workers = [row.asDict() for row in spark.range(4).repartition(4).mapInArrow(probe, PROBE_DDL).collect()]
    finally:
        stop_spark(spark)
    for w in workers:
        print(f"worker {w['pid']}: {w['tracked']} tracked ({w['frozen']} frozen), gc.collect {w['first_ms']} ms "
              f"then {w['second_ms']} ms; {w['top']}")
    print(json.dumps({"benchmark": "probe_worker_gc", "events": args.events, "keys": args.keys, "runs": runs,
                      "workers": workers}))


if __name__ == "__main__":
    main()
