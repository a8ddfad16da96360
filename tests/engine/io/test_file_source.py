"""Folders of event files: one split per file, row offsets, dead letters, files landing later."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine.errors import JobDefinitionError
from engine.io import FileSource


def _land(folder, name: str, text: str) -> None:
    """Write a file the way a producer should: to a hidden name, then rename into place."""
    tmp = folder / f".{name}.tmp"
    tmp.write_text(text)
    os.replace(tmp, folder / name)


def _read_split(source, split, batch=100):
    reader = source.create_reader(split)
    values, dead = [], []
    while True:
        got = reader.read(batch)
        values.extend(got.values)
        dead.extend(got.dead_letters)
        if got.finished:
            return values, dead, reader


def test_one_split_per_file_in_name_order_skipping_hidden_and_underscore_names(tmp_path):
    for name in ("b.jsonl", "a.jsonl", "_SUCCESS", ".a.jsonl.crc"):
        (tmp_path / name).write_text('{"x": 1}\n')
    (tmp_path / "_staging").mkdir()
    (tmp_path / "_staging" / "c.jsonl").write_text('{"x": 1}\n')
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "d.jsonl").write_text('{"x": 1}\n')
    splits = FileSource(str(tmp_path), "jsonl").discover_splits()
    assert [s.split_id for s in splits] == ["a.jsonl", "b.jsonl"]


def test_malformed_json_lines_become_dead_letters_at_their_offsets_and_reading_goes_on(tmp_path):
    (tmp_path / "events.jsonl").write_text('{"a": 1}\n{oops\n\n[1, 2]\n{"a": 2}\n')
    source = FileSource(f"file://{tmp_path}", "jsonl")
    values, dead, reader = _read_split(source, source.discover_splits()[0], batch=2)
    assert values == [{"a": 1}, {"a": 2}]
    assert [(d.raw, d.offset) for d in dead] == [("{oops", 1), ("[1, 2]", 3)]
    assert "invalid JSON" in dead[0].error and "JSON object" in dead[1].error
    assert reader.dead_letter_count == 2 and reader.current_offset() == 5


def test_csv_rows_of_the_wrong_width_become_dead_letters_and_cells_get_types(tmp_path):
    (tmp_path / "e.csv").write_text('user_id,qty,price,note\nu1,2,3.5,"a, quoted"\nu2,1\nu3,-4,,x\n')
    source = FileSource(str(tmp_path), "csv")
    values, dead, _ = _read_split(source, source.discover_splits()[0])
    assert values == [{"user_id": "u1", "qty": 2, "price": 3.5, "note": "a, quoted"},
                      {"user_id": "u3", "qty": -4, "price": None, "note": "x"}]
    assert [(d.raw, d.offset) for d in dead] == [("u2,1", 1)]
    assert "2 fields" in dead[0].error
    untyped = FileSource(str(tmp_path), "csv", infer_types=False)
    assert _read_split(untyped, untyped.discover_splits()[0])[0][0]["qty"] == "2"


@pytest.mark.parametrize(("cell", "value"), [
    ("0", 0), ("-12", -12), ("+3", 3), ("0.5", 0.5), ("1e3", 1000.0), (".5", 0.5), ("7.", 7.0), ("-0.25e-2", -0.0025),
    ("007", "007"), ("00.5", "00.5"), ("-012", "-012"), ("0012e1", "0012e1"), ("1_000", "1_000"), ("NaN", "NaN"),
    ("inf", "inf"), (" 7", " 7"), ("0x1f", "0x1f"), ("", None),
    # the edges the README names: a signed zero, spaces, a float beyond the double range (as Java's parseDouble)
    ("-0", 0), (" 5 ", " 5 "), ("nan", "nan"), ("1e400", float("inf")), ("-1e400", float("-inf")), ("1e-400", 0.0),
])
def test_csv_cells_read_as_numbers_only_when_written_as_one_and_leading_zeros_stay_text(tmp_path, cell, value):
    """An identifier like 007 must not become 7.0 and merge with 7 (found by a new user's zip codes)."""
    (tmp_path / "e.csv").write_text(f"id,n\nk,{cell}\n")
    source = FileSource(str(tmp_path), "csv")
    [record] = _read_split(source, source.discover_splits()[0])[0]
    assert record["n"] == value and type(record["n"]) is type(value)


def test_read_files_can_keep_every_csv_cell_as_text_and_refuses_the_flag_for_other_formats(tmp_path):
    from engine.api.environment import StreamExecutionEnvironment

    (tmp_path / "e.csv").write_text("id,n\n007,1e3\n7,2\n")
    env = StreamExecutionEnvironment.get_execution_environment()
    got = env.read_files(str(tmp_path), "csv", infer_types=False).execute_and_collect()
    assert sorted(r["id"] for r in got) == ["007", "7"] and sorted(r["n"] for r in got) == ["1e3", "2"]
    typed = env.read_files(str(tmp_path), "csv").execute_and_collect()
    assert sorted(((r["id"], r["n"]) for r in typed), key=str) == [("007", 1000.0), (7, 2)]
    with pytest.raises(JobDefinitionError, match="infer_types.*csv files only"):
        env.read_files(str(tmp_path), "jsonl", infer_types=False)
    with pytest.raises(JobDefinitionError, match="infer_types.*True or False"):
        env.read_files(str(tmp_path), "csv", infer_types="no")


def test_parquet_rows_read_across_row_groups_and_as_arrow(tmp_path):
    rows = [{"k": f"k{i}", "v": i} for i in range(25)]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "p.parquet", row_group_size=4)
    source = FileSource(str(tmp_path))
    split = source.discover_splits()[0]
    assert _read_split(source, split, batch=7)[0] == rows
    reader = source.create_reader(split, 3)
    batch = reader.read_arrow(10)
    assert batch.records.to_pylist() == rows[3:13] and batch.end_offset == 13 and not batch.finished


