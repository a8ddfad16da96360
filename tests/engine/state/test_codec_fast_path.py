"""codec.encode/decode take a shortcut for flat tuples, dicts and scalars: it must give exactly the generic walk's text and values."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from engine.errors import StateSerializationError
from engine.state import codec
from engine.windowing.windows import TimeWindow

scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=True, allow_infinity=True),
                    st.text(max_size=5), st.binary(max_size=3))
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.tuples(inner, inner), st.tuples(scalars, scalars, scalars),
                            st.dictionaries(st.one_of(st.text(max_size=3), st.integers(0, 5)), inner, max_size=3)),
    max_leaves=8)


def _walked(value):
    """The generic walk alone: the text encode wrote before the shortcut existed."""
    return codec._VALUE_ENCODER.encode(codec._to_jsonable(value, "value"))


@settings(max_examples=500, deadline=None)
@given(values)
def test_encode_equals_the_generic_walk(value):
    assert codec.encode(value) == _walked(value)


@settings(max_examples=500, deadline=None)
@given(values)
def test_decode_equals_the_generic_walk(value):
    text = codec.encode(value)
    fast = codec.decode(text)
    walked = codec._from_jsonable(__import__("json").loads(text))
    assert type(fast) is type(walked)
    assert _walked(fast) == _walked(walked)  # through the text: NaN is not equal to itself


@pytest.mark.parametrize("value, text", [
    (("user-1", 1_704_067_200_000, 3), '{"$t":["user-1",1704067200000,3]}'),
    ((), '{"$t":[]}'),
    (("é", True, None, 2.5), '{"$t":["\\u00e9",true,null,2.5]}'),
    ({"k": "a", "n": 2.5}, '{"k":"a","n":2.5}'),
    ((1, float("nan")), '{"$t":[1,{"$f":"nan"}]}'),
    ((1, (2, 3)), '{"$t":[1,{"$t":[2,3]}]}'),
    ({"$x": 1}, '{"$m":[["$x",1]]}'),
    ((np.int64(4), 1), '{"$t":[4,1]}'),
    (7, "7"),
])
def test_known_texts(value, text):
    assert codec.encode(value) == text
    back = codec.decode(text)
    assert codec.encode(back) == text


def test_subclasses_and_windows_take_the_walk():
    class Flag(int):
        pass

    assert codec.encode((Flag(3),)) == '{"$t":[3]}'
    with pytest.raises(StateSerializationError, match="store its start and end"):
        codec.encode(TimeWindow(0, 10))
    with pytest.raises(StateSerializationError, match="object"):
        codec.encode((object(),))


def test_a_flat_tuple_decodes_as_a_tuple_and_nested_tags_still_decode():
    assert codec.decode('{"$t":["a",1,2.5,null,false]}') == ("a", 1, 2.5, None, False)
    assert codec.decode('{"$t":[{"$b":"AQ=="}]}') == (b"\x01",)
    assert math.isinf(codec.decode('{"$t":[{"$f":"inf"}]}')[0])


def _reference_decode(text):
    """decode as it was before msgspec parsed it: json.loads, then the walk."""
    import json

    from engine.errors import CorruptSnapshotError

    try:
        raw = json.loads(text)
    except (TypeError, ValueError) as exc:
        raise CorruptSnapshotError(str(exc)) from exc
    return codec._from_jsonable(raw)


def _outcome(fn, text):
    from engine.errors import CorruptSnapshotError

    try:
        value = fn(text)
    except CorruptSnapshotError:
        return "corrupt"
    return (type(value).__name__, _walked(value) if not isinstance(value, float) or value == value else "nan")


json_like = st.one_of(
    values.map(lambda v: codec.encode(v)),
    st.text(alphabet='[]{}",:.-+0123456789eEtrufalsnNIy\\ \n\t$', max_size=12),
    st.sampled_from(["NaN", "-Infinity", "1e400", '"\\ud800"', '{"$t":[1e400]}', "", "1 2", "01", "[1,]",
                     '{"a":1,"a":2}', '{"$x":1}', '{"$t":[1],"$b":2}', "-0", "5e-324", '"\\u00e9"']),
)


@settings(max_examples=800, deadline=None)
@given(json_like)
def test_decode_gives_what_json_loads_gave_for_any_text(text):
    assert _outcome(codec.decode, text) == _outcome(_reference_decode, text)


def test_decode_refuses_what_is_not_text():
    from engine.errors import CorruptSnapshotError

    for bad in [None, 3, b"\xff"]:
        with pytest.raises(CorruptSnapshotError):
            codec.decode(bad)


# ---- flat dicts holding dates and times: a Parquet row with a timestamp column (issue 16) ---------------------

import datetime as dt  # noqa: E402
import decimal  # noqa: E402
from zoneinfo import ZoneInfo  # noqa: E402

temporals = st.one_of(
    st.datetimes(timezones=st.sampled_from([ZoneInfo("UTC"), ZoneInfo("Europe/Paris"), ZoneInfo("America/New_York")]),
                 allow_imaginary=True),
    st.datetimes(), st.datetimes(timezones=st.just(dt.timezone.utc)), st.dates(), st.times(), st.timedeltas(),
    st.decimals(allow_nan=False, places=3))
record_dicts = st.dictionaries(st.sampled_from(["user_id", "qty", "ts", "$x", "day"]),
                               st.one_of(scalars, temporals), max_size=4)


@settings(max_examples=500, deadline=None)
@given(record_dicts)
def test_records_with_dates_and_times_encode_and_decode_as_the_walk_does(value):
    text = codec.encode(value)
    assert text == _walked(value)
    fast = codec.decode(text)
    walked = codec._from_jsonable(__import__("json").loads(text))
    assert type(fast) is type(walked)
    assert _walked(fast) == _walked(walked)
    assert [type(v) for v in fast.values()] == [type(v) for v in walked.values()]
    assert [getattr(v, "tzinfo", None) for v in fast.values()] == [getattr(v, "tzinfo", None) for v in walked.values()]


def test_a_parquet_row_with_a_utc_timestamp_takes_no_walk(monkeypatch):
    """The row a Parquet read gives (a zoned UTC datetime among plain scalars) is the window contents of the
    column path: encoding and decoding it once per record and per state entry must not walk it generically."""
    row = {"user_id": "u-7", "qty": 3, "ts": dt.datetime(2026, 1, 1, 12, 0, 5, 250000, tzinfo=ZoneInfo("UTC"))}
    text = codec.encode(row)
    assert text == '{"user_id":"u-7","qty":3,"ts":{"$dz":["2026-01-01T12:00:05.250000",0,"UTC"]}}'

    def walk(*args, **kwargs):
        raise AssertionError("the generic walk ran")

    monkeypatch.setattr(codec, "_to_jsonable", walk)
    monkeypatch.setattr(codec, "_from_jsonable", walk)
    assert codec.encode(row) == text
    back = codec.decode(text)
    assert back == row and back["ts"].tzinfo is ZoneInfo("UTC")
    assert codec.decode('{"d":{"$d":"2026-01-02"},"n":null}') == {"d": dt.date(2026, 1, 2), "n": None}
    assert codec.decode('{"x":{"$dec":"1.50"}}') == {"x": decimal.Decimal("1.50")}


def test_a_repeated_wall_time_keeps_its_fold_both_ways():
    paris = ZoneInfo("Europe/Paris")
    for fold in (0, 1):
        row = {"ts": dt.datetime(2025, 10, 26, 2, 30, tzinfo=paris, fold=fold), "n": 1}
        text = codec.encode(row)
        assert text == _walked(row) == f'{{"ts":{{"$dz":["2025-10-26T02:30:00",{fold},"Europe/Paris"]}},"n":1}}'
        back = codec.decode(text)
        assert back["ts"].fold == fold and back["ts"].utcoffset() == row["ts"].utcoffset()
