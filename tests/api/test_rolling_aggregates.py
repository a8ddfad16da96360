"""Rolling aggregates on a KeyedStream (issue 19): ``reduce``, ``sum``, ``min``, ``max``, ``min_by``, ``max_by``.

Flink's semantics (KeyedStream javadoc and ComparableAggregator): one updated aggregate per input record,
an independent aggregate per key.  ``sum``/``min``/``max`` keep the other fields of the key's FIRST record
and replace only the aggregated field; ``min_by``/``max_by`` return the whole record holding the extreme,
the first one on ties.  The field is a tuple position or a dict key.
"""

from __future__ import annotations

import pytest

from engine import JobDefinitionError, ReduceFunction, StreamExecutionEnvironment, Types

TUPLES = [("a", 3, "x"), ("b", 5, "y"), ("a", 1, "z"), ("a", 2, "w"), ("b", 5, "v"), ("a", 1, "q"), ("a", 9, "m")]

EXPECTED_TUPLES = {
    "sum": [("a", 3, "x"), ("b", 5, "y"), ("a", 4, "x"), ("a", 6, "x"), ("b", 10, "y"), ("a", 7, "x"),
            ("a", 16, "x")],
    "min": [("a", 3, "x"), ("b", 5, "y"), ("a", 1, "x"), ("a", 1, "x"), ("b", 5, "y"), ("a", 1, "x"),
            ("a", 1, "x")],
    "min_by": [("a", 3, "x"), ("b", 5, "y"), ("a", 1, "z"), ("a", 1, "z"), ("b", 5, "y"), ("a", 1, "z"),
               ("a", 1, "z")],
    "max": [("a", 3, "x"), ("b", 5, "y"), ("a", 3, "x"), ("a", 3, "x"), ("b", 5, "y"), ("a", 3, "x"),
            ("a", 9, "x")],
    "max_by": [("a", 3, "x"), ("b", 5, "y"), ("a", 3, "x"), ("a", 3, "x"), ("b", 5, "y"), ("a", 3, "x"),
               ("a", 9, "m")],
}


def _env(parallelism: int = 1) -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism)
    return env


@pytest.mark.parametrize("kind", sorted(EXPECTED_TUPLES))
def test_rolling_aggregates_of_tuples_by_position(kind: str) -> None:
    keyed = _env().from_collection(TUPLES).key_by(lambda t: t[0])
    assert getattr(keyed, kind)(1).execute_and_collect() == EXPECTED_TUPLES[kind]


@pytest.mark.parametrize("kind", sorted(EXPECTED_TUPLES))
def test_rolling_aggregates_of_dicts_by_key(kind: str) -> None:
    records = [{"user": u, "amount": n, "tag": t} for u, n, t in TUPLES]
    keyed = _env().from_collection(records).key_by("user")
    expected = [{"user": u, "amount": n, "tag": t} for u, n, t in EXPECTED_TUPLES[kind]]
    assert getattr(keyed, kind)("amount").execute_and_collect() == expected


@pytest.mark.parametrize("kind", sorted(EXPECTED_TUPLES))
def test_each_key_keeps_its_own_aggregate_at_any_parallelism(kind: str) -> None:
    out = getattr(_env(3).from_collection(TUPLES).key_by(0), kind)(1).execute_and_collect()
    for key in ("a", "b"):
        assert [r for r in out if r[0] == key] == [r for r in EXPECTED_TUPLES[kind] if r[0] == key]


def test_rolling_sum_of_a_scalar_stream_is_position_zero() -> None:
    out = _env().from_collection([1, 2, 3, 4]).key_by(lambda v: v % 2).sum(0).execute_and_collect()
    assert out == [1, 2, 4, 6]


def test_rolling_reduce_with_a_callable_and_a_reduce_function() -> None:
    keyed = _env().from_collection(TUPLES).key_by(lambda t: t[0])
    assert keyed.reduce(lambda a, b: (a[0], a[1] + b[1], b[2])).execute_and_collect() == [
        ("a", 3, "x"), ("b", 5, "y"), ("a", 4, "z"), ("a", 6, "w"), ("b", 10, "v"), ("a", 7, "q"), ("a", 16, "m")]

    class Longest(ReduceFunction):
        def reduce(self, value1, value2):
            return value2 if value2[1] > value1[1] else value1

    keyed = _env().from_collection(TUPLES).key_by(lambda t: t[0])
    assert keyed.reduce(Longest()).execute_and_collect() == EXPECTED_TUPLES["max_by"]


@pytest.mark.parametrize("kind", sorted(EXPECTED_TUPLES))
@pytest.mark.parametrize("field", [-1, 1.5, True, None, ""])
def test_a_field_that_is_no_position_or_key_is_refused_at_build_time(kind: str, field) -> None:
    keyed = _env().from_collection(TUPLES).key_by(lambda t: t[0])
    with pytest.raises(JobDefinitionError) as err:
        getattr(keyed, kind)(field)
    assert err.value.parameter == "field"


@pytest.mark.parametrize("kind", sorted(EXPECTED_TUPLES))
def test_a_missing_field_of_the_declared_type_is_refused_at_build_time(kind: str) -> None:
    typed = _env().from_collection(TUPLES, type_info=Types.TUPLE([Types.STRING(), Types.INT(), Types.STRING()]))
    with pytest.raises(JobDefinitionError, match="`field`.*3") as err:
        getattr(typed.key_by(lambda t: t[0]), kind)(3)
    assert "3 fields" in str(err.value)
    named = _env().from_collection([("a", 1)], type_info=Types.ROW_NAMED(["user", "n"], [Types.STRING(), Types.INT()]))
    with pytest.raises(JobDefinitionError, match="`field`.*'amount'"):
        getattr(named.key_by(0), kind)("amount")


def test_a_field_missing_from_the_collections_records_is_refused_at_build_time() -> None:
    keyed = _env().from_collection([{"user": "a", "n": 1}, {"user": "b", "amount": 2}]).key_by("user")
    with pytest.raises(JobDefinitionError) as err:
        keyed.sum("amount")
    assert err.value.parameter == "field" and "{'user': 'a', 'n': 1}" in str(err.value)


def test_reduce_needs_a_function() -> None:
    keyed = _env().from_collection(TUPLES).key_by(lambda t: t[0])
    with pytest.raises(JobDefinitionError) as err:
        keyed.reduce(42)
    assert err.value.parameter == "func"
