"""Helpers of the reliability tests: real ``sluice run`` masters, their storage, and what must hold afterwards.

Tests import them from here (``tests/reliability`` is on ``sys.path`` through pytest's rootdir insertion);
the ``where`` fixture is in this folder's conftest.
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

from purchases_reference import REAL_JOB_PARAMS, reference_tumbling

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"


def record(name: str, figures: dict) -> None:
    """Figures of a run, for docs/reliability.md (tests/artifacts is git-ignored)."""
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / f"reliability-{name}.json").write_text(json.dumps(figures, indent=2))

JOB = "engine.examples.purchases:build"
EXIT_FENCED = 75


def env_forcli() -> dict[str, str]:
    return {**os.environ, "PYTHONUNBUFFERED": "1"}


class Where:
    """Where a test's masters keep their state: a file store, or a bucket on a moto S3 server over HTTP."""

    def __init__(self, tmp_path: Path, runtime: str = "local", s3: str | None = None) -> None:
        self.tmp_path, self.runtime = tmp_path, runtime
        self.storage = f"s3://{s3}/chk" if s3 else (tmp_path / "chk").as_uri()
        self.savepoints = f"s3://{s3}/sp" if s3 else (tmp_path / "sp").as_uri()

    def checkpoint_uri(self, checkpoint_id: int) -> str:
        return f"{self.storage}/purchases/chk-{checkpoint_id}"


def start(where: Where | Path, tag: str, *extra: str, params: dict | None = None) -> subprocess.Popen:
    """A ``sluice run`` master of the purchases job; ``params`` are the job's (default REAL_JOB_PARAMS)."""
    where = where if isinstance(where, Where) else Where(where)
    tmp_path = where.tmp_path
    # Spark: an epoch of the unbounded generator reads epoch_records per split (default 10,000, 40,000 in all: 20 to
    # 60 s an epoch, and so a checkpoint, on a loaded 2-core host); 2,000 keeps every test's story at a fifth of that
    runtime_options = ["bundle_size=64"] if where.runtime == "local" else ["epoch_interval_ms=200", "epoch_records=2000"]
    args = [sys.executable, "-m", "engine.cli", "run", JOB, "--job-id", "purchases", "--runtime", where.runtime,
            "--storage", where.storage, "--savepoint-dir", where.savepoints,
            "--output", str(tmp_path / "out"), "--checkpoint-interval", "300" if where.runtime == "local" else "1000",
            "--parallelism", "2", *(arg for option in runtime_options for arg in ("--option", option)),
            *extra]
    for key, value in (REAL_JOB_PARAMS if params is None else params).items():
        args += ["--param", f"{key}={json.dumps(value)}"]
    log = open(tmp_path / f"{tag}.log", "w")  # noqa: SIM115 - closed with the process
    return subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env_forcli(), start_new_session=True)


def log_of(tmp_path: Path, tag: str) -> str:
    return (tmp_path / f"{tag}.log").read_text()


def store_of(where: Where | Path):
    from checkpoints.backends import open_store

    return open_store(where.storage if isinstance(where, Where) else (where / "chk").as_uri())


def retained(where: Where | Path) -> list[int]:
    from checkpoints.index import read_index

    return read_index(store_of(where), "purchases").index.ids()


def wait(predicate, timeout_s: float, what: str, *processes: subprocess.Popen, tmp_path: Path | None = None):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        for p in processes:
            if p.poll() is not None:
                logs = "" if tmp_path is None else "\n".join(
                    f"--- {f.name}\n{f.read_text()[-3000:]}" for f in sorted(tmp_path.glob("*.log"))) + \
                    _output_listing(tmp_path / "out")
                raise AssertionError(f"a master exited ({p.returncode}) while waiting for {what}\n{logs}")
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


def _output_listing(output: Path) -> str:
    """What a failure message needs to tell a deleted staged part from one never written: the output's files."""
    if not output.exists():
        return ""
    names = sorted(str(f.relative_to(output)) for f in output.rglob("*") if f.is_file())
    return "\n--- output files\n" + "\n".join(names[-200:])


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "engine.cli", *args], capture_output=True, text=True,
                          env=env_forcli(), timeout=timeout)


def kill(*processes: subprocess.Popen) -> None:
    for p in processes:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGCONT)
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait(timeout=30)


def every_retained_checkpoint_is_intact(where: Where | Path) -> list[int]:
    """Load every retained checkpoint (CorruptSnapshotError on any damage); returns the ids loaded.

    With a master still running, the oldest one may be subsumed while it is read: the master writes the index
    without it and only then deletes its folder.  A checkpoint found damaged that the index no longer names was
    such a one and is left out; one the index still names is damaged, and fails the test.  (A CI run hit this:
    chk-2 listed, then its timers file gone, as checkpoint 9 completed during the read.)"""
    from checkpoints import CheckpointStorage, RetainedCheckpointStore, load_snapshot
    from engine.errors import CorruptSnapshotError

    storage = where.storage if isinstance(where, Where) else (where / "chk").as_uri()
    store = RetainedCheckpointStore(CheckpointStorage(storage, "purchases"), retained=3)
    ids = [h.checkpoint_id for h in store.recover()]
    assert ids, "no retained checkpoint"
    intact = []
    for cid in ids:
        try:
            load_snapshot(store.storage.checkpoint_uri(cid))
        except CorruptSnapshotError:
            if cid in [h.checkpoint_id for h in store.recover()]:
                raise
            continue
        intact.append(cid)
    assert intact, f"none of the retained checkpoints {ids} could be loaded"
    return intact


def committed_output_matches_the_reference(output: Path, params: dict = REAL_JOB_PARAMS) -> int:
    """Compares the committed tumbling results with the generator's reference for the job's ``params``;
    returns the number of rows compared."""
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
    reference = reference_tumbling(last_end, **{k: v for k, v in params.items()
                                                 if k not in ("events_per_split", "late_fraction", "malformed_fraction")})
    produced = {k: v[0] for k, v in by_window.items()}
    assert produced == {k: v for k, v in reference.items() if k[1] + 60_000 <= last_end}
    return len(rows)
