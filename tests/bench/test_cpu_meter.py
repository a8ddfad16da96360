"""bench/common.py CpuMeter: CPU per process kind, with exited workers counted through their reaping parent.

The process tree mimics PySpark's local mode: a long-lived parent (the JVM) starts a daemon
child, which forks a worker that burns CPU and exits (the daemon reaps it).  The meter starts
after the tree is up, so only the work after ``start`` may count.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import pytest

from bench.common import CpuMeter, per_event_us

BURN = 0.4  # CPU seconds each busy process spends after the meter starts

_BURN_FN = """
import os, sys, time
def burn(seconds):
    start = time.process_time()
    while time.process_time() - start < seconds:
        pass
"""

DAEMON = _BURN_FN + textwrap.dedent(f"""
    print("up", flush=True)
    sys.stdin.readline()
    pid = os.fork()
    if pid == 0:
        burn({BURN})
        os._exit(0)
    os.waitpid(pid, 0)  # reaped: the worker's time is now the daemon's children time
    print("done", flush=True)
    sys.stdin.readline()
""")

PARENT = _BURN_FN + textwrap.dedent(f"""
    import subprocess
    daemon = subprocess.Popen([sys.executable, "-c", {DAEMON!r}], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    daemon.stdout.readline()
    burn(0.2)  # before the meter starts: must not count
    print("ready", flush=True)
    sys.stdin.readline()
    burn({BURN})
    daemon.stdin.write("go\\n"); daemon.stdin.flush()
    daemon.stdout.readline()
    print("done", flush=True)
    sys.stdin.readline()
    daemon.stdin.write("bye\\n"); daemon.stdin.flush()
    daemon.wait()
""")


@pytest.fixture
def tree():
    proc = subprocess.Popen([sys.executable, "-c", PARENT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        yield proc
    finally:
        proc.kill()
        proc.wait()


def test_splits_cpu_between_the_jvm_its_python_children_and_this_process(tree):
    meter = CpuMeter(tree.pid).start()
    tree.stdin.write("go\n")
    tree.stdin.flush()
    assert tree.stdout.readline().strip() == "done"
    spent = meter.stop()
    # the parent's burn before start() is excluded; the worker exited before stop() and still counts
    assert BURN * 0.8 <= spent["jvm"] < BURN * 2
    assert BURN * 0.8 <= spent["python_workers"] < BURN * 2
    assert spent["total"] == pytest.approx(spent["jvm"] + spent["python_workers"] + spent["driver_python"], abs=0.01)


def test_driver_python_is_this_process():
    meter = CpuMeter(None).start()
    start = time.process_time()
    while time.process_time() - start < 0.2:
        pass
    spent = meter.stop()
    assert spent["jvm"] == 0 and spent["python_workers"] == 0
    assert spent["driver_python"] >= 0.15


def test_stop_before_start_is_an_error():
    with pytest.raises(RuntimeError, match="before start"):
        CpuMeter(None).stop()


def test_per_event_us():
    assert per_event_us({"jvm": 1.5, "total": 3.0}, 1_000_000) == {"jvm": 1.5, "total": 3.0}
    assert per_event_us({"jvm": 1.0}, 0) == {"jvm": 1_000_000.0}


def test_jvm_thread_cpu_reads_this_process_threads_by_group():
    """JvmThreadCpu reads /proc per thread: this process's main thread (named after the interpreter) is "other"."""
    import os

    from bench.common import JvmThreadCpu

    threads = JvmThreadCpu(os.getpid()).start()
    start = time.process_time()
    while time.process_time() - start < 0.3:
        pass
    spent = threads.stop(jvm_total_s=10.0)
    assert spent["other"] >= 0.2
    assert spent["missing"] == pytest.approx(10.0 - sum(v for k, v in spent.items() if k != "missing"), abs=0.01)
    assert JvmThreadCpu(None).start().stop() == {}


def test_jvm_thread_groups():
    from bench.common import JvmThreadCpu

    assert JvmThreadCpu.group_of("Thread-12") == "driver"
    assert JvmThreadCpu.group_of("stream executio") == "driver"
    assert JvmThreadCpu.group_of("C2 CompilerThre") == "jit"
    assert JvmThreadCpu.group_of("Executor task l") == "tasks"
    assert JvmThreadCpu.group_of("Executor task i") == "tasks"
    assert JvmThreadCpu.group_of("G1 Conc#0") == "gc"
    assert JvmThreadCpu.group_of("GC Thread#1") == "gc"
    assert JvmThreadCpu.group_of("dag-scheduler-e") == "other"
