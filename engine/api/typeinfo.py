"""``Types`` and ``TypeInformation``: PyFlink's type declarations, accepted so PyFlink programs port unchanged.

PyFlink needs a type for every value that crosses into Java (``map(f, output_type=Types.INT())``,
``key_by(f, key_type=...)``, ``OutputTag("late", Types.STRING())``, state descriptors).  Sluice runs every
operator in Python; it takes the types where PyFlink does, checks their *shape* when the job is built (a
``Types.TUPLE`` of type informations, names matching fields in ``ROW_NAMED``, ``Types.INT`` called rather
than passed, ...), and uses them in two places, where a PyFlink program can see them:

**Conversion at the source.**  ``from_collection(collection, type_info=...)`` hands the next operator each
item as PyFlink's source does after the item went through Java (:meth:`TypeInformation.convert`, checked
against PyFlink 2.3.0 by tests/api/test_typed_collections.py):

- ``Types.ROW_NAMED(names, types)`` / ``Types.ROW(types)``: a :class:`~engine.row.Row` with the declared names
  (``f0, f1, ...`` for ``ROW``), from a tuple or list by position, from a named ``Row`` by name (its row kind
  kept); so ``data.info`` works as in PyFlink;
- ``Types.TUPLE``: a tuple (also from a list); ``Types.LIST`` and the arrays: a list; ``Types.MAP``: a dict;
- ``Types.FLOAT()``: the value rounded to a 32-bit float (110.1 arrives as 110.0999984741211);
- all of it recursively (a ROW inside a TUPLE, FLOAT values of a MAP).

An item that does not fit (a wrong number of fields, a named Row without a declared name, a non-float for
``FLOAT``/``DOUBLE``) is refused when the job is built, naming ``collection``; PyFlink fails on those too,
when the job runs.  Other basic types are passed as given.

**Conversion of a declared key.**  ``key_by(f, key_type=T)``: PyFlink sends the key to Java as ``T``, so
``ctx.get_current_key()`` sees it converted (``Types.FLOAT()``: 1.1 becomes 1.100000023841858; a named Row key
is renamed by ``Types.ROW_NAMED``); Sluice converts the key the same way (:class:`KeyTypeSelector`), and keys
it by the converted key.  PyFlink fails on a tuple key declared ``ROW`` or a list declared ``TUPLE``, which
Sluice converts; a key that does not fit at all is a dead letter of the key selector.

**Operator outputs are not converted**, and that follows PyFlink too: ``map(f, output_type=Types.ROW_NAMED(...))``
hands ``f``'s tuple to a chained next operator as the tuple (and PyFlink fails where the tuple must be
serialised, at a shuffle or a print; Sluice passes it on), and a ``FLOAT`` output reaches a chained operator
unrounded.  PyFlink does convert there when the record crosses a network boundary (a named Row's fields are
reordered to the declared names, ``FLOAT`` fields rounded); Sluice, which has no such boundary between Python
operators, does not.

**print().**  PyFlink prints a stream with a declared type through Java's ``toString`` (a ``Types.TUPLE``
result prints ``(hi,0,5,4)``, a ``FLOAT`` field by ``Float.toString``, ``(a,110.1)``), a row-typed stream in
Python as the row kind and ``str`` of each field, ``+I[1,a]``, and one without a type
(``PICKLED_BYTE_ARRAY``) through Python's ``str`` (``Row(id=1, info='a')``).  Sluice's ``print()`` does the
same, using :meth:`TypeInformation.format_value`.

**Not supported**: Java's ``toString`` of arrays (``[I@1b6d3586``), which Sluice renders as ``[1, 2]``; exact
Java formatting of ``BIG_DEC`` and the time types (rendered with Python's ``str``); JDK 17's ``Float.toString``
where it is not the shortest (``1.10000005E10``; Sluice prints ``1.1E10`` as JDK 19 and later do).
"""

from __future__ import annotations

import math
import struct
from typing import Any, Sequence

from engine.errors import JobDefinitionError
from engine.row import Row

__all__ = ["TypeInformation", "Types", "check_type_info", "convert_collection", "typed_key_selector"]


