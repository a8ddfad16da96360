"""The plugin's errors: Airflow fails a task on any of them with the message, which says what to do.

Control-API errors are the engine client's own (:mod:`engine.master.client`), so
the CLI, the hook and the triggers report a refused or unreachable master alike;
:class:`NoRestorePoint` is the restore-point choice's own (:mod:`checkpoints.restore_points`).
"""

from __future__ import annotations

from airflow.sdk.exceptions import AirflowException

from checkpoints.restore_points import NoRestorePoint
from engine.master.client import ControlApiError, ControlApiUnavailable

__all__ = [
    "ControlApiError",
    "ControlApiUnavailable",
    "JobAlreadyRunning",
    "NoRestorePoint",
    "SluiceAirflowError",
    "SnapshotValidationFailed",
]


class SluiceAirflowError(AirflowException):
    """Base of the plugin's own errors; messages say what happened, to which job, and what to do."""


class SnapshotValidationFailed(SluiceAirflowError):
    """A snapshot failed validation: restoring from it is refused."""


class JobAlreadyRunning(SluiceAirflowError):
    """A live master already runs the job: starting another would make two masters for one job."""
