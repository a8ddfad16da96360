"""``Row`` behaves as PyFlink 2.3's ``pyflink.common.Row`` (issue 19).

Expected values are what PyFlink's class gives (checked with apache-flink 2.3.0's ``pyflink.common.types``;
the oracle is kept out of CI), including its printed forms: a stream of rows printed without a declared type
shows ``Row(id=1, info='a')``, an unnamed row ``<Row(1, 'a')>``.
"""

from __future__ import annotations

import pickle

import pytest

from engine import Row, RowKind


def test_named_row_reads_fields_by_name_attribute_and_position() -> None:
    row = Row(id=1, info="a")
    assert (row.id, row["info"], row[0], row[1], row[-1], row[0:2]) == (1, "a", 1, "a", "a", [1, "a"])
    assert list(row) == [1, "a"] and len(row) == 2
    assert "id" in row and "nope" not in row and 1 not in row  # names are searched when the row has them
    assert row.as_dict() == {"id": 1, "info": "a"}
    assert row.get_fields_by_names(["info", "id"]) == ["a", 1]


def test_unnamed_row_has_positions_only() -> None:
    row = Row(1, "a")
    assert (row[0], row[1], len(row)) == (1, "a", 2) and 1 in row and "a" in row
    with pytest.raises(AttributeError):
        row.id
    with pytest.raises(KeyError):
        row["id"]
    with pytest.raises(TypeError, match="Cannot convert a Row class into dict"):
        row.as_dict()


def test_repr_and_str_are_pyflinks() -> None:
    assert repr(Row(id=1, info="a")) == str(Row(id=1, info="a")) == "Row(id=1, info='a')"
    assert repr(Row(1, "a")) == str(Row(1, "a")) == "<Row(1, 'a')>"
    assert repr(Row(k="a", inner=Row(v=1.5, w=True))) == "Row(k='a', inner=Row(v=1.5, w=True))"
    assert repr(Row(b=2, a=1)) == "Row(b=2, a=1)"  # the names keep the order given


def test_row_kind_defaults_to_insert_and_prints_flinks_short_form() -> None:
    row = Row(1)
    assert row.get_row_kind() is RowKind.INSERT
    row.set_row_kind(RowKind.DELETE)
    assert row.get_row_kind() is RowKind.DELETE
    assert [str(k) for k in RowKind] == ["+I", "-U", "+U", "-D"]
    assert Row.of_kind(RowKind.UPDATE_AFTER, a=1).get_row_kind() is RowKind.UPDATE_AFTER
    with pytest.raises(TypeError, match="row_kind"):
        row.set_row_kind("-D")


def test_equality_is_by_name_for_named_rows_and_counts_the_kind() -> None:
    assert Row(a=1, b=2) == Row(b=2, a=1)
    assert hash(Row(a=1, b=2)) == hash(Row(b=2, a=1))  # PyFlink's hashes differ here; equal objects must not
    assert Row(1, 2) == Row(1, 2) and hash(Row(1, 2)) == hash((1, 2))
    assert Row(1, 2) != Row(2, 1)
    assert Row(a=1) != Row(1) and Row(1) != (1,)
    assert Row(a=1) != Row(b=1)
    assert Row(a=1) != Row.of_kind(RowKind.DELETE, a=1)


def test_row_is_mutable_by_field_but_not_extensible() -> None:
    row = Row(id=1, info="a")
    row[0] = 2
    row["info"] = "b"
    assert row == Row(id=2, info="b")
    with pytest.raises(AttributeError):
        row.id = 3
    with pytest.raises(KeyError):
        row["nope"] = 1


def test_row_class_builds_named_rows() -> None:
    person = Row("name", "age")
    assert repr(person) == "<Row('name', 'age')>" and "name" in person
    assert person("Alice", 11) == Row(name="Alice", age=11)
    assert repr(person("Alice", 11)) == "Row(name='Alice', age=11)"
    with pytest.raises(ValueError):
        person(1, 2, 3)


def test_as_dict_recursive_turns_nested_rows_into_dicts() -> None:
    row = Row(key=1, value=Row(name="a", age=2), more=[Row(x=1)])
    assert row.as_dict() == {"key": 1, "value": Row(name="a", age=2), "more": [Row(x=1)]}
    assert row.as_dict(True) == {"key": 1, "value": {"name": "a", "age": 2}, "more": [{"x": 1}]}


def test_args_and_kwargs_together_are_refused() -> None:
    with pytest.raises(ValueError, match="both args and kwargs"):
        Row(1, a=2)


def test_row_survives_pickle_with_names_and_kind_for_functions_shipped_to_spark() -> None:
    row = Row.of_kind(RowKind.UPDATE_BEFORE, id=1, info="a")
    back = pickle.loads(pickle.dumps(row))
    assert back == row and repr(back) == repr(row) and back.get_row_kind() is RowKind.UPDATE_BEFORE
