"""What a window operator's snapshot says about its job: assigner, trigger, aggregate, lateness, watermark.

The suites (:mod:`checkpoints.validation.suite_builder`) and the compatibility
check (:mod:`checkpoints.validation.compatibility`) need to know how the state
was produced: window size and slide to check bounds, allowed lateness to find
windows that should have been purged, the aggregate kind to check accumulators.
They read it from ``_metadata`` only, never from the job's code.

The runtime writes it (ARCHITECTURE section 5).  :func:`window_operator_config`
derives the exact ``OperatorState.config`` dict from a
:class:`engine.graph.transformations.WindowTransformation`; the runtime must store its
result, plus the fields named in :data:`RUNTIME_FIELDS`, for every window
operator.  Everything missing is read as :data:`UNKNOWN`, and the checks that
need it are skipped and reported as "unknown", never guessed.

``config`` shape (all keys optional for reading)::

    {"operator_class": "WindowOperator",
     "assigner": {"kind": "tumbling_event_time" | "sliding_event_time" | "event_time_session"
                  | "tumbling_processing_time" | "sliding_processing_time"
                  | "processing_time_session" | "global" | "custom:<ClassName>",
                  "size_ms", "slide_ms", "offset_ms", "gap_ms" (null: dynamic gap),
                  "is_event_time": bool, "merging": bool},
     "trigger": {"kind": "event_time" | "processing_time" | "count" | "purging" | "continuous_event_time"
                 | "continuous_processing_time" | "delta" | "default" | "custom:<ClassName>", "max_count"?},
     "evictor": null | "<ClassName>",
     "function": {"kind": "aggregate" | "process" | "apply",
                  "aggregate": "reduce" | "aggregate" | "sum" | "min" | "max" | "min_by" | "max_by" | "count" | null,
                  "field": int | str | null},
     "accumulator_fields": {"count": path, "min": path, "max": path},   # optional, user AggregateFunctions
     "allowed_lateness_ms": int,
     "state_rows": {"<state name>": rows, ...},                        # backend entries at snapshot time
     "state_kinds": {"<state name>": "value" | "list" | "map" | "reducing" | "aggregating", or one of those + "-ttl"}}

and in ``CheckpointMetadata.watermarks``::

    {"operators": {"<uid>": {"<subtask>": current_watermark_ms, ...}}}

(an int in place of the per-subtask dict means the same watermark for every subtask).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from checkpoints.metadata import CheckpointMetadata, OperatorState
from engine.elements import MIN_WATERMARK

#: the value of every field the snapshot's metadata does not have
UNKNOWN = "unknown"

#: what the runtime must write per window operator, and where (for the report and the docs)
RUNTIME_FIELDS = (
    "operators[].config = window_operator_config(node) (assigner, trigger, evictor, function, allowed_lateness_ms)",
    "operators[].config.state_rows = {state name: keyed_state_backend.num_entries(state)} summed over subtasks",
    "operators[].config.state_kinds = {state name: state kind}",
    "watermarks.operators[uid][str(subtask)] = the subtask's MaterializedOperatorSnapshot.metadata['current_watermark']",
    "state file handle table names: 'timers' and 'keyed.<state name>' (the snapshot's 'keyed/<name>' with '/' -> '.'); "
    "'broadcast.<name>' is a broadcast process operator's broadcast state: operator state, its files verified "
    "(size, checksum, rows) but given no keyed-state suite",
    "source_positions: numeric offsets per split (non-numeric offsets cannot be compared and are reported unknown)",
)

TIMERS_TABLE = "timers"
KEYED_PREFIXES = ("keyed.", "keyed/")
#: a broadcast process operator's broadcast state (engine/operators/broadcast_process.py): operator state, one
#: copy per subtask, without key groups or namespaces; the keyed-state rules do not apply to it
BROADCAST_PREFIXES = ("broadcast.", "broadcast/")
MERGING_WINDOW_SET_STATE = "merging-window-set"
COUNT_TRIGGER_STATE = "count"

_ASSIGNER_KINDS = {
    "TumblingEventTimeWindows": "tumbling_event_time",
    "SlidingEventTimeWindows": "sliding_event_time",
    "EventTimeSessionWindows": "event_time_session",
    "TumblingProcessingTimeWindows": "tumbling_processing_time",
    "SlidingProcessingTimeWindows": "sliding_processing_time",
    "ProcessingTimeSessionWindows": "processing_time_session",
    "GlobalWindows": "global",
}
_TRIGGER_KINDS = {
    "EventTimeTrigger": "event_time",
    "ProcessingTimeTrigger": "processing_time",
    "CountTrigger": "count",
    "PurgingTrigger": "purging",
    "ContinuousEventTimeTrigger": "continuous_event_time",
    "ContinuousProcessingTimeTrigger": "continuous_processing_time",
    "DeltaTrigger": "delta",
}


def is_broadcast_state_table(table: str) -> bool:
    return table.startswith(BROADCAST_PREFIXES)


def state_name_of_table(table: str) -> str | None:
    """The keyed state name a state file's table holds, or None for the timers table."""
    if table == TIMERS_TABLE:
        return None
    for prefix in KEYED_PREFIXES:
        if table.startswith(prefix):
            return table[len(prefix):]
    return table


