"""Window tasks write a checkpoint's state files themselves (runtime option ``snapshot_in_window_tasks``, issue 16).

Real local Spark and file storage, the column-form sliding sum of test_spark_column_path.py:

- the files the window tasks write hold what the upload job writes at the same barrier, for a column fold window
  (whose state the task converts to the window operator's layout) and for the operator's path, and the epoch's
  checkpoint runs no Spark job of its own;
- a task that cannot write declines the checkpoint with its error and the checkpoint's folder is deleted; the job
  goes on and the next checkpoint completes and restores to the uninterrupted results;
- a checkpoint triggered in the epoch that ends the job is never taken and leaves no file behind.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from test_spark_column_fold import _job, _run
from test_spark_column_path import _env, _write_events


def _spark_jobs(spark) -> int:
    return len(spark.sparkContext.statusTracker().getJobIdsForGroup())


def _start(tmp_path: Path, name: str, options: dict, tolerable_failures: int = 0):
    from engine.runtime.spark.runtime import SparkRuntime

    env = _env("spark", 2, options, f"file://{tmp_path}/{name}")
    env.get_checkpoint_config().set_num_retained_checkpoints(5)
    env.get_checkpoint_config().set_tolerable_checkpoint_failure_number(tolerable_failures)
    results = _job(env, tmp_path / "in", "sliding", "sum")
    return SparkRuntime(env).start(name, [], [results._node]), results


def _operator_entry(snapshot, uid: str) -> dict:
    """The operator's entry in ``_metadata`` without what differs between two checkpoints of the same state: file
    paths and the checkpoint's id."""
    entry = snapshot.operator(uid).to_dict()
    for metadata in entry["config"]["subtask_metadata"].values():
        metadata.pop("checkpoint_id")
    for sub in entry["subtasks"]:
        for f in sub["files"]:
            f.pop("path")
    return entry


@pytest.mark.parametrize("path", [{}, {"column_fold": False}], ids=["column-fold", "operator"])
def test_the_window_tasks_write_the_files_the_upload_job_writes_and_run_no_job_of_their_own(spark, tmp_path: Path,
                                                                                           path: dict) -> None:
    from checkpoints import load_snapshot

    _write_events(tmp_path / "in", seed=9, files=2, per_file=300, keys=6, int_keys=False, datetimes=True)
    newest: dict[bool, object] = {}
    jobs_per_epoch: dict[bool, list[int]] = {}
    for in_tasks in (True, False):
        job, results = _start(tmp_path, f"in-tasks-{in_tasks}", {**path, "snapshot_in_window_tasks": in_tasks})
        counts = []
        for _ in range(3):
            before = _spark_jobs(spark)
            assert job.run_epoch()
            job.await_checkpoints()
            counts.append(_spark_jobs(spark) - before)
        jobs_per_epoch[in_tasks] = counts
        history = job.checkpoint_history()
        # the first checkpoint is due during epoch 1: taken at its end by the upload job, at epoch 2's by the tasks
        assert [h.epoch for h in history] == ([2, 3] if in_tasks else [1, 2, 3])
        newest[in_tasks] = history[-1]
        uid = results._node.operator_uid()
        job.cancel()
    # epochs 2 and 3 each end at a barrier in both runs: the upload job is one more Spark job per checkpoint
    assert [u - t for u, t in zip(jobs_per_epoch[False][1:], jobs_per_epoch[True][1:])] == [1, 1], jobs_per_epoch
    tasks, upload = load_snapshot(newest[True].external_pointer), load_snapshot(newest[False].external_pointer)
    task_tables, upload_tables = tasks.state_tables(uid), upload.state_tables(uid)
    assert task_tables["keyed.window-contents"].num_rows > 0
    assert task_tables.keys() == upload_tables.keys()
    for name in task_tables:
        assert task_tables[name].equals(upload_tables[name], check_metadata=True), name
    assert _operator_entry(tasks, uid) == _operator_entry(upload, uid)


def test_a_task_that_cannot_write_declines_the_checkpoint_and_the_next_one_restores(spark, tmp_path: Path,
                                                                                    caplog) -> None:
    folder = tmp_path / "in"
    _write_events(folder, seed=7, files=2, per_file=300, keys=6, int_keys=False, datetimes=True)
    golden, _ = _run(folder, "sliding", "sum")
    job, results = _start(tmp_path, "blocked", {}, tolerable_failures=1)
    uid = results._node.operator_uid()
    # checkpoint 1's folder for the window's files is a file: the tasks' writes fail there, not on the driver
    blocked = tmp_path / "blocked" / job.job_id / "chk-1" / uid
    blocked.parent.mkdir(parents=True)
    blocked.write_text("not a folder")
    with caplog.at_level(logging.INFO, logger="engine.checkpointing.coordinator"):
        for _ in range(3):
            assert job.run_epoch()
            job.await_checkpoints()
    failed = [r.getMessage() for r in caplog.records if "checkpoint 1 failed" in r.getMessage()]
    assert failed and f"window tasks failed to write checkpoint 1's state: {uid}#0: NotADirectoryError" in failed[0]
    assert job.checkpointing.coordinator.num_failed_checkpoints == 1
    assert not blocked.parent.exists()  # the declined checkpoint's folder is deleted, whatever its tasks wrote
    history = job.checkpoint_history()
    assert [h.checkpoint_id for h in history] == [2]  # epoch 3's barrier
    before = list(job.collected[results._node.id])
    job.cancel()
    after, _ = _run(folder, "sliding", "sum", options={"from_savepoint": history[-1].external_pointer})
    assert sorted(map(repr, before + after)) == sorted(map(repr, golden))


def test_a_checkpoint_triggered_in_the_last_epoch_leaves_no_files(spark, tmp_path: Path) -> None:
    _write_events(tmp_path / "in", seed=5, files=2, per_file=200, keys=3, int_keys=False, datetimes=True)
    job, _ = _start(tmp_path, "ends", {})
    while job.run_epoch():
        pass
    assert job.finished
    completed = [h.checkpoint_id for h in job.checkpoint_history()]
    # the premise: a checkpoint was triggered after the last one completed (every epoch start has one due)
    assert completed and job.checkpointing.coordinator.next_checkpoint_id() - 1 > completed[-1]
    storage = tmp_path / "ends" / job.job_id
    # a FINISHED run deletes its retained checkpoints (Flink's rule); the one triggered as the last epoch started
    # was never taken, and its tasks' files went with it
    leftovers = sorted(str(p.relative_to(storage)) for p in storage.rglob("chk-*/**/*") if p.is_file())
    assert leftovers == []
    assert job.checkpointing.write_through is None
