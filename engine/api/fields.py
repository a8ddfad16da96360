"""A record's field named instead of a function: ``key_by("user")``, ``key_by(0)``,
``with_timestamp_assigner("ts")`` (ARCHITECTURE section 2).

A field is a dict key (a ``str``) or a tuple/list position (an ``int`` >= 0).  The selector objects are
plain data: they pickle to Spark tasks, and a runtime can see ``field`` and key or stamp records by column
without calling Python per record (issue 16's column form).  A record without the field is a dead letter
with the reason, as for any key selector or timestamp assigner that raises.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.errors import JobDefinitionError


def is_field(value: Any) -> bool:
    """``value`` names a field: a non-empty str or an int >= 0 (never a bool)."""
    return (isinstance(value, str) and value != "") or (isinstance(value, int) and not isinstance(value, bool)
                                                         and value >= 0)


def check_field(parameter: str, value: Any) -> str | int:
    if not is_field(value):
        raise JobDefinitionError(parameter, value, "must be a dict key (a non-empty str) or a tuple position "
                                 "(an int >= 0), or a function")
    return value


def field_of(record: Any, field: str | int) -> Any:
    """``record[field]`` with a reason a dead letter can carry when the record has no such field."""
    try:
        return record[field]
    except (KeyError, IndexError, TypeError) as exc:
        kind = "key" if isinstance(field, str) else "position"
        raise KeyError(f"record has no field at {kind} {field!r} ({type(exc).__name__}: {exc}); "
                       f"record type {type(record).__name__}") from None


@dataclass(frozen=True, slots=True)
class FieldKeySelector:
    """``key_by(field)``: the key is the record's ``field``."""

    field: str | int

    def get_key(self, value: Any) -> Any:
        return field_of(value, self.field)

    __call__ = get_key
