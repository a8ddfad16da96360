"""The purchase-event generator: a pure function of (seed, split, offset), with the shapes the tests need."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from engine.errors import JobDefinitionError
from engine.io import GeneratorSource

REPO = Path(__file__).resolve().parents[3]

_DIGEST_PROGRAM = """
import hashlib, json, sys
from engine.io import GeneratorSource
source = GeneratorSource(num_splits=3, events_per_split=5000, num_keys=500, key_skew=1.1,
                         out_of_orderness_ms=300, late_fraction=0.02, malformed_fraction=0.01,
                         idle_splits={2: [(100, 900)]}, seed=int(sys.argv[1]))
digest = hashlib.sha256()
for split in source.discover_splits():
    reader = source.create_reader(split)
    while True:
        batch = reader.read(777)
        digest.update(json.dumps(batch.values, sort_keys=True).encode())
        digest.update(json.dumps(batch.end_offset).encode())
        if batch.finished:
            break
print(digest.hexdigest())
"""


def _digest_in_subprocess(seed: int) -> str:
    env = {"PYTHONHASHSEED": str(seed + 1234), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", _DIGEST_PROGRAM, str(seed)], cwd=REPO, env=env,
                          capture_output=True, text=True, check=True, timeout=120)
    return done.stdout.strip()


def test_the_same_seed_gives_the_same_bytes_in_another_process():
    here = subprocess.run([sys.executable, "-c", _DIGEST_PROGRAM, "7"], cwd=REPO, capture_output=True,
                          text=True, check=True, timeout=120).stdout.strip()
    assert _digest_in_subprocess(7) == here
    assert _digest_in_subprocess(8) != here


def _source(**overrides) -> GeneratorSource:
    params = dict(num_splits=2, events_per_split=20_000, num_keys=100, events_per_second=500,
                  out_of_orderness_ms=400, late_fraction=0.05, late_by_max_ms=3_000, seed=3)
    params.update(overrides)
    return GeneratorSource(**params)


def _all(source: GeneratorSource, split_index: int, batch: int = 4096) -> list[dict]:
    reader = source.create_reader(source.discover_splits()[split_index])
    out = []
    while True:
        got = reader.read(batch)
        out.extend(got.values)
        if got.finished:
            return out


def test_records_are_purchase_events_with_the_documented_fields():
    records = _all(_source(), 0)
    assert len(records) == 20_000
    for r in records[:200]:
        assert set(r) == {"user_id", "item", "qty", "price", "ts"}
        assert r["user_id"].startswith("user-") and 0 <= int(r["user_id"][5:]) < 100
        assert 1 <= r["qty"] <= 5 and isinstance(r["qty"], int)
        assert 1.0 <= r["price"] < 100.0 and round(r["price"], 2) == r["price"]
        assert isinstance(r["ts"], int)


def test_lateness_stays_within_the_bound_except_for_the_late_fraction():
    source = _source()
    records = _all(source, 1)
    delays = [source.start_timestamp_ms + i * 1000 // 500 - r["ts"] for i, r in enumerate(records)]
    on_time = [d for d in delays if d <= 400]
    late = [d for d in delays if d > 400]
    assert min(delays) >= 0 and max(on_time) <= 400
    assert all(400 < d <= 400 + 3_000 for d in late)
    assert 0.04 < len(late) / len(records) < 0.06


def test_a_record_within_the_bound_is_never_behind_a_per_split_bounded_watermark():
    source = _source(late_fraction=0.0)
    max_ts = None
    for r in _all(source, 0):
        if max_ts is not None:
            assert r["ts"] > max_ts - 400 - 1, "on-time record fell behind the bounded-out-of-orderness watermark"
        max_ts = r["ts"] if max_ts is None else max(max_ts, r["ts"])


def test_splits_differ_but_share_one_time_base():
    source = _source(late_fraction=0.0, out_of_orderness_ms=0)
    a, b = _all(source, 0), _all(source, 1)
    assert a != b
    assert [r["ts"] for r in a] == [r["ts"] for r in b]


def test_key_skew_makes_the_first_keys_hot_and_zero_skew_is_uniform():
    def share_of_hottest(skew: float) -> float:
        cols = _source(num_keys=1000, key_skew=skew).columns(0, 0, 50_000)
        counts = np.bincount(cols["key"], minlength=1000)
        return counts.max() / counts.sum()

    assert share_of_hottest(0.0) < 0.01
    assert share_of_hottest(1.2) > 0.15


def test_malformed_events_lack_ts_or_carry_it_as_a_string():
    records = _all(_source(malformed_fraction=0.1), 0)
    missing = [r for r in records if "ts" not in r]
    as_string = [r for r in records if isinstance(r.get("ts"), str)]
    assert missing and as_string
    assert 0.08 < (len(missing) + len(as_string)) / len(records) < 0.12
    assert all(s["ts"].isdigit() for s in as_string)


def test_an_idle_stretch_returns_empty_unfinished_batches_and_then_resumes():
    r"""
    offsets  0 ........ 50 [idle ......... 150) ........ 200
    reads      data         empty, empty, ...           data
    """
    source = _source(events_per_split=200, idle_splits={"generator-0": [(50, 150)]})
    reader = source.create_reader(source.discover_splits()[0])
    first = reader.read(80)
    assert len(first.values) == 50 and first.end_offset == 50  # a read stops where idleness starts
    empties = []
    while reader.current_offset() < 150:
        got = reader.read(30)
        assert got.values == [] and not got.finished
        empties.append(got.end_offset)
    assert empties == [80, 110, 140, 150]
    rest = reader.read(1000)
    assert len(rest.values) == 50 and rest.finished
    other = source.create_reader(source.discover_splits()[1])
    assert len(other.read(200).values) == 200  # only the named split idles


def test_the_arrow_path_holds_the_same_records_as_the_dict_path():
    source = _source(malformed_fraction=0.05, idle_splits={0: [(10, 20)]})
    split = source.discover_splits()[0]
    dicts, arrow = source.create_reader(split), source.create_reader(split)
    for size in (7, 100, 1000):
        d, a = dicts.read(size), arrow.read_arrow(size)
        assert a.end_offset == d.end_offset and a.finished == d.finished
        rows = a.records.to_pylist()
        assert len(rows) == len(d.values)
        for row, record in zip(rows, d.values):
            expected_ts = record["ts"] if isinstance(record.get("ts"), int) else None
            assert row == {**record, "ts": expected_ts}
    assert arrow.read_arrow(5).records.schema == GeneratorSource.arrow_schema()


def test_an_unbounded_generator_never_finishes():
    source = _source(events_per_split=None)
    reader = source.create_reader(source.discover_splits()[0], 10**9)
    batch = reader.read(10)
    assert not source.is_bounded() and not batch.finished and len(batch.values) == 10
    assert batch.end_offset == 10**9 + 10


@pytest.mark.parametrize("parameter, value", [
    ("num_splits", 0), ("num_keys", -1), ("key_skew", -0.5), ("late_fraction", 1.5),
    ("malformed_fraction", -0.1), ("events_per_second", 0), ("idle_splits", {5: [(0, 1)]}),
    ("idle_splits", {0: [(10, 5)]}),
])
def test_invalid_parameters_are_refused_by_name(parameter, value):
    with pytest.raises(JobDefinitionError, match=f"`{parameter}`"):
        _source(**{parameter: value})


def test_live_mode_releases_offsets_as_the_wall_clock_reaches_their_event_time():
    import time

    now_ms = int(time.time() * 1000)
    # started 10 s ago at 100 events/s: a backlog of ~1,000 offsets is there at once (catch-up after an outage)
    behind = GeneratorSource(events_per_split=None, events_per_second=100, live=True, start_timestamp_ms=now_ms - 10_000)
    reader = behind.create_reader(behind.discover_splits()[0])
    first = reader.read(100_000)
    assert 1_000 <= len(first.values) <= 1_100, len(first.values)
    assert max(r["ts"] for r in first.values) <= int(time.time() * 1000)
    # what was not yet released comes as the clock moves on, never ahead of it
    time.sleep(0.3)
    second = reader.read(100_000)
    assert 10 <= len(second.values) <= 60, len(second.values)
    assert not first.finished and not second.finished
    # the same records as the backlog form of the source: only when they are readable changes
    plain = GeneratorSource(events_per_split=None, events_per_second=100, start_timestamp_ms=now_ms - 10_000)
    again = plain.create_reader(plain.discover_splits()[0]).read(len(first.values) + len(second.values))
    assert again.values == first.values + second.values
    # a reader created anew at the reached offset (Spark makes one per epoch) keeps to the same schedule
    later = behind.create_reader(behind.discover_splits()[0], reader.current_offset())
    assert len(later.read(100_000).values) <= 20


def test_live_mode_starting_in_the_future_reads_nothing_yet_and_needs_a_start_time():
    import time

    future = GeneratorSource(events_per_split=None, live=True, start_timestamp_ms=int(time.time() * 1000) + 60_000)
    batch = future.create_reader(future.discover_splits()[0]).read(1_000)
    assert batch.values == [] and batch.end_offset == 0 and not batch.finished
    arrow = future.create_reader(future.discover_splits()[0]).read_arrow(1_000)
    assert arrow.records.num_rows == 0
    with pytest.raises(JobDefinitionError, match="start_timestamp_ms.*live=True"):
        GeneratorSource(live=True)
    with pytest.raises(JobDefinitionError, match="live"):
        GeneratorSource(live="yes", start_timestamp_ms=0)
