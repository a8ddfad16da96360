"""The plugin's operators: one transaction each, idempotent, configured by a deployment name or conn id."""

from sluice.operators.alert import SluiceAlertOperator
from sluice.exceptions import JobAlreadyRunning
from sluice.operators.deploy import SluiceDeployJobOperator
from sluice.operators.desired_state import SluiceCheckDesiredStateOperator
from sluice.operators.restore import SluiceRestoreOperator
from sluice.operators.savepoint import SluiceStopJobOperator, SluiceTriggerSavepointOperator
from sluice.operators.storage import (
    SluiceApplySavepointPolicyOperator,
    SluiceCleanOrphansOperator,
    SluiceRetentionAuditOperator,
    SluiceValidateSnapshotOperator,
)

__all__ = [
    "JobAlreadyRunning",
    "SluiceAlertOperator",
    "SluiceApplySavepointPolicyOperator",
    "SluiceCheckDesiredStateOperator",
    "SluiceCleanOrphansOperator",
    "SluiceDeployJobOperator",
    "SluiceRestoreOperator",
    "SluiceRetentionAuditOperator",
    "SluiceStopJobOperator",
    "SluiceTriggerSavepointOperator",
    "SluiceValidateSnapshotOperator",
]