class _NotConvertible(Exception):
    """A value that does not fit its declared type; ``convert_collection`` turns it into a JobDefinitionError."""

    def __init__(self, path: str, rule: str) -> None:
        super().__init__(f"{path} {rule}")


class TypeInformation:
    """Base of the type informations ``Types`` builds (PyFlink's ``pyflink.common.typeinfo``)."""

    def format_value(self, value: Any) -> str:
        """``value`` as Flink's ``print()`` shows a record of this type (Java's ``toString``)."""
        return _java_string(value)

    def java_string(self, value: Any) -> str:
        """``value`` as Java's ``toString`` writes a record of this type, e.g. in a file written with
        ``Encoder.simple_string_encoder()``; the same as :meth:`format_value` but for rows, which PyFlink's
        ``print()`` formats in Python."""
        return self.format_value(value)

    def convert(self, value: Any, path: str = "record") -> Any:
        """``value`` as PyFlink hands a record of this type back to Python after it crossed into Java: a
        ``Types.ROW`` value becomes a :class:`Row`, a ``Types.FLOAT`` one a 32-bit float, recursively.
        Raises _NotConvertible (``path`` says where in the record) for a value PyFlink refuses."""
        return value

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and vars(other) == vars(self)

    def __hash__(self) -> int:
        return hash((type(self).__name__, repr(self)))


class BasicTypeInfo(TypeInformation):
    """A scalar: ``Types.STRING()``, ``Types.INT()``, ``Types.LONG()``, ``Types.DOUBLE()`` ..."""

    def __init__(self, type_name: str) -> None:
        self.type_name = type_name

    def convert(self, value: Any, path: str = "record") -> Any:
        if self.type_name in ("Float", "Double") and value is not None:
            if not isinstance(value, float):
                raise _NotConvertible(path, f"must be a float for Types.{self.type_name.upper()}(), "
                                            f"got {type(value).__name__} {value!r} (PyFlink fails on it too)")
            return _float32(value) if self.type_name == "Float" else float(value)
        return value

    def format_value(self, value: Any) -> str:
        if self.type_name == "Float" and isinstance(value, float):
            return _java_float(value)
        return _java_string(value)

    def __repr__(self) -> str:
        return self.type_name


class PickledBytesTypeInfo(TypeInformation):
    """Any Python object (PyFlink's default when no type is given): printed with ``str``."""

    def format_value(self, value: Any) -> str:
        return value if isinstance(value, str) else str(value)

    def __repr__(self) -> str:
        return "PickledByteArrayTypeInfo"


class TupleTypeInfo(TypeInformation):
    """A Flink ``TupleN``; printed ``(f0,f1,...)``."""

    def __init__(self, field_types: list[TypeInformation]) -> None:
        self.field_types = _check_type_list(field_types, "field_types", "Types.TUPLE")

    def get_field_types(self) -> list[TypeInformation]:
        return list(self.field_types)

    def convert(self, value: Any, path: str = "record") -> Any:
        if value is None:
            return None
        if isinstance(value, Row) or not isinstance(value, (tuple, list)):
            raise _NotConvertible(path, f"must be a tuple for {self!r}, got {type(value).__name__} {value!r}")
        _check_arity(value, len(self.field_types), path, self)
        return tuple(t.convert(v, f"{path}[{i}]") for i, (t, v) in enumerate(zip(self.field_types, value)))

    def format_value(self, value: Any) -> str:
        fields = _fields(value, len(self.field_types))
        if fields is None:
            return _java_string(value)
        return "(" + ",".join(t.format_value(v) for t, v in zip(self.field_types, fields)) + ")"

    def __repr__(self) -> str:
        return f"TupleTypeInfo({', '.join(map(repr, self.field_types))})"


