"""Test harnesses for user and built-in window components (STYLE section 6)."""

from engine.testing.trigger_harness import TriggerTestHarness

__all__ = ["TriggerTestHarness"]
