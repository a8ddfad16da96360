"""Malformed lines take up their offsets in an epoch on Spark as on the local runtime's epoch mode (issue 17: with
malformed lines present the two disagreed on which records were late, 52 against 54 in one run).

An epoch is the slice [S(n-1), S(n)) of each split's offsets, ``epoch_records`` long, and every record of epoch n
is judged against W(n-1).  A malformed line is an offset like any other: it goes to the dead letters and still
counts towards the epoch.  Spark's reading task used to count only the records it kept, so an epoch with malformed
lines read past S(n) and put later records into an earlier epoch, where a lower watermark judged them.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from engine.api.environment import StreamExecutionEnvironment
from engine.api.functions import OutputTag
from engine.api.time import Duration, Time
from engine.watermarks.strategy import WatermarkStrategy
from engine.windowing.assigners import TumblingEventTimeWindows

pytestmark = pytest.mark.spark

EPOCH_RECORDS = 7


def _write_splits(folder: Path, seed: int) -> int:
    """Three JSON-lines files of out-of-order events, about one line in six malformed; returns the malformed count."""
    rng = random.Random(seed)
    folder.mkdir(parents=True)
    malformed = 0
    for split in range(3):
        lines, t = [], 0
        for _ in range(120):
            t += rng.randrange(0, 900)
            if rng.random() < 0.17:
                lines.append(rng.choice(['{"key": "k1", "ts": ', "not json at all", '{"key": "k2", "qty": }']))
                malformed += 1
                continue
            ts = max(0, t - rng.randrange(0, 6000))  # up to 6 s out of order against a 1 s bound: some are late
            lines.append(json.dumps({"key": f"k{rng.randrange(4)}", "ts": ts, "qty": rng.randrange(1, 9)}))
        (folder / f"part-{split}.jsonl").write_text("\n".join(lines) + "\n")
    return malformed


def _ts(e, _):
    return e["ts"]


def _key(e):
    return e["key"]


def _qty(e):
    return e["qty"]


def _run(runtime: str, folder: Path) -> tuple[list, list, int]:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime(runtime)
    env.set_parallelism(2)
    env.set_runtime_option("epoch_records", EPOCH_RECORDS)
    late = OutputTag("late")
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(1)).with_timestamp_assigner(_ts)
    sums = (env.read_files(str(folder), "jsonl").assign_timestamps_and_watermarks(strategy)
            .key_by(_key).window(TumblingEventTimeWindows.of(Time.seconds(5)))
            .side_output_late_data(late).sum("qty"))
    got, result = env.execute_and_collect_streams({"sums": sums, "late": sums.get_side_output(late)})
    order = lambda rows: sorted(rows, key=lambda r: json.dumps(r, sort_keys=True))  # noqa: E731
    return order(got["sums"]), order(got["late"]), result.dead_letter_count


def test_late_records_and_window_results_agree_with_the_local_epoch_mode_when_lines_are_malformed(spark, tmp_path):
    malformed = _write_splits(tmp_path / "in", seed=17)
    local_sums, local_late, local_dead = _run("local", tmp_path / "in")
    spark_sums, spark_late, spark_dead = _run("spark", tmp_path / "in")
    assert local_dead == spark_dead == malformed
    assert local_late, "the data was meant to have late records"
    assert len(spark_late) == len(local_late), (len(spark_late), len(local_late))
    assert spark_late == local_late
    # sum keeps the fields of the window's first element, and which of a key's splits comes first within an
    # epoch is the runtimes' own business: the sums per key and window are what must agree
    per_window = lambda rows: sorted((r["key"], r["ts"] // 5_000, r["qty"]) for r in rows)  # noqa: E731
    assert per_window(spark_sums) == per_window(local_sums)
