"""The Spark driver's JVM class archive (engine/runtime/spark/class_archive.py): built by ``sluice prepare-spark``,
used by every new session, and never handed to a JVM when it fails its check (a JVM given a damaged archive
crashes)."""

from __future__ import annotations

import hashlib
import json
import logging
import subprocess
import sys
import textwrap

import pytest

from engine.runtime.spark import class_archive
from engine.runtime.spark.session import with_class_archive


@pytest.fixture
def prefix(tmp_path, monkeypatch):
    """An empty virtualenv prefix: the archive's folder is under it."""
    monkeypatch.setattr(sys, "prefix", str(tmp_path))
    monkeypatch.setattr(class_archive, "_checked", {})
    return tmp_path


def _fake_archive(data: bytes = b"archive bytes" * 100) -> tuple:
    path = class_archive.archive_path()
    path.parent.mkdir(parents=True)
    path.write_bytes(data)
    record = path.with_name(path.name + ".json")
    record.write_text(json.dumps({"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}))
    return path, record


def test_no_archive_no_options(prefix):
    assert class_archive.archive_path().is_relative_to(prefix)
    assert class_archive.driver_java_options() is None


def test_an_archive_that_matches_its_record_is_used_quietly(prefix):
    path, _ = _fake_archive()
    options = class_archive.driver_java_options()
    assert options.split() == [f"-XX:SharedArchiveFile={path}", "-Xlog:cds=off", "-Xlog:cds+dynamic=off"]


@pytest.mark.parametrize("damage", ["truncated", "one byte changed", "record missing", "record not json"])
def test_a_damaged_archive_is_not_given_to_the_jvm(prefix, caplog, damage):
    path, record = _fake_archive()
    data = path.read_bytes()
    if damage == "truncated":
        path.write_bytes(data[:-7])
    elif damage == "one byte changed":
        path.write_bytes(data[:5] + bytes([data[5] ^ 1]) + data[6:])
    elif damage == "record missing":
        record.unlink()
    else:
        record.write_text("{not json")
    with caplog.at_level(logging.WARNING, logger=class_archive.__name__):
        assert class_archive.driver_java_options() is None
    [message] = [r.getMessage() for r in caplog.records]
    assert str(path) in message and "sluice prepare-spark" in message


def test_the_archive_goes_before_the_callers_own_jvm_options():
    archive = "-XX:SharedArchiveFile=/x.jsa -Xlog:cds=off"
    assert with_class_archive({}, archive) == {"spark.driver.extraJavaOptions": archive}
    mine = {"spark.driver.extraJavaOptions": "-Xss4m", "spark.app.name": "a"}
    assert with_class_archive(mine, archive) == {"spark.driver.extraJavaOptions": f"{archive} -Xss4m",
                                                 "spark.app.name": "a"}
    assert with_class_archive(mine, None) == mine


@pytest.mark.timeout(900)
def test_a_new_spark_session_starts_its_jvm_on_the_built_archive(tmp_path):
    """The real client: ``sluice prepare-spark``'s archive (built here when this virtualenv has none yet), then a
    fresh process's session, whose JVM is asked which archive it was started with and runs a query."""
    path = class_archive.archive_path()
    if path is None:
        pytest.skip("no java on this machine")
    if class_archive.driver_java_options() is None:
        done = subprocess.run([sys.executable, "-m", "engine.cli", "prepare-spark"], capture_output=True,
                              text=True, timeout=840)
        assert done.returncode == 0, done.stderr[-3000:]
        assert f"JVM class archive written: {path}" in done.stdout
    record = json.loads(path.with_name(path.name + ".json").read_text())
    assert record["size"] == path.stat().st_size
    probe = textwrap.dedent("""
        from engine.runtime.spark.session import get_or_create_spark, stop_spark
        spark = get_or_create_spark("local[1]")
        bean = spark._jvm.java.lang.management.ManagementFactory.getPlatformMXBean(
            spark._jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean"))
        print("archive=" + bean.getVMOption("SharedArchiveFile").getValue())
        print("count=" + str(spark.range(5).count()))
        stop_spark(spark)
    """)
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"archive={path}" in done.stdout.splitlines()
    assert "count=5" in done.stdout.splitlines()
    assert "[cds" not in done.stdout  # the JVM's archive messages stay off stdout
