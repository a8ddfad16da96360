"""The suite's moto S3 server over HTTP (tests/conftest.py), with this folder's environment, and a boto3 client."""

from __future__ import annotations

import uuid

import pytest


@pytest.fixture(scope="module")
def moto_endpoint(moto_endpoint, monkeypatch_module):
    """The suite's server, with test credentials and no endpoint or profile of the caller's in the environment:
    each test passes the endpoint itself, as the infra tools' users do."""
    return moto_endpoint


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AWS_ACCESS_KEY_ID", "testing")
        mp.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        mp.delenv("AWS_PROFILE", raising=False)
        mp.delenv("AWS_ENDPOINT_URL", raising=False)
        mp.delenv("AWS_ENDPOINT_URL_S3", raising=False)
        yield mp


@pytest.fixture
def bucket_name() -> str:
    return f"sluice-infra-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def client(moto_endpoint):
    import boto3

    return boto3.session.Session().client("s3", region_name="us-east-1", endpoint_url=moto_endpoint)
