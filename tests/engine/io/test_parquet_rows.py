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


def test_nanosecond_timestamps_in_a_zone_with_summer_time_floor_to_the_microsecond_even_on_the_repeated_hour():
    # 00:30 to 02:15 UTC on 2026-10-25 crosses the hour Berlin's clocks repeat (02:00-03:00 happens twice), where a
    # floor of the local time (pyarrow's floor_temporal) fails as ambiguous; before 1970 a floor differs from a cut
    start = dt.datetime(2026, 10, 25, 0, 30, tzinfo=dt.timezone.utc)
    instants = [start + dt.timedelta(minutes=15 * i) for i in range(8)]
    ns = [int(t.timestamp()) * 10**9 + 999 for t in instants] + [-1]
    table = pa.table({"ts": pa.array(ns, pa.timestamp("ns", "Europe/Berlin"))})
    got = [row["ts"] for row in table_to_pylist(table)]
    expected = instants + [dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=dt.timezone.utc)]
    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
    # as instants in microseconds: aware datetimes on a repeated hour never compare equal across zones (PEP 495)
    assert [(g - epoch) // dt.timedelta(microseconds=1) for g in got] == \
        [(t - epoch) // dt.timedelta(microseconds=1) for t in expected]
    assert {str(g.tzinfo) for g in got} == {"Europe/Berlin"}
    assert [g.utcoffset() for g in got[:8]] == [dt.timedelta(hours=2)] * 2 + [dt.timedelta(hours=1)] * 6
