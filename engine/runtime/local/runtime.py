"""The local runtime: a pipelined mini-cluster in one process (ARCHITECTURE section 3).

Every vertex of the physical plan runs as ``parallelism`` subtasks; subtasks are
connected by channels carrying stream elements and are driven by a cooperative,
single-threaded scheduler.  Single-threaded is deliberate: the operator layer
knows nothing of threads, every interleaving is reproducible from the
scheduler's order, and the GIL would serialize threads anyway.  Backpressure is
real: a task whose output channels are full is not scheduled.

With checkpointing enabled (seeds 001-003) a :class:`LocalJob` attempt also runs
a CheckpointCoordinator on the same thread (timers on :class:`~engine.checkpointing.scheduler.ClockScheduler`),
source tasks inject barriers at their current split offsets, stream tasks feed
their input through the barrier handler the configuration selects, snapshots are
uploaded on a small thread pool and acknowledged through the :class:`Mailbox`.
A failed attempt is restarted by :class:`~engine.runtime.local.job_run.JobRun`
from the latest completed checkpoint.  An attempt's subtasks are built and restored
by :class:`~engine.runtime.local.subtask_builder.SubtaskBuilder`; this module runs
them (the scheduling loop) and carries their checkpoint plumbing.

Supported: sources with per-split watermarks, chains of map/filter/flat_map,
key_by repartitioning by key group, union, window operators (keyed and
window_all), KeyedStream.process and rolling keyed aggregates (engine/operators/keyed_process.py),
connect with co-functions and broadcast state (engine/operators/co_functions.py, broadcast_process.py),
side outputs, sinks (two-phase commit), execute_and_collect, dead letters, checkpoints, savepoints,
restarts, rescaling on restore.
Partial: processing-time timers fire as the injected clock advances between
scheduling rounds; at the end of bounded input pending processing-time timers
are not fired (Flink's behaviour).  Once any source task has finished no further
periodic checkpoint is triggered (seed 001 pre-check "all tasks running"); the
job's final checkpoint then commits the sinks.
"""

from __future__ import annotations

import functools
import gc
import threading
import time
from contextlib import contextmanager
from typing import Any, Iterator

from engine.checkpointing.channel_state import InMemoryChannelStateWriter
from engine.checkpointing.completed_checkpoint import CompletedCheckpoint
from engine.checkpointing.coordinator import CheckpointCoordinator
from engine.checkpointing.properties import CheckpointProperties
from engine.checkpointing.scheduler import ClockScheduler
from engine.checkpointing.subtask_checkpoint_coordinator import SubtaskCheckpointCoordinator
from engine.checkpointing.task_state import TaskSnapshot
from engine.elements import MIN_WATERMARK, CheckpointType
from engine.errors import IllegalStateError, JobDefinitionError
from engine.graph.plan import PhysicalPlan
from engine.graph.transformations import Transformation
from engine.operators.base import Metrics
from engine.operators.simple import CollectOperator, SinkOperator
from engine.runtime.restore import RestorePoint
from engine.runtime.local.checkpointing import LocalTaskGateway, Mailbox
from engine.runtime.local.faults import FaultKind
from engine.runtime.local.job_client import LocalJobClient
from engine.runtime.local.job_run import JobRun, JobStopped
from engine.runtime.local.subtask_builder import CollectSinkNode, SubtaskBuilder
from engine.runtime.local.tasks import SourceTask, StreamTask, Subtask
from engine.runtime.operator_metrics import operator_entry, smallest_watermark, vertex_key

DEFAULT_BUNDLE_SIZE = 1024
DEFAULT_CHANNEL_CAPACITY = 64

#: an idle unbounded job polls its sources with a sleep doubling from MIN to MAX; new data, a due
#: processing-time timer or checkpoint waits at most MAX for the loop to notice it
_IDLE_SLEEP_MIN_S = 0.001
_IDLE_SLEEP_MAX_S = 0.02

_gc_lock = threading.Lock()
_gc_jobs = 0
_gc_saved_thresholds: tuple[int, int, int] | None = None
#: while a job runs: young collections every 50k allocations, full ones (which walk all keyed state,
#: timers and window contents) at most every 50 x 1000 young ones; nearly all garbage of a job is freed
#: by reference counting, and a full collection over millions of live state entries cost about as
#: much CPU as the job itself (bench/bench_local.py, sliding windows)
_JOB_GC_THRESHOLDS = (50_000, 50, 1000)


