"""A ``--param`` the job function does not take is refused before the job runs, naming the ones it takes (a new
user's trial: an unknown --param gave a 36-line TypeError traceback)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from engine.api.environment import StreamExecutionEnvironment
from engine.errors import JobDefinitionError
from engine.master.config import build_job

TESTS = Path(__file__).parent


def test_an_unknown_param_names_the_ones_the_job_takes() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    with pytest.raises(JobDefinitionError) as refused:
        build_job(env, "operator_jobs:build", {"record": 5}, "/tmp/unused")
    assert refused.value.parameter == "param" and "It takes records" in str(refused.value), refused.value
    build_job(StreamExecutionEnvironment.get_execution_environment(), "operator_jobs:build", {"records": 5},
              "/tmp/unused")  # a parameter it takes is passed on


def test_sluice_run_says_so_in_one_line(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "engine.cli", "run", "operator_jobs:build", "--job-id", "params",
                           "--param", "record=5", "--output", str(tmp_path / "out"), "--checkpoint-interval", "0"],
                          capture_output=True, text=True, timeout=120, cwd=TESTS,
                          env={**__import__("os").environ, "PYTHONPATH": f"{TESTS}:{TESTS.parents[1]}"})
    assert done.returncode != 0
    assert "record" in done.stderr and "It takes records" in done.stderr, done.stderr[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
