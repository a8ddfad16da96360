"""The ``sluice`` command line (ARCHITECTURE section 7).

Implemented verbs: ``demo``.  The storage verbs (``checkpoints list``,
``inspect``) are mounted from the checkpoints package when it is installed.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import click

# Spark workers must run the interpreter that runs Sluice (ARCHITECTURE section 8)
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


@click.group()
def main() -> None:
    """Sluice: Flink's window and checkpoint semantics on PySpark, operated with Airflow."""


@main.command()
@click.option("--runtime", type=click.Choice(["local", "spark"]), default="local", show_default=True)
@click.option("--parallelism", type=int, default=2, show_default=True)
@click.option("--events-per-split", type=int, default=5_000, show_default=True)
@click.option("--show", type=int, default=5, show_default=True, help="results printed per window kind")
@click.option("--json-summary", is_flag=True, help="print only the summary as JSON")
def demo(runtime: str, parallelism: int, events_per_split: int, show: int, json_summary: bool) -> None:
    """Run the purchase-count window job end to end on embedded defaults and print its results."""
    from engine.api.environment import StreamExecutionEnvironment
    from engine.examples import purchases

    config = purchases.PurchaseJobConfig(events_per_split=events_per_split)
    summary: dict[str, Any] = {"runtime": runtime, "parallelism": parallelism,
                               "events": config.num_splits * config.events_per_split}
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism).set_runtime(runtime)
    # sources emit watermarks after every bundle they read: small bundles keep event time moving
    env.set_runtime_option("bundle_size", 16)
    results, result = env.execute_and_collect_streams(purchases.build(env, config), "purchases")
    for name, rows in results.items():
        summary[f"{name}_results"] = len(rows)
    summary["dead_letters"] = result.dead_letter_count
    summary["late_records_dropped"] = result.metrics.get("num_late_records_dropped", 0)
    summary["runtime_ms"] = result.net_runtime_ms
    if json_summary:
        click.echo(json.dumps(summary))
        return
    for name, rows in results.items():
        click.echo(f"== {name}: {len(rows)} results")
        for row in rows[:show]:
            click.echo(f"   {row}")
    click.echo(json.dumps(summary))


def _mount_optional() -> None:
    try:
        from checkpoints.cli import checkpoints_cli, inspect_command
    except ImportError:
        return
    main.add_command(checkpoints_cli, "checkpoints")
    main.add_command(inspect_command, "inspect")


_mount_optional()

if __name__ == "__main__":
    main()