@contextmanager
def _infrequent_full_gc() -> Iterator[None]:
    """Raise the cyclic GC's thresholds while any local job runs in this process; restore them after the last."""
    global _gc_jobs, _gc_saved_thresholds
    with _gc_lock:
        if _gc_jobs == 0:
            _gc_saved_thresholds = gc.get_threshold()
            gc.set_threshold(*(max(a, b) for a, b in zip(_gc_saved_thresholds, _JOB_GC_THRESHOLDS)))
        _gc_jobs += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_jobs -= 1
            if _gc_jobs == 0 and _gc_saved_thresholds is not None:
                gc.set_threshold(*_gc_saved_thresholds)
                _gc_saved_thresholds = None


class LocalRuntime:
    def __init__(self, env: Any) -> None:
        self.env = env
        opts = env.get_runtime_options()
        self.bundle_size = int(opts.get("bundle_size", DEFAULT_BUNDLE_SIZE))
        self.channel_capacity = int(opts.get("channel_capacity", DEFAULT_CHANNEL_CAPACITY))
        if self.bundle_size < 1:
            raise JobDefinitionError("bundle_size", self.bundle_size, "must be >= 1")
        #: advance a ManualClock by this much per scheduling round (deterministic checkpoint intervals in tests)
        self.clock_step_ms = int(opts.get("clock_step_ms", 0))
        #: records a stream task processes per scheduling step (a small value makes consumers lag: in-flight data)
        self.task_budget = int(opts.get("task_budget", self.bundle_size * 4))
        epoch_records = opts.get("epoch_records")
        if epoch_records is not None and (isinstance(epoch_records, bool) or not isinstance(epoch_records, int)
                                          or epoch_records < 1):
            raise JobDefinitionError("epoch_records", epoch_records, "must be an int >= 1 (offsets per split per epoch)")
        #: epoch mode: the Spark runtime's watermark cadence on the local runtime (see SourceTask.epoch_records)
        self.epoch_records: int | None = epoch_records
        self.fault_plan = opts.get("fault_plan")
        #: finish each round's uploads before the next round, so the number of checkpoints per run does not
        #: depend on thread scheduling or storage speed (the asynchronous part still runs on the writer pool);
        #: on by default with simulated time (clock_step_ms), where runs are meant to be exact
        self.wait_for_uploads = bool(opts.get("wait_for_uploads", self.clock_step_ms > 0))
        self.from_savepoint = opts.get("from_savepoint")

    def _prepare(self, job_name: str, sinks: list[Transformation], collect: list[Transformation],
                 from_savepoint: str | None = None) -> Any:
        collected: dict[int, list[Any]] = {}
        roots: list[Transformation] = list(sinks)
        for node in collect:
            target: list[Any] = []
            collected[node.id] = target
            # non-parallel, as Flink's collect sink: a non-parallel stream (window_all) arrives in its order
            roots.append(CollectSinkNode(name="Collect", inputs=[node], sink=target, parallelism=1))
        return JobRun(self, job_name, roots, collected, from_savepoint or self.from_savepoint, new_attempt=LocalJob)

    def execute(self, job_name: str, sinks: list[Transformation], collect: list[Transformation],
                from_savepoint: str | None = None) -> Any:
        """Run to the end in this thread (restarts included) and return the JobExecutionResult."""
        return self._prepare(job_name, sinks, collect, from_savepoint).run()

    def submit(self, job_name: str, sinks: list[Transformation], collect: list[Transformation] = (),  # type: ignore[assignment]
               from_savepoint: str | None = None) -> Any:
        """Start the job on its own scheduler thread and return its control handle (LocalJobClient)."""
        client = LocalJobClient(self._prepare(job_name, sinks, list(collect), from_savepoint))
        client.start()
        return client


