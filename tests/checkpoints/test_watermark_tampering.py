"""A snapshot whose watermarks were edited is refused by restore and by validation (issue 17: a ``_metadata``
watermark edited to the year 3000 passed validation; a restore would then have judged every new record late).

Real purchase jobs run under a job master on both runtimes and are stopped with a savepoint; each test edits one
part of the savepoint's ``_metadata`` the way a hand or a bad tool would, and checks that
:func:`checkpoints.load_snapshot` (which restore and ``sluice validate`` go through) refuses it with the reason,
while the untouched savepoint loads.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Callable

import pytest
from ckpt_helpers import stop_purchases_job
from click.testing import CliRunner

from checkpoints import load_snapshot
from checkpoints.metadata import seal
from checkpoints.validation_cli import validate_command
from engine.errors import CorruptSnapshotError

YEAR_3000_MS = 32_503_680_000_000


def _stop_savepoint(base: Path, runtime: str) -> Path:
    return Path(stop_purchases_job(base, runtime, min_checkpoints=2)[0].removeprefix("file://"))


@pytest.fixture(scope="module")
def local_savepoint(tmp_path_factory) -> Path:
    return _stop_savepoint(tmp_path_factory.mktemp("wm-local"), "local")


@pytest.fixture(scope="module")
def spark_savepoint(spark, tmp_path_factory) -> Path:
    # through the session fixture: a session this master started itself would start Spark's Python workers
    # without the tests' import paths, and later Spark tests in this process share it
    return _stop_savepoint(tmp_path_factory.mktemp("wm-spark"), "spark")


def _edited(savepoint: Path, tmp_path: Path, edit: Callable[[dict[str, Any]], None]) -> Path:
    """A copy of the savepoint folder with ``edit`` applied to its ``_metadata``."""
    import shutil

    target = tmp_path / savepoint.name
    shutil.copytree(savepoint, target)
    document = json.loads((target / "_metadata").read_text())
    edit(document)
    (target / "_metadata").write_bytes(seal(document))  # sealed again: these checks are for a tool that reseals
    return target


def _window(document: dict[str, Any], uid: str = "tumbling") -> dict[str, Any]:
    return next(op for op in document["operators"] if op["uid"] == uid)


def _source_splits(document: dict[str, Any]) -> list[dict[str, Any]]:
    """The split watermark states of either runtime's document."""
    found = []
    for op in document["operators"]:
        for meta in op["config"].get("subtask_metadata", {}).values():
            found.extend(meta.get("task_state", {}).get("splits", []) if isinstance(meta.get("task_state"), dict)
                         else [])
    for entry in document["watermarks"].get("splits", {}).values():
        found.extend(entry["watermarks"]["splits"])
    return found


def _refused(folder: Path, words: str) -> str:
    with pytest.raises(CorruptSnapshotError) as refused:
        load_snapshot(folder.as_uri())
    assert words in str(refused.value), refused.value
    return str(refused.value)


@pytest.mark.spark
def test_untouched_savepoints_of_both_runtimes_load(local_savepoint: Path, spark_savepoint: Path) -> None:
    for savepoint in (local_savepoint, spark_savepoint):
        load_snapshot(savepoint.as_uri())
        assert _source_splits(json.loads((savepoint / "_metadata").read_text())), "no split watermark recorded"


@pytest.mark.parametrize("runtime, reason", [
    ("local", "one of the two copies was altered"),
    # both runtimes keep two copies of a window's watermark (engine/runtime/checkpoint_storage.py); the moved one
    # is also ahead of every source
    pytest.param("spark", "one of the two copies was altered", marks=pytest.mark.spark),
    pytest.param("spark", "ahead of every source split's watermark", marks=pytest.mark.spark)])
def test_a_window_watermark_in_watermarks_operators_moved_to_the_year_3000_is_refused(
        runtime, reason, local_savepoint, spark_savepoint, tmp_path) -> None:
    savepoint = local_savepoint if runtime == "local" else spark_savepoint

    def edit(document: dict[str, Any]) -> None:
        marks = document["watermarks"]["operators"]["tumbling"]
        for subtask in marks:
            marks[subtask] = YEAR_3000_MS

    _refused(_edited(savepoint, tmp_path, edit), reason)


