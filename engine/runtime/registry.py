"""The runtimes a job can run on, by name: ``env.set_runtime(name)`` picks one from here.

The API names a runtime and never imports one: a runtime imports the graph, the
operators and the checkpoint protocol, and the API sits above all of them (the
import layering in ``pyproject.toml`` ``[tool.importlinter]`` keeps it so).  So the
two built-in runtimes are registered here by import path and imported only when a
job first asks for them — the way Beam resolves a runner name to its class — which
also keeps ``import engine`` from loading the Spark runtime a local job never uses.

``register_runtime`` adds another runtime (a test double, an experimental
runtime) by factory.  A factory takes the ``StreamExecutionEnvironment`` and
returns an object with ``execute(job_name, sinks, collect, from_savepoint)`` ->
:class:`engine.runtime.handle.JobExecutionResult` and ``submit(job_name, sinks,
collect, from_savepoint)`` -> :class:`engine.runtime.handle.JobHandle`.
"""

from __future__ import annotations

import importlib
import re
import threading
from typing import Any, Callable

from engine.errors import JobDefinitionError

#: name -> factory, or "package.module:attribute" of one, imported on first use
_RUNTIMES: dict[str, Callable[[Any], Any] | str] = {
    "local": "engine.runtime.local.runtime:LocalRuntime",
    "spark": "engine.runtime.spark.runtime:SparkRuntime",
}
_lock = threading.Lock()


def register_runtime(name: str, factory: Callable[[Any], Any] | str) -> None:
    """Make ``name`` usable in ``env.set_runtime(name)``; ``factory(env)`` builds the runtime for one job.

    ``factory`` is a callable or a ``"package.module:attribute"`` path to one.  Registering a
    name again replaces its factory (the built-ins included: a test may swap one)."""
    if not isinstance(name, str) or not re.fullmatch(r"[a-z][a-z0-9_-]*", name):
        raise JobDefinitionError("name", name, "must be a lower-case word (letters, digits, '_' or '-'), "
                                 "like 'local' or 'spark'")
    if isinstance(factory, str):
        if not re.fullmatch(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*", factory):
            raise JobDefinitionError("factory", factory, "must be a callable or 'package.module:attribute'")
    elif not callable(factory):
        raise JobDefinitionError("factory", factory, "must be a callable taking the StreamExecutionEnvironment "
                                 "or 'package.module:attribute'")
    with _lock:
        _RUNTIMES[name] = factory


def runtime_names() -> tuple[str, ...]:
    """The registered runtime names, sorted."""
    with _lock:
        return tuple(sorted(_RUNTIMES))


def check_runtime_name(name: Any) -> str:
    """``name`` if a runtime is registered under it, else a JobDefinitionError listing the registered ones."""
    names = runtime_names()
    if not isinstance(name, str) or name not in names:
        raise JobDefinitionError("runtime", name, f"must be one of {names} (register others with "
                                 "engine.runtime.registry.register_runtime)")
    return name


def create_runtime(name: str, env: Any) -> Any:
    """The runtime registered as ``name``, built for ``env`` (a ``StreamExecutionEnvironment``)."""
    check_runtime_name(name)
    with _lock:
        factory = _RUNTIMES[name]
    if isinstance(factory, str):
        module_name, attribute = factory.split(":")
        factory = getattr(importlib.import_module(module_name), attribute)
    return factory(env)