class LocalJob:
    """One execution attempt of a plan, optionally restoring from ``restore``."""

    def __init__(self, run: Any, plan: PhysicalPlan, restore: RestorePoint | None) -> None:
        self.run_ = run
        self.runtime = run.runtime
        self.env = run.env
        self.plan = plan
        self.job_name = run.job_name
        self.job_id = run.job_id
        self.clock = run.clock
        self.restore = restore
        self.dead_letters = run.dead_letters
        self.failure: BaseException | None = None
        self.stop_requested: str | None = None  # "cancel" | "savepoint"
        self.checkpointing = run.checkpointing_enabled
        self.batch = run.batch
        self.config = self.env.get_checkpoint_config()
        self.mailbox = Mailbox()
        self.outstanding_uploads = 0
        #: tasks whose end the coordinator was told of (engine/checkpointing/coordinator.py report_task_finished)
        self._reported_finished: set[str] = set()
        if self.checkpointing:
            self.scheduler = ClockScheduler(self.clock)
            self.gateway = LocalTaskGateway(self)
        builder = SubtaskBuilder(self)
        self.tasks: list[Subtask] = builder.build()
        self.subtask_metrics: list[Metrics] = builder.subtask_metrics
        self.task_by_id: dict[str, Subtask] = {task.task_id: task for task in self.tasks}
        if run.adapter.has_fence():
            for task in self.tasks:
                task.fence_check = run.adapter.check_fence
        if self.checkpointing:
            self.coordinator = CheckpointCoordinator(
                self.job_id, self.config, self.gateway, run.store, run.counter, run.adapter.discarder,
                self.clock, self.scheduler, self._fail)

    def _fail(self, exc: BaseException) -> None:
        if self.failure is None:
            self.failure = exc

    # -- dead letters and metrics ----------------------------------------------------------------
    def dead_letter(self, value: Any, error: BaseException, stage: str) -> None:
        self.dead_letters.append({"value": value, "error": f"{type(error).__name__}: {error}", "stage": stage})

    def metrics(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for m in self.subtask_metrics:
            for k, v in list(m.counters.items()):  # a snapshot: the control API reads while the scheduler counts
                total[k] = total.get(k, 0) + v
        total["num_dead_letter_records"] = self.dead_letters.total  # the run's, also those no longer kept
        return total

    def records_read(self) -> int:
        return sum(t.records_read for t in self.tasks if isinstance(t, SourceTask))

    def split_watermarks(self) -> dict[str, dict[str, Any]]:
        """Each unfinished split's watermark and idleness, by split id (see JobStatusReport.splits)."""
        out: dict[str, dict[str, Any]] = {}
        for task in self.tasks:
            stage = getattr(task, "stage", None) if isinstance(task, SourceTask) else None
            if stage is not None and hasattr(stage, "split_watermarks"):
                for split_id, (watermark, idle) in stage.split_watermarks().items():
                    out[str(split_id)] = {"watermark_ms": watermark, "idle": idle}
        return out

    def records_written(self) -> int:
        return sum(op.records_written for t in self.tasks for op in t.operators if isinstance(op, SinkOperator))

    def operator_metrics(self) -> dict[str, dict[str, Any]]:
        """Each vertex's records in and out and input watermark, per subtask (engine/runtime/operator_metrics.py).

        Read from another thread while the scheduler runs: every figure is an int the scheduler replaces."""
        by_vertex: dict[int, list[Subtask]] = {}
        for task in self.tasks:
            by_vertex.setdefault(task.vertex.id, []).append(task)
        out: dict[str, dict[str, Any]] = {}
        for v in self.plan.vertices:
            subtasks = []
            for index, task in enumerate(by_vertex.get(v.id, ())):
                if isinstance(task, SourceTask):
                    records_in, mark = task.records_read, task.stage.current_watermark
                else:
                    records_in, mark = task.records_in, task.valve.last_output_watermark  # type: ignore[attr-defined]
                records_out = sum(w.records_sent for w in task.writers()) + sum(
                    op.records_written for op in task.operators if isinstance(op, (SinkOperator, CollectOperator)))
                subtasks.append({"index": index, "records_in": records_in, "records_out": records_out,
                                 "watermark_ms": mark if mark > MIN_WATERMARK else None})
            out[vertex_key(v)] = operator_entry(
                v, sum(s["records_in"] for s in subtasks), sum(s["records_out"] for s in subtasks),
                smallest_watermark(s["watermark_ms"] for s in subtasks) if all(
                    s["watermark_ms"] is not None for s in subtasks) else None, subtasks)
        return out

    def current_watermark(self) -> int:
        marks = [t.valve.last_output_watermark for t in self.tasks if isinstance(t, StreamTask)]
        return min(marks) if marks else MIN_WATERMARK

    # -- checkpointing ---------------------------------------------------------------------------
    def subtask_coordinator(self, task_id: str, task: Subtask, state_ops: dict[str, Any],
                             writer: InMemoryChannelStateWriter | None, positions: Any) -> SubtaskCheckpointCoordinator:
        return SubtaskCheckpointCoordinator(
            task_id, state_ops, task.broadcast, self._async_writer(task_id), self._acknowledge, self._decline,
            self.clock, channel_state_writer=writer, source_positions=positions)

    def _async_writer(self, task_id: str) -> Any:
        run, mailbox, faults = self.run_, self.mailbox, self.runtime.fault_plan

        def async_writer(checkpoint_id: int, snapshot: TaskSnapshot, on_done: Any, on_error: Any) -> None:
            self.outstanding_uploads += 1

            def upload() -> None:
                try:
                    if faults is not None:
                        faults.fire(FaultKind.UPLOAD_ERROR, checkpoint_id)
                    result = run.adapter.write_task_state(task_id, snapshot)
                except BaseException as exc:  # noqa: BLE001 - becomes a decline on the scheduler thread
                    # bind the error now: Python unbinds ``exc`` when the except block ends, and a lambda that
                    # read it later raised NameError instead of declining with the real cause
                    mailbox.post(functools.partial(self._settle, functools.partial(on_error, exc)))
                    return

                def acknowledge() -> None:
                    if faults is not None:
                        faults.fire(FaultKind.BEFORE_ACK, checkpoint_id)  # the attempt dies before the ack
                    on_done(result)

                mailbox.post(lambda: self._settle(acknowledge))

            run.executor.submit(upload)

        return async_writer

    def _settle(self, action: Any) -> None:
        self.outstanding_uploads -= 1
        action()

    def _acknowledge(self, task_id: str, checkpoint_id: int, state: Any, metrics: Any) -> None:
        self.run_.record_task_metrics(checkpoint_id, metrics)
        self.coordinator.receive_acknowledge_message(self.job_id, task_id, checkpoint_id, state, metrics)

    def _decline(self, task_id: str, checkpoint_id: int, reason: Any, cause: Any) -> None:
        self.coordinator.receive_decline_message(self.job_id, task_id, checkpoint_id, reason, cause)

    def inject_barriers(self, task: SourceTask) -> None:
        """Barrier n goes out between two bundles, so Sn is the split offsets right now (seed 002)."""
        while task.pending_triggers and not task.finished:
            checkpoint_id, timestamp_ms, options = task.pending_triggers.pop(0)
            if options.checkpoint_type is CheckpointType.SAVEPOINT_TERMINATE:
                task._emit(task.stage.end_of_input())  # drain: MAX_WATERMARK fires every window first
                task.flush()
            task.checkpointing.trigger_checkpoint(checkpoint_id, timestamp_ms, options)
            if options.checkpoint_type.is_synchronous():
                task.suspended = True  # stop-with-savepoint: no data after the savepoint barrier

    def notify_complete(self, task_id: str, checkpoint_id: int) -> None:
        """Gateway: checkpoint n completed; the first notification of n is where BEFORE_COMMIT faults fire."""
        self.run_.on_checkpoint_completed(self, checkpoint_id, first_task=task_id == self.tasks[0].task_id)
        self.task_by_id[task_id].checkpointing.notify_checkpoint_complete(checkpoint_id)

    def final_checkpoint(self) -> None:
        """All input consumed: one last checkpoint holding the sinks' final transactions and the end offsets.

        Committing at end of input only after this checkpoint is in the store means a
        crash while sinks commit restores from it (sinks re-commit, nothing is replayed),
        never from an older one whose records were already published."""
        run = self.run_
        checkpoint_id = run.counter.get_and_increment()
        now = self.clock.now_ms()
        states = {}
        for task in self.tasks:
            # every operator's final state, not only the sinks': a restore of this checkpoint (on either runtime)
            # must find the job's operators, whose windows have all fired by now
            if task.checkpointing is not None:
                ops = task.checkpointing.state_operators
            else:
                ops = {op.context.operator_id: op for op in task.operators
                       if isinstance(op, SinkOperator) and op.is_two_phase_commit}
            positions = task.split_positions() if isinstance(task, SourceTask) else {}
            if ops or positions:
                snapshot = TaskSnapshot(checkpoint_id, now, {u: op.snapshot_state(checkpoint_id) for u, op in ops.items()},
                                        positions)
                states[task.task_id] = run.adapter.write_task_state(task.task_id, snapshot)
        completed = CompletedCheckpoint(
            self.job_id, checkpoint_id, now, now,
            CheckpointProperties.for_checkpoint(self.config.get_externalized_checkpoint_retention()), states)
        run.store.add_checkpoint_and_subsume_oldest(completed)
        run.on_checkpoint_completed(self, checkpoint_id, first_task=True, final=True)
        for task in self.tasks:
            for op in task.operators:
                if isinstance(op, SinkOperator):
                    op.notify_checkpoint_complete(checkpoint_id)

    # -- running ---------------------------------------------------------------------------------
    def run(self) -> None:
        with _infrequent_full_gc():
            self._run()

    def _run(self) -> None:
        budget = self.runtime.task_budget
        source_budget = self.runtime.bundle_size
        run, faults = self.run_, self.runtime.fault_plan
        step_ms = self.runtime.clock_step_ms
        advance = getattr(self.clock, "advance", None) if step_ms > 0 else None
        if self.checkpointing:
            self.coordinator.start_checkpoint_scheduler()
        order = list(reversed(self.tasks))  # downstream first so channels drain before producers refill them
        if self.runtime.epoch_records is not None:
            for task in self.tasks:
                if isinstance(task, SourceTask):
                    task.epoch_records = self.runtime.epoch_records
                    task.start_epoch()
        threshold = faults.next_record_threshold() if faults is not None else None
        idle_s = _IDLE_SLEEP_MIN_S
        while True:
            run.control.drain()
            if self.failure is not None:
                raise self.failure
            if self.stop_requested is not None:
                raise JobStopped(self.stop_requested)
            progressed = False
            for task in order:
                if task.runnable():
                    task.step(source_budget if task.is_source_task else budget)
                    progressed = progressed or not getattr(task, "starved", False)
            if progressed:
                idle_s = _IDLE_SLEEP_MIN_S
            if self.checkpointing:
                self._report_finished_tasks()
            if threshold is not None and run.records_before_attempt + self.records_read() >= threshold:
                faults.fire(FaultKind.RECORDS, run.records_before_attempt + self.records_read())
                threshold = faults.next_record_threshold()
            self.mailbox.drain()
            while self.runtime.wait_for_uploads and self.outstanding_uploads and self.failure is None:
                self.mailbox.drain(timeout_s=0.05)
            if advance is not None:
                advance(step_ms)
            now = self.clock.now_ms()
            for task in self.tasks:
                if not task.finished:
                    task.advance_processing_time(now)
            if self.checkpointing:
                self.scheduler.run_due()
            if self.failure is not None:
                raise self.failure
            if all(t.finished for t in self.tasks):
                if self.checkpointing:
                    if self.outstanding_uploads or self.coordinator.get_number_of_pending_checkpoints():
                        self.mailbox.drain(timeout_s=0.002)
                        continue
                    self.final_checkpoint()
                return
            if self.runtime.epoch_records is not None and self._epoch_quiescent():
                sources = [t for t in self.tasks if isinstance(t, SourceTask) and not t.finished]
                holding = [t for t in sources if t.holding()]
                if holding:  # W(n) of every subtask at once, after all of epoch n's records (SourceTask.holding)
                    for task in holding:
                        task.release_epoch()
                    continue
                if not any(t.pending_triggers for t in sources):
                    for task in sources:
                        task.start_epoch()
                    continue
            if not progressed:
                if self.checkpointing and (self.outstanding_uploads or self.coordinator.get_number_of_pending_checkpoints()
                                           or any(t.suspended for t in self.tasks)):
                    self.mailbox.drain(timeout_s=0.002)
                    continue
                if any(isinstance(t, SourceTask) and not t.finished and (t.starved or not t.bounded)
                       for t in self.tasks):
                    # a source has nothing right now (an unbounded one waiting for data, or any split in an idle
                    # stretch, which the SplitReader contract allows): back off so an idle job costs ~1% of a
                    # core, not a busy poll that takes the GIL from everything else in the process
                    time.sleep(idle_s)
                    idle_s = min(idle_s * 2, _IDLE_SLEEP_MAX_S)
                    continue
                stuck = [t.name for t in self.tasks if not t.finished]
                raise IllegalStateError(f"Bug: local runtime made no progress; unfinished tasks: {stuck}")

    def _report_finished_tasks(self) -> None:
        """Checkpoints go on after a task finished (FLIP-147): pending ones take its final state at once."""
        for task in self.tasks:
            if task.finished and task.task_id not in self._reported_finished:
                self._reported_finished.add(task.task_id)
                self.coordinator.report_task_finished(task.task_id)

    def _epoch_quiescent(self) -> bool:
        """Every source parked at its epoch end (or finished) and nothing left to process downstream (a checkpoint
        trigger may wait at a source: it goes in once the epoch's watermarks are released)."""
        sources = [t for t in self.tasks if isinstance(t, SourceTask) and not t.finished]
        if not sources or not all(t.parked for t in sources):
            return False
        return not any(t.runnable() for t in self.tasks if not isinstance(t, SourceTask))

    def end(self, failed: bool) -> None:
        """The attempt is over: no more protocol calls reach its tasks; close every operator."""
        if self.checkpointing:
            self.gateway.enabled = False
            if failed or self.stop_requested:
                self.coordinator.stop_checkpoint_scheduler()
        for task in self.tasks:
            task.close()
