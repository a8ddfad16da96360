"""``sluice prepare-spark``: record the Spark driver JVM's class archive (engine/runtime/spark/class_archive.py).

Two child processes, as a JVM's options are fixed when it starts and this process may already have one:

1. ``record``: a session whose JVM has ``-XX:ArchiveClassesAtExit`` runs a small Sluice job (the purchases
   example, bounded, with checkpoints), so the archive holds what a job's driver loads (SQL, ``mapInArrow``,
   shuffles, local checkpoints, collects); the JVM is then stopped and waited for, as it writes the archive on exit;
2. ``check``: a session whose JVM must map the new archive (``-Xshare:on`` fails rather than start without it)
   runs a query.

Only then is the archive renamed into place with its record (``class_archive.install``).
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from engine.errors import SluiceError
from engine.runtime.spark import class_archive

log = logging.getLogger(__name__)


class ClassArchiveError(SluiceError):
    """Building the class archive failed (the message says at which step and what the child said)."""


def build_archive(timeout_s: float = 600.0) -> Path:
    """Record, check and install the archive (module docstring); replaces an older one of the same name."""
    java = class_archive.java_binary()
    path = class_archive.archive_path(java)
    if java is None or path is None:
        raise ClassArchiveError("no java found (set JAVA_HOME or put java on the PATH): Spark needs Java 17")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")  # the JVM creates it
    started = time.monotonic()
    try:
        _child(["record", str(tmp)], timeout_s, "recording the classes of a small Spark job")
        if not tmp.exists() or tmp.stat().st_size == 0:
            raise ClassArchiveError(f"the JVM wrote no archive at {tmp}")
        _child(["check", str(tmp)], timeout_s, "starting Spark with the new archive")
        class_archive.install(tmp, path, java)
    finally:
        tmp.unlink(missing_ok=True)
    log.info("JVM class archive %s built in %.0f s", path, time.monotonic() - started)
    return path


def _child(args: list[str], timeout_s: float, what: str) -> None:
    try:
        done = subprocess.run([sys.executable, "-m", __name__, *args], capture_output=True, text=True,
                              timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as e:
        raise ClassArchiveError(f"{what} took more than {timeout_s:.0f} s") from e
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-15:])
        raise ClassArchiveError(f"{what} failed (exit {done.returncode}):\n{tail}")


def _record(target: str) -> None:
    from engine.api.environment import StreamExecutionEnvironment
    from engine.examples.purchases import build
    from engine.runtime.spark.session import get_or_create_spark, stop_spark

    spark = get_or_create_spark("local[2]", use_class_archive=False,
                                conf={"spark.driver.extraJavaOptions": f"-XX:ArchiveClassesAtExit={target}"})
    with tempfile.TemporaryDirectory(prefix="sluice-class-archive-") as work:
        env = StreamExecutionEnvironment.get_execution_environment()
        env.set_runtime("spark").set_parallelism(2).enable_checkpointing(500)
        env.get_checkpoint_config().set_checkpoint_storage_dir(Path(work).as_uri())
        streams = build(env, events_per_split=400, malformed_fraction=0.01)
        env.execute_and_collect_streams(streams, job_name="class-archive")
    stop_spark(spark, jvm_exit_timeout_s=300.0)


def _check(archive: str) -> None:
    from engine.runtime.spark.session import get_or_create_spark, stop_spark

    spark = get_or_create_spark("local[1]", conf={
        "spark.driver.extraJavaOptions": f"-XX:SharedArchiveFile={archive} -Xshare:on"}, use_class_archive=False)
    if spark.range(3).count() != 3:
        raise ClassArchiveError("a Spark query on the new archive gave a wrong count")
    stop_spark(spark)


if __name__ == "__main__":
    {"record": _record, "check": _check}[sys.argv[1]](sys.argv[2])
