"""Built-in window aggregations: ``.sum/.min/.max/.min_by/.max_by(field)`` and ``reduce`` as AggregateFunctions.

Seed 000: "Flink optimises aggregations such as sum and min: it keeps only one
result value per window and folds every arriving element into it."  These are
Flink's ``SumAggregator`` and ``ComparableAggregator`` with Java semantics:

* ``sum(field)``, ``min(field)``, ``max(field)`` return the window's FIRST element
  with ``field`` replaced by the aggregate (the other fields are those of the
  first element, not of the element holding the min/max);
* ``min_by(field)`` / ``max_by(field)`` return the whole element holding the
  minimum / maximum, the first one on ties.

``field`` is a tuple (list, Row) position or a dict (Row) key; position 0 of a plain
scalar stream means the scalar itself (Flink's rule for basic types).  Results
are new values: elements are never mutated.  Accumulators are the partial
result element itself (or None before the first element), so they are plain
data the state codec can persist.

Vectorized fast path: each built-in has a ``vectorized`` attribute, a
:class:`VectorizedAggregation` ``(kind, field)`` with kind in
``{"sum", "min", "max", "min_by", "max_by"}`` (None for ``ReduceAggregate``),
so a runtime may compute a (key, window) group's result from columns instead
of calling ``add`` per element.  The result must be exactly the one ``add``
folding the elements in arrival order gives:

* sum/min/max: the group's first row in arrival order with ``field`` set to the
  column's sum/min/max;
* min_by/max_by: the first row in arrival order whose ``field`` equals the
  column's min/max;
* merging two partial results (``merge``) is ``reduce(earlier, later)``.

Bad data: the built-ins fold numbers (``sum`` any number; ``min``/``max``/``min_by``/``max_by`` any real
number or Decimal, also a date, time, timedelta or str, the values Flink's ComparableAggregator compares).  A
record whose field is anything else (None, which an empty CSV cell reads as, or a str such as ``'abc'`` under
``sum``) is a data problem, not a job error:
:meth:`_FieldAggregate.check_element` raises
:class:`~engine.errors.MalformedRecordError` for it, and the operators' key selector calls it first
(:func:`engine.operators.base.checking_key_selector`), so it takes the path of a record that cannot be keyed
(the dead-letter output, stage ``aggregate``) in every window operator variant and in the rolling
aggregates, before any window or accumulator sees it.  Flink fails the job there; Sluice keeps its rule
that malformed records go to the dead-letter output (README, "Records that cannot be processed").
**Supported**: the check runs on each element path (both runtimes).  A bool is no number for ``sum`` (Flink's
SumAggregator has no Boolean; a JSON ``true`` is a dead letter there), while ``min``/``max`` order it as Python
and Java do (False before True).  **Not caught**: a ``min``/``max`` field holding text in some records and
numbers in others (each is orderable alone); comparing the two fails the job, as Flink's comparison would,
with a :class:`FieldComparisonError` naming the aggregate, the field and both values.  NaN is ordered as Java's
``Double.compare`` orders it, above every number, so ``min`` skips NaN unless every value is NaN and ``max``
is NaN once one value is, in any arrival order.  A record without the field at all (a JSON line
lacking the key, a tuple too short) is malformed the same way, and a dead letter too (``the record has no field
'qty', sum needs a number``): a stream of dicts has no schema that could tell at build time, so a field name
that is wrong for every record shows as every record in the dead-letter output and its count.
"""

from __future__ import annotations

import datetime
import decimal
import numbers
from dataclasses import dataclass
from typing import Any, Callable

from engine.api.functions import AggregateFunction, ReduceFunction
from engine.errors import JobDefinitionError, MalformedRecordError
from engine.row import Row

AGGREGATION_KINDS = ("sum", "min", "max", "min_by", "max_by")


@dataclass(frozen=True, slots=True)
class VectorizedAggregation:
    """What a built-in aggregation computes, for runtimes that aggregate columns (see module docstring)."""

    kind: str
    field: int | str


def _check_field(field: Any) -> int | str:
    if isinstance(field, bool) or not isinstance(field, (int, str)) or (isinstance(field, int) and field < 0) \
            or field == "":
        raise JobDefinitionError(
            "field", field, "must be a tuple position (int >= 0) or a dict key (a non-empty str)", "e.g. .sum(1) or .sum('amount')"
        )
    return field


