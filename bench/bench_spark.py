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
PySpark's Python workers and in the driver's Python, bench/common.py ``CpuMeter``; the JVM's by thread group: the
driver's planning threads (Catalyst), the JIT compiler, the executors' tasks, the collector, bench/common.py
``JvmThreadCpu``); the last line is JSON.

Each side runs ``--repeat`` times per window (default 3), native and Sluice taking turns, and the
medians are compared: this shared host's speed drifts between runs, so a single pair of runs can be
off by tens of percent either way.  Every run's figure is printed too.  Before a cell's measured runs
every side runs once, unmeasured, on ``--warmup-events`` events of the cell's shape (default 200k):
the first run in a process pays the JVM's warm-up (JFR on this 2-core host: the JIT compiler took
1.3 cores through a whole first run) and Sluice's Python workers their imports, and without it the
side that went first paid that for the other — native, on the first window of every cell, with
``--repeat 1``.

Two forms of the Sluice job take turns with native: ``lambda`` (above) and ``column``, the same job with
fields named instead of functions (``with_timestamp_assigner("ts")``, ``key_by("user_id")``,
``sum("qty")``), which the Spark runtime runs on its column path (issue 16, engine/runtime/spark/column_path.py);
``column-elements`` is the same column form kept on the element path, to measure what the column path gains;
``column-serial`` the column form without pipelined epochs (runtime option ``pipeline_epochs=False``; every
other side runs the default, engine/runtime/spark/job.py: one Spark job per epoch instead of two);
``column-upload`` the column form with each checkpoint's state written by an upload job after the barrier (runtime
option ``snapshot_in_window_tasks=False``; by default the window tasks write it, engine/runtime/spark/checkpointing.py);
``column-rdd``/``lambda-rdd`` and ``column-frames``/``lambda-frames`` a form with each epoch's stages placed on RDDs
or as DataFrames and Spark SQL (runtime option ``epoch_shape``, engine/runtime/spark/epoch_rdds.py).

Usage: ``python -m bench.bench_spark --events 2000000 --keys 1000 --skew 1.1 --files 20 [--repeat 3]
[--sides native,lambda,column]`` runs one cell in this process.

``--grid`` runs issue 16's grid: keys 1k/100k/1M x uniform/Zipf 1.1 x 2M/10M events (``--events``, ``--keys``
and ``--skew`` then take comma-separated lists), one child process per cell (its own JVM with the
``--driver-memory`` heap; a cell that dies, of an OutOfMemoryError say, is recorded with its exit code and the
tail of its output, and the grid goes on).  Per cell and window it prints each side's throughput, its ratio to
native, the peak resident memory of the process tree while that side ran (driver Python + Spark JVM + PySpark's
Python workers, sampled every 100 ms; the JVM keeps the heap it grew, so a side that runs after a hungrier one
inherits part of its footprint; which side goes first rotates from run to run) and CPU
microseconds per event in the JVM and in Python (workers + driver); the last line is one JSON object with
every cell.  The full grid takes hours on a 2-core host.

``--smoke`` runs a tiny grid (two key counts x uniform/Zipf, a few thousand events, one repeat) in this
process and checks correctness only, never timing (:func:`check_results`): the column form's rows equal the
lambda form's, both equal an independent numpy/pyarrow fold of the input files (every window: Sluice fires the
windows still open at end of input), and native Spark's rows are that fold's windows up to native's final
watermark.  A mismatch is an AssertionError and a non-zero exit; tests/bench/test_bench_spark_smoke.py runs it.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.bench_spark_native import bench_spark_conf, run_native_window_sum
from bench.common import (
    CpuMeter,
    JvmThreadCpu,
    PeakTreeRss,
    generate_purchase_events,
    interleave_into_splits,
    peak_rss_mb,
    per_event_us,
    print_result_line,
    process_peak_rss_mb,
    spark_jvm_pid,
)


def _ts_ms(e: dict, ts: Any) -> int:
    return int(e["ts"].timestamp() * 1000)


def _as_tuple(e: dict) -> tuple:
    return (e["user_id"], int(e["ts"].timestamp() * 1000), int(e["qty"]))


def _user(e: tuple) -> str:
    return e[0]


