"""Checkpoints and savepoints on Spark: the epoch boundary is barrier n (seed 001/002).

Seed 002's snapshot is the source positions Sn plus each operator's state after exactly the
records before Sn.  On Spark that moment exists for free between two epochs: every record of
epochs 1..n has been processed, nothing of n+1 has been read.  So barrier n *is* the end of an
epoch, aligned by construction; unaligned checkpoints and the barrier-handler settings are
accepted and behave as aligned (ARCHITECTURE section 3; there is no in-flight data to persist).

At a boundary the driver runs the real :class:`CheckpointCoordinator` (engine/checkpointing):

* its periodic timer and queued requests run on :class:`~engine.checkpointing.scheduler.ClockScheduler`, which the job master
  polls between epochs with the job's clock;
* "trigger" asks the source tasks (one per source vertex) to inject barrier n — here it marks n
  to be taken at this boundary;
* every window subtask's state is written **from inside its Spark task** through
  ``checkpoints.CheckpointStorageLocation.write_state_file`` (S3 or file, one file per state
  table per subtask, Parquet with sha256; engine/runtime/spark/state_files.py) and the task returns its
  handles as its acknowledgement row; the driver hands each to ``receive_acknowledge_message``;
  sources acknowledge with Sn, sinks with their two-phase-commit state;
* on completion :class:`StorageCompletedCheckpointStore` (engine/runtime/spark/checkpoint_store.py) writes
  ``_metadata`` last and adds the
  checkpoint to the persistent ``checkpoints.CompletedCheckpointStore`` (N retained, subsumed ones
  deleted); then the coordinator notifies every task, and the sink tasks commit
  (``TwoPhaseCommitDriver.notify_checkpoint_complete``; EXACTLY_ONCE output becomes visible only
  then).  Savepoints go to a self-contained savepoint folder and are never retained or subsumed.

Restore (runtime option ``restore_from``) is engine/runtime/spark/restore.py.  :class:`SparkCheckpointing`
also serves the job's control requests (savepoint, stop with savepoint, cancel) at the epoch boundary, from the
control-request queue both runtimes share (engine/runtime/control.py).

**Window tasks write their state** (runtime option ``snapshot_in_window_tasks``, default True).  A periodic
checkpoint is triggered when an epoch starts (:meth:`SparkCheckpointing.before_epoch`), like Flink's trigger
reaching the sources before they emit barrier n; its barrier is the epoch's end.  The epoch's window tasks
know it, so each writes its subtask's new state files right after its snapshot, in the epoch's own Spark job,
and acknowledges with a ``DEST_STATE_ACK`` row (stages.py ``_emit_state``): no second Spark job reads the state
back.  A keyed vertex whose stage did not run in that epoch (an event-time window neither the watermark nor a
record moved), and every savepoint, still go through the upload job below.  A task's failed write declines the
checkpoint, as a failed upload does.  A checkpoint triggered in an epoch that ends the job is never taken: its
files are deleted.  Measured on bench/bench_spark.py's cells: see the README's "Spark runtime" figures.

Otherwise the upload of window state is the asynchronous part: it runs as its own Spark job on a driver
thread while the next epoch runs, and the tasks' acknowledgements reach the coordinator only once
it finished (savepoints upload synchronously: the caller waits for their URI).  Files are per
subtask and table, not incremental.
"""

from __future__ import annotations

import collections
import json
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Sequence

from engine.checkpointing.checkpoint_id_counter import StandaloneCheckpointIDCounter
from engine.checkpointing.coordinator import CheckpointCoordinator, CheckpointTaskGateway
from engine.checkpointing.job_status import JobStatus
from engine.checkpointing.scheduler import ClockScheduler
from engine.checkpointing.task_state import TaskStateSnapshot
from engine.errors import IllegalStateError, JobDefinitionError
from engine.histories import BoundedHistory, history_limits
from engine.runtime.checkpoint_storage import MetadataBuilder
from engine.runtime.control import ControlQueue, ControlRequest
from engine.runtime.spark.checkpoint_store import (
    RestorableCheckpoint,
    StorageCompletedCheckpointStore,
    StorageDiscarder,
)
from engine.runtime.spark.state_files import (
    ACK_DDL,
    keyless_subtask_ack,
    operator_state_ack,
    window_uid,
    write_state_files,
)

