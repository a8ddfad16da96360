"""``bench/bench_spark.py --smoke``: the benchmark's tiny grid, run as CI runs it, checks correctness only.

The smoke run (its own process and JVM, as a user runs it) writes two key counts x uniform/Zipf key
distributions, and runs native Spark Structured Streaming, Sluice's lambda form and Sluice's column form on
the same files, tumbling and sliding; ``check_results`` then asserts the column form's rows equal the lambda
form's, both equal a numpy fold of the input, and native's rows are that fold's windows up to its final
watermark.  No timing is asserted: this host is shared and a throughput bound would be noise.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.bench_spark import check_results, expected_window_sums
from bench.common import generate_purchase_events

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.spark
@pytest.mark.timeout(900)  # its own JVM, 1 cell x 2 windows x 3 sides (the 4-cell smoke took 8 min at load 15)
def test_smoke_grid_runs_every_side_and_their_results_agree() -> None:
    """CI runs one cell of the smoke grid (2,000 Zipf keys) to keep under its 30 minutes; the whole smoke grid
    (``--smoke`` alone: 30 and 2,000 keys x uniform and Zipf) is run by hand."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    done = subprocess.run([sys.executable, "-m", "bench.bench_spark", "--smoke", "--keys", "2000", "--skew", "1.1"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=850)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["benchmark"] == "bench_spark_smoke"
    cells = result["cells"]
    assert {(c["keys"], c["skew"]) for c in cells} == {(2000, 1.1)}
    for cell in cells:
        for window in ("tumbling", "sliding"):
            rows = cell["checked_rows"][window]
            # the check ran on real output: Sluice wrote every window, native the windows its watermark passed
            assert rows["lambda"] == rows["column"] == rows["expected_windows"] > 0
            assert 0 < rows["native"] < rows["expected_windows"]
            for side in ("native", "lambda", "column"):
                figures = cell[window][side]
                assert figures["events_per_s"] > 0 and figures["peak_tree_rss_mb"] > 0
                assert set(figures["cpu_us_per_event"]) >= {"jvm", "python", "total"}


def test_the_check_catches_a_wrong_sum(tmp_path: Path) -> None:
    """The correctness check is not vacuous: one wrong sum in a Sluice output fails it, naming the form."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    dataset = generate_purchase_events(tmp_path / "data", events=500, keys=7, files=2)
    expected = expected_window_sums(dataset, "tumbling")
    assert sum(expected.values()) == sum(sum(pq.read_table(f).column("qty").to_pylist()) for f in dataset.files)
    users = [u for u, _ in expected]
    starts = [s for _, s in expected]
    sums = list(expected.values())
    for side, bad in (("lambda", False), ("column", True)):
        out = tmp_path / side / "sluice-output"
        out.mkdir(parents=True)
        qty = [q + 1 if bad and i == 0 else q for i, q in enumerate(sums)]
        if side == "lambda":
            table = pa.table({"f0": users, "f1": starts, "f2": qty})
        else:
            table = pa.table({"user_id": users, "qty": qty,
                              "ts": pa.array(starts, pa.int64()).cast(pa.timestamp("ms", tz="UTC"))})
        pq.write_table(table, out / "part-0.parquet")
    assert check_results(dataset, "tumbling", {"lambda": str(tmp_path / "lambda")}) == {"lambda": len(expected)}
    with pytest.raises(AssertionError, match="column form, tumbling"):
        check_results(dataset, "tumbling", {"lambda": str(tmp_path / "lambda"), "column": str(tmp_path / "column")})


def test_sliding_windows_that_share_their_first_element_count_once_each(tmp_path: Path) -> None:
    """A sliding window's result is its first element with the sum set, and consecutive windows often share that
    element and that sum: equal rows must count once per window, not once."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    dataset = generate_purchase_events(tmp_path / "data", events=40, keys=1, files=1, span_s=30)
    expected = expected_window_sums(dataset, "sliding")
    first_ts = min(pq.read_table(dataset.files[0]).column("ts").cast(pa.int64()).to_pylist())
    rows = sorted(expected.items())
    sums = [q for _, q in rows]
    assert len(sums) > len(set(sums))  # the case at hand: several windows hold every event, so the same sum
    out = tmp_path / "lambda" / "sluice-output"
    out.mkdir(parents=True)
    pq.write_table(pa.table({"f0": [u for (u, _), _ in rows], "f1": [first_ts] * len(rows), "f2": sums}),
                   out / "part-0.parquet")
    assert check_results(dataset, "sliding", {"lambda": str(tmp_path / "lambda")}) == {"lambda": len(rows)}
