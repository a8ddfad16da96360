"""The Sluice page behind a real Airflow api-server: logging in through Airflow's own login form.

``LiveAirflow`` runs the api-server (with the plugin mounted under ``/sluice``), scheduler,
dag-processor and triggerer on loopback with the simple auth manager.  The job is the fake master
of ``job_with_history`` (moto S3, two validated savepoints, Data Docs in the connection's
``data_docs_dir``); the api-server reads it through the same connections, passed as environment.

1. Without a session, ``/sluice/`` redirects to Airflow's login form with ``next=/sluice/``, and
   the JSON API answers 401 (plain httpx, no browser).
2. In headless Chromium: open ``/sluice/``, land on the login form, sign in as ``admin``, come back
   to the Sluice page, which shows the deployment and its job's running parallelism (3) apart from
   the configured one (2); the screenshot is kept as tests/artifacts/sluice_ui_logged_in.png.
3. The job page's Data Docs link opens the Data Docs index served by ``/sluice/...`` (200, HTML);
   its screenshot is kept as tests/artifacts/sluice_ui_data_docs.png.

Needs ``chromium`` and ``playwright`` (skips without them, saying which).
"""

from __future__ import annotations

import os
import time
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from airflow_support import ARTIFACTS, REPO, wait_until
from live_airflow import USERNAME, LiveAirflow
from ui_support import CONFIGURED_PARALLELISM, RUNNING_PARALLELISM, chromium, job_with_history  # noqa: F401

# one live Airflow at a time (pyproject.toml runs the suite with --dist loadgroup)
pytestmark = [pytest.mark.airflow, pytest.mark.slow, pytest.mark.xdist_group("live_airflow")]

#: what the api-server needs to read the job: its connections, the deployments file, the state folder
PASSED_ENV = ("AIRFLOW_CONN_SLUICE_TEST", "AIRFLOW_CONN_AWS_MOTO", "SLUICE_DEPLOYMENTS_FILE", "SLUICE_STATE_DIR")


def sign_in(page, af: LiveAirflow, path: str) -> None:
    """Open ``path`` without a session: Airflow's login form comes, the admin signs in, and is sent back."""
    page.goto(f"{af.base_url}{path}")
    page.wait_for_url("**/auth/login?next=*")
    page.get_by_label("Username").fill(USERNAME)
    page.get_by_label("Password").fill(af.password)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{af.base_url}{path}")


@pytest.mark.timeout(900)
def test_a_user_logged_in_through_airflow_sees_the_jobs_parallelism_and_its_data_docs(job_with_history, tmp_path):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    logged_in_shot = ARTIFACTS / "sluice_ui_logged_in.png"
    docs_shot = ARTIFACTS / "sluice_ui_data_docs.png"
    for shot in (logged_in_shot, docs_shot):
        shot.unlink(missing_ok=True)
    dags = tmp_path / "dags"  # no DAGs: the page is all this test needs
    dags.mkdir()
    started = time.monotonic()

    with LiveAirflow(tmp_path / "home", dags, extra_env={k: os.environ[k] for k in PASSED_ENV}) as af:
        # 1. no session: the page redirects to the login form, which returns to it; the JSON API refuses
        response = httpx.get(f"{af.base_url}/sluice/", timeout=30)
        assert response.status_code == 307, response.text
        login = urlsplit(response.headers["location"])
        assert (login.path, parse_qs(login.query)) == ("/auth/login", {"next": ["/sluice/"]})
        form = httpx.get(f"{af.base_url}{response.headers['location']}", timeout=30)
        assert form.status_code == 200 and form.headers["content-type"].startswith("text/html")
        assert httpx.get(f"{af.base_url}/sluice/api/jobs/purchases", timeout=30).status_code == 401
        data = af.get("/sluice/api/jobs/purchases")  # the harness's bearer token from POST /auth/token
        assert (data["running_parallelism"], data["configured_parallelism"]) == (RUNNING_PARALLELISM,
                                                                               CONFIGURED_PARALLELISM)
        ready_s = time.monotonic() - started

        with chromium() as browser:
            # 2. the browser is sent to Airflow's login form and back
            page = browser.new_page()
            sign_in(page, af, "/sluice/")

            row = page.locator("tr", has=page.get_by_role("link", name="purchases"))
            assert page.get_by_role("heading", name="Sluice jobs").is_visible()
            assert row.locator("td.running-parallelism").inner_text() == str(RUNNING_PARALLELISM)
            assert row.locator("td.configured-parallelism").inner_text() == str(CONFIGURED_PARALLELISM)
            assert "healthy" in row.inner_text()
            # the login form set the JWT cookie from script, so it is not HttpOnly: a script on this origin
            # could read it, which is why the Data Docs (GX's HTML and scripts) are served sandboxed
            assert "_token=" in page.evaluate("() => document.cookie")
            page.screenshot(path=str(logged_in_shot), full_page=True)

            # 3. the job page links the Data Docs to a page of /sluice itself
            row.get_by_role("link", name="purchases").click()
            page.wait_for_url(f"{af.base_url}/sluice/jobs/purchases")
            assert page.get_by_role("row", name="parallelism (running job)").inner_text().split()[-1] == \
                str(RUNNING_PARALLELISM)
            link = page.locator("a.data-docs").first
            assert link.get_attribute("href") == "/sluice/jobs/purchases/data-docs/index.html"
            with page.expect_navigation() as navigation:
                link.click()
            docs = navigation.value
            assert docs.status == 200, docs.text()
            assert docs.url == f"{af.base_url}/sluice/jobs/purchases/data-docs/index.html"
            assert docs.headers["content-type"].startswith("text/html")
            assert "Data Docs" in page.content() and "Great Expectations" in page.content()
            # GX's scripts run sandboxed, in an opaque origin: Airflow's session cookie is out of their reach
            cookie = page.evaluate("() => { try { return document.cookie } catch (e) { return e.name } }")
            assert cookie == "SecurityError", cookie
            page.screenshot(path=str(docs_shot), full_page=True)

        print(f"\nLiveAirflow started in {af.startup_s:.1f}s; ready for the browser after {ready_s:.1f}s; "
              f"browser steps done after {time.monotonic() - started:.1f}s")

    assert logged_in_shot.stat().st_size > 10_000 and logged_in_shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.timeout(900)
