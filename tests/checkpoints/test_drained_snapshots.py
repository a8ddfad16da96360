"""Drained snapshots (checkpoints/drained.py): the savepoint of `stop --drain` is refused on restore unless allowed.

Real purchase jobs run under a job master and are stopped through its control API, as `sluice stop` does:

    stop --drain:  ... records ... | MAX_WATERMARK | savepoint barrier   -> every window watermark MAX: drained
    stop:          ... records ... | savepoint barrier                   -> watermarks where the input was
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest
from ckpt_helpers import PURCHASES_PARAMS, stop_purchases_job
from click.testing import CliRunner

from checkpoints.cli import inspect_command
from checkpoints.drained import SnapshotWatermarks, drained_reason
from checkpoints.metadata import CheckpointMetadata
from checkpoints.restore import read_snapshot_metadata
from checkpoints.validation import ensure_restorable, validate_snapshot
from checkpoints.validation_cli import validate_command
from engine.cli import main as sluice
from engine.elements import MAX_WATERMARK
from engine.errors import DrainedSnapshotError

JOB = "engine.examples.purchases:build"
PARAMS = PURCHASES_PARAMS  # and events_per_split: None while running, a bound on restore
WINDOWS = ("count", "session", "sliding", "tumbling")


@pytest.fixture(scope="module")
def savepoints(tmp_path_factory) -> dict[str, str]:
    """One drained stop savepoint, one plain stop savepoint and a checkpoint of the running job (local runtime)."""
    base = tmp_path_factory.mktemp("drained")
    drained, _ = stop_purchases_job(base / "drained", "local", drain=True)
    plain, _ = stop_purchases_job(base / "plain", "local", drain=False)
    checkpoint = max((base / "plain" / "chk" / "purchases").glob("chk-*/_metadata"), key=lambda p: p.stat().st_mtime)
    return {"drained": drained, "plain": plain, "checkpoint": checkpoint.parent.as_uri(), "base": str(base)}


def _restore_args(verb: str, savepoints: dict[str, str], kind: str, target: Path) -> list[str]:
    """``sluice restore`` / ``sluice run --from-savepoint`` of one savepoint into fresh storage and a copy of
    the stopped job's output (its sinks' committed transactions live there); the job ends a few hundred
    events after the savepoint's offsets, so the command returns."""
    shutil.copytree(Path(savepoints["base"]) / kind / "out", target / "out")
    snapshot = savepoints[kind]
    end = max(read_snapshot_metadata(snapshot).source_positions.values()) + 300
    head = ["restore", JOB, snapshot] if verb == "restore" else ["run", JOB, "--from-savepoint", snapshot]
    params = [arg for k, v in {**PARAMS, "events_per_split": end}.items() for arg in ("--param", f"{k}={v}")]
    return [*head, "--storage", (target / "chk").as_uri(), "--output", str(target / "out"),
            "--checkpoint-interval", "200", "--option", "bundle_size=64", *params]


def _files(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_size for p in folder.rglob("*") if p.is_file()}


def test_only_the_stop_drain_savepoint_is_drained(savepoints) -> None:
    reason = drained_reason(read_snapshot_metadata(savepoints["drained"]))
    assert reason is not None and "MAX_WATERMARK" in reason
    assert all(repr(uid) in reason for uid in WINDOWS)
    assert drained_reason(read_snapshot_metadata(savepoints["plain"])) is None
    assert drained_reason(read_snapshot_metadata(savepoints["checkpoint"])) is None


def test_only_every_job_and_operator_watermark_at_max_makes_a_snapshot_drained() -> None:
    """Where MAX_WATERMARK shows up in a job that still runs, and where only a drain puts it:

        pipeline A (bounded input read to the end):  operator 'a'  MAX
        pipeline B (still reading):                  operator 'b'  1_000         -> not drained
        split s1 finished, s2 reading:   job 1_000,  split s1 MAX               -> not drained
        nothing recorded (no window operator)                                    -> not drained
        stop --drain on spark:           job MAX, 'b' MAX, splits where they were -> drained
    """
    def reason(watermarks: dict) -> str | None:
        return drained_reason(CheckpointMetadata("job", 7, watermarks=watermarks))

    assert reason({"operators": {"a": {"0": MAX_WATERMARK}, "b": {"0": 1_000}}}) is None
    assert reason({"watermark": 1_000, "splits": {"s1": {"watermark": MAX_WATERMARK}, "s2": {"watermark": 1_000}}}) \
        is None
    assert reason({}) is None
    drained = reason({"watermark": MAX_WATERMARK, "operators": {"b": {"0": MAX_WATERMARK, "1": MAX_WATERMARK}},
                      "splits": {"s1": {"watermark": 1_000}}})
    assert drained == (f"the job's watermark and every subtask's watermark of operator 'b' are MAX_WATERMARK "
                       f"({MAX_WATERMARK}): event time had ended, as after `sluice stop --drain`")


