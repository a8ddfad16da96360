"""Savepoints: self-contained, relocatable, never subsumed; their history policy runs only on request."""

from __future__ import annotations

import pytest
from ckpt_helpers import complete_checkpoint, keys, write_checkpoint

from checkpoints import (
    CheckpointStorage,
    RetainedCheckpointStore,
    SavepointHistoryPolicy,
    apply_savepoint_policy,
    copy_snapshot,
    list_savepoints,
    load_snapshot,
    load_snapshot_from,
    record_validation,
    savepoint_from_checkpoint,
)
from engine.errors import CorruptSnapshotError, JobDefinitionError


def test_a_savepoint_copied_to_another_prefix_restores_from_the_copy_after_the_original_is_gone(backend):
    savepoint_store = backend.make("savepoints")
    storage = CheckpointStorage(backend.store, "job-s", savepoint_store=savepoint_store)
    metadata, location = write_checkpoint(storage, 9, savepoint=True, versions={1: 3})
    assert not any(p.startswith("shared/") for p in metadata.referenced_paths())
    original = load_snapshot(location.uri, expected_job_id="job-s", **backend.uri_options())
    original_contents = original.state_tables("window-op")["contents"]
    elsewhere = backend.make("moved/far/away")
    copied = copy_snapshot(savepoint_store, location.snapshot_dir, elsewhere, "restored/sp")
    assert copied == len(list(elsewhere.list("restored/sp/")))
    for info in list(savepoint_store.list(location.snapshot_dir)):
        savepoint_store.delete(info.key)
    restored = load_snapshot(elsewhere.key_uri("restored/sp"), expected_job_id="job-s", **backend.uri_options())
    assert restored.metadata == original.metadata
    assert restored.state_tables("window-op")["contents"].equals(original_contents)


def test_a_savepoint_made_from_an_incremental_checkpoint_copies_its_shared_files_in(backend):
    savepoint_store = backend.make("savepoints")
    storage = CheckpointStorage(backend.store, "job-s2", savepoint_store=savepoint_store)
    completed = RetainedCheckpointStore(storage, retained=1)
    checkpoint, _ = complete_checkpoint(storage, completed, 1, versions={2: 5})
    assert any(p.startswith("shared/") for p in checkpoint.referenced_paths())
    uri = savepoint_from_checkpoint(storage, checkpoint, suffix="abc123")
    assert uri.endswith("job-s2/savepoint-1-abc123")
    # checkpoint retention later deletes the checkpoint and its shared files: the savepoint is not affected
    complete_checkpoint(storage, completed, 2, versions={2: 6})
    complete_checkpoint(storage, completed, 3, versions={2: 7})
    savepoint = load_snapshot(uri, expected_job_id="job-s2", **backend.uri_options())
    assert savepoint.metadata.is_savepoint()
    assert not any(p.startswith("shared/") for p in savepoint.metadata.referenced_paths())
    frame = savepoint.state_frames("window-op")["contents"]
    assert set(frame.loc[frame.key_group == 2, "value"]) == {f"5:{i}" for i in range(5)}


def test_copying_a_checkpoint_that_references_shared_files_is_refused(backend):
    storage = CheckpointStorage(backend.store, "job-s3")
    _, location = write_checkpoint(storage, 1)
    with pytest.raises(CorruptSnapshotError, match="make a savepoint to relocate it"):
        copy_snapshot(backend.store, location.snapshot_dir, backend.make("x"), "copy")


def make_savepoints(backend, validated: set[int]):
    savepoint_store = backend.make("savepoints")
    storage = CheckpointStorage(backend.store, "job-p", savepoint_store=savepoint_store)
    for n in range(1, 6):
        _, location = write_checkpoint(storage, n, savepoint=True, incremental=False, now_ms=0)
        if n in validated:
            record_validation(savepoint_store, location.snapshot_dir, {"status": "passed", "suite": "s"})
    return savepoint_store


def test_the_policy_keeps_the_newest_n_and_the_newest_validated_one(backend):
    # completed at 1010, 2010, ... 5010 ms; only savepoint 2 passed validation
    savepoint_store = make_savepoints(backend, validated={2})
    policy = SavepointHistoryPolicy(max_count=2)
    planned = apply_savepoint_policy(savepoint_store, "job-p", policy, now_ms=10_000, dry_run=True)
    assert [s.checkpoint_id for s in planned] == [1, 3]
    assert len(list_savepoints(savepoint_store, "job-p")) == 5, "dry run deletes nothing"
    deleted = apply_savepoint_policy(savepoint_store, "job-p", policy, now_ms=10_000)
    assert [s.checkpoint_id for s in deleted] == [1, 3]
    assert [s.checkpoint_id for s in list_savepoints(savepoint_store, "job-p")] == [2, 4, 5]
    assert not any("savepoint-1-" in k or "savepoint-3-" in k for k in keys(savepoint_store))


def test_the_policy_by_age_removes_old_savepoints_but_not_the_newest_validated(backend):
    savepoint_store = make_savepoints(backend, validated={1})
    deleted = apply_savepoint_policy(savepoint_store, "job-p", SavepointHistoryPolicy(max_age_ms=2_500), now_ms=5_100)
    assert [s.checkpoint_id for s in deleted] == [2]
    assert [s.checkpoint_id for s in list_savepoints(savepoint_store, "job-p")] == [1, 3, 4, 5]


def test_checkpoint_retention_never_touches_savepoints(backend):
    storage = CheckpointStorage(backend.store, "job-q")  # savepoints in the same root, same job folder
    write_checkpoint(storage, 1, savepoint=True, incremental=False)
    completed = RetainedCheckpointStore(storage, retained=1)
    for n in range(2, 6):
        complete_checkpoint(storage, completed, n)
    assert [s.checkpoint_id for s in list_savepoints(backend.store, "job-q")] == [1]
    assert load_snapshot_from(backend.store, list_savepoints(backend.store, "job-q")[0].folder)


def test_recording_a_validation_outcome_rewrites_only_that_field(backend):
    storage = CheckpointStorage(backend.store, "job-v")
    metadata, location = write_checkpoint(storage, 1, savepoint=True, incremental=False)
    updated = record_validation(backend.store, location.snapshot_dir, {"status": "failed", "failed": ["schema"]})
    assert updated == metadata.with_validation({"status": "failed", "failed": ["schema"]})
    assert load_snapshot_from(backend.store, location.snapshot_dir).metadata.validation["status"] == "failed"


def test_a_policy_needs_positive_limits():
    with pytest.raises(JobDefinitionError, match="`max_count` must be None or an int >= 1; got 0"):
        SavepointHistoryPolicy(max_count=0)
    with pytest.raises(JobDefinitionError, match="`max_age_ms`"):
        SavepointHistoryPolicy(max_age_ms=-5)