def test_both_copies_of_a_window_watermark_ahead_of_every_source_are_refused(local_savepoint, tmp_path) -> None:
    def edit(document: dict[str, Any]) -> None:
        for subtask, meta in _window(document)["config"]["subtask_metadata"].items():
            meta["current_watermark"] = YEAR_3000_MS
            document["watermarks"]["operators"]["tumbling"][subtask] = YEAR_3000_MS

    message = _refused(_edited(local_savepoint, tmp_path, edit), "ahead of every source split's watermark")
    assert str(YEAR_3000_MS) in message
    # validation gives the same verdict before any Great Expectations run
    folder = _edited(local_savepoint, tmp_path / "again", edit)
    result = CliRunner().invoke(validate_command, [folder.as_uri()])
    assert result.exit_code != 0 and "ahead of every source split's watermark" in result.output, result.output


@pytest.mark.parametrize("runtime", ["local", pytest.param("spark", marks=pytest.mark.spark)])
def test_a_split_watermark_ahead_of_the_timestamps_its_generator_saw_is_refused(runtime, local_savepoint,
                                                                               spark_savepoint, tmp_path) -> None:
    savepoint = local_savepoint if runtime == "local" else spark_savepoint

    def edit(document: dict[str, Any]) -> None:
        for split in _source_splits(document):
            split["watermark"] = YEAR_3000_MS
        for entry in document["watermarks"].get("splits", {}).values():
            entry["watermark"] = YEAR_3000_MS  # the Spark runtime's second copy, moved along
        for op in document["operators"]:  # everything downstream moved along too
            for subtask, meta in op["config"].get("subtask_metadata", {}).items():
                if "current_watermark" in meta:
                    meta["current_watermark"] = YEAR_3000_MS
                    document["watermarks"]["operators"][op["uid"]][subtask] = YEAR_3000_MS

    _refused(_edited(savepoint, tmp_path, edit), "ahead of the largest timestamp its watermark generator saw")


@pytest.mark.spark
def test_the_spark_job_watermark_ahead_of_the_sources_is_refused(spark_savepoint, tmp_path) -> None:
    """The Spark runtime restores the job's watermark (what every record of the first epoch is judged against)."""
    def job_only(document: dict[str, Any]) -> None:
        document["watermarks"]["watermark"] = YEAR_3000_MS

    _refused(_edited(spark_savepoint, tmp_path / "job", job_only), "ahead of every source split's watermark")


def test_an_older_spark_snapshots_valve_apart_from_the_job_watermark_is_refused(tmp_path) -> None:
    """Spark snapshots written before the valve was left out of ``_metadata`` (tests/runtime/spark/older_snapshots)
    record it beside the job's watermark, whose output it is; the two must agree."""
    older = Path(__file__).parents[1] / "runtime" / "spark" / "older_snapshots" / "spark"
    load_snapshot(older.as_uri())  # untouched, it loads

    def valve_only(document: dict[str, Any]) -> None:
        document["watermarks"]["valve"]["last_output_watermark"] -= 1

    _refused(_edited(older, tmp_path, valve_only), "is not its watermark valve's output")


def test_a_consistent_document_with_different_numbers_still_loads(local_savepoint, tmp_path) -> None:
    """The checks compare the document with itself: moving every watermark back (an earlier, consistent state)
    is not flagged, so the rules do not refuse snapshots merely for their values."""
    def edit(document: dict[str, Any]) -> None:
        original = copy.deepcopy(document)
        for op in document["operators"]:
            for subtask, meta in op["config"].get("subtask_metadata", {}).items():
                if "current_watermark" in meta:
                    meta["current_watermark"] -= 1
                    document["watermarks"]["operators"][op["uid"]][subtask] -= 1
        assert document != original

    load_snapshot(_edited(local_savepoint, tmp_path, edit).as_uri())