class RowTypeInfo(TypeInformation):
    """A Flink ``Row``; printed ``+I[f0, f1, ...]`` (the row kind INSERT, then its fields)."""

    def __init__(self, field_types: list[TypeInformation], field_names: list[str] | None = None) -> None:
        self.field_types = _check_type_list(field_types, "field_types", "Types.ROW")
        if field_names is not None:
            if not isinstance(field_names, (list, tuple)) or not all(isinstance(n, str) and n for n in field_names):
                raise JobDefinitionError("field_names", field_names, "must be a list of non-empty strings",
                                         "Types.ROW_NAMED(['name', 'count'], [Types.STRING(), Types.INT()])")
            if len(field_names) != len(self.field_types):
                raise JobDefinitionError(
                    "field_names", field_names,
                    f"must name every field: {len(field_names)} names for {len(self.field_types)} field_types")
            if len(set(field_names)) != len(field_names):
                raise JobDefinitionError("field_names", field_names, "must not repeat a name")
        self.field_names = list(field_names) if field_names is not None else [f"f{i}" for i in range(len(field_types))]

    def get_field_names(self) -> list[str]:
        return list(self.field_names)

    def get_field_types(self) -> list[TypeInformation]:
        return list(self.field_types)

    def get_field_index(self, field_name: str) -> int:
        return self.field_names.index(field_name) if field_name in self.field_names else -1

    def convert(self, value: Any, path: str = "record") -> Any:
        """A :class:`Row` named by this type: a named Row's fields are taken by name, a Row without names, a
        tuple or a list by position; the row kind is kept."""
        if value is None:
            return None
        if isinstance(value, Row) and value.get_field_names() is not None:
            missing = [n for n in self.field_names if n not in value.get_field_names()]
            if missing:
                raise _NotConvertible(path, f"must have the fields {self.field_names} of {self!r}; "
                                            f"{value!r} has no {missing}")
            fields = value.get_fields_by_names(self.field_names)
        elif isinstance(value, (Row, tuple, list)):
            _check_arity(value, len(self.field_types), path, self)
            fields = list(value)
        else:
            raise _NotConvertible(path, f"must be a Row, tuple or list for {self!r}, got {type(value).__name__} "
                                        f"{value!r}")
        row = Row(*(t.convert(v, f"{path}[{n!r}]") for t, v, n in zip(self.field_types, fields, self.field_names)))
        row.set_field_names(list(self.field_names))
        if isinstance(value, Row):
            row.set_row_kind(value.get_row_kind())
        return row

    def format_value(self, value: Any) -> str:
        """PyFlink's print of a row-typed stream, done in Python: ``+I[1,a]``, the kind, then ``str`` of each
        field joined by ``,`` (a nested row prints as ``Row(v=1.5, w=True)``, a boolean ``True``, None ``None``).
        PyFlink fails on a record that is no Row here; Sluice prints a tuple or list as an INSERT row and a
        dict by the field names."""
        kind_fields = self._kind_and_fields(value)
        if kind_fields is None:
            return _java_string(value)
        kind, fields = kind_fields
        return kind + "[" + ",".join(str(v) for v in fields) + "]"

    def java_string(self, value: Any) -> str:
        """Java's ``Row.toString``: ``+I[a, 1.5]``, the kind, then each field's ``toString`` joined by ``, ``
        (measured on PyFlink 2.3.0's FileSink with the simple string encoder)."""
        kind_fields = self._kind_and_fields(value)
        if kind_fields is None:
            return _java_string(value)
        kind, fields = kind_fields
        return kind + "[" + ", ".join(t.java_string(v) for t, v in zip(self.field_types, fields)) + "]"

    def _kind_and_fields(self, value: Any) -> tuple[str, list[Any]] | None:
        """A record's row kind (``+I`` unless it is a Row of another kind) and its fields in order: a tuple or list
        by position, a dict by the field names; None for a value that is no row."""
        if isinstance(value, Row):
            return str(value.get_row_kind()), list(value)
        if isinstance(value, dict):
            return "+I", [value.get(name) for name in self.field_names]
        fields = _fields(value, len(self.field_types))
        return None if fields is None else ("+I", fields)

    def __repr__(self) -> str:
        return "RowTypeInfo(" + ", ".join(f"{n}: {t!r}" for n, t in zip(self.field_names, self.field_types)) + ")"


