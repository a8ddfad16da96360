"""The Sluice page served in-process: Airflow's auth in front of every route, the job's data, its Data
Docs served from the connection's ``data_docs_dir`` and nothing outside it, and a render in headless
Chromium (screenshot kept as tests/artifacts/sluice_ui.png).

The app runs alone here, not mounted in an api-server (``test_ui_live.py`` does that), but its auth
is the real thing: Airflow's auth manager is initialised in this process and the admin's JWT comes
from the simple auth manager's ``create_token``, the code behind ``POST /auth/token``, with the
password it generated.  The browser test needs ``chromium`` and ``playwright`` (skips without them).
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from airflow_support import ARTIFACTS
from ui_support import CONFIGURED_PARALLELISM, RUNNING_PARALLELISM, chromium, job_with_history  # noqa: F401

pytestmark = pytest.mark.airflow


@pytest.fixture(scope="session")
def admin_token(airflow_db):
    """A JWT for the simple auth manager's ``admin``, issued as the api-server issues it."""
    from airflow.api_fastapi.app import init_auth_manager
    from airflow.api_fastapi.auth.managers.simple.datamodels.login import LoginBody
    from airflow.api_fastapi.auth.managers.simple.services.login import SimpleAuthManagerLogin
    from airflow.api_fastapi.auth.managers.simple.simple_auth_manager import SimpleAuthManager

    assert isinstance(init_auth_manager(), SimpleAuthManager)
    password = SimpleAuthManager.get_passwords()["admin"]
    return SimpleAuthManagerLogin.create_token(body=LoginBody(username="admin", password=password))


@pytest.fixture
def served_ui(admin_token):
    from engine.master.server import ControlServer
    from sluice.views.app import create_app

    server = ControlServer(create_app(), "127.0.0.1", 0).start()
    yield server.url
    server.stop()


@pytest.fixture
def as_admin(served_ui, admin_token):
    """A client that sends the UI's JWT cookie, as a logged-in browser does."""
    import httpx

    with httpx.Client(base_url=served_ui, cookies={"_token": admin_token}, timeout=30) as client:
        yield client


def test_the_plugin_mounts_the_ui_in_airflows_api_server_and_links_it_from_the_navigation(airflow_db):
    from airflow import plugins_manager

    apps, _ = plugins_manager.get_fastapi_plugins()
    views, _ = plugins_manager._get_ui_plugins()

    assert [(a["url_prefix"], a["name"]) for a in apps] == [("/sluice", "Sluice jobs")]
    assert [(v["href"], v["destination"]) for v in views] == [("/sluice/", "nav")]


def test_a_page_without_a_session_redirects_to_the_login_form_and_comes_back(served_ui):
    import httpx

    for page in ("/", "/jobs/purchases", "/jobs/purchases/data-docs/index.html"):
        response = httpx.get(f"{served_ui}{page}?tab=x", timeout=30)

        assert response.status_code == 307, response.text
        location = urlsplit(response.headers["location"])
        assert location.path == "/auth/login"
        assert parse_qs(location.query) == {"next": [f"{page}?tab=x"]}


def test_the_json_api_answers_401_without_a_token_and_403_with_a_bad_one(sluice_env, served_ui, admin_token):
    import httpx

    url = f"{served_ui}/api/jobs/purchases"
    assert httpx.get(url, timeout=30).status_code == 401
    assert httpx.get(url, headers={"Authorization": "Bearer not-a-jwt"}, timeout=30).status_code == 403
    assert httpx.get(url, cookies={"_token": admin_token[:-4] + "AAAA"}, timeout=30).status_code == 403
    assert httpx.get(url, headers={"Authorization": f"Bearer {admin_token}"}, timeout=30).status_code == 200


def test_an_expired_or_forged_session_cookie_is_sent_to_log_in_again(served_ui, admin_token):
    import httpx

    response = httpx.get(f"{served_ui}/jobs/purchases", cookies={"_token": admin_token[:-4] + "AAAA"}, timeout=30)

    assert response.status_code == 307 and response.headers["location"].startswith("/auth/login?next=")


