"""``validate --job``: the same job restores; a changed job is refused with each incompatibility named."""

from __future__ import annotations

import dataclasses

from checkpoints import CheckpointMetadata
from checkpoints.validation.compatibility import check_compatibility, expected_state_kinds, job_operators


def test_the_job_that_wrote_the_snapshot_can_restore_it(healthy_uri):
    report = check_compatibility(healthy_uri, "validation_jobs:build")
    assert report.compatible, report.problems
    assert sorted(report.matched) == ["count", "session", "tumbling"]
    assert report.unknown == ()


def test_a_changed_assigner_aggregate_parallelism_and_a_dropped_operator_are_each_named(healthy_uri):
    report = check_compatibility(healthy_uri, "validation_jobs:build_changed")
    kinds = sorted((p.kind, p.operator) for p in report.problems)
    assert ("assigner", "tumbling") in kinds
    assert ("aggregate", "tumbling") in kinds
    assert ("max-parallelism", "tumbling") in kinds and ("max-parallelism", "count") in kinds
    assert ("unrestored-state", "session") in kinds
    assigner = next(p for p in report.problems if p.kind == "assigner")
    assert assigner.snapshot["kind"] == "tumbling_event_time" and assigner.job["kind"] == "sliding_event_time"
    assert not report.compatible


def test_a_renamed_uid_leaves_state_unrestored_unless_allowed(healthy_uri):
    report = check_compatibility(healthy_uri, "validation_jobs:build_same_new_name")
    assert [(p.kind, p.operator) for p in report.problems] == [("unrestored-state", "session")]
    assert report.new_operators == ("sessions-v2",)
    assert check_compatibility(healthy_uri, "validation_jobs:build_same_new_name",
                               allow_non_restored_state=True).compatible


def test_metadata_without_assigner_or_function_gives_unknown_not_compatible_by_guess(healthy_uri):
    from checkpoints import load_snapshot

    snap = load_snapshot(healthy_uri)
    bare = dataclasses.replace(snap.metadata, operators=tuple(
        dataclasses.replace(op, config={}) for op in snap.metadata.operators))
    snap.metadata = CheckpointMetadata.from_json(bare.to_json())
    report = check_compatibility(snap, "validation_jobs:build")
    assert any("assigner kind unknown" in u and "'tumbling'" in u for u in report.unknown)
    assert any("aggregate kind unknown" in u for u in report.unknown)


def test_window_operator_state_kinds_follow_the_window_function_and_trigger():
    ops = job_operators("validation_jobs:build")
    assert expected_state_kinds(ops["tumbling"].config) == {"window-contents": "aggregating"}
    assert expected_state_kinds(ops["count"].config) == {"window-contents": "aggregating", "count": "reducing"}
    assert expected_state_kinds(ops["session"].config) == {"window-contents": "aggregating",
                                                           "merging-window-set": "list"}