class _ElementTypeInfo(TypeInformation):
    _factory = ""

    def __init__(self, element_type: TypeInformation) -> None:
        self.element_type = check_type_info(element_type, "element_type", optional=False,
                                            example=f"{self._factory}(Types.INT())")

    def convert(self, value: Any, path: str = "record") -> Any:
        if value is None:
            return None
        if isinstance(value, Row) or not isinstance(value, (list, tuple)):
            raise _NotConvertible(path, f"must be a list for {self!r}, got {type(value).__name__} {value!r}")
        return [self.element_type.convert(v, f"{path}[{i}]") for i, v in enumerate(value)]

    def format_value(self, value: Any) -> str:
        if isinstance(value, (list, tuple)):
            return "[" + ", ".join(self.element_type.format_value(v) for v in value) + "]"
        return _java_string(value)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.element_type!r})"


class ListTypeInfo(_ElementTypeInfo):
    """A ``java.util.List``; printed ``[a, b]``."""

    _factory = "Types.LIST"


class PrimitiveArrayTypeInfo(_ElementTypeInfo):
    """``int[]`` and the like (printed ``[1, 2]``; Java would print the array's identity)."""

    _factory = "Types.PRIMITIVE_ARRAY"


class BasicArrayTypeInfo(_ElementTypeInfo):
    """``Integer[]`` and the like (printed ``[1, 2]``; Java would print the array's identity)."""

    _factory = "Types.BASIC_ARRAY"


class ObjectArrayTypeInfo(_ElementTypeInfo):
    """An array of any type (printed ``[a, b]``; Java would print the array's identity)."""

    _factory = "Types.OBJECT_ARRAY"


class MapTypeInfo(TypeInformation):
    """A ``java.util.Map``; printed ``{k=v, k2=v2}`` (in the dict's order)."""

    def __init__(self, key_type_info: TypeInformation, value_type_info: TypeInformation) -> None:
        self.key_type_info = check_type_info(key_type_info, "key_type_info", optional=False,
                                             example="Types.MAP(Types.STRING(), Types.INT())")
        self.value_type_info = check_type_info(value_type_info, "value_type_info", optional=False,
                                               example="Types.MAP(Types.STRING(), Types.INT())")

    def convert(self, value: Any, path: str = "record") -> Any:
        if value is None:
            return None
        if not isinstance(value, dict):
            raise _NotConvertible(path, f"must be a dict for {self!r}, got {type(value).__name__} {value!r}")
        return {self.key_type_info.convert(k, f"{path}<key>"): self.value_type_info.convert(v, f"{path}[{k!r}]")
                for k, v in value.items()}

    def format_value(self, value: Any) -> str:
        if isinstance(value, dict):
            return "{" + ", ".join(f"{self.key_type_info.format_value(k)}={self.value_type_info.format_value(v)}"
                                   for k, v in value.items()) + "}"
        return _java_string(value)

    def __repr__(self) -> str:
        return f"MapTypeInfo({self.key_type_info!r}, {self.value_type_info!r})"


