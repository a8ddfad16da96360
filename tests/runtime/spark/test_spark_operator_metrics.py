"""Per-operator counts on Spark, per subtask for sources and keyed vertices, and the same counts on both runtimes
for the same bounded job (issue 18).

The job and its hand-computed counts: tests/runtime/spark/operator_metrics_jobs.py.  Also on Spark: the epoch
durations the runtime buckets for ``sluice_epoch_duration_seconds``, and the per-operator state size of the
last completed checkpoint.
"""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from engine.elements import MAX_WATERMARK
from engine.master.metrics import JobMetrics
from operator_metrics_jobs import EXPECTED, UNION_EXPECTED, run, run_tuple_sums_to_files, run_union


@pytest.fixture(scope="module")
def on_spark(spark) -> dict[str, Any]:
    status, sink = run("spark", epoch_records=300)
    assert len(sink.values) == 50
    return status


def _counts(status: dict[str, Any]) -> dict[str, tuple[int, int]]:
    return {uid: (op["records_in"], op["records_out"]) for uid, op in status["operators"].items()}


def test_spark_reports_each_chains_records_in_and_out_as_hand_computed(on_spark):
    assert _counts(on_spark) == EXPECTED
    ops = on_spark["operators"]
    assert ops["v0.n0.numbers"]["name"] == "numbers -> Filter -> FlatMap"
    # a source reads one task per split on Spark; each split's counts go to the subtask reading it locally:
    # split 0 (n = 0..499) to subtask 0, split 1 to subtask 1, each 500 in, 250 even + 125 doubled = 375 out
    assert [(s["index"], s["records_in"], s["records_out"], s["watermark_ms"])
            for s in ops["v0.n0.numbers"]["subtasks"]] == [(0, 500, 375, MAX_WATERMARK), (1, 500, 375, MAX_WATERMARK)]
    for uid in ("window", "sums"):
        subtasks = ops[uid]["subtasks"]
        assert [s["index"] for s in subtasks] == [0, 1]
        assert sum(s["records_out"] for s in subtasks) == EXPECTED[uid][1]
        assert all(s["watermark_ms"] == MAX_WATERMARK for s in subtasks)  # bounded input has ended
    assert sum(s["records_in"] for s in ops["sums"]["subtasks"]) == 50


def test_both_runtimes_report_the_same_counts_for_the_same_bounded_job(on_spark):
    local, sink = run("local")
    assert len(sink.values) == 50
    assert _counts(local) == _counts(on_spark) == EXPECTED
    # the same key groups on the same subtasks (test_spark_key_group_parity.py); the same splits on the same
    # source subtasks (engine/io/source.py assigned_splits)
    for uid in ("v0.n0.numbers", "window", "sums"):
        assert [(s["index"], s["records_in"], s["records_out"]) for s in local["operators"][uid]["subtasks"]] == \
            [(s["index"], s["records_in"], s["records_out"]) for s in on_spark["operators"][uid]["subtasks"]]
    for uid in EXPECTED:
        assert local["operators"][uid]["watermark_ms"] == on_spark["operators"][uid]["watermark_ms"] == MAX_WATERMARK


def test_every_epoch_duration_reaches_the_epoch_histogram(on_spark):
    epochs = on_spark["metrics"]["num_epochs"]
    durations = on_spark["epoch_durations"]
    assert epochs >= 2 and durations["count"] == epochs and durations["sum_s"] > 0
    cumulative = [n for _, n in durations["buckets"]]
    assert cumulative == sorted(cumulative) and durations["buckets"][-1] == ["+Inf", epochs]
    text = JobMetrics("job", lambda: on_spark).render().decode()
    samples = {(s.name, s.labels.get("le")): s.value for f in text_string_to_metric_families(text) for s in f.samples
               if s.name.startswith("sluice_epoch_duration_seconds")}
    assert samples[("sluice_epoch_duration_seconds_count", None)] == epochs
    assert samples[("sluice_epoch_duration_seconds_bucket", "+Inf")] == epochs
    assert samples[("sluice_epoch_duration_seconds_sum", None)] == pytest.approx(durations["sum_s"])


def test_state_size_per_operator_is_the_last_completed_checkpoints(spark, tmp_path):
    from checkpoints.restore import read_snapshot_metadata
    from operator_metrics_jobs import build

    env, _ = build("spark", epoch_records=100, checkpoint_dir=tmp_path.as_uri())
    # stopped after its second epoch, before it FINISHES: a finished run deletes its retained
    # checkpoints (ExternalizedCheckpointRetention), and this test reads the last one; the first
    # checkpoint falls due during epoch 1 and is written at the end of epoch 2
    # (engine/runtime/spark/checkpointing.py "Window tasks write their state")
    env.set_runtime_option("max_epochs", 2)
    client = env.execute_async("operator-state-sizes")
    client.get_job_execution_result().result(600)
    status, history = client.status_details(), client.checkpoint_history()
    metadata = read_snapshot_metadata(history[-1]["external_pointer"])
    expected = {op.uid: 0 for op in metadata.operators}
    for uid, _, handle in metadata.files():
        expected[uid] += handle.bytes
    assert status["state_size_bytes"] == expected
    assert expected["sums"] > 0  # the rolling sums are keyed state


@pytest.fixture(scope="module")
def union_on_spark(spark) -> dict[str, Any]:
    status, sink = run_union("spark")
    assert len(sink.values) == 300
    return status


def _by_name(status: dict[str, Any]) -> dict[str, list[tuple[int, int, int]]]:
    return {op["name"]: [(s["index"], s["records_in"], s["records_out"]) for s in op["subtasks"]]
            for op in status["operators"].values()}


def test_a_stateless_chain_of_its_own_lists_its_subtasks_on_spark_as_the_local_runtime_does(union_on_spark):
    local, sink = run_union("local")
    assert len(sink.values) == 300
    assert _by_name(union_on_spark) == _by_name(local) == UNION_EXPECTED
    for op in union_on_spark["operators"].values():
        assert [s["watermark_ms"] for s in op["subtasks"]] == [MAX_WATERMARK, MAX_WATERMARK]


def test_window_results_staged_as_columns_count_as_the_windows_records_out(spark, tmp_path):
    """A tumbling sum of tuples into a chained Parquet sink: Spark staged the fired windows as columns and counted
    none of them (records out 0 against the local runtime's 50)."""
    import pyarrow.parquet as pq

    counts = {runtime: _counts(run_tuple_sums_to_files(runtime, str(tmp_path / runtime)))
              for runtime in ("local", "spark")}
    assert counts["spark"] == counts["local"] == {"v0.n0.numbers": (1000, 1000), "window": (1000, 50)}
    assert sum(pq.read_table(f).num_rows for f in (tmp_path / "spark" / "out").rglob("*.parquet")) == 50
