"""Every runtime option the runtimes read (``env.set_runtime_option(key, value)``, ``sluice run --option``).

One registry, so ``sluice run`` can refuse a key no runtime reads (a typo used to be ignored silently) and
list the known ones in its ``--help``.  Each entry names the runtimes that read it (engine/runtime/local/
runtime.py, engine/runtime/spark/runtime.py and job.py, engine/histories.py, engine/io/dead_letter_output.py)
and its type; a test checks the registry against the keys those modules read, so a new option cannot be
forgotten here.

Some options are set by Sluice itself or hold Python objects (``fence``, ``fault_plan``,
``restart_strategy``): they are listed with ``cli=False`` and refused on the command line with the reason.
Options with their own flag (``from_savepoint``, ``spark_conf``, ``job_id``) are refused as ``--option`` with the
flag to use instead, so each concept has one spelling on the command line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.errors import JobDefinitionError


@dataclass(frozen=True, slots=True)
class RuntimeOption:
    name: str
    #: the JSON type a command-line value must have: "int", "bool", "str" or "dict"; "object" (code only)
    type: str
    runtimes: tuple[str, ...]
    help: str
    default: Any = None
    #: settable with ``sluice run --option``
    cli: bool = True
    #: the flag to use instead of ``--option`` (the option is refused there, naming the flag)
    flag: str | None = None
    #: why it cannot be set on the command line (``cli=False``)
    why_not: str = ""

    def describe(self) -> str:
        default = "" if self.default is None else f"; default {self.default}"
        return f"{self.name} ({self.type}, {'/'.join(self.runtimes)}{default}): {self.help}"


BOTH = ("local", "spark")

RUNTIME_OPTIONS: tuple[RuntimeOption, ...] = (
    RuntimeOption("bundle_size", "int", ("local",), "records a source reads per step", 1024),
    RuntimeOption("channel_capacity", "int", ("local",), "bundles a channel between tasks buffers", 64),
    RuntimeOption("task_budget", "int", ("local",), "records a task processes per scheduling step",
                  "4 x bundle_size"),
    RuntimeOption("clock_step_ms", "int", ("local",), "advance a manual clock this much per round (tests)", 0),
    RuntimeOption("wait_for_uploads", "bool", ("local",), "finish each round's checkpoint uploads first",
                  "true with clock_step_ms"),
    RuntimeOption("epoch_records", "int", BOTH, "records per split per epoch (local: the Spark cadence)",
                  "10000 on spark"),
    RuntimeOption("master", "str", ("spark",), "Spark master URL (ignored when a session is active)", "local[2]"),
    RuntimeOption("max_epochs", "int", ("spark",), "stop after this many epochs (unbounded tests)"),
    RuntimeOption("epoch_interval_ms", "int", ("spark",), "ms between epoch starts; 0 runs them back to back", 0),
    RuntimeOption("async_snapshots", "bool", ("spark",), "upload a checkpoint's state during the next epoch",
                  "true"),
    RuntimeOption("preaggregation", "bool", ("spark",), "fold built-in aggregates in Spark SQL first", "true"),
    RuntimeOption("column_fold", "bool", ("spark",),
                  "fold a column-form window as Arrow tables from reading task to sink (off: the operator folds)",
                  "true"),
    RuntimeOption("pipeline_epochs", "bool", ("spark",),
                  "run epoch n's window stages in one Spark job with epoch n+1's reads", "true"),
    RuntimeOption("snapshot_in_window_tasks", "bool", ("spark",),
                  "window tasks write a checkpoint's state files in its barrier's epoch (off: an upload job)", "true"),
    RuntimeOption("epoch_shape", "str", ("spark",),
                  "place each epoch's stages on RDDs ('rdd') or with DataFrames and Spark SQL ('dataframe')", "rdd"),
    RuntimeOption("storage_options", "dict", ("spark",), "options for checkpoint storage, e.g. endpoint_url"),
    RuntimeOption("max_checkpoint_history", "int", BOTH, "checkpoint records the driver keeps in memory", 1000),
    RuntimeOption("max_dead_letters", "int", BOTH, "dead letters the driver keeps in memory", 10000),
    RuntimeOption("dead_letter_dir", "str", BOTH, "folder the dead letters are committed to",
                  "<--output>/_dead_letters, else <user cache dir>/sluice/dead_letters/<job id>/<run start>"),
    RuntimeOption("job_id", "str", BOTH, "the job's id in storage (default: derived from the job's name)",
                  flag="--job-id"),
    RuntimeOption("spark_conf", "dict", ("spark",), "Spark settings for the session the runtime starts",
                  flag="--spark-conf"),
    RuntimeOption("from_savepoint", "str", BOTH, "snapshot to restore from", flag="--from-savepoint"),
    RuntimeOption("restore_from", "str", ("spark",), "alias of from_savepoint", flag="--from-savepoint"),
    RuntimeOption("fence", "object", BOTH, "the job master's lease", cli=False,
                  why_not="the job master sets it to its lease"),
    RuntimeOption("fault_plan", "object", ("local",), "injected faults (tests)", cli=False,
                  why_not="it is a Python object, set in code by fault-injection tests"),
    RuntimeOption("restart_strategy", "object", BOTH, "restart strategy", cli=False,
                  why_not="it is a RestartStrategies object: set it in the job function "
                          "(env.set_restart_strategy)"),
)

BY_NAME: dict[str, RuntimeOption] = {o.name: o for o in RUNTIME_OPTIONS}


def cli_options() -> list[RuntimeOption]:
    """The options ``--option`` takes."""
    return [o for o in RUNTIME_OPTIONS if o.cli and o.flag is None]


def _has_type(value: Any, kind: str) -> bool:
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "str":
        return isinstance(value, str)
    if kind == "dict":
        return isinstance(value, dict)
    return True


def check_cli_option(key: str, value: Any) -> None:
    """Refuse a ``--option key=value`` no runtime reads, one with its own flag or a code-only one, or a value of
    the wrong type; the message names the key and the way out."""
    option = BY_NAME.get(key)
    known = ", ".join(o.name for o in cli_options())
    if option is None:
        raise JobDefinitionError("--option", key, "is not a runtime option any runtime reads",
                                 f"Known keys: {known} (sluice run --help describes them)")
    if option.flag is not None:
        raise JobDefinitionError("--option", key, "has its own flag", f"Use {option.flag} instead")
    if not option.cli:
        raise JobDefinitionError("--option", key, f"cannot be set on the command line: {option.why_not}")
    if not _has_type(value, option.type):
        raise JobDefinitionError(f"--option {key}", value, f"must be a JSON {option.type} ({option.help})")


def help_epilog() -> str:
    """The list ``sluice run --help`` ends with (``\\b``: click keeps the lines as they are)."""
    lines = ["\b", "Runtime options (--option key=value, value as JSON):"]
    lines += [f"  {o.describe()}" for o in cli_options()]
    return "\n".join(lines)
