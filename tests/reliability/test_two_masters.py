"""One job, one master: two real ``sluice run`` processes for one job id and storage (issue 17).

The client is an operator (or a supervisor) starting a second master while the
first still runs, or while the first is frozen past its lease (a GC pause, a
SIGSTOP, a VM migration) and then wakes up.  Done means: the second master is
refused and names the holder; in the frozen variant the new master takes over,
the old one stops at once when it wakes (exit 75, nothing written), every
retained checkpoint is intact and the committed output has no duplicate and no
gap against the generator's reference.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

from purchases_reference import REAL_JOB_PARAMS, reference_tumbling

pytestmark = pytest.mark.slow

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"


def _record(name: str, figures: dict) -> None:
    """Figures of a run, for docs/reliability.md (tests/artifacts is git-ignored)."""
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / f"reliability-{name}.json").write_text(json.dumps(figures, indent=2))

JOB = "engine.examples.purchases:build"
EXIT_FENCED = 75


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONUNBUFFERED": "1"}


class Where:
    """Where a test's masters keep their state: a file store, or a bucket on a moto S3 server over HTTP."""

    def __init__(self, tmp_path: Path, runtime: str = "local", s3: str | None = None) -> None:
        self.tmp_path, self.runtime = tmp_path, runtime
        self.storage = f"s3://{s3}/chk" if s3 else (tmp_path / "chk").as_uri()
        self.savepoints = f"s3://{s3}/sp" if s3 else (tmp_path / "sp").as_uri()

    def checkpoint_uri(self, checkpoint_id: int) -> str:
        return f"{self.storage}/purchases/chk-{checkpoint_id}"


def _start(where: Where | Path, tag: str, *extra: str) -> subprocess.Popen:
    where = where if isinstance(where, Where) else Where(where)
    tmp_path = where.tmp_path
    args = [sys.executable, "-m", "engine.cli", "run", JOB, "--name", "purchases", "--runtime", where.runtime,
            "--storage", where.storage, "--savepoint-dir", where.savepoints,
            "--output", str(tmp_path / "out"), "--checkpoint-interval", "300" if where.runtime == "local" else "1000",
            "--parallelism", "2", "--option", "bundle_size=64" if where.runtime == "local" else "epoch_interval_ms=200",
            *extra]
    for key, value in REAL_JOB_PARAMS.items():
        args += ["--param", f"{key}={json.dumps(value)}"]
    log = open(tmp_path / f"{tag}.log", "w")  # noqa: SIM115 - closed with the process
    return subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=_env(), start_new_session=True)


def _log(tmp_path: Path, tag: str) -> str:
    return (tmp_path / f"{tag}.log").read_text()


def _store(where: Where | Path):
    from checkpoints.backends import open_store

    return open_store(where.storage if isinstance(where, Where) else (where / "chk").as_uri())


def _retained(where: Where | Path) -> list[int]:
    from checkpoints.index import read_index

    return read_index(_store(where), "purchases").index.ids()


def _wait(predicate, timeout_s: float, what: str, *processes: subprocess.Popen, tmp_path: Path | None = None):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        for p in processes:
            if p.poll() is not None:
                logs = "" if tmp_path is None else "\n".join(
                    f"--- {f.name}\n{f.read_text()[-3000:]}" for f in sorted(tmp_path.glob("*.log")))
                raise AssertionError(f"a master exited ({p.returncode}) while waiting for {what}\n{logs}")
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


def _cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "engine.cli", *args], capture_output=True, text=True,
                          env=_env(), timeout=timeout)


def _kill(*processes: subprocess.Popen) -> None:
    for p in processes:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGCONT)
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait(timeout=30)


def _every_retained_checkpoint_is_intact(where: Where | Path) -> list[int]:
    from checkpoints import CheckpointStorage, CompletedCheckpointStore, load_snapshot

    storage = where.storage if isinstance(where, Where) else (where / "chk").as_uri()
    store = CompletedCheckpointStore(CheckpointStorage(storage, "purchases"), retained=3)
    ids = [h.checkpoint_id for h in store.recover()]
    assert ids, "no retained checkpoint"
    for cid in ids:
        load_snapshot(store.storage.checkpoint_uri(cid))  # raises CorruptSnapshotError on any damage
    return ids


def _committed_output_matches_the_reference(output: Path) -> int:
    rows = []
    for part in sorted((output / "tumbling").glob("part-*.jsonl")):
        rows.extend(json.loads(line) for line in part.read_text().splitlines() if line.strip())
    assert rows, "no committed tumbling results"
    by_window: dict[tuple[str, int], list[int]] = defaultdict(list)
    for user, start, end, items in rows:
        assert end - start == 60_000
        by_window[(user, start)].append(items)
    duplicated = {k: v for k, v in by_window.items() if len(v) > 1}
    assert not duplicated, f"{len(duplicated)} windows written more than once, e.g. {list(duplicated.items())[:3]}"
    last_end = max(start for _, start in by_window) + 60_000
    reference = reference_tumbling(last_end, REAL_JOB_PARAMS["events_per_second"])
    produced = {k: v[0] for k, v in by_window.items()}
    assert produced == {k: v for k, v in reference.items() if k[1] + 60_000 <= last_end}
    return len(rows)


