"""The column fold (engine/runtime/spark/column_fold.py) on Spark gives the operator's results, snapshots and all.

A column-form job over Parquet files (``with_timestamp_assigner("ts")``, ``key_by("user_id")``,
``sum/min/max("qty")``, no late side output, so its window folds as Arrow) runs on Spark with the fold, on Spark
with the window stage's operator (``column_fold=False``) and on the local runtime (the lambda form's results are the
operator's: tests/runtime/spark/test_spark_column_path.py);
the results (collected in order, and written by an exactly-once Parquet ``write_files`` sink) and the late records
dropped must be the same.  Then snapshots: a checkpoint taken with the fold restores with the operator, on the local
runtime and with the fold at another parallelism, and the reverse; the output before plus after equals an
uninterrupted run's.  A read the columns cannot take (a null qty) sends its records through the operator for
that epoch, and the fold takes over again after it.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from long_tests import long_tests
from test_spark_column_path import _env, _write_events

from engine.api.time import Duration, Time
from engine.graph.plan import build_plan
from engine.runtime.spark.preaggregation import preaggregation_for
from engine.watermarks.strategy import WatermarkStrategy
from engine.windowing.assigners import SlidingEventTimeWindows, TumblingEventTimeWindows


def _job(env, folder: Path, window: str, kind: str):
    bounded = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(3))
    events = env.read_files(str(folder), "parquet")
    keyed = events.assign_timestamps_and_watermarks(bounded.with_timestamp_assigner("ts")).key_by("user_id")
    assigner = (TumblingEventTimeWindows.of(Time.seconds(5)) if window == "tumbling"
                else SlidingEventTimeWindows.of(Time.seconds(6), Time.seconds(4)))
    return getattr(keyed.window(assigner), kind)("qty")


def _run(folder: Path, window: str, kind: str, runtime: str = "spark", parallelism: int = 2,
         options: dict | None = None) -> tuple[list, int]:
    env = _env(runtime, parallelism, options)
    results = _job(env, folder, window, kind)
    collected, result = env.execute_and_collect_streams({"results": results})
    return collected["results"], result.metrics.get("num_late_records_dropped", 0)


def _by_key(values: list) -> dict:
    """Each key's results in order: the order within a key is the runtimes' contract (firing order by window end,
    then registration order); across keys the interleaving of subtasks is not."""
    out: dict = {}
    for v in values:
        out.setdefault(v["user_id"], []).append(v)
    return out


def test_a_column_form_window_without_late_output_folds(spark, tmp_path: Path) -> None:
    _write_events(tmp_path / "in", seed=1, files=1, per_file=5, keys=2, int_keys=False, datetimes=True)
    env = _env("spark", 2)
    results = _job(env, tmp_path / "in", "tumbling", "sum")
    pre = preaggregation_for(results._node, build_plan([results._node], 2, 16))
    assert pre.column is not None and pre.fold
    assert not preaggregation_for(results._node, build_plan([results._node], 2, 16), column_fold=False).fold


_CASES = [
    (1, "tumbling", "sum", 3, False, True, 2),
    (3, "tumbling", "min", 40, True, False, 1),
    (4, "sliding", "max", 3, True, True, 2),
    (5, "sliding", "sum", 7, False, False, 3),
]
# CI's short variant leaves out the slowest case (40 keys, sliding: about 30 s on a loaded 2-core host)
_LONG_CASES = [(2, "sliding", "sum", 40, False, True, 2)]


@pytest.mark.parametrize(("seed", "window", "kind", "keys", "int_keys", "datetimes", "parallelism"),
                         _CASES + (_LONG_CASES if long_tests() else []))
def test_the_fold_gives_the_operators_results(spark, tmp_path: Path, seed: int, window: str, kind: str, keys: int,
                                              int_keys: bool, datetimes: bool, parallelism: int) -> None:
    folder = tmp_path / "in"
    _write_events(folder, seed=seed, files=3, per_file=160, keys=keys, int_keys=int_keys, datetimes=datetimes)
    folded, late = _run(folder, window, kind, parallelism=parallelism)
    operator, operator_late = _run(folder, window, kind, parallelism=parallelism, options={"column_fold": False})
    local, local_late = _run(folder, window, kind, runtime="local", parallelism=parallelism)
    assert folded, "the job fired no window"
    assert late > 0, "the events hold late records: the fold must drop and count them"
    assert _by_key(folded) == _by_key(operator) == _by_key(local)
    assert sorted(map(repr, folded)) == sorted(map(repr, operator))
    assert late == operator_late == local_late


def _write_job(env, folder: Path, out: Path, window: str = "sliding") -> None:
    _job(env, folder, window, "sum").write_files(str(out), "parquet")


def _written(out: Path) -> list[dict]:
    files = sorted(p for p in out.rglob("*.parquet") if "_staging" not in p.parts)
    return [row for f in files for row in pq.read_table(f).to_pylist()]


def test_a_parquet_sink_writes_the_fired_windows_as_the_operator_does(spark, tmp_path: Path) -> None:
    folder = tmp_path / "in"
    _write_events(folder, seed=7, files=2, per_file=90, keys=10, int_keys=False, datetimes=True)
    for name, options in (("fold", {}), ("operator", {"column_fold": False})):
        env = _env("spark", 2, options)
        _write_job(env, folder, tmp_path / name)
        env.execute()
    env = _env("local", 2)
    _write_job(env, folder, tmp_path / "local")
    env.execute()
    fold, operator, local = (_written(tmp_path / n) for n in ("fold", "operator", "local"))
    assert fold and sorted(map(repr, fold)) == sorted(map(repr, operator)) == sorted(map(repr, local))
    fold_schema = pq.read_schema(next(p for p in (tmp_path / "fold").rglob("*.parquet") if "_staging" not in p.parts))
    operator_schema = pq.read_schema(next(p for p in (tmp_path / "operator").rglob("*.parquet")
                                          if "_staging" not in p.parts))
    assert fold_schema.remove_metadata() == operator_schema.remove_metadata()


def test_a_read_the_columns_cannot_take_goes_through_the_operator_for_its_epoch(spark, tmp_path: Path) -> None:
    folder = tmp_path / "in"
    _write_events(folder, seed=8, files=2, per_file=80, keys=6, int_keys=False, datetimes=True)
    # one record's qty is beyond the columns' +-2^31: the read holding it takes the element path and its epoch's
    # window subtask runs the operator; the epochs before and after it fold, their state passing both ways
    path = sorted(folder.glob("*.parquet"))[0]
    table = pq.read_table(path)
    qty = table.column("qty").to_pylist()
    qty[40] = 2**40
    table = table.set_column(table.schema.get_field_index("qty"), "qty", pa.array(qty, pa.int64()))
    pq.write_table(table, path)
    folded, late = _run(folder, "tumbling", "sum")
    operator, operator_late = _run(folder, "tumbling", "sum", options={"column_fold": False})
    assert any(v["qty"] > 2**40 for v in folded)
    assert _by_key(folded) == _by_key(operator) and late == operator_late


# -- snapshots: the fold writes what the operator writes, and restores across paths, runtimes, parallelism -------


def _run_until(folder: Path, storage: str, epochs: int, options: dict):
    from engine.runtime.spark.runtime import SparkRuntime

    env = _env("spark", 2, options, storage)
    results = _job(env, folder, "sliding", "sum")
    job = SparkRuntime(env).start("colfold", [], [results._node])
    for _ in range(epochs):
        assert job.run_epoch()
        job.await_checkpoints()
    return job, results


def _checkpoint(tmp_path: Path, name: str, options: dict, epochs: int = 2):
    folder = tmp_path / "in"
    job, results = _run_until(folder, f"file://{tmp_path}/{name}", epochs, options)
    before = list(job.collected[results._node.id])
    newest = job.checkpoint_history()[-1]
    job.cancel()
    return before, newest.external_pointer, results._node.operator_uid()


def test_the_folds_checkpoint_holds_the_operators_state_files_and_metadata(spark, tmp_path: Path) -> None:
    from checkpoints import load_snapshot

    _write_events(tmp_path / "in", seed=9, files=2, per_file=150, keys=6, int_keys=False, datetimes=True)
    _, fold_uri, uid = _checkpoint(tmp_path, "fold", {})
    _, operator_uid_uri, _ = _checkpoint(tmp_path, "operator", {"column_fold": False})
    fold, operator = load_snapshot(fold_uri), load_snapshot(operator_uid_uri)
    fold_tables, operator_tables = fold.state_tables(uid), operator.state_tables(uid)
    assert fold_tables["keyed.window-contents"].num_rows > 0
    assert fold_tables.keys() == operator_tables.keys()
    for name in fold_tables:
        assert fold_tables[name].equals(operator_tables[name], check_metadata=True), name
    # the same files, byte for byte, and the same operator entry in _metadata (file paths aside)
    a, b = fold.operator(uid).to_dict(), operator.operator(uid).to_dict()
    for entry in (a, b):
        for sub in entry["subtasks"]:
            for f in sub["files"]:
                f.pop("path")
    assert a == b


@pytest.mark.parametrize("first,then,parallelism,runtime", [
    ({}, {"column_fold": False}, 2, "spark"),  # the fold's checkpoint restores on the operator path
    ({"column_fold": False}, {}, 2, "spark"),  # and the reverse
    ({}, {}, 3, "spark"),  # the fold rescaled
    ({}, {}, 1, "local"),  # the fold's checkpoint on the local runtime
])
def test_a_checkpoint_restores_across_the_paths_runtimes_and_parallelism(spark, tmp_path: Path, first, then,
                                                                        parallelism, runtime) -> None:
    folder = tmp_path / "in"
    _write_events(folder, seed=7, files=2, per_file=150, keys=6, int_keys=False, datetimes=True)
    golden, _ = _run(folder, "sliding", "sum")
    before, uri, _ = _checkpoint(tmp_path, "chk", first)
    assert 0 < len(before) < len(golden)
    after, _ = _run(folder, "sliding", "sum", runtime=runtime, parallelism=parallelism,
                    options={**then, "from_savepoint": uri})
    assert sorted(map(repr, before + after)) == sorted(map(repr, golden))


def test_a_window_keyed_by_its_aggregated_field_folds_and_keys_partials_as_their_records(spark, tmp_path: Path) -> None:
    """``key_by("qty").sum("qty")``: a partial (its pane's first record with qty set to the pane's sum) is keyed by
    the record it was built from, not by the sum, also when the operator takes an epoch from the fold (a read the
    columns cannot take).  Each file has keys of its own, so every pane's first record is the same on each path."""
    folder = tmp_path / "in"
    folder.mkdir()
    for f in range(2):
        rows = [{"user_id": f"u{f}", "ts": 700 * i, "qty": 10 * (f + 1) + i % 3, "id": f"f{f}-{i}"} for i in range(90)]
        if f == 0:
            rows[40]["qty"] = 2**40  # beyond the columns' +-2^31: its epoch's subtask runs the operator
        table = pa.Table.from_pylist(rows)
        pq.write_table(table.set_column(1, "ts", table.column("ts").cast(pa.timestamp("ms", tz="UTC"))),
                       folder / f"part-{f:02d}.parquet")

    def run(runtime: str, options: dict | None = None) -> list:
        env = _env(runtime, 2, options)
        bounded = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(3))
        results = (env.read_files(str(folder), "parquet")
                   .assign_timestamps_and_watermarks(bounded.with_timestamp_assigner("ts")).key_by("qty")
                   .window(TumblingEventTimeWindows.of(Time.seconds(5))).sum("qty"))
        if runtime == "spark" and options is None:
            pre = preaggregation_for(results._node, build_plan([results._node], 2, 16))
            assert pre.column is not None and pre.fold, "the column fold must take this job"
        return sorted(map(repr, env.execute_and_collect_streams({"results": results})[0]["results"]))

    folded = run("spark")
    assert any("1099511627776" in v for v in folded)
    assert folded == run("spark", {"column_fold": False}) == run("local")