class Types:
    """The type informations of PyFlink's ``Types`` (``pyflink.common.typeinfo.Types``), same names."""

    @staticmethod
    def STRING() -> TypeInformation:  # noqa: N802 - PyFlink's names
        return BasicTypeInfo("String")

    @staticmethod
    def BYTE() -> TypeInformation:  # noqa: N802
        return BasicTypeInfo("Byte")

    @staticmethod
    def BOOLEAN() -> TypeInformation:  # noqa: N802
        return BasicTypeInfo("Boolean")

    @staticmethod
    def SHORT() -> TypeInformation:  # noqa: N802
        return BasicTypeInfo("Short")

    @staticmethod
    def INT() -> TypeInformation:  # noqa: N802
        return BasicTypeInfo("Integer")

    @staticmethod
    def LONG() -> TypeInformation:  # noqa: N802
        return BasicTypeInfo("Long")

    @staticmethod
    def FLOAT() -> TypeInformation:  # noqa: N802
        return BasicTypeInfo("Float")

    @staticmethod
    def DOUBLE() -> TypeInformation:  # noqa: N802
        return BasicTypeInfo("Double")

    @staticmethod
    def CHAR() -> TypeInformation:  # noqa: N802
        return BasicTypeInfo("Character")

    @staticmethod
    def BIG_INT() -> TypeInformation:  # noqa: N802
        return BasicTypeInfo("BigInteger")

    @staticmethod
    def BIG_DEC() -> TypeInformation:  # noqa: N802
        return BasicTypeInfo("BigDecimal")

    @staticmethod
    def INSTANT() -> TypeInformation:  # noqa: N802
        return BasicTypeInfo("Instant")

    @staticmethod
    def SQL_DATE() -> TypeInformation:  # noqa: N802
        return BasicTypeInfo("Date")

    @staticmethod
    def SQL_TIME() -> TypeInformation:  # noqa: N802
        return BasicTypeInfo("Time")

    @staticmethod
    def SQL_TIMESTAMP() -> TypeInformation:  # noqa: N802
        return BasicTypeInfo("Timestamp")

    @staticmethod
    def PICKLED_BYTE_ARRAY() -> TypeInformation:  # noqa: N802
        return PickledBytesTypeInfo()

    @staticmethod
    def ROW(field_types: list[TypeInformation]) -> TypeInformation:  # noqa: N802
        return RowTypeInfo(field_types)

    @staticmethod
    def ROW_NAMED(field_names: list[str], field_types: list[TypeInformation]) -> TypeInformation:  # noqa: N802
        return RowTypeInfo(field_types, field_names)

    @staticmethod
    def TUPLE(field_types: list[TypeInformation]) -> TypeInformation:  # noqa: N802
        return TupleTypeInfo(field_types)

    @staticmethod
    def PRIMITIVE_ARRAY(element_type: TypeInformation) -> TypeInformation:  # noqa: N802
        return PrimitiveArrayTypeInfo(element_type)

    @staticmethod
    def BASIC_ARRAY(element_type: TypeInformation) -> TypeInformation:  # noqa: N802
        return BasicArrayTypeInfo(element_type)

    @staticmethod
    def OBJECT_ARRAY(element_type: TypeInformation) -> TypeInformation:  # noqa: N802
        return ObjectArrayTypeInfo(element_type)

    @staticmethod
    def MAP(key_type_info: TypeInformation, value_type_info: TypeInformation) -> TypeInformation:  # noqa: N802
        return MapTypeInfo(key_type_info, value_type_info)

    @staticmethod
    def LIST(element_type_info: TypeInformation) -> TypeInformation:  # noqa: N802
        return ListTypeInfo(element_type_info)


def check_type_info(value: Any, parameter: str, optional: bool = True,
                    example: str = "Types.STRING(), Types.TUPLE([Types.STRING(), Types.INT()])") -> Any:
    """``value`` if it is a :class:`TypeInformation` (or None when ``optional``), else a JobDefinitionError
    naming ``parameter``: the commonest slips are ``Types.INT`` uncalled and a Python type such as ``int``."""
    if isinstance(value, TypeInformation) or (value is None and optional):
        return value
    hint = f"Use a type information from Types, e.g. {example}"
    if callable(value) and getattr(value, "__qualname__", "").startswith("Types."):
        hint = f"Call it: {value.__qualname__}()"
    elif isinstance(value, type):
        hint = f"Python types are not type informations; {hint[0].lower()}{hint[1:]}"
    raise JobDefinitionError(parameter, value, "must be a TypeInformation (from engine.Types)", hint)


def _check_type_list(field_types: Any, parameter: str, factory: str) -> list[TypeInformation]:
    if not isinstance(field_types, (list, tuple)):
        raise JobDefinitionError(parameter, field_types, "must be a list of type informations",
                                 f"Use {factory}([Types.STRING(), Types.INT()])")
    for i, t in enumerate(field_types):
        check_type_info(t, f"{parameter}[{i}]", optional=False, example=f"Use {factory}([Types.STRING(), Types.INT()])")
    return list(field_types)


