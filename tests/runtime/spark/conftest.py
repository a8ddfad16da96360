"""One SparkSession for the whole Spark test run (a JVM start costs seconds on this 2-core machine).

Every test in this folder is marked ``spark`` so ``-m "not spark"`` skips them.  The master is
``local[2]`` unless ``SLUICE_TEST_SPARK_MASTER`` says otherwise, e.g.
``SLUICE_TEST_SPARK_MASTER='local-cluster[2,1,1024]'`` to run the same tests with two executor JVMs.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

_HERE = Path(__file__).parent


def pytest_collection_modifyitems(config, items):
    for item in items:
        if _HERE in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="session")
def spark():
    pytest.importorskip("pyspark")
    from engine.runtime.spark.session import get_or_create_spark, stop_spark

    # Functions defined in these test modules are pickled by reference; Spark's Python workers
    # (forked from the JVM, which inherits this environment) must be able to import them.
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(_HERE), os.environ.get("PYTHONPATH")) if p)
    master = os.environ.get("SLUICE_TEST_SPARK_MASTER", "local[2]")
    session = get_or_create_spark(master, app_name="sluice-tests", shuffle_partitions=2)
    yield session
    stop_spark(session)
