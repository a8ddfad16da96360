"""Deployments: one job spec per deployment, read from a YAML file when a task runs, never at parse time.

A DAG names a deployment (a Param, or one mapped task per entry); operators look
it up here when they execute, so DAG files stay free of I/O (STYLE section 8).
The file is ``$SLUICE_DEPLOYMENTS_FILE`` or ``<dags_folder>/sluice_deployments.yaml``::

    purchases:
      conn_id: sluice_purchases          # SluiceHook connection: control API, storage, AWS conn
      job_id: purchases                   # stable across restarts: storage folder and status document
      job: engine.examples.purchases:build
      state: running                      # desired: running | suspended (supervision leaves a suspended job alone)
      upgrade_mode: savepoint             # savepoint | last-state | stateless (how a restart or restore resumes)
      runtime: local                      # or spark (spark-submit when spark_conn_id is set)
      parallelism: 2
      retained: 3
      checkpoint_interval_ms: 5000
      output: /var/lib/sluice/purchases/output
      params: {events_per_second: 50}
      health: {max_heartbeat_age_s: 30, max_checkpoint_age_s: 120, max_failed_checkpoints: 3, max_lag_s: 600}
      savepoint_policy: {max_count: 5, max_age_hours: 168}

The file is checked by a strict typed model: an unknown key (``max_cnt``), a
wrong type (``parallelism: "two"``) or a value out of range is an error that
names the deployment, the key and the rule, when the first task reads the file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, ValidationError

from sluice.exceptions import SluiceAirflowError

DEFAULT_HEALTH = {"max_heartbeat_age_s": 30.0, "max_checkpoint_age_s": 300.0, "max_failed_checkpoints": 3,
                  "max_lag_s": None}


class DeploymentError(SluiceAirflowError):
    """The deployments file is missing, unreadable, or an entry breaks its schema (the message names the key)."""


#: how a job resumes after a restart or a restore (the Flink Kubernetes Operator's ``upgradeMode``):
#: ``savepoint`` and ``last-state`` resume from the newest restorable checkpoint or savepoint (a planned
#: stop takes a savepoint under ``savepoint``, cancels under ``last-state``); ``stateless`` starts empty
UpgradeMode = Literal["savepoint", "last-state", "stateless"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


Seconds = StrictInt | StrictFloat


class HealthThresholds(_Strict):
    """When supervision calls a job unhealthy; None switches a check off."""

    max_heartbeat_age_s: Seconds | None = Field(30.0, gt=0)
    max_checkpoint_age_s: Seconds | None = Field(300.0, gt=0)
    max_failed_checkpoints: StrictInt | None = Field(3, ge=0)
    max_lag_s: Seconds | None = Field(None, gt=0)


class SavepointPolicy(_Strict):
    """Which savepoints the scheduled-savepoint DAG keeps (the newest validated one is always kept)."""

    max_count: StrictInt | None = Field(None, ge=1)
    max_age_hours: Seconds | None = Field(None, gt=0)


class Deployment(_Strict):
    """One deployment's job spec (see the module docstring for the file format)."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")
    conn_id: str = Field(min_length=1)
    job_id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")
    job: str = Field(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$", description="import path module:function")
    state: Literal["running", "suspended"] = "running"
    upgrade_mode: UpgradeMode = "savepoint"
    runtime: Literal["local", "spark"] = "local"
    parallelism: StrictInt | None = Field(None, ge=1)
    retained: StrictInt = Field(3, ge=1)
    checkpoint_interval_ms: StrictInt | None = Field(5_000, ge=100)
    output: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    spark_conn_id: str | None = None
    #: Spark settings: spark-submit's ``--conf`` with a spark_conn_id, else ``sluice run --spark-conf`` for the
    #: session the master's spark runtime starts (e.g. ``spark.ui.enabled: true``)
    spark_conf: dict[str, str | StrictInt | StrictFloat | StrictBool] = Field(default_factory=dict)
    #: how to start a master; default: this interpreter's ``sluice``
    command: tuple[str, ...] | None = None
    health: HealthThresholds = Field(default_factory=HealthThresholds)
    savepoint_policy: SavepointPolicy = Field(default_factory=SavepointPolicy)
    startup_timeout_s: Seconds = Field(180.0, gt=0)

    def health_thresholds(self) -> dict[str, Any]:
        return self.health.model_dump()

    def is_suspended(self) -> bool:
        return self.state == "suspended"

    @staticmethod
    def from_dict(name: str, doc: Any) -> Deployment:
        if not isinstance(doc, dict):
            raise DeploymentError(f"deployment {name!r} must be a mapping of keys to values, got "
                                  f"{type(doc).__name__}: {doc!r}")
        values = dict(doc)
        if isinstance(values.get("command"), list):
            values["command"] = tuple(values["command"])
        try:
            return Deployment(name=name, **values)
        except ValidationError as exc:
            raise DeploymentError(f"deployment {name!r} in the deployments file is invalid:\n"
                                  + "\n".join(_describe(e) for e in exc.errors())) from None


def _describe(error: Any) -> str:
    where = ".".join(str(p) for p in error["loc"])
    if error["type"] == "extra_forbidden":
        known = ", ".join(sorted(f for f in Deployment.model_fields if f != "name"))
        return f"  - {where}: unknown key (known keys: {known}; health and savepoint_policy have their own)"
    return f"  - {where}: {error['msg']} (got {error.get('input')!r})"


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
        raise DeploymentError(f"no deployments file at {file}; set SLUICE_DEPLOYMENTS_FILE or create it "
                              "(format: plugins/sluice/deployments.py)")
    try:
        doc = yaml.safe_load(file.read_text()) or {}
    except yaml.YAMLError as exc:
        raise DeploymentError(f"the deployments file {file} is not valid YAML: {exc}") from None
    if not isinstance(doc, dict):
        raise DeploymentError(f"the deployments file {file} must map deployment names to specs, "
                              f"found {type(doc).__name__}")
    return {str(name): Deployment.from_dict(str(name), spec) for name, spec in doc.items()}


def load_deployment(name: str, path: str | os.PathLike[str] | None = None) -> Deployment:
    deployments = load_deployments(path)
    if name not in deployments:
        raise DeploymentError(f"no deployment {name!r} in {path or deployments_file()}; known: {sorted(deployments)}")
    return deployments[name]


def deployment_names(selected: str | None = None) -> list[str]:
    """The deployments a scheduled DAG run looks after: ``selected`` alone (checked to exist), or every one.

    Read when the run starts, never at parse time; each name becomes one mapped task group."""
    deployments = load_deployments()
    if selected not in (None, "", "None"):
        if selected not in deployments:
            raise DeploymentError(f"no deployment {selected!r} in {deployments_file()}; known: {sorted(deployments)}")
        return [str(selected)]
    return sorted(deployments)
