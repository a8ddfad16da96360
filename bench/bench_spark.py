"""Sluice-on-Spark versus Spark Structured Streaming's native windowed sum (issue 5's benchmark).

Same process, same SparkSession, same Parquet files (bench/common.py generate_purchase_events):
native ``groupBy(window(ts, 60 s[, 10 s]), user_id).agg(sum(qty))`` with a watermark, one file per
micro-batch, against a Sluice job reading the same events as ``parallelism`` interleaved splits
(bench/common.py ``interleave_into_splits``: each epoch then covers the event-time slice a
micro-batch covers) with ``epoch_records`` chosen so it runs the same number of epochs as native
micro-batches, keyed by user, tumbling 60 s or sliding 60 s/10 s ``sum``, checkpointing every
epoch to a local folder, then restored from its last checkpoint (when it is still there: a job that
FINISHED deletes its checkpoints at its end, Flink's rule, and the restore time is then not measured).
Both write their results as Parquet files: native through its file sink, Sluice through ``write_files`` (exactly-once, parts
staged by the Spark tasks and committed per checkpoint).  Sluice also emits the windows still open
at end of input (MAX_WATERMARK); native append mode never does, so Sluice writes more rows.  The Sluice job is written as a
user would write it: a timestamp assigner, a map to tuples and a key selector, all Python,
called per record as their contract says.  Prints both throughputs, their ratio, checkpoint duration and size per
epoch, the restore time, and where each side's CPU goes (microseconds per event in the Spark JVM, in
PySpark's Python workers and in the driver's Python, bench/common.py ``CpuMeter``); the last line is JSON.

Each side runs ``--repeat`` times per window (default 3), native and Sluice taking turns, and the
medians are compared: the first run of either side in a process pays the JVM's warm-up (and
Sluice's Python workers their imports), and this shared host's speed drifts between runs, so a
single pair of runs can be off by tens of percent either way.  Every run's figure is printed too.

Two forms of the Sluice job take turns with native: ``lambda`` (above) and ``column``, the same job with
fields named instead of functions (``with_timestamp_assigner("ts")``, ``key_by("user_id")``,
``sum("qty")``), which the Spark runtime runs on its column path (issue 16, engine/runtime/spark/column_path.py);
``column-elements`` is the same column form kept on the element path, to measure what the column path gains.

Usage: ``python -m bench.bench_spark --events 2000000 --keys 1000 --skew 1.1 --files 20 [--repeat 3]
[--sides native,lambda,column]``; ``bench/bench_grid.py`` runs it over issue 16's grid of key counts, skews
and sizes, one process per cell.
"""

from __future__ import annotations

from dataclasses import asdict
import argparse
import math
import statistics
import tempfile
import time
from typing import Any

from bench.bench_spark_native import bench_spark_conf, run_native_window_sum
from bench.common import (CpuMeter, generate_purchase_events, interleave_into_splits, peak_rss_mb, per_event_us,
                          print_result_line, process_peak_rss_mb, spark_jvm_pid)


def _ts_ms(e: dict, ts: Any) -> int:
    return int(e["ts"].timestamp() * 1000)


def _as_tuple(e: dict) -> tuple:
    return (e["user_id"], int(e["ts"].timestamp() * 1000), int(e["qty"]))


def _user(e: tuple) -> str:
    return e[0]