def test_the_job_page_shows_health_checkpoints_parallelism_and_validated_savepoints(job_with_history, as_admin):
    page = as_admin.get("/jobs/purchases").text
    data = as_admin.get("/api/jobs/purchases").json()
    index = as_admin.get("/").text

    assert "healthy" in page and "unhealthy" not in page
    assert page.count("<rect class='bar'") == 3 == len(data["checkpoints"])
    assert all(c["bytes"] > 0 and c["duration_ms"] is not None for c in data["checkpoints"])
    assert [s["validation"] for s in data["savepoints"]] == ["passed", "passed"]
    assert page.count("<tr><td>chk-") == 3  # the retained handles table (the job keeps checkpointing meanwhile)

    assert (data["running_parallelism"], data["configured_parallelism"]) == (RUNNING_PARALLELISM,
                                                                           CONFIGURED_PARALLELISM)
    assert f"<th>parallelism (running job)</th><td>{RUNNING_PARALLELISM}</td>" in page
    assert f"<th>parallelism (deployment)</th><td>{CONFIGURED_PARALLELISM} (differs" in page
    assert f"<td class='running-parallelism'>{RUNNING_PARALLELISM}</td>" in index
    assert f"<td class='configured-parallelism'>{CONFIGURED_PARALLELISM}</td>" in index

    # Data Docs: recorded as a file:// URL on the worker, linked as a page of this app
    for savepoint in data["savepoints"]:
        assert savepoint["data_docs_recorded"].startswith("file://")
        assert savepoint["data_docs"] == "/jobs/purchases/data-docs/index.html"
        assert f"href='{savepoint['data_docs']}'" in page
    assert "file://" not in page.split("<h2>Savepoints</h2>")[1].split("<code>")[0]
    docs = as_admin.get(data["savepoints"][0]["data_docs"])
    assert docs.status_code == 200 and docs.headers["content-type"] == "text/html; charset=utf-8"
    assert "sandbox" in docs.headers["content-security-policy"]  # an opaque origin: no access to Airflow's cookie
    assert "allow-same-origin" not in docs.headers["content-security-policy"]
    assert docs.text == (Path(job_with_history["data_docs_dir"]) / "index.html").read_text()


def test_data_docs_are_served_only_from_inside_the_data_docs_dir(job_with_history, as_admin, tmp_path):
    root = tmp_path / "data_docs"
    assert str(root) == job_with_history["data_docs_dir"]
    (tmp_path / "secret.txt").write_text("outside the root")
    (root / "sub").mkdir()
    (root / "sub" / "page.html").write_text("<p>inside</p>")
    os.symlink(tmp_path / "secret.txt", root / "escape.txt")
    os.symlink(tmp_path, root / "escape-dir")
    os.symlink(root / "sub" / "page.html", root / "alias.html")  # a symlink that stays inside is fine
    base = "/jobs/purchases/data-docs"

    assert as_admin.get(f"{base}/sub/page.html").text == "<p>inside</p>"
    assert as_admin.get(f"{base}/alias.html").text == "<p>inside</p>"
    assert as_admin.get(f"{base}/").text == as_admin.get(f"{base}/index.html").text  # the site's index
    refused = [
        "%2e%2e/secret.txt",           # ../ (the server decodes %2e before routing)
        "sub/%2e%2e/%2e%2e/secret.txt",
        "sub%2F..%2F..%2Fsecret.txt",  # %2F decodes to / as well
        "%2F" + str(tmp_path / "secret.txt").lstrip("/").replace("/", "%2F"),  # absolute
        "%2e/index.html", "sub//page.html", "sub/page.html%00.png", "..%5Csecret.txt",
        "escape.txt", "escape-dir/secret.txt",  # symlinks out of the root
        "sub", "missing.html",
    ]
    for path in refused:
        response = as_admin.get(f"{base}/{path}")
        assert response.status_code == 404, (path, response.status_code, response.text)
        assert "outside the root" not in response.text
    assert as_admin.get("/jobs/nobody/data-docs/index.html").status_code == 404


def test_an_s3_data_docs_dir_is_read_through_the_connections_store(sluice_env, as_admin, monkeypatch):
    import json

    import boto3

    conn = json.loads(os.environ["AIRFLOW_CONN_SLUICE_TEST"])
    conn["extra"]["data_docs_dir"] = f"s3://{sluice_env['bucket']}/data_docs"
    monkeypatch.setenv("AIRFLOW_CONN_SLUICE_TEST", json.dumps(conn))
    s3 = boto3.client("s3", endpoint_url=sluice_env["endpoint"], region_name="us-east-1",
                      aws_access_key_id="testing", aws_secret_access_key="testing")
    s3.put_object(Bucket=sluice_env["bucket"], Key="data_docs/validations/run.html", Body=b"<p>from s3</p>")
    s3.put_object(Bucket=sluice_env["bucket"], Key="secret.txt", Body=b"outside the root")
    base = "/jobs/purchases/data-docs"

    response = as_admin.get(f"{base}/validations/run.html")
    assert (response.status_code, response.text) == (200, "<p>from s3</p>")
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    for path in ("%2e%2e/secret.txt", "validations/%2e%2e/%2e%2e/secret.txt", "index.html", "validations"):
        assert as_admin.get(f"{base}/{path}").status_code == 404, path


