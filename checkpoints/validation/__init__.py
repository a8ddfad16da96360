"""Great Expectations validation of snapshot state before restore and after each savepoint (issue 6).

A GE "checkpoint" would be a *validation run* here, never a snapshot.  Public API
(what ``sluice validate``, the restore path and the Airflow operators call)::

    from checkpoints.validation import validate_snapshot, check_compatibility

    report = validate_snapshot("s3://bucket/savepoints/job/savepoint-7-ab12", job_spec="pkg.jobs:build",
                               data_docs_dir="/srv/data_docs", record=True)
    report.passed, report.failed_expectations(), report.data_docs_url, report.results_uri
    compat = check_compatibility("file:///ckpt/job/chk-9", "pkg.jobs:build")
    compat.compatible, compat.problems

Modules: ``operator_config`` (what the runtime must write and how it is read,
with "unknown" outcomes), ``frames`` (computed columns per state file),
``suite_builder`` (suites from ``_metadata``), ``user_expectations`` (per-job
suite file, data only), ``runner`` (pandas or Spark, one
ValidationDefinition per frame, Data Docs once per run, results JSON),
``spark_frames``, ``previous`` (previous
snapshot's offsets), ``records`` (the ``validation`` field of ``_metadata``),
``compatibility`` (``validate --job``).  The stable key hash in numpy that
``frames`` uses is engine/state/key_hash.py.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")

# Exported names -> defining module, imported on first use: Spark's Python workers import
# checkpoints.validation.frames to derive frames, and importing Great Expectations there
# (several seconds per worker) would cost more than the derivation itself.
_EXPORTS = {
    "RUNTIME_FIELDS": "operator_config", "UNKNOWN": "operator_config", "window_operator_config": "operator_config",
    "read_outcome": "records", "record_outcome": "records", "validation_field": "records",
    "DEFAULT_SPARK_ROW_THRESHOLD": "runner", "FailedExpectation": "runner", "ValidationReport": "runner",
    "ensure_restorable": "runner", "validate_snapshot": "runner",
    "CompatibilityReport": "compatibility", "Incompatibility": "compatibility", "check_compatibility": "compatibility",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
