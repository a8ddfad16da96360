"""Starting the SparkSession the Spark runtime, its tests and its benchmarks run in.

Why a helper rather than ``SparkSession.builder`` at each call site (ARCHITECTURE section 8):

* Spark's Python workers are started by the JVM with ``PYSPARK_PYTHON``; unset, they run
  whatever ``python3`` is on the PATH, which lacks Sluice's dependencies.  Both it and
  ``PYSPARK_DRIVER_PYTHON`` are pinned to :data:`sys.executable` *before* the JVM starts (the JVM
  reads them once, at launch) and are also passed as ``spark.executorEnv.*`` so executors of a
  ``local-cluster`` master see them.
* Local defaults suited to one machine: few shuffle partitions (Spark's 200 would make every
  epoch schedule 200 tiny tasks), Arrow for pandas/Arrow UDFs, no UI, WARN logs, and a fresh
  ``spark.local.dir`` per session so shuffle files of concurrent runs never mix and are removed by
  :func:`stop_spark`.  A driver killed before that leaves its folder behind; the owner marker the
  folder gets at creation (:mod:`engine.runtime.spark.scratch`) lets ``sluice checkpoints clean
  --scratch`` find and remove it once that driver is gone.

Masters:

``local[N]``
    one JVM, N task threads; the embedded default.
``local-cluster[W,C,M]``
    W worker/executor JVMs with C cores and M MiB each, started by the driver JVM on loopback.
    Each executor runs its own Python workers, so it proves nothing depends on driver memory.
    Requirements (verified with the pip-installed PySpark 4.2 here): ``SPARK_HOME`` must point at
    a directory with ``jars/`` and ``bin/`` (the ``pyspark`` package itself is such a directory;
    :func:`pyspark.find_spark_home._find_spark_home` returns it, and the executor command is built
    from ``$SPARK_HOME/jars/*``), ``java`` on the PATH, and the worker memory M must be at least
    ``spark.executor.memory`` (set here to M, default 1024 MiB would otherwise not fit a smaller M).
    Executors are separate processes: anything a task imports must be importable by
    :data:`sys.executable` (Sluice is installed in the venv, so ``engine`` is).
"""

from __future__ import annotations

import atexit
import logging
import os
import re
import shutil
import socket
import sys
from typing import Any, Mapping

from engine.errors import JobDefinitionError
from engine.runtime.spark.scratch import create_scratch_dir

_LOCAL_DIR_CONF = "spark.local.dir"
_LOCAL_CLUSTER = re.compile(r"^local-cluster\[\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\]$")
_LOCAL = re.compile(r"^local(\[(\*|\d+)(,\s*\d+)?\])?$")
_SLUICE_LOCAL_DIR_MARK = "spark.sluice.ownedLocalDir"
_DRIVER_JAVA_OPTIONS = "spark.driver.extraJavaOptions"

log = logging.getLogger(__name__)

#: the ``spark.local.dir`` of the session this process started, to remove if its JVM dies (its conf is then
#: unreadable: it lived in the JVM)
_owned_local_dir: str | None = None


def pin_python_interpreter() -> None:
    """Make Spark start its Python workers (and driver shell) with the interpreter running Sluice.

    Also binds Spark to loopback unless ``SPARK_LOCAL_IP`` is set: local and local-cluster masters
    never need another interface, and this host name resolves to 127.0.0.1 anyway.
    """
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


def ensure_spark_home() -> str:
    """Point ``SPARK_HOME`` at the pip-installed PySpark unless the user already set one."""
    from pyspark.find_spark_home import _find_spark_home

    home = os.environ.get("SPARK_HOME") or _find_spark_home()
    os.environ["SPARK_HOME"] = home
    return home


