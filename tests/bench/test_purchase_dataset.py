"""The benchmark data set's key distributions: issue 16's grid varies skew, so a Zipf skew must really skew."""

from __future__ import annotations

from collections import Counter

import pyarrow.parquet as pq
import pytest

from bench.common import generate_purchase_events


def _key_counts(dataset) -> Counter:
    return Counter(k for f in dataset.files for k in pq.read_table(f, columns=["user_id"]).column(0).to_pylist())


def test_zipf_skew_puts_a_large_share_on_the_hottest_keys_and_uniform_does_not(tmp_path) -> None:
    uniform = _key_counts(generate_purchase_events(tmp_path / "u", events=20_000, keys=1_000, files=2))
    skewed = _key_counts(generate_purchase_events(tmp_path / "z", events=20_000, keys=1_000, files=2, skew=1.1))
    assert sum(uniform.values()) == sum(skewed.values()) == 20_000
    assert uniform.most_common(1)[0][1] < 60  # about 20 each
    # at s = 1.1 over 1,000 keys the hottest key's probability is about 0.17
    assert 0.12 < skewed["user-0"] / 20_000 < 0.22
    assert skewed.most_common(1)[0][0] == "user-0"


def test_a_negative_skew_is_refused(tmp_path) -> None:
    with pytest.raises(ValueError, match="skew"):
        generate_purchase_events(tmp_path, events=10, keys=2, files=1, skew=-1)
