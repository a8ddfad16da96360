"""The access policies under ``infra/policies/``: rendering, and a small evaluator to check them.

Why an evaluator: no IAM service runs here (moto does not enforce policies), so the
policies are checked against what the code does by evaluating them, the way IAM does
for the subset of the policy language these documents use: an explicit Deny wins,
otherwise some Allow must match; ``Action`` and ``Resource`` wildcards (``*`` may
span ``/``, ``?`` one character); conditions ``StringLike``, ``StringEquals``,
``Bool`` and ``Null`` (all keys of a block must hold, any value of a key may match).
Partial: anything else (``NotAction``, ``NotResource``, other operators, policy
variables, principals) is refused with :class:`UnsupportedPolicy` rather than guessed.

The documents are templates: ``${bucket}``, ``${checkpoint_prefix}``,
``${savepoint_prefix}`` are filled from ``infra/bucket.json`` (or a :class:`BucketSpec`).
"""

from __future__ import annotations

import fnmatch
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

POLICY_DIR = Path(__file__).parent / "policies"
#: role policies (identity-based) and the bucket's resource policy
POLICY_FILES = {
    "job": "job-role.json",
    "airflow": "airflow-role.json",
    "operator": "operator-readonly.json",
    "bucket": "bucket-policy.json",
}
_PLACEHOLDER = re.compile(r"\$\{([a-z_]+)\}")
_SUPPORTED_OPERATORS = {"StringLike", "StringEquals", "Bool", "Null"}


class UnsupportedPolicy(ValueError):
    """A policy uses a construct the evaluator does not model; extend it rather than guess."""


def render(name: str, variables: Mapping[str, str]) -> dict[str, Any]:
    """The policy ``name`` (a key of :data:`POLICY_FILES`) with its placeholders filled in."""
    text = (POLICY_DIR / POLICY_FILES[name]).read_text()
    missing = sorted(set(_PLACEHOLDER.findall(text)) - set(variables))
    if missing:
        raise KeyError(f"policy {name!r} needs values for {missing}")
    return json.loads(_PLACEHOLDER.sub(lambda m: str(variables[m.group(1)]), text))


@dataclass(frozen=True, slots=True)
class Request:
    """One S3 authorisation question: may ``action`` act on ``resource`` with this request ``context``?"""

    action: str
    resource: str
    context: Mapping[str, str] = field(default_factory=dict)


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else [value]


def _glob(pattern: str, value: str, case_sensitive: bool = True) -> bool:
    if not case_sensitive:
        pattern, value = pattern.lower(), value.lower()
    return fnmatch.fnmatchcase(value, pattern.replace("[", "[[]"))


def _condition_holds(operator: str, key: str, expected: Any, context: Mapping[str, str]) -> bool:
    values = [str(v) for v in _as_list(expected)]
    if operator == "Null":
        return (key not in context) == (values[0].lower() == "true")
    if key not in context:
        return False
    actual = context[key]
    if operator == "StringLike":
        return any(_glob(v, actual) for v in values)
    if operator == "StringEquals":
        return actual in values
    return actual.lower() in (v.lower() for v in values)  # Bool


def _statement_matches(statement: Mapping[str, Any], request: Request) -> bool:
    for unsupported in ("NotAction", "NotResource", "NotPrincipal"):
        if unsupported in statement:
            raise UnsupportedPolicy(f"statement {statement.get('Sid')!r} uses {unsupported}")
    if not any(_glob(a, request.action, case_sensitive=False) for a in _as_list(statement["Action"])):
        return False
    if not any(_glob(r, request.resource) for r in _as_list(statement["Resource"])):
        return False
    for operator, block in statement.get("Condition", {}).items():
        if operator not in _SUPPORTED_OPERATORS:
            raise UnsupportedPolicy(f"statement {statement.get('Sid')!r} uses condition operator {operator}")
        if not all(_condition_holds(operator, k, v, request.context) for k, v in block.items()):
            return False
    return True


def is_allowed(policy: Mapping[str, Any], request: Request) -> bool:
    """IAM's decision for one identity policy: explicit Deny wins, else some Allow must match."""
    statements = _as_list(policy["Statement"])
    if any(s["Effect"] == "Deny" and _statement_matches(s, request) for s in statements):
        return False
    return any(s["Effect"] == "Allow" and _statement_matches(s, request) for s in statements)


def is_denied(policy: Mapping[str, Any], request: Request) -> bool:
    """Whether a resource policy (the bucket policy) explicitly denies the request, whoever asks."""
    return any(s["Effect"] == "Deny" and _statement_matches(s, request) for s in _as_list(policy["Statement"]))
