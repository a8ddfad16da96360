"""Record values cross Spark stages as codec JSON; rows.py decodes a batch of them with one parse, which must equal the codec's."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from engine.runtime.spark.rows import decode_values
from engine.state import codec

scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=True, allow_infinity=True),
                    st.text(max_size=5), st.binary(max_size=3))
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.tuples(inner, inner),
                            st.dictionaries(st.one_of(st.text(max_size=3), st.integers(0, 5)), inner, max_size=3)),
    max_leaves=8)


@settings(max_examples=400, deadline=None)
@given(st.lists(values, max_size=6))
def test_batch_decoding_equals_the_codec(items):
    texts = [codec.encode(v) for v in items]
    decoded = decode_values(texts)
    # compared through the codec: NaN is not equal to itself
    assert [codec.encode(v) for v in decoded] == [codec.encode(codec.decode(t)) for t in texts]
    assert [type(v) for v in decoded] == [type(codec.decode(t)) for t in texts]


def test_flat_records_take_the_fast_path_and_keep_their_types():
    rows = [("user-1", 1_704_067_200_000, 3), {"k": "a", "n": 2.5, "ok": True}, "plain", 7, None]
    assert decode_values([codec.encode(r) for r in rows]) == rows
    assert decode_values([None, codec.encode(("x", 1))]) == [None, ("x", 1)]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(values, st.tuples(scalars, scalars, scalars), st.tuples(st.text(max_size=4), st.integers(), st.floats())),
                max_size=6))
def test_records_written_for_transport_read_back_as_the_codec_values(items):
    """encode_record's text may differ from the codec's bytes, never from its value: through the codec
    and through decode_values (msgspec or json), each item comes back as codec.decode(codec.encode(item))."""
    from engine.runtime.spark.rows import encode_record

    texts = [encode_record(v) for v in items]
    expected = [codec.encode(codec.decode(codec.encode(v))) for v in items]
    assert [codec.encode(codec.decode(t)) for t in texts] == expected
    decoded = decode_values(texts)
    assert [codec.encode(v) for v in decoded] == expected
    assert [type(v) for v in decoded] == [type(codec.decode(codec.encode(v))) for v in items]


def test_flat_tuples_take_msgspec_and_odd_ones_the_codec():
    from engine.runtime.spark import rows

    assert rows.encode_record(("é", 1, 2.5, True, None)) == '{"$t":["é",1,2.5,true,null]}'
    # a non-finite float, a lone surrogate, a nested tuple and an int subclass keep the codec's text
    class Count(int):
        pass

    for odd in [("x", float("nan")), ("\ud800",), ((1, 2), 3), (Count(3),)]:
        assert rows.encode_record(odd) == codec.encode(odd)
    assert rows.decode_values(['{"$t":["\\ud800"]}', '{"$t":[1]}']) == [("\ud800",), (1,)]
    assert rows.decode_values(['{"$t":[1180591620717411303424,1.0]}']) == [(2**70, 1.0)]
    assert type(rows.decode_values(['{"$t":[1.0]}'])[0][0]) is float
    assert rows.decode_values(['{"$t":[1]}', '[1,2]', '{"$t":[{"$t":[2]}]}']) == [(1,), [1, 2], ((2,),)]
