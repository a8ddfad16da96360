"""Built-in window aggregations with Flink's SumAggregator / ComparableAggregator semantics."""

from __future__ import annotations

import functools
import itertools
import random

import pytest

from engine.api.functions import ReduceFunction
from engine.errors import JobDefinitionError, MalformedRecordError
from engine.state import codec
from engine.windowing.aggregations import (
    FieldComparisonError,
    MaxAggregate,
    MaxByAggregate,
    MinAggregate,
    MinByAggregate,
    ReduceAggregate,
    SumAggregate,
    VectorizedAggregation,
    builtin_aggregation,
)
from engine.windowing.internal_window_function import IncrementalAggregation
from engine.windowing.slicing.batch_fold import batch_folder


def fold(agg, elements):
    acc = agg.create_accumulator()
    for e in elements:
        acc = agg.add(e, acc)
    return agg.get_result(acc)


TUPLES = [("a", 3, "first"), ("a", 1, "second"), ("a", 7, "third"), ("a", 1, "fourth"), ("a", 7, "fifth")]
DICTS = [{"user": "u", "n": n, "tag": tag} for _, n, tag in TUPLES]


def test_sum_keeps_the_first_elements_other_fields():
    assert fold(SumAggregate(1), TUPLES) == ("a", 19, "first")
    assert fold(SumAggregate("n"), DICTS) == {"user": "u", "n": 19, "tag": "first"}


def test_min_and_max_replace_the_field_of_the_first_element():
    assert fold(MinAggregate(1), TUPLES) == ("a", 1, "first")
    assert fold(MaxAggregate(1), TUPLES) == ("a", 7, "first")
    assert fold(MaxAggregate("n"), DICTS) == {"user": "u", "n": 7, "tag": "first"}


def test_min_by_and_max_by_return_the_whole_first_element_holding_the_extreme():
    assert fold(MinByAggregate(1), TUPLES) == ("a", 1, "second")
    assert fold(MaxByAggregate(1), TUPLES) == ("a", 7, "third")
    assert fold(MinByAggregate("n"), DICTS)["tag"] == "second"
    assert fold(MaxByAggregate("n"), DICTS)["tag"] == "third"


def test_aggregations_never_mutate_input_elements():
    dicts = [dict(d) for d in DICTS]
    lists = [list(t) for t in TUPLES]
    fold(SumAggregate("n"), dicts)
    fold(MaxAggregate(1), lists)
    assert dicts == DICTS and lists == [list(t) for t in TUPLES]


def test_scalar_streams_aggregate_position_zero():
    assert fold(SumAggregate(0), [1, 2, 3.5]) == 6.5
    assert fold(MaxAggregate(0), [1, 9, 3]) == 9


def test_lists_are_supported_like_tuples():
    assert fold(SumAggregate(1), [["k", 1], ["k", 2]]) == ["k", 3]


def test_merge_combines_partial_results_in_order():
    for agg in (SumAggregate(1), MinAggregate(1), MaxAggregate(1), MinByAggregate(1), MaxByAggregate(1)):
        left, right = TUPLES[:2], TUPLES[2:]
        merged = agg.merge(functools.reduce(lambda a, e: agg.add(e, a), left, agg.create_accumulator()),
                           functools.reduce(lambda a, e: agg.add(e, a), right, agg.create_accumulator()))
        assert agg.get_result(merged) == fold(agg, TUPLES), agg
        assert agg.merge(None, merged) == merged == agg.merge(merged, None)


def test_accumulators_are_plain_data_the_state_codec_round_trips():
    for agg in (SumAggregate(1), MinByAggregate("n")):
        elements = TUPLES if agg.field == 1 else DICTS
        acc = functools.reduce(lambda a, e: agg.add(e, a), elements, agg.create_accumulator())
        assert codec.decode(codec.encode(acc)) == acc


@pytest.mark.parametrize("field", [-1, 1.5, None, True, ("a",), ""])
def test_invalid_fields_are_refused_at_build_time(field):
    with pytest.raises(JobDefinitionError) as info:
        SumAggregate(field)
    assert info.value.parameter == "field"


def test_a_missing_field_fails_on_the_first_element_with_a_clear_message():
    with pytest.raises(JobDefinitionError, match="does not exist"):
        fold(SumAggregate(5), TUPLES)
    with pytest.raises(JobDefinitionError, match="does not exist"):
        fold(SumAggregate("missing"), DICTS)
    with pytest.raises(JobDefinitionError, match="does not exist"):
        fold(SumAggregate(1), [5])


