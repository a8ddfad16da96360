"""Triggers the plugin's deferrable operators and sensors hand their waiting to (Airflow's triggerer)."""

from sluice.triggers.condition import SluiceJobConditionTrigger
from sluice.triggers.operation import SluiceOperationTrigger

__all__ = ["SluiceJobConditionTrigger", "SluiceOperationTrigger"]
