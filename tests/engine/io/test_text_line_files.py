"""Text files as lines (``read_files(path, "text")``, PyFlink's ``StreamFormat.text_line_format()``) and the
PyFlink ``FileSource`` builder, on the local runtime and on Spark."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine import Duration, FileSource, StreamExecutionEnvironment, StreamFormat
from engine.errors import JobDefinitionError
from engine.io.formats import decode


def test_a_text_file_is_one_record_per_line_and_a_line_that_is_not_utf8_is_a_dead_letter():
    rows = decode("text", b"first\r\n\nthird \xff\nlast")
    records, dead = rows.rows(0, len(rows))
    assert records == ["first", "", "last"]  # an empty line is an empty record, as in Flink
    assert [(d.offset, "UTF-8" in d.error) for d in dead] == [(2, True)]


def test_the_builder_reads_one_file_or_a_folder_and_refuses_what_it_cannot(tmp_path: Path):
    (tmp_path / "a.txt").write_text("x y\nz\n")
    (tmp_path / "b.txt").write_text("w\n")
    env = StreamExecutionEnvironment.get_execution_environment()
    one = env.from_source(FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(tmp_path / "a.txt"))
                          .process_static_file_set().build())
    assert sorted(one.execute_and_collect()) == ["x y", "z"]
    folder = env.from_source(FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(tmp_path))
                             .build())
    assert sorted(folder.execute_and_collect()) == ["w", "x y", "z"]
    built = FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(tmp_path)) \
        .monitor_continuously(Duration.of_seconds(2)).build()
    assert not built.is_bounded() and built.monitor_interval_ms == 2000

    with pytest.raises(JobDefinitionError, match="exactly one") as err:
        FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(tmp_path), str(tmp_path))
    assert err.value.parameter == "paths"
    with pytest.raises(JobDefinitionError) as err:
        StreamFormat.text_line_format("ISO-8859-1")
    assert err.value.parameter == "charset_name"
    with pytest.raises(JobDefinitionError) as err:
        FileSource.for_record_stream_format("text", str(tmp_path))
    assert err.value.parameter == "stream_format"


@pytest.mark.spark
def test_spark_reads_text_lines_as_the_local_runtime_does(spark, tmp_path: Path):
    for i in range(3):
        (tmp_path / f"part-{i}.txt").write_text("".join(f"line {i}-{j}\n" for j in range(40)))

    def words(runtime: str) -> list:
        env = StreamExecutionEnvironment.get_execution_environment()
        env.set_runtime(runtime)
        env.set_parallelism(2)
        return env.read_files(str(tmp_path), "text").map(lambda line: line.upper()).execute_and_collect()

    local = sorted(words("local"))
    assert len(local) == 120 and local[0] == "LINE 0-0"
    assert sorted(words("spark")) == local
