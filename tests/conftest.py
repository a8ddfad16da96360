"""Suite-wide fixtures: one SparkSession per test process, one moto S3 server, and a guard against leaked threads.

One session: a JVM start costs seconds on a 2-core machine, and two fixtures each starting and
stopping "their" session would stop each other's, since PySpark returns the process's active
session to whoever asks.  The master is ``local[2]`` unless ``SLUICE_TEST_SPARK_MASTER`` says
otherwise, e.g. ``SLUICE_TEST_SPARK_MASTER='local-cluster[2,1,1024]'`` for two executor JVMs.

One moto S3 server: ``moto_endpoint`` is moto's ThreadedMotoServer over HTTP on a free loopback port, started
once per test process (a start costs about a second, and moto's servers in one process share their state anyway,
so a second server would isolate nothing).  Isolation is per test and by bucket: ``moto_s3`` gives a test a
bucket of its own and sets the environment a deployment sets for boto3 (credentials, region,
``AWS_ENDPOINT_URL``), undone after the test.

One run of a module's fixtures: the tests of a module that share a module- or class-scoped fixture (a golden
run, a savepoint, a job master) are one ``xdist_group`` (the README runs ``--dist loadgroup``), so the fixture
runs in one test process.  Before, xdist spread such a module's tests over both processes and each built the
fixture: the demo ran twice per suite (79 s and 73 s of set-up in one CI run).

Groups at all: pytest-xdist 3.8 groups by a ``@group`` suffix it writes into the item's ``_nodeid``, which
pytest 9.2 no longer reads (its node ids are structured, ``item._id``), so with these pins no group was ever
honoured, the explicit ``live_airflow`` one (one live Airflow at a time) included (pytest-xdist issue #1386,
open; its fix, PR #1388, is not released).  :class:`_GroupSuffix` writes the suffix where pytest 9.2 reads it,
after xdist's own hook, and only when that hook's did not take; drop it once the pinned xdist does it.

The guard: a test module must not leave Sluice's threads running.

A job master or local job left running by a failed fixture keeps a busy thread in
the pytest process; every later test then competes with it for the GIL and
slows down, so one failure cascades into timeouts far from its cause.  After
each module this waits briefly for the threads the module started to end and
fails the module's last test, naming them, if any are still alive.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

_TESTS = Path(__file__).parent
#: folders whose test modules define functions Spark's Python workers unpickle by reference (and ``tests/``
#: itself, for the helpers those modules import, e.g. source_gate)
_SPARK_IMPORT_PATHS = (_TESTS, _TESTS / "runtime" / "spark", _TESTS / "checkpoints" / "validation",
                       _TESTS / "engine" / "windowing" / "scenarios", _TESTS.parent)


#: module-scoped fixtures that do not make a module one group: the autouse thread guard (module docstring)
_UNGROUPED = frozenset({"no_leaked_sluice_threads"})


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook turns the marks into the groups it schedules by
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Group each module whose tests share a module- or class-scoped fixture (module docstring)."""
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
        if any(d.scope in ("module", "class") for name, fixturedefs in defs.items() if name not in _UNGROUPED
               for d in fixturedefs):
            item.add_marker(pytest.mark.xdist_group(item.module.__name__ if item.module else item.nodeid))


class _GroupSuffix:
    """``--dist loadgroup`` on pytest 9.2 (module docstring): the group suffix in the node id pytest reports."""

    @pytest.hookimpl(trylast=True)  # after xdist's hook, which writes the suffix where pytest no longer reads it
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        if not config.getoption("loadgroup", default=False):  # set on xdist workers only
            return
        from _pytest.nodeid import NodeId

        for item in items:
            names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                            for m in item.iter_markers("xdist_group")})
            if names and "@" not in item.nodeid and isinstance(getattr(item, "_id", None), NodeId):
                item._id = NodeId.parse(f"{item.nodeid}@{'_'.join(names)}")


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(_GroupSuffix(), "sluice-xdist-group-suffix")


_GRACE_S = 10.0


@pytest.fixture(scope="session")
def spark():
    pytest.importorskip("pyspark")
    from engine.runtime.spark.session import get_or_create_spark, stop_spark

    # Spark's Python workers are forked from the JVM, which inherits this environment
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (*map(str, _SPARK_IMPORT_PATHS), os.environ.get("PYTHONPATH")) if p)
    session = get_or_create_spark(os.environ.get("SLUICE_TEST_SPARK_MASTER", "local[2]"), app_name="sluice-tests",
                                  shuffle_partitions=2)
    yield session
    stop_spark(session)


#: what boto3 needs to reach moto: fake credentials, never a real account's
MOTO_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                    "AWS_DEFAULT_REGION": "us-east-1"}


@pytest.fixture(scope="session")
def moto_endpoint():
    """The URL of the test process's moto S3 server (``http://127.0.0.1:<port>``), started on first use."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


@dataclass(frozen=True)
class MotoBucket:
    """A fresh bucket on the moto server, and a boto3 client for it."""

    endpoint: str
    bucket: str
    client: Any


@pytest.fixture
def moto_s3(moto_endpoint, monkeypatch) -> MotoBucket:
    """A bucket of this test's own on the moto server, with boto3's environment pointing at the server: moto's
    state outlives a test, so a fixed bucket name would hand a test the objects of the one before it."""
    import boto3

    for name, value in {**MOTO_CREDENTIALS, "AWS_ENDPOINT_URL": moto_endpoint}.items():
        monkeypatch.setenv(name, value)
    client = boto3.client("s3", endpoint_url=moto_endpoint, region_name="us-east-1")
    bucket = "sluice-" + uuid.uuid4().hex[:12]
    client.create_bucket(Bucket=bucket)
    return MotoBucket(moto_endpoint, bucket, client)


def _sluice_threads() -> dict[int, threading.Thread]:
    return {t.ident: t for t in threading.enumerate() if t.name.startswith("sluice-") and t.is_alive()}


@pytest.fixture(scope="module", autouse=True)
def no_leaked_sluice_threads():
    before = set(_sluice_threads())
    yield
    deadline = time.monotonic() + _GRACE_S
    while True:
        leaked = [t for ident, t in _sluice_threads().items() if ident not in before]
        if not leaked or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    if leaked:
        pytest.fail(f"threads still running after this module: {sorted(t.name for t in leaked)}")
