"""Sensors: poke cheaply (one status read), defer through SluiceJobConditionTrigger when asked."""

from sluice.sensors.job import SluiceCheckpointCompletedSensor, SluiceJobHealthySensor

__all__ = ["SluiceCheckpointCompletedSensor", "SluiceJobHealthySensor"]
