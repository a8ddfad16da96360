"""The Sluice page renders in headless Chromium (jobs, health, checkpoint chart, retained handles, savepoints).

Needs the ``chromium`` binary (Debian: ``apt-get install -y chromium``); the
screenshot is kept as tests/artifacts/sluice_ui.png.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from airflow_support import ARTIFACTS, FAKE_MASTER, wait_until

pytestmark = pytest.mark.airflow

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@pytest.fixture
def job_with_history(sluice_env):
    """A running master with retained checkpoints and two validated savepoints."""
    from checkpoints.index import read_index
    from sluice.hook import SluiceHook

    hook = SluiceHook("sluice_test")
    env = {**os.environ, **hook.process_environment(), "SLUICE_CONTROL_TOKEN": hook.token}
    process = subprocess.Popen([sys.executable, str(FAKE_MASTER), "run", "x", "--name", sluice_env["job_id"],
                                "--storage", sluice_env["storage_uri"], "--retained", "3",
                                "--checkpoint-interval", "400"], env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        job_id = sluice_env["job_id"]
        wait_until(lambda: len(read_index(hook.store, job_id).index.ids()) == 3, what="3 retained")
        for n in range(2):
            location = hook.wait_for_operation("savepoints", hook.trigger_savepoint(f"ui-{n}", job_id=job_id),
                                               job_id=job_id, timeout_s=60)
            assert hook.validate_snapshot(location, job_id=job_id)["status"] == "passed"
        yield sluice_env
    finally:
        process.kill()
        process.wait()


@pytest.fixture
def served_ui():
    from engine.master.server import ControlServer
    from sluice.views.app import create_app

    server = ControlServer(create_app(), "127.0.0.1", 0).start()
    yield server.url
    server.stop()


def test_the_plugin_mounts_the_ui_in_airflows_api_server_and_links_it_from_the_navigation(airflow_db):
    from airflow import plugins_manager

    apps, _ = plugins_manager.get_fastapi_plugins()
    views, _ = plugins_manager._get_ui_plugins()

    assert [(a["url_prefix"], a["name"]) for a in apps] == [("/sluice", "Sluice jobs")]
    assert [(v["href"], v["destination"]) for v in views] == [("/sluice/", "nav")]


def test_the_job_page_shows_health_checkpoints_and_validated_savepoints(job_with_history, served_ui):
    import httpx

    page = httpx.get(f"{served_ui}/jobs/purchases", timeout=30).text
    data = httpx.get(f"{served_ui}/api/jobs/purchases", timeout=30).json()

    assert "healthy" in page and "unhealthy" not in page
    assert page.count("<rect class='bar'") == 3 == len(data["checkpoints"])
    assert all(c["bytes"] > 0 and c["duration_ms"] is not None for c in data["checkpoints"])
    assert [s["validation"] for s in data["savepoints"]] == ["passed", "passed"]
    assert all(s["data_docs"] and s["data_docs"] in page for s in data["savepoints"])
    assert page.count("<tr><td>chk-") == 3  # the retained handles table (the job keeps checkpointing meanwhile)


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium)")
def test_the_page_renders_in_headless_chromium_and_a_screenshot_is_kept(job_with_history, served_ui, tmp_path):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "sluice_ui.png"
    shot.unlink(missing_ok=True)
    flags = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1100,1200"]

    dom = subprocess.run([*flags, "--dump-dom", f"{served_ui}/jobs/purchases"], capture_output=True, text=True,
                         timeout=120)
    subprocess.run([*flags, f"--screenshot={shot}", f"{served_ui}/jobs/purchases"], capture_output=True,
                   timeout=120, check=True)

    assert "Checkpoint history" in dom.stdout and "<svg" in dom.stdout and "Data Docs" in dom.stdout
    assert shot.exists() and shot.stat().st_size > 10_000
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
