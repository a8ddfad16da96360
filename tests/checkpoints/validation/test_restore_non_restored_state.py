"""``sluice run --from-savepoint`` and ``sluice restore`` take ``--allow-non-restored-state`` (``-n``), as Flink's
CLI takes ``-n/--allowNonRestoredState`` (new-user trial: the API had it, the command line did not).

A savepoint holding state of an operator the new job lacks (here the ``session`` operator, renamed
``sessions-v2`` in validation_jobs:build_same_new_name) is refused without the flag, the refusal naming the
operator and the flag; with it, the restore goes on and the job runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

JOB = "validation_jobs:build_same_new_name"


def _sluice(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """The CLI as a user runs it (its entry point prints Sluice's errors as one line), the job module importable."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), *sys.path])}
    return subprocess.run([sys.executable, "-c", "from engine.cli import entry_point; entry_point()", *args],
                          capture_output=True, text=True, env=env, cwd=cwd, timeout=300)


def _args(verb: str, snapshot: str) -> list[str]:
    return [verb, JOB, snapshot] if verb == "restore" else [verb, JOB, "--from-savepoint", snapshot]


@pytest.mark.parametrize("verb", ["restore", "run"])
def test_a_savepoint_with_state_the_new_job_lacks_is_refused_naming_the_operator_and_the_flag(healthy_uri, verb,
                                                                                              tmp_path):
    result = _sluice(*_args(verb, healthy_uri), "--checkpoint-interval", "0", "--no-progress", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert "nothing was restored" in result.stderr
    assert "unrestored-state of operator 'session'" in result.stderr
    assert "pass --allow-non-restored-state" in result.stderr


@pytest.mark.parametrize(("verb", "flag"), [("restore", "--allow-non-restored-state"), ("run", "-n")])
def test_with_the_flag_the_state_nobody_restores_is_dropped_and_the_job_runs(healthy_uri, verb, flag, tmp_path):
    result = _sluice(*_args(verb, healthy_uri), flag, "--checkpoint-interval", "0", "--no-progress",
                     "--output", str(tmp_path / "out"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["state"] == "FINISHED"


def test_run_and_restore_help_show_the_flag(tmp_path):
    for verb in ("run", "restore"):
        assert "-n, --allow-non-restored-state" in _sluice(verb, "--help", cwd=tmp_path).stdout