def assigner_config(assigner: Any) -> dict[str, Any]:
    name = type(assigner).__name__
    kind = _ASSIGNER_KINDS.get(name, f"custom:{name}")
    out: dict[str, Any] = {"kind": kind}
    for attr in ("size_ms", "slide_ms", "offset_ms", "gap_ms"):
        if hasattr(assigner, attr):
            out[attr] = getattr(assigner, attr)
    if kind.startswith("tumbling"):
        out["slide_ms"] = out.get("size_ms")
    try:
        out["is_event_time"] = bool(assigner.is_event_time())
    except Exception:  # a user assigner that cannot answer: leave it unknown
        pass
    out["merging"] = hasattr(assigner, "merge_windows")
    return out


def trigger_config(trigger: Any) -> dict[str, Any]:
    if trigger is None:
        return {"kind": "default"}
    name = type(trigger).__name__
    out: dict[str, Any] = {"kind": _TRIGGER_KINDS.get(name, f"custom:{name}")}
    if hasattr(trigger, "max_count"):
        out["max_count"] = trigger.max_count
    if hasattr(trigger, "interval_ms"):
        out["interval_ms"] = trigger.interval_ms
    nested = getattr(trigger, "nested_trigger", None)
    if nested is not None:
        out["nested"] = trigger_config(nested)
    return out


def trigger_kinds(trigger: dict[str, Any]) -> str:
    """The trigger's kind and its nested triggers' kinds, outermost first: "purging/count"."""
    kinds = []
    while isinstance(trigger, dict) and "kind" in trigger:
        kinds.append(str(trigger["kind"]))
        trigger = trigger.get("nested")
    return "/".join(kinds) or UNKNOWN


def function_config(spec: Any) -> dict[str, Any]:
    if spec is None:
        return {"kind": UNKNOWN}
    out: dict[str, Any] = {"kind": spec.kind, "aggregate": None, "field": None}
    if spec.kind == "aggregate":
        vectorized = getattr(spec.aggregate_function, "vectorized", None)
        out["aggregate"] = spec.description or "aggregate"
        if vectorized is not None:
            out["aggregate"], out["field"] = vectorized.kind, vectorized.field
    return out


def window_operator_config(node: Any) -> dict[str, Any]:
    """The ``OperatorState.config`` the runtime must write for a WindowTransformation (see module docstring).

    Also what :mod:`checkpoints.validation.compatibility` computes for a new job, so
    both sides of a compatibility check are described the same way."""
    return {
        "operator_class": "WindowOperator",
        "assigner": assigner_config(node.assigner),
        "trigger": trigger_config(node.trigger),
        "evictor": type(node.evictor).__name__ if node.evictor is not None else None,
        "function": function_config(node.function),
        "allowed_lateness_ms": int(node.allowed_lateness_ms or 0),
        "non_keyed": bool(getattr(node, "non_keyed", False)),
    }


