"""The runtime registry: ``env.set_runtime(name)`` picks a registered runtime; the API imports none itself."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from engine import JobDefinitionError, StreamExecutionEnvironment
from engine.runtime import registry
from engine.runtime.handle import JobExecutionResult, JobHandle
from engine.runtime.local.runtime import LocalRuntime

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def own_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Registrations made by a test end with it."""
    monkeypatch.setattr(registry, "_RUNTIMES", dict(registry._RUNTIMES))


class RecordingRuntime:
    """Runs jobs on the local runtime and remembers which it ran: a runtime registered by factory."""

    jobs: list[str] = []

    def __init__(self, env: Any) -> None:
        self._local = LocalRuntime(env)

    def execute(self, job_name: str, sinks: list[Any], collect: list[Any], from_savepoint: str | None = None) -> Any:
        RecordingRuntime.jobs.append(job_name)
        return self._local.execute(job_name, sinks, collect, from_savepoint=from_savepoint)

    def submit(self, job_name: str, sinks: list[Any], collect: list[Any] = (),  # type: ignore[assignment]
               from_savepoint: str | None = None) -> Any:
        RecordingRuntime.jobs.append(job_name)
        return self._local.submit(job_name, sinks, collect, from_savepoint=from_savepoint)


def test_an_unknown_runtime_is_refused_at_build_time_naming_the_registered_ones() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    with pytest.raises(JobDefinitionError, match=r"`runtime` must be one of \('local', 'spark'\)"):
        env.set_runtime("flink")


def test_a_registered_runtime_runs_the_job(own_registry: None) -> None:
    registry.register_runtime("recording", RecordingRuntime)
    assert registry.runtime_names() == ("local", "recording", "spark")
    env = StreamExecutionEnvironment.get_execution_environment().set_runtime("recording")
    RecordingRuntime.jobs.clear()
    doubled = env.from_collection([1, 2, 3]).map(lambda x: x * 2).execute_and_collect("via-registry")
    assert sorted(doubled) == [2, 4, 6]
    assert RecordingRuntime.jobs == ["via-registry"]
    assert isinstance(env.get_last_result(), JobExecutionResult)


def test_a_runtime_can_be_registered_by_import_path(own_registry: None) -> None:
    registry.register_runtime("local-by-path", "engine.runtime.local.runtime:LocalRuntime")
    env = StreamExecutionEnvironment.get_execution_environment()
    assert isinstance(registry.create_runtime("local-by-path", env), LocalRuntime)


@pytest.mark.parametrize("name, factory, parameter", [
    ("Local Two", LocalRuntime, "name"),
    ("", LocalRuntime, "name"),
    ("two", 42, "factory"),
    ("two", "engine.runtime.local.runtime.LocalRuntime", "factory"),
])
def test_bad_registrations_name_the_parameter(own_registry: None, name: str, factory: Any, parameter: str) -> None:
    with pytest.raises(JobDefinitionError, match=f"`{parameter}`"):
        registry.register_runtime(name, factory)
    assert registry.runtime_names() == ("local", "spark")


def test_a_submitted_job_is_controlled_through_a_job_handle() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.from_collection(list(range(10))).filter(lambda x: x % 2 == 0).print()
    handle = registry.create_runtime("local", env).submit("handle", list(env._sinks))
    assert isinstance(handle, JobHandle)
    result = handle.wait(60)
    assert isinstance(result, JobExecutionResult) and result.job_name == "handle"
    assert handle.done() and handle.status().state == "finished"


def test_the_spark_runtime_is_imported_only_when_a_job_asks_for_it() -> None:
    probe = ("import sys, engine; from engine import StreamExecutionEnvironment as E; "
             "before = 'engine.runtime.spark.runtime' in sys.modules; E.get_execution_environment().set_runtime('spark'); "
             "print(before, 'engine.runtime.spark.runtime' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "False"]