def convert_collection(items: list[Any], type_info: TypeInformation | None, parameter: str = "collection") -> list[Any]:
    """The items of ``from_collection(collection, type_info)`` as PyFlink's source hands them to the next
    operator (module docstring); a JobDefinitionError naming ``parameter`` for an item that does not fit."""
    if type_info is None:
        return items
    out = []
    for i, item in enumerate(items):
        try:
            out.append(type_info.convert(item, f"item {i}"))
        except _NotConvertible as exc:
            raise JobDefinitionError(parameter, item, f"must hold items of the declared type_info {type_info!r}: "
                                     f"{exc}") from None
    return out


class KeyTypeSelector:
    """``key_by(f, key_type=T)``: the key ``f`` returns, converted by ``T`` as PyFlink's key is when it crosses
    into Java (module docstring); plain data, so it pickles to Spark tasks with ``f``."""

    __slots__ = ("selector", "key_type")

    def __init__(self, selector: Any, key_type: TypeInformation) -> None:
        self.selector = selector
        self.key_type = key_type

    def get_key(self, value: Any) -> Any:
        key = self.selector(value)
        try:
            return self.key_type.convert(key, "the key")
        except _NotConvertible as exc:
            raise TypeError(f"key_by's key_type {self.key_type!r}: {exc}") from None

    __call__ = get_key

    def __getstate__(self) -> tuple:
        return self.selector, self.key_type

    def __setstate__(self, state: tuple) -> None:
        self.selector, self.key_type = state


def typed_key_selector(selector: Any, key_type: TypeInformation | None) -> Any:
    """``selector``, or a :class:`KeyTypeSelector` when ``key_type`` converts keys (a ROW, TUPLE, FLOAT, ... type;
    ``STRING``, ``INT`` and the other basic types pass keys as they are, so the selector stays as given)."""
    if key_type is None or type(key_type).convert is TypeInformation.convert or (
            isinstance(key_type, BasicTypeInfo) and key_type.type_name not in ("Float", "Double")):
        return selector
    return KeyTypeSelector(selector, key_type)


def _check_arity(value: Any, arity: int, path: str, type_info: TypeInformation) -> None:
    if len(value) != arity:
        raise _NotConvertible(path, f"must have {arity} fields for {type_info!r}, has {len(value)}: {value!r}")


def _float32(x: float) -> float:
    """``x`` rounded to the nearest 32-bit float, as a Python float (Java's ``(float) x``); too large for 32 bits
    is infinity, as in Java."""
    try:
        return struct.unpack("<f", struct.pack("<f", x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)


def _java_float(x: float) -> str:
    """Java's ``Float.toString`` of ``(float) x``: the shortest digits that read back as that 32-bit float, plain
    between 1e-3 and 1e7, else ``d.dddE<n>``.  (JDK 19 and later; JDK 17 sometimes prints one digit more,
    ``1.10000005E10`` for ``1.1E10``.)"""
    f = _float32(x)
    if math.isnan(f) or math.isinf(f) or f == 0:
        return _java_double(f)
    for precision in range(1, 10):  # 9 significant digits always identify a 32-bit float
        candidate = f"{f:.{precision}g}"
        if _float32(float(candidate)) == f:
            break
    return _java_double(float(candidate))


def _fields(value: Any, arity: int) -> Sequence[Any] | None:
    if isinstance(value, (tuple, list)) and len(value) == arity:
        return value
    return None


def _java_string(value: Any) -> str:
    """Java's ``String.valueOf`` for the Python value a field holds."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return _java_double(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_java_string(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_java_string(k)}={_java_string(v)}" for k, v in value.items()) + "}"
    return str(value)


def _java_double(x: float) -> str:
    """Java's ``Double.toString``: plain between 1e-3 and 1e7, else ``d.dddE<n>``, shortest digits either way."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0 or 1e-3 <= abs(x) < 1e7:
        return repr(x)
    for precision in range(17):  # the shortest mantissa that reads back as x (.16e always does)
        candidate = f"{x:.{precision}e}"
        if float(candidate) == x:
            break
    significant, exponent = candidate.split("e")
    if "." not in significant:
        significant += ".0"
    return f"{significant}E{int(exponent)}"
