"""``Row`` and ``RowKind``: PyFlink's record of a ``Types.ROW`` / ``Types.ROW_NAMED`` stream (``pyflink.common.Row``).

A PyFlink program reads the fields of a row-typed record by name (``row.id``, ``row["id"]``) or position
(``row[0]``), so Sluice hands it the same object: a source declared ``Types.ROW_NAMED(["id", "info"], ...)``
yields ``Row(id=1, info='a')`` (engine/api/typeinfo.py says where records are converted).

Behaviour follows PyFlink 2.3's class, checked against it:

- ``Row(1, 'a')`` has positions only and prints ``<Row(1, 'a')>``; ``Row(id=1, info='a')`` has names, in the
  order given, and prints ``Row(id=1, info='a')``; ``str`` is ``repr``.  ``Row("name", "age")`` is also a
  row "class": calling it, ``Person("Alice", 11)``, gives ``Row(name='Alice', age=11)``.
- Rows are equal when both are named with the same set of names and equal values name by name (the order of
  the names does not matter), or both unnamed with equal values in order; and their row kinds are equal.
- A row is mutable (``row[0] = x``, ``row["id"] = x``) but not extensible (``row.new = x`` raises
  AttributeError), as PyFlink's.  A missing name raises :class:`RowFieldError`, a KeyError and a ValueError
  at once (PyFlink raises ValueError, or AttributeError when the row has no names at all).

One deliberate difference: PyFlink hashes a row as the tuple of its values in their order, so two equal named
rows whose names come in different orders hash differently.  Here equal rows hash equally (the values are taken
in name order), which keyed state needs; a row with its names in sorted order hashes as PyFlink's does.

A Row is stored without pickle: engine/state/codec.py writes it as ``{"$row": [kind, names or null,
[values]]}``.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Iterator

__all__ = ["Row", "RowKind"]


class RowKind(Enum):
    """What a row means in a changelog: an insert, the two halves of an update, or a delete."""

    INSERT = 0
    UPDATE_BEFORE = 1
    UPDATE_AFTER = 2
    DELETE = 3

    def __str__(self) -> str:
        return _SHORT[self]

    @property
    def short_string(self) -> str:
        """``+I``, ``-U``, ``+U`` or ``-D``: how Flink prints the kind in front of a row."""
        return _SHORT[self]

    @staticmethod
    def from_short_string(text: str) -> RowKind:
        for kind, short in _SHORT.items():
            if short == text:
                return kind
        raise ValueError(f"`text` is {text!r}: must be one of {', '.join(_SHORT.values())}")


_SHORT = {RowKind.INSERT: "+I", RowKind.UPDATE_BEFORE: "-U", RowKind.UPDATE_AFTER: "+U", RowKind.DELETE: "-D"}


class RowFieldError(KeyError, ValueError):
    """A row has no field of that name (a KeyError as for a dict; PyFlink raises ValueError, so it is one too)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class Row:
    """A record with fields reached by position and, when it was given names, by name (PyFlink's ``Row``)."""

    __slots__ = ("_fields", "_values", "_row_kind")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if args and kwargs:
            raise ValueError("Can not use both args and kwargs to create Row")
        if kwargs:
            object.__setattr__(self, "_fields", list(kwargs))
            object.__setattr__(self, "_values", list(kwargs.values()))
        else:
            object.__setattr__(self, "_fields", None)
            object.__setattr__(self, "_values", list(args))
        object.__setattr__(self, "_row_kind", RowKind.INSERT)

    # -- PyFlink's methods ---------------------------------------------------------------------------------
    @staticmethod
    def of_kind(row_kind: RowKind, *args: Any, **kwargs: Any) -> Row:
        row = Row(*args, **kwargs)
        row.set_row_kind(row_kind)
        return row

    def as_dict(self, recursive: bool = False) -> dict[str, Any]:
        """The fields as ``{name: value}``; ``recursive`` turns nested rows (also in lists and dicts) into dicts."""
        if self._fields is None:
            raise TypeError("Cannot convert a Row class into dict: this row has no field names "
                            "(build it as Row(name=value, ...) or give it names with set_field_names)")
        if recursive:
            return dict(zip(self._fields, (_as_plain(v) for v in self._values)))
        return dict(zip(self._fields, self._values))

    def get_row_kind(self) -> RowKind:
        return self._row_kind

    def set_row_kind(self, row_kind: RowKind) -> None:
        if not isinstance(row_kind, RowKind):
            raise TypeError(f"`row_kind` is {row_kind!r}: must be a RowKind, e.g. RowKind.DELETE")
        object.__setattr__(self, "_row_kind", row_kind)

    def set_field_names(self, field_names: list[str]) -> None:
        object.__setattr__(self, "_fields", None if field_names is None else list(field_names))

    def get_field_names(self) -> list[str] | None:
        """The field names, or None for a row of positions only."""
        return None if self._fields is None else list(self._fields)

    def get_fields_by_names(self, names: list[str]) -> list[Any]:
        if self._fields is None or list(names) == self._fields:
            return self._values
        missing = [n for n in names if n not in self._fields]
        if missing:
            raise RowFieldError(f"Field names {missing} not exist in {self._fields}.")
        return [self._values[self._fields.index(n)] for n in names]

    def __call__(self, *args: Any) -> Row:
        """A row named by this row's values (``Row("name", "age")("Alice", 11)``)."""
        if len(args) > len(self):
            raise ValueError(f"Can not create Row with fields {self}, expected {len(self)} values but got {args}")
        row = Row(*args)
        row.set_field_names(list(self._values))
        row.set_row_kind(self._row_kind)
        return row

    # -- container protocol --------------------------------------------------------------------------------
    def __contains__(self, item: Any) -> bool:
        return item in (self._fields if self._fields is not None else self._values)

    def __getitem__(self, item: Any) -> Any:
        if isinstance(item, (int, slice)):
            return self._values[item]
        return self._values[self._index(item)]

    def __setitem__(self, key: Any, value: Any) -> None:
        if isinstance(key, (int, slice)):
            self._values[key] = value
        else:
            self._values[self._index(key)] = value

    def _index(self, name: Any) -> int:
        if self._fields is None:
            raise RowFieldError(f"{name!r}: this row has positions only, no field names")
        try:
            return self._fields.index(name)
        except ValueError:
            raise RowFieldError(f"{name!r}: the row's fields are {self._fields}") from None

    def __getattr__(self, name: str) -> Any:
        # only called when normal lookup fails; slots not yet set (during copy/unpickling) must not recurse
        if name.startswith("_"):
            raise AttributeError(name)
        fields = self._fields
        if fields is None or name not in fields:
            raise AttributeError(f"Row has no field {name!r}" + ("" if fields is None else f" (fields: {fields})"))
        return self._values[fields.index(name)]

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"cannot set {name!r} on a Row: set a field with row[{name!r}] = value")

    def __iter__(self) -> Iterator[Any]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    # -- value semantics -----------------------------------------------------------------------------------
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Row) or self._row_kind is not other._row_kind:
            return False
        if self._fields is None or other._fields is None:
            return self._fields is None and other._fields is None and self._values == other._values
        if sorted(self._fields) != sorted(other._fields):
            return False
        return self._by_name() == other._by_name()

    def __hash__(self) -> int:
        return hash(tuple(self._values) if self._fields is None else tuple(self._by_name()))

    def _by_name(self) -> list[Any]:
        """The values in the order of the sorted names (how equality and hashing see a named row)."""
        return [v for _, v in sorted(zip(self._fields, self._values), key=lambda pair: pair[0])]

    def __repr__(self) -> str:
        if self._fields is not None:
            return "Row(" + ", ".join(f"{k}={v!r}" for k, v in zip(self._fields, self._values)) + ")"
        return "<Row(" + ", ".join(repr(v) for v in self._values) + ")>"

    def __reduce__(self) -> tuple:
        # a Row inside a function shipped to a Spark task travels by pickle like the function itself;
        # state, snapshots and records in flight never do (engine/state/codec.py)
        return _rebuild, (self._fields, tuple(self._values), self._row_kind.value)


def _rebuild(fields: list[str] | None, values: tuple, kind: int) -> Row:
    row = Row(*values)
    row.set_field_names(fields)
    row.set_row_kind(RowKind(kind))
    return row


def _as_plain(value: Any) -> Any:
    if isinstance(value, Row):
        return value.as_dict(True)
    if isinstance(value, list):
        return [_as_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _as_plain(v) for k, v in value.items()}
    return value