@pytest.mark.parametrize("verb", ["restore", "run --from-savepoint"])
def test_restoring_a_drained_savepoint_is_refused_with_the_reason_and_nothing_starts(savepoints, tmp_path: Path,
                                                                                    verb: str) -> None:
    args = _restore_args(verb, savepoints, "drained", tmp_path)
    output_before = _files(tmp_path / "out")
    result = CliRunner().invoke(sluice, args)
    assert result.exit_code == 1
    error = result.exception
    assert isinstance(error, DrainedSnapshotError), result.output
    assert error.snapshot == savepoints["drained"] and "every subtask's watermark of operators 'count'" in error.reason
    assert "--allow-drained" in str(error) and "without --drain" in str(error)
    assert not (tmp_path / "chk").exists() and _files(tmp_path / "out") == output_before  # no master, no job


def test_allow_drained_lets_the_drained_savepoint_restore_and_says_so(savepoints, tmp_path: Path, caplog) -> None:
    refused = CliRunner().invoke(sluice, _restore_args("restore", savepoints, "drained", tmp_path / "refused"))
    assert isinstance(refused.exception, DrainedSnapshotError)
    args = _restore_args("restore", savepoints, "drained", tmp_path / "allowed")
    with caplog.at_level(logging.WARNING, logger="checkpoints.validation.runner"):
        result = CliRunner().invoke(sluice, [*args, "--allow-drained"])
    assert result.exit_code == 0, result.output
    run = json.loads(result.stdout.strip().splitlines()[-1])
    # what the refusal prevents: each of the 1200+ events read after the restore is late (sessions drop them)
    assert run["job_id"] == "purchases" and run["metrics"]["num_late_records_dropped"] >= 1000
    assert any("RESTORING A DRAINED SNAPSHOT" in r.getMessage() and savepoints["drained"] in r.getMessage()
               for r in caplog.records)


def test_the_savepoint_of_a_stop_without_drain_restores_where_the_drained_one_is_refused(savepoints,
                                                                                        tmp_path: Path) -> None:
    with pytest.raises(DrainedSnapshotError):
        ensure_restorable(savepoints["drained"], job_spec=JOB, skip_validation=True)
    result = CliRunner().invoke(sluice, _restore_args("restore", savepoints, "plain", tmp_path))
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout.strip().splitlines()[-1])["job_id"] == "purchases"


def test_validation_fails_a_drained_savepoint_with_the_reason_unless_allowed(savepoints, tmp_path: Path) -> None:
    docs = {"data_docs_dir": tmp_path / "docs", "build_data_docs": False}
    drained = validate_snapshot(savepoints["drained"], **docs)
    assert drained.status == "failed" and not drained.failed  # its state is fine; the snapshot is not
    assert drained.reason.startswith(f"snapshot {savepoints['drained']} is drained: ")
    assert drained.to_dict()["reason"] == drained.reason
    assert validate_snapshot(savepoints["drained"], allow_drained=True, **docs).passed
    assert validate_snapshot(savepoints["plain"], **docs).passed

    cli = CliRunner().invoke(validate_command, [savepoints["drained"], "--data-docs", str(tmp_path / "docs")])
    assert cli.exit_code == 1 and "refused:" in cli.output and "is drained" in cli.output
    allowed = CliRunner().invoke(validate_command, [savepoints["drained"], "--data-docs", str(tmp_path / "docs"),
                                                    "--allow-drained"])
    assert allowed.exit_code == 0, allowed.output


def test_inspect_prints_the_watermarks_and_says_drained(savepoints) -> None:
    drained = CliRunner().invoke(inspect_command, [savepoints["drained"]])
    assert drained.exit_code == 0, drained.output
    for uid in WINDOWS:
        assert f"    operator {uid}: subtasks 0, 1 at MAX_WATERMARK (end of event time)" in drained.output
    assert "  drained: the job's watermark and every subtask's watermark of operators" in drained.output

    plain = CliRunner().invoke(inspect_command, [savepoints["plain"], "--json"])
    data = json.loads(plain.output)
    assert data["drained"] is None
    assert set(data["event_time"]["operators"]) == set(WINDOWS)
    assert all(0 < wm < MAX_WATERMARK for subtasks in data["event_time"]["operators"].values()
               for wm in subtasks.values())


@pytest.mark.spark
def test_a_drained_spark_savepoint_is_recognised_and_refused(spark, tmp_path: Path) -> None:
    drained, running = stop_purchases_job(tmp_path, "spark", drain=True, savepoint_first=True)
    reason = drained_reason(read_snapshot_metadata(drained))
    assert reason is not None and reason.startswith("the job's watermark and ")
    running_metadata = read_snapshot_metadata(running)  # taken after an epoch of input: a real watermark
    assert 0 < SnapshotWatermarks.of(running_metadata).job_ms < MAX_WATERMARK
    assert drained_reason(running_metadata) is None
    with pytest.raises(DrainedSnapshotError, match="is drained: the job's watermark"):
        ensure_restorable(drained, job_spec=JOB, skip_validation=True)
