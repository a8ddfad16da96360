"""Suite-wide fixtures: one SparkSession per test process, and a guard against leaked threads.

One session: a JVM start costs seconds on a 2-core machine, and two fixtures each starting and
stopping "their" session would stop each other's, since PySpark returns the process's active
session to whoever asks.  The master is ``local[2]`` unless ``SLUICE_TEST_SPARK_MASTER`` says
otherwise, e.g. ``SLUICE_TEST_SPARK_MASTER='local-cluster[2,1,1024]'`` for two executor JVMs.

The guard: a test module must not leave Sluice's threads running.

A job master or local job left running by a failed fixture keeps a busy thread in
the pytest process; every later test then competes with it for the GIL and
slows down, so one failure cascades into timeouts far from its cause.  After
each module this waits briefly for the threads the module started to end and
fails the module's last test, naming them, if any are still alive.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

_TESTS = Path(__file__).parent
#: folders whose test modules define functions Spark's Python workers unpickle by reference
_SPARK_IMPORT_PATHS = (_TESTS / "runtime" / "spark", _TESTS / "checkpoints" / "validation",
                       _TESTS / "engine" / "windowing" / "scenarios", _TESTS.parent)

_GRACE_S = 10.0


@pytest.fixture(scope="session")
def spark():
    pytest.importorskip("pyspark")
    from engine.runtime.spark.session import get_or_create_spark, stop_spark

    # Spark's Python workers are forked from the JVM, which inherits this environment
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (*map(str, _SPARK_IMPORT_PATHS), os.environ.get("PYTHONPATH")) if p)
    session = get_or_create_spark(os.environ.get("SLUICE_TEST_SPARK_MASTER", "local[2]"), app_name="sluice-tests",
                                  shuffle_partitions=2)
    yield session
    stop_spark(session)


def _sluice_threads() -> dict[int, threading.Thread]:
    return {t.ident: t for t in threading.enumerate() if t.name.startswith("sluice-") and t.is_alive()}


@pytest.fixture(scope="module", autouse=True)
def no_leaked_sluice_threads():
    before = set(_sluice_threads())
    yield
    deadline = time.monotonic() + _GRACE_S
    while True:
        leaked = [t for ident, t in _sluice_threads().items() if ident not in before]
        if not leaked or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    if leaked:
        pytest.fail(f"threads still running after this module: {sorted(t.name for t in leaked)}")
