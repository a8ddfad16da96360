"""A record's field named instead of a function: ``key_by("user")``, ``key_by(0)``,
``with_timestamp_assigner("ts")`` (ARCHITECTURE section 2).

A field is a dict or ``Row`` key (a ``str``) or a tuple/list/``Row`` position (an ``int`` >= 0).  The selector objects are
plain data: they pickle to Spark tasks, and a runtime can see ``field`` and key or stamp records by column
without calling Python per record (issue 16's column form).  A record without the field is a dead letter
with the reason, as for any key selector or timestamp assigner that raises.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.api.typeinfo import RowTypeInfo, TupleTypeInfo
from engine.errors import JobDefinitionError
from engine.graph.transformations import (
    MapTransformation,
    PartitionTransformation,
    SourceTransformation,
    TimestampsAndWatermarksTransformation,
    UnionTransformation,
    declared_output_type,
)
from engine.io.collection_source import CollectionSource
from engine.row import Row


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


#: records checked against a field at build time when the stream comes straight from a collection
_COLLECTION_SAMPLE = 1000


def check_field_of_input(node: Any, field: str | int, parameter: str = "field") -> None:
    """Refuse at build time a ``field`` the records reaching ``node`` cannot have, when that is knowable:

    - the type declared for them (``output_type`` / ``type_info``: a ``Types.TUPLE`` or ``Types.ROW(_NAMED)``)
      has no such position or name;
    - they come from ``from_collection`` through nodes that pass records on unchanged (key_by, filter,
      timestamps, union) and one of the collection's records (the first 1000 are looked at) lacks it.

    Anything else is only known when records flow: a record without the field is a dead letter then.
    """
    type_info = declared_output_type(node)
    if isinstance(type_info, (TupleTypeInfo, RowTypeInfo)):
        n = len(type_info.field_types)
        names = type_info.get_field_names() if isinstance(type_info, RowTypeInfo) else None
        if isinstance(field, int) and field >= n:
            raise JobDefinitionError(parameter, field, f"must be a position of the declared record type {type_info!r} "
                                     f"({n} fields: 0..{n - 1})")
        if isinstance(field, str) and (names is None or field not in names):
            raise JobDefinitionError(parameter, field, f"must be a field name of the declared record type "
                                     f"{type_info!r}" + ("" if names else ", which has positions, not names"))
    for record in _collection_records(node):
        if isinstance(record, (tuple, list, dict, Row)):
            try:
                record[field]
                continue
            except (KeyError, IndexError, TypeError):
                pass
        elif field == 0:
            continue  # a scalar stream: position 0 is the value itself (Flink's rule for basic types)
        kind = "key" if isinstance(field, str) else "position"
        raise JobDefinitionError(parameter, field, f"must be a {kind} every record has; the collection's record "
                                 f"{record!r} has none")


def _collection_records(node: Any) -> list[Any]:
    """The first records of the collections feeding ``node`` unchanged, or [] when anything transforms them."""
    if isinstance(node, SourceTransformation):
        return list(node.source.items[:_COLLECTION_SAMPLE]) if isinstance(node.source, CollectionSource) else []
    passes = isinstance(node, (PartitionTransformation, TimestampsAndWatermarksTransformation, UnionTransformation)) \
        or (isinstance(node, MapTransformation) and node.kind == "filter")
    if not passes:
        return []
    return [r for inp in node.inputs for r in _collection_records(inp)]
