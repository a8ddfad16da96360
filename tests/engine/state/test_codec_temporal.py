"""Dates, times, timedeltas and Decimals in state: what Parquet and CSV readers hand out can be stored as is.

Round trips are exact (same type, same fields, same zone for a zoneinfo datetime), equal keys get
one text whatever their zone or trailing zeros (key groups come from that text), and malformed
tags are refused as corrupt, never guessed at.
"""

from __future__ import annotations

import datetime as dt
import decimal
from zoneinfo import ZoneInfo

import pytest
from hypothesis import assume, given, settings, strategies as st

from engine.errors import CorruptSnapshotError, StateSerializationError
from engine.state import codec

UTC = dt.timezone.utc
fixed_offsets = st.builds(lambda m: dt.timezone(dt.timedelta(minutes=m)), st.integers(-23 * 60, 23 * 60))
zones = st.one_of(st.none(), st.just(UTC), fixed_offsets, st.timezones())
datetimes = st.datetimes(min_value=dt.datetime(1, 1, 2), max_value=dt.datetime(9999, 12, 30), timezones=zones,
                         allow_imaginary=True)
decimals = st.decimals(allow_nan=True, allow_infinity=True, places=None)
temporals = st.one_of(datetimes, st.dates(), st.times(timezones=st.one_of(st.none(), fixed_offsets)),
                      st.timedeltas(), decimals)
values = st.recursive(
    st.one_of(temporals, st.integers(), st.text(max_size=3)),
    lambda inner: st.one_of(st.tuples(inner, inner), st.lists(inner, max_size=3),
                            st.dictionaries(st.text(max_size=3), inner, max_size=3)),
    max_leaves=6)


def _same(a, b) -> None:
    """Equal, of the same type, and for datetimes the same fields and zone (== alone ignores zones)."""
    assert type(a) is type(b)
    if isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            _same(a[k], b[k])
    elif isinstance(a, decimal.Decimal):
        assert str(a) == str(b)  # NaN is not equal to itself; the text says the same, digits and exponent
    elif isinstance(a, (dt.datetime, dt.time)):
        assert a.isoformat() == b.isoformat() and a.fold == b.fold
        assert a.tzinfo == b.tzinfo or a.utcoffset() == b.utcoffset()
        if isinstance(a.tzinfo, ZoneInfo):
            assert b.tzinfo is a.tzinfo
    else:
        assert a == b


@settings(max_examples=400, deadline=None)
@given(values)
def test_round_trip_is_exact(value):
    text = codec.encode(value)
    _same(codec.decode(text), value)
    assert codec.encode(codec.decode(text)) == text  # canonical: the text of what was read is the text written


@settings(max_examples=300, deadline=None)
@given(st.datetimes(timezones=st.one_of(st.just(UTC), fixed_offsets, st.timezones()),
                    min_value=dt.datetime(2, 1, 1), max_value=dt.datetime(9998, 1, 1)),
       st.one_of(st.just(UTC), fixed_offsets, st.timezones()))
def test_equal_aware_datetimes_are_one_key(a, zone):
    assume(not _ambiguous_or_skipped(a))
    b = a.astimezone(zone)
    assert a == b
    assert codec.encode_key(a) == codec.encode_key(b)
    assert codec.decode(codec.encode_key(a)) == a


def _ambiguous_or_skipped(t: dt.datetime) -> bool:
    return t.replace(fold=1 - t.fold).utcoffset() != t.utcoffset()


def test_a_repeated_or_skipped_wall_time_is_no_key():
    paris = ZoneInfo("Europe/Paris")
    for wall in (dt.datetime(2024, 10, 27, 2, 30, tzinfo=paris),  # repeated: clocks went back at 03:00
                 dt.datetime(2024, 3, 31, 2, 30, tzinfo=paris)):  # skipped: clocks went forward at 02:00
        with pytest.raises(StateSerializationError, match="repeated or skipped"):
            codec.encode_key(wall)
        _same(codec.decode(codec.encode(wall)), wall)  # as a value it is stored exactly
    assert codec.decode(codec.encode_key(dt.datetime(2024, 10, 27, 4, 0, tzinfo=paris))) == \
        dt.datetime(2024, 10, 27, 3, 0, tzinfo=UTC)


