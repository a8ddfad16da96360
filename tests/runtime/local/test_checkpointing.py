"""Checkpointing wired into the local runtime (seeds 001-003): periodic triggering on the injected clock,
handler selection by mode, source positions Sn, sinks committing only on completion."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine import CheckpointingMode
from engine.checkpointing.barrier_tracker import CheckpointBarrierTracker
from engine.checkpointing.single_checkpoint_barrier_handler import (
    AlternatingCheckpointBarrierHandler,
    CheckpointBarrierAligner,
)
from engine.graph.plan import build_plan
from engine.io.file_sink import read_committed
from engine.runtime.local.job_run import JobRun
from engine.runtime.local.runtime import LocalJob, LocalRuntime
from engine.runtime.local.tasks import StreamTask

from checkpoint_jobs import build_job, committed, make_events

EVENTS = make_events()


def prepared(env) -> JobRun:
    return LocalRuntime(env)._prepare("t", list(env._sinks), [])


def first_attempt(env) -> LocalJob:
    run = prepared(env)
    plan = build_plan(run.roots, env.get_parallelism(), env.get_max_parallelism())
    return LocalJob(run, plan, None)


@pytest.mark.parametrize(("mode", "unaligned", "handler"), [
    (CheckpointingMode.AT_LEAST_ONCE, False, CheckpointBarrierTracker),
    (CheckpointingMode.EXACTLY_ONCE, False, CheckpointBarrierAligner),
    (CheckpointingMode.EXACTLY_ONCE, True, AlternatingCheckpointBarrierHandler),
])
def test_each_stream_task_gets_the_barrier_handler_its_mode_selects(tmp_path: Path, mode, unaligned, handler) -> None:
    job = first_attempt(build_job(str(tmp_path), EVENTS, mode=mode, unaligned=unaligned))
    stream_tasks = [t for t in job.tasks if isinstance(t, StreamTask)]
    assert stream_tasks and all(isinstance(t.barrier_handler, handler) for t in stream_tasks)
    assert all(t.checkpointing is not None for t in job.tasks)


def test_periodic_checkpoints_follow_the_interval_on_the_manual_clock(tmp_path: Path) -> None:
    run = prepared(build_job(str(tmp_path), EVENTS, mode=CheckpointingMode.EXACTLY_ONCE, interval_ms=50))
    run.run()
    periodic = [r for r in run.history if r.kind == "checkpoint"]
    assert len(periodic) >= 3
    assert [r.checkpoint_id for r in run.history] == list(range(1, len(run.history) + 1))
    # one per interval: consecutive completions are at least 50 ms of processing time apart
    assert all(b.completed_ms - a.completed_ms >= 50 for a, b in zip(periodic, periodic[1:]))
    assert run.history[-1].kind == "final"


def test_a_completed_checkpoint_records_every_split_position_and_operator_state(tmp_path: Path) -> None:
    run = prepared(build_job(str(tmp_path), EVENTS, mode=CheckpointingMode.EXACTLY_ONCE, retained=3))
    seen = []

    original = run.on_checkpoint_completed

    def spy(job, checkpoint_id, first_task, final=False):
        if first_task and not final:
            seen.append(run.store.get_latest_checkpoint())
        original(job, checkpoint_id, first_task, final)

    run.on_checkpoint_completed = spy  # type: ignore[method-assign]
    run.run()
    assert seen
    checkpoint = seen[0]
    # named <source uid>/<split id>: split ids are unique within their source only
    (source_uid,) = {key.split("/", 1)[0] for key in checkpoint.source_positions}
    assert set(checkpoint.source_positions) == {f"{source_uid}/collection-{k}" for k in range(3)}
    assert all(isinstance(o, int) and o > 0 for o in checkpoint.source_positions.values())
    operator_ids = set(checkpoint.operator_states())
    assert sum(1 for uid in operator_ids if "Window" in uid or "window" in uid.lower()) >= 2
    assert sum(1 for uid in operator_ids if uid.endswith(".valve")) >= 1
    assert sum(1 for uid in operator_ids if uid.endswith(".watermarks")) == 1


def test_sinks_publish_nothing_before_a_checkpoint_completes(tmp_path: Path) -> None:
    out = str(tmp_path)
    run = prepared(build_job(out, EVENTS, mode=CheckpointingMode.EXACTLY_ONCE, interval_ms=10_000_000))
    published_at_first_completion = []

    original = run.on_checkpoint_completed

    def spy(job, checkpoint_id, first_task, final=False):
        if first_task:
            published_at_first_completion.append(len(read_committed(out + "/tumbling")))
        original(job, checkpoint_id, first_task, final)

    run.on_checkpoint_completed = spy  # type: ignore[method-assign]
    run.run()
    # the interval never elapsed: only the final checkpoint completed, and nothing was visible before it
    assert [r.kind for r in run.history] == ["final"]
    assert published_at_first_completion == [0]
    assert len(committed(out)) > 0


def test_without_checkpointing_two_phase_sinks_commit_at_end_of_input(tmp_path: Path) -> None:
    build_job(str(tmp_path), EVENTS).execute("no checkpoints")
    assert len(read_committed(str(tmp_path) + "/sessions")) > 0