def sluice_builder(dataset: Any, window: str, work_dir: str, parallelism: int, splits_dir: str,
                   options: dict[str, Any] | None = None, form: str = "lambda") -> Any:
    """``build(restore=None) -> (env, sums)``: the Sluice job :func:`run_sluice` runs (also the driver-cost
    harness's, bench/bench_spark_driver.py), checkpointing every epoch under ``work_dir``."""
    from engine.api.environment import StreamExecutionEnvironment
    from engine.api.time import Duration, Time
    from engine.watermarks.strategy import WatermarkStrategy
    from engine.windowing.assigners import SlidingEventTimeWindows, TumblingEventTimeWindows

    if form not in ("lambda", "column", "column-elements"):
        raise ValueError(f"form must be lambda, column or column-elements; got {form!r}")
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
        bounded = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(WATERMARK_DELAY_MS))
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

    return build


def run_sluice(dataset: Any, window: str, work_dir: str, parallelism: int, splits_dir: str,
               options: dict[str, Any] | None = None, form: str = "lambda") -> dict[str, Any]:
    """``form``: ``lambda`` (a timestamp function, a map to tuples, a key function, as users write it) or
    ``column`` (fields named: ``with_timestamp_assigner("ts")``, ``key_by("user_id")``, ``sum("qty")``; so is
    ``column-elements``, run with ``options`` that keep it on the element path)."""
    from engine.runtime.spark.runtime import SparkRuntime

    build = sluice_builder(dataset, window, work_dir, parallelism, splits_dir, options, form)
    env, stream = build()
    job = SparkRuntime(env).start(f"bench-{window}", list(env._sinks), [])
    meter = CpuMeter(spark_jvm_pid()).start()
    threads = JvmThreadCpu(spark_jvm_pid()).start()
    started = time.monotonic()
    job.run()
    wall_s = time.monotonic() - started
    cpu_s = meter.stop()
    thread_s = threads.stop(cpu_s["jvm"])
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
        "jvm_us_per_event_by_thread": per_event_us(thread_s, dataset.events),
    }


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


#: issue 16's grid (``--grid``) and the CI smoke run's tiny one (``--smoke``): events, keys, skews, files
GRID = {"events": "2000000,10000000", "keys": "1000,100000,1000000", "skew": "0,1.1", "files": 20}
SMOKE = {"events": "4000", "keys": "30,2000", "skew": "0,1.1", "files": 4}
#: what one cell runs on its own (no --grid / --smoke)
SINGLE = {"events": "200000", "keys": "10000", "skew": "0", "files": 10}
WATERMARK_DELAY_MS = 10_000  # both sides: Sluice's bounded out-of-orderness, native's withWatermark
WINDOW_MS = {"tumbling": (60_000, 60_000), "sliding": (60_000, 10_000)}
_KINDS = ("jvm", "python_workers", "driver_python", "total")


def _ints(text: str, name: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",")]
    except ValueError:
        raise ValueError(f"{name} takes comma-separated integers; got {text!r}") from None
    if not values or min(values) < 1:
        raise ValueError(f"{name} values must be >= 1; got {text!r}")
    return values


def _floats(text: str, name: str) -> list[float]:
    try:
        values = [float(x) for x in text.split(",")]
    except ValueError:
        raise ValueError(f"{name} takes comma-separated numbers; got {text!r}") from None
    if not values or min(values) < 0:
        raise ValueError(f"{name} values must be >= 0; got {text!r}")
    return values


# ---- correctness (--smoke) ------------------------------------------------------------------------------------


def _read_dir(path: str) -> Any:
    import pyarrow.dataset as ds

    return ds.dataset(path, format="parquet").to_table()  # skips _staging / .crc files (ignore_prefixes)


def _epoch_ms(column: Any) -> list[int]:
    """A timestamp column (whatever unit its writer chose: Spark writes microseconds) as epoch milliseconds."""
    import pyarrow as pa

    return column.cast(pa.timestamp("ms", tz="UTC")).cast(pa.int64()).to_pylist()


