"""Every module imports first, in a fresh interpreter (a CI run of a whole suite found
``import checkpoints.backends`` failing as a circular import: checkpoints.errors imports engine.errors,
which loads the engine package, whose API reached engine.io.storage, which imported checkpoints.backends).
Which module a process imports first depends on the client (the CLI, Airflow's DAG processor, a Spark
worker, a test), so each module is tried first once."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
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


def _first_import(module: str) -> tuple[str, str]:
    done = subprocess.run([sys.executable, "-c", f"import {module}"], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    return module, "" if done.returncode == 0 else done.stderr.strip().splitlines()[-1]


def test_every_module_can_be_the_first_one_imported() -> None:
    modules = _modules()
    assert len(modules) > 60
    with ThreadPoolExecutor(4) as pool:
        failures = {m: why for m, why in pool.map(_first_import, modules) if why}
    assert failures == {}
