"""The desired-state document and the choice of a restore point (pure: candidates in, decision out)."""

from __future__ import annotations

import pytest

from checkpoints.backends import open_store
from checkpoints.desired_state import DesiredState, JobState, read_desired_state, write_desired_state
from checkpoints.layout import desired_state_key
from checkpoints.restore_points import NoRestorePoint, RestoreCandidate, choose_restore_point
from engine.errors import CorruptSnapshotError, UnsupportedFormatVersion


def test_the_desired_state_round_trips_and_is_absent_until_recorded(tmp_path) -> None:
    store = open_store(tmp_path.as_uri())
    assert read_desired_state(store, "job") is None
    desired = DesiredState("job", JobState.SUSPENDED, 1_700_000_000_000, "cli", "stopped with a savepoint",
                           "file:///sp/job/savepoint-3-ab")
    write_desired_state(store, desired)
    assert read_desired_state(store, "job") == desired


@pytest.mark.parametrize(("text", "error", "match"), [
    (b'{"format_version":"1.0","job_id":"job","state":"paused","changed_ms":1,"changed_by":"x"}',
     CorruptSnapshotError, "state must be one of"),
    (b'{"format_version":"2.0","job_id":"job","state":"running","changed_ms":1,"changed_by":"x"}',
     UnsupportedFormatVersion, "format_version"),
    (b'{"format_version":"1.0","job_id":"job","state":"running","changed_by":"x"}',
     CorruptSnapshotError, "changed_ms"),
    (b"not json", CorruptSnapshotError, "not valid JSON"),
])
def test_a_malformed_desired_state_is_refused_with_the_reason(tmp_path, text, error, match) -> None:
    store = open_store(tmp_path.as_uri())
    store.put_bytes(desired_state_key("job"), text)
    with pytest.raises(error, match=match):
        read_desired_state(store, "job")


def chk(checkpoint_id: int, completed_ms: int) -> RestoreCandidate:
    return RestoreCandidate(f"s3://b/chk/job/chk-{checkpoint_id}", "checkpoint", checkpoint_id, completed_ms)


def sp(checkpoint_id: int, completed_ms: int, validated: bool | None = None) -> RestoreCandidate:
    return RestoreCandidate(f"s3://b/sp/job/savepoint-{checkpoint_id}-x", "savepoint", checkpoint_id, completed_ms,
                            validated)


def test_the_newest_by_completion_time_wins_even_with_a_lower_id() -> None:
    # a stop savepoint of a restored run: its id is lower than an older run's retained checkpoint
    candidates = [chk(18, 1_000), chk(19, 2_000), sp(12, 3_000), sp(18, 500, validated=True)]
    point = choose_restore_point("job", candidates, lambda c: None)
    assert (point.kind, point.checkpoint_id, point.passed_over) == ("savepoint", 12, ())


def test_refused_candidates_are_passed_over_newest_first_with_their_reasons() -> None:
    candidates = [chk(5, 1_000), chk(6, 2_000), sp(7, 3_000, validated=False), sp(8, 4_000)]
    broken = {"s3://b/sp/job/savepoint-8-x": "drained (operator window: MAX_WATERMARK)",
              "s3://b/chk/job/chk-6": "does not load: checksum mismatch"}
    point = choose_restore_point("job", candidates, lambda c: broken.get(c.uri))
    assert point.uri == "s3://b/chk/job/chk-5"
    assert [p.split(" (")[0] for p in point.passed_over] == ["savepoint 8", "savepoint 7", "checkpoint 6"]
    assert "drained" in point.passed_over[0] and "validation failed" in point.passed_over[1]
    assert "checksum" in point.passed_over[2]


def test_no_restorable_candidate_names_every_one_passed_over() -> None:
    with pytest.raises(NoRestorePoint, match="checkpoint 1") as refused:
        choose_restore_point("job", [chk(1, 10)], lambda c: "does not load: gone")
    assert len(refused.value.passed_over) == 1
    with pytest.raises(NoRestorePoint, match="none exists"):
        choose_restore_point("job", [], lambda c: None)


def test_on_equal_completion_times_the_self_contained_savepoint_comes_first() -> None:
    point = choose_restore_point("job", [chk(9, 5_000), sp(9, 5_000)], lambda c: None)
    assert point.kind == "savepoint"
