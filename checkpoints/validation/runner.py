"""Run a validation of a snapshot with Great Expectations: suites -> ValidationDefinitions -> Data Docs.

One validation of a Sluice snapshot is one ephemeral GX context holding, per
frame (an asset of :mod:`checkpoints.validation.suite_builder`), an
ExpectationSuite with all of the frame's expectations and one
ValidationDefinition over a whole-dataframe batch, run once; Data Docs are
rendered once per run from the stored results (:func:`run_gx`).  No
``gx.Checkpoint`` is used: it would pass the same ``batch_parameters`` to all
its definitions, and the frames differ per asset.  (A GX "checkpoint" would
be a validation run anyway, never a snapshot.)

Engines: pandas below ``spark_row_threshold`` rows of state, Spark above it (or
when asked): the Spark path derives the same frames inside ``mapInArrow`` tasks
that read the state files themselves (:mod:`checkpoints.validation.spark_frames`),
so large state never passes through one process, and GX validates the Spark
DataFrames with its Spark execution engine.  Either way each state file is
read once, and verified (size, sha256, rows) where it is read.

Outputs: a :class:`ValidationReport`; its JSON written beside the snapshot
(``<snapshot>/_validation/<run>.json``); Data Docs HTML in ``data_docs_dir`` (default
:func:`engine.local_dirs.default_data_docs_dir`, never the current directory); and,
with ``record=True``, the outcome in the snapshot's ``_metadata`` ``validation``
field (:mod:`checkpoints.validation.records`), which savepoint history reads.
"""

from __future__ import annotations

import inspect
import logging
import os
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterator

os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")

import great_expectations as gx  # noqa: E402
import pandas as pd  # noqa: E402
import pyarrow as pa  # noqa: E402

from checkpoints.drained import drained_reason  # noqa: E402
from checkpoints.restore import Snapshot, load_snapshot, read_snapshot_metadata  # noqa: E402
from checkpoints.validation import frames as F  # noqa: E402
from checkpoints.validation.asset_frames import asset_of, file_row, files_frame, used_columns  # noqa: E402
from checkpoints.validation.compatibility import check_compatibility  # noqa: E402
from checkpoints.validation.operator_config import is_broadcast_state_table  # noqa: E402
from checkpoints.validation.previous import previous_source_positions  # noqa: E402
from checkpoints.validation.records import record_outcome, write_results_json  # noqa: E402
from checkpoints.validation.spark_frames import spark_frames  # noqa: E402
from checkpoints.validation.suite_builder import (  # noqa: E402
    FILES,
    SOURCE_OFFSETS,
    SOURCE_OFFSETS_ASSET,
    SuitePlan,
    build_suites,
    files_asset,
)
from checkpoints.validation.user_expectations import (  # noqa: E402
    add_user_expectations,
    load_user_expectations,
    suite_path_for_job,
)
from engine.errors import CorruptSnapshotError, DrainedSnapshotError, JobDefinitionError  # noqa: E402
from engine.local_dirs import default_data_docs_dir  # noqa: E402
from engine.runtime.spark.session import get_or_create_spark  # noqa: E402

log = logging.getLogger(__name__)

DEFAULT_SPARK_ROW_THRESHOLD = 5_000_000
DATA_DOCS_SITE = "sluice"
PARTIAL_UNEXPECTED = 5
RESULTS_DIR = "_validation"
RESULT_FORMAT = {"result_format": "SUMMARY", "partial_unexpected_count": PARTIAL_UNEXPECTED}


def _wall_clock_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True, slots=True)
class FailedExpectation:
    """One expectation that failed, as GX reported it, with the rule it checks in words."""

    asset: str
    expectation: str
    kwargs: dict[str, Any]
    rule: str
    unexpected_count: int | None = None
    observed_value: Any = None
    partial_unexpected: tuple[str, ...] = ()
    user: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"asset": self.asset, "expectation": self.expectation, "kwargs": self.kwargs, "rule": self.rule,
                "unexpected_count": self.unexpected_count, "observed_value": _jsonable(self.observed_value),
                "partial_unexpected": list(self.partial_unexpected), "user": self.user}


@dataclass(frozen=True, slots=True)
class AssetOutcome:
    asset: str
    rows: int
    evaluated: int
    failed: int


