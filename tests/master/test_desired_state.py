"""The job master records what the operators want: running when it starts, suspended when stopped on purpose.

Every on-purpose stop reaches a master through its control API (CLI, Airflow, the
plugin page), so that is where supervision learns not to resurrect the job.
"""

from __future__ import annotations

import time
from pathlib import Path

from checkpoints.backends import open_store
from checkpoints.desired_state import JobState, read_desired_state
from engine.master.client import ControlClient
from engine.master.master import JobMaster, MasterConfig


def _config(tmp_path: Path) -> MasterConfig:
    return MasterConfig(job_spec="engine.examples.purchases:build", job_name="purchases",
                        params={"events_per_split": None, "events_per_second": 50, "num_keys": 20},
                        checkpoint_interval_ms=200, storage_uri=(tmp_path / "chk").as_uri(),
                        savepoint_dir=(tmp_path / "sp").as_uri(), output_dir=str(tmp_path / "out"),
                        status_interval_ms=100, linger_after_end_s=0.5, runtime_options={"bundle_size": 64},
                        started_by="airflow:sluice_deploy/run-1/deploy")


def _desired(tmp_path: Path):
    return read_desired_state(open_store((tmp_path / "chk").as_uri()), "purchases")


def test_a_stop_with_savepoint_is_recorded_as_suspended_before_the_stop_reports_completed(tmp_path: Path) -> None:
    master = JobMaster(_config(tmp_path)).start()
    try:
        started = _desired(tmp_path)
        assert started is not None and started.state is JobState.RUNNING
        assert started.changed_by == "airflow:sluice_deploy/run-1/deploy"
        with ControlClient(master.url, "purchases") as client:
            deadline = time.monotonic() + 120
            while (client.status().get("last_completed_checkpoint") or 0) < 1 and time.monotonic() < deadline:
                time.sleep(0.05)
            op = client.wait("stop", client.stop())
            # read at once: a client that sees COMPLETED may start the next master right away
            stopped = _desired(tmp_path)
        assert op["status"]["id"] == "COMPLETED"
        assert stopped is not None and stopped.is_suspended()
        assert stopped.savepoint == op["operation"]["location"]
        assert stopped.changed_by == "control-api" and "savepoint" in stopped.reason
        assert stopped.changed_ms >= started.changed_ms
    finally:
        if not master.client.get_job_execution_result().done():
            master.client.cancel()
        master.wait()


def test_a_cancel_is_recorded_as_suspended_without_a_savepoint(tmp_path: Path) -> None:
    master = JobMaster(_config(tmp_path)).start()
    try:
        with ControlClient(master.url, "purchases") as client:
            client.cancel()
    finally:
        master.wait()
    desired = _desired(tmp_path)
    assert desired is not None and desired.is_suspended()
    assert desired.savepoint is None and "cancel" in desired.reason
