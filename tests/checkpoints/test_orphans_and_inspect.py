"""Orphan clean-up (dry run lists, delete removes, grace period protects in-flight work) and the
plain data behind ``sluice checkpoints list`` / ``sluice inspect``."""

from __future__ import annotations

import json
import re
import time

from ckpt_helpers import complete_checkpoint, keys, write_checkpoint
from click.testing import CliRunner
from test_checkpoint_retention import expected_objects

from checkpoints import (
    CheckpointStorage,
    RetainedCheckpointStore,
    StatusDocument,
    clean_orphans,
    find_orphans,
    write_status,
)
from checkpoints.cli import checkpoints_cli, inspect_command
from checkpoints.inspect import inspect_snapshot, list_checkpoints

LATER = 2**62  # "now" far in the future: everything is past its grace period


def test_aborted_checkpoints_and_unreferenced_shared_files_are_listed_then_deleted(backend):
    storage = CheckpointStorage(backend.store, "job-o")
    completed = RetainedCheckpointStore(storage, retained=1)
    m1, _ = complete_checkpoint(storage, completed, 1)
    # an aborted checkpoint: some task files and a fresh shared file, no _metadata
    aborted = storage.initialize_location(2, known_shared=completed.shared_files_in_use())
    import pyarrow as pa

    aborted.write_state_file("window-op", 0, "contents", pa.table({"x": [1, 2, 3]}), incremental_key="window-op/kg0/c")
    aborted.write_state_file("window-op", 0, "timers", pa.table({"x": [1]}))
    before = keys(backend.store)

    # while the job may still run, chk-2 (above every indexed id) could be about to be indexed
    running = clean_orphans(backend.store, "job-o", grace_period_ms=0, now_ms=LATER)
    assert not any("/chk-2/" in o.key for o in running.orphans)
    assert any("chk-2 is newer than every indexed checkpoint" in n for n in running.notes)

    dry = clean_orphans(backend.store, "job-o", grace_period_ms=0, now_ms=LATER, job_stopped=True)
    assert not dry.deleted and keys(backend.store) == before
    reasons = {o.key: o.reason for o in dry.orphans}
    assert any("chk-2 has no _metadata" in r for r in reasons.values())
    assert any("shared file referenced by no retained checkpoint" in r for r in reasons.values())
    assert not any("/chk-1/" in k for k in reasons)
    assert dry.total_bytes > 0

    done = clean_orphans(backend.store, "job-o", grace_period_ms=0, dry_run=False, now_ms=LATER, job_stopped=True)
    assert done.deleted and {o.key for o in done.orphans} == set(reasons)
    assert keys(backend.store) == expected_objects(backend.store, "job-o", [m1])


def test_recent_folders_are_protected_by_the_grace_period(backend):
    storage = CheckpointStorage(backend.store, "job-o2")
    write_checkpoint(storage, 1, incremental=False)  # finalized but not (yet) added to the index
    now = int(time.time() * 1000)
    assert find_orphans(backend.store, "job-o2", grace_period_ms=3_600_000, now_ms=now, job_stopped=True).orphans == ()
    # however old, a completed folder above the index may be added by a running job: never an orphan then
    assert find_orphans(backend.store, "job-o2", grace_period_ms=3_600_000, now_ms=now + 7_200_000).orphans == ()
    late = find_orphans(backend.store, "job-o2", grace_period_ms=3_600_000, now_ms=now + 7_200_000, job_stopped=True)
    assert late.orphans and all("completed but not retained" in o.reason for o in late.orphans)


