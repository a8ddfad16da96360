"""Can a new job restore this snapshot?  ``sluice validate <snapshot> --job <spec>`` (issue 6).

Checked without stopping the running job and without running the new one: the
job spec (an import path such as ``engine.examples.purchases:build`` whose
function adds the job to an environment) is built into a graph, and each
window operator's description (:func:`window_operator_config`) is compared with
what ``_metadata`` recorded for the operator with the same uid.  As in Flink,
state is matched to operators by uid, the number of key groups
(``max_parallelism``) cannot change, and state nobody restores is an error
unless the user accepts it (Flink's ``--allowNonRestoredState``).

Each :class:`Incompatibility` names its kind, the operator and both sides.
What the snapshot does not record is reported in ``unknown``, never assumed
compatible silently: :data:`checkpoints.validation.operator_config.RUNTIME_FIELDS`
lists the fields the runtime must write.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from checkpoints.restore import Snapshot, load_snapshot
from checkpoints.validation.operator_config import (
    COUNT_TRIGGER_STATE,
    MERGING_WINDOW_SET_STATE,
    UNKNOWN,
    state_name_of_table,
    trigger_kinds,
    window_operator_config,
)

_GEOMETRY = ("size_ms", "slide_ms", "offset_ms", "gap_ms")


@dataclass(frozen=True, slots=True)
class Incompatibility:
    """One reason the new job cannot restore the snapshot as it is."""

    kind: str  # "unrestored-state" | "max-parallelism" | "assigner" | "aggregate" | "trigger" | "state-schema"
    operator: str
    snapshot: Any
    job: Any
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "operator": self.operator, "snapshot": self.snapshot, "job": self.job,
                "detail": self.detail}


@dataclass(frozen=True)
class CompatibilityReport:
    snapshot_uri: str
    job_spec: str
    problems: tuple[Incompatibility, ...]
    unknown: tuple[str, ...] = ()
    new_operators: tuple[str, ...] = ()
    matched: tuple[str, ...] = field(default_factory=tuple)

    @property
    def compatible(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {"snapshot_uri": self.snapshot_uri, "job_spec": self.job_spec, "compatible": self.compatible,
                "problems": [p.to_dict() for p in self.problems], "unknown": list(self.unknown),
                "new_operators": list(self.new_operators), "matched": list(self.matched)}


@dataclass(frozen=True, slots=True)
class JobOperator:
    uid: str
    config: dict[str, Any]
    max_parallelism: int


def load_job_spec(job_spec: str) -> tuple[Any, Any]:
    """Import ``module:function`` (the job master's loader) and call it with a fresh environment; ``(env, result)``."""
    from engine.api.environment import StreamExecutionEnvironment
    from engine.master.config import load_job_spec as import_job_function

    build = import_job_function(job_spec)
    env = StreamExecutionEnvironment.get_execution_environment()
    return env, build(env)


def job_operators(job_spec: str) -> dict[str, JobOperator]:
    """The window operators of the job spec's graph by uid, described as the runtime writes them."""
    from engine.graph.transformations import WindowTransformation, topological_order

    env, result = load_job_spec(job_spec)
    roots = list(getattr(env, "_sinks", []))
    streams = result.values() if isinstance(result, dict) else ([result] if result is not None else [])
    roots += [s._node for s in streams if hasattr(s, "_node")]
    out = {}
    for node in topological_order(roots):
        if isinstance(node, WindowTransformation):
            out[node.operator_uid()] = JobOperator(node.operator_uid(), window_operator_config(node),
                                                   env.get_max_parallelism())
    return out


def expected_state_kinds(config: dict[str, Any]) -> dict[str, str]:
    """The keyed states a window operator with ``config`` keeps, and their kinds (engine/windowing/window_operator.py)."""
    function = config.get("function") or {}
    incremental = function.get("kind") == "aggregate" and not config.get("evictor")
    states = {"window-contents": "aggregating" if incremental else "list"}
    if (config.get("assigner") or {}).get("merging"):
        states[MERGING_WINDOW_SET_STATE] = "list"
    if "count" in trigger_kinds(config.get("trigger") or {}).split("/"):
        states[COUNT_TRIGGER_STATE] = "reducing"
    return states


def _snapshot_state_kinds(snap: Snapshot, uid: str) -> dict[str, str]:
    """State name -> kind from ``config.state_kinds``, else from the first file of each state (schema metadata)."""
    op = snap.operator(uid)
    recorded = op.config.get("state_kinds")
    if isinstance(recorded, dict):
        return {str(k): str(v) for k, v in recorded.items()}
    kinds: dict[str, str] = {}
    for _, handle in op.files():
        name = state_name_of_table(handle.table)
        if name is None or name in kinds:
            continue
        metadata = snap.read_file(handle).schema.metadata or {}
        kinds[name] = metadata.get(b"state_kind", b"unknown").decode()
    return kinds


def check_compatibility(snapshot: str | Snapshot, job_spec: str, *, allow_non_restored_state: bool = False,
                        **store_options: Any) -> CompatibilityReport:
    """Compare the snapshot with the job spec's operators; see the module docstring."""
    snap = snapshot if isinstance(snapshot, Snapshot) else load_snapshot(snapshot, **store_options)
    job = job_operators(job_spec)
    problems: list[Incompatibility] = []
    unknown: list[str] = []
    matched: list[str] = []
    for op in snap.metadata.operators:
        has_state = any(True for _ in op.files())
        new = job.get(op.uid)
        if new is None:
            if has_state and not allow_non_restored_state:
                problems.append(Incompatibility(
                    "unrestored-state", op.uid, op.uid, None,
                    f"the snapshot holds state of operator {op.uid!r} but the new job has no operator with that uid; "
                    "its state would not be restored (give the operator the same .uid(), or, to drop that state, pass "
                    "--allow-non-restored-state / -n (allow_non_restored_state=True))"))
            continue
        matched.append(op.uid)
        if op.max_parallelism != new.max_parallelism:
            problems.append(Incompatibility(
                "max-parallelism", op.uid, op.max_parallelism, new.max_parallelism,
                f"max_parallelism (the number of key groups) is {op.max_parallelism} in the snapshot and "
                f"{new.max_parallelism} in the new job; it cannot change across a restore"))
        _compare_config(op.uid, op.config or {}, new.config, problems, unknown)
        if has_state:
            _compare_states(snap, op.uid, new.config, problems)
    new_ops = tuple(sorted(set(job) - {op.uid for op in snap.metadata.operators}))
    return CompatibilityReport(snap.uri, job_spec, tuple(problems), tuple(unknown), new_ops, tuple(matched))


def _compare_config(uid: str, old: dict[str, Any], new: dict[str, Any], problems: list[Incompatibility],
                    unknown: list[str]) -> None:
    old_assigner = old.get("assigner")
    if isinstance(old_assigner, str):
        old_assigner = {"kind": old_assigner, **{k: old[k] for k in _GEOMETRY if k in old}}
    new_assigner = new.get("assigner") or {}
    if not isinstance(old_assigner, dict) or "kind" not in old_assigner:
        unknown.append(f"operator {uid!r}: assigner kind {UNKNOWN} (snapshot lacks config.assigner)")
    else:
        old_view = {k: old_assigner.get(k) for k in ("kind", *_GEOMETRY) if k in old_assigner}
        new_view = {k: new_assigner.get(k) for k in old_view}
        if old_view != new_view:
            problems.append(Incompatibility(
                "assigner", uid, old_view, {k: new_assigner.get(k) for k in ("kind", *_GEOMETRY) if k in new_assigner},
                f"window assigner changed from {old_view} to {new_view}: stored windows would not match the new ones"))
    old_function = old.get("function")
    if not isinstance(old_function, dict) or "kind" not in old_function:
        unknown.append(f"operator {uid!r}: aggregate kind {UNKNOWN} (snapshot lacks config.function)")
    else:
        new_function = new.get("function") or {}
        old_view = (old_function.get("kind"), old_function.get("aggregate"), old_function.get("field"))
        new_view = (new_function.get("kind"), new_function.get("aggregate"), new_function.get("field"))
        if old_view != new_view:
            problems.append(Incompatibility(
                "aggregate", uid, old_function, new_function,
                f"window function changed from {old_view} to {new_view}: the stored accumulators have another meaning"))
    if isinstance(old.get("trigger"), dict):
        old_kinds, new_kinds = trigger_kinds(old["trigger"]), trigger_kinds(new.get("trigger") or {})
        if old_kinds != new_kinds:
            problems.append(Incompatibility("trigger", uid, old_kinds, new_kinds,
                                            f"trigger changed from {old_kinds} to {new_kinds}: its state would be misread"))
    else:
        unknown.append(f"operator {uid!r}: trigger {UNKNOWN} (snapshot lacks config.trigger)")


def _compare_states(snap: Snapshot, uid: str, new_config: dict[str, Any], problems: list[Incompatibility]) -> None:
    stored = _snapshot_state_kinds(snap, uid)
    expected = expected_state_kinds(new_config)
    for name, kind in sorted(stored.items()):
        if name not in expected:
            problems.append(Incompatibility(
                "state-schema", uid, {name: kind}, None,
                f"state {name!r} ({kind}) is in the snapshot but the new operator keeps no such state: it would not be restored"))
        elif expected[name] != kind:
            problems.append(Incompatibility(
                "state-schema", uid, {name: kind}, {name: expected[name]},
                f"state {name!r} is {kind} in the snapshot and {expected[name]} in the new job"))
