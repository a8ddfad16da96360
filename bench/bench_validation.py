"""Validation benchmark (issue 6): GX validation time of 1M and 10M rows of window state, pandas and Spark.

The snapshot is a real one in the stored layout (engine/state/snapshot.py,
engine/timers.py) written through ``CheckpointStorage`` to a local folder, but
generated column-wise rather than by running a job (10M rows through the
operator harness would take far longer than the validation): a tumbling 1 s
event-time window operator, 128 key groups over 4 subtasks, ``rows / 2``
window-contents entries (``windows_per_key`` open windows per key, numeric
accumulators) and as many event-time timers.  "rows" counts both tables, i.e.
every row the validation reads.

Measured: ``validate_snapshot`` end to end (integrity check with sha256 of every
file, reading, computed columns, every GX expectation, results JSON), without
Data Docs rendering (built once per run; reported separately once, with and
without, at the last size).  Wall and driver CPU are both reported, with the
1-minute load average: the machine is shared, so wall time depends on the others.
Target (issue 6): under 30 s for 10M rows.

Figures on this 2-core machine (wall / driver CPU, load average in brackets):

==========  ===================================  ==================================
rows        before (commit 6efa6ce)               after
==========  ===================================  ==================================
1M pandas   2.1 s / 1.9 s                         1.0 s / 1.0 s
10M pandas  31.6 s / 19.3 s [1-5]                 9.0 s / 6.8 s [4]
1M Spark    96 s [7]; 45 s warm [5]               18 s warm, 46 s cold [10]
10M Spark   194 s [9]                             72 s [10]
Data Docs   ~11 s per run (4 frames)              ~0.3 s CPU per run
==========  ===================================  ==================================

Spark's driver CPU stays under 1 s at any size (the files are read and derived in
executors); its wall time is GX's ~22 Spark jobs over the cached frame plus one job
that reads, derives and caches, on 2 cores shared with the driver.

Usage: ``.venv/bin/python bench/bench_validation.py [--rows 1000000 10000000] [--engines pandas spark]
[--spark-max-rows N]``; Spark runs above ``--spark-max-rows`` (default 1M) are skipped unless raised, as
they take minutes on this shared 2-core machine.  The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402

from checkpoints import CheckpointMetadata, CheckpointStorage, OperatorState, OperatorSubtaskState, SnapshotProperties  # noqa: E402
from engine.state.key_groups import key_group_for_encoded_key, key_group_range_for_operator  # noqa: E402
from engine.state.snapshot import state_table_schema  # noqa: E402
from engine.timers import TIMER_SCHEMA_FIELDS  # noqa: E402

MAX_PARALLELISM = 128
PARALLELISM = 4
SIZE_MS = 1000
WINDOWS_PER_KEY = 10
WATERMARK = 50_000


def synthetic_snapshot(root: str, rows: int) -> str:
    """Write a checkpoint with ``rows`` rows of state (half contents, half timers); returns its URI."""
    entries = rows // 2
    num_keys = max(1, entries // WINDOWS_PER_KEY)
    keys = np.array([f'"user-{i}"' for i in range(num_keys)], dtype=object)
    groups = np.fromiter((key_group_for_encoded_key(k, MAX_PARALLELISM) for k in keys), dtype=np.int32, count=num_keys)
    order = np.argsort(groups, kind="stable")
    keys, groups = keys[order], groups[order]
    key_index = np.repeat(np.arange(num_keys), WINDOWS_PER_KEY)[:entries]
    window_no = np.tile(np.arange(WINDOWS_PER_KEY), num_keys)[:entries]
    starts = (WATERMARK // SIZE_MS + 1 + window_no) * SIZE_MS
    values = (key_index % 97 + window_no).astype(np.float64)
    storage = CheckpointStorage(f"file://{root}", "bench-job")
    location = storage.initialize_location(1)
    subtasks = []
    watermarks = {}
    for subtask in range(PARALLELISM):
        r = key_group_range_for_operator(MAX_PARALLELISM, PARALLELISM, subtask)
        mask = (groups[key_index] >= r.start_key_group) & (groups[key_index] <= r.end_key_group)
        kg, k, s, v = groups[key_index][mask], keys[key_index][mask], starts[mask], values[mask]
        namespaces = np.char.add(np.char.add(np.char.add(np.char.add('{"end":', (s + SIZE_MS).astype(str)), ',"start":'),
                                             s.astype(str)), ',"type":"time"}')
        contents = pa.Table.from_arrays([
            pa.array(kg, pa.int32()), pa.array(k, pa.string()), pa.array(namespaces, pa.string()),
            pa.array(s, pa.int64()), pa.array(s + SIZE_MS, pa.int64()),
            pa.array(v.astype(np.int64).astype(str), pa.string()), pa.array(v, pa.float64()),
        ], schema=state_table_schema("aggregating", MAX_PARALLELISM))
        timers = pa.Table.from_arrays([
            pa.array(kg, pa.int32()), pa.array(k, pa.string()), pa.array(namespaces, pa.string()),
            pa.array(s + SIZE_MS - 1, pa.int64()), pa.array(np.full(len(kg), "event_time", dtype=object), pa.string()),
        ], schema=pa.schema(list(TIMER_SCHEMA_FIELDS)))
        files = (location.write_state_file("tumbling", subtask, "keyed.window-contents", contents),
                 location.write_state_file("tumbling", subtask, "timers", timers))
        subtasks.append(OperatorSubtaskState(subtask, (r.start_key_group, r.end_key_group), files))
        watermarks[str(subtask)] = WATERMARK
    config = {"operator_class": "WindowOperator",
              "assigner": {"kind": "tumbling_event_time", "size_ms": SIZE_MS, "slide_ms": SIZE_MS, "offset_ms": 0,
                           "is_event_time": True, "merging": False},
              "trigger": {"kind": "default"}, "evictor": None,
              "function": {"kind": "aggregate", "aggregate": "sum", "field": 1},
              "allowed_lateness_ms": 0, "state_rows": {"window-contents": entries}}
    metadata = CheckpointMetadata(
        job_id="bench-job", checkpoint_id=1, properties=SnapshotProperties.checkpoint(),
        source_positions={"split-0": 1}, watermarks={"operators": {"tumbling": watermarks}},
        operators=(OperatorState("tumbling", "tumbling 1 s", PARALLELISM, MAX_PARALLELISM, config, tuple(subtasks)),),
    )
    return location.finalize(metadata)


def run(rows_list: list[int], engines: list[str], spark_max_rows: int) -> dict:
    from checkpoints.validation import validate_snapshot

    results: dict = {"machine_cores": os.cpu_count(), "runs": []}
    spark = None
    with tempfile.TemporaryDirectory(prefix="sluice-bench-validation-") as tmp:
        for rows in rows_list:
            t0 = time.perf_counter()
            uri = synthetic_snapshot(f"{tmp}/{rows}", rows)
            print(f"wrote {rows} rows in {time.perf_counter() - t0:.1f} s", flush=True)
            for engine in engines:
                if engine == "spark" and rows > spark_max_rows:
                    results["runs"].append({"rows": rows, "engine": engine, "skipped": f"rows > --spark-max-rows"})
                    continue
                if engine == "spark" and spark is None:
                    from engine.runtime.spark.session import get_or_create_spark

                    os.environ["PYTHONPATH"] = os.pathsep.join(
                        p for p in (str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH")) if p)
                    spark = get_or_create_spark("local[2]", app_name="sluice-bench-validation", shuffle_partitions=4,
                                                driver_memory="3g")
                wall, cpu = time.perf_counter(), time.process_time()
                report = validate_snapshot(uri, engine=engine, spark=spark, build_data_docs=False,
                                           data_docs_dir=f"{tmp}/docs")
                entry = {"rows": rows, "engine": engine, "status": report.status,
                         "wall_s": round(time.perf_counter() - wall, 2),
                         "driver_cpu_s": round(time.process_time() - cpu, 2),
                         "load_avg_1m": round(os.getloadavg()[0], 1),
                         "expectations": sum(a.evaluated for a in report.assets)}
                results["runs"].append(entry)
                print(json.dumps(entry), flush=True)
        if rows_list:
            for docs in (False, True):
                wall, cpu = time.perf_counter(), time.process_time()
                validate_snapshot(uri, engine="pandas", build_data_docs=docs, data_docs_dir=f"{tmp}/docs")
                label = "with" if docs else "without"
                results[f"pandas_{label}_data_docs_at_last_size"] = {
                    "wall_s": round(time.perf_counter() - wall, 2), "driver_cpu_s": round(time.process_time() - cpu, 2)}
    if spark is not None:
        from engine.runtime.spark.session import stop_spark

        stop_spark(spark)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--engines", nargs="+", default=["pandas", "spark"], choices=["pandas", "spark"])
    parser.add_argument("--spark-max-rows", type=int, default=1_000_000)
    args = parser.parse_args()
    print(json.dumps(run(args.rows, args.engines, args.spark_max_rows)))


if __name__ == "__main__":
    main()
