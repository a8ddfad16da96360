"""Rows in state and snapshots (issue 19): a PyFlink program keeps ``Row`` records in state and keys by them.

A Row is written as the tagged ``{"$row": [kind, names or null, [values]]}`` (never pickled); it reads back
equal, with its names in their order, its kind and nested rows; a key text is canonical, so rows equal as
PyFlink compares them (same names in another order) get one key text and one key group in every process.
Malformed tags are refused as corrupt.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from engine import Row, RowKind
from engine.errors import CorruptSnapshotError, StateSerializationError
from engine.state import codec
from engine.state.key_groups import assign_to_key_group

REPO = Path(__file__).resolve().parents[3]


def _same(a, b) -> None:
    """Equal, same type, and for rows the same names in the same order, the same kind, recursively."""
    assert type(a) is type(b)
    if isinstance(a, Row):
        assert a.get_field_names() == b.get_field_names() and a.get_row_kind() is b.get_row_kind()
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    elif isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            _same(a[k], b[k])
    else:
        assert a == b


scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=3))
names = st.lists(st.text(min_size=1, max_size=3), max_size=4, unique=True)


@st.composite
def rows(draw, inner):
    kind = draw(st.sampled_from(list(RowKind)))
    if draw(st.booleans()):
        field_names = draw(names)
        row = Row(**{n: draw(inner) for n in field_names})
    else:
        row = Row(*draw(st.lists(inner, max_size=4)))
    row.set_row_kind(kind)
    return row


values = st.recursive(
    scalars,
    lambda inner: st.one_of(rows(inner), st.tuples(inner, inner), st.lists(inner, max_size=3),
                            st.dictionaries(st.text(max_size=3), inner, max_size=3)),
    max_leaves=8)


@settings(max_examples=300, deadline=None)
@given(rows(values))
def test_rows_round_trip_with_names_kind_and_nesting(row) -> None:
    _same(codec.decode(codec.encode(row)), row)


def test_known_text() -> None:
    assert codec.encode(Row(id=1, info="a")) == '{"$row":["+I",["id","info"],[1,"a"]]}'
    assert codec.encode(Row.of_kind(RowKind.DELETE, 1, (2,))) == '{"$row":["-D",null,[1,{"$t":[2]}]]}'


def test_equal_rows_are_one_key_whatever_the_order_of_their_names() -> None:
    a, b = Row(id=1, info="a"), Row(info="a", id=1)
    assert a == b and codec.encode_key(a) == codec.encode_key(b)
    assert assign_to_key_group(a, 128) == assign_to_key_group(b, 128)
    assert codec.decode(codec.encode_key(a)) == a  # read back as the rows compare; names sorted
    assert codec.encode_key(Row(1, 2)) != codec.encode_key((1, 2))
    assert codec.encode_key(Row(1)) != codec.encode_key(Row.of_kind(RowKind.DELETE, 1))


def test_a_row_key_has_one_key_group_in_every_process() -> None:
    """Python's own hash of a row of strings changes with PYTHONHASHSEED; key groups must not."""
    script = ("from engine import Row; from engine.state.key_groups import assign_to_key_group; "
              "print(assign_to_key_group(Row(country='China', city='Hangzhou'), 128), hash(Row('China')))")
    outs = []
    for seed in ("1", "2"):
        env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONHASHSEED=seed)
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True)
        outs.append(done.stdout.split())
    assert outs[0][0] == outs[1][0]
    assert outs[0][1] != outs[1][1]  # the Python hash did change: the test would notice a key group taken from it


def test_a_row_that_cannot_be_stored_says_where() -> None:
    with pytest.raises(StateSerializationError, match=r"value\[1\]"):
        codec.encode(Row(1, object()))
    broken = Row(1, 2)
    broken.set_field_names(["only_one"])
    with pytest.raises(StateSerializationError, match="names"):
        codec.encode(broken)


@pytest.mark.parametrize("text", [
    '{"$row":["+I",["a"],[1,2]]}',          # two values, one name
    '{"$row":["+X",null,[1]]}',             # no such kind
    '{"$row":["+I",null]}',                 # no values
    '{"$row":["+I",[1],[1]]}',              # a name that is no string
    '{"$row":["+I",["a","a"],[1,2]]}',      # a name twice
    '{"$row":"+I"}',
])
def test_malformed_row_tags_are_corrupt(text) -> None:
    with pytest.raises(CorruptSnapshotError, match=r"\$row"):
        codec.decode(text)