def test_the_pages_actions_trigger_the_dags_as_the_logged_in_user_and_stop_the_job(job_with_history, tmp_path):
    """Take a savepoint and Restore-from-this trigger runs of the Sluice DAGs (left queued: the DAGs stay
    paused, so nothing runs against the test's master); Stop goes to the master; a cross-site POST is refused."""
    from sluice.hook import SluiceHook

    hook = SluiceHook("sluice_test")
    job_id = job_with_history["job_id"]
    with LiveAirflow(tmp_path / "home", REPO / "dags", extra_env={k: os.environ[k] for k in PASSED_ENV}) as af:
        af.wait_dags(["sluice_scheduled_savepoint", "sluice_restore"], timeout=180)
        savepoints = [s.uri for s in hook.list_savepoints(job_id)]
        with chromium() as browser:
            page = browser.new_page()
            sign_in(page, af, "/sluice/jobs/purchases")

            def press(button) -> str:
                """Click an action's button; the answer redirects back to the job page with a notice."""
                with page.expect_navigation(url=lambda url: "/sluice/jobs/purchases?notice=" in url):
                    button.click()
                return page.locator("p.notice").inner_text()

            assert "triggered sluice_scheduled_savepoint run" in press(
                page.get_by_role("button", name="Take a savepoint"))
            assert "triggered sluice_restore run" in press(
                page.locator("tr", has_text=savepoints[0]).get_by_role("button", name="Restore from this"))

            cookies = {c["name"]: c["value"] for c in page.context.cookies()}
            forged = httpx.post(f"{af.base_url}/sluice/jobs/purchases/actions/savepoint", cookies=cookies,
                                headers={"Origin": "http://evil.example"}, timeout=30)
            assert forged.status_code == 403, forged.text
            made_up = httpx.post(f"{af.base_url}/sluice/jobs/purchases/actions/restore",
                                 params={"snapshot": "s3://elsewhere/savepoint-1-x"}, cookies=cookies, timeout=30)
            assert made_up.status_code == 400, made_up.text

            assert "stop with savepoint requested" in press(page.get_by_role("button", name="Stop with a savepoint"))

        runs = {dag_id: af.get(f"/api/v2/dags/{dag_id}/dagRuns")["dag_runs"]
                for dag_id in ("sluice_scheduled_savepoint", "sluice_restore")}
        assert [(r["conf"], r["triggered_by"]) for r in runs["sluice_scheduled_savepoint"]] == [
            ({"deployment": "purchases"}, "ui")]
        assert [r["conf"] for r in runs["sluice_restore"]] == [{"deployment": "purchases", "snapshot": savepoints[0]}]
        wait_until(lambda: hook.get_status(job_id).source != "control-api", timeout_s=60, what="the master stopped")
        assert len(hook.list_savepoints(job_id)) == len(savepoints) + 1  # the stop's savepoint
