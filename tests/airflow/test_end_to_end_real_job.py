"""Issue 7's story with the real purchases job (``sluice run``, local runtime) and a moto S3 server over HTTP.

deploy -> N checkpoints retained -> scheduled savepoints validated by Great
Expectations -> the master is killed -> supervise restarts it from the latest
retained checkpoint -> restore DAG to an older savepoint with a new parallelism
-> the job is stopped with a savepoint and its committed outputs are checked
against a reference computed straight from the generator.

The job is unbounded (``events_per_split: null``), without late or malformed
events, so every tumbling-window result has exactly one right value: rows that
a rollback re-emits must repeat it, and no window may be missing or wrong.
"""

from __future__ import annotations

import json
import os
import re
import signal
from collections import defaultdict
from pathlib import Path

import pytest

from airflow_support import REAL_JOB_PARAMS, kill_masters, real_purchases_deployment, reference_tumbling, wait_until
from dag_helpers import run_dag

pytestmark = [pytest.mark.airflow, pytest.mark.slow]



def sluice_run_available() -> bool:
    from engine.cli import main

    return "run" in main.commands


@pytest.fixture
def real_deployment(sluice_env, tmp_path, monkeypatch):
    if not sluice_run_available():
        pytest.skip("`sluice run` is not available in engine/cli.py yet")
    output = tmp_path / "output"
    deployments = Path(os.environ["SLUICE_DEPLOYMENTS_FILE"])
    deployments.write_text(json.dumps(real_purchases_deployment(sluice_env["job_id"], output)))
    yield {**sluice_env, "output": output}
    kill_masters(sluice_env["job_id"])


def hook():
    from sluice.hook import SluiceHook

    return SluiceHook("sluice_test")


def retained(job_id):
    from checkpoints.index import read_index

    return read_index(hook().store, job_id).index.ids()


def committed_rows(folder: Path) -> list[list]:
    rows = []
    for part in sorted(folder.glob("part-*.jsonl")):  # committed files only (pending ones live in _staging)
        rows.extend(json.loads(line) for line in part.read_text().splitlines() if line.strip())
    return rows


def deploy_savepoint_kill_and_supervise(job_id: str) -> list[str]:
    """Deploy, N retained, two validated savepoints, kill -9, supervised restart; returns the savepoint URIs."""
    state, tasks, values = run_dag("sluice_deploy", deployment="purchases")
    assert (state, tasks) == ("success", {"deploy": "success", "first_checkpoint": "success"}), tasks
    first = values["deploy"]

    wait_until(lambda: len(retained(job_id)) == 3 and max(retained(job_id)) > 3, timeout_s=90,
               what="3 retained checkpoints")

    savepoints = []
    for _ in range(2):
        state, tasks, values = run_dag("sluice_scheduled_savepoint", deployment="purchases")
        assert state == "success", tasks
        assert values["job.validate"]["status"] == "passed", values["job.validate"]
        savepoints.append(values["job.savepoint"])
    assert all(s.metadata.validation_passed() for s in hook().list_savepoints(job_id))

    os.kill(first["pid"], signal.SIGKILL)
    os.waitpid(first["pid"], 0)
    latest_before = max(retained(job_id))
    wait_until(lambda: hook().get_status(job_id).source == "status-document", what="master unreachable")
    wait_until(lambda: hook().get_status(job_id).heartbeat_age_ms(_now()) > 8_500, timeout_s=20,
               what="a stale heartbeat")
    state, tasks, values = run_dag("sluice_supervise", deployment="purchases")
    assert tasks == {"deployments": "success", "job.desired_state": "success", "job.check_health": "failed",
                     "job.restart_from_latest": "success", "job.confirm_checkpoint": "success",
                     "job.alert": "success"}, tasks
    # The newest restore point by completion time: within one run ids share one counter, so a savepoint
    # taken after the last retained checkpoint (the kill can land before the next checkpoint) wins.
    newest_savepoint = max(savepoints, key=_savepoint_id)
    if _savepoint_id(newest_savepoint) > latest_before:
        assert values["job.restart_from_latest"]["from_snapshot"].rstrip("/") == newest_savepoint.rstrip("/")
    else:
        assert values["job.restart_from_latest"]["from_snapshot"].endswith(f"/{job_id}/chk-{latest_before}")
    wait_until(lambda: max(retained(job_id)) > latest_before, what="checkpoint ids continue after the restart")
    return savepoints


def stop_and_check_outputs(job_id: str, output: Path) -> None:
    """Stop with a savepoint (commits pending output), then every tumbling result must be the reference's."""
    final = hook().stop_with_savepoint("e2e-final", job_id=job_id)
    hook().wait_for_operation("stop", final, job_id=job_id, timeout_s=120)
    wait_until(lambda: hook().get_status(job_id).source == "status-document", timeout_s=30, what="job stopped")

    rows = committed_rows(output / "tumbling")
    assert rows, "no committed tumbling results"
    by_window: dict[tuple[str, int], set[int]] = defaultdict(set)
    for user, start, end, items in rows:
        assert end - start == 60_000
        by_window[(user, start)].add(items)
    assert all(len(values) == 1 for values in by_window.values()), \
        {k: v for k, v in by_window.items() if len(v) > 1}
    last_end = max(start for _, start in by_window) + 60_000
    reference = reference_tumbling(last_end, REAL_JOB_PARAMS["events_per_second"])
    produced = {k: next(iter(v)) for k, v in by_window.items()}
    assert produced == {k: v for k, v in reference.items() if k[1] + 60_000 <= last_end}


def test_deploy_savepoints_kill_and_supervised_restart_keep_outputs_exactly_right(real_deployment):
    job_id = real_deployment["job_id"]

    deploy_savepoint_kill_and_supervise(job_id)

    stop_and_check_outputs(job_id, real_deployment["output"])


def test_deploy_savepoint_kill_supervise_restore_rescaled_with_correct_outputs(real_deployment):
    job_id = real_deployment["job_id"]
    savepoints = deploy_savepoint_kill_and_supervise(job_id)

    older = savepoints[0]
    state, tasks, values = run_dag("sluice_restore", deployment="purchases", snapshot=older, parallelism=4)
    assert (state, tasks) == ("success", {"stop_with_savepoint": "success", "restore": "success",
                                          "confirm_checkpoint": "success"}), tasks
    assert values["restore"]["from_snapshot"] == older and values["restore"]["validation"]["status"] == "passed"
    wait_until(lambda: hook().get_status(job_id).details.get("parallelism") == 4, what="parallelism 4")

    stop_and_check_outputs(job_id, real_deployment["output"])


def _savepoint_id(uri: str) -> int:
    match = re.search(r"/savepoint-(\d+)-[^/]*$", uri)
    assert match, uri
    return int(match.group(1))


def _now() -> int:
    import time

    return int(time.time() * 1000)
