"""Parquet rows become dicts faster than ``Table.to_pylist`` does it; they must be the same dicts."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from engine.io.formats import table_to_pylist


@pytest.mark.parametrize("width", [1, 2, 3, 5, 9])
@pytest.mark.parametrize("tz", ["UTC", None])
def test_rows_equal_to_pylist_for_any_width(width: int, tz: str | None):
    n = 7
    start = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc if tz else None)
    columns = {"ts": pa.array([start + dt.timedelta(seconds=i) for i in range(n)], pa.timestamp("ms", tz=tz))}
    for j in range(width - 1):
        columns[f"c{j}"] = pa.array([f"v{j}-{i}" if j % 2 else i * j for i in range(n)])
    table = pa.table(columns)
    got = table_to_pylist(table)
    assert got == table.to_pylist()
    assert [list(row) for row in got] == [list(row) for row in table.to_pylist()]  # same key order
    assert type(got[0]["ts"]) is dt.datetime and (got[0]["ts"].tzinfo is None) == (tz is None)


def test_duplicate_column_names_fall_back_to_pyarrow():
    table = pa.Table.from_arrays([pa.array([1]), pa.array([dt.datetime(2024, 1, 1)], pa.timestamp("ms"))], names=["a", "a"])
    assert table_to_pylist(table) == table.to_pylist()
