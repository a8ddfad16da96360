"""bench/bench_spark_driver.py, the job master's per-epoch driver timing: what it reports is the job's real epochs.

No time is asserted (this host is shared): the harness runs the column form of bench_spark's job on a few thousand
events in the test session's Spark and its figures must describe what ran — every epoch's two Spark jobs found in
Spark's status store and inside the step, the closures the step pickled, the py4j round trips counted — and the
session must be left as found (no job group on the thread, py4j and PySpark unpatched).
"""

from __future__ import annotations

import argparse

import pytest


@pytest.mark.spark
def test_the_harness_reports_each_epochs_jobs_closures_and_round_trips(spark) -> None:
    import pyspark.core.rdd as rdd
    from py4j.clientserver import ClientServerConnection

    from bench.bench_spark_driver import run

    send, prepare = ClientServerConnection.send_command, rdd._prepare_for_python_RDD
    args = argparse.Namespace(events=3000, keys=40, files=3, skew=0.0, window="tumbling", form="column",
                              parallelism=2, warmup=1, profile=True, top=15)
    result = run(spark, args)

    epochs = result["per_epoch"]
    assert result["epochs"] == len(epochs) >= 3  # one epoch per file, then the end of input's
    for e in epochs[:-1]:
        # read (with its local checkpoint) and windows (shuffle, window stage, local checkpoint): two Spark jobs,
        # and in the first epoch the tiny query that finds the shuffle's partition preimages unless this process
        # already ran it (epoch_frames.py caches them per parallelism)
        assert e["spark_jobs"] in ((2, 3) if e is epochs[0] else (2,)), e
        assert 0 < e["jobs_ms"] <= e["step_ms"] + 5 and e["driver_ms"] >= -5, e
        assert 0 <= e["build_ms"] <= e["step_ms"] + 5, e
        # pickled by this thread, on RDDs (the default epoch shape, engine/runtime/spark/epoch_rdds.py): the source
        # stage and the read's driver-row filter; the window's placing function (PySpark fuses partitionBy's bucketing
        # into it), its window stage and its driver-row filter; from the second epoch the filter of the state rows
        # the epoch before left
        assert e["pickled_functions"] == (5 if e is epochs[0] else 6) and e["pickled_bytes"] > 1000, e
        assert e["py4j_calls"] > 0, e
    assert set(result["median_per_epoch"]) >= {"step_ms", "jobs_ms", "driver_ms", "checkpoint_ms", "py4j_calls"}
    assert any("job.py" in row["function"] and "(step)" in row["function"] for row in result["profile_top"])

    assert ClientServerConnection.send_command is send and rdd._prepare_for_python_RDD is prepare
    assert spark.sparkContext.getLocalProperty("spark.jobGroup.id") is None
