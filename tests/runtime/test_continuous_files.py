"""A job that keeps reading a folder as files land (``read_files(..., monitor_interval=...)``, issue 19).

The client is the platform's main feed: files arrive in a folder while the job runs, the job is stopped with a
savepoint, more files arrive, and the job is restored (here at another parallelism).  Every event must be
counted exactly once in the committed output, and a file that landed while the job was down must be read
after the restore.

Every test runs on both runtimes and over both kinds of folder: a local one, and an ``s3://bucket/prefix`` on
moto's server over HTTP, reached the way a deployment reaches its store: credentials and ``AWS_ENDPOINT_URL``
in the driver's environment.  The Spark executors' Python workers started before the endpoint was known, so
the S3 runs also show that a shipped source carries the endpoint its driver resolved.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import boto3
import pytest

from engine import (
    Duration,
    ProcessWindowFunction,
    StreamExecutionEnvironment,
    Time,
    TumblingEventTimeWindows,
    WatermarkStrategy,
)
from engine.errors import JobDefinitionError
from engine.io.file_sink import FileSink, read_committed
from engine.io.source import monitored_subtask
from engine.runtime.local.runtime import LocalRuntime

ROWS_PER_FILE = 300
FILE_SPAN_MS = 3000


# credentials for moto, set when this module is imported: test collection comes before the suite's SparkSession
# starts, so the executors' Python workers have them in their environment as a deployment's would
for _name, _value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                      "AWS_DEFAULT_REGION": "us-east-1"}.items():
    os.environ.setdefault(_name, _value)


class LocalFolder:
    """A local folder; files land the way they must: a hidden name first, then an atomic rename."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.uri = str(path)

    def create(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)

    def put(self, name: str, data: bytes) -> None:
        hidden = self.path / f".{name}"
        hidden.write_bytes(data)
        os.replace(hidden, self.path / name)


class S3Folder:
    """A prefix of a bucket on moto's server; an S3 put is atomic."""

    def __init__(self, client, bucket: str, prefix: str) -> None:
        self.client, self.bucket, self.prefix = client, bucket, prefix
        self.uri = f"s3://{bucket}/{prefix}"

    def create(self) -> None:
        pass  # a prefix exists as soon as an object is put under it

    def put(self, name: str, data: bytes) -> None:
        self.client.put_object(Bucket=self.bucket, Key=f"{self.prefix}/{name}", Body=data)


class CountingMotoServer:
    """moto's server app on a thread, behind a WSGI layer that counts what reaches it by (method, path): how many
    times the job fetched each object (a GET of ``/bucket/key`` without a query; a listing has one)."""

    def __init__(self) -> None:
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
        from werkzeug.serving import make_server

        app = DomainDispatcherApplication(create_backend_app)
        self.requests: Counter = Counter()
        self._lock = threading.Lock()

        def counting(environ, start_response):
            if not environ.get("QUERY_STRING"):
                with self._lock:
                    self.requests[(environ["REQUEST_METHOD"], environ.get("PATH_INFO", ""))] += 1
            return app(environ, start_response)

        self._server = make_server("127.0.0.1", 0, counting, threaded=True, request_handler=MotoRequestHandler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        host, port = self._server.server_address[:2]
        self.endpoint = f"http://{host}:{port}"

    def gets_of(self, bucket: str, key: str) -> int:
        with self._lock:
            return self.requests[("GET", f"/{bucket}/{key}")]

    def stop(self) -> None:
        self._server.shutdown()
        self._thread.join()


@pytest.fixture(scope="module")
def counting_moto():
    server = CountingMotoServer()
    yield server
    server.stop()


@pytest.fixture(params=["local", "s3"])
def folders(request, tmp_path: Path, monkeypatch):
    """``folders(name)``: a fresh folder of the parametrized kind (not created yet)."""
    if request.param == "local":
        return lambda name: LocalFolder(tmp_path / name)
    endpoint = request.getfixturevalue("moto_endpoint")  # tests/conftest.py
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)  # the driver learns the endpoint now, as a deployment's does
    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    bucket = "sluice-in-" + uuid.uuid4().hex[:10]
    client.create_bucket(Bucket=bucket)
    return lambda name: S3Folder(client, bucket, name)


