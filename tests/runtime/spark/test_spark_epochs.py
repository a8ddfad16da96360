"""One epoch on Spark: slices become partitions, records land on the subtask owning their key group,
and the framework calls per key group (engine/runtime/spark/epochs.py)."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pytest

from engine.errors import JobDefinitionError
from engine.io.collection_source import CollectionSource
from engine.io.generator_source import GeneratorSource
from engine.io.source import SourceSplit
from engine.runtime.spark.epochs import (
    SplitSlice,
    encode_key_column,
    map_key_groups,
    partition_by_subtask,
    partition_preimages,
    read_epoch,
    with_key_groups,
)
from engine.state import codec
from engine.state.key_groups import (
    assign_to_key_group,
    key_group_range_for_operator,
    operator_index_for_key_group,
)

MAX_PARALLELISM = 16
PARALLELISM = 3


def _generator() -> GeneratorSource:
    return GeneratorSource(num_splits=3, events_per_split=500, num_keys=200, seed=5)


def _first_epoch(source, end: int) -> list[SplitSlice]:
    return [SplitSlice(split, 0, end) for split in source.discover_splits()]


def _python_reference(source, slices) -> list[dict]:
    records = []
    for piece in slices:
        reader = source.create_reader(piece.split, piece.start_offset)
        records += reader.read(piece.end_offset - piece.start_offset).values
    return records


def _count_per_key_group(kg: int, subtask: int, rows: pa.Table) -> pa.Table:
    return pa.table({
        "kg": pa.array([kg], pa.int32()),
        "subtask": pa.array([subtask], pa.int32()),
        "n": pa.array([rows.num_rows], pa.int64()),
        "keys": pa.array([len(set(rows.column("_key").to_pylist()))], pa.int64()),
    })


def test_each_slice_is_read_as_one_partition_with_split_and_offset(spark):
    source = _generator()
    slices = _first_epoch(source, 300)
    df = read_epoch(spark, source, slices, key_field="user_id")
    assert df.rdd.getNumPartitions() == 3
    rows = df.select("_split", "_offset", "user_id", "_key").collect()
    by_split = {}
    for r in rows:
        by_split.setdefault(r._split, []).append(r._offset)
    assert {s: sorted(o) for s, o in by_split.items()} == {s.split_id: list(range(300)) for s in source.discover_splits()}
    reference = _python_reference(source, slices)
    assert sorted(r.user_id for r in rows) == sorted(v["user_id"] for v in reference)
    assert all(r._key == codec.encode_key(r.user_id) for r in rows)


def test_every_key_group_is_counted_once_on_the_subtask_that_owns_it(spark):
    source = _generator()
    slices = [SplitSlice(s, 100, 400) for s in source.discover_splits()]
    keyed = with_key_groups(read_epoch(spark, source, slices, key_field="user_id"), MAX_PARALLELISM)
    placed = partition_by_subtask(spark, keyed, PARALLELISM, MAX_PARALLELISM)
    counts = map_key_groups(placed, _count_per_key_group, "kg int, subtask int, n long, keys long",
                            parallelism=PARALLELISM, max_parallelism=MAX_PARALLELISM).collect()

    expected = Counter(assign_to_key_group(v["user_id"], MAX_PARALLELISM) for v in _python_reference(source, slices))
    assert {r.kg: r.n for r in counts} == dict(expected)
    assert len(counts) == len(expected)  # one call per key group, not per key or per batch
    assert sum(r.keys for r in counts) == len({v["user_id"] for v in _python_reference(source, slices)})
    for r in counts:
        assert r.subtask == operator_index_for_key_group(MAX_PARALLELISM, PARALLELISM, r.kg)
        assert key_group_range_for_operator(MAX_PARALLELISM, PARALLELISM, r.subtask).contains(r.kg)


def test_spark_partition_i_holds_exactly_subtask_i(spark):
    source = _generator()
    keyed = with_key_groups(read_epoch(spark, source, _first_epoch(source, 200), key_field="user_id"), MAX_PARALLELISM)
    placed = partition_by_subtask(spark, keyed, PARALLELISM, MAX_PARALLELISM)
    rows = placed.selectExpr("spark_partition_id() AS p", "_subtask", "_kg").distinct().collect()
    assert {r.p for r in rows} == set(range(PARALLELISM))
    assert all(r.p == r._subtask for r in rows)


@pytest.mark.parametrize("parallelism", [1, 2, 5, 7])
def test_partition_preimages_hash_to_their_partition(spark, parallelism):
    preimages = partition_preimages(spark, parallelism)
    rows = spark.createDataFrame([(i, v) for i, v in enumerate(preimages)], "i int, v int") \
        .selectExpr("i", f"pmod(hash(v), {parallelism}) AS p").collect()
    assert all(r.i == r.p for r in rows) and len(rows) == parallelism


def test_sources_without_arrow_path_travel_as_codec_json_with_a_key_selector(spark):
    items = [{"user": f"ü{i % 7}", "qty": i} for i in range(40)]
    source = CollectionSource(items, num_splits=2)
    slices = _first_epoch(source, 20)
    df = with_key_groups(read_epoch(spark, source, slices, key_selector=lambda v: (v["user"], 1)), MAX_PARALLELISM)
    rows = df.collect()
    assert sorted((codec.decode(r._value)["qty"] for r in rows)) == list(range(40))
    for r in rows:
        assert r._kg == assign_to_key_group((codec.decode(r._value)["user"], 1), MAX_PARALLELISM)


def test_vectorised_key_encoding_equals_encode_key():
    values = ["plain", "with space", 'quo"te', "back\\slash", "ünï", "tab\t", "", "😀"]
    assert encode_key_column(pa.array(values)).to_pylist() == [codec.encode_key(v) for v in values]
    ints = [0, -5, 2**62]
    assert encode_key_column(pa.array(ints, pa.int64())).to_pylist() == [codec.encode_key(v) for v in ints]


def test_a_slice_running_backwards_is_refused():
    with pytest.raises(JobDefinitionError) as info:
        SplitSlice(SourceSplit("s"), 10, 5)
    assert info.value.parameter == "end_offset"
