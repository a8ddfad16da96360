"""The peer Sluice-on-Spark must beat: Spark Structured Streaming's native windowed sum (issue 5).

    .venv/bin/python bench/bench_spark_native.py --events 1000000 --keys 10000 --batches 20 --window tumbling

Reads the purchase-event Parquet files of :func:`bench.common.generate_purchase_events` with
``readStream.parquet(dir)`` and ``maxFilesPerTrigger=1`` (one file per micro-batch, so both systems
run the same number of micro-batches / epochs), ``withWatermark("ts", delay)``,
``groupBy(window(ts, 60 s[, 10 s]), user_id).agg(sum(qty))``, output mode append, trigger
``availableNow``, into a Parquet (default), memory or noop sink.

Measured:

* ``events_per_s``: input events / wall time from ``start()`` to the end of ``awaitTermination``
  (excludes data generation and JVM start, includes query planning);
* per micro-batch latency: ``durationMs.triggerExecution`` of each query progress event (the
  files already exist, so this is the batch's processing latency: read, aggregate, state store
  commit, sink write);
* peak memory: the driver's Python process (getrusage) and the Spark JVM (VmHWM; in local mode it
  is driver and executor at once).

Semantics note for the ratio: append mode emits a window only once the watermark passes its end,
and Structured Streaming has no end-of-input watermark, so windows still open after the last file
stay in the state store and are not emitted; Sluice emits them at end of input (MAX_WATERMARK).
The throughput compares work on the same events; ``output_rows`` is reported for transparency.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `bench` and `engine` importable from the repo root
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (  # noqa: E402
    CpuMeter,
    JvmThreadCpu,
    PurchaseDataset,
    Stopwatch,
    generate_purchase_events,
    peak_rss_mb,
    per_event_us,
    percentile,
    print_result_line,
    process_peak_rss_mb,
    spark_jvm_pid,
)

WINDOW_SIZE = "60 seconds"
WINDOW_SLIDE = "10 seconds"
PURCHASE_SCHEMA = "user_id string, qty long, price double, ts timestamp"


@dataclass(frozen=True, slots=True)
class NativeResult:
    system: str
    window: str
    events: int
    keys: int
    micro_batches: int
    data_micro_batches: int
    wall_s: float
    events_per_s: float
    batch_latency_ms_p50: float | None
    batch_latency_ms_p95: float | None
    batch_latency_ms_max: float | None
    output_rows: int | None
    driver_python_peak_rss_mb: float
    spark_jvm_peak_rss_mb: float | None
    #: CPU microseconds per event from start() to termination, by process kind (bench/common.py CpuMeter)
    cpu_us_per_event: dict | None = None
    #: the JVM's part of that by thread group (bench/common.py JvmThreadCpu)
    jvm_us_per_event_by_thread: dict | None = None


def run_native_window_sum(
    spark,
    dataset: PurchaseDataset,
    *,
    window: str = "tumbling",
    sink: str = "parquet",
    work_dir: str,
    watermark_delay: str = "10 seconds",
) -> NativeResult:
    """Run the native streaming windowed sum over ``dataset`` to completion and measure it."""
    from pyspark.sql import functions as F

    if window not in ("tumbling", "sliding"):
        raise ValueError(f"window must be 'tumbling' or 'sliding'; got {window!r}")
    if sink not in ("parquet", "memory", "noop"):
        raise ValueError(f"sink must be 'parquet', 'memory' or 'noop'; got {sink!r}")
    work = Path(work_dir)
    events = (
        spark.readStream.schema(PURCHASE_SCHEMA)
        .option("maxFilesPerTrigger", 1)
        .parquet(dataset.directory)
    )
    win = F.window("ts", WINDOW_SIZE) if window == "tumbling" else F.window("ts", WINDOW_SIZE, WINDOW_SLIDE)
    sums = (
        events.withWatermark("ts", watermark_delay)
        .groupBy(win, "user_id")
        .agg(F.sum("qty").alias("qty"))
        .select(F.col("window.start").alias("window_start"), F.col("window.end").alias("window_end"), "user_id", "qty")
    )
    query_name = f"native_{window}_{abs(hash(work_dir)) % 10**8}"
    writer = (
        sums.writeStream.outputMode("append")
        .option("checkpointLocation", str(work / "native-checkpoint"))
        .trigger(availableNow=True)
    )
    output_dir = work / "native-output"
    if sink == "parquet":
        writer = writer.format("parquet").option("path", str(output_dir))
    elif sink == "memory":
        writer = writer.format("memory").queryName(query_name)
    else:
        writer = writer.format("noop")

    meter = CpuMeter(spark_jvm_pid()).start()
    threads = JvmThreadCpu(spark_jvm_pid()).start()
    watch = Stopwatch()
    query = writer.start()
    query.awaitTermination()
    wall_s = watch.elapsed_s()
    cpu_s = meter.stop()
    thread_s = threads.stop(cpu_s["jvm"])
    if query.exception() is not None:
        raise RuntimeError(f"native streaming query failed: {query.exception()}")
    progress = query.recentProgress
    latencies = [float(p["durationMs"].get("triggerExecution", 0)) for p in progress]
    data_batches = sum(1 for p in progress if p.get("numInputRows", 0) > 0)
    input_rows = sum(int(p.get("numInputRows", 0)) for p in progress)
    if input_rows != dataset.events:
        raise RuntimeError(f"native query read {input_rows} events, expected {dataset.events}")
    if sink == "parquet":
        output_rows = spark.read.parquet(str(output_dir)).count()
    elif sink == "memory":
        output_rows = spark.table(query_name).count()
    else:
        output_rows = None
    jvm_pid = spark_jvm_pid()
    return NativeResult(
        system="spark-structured-streaming",
        window=window,
        events=dataset.events,
        keys=dataset.keys,
        micro_batches=len(progress),
        data_micro_batches=data_batches,
        wall_s=round(wall_s, 3),
        events_per_s=round(dataset.events / wall_s, 1),
        batch_latency_ms_p50=percentile(latencies, 50),
        batch_latency_ms_p95=percentile(latencies, 95),
        batch_latency_ms_max=max(latencies) if latencies else None,
        output_rows=output_rows,
        driver_python_peak_rss_mb=round(peak_rss_mb(), 1),
        spark_jvm_peak_rss_mb=round(process_peak_rss_mb(jvm_pid), 1) if jvm_pid else None,
        cpu_us_per_event=per_event_us(cpu_s, dataset.events),
        jvm_us_per_event_by_thread=per_event_us(thread_s, dataset.events),
    )


def bench_spark_conf(parallelism: int) -> dict[str, str]:
    """Settings both sides of the comparison share (same session, same shuffle width)."""
    return {
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.streaming.numRecentProgressUpdates": "100000",
        "spark.sql.shuffle.partitions": str(parallelism),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000, help="issue 5 target: 5_000_000")
    parser.add_argument("--keys", type=int, default=10_000, help="issue 5 target: 100_000")
    parser.add_argument("--batches", type=int, default=20, help="files = micro-batches")
    parser.add_argument("--window", choices=("tumbling", "sliding"), default="tumbling")
    parser.add_argument("--sink", choices=("parquet", "memory", "noop"), default="parquet")
    parser.add_argument("--parallelism", type=int, default=2, help="spark.sql.shuffle.partitions")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--driver-memory", default="2g")
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args(argv)

    from engine.runtime.spark.session import get_or_create_spark, stop_spark

    with tempfile.TemporaryDirectory(prefix="sluice-bench-native-") as tmp:
        gen_watch = Stopwatch()
        dataset = generate_purchase_events(
            Path(tmp) / "events", events=args.events, keys=args.keys, files=args.batches, seed=args.seed
        )
        generate_s = gen_watch.elapsed_s()
        spark = get_or_create_spark(
            args.master,
            app_name="sluice-bench-native",
            conf=bench_spark_conf(args.parallelism),
            shuffle_partitions=args.parallelism,
            driver_memory=args.driver_memory,
        )
        try:
            result = run_native_window_sum(spark, dataset, window=args.window, sink=args.sink, work_dir=tmp)
        finally:
            stop_spark(spark)
    line = {"benchmark": "spark_native_window_sum", **asdict(result), "generate_s": round(generate_s, 2),
            "batches": args.batches, "sink": args.sink, "master": args.master, "parallelism": args.parallelism,
            "dataset_bytes": dataset.bytes_on_disk}
    print_result_line(line)


if __name__ == "__main__":
    main()
