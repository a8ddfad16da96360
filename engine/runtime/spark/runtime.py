"""The Spark runtime's entry: ``env.set_runtime("spark")`` runs a job's plan as epochs on a SparkSession.

:class:`SparkRuntime` reads and checks the runtime options, builds the physical plan and starts the job:
``start`` builds one attempt (engine/runtime/spark/job.py SparkJob: the epoch loop, see its module
docstring for what an epoch does) to run or step directly; ``execute`` and ``submit`` run the job through
engine/runtime/spark/job_run.py, which restarts a failed attempt from the latest completed checkpoint as the
restart strategy allows.  Checkpoints, savepoints and restore: engine/runtime/spark/checkpointing.py.
"""

from __future__ import annotations

from typing import Any

from engine.errors import JobDefinitionError
from engine.graph.plan import build_plan
from engine.graph.transformations import Transformation
from engine.histories import BoundedHistory
from engine.runtime.handle import JobExecutionResult
from engine.runtime.spark.job import CollectNode, SparkJob

DEFAULT_EPOCH_RECORDS = 10_000
DEFAULT_MASTER = "local[2]"


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise JobDefinitionError(name, value, "must be an int >= 1")
    return value


def _spark_conf(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) and k.startswith("spark.") for k in value):
        raise JobDefinitionError("spark_conf", value, "must be a dict of Spark settings (keys spark.*)",
                                 'e.g. {"spark.ui.enabled": "true"} (sluice run --spark-conf spark.ui.enabled=true)')
    return {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in value.items()}