@dataclass(frozen=True)
class ValidationReport:
    """The outcome of one validation run of a snapshot."""

    snapshot_uri: str
    job_id: str
    checkpoint_id: int
    status: str  # "passed" | "failed"
    engine: str
    started_ms: int
    duration_ms: int
    rows: int
    assets: tuple[AssetOutcome, ...]
    failed: tuple[FailedExpectation, ...]
    unknown: tuple[str, ...]
    data_docs_url: str | None
    results_uri: str | None = None
    run_name: str = ""
    #: why the snapshot fails whatever its state holds (a drained snapshot, checkpoints.drained); None if nothing
    reason: str | None = None
    #: with ``record=True``, the digest of the ``_metadata`` the outcome was recorded into
    #: (:meth:`CheckpointMetadata.digest`; what ``ensure_restorable(validated_digest=...)`` compares)
    metadata_sha256: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    def failed_expectations(self) -> list[tuple[str, str]]:
        """``(asset, expectation type)`` of every failure, e.g. ``("op.timers", "expect_table_row_count_to_equal")``."""
        return [(f.asset, f.expectation) for f in self.failed]

    def to_dict(self) -> dict[str, Any]:
        return {
            "snapshot_uri": self.snapshot_uri, "job_id": self.job_id, "checkpoint_id": self.checkpoint_id,
            "status": self.status, "engine": self.engine, "started_ms": self.started_ms,
            "duration_ms": self.duration_ms, "rows": self.rows, "run_name": self.run_name,
            "assets": [{"asset": a.asset, "rows": a.rows, "evaluated": a.evaluated, "failed": a.failed}
                       for a in self.assets],
            "failed": [f.to_dict() for f in self.failed], "unknown": list(self.unknown),
            "data_docs_url": self.data_docs_url, "results_uri": self.results_uri, "reason": self.reason,
            "metadata_sha256": self.metadata_sha256,
        }


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    try:
        return value.item()  # numpy scalars
    except AttributeError:
        return str(value)


def validate_snapshot(
    snapshot: str | Snapshot,
    *,
    job_spec: str | None = None,
    user_expectations: str | Path | None = None,
    data_docs_dir: str | Path | None = None,
    engine: str = "auto",
    spark_row_threshold: int = DEFAULT_SPARK_ROW_THRESHOLD,
    spark: Any = None,
    previous_source_positions_: dict[str, Any] | None = None,
    find_previous: bool = True,
    write_results: bool = True,
    build_data_docs: bool = True,
    record: bool = False,
    allow_drained: bool = False,
    clock_ms: Callable[[], int] = _wall_clock_ms,
    **store_options: Any,
) -> ValidationReport:
    """Validate a checkpoint or savepoint (a URI, or a loaded :class:`Snapshot`); see the module docstring.

    Integrity (missing files, checksums, key-group coverage) is checked first by
    :func:`checkpoints.restore.load_snapshot` and raises CorruptSnapshotError;
    the GX suites then check the state's content.  ``job_spec`` finds the user
    suite file beside the job; ``user_expectations`` names one explicitly.
    ``record=True`` writes the outcome into ``_metadata`` (savepoints: the validated tier).
    A drained snapshot (:mod:`checkpoints.drained`) fails with the reason in ``report.reason``,
    whatever its state holds, unless ``allow_drained=True``."""
    if engine not in ("auto", "pandas", "spark"):
        raise JobDefinitionError("engine", engine, "must be 'auto', 'pandas' or 'spark'")
    started = clock_ms()
    if isinstance(snapshot, Snapshot):
        snap = snapshot
    else:
        # sizes and key-group coverage now; checksums where each file is read (decode_table verifies
        # sha256 and rows), so a file is read once, by the engine that derives its frames
        snap = load_snapshot(snapshot, verify_checksums=False, **store_options)
    metadata = snap.metadata
    drained = None if allow_drained else drained_reason(metadata)
    previous = previous_source_positions_
    if previous is None and find_previous:
        previous = previous_source_positions(snap)
    plan = build_suites(metadata, previous_offsets=previous)
    suite_file = Path(user_expectations) if user_expectations else (suite_path_for_job(job_spec) if job_spec else None)
    if suite_file is not None:
        add_user_expectations(plan, load_user_expectations(suite_file))
    total_rows = sum(h.rows for _, _, h in metadata.files())
    use_spark = engine == "spark" or (engine == "auto" and total_rows > spark_row_threshold)
    tasks = file_tasks(snap, plan)
    if not isinstance(snapshot, Snapshot):
        verify_unread_files(snap, tasks)
    if use_spark:
        if spark is None:
            spark = get_or_create_spark()
        asset_frames, cached = spark_frames(spark, snap, plan, tasks)
    else:
        asset_frames, cached = pandas_frames(snap, plan, tasks), None
    if SOURCE_OFFSETS_ASSET in plan.assets:
        offsets = offsets_frame(metadata.source_positions, previous or {})
        asset_frames[SOURCE_OFFSETS_ASSET] = ("pandas", offsets, len(offsets))
    docs_dir = Path(data_docs_dir).absolute() if data_docs_dir else default_data_docs_dir()
    run_name = f"{metadata.job_id}-{'sp' if metadata.is_savepoint() else 'chk'}-{metadata.checkpoint_id}-{started}"
    try:
        outcomes, failed, docs_url = run_gx(plan, asset_frames, docs_dir, run_name, build_data_docs)
    finally:
        if cached is not None:
            cached.unpersist()
    report = ValidationReport(
        snapshot_uri=snap.uri, job_id=metadata.job_id, checkpoint_id=metadata.checkpoint_id,
        status="failed" if failed or drained else "passed", engine="spark" if use_spark else "pandas",
        started_ms=started, duration_ms=max(0, clock_ms() - started), rows=total_rows,
        assets=tuple(outcomes), failed=tuple(failed), unknown=tuple(plan.unknown),
        data_docs_url=docs_url, run_name=run_name,
        reason=str(DrainedSnapshotError(snap.uri, drained)) if drained else None,
    )
    if write_results:
        report = write_results_json(snap, report)
    if record:
        report = replace(report, metadata_sha256=record_outcome(snap, report).digest())
    return report


