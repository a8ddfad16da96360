"""Shared benchmark helpers: the purchase-event data set, timing, peak memory, the result line.

The Spark benchmarks compare Sluice-on-Spark with Spark Structured Streaming's native windowed
aggregation *on the same files in the same process* (issue 5), so the data set is written once by
:func:`generate_purchase_events` and described by a :class:`PurchaseDataset` both runs read.

Data shape (deterministic for a given seed; numpy's PCG64):

* ``user_id`` string ``"user-<i>"``, i in [0, keys): uniform, or with ``skew`` > 0 Zipf-distributed
  (key i drawn with probability proportional to 1 / (i + 1) ** skew: at skew 1.1 and 100k keys the
  hottest key holds about 10 % of the events);
* ``qty`` int64 in [1, 10]; ``price`` float64 in [1, 100) rounded to cents;
* ``ts`` timestamp (ms, UTC): event time advances evenly over ``span_s`` seconds from
  2024-01-01T00:00:00Z, minus a uniform lag in [0, max_out_of_orderness_ms) so events arrive
  out of order but never later than the bound (a watermark of that delay drops nothing).

Events are cut into ``files`` Parquet files in event-time order, one per micro-batch / epoch;
file modification times are set strictly increasing because Spark's file stream source orders
new files by modification time, not by name.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

EPOCH_2024_MS = 1_704_067_200_000


@dataclass(frozen=True, slots=True)
class PurchaseDataset:
    directory: str
    files: tuple[str, ...]
    events: int
    keys: int
    seed: int
    span_s: int
    max_out_of_orderness_ms: int
    bytes_on_disk: int
    skew: float = 0.0

    def to_json(self) -> dict:
        d = asdict(self)
        d["files"] = len(self.files)
        return d


def generate_purchase_events(
    directory: str | os.PathLike,
    *,
    events: int,
    keys: int,
    files: int,
    seed: int = 42,
    span_s: int = 3600,
    max_out_of_orderness_ms: int = 5_000,
    skew: float = 0.0,
) -> PurchaseDataset:
    """Write ``events`` purchase events over ``keys`` users as ``files`` Parquet files; see the module doc."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    if events < 1 or keys < 1 or files < 1 or files > events:
        raise ValueError(f"need events >= files >= 1 and keys >= 1; got events={events}, keys={keys}, files={files}")
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    if skew < 0:
        raise ValueError(f"skew must be >= 0 (0: uniform keys); got {skew}")
    names = pa.array([f"user-{i}" for i in range(keys)], pa.string())
    weights = None
    if skew > 0:
        weights = 1.0 / np.arange(1, keys + 1, dtype=np.float64) ** skew
        weights /= weights.sum()
    bounds = np.linspace(0, events, files + 1).astype(np.int64)
    paths = []
    total_bytes = 0
    base_mtime = time.time() - files - 10
    for f in range(files):
        lo, hi = int(bounds[f]), int(bounds[f + 1])
        n = hi - lo
        idx = np.arange(lo, hi, dtype=np.int64)
        ts = EPOCH_2024_MS + (idx * (span_s * 1000)) // events - rng.integers(0, max_out_of_orderness_ms, n)
        key_ids = rng.integers(0, keys, n) if weights is None else rng.choice(keys, n, p=weights)
        user = pa.DictionaryArray.from_arrays(pa.array(key_ids, pa.int32()), names).dictionary_decode()
        table = pa.table(
            {
                "user_id": user,
                "qty": pa.array(rng.integers(1, 11, n), pa.int64()),
                "price": pa.array(np.round(rng.uniform(1.0, 100.0, n), 2), pa.float64()),
                "ts": pa.array(ts, pa.timestamp("ms", tz="UTC")),
            }
        )
        path = out / f"part-{f:06d}.parquet"
        pq.write_table(table, path)
        os.utime(path, (base_mtime + f, base_mtime + f))
        total_bytes += path.stat().st_size
        paths.append(str(path))
    return PurchaseDataset(str(out), tuple(paths), events, keys, seed, span_s, max_out_of_orderness_ms, total_bytes,
                           skew)


