"""Incremental checkpoints with delta files: only changed rows are uploaded, restore applies the chain,
and retention keeps every file of a chain a retained checkpoint uses."""

from __future__ import annotations

import dataclasses

import pyarrow as pa
import pytest
from ckpt_helpers import state_table, write_checkpoint

from checkpoints import (
    CheckpointStorage,
    CorruptSnapshotError,
    OperatorSubtaskState,
    RetainedCheckpointStore,
    load_snapshot_from,
    read_index,
)
from engine.errors import IllegalStateError, JobDefinitionError

MERGE_KEY = ("key_group", "key")


def changes(rows: list[tuple[str, str, bool]]) -> pa.Table:
    return pa.table({
        "key_group": pa.array([0] * len(rows), pa.int32()),
        "key": [r[0] for r in rows],
        "value": [r[1] for r in rows],
        "_deleted": [r[2] for r in rows],
    })


def with_chain(metadata, location_chain_for_kg0):
    """The metadata with key group 0's file replaced by a chain."""
    op = metadata.operators[0]
    first = op.subtasks[0]
    files = tuple(h for h in first.files if h.incremental_key != "window-op/kg0/contents")
    sub = OperatorSubtaskState(first.subtask, first.key_group_range, tuple(location_chain_for_kg0) + files)
    return dataclasses.replace(metadata, operators=(dataclasses.replace(op, subtasks=(sub,) + op.subtasks[1:]),))


def test_a_delta_uploads_only_the_changes_and_restore_applies_the_chain(backend):
    storage = CheckpointStorage(backend.store, "job-d")
    completed = RetainedCheckpointStore(storage, retained=2)
    m1, _ = write_checkpoint(storage, 1)
    completed.add_checkpoint(m1)
    chain1 = [h for _, _, h in m1.files() if h.incremental_key == "window-op/kg0/contents"]

    # checkpoint 2: in key group 0, k0-1 changes, k0-2 is removed, k0-9 is new; all else unchanged
    m2, loc2 = write_checkpoint(storage, 2, known_shared=completed.shared_files_in_use())
    location = storage.initialize_location(2, known_shared=completed.shared_files_in_use())
    chain2 = location.write_state_changes(
        "window-op", 0, "contents", changes([("k0-1", "new", False), ("k0-2", "", True), ("k0-9", "x", False)]),
        previous=chain1, merge_key=MERGE_KEY, incremental_key="window-op/kg0/contents",
    )
    assert chain2[:-1] == tuple(chain1) and chain2[-1].kind == "delta" and chain2[-1].rows == 3
    assert location.uploaded_bytes == chain2[-1].bytes
    m2 = with_chain(m2, chain2)
    backend.store.put_bytes("job-d/chk-2/_metadata", m2.to_json())
    completed.add_checkpoint(m2)

    # checkpoint 3 subsumes checkpoint 1: the full base file is still needed by checkpoint 2's chain
    m3, _ = write_checkpoint(storage, 3, known_shared=completed.shared_files_in_use())
    completed.add_checkpoint(m3)
    assert read_index(backend.store, "job-d").index.ids() == [2, 3]

    snapshot = load_snapshot_from(backend.store, "job-d/chk-2", expected_job_id="job-d")
    contents = snapshot.state_tables("window-op")["contents"].to_pandas()
    group0 = dict(zip(contents.loc[contents.key_group == 0, "key"], contents.loc[contents.key_group == 0, "value"]))
    assert group0 == {"k0-0": "0:0", "k0-1": "new", "k0-3": "0:3", "k0-4": "0:4", "k0-9": "x"}
    assert len(contents) == 8 * 5 + 1 - 1  # one added, one removed
    assert (contents.key_group == 1).sum() == 5


def test_a_delta_without_its_full_file_is_refused(backend):
    storage = CheckpointStorage(backend.store, "job-d2")
    m1, _ = write_checkpoint(storage, 1)
    chain1 = [h for _, _, h in m1.files() if h.incremental_key == "window-op/kg0/contents"]
    m2, _ = write_checkpoint(storage, 2)
    location = storage.initialize_location(2)
    chain = location.write_state_changes("window-op", 0, "contents", changes([("k0-1", "v", False)]),
                                         previous=chain1, merge_key=MERGE_KEY, incremental_key="window-op/kg0/contents")
    backend.store.put_bytes("job-d2/chk-2/_metadata", with_chain(m2, chain[1:]).to_json())
    with pytest.raises(CorruptSnapshotError, match="delta file .* has no full file of state 'contents'"):
        load_snapshot_from(backend.store, "job-d2/chk-2")


def test_write_state_changes_checks_its_arguments(tmp_path):
    from checkpoints import LocalFileSystemStore

    storage = CheckpointStorage(LocalFileSystemStore(tmp_path), "job-d3")
    m1, _ = write_checkpoint(storage, 1)
    chain1 = [h for _, _, h in m1.files() if h.incremental_key == "window-op/kg0/contents"]
    location = storage.initialize_location(2)
    with pytest.raises(JobDefinitionError, match="`merge_key` must name columns of `changes`"):
        location.write_state_changes("window-op", 0, "contents", state_table(0, 1), previous=chain1,
                                     merge_key=("nope",), incremental_key="window-op/kg0/contents")
    with pytest.raises(IllegalStateError, match="must be the shared chain"):
        location.write_state_changes("window-op", 0, "contents", state_table(0, 1), previous=chain1,
                                     merge_key=MERGE_KEY, incremental_key="other")
    with pytest.raises(IllegalStateError, match="savepoints are self-contained"):
        storage.initialize_savepoint_location(3).write_state_changes(
            "window-op", 0, "contents", state_table(0, 1), previous=chain1, merge_key=MERGE_KEY,
            incremental_key="window-op/kg0/contents")
