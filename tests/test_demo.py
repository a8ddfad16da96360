"""The README's main job, end to end: Spark run, savepoint, stop, GE validation, rescaled restore,
and output identical to an uninterrupted local-runtime run (exactly-once across the stop/restore)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.demo import DemoConfig, run_demo


@pytest.mark.spark
@pytest.mark.slow
def test_the_demo_story_restores_a_validated_savepoint_at_another_parallelism_exactly_once(tmp_path: Path, spark) -> None:
    # ``spark``: the suite's session, started with the test folders on the workers' PYTHONPATH.  Without it,
    # a demo run first in a test process would start the session itself, without them, and the Spark
    # tests that process runs later would find their helper modules missing in the workers.
    lines: list[str] = []
    summary = run_demo(DemoConfig(tmp_path, events_per_split=3_000), lines.append)
    assert summary["savepoint_validation"] == "passed"
    assert summary["identical_to_uninterrupted_local_run"] is True, summary.get("differences")
    assert summary["checkpoints_before_stop"], "the job must have checkpointed before it was stopped"
    for kind in ("tumbling", "sliding", "session", "count"):
        assert summary[f"{kind}_results"] > 0, kind
    assert any(line.startswith("3. validating") for line in lines)
