"""The column path (engine/runtime/spark/column_path.py) gives the element path's results, snapshots and all.

A column-form job over Parquet files (``with_timestamp_assigner("ts")``, ``key_by("user_id")``,
``sum/min/max("qty")``) is run on Spark with the column path, on Spark with every window on the element
path (``preaggregation=False``), in its lambda form on Spark, and on the local runtime: results and the late
side output must be identical.  Random small jobs: tumbling and sliding windows, few and many keys, string and
integer keys, zoned-datetime and integer timestamps, records out of order with some late ones, parallelism 1
and 2.  Then snapshots: a checkpoint of the element path restores on the column path and the reverse, at the
same and at another parallelism, and the output before plus after equals an uninterrupted run's.
"""

from __future__ import annotations

import datetime
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine import ExternalizedCheckpointRetention
from engine.api.environment import StreamExecutionEnvironment
from engine.api.functions import OutputTag
from engine.api.time import Duration, Time
from engine.graph.plan import build_plan
from engine.runtime.spark.chains import Router, Routes
from engine.runtime.spark.column_path import read_columns
from engine.runtime.spark.preaggregation import ColumnPath, PreAggregation, preaggregation_for
from engine.runtime.spark.rows import RowBuffer
from engine.state.key_groups import key_group_for_encoded_key
from engine.watermarks.strategy import WatermarkStrategy
from engine.windowing.assigners import SlidingEventTimeWindows, TumblingEventTimeWindows
from source_gate import SourceGate

_UTC = datetime.timezone.utc