# ---- frames ----------------------------------------------------------------------------------------------


def file_tasks(snap: Snapshot, plan: SuitePlan) -> list[F.FileTask]:
    """One :class:`FileTask` per keyed state or timers file of every operator that has suites (a broadcast state
    file is verified with the unread ones: ``verify_unread_files``)."""
    tasks: list[F.FileTask] = []
    for op in snap.metadata.operators:
        facts = plan.facts.get(op.uid)
        if facts is None:
            continue
        for sub in op.subtasks:
            for handle in sub.files:
                if is_broadcast_state_table(handle.table):
                    continue
                tasks.append(F.FileTask.of(len(tasks), facts, sub.subtask, sub.key_group_range, handle))
    return tasks


def verify_unread_files(snap: Snapshot, tasks: list[F.FileTask]) -> None:
    """Verify (size, sha256, rows) every state file no frame reads, e.g. non-keyed operators' state."""
    read = {(t.operator_uid, t.path) for t in tasks}
    for uid, _, handle in snap.metadata.files():
        if (uid, handle.path) not in read:
            snap.read_file(handle)


def pandas_frames(snap: Snapshot, plan: SuitePlan, tasks: list[F.FileTask]) -> dict[str, tuple[str, Any, int]]:
    """``{asset: ("pandas", DataFrame, rows)}`` for every asset of ``plan`` (empty frames where no file contributes).

    Each file is read (and verified) once; its derived Arrow tables are concatenated per
    asset and converted to pandas once, with only the columns the asset's expectations read."""
    parts: dict[str, list[pa.Table]] = {}
    files_rows: dict[str, list[dict[str, Any]]] = {}
    handles = {(uid, h.path): h for uid, _, h in snap.metadata.files()}
    for task in tasks:
        table = snap.read_file(handles[(task.operator_uid, task.path)])
        for kind, frame in F.derive_file(task, table).items():
            parts.setdefault(asset_of(task, kind), []).append(frame)
        files_rows.setdefault(files_asset(task.operator_uid), []).append(file_row(task, F.column_types(table)))
        del table
    out: dict[str, tuple[str, Any, int]] = {}
    for name, suite in plan.assets.items():
        if suite.kind == FILES:
            frame = files_frame(files_rows.get(name, []))
            out[name] = ("pandas", frame, len(frame))
        elif suite.kind == SOURCE_OFFSETS:
            continue
        else:
            tables = parts.pop(name, None) or [F.empty_frame(suite.kind)]
            table = pa.concat_tables(tables)
            del tables
            columns = used_columns(suite.expectations, table.column_names)
            if columns is not None:
                table = table.select(columns)
            # one conversion gives one consolidated block per dtype, which GX slices per metric
            rows = table.num_rows
            out[name] = ("pandas", table.to_pandas(split_blocks=False, self_destruct=True, types_mapper=_pandas_type),
                         rows)
    return out