# ---- the coordinator's task gateway ------------------------------------------------------------------


class _Gateway(CheckpointTaskGateway):
    def __init__(self, owner: SparkCheckpointing) -> None:
        self.owner = owner

    def tasks_to_trigger(self) -> Sequence[str]:
        return self.owner.source_tasks

    def tasks_to_acknowledge(self) -> Sequence[str]:
        return self.owner.all_tasks

    def is_task_running(self, task_id: str) -> bool:
        return not self.owner.job.finished

    def trigger_checkpoint(self, task_id: str, checkpoint_id: int, timestamp_ms: int, options: Any) -> None:
        self.owner.triggered.setdefault(checkpoint_id, []).append(task_id)

    def notify_checkpoint_complete(self, task_id: str, checkpoint_id: int, timestamp_ms: int) -> None:
        writer = self.owner.sink_tasks.get(task_id)
        if writer is not None and hasattr(writer, "notify_checkpoint_complete"):
            writer.notify_checkpoint_complete(checkpoint_id)

    def notify_checkpoint_aborted(self, task_id: str, checkpoint_id: int, timestamp_ms: int) -> None:
        # a two-phase-commit sink keeps the handle pending; the next completion commits it.  What the driver
        # kept for the checkpoint is dropped: it will never complete (expired, subsumed, declined)
        self.owner.forget(checkpoint_id)




@dataclass
class _WriteThrough:
    """A checkpoint triggered when an epoch started, whose barrier is that epoch's end: the window tasks of the
    epoch write their state files themselves (the module docstring)."""

    checkpoint_id: int
    location: Any
    #: keyed node ids whose window stages ran with this checkpoint (the others go through the upload job)
    ran: set[int] = field(default_factory=set)
    #: keyed node id -> subtask -> its task's acknowledgement (state_files.py ``write_subtask_state``)
    acks: dict[int, dict[int, dict[str, Any]]] = field(default_factory=dict)
    #: the tasks' failed writes, as "uid#subtask: error"
    errors: list[str] = field(default_factory=list)
    #: the longest a task took to write its files
    write_ms: int = 0


@dataclass
class _Upload:
    """A checkpoint whose window state is being written: its other acks wait with it (see ``_snapshot``)."""

    checkpoint_id: int
    acks: dict[str, Any]
    future: Future
    started: float
    finished: float | None = None
    #: ms the window tasks spent writing their state files in the barrier's epoch (write-through)
    task_write_ms: int = 0


# ---- the job master's checkpointing ------------------------------------------------------------------------