class SparkRuntime:
    """``env.set_runtime("spark")``: runs the job's plan as epochs on a SparkSession.

    Runtime options (``env.set_runtime_option``): ``epoch_records`` (records per split per epoch,
    default 10 000), ``master`` (default ``local[2]``; ignored when a session is active),
    ``from_savepoint`` (alias ``restore_from``: a checkpoint or savepoint URI), ``storage_options`` (dict for
    ``checkpoints.open_store``, e.g. ``{"endpoint_url": ...}``), ``async_snapshots`` (default True: a checkpoint's
    state upload overlaps the next epoch, engine/runtime/spark/checkpointing.py), ``preaggregation`` (default True: built-in
    min/max, and a sum the window's columnar layout does not take, folded in Spark SQL first,
    engine/runtime/spark/preaggregation.py), ``column_fold`` (default True: a column-form window folded as Arrow tables
    from the reading task to the sink, engine/runtime/spark/column_fold.py; False: its window stage runs the
    operator), ``pipeline_epochs`` (default True: ``run`` gives epoch n's window stages and epoch n+1's
    reads one Spark job, engine/runtime/spark/job.py "Pipelined epochs"), ``snapshot_in_window_tasks`` (default
    True: a periodic checkpoint is triggered when an epoch starts and each window task writes its state files at the
    epoch's end, in the epoch's own Spark job; False: a separate upload job after the barrier,
    engine/runtime/spark/checkpointing.py "Window tasks write their state"), ``epoch_shape`` (default ``"rdd"``:
    each epoch's stages placed on the RDD layer, engine/runtime/spark/epoch_rdds.py; ``"dataframe"``: as DataFrames and
    Spark SQL, engine/runtime/spark/epoch_frames.py), ``max_epochs`` (stop after that
    many epochs: for unbounded sources in tests and benchmarks), ``epoch_interval_ms`` (default 0: the
    next epoch starts as soon as one ends; N > 0 works like Structured Streaming's processing-time
    trigger: an epoch starts no sooner than N ms after the previous one started, at once if that one
    took longer, so an idle unbounded job costs one epoch per N ms instead of a busy loop; a control
    request — savepoint, stop, cancel — cuts the wait short), ``max_checkpoint_history`` and ``max_dead_letters``
    (what the driver keeps in memory, engine/histories.py), ``spark_conf`` (``{"spark.ui.enabled":
    "true", ...}``: settings for the session this runtime starts, over Sluice's defaults; ``sluice run
    --spark-conf``; a session already active keeps its settings).  engine/runtime/options.py lists them all.
    """

    def __init__(self, env: Any) -> None:
        self.env = env
        opts = env.get_runtime_options()
        self.epoch_records = _positive_int("epoch_records", opts.get("epoch_records", DEFAULT_EPOCH_RECORDS))
        self.master = opts.get("master", DEFAULT_MASTER)
        self.restore_from = opts.get("from_savepoint", opts.get("restore_from"))
        self.storage_options = dict(opts.get("storage_options") or {})
        self.spark_conf = _spark_conf(opts.get("spark_conf"))
        self.max_epochs = opts.get("max_epochs")
        self.async_snapshots = opts.get("async_snapshots", True)
        if not isinstance(self.async_snapshots, bool):
            raise JobDefinitionError("async_snapshots", self.async_snapshots, "must be a bool")
        self.preaggregation = opts.get("preaggregation", True)
        if not isinstance(self.preaggregation, bool):
            raise JobDefinitionError("preaggregation", self.preaggregation, "must be a bool")
        self.column_fold = opts.get("column_fold", True)
        if not isinstance(self.column_fold, bool):
            raise JobDefinitionError("column_fold", self.column_fold, "must be a bool")
        self.pipeline_epochs = opts.get("pipeline_epochs", True)
        if not isinstance(self.pipeline_epochs, bool):
            raise JobDefinitionError("pipeline_epochs", self.pipeline_epochs, "must be a bool")
        self.snapshot_in_window_tasks = opts.get("snapshot_in_window_tasks", True)
        if not isinstance(self.snapshot_in_window_tasks, bool):
            raise JobDefinitionError("snapshot_in_window_tasks", self.snapshot_in_window_tasks, "must be a bool")
        self.epoch_shape = opts.get("epoch_shape", "rdd")
        if self.epoch_shape not in ("dataframe", "rdd"):
            raise JobDefinitionError("epoch_shape", self.epoch_shape,
                                     "must be 'dataframe' (Spark SQL) or 'rdd' (engine/runtime/spark/epoch_rdds.py)")
        if self.max_epochs is not None:
            _positive_int("max_epochs", self.max_epochs)
        self.epoch_interval_ms = opts.get("epoch_interval_ms", 0)
        if isinstance(self.epoch_interval_ms, bool) or not isinstance(self.epoch_interval_ms, int) \
                or self.epoch_interval_ms < 0:
            raise JobDefinitionError("epoch_interval_ms", self.epoch_interval_ms,
                                     "must be an int >= 0 (ms between epoch starts; 0 runs epochs back to back)")

    def start(self, job_name: str, sinks: list[Transformation], collect: list[Transformation],
              from_savepoint: str | None = None, *, collected: dict[int, list[Any]] | None = None,
              dead_letters: BoundedHistory[dict[str, Any]] | None = None, restore_snapshot: Any = None) -> SparkJob:
        """Build one attempt of the job without running it: ``run()`` it, or ``step()`` it epoch by epoch.

        ``collected`` (collect node id -> list) and ``dead_letters`` (a BoundedHistory) are those of an earlier
        attempt to go on filling (engine/runtime/spark/job_run.py); by default they are new.  ``restore_snapshot``:
        ``from_savepoint`` already loaded and verified (``checkpoints.load_snapshot``), so it is not read twice.
        """
        collected = {} if collected is None else collected
        roots: list[Transformation] = list(sinks)
        for node in collect:
            target = collected.setdefault(node.id, [])
            roots.append(CollectNode(name="Collect", inputs=[node], sink=target))
        plan = build_plan(roots, self.env.get_parallelism(), self.env.get_max_parallelism(),
                          chaining=self.env.is_chaining_enabled())
        return SparkJob(self, plan, job_name, collected, from_savepoint or self.restore_from, dead_letters,
                        restore_snapshot)

    def submit(self, job_name: str, sinks: list[Transformation], collect: list[Transformation] = (),  # type: ignore[assignment]
               from_savepoint: str | None = None) -> Any:
        """Run the job on its own thread, restarting per the restart strategy; returns its control handle
        (engine/runtime/spark/job_run.py SparkJobRun)."""
        from engine.runtime.spark.job_run import SparkJobRun

        self.check_job(sinks, collect)
        run = SparkJobRun(self, job_name, list(sinks), list(collect), from_savepoint)
        run.run_in_background()
        return run

    def execute(self, job_name: str, sinks: list[Transformation], collect: list[Transformation],
                from_savepoint: str | None = None) -> JobExecutionResult:
        """Run the job to its end, restarting from its latest completed checkpoint per the restart strategy."""
        from engine.runtime.spark.job_run import SparkJobRun

        self.check_job(sinks, collect)
        return SparkJobRun(self, job_name, list(sinks), list(collect), from_savepoint).run()

    def check_job(self, sinks: list[Transformation], collect: list[Transformation] = ()) -> None:  # type: ignore[assignment]
        """Refuse, before any Spark session starts, a job this runtime cannot run (the routes the job would
        build, engine/runtime/spark/chains.py, decide it; a JobDefinitionError names what is not supported)."""
        from engine.runtime.spark.chains import build_routes

        roots: list[Transformation] = list(sinks) + [CollectNode(name="Collect", inputs=[n], sink=[]) for n in collect]
        plan = build_plan(roots, self.env.get_parallelism(), self.env.get_max_parallelism(),
                          chaining=self.env.is_chaining_enabled())
        build_routes(plan, {r.id for r in roots}, self.preaggregation)
