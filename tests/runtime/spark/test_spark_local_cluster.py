"""The end-to-end S3 test and a differential test on ``local-cluster[2,1,1024]``: executors in their own JVMs.

Issue 5: nothing may depend on driver memory — state, snapshots and S3 access happen in executors.
With ``local-cluster`` PySpark starts a master, two workers and two executor JVMs on loopback, each
with its own Python workers, so a task that reached for driver-side objects would fail or see
nothing.  The tests run in a child pytest (one SparkContext per process) with
``SLUICE_TEST_SPARK_MASTER`` set, which conftest.py passes to the session.

About 50 s on this 2-core machine when it is quiet (cluster start plus both tests), a few minutes
under heavy load; ``SLUICE_TEST_LOCAL_CLUSTER=0`` skips it.  Any test of this folder runs on the
cluster with ``SLUICE_TEST_SPARK_MASTER='local-cluster[2,1,1024]'``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    os.environ.get("SLUICE_TEST_LOCAL_CLUSTER") == "0", reason="SLUICE_TEST_LOCAL_CLUSTER=0")]

_HERE = Path(__file__).parent
MASTER = "local-cluster[2,1,1024]"
TESTS = (
    "test_spark_checkpoints.py::test_checkpoint_retention_savepoint_stop_and_rescaled_restore_on_s3",
    "test_spark_runtime.py::test_out_of_order_jobs_with_late_data_agree_when_both_runtimes_use_epochs",
)


def test_s3_end_to_end_and_differential_tests_pass_with_executors_in_their_own_jvms():
    env = dict(os.environ, SLUICE_TEST_SPARK_MASTER=MASTER)
    env.pop("SLUICE_TEST_LOCAL_CLUSTER", None)
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider",
                          *(str(_HERE / t) for t in TESTS)], cwd=str(_HERE.parent.parent.parent), env=env,
                         capture_output=True, text=True, timeout=1200)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert "3 passed" in run.stdout  # the checkpoint test twice: state written by the window tasks, by an upload job
