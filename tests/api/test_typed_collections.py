"""Records converted where PyFlink converts them (issue 19): ``from_collection(collection, type_info=...)``.

What PyFlink 2.3.0 does was probed with small jobs on the oracle (apache-flink 2.3.0, Java 17, parallelism 1;
kept out of CI), and each expectation below is what its next operator saw or its ``print()`` wrote:

- ``Types.ROW_NAMED(["id", "info"], ...)`` over tuples (or lists) yields ``Row(id=1, info='a')``;
  ``Types.ROW([...])`` names the fields ``f0, f1, ...``; a named ``Row`` item is taken by name, its kind kept;
  rows nest (a ``Types.ROW`` field of a ``Types.TUPLE``);
- ``Types.FLOAT()`` fields are rounded to 32 bits: 110.1 arrives as 110.0999984741211 (also inside maps);
- an item with the wrong number of fields fails (PyFlink: "2 fields are required while 3 values are provided"),
  as does an int for ``Types.DOUBLE()``; Sluice says so at build time, naming ``collection``;
- ``print()`` of a row-typed stream writes ``+I[1,a]`` (PyFlink formats it in Python: the kind, ``str`` of each
  field joined by ``,``), a row-valued record of an untyped stream ``Row(id=1, info='a')``, a TUPLE with a
  FLOAT field ``(a,110.1)`` (Java's ``Float.toString``).

Operator outputs are not converted: PyFlink hands ``map(f, output_type=Types.ROW_NAMED(...))``'s tuple to a
chained next operator as the tuple (and fails where it must serialise it); Sluice passes it on as returned.
"""

from __future__ import annotations

import pytest

from engine import JobDefinitionError, Row, RowKind, StreamExecutionEnvironment, Types

RN = Types.ROW_NAMED(["id", "info"], [Types.INT(), Types.STRING()])


def _env() -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    return env


def _seen(items, type_info, then=lambda s: s):
    """What the operator after the source sees: (type name, repr, kind) per record."""
    stream = then(_env().from_collection(items, type_info=type_info))
    return stream.map(lambda x: (type(x).__name__, repr(x), str(x.get_row_kind()) if isinstance(x, Row) else None)) \
        .execute_and_collect()


def test_row_named_source_yields_rows_with_attribute_access() -> None:
    assert _seen([(1, "a"), (2, "b")], RN) == [("Row", "Row(id=1, info='a')", "+I"),
                                               ("Row", "Row(id=2, info='b')", "+I")]
    assert _env().from_collection([(1, "a")], type_info=RN).map(lambda r: (r.id, r.info)).execute_and_collect() \
        == [(1, "a")]


def test_unnamed_row_type_names_fields_f0_f1() -> None:
    assert _seen([(1, "a")], Types.ROW([Types.INT(), Types.STRING()])) == [("Row", "Row(f0=1, f1='a')", "+I")]


def test_lists_are_taken_by_position_and_named_rows_by_name_keeping_their_kind() -> None:
    assert _seen([[1, "a"]], RN) == [("Row", "Row(id=1, info='a')", "+I")]
    assert _seen([Row(info="b", id=2), Row.of_kind(RowKind.DELETE, 3, "c")], RN) == [
        ("Row", "Row(id=2, info='b')", "+I"), ("Row", "Row(id=3, info='c')", "-D")]


def test_nested_rows_and_rows_in_tuples() -> None:
    inner = Types.ROW_NAMED(["v", "w"], [Types.FLOAT(), Types.BOOLEAN()])
    nested = Types.ROW_NAMED(["k", "inner"], [Types.STRING(), inner])
    assert _seen([("a", (1.1, True))], nested) == [
        ("Row", "Row(k='a', inner=Row(v=1.100000023841858, w=True))", "+I")]
    assert _seen([(1, (2, "z"))], Types.TUPLE([Types.INT(), RN])) == [("tuple", "(1, Row(id=2, info='z'))", None)]
    assert _seen([[1, "a"]], Types.TUPLE([Types.INT(), Types.STRING()])) == [("tuple", "(1, 'a')", None)]


def test_float_fields_are_rounded_to_32_bits_at_the_source() -> None:
    assert _seen([("a", 110.1), ("b", 1.1)], Types.TUPLE([Types.STRING(), Types.FLOAT()])) == [
        ("tuple", "('a', 110.0999984741211)", None), ("tuple", "('b', 1.100000023841858)", None)]
    assert _seen([1.1, 110.1], Types.FLOAT()) == [("float", "1.100000023841858", None),
                                                  ("float", "110.0999984741211", None)]
    assert _seen([{"x": 1.1}], Types.MAP(Types.STRING(), Types.FLOAT())) == [("dict", "{'x': 1.100000023841858}", None)]
    assert _seen([("a", 110.1)], Types.TUPLE([Types.STRING(), Types.DOUBLE()])) == [("tuple", "('a', 110.1)", None)]


def test_rolling_sum_over_rows_keeps_rows() -> None:
    named = Types.ROW_NAMED(["user", "n"], [Types.STRING(), Types.INT()])
    out = _env().from_collection([("a", 1), ("a", 2)], type_info=named).key_by(lambda r: r.user).sum("n") \
        .execute_and_collect()
    assert out == [Row(user="a", n=1), Row(user="a", n=3)]


