"""Headless Chromium for page tests, driven as tests/master/test_job_view.py drives it: Debian's chromium through
Playwright, no sandbox (containers), every console error, page error and request recorded, a full-page
screenshot kept under tests/artifacts/.  Skips (by name, with the reason) where Chromium or Playwright is missing."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ARTIFACTS = Path(__file__).parent / "artifacts"


@dataclass
class BrowserVisit:
    errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    #: what each probe (name -> JavaScript over ``selector``'s elements) returned
    probes: dict[str, Any] = field(default_factory=dict)


def visit(url: str, screenshot: str, probes: dict[str, tuple[str, str]]) -> tuple[BrowserVisit, Path]:
    """Open ``url``, run each probe ``name: (selector, "els => ...")``, then save a full-page screenshot as
    ``tests/artifacts/<screenshot>``."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if chromium is None:
        pytest.skip("chromium is not installed (Debian: apt-get install -y chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (the dev extra)")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / screenshot
    shot.unlink(missing_ok=True)
    seen = BrowserVisit()
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, headless=True,
                                             args=["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 900, "height": 1200})
            page.on("console", lambda m: seen.errors.append(m.text) if m.type in ("error", "warning") else None)
            page.on("pageerror", lambda e: seen.errors.append(str(e)))
            page.on("request", lambda r: seen.requests.append(r.url))
            page.goto(url, wait_until="networkidle")
            for name, (selector, script) in probes.items():
                seen.probes[name] = page.eval_on_selector_all(selector, script)
            page.screenshot(path=str(shot), full_page=True)
        finally:
            browser.close()
    return seen, shot