class SparkCheckpointing:
    """Everything checkpoint-related the job master does at epoch boundaries; also serves control requests."""

    def __init__(self, job: Any) -> None:
        self.job = job
        env = job.env
        self.config = env.get_checkpoint_config()
        self.storage_options = job.runtime.storage_options
        max_history, _ = history_limits(env.get_runtime_options())
        #: the newest completed checkpoints and savepoints, oldest first (engine/histories.py)
        self.history: BoundedHistory[dict[str, Any]] = BoundedHistory(max_history)
        #: completed checkpoints (not savepoints) of this attempt, exact
        self.num_completed = 0
        #: bytes per operator uid of the newest completed checkpoint or savepoint (sluice_state_size_bytes)
        self.last_operator_sizes: dict[str, int] = {}
        #: this attempt's completed checkpoints that storage retains, oldest first: what a restart may restore
        self.retained: collections.deque[RestorableCheckpoint] = collections.deque(
            maxlen=max(1, self.config.get_num_retained_checkpoints()))
        #: savepoint id -> its folder URI, until take_savepoint returns it
        self.savepoint_uris: dict[int, str] = {}
        self.locations: dict[int, Any] = {}
        self.triggered: dict[int, list[str]] = {}
        #: set by every control request: wakes an epoch loop waiting out ``epoch_interval_ms``
        self.request_arrived = threading.Event()
        #: savepoint, stop and cancel requests, served at epoch boundaries (engine/runtime/control.py)
        self.control = ControlQueue(wake=self.request_arrived.set)
        #: checkpoints whose state upload overlaps the following epochs, oldest first
        self.uploads: list[_Upload] = []
        #: checkpoint id -> the driver's state at its barrier (watermark, valve, split generators)
        self.boundaries: dict[int, dict[str, Any]] = {}
        #: checkpoint id -> ms from its barrier until every state file was written (the asynchronous part)
        self.upload_ms: dict[int, int] = {}
        #: checkpoint id -> SparkJob.output_marks() at its barrier (moved into ``retained`` on completion)
        self.output_marks: dict[int, dict[str, Any]] = {}
        self._executor: Any = None
        self.async_uploads = bool(job.runtime.async_snapshots)
        #: runtime option ``snapshot_in_window_tasks``: periodic checkpoints triggered at epoch starts, written by the
        #: window tasks of that epoch
        self.in_tasks = bool(getattr(job.runtime, "snapshot_in_window_tasks", True))
        #: the checkpoint whose barrier ends the running epoch, when its window tasks write its state
        self.write_through: _WriteThrough | None = None
        self.stopped = False
        self.cancelled = False
        self.ended = False
        #: properties of the newest checkpoint or savepoint this attempt completed (retention at the run's end)
        self.latest_properties: Any = None
        #: False for an attempt of a SparkJobRun, which applies the retention once, when the whole run ends
        self.applies_retention_at_end = True
        self.failure: BaseException | None = None
        self.source_tasks = [f"source-{v.id}" for v in job.sources]
        self.window_tasks = {
            f"{window_uid(v)}#{i}": (v, i) for v in job.windows for i in range(v.parallelism)}
        self.sink_tasks = {f"sink-{nid}": w for nid, w in job.sink_writers.items()}
        self.all_tasks = [*self.source_tasks, *self.window_tasks, *self.sink_tasks]
        self.storage_dir = self.config.get_checkpoint_storage_dir()
        #: the _metadata builder both runtimes share (engine/runtime/checkpoint_storage.py)
        self.metadata_builder = MetadataBuilder(job.job_id, job.job_name, job.max_parallelism,
                                                [n for v in job.plan.vertices for n in v.nodes])
        self.coordinator: CheckpointCoordinator | None = None
        self.storage = None
        if self.storage_dir is not None:
            from checkpoints import CheckpointStorage
            from checkpoints import RetainedCheckpointStore as PersistentStore

            self.storage = CheckpointStorage(self._open(self.storage_dir), job.job_id)
            retained = self.config.get_num_retained_checkpoints()
            persistent = PersistentStore(self.storage, retained=retained, fence=env.get_runtime_options().get("fence"))
            persistent.recover()
            if job.restore_from:
                persistent.keep_restore_source(job.restore_from)
            self.scheduler = ClockScheduler(job.clock)
            self.store = StorageCompletedCheckpointStore(self, persistent, retained)
            self.coordinator = CheckpointCoordinator(
                job.job_id, self.config, _Gateway(self), self.store, StandaloneCheckpointIDCounter(),
                StorageDiscarder(self), job.clock, self.scheduler, self._fail)
        elif self.config.is_checkpointing_enabled():
            raise JobDefinitionError(
                "checkpoint_storage_dir", None, "must be set to checkpoint on Spark",
                "env.get_checkpoint_config().set_checkpoint_storage_dir('s3://bucket/prefix' or 'file:///path')")

    def _open(self, uri: str) -> Any:
        from checkpoints import open_store

        return open_store(uri, **self.storage_options) if uri.startswith(("s3://", "s3a://")) else open_store(uri)

    def _fail(self, error: BaseException) -> None:
        self.failure = error

    def completed_ids(self) -> list[int]:
        """Ids of the completed checkpoints the history still holds, oldest first."""
        return [h["checkpoint_id"] for h in self.history if not h["savepoint"]]

    def forget(self, checkpoint_id: int) -> None:
        """Drop what the driver kept for a checkpoint that will never complete."""
        self.output_marks.pop(checkpoint_id, None)
        self.boundaries.pop(checkpoint_id, None)
        self.upload_ms.pop(checkpoint_id, None)

    # ---- epoch hooks ---------------------------------------------------------------------------------------
    def before_epoch(self) -> bool:
        """Serve control requests; True when the job must stop now."""
        if self.coordinator is not None and self.job.epoch == 0 and self.config.is_checkpointing_enabled() \
                and not self.coordinator.is_periodic_checkpointing_started():
            self.coordinator.start_checkpoint_scheduler()
        self._serve_requests()
        if self.stopped or self.cancelled:
            return True
        if self.in_tasks and self.coordinator is not None and not self.job.finished:
            self.scheduler.run_due()  # barrier n is the end of the epoch that starts now (module docstring)
            self._prepare_write_through()
        return False

    def after_epoch(self) -> None:
        if self.coordinator is not None:
            self.collect_uploads()
        if self.failure is not None:
            self._drop_write_through()
            raise self.failure
        if self.coordinator is not None and not self.job.finished:
            if not self.in_tasks:
                self.scheduler.run_due()
            self._take_triggered()
        self._drop_write_through()  # not taken: the job ended in this epoch, or the checkpoint expired
        self._serve_requests()

    # ---- window tasks write their state (the module docstring) ---------------------------------------------
    def _prepare_write_through(self) -> None:
        """A checkpoint just triggered has its barrier at the end of the epoch about to run: give its location to
        that epoch's window tasks (:meth:`checkpoint_for_windows`)."""
        from checkpoints.errors import LeaseNotHeld

        if self.write_through is not None or not self.triggered:
            return
        checkpoint_id = min(self.triggered)
        pending = self.coordinator.get_pending_checkpoints().get(checkpoint_id)
        if pending is None or pending.properties.is_savepoint():
            return
        try:  # a fenced master's tasks could write into the new holder's chk-<id>
            self.store.persistent.check_fence(f"write the state files of checkpoint {checkpoint_id}")
        except LeaseNotHeld:
            return  # the barrier's upload path checks again and declines the checkpoint
        location = self._location(checkpoint_id, pending)
        self.locations[checkpoint_id] = location
        self.write_through = _WriteThrough(checkpoint_id, location)

    def checkpoint_for_windows(self, vertices: list[Any]) -> tuple[Any, int] | None:
        """(location, checkpoint id) for window stages about to run whose epoch ends at a checkpoint's barrier, or
        None; the vertices are recorded as writing their own state."""
        wt = self.write_through
        if wt is None:
            return None
        wt.ran.update(v.head.id for v in vertices)
        return wt.location, wt.checkpoint_id

    def receive_state_ack(self, node_id: int, doc: dict[str, Any]) -> None:
        """A window task's ``DEST_STATE_ACK`` row: its files are written (or its write failed)."""
        wt = self.write_through
        if wt is None or doc.get("checkpoint_id") != wt.checkpoint_id:
            raise IllegalStateError(f"Bug: a state acknowledgement for checkpoint {doc.get('checkpoint_id')} while "
                                    f"{None if wt is None else wt.checkpoint_id} is being written")
        if "error" in doc:
            wt.errors.append(f"{doc.get('operator', node_id)}#{doc['subtask']}: {doc['error']}")
            return
        ack = doc["ack"]
        wt.acks.setdefault(node_id, {})[int(ack["subtask"])] = ack
        wt.write_ms = max(wt.write_ms, int(doc.get("write_ms", 0)))

    def _drop_write_through(self) -> None:
        """A write-through checkpoint that will not be taken: delete what its tasks wrote."""
        wt = self.write_through
        if wt is None:
            return
        self.write_through = None
        if wt.ran:
            self._discard_location(wt.checkpoint_id, "untaken")
        else:
            self.locations.pop(wt.checkpoint_id, None)

    def _discard_location(self, checkpoint_id: int, what: str) -> None:
        """Delete what was written for checkpoint ``checkpoint_id``, which will never complete (``what``: why, for the
        log).  Never a folder holding a ``_metadata`` (``CheckpointStorageLocation.discard``)."""
        location = self.locations.pop(checkpoint_id, None)
        if location is None:
            return
        if not location.is_savepoint:
            from checkpoints.errors import LeaseNotHeld

            try:  # a fenced master deletes nothing: chk-<id> may be the new holder's checkpoint in progress
                self.store.persistent.check_fence(f"discard {what} checkpoint {checkpoint_id}")
            except LeaseNotHeld:
                return
        location.discard()

    def release_upload_thread(self) -> None:
        """After uploads were collected: stop the upload thread (a later upload starts a new one).  A run that
        stops without ending the job (``max_epochs``) must not leave the thread behind."""
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

    def on_job_end(self) -> None:
        if self.ended:
            return
        self.ended = True
        job = self.job
        self._drop_write_through()  # triggered in the epoch that ended the job (or failed it): never taken
        if self.coordinator is not None:
            self.collect_uploads(wait=True)  # every checkpoint taken completes (and commits) before the end
        if self._executor is not None:
            self._executor.shutdown(wait=True)
        if job.finished:
            if self.coordinator is not None:  # end-of-input commits count as a last checkpoint: fenced, none
                self.store.persistent.check_fence("commit its sink transactions at end of input")
            final_id = self.coordinator.next_checkpoint_id() if self.coordinator is not None else 1
            for writer in job.sink_writers.values():
                if hasattr(writer, "finish"):
                    writer.finish(final_id)  # end of bounded input: commit, as a last checkpoint would
        elif self.cancelled:
            for writer in job.sink_writers.values():
                if hasattr(writer, "abort_current"):
                    writer.abort_current()
        if self.coordinator is not None:  # a stop-with-savepoint ends FINISHED, as in Flink and on the local runtime
            self.coordinator.shutdown(JobStatus.FINISHED if job.finished or self.stopped
                                      else JobStatus.CANCELED if self.cancelled else JobStatus.FAILED)
        job_name = job.job_name

        def refuse(request: ControlRequest) -> None:
            request.future.set_exception(IllegalStateError(f"job {job_name!r} has ended; its {request.kind} request "
                                                           "did not run"))

        self.control.close(refuse)  # what is queued, and any request that comes later, is refused, not left waiting

    def apply_retention(self, job_status: JobStatus, latest: Any) -> None:
        """The whole run ended in ``job_status``: delete the retained checkpoints if the job's
        ExternalizedCheckpointRetention says so (``deletes_retained_checkpoints_at_end``, the local runtime's rule;
        ``latest``: the properties of the run's newest checkpoint or savepoint)."""
        if self.coordinator is None:
            return
        from engine.runtime.checkpoint_storage_adapter import deletes_retained_checkpoints_at_end

        self.store.persistent.shutdown(delete_checkpoints=deletes_retained_checkpoints_at_end(latest, job_status))

    # ---- control requests ----------------------------------------------------------------------------------
    def submit(self, kind: str, target: str | None = None, drain: bool = False) -> Future:
        """Queue a control request (``savepoint``, ``stop``, ``cancel``) for the next epoch boundary."""
        return self.control.submit(kind, target, drain)

    def _serve_requests(self) -> None:
        self.control.serve(self._serve)

    def _serve(self, r: ControlRequest) -> None:
        self.job.flush_pending()  # a savepoint, a stop or a cancel comes after every epoch read so far
        if r.kind == "cancel":
            self.cancelled = True
            r.future.set_result(None)
        elif r.kind == "savepoint":
            r.future.set_result(self.take_savepoint(r.target))
        elif r.kind == "stop":
            if r.drain:
                self._drain()
            uri = self.take_savepoint(r.target, terminate=True, drain=r.drain)
            self.stopped = True
            r.future.set_result(uri)

    def _drain(self) -> None:
        """stop --drain: end event time (MAX_WATERMARK) so every window fires before the savepoint (Flink)."""
        from engine.elements import MAX_WATERMARK

        job = self.job
        if job.finished or job.watermark == MAX_WATERMARK:
            return
        job.drain_to_max_watermark()

    def take_savepoint(self, target: str | None, terminate: bool = False, drain: bool = False) -> str:
        if self.coordinator is None:
            raise JobDefinitionError(
                "checkpoint_storage_dir", None, "must be set to take savepoints",
                "env.get_checkpoint_config().set_checkpoint_storage_dir(...)")
        self.collect_uploads(wait=True)  # checkpoints taken before the savepoint complete first
        if terminate:
            promise = self.coordinator.trigger_synchronous_savepoint(terminate=drain, target_location=target)
        else:
            promise = self.coordinator.trigger_savepoint(target)
        outcome: dict[str, Any] = {}
        promise.then(lambda value: outcome.setdefault("value", value), lambda error: outcome.setdefault("error", error))
        ids = self._take_triggered()
        if "error" in outcome:
            raise outcome["error"]
        if "value" not in outcome:
            raise IllegalStateError(f"Bug: savepoint {ids} did not complete at the epoch boundary")
        return self.savepoint_uris.pop(outcome["value"].checkpoint_id)

    # ---- taking a checkpoint -------------------------------------------------------------------------------
    def _take_triggered(self) -> list[int]:
        taken = []
        while self.triggered:
            checkpoint_id = min(self.triggered)
            self.triggered.pop(checkpoint_id)
            pending = self.coordinator.get_pending_checkpoints().get(checkpoint_id)
            if pending is None:
                continue
            self._snapshot(checkpoint_id, pending)
            taken.append(checkpoint_id)
        return taken

    def _location(self, checkpoint_id: int, pending: Any) -> Any:
        from checkpoints import CheckpointStorage

        if pending.properties.is_savepoint():
            target = getattr(pending, "target_location", None)
            storage = self.storage if not target else CheckpointStorage(
                self.storage.store, self.job.job_id, savepoint_store=self._open(target))
            return storage.initialize_savepoint_location(checkpoint_id)
        return self.storage.initialize_location(checkpoint_id, known_shared=self.store.persistent.shared_files_in_use())

    def _snapshot(self, checkpoint_id: int, pending: Any) -> None:
        """Barrier n: capture every task's part now; upload window state now (savepoints) or in the background.

        The synchronous part is cheap on Spark: a window vertex's state after epoch n is an immutable,
        locally checkpointed DataFrame (copy-on-write by construction, ARCHITECTURE section 5), sources'
        positions are Sn and sinks pre-commit here.  The asynchronous part — each subtask's Spark task
        writing its files to storage — runs on a driver thread as its own Spark job while the next epoch
        runs; the acknowledgements reach the coordinator only once every file is written
        (:meth:`collect_uploads`), so a checkpoint never completes before its state is in storage.
        """
        job = self.job
        wt = self.write_through if self.write_through is not None \
            and self.write_through.checkpoint_id == checkpoint_id else None
        if wt is not None:
            self.write_through = None
            location = wt.location
        else:
            location = self._location(checkpoint_id, pending)
        self.locations[checkpoint_id] = location
        started = time.monotonic()
        acks: dict[str, Any] = {}
        # the barrier: with pipelined epochs, the moment before the reads still pending (SparkJob.barrier)
        epoch, watermark, splits = job.barrier()
        for task_id in self.source_tasks:
            vid = int(task_id.split("-", 1)[1])
            positions = {sid: s.offset for sid, s in splits.items() if s.vertex == vid}
            acks[task_id] = TaskStateSnapshot({}, positions)
        for task_id, writer in self.sink_tasks.items():
            state = writer.snapshot_state(checkpoint_id) if hasattr(writer, "snapshot_state") else None
            acks[task_id] = TaskStateSnapshot({task_id: state})
        # a vertex whose window tasks wrote their files in the barrier's epoch needs no upload job
        states = [(v, job.state[v.head.id]) for v in job.windows if wt is None or v.head.id not in wt.ran]
        written = [v for v in job.windows if wt is not None and v.head.id in wt.ran]
        self.output_marks[checkpoint_id] = job.output_marks()  # driver memory only, for an in-process restart
        # the driver's part of barrier n, taken now: the checkpoint may complete epochs later
        self.boundaries[checkpoint_id] = {
            "epoch": epoch, "watermark": watermark,
            "splits": {sid: {"watermarks": s.watermarks, "finished": s.finished, "idle": s.idle,
                             "watermark": s.watermark} for sid, s in splits.items()}}
        # ``watermark`` is every keyed operator's at this boundary

        def acknowledged(v: Any, uid: str, i: int, ack: dict[str, Any] | None) -> Any:
            if ack is None or not (ack["files"] or ack["metadata"]["state_rows"]):
                # no key in its key groups: the task wrote nothing; written as a local subtask writes it
                return keyless_subtask_ack(location, v.head, uid, i, v.parallelism, job.max_parallelism,
                                           checkpoint_id, watermark)
            return operator_state_ack(uid, i, ack, v.parallelism, job.max_parallelism)

        def tasks_wrote() -> dict[str, Any]:
            if wt.errors:
                raise IllegalStateError(f"window tasks failed to write checkpoint {checkpoint_id}'s state: "
                                        + "; ".join(wt.errors))
            window_acks: dict[str, Any] = {}
            for v in written:
                uid = window_uid(v)
                acks_of = wt.acks.get(v.head.id, {})
                for i in range(v.parallelism):
                    window_acks[f"{uid}#{i}"] = TaskStateSnapshot({uid: acknowledged(v, uid, i, acks_of.get(i))})
            return window_acks

        def upload() -> dict[str, Any]:
            window_acks: dict[str, Any] = tasks_wrote() if wt is not None else {}
            if not states:
                return window_acks
            if not pending.properties.is_savepoint():  # a fenced master's files could land in the new holder's chk-<id>
                self.store.persistent.check_fence(f"write the state files of checkpoint {checkpoint_id}")
            for v, state in states:
                uid = window_uid(v)
                uploaded: dict[int, dict] = {}
                if state is not None:
                    fn = write_state_files(location, uid, v.parallelism, job.max_parallelism, checkpoint_id, v.head)
                    for subtask, ack in job.frames.collect_over(state, fn, ACK_DDL):
                        uploaded[subtask] = json.loads(ack)
                for i in range(v.parallelism):
                    window_acks[f"{uid}#{i}"] = TaskStateSnapshot({uid: acknowledged(v, uid, i, uploaded.get(i))})
            return window_acks

        if pending.properties.is_savepoint() or not self.async_uploads or not states:
            future: Future = Future()
            try:
                future.set_result(upload())
            except BaseException as exc:  # noqa: BLE001 - declined below, like a failed background upload
                future.set_exception(exc)
        else:
            future = self._uploader().submit(upload)
        upload = _Upload(checkpoint_id, acks, future, started, task_write_ms=wt.write_ms if wt is not None else 0)
        future.add_done_callback(lambda _: setattr(upload, "finished", time.monotonic()))
        self.uploads.append(upload)
        if future.done():
            self.collect_uploads()

    def _uploader(self) -> Any:
        if self._executor is None:
            from concurrent.futures import ThreadPoolExecutor

            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"sluice-upload-{self.job.job_id}")
        return self._executor

    def collect_uploads(self, wait: bool = False) -> None:
        """Acknowledge every checkpoint whose upload finished (all of them with ``wait``), oldest first.

        Runs on the job master's thread (the coordinator is not shared with the upload thread).  A failed
        upload declines its checkpoint; the coordinator's failure manager decides whether the job fails.
        """
        coordinator = self.coordinator
        while self.uploads and (wait or self.uploads[0].future.done()):
            upload = self.uploads.pop(0)
            try:
                window_acks = upload.future.result()
            except BaseException as exc:  # noqa: BLE001 - a failed upload declines the checkpoint
                self.boundaries.pop(upload.checkpoint_id, None)
                coordinator.receive_decline_message(self.job.job_id, next(iter(self.all_tasks)), upload.checkpoint_id,
                                                    cause=exc)
                self._discard_location(upload.checkpoint_id, "declined")  # the files its other tasks wrote
                continue
            self.last_snapshot_ms = upload.task_write_ms + int(
                ((upload.finished or time.monotonic()) - upload.started) * 1000)
            self.upload_ms[upload.checkpoint_id] = self.last_snapshot_ms
            for task_id, state in {**upload.acks, **window_acks}.items():
                coordinator.receive_acknowledge_message(self.job.job_id, task_id, upload.checkpoint_id, state)
