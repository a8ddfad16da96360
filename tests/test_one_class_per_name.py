"""One class per name across the product's packages (issue 15): eight classes were defined twice
(``CompletedCheckpointStore``, ``OperatorSnapshot``, ``JobStatus``, ...), so a reader, an import or a
traceback could not tell which one was meant."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_no_class_name_is_defined_twice_in_engine_checkpoints_or_plugins() -> None:
    where: dict[str, list[str]] = defaultdict(list)
    for package in ("engine", "checkpoints", "plugins"):
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.parse(path.read_text(), str(path)).body:
                if isinstance(node, ast.ClassDef):
                    where[node.name].append(str(path.relative_to(ROOT)))
    assert len(where) > 100
    twice = {name: paths for name, paths in where.items() if len(paths) > 1}
    assert twice == {}, f"defined more than once: {twice}"
