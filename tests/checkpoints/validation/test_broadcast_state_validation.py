"""A savepoint holding broadcast state validates: its ``broadcast/<name>`` tables are operator state (a map of
codec-encoded ``key`` and ``value`` per subtask, engine/operators/broadcast_process.py), not keyed state, so the
keyed-state rules (key group, namespace, stored layout) do not apply to them; their files are still verified."""

from __future__ import annotations

import sys
from pathlib import Path

from checkpoints import load_snapshot
from checkpoints.validation import validate_snapshot
from engine.io.collection_source import CollectionSource
from engine.runtime.local.runtime import LocalRuntime

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "api"))
import test_broadcast_state as jobs  # noqa: E402
import test_broadcast_state_restore as restore_jobs  # noqa: E402
from restore_comparison import configured_env  # noqa: E402
from source_gate import savepoint_after


def test_a_savepoint_with_broadcast_state_passes_validation(tmp_path: Path) -> None:
    # checkpoints every 50 ms of a manual clock, as the restore tests run it (a savepoint taken before the first
    # periodic checkpoint fails on the local runtime today: "savepoint metadata finalized into a checkpoint location")
    env = configured_env(2, f"file://{tmp_path}/chk")
    rules = env.from_source(CollectionSource(restore_jobs.RULES, num_splits=1)).uid("rules") \
        .assign_timestamps_and_watermarks(restore_jobs._strategy()).broadcast(jobs.RULES_DESCRIPTOR)
    items = env.from_source(CollectionSource(restore_jobs.ITEMS, num_splits=2)).uid("items") \
        .assign_timestamps_and_watermarks(restore_jobs._strategy())
    stream = items.key_by(lambda i: i[0]).connect(rules).process(jobs.LimitCheck()).uid("limits")
    client, uri = savepoint_after(lambda: LocalRuntime(env).submit("validated", [], [stream._node]), 700,
                                  f"file://{tmp_path}/savepoints")
    client.wait(60)
    tables = {h.table: h.rows for _, h in load_snapshot(uri).metadata.operator("limits").files()}
    assert tables.get("broadcast.rules") and tables.get("keyed.waiting"), tables  # both kinds of state are there

    report = validate_snapshot(uri, build_data_docs=False, write_results=False, find_previous=False)
    assert report.passed, report.failed
    assets = {a.asset for a in report.assets}
    assert "limits.state.waiting" in assets and not any("broadcast" in a for a in assets)