def test_a_second_master_for_a_running_job_is_refused_and_names_the_holder(tmp_path: Path) -> None:
    first = _start(tmp_path, "first")
    try:
        _wait(lambda: len(_retained(tmp_path)) >= 2, 120, "two retained checkpoints", first, tmp_path=tmp_path)
        started = time.monotonic()
        second = _start(tmp_path, "second")
        assert second.wait(timeout=120) == 1
        refused_after_s = time.monotonic() - started
        refused = _log(tmp_path, "second")
        assert "already has a running job master" in refused and f"pid {first.pid}" in refused, refused
        assert first.poll() is None, "the first master must keep running"
        before = max(_retained(tmp_path))
        _wait(lambda: max(_retained(tmp_path)) > before, 60, "the first master to keep checkpointing", first)
        _every_retained_checkpoint_is_intact(tmp_path)
        stop = _cli("stop", "purchases", "--storage", (tmp_path / "chk").as_uri())
        assert stop.returncode == 0, stop.stderr
        assert first.wait(timeout=120) == 0, _log(tmp_path, "first")[-3000:]
        # a clean stop releases the lease: the next master starts without waiting for it to expire
        from checkpoints.lease import read_lease

        view = read_lease(_store(tmp_path), "purchases")
        assert view is not None and view.lease.released and view.lease.pid == first.pid
        _record("second-master-refused", {"refused_after_s": round(refused_after_s, 2),
                                          "retained_intact": len(_retained(tmp_path))})
    finally:
        _kill(first)


@pytest.fixture(params=["local-file", pytest.param("spark-moto-s3", marks=pytest.mark.spark)])
def where(request, tmp_path: Path, monkeypatch):
    if request.param == "local-file":
        yield Where(tmp_path)
        return
    import boto3
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": f"http://{host}:{port}",
                        "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}.items():
        monkeypatch.setenv(name, value)
    boto3.client("s3").create_bucket(Bucket="sluice-two-masters")
    try:
        yield Where(tmp_path, "spark", "sluice-two-masters")
    finally:
        server.stop()


def test_a_master_frozen_past_its_lease_is_fenced_when_it_wakes_and_nothing_is_lost_or_doubled(where: Where) -> None:
    tmp_path = where.tmp_path
    # Spark drivers under load (two JVMs and the S3 server on two cores) renew late: a longer lease
    ttl = ["--lease-ttl", "3" if where.runtime == "local" else "10"]
    first = _start(where, "first", *ttl)
    second = None
    try:
        _wait(lambda: len(_retained(where)) >= 3, 300, "three retained checkpoints", first, tmp_path=tmp_path)
        os.killpg(first.pid, signal.SIGSTOP)  # frozen: no heartbeat, no lease renewal
        frozen_at = max(_retained(where))
        latest = where.checkpoint_uri(frozen_at)
        # what supervision does once the heartbeat is stale: a new master from the latest checkpoint,
        # waiting for the frozen master's lease to run out
        second = _start(where, "second", *ttl, "--lease-wait", "30", "--from-savepoint", latest)
        _wait(lambda: max(_retained(where)) >= frozen_at + 3, 300, "the new master's checkpoints", second,
              tmp_path=tmp_path)
        from checkpoints.index import read_index
        from checkpoints.lease import read_lease

        lease = read_lease(_store(where), "purchases")
        assert lease is not None and lease.lease.pid == second.pid and lease.lease.fencing_token == 2
        assert read_index(_store(where), "purchases").index.fencing_token == 2

        os.killpg(first.pid, signal.SIGCONT)  # the old master wakes up mid-job
        woke = time.monotonic()
        assert first.wait(timeout=120) == EXIT_FENCED, _log(tmp_path, "first")[-3000:]
        fenced_after_s = time.monotonic() - woke
        assert "FENCED" in _log(tmp_path, "first")
        assert second.poll() is None, "the new master must keep running"
        before = max(_retained(where))
        _wait(lambda: max(_retained(where)) > before, 120, "the new master to keep checkpointing", second)
        intact = _every_retained_checkpoint_is_intact(where)
        assert read_lease(_store(where), "purchases").lease.pid == second.pid

        stop = _cli("stop", "purchases", "--storage", where.storage, timeout=300)
        assert stop.returncode == 0, stop.stderr
        assert second.wait(timeout=300) == 0, _log(tmp_path, "second")[-3000:]
        rows = _committed_output_matches_the_reference(tmp_path / "out")
        _record(f"frozen-master-fenced-{where.runtime}", {"fenced_exit_after_wake_s": round(fenced_after_s, 2),
                                         "retained_checkpoints_intact": intact, "rows_compared": rows,
                                         "duplicated": 0, "lost": 0})
    finally:
        _kill(first, *([second] if second is not None else []))