def test_vectorized_description_matches_the_row_by_row_result():
    rng = random.Random(3)
    rows = [(rng.choice("xy"), rng.randrange(5), i) for i in range(40)]
    column = [r[1] for r in rows]
    for kind in ("sum", "min", "max", "min_by", "max_by"):
        agg = builtin_aggregation(kind, 1)
        assert agg.vectorized == VectorizedAggregation(kind, 1)
        if kind in ("sum", "min", "max"):
            value = {"sum": sum, "min": min, "max": max}[kind](column)
            expected = (rows[0][0], value, rows[0][2])
        else:
            target = min(column) if kind == "min_by" else max(column)
            expected = next(r for r in rows if r[1] == target)
        assert fold(agg, rows) == expected, kind
    assert ReduceAggregate(lambda a, b: a).vectorized is None
    with pytest.raises(JobDefinitionError):
        builtin_aggregation("avg", 1)


def test_reduce_aggregate_wraps_functions_and_reduce_functions():
    assert fold(ReduceAggregate(lambda a, b: (a[0], a[1] + b[1])), [("k", 1), ("k", 2), ("k", 4)]) == ("k", 7)

    class Concat(ReduceFunction):
        def reduce(self, value1, value2):
            return value1 + value2

    agg = ReduceAggregate(Concat())
    assert fold(agg, ["a", "b", "c"]) == "abc"
    assert agg.merge(agg.add("a", None), agg.add("b", None)) == "ab"
    assert agg.get_result(agg.create_accumulator()) is None
    with pytest.raises(JobDefinitionError):
        ReduceAggregate(42)


NAN = float("nan")


def _same(a, b) -> bool:
    return a == b or (a != a and b != b)  # NaN equals NaN here


@pytest.mark.parametrize("values", [(3.0, NAN, 1.0), (NAN, NAN), (2.0, 1.0), (NAN, 5.0, NAN, -1.0)])
def test_nan_is_ordered_above_every_number_in_any_arrival_order(values):
    """Java's Double.compare puts NaN above every number: min skips NaN unless all are NaN, max is NaN once
    one value is.  Before, Python's ``<`` (always False with NaN) made both depend on arrival order."""
    numbers = [v for v in values if v == v]
    want = {"min": min(numbers) if numbers else NAN, "max": NAN if len(numbers) < len(values) else max(values)}
    want["min_by"], want["max_by"] = want["min"], want["max"]
    for order in set(itertools.permutations(range(len(values)))):
        rows = [("k", values[i], i) for i in order]
        for kind, expected in want.items():
            agg = builtin_aggregation(kind, 1)
            by_add = fold(agg, rows)
            assert _same(by_add[1], expected), (kind, order, by_add)
            # the batch fold of the slicing operators, from scratch, one element at a time and onto an accumulator
            fold_all = batch_folder(IncrementalAggregation(agg))
            assert fold_all(None, rows) == by_add or _same(fold_all(None, rows)[1], by_add[1])
            assert fold_all(None, rows)[2] == by_add[2], (kind, order)  # the same element is kept
            one_by_one = None
            for row in rows:
                one_by_one = fold_all(one_by_one, [row])
            assert _same(one_by_one[1], expected) and one_by_one[2] == by_add[2], (kind, order, one_by_one)


def test_sum_refuses_a_bool_as_malformed_and_min_max_order_bools():
    with pytest.raises(MalformedRecordError, match=r"is True \(bool\), sum needs a number"):
        SumAggregate("n").check_element({"n": True})
    SumAggregate("n").check_element({"n": 1.5})
    for agg in (MinAggregate("n"), MaxAggregate("n"), MinByAggregate("n"), MaxByAggregate("n")):
        agg.check_element({"n": True})
    assert fold(MinAggregate(0), [(True,), (False,)]) == (False,)


def test_text_and_numbers_in_one_min_field_fail_naming_the_aggregate_the_field_and_both_values():
    for agg in (MinAggregate("n"), MaxAggregate("n"), MinByAggregate("n"), MaxByAggregate("n")):
        with pytest.raises(FieldComparisonError, match=r"\('n'\) cannot compare 3 \(int\) with 'abc' \(str\)"):
            fold(agg, [{"n": 3}, {"n": "abc"}])
        with pytest.raises(FieldComparisonError, match=r"cannot compare 3 \(int\) with 'abc'"):
            batch_folder(IncrementalAggregation(agg))(None, [{"n": 3}, {"n": "abc"}])
