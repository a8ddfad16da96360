"""engine/io/formats.py encode_chunks: results kept as columns are written exactly as the tuples would be."""

from __future__ import annotations

import io
import random

import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings, strategies as st

from engine.elements import StreamRecord, TupleColumns
from engine.io.formats import encode, encode_chunks


def _columns(values: list[tuple], ts: int = 9) -> TupleColumns:
    return TupleColumns([list(c) for c in zip(*values)], ts)


def _flat(chunks) -> list:
    out = []
    for c in chunks:
        out.extend(c.values() if isinstance(c, TupleColumns) else c)
    return out


def _random_chunks(rnd: random.Random, odd: str | None):
    chunks = []
    for _ in range(rnd.randint(1, 6)):
        values = [(f"u{rnd.randrange(50)}", rnd.randrange(-10**6, 10**6), rnd.random()) for _ in range(rnd.randint(0, 30))]
        chunks.append(_columns(values) if values and rnd.random() < 0.6 else values)
    if odd == "dict":
        chunks.insert(rnd.randrange(len(chunks) + 1), [{"user": "x", "n": 1}])
    elif odd == "width":
        chunks.insert(rnd.randrange(len(chunks) + 1), _columns([("a", 1)]))
    elif odd == "mixed types":
        chunks.append(_columns([("u1", "not a number", 0.5)]))  # one column of ints and strs: Arrow refuses it alike
    return chunks


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
@pytest.mark.parametrize("odd", [None, "dict", "width"])
@pytest.mark.parametrize("seed", range(8))
def test_chunks_encode_to_the_bytes_of_their_values(fmt: str, odd: str | None, seed: int):
    chunks = _random_chunks(random.Random(seed), odd)
    assert encode_chunks(fmt, chunks) == encode(fmt, _flat(chunks))


def test_the_parquet_part_reads_back_as_the_values_in_order():
    chunks = [_columns([("a", 1, 0.5), ("b", 2, 1.5)]), [("c", 3, 2.5)], _columns([("d", 4, 3.5)])]
    table = pq.read_table(io.BytesIO(encode_chunks("parquet", chunks)))
    assert [tuple(r.values()) for r in table.to_pylist()] == [("a", 1, 0.5), ("b", 2, 1.5), ("c", 3, 2.5), ("d", 4, 3.5)]


def test_a_column_arrow_cannot_type_fails_as_the_tuples_would():
    chunks = _random_chunks(random.Random(3), "mixed types")
    with pytest.raises(Exception) as via_values:
        encode("parquet", _flat(chunks))
    with pytest.raises(type(via_values.value)):
        encode_chunks("parquet", chunks)


def test_empty_chunks_write_what_no_values_write():
    assert encode_chunks("parquet", [[], TupleColumns([[], []], 5)]) == encode("parquet", [])


def test_tuple_columns_give_the_records_of_the_row_wise_path():
    batch = _columns([("a", 1), ("b", 2)], ts=59_999)
    assert len(batch) == 2
    assert batch.values() == [("a", 1), ("b", 2)]
    assert batch.records() == [StreamRecord(("a", 1), 59_999), StreamRecord(("b", 2), 59_999)]


_cells = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=True),
                   st.text(max_size=4), st.binary(max_size=2))


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.lists(_cells, min_size=1, max_size=8), st.lists(st.integers(-2**64, 2**64), min_size=1),
                 st.lists(st.one_of(st.none(), st.integers(-2**63, 2**63 - 1)), min_size=1),
                 st.lists(st.one_of(st.none(), st.text(max_size=3)), min_size=1),
                 st.lists(st.one_of(st.none(), st.floats()), min_size=1)))
def test_a_column_gets_exactly_the_array_pyarrow_infers(values):
    """_column_array gives pyarrow the type when one Python type fills the column: same type, same values."""
    import pyarrow as pa

    from engine.io.formats import _column_array

    try:
        want = pa.array(values)
    except (pa.ArrowException, OverflowError, TypeError, ValueError) as exc:
        with pytest.raises(type(exc)):
            _column_array(values)
        return
    got = _column_array(values)
    assert got.type == want.type
    assert got.equals(want) or got.to_string() == want.to_string()  # NaN != NaN
