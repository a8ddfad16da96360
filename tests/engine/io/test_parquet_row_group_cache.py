"""A Parquet file read a slice at a time by fresh readers (a Spark source task per epoch) decodes each row group
once per process, not once per slice; other bytes never share a cached group."""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.parquet as pq

from engine.io import formats


def _parquet(n: int, base: int = 0, row_group_size: int = 1000) -> bytes:
    sink = io.BytesIO()
    pq.write_table(pa.table({"k": [f"u{i % 7}" for i in range(n)], "v": list(range(base, base + n))}), sink,
                   row_group_size=row_group_size)
    return sink.getvalue()


def _counting(monkeypatch) -> list:
    calls: list = []
    real = pq.ParquetFile.read_row_group

    def read_row_group(self, i, *args, **kwargs):
        calls.append(i)
        return real(self, i, *args, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "read_row_group", read_row_group)
    return calls


def test_slices_of_one_file_decode_each_row_group_once_across_readers(monkeypatch):
    formats.clear_row_group_cache()
    calls = _counting(monkeypatch)
    data = _parquet(3000)
    got = []
    for start in range(0, 3000, 250):  # 12 epochs, a fresh decode of the file each (as a source task does)
        batch, dead = formats.decode("parquet", data).arrow(start, start + 250)
        assert not dead
        got.extend(batch.column("v").to_pylist())
    assert got == list(range(3000))
    assert calls == [0, 1, 2]


def test_other_bytes_do_not_share_a_cached_group(monkeypatch):
    formats.clear_row_group_cache()
    calls = _counting(monkeypatch)
    one, other = _parquet(500), _parquet(500, base=10_000)
    assert formats.decode("parquet", one).arrow(0, 3)[0].column("v").to_pylist() == [0, 1, 2]
    assert formats.decode("parquet", other).arrow(0, 3)[0].column("v").to_pylist() == [10_000, 10_001, 10_002]
    assert formats.decode("parquet", one).rows(1, 2)[0] == [{"k": "u1", "v": 1}]
    assert calls == [0, 0]


def test_the_cache_keeps_within_its_byte_budget(monkeypatch):
    formats.clear_row_group_cache()
    monkeypatch.setattr(formats, "ROW_GROUP_CACHE_BYTES", 1)  # smaller than any group: keeps only the last one
    calls = _counting(monkeypatch)
    data = _parquet(2000)
    for start in (0, 10, 1500, 1510, 0):
        formats.decode("parquet", data).arrow(start, start + 5)
    assert calls == [0, 1, 0]
    assert formats.row_group_cache_bytes() <= max(t.nbytes for t in [pq.read_table(io.BytesIO(data))])
