"""The job master: runs one job, serves its control API and publishes its status document.

``sluice run <spec>`` lands here.  A job spec is an import path ``module:function``;
the function receives a StreamExecutionEnvironment (and ``--param`` values as
keyword arguments) and adds the job to it.  If it returns a dict of named
streams instead of adding sinks, each stream is written exactly-once to
``<output>/<name>/`` with ``write_files``.  User code is referenced by import
path and never stored (STYLE section 9).

The master publishes ``_status.json`` under the job's checkpoint storage every
``status_interval_ms`` (heartbeat, state, last completed checkpoint, watermark,
throughput, failures, and the control URL in ``extra``), so supervision —
Airflow's included — works from storage alone, and clients find the control API
through it.

At the same cadence the master samples the job's status into a bounded timeline
(engine/master/timeline.py) that the control API serves as the job view
(``GET /jobs/{job_id}/view``, engine/master/view.py).

Dead letters are written to ``<output>/_dead_letters`` with ``--output``, to the runtime option
``dead_letter_dir`` when given, else to ``<user cache dir>/sluice/dead_letters/<job id>/<run start>``
(engine/local_dirs.py); ``sluice run`` prints the folder when the job wrote any.

Stopped by a signal (engine/master/signals.py), the master suspends its job
(:meth:`JobMaster.suspend`, Flink's JobStatus.SUSPENDED) instead of ending it.
"""

from __future__ import annotations

import dataclasses
import logging
import signal
import threading
import time
from concurrent.futures import Future
from concurrent.futures import wait as wait_for_futures
from typing import Any

from checkpoints.backends import open_store
from checkpoints.desired_state import DesiredState, JobState, write_desired_state
from checkpoints.errors import JobMasterFenced, LeaseNotHeld
from checkpoints.index import fence_index
from checkpoints.lease import LeaseKeeper
from checkpoints.restore import read_snapshot_metadata
from checkpoints.status import SUSPENDED, StatusDocument, Suspension, write_status
from engine.api.environment import StreamExecutionEnvironment
from engine.api.restart import RestartStrategies
from engine.checkpointing.config import ExternalizedCheckpointRetention
from engine.graph.plan import build_plan
from engine.local_dirs import default_dead_letter_dir
from engine.master.api import create_app
from engine.master.config import MasterConfig, build_job
from engine.master.metrics import JobMetrics
from engine.master.operations import OperationRegistry
from engine.master.server import ControlServer
from engine.master.signals import exit_status
from engine.master.timeline import CheckpointFailureLog, JobTimeline
from engine.master.view import JobView, describe_operators
from engine.runtime.handle import stable_job_id
from engine.runtime.spark.session import stop_spark

log = logging.getLogger(__name__)


