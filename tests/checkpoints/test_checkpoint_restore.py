"""Restore validates everything first and refuses a bad snapshot naming the object and the problem; no partial restore."""

from __future__ import annotations

import dataclasses
import json

import pandas as pd
import pytest
from ckpt_helpers import MAX_PARALLELISM, write_checkpoint

from checkpoints import (
    CheckpointStorage,
    CorruptSnapshotError,
    OperatorSubtaskState,
    SnapshotNotFound,
    UnsupportedFormatVersion,
    load_snapshot,
    load_snapshot_from,
)
from checkpoints.metadata import seal
from engine.state.key_groups import KeyGroupRange


@pytest.fixture
def written(backend):
    storage = CheckpointStorage(backend.store, "job-r")
    metadata, location = write_checkpoint(storage, 5, versions={3: 7})
    return backend, storage, metadata, location


def snapshot_uri(backend, folder: str) -> str:
    return backend.store.key_uri(folder)


def test_a_good_snapshot_loads_by_uri_and_gives_state_per_operator_as_arrow_and_pandas(written):
    backend, storage, metadata, _ = written
    snapshot = load_snapshot(snapshot_uri(backend, "job-r/chk-5"), expected_job_id="job-r", **backend.uri_options())
    assert snapshot.metadata == metadata
    assert snapshot.operator_uids() == ["window-op"]
    frames = snapshot.state_frames("window-op")
    assert set(frames) == {"contents", "timers"}
    contents = frames["contents"]
    assert isinstance(contents, pd.DataFrame)
    assert len(contents) == MAX_PARALLELISM * 5
    assert set(contents.loc[contents.key_group == 3, "value"]) == {f"7:{i}" for i in range(5)}
    # a trailing /_metadata is accepted too
    again = load_snapshot(snapshot_uri(backend, "job-r/chk-5/_metadata"), **backend.uri_options())
    assert again.metadata.checkpoint_id == 5


def test_a_rescaled_subtask_reads_only_its_key_groups(written):
    backend, _, _, _ = written
    snapshot = load_snapshot_from(backend.store, "job-r/chk-5")
    tables = snapshot.state_tables("window-op", KeyGroupRange(2, 5))
    assert sorted(set(tables["contents"].column("key_group").to_pylist())) == [2, 3, 4, 5]


def refused(backend, folder="job-r/chk-5", **kwargs) -> str:
    with pytest.raises(CorruptSnapshotError) as err:
        load_snapshot_from(backend.store, folder, **kwargs)
    return str(err.value)


def first_state_key(backend, metadata, incremental=True):
    handle = next(h for _, _, h in metadata.files() if (h.incremental_key is not None) == incremental)
    if handle.path.startswith("shared/"):
        return handle, "job-r/shared/" + handle.path[len("shared/"):]
    return handle, "job-r/chk-5/" + handle.path


def test_a_missing_state_file_is_refused_naming_it(written):
    backend, _, metadata, _ = written
    _, key = first_state_key(backend, metadata, incremental=False)
    backend.store.delete(key)
    message = refused(backend)
    assert key in message and "is missing" in message and "nothing was restored" in message


def test_a_truncated_state_file_is_refused_with_both_sizes(written):
    backend, _, metadata, _ = written
    handle, key = first_state_key(backend, metadata)
    backend.store.put_bytes(key, backend.store.get_bytes(key)[:-10])
    message = refused(backend)
    assert key in message and "truncated" in message
    assert f"{handle.bytes - 10} bytes, _metadata records {handle.bytes}" in message


