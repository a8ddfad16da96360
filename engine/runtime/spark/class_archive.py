"""A class archive for the Spark driver's JVM (Java class data sharing), so a Spark session starts sooner.

Why: every ``sluice run`` master, restore after a failure, Airflow task and Spark test starts a JVM, and a cold
JVM spends most of its first seconds loading and verifying Spark's classes.  On this 2-core host the purchases
job under a ``sluice run`` master reached its first checkpoint in 30.6 and 32.7 s without an archive, and in 24.0
and 25.5 s with ``sluice prepare-spark``'s (quiet host); a bare session started in 9.8 s without and 5.3 to 6.5 s
with one, and its first SQL job ran in 3.7 s without and 1.5 to 2.1 s with; the driver-kill reliability test took
118 s without and 86 s with.  Steady epochs do not change: the archive only saves class loading.

How: ``sluice prepare-spark`` (engine/prepare_spark.py) runs a small Sluice job on Spark in a child process whose
JVM has ``-XX:ArchiveClassesAtExit``: at exit the JVM writes every class it loaded, parsed and verified, to a
file.  Later sessions start their driver JVM with ``-XX:SharedArchiveFile`` (:func:`driver_java_options`, called
by engine/runtime/spark/session.py) and map those classes instead of loading them.

What is trusted: a JVM given a truncated archive crashes (measured: Java 17 here aborts with "A fatal error has been
detected"), and nothing says an altered one fares better. So the archive is written under a temporary name and
renamed only after a JVM started with it, and a record beside it (``<archive>.json``) holds its size and SHA-256,
checked once per process before any session uses it; an archive that fails the check is not used, with a warning
naming the file and the command that rebuilds it. A valid archive the JVM cannot use (another JDK build, Spark's
jars changed since) is refused by the JVM itself, which then starts without it; ``-Xlog:cds=off`` keeps its warning
off stdout.

Where: ``<sys.prefix>/share/sluice/`` (the virtualenv's), one file per PySpark version and ``java`` binary, as
the JVM ties an archive to its build and its class path.  Only the driver JVM uses it: executors of a
``local-cluster`` or a cluster start with another class path, which the JVM would refuse.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import sys
import time
from pathlib import Path

log = logging.getLogger(__name__)

#: the JVM options that load an archive without a word on stdout when the JVM refuses it
_QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"

#: archive path -> the options it gave (None: not usable), checked once per process
_checked: dict[Path, str | None] = {}


def java_binary() -> str | None:
    """The ``java`` spark-submit starts: ``$JAVA_HOME/bin/java``, else the first on the PATH (its real path)."""
    home = os.environ.get("JAVA_HOME")
    found = os.path.join(home, "bin", "java") if home else shutil.which("java")
    return os.path.realpath(found) if found and os.path.exists(found) else None


def archive_path(java: str | None = None) -> Path | None:
    """Where the archive of this PySpark and ``java`` lives (None without a ``java``)."""
    import pyspark

    java = java or java_binary()
    if java is None:
        return None
    ident = hashlib.sha256(java.encode()).hexdigest()[:12]
    return Path(sys.prefix) / "share" / "sluice" / f"spark-{pyspark.__version__}-java-{ident}.jsa"


def _digest(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def driver_java_options() -> str | None:
    """The driver JVM's options that use the archive, or None when there is none or it fails its check."""
    path = archive_path()
    if path is None:
        return None
    if path in _checked:
        return _checked[path]
    options = None
    record_path = path.with_name(path.name + ".json")
    if path.exists():
        problem = None
        try:
            record = json.loads(record_path.read_text())
            if not isinstance(record, dict):
                problem = f"{record_path} is not a JSON object"
            elif path.stat().st_size != record.get("size"):
                problem = f"its size is {path.stat().st_size} bytes, its record says {record.get('size')}"
            elif _digest(path) != record.get("sha256"):
                problem = f"its SHA-256 differs from the one in {record_path}"
        except (OSError, ValueError) as e:
            problem = f"its record {record_path} is unreadable ({e})"
        if problem is None:
            options = f"-XX:SharedArchiveFile={path} {_QUIET}"
        else:
            log.warning("not using the JVM class archive %s: %s. Spark starts without it; rebuild it with "
                        "`sluice prepare-spark`", path, problem)
    _checked[path] = options
    return options


def install(tmp: Path, path: Path, java: str) -> None:
    """Put the archive ``tmp`` (recorded and started with) at ``path``, with its record; each by an atomic rename,
    so a reader sees a whole archive or none (a record without its archive is never used)."""
    record = {"size": tmp.stat().st_size, "sha256": _digest(tmp), "java": java, "created_unix_s": int(time.time())}
    tmp_record = path.with_name(f"{path.name}.json.{os.getpid()}.tmp")
    tmp_record.write_text(json.dumps(record))
    os.replace(tmp, path)
    os.replace(tmp_record, path.with_name(path.name + ".json"))
    _checked.pop(path, None)
