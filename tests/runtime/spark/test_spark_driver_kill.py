"""Issue 5's failure test: the driver killed with SIGKILL at random points, again and again, loses nothing.

Each attempt is a fresh driver process (tests/runtime/spark/crash_job.py) that restores from the
latest retained checkpoint, as supervision does after a crash; it is killed after a number of
epochs (0, 2, 3 or 4: a checkpoint completes one epoch after it was taken, when its background
upload is collected) plus a random delay below a second, so kills land at JVM start, while reading,
in window stages, during a background state upload, or between a checkpoint's completion and the
sink's commit.  CI kills it four times, once after each of those epoch counts in a seeded order;
``SLUICE_LONG_TESTS=1`` kills it ten times at seeded random counts.  A last attempt runs to the end.
The exactly-once file sink's committed output must then equal the uninterrupted result (the local
runtime with the same epochs), with no record lost or repeated.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import crash_job
from engine.api.environment import StreamExecutionEnvironment
from engine.io.file_sink import read_committed
from long_tests import long_tests

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800 if long_tests() else 600)]  # 45-90 s an attempt

#: epochs an attempt completes before its kill (then a random delay below a second)
KILL_POINTS = (0, 2, 3, 4)
#: kills by hand (SLUICE_LONG_TESTS=1), each after a random one of KILL_POINTS; CI kills once at each point
LONG_KILLS = 10
_HERE = Path(__file__).parent


def _golden() -> list:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.set_max_parallelism(8)
    env.set_runtime_option("epoch_records", crash_job.EPOCH_RECORDS)
    return sorted((tuple(v) for v in crash_job.build(env, None).execute_and_collect()), key=repr)


def _attempt(work: Path, rng: random.Random | None, log: list[str], epochs_before_kill: int | None = None) -> bool:
    """One driver process; killed after ``epochs_before_kill`` epochs plus a random delay drawn from ``rng``, or
    run to its end when that is None. True if it ran to DONE."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_HERE), env.get("PYTHONPATH")) if p)
    with open(work / "driver-stderr.log", "a") as errors:
        proc = subprocess.Popen([sys.executable, str(_HERE / "crash_job.py"), str(work)], stdout=subprocess.PIPE,
                                stderr=errors, text=True, env=env)
    seen = 0
    try:
        for line in proc.stdout:  # type: ignore[union-attr]
            log.append(line.strip())
            if line.startswith("DONE"):
                break
            if line.startswith("EPOCH"):
                seen += 1
            if epochs_before_kill is not None and line.startswith(("EPOCH", "RESTORE")) and seen >= epochs_before_kill:
                time.sleep(rng.uniform(0.0, 1.0))  # type: ignore[union-attr]
                proc.send_signal(signal.SIGKILL)
                log.append("KILLED")
                break
    finally:
        if proc.poll() is None and epochs_before_kill is None:
            proc.wait(timeout=300)
        proc.kill()
        proc.wait()
    if not log or log[-1] not in ("DONE", "KILLED"):
        raise AssertionError(f"the driver died on its own: {(work / 'driver-stderr.log').read_text()[-3000:]}")
    return log[-1] == "DONE"


def test_driver_killed_at_every_kind_of_point_still_commits_exactly_the_golden_output(tmp_path):
    golden = _golden()
    assert golden
    rng = random.Random(int(os.environ.get("SLUICE_KILL_SEED", "20261121")))
    if long_tests():
        plan = [rng.choice(KILL_POINTS) for _ in range(LONG_KILLS)]
    else:
        plan = rng.sample(KILL_POINTS, len(KILL_POINTS))  # every kill point once, in a seeded order
    log: list[str] = []
    kills = 0
    for epochs_before_kill in plan:
        if _attempt(tmp_path, rng, log, epochs_before_kill):
            break  # the job got to its end before a kill landed; the output must be complete anyway
        kills += 1
    if not log or log[-1] != "DONE":
        assert _attempt(tmp_path, None, log), log
    restores = [line for line in log if line.startswith("RESTORE") and line != "RESTORE None"]
    assert kills == len(plan) and len(restores) >= len(plan) // 2, log  # it really restarted from checkpoints
    committed = read_committed(f"file://{tmp_path}/output")
    assert sorted((tuple(v) for v in committed), key=repr) == golden
