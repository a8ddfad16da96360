"""What the two UI tests share: a job with history to show, and headless Chromium through Playwright.

``test_ui_view.py`` serves the Sluice app in-process; ``test_ui_live.py`` logs in through a real
Airflow api-server.  Both import the fixture from here (``from ui_support import job_with_history``):
a fixture in a test module is not visible to another one.

The browser is Debian's ``chromium`` (``apt-get install -y chromium``; CI's ``.ci/run`` installs
it) driven by Playwright for Python (``playwright`` in the ``dev`` extra); ``playwright install``
is never needed.  When either is missing, :func:`chromium` skips the test and says which.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from airflow_support import FAKE_MASTER, wait_until

#: the running job's parallelism; the deployment file (conftest ``sluice_env``) configures 2, so a
#: page that shows 3 shows the job's, not the deployment's
RUNNING_PARALLELISM = 3
CONFIGURED_PARALLELISM = 2

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@pytest.fixture
def job_with_history(sluice_env):
    """A running master (at parallelism 3) with retained checkpoints and two validated savepoints."""
    from checkpoints.index import read_index
    from sluice.hook import SluiceHook

    hook = SluiceHook("sluice_test")
    env = {**os.environ, **hook.process_environment(), "SLUICE_CONTROL_TOKEN": hook.token}
    process = subprocess.Popen([sys.executable, str(FAKE_MASTER), "run", "x", "--job-id", sluice_env["job_id"],
                                "--storage", sluice_env["storage_uri"], "--retained", "3",
                                "--parallelism", str(RUNNING_PARALLELISM), "--checkpoint-interval", "400"],
                               env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    try:
        job_id = sluice_env["job_id"]
        wait_until(lambda: len(read_index(hook.store, job_id).index.ids()) == 3, what="3 retained")
        for n in range(2):
            location = hook.wait_for_operation("savepoint", hook.trigger_savepoint(f"ui-{n}", job_id=job_id),
                                               job_id=job_id, timeout_s=60)
            assert hook.validate_snapshot(location, job_id=job_id)["status"] == "passed"
        yield {**sluice_env, "data_docs_dir": hook.extra["data_docs_dir"]}
    finally:
        process.kill()
        process.wait()


@contextmanager
def chromium(**context_options: Any) -> Iterator[Any]:
    """A Playwright browser context in headless system Chromium; skips when Chromium or Playwright is missing."""
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (Debian: apt-get install -y chromium)")
    sync_api = pytest.importorskip("playwright.sync_api",
                                   reason="playwright is not installed (pip install -e '.[dev]' has it)")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                             args=["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"])
        try:
            context = browser.new_context(viewport={"width": 1100, "height": 1200}, **context_options)
            yield context
            context.close()
        finally:
            browser.close()
