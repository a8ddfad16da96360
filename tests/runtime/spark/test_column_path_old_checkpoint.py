"""A checkpoint of the column path taken by the data path of commit 1b93168 restores after issue 16's changes to it.

fixtures/column_path_1b93168/ was written by column_path_fixture.py run on that commit: the column-form sliding
sum of test_spark_column_path.py (its source with a uid) over two Parquet files with UTC timestamps, checkpointed
after two epochs, and what the job had emitted by then.  Restored on the column path at the same parallelism and
rescaled, and on the local runtime, the output before plus after equals an uninterrupted run's with today's code.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from column_path_fixture import job
from engine.graph.plan import build_plan
from engine.runtime.spark.preaggregation import preaggregation_for
from engine.state import codec
from test_spark_column_path import _env

FIXTURE = Path(__file__).parent / "fixtures" / "column_path_1b93168"


def _run(folder: Path, runtime: str, parallelism: int, options: dict | None = None) -> dict:
    env = _env(runtime, parallelism, options)
    results, late = job(env, folder)
    collected, _ = env.execute_and_collect_streams({"results": results, "late": late})
    return {name: sorted(values, key=repr) for name, values in collected.items()}


@pytest.mark.parametrize("runtime,parallelism", [("spark", 2), ("spark", 3), ("local", 2)])
def test_a_column_path_checkpoint_of_1b93168_restores(spark, tmp_path: Path, runtime, parallelism) -> None:
    shutil.copytree(FIXTURE, tmp_path / "fixture")
    folder = tmp_path / "fixture" / "in"
    results, _ = job(_env("spark", 2), folder)
    assert preaggregation_for(results._node, build_plan([results._node], 2, 16)).column is not None
    expected = json.loads((tmp_path / "fixture" / "expected.json").read_text())
    before = {name: [codec.decode(t) for t in texts] for name, texts in expected["emitted"].items()}
    golden = _run(folder, "spark", 2)
    assert 0 < len(before["results"]) < len(golden["results"])
    after = _run(folder, runtime, parallelism,
                 {"from_savepoint": (tmp_path / "fixture" / "chk" / expected["checkpoint"]).as_uri()})
    assert {k: sorted(before[k] + after[k], key=repr) for k in golden} == golden
