"""Two sources whose split ids coincide (issue 19): two ``from_collection`` sources both have ``collection-0``,
two ``read_files`` folders can both hold ``part-0.jsonl``.  As in Flink, each source is its own operator and
its splits are its own: the job runs on Spark as it does locally, and snapshots keep one position per
(source, split), so a savepoint taken mid-job restores every source where it stood, exactly once.
"""

from __future__ import annotations

import json
from pathlib import Path

from checkpoints import load_snapshot
from engine.api.environment import StreamExecutionEnvironment
from engine.api.time import Time
from engine.io.collection_source import CollectionSource
from engine.watermarks.strategy import WatermarkStrategy
from engine.windowing.assigners import TumblingEventTimeWindows

# (key, value, timestamp_ms): a short source that finishes early and a long one
SHORT = [("a", 1, 1_000), ("b", 2, 2_000), ("a", 3, 12_000), ("b", 4, 13_000), ("a", 5, 14_000)]
LONG = [(("a", "b", "c")[i % 3], 10 * i, 1_000 * i) for i in range(40)]


def _timestamp(e, ts):
    return e[2]


def _key(e):
    return e[0]


def _expected_sums(*sources: list[tuple]) -> list[tuple]:
    """Per key and 10 s tumbling window: (key, sum of values), computed in plain Python."""
    sums: dict[tuple, int] = {}
    for events in sources:
        for key, value, ts in events:
            sums[(key, ts // 10_000)] = sums.get((key, ts // 10_000), 0) + value
    return sorted((key, total) for (key, _), total in sums.items())


def _two_collections_job(runtime: str, parallelism: int = 2, options: dict | None = None,
                         storage: str | None = None):
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime(runtime)
    env.set_parallelism(parallelism)
    env.set_max_parallelism(16)
    if storage is not None:
        env.enable_checkpointing(10)
        env.get_checkpoint_config().set_checkpoint_storage_dir(storage)
    for k, v in (options or {}).items():
        env.set_runtime_option(k, v)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(_timestamp)
    short = env.from_collection(SHORT).assign_timestamps_and_watermarks(strategy)
    long = env.from_collection(LONG).assign_timestamps_and_watermarks(strategy)
    sums = (short.union(long).key_by(_key).window(TumblingEventTimeWindows.of(Time.seconds(10)))
            .reduce(lambda x, y: (x[0], x[1] + y[1], max(x[2], y[2]))).map(lambda e: (e[0], e[1])))
    return env, sums


def test_two_from_collection_sources_run_on_spark_as_locally(spark):
    assert [s.split_id for s in CollectionSource(SHORT).discover_splits()] == \
        [s.split_id for s in CollectionSource(LONG).discover_splits()]  # the ids do coincide
    expected = _expected_sums(SHORT, LONG)
    _, local = _two_collections_job("local")
    _, on_spark = _two_collections_job("spark", options={"epoch_records": 7})
    assert sorted(local.execute_and_collect()) == expected
    assert sorted(on_spark.execute_and_collect()) == expected


def _write_jsonl(folder: Path, name: str, rows: list[dict]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_two_read_files_folders_sharing_a_file_name_run_on_spark_as_locally(spark, tmp_path: Path):
    _write_jsonl(tmp_path / "east", "part-0.jsonl", [{"site": "east", "n": i} for i in range(6)])
    _write_jsonl(tmp_path / "east", "part-1.jsonl", [{"site": "east", "n": 100 + i} for i in range(3)])
    _write_jsonl(tmp_path / "west", "part-0.jsonl", [{"site": "west", "n": 200 + i} for i in range(9)])
    expected = sorted([("east", i) for i in range(6)] + [("east", 100 + i) for i in range(3)]
                      + [("west", 200 + i) for i in range(9)])

    def run(runtime: str) -> list:
        env = StreamExecutionEnvironment.get_execution_environment()
        env.set_runtime(runtime)
        env.set_parallelism(2)
        if runtime == "spark":
            env.set_runtime_option("epoch_records", 4)
        east = env.read_files(str(tmp_path / "east"), "jsonl")
        west = env.read_files(str(tmp_path / "west"), "jsonl")
        return sorted(east.union(west).map(lambda r: (r["site"], r["n"])).execute_and_collect())

    assert run("local") == expected
    assert run("spark") == expected


def test_a_savepoint_of_two_sources_restores_each_source_where_it_stood(spark, tmp_path: Path):
    from engine.runtime.spark.runtime import SparkRuntime

    storage = f"file://{tmp_path}/checkpoints"
    expected = _expected_sums(SHORT, LONG)
    env, sums = _two_collections_job("spark", options={"epoch_records": 8}, storage=storage)
    job = SparkRuntime(env).start("two sources", [], [sums._node])
    for _ in range(2):  # SHORT (5 records) has finished; LONG stands at offset 16 of 40
        assert job.run_epoch()
    savepoint = job.stop_with_savepoint(f"file://{tmp_path}/savepoints").result(timeout=120)
    before_stop = list(job.collected[sums._node.id])
    assert 0 < len(before_stop) < len(expected)

    positions = load_snapshot(savepoint).metadata.source_positions
    assert sorted(positions.values()) == [5, 16], positions  # one position per source, none overwritten
    assert all(key.endswith("/collection-0") for key in positions)

    _, restored = _two_collections_job("spark", parallelism=3, storage=storage,
                                       options={"epoch_records": 8, "from_savepoint": savepoint})
    after_restore = restored.execute_and_collect()
    assert sorted(before_stop + after_restore) == expected  # exactly once: nothing lost, nothing twice


def _single_source_job(runtime: str, options: dict | None = None, storage: str | None = None):
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime(runtime)
    env.set_parallelism(2)
    env.set_max_parallelism(16)
    if storage is not None:
        env.enable_checkpointing(10)
        env.get_checkpoint_config().set_checkpoint_storage_dir(storage)
    for k, v in (options or {}).items():
        env.set_runtime_option(k, v)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(_timestamp)
    sums = (env.from_collection(LONG).assign_timestamps_and_watermarks(strategy).key_by(_key)
            .window(TumblingEventTimeWindows.of(Time.seconds(10)))
            .reduce(lambda x, y: (x[0], x[1] + y[1], max(x[2], y[2]))).map(lambda e: (e[0], e[1])))
    return env, sums


def _as_written_before_per_source_names(savepoint: str) -> None:
    """Rewrite a savepoint's ``_metadata`` the way Sluice wrote it before source positions were named per
    source: ``source_positions`` and the per-split watermark entries keyed by the bare split id."""
    path = Path(savepoint.removeprefix("file://")) / "_metadata"
    doc = json.loads(path.read_text())
    doc["source_positions"] = {key.split("/", 1)[-1]: v for key, v in doc["source_positions"].items()}
    splits = doc["watermarks"]["splits"]
    doc["watermarks"]["splits"] = {key.split("/", 1)[-1]: v for key, v in splits.items()}
    doc.pop("document_sha256")  # the older format (1.0) was not sealed
    doc["format_version"] = "1.0"
    path.write_text(json.dumps(doc))


def test_a_single_source_savepoint_in_the_older_format_still_restores(spark, tmp_path: Path):
    from engine.runtime.spark.runtime import SparkRuntime

    storage = f"file://{tmp_path}/checkpoints"
    expected = _expected_sums(LONG)
    env, sums = _single_source_job("spark", options={"epoch_records": 8}, storage=storage)
    job = SparkRuntime(env).start("one source", [], [sums._node])
    for _ in range(2):
        assert job.run_epoch()
    savepoint = job.stop_with_savepoint(f"file://{tmp_path}/savepoints").result(timeout=120)
    before_stop = list(job.collected[sums._node.id])
    _as_written_before_per_source_names(savepoint)
    assert load_snapshot(savepoint).metadata.source_positions == {"collection-0": 16}

    _, restored = _single_source_job("spark", storage=storage, options={"epoch_records": 8,
                                                                          "from_savepoint": savepoint})
    assert sorted(before_stop + restored.execute_and_collect()) == expected