def _pandas_type(arrow_type: pa.DataType) -> Any:
    """Strings stay in Arrow memory (pandas' ``string[pyarrow]``): no Python object per value,
    null checks read the validity bitmap, set membership runs in Arrow."""
    return pd.StringDtype("pyarrow") if arrow_type == pa.string() else None


def offsets_frame(current: dict[str, Any], previous: dict[str, Any]) -> pd.DataFrame:
    """One row per split: its offset now and at the previous retained checkpoint (NaN when absent or not numeric)."""
    splits = sorted(set(current) | set(previous))

    def num(v: Any) -> float:
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else float("nan")

    return pd.DataFrame({"split": splits, "offset": [num(current.get(s)) for s in splits],
                         "previous_offset": [num(previous.get(s)) for s in splits]})


# ---- Great Expectations --------------------------------------------------------------------------------


def gx_context(data_docs_dir: Path) -> Any:
    """An ephemeral GX context: analytics and progress bars off, one local Data Docs site and no other."""
    from great_expectations.data_context.types.base import (
        DataContextConfig,
        InMemoryStoreBackendDefaults,
        ProgressBarsConfig,
    )

    data_docs_dir.mkdir(parents=True, exist_ok=True)
    config = DataContextConfig(
        store_backend_defaults=InMemoryStoreBackendDefaults(init_temp_docs_sites=False),
        analytics_enabled=False,
        progress_bars=ProgressBarsConfig(globally=False),
        data_docs_sites={DATA_DOCS_SITE: {
            "class_name": "SiteBuilder",
            "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
            "store_backend": {"class_name": "TupleFilesystemStoreBackend", "base_directory": str(data_docs_dir)},
        }},
    )
    return gx.get_context(project_config=config, mode="ephemeral")


def run_gx(plan: SuitePlan, asset_frames: dict[str, tuple[str, Any, int]], data_docs_dir: Path, run_name: str,
           build_data_docs: bool = True) -> tuple[list[AssetOutcome], list[FailedExpectation], str | None]:
    """Validate every asset's frame with its whole suite in one ValidationDefinition run, then
    render Data Docs once for the run.

    A gx.Checkpoint passes the same ``batch_parameters`` to all its definitions and the
    frames differ per asset, so the definitions run one by one; their results land in the
    context's validation results store, and one ``build_data_docs`` renders them all with
    one site index (an UpdateDataDocsAction per asset rebuilt the index every time).
    pandas runs under :func:`_gx_pandas_settings` (copy-on-write, no batch fingerprint).

    Spark: GX's SUMMARY format adds a job per expectation (the partial list of unexpected
    values) to the aggregate jobs it bundles per domain, so a Spark frame is validated with
    BOOLEAN_ONLY first and only its failed expectations again with SUMMARY, as a second
    suite ``"<asset> (failures)"`` (its own Data Docs page)."""
    context = gx_context(data_docs_dir)
    sources: dict[str, Any] = {}
    outcomes: list[AssetOutcome] = []
    failed: list[FailedExpectation] = []
    for name, suite_plan in plan.assets.items():
        engine, frame, rows = asset_frames[name]
        if engine == "spark":
            frame = _only_used_columns(frame, suite_plan.expectations)
        if engine not in sources:
            sources[engine] = (context.data_sources.add_pandas(f"sluice-{engine}") if engine == "pandas"
                               else context.data_sources.add_spark(f"sluice-{engine}"))
        batch_definition = sources[engine].add_dataframe_asset(name).add_batch_definition_whole_dataframe("snapshot")
        first_format = RESULT_FORMAT if engine == "pandas" else {"result_format": "BOOLEAN_ONLY"}
        results = _validate(context, batch_definition, name, suite_plan.expectations, frame, engine, run_name,
                            first_format)
        failing = [r for r in results if not r.success]
        if engine == "spark" and failing:
            detailed = _validate(context, batch_definition, f"{name} (failures)",
                                 [_detached(r.expectation_config) for r in failing], frame, engine, run_name,
                                 RESULT_FORMAT)
            failing = [r for r in detailed if not r.success] or failing
        failed.extend(_failure(name, r) for r in failing)
        outcomes.append(AssetOutcome(name, rows, len(results), len(failing)))
    if not build_data_docs:
        return outcomes, failed, None
    context.build_data_docs(site_names=[DATA_DOCS_SITE])
    urls = context.get_docs_sites_urls(site_name=DATA_DOCS_SITE)
    return outcomes, failed, (urls[0]["site_url"] if urls else None)


