"""Every module imports first, in a fresh interpreter (a CI run of a whole suite found
``import checkpoints.backends`` failing as a circular import: checkpoints.errors imports engine.errors,
which loads the engine package, whose API reached engine.io.storage, which imported checkpoints.backends).
Which module a process imports first depends on the client (the CLI, Airflow's DAG processor, a Spark
worker, a test), so each module is tried first once."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("checkpoints", "engine/api", "engine/graph", "engine/io", "engine/master", "engine/runtime", "engine/checkpointing",
            "engine/windowing", "engine/watermarks", "engine/state", "engine/operators")


def _modules() -> list[str]:
    names = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "spark" in path.parts or path.name == "__main__.py":
                continue  # the Spark runtime's modules import pyspark: covered by the Spark tests
            parts = path.relative_to(ROOT).with_suffix("").parts
            names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def test_every_module_can_be_the_first_one_imported() -> None:
    modules = _modules()
    assert len(modules) > 60
    # one process forks a child per module, with the third-party modules loaded and none of Sluice's
    # (tests/import_order_server.py): a fresh interpreter per module took 90 s of CI on two cores
    done = subprocess.run([sys.executable, str(Path(__file__).with_name("import_order_server.py"))],
                          input="\n".join(modules), cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    reports = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert [r["module"] for r in reports] == modules
    assert {r["module"]: r["error"] for r in reports if r["error"]} == {}
