"""Great Expectations validation of snapshot state before restore and after each savepoint (issue 6).

A GE ``gx.Checkpoint`` is a *validation run* here, never a snapshot.  Public API
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
suite file, data only), ``runner`` (pandas or Spark, gx.Checkpoint with
UpdateDataDocsAction, results JSON), ``spark_frames``, ``previous`` (previous
snapshot's offsets), ``records`` (the ``validation`` field of ``_metadata``),
``compatibility`` (``validate --job``).
"""

from __future__ import annotations

import os

os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")

from checkpoints.validation.operator_config import RUNTIME_FIELDS, UNKNOWN, window_operator_config  # noqa: E402
from checkpoints.validation.records import read_outcome, record_outcome, validation_field  # noqa: E402
from checkpoints.validation.runner import (  # noqa: E402
    DEFAULT_SPARK_ROW_THRESHOLD,
    FailedExpectation,
    ValidationReport,
    ensure_restorable,
    validate_snapshot,
)
from checkpoints.validation.compatibility import CompatibilityReport, Incompatibility, check_compatibility  # noqa: E402

__all__ = [
    "CompatibilityReport",
    "Incompatibility",
    "check_compatibility",
    "ensure_restorable",
    "DEFAULT_SPARK_ROW_THRESHOLD",
    "FailedExpectation",
    "RUNTIME_FIELDS",
    "UNKNOWN",
    "ValidationReport",
    "read_outcome",
    "record_outcome",
    "validate_snapshot",
    "validation_field",
    "window_operator_config",
]
