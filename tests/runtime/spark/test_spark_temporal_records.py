"""Records read from Parquet keep their timestamp, date and decimal columns through windows, on both runtimes.

Before state could hold them (engine/state/codec.py), a window over raw ``read_files`` records
failed on Spark (every record crossing the shuffle is encoded) and at the local runtime's first
checkpoint.  Here the Spark job runs epochs of 5 records, so every open window's contents go
through a state row, and back, several times; the results must equal the local runtime's, value
for value and type for type, and the local ones what the job means (checked by hand below).
"""

from __future__ import annotations

import datetime as dt
import decimal
import json

import pyarrow as pa
import pyarrow.parquet as pq

from engine.api.environment import StreamExecutionEnvironment
from engine.api.time import Duration, Time
from engine.io.file_sink import read_committed
from engine.watermarks.strategy import WatermarkStrategy
from engine.windowing.assigners import TumblingEventTimeWindows
from window_jobs import checkpointed_spark_env

UTC = dt.timezone.utc
T0 = dt.datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


def _write_splits(folder) -> list[dict]:
    rows = []
    for i in range(40):
        rows.append({"user_id": f"u{i % 3}", "ts": T0 + dt.timedelta(milliseconds=900 * i + 37 * (i % 4)),
                     "qty": i % 7 + 1, "price": decimal.Decimal(i * 3 % 17) / 4, "day": dt.date(2024, 5, 1 + i % 2)})
    schema = pa.schema([("user_id", pa.string()), ("ts", pa.timestamp("ms", tz="UTC")), ("qty", pa.int64()),
                        ("price", pa.decimal128(10, 2)), ("day", pa.date32())])
    folder.mkdir()
    for j in range(2):
        pq.write_table(pa.Table.from_pylist(rows[j::2], schema=schema), folder / f"split-{j}.parquet")
    return pa.Table.from_pylist(rows, schema=schema).to_pylist()  # the values as the reader hands them out


def _ts(e, _):
    return int(e["ts"].timestamp() * 1000)


def _user(e):
    return e["user_id"]


def _day(e):
    return e["day"]


def _dearer(a, b):
    return b if b["price"] > a["price"] else a


def _build(env, folder, output: str | None):
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(1)).with_timestamp_assigner(_ts)
    events = env.read_files(str(folder), "parquet").assign_timestamps_and_watermarks(strategy)
    sums = events.key_by(_user).window(TumblingEventTimeWindows.of(Time.seconds(10))).sum("qty")
    dearest = events.key_by(_day).window(TumblingEventTimeWindows.of(Time.seconds(15))).reduce(_dearer)
    if output is not None:
        sums.write_files(f"{output}/sums", "parquet")
        dearest.write_files(f"{output}/dearest", "jsonl")
    return sums, dearest


def _sorted(values):
    return sorted(values, key=lambda v: json.dumps(v, sort_keys=True, default=str))


