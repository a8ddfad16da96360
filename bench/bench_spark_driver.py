"""Where the Spark job master's driver thread spends an epoch (issue 16): a timing harness, not a test.

Runs bench/bench_spark.py's Sluice job (the column form by default) on generated purchase events, one epoch at a
time on this thread, and reports per epoch:

* ``build_ms``: driver wall time from the epoch's start until its first Spark job is submitted (building the
  source stage's DataFrame and closure, and what ``collect`` does in the JVM before submitting: analysis,
  optimization, physical planning);
* ``jobs_ms``: wall time inside the epoch's Spark jobs, submission to completion (the read and
  localCheckpoint materialization, then the shuffle and window stages), from Spark's own status store;
* ``driver_ms``: the rest of the epoch's step (``step_ms - jobs_ms``): every DataFrame built, every closure
  pickled, every plan analysed, the driver rows decoded and delivered;
* ``py4j_calls``: the step's round trips to the JVM on this thread (each Java call, and each element of a list
  PySpark sends); a count, so it does not move with the host's load as the times do;
* ``checkpoint_ms``: the epoch boundary's checkpoint part on this thread (``before_epoch`` + ``after_epoch``:
  serving requests, triggering, the barrier's synchronous part; the state upload itself is a background Spark job
  overlapping the next epoch).

It also counts the Python functions the step pickles for Spark (``mapInArrow`` closures: how many per epoch and
how many bytes; the checkpoint upload's, on its own thread, are not counted), and with ``--profile`` runs cProfile
on the driver thread during the steps of the epochs after ``--warmup`` and prints the top costs.  The first epochs
pay the JVM's and the workers' warm-up: the summary's medians leave the first ``--warmup`` epochs out too.  Jobs are
told apart from the checkpoint upload's by a job group set on this thread (cleared at the end).

Usage: ``python -m bench.bench_spark_driver --events 500000 --keys 10000 --files 20 [--window tumbling]
[--form column] [--profile]``; the last line is JSON.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import statistics
import tempfile
import threading
import time
from typing import Any

from bench.bench_spark import sluice_builder
from bench.bench_spark_native import bench_spark_conf
from bench.common import generate_purchase_events, interleave_into_splits, print_result_line

JOB_GROUP = "sluice-driver-harness"


class _PickledFunctions:
    """Counts what PySpark pickles on this thread for a Python function it sends to the JVM
    (``_prepare_for_python_RDD``)."""

    def __init__(self) -> None:
        self.sizes: list[int] = []

    def __enter__(self) -> _PickledFunctions:
        import pyspark.core.rdd as rdd

        self._module = rdd
        self._original = original = rdd._prepare_for_python_RDD
        sizes = self.sizes

        me = threading.get_ident()

        def counted(sc: Any, command: Any) -> Any:
            from pyspark.serializers import CloudPickleSerializer

            if threading.get_ident() == me:  # not the checkpoint upload's (its own thread)
                sizes.append(len(CloudPickleSerializer().dumps(command)))  # before any broadcast of a big one
            return original(sc, command)

        rdd._prepare_for_python_RDD = counted
        return self

    def __exit__(self, *exc: Any) -> None:
        self._module._prepare_for_python_RDD = self._original

    def take(self) -> list[int]:
        out = list(self.sizes)
        self.sizes.clear()
        return out


class _Py4jCalls:
    """Counts this thread's py4j round trips to the JVM (each Java call, attribute and list element sent)."""

    def __init__(self) -> None:
        self.count = 0

    def __enter__(self) -> _Py4jCalls:
        from py4j.clientserver import ClientServerConnection

        self._original = original = ClientServerConnection.send_command
        me = threading.get_ident()
        counter = self

        def counted(connection: Any, command: str) -> Any:
            if threading.get_ident() == me:
                counter.count += 1
            return original(connection, command)

        ClientServerConnection.send_command = counted
        return self

    def __exit__(self, *exc: Any) -> None:
        from py4j.clientserver import ClientServerConnection

        ClientServerConnection.send_command = self._original

    def take(self) -> int:
        n, self.count = self.count, 0
        return n


def _job_times(spark: Any, seen: set[int]) -> list[tuple[int, int]]:
    """(submission ms, completion ms) of this thread's job group's jobs not seen yet, oldest first."""
    store = spark.sparkContext._jsc.sc().statusStore()
    out = []
    for job_id in sorted(spark.sparkContext.statusTracker().getJobIdsForGroup(JOB_GROUP)):
        if job_id in seen:
            continue
        data = store.job(job_id)
        submitted, completed = data.submissionTime(), data.completionTime()
        if submitted.isEmpty() or completed.isEmpty():
            continue
        seen.add(job_id)
        out.append((submitted.get().getTime(), completed.get().getTime()))
    return out


def run(spark: Any, args: argparse.Namespace) -> dict[str, Any]:
    """Generate the events, run the job on ``spark`` measuring each epoch; the result (last line of ``main``)."""
    profiler = cProfile.Profile() if args.profile else None
    with tempfile.TemporaryDirectory(prefix="sluice-bench-driver-") as work:
        dataset = generate_purchase_events(f"{work}/data", events=args.events, keys=args.keys, files=args.files,
                                           skew=args.skew)
        splits_dir = interleave_into_splits(dataset, f"{work}/splits", args.parallelism)
        build = sluice_builder(dataset, args.window, f"{work}/run", args.parallelism, splits_dir, form=args.form,
                               options={"preaggregation": False} if args.form == "column-elements" else None)
        env, _ = build()
        try:
            return _measure(spark, env, args, profiler)
        finally:  # the session's next jobs on this thread are no harness epochs
            spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
            spark.sparkContext.setLocalProperty("spark.job.description", None)


