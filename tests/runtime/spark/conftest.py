"""Every test in this folder is marked ``spark`` so ``-m "not spark"`` skips them.

They share the one SparkSession of tests/conftest.py (``spark`` fixture).
"""

from __future__ import annotations

from pathlib import Path

import pytest

_HERE = Path(__file__).parent


def pytest_collection_modifyitems(config, items):
    for item in items:
        if _HERE in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.spark)
