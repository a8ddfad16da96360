"""TaskFlow tasks the DAGs share."""

from __future__ import annotations

from typing import Any

from airflow.sdk import task


@task(task_id="deployments")
def deployments(params: dict[str, Any] | None = None) -> list[str]:
    """The deployments a scheduled run looks after: the ``deployment`` param alone, or every one in the file.

    Read when the run starts, never at parse time; each name becomes one mapped task group."""
    from sluice.deployments import deployment_names

    return deployment_names((params or {}).get("deployment"))
