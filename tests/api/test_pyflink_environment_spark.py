"""The auto-watermark interval on Spark (issue 19): 0 turns periodic watermarks off there too, so the job of
tests/api/test_pyflink_environment.py counts the record the runtime's own cadence (one watermark per epoch, an
epoch per record here) drops as late, as on the local runtime."""

from __future__ import annotations

import sys

import pytest

pytestmark = pytest.mark.spark

pytest.importorskip("pyspark")
from pyspark import cloudpickle  # noqa: E402

import test_pyflink_environment as jobs  # noqa: E402

for _module in (sys.modules[__name__], jobs):
    cloudpickle.register_pickle_by_value(_module)


def test_an_auto_watermark_interval_of_0_turns_periodic_watermarks_off_on_spark(spark):
    assert jobs.window_counts("spark", None) == jobs.window_counts("local", None) == [(1000, 1), (5000, 1)]
    assert jobs.window_counts("spark", 0) == jobs.window_counts("local", 0) == [(1000, 1), (2000, 1), (5000, 1)]


@pytest.mark.parametrize("how", [None, "disable", "new_chain"])
def test_spark_runs_a_job_with_chaining_turned_off_with_the_same_results(spark, how):
    env = jobs._env(2)
    env.set_runtime("spark")
    if how is None:
        env.disable_operator_chaining()
    _, results = jobs._chain_job(env, how)
    assert results == list(range(2, 21, 2))