def expected_window_sums(dataset: Any, window: str) -> dict[tuple[str, int], int]:
    """(user, window start ms) -> the window's sum of qty, every window that holds an event: a numpy fold of
    the input files, independent of both engines."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.concat_tables([pq.read_table(f, columns=["user_id", "qty", "ts"]) for f in dataset.files])
    ts = np.array(_epoch_ms(table.column("ts")), np.int64)
    size, slide = WINDOW_MS[window]
    last = ts - ts % slide
    starts = np.concatenate([last - k * slide for k in range(size // slide)])
    reps = size // slide
    folded = pa.table({"u": pa.concat_arrays([table.column("user_id").combine_chunks()] * reps),
                       "s": pa.array(starts), "q": pa.array(np.tile(table.column("qty").to_numpy(), reps))}) \
        .group_by(["u", "s"]).aggregate([("q", "sum")])
    return {(u, s): q for u, s, q in zip(*(folded.column(c).to_pylist() for c in ("u", "s", "q_sum")))}


def check_results(dataset: Any, window: str, outputs: dict[str, str],
                  reported: dict[str, int] | None = None) -> dict[str, int]:
    """Assert that every side's output is right (``outputs``: side -> its run's work folder); returns row counts.

    * a Sluice side's output folder holds the rows its job said it wrote (``reported``: side -> ``records_out``);

    * ``column`` rows == ``lambda`` rows, as (user, first element's ts, sum) multisets;
    * each Sluice form's (user, sum) multiset == :func:`expected_window_sums`' (and, tumbling, with the window
      a row's first element falls in: the same window);
    * native's (user, window start, sum) rows are among the expected ones, and hold every expected window that
      ends before native's final watermark (max event time - delay; its append mode never emits the others).
    """
    from collections import Counter


    expected = expected_window_sums(dataset, window)
    size, _ = WINDOW_MS[window]
    counts: dict[str, int] = {}
    sluice: dict[str, Counter] = {}
    for side in ("lambda", "column"):
        if side not in outputs:
            continue
        t = _read_dir(f"{outputs[side]}/sluice-output")
        if side == "lambda":
            users, ts, qty = (t.column(c).to_pylist() for c in ("f0", "f1", "f2"))
        else:
            users, qty = t.column("user_id").to_pylist(), t.column("qty").to_pylist()
            ts = _epoch_ms(t.column("ts"))
        sluice[side] = Counter(zip(users, ts, qty))
        counts[side] = t.num_rows
        if reported is not None and side in reported:
            assert t.num_rows == reported[side], f"{side} form, {window}: the job wrote {reported[side]} rows, " \
                                                 f"its committed output holds {t.num_rows}"
        got = Counter((u, q) for u, _, q in sluice[side].elements())  # with multiplicity: a sliding window's
        # first element is often the first of the next windows too, with the same sum
        want = Counter((u, q) for (u, _), q in expected.items())
        assert got == want, f"{side} form, {window}: (user, sum) rows differ from the fold of the input " \
                            f"(missing {list((want - got).items())[:5]}, extra {list((got - want).items())[:5]})"
        if window == "tumbling":
            placed = Counter((u, t_ - t_ % size, q) for u, t_, q in sluice[side].elements())
            assert placed == Counter((u, s, q) for (u, s), q in expected.items()), \
                f"{side} form, {window}: a sum landed in the wrong window"
    if "lambda" in sluice and "column" in sluice:
        assert sluice["column"] == sluice["lambda"], f"{window}: the column form's rows differ from the lambda form's"
    if "native" in outputs:
        t = _read_dir(f"{outputs['native']}/native-output")
        rows = Counter(zip(t.column("user_id").to_pylist(),
                           _epoch_ms(t.column("window_start")), t.column("qty").to_pylist()))
        counts["native"] = t.num_rows
        extra = [r for r, n in rows.items() if n != 1 or expected.get((r[0], r[1])) != r[2]]
        assert not extra, f"native, {window}: rows that are not the fold of the input: {extra[:5]}"
        import pyarrow.parquet as pq

        max_ts = max(max(_epoch_ms(pq.read_table(f, columns=["ts"]).column(0))) for f in dataset.files)
        final_watermark = int(max_ts) - WATERMARK_DELAY_MS
        due = {(u, s) for (u, s) in expected if s + size < final_watermark}
        missing = due - {(u, s) for u, s, _ in rows}
        assert not missing, f"native, {window}: windows ending before its final watermark not emitted: " \
                            f"{sorted(missing)[:5]}"
        counts["expected_windows"] = len(expected)
    return counts


#: what --sides takes
SIDES = ("native", "lambda", "column", "column-elements", "column-serial", "column-upload", "column-rdd",
         "column-frames", "lambda-rdd", "lambda-frames")


# ---- one cell -------------------------------------------------------------------------------------------------


def _run_side(spark: Any, side: str, dataset: Any, window: str, where: str, parallelism: int,
              splits_dir: str) -> dict[str, Any]:
    if side == "native":
        return asdict(run_native_window_sum(spark, dataset, window=window, sink="parquet", work_dir=where,
                                            watermark_delay=f"{WATERMARK_DELAY_MS // 1000} seconds"))
    options = {"column-elements": {"preaggregation": False}, "column-serial": {"pipeline_epochs": False},
               "column-upload": {"snapshot_in_window_tasks": False}, "column-rdd": {"epoch_shape": "rdd"},
               "column-frames": {"epoch_shape": "dataframe"}, "lambda-rdd": {"epoch_shape": "rdd"},
               "lambda-frames": {"epoch_shape": "dataframe"}}.get(side)
    return run_sluice(dataset, window, where, parallelism, splits_dir, form=side.split("-")[0], options=options)


def warm_up(spark: Any, keys: int, skew: float, *, events: int, files: int, parallelism: int, windows: list[str],
            sides: list[str]) -> None:
    """Run every side once per window on a small data set of the cell's shape, unmeasured.

    Why: the JVM compiles Spark's planner, scheduler and shuffle code for minutes (measured with JFR on a 2-core
    host: its compiler threads took 1.3 cores through a whole first run), so whichever side ran first in a fresh
    JVM paid that for the other.  With ``--repeat 1`` that was always native, on the first window of each cell."""
    with tempfile.TemporaryDirectory(prefix="sluice-bench-warmup-") as work:
        dataset = generate_purchase_events(f"{work}/data", events=events, keys=keys, files=files, skew=skew)
        splits_dir = interleave_into_splits(dataset, f"{work}/splits", parallelism)
        for window in windows:
            for side in sides:
                _run_side(spark, side, dataset, window, f"{work}/{side}-{window}", parallelism, splits_dir)


def run_cell(spark: Any, events: int, keys: int, skew: float, *, files: int, parallelism: int, windows: list[str],
             sides: list[str], repeat: int, check: bool = False, warmup_events: int = 0) -> dict[str, Any]:
    """One cell of the grid in this process: the data set written once, every side ``repeat`` times per window,
    taking turns on the same session; medians per side.  ``check``: :func:`check_results` on the first run.
    ``warmup_events``: first :func:`warm_up` on that many events (0: none)."""
    results: dict[str, Any] = {"events": events, "keys": keys, "skew": skew, "files": files,
                               "warmup_events": warmup_events}
    jvm = spark_jvm_pid()
    if warmup_events:
        warm_up(spark, min(keys, warmup_events), skew, events=warmup_events, files=files, parallelism=parallelism,
                windows=windows, sides=sides)
    with tempfile.TemporaryDirectory(prefix="sluice-bench-") as work:
        dataset = generate_purchase_events(f"{work}/data", events=events, keys=keys, files=files, skew=skew)
        splits_dir = interleave_into_splits(dataset, f"{work}/splits", parallelism)
        for window in windows:
            runs: dict[str, list[dict[str, Any]]] = {side: [] for side in sides}
            for run in range(repeat):
                order = sides[run % len(sides):] + sides[:run % len(sides)]  # each side leads some run
                for side in order:
                    where = f"{work}/{side}-{window}-{run}"
                    with PeakTreeRss(jvm) as peak:
                        r = _run_side(spark, side, dataset, window, where, parallelism, splits_dir)
                    r["peak_tree_rss_mb"] = peak.mb
                    runs[side].append(r)
                if check and run == 0:
                    results.setdefault("checked_rows", {})[window] = check_results(
                        dataset, window, {s: f"{work}/{s}-{window}-0" for s in sides if s != "column-elements"},
                        {s: runs[s][0]["output_rows"] for s in sides if s != "native"})
                print(f"{events:,} events {keys:,} keys skew {skew} {window} run {run + 1}/{repeat}: " + ", ".join(
                    f"{side} {runs[side][-1]['events_per_s']:,.0f} ev/s" for side in sides), flush=True)
            cell: dict[str, Any] = {}
            for side in sides:
                cell[side] = {
                    "events_per_s": _median([r["events_per_s"] for r in runs[side]]),
                    "runs_events_per_s": [r["events_per_s"] for r in runs[side]],
                    "peak_tree_rss_mb": max(r["peak_tree_rss_mb"] for r in runs[side]),
                    "cpu_us_per_event": {k: _median([r["cpu_us_per_event"][k] for r in runs[side]]) for k in _KINDS},
                    "jvm_us_per_event_by_thread": {
                        g: _median([r["jvm_us_per_event_by_thread"].get(g, 0.0) for r in runs[side]])
                        for g in sorted({g for r in runs[side] for g in r["jvm_us_per_event_by_thread"]})},
                }
                us = cell[side]["cpu_us_per_event"]
                cell[side]["cpu_us_per_event"]["python"] = round(us["python_workers"] + us["driver_python"], 2)
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
            print(f"{events:,} events {keys:,} keys skew {skew} {window}: " + "; ".join(
                f"{side} median {cell[side]['events_per_s']:,.0f} ev/s"
                + (f" (x{cell[side]['ratio_to_native']} native)" if "ratio_to_native" in cell[side] else "")
                + f", peak RSS {cell[side]['peak_tree_rss_mb']:,.0f} MB"
                + f", CPU us/event JVM {cell[side]['cpu_us_per_event']['jvm']:.2f}"
                + " (" + ", ".join(f"{g} {us:.2f}" for g, us in cell[side]["jvm_us_per_event_by_thread"].items()) + ")"
                + f" / Python {cell[side]['cpu_us_per_event']['python']:.2f}"
                for side in sides), flush=True)
            results[window] = cell
    return results


# ---- the grid: one child process per cell ----------------------------------------------------------------------


def run_grid_cell(events: int, keys: int, skew: float, args: argparse.Namespace) -> dict[str, Any]:
    """``python -m bench.bench_spark`` for one cell, in a child process (its own JVM); its last line read back."""
    command = [sys.executable, "-m", "bench.bench_spark", "--events", str(events), "--keys", str(keys),
               "--skew", str(skew), "--files", str(args.files), "--repeat", str(args.repeat),
               "--windows", args.windows, "--sides", args.sides, "--driver-memory", args.driver_memory,
               "--parallelism", str(args.parallelism), "--warmup-events", str(args.warmup_events)]
    started = time.monotonic()
    try:
        done = subprocess.run(command, cwd=Path(__file__).resolve().parent.parent, capture_output=True, text=True,
                              timeout=args.cell_timeout_s)
    except subprocess.TimeoutExpired as e:
        return {"events": events, "keys": keys, "skew": skew, "exit_code": None, "timed_out": True,
                "output_tail": str(e.stdout or "")[-3000:]}
    cell: dict[str, Any] = {"events": events, "keys": keys, "skew": skew,
                            "wall_s": round(time.monotonic() - started, 1), "exit_code": done.returncode}
    lines = done.stdout.strip().splitlines()
    if done.returncode == 0 and lines:
        cell["result"] = json.loads(lines[-1])
    else:
        cell["output_tail"] = (done.stdout + done.stderr)[-3000:]
        cell["out_of_memory"] = "OutOfMemoryError" in done.stdout + done.stderr
    return cell


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--grid", action="store_true", help="issue 16's grid, one child process per cell")
    mode.add_argument("--smoke", action="store_true",
                      help="a tiny grid in this process, asserting correctness only (CI)")
    parser.add_argument("--events", help=f"events (a list with --grid; default {SINGLE['events']}, "
                                         f"grid {GRID['events']})")
    parser.add_argument("--keys", help=f"distinct keys (a list with --grid; default {SINGLE['keys']}, "
                                       f"grid {GRID['keys']})")
    parser.add_argument("--skew", help="Zipf exponent of the key distribution, 0: uniform (a list with --grid; "
                                       f"grid {GRID['skew']})")
    parser.add_argument("--files", type=int, help="input files = native micro-batches = Sluice epochs")
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--windows", default="tumbling,sliding")
    parser.add_argument("--sides", default="native,lambda,column",
                        help="what runs, taking turns: native Spark, Sluice's lambda form, Sluice's column form "
                             "(on the column path where its shape allows), column-elements: the column form with "
                             "every window on the element path (runtime option preaggregation=False), "
                             "column-serial: the column form without pipelined epochs (runtime option "
                             "pipeline_epochs=False), column-upload: the column form with checkpoints written by an "
                             "upload job (runtime option snapshot_in_window_tasks=False); column-rdd, lambda-rdd, "
                             "column-frames, lambda-frames: a form with each epoch's stages on RDDs or on DataFrames "
                             "(runtime option epoch_shape, engine/runtime/spark/epoch_rdds.py)")
    parser.add_argument("--repeat", type=int, help="runs per side and window, the sides taking turns (medians "
                                                   "reported); default 3, 1 with --smoke")
    parser.add_argument("--driver-memory", help="the one local JVM every side of a cell shares (the issue's "
                                                "'normal heap'); default 4g, 1g with --smoke")
    parser.add_argument("--warmup-events", type=int,
                        help="before a cell's measured runs, every side runs once on this many events of the cell's "
                             "shape, unmeasured (the JVM's warm-up; 0: none); default 200000, 0 with --smoke")
    parser.add_argument("--cell-timeout-s", type=float, default=4 * 3600, help="--grid: a cell's time limit")
    args = parser.parse_args(argv)
    defaults = SMOKE if args.smoke else GRID if args.grid else SINGLE
    for name in ("events", "keys", "skew", "files"):
        if getattr(args, name) is None:
            setattr(args, name, defaults[name])
    args.repeat = args.repeat if args.repeat is not None else 1 if args.smoke else 3
    args.warmup_events = args.warmup_events if args.warmup_events is not None else 0 if args.smoke else 200_000
    if args.warmup_events < 0:
        parser.error("--warmup-events must be 0 or more")
    args.driver_memory = args.driver_memory or ("1g" if args.smoke else "4g")
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    if args.files < 1:
        parser.error("--files must be at least 1")
    sides = args.sides.split(",")
    if not sides or not set(sides) <= set(SIDES):
        parser.error(f"--sides takes {', '.join(SIDES)}")
    windows = args.windows.split(",")
    if not set(windows) <= set(WINDOW_MS):
        parser.error("--windows takes tumbling and/or sliding")
    try:
        grid = list(itertools.product(_ints(str(args.events), "--events"), _ints(str(args.keys), "--keys"),
                                      _floats(str(args.skew), "--skew")))
    except ValueError as e:
        parser.error(str(e))
    if len(grid) > 1 and not (args.grid or args.smoke):
        parser.error("lists of --events, --keys or --skew need --grid (or --smoke)")

    if args.grid:
        cells = []
        for events, keys, skew in grid:
            cell = run_grid_cell(events, keys, skew, args)
            cells.append(cell)
            if "result" not in cell:
                print(f"{events:,} events {keys:,} keys skew {skew}: FAILED (exit {cell['exit_code']}"
                      f"{', OutOfMemoryError' if cell.get('out_of_memory') else ''}"
                      f"{', timed out' if cell.get('timed_out') else ''})", flush=True)
                continue
            for window in windows:
                print(f"{events:,} events {keys:,} keys skew {skew} {window}: " + "; ".join(
                    f"{side} {f['events_per_s']:,.0f} ev/s"
                    + (f" x{f['ratio_to_native']}" if "ratio_to_native" in f else "")
                    + f" {f['peak_tree_rss_mb']:,.0f} MB, us/event JVM {f['cpu_us_per_event']['jvm']:.2f}"
                      f" Python {f['cpu_us_per_event']['python']:.2f}"
                    for side, f in cell["result"]["cells"][0][window].items()), flush=True)
        print_result_line({"benchmark": "bench_spark_grid", "driver_memory": args.driver_memory,
                           "repeat": args.repeat, "sides": sides, "cells": cells})
        return

    from engine.runtime.spark.session import get_or_create_spark, stop_spark

    spark = get_or_create_spark("local[2]", app_name="sluice-bench", conf=bench_spark_conf(args.parallelism),
                                shuffle_partitions=args.parallelism, driver_memory=args.driver_memory)
    results: dict[str, Any] = {"benchmark": "bench_spark_smoke" if args.smoke else "bench_spark",
                               "driver_memory": args.driver_memory, "repeat": args.repeat, "sides": sides, "cells": []}
    try:
        for events, keys, skew in grid:
            results["cells"].append(run_cell(spark, events, keys, skew, files=args.files,
                                             parallelism=args.parallelism, windows=windows, sides=sides,
                                             repeat=args.repeat, check=args.smoke,
                                             warmup_events=args.warmup_events))
        results["peak_rss_mb"] = {"jvm": process_peak_rss_mb(spark_jvm_pid() or -1), "driver_python": peak_rss_mb()}
    finally:
        stop_spark(spark)
    print_result_line(results)


if __name__ == "__main__":
    main()
