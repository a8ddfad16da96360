"""What a job master runs: the job spec (``module:function``, imported, never stored: STYLE section 9), how it is
built into an environment, and the master's configuration (:class:`MasterConfig`, checked before the lease)."""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any

from engine.errors import JobDefinitionError
from engine.master.server import is_loopback


def split_job_spec(spec: str) -> tuple[str, str]:
    """``module:function`` as its two parts; an error names the spec and the accepted form."""
    module_name, sep, func_name = spec.partition(":")
    if not sep or not module_name or not func_name:
        raise JobDefinitionError("job", spec, "must be an import path 'package.module:function'",
                                 "e.g. engine.examples.purchases:build")
    return module_name, func_name


def load_job_spec(spec: str) -> Any:
    """Import ``module:function``; errors name the spec and the accepted form."""
    module_name, func_name = split_job_spec(spec)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise JobDefinitionError("job", spec, f"names a module that cannot be imported ({exc})") from exc
    fn = getattr(module, func_name, None)
    if not callable(fn):
        raise JobDefinitionError("job", spec, f"names no callable {func_name!r} in {module_name}")
    return fn


def build_job(env: Any, spec: str, params: dict[str, Any], output_dir: str | None) -> None:
    """Add the job of ``spec`` to ``env``, attaching file sinks for returned streams."""
    function = load_job_spec(spec)
    _check_params(spec, function, params)
    streams = function(env, **params)
    if isinstance(streams, dict) and streams:
        if output_dir is None:
            raise JobDefinitionError("output", None, f"is required: {spec} returns streams {sorted(streams)} "
                                     "without sinks", "Pass --output DIR (local or s3://)")
        for name, stream in streams.items():
            stream.write_files(f"{output_dir.rstrip('/')}/{name}", "jsonl")


def _check_params(spec: str, function: Any, params: dict[str, Any]) -> None:
    """Refuse a ``--param`` the job function cannot take, naming the ones it can, before it runs."""
    import inspect

    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):  # a builtin or a C callable: nothing to check against
        return
    accepted = list(signature.parameters.values())[1:]  # the first is the environment
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in accepted):
        return
    names = [p.name for p in accepted if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                                   inspect.Parameter.KEYWORD_ONLY)]
    for name in params:
        if name not in names:
            raise JobDefinitionError("param", name, f"is not a parameter of {spec}",
                                     f"It takes {', '.join(names)}" if names else "It takes no --param")


@dataclass
class MasterConfig:
    job_spec: str
    job_name: str
    params: dict[str, Any] = field(default_factory=dict)
    runtime: str = "local"
    parallelism: int | None = None
    checkpoint_interval_ms: int | None = 5_000
    storage_uri: str | None = None
    savepoint_dir: str | None = None
    retained_checkpoints: int = 3
    from_savepoint: str | None = None
    output_dir: str | None = None
    host: str = "127.0.0.1"
    port: int = 0
    token: str | None = None
    status_interval_ms: int = 2_000
    #: keep serving this long after the job ends, so a client polling a stop-with-savepoint
    #: operation (or a final status) gets its answer instead of a refused connection
    linger_after_end_s: float = 3.0
    runtime_options: dict[str, Any] = field(default_factory=dict)
    #: who started this master, recorded with the job's desired state (``airflow:<dag>/<run>/<task>``, ``cli``)
    started_by: str = "cli"
    #: the job's lease in storage (checkpoints.lease): how long it lasts without a renewal
    lease_ttl_ms: int = 15_000
    #: how long to wait for another master's lease to expire before refusing to start
    lease_wait_s: float = 0.0
    #: consecutive checkpoint failures tolerated when the job sets no number of its own, so a short
    #: storage outage costs checkpoints, not the job (with failures beyond it the job restarts)
    tolerable_checkpoint_failures: int = 3
    #: how long a master stopped by a signal waits for its job to stop before it gives up and exits with the
    #: lease left to expire; below Kubernetes' default grace period (30 s) before it sends SIGKILL
    suspend_timeout_s: float = 20.0
    #: status samples the job view keeps (one per status publication): memory stays bounded
    view_samples: int = 720

    def check(self) -> None:
        """Refuse a config that cannot run, naming the parameter, before anything touches storage (JobMaster.start
        calls it before it takes the lease; ``sluice run`` before it starts the master, to exit 2 naming the flag):
        a job spec that is no ``module:function``, and a control API bound off loopback without a token."""
        split_job_spec(self.job_spec)
        if not is_loopback(self.host) and not self.token:
            raise JobDefinitionError(
                "token", self.token,
                f"is required when the control API binds to a non-loopback address ({self.host!r})",
                "Pass --token or SLUICE_CONTROL_TOKEN, or bind to 127.0.0.1")