def land(folder, index: int) -> list[dict]:
    """Put file ``index`` (events of [index * 3 s, (index + 1) * 3 s)) into ``folder``."""
    rng = random.Random(index)
    rows = [{"key": f"k{rng.randrange(5)}", "ts": index * FILE_SPAN_MS + i * FILE_SPAN_MS // ROWS_PER_FILE,
             "v": rng.randrange(1, 10)} for i in range(ROWS_PER_FILE)]
    folder.put(f"events-{index:03d}.jsonl", "".join(json.dumps(r) + "\n" for r in rows).encode())
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


def build(src, out: Path, storage: Path, parallelism: int, runtime: str = "local", *others,
          strategy: WatermarkStrategy | None = None) -> StreamExecutionEnvironment:
    """The window job over the monitored folder ``src`` (and the ``others``, unioned with it)."""
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime(runtime)
    env.set_parallelism(parallelism)
    env.enable_checkpointing(100)
    env.get_checkpoint_config().set_checkpoint_storage_dir(storage.as_uri())
    strategy = strategy or WatermarkStrategy.for_monotonous_timestamps()
    streams = [env.read_files(f.uri, "jsonl", monitor_interval=Duration.of_millis(50))
               .assign_timestamps_and_watermarks(strategy.with_timestamp_assigner("ts")) for f in (src, *others)]
    events = streams[0].union(*streams[1:]) if len(streams) > 1 else streams[0]
    (events
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
                                                                                         runtime: str, folders) -> None:
    src, out, storage = folders("in"), tmp_path / "out", tmp_path / "chk"
    src.create()
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


def test_a_monitored_source_lists_the_folder_again_and_never_ends_by_itself(tmp_path: Path, runtime: str,
                                                                          folders) -> None:
    src, out, storage = folders("in"), tmp_path / "out", tmp_path / "chk"  # the folder does not exist yet
    client = submit(build(src, out, storage, 2, runtime), "empty")
    try:
        time.sleep(2)
        assert not client.done() and client.status().records_in == 0
        # an empty folder is listed every 50 ms, not polled in a loop (Spark ran millions of empty epochs a minute)
        assert client.status().epoch < 200
        src.create()
        rows = land(src, 0)
        wait_for(lambda: client.status().records_in == ROWS_PER_FILE, 180, "the first file read", client)
        client.stop_with_savepoint((tmp_path / "sp").as_uri(), drain=True).result(timeout=60)
        client.wait(60)
    finally:
        if not client.done():
            client.cancel()
    assert output_sums(out) == window_sums(rows)


def test_a_quiet_folder_goes_idle_and_the_busy_folders_windows_still_fire(tmp_path: Path, runtime: str,
                                                                          folders) -> None:
    """Two monitored folders, unioned; the quiet one received one file and then nothing::

        quiet  |file 0|.................................   (read, released: no split left -> idle after 300 ms)
        busy   |file 0|file 1|file 2|...
               0 s    3 s    6 s    9 s   event time

    Flink's idleness rule (``with_idleness``, seed 004): a source subtask with nothing to read goes idle once
    the timeout has passed without records, so the quiet folder stops holding event time back and the busy
    folder's windows fire while the job runs.  On the local runtime the quiet source's subtasks (one of them
    never had a file) used to hold the watermark at their last value for good."""
    busy, quiet, out, storage = folders("busy"), folders("quiet"), tmp_path / "out", tmp_path / "chk"
    busy.create()
    quiet.create()
    rows = land(quiet, 0)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_idleness(Duration.of_millis(300))
    client = submit(build(busy, out, storage, 2, runtime, quiet, strategy=strategy), "quiet")
    try:
        for index in range(3):
            rows += land(busy, index)
        # every window that ends by 5 s: file 2's events, and idleness, carry the watermark past them
        expected = window_sums([r for r in rows if r["ts"] < 5000])
        wait_for(lambda: set(expected) <= set(output_sums(out)), 90, "the busy folder's windows committed", client)
        assert {w: v for w, v in output_sums(out).items() if w in expected} == expected
        client.stop_with_savepoint((tmp_path / "sp").as_uri(), drain=True).result(timeout=60)
        client.wait(60)
    finally:
        if not client.done():
            client.cancel()
    assert output_sums(out) == window_sums(rows)


