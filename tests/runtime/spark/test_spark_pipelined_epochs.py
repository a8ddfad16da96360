"""Pipelined epochs (runtime option ``pipeline_epochs``, engine/runtime/spark/job.py): same results, same snapshots.

Epoch n's window stages run in one Spark job with epoch n+1's reads, and a barrier between two steps records the
moment before the pending reads.  The real client of that barrier is an exactly-once file sink and a restore: a job
run pipelined, cancelled after a few epochs and restored from its newest checkpoint must commit exactly the rows an
uninterrupted run commits — none lost (a barrier that recorded the pending reads' positions would skip their
records) and none twice (one that committed their output before the barrier would write it again).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from long_tests import long_tests
from test_spark_column_fold import _job as _fold_job
from test_spark_column_path import _env, _write_events
from test_spark_column_path import _job as _path_job


def _collected(folder: Path, form: str, options: dict, window: str = "sliding") -> dict:
    env = _env("spark", 2, options)
    results, late = _path_job(env, folder, window, "sum", form)
    collected, result = env.execute_and_collect_streams({"results": results, "late": late})
    return {"by_key": _in_key_order(collected["results"]), "late": Counter(map(repr, collected["late"])),
            "epochs": result.metrics["num_epochs"]}


def _in_key_order(values: list) -> dict:
    """Each key's results in order (the runtimes' contract); across keys the subtasks interleave."""
    out: dict = {}
    for v in values:
        out.setdefault(repr(v["user_id"] if isinstance(v, dict) else v[0]), []).append(repr(v))
    return out


# CI runs the column path and a pipelined restore; the element path and a restore without pipelining are long
# variants (SLUICE_LONG_TESTS=1)
@pytest.mark.parametrize("form", ["column"] + (["lambda"] if long_tests() else []))
def test_pipelined_epochs_give_the_same_results(spark, tmp_path: Path, form: str) -> None:
    """The column path and the element path (lambda form; both with a late side output): results per key in order
    and late records, pipelined or not."""
    folder = tmp_path / "in"
    _write_events(folder, seed=3, files=2, per_file=120, keys=5, int_keys=False, datetimes=True)
    plain = _collected(folder, form, {"pipeline_epochs": False})
    pipelined = _collected(folder, form, {"pipeline_epochs": True})
    assert plain["by_key"] and sum(plain["late"].values()) > 0
    assert pipelined["by_key"] == plain["by_key"]
    assert pipelined["late"] == plain["late"]


def _committed(out: Path) -> Counter:
    files = sorted(p for p in out.rglob("*.parquet") if "_staging" not in p.parts)
    return Counter(repr(row) for f in files for row in pq.read_table(f).to_pylist())


def _write_job(env, folder: Path, out: Path) -> None:
    _fold_job(env, folder, "sliding", "sum").write_files(str(out), "parquet")


@pytest.mark.parametrize("then", [{}] + ([{"pipeline_epochs": False}] if long_tests() else []),
                         ids=["restored-pipelined", "restored-plain"][:2 if long_tests() else 1])
def test_a_pipelined_checkpoint_restores_exactly_once(spark, tmp_path: Path, then: dict) -> None:
    from engine.runtime.spark.runtime import SparkRuntime

    folder = tmp_path / "in"
    _write_events(folder, seed=5, files=2, per_file=330, keys=6, int_keys=False, datetimes=True)
    golden_env = _env("spark", 2, {"pipeline_epochs": False})
    _write_job(golden_env, folder, tmp_path / "golden")
    golden_env.execute()
    golden = _committed(tmp_path / "golden")

    storage = f"file://{tmp_path}/chk"
    out = tmp_path / "out"
    env = _env("spark", 2, {"max_epochs": 3}, storage)
    _write_job(env, folder, out)
    job = SparkRuntime(env).start("pipelined", list(env._sinks), [])
    assert job.pipelines()  # the default
    job.run()  # three reads, two epochs of windows, a checkpoint after each step; then the third epoch's windows
    assert job.pending is None and not job.finished
    newest = job.checkpoint_history()[-1]
    job.cancel()  # aborts what came after the newest checkpoint: the third epoch's output
    before = _committed(out)
    assert 0 < sum(before.values()) < sum(golden.values())

    env = _env("spark", 2, {**then, "from_savepoint": newest.external_pointer}, storage)
    _write_job(env, folder, out)
    env.execute()
    assert _committed(out) == golden


def test_a_source_stage_writing_an_exactly_once_file_sink_is_not_pipelined(spark, tmp_path: Path) -> None:
    """Its parts would be staged in the transaction of the barrier before their reads: such a job runs its epochs
    one job after another, and still gives every row once."""
    from engine.runtime.spark.runtime import SparkRuntime

    folder = tmp_path / "in"
    _write_events(folder, seed=2, files=1, per_file=40, keys=3, int_keys=False, datetimes=True)
    env = _env("spark", 2, {"pipeline_epochs": True})
    env.read_files(str(folder), "parquet").write_files(str(tmp_path / "copy"), "parquet")
    job = SparkRuntime(env).start("copy", list(env._sinks), [])
    assert not job.pipelines()
    job.run()
    assert sum(_committed(tmp_path / "copy").values()) == 40
