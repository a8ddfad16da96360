"""Start a job master (``sluice run``) as a detached process on this worker, or spark-submit it.

Never two masters for one job: before starting, the operator looks at the job's
status (control API, else the status document in storage).  A live master (it
answers, or its heartbeat is fresh and its state is not terminal) makes the task
fail, unless it was started by this very task instance (a retry re-attaches to
it) or ``replace_live=True`` (supervision replacing an unhealthy master: cancel,
terminate the recorded process, wait until it is gone, then start).  Storage
fences a second master anyway (conditional index writes), but only after it
has done work; this check keeps it from starting.

The deployment is recorded in XCom and in ``<state_dir>/<job_id>.json``
(pid, command, control URL, log file, snapshot started from, who started it).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from sluice.health import is_live
from sluice.exceptions import ControlApiError, JobAlreadyRunning, SluiceAirflowError
from sluice.hook import now_ms
from sluice.operators.base import SluiceBaseOperator, as_bool

#: seconds a started master waits for a former master's lease to expire (``sluice run --lease-wait``):
#: the default lease ttl (15 s) plus a margin, since supervision restarts a master it killed or saw die
LEASE_WAIT_S = 20


def state_dir() -> Path:
    """Where deployment records and master logs live on this worker (``$SLUICE_STATE_DIR``)."""
    configured = os.environ.get("SLUICE_STATE_DIR")
    if configured:
        return Path(configured)
    return Path(os.environ.get("AIRFLOW_HOME", Path.home() / "airflow")) / "sluice"


def read_record(job_id: str) -> dict[str, Any] | None:
    path = state_dir() / f"{job_id}.json"
    return json.loads(path.read_text()) if path.exists() else None


def pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        finished, _ = os.waitpid(pid, os.WNOHANG)  # reap it if it is our (dag.test) child
        if finished == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class SluiceDeployJobOperator(SluiceBaseOperator):
    """Start the deployment's job master and wait until it publishes a heartbeat and a control URL.

    :param from_snapshot: a checkpoint or savepoint URI to start from (templated);
        ``"latest"`` means the newest restorable retained checkpoint or savepoint by
        completion time (:meth:`SluiceHook.restore_point`; a ``stateless`` deployment
        starts fresh instead); None starts fresh.
    :param parallelism: overrides the deployment's parallelism (templated; rescaling
        happens through key groups when starting from a snapshot).
    :param replace_live: stop a live master of this job first (cancel, then SIGTERM
        the recorded process).  Only a master recorded on this worker can be
        terminated; a live master elsewhere still fails the task.
    :param live_grace_s: wait up to this long for a live master to go away by itself
        before deciding (a master that just completed stop-with-savepoint is still
        exiting); 0 decides at once.
    :param startup_timeout_s: how long to wait for the first heartbeat (Spark's first
        session start is slow); defaults to the deployment's.
    :param allow_drained: start from a drained savepoint (``stop --drain``: its watermark
        is MAX, so the job would drop every new record as late); refused by default.
    """

    template_fields = (*SluiceBaseOperator.template_fields, "from_snapshot", "parallelism", "allow_drained")
    ui_color = "#b7e1cd"

    def __init__(self, *, from_snapshot: str | None = None, parallelism: int | str | None = None,
                 replace_live: bool = False, live_grace_s: float = 0.0, startup_timeout_s: float | None = None,
                 allow_drained: bool | str = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.allow_drained = allow_drained
        self.live_grace_s = live_grace_s
        self.from_snapshot = from_snapshot
        self.parallelism = parallelism
        self.replace_live = replace_live
        self.startup_timeout_s = startup_timeout_s

    def drained_allowed(self) -> bool:
        return as_bool("allow_drained", self.allow_drained)

    # -- the transaction -------------------------------------------------------------------------

    def execute(self, context: Any) -> dict[str, Any]:
        job_id = self.resolved_job_id
        started_by = _started_by(context)
        attached = self._check_no_live_master(job_id, started_by)
        if attached is not None:
            return attached
        snapshot, skipped = self._snapshot(job_id)
        return self.start_master(job_id, snapshot, started_by, skipped)

    def _check_no_live_master(self, job_id: str, started_by: dict[str, Any]) -> dict[str, Any] | None:
        thresholds = self.spec.health_thresholds() if self.spec else {"max_heartbeat_age_s": 30.0}
        status = self.hook.get_status(job_id)
        deadline = time.monotonic() + self.live_grace_s
        while is_live(status, now_ms(), thresholds["max_heartbeat_age_s"]) and time.monotonic() < deadline:
            time.sleep(1.0)
            status = self.hook.get_status(job_id)
        if not is_live(status, now_ms(), thresholds["max_heartbeat_age_s"]):
            return None
        record = read_record(job_id)
        if record and _same_task(record.get("started_by"), started_by) and pid_alive(record.get("pid")):
            self.log.info("job %s is already running, started by this task instance (a retry): re-attaching", job_id)
            return record
        if not self.replace_live:
            raise JobAlreadyRunning(
                f"job {job_id!r} already has a live master (state {status.state}, source {status.source}, "
                f"control {status.control_url}); never two masters for one job. Stop it first "
                "(restore DAG / SluiceStopJobOperator), or let the supervise DAG replace it")
        self._replace(job_id, record, thresholds["max_heartbeat_age_s"])
        return None

    def _replace(self, job_id: str, record: dict[str, Any] | None, max_heartbeat_age_s: float) -> None:
        self.log.warning("replacing the live master of job %s", job_id)
        try:
            self.hook.cancel(job_id)
        except (SluiceAirflowError, ControlApiError) as exc:
            self.log.warning("cancel through the control API failed (%s); terminating the process", exc)
        pid = record.get("pid") if record else None
        deadline = time.monotonic() + 30
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.5)
        if pid_alive(pid):
            os.killpg(pid, signal.SIGTERM) if _is_group_leader(pid) else os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 20
            while pid_alive(pid) and time.monotonic() < deadline:
                time.sleep(0.5)
            if pid_alive(pid):
                os.kill(pid, signal.SIGKILL)
                time.sleep(1)
        status = self.hook.get_status(job_id)
        if status.source == "control-api" or (pid is None and is_live(status, now_ms(), max_heartbeat_age_s)):
            raise JobAlreadyRunning(f"job {job_id!r}: the live master could not be stopped from this worker "
                                    f"(no process record here, control {status.control_url}); stop it by hand")

    def _snapshot(self, job_id: str) -> tuple[str | None, list[str]]:
        if not self.from_snapshot or str(self.from_snapshot).lower() in ("none", ""):
            return None, []
        if str(self.from_snapshot) == "latest":
            if self.spec is not None and self.spec.upgrade_mode == "stateless":
                self.log.info("deployment %s is stateless: job %s starts with empty state", self.spec.name, job_id)
                return None, []
            point = self.hook.restore_point(job_id, allow_drained=self.drained_allowed())
            return point.uri, list(point.passed_over)
        return str(self.from_snapshot), []

    # -- starting the process ---------------------------------------------------------------------

    def command(self, job_id: str, snapshot: str | None, started_by: dict[str, Any] | None = None,
                validated_digest: str | None = None) -> list[str]:
        """``sluice run`` arguments for the deployment (see docs/runbooks/deploy.md for the flags)."""
        spec = self.spec
        if spec is None:
            raise ValueError(f"{self.task_id}: deploying needs deployment= (the job spec)")
        # a master killed by supervision (or crashed) holds the job's lease until it expires: wait for that
        args = ["run", spec.job, "--job-id", job_id, "--runtime", spec.runtime,
                "--storage", self.hook.storage_uri, "--retained", str(spec.retained),
                "--lease-wait", str(LEASE_WAIT_S)]
        parallelism = self.parallelism if self.parallelism not in (None, "", "None") else spec.parallelism
        if parallelism:
            args += ["--parallelism", str(int(parallelism))]
        if self.hook.savepoint_dir:
            args += ["--savepoint-dir", self.hook.savepoint_dir]
        if spec.checkpoint_interval_ms:
            args += ["--checkpoint-interval", str(spec.checkpoint_interval_ms)]
        if spec.output:
            args += ["--output", spec.output]
        if snapshot:
            args += ["--from-savepoint", snapshot]
            if self.drained_allowed():
                args += ["--allow-drained"]
            if validated_digest:  # the restore operator validated it just before: the master need not again
                args += ["--validated-digest", validated_digest]
        if started_by:
            args += ["--started-by", "airflow:{dag_id}/{run_id}/{task_id}".format(**started_by)]
        for key, value in sorted(spec.params.items()):  # values as JSON, as ``sluice run --param`` reads them
            args += ["--param", f"{key}={value if isinstance(value, str) else json.dumps(value)}"]
        if spec.runtime == "spark" and spec.spark_conn_id:
            return self._spark_submit_command(job_id, args)
        if spec.runtime == "spark":  # the master starts an embedded session: the settings go to it
            for key, value in sorted(spec.spark_conf.items()):
                args += ["--spark-conf", f"{key}={str(value).lower() if isinstance(value, bool) else value}"]
        prefix = list(spec.command) if spec.command else [sys.executable, "-m", "engine.cli"]
        return prefix + args

    def _spark_submit_command(self, job_id: str, args: list[str]) -> list[str]:
        """spark-submit of ``engine/cli.py`` with ``args``, built by the Spark provider's SparkSubmitHook.

        Partial: SparkSubmitHook.submit() blocks until the application ends, which a
        long-running job never does, so the command it would run is built with its
        ``_build_spark_submit_command`` and started detached like a local master.
        Not exercised in tests (no cluster here)."""
        from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

        import engine.cli

        assert self.spec is not None
        hook = SparkSubmitHook(conn_id=self.spec.spark_conn_id, name=f"sluice-{job_id}", application_args=args,
                               conf=dict(self.spec.spark_conf))
        return hook._build_spark_submit_command(engine.cli.__file__)

    def start_master(self, job_id: str, snapshot: str | None, started_by: dict[str, Any],
                     skipped: list[str] | None = None, validated_digest: str | None = None) -> dict[str, Any]:
        argv = self.command(job_id, snapshot, started_by, validated_digest)
        directory = state_dir()
        directory.mkdir(parents=True, exist_ok=True)
        log_path = directory / f"{job_id}-{int(time.time())}.log"
        env = {**os.environ, **self.hook.process_environment()}
        env.setdefault("PYSPARK_PYTHON", sys.executable)
        env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        if self.hook.token:
            env["SLUICE_CONTROL_TOKEN"] = self.hook.token
        started_ms = now_ms()
        self.log.info("starting job %s: %s (log %s)", job_id, " ".join(argv), log_path)
        with open(log_path, "ab") as log_file:
            process = subprocess.Popen(argv, stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       env=env, start_new_session=True, close_fds=True)
        record = {"job_id": job_id, "pid": process.pid, "host": socket.gethostname(), "command": argv,
                  "log": str(log_path), "from_snapshot": snapshot, "snapshots_passed_over": skipped or [],
                  "parallelism": _flag(argv, "--parallelism"), "started_ms": started_ms,
                  "started_by": started_by, "control_url": None}
        (directory / f"{job_id}.json").write_text(json.dumps(record, indent=2))
        record["control_url"] = self._wait_for_heartbeat(job_id, process, started_ms, log_path)
        (directory / f"{job_id}.json").write_text(json.dumps(record, indent=2))
        return record

    def _wait_for_heartbeat(self, job_id: str, process: subprocess.Popen, started_ms: int, log_path: Path) -> str:
        timeout = self.startup_timeout_s or (self.spec.startup_timeout_s if self.spec else 180.0)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            code = process.poll()
            if code is not None:
                raise SluiceAirflowError(f"job {job_id!r}: the master exited with {code} before its first "
                                         f"heartbeat; last log lines ({log_path}):\n{_tail(log_path)}")
            doc = self.hook.read_status_document(job_id)
            if doc is not None and doc.heartbeat_ms >= started_ms and (doc.extra or {}).get("control_url"):
                self.log.info("job %s is up: control API %s", job_id, doc.extra["control_url"])
                return str(doc.extra["control_url"])
            time.sleep(1.0)
        process.terminate()
        raise SluiceAirflowError(f"job {job_id!r}: no heartbeat within {timeout}s; the master was terminated. "
                                 f"Last log lines ({log_path}):\n{_tail(log_path)}")


def _started_by(context: Any) -> dict[str, Any]:
    ti = context["ti"]
    return {"dag_id": ti.dag_id, "run_id": ti.run_id, "task_id": ti.task_id, "map_index": getattr(ti, "map_index", -1)}


def _same_task(a: dict[str, Any] | None, b: dict[str, Any]) -> bool:
    return bool(a) and all(a.get(k) == b.get(k) for k in ("dag_id", "run_id", "task_id", "map_index"))


def _is_group_leader(pid: int) -> bool:
    try:
        return os.getpgid(pid) == pid
    except ProcessLookupError:
        return False


def _flag(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
