"""Where a validation outcome is kept: JSON beside the snapshot, and a summary in its ``_metadata``.

``_metadata``'s ``validation`` field is what savepoint history reads
(``CheckpointMetadata.validation_passed()``: ``validation["status"] == "passed"``);
the history policy never deletes the newest savepoint that passed
(:func:`checkpoints.retention.savepoints_to_discard`).  So ``status`` is exactly
"passed" or "failed", and the field also holds the run time, the failed
expectations (asset, expectation, rule, unexpected count), the ``reason`` a
snapshot fails whatever its state holds (drained: ``checkpoints.drained``), and
where the full results and the Data Docs are.  Writing it is a conditional replace
(:func:`checkpoints.savepoints.record_validation`), and the state files and
their checksums are untouched: only ``_metadata`` changes.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from checkpoints.metadata import CheckpointMetadata
from checkpoints.restore import Snapshot
from checkpoints.savepoints import record_validation

RESULTS_DIR = "_validation"
MAX_RECORDED_FAILURES = 20


def validation_field(report: Any) -> dict[str, Any]:
    """The ``validation`` field of ``_metadata`` for a :class:`~checkpoints.validation.runner.ValidationReport`."""
    return {
        "status": report.status,
        "validated_at_ms": report.started_ms,
        "duration_ms": report.duration_ms,
        "engine": report.engine,
        "rows": report.rows,
        "expectations_evaluated": sum(a.evaluated for a in report.assets),
        "failed_expectations": [
            {"asset": f.asset, "expectation": f.expectation, "rule": f.rule, "unexpected_count": f.unexpected_count}
            for f in report.failed[:MAX_RECORDED_FAILURES]
        ],
        "failed_count": len(report.failed),
        "reason": report.reason,
        "unknown": list(report.unknown),
        "results_uri": report.results_uri,
        "data_docs_url": report.data_docs_url,
        "tool": "great_expectations",
    }


def results_key(snap: Snapshot, run_name: str) -> str:
    return f"{snap.snapshot_dir}{RESULTS_DIR}/{run_name}.json"


def write_results_json(snap: Snapshot, report: Any) -> Any:
    """Store the full report as JSON beside the snapshot; returns the report with ``results_uri`` set."""
    key = results_key(snap, report.run_name)
    uri = snap.store.key_uri(key)
    report = dataclasses.replace(report, results_uri=uri)
    snap.store.put_bytes(key, json.dumps(report.to_dict(), indent=2, sort_keys=True, default=str).encode("utf-8"))
    return report


def record_outcome(snap: Snapshot, report: Any) -> CheckpointMetadata:
    """Write the outcome into the snapshot's ``_metadata`` (conditional replace); returns the new metadata."""
    return record_validation(snap.store, snap.snapshot_dir, validation_field(report))


def read_outcome(metadata: CheckpointMetadata) -> str:
    """"passed", "failed" or "not validated": how savepoint history and ``sluice inspect`` see the snapshot."""
    if not metadata.validation:
        return "not validated"
    return "passed" if metadata.validation_passed() else str(metadata.validation.get("status", "failed"))
