"""Writes tests/runtime/spark/fixtures/column_path_1b93168/: a Spark checkpoint of the column path taken by the data
path of commit 1b93168 (before issue 16's codec and row-group changes), for test_column_path_old_checkpoint.py.

Run from a checkout of that commit (the helpers below are this file's own, so the checkout needs only this file)::

    PYTHONPATH=<checkout> python tests/runtime/spark/column_path_fixture.py <out folder>

The folder gets ``in/`` (two Parquet files of events with UTC timestamps: the job's input), ``chk/`` (the
checkpoints the job retained after two epochs, the newest one named in ``expected.json``) and ``expected.json``:
what the job emitted before the checkpoint, as the codec's texts.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def job(env, folder: Path):
    """test_spark_column_path.py's sliding column-form sum, its source with a uid: a source's default uid
    names its folder's absolute path, which a fixture copied elsewhere does not keep."""
    from engine.api.functions import OutputTag
    from engine.api.time import Duration, Time
    from engine.watermarks.strategy import WatermarkStrategy
    from engine.windowing.assigners import SlidingEventTimeWindows

    bounded = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(3))
    events = env.read_files(str(folder), "parquet").uid("events")
    late = OutputTag("late")
    windowed = (events.assign_timestamps_and_watermarks(bounded.with_timestamp_assigner("ts")).key_by("user_id")
                .window(SlidingEventTimeWindows.of(Time.seconds(6), Time.seconds(4))).side_output_late_data(late))
    results = windowed.sum("qty")
    return results, results.get_side_output(late)


if __name__ == "__main__":
    sys.path[:0] = [str(Path(__file__).parent), str(Path(__file__).parents[2])]  # its siblings, tests/
    from test_spark_column_path import _env, _write_events

    from engine.runtime.spark.runtime import SparkRuntime
    from engine.runtime.spark.session import get_or_create_spark
    from engine.state import codec

    out = Path(sys.argv[1]).resolve()
    get_or_create_spark("local[2]", app_name="column-path-fixture")
    _write_events(out / "in", seed=7, files=2, per_file=150, keys=6, int_keys=False, datetimes=True)
    env = _env("spark", 2, {}, (out / "chk").as_uri())
    results, late = job(env, out / "in")
    job = SparkRuntime(env).start("colpath", [], [results._node, late._node])
    for _ in range(2):
        assert job.run_epoch()
        job.await_checkpoints()
    newest = job.checkpoint_history()[-1]
    emitted = {"results": [codec.encode(v) for v in job.collected[results._node.id]],
               "late": [codec.encode(v) for v in job.collected.get(late._node.id, [])]}
    job.cancel()
    pointer = Path(newest.external_pointer.removeprefix("file://")).relative_to(out / "chk")
    (out / "expected.json").write_text(json.dumps({"checkpoint": str(pointer), "emitted": emitted}, indent=1))