def test_in_epoch_mode_a_source_subtask_without_files_lets_the_others_epochs_and_checkpoints_go_on(
        tmp_path: Path, folders) -> None:
    """The local runtime's epoch mode (the Spark runtime's cadence, ``epoch_records``) starts an epoch once every
    source subtask reached the end of the last one.  A monitored subtask with no file to read ends its epoch
    after each listing; it used to wait for a file of its own, and the whole job with it: no epoch, no
    barrier, no checkpoint, and a stop that never completed."""
    src, out, storage = folders("in"), tmp_path / "out", tmp_path / "chk"
    src.create()
    env = build(src, out, storage, 2, "local")
    env.set_runtime_option("epoch_records", 100)
    client = submit(env, "epochs")
    try:
        rows = land(src, 0)  # 300 rows: three epochs of one subtask while the other has nothing
        wait_for(lambda: client.status().records_in == ROWS_PER_FILE, 60, "file 0 read", client)
        done = client.status().num_completed_checkpoints
        wait_for(lambda: client.status().num_completed_checkpoints > done + 2, 60, "checkpoints", client)
        rows += land(src, 1)
        wait_for(lambda: client.status().records_in == 2 * ROWS_PER_FILE, 60, "file 1 read", client)
        client.stop_with_savepoint((tmp_path / "sp").as_uri(), drain=True).result(timeout=60)
        client.wait(60)
    finally:
        if not client.done():
            client.cancel()
    assert output_sums(out) == window_sums(rows)


def test_a_drain_right_after_an_epoch_commits_the_epochs_results_and_the_drains(tmp_path: Path, spark) -> None:
    """``stop --drain`` on Spark fires the remaining windows in a step of its own, whose exactly-once file parts
    are staged in the sink's open transaction.  With no checkpoint between the last epoch and the drain, that
    transaction also holds the last epoch's parts: the drain's parts must not take their names (they were
    staged under the same epoch number, overwrote them, and the savepoint's commit failed)."""
    src, out, storage = LocalFolder(tmp_path / "in"), tmp_path / "out", tmp_path / "chk"
    src.create()
    env = build(src, out, storage, 2, "spark")
    env.enable_checkpointing(3_600_000)  # no periodic checkpoint: every part waits in one open transaction
    client = submit(env, "drain")
    try:
        rows = land(src, 0) + land(src, 1)
        wait_for(lambda: client.status().records_in == 2 * ROWS_PER_FILE, 180, "both files read", client)
        client.stop_with_savepoint((tmp_path / "sp").as_uri(), drain=True).result(timeout=120)
        client.wait(60)
    finally:
        if not client.done():
            client.cancel()
    assert output_sums(out) == window_sums(rows)


