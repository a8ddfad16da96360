"""Spark partition i is subtask i: the placement SQL of engine/runtime/spark/epoch_frames.py against Flink's rule
(``operator_index_for_key_group``) and against where Spark's ``repartition`` really puts a row."""

from __future__ import annotations

import pytest

from engine.runtime.spark.epoch_frames import partition_preimages, subtask_expr
from engine.state.key_groups import operator_index_for_key_group

MAX_PARALLELISM = 16


@pytest.mark.parametrize("parallelism", [1, 2, 5, 7])
def test_partition_preimages_hash_to_their_partition(spark, parallelism):
    preimages = partition_preimages(spark, parallelism)
    rows = spark.createDataFrame([(i, v) for i, v in enumerate(preimages)], "i int, v int") \
        .selectExpr("i", f"pmod(hash(v), {parallelism}) AS p").collect()
    assert all(r.i == r.p for r in rows) and len(rows) == parallelism


@pytest.mark.parametrize("parallelism", [1, 3, 16])
def test_every_key_group_lands_on_the_partition_of_the_subtask_that_owns_it(spark, parallelism):
    lookup = "array(" + ", ".join(str(v) for v in partition_preimages(spark, parallelism)) + ")"
    placed = spark.range(0, MAX_PARALLELISM).selectExpr("CAST(id AS INT) AS _kg") \
        .selectExpr("_kg", f"{subtask_expr(parallelism, MAX_PARALLELISM)} AS subtask") \
        .selectExpr("_kg", "subtask", f"element_at({lookup}, subtask + 1) AS _pk") \
        .repartition(parallelism, "_pk").selectExpr("_kg", "subtask", "spark_partition_id() AS p").collect()
    assert sorted(r._kg for r in placed) == list(range(MAX_PARALLELISM))
    for r in placed:
        assert r.subtask == r.p == operator_index_for_key_group(MAX_PARALLELISM, parallelism, r._kg)