def test_raw_parquet_records_window_alike_on_both_runtimes(spark, tmp_path):
    from engine.runtime.spark.runtime import SparkRuntime

    rows = _write_splits(tmp_path / "in")
    local = StreamExecutionEnvironment.get_execution_environment()
    local.set_parallelism(2)
    sums, dearest = _build(local, tmp_path / "in", None)
    golden_sums = _sorted(sums.execute_and_collect())
    golden_dearest = _sorted(dearest.execute_and_collect())

    # what the job means, by hand: per (user, 10 s window) the qty summed, on one of the window's
    # elements (the first to arrive; which one that is depends on how the two splits interleave)
    members: dict = {}
    for r in rows:
        members.setdefault((r["user_id"], _ts(r, None) // 10_000), []).append(r)
    assert len(golden_sums) == len(members)
    for got in golden_sums:
        window = members[(got["user_id"], _ts(got, None) // 10_000)]
        assert got["qty"] == sum(r["qty"] for r in window)
        assert {**got, "qty": None} in [{**r, "qty": None} for r in window]
    assert {type(v) for r in golden_sums for v in r.values()} == {str, dt.datetime, int, decimal.Decimal, dt.date}

    env = checkpointed_spark_env(f"file://{tmp_path}/chk", epoch_records=5)
    _build(env, tmp_path / "in", f"file://{tmp_path}/out")
    job = SparkRuntime(env).start("temporal", list(env._sinks), [])
    job.run()
    assert job.epoch >= 4 and job.checkpoint_history()

    spark_sums = _sorted(read_committed(f"file://{tmp_path}/out/sums"))
    assert spark_sums == golden_sums
    for got, want in zip(spark_sums, golden_sums):
        assert {k: type(v) for k, v in got.items()} == {k: type(v) for k, v in want.items()}
    # JSON lines carry them as text: ISO 8601 dates and times, exact decimals
    assert _sorted(read_committed(f"file://{tmp_path}/out/dearest")) == _sorted(
        json.loads(json.dumps(r, default=lambda v: v.isoformat() if hasattr(v, "isoformat") else str(v)))
        for r in golden_dearest)


def _wall_key(e):
    return e[0]


def _third(e, _):
    return e[2]


def test_a_key_with_no_single_instant_fails_the_job_on_both_runtimes(spark):
    """Not a dead letter: the job's choice of key is unsound for a whole hour a year, and the error says
    what to key by instead (engine/state/codec.py)."""
    import pytest
    from zoneinfo import ZoneInfo

    paris = ZoneInfo("Europe/Paris")
    items = [(dt.datetime(2024, 10, 27, 4, 0, tzinfo=paris), 2, 1000),
             (dt.datetime(2024, 10, 27, 2, 30, tzinfo=paris), 1, 2000)]  # 02:30 happened twice that night
    for runtime in ("local", "spark"):
        env = StreamExecutionEnvironment.get_execution_environment()
        env.set_runtime(runtime)
        env.set_parallelism(2)
        strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(_third)
        sums = env.from_collection(items).assign_timestamps_and_watermarks(strategy) \
            .key_by(_wall_key).window(TumblingEventTimeWindows.of(Time.seconds(10))).sum(1)
        with pytest.raises(Exception, match="repeated or skipped in zoneinfo.ZoneInfo.key='Europe/Paris'"):
            sums.execute_and_collect()


def _as_written(e):
    return (type(e["at"]).__name__, e["at"].isoformat(), e["n"])


def test_a_nanosecond_timestamp_is_the_same_microsecond_datetime_on_both_runtimes(spark, tmp_path):
    """pandas writes Parquet timestamps in nanoseconds.  pyarrow reads such a value as a ``pandas.Timestamp``: the
    local runtime handed that on, nanoseconds and all, while on Spark it became a ``datetime`` (the state codec
    keeps microseconds) once it crossed between stages; a local restore changed it the same way.  Both now read
    it as the datetime, to the microsecond."""
    # cut to the microsecond, downward before 1970 too (pyarrow's cast alone truncated -1 ns up to the epoch)
    nanos = [1_714_564_800_000_000_001, 1_714_564_800_000_001_999, -1_000, -1, -2_208_988_799_999_999_999]
    pq.write_table(pa.table({"at": pa.array(nanos, pa.timestamp("ns", "UTC")), "n": [1, 2, 3, 4, 5]}),
                   str(tmp_path / "ns.parquet"))
    got = {}
    for runtime in ("local", "spark"):
        env = StreamExecutionEnvironment.get_execution_environment()
        env.set_runtime(runtime)
        got[runtime] = sorted(env.read_files(str(tmp_path), "parquet").map(_as_written).execute_and_collect(),
                              key=lambda r: r[2])
    assert got["spark"] == got["local"]
    assert got["local"] == [("datetime", "2024-05-01T12:00:00+00:00", 1),
                            ("datetime", "2024-05-01T12:00:00.000001+00:00", 2),
                            ("datetime", "1969-12-31T23:59:59.999999+00:00", 3),
                            ("datetime", "1969-12-31T23:59:59.999999+00:00", 4),
                            ("datetime", "1900-01-01T00:00:00+00:00", 5)]