def test_savepoint_folders_without_metadata_are_orphans_of_the_savepoint_root(backend):
    savepoints = backend.make("savepoints")
    storage = CheckpointStorage(backend.store, "job-o3", savepoint_store=savepoints)
    write_checkpoint(storage, 1, savepoint=True, incremental=False)
    failed = storage.initialize_savepoint_location(2, suffix="dead")
    import pyarrow as pa

    failed.write_state_file("window-op", 0, "contents", pa.table({"x": [1]}))
    report = clean_orphans(backend.store, "job-o3", grace_period_ms=0, dry_run=False, now_ms=LATER,
                           savepoint_store=savepoints)
    assert [o.key for o in report.orphans] == ["job-o3/savepoint-2-dead/window-op/0/contents.parquet"]
    assert not any("savepoint-2-dead" in k for k in keys(savepoints))
    assert any("savepoint-1-" in k for k in keys(savepoints))


def test_list_and_inspect_return_plain_data_and_the_cli_prints_it(backend):
    savepoints = backend.make("savepoints")
    storage = CheckpointStorage(backend.store, "job-l", savepoint_store=savepoints)
    completed = RetainedCheckpointStore(storage, retained=2)
    for n in range(1, 4):
        complete_checkpoint(storage, completed, n)
    write_checkpoint(storage, 4, savepoint=True, incremental=False)
    write_status(backend.store, StatusDocument("job-l", 123, last_completed_checkpoint=3))

    listing = list_checkpoints(backend.store, "job-l", savepoints)
    assert [c["checkpoint_id"] for c in listing["checkpoints"]] == [2, 3]
    assert listing["checkpoints"][-1]["latest"] and listing["checkpoints"][-1]["uri"].endswith("job-l/chk-3")
    assert listing["status"]["last_completed_checkpoint"] == 3
    assert [s["checkpoint_id"] for s in listing["savepoints"]] == [4]
    json.dumps(listing)  # plain data

    info = inspect_snapshot(listing["checkpoints"][-1]["uri"], verify_checksums=True, **backend.uri_options())
    assert info["checkpoint_id"] == 3 and info["problems"] == [] and info["type"] == "checkpoint"
    op = info["operators"][0]
    assert op["key_groups_covered"] == op["max_parallelism"] == 8
    assert op["key_group_ranges"] == [[0, 3], [4, 7]]
    assert op["states"]["contents"]["rows"] == 40 and op["states"]["contents"]["shared_files"] == 8
    assert op["states"]["timers"]["files"] == 2
    json.dumps(info)

    options = ["--endpoint-url", backend.endpoint_url] if backend.endpoint_url else []
    runner = CliRunner()
    result = runner.invoke(checkpoints_cli, ["list", "job-l", "--storage", backend.store.uri, "--json", *options])
    assert result.exit_code == 0, result.output
    assert [c["checkpoint_id"] for c in json.loads(result.output)["checkpoints"]] == [2, 3]
    result = runner.invoke(inspect_command, [listing["checkpoints"][-1]["uri"], *options])
    assert result.exit_code == 0, result.output
    assert "checkpoint 3 of job job-l" in result.output and "key groups 8/8" in result.output
    assert "verified" not in result.output
    verified = runner.invoke(inspect_command, [listing["checkpoints"][-1]["uri"], "--verify", *options])
    assert verified.exit_code == 0, verified.output
    assert re.search(r"verified: the sha256 of all \d+ files matches _metadata", verified.output), verified.output


def test_inspect_lists_problems_and_the_cli_exits_non_zero(backend):
    storage = CheckpointStorage(backend.store, "job-l2")
    metadata, location = write_checkpoint(storage, 1, incremental=False)
    victim = next(h.path for _, _, h in metadata.files())
    backend.store.delete(location.snapshot_dir + victim)
    info = inspect_snapshot(location.uri, **backend.uri_options())
    assert len(info["problems"]) == 1 and victim in info["problems"][0] and "is missing" in info["problems"][0]
    options = ["--endpoint-url", backend.endpoint_url] if backend.endpoint_url else []
    result = CliRunner().invoke(inspect_command, [location.uri, *options])
    assert result.exit_code == 1 and "PROBLEM" in result.output
    result = CliRunner().invoke(inspect_command, [location.uri, "--verify", *options])
    assert result.exit_code == 1 and "PROBLEM" in result.output and "verified" not in result.output
