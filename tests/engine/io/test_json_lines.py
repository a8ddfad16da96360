"""engine/io/formats.py: JSON lines sinks write what JSON lacks as Spark's JSON writer does, or refuse it by name."""

from __future__ import annotations

import pytest


def test_json_lines_write_dates_times_and_decimals_as_spark_does():
    import datetime as dt
    import decimal

    from engine.io.formats import encode

    value = {"ts": dt.datetime(2024, 5, 1, 12, 0, 0, 250000, tzinfo=dt.timezone.utc), "day": dt.date(2024, 5, 1),
             "at": dt.time(7, 30), "price": decimal.Decimal("1.50"), "took": dt.timedelta(seconds=90, microseconds=5),
             "raw": b"\x01\x02", "n": 3}
    assert encode("jsonl", [value]).decode() == (
        '{"ts":"2024-05-01T12:00:00.250000+00:00","day":"2024-05-01","at":"07:30:00","price":"1.50",'
        '"took":90.000005,"raw":"AQI=","n":3}\n')

def test_json_lines_refuse_what_json_cannot_hold_naming_the_type():
    from engine.io.formats import encode

    with pytest.raises(TypeError, match="cannot hold builtins.set"):
        encode("jsonl", [{"tags": {"a"}}])
