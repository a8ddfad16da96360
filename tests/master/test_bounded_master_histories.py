"""What a job master serves about the past is bounded; its counts stay exact (issue 17).

A real master runs the purchases job on the local runtime with ``max_checkpoint_history`` 3 and an operation
registry that keeps 2 finished operations: the control API's checkpoint history holds the newest 3 records
while the status counts every checkpoint, and the oldest finished savepoint operation is forgotten.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from engine.master.client import ControlApiError, ControlClient
from engine.master.master import JobMaster, MasterConfig
from engine.master.operations import OperationRegistry

UNBOUNDED = {"events_per_split": None, "events_per_second": 50, "num_keys": 20}


def _wait_for(predicate, timeout_s: float = 120.0, what: str = "condition"):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def master(tmp_path: Path):
    config = MasterConfig(
        job_spec="engine.examples.purchases:build", job_name="purchases", params=dict(UNBOUNDED),
        checkpoint_interval_ms=100, storage_uri=(tmp_path / "chk").as_uri(), savepoint_dir=(tmp_path / "sp").as_uri(),
        output_dir=str(tmp_path / "out"), status_interval_ms=100, linger_after_end_s=0.5,
        runtime_options={"bundle_size": 64, "max_checkpoint_history": 3})
    master = JobMaster(config)
    master.operations = OperationRegistry(max_finished=2)
    master.start()
    try:
        yield master
    finally:
        if not master.client.get_job_execution_result().done():
            master.client.cancel()
            master.wait()


def test_the_control_api_serves_the_newest_checkpoints_and_counts_them_all(master) -> None:
    with ControlClient(master.url, "purchases") as client:
        # no savepoint, no failure: checkpoint ids are 1, 2, 3, ... so the newest id is the count (a status read
        # while a checkpoint completes may see one of the two first: wait for one that sees both)
        _wait_for(lambda: (s := client.status())["num_completed_checkpoints"] >= 6
                  and s["num_completed_checkpoints"] == s["last_completed_checkpoint"],
                  what="six checkpoints, all counted")
        history = client.checkpoints()
        assert len(history) == 3
        ids = [h["checkpoint_id"] for h in history]
        assert ids == sorted(ids) and ids[-1] >= 6


def test_the_oldest_finished_savepoint_operations_are_forgotten(master) -> None:
    with ControlClient(master.url, "purchases") as client:
        _wait_for(lambda: (client.status().get("last_completed_checkpoint") or 0) >= 1, what="a checkpoint")
        for trigger_id in ("sp-1", "sp-2", "sp-3"):
            done = client.wait("savepoint", client.trigger_savepoint(trigger_id=trigger_id), timeout_s=120)
            assert done["status"]["id"] == "COMPLETED"
        with pytest.raises(ControlApiError) as forgotten:
            client.operation("savepoint", "sp-1")
        assert forgotten.value.status_code == 404
        assert client.operation("savepoint", "sp-2")["status"]["id"] == "COMPLETED"
        assert client.operation("savepoint", "sp-3")["status"]["id"] == "COMPLETED"
    assert [op.trigger_id for op in master.operations.all()] == ["sp-2", "sp-3"]
