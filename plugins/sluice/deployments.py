"""Deployments: one job spec per deployment, read from a YAML file when a task runs, never at parse time.

A DAG names a deployment (a Param, ``purchases`` by default); operators look it
up here when they execute, so DAG files stay free of I/O (STYLE section 8).
The file is ``$SLUICE_DEPLOYMENTS_FILE`` or ``<dags_folder>/sluice_deployments.yaml``::

    purchases:
      conn_id: sluice_purchases          # SluiceHook connection: control API, storage, AWS conn
      job_id: purchases                   # stable across restarts: storage folder and status document
      job: engine.examples.purchases:build_unbounded
      runtime: local                      # or spark (spark-submit when spark_conn_id is set)
      parallelism: 2
      retained: 3
      checkpoint_interval_ms: 5000
      output: /var/lib/sluice/purchases/output
      params: {events_per_second: 50}
      health: {max_heartbeat_age_s: 30, max_checkpoint_age_s: 120, max_failed_checkpoints: 3, max_lag_s: 600}
      savepoint_policy: {max_count: 5, max_age_hours: 168}
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sluice.hook import SluiceError

DEFAULT_HEALTH = {"max_heartbeat_age_s": 30.0, "max_checkpoint_age_s": 300.0, "max_failed_checkpoints": 3,
                  "max_lag_s": None}


@dataclass(frozen=True)
class Deployment:
    """One deployment's job spec (see the module docstring for the file format)."""

    name: str
    conn_id: str
    job_id: str
    job: str
    runtime: str = "local"
    parallelism: int | None = None
    retained: int = 3
    checkpoint_interval_ms: int | None = 5_000
    output: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    spark_conn_id: str | None = None
    spark_conf: dict[str, Any] = field(default_factory=dict)
    command: tuple[str, ...] | None = None  # how to start a master; default: this interpreter's ``sluice``
    health: dict[str, Any] = field(default_factory=dict)
    savepoint_policy: dict[str, Any] = field(default_factory=dict)
    startup_timeout_s: float = 180.0

    def health_thresholds(self) -> dict[str, Any]:
        return {**DEFAULT_HEALTH, **self.health}

    @staticmethod
    def from_dict(name: str, doc: dict[str, Any]) -> Deployment:
        if not isinstance(doc, dict):
            raise SluiceError(f"deployment {name!r} must be a mapping, got {type(doc).__name__}")
        missing = [k for k in ("conn_id", "job_id", "job") if not doc.get(k)]
        if missing:
            raise SluiceError(f"deployment {name!r} lacks {missing}; see plugins/sluice/deployments.py")
        known = set(Deployment.__dataclass_fields__) - {"name"}
        unknown = sorted(set(doc) - known)
        if unknown:
            raise SluiceError(f"deployment {name!r} has unknown keys {unknown}; known: {sorted(known)}")
        runtime = doc.get("runtime", "local")
        if runtime not in ("local", "spark"):
            raise SluiceError(f"deployment {name!r}: runtime must be 'local' or 'spark', got {runtime!r}")
        values = dict(doc)
        if values.get("command") is not None:
            values["command"] = tuple(str(c) for c in values["command"])
        return Deployment(name=name, **values)


def deployments_file() -> Path:
    configured = os.environ.get("SLUICE_DEPLOYMENTS_FILE")
    if configured:
        return Path(configured)
    from airflow.configuration import conf

    return Path(conf.get("core", "dags_folder")) / "sluice_deployments.yaml"


def load_deployments(path: str | os.PathLike[str] | None = None) -> dict[str, Deployment]:
    import yaml

    file = Path(path) if path else deployments_file()
    if not file.exists():
        raise SluiceError(f"no deployments file at {file}; set SLUICE_DEPLOYMENTS_FILE or create it")
    doc = yaml.safe_load(file.read_text()) or {}
    return {name: Deployment.from_dict(name, spec) for name, spec in doc.items()}


def load_deployment(name: str, path: str | os.PathLike[str] | None = None) -> Deployment:
    deployments = load_deployments(path)
    if name not in deployments:
        raise SluiceError(f"no deployment {name!r} in {path or deployments_file()}; known: {sorted(deployments)}")
    return deployments[name]