def get_field(value: Any, field: int | str) -> Any:
    """The aggregated field of ``value`` (tuple/list/Row position, dict/Row key, or the scalar itself for position 0)."""
    try:
        if isinstance(value, (tuple, list, Row)):
            return value[field]  # type: ignore[index]
        if isinstance(value, dict):
            return value[field]
    except (IndexError, KeyError, TypeError):
        pass
    else:
        if field == 0:
            return value
    raise JobDefinitionError(
        "field",
        field,
        f"does not exist in the element {value!r}",
        "Use a tuple position for tuple elements and a key for dict elements",
    )


#: :func:`peek_field` of a value that has no such field
MISSING = object()


def peek_field(value: Any, field: int | str) -> Any:
    """The field of ``value`` as :func:`get_field` reads it, or :data:`MISSING` (no error) when it has none."""
    try:
        if isinstance(value, (tuple, list, Row, dict)):
            return value[field]  # type: ignore[index]
    except (IndexError, KeyError, TypeError):
        return MISSING
    return value if field == 0 else MISSING


def set_field(value: Any, field: int | str, new: Any) -> Any:
    """A copy of ``value`` with ``field`` replaced by ``new`` (the input is never mutated)."""
    if isinstance(value, tuple):
        return value[:field] + (new,) + value[field + 1 :]  # type: ignore[operator]
    if isinstance(value, list):
        copy = list(value)
        copy[field] = new  # type: ignore[index]
        return copy
    if isinstance(value, Row):  # same names and kind
        copy = Row(*value)
        copy.set_field_names(value.get_field_names())
        copy.set_row_kind(value.get_row_kind())
        copy[field] = new
        return copy
    if isinstance(value, dict):
        copy = dict(value)
        copy[field] = new
        return copy
    return new  # scalar stream, position 0


#: what ``min``/``max``/``min_by``/``max_by`` compare besides numbers (module docstring, "Bad data"): what Flink's
#: ComparableAggregator compares, strings included
_ORDERED = (numbers.Real, decimal.Decimal, datetime.date, datetime.time, datetime.timedelta, str)


class FieldComparisonError(TypeError):
    """``min``/``max``/``min_by``/``max_by`` met two values of a field that do not compare (text and a number)."""


def _not_comparable(kind: str, field: int | str, o1: Any, o2: Any, exc: TypeError) -> FieldComparisonError:
    return FieldComparisonError(
        f"{kind}({field!r}) cannot compare {o1!r} ({type(o1).__name__}) with {o2!r} ({type(o2).__name__}): every "
        f"record's field {field!r} must hold values of one kind (numbers, or text, or dates, ...) for one key; "
        f"convert the field in a map() before the window ({exc})")


def less(o1: Any, o2: Any) -> bool:
    """``o1 < o2``, with NaN above every number as Java's ``Double.compare`` orders it (``x != x`` only for NaN)."""
    return o1 < o2 or (o2 != o2 and o1 == o1)


class _FieldAggregate(AggregateFunction):
    """Common part: the accumulator is the partial result element (None before the first element)."""

    kind = ""
    #: the types the field may hold (module docstring, "Bad data")
    accepts: tuple[type, ...] = _ORDERED
    needs = "a number, a date, a time or a str"

    def check_element(self, value: Any) -> None:
        """Raise :class:`MalformedRecordError` when ``value``'s field cannot be folded (module docstring,
        "Bad data"), a missing field included."""
        field = self.field
        x = peek_field(value, field)
        if x is MISSING:
            raise MalformedRecordError(f"the record has no field {field!r}, {self.kind} needs {self.needs}",
                                       "aggregate")
        t = type(x)
        if t is int or t is float or (isinstance(x, self.accepts) and not (t is bool and self.kind == "sum")):
            return
        what = "empty" if x is None else t.__name__  # an empty CSV cell, a null Parquet or JSON value
        raise MalformedRecordError(f"field {field!r} of the record is {x!r} ({what}), {self.kind} needs {self.needs}",
                                   "aggregate")

    def __init__(self, field: int | str) -> None:
        self.field = _check_field(field)
        self.vectorized = VectorizedAggregation(self.kind, self.field)

    def reduce(self, value1: Any, value2: Any) -> Any:
        raise NotImplementedError

    def _less(self, o1: Any, o2: Any, reverse: bool = False) -> bool:
        """``less(o1, o2)`` (``less(o2, o1)`` with ``reverse``), failing with a :class:`FieldComparisonError` that
        names this aggregate and the two values, the accumulator's first, when they do not compare (text and a
        number)."""
        try:
            return less(o2, o1) if reverse else less(o1, o2)
        except TypeError as exc:
            raise _not_comparable(self.kind, self.field, o1, o2, exc) from None

    def create_accumulator(self) -> Any:
        return None

    def add(self, value: Any, accumulator: Any) -> Any:
        if accumulator is None:
            get_field(value, self.field)  # fail on the first element, not only on the second
            return value
        return self.reduce(accumulator, value)

    def get_result(self, accumulator: Any) -> Any:
        return accumulator

    def merge(self, acc_a: Any, acc_b: Any) -> Any:
        if acc_a is None:
            return acc_b
        if acc_b is None:
            return acc_a
        return self.reduce(acc_a, acc_b)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.field!r})"


