"""Suite-wide guard: a test module must not leave Sluice's threads running.

A job master or local job left running by a failed fixture keeps a busy thread in
the pytest process; every later test then competes with it for the GIL and
slows down, so one failure cascades into timeouts far from its cause.  After
each module this waits briefly for the threads the module started to end and
fails the module's last test, naming them, if any are still alive.
"""

from __future__ import annotations

import threading
import time

import pytest

_GRACE_S = 10.0


def _sluice_threads() -> dict[int, threading.Thread]:
    return {t.ident: t for t in threading.enumerate() if t.name.startswith("sluice-") and t.is_alive()}


@pytest.fixture(scope="module", autouse=True)
def no_leaked_sluice_threads():
    before = set(_sluice_threads())
    yield
    deadline = time.monotonic() + _GRACE_S
    while True:
        leaked = [t for ident, t in _sluice_threads().items() if ident not in before]
        if not leaked or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    if leaked:
        pytest.fail(f"threads still running after this module: {sorted(t.name for t in leaked)}")