def test_an_unreadable_parquet_file_is_one_dead_letter_not_a_failed_job(tmp_path):
    (tmp_path / "broken.parquet").write_bytes(b"not parquet at all")
    source = FileSource(str(tmp_path), "parquet")
    values, dead, _ = _read_split(source, source.discover_splits()[0])
    assert values == [] and len(dead) == 1 and "Parquet" in dead[0].error


def test_a_continuous_source_discovers_files_that_land_later_and_keeps_the_old_splits(tmp_path):
    source = FileSource(str(tmp_path / "incoming"), "jsonl", continuous=True)
    assert not source.is_bounded()
    assert source.discover_splits() == []  # the folder does not exist yet
    (tmp_path / "incoming").mkdir()
    _land(tmp_path / "incoming", "2024-01-02.jsonl", json.dumps({"n": 2}) + "\n")
    first = source.discover_splits()
    assert [s.split_id for s in first] == ["2024-01-02.jsonl"]
    _land(tmp_path / "incoming", "2024-01-01.jsonl", json.dumps({"n": 1}) + "\n")
    _land(tmp_path / "incoming", "2024-01-03.jsonl", json.dumps({"n": 3}) + "\n")
    later = source.discover_splits()
    assert [s.split_id for s in later] == ["2024-01-01.jsonl", "2024-01-02.jsonl", "2024-01-03.jsonl"]
    assert set(first) <= set(later)
    assert [_read_split(source, s)[0] for s in later] == [[{"n": 1}], [{"n": 2}], [{"n": 3}]]


def test_a_bounded_source_over_a_missing_folder_is_refused_with_the_way_out(tmp_path):
    with pytest.raises(JobDefinitionError, match="continuous=True"):
        FileSource(str(tmp_path / "nope"), "jsonl").discover_splits()


def test_an_unknown_format_is_refused_by_name(tmp_path):
    with pytest.raises(JobDefinitionError, match="`format`"):
        FileSource(str(tmp_path), "xml")


def test_a_file_source_travels_to_another_process_without_its_store(tmp_path):
    import pickle  # only to emulate Spark shipping the source to an executor; nothing is persisted

    (tmp_path / "a.jsonl").write_text('{"a": 1}\n')
    source = FileSource(str(tmp_path), "jsonl")
    source.discover_splits()
    shipped = pickle.loads(pickle.dumps(source))
    assert shipped._store is None
    assert _read_split(shipped, shipped.discover_splits()[0])[0] == [{"a": 1}]
