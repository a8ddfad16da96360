"""``RuntimeExecutionMode``: STREAMING, BATCH or AUTOMATIC (PyFlink's ``pyflink.datastream.RuntimeExecutionMode``).

``env.set_runtime_mode(RuntimeExecutionMode.BATCH)`` runs a bounded job the way Flink's BATCH mode does
(engine/operators/batch_input.py): keyed operators see each key's records in timestamp order with no
progressive watermark, timers fire at the end of input, rolling aggregates emit only their final value, no
record is late, and no checkpoint is taken.  AUTOMATIC is BATCH when every source is bounded, else STREAMING.

BATCH runs on the local runtime; the Spark runtime refuses it when the job is built (it runs the same bounded
job in STREAMING mode, whose final window results are the same when nothing arrives late).
"""

from __future__ import annotations

from enum import Enum
from typing import Iterable

from engine.errors import JobDefinitionError
from engine.graph.transformations import SourceTransformation, Transformation, topological_order

__all__ = ["RuntimeExecutionMode", "resolve_runtime_mode"]


class RuntimeExecutionMode(Enum):
    STREAMING = 0
    BATCH = 1
    AUTOMATIC = 2


def resolve_runtime_mode(mode: RuntimeExecutionMode, roots: Iterable[Transformation], runtime: str) -> RuntimeExecutionMode:
    """STREAMING or BATCH for a job whose sinks are ``roots``; refuses BATCH with an unbounded source or on Spark.

    The environment calls it once per job, when it hands the job to a runtime (StreamExecutionEnvironment.is_batch
    gives the runtime that answer)."""
    if mode is RuntimeExecutionMode.STREAMING:
        return mode
    unbounded = [n for n in topological_order(list(roots))
                 if isinstance(n, SourceTransformation) and not n.source.is_bounded()]
    if mode is RuntimeExecutionMode.AUTOMATIC:
        if unbounded:
            return RuntimeExecutionMode.STREAMING
    elif unbounded:
        raise JobDefinitionError(
            "runtime_mode", mode.name,
            f"needs bounded sources, and {unbounded[0].name!r} is unbounded (a monitored folder never ends)",
            "Run it with RuntimeExecutionMode.STREAMING, or read the folder once (no monitor_interval)")
    if runtime != "local":
        raise JobDefinitionError(
            "runtime_mode", mode.name, f"BATCH execution runs on the local runtime, not on {runtime!r}",
            "Use RuntimeExecutionMode.STREAMING on Spark: a bounded job gives the same final window results "
            "there when no record is late")
    return RuntimeExecutionMode.BATCH
