"""Savepoints written before both runtimes stopped persisting their own watermark machinery still restore.

The fixtures in ``older_snapshots/`` were taken by the code of commit 1b93168 from the job of
test_snapshot_portability.py: the local one lists a valve per task and a watermark stage per source subtask, the
Spark one its valve over all splits and its epoch (see older_snapshots/README.md).  Each restores on both
runtimes, the local one also rescaled, and what the old run emitted before the savepoint plus what the restored
run emits is the uninterrupted run's output.  The fixtures are copied first: a restore reads them only, but the
folder stays as checked in whatever the code under test does.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from test_snapshot_portability import build

from checkpoints import load_snapshot

FIXTURES = Path(__file__).with_name("older_snapshots")


def _plain(values: list) -> list:
    """Values as the fixtures store them (tuples as JSON lists), sorted."""
    return sorted(json.loads(json.dumps(values)), key=repr)


@pytest.fixture(scope="module")
def golden(spark) -> list:
    _, stream = build("local", None)
    return _plain(stream.execute_and_collect())


def test_the_fixtures_have_the_per_task_states_newer_snapshots_leave_out() -> None:
    local = load_snapshot((FIXTURES / "local").as_uri()).metadata
    assert {op.uid for op in local.operators} >= {"v0.watermarks", "v1.valve"}
    spark = load_snapshot((FIXTURES / "spark").as_uri()).metadata
    assert {"valve", "epoch"} <= set(spark.watermarks)


@pytest.mark.parametrize("taken_on", ["local", "spark"])
@pytest.mark.parametrize("restored_on, parallelism", [("local", 2), ("local", 3), ("spark", 2)])
def test_an_older_savepoint_restores_with_the_uninterrupted_runs_output(golden, tmp_path: Path, taken_on: str,
                                                                       restored_on: str, parallelism: int) -> None:
    folder = tmp_path / f"older-{taken_on}"
    shutil.copytree(FIXTURES / taken_on, folder)
    before = json.loads((FIXTURES / f"{taken_on}-before.json").read_text())
    assert 0 < len(before) < len(golden)  # the old run stopped midway

    env, stream = build(restored_on, f"file://{tmp_path}/chk", parallelism, {"from_savepoint": folder.as_uri()})
    after = stream.execute_and_collect("restored")
    assert _plain(before + after) == golden
