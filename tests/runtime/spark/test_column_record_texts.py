"""arrow_text.record_texts: the column path's record texts, written column-wise, read back as the element path's.

The contract: for every row dict ``d`` of the table (engine/io/formats.py ``table_to_pylist``, what the element
path reads), ``decode_values`` of the column-wise text gives a value equal to ``d``, of the same types down to
each field (an integral float stays a float, a UTC timestamp the same ``datetime`` with the same tzinfo) — what
``encode_record(d)`` gives.  Tables the columns cannot write (nulls, escapes, other zones...) take the per-row
encoder, so the result is the same whatever the table.
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa
import pytest

from engine.io.formats import table_to_pylist
from engine.runtime.spark.arrow_text import record_texts
from engine.runtime.spark.rows import decode_values, encode_record


def _typed(value):
    if isinstance(value, dict):
        return {k: _typed(v) for k, v in value.items()}
    if isinstance(value, dt.datetime):
        return (type(value), value, repr(value.tzinfo), value.fold)
    if type(value) is float:
        return (float, value.hex())  # the bits: -0.0 is not 0.0, nan is nan
    return (type(value), value)


def _check(table: pa.Table) -> list[str]:
    texts = record_texts(table)
    want = table_to_pylist(table)
    got = decode_values(texts)
    assert [_typed(g) for g in got] == [_typed(w) for w in want]
    assert [_typed(g) for g in decode_values([encode_record(w) for w in want])] == [_typed(w) for w in want]
    return texts


def test_the_purchase_rows_decode_to_the_element_paths_dicts() -> None:
    rng = np.random.default_rng(7)
    n = 2_000
    ts = 1_704_067_200_000 + rng.integers(-10**6, 10**9, n)
    ts[:3] = [1_704_067_200_000, 1_704_067_201_435, 0]  # whole second, milliseconds, the epoch
    table = pa.table({
        "user_id": pa.array([f"user-{i}" for i in rng.integers(0, 500, n)]),
        "qty": pa.array(rng.integers(-10**12, 10**12, n), pa.int64()),
        "price": pa.array(np.round(rng.uniform(-1e3, 1e3, n), 2)),
        "ts": pa.array(ts, pa.timestamp("ms", tz="UTC")),
    })
    texts = _check(table)
    assert texts[0].startswith('{"user_id":"user-') and '"$dz"' in texts[0]


@pytest.mark.parametrize("tz", ["UTC", None])
@pytest.mark.parametrize("unit", ["s", "ms", "us"])
def test_timestamp_units(unit: str, tz: str | None) -> None:
    texts = _check(pa.table({"ts": pa.array([0, 1, 1_704_067_201_435_123 // {"s": 10**6, "ms": 10**3, "us": 1}[unit],
                                             -5], pa.timestamp(unit, tz=tz))}))
    assert ('"$dz"' if tz else '"$dt"') in texts[0]


def test_floats_keep_their_type_and_bits() -> None:
    values = [100.0, -0.0, 0.0, 1e-7, 1e22, 5e-324, 1.7976931348623157e308, 0.1 + 0.2, -3.0, 2.5]
    rng = np.random.default_rng(3)
    values += list(rng.standard_normal(500) * 10.0 ** rng.integers(-300, 300, 500))
    texts = _check(pa.table({"x": pa.array(values, pa.float64()), "f": pa.array(values, pa.float32()).cast(pa.float32())}))
    assert texts[0] == '{"x":100.0,"f":100.0}'


def test_ints_bools_and_other_int_widths() -> None:
    _check(pa.table({"a": pa.array([0, -1, 2**63 - 1, -(2**63)], pa.int64()), "b": pa.array([True, False, True, False]),
                     "c": pa.array([1, 2, 3, 255], pa.uint8()), "d": pa.array([-7, 7, 0, 1], pa.int16())}))


@pytest.mark.parametrize("table", [
    pa.table({"s": ['say "hi"', "back\\slash", "tab\t", "naïve"]}),      # escapes: the per-row encoder
    pa.table({"s": ["a", None, "b", "c"]}),                              # a null
    pa.table({"x": [1.0, float("nan"), float("inf"), 2.0]}),             # not finite
    pa.table({"ts": pa.array([1, 2, 3, 4], pa.timestamp("ms", tz="Europe/Paris"))}),
    pa.table({"$t": [1, 2, 3, 4]}),                                      # a name the codec tags
    pa.table({"l": [[1], [2], [], [3]]}),                                # a list
], ids=["escapes", "null", "nan", "zone", "dollar-name", "list"])
def test_what_the_columns_cannot_write_is_encoded_per_row(table: pa.Table) -> None:
    assert record_texts(table) == [encode_record(v) for v in table_to_pylist(table)]
    _check(table)


def test_an_empty_table() -> None:
    assert record_texts(pa.table({"a": pa.array([], pa.int64())})) == []
