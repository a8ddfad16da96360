"""A SIGKILLed Spark driver leaves its ``sluice-spark-*`` scratch folder (``spark.local.dir``) behind;
``sluice checkpoints clean --scratch`` finds it by the owner marker the session wrote into it, and
removes it with ``--delete``, never the folder of a driver that still runs (issue 17, "Clean-up").

Two real drivers (``get_or_create_spark`` in their own processes, each running a shuffle so the
folder holds Spark's block manager files) share one temp dir; one is killed with its JVM.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from checkpoints.cli import checkpoints_cli

DRIVER = """
import time
from engine.runtime.spark.session import get_or_create_spark
spark = get_or_create_spark("local[1]", app_name="scratch", shuffle_partitions=2)
assert spark.range(0, 100, numPartitions=2).repartition(2).count() == 100  # shuffle files in the local dir
print(spark.sparkContext.getConf().get("spark.local.dir"), flush=True)
time.sleep(600)
"""


def _start_driver(temp_dir: Path) -> subprocess.Popen:
    env = {**os.environ, "TMPDIR": str(temp_dir), "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen([sys.executable, "-c", DRIVER], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True, env=env, start_new_session=True)


def _local_dir(driver: subprocess.Popen) -> Path:
    line = driver.stdout.readline().strip()  # type: ignore[union-attr]
    assert line, f"the driver exited ({driver.poll()}) before its session was up"
    return Path(line)


def _kill(driver: subprocess.Popen) -> None:
    if driver.poll() is None:
        os.killpg(driver.pid, signal.SIGKILL)  # the JVM too, as a killed driver's group
    driver.wait(timeout=60)


def _clean(tmp_path: Path, temp_dir: Path, *flags: str) -> dict:
    result = CliRunner().invoke(checkpoints_cli, [
        "clean", "any-job", "--storage", (tmp_path / "chk").as_uri(), "--scratch-dir", str(temp_dir), "--json",
        *flags])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def _scratch(report: dict) -> dict[str, dict]:
    return {o["key"]: o for o in report["orphans"] if o["kind"] == "scratch_folder"}


@pytest.fixture
def drivers(tmp_path):
    temp_dir = tmp_path / "tmp"
    temp_dir.mkdir()
    started: list[subprocess.Popen] = []
    yield temp_dir, started
    for driver in started:
        _kill(driver)


def test_the_scratch_folder_of_a_killed_driver_is_reported_and_removed_and_a_live_ones_is_not(tmp_path, drivers):
    temp_dir, started = drivers
    started += [_start_driver(temp_dir), _start_driver(temp_dir)]
    killed, live = started
    killed_dir, live_dir = _local_dir(killed), _local_dir(live)
    assert {killed_dir.parent, live_dir.parent} == {temp_dir} and killed_dir.name.startswith("sluice-spark-")
    _kill(killed)
    assert killed_dir.is_dir() and any(p.is_file() for p in killed_dir.rglob("*"))  # stop_spark never ran

    listed = _scratch(_clean(tmp_path, temp_dir))
    assert set(listed) == {str(killed_dir)}
    assert listed[str(killed_dir)]["bytes"] > 0 and f"pid {killed.pid}" in listed[str(killed_dir)]["reason"]
    assert killed_dir.is_dir()  # a dry run

    deleted = _clean(tmp_path, temp_dir, "--delete")
    assert deleted["deleted"] and set(_scratch(deleted)) == {str(killed_dir)}
    assert not killed_dir.exists()
    assert live_dir.is_dir() and live.poll() is None
    assert _scratch(_clean(tmp_path, temp_dir)) == {}


def test_a_reused_pid_does_not_keep_a_scratch_folder_alive(tmp_path, drivers):
    """The marker names the owner's pid and start: a live process with the same pid that started at
    another moment is not the owner (pids are reused), so the folder is reported."""
    temp_dir, started = drivers
    started.append(_start_driver(temp_dir))
    live_dir = _local_dir(started[0])
    marker = next(p for p in live_dir.iterdir() if p.name.startswith(".sluice-owner"))
    owner = json.loads(marker.read_text())
    assert owner["pid"] == started[0].pid

    reused = temp_dir / "sluice-spark-reusedpid"
    reused.mkdir()
    (reused / "blockmgr-x").mkdir()
    (reused / "blockmgr-x" / "shuffle_0_0_0.data").write_bytes(b"x" * 100)
    (reused / marker.name).write_text(json.dumps({**owner, "pid": os.getpid()}))  # this process: alive, younger

    listed = _scratch(_clean(tmp_path, temp_dir))
    assert set(listed) == {str(reused)}
    assert f"pid {os.getpid()}" in listed[str(reused)]["reason"] and "another process" in listed[str(reused)]["reason"]


def test_a_driver_that_exits_cleanly_leaves_no_scratch_folder(tmp_path, drivers):
    """``sluice demo`` exited 0 and left its ``spark.local.dir``: nothing stopped the session it started.  A clean
    exit now stops it (engine/runtime/spark/session.py ``_stop_owned_session_at_exit``)."""
    temp_dir, started = drivers
    env = {**os.environ, "TMPDIR": str(temp_dir), "PYTHONUNBUFFERED": "1"}
    done = subprocess.run([sys.executable, "-c", DRIVER.replace("time.sleep(600)", "")], capture_output=True,
                          text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    local_dir = Path(done.stdout.strip())
    assert local_dir.is_relative_to(temp_dir)
    assert not local_dir.exists(), sorted(str(p) for p in local_dir.rglob("*"))[:10]