def test_the_data_docs_link_is_a_path_under_the_root_or_none():
    from sluice.views.data import data_docs_path

    assert data_docs_path("file:///srv/docs/index.html", "/srv/docs") == "index.html"
    assert data_docs_path("file:///srv/docs/index.html", "file:///srv/docs/") == "index.html"
    assert data_docs_path("file:///srv/docs/a%20b/x.html", "/srv/docs") == "a b/x.html"
    assert data_docs_path("file:///srv/other/index.html", "/srv/docs") is None
    assert data_docs_path("file:///srv/docs/../other/index.html", "/srv/docs") is None
    assert data_docs_path("https://example.com/srv/docs/index.html", "/srv/docs") is None
    assert data_docs_path("s3://b/docs/index.html", "s3://b/docs") == "index.html"
    assert data_docs_path("s3://b/docs-old/index.html", "s3://b/docs") is None
    assert data_docs_path("file:///srv/docs/index.html", None) is None
    assert data_docs_path(None, "/srv/docs") is None


def test_the_job_page_embeds_the_masters_job_view_fetched_server_side_in_a_sandboxed_frame(job_with_history,
                                                                                            as_admin):
    import html
    import re

    from sluice.hook import SluiceHook

    page = as_admin.get("/jobs/purchases").text
    frame = re.search(r"<iframe class='job-view' title='job view' sandbox='' [^>]*srcdoc=\"([^\"]*)\"></iframe>", page)
    assert frame is not None, page[-2000:]
    embedded = html.unescape(frame.group(1))
    history = SluiceHook("sluice_test").checkpoint_history(job_with_history["job_id"])
    # the master's own page (engine/master/view.py), as it served it: its checkpoints, its charts
    assert embedded.startswith("<!doctype html>") and '<meta http-equiv="Content-Security-Policy"' in embedded
    rows = {int(i) for i in re.findall(r'<tr class="checkpoint completed" data-checkpoint-id="(\d+)"', embedded)}
    retained = {h["checkpoint_id"] for h in history}  # fetched after the page: the master has retained newer ones
    assert rows & retained and max(rows) <= max(retained)
    assert 'data-chart="checkpoint-durations"' in embedded
    assert SluiceHook("sluice_test").token not in page  # fetched with the token; the browser never sees it


def test_without_a_master_the_job_page_says_there_is_no_job_view(sluice_env, as_admin):
    page = as_admin.get("/jobs/purchases").text

    assert "<iframe" not in page and "no job view: no job master answers" in page


def test_the_page_renders_in_headless_chromium_and_a_screenshot_is_kept(job_with_history, served_ui, admin_token):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "sluice_ui.png"
    shot.unlink(missing_ok=True)
    errors: list[str] = []
    outside: list[str] = []

    with chromium() as browser:
        browser.add_cookies([{"name": "_token", "value": admin_token, "url": served_ui}])
        page = browser.new_page()
        page.on("console", lambda m: errors.append(f"{m.text} {m.location.get('url')}") if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("request", lambda r: outside.append(r.url) if not r.url.startswith((served_ui, "about:")) else None)
        page.goto(f"{served_ui}/jobs/purchases", wait_until="networkidle")
        dom = page.content()
        frame = page.frame_locator("iframe.job-view")
        embedded_charts = frame.locator("svg[data-chart=checkpoint-durations]").count()
        embedded_rows = frame.locator("tr.checkpoint.completed").count()
        # a full-page screenshot of a shorter viewport leaves the sandboxed (out-of-process) frame blank
        page.set_viewport_size({"width": 1100, "height": 3600})
        page.screenshot(path=str(shot), full_page=True)

    assert "Checkpoint history" in dom and "<svg" in dom and "Data Docs" in dom
    assert embedded_charts == 1 and embedded_rows >= 3  # the master's view renders inside the frame
    # the app runs alone here: the browser's own /favicon.ico request (Airflow's api-server serves one) is a 404
    assert outside == [] and [e for e in errors if not e.endswith("/favicon.ico")] == [], errors
    assert shot.exists() and shot.stat().st_size > 10_000
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
