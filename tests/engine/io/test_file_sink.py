"""FileSink's two-phase commit: output is visible only after commit, and commit is idempotent.

Timeline of one checkpoint interval, as the runtime drives it::

    begin_transaction -> write ... write -> [barrier n] pre_commit(txn, n) -> handle in state n
                                           -> [checkpoint n complete] commit(handle)
"""

from __future__ import annotations

import pytest

from engine.errors import IllegalStateError, JobDefinitionError, UnsupportedFormatVersion
from engine.io import FileSink, committed_files, is_transactional, read_committed


def _sink(path, fmt="jsonl", subtask=0, **kw) -> FileSink:
    sink = FileSink(str(path), fmt, **kw)
    sink.open(subtask, 2)
    return sink


def _staged(path) -> list[str]:
    staging = path / "_staging"
    return sorted(p.relative_to(path).as_posix() for p in staging.rglob("*") if p.is_file()) if staging.exists() else []


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_values_become_visible_only_when_the_checkpoint_commits(tmp_path, fmt):
    sink = _sink(tmp_path, fmt)
    assert is_transactional(sink)
    txn = sink.begin_transaction()
    sink.write(txn, [{"k": "a", "n": 1}, {"k": "b", "n": 2}])
    sink.write(txn, [{"k": "a", "n": 3}])
    assert read_committed(str(tmp_path)) == []
    handle = sink.pre_commit(txn, 7)
    assert read_committed(str(tmp_path)) == []  # staged, still invisible
    assert len(_staged(tmp_path)) == 1
    sink.commit(handle)
    assert read_committed(str(tmp_path)) == [{"k": "a", "n": 1}, {"k": "b", "n": 2}, {"k": "a", "n": 3}]
    assert committed_files(str(tmp_path)) == [f"part-0000000007-00000-00000.{fmt}"]
    assert _staged(tmp_path) == []


def test_committing_a_committed_handle_again_is_a_no_op(tmp_path):
    sink = _sink(tmp_path)
    txn = sink.begin_transaction()
    sink.write(txn, [1, 2, 3])
    handle = sink.pre_commit(txn, 1)
    sink.commit(handle)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    sink.commit(handle)
    sink.recover_and_commit([handle])
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == before
    assert read_committed(str(tmp_path)) == [1, 2, 3]


def test_a_commit_cut_short_after_the_copy_is_finished_by_the_recommit_without_duplicates(tmp_path):
    sink = _sink(tmp_path, max_records_per_file=2)
    txn = sink.begin_transaction()
    sink.write(txn, ["a", "b", "c", "d", "e"])
    handle = sink.pre_commit(txn, 3)
    assert len(handle["files"]) == 3  # rolled at 2 records per file
    staged, final, _sha256, _size = handle["files"][0]
    (tmp_path / final).write_bytes((tmp_path / staged).read_bytes())  # the crash: copied, not yet deleted
    sink.commit(handle)
    assert read_committed(str(tmp_path)) == ["a", "b", "c", "d", "e"]


def test_recover_and_commit_after_a_crash_between_pre_commit_and_commit(tmp_path):
    r"""
    attempt 1: write, pre_commit(5) -> handle stored in checkpoint 5 -> checkpoint 5 completes -> CRASH (no commit)
    attempt 2: restore checkpoint 5 -> a fresh sink recovers the handle -> committed exactly once
    """
    crashed = _sink(tmp_path, "parquet", subtask=1)
    txn = crashed.begin_transaction()
    crashed.write(txn, [{"n": i} for i in range(4)])
    state_of_checkpoint_5 = {"pending": [crashed.pre_commit(txn, 5)]}
    # ... the process dies here; only the JSON checkpoint state survives
    import json

    restored_state = json.loads(json.dumps(state_of_checkpoint_5))
    fresh = _sink(tmp_path, "parquet", subtask=1)
    fresh.recover_and_commit(restored_state["pending"])
    fresh.recover_and_commit(restored_state["pending"])  # a second failure during recovery changes nothing
    assert read_committed(str(tmp_path)) == [{"n": i} for i in range(4)]
    assert committed_files(str(tmp_path)) == ["part-0000000005-00001-00000.parquet"]


def test_abort_drops_the_staged_output_and_recover_and_abort_is_idempotent(tmp_path):
    sink = _sink(tmp_path)
    txn = sink.begin_transaction()
    sink.write(txn, ["lost"])
    handle = sink.pre_commit(txn, 9)
    sink.abort(handle)
    sink.recover_and_abort([handle])
    assert _staged(tmp_path) == [] and read_committed(str(tmp_path)) == []
    with pytest.raises(IllegalStateError, match="staging folder was cleaned"):
        sink.commit(handle)


def test_an_open_transaction_can_be_aborted_before_it_was_pre_committed(tmp_path):
    sink = _sink(tmp_path, max_records_per_file=1)
    txn = sink.begin_transaction()
    sink.write(txn, ["x", "y"])  # both rolled into staged parts already
    assert len(_staged(tmp_path)) == 2
    sink.abort_transaction(txn)
    assert _staged(tmp_path) == []
    with pytest.raises(IllegalStateError):
        sink.write(txn, ["z"])


def test_orphaned_staging_of_dead_attempts_is_discarded_but_pending_handles_are_kept(tmp_path):
    sink = _sink(tmp_path, max_records_per_file=1)
    dead = sink.begin_transaction()
    sink.write(dead, ["from a dead attempt"])  # staged, never pre-committed: an orphan after a crash
    pending = sink.begin_transaction()
    sink.write(pending, ["pending"])
    handle = sink.pre_commit(pending, 4)
    assert sink.discard_orphaned_staging([handle]) == 1
    sink.recover_and_commit([handle])
    assert read_committed(str(tmp_path)) == ["pending"]


