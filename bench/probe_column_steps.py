"""Python time of each column fold step of an epoch, outside Spark (issue 16): a probe, not a test.

Runs what a column fold window's Spark tasks run for bench/bench_spark.py's column form, on generated reads in
memory: the reading task's :func:`engine.runtime.spark.column_path.read_columns` (two splits, each read once an
epoch), then per window subtask the partials' blobs to tables (``blob_tables``), their merge in (key group,
channel, sequence) order (``concat_partials``), ``fold``, the fired windows' columns written as Parquet to memory
(what the staged sink writes) and the state row out and back.  No JVM, no Parquet read, no checkpoint upload: what
it reports is the floor of the Python workers' CPU per event on this data, beside bench_spark.py's measured
``python_workers`` figure.

Usage: ``python -m bench.probe_column_steps [--keys 100000] [--per-split 250000] [--window tumbling]
[--epochs 4]``; the last line is JSON (seconds and microseconds per event of each step).
"""

from __future__ import annotations

import argparse
import io
import json
import time
import types

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from engine.runtime.spark import column_fold, column_path
from engine.runtime.spark.preaggregation import ColumnPath, PreAggregation
from engine.runtime.spark.rows import RowBuffer

_T0 = 1_704_067_200_000
_EPOCH_SPAN_MS = 360_000  # one epoch's event time: a 5M-event hour in 10 epochs


class _Stage:
    """The source stage's split watermark hook, which the probe does not judge."""

    def on_highest_timestamp(self, split_id: object, timestamp: int) -> bool:
        return True


def run(keys: int, per_split: int, window: str, epochs: int, seed: int = 1) -> dict:
    size, slide = (60_000, 60_000) if window == "tumbling" else (60_000, 10_000)
    rng = np.random.default_rng(seed)
    names = pa.array([f"user-{i}" for i in range(keys)])
    pre = PreAggregation("sum", "qty", size, slide, 0, ColumnPath(0, 1, "ts", "user_id", 2), True)
    seconds: dict[str, float] = {}
    state: dict[int, pa.Table | None] = {0: None, 1: None}
    rows_out = {"partials": 0, "fired": 0}

    def timed(step: str, f, *args, **kwargs):
        start = time.perf_counter()
        out = f(*args, **kwargs)
        seconds[step] = seconds.get(step, 0.0) + time.perf_counter() - start
        return out

    for epoch in range(epochs):
        base = _T0 + epoch * _EPOCH_SPAN_MS
        blobs: dict[int, list[tuple[bytes, str]]] = {0: [], 1: []}
        for split in range(2):
            ts = base + np.sort(rng.integers(0, _EPOCH_SPAN_MS, per_split)) - rng.integers(0, 4_000, per_split)
            ids = pa.array(rng.integers(0, keys, per_split), pa.int32())
            batch = pa.RecordBatch.from_pydict({
                "user_id": pa.DictionaryArray.from_arrays(ids, names).dictionary_decode(),
                "qty": pa.array(rng.integers(1, 11, per_split)),
                "price": pa.array(np.round(rng.uniform(1, 100, per_split), 2)),
                "ts": pa.array(ts, pa.timestamp("ms", tz="UTC"))})
            router = types.SimpleNamespace(sequence=epoch * 10**7, rows=RowBuffer(), channel=f"split-{split}",
                                           max_parallelism=128, received={}, watermark_before=base - 5_000)
            if not timed("read_columns", column_path.read_columns, batch, pre, 5, router, _Stage(), split):
                raise AssertionError("the probe's reads must take the column path")
            out = router.rows.take()
            for kg, blob, channel in zip(out.column("_kg").to_pylist(), out.column("_blob").to_pylist(),
                                         out.column("_split").to_pylist()):
                blobs[0 if kg < 64 else 1].append((blob, channel))
        for sub in (0, 1):
            parts = timed("blob_tables", column_fold.blob_tables, [b for b, _ in blobs[sub]],
                          [c for _, c in blobs[sub]])
            partials = timed("concat_partials", column_fold.concat_partials, parts)
            current = state[sub]
            if current is None:
                current = column_fold.empty_state(partials.schema.field("_record").type)
            before = base - 5_000
            fired, kept, _ = timed("fold", column_fold.fold, current, partials, kind="sum", size=size, slide=slide,
                                   offset=0, epoch=epoch, watermark_before=before,
                                   watermark_after=before + _EPOCH_SPAN_MS)
            results = timed("result_columns", column_fold.result_columns, fired, "qty")
            timed("sink_parquet", pq.write_table, results, io.BytesIO())
            header, blob = timed("state_row", column_fold.state_row, kept, watermark=before + _EPOCH_SPAN_MS)
            state[sub], _ = timed("read_state_row", column_fold.read_state_row, header, blob)
            rows_out["partials"] += partials.num_rows
            rows_out["fired"] += fired.num_rows
    events = epochs * 2 * per_split
    return {"probe": "probe_column_steps", "keys": keys, "per_split": per_split, "window": window, "epochs": epochs,
            "events": events, **rows_out, "total_us_per_event": round(sum(seconds.values()) / events * 1e6, 3),
            "steps": {k: {"s": round(v, 3), "us_per_event": round(v / events * 1e6, 3)}
                      for k, v in sorted(seconds.items(), key=lambda kv: -kv[1])}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--per-split", type=int, default=250_000, help="events each of the two splits reads an epoch")
    parser.add_argument("--window", choices=("tumbling", "sliding"), default="tumbling")
    parser.add_argument("--epochs", type=int, default=4)
    args = parser.parse_args()
    result = run(args.keys, args.per_split, args.window, args.epochs)
    for step, figures in result["steps"].items():
        print(f"{step:16s} {figures['s']:7.3f} s {figures['us_per_event']:6.3f} us/event")
    print(json.dumps(result, sort_keys=True))


if __name__ == "__main__":
    main()