def _validate(context: Any, batch_definition: Any, suite_name: str, expectations: list[Any], frame: Any,
              engine: str, run_name: str, result_format: dict[str, Any]) -> list[Any]:
    """One ValidationDefinition run of ``expectations`` over ``frame``; its expectation results."""
    suite = context.suites.add(gx.ExpectationSuite(name=suite_name, meta={"sluice_run": run_name}))
    for expectation in expectations:
        suite.add_expectation(expectation)
    definition = context.validation_definitions.add(
        gx.ValidationDefinition(name=f"{run_name}:{suite_name}", data=batch_definition, suite=suite))
    if engine != "pandas":
        return list(definition.run(batch_parameters={"dataframe": frame}, result_format=result_format).results)
    with _gx_pandas_settings():
        return list(definition.run(batch_parameters={"dataframe": frame}, result_format=result_format).results)


def _detached(config: Any) -> Any:
    """A failed expectation as a new Expectation that another suite may hold (GX refuses one with an id)."""
    expectation = config.to_domain_obj()
    expectation.id = None
    return expectation


_settings_lock = threading.Lock()
_settings_users = [0]
_settings_saved: dict[str, Any] = {}


@contextmanager
def _gx_pandas_settings() -> Iterator[None]:
    """Process-wide settings held while GX validates pandas frames, restored after the last
    concurrent run (counted under a lock: both are globals of pandas and GX).

    - pandas copy-on-write: GX takes a ``dropna`` and a boolean-mask view of the frame per
      metric domain, and without copy-on-write each is a deep copy of every column.
    - no batch fingerprint: GX hashes every cell of a pandas batch under 1 GB
      (``hash_pandas_object``, a third of GX's time at 10M rows) only to put it in the batch
      markers; every state file was already sha256-verified against ``_metadata`` when read,
      a stronger fingerprint, so GX's size threshold for it is 0 meanwhile."""
    from great_expectations.execution_engine import pandas_execution_engine as engine_module

    with _settings_lock:
        if _settings_users[0] == 0:
            _settings_saved["threshold"] = engine_module.HASH_THRESHOLD
            _settings_saved["cow"] = pd.get_option("mode.copy_on_write")
            engine_module.HASH_THRESHOLD = 0
            pd.set_option("mode.copy_on_write", True)
        _settings_users[0] += 1
    try:
        yield
    finally:
        with _settings_lock:
            _settings_users[0] -= 1
            if _settings_users[0] == 0:
                engine_module.HASH_THRESHOLD = _settings_saved["threshold"]
                pd.set_option("mode.copy_on_write", _settings_saved["cow"])


def _only_used_columns(frame: Any, expectations: list[Any]) -> Any:
    """The Spark frame reduced to the columns its expectations read (the cache holds all of them)."""
    columns = used_columns(expectations, list(frame.columns))
    return frame if columns is None else frame.select(*columns)


def _failure(asset: str, r: Any) -> FailedExpectation:
    config = r.expectation_config
    result = r.result or {}
    meta = config.meta or {}
    kwargs = {k: _jsonable(v) for k, v in config.kwargs.items() if k != "batch_id"}
    exception = (r.exception_info or {}).get("exception_message") if isinstance(r.exception_info, dict) else None
    partial = tuple(str(v) for v in (result.get("partial_unexpected_list") or [])[:PARTIAL_UNEXPECTED])
    if exception and not partial:
        partial = (f"error: {exception}",)
    return FailedExpectation(
        asset=asset, expectation=config.type, kwargs=kwargs, rule=str(meta.get("rule", "")),
        unexpected_count=result.get("unexpected_count"), observed_value=result.get("observed_value"),
        partial_unexpected=partial, user=bool(meta.get("user")),
    )