def test_final_names_depend_on_checkpoint_subtask_and_part_only_so_a_replay_overwrites(tmp_path):
    for attempt in range(2):  # the same transaction content committed by two attempts
        sink = _sink(tmp_path)
        txn = sink.begin_transaction()
        sink.write(txn, ["same"])
        sink.commit(sink.pre_commit(txn, 2))
    assert read_committed(str(tmp_path)) == ["same"]


def test_an_empty_transaction_commits_nothing(tmp_path):
    sink = _sink(tmp_path)
    txn = sink.begin_transaction()
    handle = sink.pre_commit(txn, 1)
    sink.commit(handle)
    assert handle["files"] == [] and committed_files(str(tmp_path)) == []


def test_at_least_once_mode_makes_writes_visible_at_once_and_replays_duplicate(tmp_path):
    sink = _sink(tmp_path, mode="at_least_once")
    txn = sink.begin_transaction()
    sink.write(txn, ["a"])
    assert read_committed(str(tmp_path)) == ["a"]
    sink.commit(sink.pre_commit(txn, 1))
    replay = sink.begin_transaction()
    sink.write(replay, ["a"])  # replayed after a failure
    assert read_committed(str(tmp_path)) == ["a", "a"]


def test_handles_from_an_unknown_format_version_or_another_sink_are_refused(tmp_path):
    sink = _sink(tmp_path)
    txn = sink.begin_transaction()
    handle = sink.pre_commit(txn, 1)
    with pytest.raises(UnsupportedFormatVersion):
        sink.commit({**handle, "format_version": 99})
    with pytest.raises(JobDefinitionError, match="`handle`"):
        sink.commit({"sink": "kafka"})


@pytest.mark.parametrize("kwargs, parameter", [
    ({"format": "csv"}, "format"), ({"mode": "sometimes"}, "mode"), ({"max_records_per_file": 0}, "max_records_per_file"),
])
def test_invalid_sink_definitions_are_refused_by_name(tmp_path, kwargs, parameter):
    with pytest.raises(JobDefinitionError, match=f"`{parameter}`"):
        FileSink(str(tmp_path), **kwargs)


def _committed_handle(tmp_path):
    sink = _sink(tmp_path, max_records_per_file=2)
    txn = sink.begin_transaction()
    sink.write(txn, ["a", "b", "c"])
    handle = sink.pre_commit(txn, 3)
    sink.commit(handle)
    return sink, handle


@pytest.mark.parametrize("edit", [
    "staged names a committed file",
    "final names another file",
    "final names another checkpoint's part",
    "staged leaves its transaction folder",
    "wrong subtask",
])
def test_an_edited_handle_is_refused_before_any_file_is_touched(tmp_path, edit):
    import copy

    from engine.errors import CorruptSnapshotError

    sink, handle = _committed_handle(tmp_path)
    before = {p.relative_to(tmp_path): p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    committed = sorted(k for k in before if str(k).startswith("part-"))
    bad = copy.deepcopy(handle)
    if edit == "staged names a committed file":
        bad["files"][1][0] = str(committed[0])  # old code: copied it elsewhere and deleted it
    elif edit == "final names another file":
        bad["files"][0][1] = "stolen.jsonl"
    elif edit == "final names another checkpoint's part":
        bad["files"][0][1] = bad["files"][0][1].replace("part-0000000003", "part-0000000001")
    elif edit == "staged leaves its transaction folder":
        bad["files"][0][0] = f"_staging/{handle['txn']}/../../{committed[0]}"
    else:
        bad["subtask"] = 7
    with pytest.raises(CorruptSnapshotError, match="refusing"):
        sink.recover_and_commit([handle, bad])
    with pytest.raises(CorruptSnapshotError):
        sink.abort(bad)
    assert {p.relative_to(tmp_path): p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


def test_a_part_whose_bytes_changed_is_refused_on_restore(tmp_path):
    from engine.errors import CorruptSnapshotError

    sink = _sink(tmp_path)
    txn = sink.begin_transaction()
    sink.write(txn, [1, 2, 3])
    handle = sink.pre_commit(txn, 1)  # pre-committed, the crash came before the commit
    staged = tmp_path / handle["files"][0][0]
    staged.write_bytes(staged.read_bytes().replace(b"2", b"9"))
    with pytest.raises(CorruptSnapshotError, match="sha256"):
        sink.recover_and_commit([handle])
    assert read_committed(str(tmp_path)) == []


def test_a_version_1_handle_without_checksums_still_commits(tmp_path):
    sink = _sink(tmp_path)
    txn = sink.begin_transaction()
    sink.write(txn, [1, 2])
    handle = sink.pre_commit(txn, 2)
    old = {**handle, "format_version": 1, "files": [entry[:2] for entry in handle["files"]]}
    sink.recover_and_commit([old])
    assert read_committed(str(tmp_path)) == [1, 2]


def test_discarding_orphans_also_removes_writes_a_killed_process_cut_short(tmp_path):
    sink = _sink(tmp_path)
    txn = sink.begin_transaction()
    sink.write(txn, [1, 2])
    sink.pre_commit(txn, 1)  # staged, never committed: an orphan once its process died
    cut_short = tmp_path / "_staging" / "00000-" / ".tmp-abc123"
    cut_short.parent.mkdir(parents=True)
    cut_short.write_bytes(b"half a part")
    assert sink.discard_orphaned_staging() == 2
    assert [p for p in (tmp_path / "_staging").rglob("*") if p.is_file()] == []
