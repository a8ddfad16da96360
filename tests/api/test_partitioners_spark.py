"""The partitioners on Spark give the local runtime's results, dead letters and record counts (issue 19).

On Spark a stateless operator reached over a RESCALE, SHUFFLE or CUSTOM edge runs in its producer's task, as
over a REBALANCE edge (engine/runtime/spark/chains.py): the records and the vertex's totals match the local
runtime's, and a custom partitioner still runs per record, so the same records become dead letters and each
subtask of the next operator gets the same records (counted per subtask, as locally).  **Partial**: over a
RESCALE or SHUFFLE edge Spark lists no subtasks (engine/runtime/operator_metrics.py), so those per-subtask
counts are compared on the local runtime only (tests/api/test_partitioners.py).
"""

from __future__ import annotations

import sys

import pytest

pytestmark = pytest.mark.spark

pytest.importorskip("pyspark")
from pyspark import cloudpickle  # noqa: E402

import partition_jobs  # noqa: E402
from partition_jobs import run  # noqa: E402

for _module in (sys.modules[__name__], partition_jobs):
    cloudpickle.register_pickle_by_value(_module)


@pytest.mark.parametrize(("how", "records", "splits", "consumers"), [
    ("rescale", 12, 2, 3), ("rescale", 12, 3, 2), ("custom", 20, 2, 3), ("custom_fn", 10, 2, 3),
    ("shuffle", 300, 1, 3),
])
def test_spark_gives_the_local_runtimes_records_dead_letters_and_totals(spark, how, records, splits, consumers):
    local = run("local", how, records, splits, consumers)
    on_spark = run("spark", how, records, splits, consumers)
    assert on_spark["values"] == local["values"]
    assert on_spark["dead_letters"] == local["dead_letters"]
    assert on_spark["records_in"] == local["records_in"] == len(local["values"])
    if how.startswith("custom"):
        assert on_spark["subtasks"] == local["subtasks"]
        assert on_spark["subtasks_out"] == local["subtasks_out"] == local["subtasks"]  # map -> sink: one out per in
    else:
        assert on_spark["subtasks"] == []
    if how == "custom":
        assert on_spark["subtasks"] == [7, 5, 6]
        assert [d["stage"] for d in on_spark["dead_letters"]] == ["partition_custom"] * 2
