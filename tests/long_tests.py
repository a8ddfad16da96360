"""Which variant of the long fault and soak tests runs: CI's short one, or the long one by hand.

CI runs every repeated fault (driver kills, seeded master kills, a soak) a few times, at least once at each
distinct point it guards; ``SLUICE_LONG_TESTS=1`` selects the long variants (README, "Tests").  Imported by the
tests as ``long_tests`` (``tests/`` is on ``sys.path`` through pytest's rootdir insertion).
"""

from __future__ import annotations

import os

ENV = "SLUICE_LONG_TESTS"


def long_tests() -> bool:
    """True when ``SLUICE_LONG_TESTS=1``; unset, empty or ``0`` is CI's short variant; anything else is refused."""
    value = os.environ.get(ENV, "").strip()
    if value not in ("", "0", "1"):
        raise ValueError(f"{ENV} must be 1 (the long variants) or 0 / unset (CI's short ones), not {value!r}")
    return value == "1"
