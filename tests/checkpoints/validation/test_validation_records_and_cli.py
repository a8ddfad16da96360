"""Outcomes are kept: Data Docs HTML, results JSON beside the snapshot, the validated tier in _metadata; the CLI."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from checkpoints import SavepointHistoryPolicy, apply_savepoint_policy, list_savepoints, load_snapshot
from checkpoints.validation import read_outcome, validate_snapshot
from checkpoints.validation.user_expectations import suite_path_for_job
from checkpoints.validation_cli import validate_command
from validation_state import fed_routers
from snapshot_writer import write_snapshot


def test_a_validation_run_renders_data_docs_and_stores_results_beside_the_snapshot(healthy_uri, docs_dir):
    report = validate_snapshot(healthy_uri, data_docs_dir=docs_dir)
    assert report.data_docs_url == (docs_dir / "index.html").as_uri()
    index = (docs_dir / "index.html").read_text()
    assert "tumbling.state.window-contents" in index
    pages = list((docs_dir / "validations").rglob("*.html"))
    assert len(pages) == len(report.assets)
    stored = json.loads(Path(report.results_uri.removeprefix("file://")).read_text())
    assert stored["status"] == "passed" and stored["snapshot_uri"] == healthy_uri
    assert "/chk-1/_validation/" in report.results_uri
    # the results file is beside the state, not part of it: the snapshot still loads with all checksums
    load_snapshot(healthy_uri)


def test_the_outcome_recorded_in_metadata_is_what_savepoint_history_keeps(storage):
    def negative(uid, subtask, name, table):
        if uid == "count" and name == "keyed.count" and table.num_rows:
            values = [-5.0] * table.num_rows
            import pyarrow as pa

            return table.set_column(table.schema.get_field_index("value_num"), table.schema.field("value_num"),
                                    pa.array(values, pa.float64()))
        return table

    good = write_snapshot(storage, 1, fed_routers(), savepoint=True, now_ms=1_000)
    bad = write_snapshot(storage, 2, fed_routers(), savepoint=True, now_ms=2_000, edit=negative)
    newest = write_snapshot(storage, 3, fed_routers(), savepoint=True, now_ms=3_000)
    assert validate_snapshot(good, record=True, build_data_docs=False).passed
    assert not validate_snapshot(bad, record=True, build_data_docs=False).passed
    outcomes = {s.checkpoint_id: read_outcome(s.metadata) for s in list_savepoints(storage.savepoint_store, "job-1")}
    assert outcomes == {1: "passed", 2: "failed", 3: "not validated"}
    recorded = load_snapshot(bad).metadata.validation
    assert recorded["failed_expectations"][0]["expectation"] == "expect_column_values_to_be_between"
    assert recorded["failed_expectations"][0]["asset"] == "count.state.count"
    # keep only the newest: the newest savepoint that passed (1) survives the policy, the failed one does not
    deleted = apply_savepoint_policy(storage.savepoint_store, "job-1", SavepointHistoryPolicy(max_count=1), now_ms=4_000)
    assert sorted(s.checkpoint_id for s in deleted) == [2]
    assert newest  # still there
    assert sorted(s.checkpoint_id for s in list_savepoints(storage.savepoint_store, "job-1")) == [1, 3]


def test_sluice_validate_exits_0_with_a_summary_and_a_data_docs_link(healthy_uri, docs_dir):
    result = CliRunner().invoke(validate_command, [healthy_uri, "--data-docs", str(docs_dir),
                                                   "--job", "validation_jobs:build"])
    assert result.exit_code == 0, result.output
    assert "PASSED" in result.output
    assert "tumbling.state.window-contents" in result.output
    assert f"Data Docs: {(docs_dir / 'index.html').as_uri()}" in result.output
    assert "can restore" in result.output


def test_sluice_validate_exits_1_and_names_the_incompatibility(healthy_uri, docs_dir):
    result = CliRunner().invoke(validate_command, [healthy_uri, "--data-docs", str(docs_dir), "--json",
                                                   "--job", "validation_jobs:build_changed"])
    assert result.exit_code == 1
    doc = json.loads(result.output)
    assert doc["validation"]["status"] == "passed"
    assert {p["kind"] for p in doc["compatibility"]["problems"]} >= {"assigner", "max-parallelism", "unrestored-state"}


def test_the_user_suite_file_beside_the_job_is_found_and_applied(healthy_uri, tmp_path, monkeypatch):
    (tmp_path / "myjob.py").write_text("from validation_jobs import build\n")
    (tmp_path / "myjob.expectations.yaml").write_text(
        "expectations:\n"
        "  - operator: count\n"
        "    table: state.count\n"
        "    expectation: ExpectColumnValuesToBeBetween\n"
        "    column: value_num\n"
        "    kwargs: {max_value: 1}\n"
        "    rule: count windows hold at most one element\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert suite_path_for_job("myjob:build") == tmp_path / "myjob.expectations.yaml"
    result = CliRunner().invoke(validate_command, [healthy_uri, "--job", "myjob:build", "--json",
                                                   "--data-docs", str(tmp_path / "docs")])
    assert result.exit_code == 1
    failed = json.loads(result.output)["validation"]["failed"]
    assert [(f["asset"], f["expectation"], f["rule"]) for f in failed] == [
        ("count.state.count", "expect_column_values_to_be_between", "count windows hold at most one element")]


def test_a_corrupt_snapshot_is_refused_with_exit_1(healthy_uri, tmp_path):
    snap = load_snapshot(healthy_uri)
    _, _, handle = next(iter(snap.metadata.files()))
    (snap.store.root / snap.file_key(handle)).write_bytes(b"not parquet")
    result = CliRunner().invoke(validate_command, [healthy_uri, "--data-docs", str(tmp_path / "docs")])
    assert result.exit_code == 1
    assert "validation refused" in result.output


def test_great_expectations_runs_without_analytics(tmp_path):
    import os

    from checkpoints.validation.runner import gx_context

    context = gx_context(tmp_path / "docs")
    assert os.environ["GX_ANALYTICS_ENABLED"] == "false"
    assert context.config.analytics_enabled is False
    assert list(context.list_data_docs_sites()) == ["sluice"]


def test_restore_is_refused_on_failure_unless_validation_is_skipped_loudly(storage, caplog):
    from checkpoints.validation import ensure_restorable
    from engine.errors import CorruptSnapshotError

    uri = write_snapshot(storage, 1, fed_routers(), edit=lambda uid, s, name, t: t.slice(1)
                         if (uid, name, s) == ("tumbling", "keyed.window-contents", 0) else t)
    with pytest.raises(CorruptSnapshotError, match="expect_table_row_count_to_equal"):
        ensure_restorable(uri, build_data_docs=False)
    with pytest.raises(CorruptSnapshotError, match="max-parallelism of operator 'count'"):
        ensure_restorable(uri, job_spec="validation_jobs:build_changed", build_data_docs=False)
    with caplog.at_level("WARNING"):
        assert ensure_restorable(uri, skip_validation=True) is None
    assert "VALIDATION SKIPPED" in caplog.text
    healthy = write_snapshot(storage, 2, fed_routers())
    caplog.clear()
    with caplog.at_level("INFO", logger="checkpoints.validation.runner"):
        assert ensure_restorable(healthy, job_spec="validation_jobs:build", build_data_docs=False).passed
    # a master's log says the outcome too (a new user found restore silent when not on a terminal)
    assert re.search(rf"{re.escape(healthy)} passed validation: \d+ expectations over \d+ rows", caplog.text)


def test_a_restore_validated_by_its_caller_is_not_validated_again_unless_the_snapshot_changed(storage, caplog):
    from checkpoints.restore import read_snapshot_metadata
    from checkpoints.validation import ensure_restorable
    from engine.errors import CorruptSnapshotError

    broken = write_snapshot(storage, 1, fed_routers(), edit=lambda uid, s, name, t: t.slice(1)
                            if (uid, name, s) == ("tumbling", "keyed.window-contents", 0) else t)
    digest = read_snapshot_metadata(broken).digest()
    with caplog.at_level("INFO"):
        # the caller's word holds only for the very metadata it validated...
        assert ensure_restorable(broken, validated_digest=digest, build_data_docs=False) is None
    assert "not validated again" in caplog.text
    # ...a different digest (the snapshot changed since, or another snapshot) is validated and refused
    with pytest.raises(CorruptSnapshotError, match="expect_table_row_count_to_equal"):
        ensure_restorable(broken, validated_digest="0" * 64, build_data_docs=False)
    # and the job-compatibility check runs either way
    with pytest.raises(CorruptSnapshotError, match="max-parallelism of operator 'count'"):
        ensure_restorable(broken, validated_digest=digest, job_spec="validation_jobs:build_changed")


def test_a_recorded_validation_reports_the_digest_of_the_metadata_it_wrote(storage):
    from checkpoints.restore import read_snapshot_metadata
    from checkpoints.validation import validate_snapshot

    uri = write_snapshot(storage, 3, fed_routers())
    before = read_snapshot_metadata(uri).digest()
    report = validate_snapshot(uri, record=True, build_data_docs=False)
    assert report.metadata_sha256 == read_snapshot_metadata(uri).digest() != before
    assert validate_snapshot(uri, build_data_docs=False).metadata_sha256 is None  # nothing recorded: no digest


def test_sluice_validate_reads_an_s3_snapshot_at_the_endpoint_and_in_the_region_given(moto_endpoint, docs_dir):
    """``--endpoint-url`` and ``--region``, as ``checkpoints list|clean`` and ``inspect`` take them."""
    import uuid

    import boto3

    from checkpoints import CheckpointStorage
    from checkpoints.backends.s3 import S3Store

    bucket = "sluice-" + uuid.uuid4().hex[:12]
    boto3.client("s3", region_name="eu-west-1", endpoint_url=moto_endpoint).create_bucket(
        Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
    store = S3Store(bucket, "checkpoints", endpoint_url=moto_endpoint, region="eu-west-1")
    uri = write_snapshot(CheckpointStorage(store, "job-1"), 1, fed_routers(),
                         source_positions={"split-0": 10, "split-1": 20})
    assert uri.startswith(f"s3://{bucket}/")

    args = [uri, "--endpoint-url", moto_endpoint, "--data-docs", str(docs_dir), "--json"]
    result = CliRunner().invoke(validate_command, args + ["--region", "eu-west-1"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["ok"] is True
    # the region reaches the S3 client: one it cannot use is refused, naming it
    refused = CliRunner().invoke(validate_command, args + ["--region", "not a region"])
    assert refused.exit_code != 0 and "not a region" in refused.output + repr(refused.exception)


def test_sluice_validate_shows_its_progress_on_stderr_when_asked_and_keeps_stdout_for_the_report(healthy_uri,
                                                                                                  docs_dir):
    import re

    shown = CliRunner().invoke(validate_command, [healthy_uri, "--data-docs", str(docs_dir), "--json", "--progress"])
    assert shown.exit_code == 0, shown.output
    lines = shown.stderr.splitlines()
    assert lines[0] == f"validating {healthy_uri} ..."
    assert re.fullmatch(rf"validating {re.escape(healthy_uri)}: done in \d+\.\d s", lines[1]), lines
    assert json.loads(shown.stdout)["ok"] is True
    quiet = CliRunner().invoke(validate_command, [healthy_uri, "--data-docs", str(docs_dir), "--json"])
    assert quiet.exit_code == 0 and quiet.stderr == ""  # off a terminal, without the flag: nothing


def test_sluice_validate_ends_with_the_answer_and_writes_nothing_beside_the_snapshot_without_record(
        healthy_uri, docs_dir):
    """A new user read 'PASSED on pandas' as the answer when the job could not restore the snapshot (exit 1),
    and validate wrote _validation/<run>.json into the snapshot's folder without --record (an operator's role
    may only read it)."""
    folder = Path(healthy_uri.removeprefix("file://"))
    before = sorted(p.relative_to(folder) for p in folder.rglob("*"))
    result = CliRunner().invoke(validate_command, [healthy_uri, "--data-docs", str(docs_dir),
                                                   "--job", "validation_jobs:build_changed"])
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert "expectations PASSED" in lines[0] and lines[-1] == "NOT OK: job validation_jobs:build_changed cannot " \
        "restore it", lines
    assert sorted(p.relative_to(folder) for p in folder.rglob("*")) == before
    recorded = CliRunner().invoke(validate_command, [healthy_uri, "--data-docs", str(docs_dir), "--record"])
    assert recorded.exit_code == 0 and recorded.output.strip().splitlines()[-1].startswith("OK: "), recorded.output
    assert list(folder.glob("_validation/*.json")), "--record writes the results beside the snapshot"
