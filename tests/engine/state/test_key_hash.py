"""The vectorized key hash the validation frames use is engine/state/key_groups.py's, row for row."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.state.key_hash import hash_encoded_keys, key_groups_of
from engine.state.codec import encode_key
from engine.state.key_groups import hash_encoded_key, key_group_for_encoded_key


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(max_size=90), max_size=40))
def test_every_string_hashes_as_xxh64_seed_42_does(keys):
    # lengths 0..90 cover every XXH64 branch: 1-byte and 4-byte tails, 8-byte lanes, 32-byte stripes
    hashes = hash_encoded_keys(pa.array(keys, pa.string()))
    assert [int(h) for h in hashes] == [hash_encoded_key(k) for k in keys]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.one_of(st.integers(), st.text(max_size=12), st.tuples(st.integers(), st.text(max_size=5))),
                max_size=30),
       st.sampled_from([1, 7, 128, 32768]))
def test_key_groups_equal_key_group_for_encoded_key_and_null_keys_get_minus_one(keys, max_parallelism):
    encoded = [encode_key(k) for k in keys]
    array = pa.array(encoded + [None] + encoded[:2], pa.string()).slice(0)
    groups = key_groups_of(pa.chunked_array([array.slice(0, 3), array.slice(3)]), max_parallelism)
    expected = [key_group_for_encoded_key(k, max_parallelism) for k in encoded]
    assert list(groups) == expected + [-1] + expected[:2]
