"""Fixtures: one contract, three backends (STYLE section 6 "One suite, two runtimes", here backends).

``backend`` is parametrized over the local filesystem, moto in-process
(``moto.mock_aws``) and moto's server over HTTP (the suite's ``moto_endpoint``
in tests/conftest.py, with ``endpoint_url``), so every contract test runs
against all three, each on a bucket of its own.  Faults are injected with botocore event hooks (``before-send``), which
work the same for both moto modes.
"""

from __future__ import annotations

import os
import types
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

import boto3
import pytest

from checkpoints import LocalFileSystemStore, S3Store

for _name, _value in {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}.items():
    os.environ[_name] = _value

BACKENDS = ("fs", "moto", "moto_server")


@dataclass
class Backend:
    """A fresh, empty store of one kind, and how to make more stores of the same kind."""

    kind: str
    store: Any
    make: Callable[[str], Any]
    endpoint_url: str | None = None
    buckets: list[str] = field(default_factory=list)

    def uri_options(self) -> dict[str, Any]:
        return {"endpoint_url": self.endpoint_url} if self.endpoint_url else {}


def _new_bucket(endpoint_url: str | None) -> str:
    name = "sluice-" + uuid.uuid4().hex[:12]
    boto3.client("s3", region_name="us-east-1", endpoint_url=endpoint_url).create_bucket(Bucket=name)
    return name


@pytest.fixture(params=BACKENDS)
def backend(request, tmp_path):
    kind = request.param
    if kind == "fs":
        yield Backend(kind, LocalFileSystemStore(tmp_path / "store"), lambda name: LocalFileSystemStore(tmp_path / name))
    elif kind == "moto":
        from moto import mock_aws

        with mock_aws():
            bucket = _new_bucket(None)
            yield Backend(
                kind,
                S3Store(bucket, "checkpoints", max_attempts=4),
                lambda name: S3Store(bucket, name, max_attempts=4),
            )
    else:
        endpoint = request.getfixturevalue("moto_endpoint")
        bucket = _new_bucket(endpoint)
        yield Backend(
            kind,
            S3Store(bucket, "checkpoints", endpoint_url=endpoint, max_attempts=4),
            lambda name: S3Store(bucket, name, endpoint_url=endpoint, max_attempts=4),
            endpoint_url=endpoint,
        )


@pytest.fixture(params=("moto", "moto_server"))
def s3_backend(request, tmp_path):
    """Only the S3 kinds: for fault injection through botocore."""
    if request.param == "moto":
        from moto import mock_aws

        with mock_aws():
            bucket = _new_bucket(None)
            yield Backend("moto", S3Store(bucket, "checkpoints", max_attempts=3), lambda n: S3Store(bucket, n, max_attempts=3))
    else:
        endpoint = request.getfixturevalue("moto_endpoint")
        bucket = _new_bucket(endpoint)
        yield Backend(
            "moto_server",
            S3Store(bucket, "checkpoints", endpoint_url=endpoint, max_attempts=3),
            lambda n: S3Store(bucket, n, endpoint_url=endpoint, max_attempts=3),
            endpoint_url=endpoint,
        )


@pytest.fixture
def backoff_sleeps(monkeypatch):
    """botocore's retry sleeps, recorded instead of slept: the test asserts backoff happened, quickly."""
    sleeps: list[float] = []
    import botocore.endpoint

    monkeypatch.setattr(botocore.endpoint, "time", types.SimpleNamespace(sleep=sleeps.append))
    return sleeps


@pytest.fixture
def faults(s3_backend, backoff_sleeps):
    from ckpt_helpers import FaultInjector

    return FaultInjector(s3_backend.store)