def interleave_into_splits(dataset: PurchaseDataset, directory: str | os.PathLike, splits: int) -> str:
    """The same events as ``splits`` Parquet files: file j holds every ``splits``-th event from j on.

    Why: a micro-batch engine reads the files one per batch, in event-time order, so its watermark
    advances batch by batch.  Sluice reads every split in every epoch and its watermark is the
    minimum over splits (seed 004), so one split per time-ordered file would hold every window open
    until the last epoch.  Interleaved splits give each epoch the same time slice a micro-batch
    gets, read by ``splits`` parallel tasks.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.concat_tables([pq.read_table(f) for f in dataset.files])
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    for j in range(splits):
        pq.write_table(table.take(pa.array(range(j, table.num_rows, splits), pa.int64())), out / f"split-{j:03d}.parquet")
    return str(out)


def peak_rss_mb() -> float:
    """Peak resident memory of this (the driver's Python) process, in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def process_peak_rss_mb(pid: int) -> float | None:
    """Peak resident memory (VmHWM) of another live process, e.g. the Spark JVM; None if unreadable."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        return None
    return None


def spark_jvm_pid() -> int | None:
    """The pid of the JVM PySpark launched for this process (local mode: driver and executors)."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None) if gateway is not None else None
    return proc.pid if proc is not None else None


class CpuMeter:
    """CPU seconds spent between :meth:`start` and :meth:`stop`, split by process kind (psutil).

    * ``jvm``: the Spark JVM (local mode: driver and executors; all its threads, GC included);
    * ``python_workers``: the Python processes the JVM started (PySpark's daemon and its workers),
      with the workers that exited meanwhile (their time is their reaping parent's children time);
    * ``driver_python``: this process (the job master or the streaming query's driver).

    What it is for: a throughput ratio says who is faster, this says where each side's CPU goes
    (bench/bench_spark.py prints it per event for both sides).
    """

    def __init__(self, jvm_pid: int | None) -> None:
        self.jvm_pid = jvm_pid
        self._start: dict[str, float] | None = None

    @staticmethod
    def _own(proc: Any) -> float:
        t = proc.cpu_times()
        return t.user + t.system

    @staticmethod
    def _with_reaped(proc: Any) -> float:
        t = proc.cpu_times()
        return t.user + t.system + t.children_user + t.children_system

    def _sample(self) -> dict[str, float]:
        import psutil

        out = {"jvm": 0.0, "python_workers": 0.0, "driver_python": self._own(psutil.Process())}
        if self.jvm_pid is None:
            return out
        try:
            jvm = psutil.Process(self.jvm_pid)
            out["jvm"] = self._own(jvm)
            for child in jvm.children(recursive=True):
                try:
                    out["python_workers"] += self._with_reaped(child)
                except psutil.NoSuchProcess:
                    pass  # exited between the listing and the read: its parent's children time has it
        except psutil.NoSuchProcess:
            pass
        return out

    def start(self) -> "CpuMeter":
        self._start = self._sample()
        return self

    def stop(self) -> dict[str, float]:
        """CPU seconds per kind since :meth:`start` (and ``total``)."""
        if self._start is None:
            raise RuntimeError("CpuMeter.stop() before start()")
        end = self._sample()
        spent = {k: round(max(0.0, end[k] - self._start[k]), 3) for k in end}
        spent["total"] = round(sum(spent.values()), 3)
        return spent


#: JVM thread names (``/proc/<pid>/task/<tid>/comm``, 15 characters) -> the group :class:`JvmThreadCpu` reports
JVM_THREAD_GROUPS = (
    # the driver's planning (Catalyst analysis, optimizer, physical planning): py4j's command threads run Sluice's,
    # a streaming query's own thread runs native Structured Streaming's
    ("driver", "Thread-"), ("driver", "stream executio"),
    ("jit", "C1 CompilerThre"), ("jit", "C2 CompilerThre"),
    ("tasks", "Executor task"),  # the executors' task threads (local mode: same JVM)
    ("gc", "GC Thread"), ("gc", "G1 "),
)


class JvmThreadCpu:
    """The JVM's CPU seconds between :meth:`start` and :meth:`stop`, by thread group (:data:`JVM_THREAD_GROUPS`,
    ``other`` for the rest), read from ``/proc`` (Linux; empty elsewhere).  A thread that ended between the two
    reads is missing from its group: ``missing`` is :class:`CpuMeter`'s JVM figure less the groups' sum, when given.

    What it is for: :class:`CpuMeter` says how much CPU the JVM took; this says whether the driver's planning, the
    JIT compiler, the tasks or the collector took it (issue 16: in 2M-event runs the compiler threads took about
    half of the column form's JVM CPU, bench/bench_spark.py prints the split)."""

    def __init__(self, jvm_pid: int | None) -> None:
        self.jvm_pid = jvm_pid
        self._start: dict[str, tuple[str, float]] = {}

    def _sample(self) -> dict[str, tuple[str, float]]:
        out: dict[str, tuple[str, float]] = {}
        if self.jvm_pid is None:
            return out
        base = Path(f"/proc/{self.jvm_pid}/task")
        ticks = os.sysconf("SC_CLK_TCK")
        try:
            tids = [p.name for p in base.iterdir()]
        except OSError:
            return out
        for tid in tids:
            try:
                name = (base / tid / "comm").read_text().strip()
                fields = (base / tid / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue  # ended meanwhile
            out[tid] = (name, (int(fields[11]) + int(fields[12])) / ticks)
        return out

    @staticmethod
    def group_of(name: str) -> str:
        for group, prefix in JVM_THREAD_GROUPS:
            if name.startswith(prefix):
                return group
        return "other"

    def start(self) -> "JvmThreadCpu":
        self._start = self._sample()
        return self

    def stop(self, jvm_total_s: float | None = None) -> dict[str, float]:
        spent: dict[str, float] = {}
        for tid, (name, cpu) in self._sample().items():
            before = self._start.get(tid)
            used = cpu - (before[1] if before is not None and before[0] == name else 0.0)
            group = self.group_of(name)
            spent[group] = spent.get(group, 0.0) + max(0.0, used)
        if jvm_total_s is not None:
            spent["missing"] = max(0.0, jvm_total_s - sum(spent.values()))
        return {k: round(v, 3) for k, v in spent.items()}


def per_event_us(cpu_s: dict[str, float], events: int) -> dict[str, float]:
    """CPU seconds by kind -> microseconds per event."""
    return {k: round(v * 1e6 / max(1, events), 2) for k, v in cpu_s.items()}


class Stopwatch:
    """Wall-clock timing for benchmarks only (engine code never reads the clock; benchmarks may)."""

    def __init__(self) -> None:
        self._start = time.perf_counter()

    def elapsed_s(self) -> float:
        return time.perf_counter() - self._start


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    pos = min(len(ordered) - 1, max(0, round(q / 100.0 * (len(ordered) - 1))))
    return ordered[pos]


def print_result_line(result: dict[str, Any]) -> None:
    """The machine-readable outcome: exactly one JSON object on the last stdout line."""
    sys.stdout.flush()
    print(json.dumps(result, sort_keys=True, default=str), flush=True)


class PeakTreeRss:
    """Peak resident memory of a process tree while a run lasts: this process, the Spark JVM and every
    process under it (PySpark's daemon and Python workers), summed and sampled every ``interval_s`` by a
    thread (psutil).  ``with PeakTreeRss(jvm_pid) as peak: ...`` then ``peak.mb``.

    Sampled, so a spike shorter than the interval can be missed; the sum counts pages shared between a
    forked worker and its daemon twice (as ``ps`` does), which both sides of a comparison pay alike.
    """

    def __init__(self, jvm_pid: int | None, interval_s: float = 0.1) -> None:
        if interval_s <= 0:
            raise ValueError(f"interval_s must be > 0; got {interval_s}")
        self.jvm_pid = jvm_pid
        self.interval_s = interval_s
        self.mb = 0.0
        self._stop: Any = None
        self._thread: Any = None

    def sample_mb(self) -> float:
        import psutil

        procs = [psutil.Process()]
        if self.jvm_pid is not None:
            try:
                jvm = psutil.Process(self.jvm_pid)
                procs += [jvm, *jvm.children(recursive=True)]
            except psutil.NoSuchProcess:
                pass
        total = 0
        for proc in procs:
            try:
                total += proc.memory_info().rss
            except psutil.NoSuchProcess:
                pass  # a worker that exited between the listing and the read
        return total / (1024.0 * 1024.0)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.mb = max(self.mb, self.sample_mb())

    def __enter__(self) -> "PeakTreeRss":
        import threading

        self.mb = self.sample_mb()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="bench-peak-rss", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        self.mb = round(max(self.mb, self.sample_mb()), 1)