def test_a_tampered_state_file_of_the_right_size_fails_its_checksum(written):
    backend, _, metadata, _ = written
    handle, key = first_state_key(backend, metadata)
    data = bytearray(backend.store.get_bytes(key))
    data[len(data) // 2] ^= 0xFF
    backend.store.put_bytes(key, bytes(data))
    message = refused(backend)
    assert key in message and "fails its checksum" in message and handle.sha256 in message


def test_an_unknown_major_format_version_is_refused(written):
    backend, _, metadata, _ = written
    doc = json.loads(metadata.to_json())
    doc["format_version"] = "2.0"
    backend.store.put_bytes("job-r/chk-5/_metadata", seal(doc))
    with pytest.raises(UnsupportedFormatVersion, match="format_version '2.0'.*major version 1"):
        load_snapshot_from(backend.store, "job-r/chk-5")
    doc["format_version"] = "1.3"  # a newer minor version only adds optional fields: accepted
    backend.store.put_bytes("job-r/chk-5/_metadata", seal(doc))
    assert load_snapshot_from(backend.store, "job-r/chk-5").metadata.format_version == "1.3"


def test_a_snapshot_of_another_job_is_refused(written):
    backend, _, _, _ = written
    message = refused(backend, expected_job_id="other-job")
    assert "belongs to job 'job-r', not 'other-job'" in message


def rewrite_ranges(backend, metadata, ranges):
    op = metadata.operators[0]
    subtasks = tuple(OperatorSubtaskState(s.subtask, r, s.files) for s, r in zip(op.subtasks, ranges))
    changed = dataclasses.replace(metadata, operators=(dataclasses.replace(op, subtasks=subtasks),))
    backend.store.put_bytes("job-r/chk-5/_metadata", changed.to_json())


def test_key_group_ranges_with_a_gap_are_refused(written):
    backend, _, metadata, _ = written
    rewrite_ranges(backend, metadata, [(0, 2), (4, 7)])
    message = refused(backend)
    assert "operator 'window-op'" in message and "key groups [3, 3] uncovered" in message


def test_key_group_ranges_that_overlap_are_refused(written):
    backend, _, metadata, _ = written
    rewrite_ranges(backend, metadata, [(0, 4), (3, 7)])
    assert "covers key groups [3, 4] twice" in refused(backend)


def test_key_group_ranges_that_stop_short_are_refused(written):
    backend, _, metadata, _ = written
    rewrite_ranges(backend, metadata, [(0, 3), (4, 6)])
    assert "[7, 7] uncovered (gap at the end)" in refused(backend)


def test_a_folder_without_metadata_is_not_a_snapshot(written):
    backend, _, _, _ = written
    backend.store.delete("job-r/chk-5/_metadata")
    with pytest.raises(SnapshotNotFound, match="never completed"):
        load_snapshot_from(backend.store, "job-r/chk-5")
    with pytest.raises(FileNotFoundError):
        load_snapshot_from(backend.store, "job-r/chk-99")


def test_metadata_that_is_not_json_or_lacks_fields_is_refused_naming_the_field(written):
    backend, _, metadata, _ = written
    backend.store.put_bytes("job-r/chk-5/_metadata", b"\x00garbage")
    assert "not valid JSON" in refused(backend)
    doc = json.loads(metadata.to_json())
    del doc["operators"][0]["subtasks"][0]["files"][0]["sha256"]
    backend.store.put_bytes("job-r/chk-5/_metadata", seal(doc))
    assert "operators[0].subtasks[0].files[0] lacks field 'sha256'" in refused(backend)


def test_a_savepoint_that_points_into_shared_is_refused_as_not_self_contained(written):
    backend, storage, metadata, _ = written
    savepoint, location = write_checkpoint(storage, 6, savepoint=True, incremental=False)
    shared_path = next(h.path for _, _, h in metadata.files() if h.path.startswith("shared/"))
    op = savepoint.operators[0]
    first = op.subtasks[0]
    bad_file = dataclasses.replace(first.files[0], path=shared_path)
    bad = dataclasses.replace(savepoint, operators=(dataclasses.replace(
        op, subtasks=(OperatorSubtaskState(first.subtask, first.key_group_range, (bad_file,) + first.files[1:]),) + op.subtasks[1:]),))
    backend.store.put_bytes(location.snapshot_dir + "_metadata", bad.to_json())
    assert "not self-contained" in refused(backend, location.snapshot_dir)


def test_several_problems_are_reported_together(written):
    backend, _, metadata, _ = written
    paths = [h.path for _, _, h in metadata.files() if not h.path.startswith("shared/")]
    for p in paths[:2]:
        backend.store.delete("job-r/chk-5/" + p)
    assert "2 problems" in refused(backend)


def test_large_state_files_are_verified_in_ranged_chunks_with_the_same_refusals(written, monkeypatch):
    import checkpoints.restore as restore

    backend, _, metadata, _ = written
    monkeypatch.setattr(restore, "_WHOLE_READ_LIMIT", 0)
    assert load_snapshot_from(backend.store, "job-r/chk-5").metadata == metadata
    handle, key = first_state_key(backend, metadata)
    data = bytearray(backend.store.get_bytes(key))
    data[-3] ^= 0xFF
    backend.store.put_bytes(key, bytes(data))
    assert "fails its checksum" in refused(backend)