@settings(max_examples=300, deadline=None)
@given(st.decimals(allow_nan=False, allow_infinity=True, places=None), st.integers(0, 4))
def test_equal_decimals_are_one_key(d, zeros):
    padded = d if not d.is_finite() else d.quantize(decimal.Decimal(1).scaleb(min(0, d.as_tuple().exponent) - zeros),
                                                     context=decimal.Context(prec=1000))
    assert padded == d
    assert codec.encode_key(padded) == codec.encode_key(d)
    assert codec.decode(codec.encode_key(d)) == d


def test_known_texts():
    paris = ZoneInfo("Europe/Paris")
    cases = [
        (dt.datetime(2024, 1, 1, tzinfo=UTC), '{"$dt":"2024-01-01T00:00:00+00:00"}'),
        (dt.datetime(2024, 1, 1, 12, 30, 0, 250), '{"$dt":"2024-01-01T12:30:00.000250"}'),
        (dt.datetime(2024, 10, 27, 2, 30, fold=1, tzinfo=paris), '{"$dz":["2024-10-27T02:30:00",1,"Europe/Paris"]}'),
        (dt.date(2024, 2, 29), '{"$d":"2024-02-29"}'),
        (dt.time(23, 59, 59, 999999), '{"$tm":"23:59:59.999999"}'),
        (dt.timedelta(days=-1, seconds=5, microseconds=7), '{"$td":[-1,5,7]}'),
        (decimal.Decimal("1.50"), '{"$dec":"1.50"}'),
        (("u1", dt.date(2024, 1, 1)), '{"$t":["u1",{"$d":"2024-01-01"}]}'),
    ]
    for value, text in cases:
        assert codec.encode(value) == text
        _same(codec.decode(text), value)
    # the repeated hour keeps its fold: the second 02:30 is an hour after the first
    second = codec.decode('{"$dz":["2024-10-27T02:30:00",1,"Europe/Paris"]}')
    assert second.utcoffset() == dt.timedelta(hours=1)
    assert codec.encode_key(dt.datetime(2024, 1, 1, 13, tzinfo=dt.timezone(dt.timedelta(hours=1)))) == \
        '{"$dt":"2024-01-01T12:00:00+00:00"}'
    assert codec.encode_key(decimal.Decimal("-0.00")) == '{"$dec":"0"}'


def test_a_datetime_subclass_is_stored_as_the_datetime_it_is():
    pd = pytest.importorskip("pandas")
    ts = pd.Timestamp("2024-01-01T00:00:00.123456789Z")
    back = codec.decode(codec.encode({"ts": ts}))["ts"]
    assert type(back) is dt.datetime
    assert back == dt.datetime(2024, 1, 1, 0, 0, 0, 123456, tzinfo=UTC)


@pytest.mark.parametrize("text, why", [
    ('{"$dt":5}', "malformed \\$dt"),
    ('{"$dt":"yesterday"}', "malformed \\$dt"),
    ('{"$dz":["2024-01-01T00:00:00+01:00",0,"Europe/Paris"]}', "malformed \\$dz"),  # the wall time carries no offset
    ('{"$dz":["2024-01-01T00:00:00",2,"Europe/Paris"]}', "malformed \\$dz"),
    ('{"$dz":["2024-01-01T00:00:00",true,"Europe/Paris"]}', "malformed \\$dz"),
    ('{"$dz":["2024-01-01T00:00:00",0,"No/Such_Zone"]}', "malformed \\$dz"),
    ('{"$dz":["2024-01-01T00:00:00",0,"../../etc/passwd"]}', "malformed \\$dz"),
    ('{"$d":"2024-02-30"}', "malformed \\$d"),
    ('{"$tm":[1,2]}', "malformed \\$tm"),
    ('{"$td":[1,"2",3]}', "malformed \\$td"),
    ('{"$td":[1000000000,0,0]}', "malformed \\$td"),
    ('{"$dec":"one"}', "malformed \\$dec"),
    ('{"$dec":1.5}', "malformed \\$dec"),
])
def test_malformed_tags_are_refused_as_corrupt(text, why):
    with pytest.raises(CorruptSnapshotError, match=why):
        codec.decode(text)
