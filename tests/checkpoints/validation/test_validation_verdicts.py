"""A healthy snapshot passes; each corruption fails with the expectation that checks it named by GX."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from checkpoints import load_snapshot
from checkpoints.validation import validate_snapshot
from validation_state import fed_routers
from snapshot_writer import write_snapshot

WINDOW_CONTENTS = "keyed.window-contents"


def validate(uri, **kwargs):
    kwargs.setdefault("build_data_docs", False)
    return validate_snapshot(uri, **kwargs)


def replace_rows(table: pa.Table, row: int, **columns) -> pa.Table:
    """``table`` with the values of ``columns`` replaced in one row (schema and metadata kept)."""
    out = table
    for name, value in columns.items():
        values = out.column(name).to_pylist()
        values[row] = value
        out = out.set_column(out.schema.get_field_index(name), out.schema.field(name),
                             pa.array(values, out.schema.field(name).type))
    return out


def corrupt_first(uid: str, table_name: str, change):
    """An ``edit`` for write_snapshot that changes ``table_name`` of ``uid`` in the first subtask that has rows."""
    done = []

    def edit(op, subtask, name, table):
        if op == uid and name == table_name and table.num_rows and not done:
            done.append(subtask)
            return change(table)
        return table

    return edit


def test_a_healthy_snapshot_passes_every_expectation(healthy_uri, docs_dir):
    report = validate(healthy_uri, data_docs_dir=docs_dir)
    assert report.passed, report.failed
    assert report.failed == ()
    assets = {a.asset: a for a in report.assets}
    assert assets["tumbling.state.window-contents"].rows == 6  # the [2000, 3000) window of each key
    assert assets["count.state.count"].rows == 3  # d, e, f hold counts of 2
    assert assets["session.sessions"].rows == 6
    assert all(a.evaluated > 0 for a in report.assets)


def test_a_key_moved_to_another_key_group_fails_the_stable_hash_expectation(storage):
    def move(table):
        # a neighbouring group inside the same subtask's range [0, 3] or [4, 7]: only the hash can tell
        group = table.column("key_group")[0].as_py()
        return replace_rows(table, 0, key_group=group + 1 if group % 4 != 3 else group - 1)

    uri = write_snapshot(storage, 1, fed_routers(), edit=corrupt_first("tumbling", WINDOW_CONTENTS, move))
    report = validate(uri)
    assert not report.passed
    failed = report.failed_expectations()
    assert ("tumbling.state.window-contents", "expect_column_pair_values_to_be_equal") in failed
    hash_failure = next(f for f in report.failed if f.expectation == "expect_column_pair_values_to_be_equal")
    assert hash_failure.kwargs == {"column_A": "key_group", "column_B": "expected_key_group"}
    assert hash_failure.unexpected_count == 1


def test_a_key_group_outside_its_files_range_fails_the_range_expectation(storage):
    uri = write_snapshot(storage, 1, fed_routers(), edit=corrupt_first(
        "tumbling", WINDOW_CONTENTS, lambda t: replace_rows(t, 0, key_group=7 if t.column("key_group")[0].as_py() < 4 else 0)))
    report = validate(uri)
    range_failures = [f for f in report.failed if f.expectation == "expect_column_pair_values_a_to_be_greater_than_b"
                      and "file_kg" in json.dumps(f.kwargs)]
    assert range_failures and range_failures[0].asset == "tumbling.state.window-contents"


def test_a_window_that_ends_where_it_starts_fails_end_after_start(storage):
    uri = write_snapshot(storage, 1, fed_routers(), edit=corrupt_first(
        "tumbling", WINDOW_CONTENTS, lambda t: replace_rows(t, 0, window_end=t.column("window_start")[0].as_py())))
    report = validate(uri)
    bounds = [f for f in report.failed if f.kwargs.get("column_A") == "window_end"]
    assert [(f.asset, f.expectation) for f in bounds] == [
        ("tumbling.state.window-contents", "expect_column_pair_values_a_to_be_greater_than_b")]
    assert bounds[0].unexpected_count == 1
    # the tumbling size check names the same row
    assert ("tumbling.state.window-contents", "expect_column_values_to_be_in_set") in report.failed_expectations()


def test_a_negative_count_fails_counts_are_never_negative(storage):
    uri = write_snapshot(storage, 1, fed_routers(), edit=corrupt_first(
        "count", "keyed.count", lambda t: replace_rows(t, 0, value="-1", value_num=-1.0)))
    report = validate(uri)
    assert report.failed_expectations() == [("count.state.count", "expect_column_values_to_be_between")]
    assert report.failed[0].kwargs == {"column": "acc_count", "min_value": 0}
    assert report.failed[0].rule == "counts are never negative"


def test_a_missing_row_fails_the_row_count_recorded_in_metadata(storage):
    uri = write_snapshot(storage, 1, fed_routers(), edit=corrupt_first("tumbling", WINDOW_CONTENTS, lambda t: t.slice(1)))
    report = validate(uri)
    assert report.failed_expectations() == [("tumbling.state.window-contents", "expect_table_row_count_to_equal")]
    assert report.failed[0].observed_value == 5


def test_an_expired_window_left_unpurged_fails_the_cleanup_expectation(storage):
    # [1000, 2000) of a key: cleanup at 1999 + 100 ms lateness = 2099 <= watermark 2500, so it was purged
    def add_expired(table):
        row = table.slice(0, 1).to_pylist()[0]
        row.update(namespace='{"end":2000,"start":1000,"type":"time"}', window_start=1000, window_end=2000)
        return pa.concat_tables([table, pa.Table.from_pylist([row], schema=table.schema)])

    routers = fed_routers()
    uri = write_snapshot(storage, 1, routers, edit=corrupt_first("tumbling", WINDOW_CONTENTS, add_expired))
    report = validate(uri)
    unpurged = [f for f in report.failed if f.kwargs.get("column_A") == "cleanup_time"]
    assert [(f.asset, f.expectation) for f in unpurged] == [
        ("tumbling.state.window-contents", "expect_column_pair_values_a_to_be_greater_than_b")]
    assert "un-purged" in unpurged[0].rule


def test_source_offsets_behind_the_previous_checkpoint_fail(storage):
    write_snapshot(storage, 1, fed_routers(), source_positions={"split-0": 10, "split-1": 20})
    behind = write_snapshot(storage, 2, fed_routers(), source_positions={"split-0": 12, "split-1": 15})
    report = validate(behind)
    assert report.failed_expectations() == [("job.source_offsets", "expect_column_pair_values_a_to_be_greater_than_b")]
    assert report.failed[0].unexpected_count == 1
    ahead = write_snapshot(storage, 3, fed_routers(), source_positions={"split-0": 12, "split-1": 21})
    # chk-3 is compared with chk-2 (the newest with a smaller id), whose offsets it does not go behind
    assert validate(ahead).passed


def test_a_violated_user_expectation_fails_under_its_own_name(healthy_uri, tmp_path):
    suite = tmp_path / "job.expectations.json"
    suite.write_text(json.dumps({"expectations": [
        {"operator": "tumbling", "table": "state.window-contents", "expectation": "ExpectColumnValuesToBeBetween",
         "column": "value_chars", "kwargs": {"max_value": 5}, "rule": "accumulators stay tiny"},
        {"operator": "count", "table": "state.count", "expectation": "expect_column_values_to_be_between",
         "column": "value_num", "kwargs": {"min_value": 0, "max_value": 2}},
    ]}))
    report = validate(healthy_uri, user_expectations=suite)
    assert report.failed_expectations() == [("tumbling.state.window-contents", "expect_column_values_to_be_between")]
    assert report.failed[0].user and report.failed[0].rule == "accumulators stay tiny"
    assert report.failed[0].unexpected_count == 6


def test_timers_behind_the_watermark_fail(storage):
    uri = write_snapshot(storage, 1, fed_routers(), edit=corrupt_first(
        "tumbling", "timers", lambda t: replace_rows(t, 0, timestamp=2000)))
    report = validate(uri)
    assert ("tumbling.timers", "expect_column_pair_values_a_to_be_greater_than_b") in report.failed_expectations()


def test_overlapping_sessions_of_one_key_fail(storage):
    def overlap(table):
        text = table.column("value")[0].as_py()
        windows = json.loads(text)
        windows.append([3000, 4000, 3000, 4000])  # overlaps [2600, 3900)
        return replace_rows(table, 0, value=json.dumps(windows))

    uri = write_snapshot(storage, 1, fed_routers(), edit=corrupt_first("session", "keyed.merging-window-set", overlap))
    report = validate(uri)
    assert ("session.sessions", "expect_column_pair_values_a_to_be_greater_than_b") in report.failed_expectations()
    failure = next(f for f in report.failed if f.asset == "session.sessions")
    assert failure.kwargs["column_B"] == "previous_window_end"


def test_integrity_problems_are_refused_before_any_expectation_runs(healthy_uri):
    snap = load_snapshot(healthy_uri)
    _, _, handle = next(iter(snap.metadata.files()))
    path = snap.store.root / snap.file_key(handle)
    path.write_bytes(path.read_bytes()[:-3])
    from engine.errors import CorruptSnapshotError

    with pytest.raises(CorruptSnapshotError, match="truncated"):
        validate(healthy_uri)