class JobMaster:
    def __init__(self, config: MasterConfig) -> None:
        self.config = config
        self.operations = OperationRegistry()
        self.client: Any = None
        self.server: ControlServer | None = None
        self._stop_publishing = threading.Event()
        #: one status write at a time: the final one in wait() must not be overwritten by a periodic one in flight
        self._publish_lock = threading.Lock()
        self._lease_done = threading.Event()
        #: the job's lease (checkpoints.lease.LeaseKeeper) while the master runs with storage
        self.lease: Any = None
        #: where this master puts savepoints (--savepoint-dir, else the job's default, else the checkpoint storage)
        self.savepoint_root: str | None = None
        #: why this master was fenced (another master owns the job now); it then writes nothing more
        self.fenced: BaseException | None = None
        #: called once when the master is fenced; the default cancels the job without recording anything.
        #: ``sluice run`` exits the process at once instead.
        self.on_fenced: Any = None
        #: set by suspend(): the signal that stopped this master (checkpoints.status.Suspension)
        self.suspension: Any = None
        #: a signal number set by request_suspend() (a signal handler), acted on by wait()
        self._suspend_requested: int | None = None
        #: monotonic time at which wait() stops waiting for a suspended job to stop
        self._suspend_deadline: float | None = None
        #: the job's ExternalizedCheckpointRetention when stopping it would delete its retained checkpoints
        self._cancel_deletes_checkpoints: str | None = None
        #: the job view (GET /jobs/{job_id}/view), sampled at every status publication
        self.view: JobView | None = None
        self._failure_log: CheckpointFailureLog | None = None
        self.dead_letter_dir: str | None = None

    def _environment(self, job_id: str) -> Any:
        c = self.config
        env = StreamExecutionEnvironment.get_execution_environment()
        env.set_runtime(c.runtime)
        if c.parallelism:
            env.set_parallelism(c.parallelism)
        for key, value in c.runtime_options.items():
            env.set_runtime_option(key, value)
        if "dead_letter_dir" not in c.runtime_options:
            # kept beside the job's output, else in a documented folder of the user's cache dir, never nowhere
            # and never the current directory (engine/local_dirs.py)
            env.set_runtime_option("dead_letter_dir", f"{c.output_dir.rstrip('/')}/_dead_letters" if c.output_dir
                                   else default_dead_letter_dir(job_id))
        #: where the job's dead letters outlive the process
        self.dead_letter_dir = env.get_runtime_options().get("dead_letter_dir")
        env.set_runtime_option("job_id", job_id)
        if c.checkpoint_interval_ms:
            env.enable_checkpointing(c.checkpoint_interval_ms)
            cfg = env.get_checkpoint_config()
            if c.storage_uri:
                cfg.set_checkpoint_storage_dir(c.storage_uri)
            cfg.set_num_retained_checkpoints(c.retained_checkpoints)
            # a supervised job is restarted from its retained checkpoints, so they outlive a cancel or a
            # killed master (Flink's recommended production setting; its default deletes them)
            cfg.set_externalized_checkpoint_retention(ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION)
        build_job(env, c.job_spec, c.params, c.output_dir)
        if c.checkpoint_interval_ms:
            self._fault_tolerance_defaults(env)
            retention = env.get_checkpoint_config().get_externalized_checkpoint_retention()
            if retention is not ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION:  # the job chose it
                self._cancel_deletes_checkpoints = retention.name
        return env

    def _fault_tolerance_defaults(self, env: Any) -> None:
        """Flink's defaults for a checkpointed job where the job chose none: exponential-delay restarts (Flink
        1.19+), and a few tolerable checkpoint failures, so a short storage outage does not end the job."""
        if env.get_restart_strategy() is None and "restart_strategy" not in env.get_runtime_options():
            env.set_restart_strategy(RestartStrategies.exponential_delay_restart())
        cfg = env.get_checkpoint_config()
        if not cfg.is_tolerable_checkpoint_failure_number_set():
            cfg.set_tolerable_checkpoint_failure_number(self.config.tolerable_checkpoint_failures)

    def _acquire_lease(self, job_id: str) -> None:
        """One job, one master: take the job's lease (refused while another master holds it), then fence the
        retained-checkpoints index so a former holder's in-flight writes fail."""
        if not self.config.storage_uri:
            return
        store = open_store(self.config.storage_uri)
        keeper = LeaseKeeper(store, job_id, ttl_ms=self.config.lease_ttl_ms, started_by=self.config.started_by)
        keeper.acquire(wait_s=self.config.lease_wait_s)
        self.lease = keeper
        threading.Thread(target=self._renew_loop, name="sluice-lease", daemon=True).start()
        try:
            fence_index(store, job_id, keeper.holder, keeper.fencing_token, int(time.time() * 1000))
        except BaseException:
            self._end_lease()
            raise

    def start(self) -> JobMaster:
        self.config.check()  # before the lease: a config that cannot run leaves nothing in storage
        job_id = stable_job_id(self.config.job_name, self.config.runtime_options.get("job_id"))
        # The job and its plan are built once, before the lease, so a definition that cannot run (a parallelism
        # above the max parallelism, a bad parameter) is refused before this master writes anything: after the
        # lease it would record the job as running, which supervision restarts, and overwrite a stopped job's
        # status with a failure.
        env = self._environment(job_id)
        plan = build_plan(env._sinks, env.get_parallelism(), env.get_max_parallelism(),
                          chaining=env.is_chaining_enabled())
        self._acquire_lease(job_id)
        try:
            if self.lease is not None:  # the job's checkpoint writes check it: a fenced master writes nothing
                env.set_runtime_option("fence", self.lease)
            # without --savepoint-dir, savepoints go to the job's env.set_default_savepoint_directory, else where
            # control requests may put them: the checkpoint storage
            self.savepoint_root = (self.config.savepoint_dir or env.get_default_savepoint_directory()
                                   or self.config.storage_uri)
            self.client = env.execute_async(self.config.job_name, from_savepoint=self.config.from_savepoint,
                                            savepoint_dir=self.savepoint_root)
        except BaseException:
            self._end_lease()
            raise
        control = _ClientControl(self.client, self._record_intent, lambda: self.suspension)
        self.metrics = JobMetrics(control.job_id, control.status, self.client.checkpoint_records)
        timeline = JobTimeline(control.job_id, capacity=self.config.view_samples,
                               read_metadata=_read_snapshot_metadata)
        self._failure_log = CheckpointFailureLog(timeline).attach()
        self.view = JobView(control, timeline, describe_operators(plan), self.config.checkpoint_interval_ms or 0,
                            self.config.status_interval_ms)
        self._record_intent("running", f"started by {self.config.started_by}"
                            + (f" from {self.config.from_savepoint}" if self.config.from_savepoint else ""))
        app = create_app(control, self.operations, self.config.token,
                         self.metrics.render, savepoint_roots=self._savepoint_roots(), view=self.view)
        self.server = ControlServer(app, self.config.host, self.config.port).start()
        try:  # at once: until then the status document names the previous master's (dead) control URL
            self._publish_once()
        except Exception as exc:  # noqa: BLE001 - the publishing loop retries
            log.warning("could not publish the first status document: %s", exc)
        self._sample_view()
        threading.Thread(target=self._publish_loop, name="sluice-status", daemon=True).start()
        log.info("job %s running on the %s runtime%s; control API at %s", control.job_id, self.config.runtime,
                 f", restored from {self.config.from_savepoint}" if self.config.from_savepoint else " from scratch",
                 self.server.url, extra={"event": "job_started", "job_id": control.job_id,
                                         "restored_from": self.config.from_savepoint,
                                         "control_url": self.server.url})
        return self

    def _savepoint_roots(self) -> tuple[str, ...]:
        """Where a control request may put a savepoint: the savepoint root, else the checkpoint storage."""
        root = self.config.savepoint_dir or self.config.storage_uri
        return (root,) if root else ()

    @property
    def url(self) -> str:
        assert self.server is not None
        return self.server.url

    def wait(self) -> Any:
        """Block until the job ends; returns its JobExecutionResult (raises if it failed or was fenced).

        After :meth:`suspend`, at most ``suspend_timeout_s``: a job that has not stopped by then makes it raise
        TimeoutError, with the final status published and the lease left to expire (the job may still write)."""
        try:
            result = self._job_result()
        except Exception as exc:
            if self.fenced is not None:
                raise self.fenced from exc
            raise
        finally:
            self._stop_publishing.set()
            self._sample_view()  # the job's last figures, for a view asked for while the master lingers
            if self._failure_log is not None:
                self._failure_log.detach()
            self._suspension_ended()
            try:
                if self.fenced is None:
                    self._publish_once()
            except Exception:  # storage still down at exit: the job's own outcome matters more than its status
                log.exception("could not publish the final status document of job %s", self.client.get_job_id())
            finally:
                self._end_lease()
                if self.server is not None:
                    if self.suspension is None:  # nobody polls an operation of a suspended job: exit promptly
                        time.sleep(self.config.linger_after_end_s)
                    self.server.stop()
                if self.suspension is not None:
                    self._stop_spark()
        if self.fenced is not None:
            raise self.fenced
        return result

    def _job_result(self) -> Any:
        """The job's result, waited for in short steps so a suspension's deadline is noticed."""
        future = self.client.get_job_execution_result()
        while not future.done():
            if self._suspend_requested is not None and self.suspension is None:
                self.suspend(self._suspend_requested)
            deadline = self._suspend_deadline
            if deadline is not None and time.monotonic() >= deadline:
                suspension = self.suspension
                raise TimeoutError(
                    f"job {self.client.get_job_id()!r} was not stopped after {suspension.signal}: "
                    + (suspension.note or f"it did not stop within {self.config.suspend_timeout_s:g} s")
                    + f". Its lease is left to expire ({self.config.lease_ttl_ms / 1000:g} s)")
            wait_for_futures([future], timeout=0.2)
        return future.result()

    def _end_lease(self) -> None:
        """Stop renewing, and release the lease unless another master took it or the job may still write (a
        suspended job that did not stop in time): the next master need not wait."""
        self._lease_done.set()
        if self.lease is None or self.fenced is not None:
            return
        if self.client is not None and not self.client.get_job_execution_result().done():
            log.warning("job %s has not stopped: its lease is not released and expires after %g s",
                        self.client.get_job_id(), self.config.lease_ttl_ms / 1000)
            return
        self.lease.release()

    def request_suspend(self, signum: int) -> None:
        """Ask for :meth:`suspend` from a signal handler, which must take no lock: :meth:`wait` does it."""
        self._suspend_requested = signum

    def suspend(self, signum: int) -> None:
        """Suspend the job because this master was told to stop (``signum``: SIGTERM, SIGINT); returns at once.

        Flink's JobManager shut down in an HA setup suspends its jobs (JobStatus.SUSPENDED): neither
        finished nor cancelled, they are resumed by the next JobManager from their retained checkpoints.
        So: no savepoint; the job is stopped the way a cancel stops it, which aborts only the open
        sink transactions (pre-committed ones stay in the checkpoints for the next restore to commit)
        and, under this master's RETAIN_ON_CANCELLATION, deletes no retained checkpoint (on either
        runtime: ExternalizedCheckpointRetention decides, once the whole run ends); no intent is recorded, since the job is still meant
        to run and supervision restores it.  :meth:`wait` then publishes the status document with state
        SUSPENDED and the signal, releases the lease once the job has stopped, and stops a Spark
        runtime's SparkContext.

        A job that chose another retention itself (DELETE_ON_CANCELLATION: a cancel would delete its
        checkpoints) is not stopped: wait() gives up at once, and the lease expires instead."""
        if self.suspension is not None or self.client is None or self.client.get_job_execution_result().done():
            return
        name = signal.Signals(signum).name
        note = ""
        if self._cancel_deletes_checkpoints is not None:
            note = (f"the job sets {self._cancel_deletes_checkpoints}, so stopping it would delete its retained "
                    "checkpoints; it was left running until the master exited")
        self.suspension = Suspension(signal=name, received_ms=int(time.time() * 1000),
                                     exit_status=exit_status(signum), note=note)
        if note:
            self._suspend_deadline = time.monotonic()
            log.warning("job %s: %s received; %s", self.client.get_job_id(), name, note)
            return
        self._suspend_deadline = time.monotonic() + self.config.suspend_timeout_s
        log.info("job %s: %s received, suspending the job (no savepoint, retained checkpoints kept)",
                 self.client.get_job_id(), name)
        threading.Thread(target=self._stop_suspended_job, name="sluice-suspend", daemon=True).start()

    def _stop_suspended_job(self) -> None:
        """On its own thread (the Spark runtime's cancel waits for a restarting job's next attempt).  The cancel
        is repeated until the job has stopped: an attempt that fails before serving it drops it, and the
        restart strategy would start the next attempt."""
        future = self.client.get_job_execution_result()
        while not future.done() and self._suspend_deadline is not None and time.monotonic() < self._suspend_deadline:
            try:
                self.client.cancel()
            except Exception:  # noqa: BLE001 - wait() gives up at its deadline and says so
                log.exception("stopping the suspended job %s failed", self.client.get_job_id())
            wait_for_futures([future], timeout=2.0)

    def _suspension_ended(self) -> None:
        """Record in the suspension whether the job stopped (the lease is released next) or why not."""
        suspension = self.suspension
        if suspension is None or suspension.stopped_ms is not None:
            return
        if self.client.get_job_execution_result().done():
            self.suspension = dataclasses.replace(suspension, stopped_ms=int(time.time() * 1000))
        elif not suspension.note:
            self.suspension = dataclasses.replace(
                suspension, note=f"the job did not stop within {self.config.suspend_timeout_s:g} s; it was left "
                                 "running until the master exited")

    def describe_suspension(self) -> str:
        """One line for the operator who stopped the master: what happened, and how the job resumes."""
        suspension = self.suspension
        if suspension is None:
            return ""
        history = [h for h in self.client.checkpoint_history()
                   if h.get("kind") == "checkpoint" and h.get("status") == "completed" and h.get("external_pointer")]
        # without a checkpoint of its own the job resumes from where it started (or from scratch)
        newest = history[-1]["external_pointer"] if history else self.config.from_savepoint
        if suspension.stopped_ms is None:
            outcome = (f"; {suspension.note}" + (f"; the lease expires {self.config.lease_ttl_ms / 1000:g} s after "
                                                 "its last renewal, so start the next master with --lease-wait"
                                                 if self.lease is not None else ""))
        else:
            outcome = "; the lease is released, so the next master starts at once" if self.lease is not None else ""
        resume = (f"Resume it with `sluice run {self.config.job_spec} --job-id {self.config.job_name} "
                  f"--from-savepoint {newest} ...`, or let supervision restore it" if newest
                  else "It has no checkpoint: a new master starts it from scratch")
        return (f"SUSPENDED: job {self.client.get_job_id()!r} suspended on {suspension.signal}: no savepoint taken, "
                f"retained checkpoints kept{outcome}. {resume}. Exit status {suspension.exit_status}")

    def _stop_spark(self, timeout_s: float = 8.0) -> None:
        """A suspended Spark job's master stops its SparkContext and the JVM before the process exits, so no
        Spark process outlives it; bounded: a JVM that does not exit in ``timeout_s`` is killed."""
        if self.config.runtime != "spark":
            return
        try:
            from pyspark import SparkContext
            from pyspark.sql import SparkSession
        except ImportError:
            return
        context = SparkContext._active_spark_context
        if context is None:
            return
        jvm = getattr(SparkContext._gateway, "proc", None)

        def stop() -> None:
            try:
                stop_spark(SparkSession._instantiatedSession or SparkSession(context))
            except Exception as exc:  # noqa: BLE001 - e.g. the JVM got the signal too (a process group's) and is gone
                log.warning("stopping the SparkContext failed (%s: %s); ending the JVM", type(exc).__name__, exc)
                if jvm is not None and jvm.poll() is None:
                    jvm.kill()

        stopping = threading.Thread(target=stop, name="sluice-spark-stop", daemon=True)
        stopping.start()
        stopping.join(timeout_s)
        if stopping.is_alive() and jvm is not None:
            log.warning("the Spark JVM did not stop within %g s: killing it", timeout_s)
            jvm.kill()

    def _on_lease_lost(self, exc: BaseException) -> None:
        """Another master owns the job: write nothing more (no status, no intent, no checkpoint) and stop."""
        if self.fenced is not None:
            return
        self.fenced = exc
        self._stop_publishing.set()
        self._lease_done.set()
        log.critical("job master fenced, stopping at once: %s", exc)
        if self.on_fenced is not None:
            self.on_fenced(exc)
            return
        try:
            self.client.cancel()
        except Exception:  # noqa: BLE001 - the job is already ending
            log.exception("cancelling the fenced job failed")

    def _record_intent(self, state: str, reason: str, savepoint: str | None = None) -> None:
        """Record what the operators want (``checkpoints.desired_state``): supervision restarts only a running job.

        Every on-purpose stop reaches the master through its control API (CLI, Airflow, the
        plugin page, curl), so the master records it; a crash records nothing and the job
        stays meant to run."""
        if not self.config.storage_uri or self.fenced is not None:
            return
        desired = DesiredState(job_id=self.client.get_job_id(), state=JobState(state),
                               changed_ms=int(time.time() * 1000), changed_by=self.config.started_by
                               if state == "running" else "control-api", reason=reason, savepoint=savepoint)
        try:
            write_desired_state(open_store(self.config.storage_uri), desired)
        except Exception:  # storage hiccup: supervision then sees the older intent; never fail the stop for it
            log.exception("could not record the desired state %s of job %s", state, desired.job_id)
        else:
            log.info("job %s desired state: %s (%s)", desired.job_id, state, reason)

    def _publish_loop(self) -> None:
        interval = self.config.status_interval_ms / 1000
        while not self._stop_publishing.wait(interval):
            try:
                if self.fenced is None:
                    self._publish_once(periodic=True)
                    self.metrics.update()  # histograms see every checkpoint, however rare the scrapes
            except LeaseNotHeld as exc:  # until a renewal succeeds (or for good, once fenced)
                log.warning("not publishing the status document: %s", exc)
            except Exception:  # status publication must never take the job down; it is retried next tick
                log.exception("could not publish the status document")
            self._sample_view()

    def _sample_view(self) -> None:
        """One sample of the job's status for the job view; a failure costs the sample, never the job."""
        if self.view is None:
            return
        try:
            self.view.sample()
        except Exception:  # noqa: BLE001
            log.exception("could not sample the job's status for its view")

    def _renew_loop(self) -> None:
        """Renew the lease four times per ttl from the moment it is held (the job may take long to start:
        a Spark session); a storage hiccup is retried, a lease that ran out unrenewed fences the master."""
        interval = self.config.lease_ttl_ms / 4000
        while not self._lease_done.wait(interval):
            try:
                self.lease.renew(control_url=self.server.url if self.server else None)
            except JobMasterFenced as exc:  # another master took the lease: stop for good
                self._on_lease_lost(exc)
                return
            except Exception as exc:  # storage unreachable: writes stop once the lease runs out, and resume
                log.warning("could not renew the job's lease (%s); retrying", exc)  # when a renewal succeeds

    def _publish_once(self, periodic: bool = False) -> None:
        """Write the status document; a ``periodic`` write is skipped once the final one is due (seen: a
        periodic write built before a suspension ended landed after the final SUSPENDED one)."""
        if not self.config.storage_uri:
            return
        with self._publish_lock:
            if periodic and self._stop_publishing.is_set():
                return
            self._write_status()

    def _write_status(self) -> None:
        if self.lease is not None:  # only the lease holder speaks for the job (a woken master must not)
            self.lease.check("publish the job's status document")
        s = self.client.status_details()
        suspension = self.suspension
        doc = StatusDocument(
            job_id=self.client.get_job_id(),
            heartbeat_ms=int(time.time() * 1000),
            state=SUSPENDED if suspension is not None else s.get("state", "RUNNING"),
            epoch=int(s.get("epoch", 0) or 0),
            last_completed_checkpoint=s.get("last_completed_checkpoint"),
            last_completed_ms=s.get("last_completed_ms"),
            watermark_ms=s.get("watermark_ms"),
            lag_ms=s.get("lag_ms"),
            records_per_second=s.get("records_per_second"),
            failures=tuple(s.get("failures", ())),
            extra={"control_url": self.server.url if self.server else None, "runtime": self.config.runtime,
                   "job_spec": self.config.job_spec, "parallelism": s.get("parallelism"),
                   # where its savepoints go: `sluice checkpoints list` looks there without --savepoint-dir
                   "savepoint_dir": self.savepoint_root,
                   "records_in": s.get("records_in"), "records_out": s.get("records_out"),
                   "fencing_token": self.lease.fencing_token if self.lease is not None else None},
            suspension=suspension,
        )
        write_status(open_store(self.config.storage_uri), doc,
                     fencing_token=self.lease.fencing_token if self.lease is not None else None)


