"""``StreamExecutionEnvironment``: the entry point of a job (PyFlink names).

It owns the job-wide settings (parallelism, max parallelism = number of key
groups, runtime, checkpointing, time characteristic, clock) and the sinks
registered so far; ``execute`` hands the graph to the chosen runtime.
"""

from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import Any, Iterable, Iterator, Sequence

from engine.api.datastream import DataStream, TimeCharacteristic
from engine.api.configuration import Configuration, apply_configuration
from engine.api.execution_config import ExecutionConfig
from engine.api.execution_mode import RuntimeExecutionMode, resolve_runtime_mode
from engine.api.job_client import JobClient
from engine.api.state_backend import HashMapStateBackend, StateBackend
from engine.api.restart import RestartStrategyConfiguration
from engine.api.typeinfo import check_type_info, convert_collection
from engine.checkpointing.config import CheckpointConfig, CheckpointingMode, validate_checkpoint_storage_dir
from engine.clock import SystemClock
from engine.durations import positive_millis
from engine.errors import JobDefinitionError
from engine.graph.transformations import SinkTransformation, SourceTransformation, Transformation
from engine.io.collection_source import CollectionSource
from engine.io.file_source import FileSource
from engine.io.source import Source
from engine.runtime.handle import JobExecutionResult
from engine.runtime.registry import check_runtime_name, create_runtime
from engine.state.key_groups import DEFAULT_MAX_PARALLELISM, UPPER_BOUND_MAX_PARALLELISM
from engine.watermarks.strategy import WatermarkStrategy

_log = logging.getLogger(__name__)


