"""engine/io/formats.py encode_chunks: results kept as columns are written exactly as the tuples would be."""

from __future__ import annotations

import io
import random

import pyarrow.parquet as pq
import pytest

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
