"""A moto S3 server over HTTP on 127.0.0.1 (any free port), and a boto3 client for it."""

from __future__ import annotations

import uuid

import pytest


@pytest.fixture(scope="module")
def moto_endpoint(monkeypatch_module):
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


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
