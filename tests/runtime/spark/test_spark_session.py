"""The session helper starts Spark with the interpreter running Sluice and sensible local settings."""

from __future__ import annotations

import os
import sys

import pyarrow as pa
import pytest

from engine.errors import JobDefinitionError
from engine.runtime.spark.session import check_master, default_conf


def test_python_workers_run_the_interpreter_running_sluice(spark):
    def report(batches):
        import os as _os
        import sys as _sys

        for batch in batches:
            n = batch.num_rows
            yield pa.RecordBatch.from_pydict({"exe": [_sys.executable] * n, "pid": [_os.getpid()] * n})

    rows = spark.range(0, 8, numPartitions=2).mapInArrow(report, "exe string, pid long").collect()
    assert {r.exe for r in rows} == {sys.executable}
    assert os.getpid() not in {r.pid for r in rows}  # workers are separate processes


def test_python_workers_talk_to_the_jvm_over_a_unix_socket(spark):
    """Over loopback TCP each Python task waited about 40 ms for its input (engine/runtime/spark/session.py): the
    workers' daemon must have been started for a Unix domain socket."""
    def report(batches):
        import os as _os

        for batch in batches:
            yield pa.RecordBatch.from_pydict(
                {"uds": [_os.environ.get("PYTHON_UNIX_DOMAIN_ENABLED", "")] * batch.num_rows})

    rows = spark.range(0, 4, numPartitions=2).mapInArrow(report, "uds string").collect()
    assert {r.uds.lower() for r in rows} == {"true"}


def test_session_is_configured_for_local_runs(spark):
    conf = spark.sparkContext.getConf()
    assert conf.get("spark.sql.execution.arrow.pyspark.enabled") == "true"
    assert conf.get("spark.ui.enabled") == "false"
    assert spark.conf.get("spark.sql.shuffle.partitions") == "2"
    assert os.path.isdir(conf.get("spark.local.dir"))
    assert os.environ["PYSPARK_PYTHON"] == sys.executable


def test_local_cluster_executors_get_memory_that_fits_the_worker():
    conf = default_conf("local-cluster[2,1,768]")
    assert conf["spark.executor.memory"] == "768m"
    assert conf["spark.executor.cores"] == "1"


@pytest.mark.parametrize("master", ["yarn-ish", "local[two]", "local-cluster[2,1]", ""])
def test_unknown_masters_are_refused_at_build_time(master):
    with pytest.raises(JobDefinitionError) as info:
        check_master(master)
    assert info.value.parameter == "master"


def test_shuffle_partitions_must_be_positive():
    with pytest.raises(JobDefinitionError) as info:
        default_conf("local[2]", shuffle_partitions=0)
    assert info.value.parameter == "shuffle_partitions"


def test_a_session_asked_for_on_another_thread_is_the_running_one_unchanged(spark):
    """Spark's active session is per thread: a job built on a job master's thread must get the running
    session, not push Sluice's defaults (4 shuffle partitions) into it."""
    import threading

    from engine.runtime.spark.session import get_or_create_spark

    got = []
    thread = threading.Thread(target=lambda: got.append(get_or_create_spark("local[2]", shuffle_partitions=4)))
    thread.start()
    thread.join()
    assert got[0].sparkContext is spark.sparkContext
    assert spark.conf.get("spark.sql.shuffle.partitions") == "2"