def test_a_restored_s3_source_fetches_no_file_it_had_finished(tmp_path: Path, runtime: str, counting_moto,
                                                              monkeypatch) -> None:
    """The checkpoint records which files were read to their end; a restored job must skip them before any GET.
    Counted on the server: three files read and finished before a savepoint, a fourth landing after the restore
    (at another parallelism); after the restore only the fourth may be fetched."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", counting_moto.endpoint)
    client = boto3.client("s3", endpoint_url=counting_moto.endpoint, region_name="us-east-1")
    bucket = "sluice-gets-" + uuid.uuid4().hex[:10]
    client.create_bucket(Bucket=bucket)
    src, out, storage = S3Folder(client, bucket, "in"), tmp_path / "out", tmp_path / "chk"
    rows = [r for index in range(3) for r in land(src, index)]
    job = submit(build(src, out, storage, 1, runtime), "gets")
    try:
        wait_for(lambda: job.status().records_in >= 3 * ROWS_PER_FILE, 180, "files 0-2 read", job)
        savepoint = job.stop_with_savepoint((tmp_path / "sp").as_uri()).result(timeout=60)
        job.wait(60)
    finally:
        if not job.done():
            job.cancel()
    names = [f"in/events-{index:03d}.jsonl" for index in range(4)]
    before = [counting_moto.gets_of(bucket, name) for name in names[:3]]
    assert before == [1, 1, 1], before  # each file fetched once while the job ran

    restored = submit(build(src, out, storage, 2, runtime), "gets", savepoint)
    try:
        rows += land(src, 3)
        wait_for(lambda: restored.status().records_in >= ROWS_PER_FILE, 180, "file 3 read", restored)
        restored.stop_with_savepoint((tmp_path / "sp").as_uri(), drain=True).result(timeout=60)
        restored.wait(60)
    finally:
        if not restored.done():
            restored.cancel()
    after = [counting_moto.gets_of(bucket, name) for name in names]
    assert after[:3] == before, f"finished files fetched again after the restore: {after[:3]} (before: {before})"
    assert after[3] >= 1
    assert output_sums(out) == window_sums(rows)


SMALL_ROWS = 30  # a file is read in one read on both runtimes: its watermark moves once, to its end


def name_on(subtask: int, stem: str, parallelism: int = 2) -> str:
    """A file name the monitored source hands to ``subtask`` (a hash of the name picks it)."""
    return next(name for n in range(1000) if monitored_subtask(name := f"{stem}-{n}.jsonl", parallelism) == subtask)


def land_small(folder, name: str, index: int) -> list[dict]:
    rows = [{"key": f"k{i % 2}", "ts": index * FILE_SPAN_MS + i * FILE_SPAN_MS // SMALL_ROWS, "v": 1 + i % 7}
            for i in range(SMALL_ROWS)]
    folder.put(name, "".join(json.dumps(r) + "\n" for r in rows).encode())
    return rows


def fired(out: Path) -> set[tuple]:
    return {(r["key"], r["start"], r["v"], r["watermark"]) for r in read_committed(str(out))}


def run_with_a_quiet_subtask(folder, out: Path, storage: Path, runtime: str,
                             idleness_ms: int | None) -> tuple[list[dict], set[tuple]]:
    """Parallelism 2: subtask 0 reads one file and then has nothing to read; subtask 1 keeps receiving files, one
    at a time, each read before the next lands (events after the quiet file's: none is late).  Drained at the
    end; returns the rows landed and the windows fired before the drain."""

    class Fired(ProcessWindowFunction):  # defined here: shipped to Spark's workers by value
        """A window's sum and the watermark that fired it."""

        def process(self, key, context, elements):
            yield {"key": key, "start": context.window().start, "v": sum(r["v"] for r in elements),
                   "watermark": context.current_watermark()}

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime(runtime)
    env.set_parallelism(2)
    env.enable_checkpointing(100)
    env.get_checkpoint_config().set_checkpoint_storage_dir(storage.as_uri())
    strategy = WatermarkStrategy.for_monotonous_timestamps()
    if idleness_ms is not None:
        strategy = strategy.with_idleness(Duration.of_millis(idleness_ms))
    (env.read_files(folder.uri, "jsonl", monitor_interval=Duration.of_millis(50))
        .assign_timestamps_and_watermarks(strategy.with_timestamp_assigner("ts"))
        .key_by("key")
        .window(TumblingEventTimeWindows.of(Time.seconds(1)))
        .process(Fired())
        .sink_to(FileSink(str(out), "jsonl")))
    client = submit(env, "quiet-subtask")
    settle_s = 1.5  # well past the idle timeout and several listings: what fires while a subtask is quiet has fired
    try:
        time.sleep(settle_s)
        rows = land_small(folder, name_on(0, "quiet"), 0)
        wait_for(lambda: client.status().records_in == len(rows), 180, "the quiet subtask's file read", client)
        time.sleep(settle_s)
        for index in range(1, 5):
            rows += land_small(folder, name_on(1, f"busy{index}"), index)
            wait_for(lambda: client.status().records_in == len(rows), 180, f"busy file {index} read", client)
            time.sleep(settle_s)
        done = client.status().num_completed_checkpoints  # what fired so far is committed by the next two
        wait_for(lambda: client.status().num_completed_checkpoints >= done + 2, 180, "two checkpoints", client)
        before_drain = fired(out)
        client.stop_with_savepoint((storage / "sp").as_uri(), drain=True).result(timeout=120)
        client.wait(60)
    finally:
        if not client.done():
            client.cancel()
    return rows, before_drain


@pytest.mark.parametrize("idleness_ms", [None, 300], ids=["without-idleness", "with-idleness"])
def test_a_quiet_source_subtask_holds_event_time_back_the_same_way_on_both_runtimes(tmp_path: Path, spark, folders,
                                                                                    idleness_ms) -> None:
    """One monitored folder at parallelism 2; the file names pick the subtasks (a hash of the name)::

        subtask 0  |quiet |..............................   (read to its end, then nothing more)
        subtask 1         |busy 1|busy 2|busy 3|busy 4|
                   0 s    3 s    6 s    9 s    12 s   15 s   event time

    As in Flink (a source reader without a split keeps its last watermark): without idleness subtask 0 holds
    event time at its file's watermark, so no window past it fires until the drain; with ``with_idleness`` it
    goes idle and the busy subtask's windows fire as its files are read.  Both runtimes give the same windows,
    fired at the same watermarks (the Spark runtime let a read file's channel leave its valve, so there a quiet
    subtask never held event time back)."""
    results, before_drain = {}, {}
    for runtime in ("local", "spark"):
        folder = folders(f"in-{runtime}")
        folder.create()
        out = tmp_path / f"out-{runtime}"
        rows, before_drain[runtime] = run_with_a_quiet_subtask(folder, out, tmp_path / f"chk-{runtime}", runtime,
                                                               idleness_ms)
        results[runtime] = {(key, start, v) for key, start, v, _ in fired(out)}
        assert Counter({(key, start // 1000): v for key, start, v in results[runtime]}) == window_sums(rows)
        assert len(results[runtime]) == len(window_sums(rows))  # each window fired once
    # the same windows fired at the same watermarks while the job ran; the drain fired the others (at the
    # watermarks its end of input passed through: each source subtask's MAX_WATERMARK in turn on the local
    # runtime, as in Flink, MAX_WATERMARK at once on Spark)
    assert before_drain["spark"] == before_drain["local"]
    assert results["spark"] == results["local"]
    # a file's watermark: its last event's timestamp - 1 (monotonous timestamps)
    quiet_watermark = FILE_SPAN_MS - FILE_SPAN_MS // SMALL_ROWS - 1
    busy_watermark = 5 * FILE_SPAN_MS - FILE_SPAN_MS // SMALL_ROWS - 1
    held_at = quiet_watermark if idleness_ms is None else busy_watermark
    assert {(key, start) for key, start, _, _ in before_drain["local"]} == {
        (key, start) for key, start, _ in results["local"] if start + 999 <= held_at}
    assert {watermark for *_, watermark in before_drain["local"]} == (
        {quiet_watermark} if idleness_ms is None else {quiet_watermark + k * FILE_SPAN_MS for k in range(5)})


@pytest.mark.parametrize("interval", [0, -5, "1s", 1.5])
def test_a_bad_monitor_interval_is_refused_naming_the_parameter(tmp_path: Path, interval) -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    with pytest.raises(JobDefinitionError, match="monitor_interval"):
        env.read_files(str(tmp_path), "jsonl", monitor_interval=interval)