@dataclass(frozen=True, slots=True)
class WindowOperatorFacts:
    """What the validation knows about one operator; each field is a value or :data:`UNKNOWN`."""

    uid: str
    max_parallelism: int
    assigner_kind: str = UNKNOWN
    size_ms: Any = UNKNOWN
    slide_ms: Any = UNKNOWN
    offset_ms: Any = UNKNOWN
    is_event_time: Any = UNKNOWN
    merging: Any = UNKNOWN
    trigger_kind: str = UNKNOWN
    aggregate_kind: str = UNKNOWN
    aggregate_field: Any = None
    accumulator_fields: dict[str, Any] = field(default_factory=dict)
    allowed_lateness_ms: Any = UNKNOWN
    state_rows: dict[str, int] | None = None
    #: per subtask (str) current watermark in ms
    watermarks: dict[str, int] | None = None

    def has_count_trigger(self) -> bool:
        return "count" in self.trigger_kind.split("/")

    def is_aligned(self) -> bool:
        """Windows whose length and start alignment are fixed: tumbling and sliding."""
        return self.assigner_kind.startswith(("tumbling", "sliding")) and isinstance(self.size_ms, int) \
            and isinstance(self.slide_ms, int)

    def watermark_of(self, subtask: int) -> int:
        """The subtask's watermark; MIN_WATERMARK (nothing is late) when unknown."""
        if not self.watermarks:
            return MIN_WATERMARK
        return int(self.watermarks.get(str(subtask), self.watermarks.get("*", MIN_WATERMARK)))

    def unknowns(self) -> list[str]:
        """Fields the runtime did not write, named as in the module docstring."""
        missing = []
        for name in ("assigner_kind", "is_event_time", "trigger_kind", "aggregate_kind", "allowed_lateness_ms"):
            if getattr(self, name) == UNKNOWN:
                missing.append(f"config.{name.replace('_kind', '.kind')}")
        if self.state_rows is None:
            missing.append("config.state_rows")
        if self.watermarks is None:
            missing.append(f"watermarks.operators[{self.uid!r}]")
        return missing


def operator_facts(metadata: CheckpointMetadata, op: OperatorState) -> WindowOperatorFacts:
    """Read :class:`WindowOperatorFacts` from an operator's config and the checkpoint's watermarks."""
    config = op.config or {}
    assigner = config.get("assigner")
    if isinstance(assigner, str):  # a bare kind, e.g. {"assigner": "tumbling", "size_ms": 1000}
        assigner = {"kind": assigner, **{k: config[k] for k in ("size_ms", "slide_ms", "offset_ms") if k in config}}
    assigner = assigner if isinstance(assigner, dict) else {}
    kind = assigner.get("kind", UNKNOWN)
    size = assigner.get("size_ms", UNKNOWN)
    slide = assigner.get("slide_ms", size if str(kind).startswith("tumbling") else UNKNOWN)
    trigger = config.get("trigger") if isinstance(config.get("trigger"), dict) else {}
    function = config.get("function") if isinstance(config.get("function"), dict) else {}
    lateness = config.get("allowed_lateness_ms", UNKNOWN)
    return WindowOperatorFacts(
        uid=op.uid,
        max_parallelism=op.max_parallelism,
        assigner_kind=str(kind),
        size_ms=size,
        slide_ms=slide,
        offset_ms=assigner.get("offset_ms", 0 if kind != UNKNOWN else UNKNOWN),
        is_event_time=assigner.get("is_event_time", UNKNOWN),
        merging=assigner.get("merging", UNKNOWN),
        trigger_kind=trigger_kinds(trigger),
        aggregate_kind=str(function.get("aggregate") or (UNKNOWN if not function else function.get("kind", UNKNOWN))),
        aggregate_field=function.get("field"),
        accumulator_fields=dict(config.get("accumulator_fields") or {}),
        allowed_lateness_ms=lateness if isinstance(lateness, int) else UNKNOWN,
        state_rows=dict(config["state_rows"]) if isinstance(config.get("state_rows"), dict) else None,
        watermarks=_operator_watermarks(metadata, op.uid),
    )


def _operator_watermarks(metadata: CheckpointMetadata, uid: str) -> dict[str, int] | None:
    operators = (metadata.watermarks or {}).get("operators")
    if not isinstance(operators, dict) or uid not in operators:
        return None
    value = operators[uid]
    if isinstance(value, int):
        return {"*": value}
    if isinstance(value, dict):
        return {str(k): int(v) for k, v in value.items() if isinstance(v, int)}
    return None