def default_conf(
    master: str,
    *,
    shuffle_partitions: int = 4,
    driver_memory: str = "1g",
    ui_enabled: bool = False,
    local_dir: str | None = None,
) -> dict[str, str]:
    """The configuration Sluice starts a session with; ``conf`` given to :func:`get_or_create_spark` overrides it."""
    if not isinstance(shuffle_partitions, int) or shuffle_partitions < 1:
        raise JobDefinitionError("shuffle_partitions", shuffle_partitions, "must be a positive int")
    conf = {
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        "spark.default.parallelism": str(shuffle_partitions),
        "spark.ui.enabled": "true" if ui_enabled else "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.execution.arrow.pyspark.fallback.enabled": "false",
        "spark.driver.memory": driver_memory,
        "spark.sql.adaptive.enabled": "false",  # AQE would coalesce key-group partitions away
        "spark.sql.streaming.forceDeleteTempCheckpointLocation": "true",
        "spark.executorEnv.PYSPARK_PYTHON": sys.executable,
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        # The JVM talks to its Python workers over a Unix domain socket instead of loopback TCP: over TCP each
        # Python task waited about 40 ms for its input, and an epoch runs several Python tasks one after another.
        # Measured: a two-task Python job 100 ms over TCP, 45-50 ms over the socket.  Where Python has no Unix
        # sockets (Windows), PySpark refuses the setting, so TCP stays there.
        "spark.python.unix.domain.socket.enabled": "true" if hasattr(socket, "AF_UNIX") else "false",
    }
    if local_dir is not None:
        conf[_LOCAL_DIR_CONF] = local_dir
    cluster = _LOCAL_CLUSTER.match(master)
    if cluster:
        conf["spark.executor.memory"] = f"{cluster.group(3)}m"
        conf["spark.executor.cores"] = cluster.group(2)
    return conf


def check_master(master: str) -> None:
    if not isinstance(master, str) or not (_LOCAL.match(master) or _LOCAL_CLUSTER.match(master) or "://" in master):
        raise JobDefinitionError(
            "master",
            master,
            "must be local, local[N], local[*], local-cluster[workers,cores,memory_mib] or a cluster URL",
            "For tests use local[2]; to prove executors are separate processes use local-cluster[2,1,1024]",
        )


def get_or_create_spark(
    master: str = "local[2]",
    app_name: str = "sluice",
    conf: Mapping[str, Any] | None = None,
    *,
    shuffle_partitions: int = 4,
    driver_memory: str = "1g",
    ui_enabled: bool = False,
    log_level: str = "WARN",
    use_class_archive: bool = True,
) -> Any:
    """Return the active SparkSession or start one configured for Sluice.

    A new session's driver JVM maps the classes of ``sluice prepare-spark``'s archive when there is one and
    ``use_class_archive`` (engine/runtime/spark/class_archive.py): it starts sooner, nothing else changes.

    If a session is already active its JVM settings (master, driver memory, local dir) cannot
    change; it is returned as is, with only ``log_level`` applied.  Call :func:`stop_spark` first
    to start a different master.
    """
    check_master(master)
    pin_python_interpreter()
    ensure_spark_home()
    from pyspark.sql import SparkSession

    forget_dead_jvm()
    active = SparkSession.getActiveSession()
    if active is None:
        from pyspark import SparkContext

        if SparkContext._active_spark_context is not None:
            # A session exists but is not this thread's active one (a job built on a job master's thread):
            # a builder without options returns it as is.  With options it would write them into that
            # shared session's SQL conf, e.g. resetting its shuffle partitions under everyone else.
            active = SparkSession.builder.getOrCreate()
    if active is not None:
        active.sparkContext.setLogLevel(log_level)
        return active

    local_dir = create_scratch_dir()
    settings = default_conf(
        master,
        shuffle_partitions=shuffle_partitions,
        driver_memory=driver_memory,
        ui_enabled=ui_enabled,
        local_dir=local_dir,
    )
    settings[_SLUICE_LOCAL_DIR_MARK] = local_dir
    settings.update({k: str(v) for k, v in (conf or {}).items()})
    if use_class_archive:
        from engine.runtime.spark.class_archive import driver_java_options

        settings = with_class_archive(settings, driver_java_options())
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    global _owned_local_dir
    _owned_local_dir = local_dir  # _stop_owned_session_at_exit stops it unless stop_spark did first
    # registered once (unregister drops an earlier registration), when the session exists: atexit runs the newest
    # hook first; registered at import instead, it ran after hooks registered since and a driver's exit hung
    # (tests/runtime/spark/test_scratch_folders.py)
    atexit.unregister(_stop_owned_session_at_exit)
    atexit.register(_stop_owned_session_at_exit)
    return spark


def with_class_archive(settings: dict[str, str], archive_options: str | None) -> dict[str, str]:
    """``settings`` with the class archive's JVM options (None: none) before the caller's own driver options, which
    the JVM reads last and so win.  PYSPARK_SUBMIT_ARGS' ``--driver-java-options`` replaces both."""
    if archive_options is None:
        return settings
    own = settings.get(_DRIVER_JAVA_OPTIONS)
    return {**settings, _DRIVER_JAVA_OPTIONS: f"{archive_options} {own}" if own else archive_options}


