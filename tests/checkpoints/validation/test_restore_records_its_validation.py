"""A savepoint ``sluice restore`` validated is listed as validated afterwards (new-user trial).

``restore`` (and ``run --from-savepoint``) validated the snapshot with Great Expectations and wrote the results
beside it, but never recorded the outcome in its ``_metadata``, which is what ``sluice checkpoints list``,
``inspect`` and the savepoint history policy read: the savepoint the user had just restored from was listed
as "validation=not validated", and the history policy did not count it as the newest validated savepoint.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from checkpoints import load_snapshot
from checkpoints.validation import read_outcome
from snapshot_writer import write_snapshot
from validation_state import fed_routers

JOB = "validation_jobs:build"


def _sluice(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), *sys.path]),
           "SLUICE_CACHE_DIR": str(cwd / "cache")}
    env.pop("SLUICE_DATA_DOCS_DIR", None)
    return subprocess.run([sys.executable, "-c", "from engine.cli import entry_point; entry_point()", *args],
                          capture_output=True, text=True, env=env, cwd=cwd, timeout=300)


def test_after_restore_validated_a_savepoint_it_is_listed_as_passed(storage, tmp_path):
    savepoint = write_snapshot(storage, 7, fed_routers(), savepoint=True,
                               source_positions={"split-0": 10, "split-1": 20})
    assert read_outcome(load_snapshot(savepoint).metadata) == "not validated"
    restored = _sluice("restore", JOB, savepoint, "--checkpoint-interval", "0", "--no-progress",
                       "--output", str(tmp_path / "out"), cwd=tmp_path)
    assert restored.returncode == 0, restored.stderr[-3000:]
    assert read_outcome(load_snapshot(savepoint).metadata) == "passed"
    listed = _sluice("checkpoints", "list", "job-1", "--storage", (tmp_path / "checkpoints").as_uri(),
                     "--savepoint-dir", (tmp_path / "savepoints").as_uri(), "--json", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert [s["validation"] for s in json.loads(listed.stdout)["savepoints"]] == ["passed"]


def test_a_restore_refused_by_validation_records_the_failure(storage, tmp_path):
    savepoint = write_snapshot(storage, 8, fed_routers(), savepoint=True,
                               edit=lambda uid, s, name, t: t.slice(1)
                               if (uid, name, s) == ("tumbling", "keyed.window-contents", 0) else t)
    refused = _sluice("restore", JOB, savepoint, "--checkpoint-interval", "0", "--no-progress",
                      "--output", str(tmp_path / "out"), cwd=tmp_path)
    assert refused.returncode == 1 and "failed validation; nothing was restored" in refused.stderr
    assert read_outcome(load_snapshot(savepoint).metadata) == "failed"
