"""A real Airflow 3 deployment on loopback for tests: api-server, scheduler, dag-processor, triggerer.

``LiveAirflow`` owns a fresh AIRFLOW_HOME with its own SQLite database (WAL mode, and a 60 s busy timeout set
in ``live_airflow_local_settings.py``: a loaded host must not kill a service with "database is locked"), so it
is independent of the in-process Airflow that ``conftest.py`` configures (whose ``AIRFLOW__*`` variables, e.g.
``UNIT_TEST_MODE=True``, are dropped from the environment of the live processes).  Every process
runs in its own process group and logs to ``home/logs-<name>.txt``; leaving the context stops all
of them, and the task and trigger processes they started, even when startup failed halfway.

    with LiveAirflow(home, dags, extra_env={"AIRFLOW_CONN_X": "..."}) as af:
        af.wait_dags(["my_dag"])
        af.unpause("my_dag")
        run_id = af.trigger("my_dag", {"n": 1})
        assert af.wait_run("my_dag", run_id) == "success", af.diagnostics()
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import httpx
import psutil
from cryptography.fernet import Fernet

T = TypeVar("T")

#: the deployments' airflow_local_settings.py: SQLite's busy timeout
LOCAL_SETTINGS = Path(__file__).with_name("live_airflow_local_settings.py")
SERVICES = ("api-server", "scheduler", "dag-processor", "triggerer")
USERNAME = "admin"
TERMINAL_RUN_STATES = {"success", "failed"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LiveAirflow:
    """Airflow 3 services as subprocesses on 127.0.0.1, plus a small client for the ``/api/v2`` REST API."""

    def __init__(self, home: Path, dags_folder: Path, extra_env: dict[str, str] | None = None,
                 startup_timeout_s: float = 240.0) -> None:
        self.home = Path(home)
        self.dags_folder = Path(dags_folder)
        self.extra_env = dict(extra_env or {})
        self.startup_timeout_s = startup_timeout_s
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.password = secrets.token_urlsafe(12)
        # one set of keys for every process (and for any later environment() call)
        self._keys = {"fernet": Fernet.generate_key().decode(), "api": secrets.token_hex(16),
                      "jwt": secrets.token_hex(32)}
        self._log_ports = (free_port(), free_port())
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self._seen: set[psutil.Process] = set()
        self.client = httpx.Client(base_url=self.base_url, timeout=30.0)
        self.startup_s: float | None = None

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> LiveAirflow:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def environment(self) -> dict[str, str]:
        """os.environ without inherited Airflow settings (``AIRFLOW_CONN_*``/``AIRFLOW_VAR_*`` stay), plus
        this deployment's settings, plus ``extra_env``; every service and task process gets it."""
        home = self.home
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("AIRFLOW__", "_AIRFLOW")) and k not in ("AIRFLOW_HOME", "AIRFLOW_CONFIG")}
        env.update({
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(self.dags_folder),
            "AIRFLOW__CORE__PLUGINS_FOLDER": str(home / "plugins"),  # empty: Sluice loads via its entry point
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__CORE__PARALLELISM": "4",
            "AIRFLOW__CORE__FERNET_KEY": self._keys["fernet"],
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.base_url}/execution/",
            "AIRFLOW__CORE__AUTH_MANAGER":
                "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{USERNAME}:admin",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(home / "simple_auth_passwords.json"),
            "AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT": "120",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
            # SQLite's busy timeout (live_airflow_local_settings.py, copied to home/config/ by start())
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS": "airflow_local_settings.connect_args",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS_ASYNC": "airflow_local_settings.connect_args_async",
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(self.port),
            "AIRFLOW__API__BASE_URL": self.base_url,
            "AIRFLOW__API__WORKERS": "1",
            "AIRFLOW__API__SECRET_KEY": self._keys["api"],
            "AIRFLOW__API_AUTH__JWT_SECRET": self._keys["jwt"],
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "2",
            "AIRFLOW__DAG_PROCESSOR__BUNDLE_REFRESH_CHECK_INTERVAL": "1",
            "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "5",
            "AIRFLOW__DAG_PROCESSOR__PARSING_PROCESSES": "1",
            "AIRFLOW__DAG_PROCESSOR__DAG_FILE_PROCESSOR_TIMEOUT": "120",
            "AIRFLOW__DAG_PROCESSOR__PRINT_STATS_INTERVAL": "300",
            "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "1",
            "AIRFLOW__SCHEDULER__JOB_HEARTBEAT_SEC": "1",
            "AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME": "0.5",
            "AIRFLOW__TRIGGERER__JOB_HEARTBEAT_SEC": "1",
            # the services run with --skip-serve-logs (the api-server reads task logs from the shared
            # folder); unused ports here keep a stray fetch from reaching another deployment's log server
            "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(home / "logs"),
            "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(self._log_ports[0]),
            "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(self._log_ports[1]),
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
            "PYTHONUNBUFFERED": "1",
        })
        env.update(self.extra_env)
        return env

    def start(self) -> None:
        """Migrate the database, start the four services and wait until all report healthy."""
        started = time.monotonic()
        (self.home / "plugins").mkdir(parents=True, exist_ok=True)
        (self.home / "config").mkdir(exist_ok=True)  # on every Airflow process's sys.path
        shutil.copyfile(LOCAL_SETTINGS, self.home / "config" / "airflow_local_settings.py")
        (self.home / "simple_auth_passwords.json").write_text(json.dumps({USERNAME: self.password}))
        env = self.environment()
        migrate = self._spawn("db-migrate", ["db", "migrate"], env)
        try:
            code = migrate.wait(timeout=self.startup_timeout_s)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"airflow db migrate timed out\n{self.diagnostics()}") from None
        if code != 0:
            raise AssertionError(f"airflow db migrate exited with {code}\n{self.diagnostics()}")
        del self.procs["db-migrate"]
        self._spawn("api-server", ["api-server", "-H", "127.0.0.1", "-p", str(self.port), "-w", "1"], env)
        self._spawn("scheduler", ["scheduler", "--skip-serve-logs"], env)
        self._spawn("dag-processor", ["dag-processor"], env)
        self._spawn("triggerer", ["triggerer", "--skip-serve-logs"], env)

        deadline = started + self.startup_timeout_s
        self._poll(self._login, deadline, "the api-server to accept a login")
        self.wait_healthy(deadline - time.monotonic())
        self.startup_s = time.monotonic() - started

    def stop(self, grace_s: float = 10.0) -> None:
        """SIGTERM every process group, SIGKILL what is left after grace_s, then reap.

        Leaders are only reaped here (``_exited`` peeks with WNOWAIT), so each group id stays reserved
        for its group until the end and ``killpg`` cannot hit an unrelated process.  Task and trigger
        processes move to process groups of their own; they are killed by pid from the descendants
        seen while polling and now (psutil checks that a pid still names the same process)."""
        self.client.close()
        procs = list(self.procs.values())
        self._note_descendants()
        for proc in procs:
            self._signal_group(proc, signal.SIGTERM)
        self._wait_exited(procs, time.monotonic() + min(2.0, grace_s))
        # a second SIGTERM means "now": the scheduler stops waiting for running tasks and the
        # triggerer SIGKILLs its trigger runner (after one SIGTERM it waits 10 s for the runner)
        for proc in procs:
            if not self._exited(proc):
                self._signal_group(proc, signal.SIGTERM)
        self._wait_exited(procs, time.monotonic() + grace_s)
        self._note_descendants()
        for proc in procs:
            self._signal_group(proc, signal.SIGKILL)
        for child in self._seen:
            try:
                child.kill()
            except psutil.Error:
                pass
        for proc in procs:
            proc.wait()
        psutil.wait_procs(list(self._seen), timeout=5)
        self.procs.clear()
        self._seen.clear()

    # ------------------------------------------------------------------ REST client

    def get(self, path: str, **params: Any) -> Any:
        """GET any REST path (e.g. ``/api/v2/jobs``) and return its JSON; fails on an error status."""
        return self._request("GET", path, params=params)

    def health(self) -> dict[str, Any]:
        return self.get("/api/v2/monitor/health")

    def wait_healthy(self, timeout: float = 60.0) -> None:
        """Wait until the scheduler, triggerer and dag-processor report healthy; fail at once if a service died."""
        components = ("scheduler", "triggerer", "dag_processor")
        self._check_alive()
        self._poll(lambda: all(self.health()[c]["status"] == "healthy" for c in components),
                   time.monotonic() + timeout, f"{', '.join(components)} to report healthy")

    def wait_dags(self, dag_ids: Iterable[str], timeout: float = 120.0) -> None:
        """Wait until every DAG is parsed and listed; fail at once when the folder has import errors."""
        missing = set(dag_ids)
        deadline = time.monotonic() + timeout
        while True:
            for dag_id in sorted(missing):
                response = self.client.get(f"/api/v2/dags/{dag_id}")
                if response.status_code != 404 and not self._json(response)["has_import_errors"]:
                    missing.discard(dag_id)
            if not missing:
                return
            errors = self.get("/api/v2/importErrors")["import_errors"]
            if errors or time.monotonic() > deadline:
                details = "\n".join(f"{e['filename']}:\n{e['stack_trace']}" for e in errors)
                raise AssertionError(f"DAGs {sorted(missing)} not parsed; import errors:\n{details or 'none'}\n"
                                     f"{self.diagnostics()}")
            self._check_alive()
            time.sleep(0.5)

    def unpause(self, dag_id: str) -> None:
        self._request("PATCH", f"/api/v2/dags/{dag_id}", json={"is_paused": False})

    def trigger(self, dag_id: str, conf: dict[str, Any] | None = None, logical_date: str | None = None) -> str:
        """Start a manual run; Airflow 3 requires ``logical_date`` in the body, and null is allowed."""
        body = {"logical_date": logical_date, "conf": conf or {}}
        return self._request("POST", f"/api/v2/dags/{dag_id}/dagRuns", json=body)["dag_run_id"]

    def run_state(self, dag_id: str, run_id: str) -> str:
        return self._request("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}")["state"]

    def wait_run(self, dag_id: str, run_id: str, timeout: float = 300.0) -> str:
        """Poll until the run is success or failed; returns that state."""
        deadline = time.monotonic() + timeout
        while (state := self.run_state(dag_id, run_id)) not in TERMINAL_RUN_STATES:
            self._check_alive()
            if time.monotonic() > deadline:
                raise AssertionError(f"run {run_id} still {state} after {timeout}s, tasks: "
                                     f"{self.task_instances(dag_id, run_id)}\n{self.diagnostics()}")
            time.sleep(0.5)
        return state

    def task_instances(self, dag_id: str, run_id: str) -> dict[str, str | None]:
        """``{task_id: state}``; a mapped task instance is keyed ``task_id[map_index]``."""
        tis = self._request("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances")["task_instances"]
        return {(t["task_id"] if t["map_index"] < 0 else f"{t['task_id']}[{t['map_index']}]"): t["state"]
                for t in tis}

    def xcom(self, dag_id: str, run_id: str, task_id: str, key: str = "return_value", map_index: int = -1) -> Any:
        path = f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries/{key}"
        return self._request("GET", path, params={"map_index": map_index})["value"]

    def task_log(self, dag_id: str, run_id: str, task_id: str, try_number: int = 1) -> str:
        """The task's log (with the triggerer's part, if it deferred) as text, one line per record."""
        path = f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/logs/{try_number}"
        content = self._request("GET", path, params={"full_content": "true"},
                                headers={"Accept": "application/json"})["content"]
        lines = []
        for record in content:
            if isinstance(record, str):
                lines.append(record)
                continue
            head = " ".join(str(record[k]) for k in ("timestamp", "level", "logger", "event") if record.get(k))
            rest = {k: v for k, v in record.items() if k not in ("timestamp", "level", "logger", "event")}
            lines.append(f"{head} {json.dumps(rest, default=str)}" if rest else head)
        return "\n".join(lines)

    def diagnostics(self, lines: int = 40) -> str:
        """The last lines of each service's log (of ``db migrate`` if none started), for assertion messages."""
        parts = []
        for name in SERVICES if self.log_path(SERVICES[0]).exists() else ("db-migrate",):
            log = self.log_path(name)
            if log.exists():
                tail = log.read_text(errors="replace").splitlines()[-lines:]
                parts.append(f"----- {name} ({log}) -----\n" + "\n".join(tail))
        return "\n".join(parts)

    def log_path(self, name: str) -> Path:
        return self.home / f"logs-{name}.txt"

    # ------------------------------------------------------------------ internals

    def _spawn(self, name: str, args: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        with self.log_path(name).open("wb") as log:
            proc = subprocess.Popen([sys.executable, "-m", "airflow", *args], env=env, cwd=self.home,
                                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        self.procs[name] = proc
        return proc

    def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        return self._json(self.client.request(method, path, **kwargs))

    @staticmethod
    def _json(response: httpx.Response) -> Any:
        if response.is_error:
            raise AssertionError(f"{response.request.method} {response.request.url} -> "
                                 f"{response.status_code}: {response.text}")
        return response.json()

    def _login(self) -> bool:
        """``POST /auth/token`` (simple auth manager) and use the JWT for every later request."""
        try:
            response = self.client.post("/auth/token", json={"username": USERNAME, "password": self.password})
        except httpx.TransportError:
            return False
        if response.status_code != 201:
            return False
        self.client.headers["Authorization"] = f"Bearer {response.json()['access_token']}"
        return True

    def _check_alive(self) -> None:
        self._note_descendants()
        for name, proc in self.procs.items():
            if self._exited(proc):
                raise AssertionError(f"airflow {name} ended early\n{self.diagnostics()}")

    def _poll(self, probe: Callable[[], T | None], deadline: float, what: str, interval_s: float = 0.5) -> T:
        """Call probe until it returns a truthy value; fail when a service dies or at the deadline."""
        while True:
            value = probe()
            if value:
                return value
            self._check_alive()
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}\n{self.diagnostics()}")
            time.sleep(interval_s)

    def _note_descendants(self) -> None:
        for proc in self.procs.values():
            try:
                self._seen.update(psutil.Process(proc.pid).children(recursive=True))
            except psutil.Error:
                pass

    def _wait_exited(self, procs: list[subprocess.Popen[bytes]], deadline: float) -> None:
        while not all(map(self._exited, procs)) and time.monotonic() < deadline:
            time.sleep(0.1)

    @staticmethod
    def _exited(proc: subprocess.Popen[bytes]) -> bool:
        """Whether the process ended, without reaping it (its pid keeps naming our process group)."""
        if proc.returncode is not None:
            return True
        try:
            return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        except ChildProcessError:
            return True

    @staticmethod
    def _signal_group(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
        if proc.returncode is None:  # not reaped yet: the group id is still ours
            try:
                os.killpg(proc.pid, sig)  # start_new_session: the group id is the leader's pid
            except ProcessLookupError:
                pass
