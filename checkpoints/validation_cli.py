"""``sluice validate <snapshot> [--job spec] [--data-docs DIR]``: the click command for the lead's CLI to mount.

Mount with ``main.add_command(validate_command, "validate")``.  Exit code 0 when
the snapshot passed (and, with ``--job``, the new job can restore it), 1
otherwise; a summary table (rich) per frame, every failed expectation with its
rule, what could not be checked, and a link to the Data Docs.  Its progress goes to stderr on a terminal
(``--progress`` / ``--no-progress`` as in ``sluice run``).  A GE
``gx.Checkpoint`` here is a validation run, not a snapshot.
"""

from __future__ import annotations

import json
from typing import Any

import click


@click.command("validate")
@click.argument("snapshot")
@click.option("--job", "job_spec", default=None,
              help="new job spec 'package.module:function': also check it can restore the snapshot, "
                   "and use the expectations file beside it")
@click.option("--data-docs", "data_docs_dir", default=None, type=click.Path(file_okay=False),
              help="directory for the Data Docs HTML (default $SLUICE_DATA_DOCS_DIR, else <user cache dir>/sluice/data_docs: "
                   "$XDG_CACHE_HOME or ~/.cache; never the current directory); the path is printed")
@click.option("--expectations", "expectations_file", default=None, type=click.Path(dir_okay=False, exists=True),
              help="a user expectations file (JSON/YAML) instead of the one beside the job")
@click.option("--engine", type=click.Choice(["auto", "pandas", "spark"]), default="auto", show_default=True,
              help="validate with pandas or Spark; auto: Spark above --spark-threshold rows of state")
@click.option("--spark-threshold", type=int, default=None, help="rows of state above which --engine auto uses Spark")
@click.option("--record/--no-record", default=False, show_default=True,
              help="write the outcome beside the snapshot (_validation/<run>.json) and into its _metadata (the "
                   "validated tier of savepoints); without it, validate only reads the snapshot's storage")
@click.option("--allow-non-restored-state", "-n", "allow_non_restored_state", is_flag=True,
              help="with --job: state nobody restores is not an error (Flink's -n/--allowNonRestoredState)")
@click.option("--allow-drained", is_flag=True,
              help="a drained snapshot (taken by stop --drain, watermark MAX_WATERMARK) is not a failure")
@click.option("--endpoint-url", default=None, help="S3-compatible endpoint")
@click.option("--region", default=None, help="S3 region")
@click.option("--json", "as_json", is_flag=True, help="print the report as JSON")
@click.option("--progress/--no-progress", default=None,
              help="progress of the validation on stderr (default: on a terminal only)")
def validate_command(snapshot: str, job_spec: str | None, data_docs_dir: str | None, expectations_file: str | None,
                     engine: str, spark_threshold: int | None, record: bool, allow_non_restored_state: bool,
                     allow_drained: bool, endpoint_url: str | None, region: str | None, as_json: bool,
                     progress: bool | None) -> None:
    """Validate a checkpoint's or savepoint's state with Great Expectations; a drained snapshot fails too."""
    from checkpoints.validation import DEFAULT_SPARK_ROW_THRESHOLD, validate_snapshot
    from checkpoints.validation.compatibility import check_compatibility
    from engine.errors import SluiceError
    from engine.progress import Progress

    options: dict[str, Any] = {}
    if snapshot.startswith("s3"):
        options = {key: value for key, value in (("endpoint_url", endpoint_url), ("region", region)) if value}
    try:
        with Progress(progress).step(f"validating {snapshot}"):
            report = validate_snapshot(
                snapshot, job_spec=job_spec, user_expectations=expectations_file, data_docs_dir=data_docs_dir,
                engine=engine, spark_row_threshold=spark_threshold or DEFAULT_SPARK_ROW_THRESHOLD, record=record,
                write_results=record, allow_drained=allow_drained, **options)
            compat = (check_compatibility(snapshot, job_spec, allow_non_restored_state=allow_non_restored_state,
                                          **options) if job_spec else None)
    except SluiceError as exc:
        click.echo(f"validation refused: {exc}", err=True)
        raise SystemExit(1) from None
    ok = report.passed and (compat is None or compat.compatible)
    if as_json:
        click.echo(json.dumps({"ok": ok, "validation": report.to_dict(),
                               "compatibility": compat.to_dict() if compat else None}, indent=2, default=str))
        raise SystemExit(0 if ok else 1)
    _print_summary(report, compat, ok)
    raise SystemExit(0 if ok else 1)


def _print_summary(report: Any, compat: Any, ok: bool) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console(soft_wrap=True)
    verdict = "[green]PASSED[/green]" if report.passed else "[red]FAILED[/red]"
    console.print(f"state of {report.snapshot_uri} (job {report.job_id}, checkpoint {report.checkpoint_id}): "
                  f"expectations {verdict} on {report.engine}, {report.rows} rows in {report.duration_ms} ms")
    table = Table("frame", "rows", "expectations", "failed")
    for a in report.assets:
        table.add_row(a.asset, str(a.rows), str(a.evaluated), f"[red]{a.failed}[/red]" if a.failed else "0")
    console.print(table)
    if report.reason:
        console.print(f"[red]refused:[/red] {escape(report.reason)}")
    if report.failed:
        failures = Table("frame", "expectation", "columns", "unexpected", "rule", title="failed expectations")
        for f in report.failed:
            columns = ", ".join(str(v) for k, v in f.kwargs.items() if k.startswith("column"))
            failures.add_row(f.asset, f.expectation, columns, str(f.unexpected_count if f.unexpected_count is not None
                                                                   else f.observed_value), f.rule)
        console.print(failures)
    for u in report.unknown:
        console.print(f"not checked: {u}")
    if compat is not None:
        state = "[green]can restore[/green]" if compat.compatible else "[red]cannot restore[/red]"
        console.print(f"job {compat.job_spec} {state} this snapshot")
        for p in compat.problems:
            console.print(f"  [red]{p.kind}[/red] {p.operator}: {p.detail}")
        for u in compat.unknown:
            console.print(f"  not checked: {u}")
    if report.data_docs_url:
        console.print(f"Data Docs: {report.data_docs_url}")
    if report.results_uri:
        console.print(f"results: {report.results_uri}")
    # the last line is the answer: the state may pass its expectations while the job cannot restore it
    if ok:
        console.print("[green]OK[/green]: " + ("the job can restore this snapshot" if compat is not None
                                              else "the snapshot's state passed (add --job to check a restore)"))
    else:
        why = "its state failed validation" if not report.passed else f"job {compat.job_spec} cannot restore it"
        console.print(f"[red]NOT OK[/red]: {why}")
