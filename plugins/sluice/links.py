"""Extra links on the Sluice operators: the job's page in the plugin, and the Data Docs a validation wrote.

Airflow 3 computes a link in the worker when the task ends (``get_link`` on the
rendered operator) and keeps it as an XCom the UI shows as a button; the classes are
registered by :class:`sluice.plugin.SluicePlugin` so the API server can name them.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from airflow.sdk import BaseOperatorLink

URL_PREFIX = "/sluice"


def job_page(deployment: str, prefix: str = URL_PREFIX) -> str:
    """The deployment's page; ``prefix`` is where the app is mounted (the request's root path inside it)."""
    return f"{prefix}/jobs/{quote(deployment, safe='')}"


def data_docs_page(deployment: str, path: str, prefix: str = URL_PREFIX) -> str:
    """One file of the deployment's Data Docs, as the page serves it."""
    return f"{job_page(deployment, prefix)}/data-docs/{quote(path)}"


class SluiceJobPageLink(BaseOperatorLink):
    """The deployment's page (health, checkpoints, savepoints) in the Sluice UI."""

    name = "Sluice job page"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        deployment = getattr(operator, "deployment", None)
        return job_page(str(deployment)) if deployment else ""


class SluiceDataDocsLink(BaseOperatorLink):
    """The Data Docs of the snapshot the task validated, served by the Sluice UI."""

    name = "Data Docs"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        return getattr(operator, "data_docs_link", None) or ""
