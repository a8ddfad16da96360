"""The Spark path gives the pandas path's verdict, frame by frame (issue 6: large state validates on Spark)."""

from __future__ import annotations


import pytest

from checkpoints.validation import validate_snapshot
from validation_state import fed_routers
from snapshot_writer import write_snapshot

pytestmark = pytest.mark.spark


def test_spark_and_pandas_agree_on_a_healthy_and_a_corrupt_snapshot(spark, storage):
    healthy = write_snapshot(storage, 1, fed_routers(), source_positions={"s": 1})

    def negative(uid, subtask, name, table):
        if uid == "count" and name == "keyed.count" and table.num_rows:
            import pyarrow as pa

            return table.set_column(table.schema.get_field_index("value_num"), table.schema.field("value_num"),
                                    pa.array([-1.0] * table.num_rows, pa.float64()))
        return table

    corrupt = write_snapshot(storage, 2, fed_routers(), source_positions={"s": 0}, edit=negative)
    for uri in (healthy, corrupt):
        on_pandas = validate_snapshot(uri, engine="pandas", build_data_docs=False, write_results=False)
        on_spark = validate_snapshot(uri, engine="spark", spark=spark, build_data_docs=False, write_results=False)
        assert on_spark.engine == "spark" and on_pandas.engine == "pandas"
        assert on_spark.status == on_pandas.status
        assert [(a.asset, a.rows, a.evaluated, a.failed) for a in on_spark.assets] == \
               [(a.asset, a.rows, a.evaluated, a.failed) for a in on_pandas.assets]
        assert [(f.asset, f.expectation, f.unexpected_count) for f in on_spark.failed] == \
               [(f.asset, f.expectation, f.unexpected_count) for f in on_pandas.failed]
    assert sorted(on_spark.failed_expectations()) == [
        ("count.state.count", "expect_column_values_to_be_between"),
        ("job.source_offsets", "expect_column_pair_values_a_to_be_greater_than_b"),
    ]


def test_a_key_in_the_wrong_key_group_is_named_on_spark_and_the_hash_is_sparks_xxhash64(spark, storage):
    import pyarrow as pa

    from engine.state.key_hash import key_groups_of

    def move(uid, subtask, name, table):
        if uid == "tumbling" and name == "keyed.window-contents" and table.num_rows and subtask == 0:
            groups = table.column("key_group").to_pylist()
            groups[0] = groups[0] + 1 if groups[0] % 4 != 3 else groups[0] - 1  # same file range, wrong hash
            return table.set_column(0, table.schema.field("key_group"), pa.array(groups, pa.int32()))
        return table

    uri = write_snapshot(storage, 1, fed_routers(), edit=move)
    report = validate_snapshot(uri, engine="spark", spark=spark, build_data_docs=False, write_results=False)
    hash_failures = [f for f in report.failed if f.expectation == "expect_column_pair_values_to_be_equal"]
    assert [(f.asset, f.kwargs, f.unexpected_count) for f in hash_failures] == [
        ("tumbling.state.window-contents", {"column_A": "key_group", "column_B": "expected_key_group"}, 1)]

    keys = ['"a"', "[1,\"x\"]", "", "a long key of more than thirty-two bytes, é"]
    rows = spark.createDataFrame([(k,) for k in keys], "key string") \
        .selectExpr("key", "pmod(xxhash64(key), 8) AS kg").collect()
    by_spark = {r["key"]: r["kg"] for r in rows}
    assert [by_spark[k] for k in keys] == list(key_groups_of(pa.array(keys), 8))
