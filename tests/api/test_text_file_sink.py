"""A file sink's ``text`` format: Flink's simple string encoder, a line per record (engine/io/row_format.py).

The expected lines are what PyFlink 2.3.0's ``FileSink.for_row_format(path, Encoder.simple_string_encoder())``
wrote for the same records: Java's ``toString`` of the declared type, ``(a,3)`` for a tuple, ``+I[a, 1.5]`` for a
row (with a space, where PyFlink's ``print()`` of the same row shows ``+I[a,1.5]``).  An untyped stream is written
with Python's ``str`` (Flink writes its pickled bytes' identity, ``[B@6392b86c``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from engine import Encoder, FileSink, Row, StreamExecutionEnvironment, Types
from engine.errors import JobDefinitionError
from engine.io.file_sink import read_committed

TUPLES = [("a", 3), ("b", 1)]
ROWS = [Row(x="a", y=1.5), Row(x="b", y=1e20)]
ROW_TYPE = Types.ROW_NAMED(["x", "y"], [Types.STRING(), Types.DOUBLE()])


def _write_all(runtime: str, out: Path) -> dict[str, list[str]]:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime(runtime)
    env.set_parallelism(1)
    env.enable_checkpointing(50)
    env.get_checkpoint_config().set_checkpoint_storage_dir(f"file://{out}/checkpoints")
    builder = lambda name: FileSink.for_row_format(str(out / name), Encoder.simple_string_encoder()).build()  # noqa: E731
    env.from_collection(TUPLES, type_info=Types.TUPLE([Types.STRING(), Types.INT()])).sink_to(builder("tuples"))
    env.from_collection(ROWS, type_info=ROW_TYPE).sink_to(builder("rows"))
    env.from_collection([("a", 3), {"k": [1, None]}]).map(lambda v: v).sink_to(builder("untyped"))
    env.from_collection(["plain", "lines"]).write_files(str(out / "written"), "text")
    env.execute("text sink")
    return {name: read_committed(str(out / name)) for name in ("tuples", "rows", "untyped", "written")}


EXPECTED = {"tuples": ["(a,3)", "(b,1)"], "rows": ["+I[a, 1.5]", "+I[b, 1.0E20]"],
            "untyped": ["('a', 3)", "{'k': [1, None]}"], "written": ["plain", "lines"]}


def test_the_simple_string_encoder_writes_javas_to_string_of_the_declared_type(tmp_path: Path) -> None:
    written = _write_all("local", tmp_path)
    assert {name: sorted(lines) for name, lines in written.items()} == \
        {name: sorted(lines) for name, lines in EXPECTED.items()}
    assert all(p.suffix == ".txt" for p in (tmp_path / "rows").glob("part-*"))


@pytest.mark.spark
def test_the_spark_runtime_writes_the_same_lines(spark, tmp_path: Path) -> None:
    assert _write_all("spark", tmp_path) == _write_all("local", tmp_path / "local")


def test_an_unknown_sink_format_is_refused_naming_the_parameter(tmp_path: Path) -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    with pytest.raises(JobDefinitionError, match="format.*'parquet', 'jsonl', 'text'"):
        env.from_collection([1]).write_files(str(tmp_path), "csv")
