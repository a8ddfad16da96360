"""A probe, not Sluice: how fast could a data path of long-running Spark tasks run issue 16's job here?

Why it exists: Sluice runs every epoch as Spark jobs (engine/runtime/spark/job.py), and on this 2-core host a job
costs a few hundred milliseconds of planning, scheduling and Python task start-up whatever its data (measured:
two near-empty jobs, 400-500 ms an epoch; one pipelined job, about 100 ms less).  At 20 epochs that floor alone
is 8-10 s, while issue 16's Flink SQL target (470k events/s on 5M events) leaves 10.6 s for everything.  A design
that reaches it must not pay a Spark job per epoch: Flink's own shape, tasks that live for the whole run and
exchange records among themselves, which Spark offers as barrier execution mode (all tasks of a stage start
together, ``BarrierTaskContext.barrier()`` and ``allGather`` synchronise them).

What it runs: one barrier stage of ``parallelism`` tasks, each the reading task of one interleaved split and the
window subtask of half the keys.  Per epoch each task reads its next slice (pyarrow), folds it per (key, window)
with Arrow's hash group-by, hands each partial to the task that owns its key (Arrow IPC files in a shared folder:
one local machine), waits at the barrier, merges what it received into its window table, takes the epoch's
watermark from every task's (``allGather``), fires the windows that ended (Parquet) and, at every epoch, writes its
window table as a checkpoint file with its sha256.  Tumbling windows, ``sum``; no late data handling, no first
element kept, no exactly-once commit, no restore: an upper bound for the data work, which the real design would
approach, not a result of Sluice.

Usage: ``python -m bench.probe_long_running_tasks --events 5000000 --keys 100000 --files 20``; last line JSON.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

WINDOW_MS = 60_000
DELAY_MS = 10_000


def _task(splits_dir: str, exchange: str, out_dir: str, epochs: int, parallelism: int):
    def run(index_iter: Any) -> Any:
        import hashlib

        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq
        from pyspark import BarrierTaskContext

        ctx = BarrierTaskContext.get()
        me = ctx.partitionId()
        split = pq.read_table(f"{splits_dir}/split-{me:03d}.parquet", columns=["user_id", "ts", "qty"])
        ts_all = split.column("ts").cast(pa.int64()).to_numpy()
        per = -(-split.num_rows // epochs)
        owner_of: dict[Any, int] = {}
        state = None
        fired_rows = 0
        for epoch in range(epochs):
            part = split.slice(epoch * per, per)
            ts = ts_all[epoch * per:(epoch + 1) * per]
            start = ts - ts % WINDOW_MS
            folded = pa.table({"k": part.column("user_id"), "s": pa.array(start), "q": part.column("qty")}) \
                .group_by(["k", "s"], use_threads=False).aggregate([("q", "sum")])
            keys = folded.column("k").to_pylist()
            owners = np.fromiter((owner_of.setdefault(k, hash(k) % parallelism) for k in keys), np.int64, len(keys))
            for dest in range(parallelism):
                piece = folded.filter(pa.array(owners == dest))
                with pa.OSFile(f"{exchange}/e{epoch}-{me}-{dest}.arrow", "wb") as sink:
                    with pa.ipc.new_file(sink, piece.schema) as writer:
                        writer.write_table(piece)
            mine = int(ts.max()) - DELAY_MS if len(ts) else -(2 ** 63)
            watermark = min(int(w) for w in ctx.allGather(str(mine)))  # also the barrier: every file is written
            got = [pa.ipc.open_file(f"{exchange}/e{epoch}-{src}-{me}.arrow").read_all() for src in range(parallelism)]
            merged = pa.concat_tables(got + ([state] if state is not None else []))
            state = merged.group_by(["k", "s"], use_threads=False).aggregate([("q_sum", "sum")]) \
                .rename_columns(["k", "s", "q_sum"])
            due = pc.less_equal(pc.add(state.column("s"), WINDOW_MS - 1), watermark)
            fired = state.filter(due)
            state = state.filter(pc.invert(due))
            if fired.num_rows:
                pq.write_table(fired, f"{out_dir}/e{epoch}-{me}.parquet")
                fired_rows += fired.num_rows
            sink = pa.BufferOutputStream()
            pq.write_table(state, sink)
            data = sink.getvalue()
            hashlib.sha256(data).hexdigest()
            with open(f"{out_dir}/chk-{epoch}-{me}.parquet", "wb") as fh:
                fh.write(data)
        yield fired_rows + (state.num_rows if state is not None else 0)

    return run


def _check(dataset: Any, out: Path, epochs: int) -> None:
    """The windows fired plus those in the last checkpoint are the input's tumbling sums (bench/bench_spark.py
    ``expected_window_sums``, a numpy fold): the probe did the job's work, not less."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from bench.bench_spark import expected_window_sums

    files = sorted(out.glob("e*.parquet")) + sorted(out.glob(f"chk-{epochs - 1}-*.parquet"))
    table = pa.concat_tables([pq.read_table(f) for f in files])
    got: dict[tuple[str, int], int] = {}
    for k, start, q in zip(*(table.column(c).to_pylist() for c in ("k", "s", "q_sum"))):
        assert (k, start) not in got, f"window {(k, start)} fired twice"
        got[(k, start)] = q
    assert got == expected_window_sums(dataset, "tumbling"), "the probe's window sums differ from the input's"


def main(argv: list[str] | None = None) -> None:
    from bench.bench_spark_native import bench_spark_conf
    from bench.common import (
        CpuMeter,
        generate_purchase_events,
        interleave_into_splits,
        per_event_us,
        print_result_line,
        spark_jvm_pid,
    )
    from engine.runtime.spark.session import get_or_create_spark

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=5_000_000)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--files", type=int, default=20, help="epochs")
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args(argv)
    spark = get_or_create_spark(f"local[{args.parallelism}]", app_name="probe", conf=bench_spark_conf(args.parallelism),
                                shuffle_partitions=args.parallelism, driver_memory="4g")
    runs = []
    with tempfile.TemporaryDirectory(prefix="sluice-probe-") as work:
        dataset = generate_purchase_events(f"{work}/data", events=args.events, keys=args.keys, files=args.files)
        splits_dir = interleave_into_splits(dataset, f"{work}/splits", args.parallelism)
        for run in range(args.repeat):
            exchange, out = Path(work, f"x{run}"), Path(work, f"out{run}")
            exchange.mkdir()
            out.mkdir()
            meter = CpuMeter(spark_jvm_pid()).start()
            started = time.monotonic()
            rows = spark.sparkContext.parallelize(range(args.parallelism), args.parallelism).barrier() \
                .mapPartitions(_task(splits_dir, str(exchange), str(out), args.files, args.parallelism)).collect()
            wall = time.monotonic() - started
            cpu = per_event_us(meter.stop(), args.events)
            _check(dataset, out, args.files)
            runs.append({"events_per_s": round(args.events / wall, 1), "windows": sum(rows), "cpu_us_per_event": cpu})
            print(f"run {run + 1}: {args.events / wall:,.0f} events/s, {sum(rows):,} windows, CPU us/event {cpu}",
                  flush=True)
    print_result_line({"benchmark": "probe_long_running_tasks", "events": args.events, "keys": args.keys,
                       "epochs": args.files, "parallelism": args.parallelism, "runs": runs})


if __name__ == "__main__":
    main()