def _write_events(folder: Path, seed: int, files: int, per_file: int, keys: int, int_keys: bool,
                  datetimes: bool) -> None:
    """``files`` Parquet files of events up to 3 s out of order, a few of them 60-120 s late; ``keys`` keys in
    each file, no key in two files."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for f in range(files):
        t = rng.randrange(0, 3000)
        rows = []
        for i in range(per_file):
            t += rng.randrange(0, 1500)
            # late by far more than an epoch's span of event time (about 45 s): late on either runtime, whose
            # watermarks move at different moments; on time otherwise (never more than the 3 s allowed)
            late = rng.randrange(60_000, 120_000) if t > 80_000 and i % 15 == 0 else rng.randrange(0, 3000)
            ts = max(0, t - late)
            # each file its own keys: which split's record is a window's first is the runtimes' own interleaving
            key = f * keys + rng.randrange(keys)
            rows.append({"user_id": key if int_keys else f"u{key}", "ts": ts, "qty": rng.randrange(-5, 50),
                         "id": f"f{f}-{i}"})
        table = pa.Table.from_pylist(rows)
        if datetimes:
            table = table.set_column(1, "ts", table.column("ts").cast(pa.timestamp("ms", tz="UTC")))
        pq.write_table(table, folder / f"part-{f:02d}.parquet")


def _ts_ms(e, _):
    ts = e["ts"]
    return (ts - datetime.datetime(1970, 1, 1, tzinfo=_UTC)) // datetime.timedelta(milliseconds=1) \
        if isinstance(ts, datetime.datetime) else ts


def _user(e):
    return e["user_id"]


def _env(runtime: str, parallelism: int, options: dict | None = None, storage: str | None = None):
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime(runtime)
    env.set_parallelism(parallelism)
    env.set_max_parallelism(16)
    env.set_runtime_option("epoch_records", 60)
    if storage is not None:
        env.enable_checkpointing(10)
        config = env.get_checkpoint_config()
        config.set_checkpoint_storage_dir(storage)
        config.set_num_retained_checkpoints(2)
        config.set_externalized_checkpoint_retention(ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION)
    for name, value in (options or {}).items():
        env.set_runtime_option(name, value)
    return env


def _job(env, folder: Path, window: str, kind: str, form: str = "column"):
    bounded = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(3))
    events = env.read_files(str(folder), "parquet")
    if form == "column":
        keyed = events.assign_timestamps_and_watermarks(bounded.with_timestamp_assigner("ts")).key_by("user_id")
    else:
        keyed = events.assign_timestamps_and_watermarks(bounded.with_timestamp_assigner(_ts_ms)).key_by(_user)
    assigner = (TumblingEventTimeWindows.of(Time.seconds(5)) if window == "tumbling"
                else SlidingEventTimeWindows.of(Time.seconds(6), Time.seconds(4)))
    late = OutputTag("late")
    windowed = keyed.window(assigner).side_output_late_data(late)
    results = getattr(windowed, kind)("qty")
    return results, results.get_side_output(late)


def _run(folder: Path, window: str, kind: str, runtime: str = "spark", parallelism: int = 2,
         form: str = "column", options: dict | None = None) -> dict:
    env = _env(runtime, parallelism, options)
    results, late = _job(env, folder, window, kind, form)
    collected, _ = env.execute_and_collect_streams({"results": results, "late": late})
    return {name: sorted(values, key=repr) for name, values in collected.items()}


# -- the one predicate -----------------------------------------------------------------------------------------


def test_only_the_column_forms_shape_takes_the_column_path(tmp_path: Path) -> None:
    _write_events(tmp_path / "in", seed=1, files=1, per_file=5, keys=2, int_keys=False, datetimes=True)
    env = _env("spark", 2)
    results, _ = _job(env, tmp_path / "in", "tumbling", "sum")
    plan = build_plan([results._node], 2, 16)
    pre = preaggregation_for(results._node, plan)
    assert pre is not None and pre.column is not None
    assert (pre.kind, pre.field, pre.size, pre.column.ts_field, pre.column.key_field) == ("sum", "qty", 5000, "ts",
                                                                                           "user_id")
    # without the plan (or in the lambda form) a columnar-layout sum is folded by the Router of the reading tasks,
    # not in Spark SQL
    assert preaggregation_for(results._node) == PreAggregation("sum", "qty", 5000, 5000, 0, sql=False)
    lam, _ = _job(_env("spark", 2), tmp_path / "in", "tumbling", "sum", form="lambda")
    pre = preaggregation_for(lam._node, build_plan([lam._node], 2, 16))
    assert pre is not None and pre.column is None and not pre.sql
    # a map between the timestamps and key_by: not the shape
    env = _env("spark", 2)
    mapped = (env.read_files(str(tmp_path / "in"), "parquet")
              .assign_timestamps_and_watermarks(WatermarkStrategy.for_monotonous_timestamps()
                                                .with_timestamp_assigner("ts"))
              .map(lambda e: e).key_by("user_id").window(TumblingEventTimeWindows.of(Time.seconds(5))).max("qty"))
    pre = preaggregation_for(mapped._node, build_plan([mapped._node], 2, 16))
    assert pre is not None and pre.column is None  # min/max still fold in Spark SQL, from the element path


def test_a_read_becomes_one_row_per_key_and_pane_plus_its_late_records() -> None:
    """read_columns on a hand-made batch: the rows it writes, against what the Router writes per record."""
    from engine.clock import ManualClock
    from engine.elements import MIN_WATERMARK
    from engine.operators.base import OperatorContext
    from engine.operators.timestamps_watermarks import SourceTimestampsAndWatermarks

    column = ColumnPath(source=1, timestamps=2, ts_field="ts", key_field="k")
    pre = PreAggregation("sum", "v", 10, 10, 0, column)
    batch = pa.RecordBatch.from_pylist([
        {"k": "a", "ts": 1, "v": 2}, {"k": "b", "ts": 3, "v": 5}, {"k": "a", "ts": 9, "v": 7},
        {"k": "a", "ts": 12, "v": 1}, {"k": "b", "ts": -4, "v": 3}, {"k": "a", "ts": 5, "v": 10}])
    rows = RowBuffer()
    router = Router(Routes(parallelism={7: 2}), rows, OperatorContext("t", 0, 1, 16), "split-0", 16,
                    watermark_before=-1)
    stage = SourceTimestampsAndWatermarks(WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(2))
                                          .with_timestamp_assigner("ts"), ManualClock(0))
    assert read_columns(batch, pre, 7, router, stage, "split-0")
    out = rows.take().to_pylist()
    got = sorted((r["_offset"], r["_key"], r["_ts"], r["_num"], r["_value"] is not None) for r in out)
    # a@[0,10): 2+7+10 at the first (offset 1); b@[0,10): 5; a@[10,20): 1; b@-4 is in [-10,0), behind W=-1: an element
    assert got == [(1, '"a"', 1, 19, True), (2, '"b"', 3, 5, True), (4, '"a"', 12, 1, True),
                   (5, '"b"', -4, None, True)]
    assert router.sequence == 6 and router.received == {(1, None, 2): 6, (2, None, 7): 6}
    # the window's records in, by the subtask of their key group (a: 4 records, b: 2; 16 key groups, 2 subtasks)
    by_subtask: dict[tuple[int, int], int] = {}
    for key, n in (('"a"', 4), ('"b"', 2)):
        at = (7, key_group_for_encoded_key(key, 16) * 2 // 16)
        by_subtask[at] = by_subtask.get(at, 0) + n
    assert router.keyed_in == by_subtask
    stage.on_periodic_emit()
    assert stage.current_watermark == 12 - 2 - 1  # the split's highest timestamp, taken column-wise
    # a float field (or a null, a naive timestamp...) is the element path's: nothing written, nothing changed
    floats = pa.RecordBatch.from_pylist([{"k": "a", "ts": 50, "v": 1.5}])
    assert not read_columns(floats, pre, 7, router, stage, "split-0")
    assert len(rows) == 0 and router.sequence == 6 and stage.current_watermark == 9
    assert MIN_WATERMARK < 0


# -- differential: column path vs element path vs lambda form vs local runtime ---------------------------------

_CASES = [
    # seed, window, kind, keys, int_keys, datetimes, parallelism
    (1, "tumbling", "sum", 3, False, True, 2),
    (2, "sliding", "sum", 40, False, True, 2),
    (3, "tumbling", "min", 40, True, False, 1),
    (4, "sliding", "max", 3, True, True, 2),
]


@pytest.mark.parametrize("seed,window,kind,keys,int_keys,datetimes,parallelism", _CASES)
def test_the_column_path_gives_the_element_paths_results(spark, tmp_path: Path, seed, window, kind, keys, int_keys,
                                                         datetimes, parallelism) -> None:
    folder = tmp_path / "in"
    _write_events(folder, seed=seed, files=2, per_file=150, keys=keys, int_keys=int_keys, datetimes=datetimes)
    column = _run(folder, window, kind, parallelism=parallelism)
    assert column["results"] and column["late"], "the case must have results and late records"
    assert _run(folder, window, kind, parallelism=parallelism, options={"preaggregation": False}) == column
    assert _run(folder, window, kind, runtime="local", parallelism=parallelism) == column
    if seed == 2:
        assert _run(folder, window, kind, parallelism=parallelism, form="lambda") == column


# -- snapshots: element path <-> column path, and rescaled -----------------------------------------------------


def _run_until(folder: Path, storage: str, epochs: int, options: dict):
    from engine.runtime.spark.runtime import SparkRuntime

    env = _env("spark", 2, options, storage)
    results, late = _job(env, folder, "sliding", "sum")
    job = SparkRuntime(env).start("colpath", [], [results._node, late._node])
    for _ in range(epochs):
        assert job.run_epoch()
        job.await_checkpoints()
    return job, results, late


@pytest.mark.parametrize("first,then,parallelism", [
    ({"preaggregation": False}, {}, 2),  # a checkpoint of the element path restores on the column path
    ({}, {"preaggregation": False}, 2),  # and the reverse
    ({}, {}, 3),  # the column path rescaled
])
def test_a_checkpoint_restores_across_the_paths_and_parallelism(spark, tmp_path: Path, first, then,
                                                               parallelism) -> None:
    folder = tmp_path / "in"
    _write_events(folder, seed=7, files=2, per_file=150, keys=6, int_keys=False, datetimes=True)
    golden = _run(folder, "sliding", "sum")
    job, results, late = _run_until(folder, f"file://{tmp_path}/chk", epochs=2, options=first)
    before = {"results": list(job.collected[results._node.id]), "late": list(job.collected.get(late._node.id, []))}
    newest = job.checkpoint_history()[-1]
    job.cancel()
    assert 0 < len(before["results"]) < len(golden["results"])
    after = _run(folder, "sliding", "sum", parallelism=parallelism,
                 options={**then, "from_savepoint": newest.external_pointer})
    assert {k: sorted(before[k] + after[k], key=repr) for k in golden} == golden


def test_a_local_runtime_savepoint_restores_on_the_column_path(spark, tmp_path: Path) -> None:
    from engine.runtime.local.runtime import LocalRuntime

    folder = tmp_path / "in"
    _write_events(folder, seed=8, files=2, per_file=150, keys=6, int_keys=True, datetimes=False)
    golden = _run(folder, "tumbling", "sum")
    env = _env("local", 2, storage=f"file://{tmp_path}/local-chk")
    results, late = _job(env, folder, "tumbling", "sum")
    with SourceGate(after_records=120) as gate:
        client = LocalRuntime(env).submit("colpath", [], [results._node, late._node])
        gate.wait_held()
        savepoint = client.stop_with_savepoint(f"file://{tmp_path}/sp")
        gate.open()
    uri = savepoint.result(timeout=60)
    collected = client.wait(60).collected
    before = {"results": list(collected[results._node.id]), "late": list(collected.get(late._node.id, []))}
    assert 0 < len(before["results"]) < len(golden["results"])
    after = _run(folder, "tumbling", "sum", options={"from_savepoint": uri})
    assert {k: sorted(before[k] + after[k], key=repr) for k in golden} == golden
