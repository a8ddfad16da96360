"""A checkpoint written by the real local runtime validates with every rule checked, nothing "unknown"."""

from __future__ import annotations


import pytest

from checkpoints import load_snapshot
from checkpoints.validation import validate_snapshot
from checkpoints.validation.suite_builder import build_suites
from engine.errors import JobFailedError
from runtime_job import build_job


@pytest.fixture(scope="module")
def retained(tmp_path_factory) -> list[str]:
    """URIs of the job's retained checkpoints, oldest first (the job fails on purpose and keeps them)."""
    root = tmp_path_factory.mktemp("runtime-job")
    env = build_job(str(root / "out"), f"file://{root}/chk")
    with pytest.raises(JobFailedError):
        env.execute("validated job")
    (job_dir,) = [p for p in (root / "chk").iterdir() if p.is_dir()]
    done = sorted((p for p in job_dir.iterdir() if p.name.startswith("chk-") and (p / "_metadata").exists()),
                  key=lambda p: int(p.name.split("-")[1]))
    assert len(done) == 2
    return [f"file://{p}" for p in done]


def expectations_on(plan, asset: str) -> set[tuple[str, str]]:
    """``(expectation type, first column it reads)`` of every expectation of ``asset``."""
    out = set()
    for e in plan.assets[asset].expectations:
        column = getattr(e, "column", None) or getattr(e, "column_A", None) or ""
        out.add((e.expectation_type, column))
    return out


def test_the_newest_retained_checkpoint_passes_with_no_rule_left_unchecked(retained, tmp_path):
    report = validate_snapshot(retained[-1], data_docs_dir=tmp_path / "docs", build_data_docs=False)
    assert report.passed, report.failed
    assert report.unknown == ()
    assets = {a.asset: a for a in report.assets}
    assert assets["tumbling.state.window-contents"].rows > 0 and assets["tumbling.timers"].rows > 0
    assert assets["session.sessions"].rows > 0
    assert assets["job.source_offsets"].evaluated == 1  # compared with the previous retained checkpoint


def test_the_runtime_metadata_turns_on_window_size_purge_row_count_and_watermark_rules(retained):
    plan = build_suites(load_snapshot(retained[-1]).metadata, previous_offsets={})
    tumbling = expectations_on(plan, "tumbling.state.window-contents")
    assert ("expect_column_values_to_be_in_set", "window_length") in tumbling  # window size from config.assigner
    assert ("expect_column_values_to_be_in_set", "window_phase") in tumbling
    assert ("expect_column_pair_values_a_to_be_greater_than_b", "cleanup_time") in tumbling  # lateness purge
    assert ("expect_table_row_count_to_equal", "") in tumbling  # config.state_rows
    assert ("expect_column_pair_values_a_to_be_greater_than_b", "event_timestamp") in expectations_on(
        plan, "tumbling.timers")  # watermarks.operators
    assert ("expect_column_pair_values_a_to_be_greater_than_b", "cleanup_time") in expectations_on(
        plan, "session.sessions")
    assert plan.unknown == []
    rows = next(e for e in plan.assets["tumbling.state.window-contents"].expectations
                if e.expectation_type == "expect_table_row_count_to_equal")
    recorded = load_snapshot(retained[-1]).metadata
    op = next(o for o in recorded.operators if o.uid == "tumbling")
    assert rows.value == op.config["state_rows"]["window-contents"] == sum(
        h.rows for _, h in op.files() if h.table == "keyed.window-contents")


def test_every_retained_checkpoint_of_the_job_passes(retained, tmp_path):
    for uri in retained:
        report = validate_snapshot(uri, build_data_docs=False, write_results=False)
        assert report.passed, (uri, report.failed)
