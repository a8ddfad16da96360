"""Row records written by the FileSink (issue 19): a PyFlink program's ``Row`` results land as the JSON
object or Parquet row of their fields (a row without names as an array / ``f0, f1, ...``), nested rows
nested, as Spark's writers write a struct; before, the JSON writer refused a Row outright."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine import Row, StreamExecutionEnvironment, Types
from engine.io.file_sink import FileSink, read_committed

NESTED = Types.ROW_NAMED(["id", "info", "addr"], [Types.INT(), Types.STRING(),
                                                  Types.ROW_NAMED(["city"], [Types.STRING()])])


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_named_rows_are_written_as_their_fields(tmp_path: Path, fmt: str) -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.from_collection([(1, "a", ("Berlin",)), (2, "b", ("Lima",))], type_info=NESTED) \
        .sink_to(FileSink(str(tmp_path / "out"), format=fmt))
    env.execute()
    assert sorted(read_committed(str(tmp_path / "out")), key=lambda r: r["id"]) == [
        {"id": 1, "info": "a", "addr": {"city": "Berlin"}}, {"id": 2, "info": "b", "addr": {"city": "Lima"}}]


def test_unnamed_rows_are_written_as_arrays_in_json_lines(tmp_path: Path) -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.from_collection([1]).map(lambda x: Row(x, Row(x + 1))).sink_to(FileSink(str(tmp_path / "out"), format="jsonl"))
    env.execute()
    assert read_committed(str(tmp_path / "out")) == [[1, [2]]]