@pytest.mark.parametrize("items, type_info, rule", [
    ([(1, "a", 3)], RN, "2 fields"),
    ([Row(x=1, y="a")], RN, r"has no \['id', 'info'\]"),
    (["ab"], RN, "must be a Row, tuple or list"),
    ([1, 2], Types.DOUBLE(), "must be a float"),
    ([("a", 1)], Types.TUPLE([Types.STRING(), Types.FLOAT()]), r"item 0\[1\] must be a float"),
])
def test_an_item_that_does_not_fit_its_declared_type_is_refused_at_build_time(items, type_info, rule) -> None:
    with pytest.raises(JobDefinitionError, match=rule) as err:
        _env().from_collection(items, type_info=type_info)
    assert err.value.parameter == "collection"


def test_operator_outputs_are_passed_on_as_returned() -> None:
    """PyFlink's chained next operator sees map's tuple although ``output_type`` declares a row."""
    out = _env().from_collection([(1, "a")]).map(lambda t: t, output_type=RN).map(lambda x: type(x).__name__) \
        .execute_and_collect()
    assert out == ["tuple"]


def test_print_writes_rows_as_pyflink_prints_them(capsys) -> None:
    builds = [
        lambda env: env.from_collection([(1, "a")], type_info=RN),
        lambda env: env.from_collection([(1, "a")], type_info=RN).map(lambda r: r),  # untyped: str of the Row
        lambda env: env.from_collection([(1, "a")]).map(lambda t: Row(t[0], t[1])),
        lambda env: env.from_collection([(1, "a")]).map(lambda t: Row.of_kind(RowKind.DELETE, *t), output_type=RN),
        lambda env: env.from_collection([(1.1, True, None, 2.5)], type_info=Types.ROW_NAMED(
            ["a", "b", "c", "d"], [Types.FLOAT(), Types.BOOLEAN(), Types.STRING(), Types.DOUBLE()])),
        lambda env: env.from_collection([("a", 110.1)], type_info=Types.TUPLE([Types.STRING(), Types.FLOAT()])),
        lambda env: env.from_collection([(1.1e10, 1.1e-5, 16777217.0)], type_info=Types.TUPLE([Types.FLOAT()] * 3)),
        lambda env: env.from_collection([([1, 2], {"a": 1})], type_info=Types.ROW(
            [Types.LIST(Types.INT()), Types.MAP(Types.STRING(), Types.INT())])),
    ]
    for build in builds:
        env = _env()
        build(env).print()
        env.execute()
    assert capsys.readouterr().out.splitlines() == [
        "+I[1,a]", "Row(id=1, info='a')", "<Row(1, 'a')>", "-D[1,a]", "+I[1.100000023841858,True,None,2.5]",
        "(a,110.1)",
        "(1.1E10,1.1E-5,1.6777216E7)",  # JDK 17 printed 1.10000005E10 for the first (JDK 19+ prints 1.1E10)
        "+I[[1, 2],{'a': 1}]"]


class _CurrentKey:
    """A KeyedProcessFunction's view of its key: ``(type name, repr)`` of ``ctx.get_current_key()``."""

    @staticmethod
    def of(keyed) -> list:
        from engine import KeyedProcessFunction

        class Show(KeyedProcessFunction):
            def process_element(self, value, ctx):
                key = ctx.get_current_key()
                yield type(key).__name__, repr(key)

        return keyed.process(Show()).execute_and_collect()


def test_a_declared_key_type_converts_the_key_as_it_crosses_into_java() -> None:
    """PyFlink 2.3.0: ``key_by(f, key_type=Types.FLOAT())`` gives ``get_current_key()`` 1.100000023841858 for
    1.1, and a named Row key comes back named by ``key_type``; without a key_type the key is as returned."""
    src = _env().from_collection([("a", 1.1)], type_info=Types.TUPLE([Types.STRING(), Types.DOUBLE()]))
    assert _CurrentKey.of(src.key_by(lambda r: r[1], key_type=Types.FLOAT())) == [("float", "1.100000023841858")]
    assert _CurrentKey.of(src.key_by(lambda r: r[1])) == [("float", "1.1")]
    assert _CurrentKey.of(src.key_by(lambda r: Row(k=r[0]))) == [("Row", "Row(k='a')")]
    named = Types.ROW_NAMED(["name", "n"], [Types.STRING(), Types.INT()])
    assert _CurrentKey.of(src.key_by(lambda r: Row(n=1, name=r[0]), key_type=named)) == [
        ("Row", "Row(name='a', n=1)")]


def test_a_key_that_does_not_fit_its_key_type_is_a_dead_letter_of_the_key_selector() -> None:
    env = _env()
    keyed = env.from_collection([("a", 1.5), ("b", 2)]).key_by(lambda r: r[1], key_type=Types.FLOAT())
    assert keyed.map(lambda r: r[0]).execute_and_collect() == ["a"]
    [dead] = env.get_last_result().dead_letters
    assert dead["value"] == ("b", 2) and dead["stage"] == "key_selector"
    assert "key_type Float" in dead["error"] and "must be a float" in dead["error"]
