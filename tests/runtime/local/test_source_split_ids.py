"""Two sources whose split ids coincide (issue 19) on the local runtime: each keeps its own position in a
snapshot's ``source_positions``, so a restore puts every source back where it stood, exactly once.

Two ``from_collection`` sources both have the split ``collection-0``.  The short one finishes early,
the long one is midway when the job fails; restored from the retained checkpoint, the committed
output equals an uninterrupted run's.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest

from checkpoints import load_snapshot
from engine import (
    CheckpointingMode,
    ExternalizedCheckpointRetention,
    ManualClock,
    StreamExecutionEnvironment,
    Time,
    TumblingEventTimeWindows,
    WatermarkStrategy,
)
from engine.api.restart import RestartStrategies
from engine.errors import JobFailedError
from engine.io.file_sink import FileSink, read_committed
from engine.runtime.local.faults import Fault, FaultKind, FaultPlan

SHORT = [(f"k{i % 3}", 1, 100 * i) for i in range(10)]
LONG = [(f"k{i % 5}", i % 7, 100 * i) for i in range(1200)]


def build(out: str, storage: str | None = None, fault_plan: FaultPlan | None = None) -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.set_clock(ManualClock())  # checkpoint intervals counted in scheduling rounds: every run is the same
    env.set_runtime_option("bundle_size", 16)
    env.set_runtime_option("clock_step_ms", 10)
    env.enable_checkpointing(50, CheckpointingMode.EXACTLY_ONCE)
    config = env.get_checkpoint_config()
    if storage is not None:
        config.set_checkpoint_storage_dir(storage)
        config.set_externalized_checkpoint_retention(ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION)
    if fault_plan is not None:
        env.set_runtime_option("fault_plan", fault_plan)
    env.set_runtime_option("restart_strategy", RestartStrategies.fixed_delay_restart(0, 0))
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, ts: e[2])
    short = env.from_collection(SHORT).assign_timestamps_and_watermarks(strategy)
    long = env.from_collection(LONG).assign_timestamps_and_watermarks(strategy)
    (short.union(long).key_by(lambda e: e[0]).window(TumblingEventTimeWindows.of(Time.seconds(5)))
     .reduce(lambda a, b: (a[0], a[1] + b[1], max(a[2], b[2]))).map(lambda e: [e[0], e[1], e[2] // 5000])
     .sink_to(FileSink(out, "jsonl", mode="exactly_once")))
    return env


@pytest.fixture(scope="module")
def golden() -> list:
    out = tempfile.mkdtemp()
    build(out).execute("golden")
    return sorted(read_committed(out))


def test_two_sources_sharing_a_split_id_restore_each_at_its_own_position(golden: list, tmp_path: Path) -> None:
    out, storage = str(tmp_path / "out"), f"file://{tmp_path}/chk"
    with pytest.raises(JobFailedError):
        build(out, storage, FaultPlan([Fault(FaultKind.RECORDS, 900)])).execute("fails midway")
    (job_dir,) = [p for p in (tmp_path / "chk").iterdir() if p.is_dir()]
    (latest,) = [p for p in job_dir.iterdir() if p.name.startswith("chk-") and (p / "_metadata").exists()]
    positions = load_snapshot(f"file://{latest}").metadata.source_positions
    # one position per (source, split): the short source finished, the long one stands midway
    assert len(positions) == 2 and all(key.endswith("/collection-0") for key in positions), positions
    assert sorted(positions.values())[0] == len(SHORT) and len(SHORT) < sorted(positions.values())[1] < len(LONG)
    assert 0 < len(read_committed(out)) < len(golden)

    resumed = build(out)
    resumed.set_runtime_option("from_savepoint", f"file://{latest}")
    resumed.execute("resumed")
    assert sorted(read_committed(out)) == golden  # exactly once: nothing lost, nothing twice


def test_a_single_source_checkpoint_in_the_older_format_still_restores(tmp_path: Path) -> None:
    # the older format: source_positions keyed by the bare split id, as written before splits were named per source
    def build_one(out: str, storage: str | None = None, fault_plan: FaultPlan | None = None):
        env = StreamExecutionEnvironment.get_execution_environment()
        env.set_parallelism(2)
        env.set_clock(ManualClock())
        env.set_runtime_option("bundle_size", 16)
        env.set_runtime_option("clock_step_ms", 10)
        env.enable_checkpointing(50, CheckpointingMode.EXACTLY_ONCE)
        if storage is not None:
            env.get_checkpoint_config().set_checkpoint_storage_dir(storage)
            env.get_checkpoint_config().set_externalized_checkpoint_retention(
                ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION)
        if fault_plan is not None:
            env.set_runtime_option("fault_plan", fault_plan)
        env.set_runtime_option("restart_strategy", RestartStrategies.fixed_delay_restart(0, 0))
        (env.from_collection(LONG).map(lambda e: [e[0], e[1], e[2]])
         .sink_to(FileSink(out, "jsonl", mode="exactly_once")))
        return env

    golden_out = str(tmp_path / "golden")
    build_one(golden_out).execute("golden")
    out, storage = str(tmp_path / "out"), f"file://{tmp_path}/chk"
    with pytest.raises(JobFailedError):
        build_one(out, storage, FaultPlan([Fault(FaultKind.RECORDS, 700)])).execute("fails midway")
    (job_dir,) = [p for p in (tmp_path / "chk").iterdir() if p.is_dir()]
    (latest,) = [p for p in job_dir.iterdir() if p.name.startswith("chk-") and (p / "_metadata").exists()]
    doc = json.loads((latest / "_metadata").read_text())
    doc["source_positions"] = {key.split("/", 1)[-1]: v for key, v in doc["source_positions"].items()}
    doc.pop("document_sha256")  # as the older format wrote it: 1.0, not sealed
    doc["format_version"] = "1.0"
    (latest / "_metadata").write_text(json.dumps(doc))
    (offset,) = load_snapshot(f"file://{latest}").metadata.source_positions.values()
    assert load_snapshot(f"file://{latest}").metadata.source_positions == {"collection-0": offset}
    assert 0 < offset < len(LONG)

    resumed = build_one(out)
    resumed.set_runtime_option("from_savepoint", f"file://{latest}")
    resumed.execute("resumed")
    assert sorted(read_committed(out)) == sorted(read_committed(golden_out)) and len(read_committed(out)) == len(LONG)
