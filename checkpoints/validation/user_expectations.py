"""Users' own expectations per job: a suite file next to the job definition, read as data (issue 6).

For the job spec ``engine.examples.purchases:build`` the file is
``engine/examples/purchases.expectations.json`` (or ``.yaml`` / ``.yml``) beside
the module.  It is parsed with ``json`` / ``yaml.safe_load`` and the expectation
is looked up by name among Great Expectations' built-ins: nothing in the file is
executed (STYLE section 9: what is stored is data, never code)::

    {"expectations": [
      {"operator": "tumbling", "table": "state.window-contents",
       "expectation": "ExpectColumnValuesToBeBetween", "column": "value_chars",
       "kwargs": {"max_value": 200}, "rule": "a key's accumulator stays small"}]}

``table`` is ``state.<state name>``, ``timers``, ``sessions`` or ``files``; the
columns are those of :mod:`checkpoints.validation.frames` (``value_num``,
``value_chars`` for a bound on state size per key, ``acc_count``...).  A plain
list in place of the object is accepted too.
"""

from __future__ import annotations

import importlib.util
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import great_expectations as gx

from engine.errors import JobDefinitionError

from checkpoints.validation.suite_builder import SuitePlan

SUFFIXES = (".expectations.json", ".expectations.yaml", ".expectations.yml")


@dataclass(frozen=True, slots=True)
class UserExpectation:
    operator: str
    table: str
    expectation: str
    column: str | None = None
    kwargs: dict[str, Any] = field(default_factory=dict)
    rule: str | None = None

    @property
    def asset(self) -> str:
        return f"{self.operator}.{self.table}"


def suite_path_for_job(job_spec: str) -> Path | None:
    """The user suite file beside the job spec's module, or None when there is none.

    Finding the module's file imports its parent packages (as any import would),
    not the module itself."""
    module = job_spec.split(":", 1)[0]
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    origin = Path(spec.origin)
    for suffix in SUFFIXES:
        candidate = origin.with_name(origin.stem + suffix)
        if candidate.is_file():
            return candidate
    return None


def load_user_expectations(path: str | Path) -> list[UserExpectation]:
    """Parse a suite file (JSON or YAML); raises JobDefinitionError naming the entry that is wrong."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    if path.suffix in (".yaml", ".yml"):
        import yaml

        doc = yaml.safe_load(text)
    else:
        try:
            doc = json.loads(text)
        except ValueError as exc:
            raise JobDefinitionError("expectations file", str(path), f"must be JSON ({exc})") from exc
    entries = doc.get("expectations") if isinstance(doc, dict) else doc
    if not isinstance(entries, list):
        raise JobDefinitionError("expectations file", str(path), "must hold a list under 'expectations'")
    out = []
    for i, entry in enumerate(entries):
        where = f"{path}[{i}]"
        if not isinstance(entry, dict):
            raise JobDefinitionError(where, entry, "must be an object")
        missing = [k for k in ("operator", "table", "expectation") if not isinstance(entry.get(k), str)]
        if missing:
            raise JobDefinitionError(where, entry, f"needs string fields {missing}")
        kwargs = entry.get("kwargs") or {}
        if not isinstance(kwargs, dict):
            raise JobDefinitionError(f"{where}.kwargs", kwargs, "must be an object")
        out.append(UserExpectation(entry["operator"], entry["table"], entry["expectation"], entry.get("column"),
                                   dict(kwargs), entry.get("rule")))
    return out


def expectation_class(name: str) -> type:
    """A GX built-in expectation class by its class name or its snake_case type name."""
    if re.fullmatch(r"[a-z_]+", name):
        name = "".join(part.capitalize() for part in name.split("_"))
    cls = getattr(gx.expectations, name, None)
    if not (isinstance(cls, type) and issubclass(cls, gx.expectations.Expectation)):
        raise JobDefinitionError("expectation", name, "must name a Great Expectations built-in expectation",
                                 "e.g. ExpectColumnValuesToBeBetween")
    return cls


def add_user_expectations(plan: SuitePlan, entries: list[UserExpectation]) -> None:
    """Append each entry to the suite of its asset; an unknown asset or bad arguments raise JobDefinitionError."""
    for entry in entries:
        suite = plan.assets.get(entry.asset)
        if suite is None:
            raise JobDefinitionError("operator/table", entry.asset, "is not a frame of this snapshot",
                                     f"known: {', '.join(sorted(plan.assets))}")
        cls = expectation_class(entry.expectation)
        kwargs = dict(entry.kwargs)
        if entry.column is not None:
            kwargs["column"] = entry.column
        try:
            expectation = cls(**kwargs)
        except Exception as exc:  # pydantic validation of the expectation's arguments
            raise JobDefinitionError(f"{entry.asset} {entry.expectation}", kwargs, f"is not valid: {exc}") from exc
        suite.expect(expectation, entry.rule or f"user expectation ({entry.expectation})")
        expectation.meta["user"] = True
