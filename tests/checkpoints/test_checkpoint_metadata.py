"""Every persisted document round-trips through JSON and refuses versions it cannot read (STYLE sections 4 and 9)."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from checkpoints import (
    CheckpointMetadata,
    CompletenessLedger,
    OperatorState,
    OperatorSubtaskState,
    RetainedCheckpoint,
    RetainedCheckpointsIndex,
    SnapshotProperties,
    SplitProgress,
    StateFileHandle,
    StatusDocument,
    UnsupportedFormatVersion,
    read_status,
    write_status,
)
from checkpoints.metadata import FORMAT_VERSION, seal
from checkpoints.state_files import decode_table, encode_table
from engine.errors import CorruptSnapshotError, JobDefinitionError

FULL = CheckpointMetadata(
    job_id="job-1",
    job_name="clicks per minute",
    checkpoint_id=42,
    properties=SnapshotProperties.checkpoint(retain_on_cancellation=False),
    trigger_timestamp_ms=1_700_000_000_000,
    complete_timestamp_ms=1_700_000_000_250,
    source_positions={"file-a.parquet": 1200, "file-b.parquet": {"row": 7, "file": "b"}},
    watermarks={"valve": {"channels": [{"watermark": 9000, "status": "ACTIVE"}]}, "output_ms": 9000},
    operators=(
        OperatorState(
            uid="window-1",
            name="tumbling sum",
            parallelism=2,
            max_parallelism=4,
            config={"assigner": "TumblingEventTimeWindows", "size_ms": 60000, "allowed_lateness_ms": 0},
            subtasks=(
                OperatorSubtaskState(0, (0, 1), (StateFileHandle("window-1/0/contents.parquet", 100, 3, "ab" * 32, "contents"),)),
                OperatorSubtaskState(1, (2, 3), (StateFileHandle("shared/" + "cd" * 32 + ".arrow", 50, 1, "cd" * 32,
                                                          "contents", "arrow", "window-1/kg2/contents"),)),
            ),
        ),
        OperatorState("source", "files", 1, 4, {}, (OperatorSubtaskState(0, None, ()),)),
    ),
    ledger=CompletenessLedger(
        splits={"file-a.parquet": SplitProgress(1200, 8000, 0), "file-b.parquet": SplitProgress(7, None, 30000)},
        late_records_dropped=3,
        late_records_side_output=1,
        oldest_open_window={"start": 60000, "end": 120000},
    ),
    validation={"status": "passed", "suite": "window-state", "run_id": "r1"},
)


def test_metadata_round_trips_every_field():
    again = CheckpointMetadata.from_json(FULL.to_json())
    assert again == FULL
    assert again.to_json() == FULL.to_json()
    assert json.loads(FULL.to_json())["format_version"] == FORMAT_VERSION == "1.1"


def test_metadata_answers_questions_about_itself():
    assert FULL.total_bytes() == 150
    assert FULL.referenced_paths() == {"window-1/0/contents.parquet", "shared/" + "cd" * 32 + ".arrow"}
    assert FULL.validation_passed()
    assert not FULL.with_validation({"status": "failed"}).validation_passed()
    assert FULL.operator("source").is_keyed() is False
    with pytest.raises(KeyError, match="has no operator 'nope' \\(has: window-1, source\\)"):
        FULL.operator("nope")


@pytest.mark.parametrize("version", ["2.0", "0.9", "10.1"])
def test_other_major_versions_are_refused(version):
    doc = json.loads(FULL.to_json())
    doc["format_version"] = version
    with pytest.raises(UnsupportedFormatVersion, match=f"format_version '{version}'"):
        CheckpointMetadata.from_json(json.dumps(doc))


def test_a_mistyped_field_is_refused_naming_it():
    doc = json.loads(FULL.to_json())
    doc["operators"][0]["parallelism"] = "2"
    with pytest.raises(CorruptSnapshotError, match=r"_metadata.operators\[0\] field 'parallelism' must be int"):
        CheckpointMetadata.from_json(seal(doc))  # sealed again: a tool's mistake, not a hand edit
    doc = json.loads(FULL.to_json())
    doc["operators"][0]["subtasks"][0]["files"][0]["path"] = "../../etc/passwd"
    with pytest.raises(CorruptSnapshotError, match="must be relative and stay inside the snapshot"):
        CheckpointMetadata.from_json(seal(doc))
    with pytest.raises(CorruptSnapshotError, match="changed after it was written"):  # the same edit by hand
        CheckpointMetadata.from_json(json.dumps(doc))


def test_savepoint_properties_are_forced_and_never_discarded():
    props = SnapshotProperties.savepoint()
    assert (props.forced, props.externalized, props.discard_on) == (True, True, ())
    with pytest.raises(JobDefinitionError, match="must be empty for a savepoint"):
        SnapshotProperties("savepoint", True, True, ("subsumed",))
    with pytest.raises(JobDefinitionError, match="`type` must be one of"):
        SnapshotProperties("snapshot")


def test_index_and_status_documents_round_trip_and_refuse_unknown_versions(tmp_path):
    index = RetainedCheckpointsIndex("job-1", 7, "writer", 123, (RetainedCheckpoint(5, "job-1/chk-5/_metadata", 99, 10),), 6)
    assert RetainedCheckpointsIndex.from_json(index.to_json()) == index
    status = StatusDocument("job-1", 1000, "RUNNING", 12, 5, 999, 8000, 250, 1234.5,
                            ({"time_ms": 900, "kind": "checkpoint", "message": "declined"},), {"epoch_ms": 30})
    assert StatusDocument.from_json(status.to_json()) == status
    from checkpoints import LocalFileSystemStore

    store = LocalFileSystemStore(tmp_path)
    assert read_status(store, "job-1") is None
    write_status(store, status)
    assert read_status(store, "job-1") == status
    doc = json.loads(status.to_json())
    doc["format_version"] = "3.0"
    with pytest.raises(UnsupportedFormatVersion):
        StatusDocument.from_json(json.dumps(doc))


@pytest.mark.parametrize("file_format", ["parquet", "arrow"])
def test_state_files_round_trip_and_detect_every_kind_of_damage(file_format):
    table = pa.table({"key": ["a", "b"], "value": [1.5, 2.5]})
    encoded = encode_table(table, file_format)
    handle = StateFileHandle("op/0/s." + file_format, encoded.size, 2, encoded.sha256, "s", file_format)
    assert decode_table(encoded.data, handle, "obj").equals(table)
    with pytest.raises(CorruptSnapshotError, match="obj is truncated"):
        decode_table(encoded.data[:-1], handle, "obj")
    flipped = bytearray(encoded.data)
    flipped[10] ^= 1
    with pytest.raises(CorruptSnapshotError, match="obj fails its checksum"):
        decode_table(bytes(flipped), handle, "obj")
    import dataclasses

    with pytest.raises(CorruptSnapshotError, match="has 2 rows, _metadata records 3"):
        decode_table(encoded.data, dataclasses.replace(handle, rows=3), "obj")
    with pytest.raises(JobDefinitionError, match="`file_format` must be one of"):
        encode_table(table, "csv")


def test_equal_tables_encode_to_equal_bytes_which_incremental_checkpoints_rely_on():
    make = lambda: pa.table({"key_group": pa.array([1, 1], pa.int32()), "v": ["x", "y"]})  # noqa: E731
    assert encode_table(make()).sha256 == encode_table(make()).sha256


def test_nothing_holds_a_state_files_bytes_once_it_is_decoded():
    """A CLI restore refused by validation died of SIGABRT at exit about one run in eight: Arrow's scan threads
    still held the state file's buffer and released it while the interpreter was finalizing (``terminate called
    without an active exception``).  Once ``decode_table`` returns, no thread may hold the bytes."""
    import sys

    table = pa.table({"key": [f"k{i}" for i in range(20_000)], "value": [i / 3 for i in range(20_000)]})
    encoded = encode_table(table, "parquet")
    handle = StateFileHandle("op/0/s.parquet", encoded.size, table.num_rows, encoded.sha256, "s", "parquet")
    data = encoded.data
    baseline = sys.getrefcount(data)
    still_held = 0
    for _ in range(200):
        decoded = decode_table(data, handle, "obj")
        still_held += sys.getrefcount(data) != baseline
        del decoded
    assert still_held == 0, f"a thread still held the bytes after {still_held} of 200 decodes"