def _measure(spark: Any, env: Any, args: argparse.Namespace, profiler: cProfile.Profile | None) -> dict[str, Any]:
    """Run the job one epoch at a time on this thread, timing each (module docstring)."""
    from engine.runtime.spark.runtime import SparkRuntime

    epochs: list[dict[str, Any]] = []
    spark.sparkContext.setJobGroup(JOB_GROUP, "Sluice epochs (bench_spark_driver)")
    seen: set[int] = set(spark.sparkContext.statusTracker().getJobIdsForGroup(JOB_GROUP))
    with _PickledFunctions() as pickled, _Py4jCalls() as py4j_calls:
        job = SparkRuntime(env).start(f"bench-driver-{args.window}", list(env._sinks), [])
        _job_times(spark, seen)  # jobs of the job's start (partition preimages): not an epoch's
        pickled.take()
        py4j_calls.take()
        started = time.monotonic()
        cp = job.checkpointing
        while not job.finished:
            t0 = time.monotonic()
            if cp.before_epoch():
                break
            t1 = time.monotonic()
            wall_start_ms = time.time() * 1000
            py4j_calls.take()  # the harness's own calls (the status store's) are not the step's
            profiled = profiler is not None and len(epochs) >= args.warmup  # warm-up epochs left out
            if profiled:
                profiler.enable()
            job.step()
            if profiled:
                profiler.disable()
            t2 = time.monotonic()
            round_trips = py4j_calls.take()
            cp.after_epoch()
            t3 = time.monotonic()
            jobs = _job_times(spark, seen)
            sizes = pickled.take()
            step_ms = (t2 - t1) * 1000
            jobs_ms = sum(done - sub for sub, done in jobs)
            epochs.append({
                "epoch": job.epoch, "step_ms": round(step_ms, 1),
                "build_ms": round(jobs[0][0] - wall_start_ms, 1) if jobs else None,
                "jobs_ms": jobs_ms, "driver_ms": round(step_ms - jobs_ms, 1), "spark_jobs": len(jobs),
                "checkpoint_ms": round((t1 - t0 + t3 - t2) * 1000, 1),
                "pickled_functions": len(sizes), "pickled_bytes": sum(sizes), "py4j_calls": round_trips})
            print("epoch {epoch}: step {step_ms:.0f} ms = jobs {jobs_ms:.0f} ({spark_jobs}) + driver "
                  "{driver_ms:.0f} (first job after {build_ms} ms; {py4j_calls} py4j calls); "
                  "checkpoint {checkpoint_ms:.0f} ms; {pickled_functions} functions pickled, {pickled_bytes:,} "
                  "bytes".format(**epochs[-1]), flush=True)
        cp.on_job_end()
        wall_s = time.monotonic() - started
    steady = epochs[args.warmup:] or epochs
    summary = {k: round(statistics.median(e[k] for e in steady if e[k] is not None), 1)
               for k in ("step_ms", "build_ms", "jobs_ms", "driver_ms", "checkpoint_ms", "pickled_functions",
                         "pickled_bytes", "py4j_calls") if any(e[k] is not None for e in steady)}
    result = {"benchmark": "bench_spark_driver", "events": args.events, "keys": args.keys, "files": args.files,
              "skew": args.skew, "window": args.window, "form": args.form, "epochs": len(epochs),
              "wall_s": round(wall_s, 2), "events_per_s": round(args.events / wall_s, 1),
              "median_per_epoch": summary, "per_epoch": epochs}
    if profiler is not None:
        result["profile_top"] = _profile_top(profiler, args.top)
    return result


def _profile_top(profiler: cProfile.Profile, top: int) -> list[dict[str, Any]]:
    """The ``top`` functions by cumulative time on the driver thread, printed and returned."""
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("cumulative").print_stats(top)
    print(out.getvalue(), flush=True)
    rows = []
    for (path, line, name), (_, calls, tottime, cumtime, _) in sorted(
            stats.stats.items(), key=lambda kv: -kv[1][3])[:top]:
        rows.append({"function": f"{path}:{line}({name})", "calls": calls, "tottime_s": round(tottime, 3),
                     "cumtime_s": round(cumtime, 3)})
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=500_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--files", type=int, default=20, help="input files = epochs")
    parser.add_argument("--skew", type=float, default=0.0)
    parser.add_argument("--window", choices=("tumbling", "sliding"), default="tumbling")
    parser.add_argument("--form", choices=("column", "lambda", "column-elements"), default="column")
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--driver-memory", default="4g")
    parser.add_argument("--warmup", type=int, default=2, help="epochs left out of the medians")
    parser.add_argument("--profile", action="store_true",
                        help="cProfile the driver thread's epoch steps (after --warmup)")
    parser.add_argument("--top", type=int, default=40, help="--profile: functions listed")
    args = parser.parse_args(argv)
    for name in ("events", "keys", "files", "parallelism"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")
    if args.warmup < 0:
        parser.error("--warmup must be at least 0")

    from engine.runtime.spark.session import get_or_create_spark, stop_spark

    spark = get_or_create_spark("local[2]", app_name="sluice-bench-driver", conf=bench_spark_conf(args.parallelism),
                                shuffle_partitions=args.parallelism, driver_memory=args.driver_memory)
    try:
        result = run(spark, args)
    finally:
        stop_spark(spark)
    print_result_line(result)


if __name__ == "__main__":
    main()