def _read_snapshot_metadata(uri: str) -> Any:
    """A completed checkpoint's ``_metadata`` (for its incremental size in the job view)."""
    return read_snapshot_metadata(uri)


class _ClientControl:
    """Adapts a JobClient (PyFlink's shape) to the control API's JobControl protocol."""

    def __init__(self, client: Any, record_intent: Any, suspension: Any) -> None:
        self._client = client
        self._record_intent = record_intent
        self._suspension = suspension
        self.job_id = client.get_job_id()

    def status(self) -> dict[str, Any]:
        """The job's status; SUSPENDED, with the signal, from the moment its master was told to stop."""
        status = self._client.status_details()
        suspension = self._suspension()
        if suspension is not None:
            status = {**status, "state": SUSPENDED, "suspension": suspension.to_json_obj()}
        return status

    def checkpoint_history(self) -> list[dict[str, Any]]:
        return self._client.checkpoint_history()

    def trigger_savepoint(self, target_dir: str | None) -> Any:
        return self._client.trigger_savepoint(target_dir)

    def stop_with_savepoint(self, target_dir: str | None, drain: bool) -> Any:
        """The stop's future completes only once the intent is recorded, so a client that sees the stop
        COMPLETED and starts a new master cannot have its ``running`` overwritten by this ``suspended``."""
        recorded: Future = Future()

        def stopped(done: Future) -> None:
            exc = done.exception()
            if exc is not None:
                recorded.set_exception(exc)
                return
            self._record_intent("suspended", "stopped with a savepoint" + (" (drained)" if drain else ""),
                                str(done.result()))
            recorded.set_result(done.result())

        self._client.stop_with_savepoint(drain, target_dir).add_done_callback(stopped)
        return recorded

    def cancel(self) -> None:
        self._record_intent("suspended", "cancelled without a savepoint")
        self._client.cancel()
