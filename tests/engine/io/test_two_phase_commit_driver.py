"""Source offsets + a committing sink give exactly-once output across crashes (seed 002, "Recovery").

A miniature job without operators: read a generator split, write every record
to a FileSink through the TwoPhaseCommitDriver, checkpoint every few reads (the
checkpoint stores the offset Sn and the sink state), crash at a chosen step,
restore from the last completed checkpoint, and finish.  The committed output
must equal the failure-free run's, byte for byte.
"""

from __future__ import annotations

import json

import pytest

from engine.errors import IllegalStateError
from engine.io import FileSink, GeneratorSource, committed_files
from engine.io.two_phase_commit import TwoPhaseCommitDriver

SOURCE = GeneratorSource(events_per_split=600, num_keys=20, out_of_orderness_ms=100, seed=5)
SPLIT = SOURCE.discover_splits()[0]


class Crash(Exception):
    pass


def _run(path, crash_at: str | None, crash_step: int, completed: dict | None) -> dict | None:
    """Run until the end or the crash; returns the last completed checkpoint (offset, sink state, id)."""
    sink = FileSink(str(path), "jsonl", max_records_per_file=70)
    sink.open(0, 1)
    driver = TwoPhaseCommitDriver(sink)
    driver.initialize_state(completed["sink"] if completed else None)
    # parts staged by a dead attempt after the restored checkpoint are garbage now (recovered ones are committed)
    sink.discard_orphaned_staging()
    reader = SOURCE.create_reader(SPLIT, completed["offset"] if completed else None)
    checkpoint_id = completed["id"] if completed else 0
    step = 0
    while True:
        batch = reader.read(45)
        driver.invoke(batch.values)
        step += 1
        if crash_at == "mid-interval" and step == crash_step:
            raise Crash(completed)
        if batch.finished:
            driver.finish(checkpoint_id + 1)
            return None
        if step % 3 == 0:
            checkpoint_id += 1
            state = json.loads(json.dumps(driver.snapshot_state(checkpoint_id)))  # what storage keeps
            if crash_at == "before-completion" and step == crash_step:
                raise Crash(completed)
            completed = {"id": checkpoint_id, "offset": reader.current_offset(), "sink": state}
            if crash_at == "between-completion-and-commit" and step == crash_step:
                raise Crash(completed)
            driver.notify_checkpoint_complete(checkpoint_id)


def _output(path) -> dict[str, bytes]:
    return {name: (path / name).read_bytes() for name in committed_files(str(path))}


def _golden(tmp_path):
    golden = tmp_path / "golden"
    assert _run(golden, None, 0, None) is None
    return _output(golden)


@pytest.mark.parametrize("crash_at", ["mid-interval", "before-completion", "between-completion-and-commit"])
@pytest.mark.parametrize("crash_step", [3, 6, 7, 9])
def test_committed_output_after_a_crash_and_restore_equals_the_failure_free_output(tmp_path, crash_at, crash_step):
    golden = _golden(tmp_path)
    path = tmp_path / "run"
    completed = None
    try:
        _run(path, crash_at, crash_step, None)
    except Crash as crash:
        completed = crash.args[0]
    _run(path, None, 0, completed)
    assert _output(path) == golden
    assert not (path / "_staging").exists() or not any((path / "_staging").rglob("*.jsonl"))


def test_records_appear_once_each_in_the_committed_output(tmp_path):
    golden = _golden(tmp_path)
    lines = [json.loads(line) for data in golden.values() for line in data.decode().splitlines()]
    expected = SOURCE.create_reader(SPLIT).read(600).values
    assert lines == expected


def test_an_aborted_checkpoint_s_transaction_is_committed_by_the_next_completed_one(tmp_path):
    sink = FileSink(str(tmp_path), "jsonl")
    driver = TwoPhaseCommitDriver(sink)
    driver.initialize_state()
    driver.invoke(["one"])
    driver.snapshot_state(1)  # checkpoint 1 is aborted: never notified
    driver.invoke(["two"])
    driver.snapshot_state(2)
    assert driver.pending_checkpoint_ids == [1, 2]
    assert driver.notify_checkpoint_complete(2) == 2
    assert [f.split("-")[1] for f in committed_files(str(tmp_path))] == ["0000000001", "0000000002"]


def test_checkpoint_ids_must_increase_at_the_sink(tmp_path):
    driver = TwoPhaseCommitDriver(FileSink(str(tmp_path), "jsonl"))
    driver.initialize_state()
    driver.snapshot_state(4)
    with pytest.raises(IllegalStateError, match="increase"):
        driver.snapshot_state(4)


def test_each_subtask_s_writer_has_its_own_sink_copy_and_names_its_files_by_subtask(tmp_path):
    sink = FileSink(str(tmp_path), "jsonl")
    writers = [sink.create_writer(i, 2) for i in range(2)]
    for i, writer in enumerate(writers):
        writer.write([f"from {i}"])
    for writer in writers:
        writer.finish(1)
    assert committed_files(str(tmp_path)) == ["part-0000000001-00000-00000.jsonl",
                                              "part-0000000001-00001-00000.jsonl"]
    assert sink.subtask_index == 0 and [w.sink.subtask_index for w in writers] == [0, 1]


def test_a_started_writer_restored_from_state_commits_the_pending_handles_first(tmp_path):
    first = FileSink(str(tmp_path), "jsonl").create_writer()
    first.write(["kept"])
    state = first.snapshot_state(3)  # completed, then the process died before the commit
    restored = FileSink(str(tmp_path), "jsonl").create_writer()
    restored.initialize_state(state)
    restored.write(["after restore"])
    restored.finish(4)
    from engine.io import read_committed

    assert read_committed(str(tmp_path)) == ["kept", "after restore"]
