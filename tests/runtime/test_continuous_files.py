"""A job that keeps reading a folder as files land (``read_files(..., monitor_interval=...)``, issue 19).

The client is the platform's main feed: files arrive in a folder while the job runs, the job is stopped with a
savepoint, more files arrive, and the job is restored (here at another parallelism).  Every event must be
counted exactly once in the committed output, and a file that landed while the job was down must be read
after the restore.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections import Counter
from pathlib import Path

import pytest

from engine import Duration, StreamExecutionEnvironment, Time, TumblingEventTimeWindows, WatermarkStrategy
from engine.errors import JobDefinitionError
from engine.io.file_sink import FileSink, read_committed
from engine.runtime.local.runtime import LocalRuntime

ROWS_PER_FILE = 300
FILE_SPAN_MS = 3000


def land(folder: Path, index: int) -> list[dict]:
    """Write file ``index`` (events of [index * 3 s, (index + 1) * 3 s)) the way files must land: a hidden
    name first, then an atomic rename."""
    rng = random.Random(index)
    rows = [{"key": f"k{rng.randrange(5)}", "ts": index * FILE_SPAN_MS + i * FILE_SPAN_MS // ROWS_PER_FILE,
             "v": rng.randrange(1, 10)} for i in range(ROWS_PER_FILE)]
    hidden = folder / f".events-{index:03d}.jsonl"
    hidden.write_text("".join(json.dumps(r) + "\n" for r in rows))
    os.replace(hidden, folder / f"events-{index:03d}.jsonl")
    return rows


def window_sums(rows: list[dict]) -> Counter:
    sums: Counter = Counter()
    for r in rows:
        sums[(r["key"], r["ts"] // 1000)] += r["v"]
    return sums


def output_sums(out: Path) -> Counter:
    committed = read_committed(str(out))
    sums: Counter = Counter()
    for r in committed:
        assert (r["key"], r["ts"] // 1000) not in sums, f"window {(r['key'], r['ts'] // 1000)} written twice"
        sums[(r["key"], r["ts"] // 1000)] = r["v"]
    return sums


def submit(env: StreamExecutionEnvironment, name: str, from_savepoint: str | None = None):
    if env.get_runtime() == "spark":
        from engine.runtime.spark.runtime import SparkRuntime

        return SparkRuntime(env).submit(name, list(env._sinks), from_savepoint=from_savepoint)
    return LocalRuntime(env).submit(name, list(env._sinks), from_savepoint=from_savepoint)


@pytest.fixture(params=["local", "spark"])
def runtime(request) -> str:
    if request.param == "spark":
        request.getfixturevalue("spark")  # the session's SparkSession, shared with every Spark test
    return request.param


def build(src: Path, out: Path, storage: Path, parallelism: int, runtime: str = "local") -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime(runtime)
    env.set_parallelism(parallelism)
    env.enable_checkpointing(100)
    env.get_checkpoint_config().set_checkpoint_storage_dir(storage.as_uri())
    (env.read_files(str(src), "jsonl", monitor_interval=Duration.of_millis(50))
        .assign_timestamps_and_watermarks(WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner("ts"))
        .key_by("key")
        .window(TumblingEventTimeWindows.of(Time.seconds(1)))
        .sum("v")
        .sink_to(FileSink(str(out), "jsonl")))
    return env


def wait_for(condition, timeout_s: float, what: str, client) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert not client.done(), f"the job ended while waiting for {what}: {client.status()}"
        assert time.monotonic() < deadline, f"no {what} after {timeout_s} s: {client.status()}"
        time.sleep(0.05)


def test_files_landing_while_the_job_runs_and_while_it_is_down_are_each_read_exactly_once(tmp_path: Path,
                                                                                         runtime: str) -> None:
    src, out, storage = tmp_path / "in", tmp_path / "out", tmp_path / "chk"
    src.mkdir()
    rows = land(src, 0)
    client = submit(build(src, out, storage, 1, runtime), "feed")
    try:
        # windows of file 0 are complete once file 1's first event passes the watermark over them
        wait_for(lambda: client.status().records_in >= ROWS_PER_FILE, 180, "file 0 read", client)
        rows += land(src, 1)
        expected_0 = window_sums([r for r in rows if r["ts"] < FILE_SPAN_MS])
        wait_for(lambda: set(expected_0) <= set(output_sums(out)), 180, "file 0's windows committed", client)
        savepoint = client.stop_with_savepoint((tmp_path / "sp").as_uri()).result(timeout=60)
        client.wait(60)
    finally:
        if not client.done():
            client.cancel()
    # while the job is down, two more files land; the restored job (two subtasks now) reads them
    rows += land(src, 2)
    rows += land(src, 3)
    restored = submit(build(src, out, storage, 2, runtime), "feed", savepoint)
    try:
        wait_for(lambda: restored.status().records_in >= 2 * ROWS_PER_FILE, 180, "files 2 and 3 read", restored)
        rows += land(src, 4)  # and one more while it runs again
        wait_for(lambda: restored.status().records_in >= 3 * ROWS_PER_FILE, 180, "file 4 read", restored)
        restored.stop_with_savepoint((tmp_path / "sp").as_uri(), drain=True).result(timeout=60)
        restored.wait(60)
    finally:
        if not restored.done():
            restored.cancel()
    assert output_sums(out) == window_sums(rows)
    assert sum(window_sums(rows).values()) == sum(r["v"] for r in rows)


def test_a_monitored_source_lists_the_folder_again_and_never_ends_by_itself(tmp_path: Path, runtime: str) -> None:
    src, out, storage = tmp_path / "in", tmp_path / "out", tmp_path / "chk"  # the folder does not exist yet
    client = submit(build(src, out, storage, 2, runtime), "empty")
    try:
        time.sleep(2)
        assert not client.done() and client.status().records_in == 0
        # an empty folder is listed every 50 ms, not polled in a loop (Spark ran millions of empty epochs a minute)
        assert client.status().epoch < 200
        src.mkdir()
        rows = land(src, 0)
        wait_for(lambda: client.status().records_in == ROWS_PER_FILE, 180, "the first file read", client)
        client.stop_with_savepoint((tmp_path / "sp").as_uri(), drain=True).result(timeout=60)
        client.wait(60)
    finally:
        if not client.done():
            client.cancel()
    assert output_sums(out) == window_sums(rows)


@pytest.mark.parametrize("interval", [0, -5, "1s", 1.5])
def test_a_bad_monitor_interval_is_refused_naming_the_parameter(tmp_path: Path, interval) -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    with pytest.raises(JobDefinitionError, match="monitor_interval"):
        env.read_files(str(tmp_path), "jsonl", monitor_interval=interval)