class SumAggregate(_FieldAggregate):
    """``.sum(field)``: the first element with ``field`` replaced by the sum (Flink's SumAggregator)."""

    kind = "sum"
    accepts = (numbers.Number,)
    needs = "a number"

    def reduce(self, value1: Any, value2: Any) -> Any:
        return set_field(value1, self.field, get_field(value1, self.field) + get_field(value2, self.field))


class MinAggregate(_FieldAggregate):
    """``.min(field)``: the first element with ``field`` replaced by the minimum (ComparableAggregator MIN)."""

    kind = "min"

    def reduce(self, value1: Any, value2: Any) -> Any:
        o1, o2 = get_field(value1, self.field), get_field(value2, self.field)
        # MinComparator.isExtremal: 1 if o1 < o2 else 0; on 0 value1 takes o2
        return value1 if self._less(o1, o2) else set_field(value1, self.field, o2)


class MaxAggregate(_FieldAggregate):
    """``.max(field)``: the first element with ``field`` replaced by the maximum (ComparableAggregator MAX)."""

    kind = "max"

    def reduce(self, value1: Any, value2: Any) -> Any:
        o1, o2 = get_field(value1, self.field), get_field(value2, self.field)
        return value1 if self._less(o1, o2, reverse=True) else set_field(value1, self.field, o2)


class MinByAggregate(_FieldAggregate):
    """``.min_by(field)``: the element with the smallest ``field``, the first on ties (Flink MINBY, first=True)."""

    kind = "min_by"

    def reduce(self, value1: Any, value2: Any) -> Any:
        o1, o2 = get_field(value1, self.field), get_field(value2, self.field)
        return value2 if self._less(o1, o2, reverse=True) else value1


class MaxByAggregate(_FieldAggregate):
    """``.max_by(field)``: the element with the largest ``field``, the first on ties (Flink MAXBY, first=True)."""

    kind = "max_by"

    def reduce(self, value1: Any, value2: Any) -> Any:
        o1, o2 = get_field(value1, self.field), get_field(value2, self.field)
        return value2 if self._less(o1, o2) else value1


_BY_KIND: dict[str, type[_FieldAggregate]] = {
    "sum": SumAggregate,
    "min": MinAggregate,
    "max": MaxAggregate,
    "min_by": MinByAggregate,
    "max_by": MaxByAggregate,
}


def builtin_aggregation(kind: str, field: int | str) -> _FieldAggregate:
    """The AggregateFunction behind ``windowed_stream.<kind>(field)``."""
    cls = _BY_KIND.get(kind)
    if cls is None:
        raise JobDefinitionError("kind", kind, f"must be one of {', '.join(AGGREGATION_KINDS)}")
    return cls(field)


class ReduceAggregate(AggregateFunction):
    """A ReduceFunction (or callable ``(a, b) -> c``) as an AggregateFunction: the accumulator is the
    reduced value so far (None before the first element), merge is ``reduce(a, b)``."""

    vectorized: VectorizedAggregation | None = None

    def __init__(self, reduce_function: ReduceFunction | Callable[[Any, Any], Any]) -> None:
        if isinstance(reduce_function, ReduceFunction):
            self.reduce_function = reduce_function.reduce
        elif callable(reduce_function):
            self.reduce_function = reduce_function
        else:
            raise JobDefinitionError(
                "reduce_function", reduce_function, "must be a ReduceFunction or a callable (a, b) -> c"
            )

    def create_accumulator(self) -> Any:
        return None

    def add(self, value: Any, accumulator: Any) -> Any:
        return value if accumulator is None else self.reduce_function(accumulator, value)

    def get_result(self, accumulator: Any) -> Any:
        return accumulator

    def merge(self, acc_a: Any, acc_b: Any) -> Any:
        if acc_a is None:
            return acc_b
        if acc_b is None:
            return acc_a
        return self.reduce_function(acc_a, acc_b)