def _stop_owned_session_at_exit() -> None:
    """A process that started a session and ends without :func:`stop_spark` (``sluice demo``, ``sluice run``)
    left its ``spark.local.dir`` behind on every clean exit; only a killed driver should leave one (for
    ``sluice checkpoints clean --scratch``).  Registered by get_or_create_spark when it starts a session; with no
    session of this process's own (``_owned_local_dir`` None: stop_spark stopped it) it does nothing."""
    global _owned_local_dir
    owned = _owned_local_dir
    if owned is None:
        return
    try:
        from pyspark.sql import SparkSession

        active = SparkSession.getActiveSession() or SparkSession._instantiatedSession
        if active is not None:
            stop_spark(active)  # also removes the folder
    except Exception:  # noqa: BLE001 - exiting anyway: at least the folder goes
        log.debug("stopping the Spark session at exit", exc_info=True)
    shutil.rmtree(owned, ignore_errors=True)
    _owned_local_dir = None


def forget_dead_jvm() -> bool:
    """If the driver JVM PySpark launched for this process has exited (killed by the OOM killer, crashed), drop
    PySpark's handles on it so the next session starts a new JVM; True when it had.

    PySpark keeps its gateway, context and session in class attributes: after the JVM's death every call
    through them fails, and the builder hands the dead session back, so a job restarting after the loss of its
    JVM failed again at once, at every attempt.  Flink's equivalent is losing a TaskManager: the job restarts
    on a new one from its newest checkpoint.  A JVM this process did not launch (no ``proc``) is left alone.
    """
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None) if gateway is not None else None
    if proc is None or proc.poll() is None:
        return False
    log.warning("the Spark driver JVM (pid %d) has exited with code %s; the next attempt starts a new one",
                proc.pid, proc.returncode)
    global _owned_local_dir
    with SparkContext._lock:
        context = SparkContext._active_spark_context
        if context is not None:
            try:
                context.stop()  # catches the Py4JError of a dead JVM; closes the accumulator server
            except Exception:  # noqa: BLE001 - whatever it could not close died with the JVM
                log.debug("stopping the dead JVM's SparkContext", exc_info=True)
        try:
            gateway.shutdown()
        except Exception:  # noqa: BLE001 - its connections point at a process that is gone
            log.debug("shutting down the dead JVM's gateway", exc_info=True)
        SparkContext._active_spark_context = None
        SparkContext._gateway = None
        SparkContext._jvm = None
    SparkSession._instantiatedSession = None
    SparkSession._activeSession = None
    try:
        from pyspark.sql.context import SQLContext

        SQLContext._instantiatedContext = None
    except ImportError:  # pragma: no cover - every PySpark 4 has it
        pass
    if _owned_local_dir is not None:
        shutil.rmtree(_owned_local_dir, ignore_errors=True)  # its shuffle files belonged to the dead JVM
        _owned_local_dir = None
    return True


def stop_spark(spark: Any, jvm_exit_timeout_s: float = 30.0) -> None:
    """Stop the session, its JVM (so no Spark process outlives the caller) and remove its local dir.  The JVM
    gets ``jvm_exit_timeout_s`` to exit before it is killed (writing a class archive at exit takes a while)."""
    from pyspark import SparkContext

    global _owned_local_dir
    owned_dir = spark.sparkContext.getConf().get(_SLUICE_LOCAL_DIR_MARK, None)
    if owned_dir == _owned_local_dir:
        _owned_local_dir = None
    spark.stop()
    gateway = SparkContext._gateway
    if gateway is not None:
        proc = getattr(gateway, "proc", None)
        gateway.shutdown()
        if proc is not None:
            # The JVM PySpark launched exits when its stdin closes (it watches it for the parent's death).
            if proc.stdin is not None:
                proc.stdin.close()
            try:
                proc.wait(timeout=jvm_exit_timeout_s)
            except Exception:  # it ignored that: end it, it is ours
                proc.kill()
                proc.wait(timeout=30)
        SparkContext._gateway = None
        SparkContext._jvm = None
    if owned_dir:
        shutil.rmtree(owned_dir, ignore_errors=True)
