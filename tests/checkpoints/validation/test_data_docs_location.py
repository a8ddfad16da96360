"""Data Docs go to a documented place, never silently into the current directory (new-user trial).

``sluice validate s3://...`` wrote its Great Expectations Data Docs to ``./.sluice/data_docs`` of whatever
directory the user stood in.  Now they go to ``--data-docs DIR`` when given, else ``$SLUICE_DATA_DOCS_DIR``,
else ``<user cache dir>/sluice/data_docs`` (``$XDG_CACHE_HOME`` or ``~/.cache``), and the path is printed.
The same default holds for the validation ``sluice restore`` runs first.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import boto3
import pytest
from click.testing import CliRunner

from checkpoints import CheckpointStorage
from checkpoints.backends.s3 import S3Store
from checkpoints.validation_cli import validate_command
from snapshot_writer import write_snapshot
from validation_state import fed_routers


@pytest.fixture
def s3_snapshot(moto_endpoint) -> str:
    bucket = "sluice-" + uuid.uuid4().hex[:12]
    boto3.client("s3", region_name="us-east-1", endpoint_url=moto_endpoint).create_bucket(Bucket=bucket)
    store = S3Store(bucket, "checkpoints", endpoint_url=moto_endpoint, region="us-east-1")
    return write_snapshot(CheckpointStorage(store, "job-1"), 1, fed_routers(),
                          source_positions={"split-0": 10, "split-1": 20})


@pytest.fixture
def elsewhere(tmp_path, monkeypatch) -> tuple[Path, Path]:
    """An empty working directory and a user cache dir, with no SLUICE_DATA_DOCS_DIR set."""
    cwd, cache = tmp_path / "cwd", tmp_path / "cache"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    monkeypatch.delenv("SLUICE_DATA_DOCS_DIR", raising=False)
    return cwd, cache


def _docs_line(output: str) -> str:
    return next(line for line in output.splitlines() if line.startswith("Data Docs: "))


def test_validate_without_data_docs_writes_them_under_the_user_cache_dir_and_prints_where(
        s3_snapshot, moto_endpoint, elsewhere):
    cwd, cache = elsewhere
    result = CliRunner().invoke(validate_command, [s3_snapshot, "--endpoint-url", moto_endpoint])
    assert result.exit_code == 0, result.output
    assert list(cwd.iterdir()) == []  # nothing in the directory the user stood in
    index = cache / "sluice" / "data_docs" / "index.html"
    assert _docs_line(result.output) == f"Data Docs: {index.as_uri()}"
    assert index.is_file()


def test_validate_with_data_docs_writes_them_there(s3_snapshot, moto_endpoint, elsewhere, tmp_path):
    cwd, cache = elsewhere
    docs = tmp_path / "my-docs"
    result = CliRunner().invoke(validate_command, [s3_snapshot, "--endpoint-url", moto_endpoint,
                                                   "--data-docs", str(docs)])
    assert result.exit_code == 0, result.output
    assert _docs_line(result.output) == f"Data Docs: {(docs / 'index.html').as_uri()}"
    assert list(cwd.iterdir()) == [] and not cache.exists()


def test_the_help_names_the_default_place():
    text = " ".join(CliRunner().invoke(validate_command, ["--help"]).output.split())
    assert "--data-docs DIR" in text and "<user cache dir>/sluice/data_docs" in text