class StreamExecutionEnvironment:
    def __init__(self) -> None:
        self._parallelism = 1
        self._max_parallelism = DEFAULT_MAX_PARALLELISM
        self._runtime = "local"
        self._time_characteristic = TimeCharacteristic.EventTime
        self._checkpoint_config = CheckpointConfig()
        self._sinks: list[SinkTransformation] = []
        self._clock: Any = None
        self._runtime_options: dict[str, Any] = {}
        self._restart_strategy: Any = None
        self._runtime_mode = RuntimeExecutionMode.STREAMING
        #: the resolved mode of the job being handed to a runtime (set by _handing_over, None otherwise)
        self._job_runtime_mode: RuntimeExecutionMode | None = None

    @staticmethod
    def get_execution_environment(config: Configuration | dict[str, Any] | None = None) -> StreamExecutionEnvironment:
        """A new environment; ``config``: PyFlink's :class:`Configuration` (the Flink keys Sluice honours are
        applied, engine/api/configuration.py), or a dict of Sluice runtime options (``set_runtime_option``)."""
        env = StreamExecutionEnvironment()
        if isinstance(config, Configuration):
            return env.configure(config)
        if config is not None and not isinstance(config, dict):
            raise JobDefinitionError("config", config, "must be a Configuration or a dict of runtime options")
        for key, value in (config or {}).items():
            env.set_runtime_option(key, value)
        return env

    def configure(self, configuration: Configuration) -> StreamExecutionEnvironment:
        """Apply PyFlink's :class:`Configuration` (the keys of engine/api/configuration.py's ``APPLIED``)."""
        if not isinstance(configuration, Configuration):
            raise JobDefinitionError("configuration", configuration, "must be a Configuration")
        apply_configuration(self, configuration)
        return self

    # -- settings ------------------------------------------------------------------------------
    def set_parallelism(self, parallelism: int) -> StreamExecutionEnvironment:
        if isinstance(parallelism, bool) or not isinstance(parallelism, int) or parallelism < 1:
            raise JobDefinitionError("parallelism", parallelism, "must be an int >= 1")
        self._parallelism = parallelism
        return self

    def get_parallelism(self) -> int:
        return self._parallelism

    def set_max_parallelism(self, max_parallelism: int) -> StreamExecutionEnvironment:
        """The number of key groups: fixed for the life of the job's state (rescaling works within it)."""
        if isinstance(max_parallelism, bool) or not isinstance(max_parallelism, int) or not (
            1 <= max_parallelism <= UPPER_BOUND_MAX_PARALLELISM
        ):
            raise JobDefinitionError("max_parallelism", max_parallelism,
                                     f"must be an int between 1 and {UPPER_BOUND_MAX_PARALLELISM}")
        self._max_parallelism = max_parallelism
        return self

    def get_max_parallelism(self) -> int:
        return self._max_parallelism

    def set_runtime(self, runtime: str) -> StreamExecutionEnvironment:
        self._runtime = check_runtime_name(runtime)
        return self

    def get_runtime(self) -> str:
        return self._runtime

    def set_runtime_option(self, key: str, value: Any) -> StreamExecutionEnvironment:
        """Runtime-specific settings, e.g. ``bundle_size`` (records a source reads per step)."""
        self._runtime_options[key] = value
        return self

    def get_runtime_options(self) -> dict[str, Any]:
        return dict(self._runtime_options)

    def set_stream_time_characteristic(self, characteristic: str) -> StreamExecutionEnvironment:
        allowed = (TimeCharacteristic.EventTime, TimeCharacteristic.ProcessingTime, TimeCharacteristic.IngestionTime)
        if characteristic not in allowed:
            raise JobDefinitionError("characteristic", characteristic, f"must be one of {allowed}")
        self._time_characteristic = characteristic
        return self

    def get_stream_time_characteristic(self) -> str:
        return self._time_characteristic

    def set_runtime_mode(self, mode: RuntimeExecutionMode) -> StreamExecutionEnvironment:
        """STREAMING (the default), BATCH or AUTOMATIC (engine/api/execution_mode.py)."""
        if not isinstance(mode, RuntimeExecutionMode):
            raise JobDefinitionError("runtime_mode", mode, "must be a RuntimeExecutionMode",
                                     "env.set_runtime_mode(RuntimeExecutionMode.BATCH)")
        self._runtime_mode = mode
        return self

    def get_runtime_mode(self) -> RuntimeExecutionMode:
        return self._runtime_mode

    def is_batch(self, roots: list[Any]) -> bool:
        """Whether the job ending in ``roots`` runs in BATCH mode (AUTOMATIC resolved; refusals raised).

        A runtime asks while it builds a job.  For a job this environment is handing over (``execute``,
        ``execute_async``, ``execute_and_collect``) the answer is the one resolved then, once; a job given to a
        runtime directly is resolved here."""
        mode = self._job_runtime_mode
        if mode is None:
            mode = resolve_runtime_mode(self._runtime_mode, roots, self._runtime)
        return mode is RuntimeExecutionMode.BATCH

    def set_clock(self, clock: Any) -> StreamExecutionEnvironment:
        """Inject the processing-time clock (a ManualClock makes processing-time jobs exact in tests)."""
        if not hasattr(clock, "now_ms"):
            raise JobDefinitionError("clock", clock, "must have a now_ms() method (engine.clock.ManualClock)")
        self._clock = clock
        return self

    def get_clock(self) -> Any:
        if self._clock is None:
            self._clock = SystemClock()
        return self._clock

    def set_state_backend(self, state_backend: StateBackend) -> StreamExecutionEnvironment:
        """PyFlink's ``set_state_backend``: Sluice's keyed state is ``HashMapStateBackend``'s on every runtime
        (engine/api/state_backend.py says what ``EmbeddedRocksDBStateBackend`` means here)."""
        if not isinstance(state_backend, StateBackend):
            raise JobDefinitionError("state_backend", state_backend, "must be a HashMapStateBackend or an "
                                     "EmbeddedRocksDBStateBackend (from engine)")
        self._state_backend = state_backend
        return self

    def get_state_backend(self) -> StateBackend:
        return getattr(self, "_state_backend", None) or HashMapStateBackend()

    def set_restart_strategy(self, restart_strategy: Any) -> StreamExecutionEnvironment:
        """``RestartStrategies.fixed_delay_restart(attempts, delay)``, ``exponential_delay_restart(...)`` or
        ``no_restart()`` (the engine's default; a job master defaults a checkpointed job to exponential delay)."""
        if not isinstance(restart_strategy, RestartStrategyConfiguration):
            raise JobDefinitionError("restart_strategy", restart_strategy,
                                     "must come from RestartStrategies.fixed_delay_restart(...), "
                                     "exponential_delay_restart(...) or no_restart()")
        self._restart_strategy = restart_strategy
        return self

    def get_restart_strategy(self) -> Any:
        return self._restart_strategy

    def enable_checkpointing(self, interval_ms: int, mode: Any = None) -> StreamExecutionEnvironment:
        self._checkpoint_config.set_checkpoint_interval(interval_ms)
        self._checkpoint_config.set_checkpointing_mode(mode or CheckpointingMode.EXACTLY_ONCE)
        return self

    def get_checkpoint_config(self) -> Any:
        return self._checkpoint_config

    def is_checkpointing_enabled(self) -> bool:
        return self._checkpoint_config.is_checkpointing_enabled()

    # -- sources -------------------------------------------------------------------------------
    def from_collection(self, collection: Iterable[Any], type_info: Any = None) -> DataStream:
        """A bounded source of ``collection``'s items.  ``type_info`` (PyFlink's TypeInformation of the
        items) converts them as PyFlink's source does (a ``Types.ROW`` item becomes a ``Row``, a ``Types.FLOAT``
        field a 32-bit float; engine/api/typeinfo.py) and shapes ``print()``; an item that does not fit is
        refused here, naming ``collection``."""
        check_type_info(type_info, "type_info")
        items = convert_collection(list(collection), type_info)
        stream = self.from_source(CollectionSource(items), source_name="Collection Source")
        stream._node.output_type = type_info
        return stream

    def from_source(self, source: Any, watermark_strategy: Any = None, source_name: str = "Source") -> DataStream:
        if not isinstance(source, Source):
            raise JobDefinitionError("source", source, "must be an engine Source (e.g. GeneratorSource, FileSource)")
        if watermark_strategy is not None:
            if not isinstance(watermark_strategy, WatermarkStrategy):
                raise JobDefinitionError("watermark_strategy", watermark_strategy, "must be a WatermarkStrategy")
        node = SourceTransformation(name=source_name, source=source, watermark_strategy=watermark_strategy)
        return DataStream(self, node)

    def read_files(self, path: str, format: str = "parquet", monitor_interval: Any = None, *,
                   infer_types: bool = True) -> DataStream:
        """Read a local or ``s3://`` folder, one split per file; records are dicts.

        ``monitor_interval`` (a ``Duration``, a ``timedelta`` or ms): keep reading the folder as files land,
        listing it again at that interval (Flink's ``FileSource...monitorContinuously``); the job then runs
        until it is stopped.  Without it the folder is listed once and the job ends after its files.

        ``infer_types`` (CSV only): a cell that reads as a number becomes an int or float, an empty cell None
        (engine/io/formats.py says which cells are numbers: ``007`` stays text, ``1e3`` is 1000.0); with
        ``infer_types=False`` every cell is the str it holds."""
        if format not in ("parquet", "jsonl", "csv", "text"):
            raise JobDefinitionError("format", format, "must be 'parquet', 'jsonl', 'csv' or 'text' (lines as str)")
        interval_ms = None if monitor_interval is None else positive_millis(monitor_interval, "monitor_interval")
        if type(infer_types) is not bool:
            raise JobDefinitionError("infer_types", infer_types, "must be True or False")
        if not infer_types and format != "csv":
            raise JobDefinitionError("infer_types", infer_types, f"applies to csv files only, not {format!r}",
                                     "Parquet and JSON lines carry their own types; leave infer_types out")
        return self.from_source(FileSource(path, format=format, monitor_interval_ms=interval_ms,
                                           infer_types=infer_types),
                                source_name=f"Files({path})")

    # -- execution -----------------------------------------------------------------------------
    def _register_sink(self, node: SinkTransformation) -> None:
        self._sinks.append(node)

    def _runtime_instance(self) -> Any:
        if getattr(self, "_closed", False):
            raise JobDefinitionError("environment", "closed", "cannot run a job after close()",
                                     "Create a new StreamExecutionEnvironment")
        return create_runtime(self._runtime, self)

    def _check_sinks(self) -> None:
        if not self._sinks:
            raise JobDefinitionError("sinks", [], "must not be empty: add a sink (print(), write_files(), sink_to())")

    @contextmanager
    def _handing_over(self, collect: Sequence[Transformation] = (), required: bool = True
                      ) -> Iterator[list[SinkTransformation]]:
        """The sinks registered since the last job, which the job being handed to a runtime consumes (Flink's
        ``getStreamGraph(clearTransformations=true)``); ``required``: refuse a job without any.

        The job's runtime mode (its sinks and ``collect`` nodes' sources) is resolved here, once: a refusal
        leaves the sinks in place, and while the runtime builds the job :meth:`is_batch` gives it this answer."""
        if required:
            self._check_sinks()
        self._job_runtime_mode = resolve_runtime_mode(self._runtime_mode, [*self._sinks, *collect], self._runtime)
        sinks, self._sinks = list(self._sinks), []
        try:
            yield sinks
        finally:
            self._job_runtime_mode = None

    def execute(self, job_name: str = "sluice-job", from_savepoint: str | None = None) -> JobExecutionResult:
        """Run the job to its end (bounded input, a stop or a failure) in this thread.

        ``from_savepoint`` restores state and source positions from a savepoint or a
        retained checkpoint folder; key groups are redistributed to this parallelism.

        As in Flink, the job is made of the sinks added since the previous job (``execute``, ``execute_async``,
        ``execute_and_collect``):
        a program that prints a stream and executes, then prints another and executes again (PyFlink's
        ``basic_operations.py`` does) runs each print once.  To run the same sinks again, build them again.
        """
        runtime = self._runtime_instance()
        with self._handing_over() as sinks:
            result = runtime.execute(job_name, sinks, collect=[], from_savepoint=from_savepoint)
        return self._finished(result)

    def execute_async(self, job_name: str = "sluice-job", from_savepoint: str | None = None,
                      savepoint_dir: str | None = None) -> Any:
        """Start the job in the background and return its JobClient (PyFlink's ``execute_async``).

        ``savepoint_dir`` is the default target of ``trigger_savepoint``/``stop_with_savepoint`` (else
        :meth:`set_default_savepoint_directory`'s).  Like ``execute``, it consumes the sinks added so far.
        """
        runtime = self._runtime_instance()
        with self._handing_over() as sinks:
            handle = runtime.submit(job_name, sinks, collect=[], from_savepoint=from_savepoint)
        return JobClient(handle, job_name, savepoint_dir or self.get_default_savepoint_directory(), self._parallelism)

    def _execute_collect(self, node: Transformation, job_name: str) -> list[Any]:
        runtime = self._runtime_instance()
        with self._handing_over([node], required=False) as sinks:
            result = runtime.execute(job_name, sinks, collect=[node])
        return self._finished(result).collected[node.id]

    def execute_and_collect_streams(self, streams: dict[str, DataStream],
                                    job_name: str = "collect") -> tuple[dict[str, list[Any]], JobExecutionResult]:
        """Run the job once and collect several streams (e.g. a window result and its late side output).  As
        ``execute_and_collect``, the job also runs, and consumes, the sinks added since the previous job."""
        nodes = [s._node for s in streams.values()]
        runtime = self._runtime_instance()
        with self._handing_over(nodes, required=False) as sinks:
            result = runtime.execute(job_name, sinks, collect=nodes)
        self._finished(result)
        return {name: result.collected[s._node.id] for name, s in streams.items()}, result

    def _finished(self, result: JobExecutionResult) -> JobExecutionResult:
        """Keep ``result`` for :meth:`get_last_result`, and say on the ``engine.api.environment`` logger (WARNING,
        which Python prints to stderr when nothing configured logging) how many records became dead letters: a
        misspelled field makes every record one, and the job otherwise ends as if all went well."""
        self._last_result = result
        count = result.dead_letter_count
        if count:
            first = result.dead_letters[0] if result.dead_letters else {}
            _log.warning("job %s: %d record%s could not be processed and became dead letters (the first, stage %s: "
                         "%s); JobExecutionResult.dead_letters holds them", result.job_id, count,
                         "" if count == 1 else "s", first.get("stage", "?"), first.get("error", "?"))
        return result

    def get_last_result(self) -> JobExecutionResult | None:
        """The JobExecutionResult of the last ``execute`` or ``execute_and_collect`` (metrics, dead letters)."""
        return getattr(self, "_last_result", None)

    # -- PyFlink's configuration and introspection (issue 19) -----------------------------------
    def get_config(self) -> ExecutionConfig:
        """PyFlink's ExecutionConfig: the auto-watermark interval, parallelism, max parallelism
        (engine/api/execution_config.py)."""
        config = getattr(self, "_execution_config", None)
        if config is None:
            config = self._execution_config = ExecutionConfig(self)
        return config

    def get_checkpoint_interval(self) -> int:
        """The checkpoint interval in ms, -1 when checkpointing is off (PyFlink)."""
        return self._checkpoint_config.get_checkpoint_interval()

    def get_checkpointing_mode(self) -> CheckpointingMode:
        return self._checkpoint_config.get_checkpointing_mode()

    #: PyFlink 2's name for the same setting
    get_checkpointing_consistency_mode = get_checkpointing_mode

    def set_default_savepoint_directory(self, directory: str) -> StreamExecutionEnvironment:
        """Where ``trigger_savepoint``/``stop_with_savepoint`` of this environment's jobs write when given no
        target: ``execute_async``'s JobClient, and a job master without ``--savepoint-dir``."""
        try:
            self._default_savepoint_dir = validate_checkpoint_storage_dir(directory)
        except JobDefinitionError as e:
            raise JobDefinitionError("directory", directory, e.rule, e.hint) from None
        return self

    def get_default_savepoint_directory(self) -> str | None:
        return getattr(self, "_default_savepoint_dir", None)

    def disable_operator_chaining(self) -> StreamExecutionEnvironment:
        """Run every operator in a task of its own (engine/graph/plan.py); a source's per-split timestamps and
        watermarks still run inside it (ARCHITECTURE section 4)."""
        self._chaining = False
        return self

    def is_chaining_enabled(self) -> bool:
        return getattr(self, "_chaining", True)

    def set_buffer_timeout(self, timeout_millis: int) -> StreamExecutionEnvironment:
        """Accepted for porting (-1, 0 or ms) and otherwise without effect: the local runtime ships a subtask's
        output after every bundle it processes (the ``bundle_size`` runtime option), Spark once per epoch."""
        if isinstance(timeout_millis, bool) or not isinstance(timeout_millis, int) or timeout_millis < -1:
            raise JobDefinitionError("timeout_millis", timeout_millis, "must be an int >= -1")
        self._buffer_timeout = timeout_millis
        return self

    def get_buffer_timeout(self) -> int:
        """What :meth:`set_buffer_timeout` was given (Flink's default 100 ms otherwise); it changes nothing."""
        return getattr(self, "_buffer_timeout", 100)

    def get_execution_plan(self) -> str:
        """The job's operators as JSON in Flink's shape: ``{"nodes": [{"id", "type", "pact", "contents",
        "parallelism", "predecessors": [{"id", "ship_strategy", "side"}]}]}``, built from the physical plan the
        runtimes run (engine/graph/plan.py); ``chain`` (Sluice's) is the id of the task chain a node runs in."""
        import json

        from engine.graph.plan import build_plan

        self._check_sinks()
        resolve_runtime_mode(self._runtime_mode, self._sinks, self._runtime)  # a job it would refuse has no plan
        plan = build_plan(list(self._sinks), self._parallelism, self._max_parallelism,
                          chaining=self.is_chaining_enabled())
        ids: dict[int, int] = {}
        nodes: list[dict[str, Any]] = []
        for v in plan.vertices:
            for node in v.nodes:
                ids[node.id] = len(ids) + 1
        for v in plan.vertices:
            for node in v.nodes:
                pact = ("Data Source" if node is v.head and v.is_source() else
                        "Data Sink" if isinstance(node, SinkTransformation) else "Operator")
                entry: dict[str, Any] = {"id": ids[node.id], "type": node.name, "pact": pact,
                                         "contents": node.description_text or node.name,
                                         "parallelism": v.parallelism, "chain": v.id}
                chained = getattr(node, "_chained_input", None)
                if chained is not None and node is not v.head:
                    entry["predecessors"] = [{"id": ids[chained[0].id], "ship_strategy": "FORWARD", "side": "second"}]
                elif node is v.head and v.inputs:
                    entry["predecessors"] = [{"id": ids[e.source_node.id], "ship_strategy": e.partitioning.value,
                                              "side": "second"} for e in v.inputs]
                nodes.append(entry)
        return json.dumps({"nodes": nodes}, indent=2)

    def close(self) -> None:
        """Release the job graph built so far and the last result (PyFlink's ``close``); the environment
        refuses to run afterwards."""
        self._sinks.clear()
        self._last_result = None
        self._closed = True

    # -- PyFlink methods with no meaning in Sluice: refused, naming what to do instead ------------------------
    def _no_meaning(self, method: str, value: Any, why: str) -> Any:
        raise JobDefinitionError(method, value, f"has no meaning in Sluice: {why}",
                                 "Remove the call; install Python dependencies into the environment the job runs in "
                                 "(the master's and, on Spark, the executors' Python) and import them as usual")

    def add_jars(self, *jars_path: str) -> None:
        self._no_meaning("add_jars", jars_path, "jobs run Python only, there is no JVM job classpath")

    def add_classpaths(self, *classpaths: str) -> None:
        self._no_meaning("add_classpaths", classpaths, "jobs run Python only, there is no JVM job classpath")

    def add_python_file(self, file_path: str) -> None:
        self._no_meaning("add_python_file", file_path, "jobs are imported from their module path, nothing is shipped")

    def add_python_archive(self, archive_path: str, target_dir: str | None = None) -> None:
        self._no_meaning("add_python_archive", archive_path, "nothing is shipped to Python workers")

    def set_python_requirements(self, requirements_file_path: str, requirements_cache_dir: str | None = None) -> None:
        self._no_meaning("set_python_requirements", requirements_file_path, "nothing is installed at submission")

    def set_python_executable(self, python_exec: str) -> None:
        self._no_meaning("set_python_executable", python_exec,
                         "the job runs in the master's Python; on Spark set PYSPARK_PYTHON")

    def register_cached_file(self, file_path: str, name: str) -> None:
        self._no_meaning("register_cached_file", file_path, "nothing is shipped to workers; read the file by its "
                         "path (a shared folder or s3://) in open()")

    def enable_changelog_state_backend(self, enabled: bool) -> StreamExecutionEnvironment:
        """Only ``False`` is accepted: Sluice's snapshots are full copies of each operator's state (Flink's changelog
        state backend has no counterpart)."""
        if enabled is not False:
            raise JobDefinitionError("enable_changelog_state_backend", enabled, "cannot be enabled in Sluice: "
                                     "snapshots are full copies of each operator's state, there is no changelog")
        return self

    def is_changelog_state_backend_enabled(self) -> bool:
        return False

    def is_unaligned_checkpoints_enabled(self) -> bool:
        return self._checkpoint_config.is_unaligned_checkpoints_enabled()

    def is_force_unaligned_checkpoints(self) -> bool:
        return self._checkpoint_config.is_force_unaligned_checkpoints()
