"""Spark SQL computes the same key groups as engine.state.key_groups, so the Spark runtime can
assign key groups in the JVM (``pmod(xxhash64(encoded_key), max_parallelism)``) without calling
Python per record, and state written by either runtime lands in the same key group."""

from __future__ import annotations

import random

import pytest

from engine.state.codec import encode_key
from engine.state.key_groups import assign_to_key_group, hash_encoded_key


def _keys() -> list:
    rng = random.Random(7)
    strings = ["", "a", "user-1", "ü", "日本語", "emoji 🦊", "x" * 33, "y" * 1000, "\x00nul", 'quote"s']
    strings += ["".join(rng.choice("abcdefghijklmnopqrstuvwxyzäöß€😀") for _ in range(rng.randint(0, 40))) for _ in range(300)]
    ints = [0, 1, -1, 2**31, -(2**31), 2**63 - 1, -(2**63)] + [rng.randint(-(10**12), 10**12) for _ in range(300)]
    tuples = [("u", 1), (1, 2, 3), ("ü", ("nested", -5)), ()] + [(rng.randint(0, 99), f"k{rng.random()}") for _ in range(100)]
    others = [None, True, False, 1.5, -0.0, {"b": 1, "a": [1, 2]}, b"bytes"]
    return strings + ints + tuples + others


@pytest.mark.parametrize("max_parallelism", [1, 7, 128, 32768])
def test_spark_sql_pmod_xxhash64_equals_python_key_groups(spark, max_parallelism):
    keys = _keys()
    encoded = [(i, encode_key(k)) for i, k in enumerate(keys)]
    df = spark.createDataFrame(encoded, "i int, encoded string")
    rows = df.selectExpr("i", f"pmod(xxhash64(encoded), {max_parallelism}) AS kg", "xxhash64(encoded) AS h").collect()
    by_index = {r.i: r for r in rows}
    mismatches = [
        (keys[i], by_index[i].kg, assign_to_key_group(keys[i], max_parallelism))
        for i in range(len(keys))
        if by_index[i].kg != assign_to_key_group(keys[i], max_parallelism)
        or by_index[i].h != hash_encoded_key(encoded[i][1])
    ]
    assert mismatches == []
    assert len(keys) > 700


def test_key_groups_are_spread_not_constant(spark):
    # Guards against a vacuous parity (e.g. both sides returning 0 for max_parallelism > 1).
    groups = {assign_to_key_group(f"user-{i}", 128) for i in range(1000)}
    assert len(groups) > 100
