"""Nothing from storage or from a request is trusted beyond its checks: the control plane (issue 17).

- a savepoint/stop request's ``target_directory`` stays inside the master's savepoint root;
- the OpenAPI document needs the token when the master has one;
- a client holding a token does not send it to a control URL read from storage unless the host is
  loopback or allowed — checked against a real HTTP server on this machine's non-loopback address.
"""

from __future__ import annotations

import http.server
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from engine.master.client import ControlClient, UntrustedControlUrl, trusted_control_url
from engine.master.master import JobMaster, MasterConfig
from engine.master.targets import confine_target

TOKEN = "s3cret-control-token"


@pytest.mark.parametrize(("requested", "ok"), [
    ("s3://bucket/savepoints", True),
    ("s3://bucket/savepoints/team-a/today", True),
    ("s3a://bucket/savepoints/x", True),
    ("s3://other-bucket/savepoints", False),
    ("s3://bucket/savepoints-evil", False),
    ("s3://bucket/savepoints/../checkpoints", False),
    ("s3://bucket", False),
    ("file:///tmp/savepoints", False),
    ("gs://bucket/savepoints", False),
])
def test_an_s3_target_must_lie_under_the_savepoint_root(requested: str, ok: bool) -> None:
    if ok:
        assert confine_target(requested, ("s3://bucket/savepoints",)) == requested
    else:
        with pytest.raises(ValueError, match="target_directory"):
            confine_target(requested, ("s3://bucket/savepoints",))


def test_a_local_target_is_resolved_before_it_is_compared(tmp_path: Path) -> None:
    root = tmp_path / "sp"
    root.mkdir()
    (tmp_path / "elsewhere").mkdir()
    (root / "link").symlink_to(tmp_path / "elsewhere")
    assert confine_target(str(root / "a"), (root.as_uri(),)) == str(root / "a")
    assert confine_target((root / "b").as_uri(), (str(root),)) == (root / "b").as_uri()
    for bad in (str(root / ".." / "x"), str(root / "link" / "x"), str(tmp_path), "s3://b/sp"):
        with pytest.raises(ValueError):
            confine_target(bad, (root.as_uri(),))


@pytest.mark.parametrize(("url", "allowed", "ok"), [
    ("http://127.0.0.1:8081", (), True),
    ("http://localhost:8081", (), True),
    ("http://[::1]:8081", (), True),
    ("http://10.1.2.3:8081", (), False),
    ("http://10.1.2.3:8081", ("10.0.0.0/8",), True),
    ("http://master-1.jobs.internal:8081", (".jobs.internal",), True),
    ("http://master-1.jobs.internal.evil.com:8081", (".jobs.internal",), False),
    ("http://master-1.jobs.internal:8081", ("master-1.jobs.internal",), True),
    ("ftp://127.0.0.1/", (), False),
])
def test_a_token_goes_only_to_loopback_or_allowed_hosts(url: str, allowed: tuple[str, ...], ok: bool) -> None:
    if ok:
        assert trusted_control_url(url, allowed) == url
    else:
        with pytest.raises(UntrustedControlUrl, match="not sent"):
            trusted_control_url(url, allowed)


@pytest.fixture
def master(tmp_path: Path):
    config = MasterConfig(job_spec="engine.examples.purchases:build", job_name="purchases",
                          params={"events_per_split": None, "events_per_second": 50}, checkpoint_interval_ms=300,
                          storage_uri=(tmp_path / "chk").as_uri(), savepoint_dir=(tmp_path / "sp").as_uri(),
                          output_dir=str(tmp_path / "out"), token=TOKEN, status_interval_ms=200,
                          linger_after_end_s=0.2, runtime_options={"bundle_size": 64})
    m = JobMaster(config).start()
    try:
        yield m
    finally:
        if not m.client.get_job_execution_result().done():
            m.client.cancel()
            m.wait()


def test_the_master_refuses_savepoint_targets_outside_its_root_and_hides_its_api_document(master, tmp_path):
    auth = {"Authorization": f"Bearer {TOKEN}"}
    url = master.url
    for target in ((tmp_path / "elsewhere").as_uri(), (tmp_path / "sp" / ".." / "chk").as_uri(), "s3://other/x"):
        answer = httpx.post(f"{url}/jobs/purchases/savepoints", json={"target_directory": target}, headers=auth)
        assert answer.status_code == 400 and "target_directory" in answer.json()["detail"], answer.text
    assert not (tmp_path / "elsewhere").exists()

    inside = (tmp_path / "sp" / "team-a").as_uri()
    with ControlClient(url, "purchases", TOKEN) as client:
        done = client.wait("savepoint", client.trigger_savepoint(inside), timeout_s=120)
    location = done["operation"]["location"]
    assert location.startswith(inside + "/purchases/savepoint-")

    assert httpx.get(f"{url}/openapi.json").status_code == 401
    document = httpx.get(f"{url}/openapi.json", headers=auth)
    assert document.status_code == 200 and "/jobs/{job_id}/savepoints" in document.json()["paths"]
    assert httpx.get(f"{url}/docs", headers=auth).status_code == 404


def _non_loopback_ipv4() -> str | None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("10.255.255.255", 9))  # no packet is sent: this only picks the outgoing interface
            address = probe.getsockname()[0]
        except OSError:
            return None
    return None if address.startswith("127.") or address == "0.0.0.0" else address


class _Recorder(http.server.BaseHTTPRequestHandler):
    seen: list[dict[str, str]] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        type(self).seen.append({"path": self.path, "authorization": self.headers.get("Authorization", "")})
        body = json.dumps({"state": "RUNNING", "job_id": "purchases"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


def test_the_cli_does_not_send_its_token_to_a_foreign_control_url_read_from_storage(tmp_path: Path) -> None:
    address = _non_loopback_ipv4()
    if address is None:
        pytest.skip("this machine has no non-loopback IPv4 address to serve a stranger's master on")
    server = http.server.ThreadingHTTPServer((address, 0), _Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _Recorder.seen = []
    try:
        from checkpoints.backends import open_store
        from checkpoints.status import StatusDocument, write_status

        storage = (tmp_path / "chk").as_uri()
        foreign = f"http://{address}:{server.server_address[1]}"
        write_status(open_store(storage), StatusDocument(job_id="purchases", heartbeat_ms=int(time.time() * 1000),
                                                         extra={"control_url": foreign}))
        cli = [sys.executable, "-m", "engine.cli", "status", "purchases", "--storage", storage, "--json"]
        env = {**os.environ, "SLUICE_CONTROL_TOKEN": TOKEN}
        env.pop("SLUICE_CONTROL_HOSTS", None)
        refused = subprocess.run(cli, capture_output=True, text=True, env=env, timeout=60)
        assert refused.returncode == 1 and "is not sent there" in refused.stderr, refused.stderr
        assert _Recorder.seen == []

        allowed = subprocess.run(cli + ["--control-hosts", address], capture_output=True, text=True, env=env,
                                 timeout=60)
        assert allowed.returncode == 0, allowed.stderr
        assert json.loads(allowed.stdout)["state"] == "RUNNING"
        assert _Recorder.seen == [{"path": "/jobs/purchases", "authorization": f"Bearer {TOKEN}"}]
    finally:
        server.shutdown()
        server.server_close()