def ensure_restorable(
    snapshot: str | Snapshot,
    *,
    job_spec: str | None = None,
    skip_validation: bool = False,
    allow_non_restored_state: bool = False,
    allow_drained: bool = False,
    validated_digest: str | None = None,
    record: bool = True,
    **options: Any,
) -> ValidationReport | None:
    """What ``sluice restore`` and ``sluice run --from-savepoint`` call first (issue 6, "Where it runs").

    First refuses a drained snapshot (:mod:`checkpoints.drained`) with DrainedSnapshotError,
    reading only its ``_metadata``, unless ``allow_drained=True`` (then logs a warning);
    ``skip_validation`` does not lift that.  Then validates the snapshot (and, with
    ``job_spec``, that the job can restore it); on any failure raises CorruptSnapshotError
    naming each failed expectation and incompatibility, so nothing is restored.
    ``skip_validation=True`` skips the validation and says so loudly in the log (the caller
    should print it too); returns None then.  ``options`` go to :func:`validate_snapshot`.

    ``record`` (default True): the outcome, passed or failed, is recorded in the snapshot's ``_metadata``
    (:func:`checkpoints.validation.records.record_outcome`), as ``sluice validate --record`` does, so
    ``sluice checkpoints list``, ``inspect`` and the savepoint history policy see the snapshot a restore
    validated as validated (a new user found it listed as "not validated" right after restoring from it).
    The run's results are written beside the snapshot either way.

    ``validated_digest`` is the :meth:`CheckpointMetadata.digest` of the snapshot as a caller
    validated it just before (the Airflow restore operator, which validates, records the
    outcome and then starts the master): when the snapshot's ``_metadata`` still has that
    digest — its state files are pinned by the checksums it lists, verified on restore — the
    Great Expectations run is not repeated (one validation per restore); otherwise it runs.
    The digest comes from the caller's command line, never from storage."""
    uri = snapshot if isinstance(snapshot, str) else snapshot.uri
    if isinstance(snapshot, Snapshot):
        metadata = snapshot.metadata
    else:  # the options validate_snapshot does not name are storage options
        own = inspect.signature(validate_snapshot).parameters
        metadata = read_snapshot_metadata(snapshot, **{k: v for k, v in options.items() if k not in own})
    drained = drained_reason(metadata)
    if drained is not None:
        if not allow_drained:
            raise DrainedSnapshotError(uri, drained)
        log.warning("RESTORING A DRAINED SNAPSHOT (allow_drained): %s: %s", uri, drained)
    if skip_validation:
        log.warning("VALIDATION SKIPPED (--skip-validation): restoring %s without checking its state", uri)
        return None
    report: ValidationReport | None = None
    problems: list[str] = []
    if validated_digest is not None and validated_digest == metadata.digest():
        log.info("%s was validated by the caller and is unchanged since (metadata sha256 %s): not validated again",
                 uri, validated_digest)
    else:
        if validated_digest is not None:
            log.warning("%s changed since the caller validated it (metadata sha256 %s, expected %s): validating again",
                        uri, metadata.digest(), validated_digest)
        report = validate_snapshot(snapshot, job_spec=job_spec, allow_drained=allow_drained, record=record,
                                   **options)
        problems = [f"{f.asset}: {f.expectation} failed ({f.rule}; {f.unexpected_count} unexpected)"
                    for f in report.failed]
    if job_spec is not None:
        compat = check_compatibility(snapshot, job_spec, allow_non_restored_state=allow_non_restored_state)
        problems += [f"{p.kind} of operator {p.operator!r}: {p.detail}" for p in compat.problems]
    if problems:
        where = f" (Data Docs: {report.data_docs_url}; results: {report.results_uri})" if report else ""
        raise CorruptSnapshotError(
            f"snapshot {uri} failed validation; nothing was restored{where}: " + "; ".join(problems)
            + ". Pass --skip-validation to restore anyway.")
    if report is not None:  # the outcome in the log too: a master's log is often all an operator keeps
        log.info("%s passed validation: %d expectations over %d rows in %d ms; Data Docs %s", uri,
                 sum(a.evaluated for a in report.assets), report.rows, report.duration_ms, report.data_docs_url)
    return report