def run_sluice(dataset: Any, window: str, work_dir: str, parallelism: int, splits_dir: str,
               options: dict[str, Any] | None = None, form: str = "lambda") -> dict[str, Any]:
    """``form``: ``lambda`` (a timestamp function, a map to tuples, a key function, as users write it) or
    ``column`` (fields named: ``with_timestamp_assigner("ts")``, ``key_by("user_id")``, ``sum("qty")``; so is
    ``column-elements``, run with ``options`` that keep it on the element path)."""
    from engine.api.environment import StreamExecutionEnvironment
    from engine.api.time import Duration, Time
    from engine.runtime.spark.runtime import SparkRuntime
    from engine.watermarks.strategy import WatermarkStrategy
    from engine.windowing.assigners import SlidingEventTimeWindows, TumblingEventTimeWindows

    files = len(dataset.files)
    epoch_records = max(1, math.ceil(dataset.events / parallelism / files))

    def build(restore: str | None = None):
        env = StreamExecutionEnvironment.get_execution_environment()
        env.set_runtime("spark")
        env.set_parallelism(parallelism)
        env.set_max_parallelism(128)
        env.set_runtime_option("epoch_records", epoch_records)
        env.enable_checkpointing(10)
        env.get_checkpoint_config().set_checkpoint_storage_dir(f"file://{work_dir}/sluice-checkpoints")
        if restore:
            env.set_runtime_option("from_savepoint", restore)
        for k, v in (options or {}).items():
            env.set_runtime_option(k, v)
        bounded = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(10))
        events = env.read_files(splits_dir, "parquet")
        assigner = (TumblingEventTimeWindows.of(Time.seconds(60)) if window == "tumbling"
                    else SlidingEventTimeWindows.of(Time.seconds(60), Time.seconds(10)))
        if form in ("column", "column-elements"):
            events = events.assign_timestamps_and_watermarks(bounded.with_timestamp_assigner("ts"))
            sums = events.key_by("user_id").window(assigner).sum("qty")
        else:
            events = events.assign_timestamps_and_watermarks(bounded.with_timestamp_assigner(_ts_ms)).map(_as_tuple)
            sums = events.key_by(_user).window(assigner).sum(2)
        sums.write_files(f"file://{work_dir}/sluice-output", "parquet")  # the restore re-commits into it
        return env, sums

    env, stream = build()
    job = SparkRuntime(env).start(f"bench-{window}", list(env._sinks), [])
    meter = CpuMeter(spark_jvm_pid()).start()
    started = time.monotonic()
    job.run()
    wall_s = time.monotonic() - started
    cpu_s = meter.stop()
    output_rows = job.records_out
    history = job.checkpoint_history()
    restore_s = None
    if history:
        from checkpoints.errors import SnapshotNotFound

        restart_env, restart_stream = build(history[-1].external_pointer)
        t = time.monotonic()
        try:
            SparkRuntime(restart_env).start("bench-restore", list(restart_env._sinks), [])
            restore_s = round(time.monotonic() - t, 3)
        except SnapshotNotFound:
            pass  # a FINISHED job's checkpoints are deleted at its end (Flink's rule): no restore to time then
    return {
        "system": "sluice-on-spark", "form": form, "window": window, "events": dataset.events, "epochs": job.epoch,
        "wall_s": round(wall_s, 3), "events_per_s": round(dataset.events / wall_s, 1), "output_rows": output_rows,
        "checkpoints": len(history), "last_epoch_ms": job.last_epoch_ms, "last_epoch_phases_ms": job.last_epoch_phases_ms,
        "phases_total_ms": dict(job.phases_total_ms),
        "checkpoint_ms_per_epoch": round(sum(h.completed_ms - h.triggered_ms for h in history) / max(1, len(history)), 1),
        "checkpoint_upload_ms_per_epoch": round(sum(h.get("upload_ms") or 0 for h in job.checkpointing.history)
                                                / max(1, len(history)), 1),
        "checkpoint_bytes_per_epoch": round(sum(h.size_bytes or 0 for h in history) / max(1, len(history)), 1),
        "restore_s": restore_s,
        "cpu_us_per_event": per_event_us(cpu_s, dataset.events),
    }


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--skew", type=float, default=0.0, help="Zipf exponent of the key distribution (0: uniform)")
    parser.add_argument("--files", type=int, default=10)
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--windows", default="tumbling,sliding")
    parser.add_argument("--sides", default="native,lambda,column",
                        help="what runs, taking turns: native Spark, Sluice's lambda form, Sluice's column form "
                             "(on the column path where its shape allows), column-elements: the column form with "
                             "every window on the element path (runtime option preaggregation=False)")
    parser.add_argument("--repeat", type=int, default=3,
                        help="runs per side and window, the sides taking turns (medians reported)")
    parser.add_argument("--driver-memory", default="4g",
                        help="the one local JVM every side shares (the issue's 'normal heap')")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    sides = args.sides.split(",")
    if not sides or not set(sides) <= {"native", "lambda", "column", "column-elements"}:
        parser.error("--sides takes native, lambda, column and/or column-elements")

    from engine.runtime.spark.session import get_or_create_spark, stop_spark

    spark = get_or_create_spark("local[2]", app_name="sluice-bench", conf=bench_spark_conf(args.parallelism),
                                shuffle_partitions=args.parallelism, driver_memory=args.driver_memory)
    results: dict[str, Any] = {"events": args.events, "keys": args.keys, "skew": args.skew, "files": args.files,
                               "driver_memory": args.driver_memory, "repeat": args.repeat, "sides": sides}
    kinds = ("jvm", "python_workers", "driver_python", "total")
    try:
        with tempfile.TemporaryDirectory(prefix="sluice-bench-") as work:
            dataset = generate_purchase_events(f"{work}/data", events=args.events, keys=args.keys, files=args.files,
                                               skew=args.skew)
            splits_dir = interleave_into_splits(dataset, f"{work}/splits", args.parallelism)
            for window in args.windows.split(","):
                runs: dict[str, list[dict[str, Any]]] = {side: [] for side in sides}
                for run in range(args.repeat):
                    for side in sides:
                        where = f"{work}/{side}-{window}-{run}"
                        if side == "native":
                            runs[side].append(asdict(run_native_window_sum(
                                spark, dataset, window=window, sink="parquet", work_dir=where)))
                        else:
                            runs[side].append(run_sluice(dataset, window, where, args.parallelism, splits_dir,
                                                         form=side,
                                                         options={"preaggregation": False}
                                                         if side == "column-elements" else None))
                    print(f"{window} run {run + 1}/{args.repeat}: " + ", ".join(
                        f"{side} {runs[side][-1]['events_per_s']:,.0f} ev/s" for side in sides), flush=True)
                cell: dict[str, Any] = {}
                for side in sides:
                    cell[side] = {
                        "events_per_s": _median([r["events_per_s"] for r in runs[side]]),
                        "runs_events_per_s": [r["events_per_s"] for r in runs[side]],
                        "cpu_us_per_event": {k: _median([r["cpu_us_per_event"][k] for r in runs[side]]) for k in kinds},
                    }
                    if side != "native":
                        cell[side].update({key: _median([r[key] for r in runs[side] if r[key] is not None])
                                           for key in ("checkpoint_ms_per_epoch", "checkpoint_upload_ms_per_epoch",
                                                       "checkpoint_bytes_per_epoch", "restore_s")})
                        cell[side]["epochs"] = runs[side][0]["epochs"]
                if "native" in sides:
                    cell["native"]["micro_batches"] = runs["native"][0]["micro_batches"]
                    for side in sides:
                        if side != "native":
                            cell[side]["ratio_to_native"] = round(
                                cell[side]["events_per_s"] / cell["native"]["events_per_s"], 3)
                print(f"{window}: " + "; ".join(
                    f"{side} median {cell[side]['events_per_s']:,.0f} ev/s"
                    + (f" (x{cell[side]['ratio_to_native']} native)" if "ratio_to_native" in cell[side] else "")
                    for side in sides), flush=True)
                print(f"{window}: CPU us per event (medians; JVM / Python workers / driver Python / total): "
                      + "; ".join(f"{side} " + " / ".join(f"{cell[side]['cpu_us_per_event'][k]:.2f}" for k in kinds)
                                  for side in sides), flush=True)
                results[window] = cell
            results["peak_rss_mb"] = {"jvm": process_peak_rss_mb(spark_jvm_pid() or -1), "driver_python": peak_rss_mb()}
    finally:
        stop_spark(spark)
    print_result_line(results)


if __name__ == "__main__":
    main()
