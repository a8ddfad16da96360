"""What every Sluice operator shares: resolving its deployment, and a deterministic trigger id per task."""

from __future__ import annotations

import hashlib
from functools import cached_property
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowException

from sluice.deployments import Deployment, load_deployment
from sluice.hook import SluiceHook
from sluice.links import SluiceJobPageLink


def task_trigger_id(context: Any, purpose: str) -> str:
    """The same id for every try of one task instance, a different one for another run or task.

    A retried savepoint task sends the same id, and the master answers with the
    operation it already started instead of a second savepoint (STYLE section 8)."""
    ti = context["ti"]
    raw = f"{ti.dag_id}/{ti.run_id}/{ti.task_id}/{getattr(ti, 'map_index', -1)}/{purpose}"
    return "af-" + hashlib.sha256(raw.encode()).hexdigest()[:32]


def as_bool(name: str, value: Any) -> bool:
    """A rendered template's bool: a real bool, or the text a non-native template renders (``True``/``false``)."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no", "none", ""):
        return False
    raise AirflowException(f"{name} must be true or false, got {value!r}")


class SluiceBaseOperator(BaseOperator):
    """Resolves the deployment (when named) and the hook; subclasses do one transaction each.

    :param deployment: name of a deployment in the deployments file (templated), which
        gives ``conn_id``, ``job_id`` and the job spec.  Read when the task runs.
    :param sluice_conn_id: the SluiceHook connection; overrides the deployment's.
    :param job_id: the job; overrides the deployment's (and the connection's ``job_id``).
    """

    template_fields: tuple[str, ...] = ("deployment", "sluice_conn_id", "job_id")
    ui_color = "#cfe8fc"
    operator_extra_links = (SluiceJobPageLink(),)

    def __init__(self, *, deployment: str | None = None, sluice_conn_id: str | None = None,
                 job_id: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.deployment = deployment
        self.sluice_conn_id = sluice_conn_id
        self.job_id = job_id

    @cached_property
    def spec(self) -> Deployment | None:
        return load_deployment(self.deployment) if self.deployment else None

    @property
    def conn_id(self) -> str:
        conn_id = self.sluice_conn_id or (self.spec.conn_id if self.spec else None)
        if not conn_id:
            raise ValueError(f"{self.task_id}: give deployment= or sluice_conn_id=")
        return conn_id

    @cached_property
    def hook(self) -> SluiceHook:
        return SluiceHook(self.conn_id)

    @property
    def resolved_job_id(self) -> str:
        return self.hook.job_id(self.job_id or (self.spec.job_id if self.spec else None))
