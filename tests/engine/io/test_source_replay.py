"""The replay contract every source keeps (seed 002, "Recovery"): rewinding to Sk re-reads the same records.

Each case reads a split to its end in small batches, records the offset before
every batch, then for each recorded offset builds a fresh reader there and
checks that it returns exactly the suffix the first pass saw, in order.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine.errors import JobDefinitionError, UnsupportedFormatVersion
from engine.io import CollectionSource, FileSource, GeneratorSource, Source, SourceSplit


def _read_to_end(reader, batch: int, limit: int = 10_000) -> tuple[list, list, list]:
    """(values, offsets before each batch, dead-letter offsets) until the split finishes."""
    values, offsets, dead = [], [], []
    for _ in range(limit):
        offsets.append(reader.current_offset())
        got = reader.read(batch)
        assert got.end_offset == reader.current_offset()
        values.extend(got.values)
        dead.extend(d.offset for d in got.dead_letters)
        if got.finished:
            return values, offsets, dead
    raise AssertionError("split never finished")


def _suffix_after(source: Source, split, batch: int) -> None:
    values, offsets, dead = _read_to_end(source.create_reader(split), batch)
    # how many values the first pass had produced before each offset
    produced_before = []
    reader = source.create_reader(split)
    count = 0
    for _ in offsets:
        produced_before.append(count)
        count += len(reader.read(batch).values)
    step = max(1, len(offsets) // 25)  # every recorded offset for short splits, 25 spread ones for long
    for offset, before in list(zip(offsets, produced_before))[::step]:
        replayed, _, replayed_dead = _read_to_end(source.create_reader(split, offset), batch)
        assert replayed == values[before:], f"replay from offset {offset} differs"
        assert replayed_dead == [d for d in dead if d >= offset]


def _write_files(folder) -> None:
    rows = [{"user_id": f"u{i % 4}", "qty": i, "ts": 1000 + i} for i in range(23)]
    lines = [json.dumps(r) for r in rows[:11]]
    lines.insert(3, "{not json")
    lines.insert(7, "")
    (folder / "a.jsonl").write_text("\n".join(lines) + "\n")
    csv_lines = ["user_id,qty,ts"] + [f"{r['user_id']},{r['qty']},{r['ts']}" for r in rows[11:18]]
    csv_lines.insert(2, "u9,1")  # one field short
    (folder / "b.csv").write_text("\n".join(csv_lines) + "\n")
    table = pa.Table.from_pylist(rows)
    pq.write_table(table, folder / "c.parquet", row_group_size=5)


SOURCES = {
    "collection, one split": lambda tmp: CollectionSource(list(range(17))),
    "collection, three splits": lambda tmp: CollectionSource([{"n": i} for i in range(17)], num_splits=3),
    "generator with lateness, idleness and malformed events": lambda tmp: GeneratorSource(
        num_splits=2, events_per_split=300, num_keys=7, key_skew=1.2, out_of_orderness_ms=200,
        late_fraction=0.1, malformed_fraction=0.05, idle_splits={1: [(40, 90), (200, 230)]}, seed=11),
    "jsonl files": lambda tmp: FileSource(str(tmp), "jsonl"),
    "csv files": lambda tmp: FileSource(str(tmp), "csv"),
    "parquet files": lambda tmp: FileSource(str(tmp), "parquet"),
}


@pytest.mark.parametrize("name", SOURCES)
@pytest.mark.parametrize("batch", [1, 4, 13])
def test_every_source_replays_the_same_records_from_any_recorded_offset(tmp_path, name, batch):
    _write_files(tmp_path)
    source = SOURCES[name](tmp_path)
    splits = source.discover_splits()
    if isinstance(source, FileSource):
        splits = [s for s in splits if s.split_id.endswith(source.format)]
    assert splits
    for split in splits:
        _suffix_after(source, split, batch)


@pytest.mark.parametrize("name", SOURCES)
def test_offsets_are_json_values_that_survive_a_round_trip(tmp_path, name):
    _write_files(tmp_path)
    source = SOURCES[name](tmp_path)
    for split in source.discover_splits():
        if isinstance(source, FileSource) and not split.split_id.endswith(source.format):
            continue
        reader = source.create_reader(split)
        reader.read(5)
        offset = json.loads(json.dumps(reader.current_offset()))
        assert source.create_reader(split, offset).read(3).values == reader.read(3).values


@pytest.mark.parametrize("name", SOURCES)
def test_splits_are_discovered_in_the_same_order_every_time(tmp_path, name):
    _write_files(tmp_path)
    source = SOURCES[name](tmp_path)
    first = source.discover_splits()
    assert [s.split_id for s in first] == [s.split_id for s in source.discover_splits()]
    assert len({s.split_id for s in first}) == len(first)
    assert source.is_bounded()


@pytest.mark.parametrize("name", SOURCES)
def test_splits_round_trip_through_json_and_read_the_same(tmp_path, name):
    _write_files(tmp_path)
    source = SOURCES[name](tmp_path)
    for split in source.discover_splits():
        again = SourceSplit.from_json(json.loads(json.dumps(split.to_json())))
        assert again == split
        assert source.create_reader(again).read(5).values == source.create_reader(split).read(5).values


def test_a_split_of_an_unknown_format_version_is_refused():
    with pytest.raises(UnsupportedFormatVersion):
        SourceSplit.from_json({"format_version": 2, "split_id": "x", "index": 0})


def test_an_offset_beyond_a_split_or_negative_is_refused_by_name():
    source = CollectionSource([1, 2, 3])
    split = source.discover_splits()[0]
    with pytest.raises(JobDefinitionError, match="start_offset"):
        source.create_reader(split, 4)
    with pytest.raises(JobDefinitionError, match="start_offset"):
        source.create_reader(split, -1)
    with pytest.raises(JobDefinitionError, match="max_records"):
        source.create_reader(split).read(0)


def test_collection_splits_are_contiguous_chunks_in_list_order():
    source = CollectionSource(list(range(10)), num_splits=3)
    chunks = [source.create_reader(s).read(100).values for s in source.discover_splits()]
    assert chunks == [[0, 1, 2], [3, 4, 5], [6, 7, 8, 9]]
    assert sum(chunks, []) == list(range(10))


def test_a_collection_with_more_splits_than_items_has_empty_finished_splits():
    source = CollectionSource(["x"], num_splits=2)
    batches = [source.create_reader(s).read(10) for s in source.discover_splits()]
    assert [b.values for b in batches] == [[], ["x"]]
    assert all(b.finished for b in batches)
