"""The non-transactional sinks and the dead-letter sink."""

from __future__ import annotations

import io
import json
import logging

import pytest

from engine.errors import JobDefinitionError
from engine.io import CollectSink, DeadLetterSink, FileSource, PrintSink, is_transactional


def test_collect_sink_keeps_values_in_arrival_order_and_is_not_transactional():
    sink = CollectSink()
    sink.open()
    sink.write([1, 2], epoch=0)
    sink.write([3], epoch=1)
    assert sink.values == [1, 2, 3] and not is_transactional(sink)


def test_print_sink_prefixes_the_subtask_only_when_parallel_as_flink_print_does():
    single, parallel = io.StringIO(), io.StringIO()
    one = PrintSink(single)
    one.open(0, 1)
    one.write([("a", 1)], epoch=0)
    two = PrintSink(parallel)
    two.open(1, 3)
    two.write(["x", "y"], epoch=0)
    assert single.getvalue() == "('a', 1)\n"
    assert parallel.getvalue() == "2> x\n2> y\n"


def test_print_sink_can_log_instead(caplog):
    sink = PrintSink(logger=logging.getLogger("sluice.test.print"))
    with caplog.at_level(logging.INFO, logger="sluice.test.print"):
        sink.write(["hello"], epoch=3)
    assert [r.getMessage() for r in caplog.records] == ["hello"]


def test_a_subtask_index_outside_the_parallelism_is_refused():
    with pytest.raises(JobDefinitionError, match="`subtask_index`"):
        CollectSink().open(2, 2)


def test_dead_letters_are_counted_per_stage_even_beyond_what_is_kept(tmp_path):
    sink = DeadLetterSink(max_kept=2)
    sink.add({"user_id": "u"}, KeyError("ts"), "timestamp", split_id="generator-0", offset=17)
    sink.add({"ts": "x"}, "ts is a string", "timestamp")
    sink.add(object(), "cannot store", "state")
    assert sink.counts() == {"timestamp": 2, "state": 1} and sink.total == 3
    assert len(sink.entries) == 2 and sink.entries[0].error == "KeyError: 'ts'"
    uri = sink.write_jsonl(str(tmp_path))
    lines = [json.loads(line) for line in (tmp_path / "dead_letters.jsonl").read_text().splitlines()]
    assert uri.endswith("dead_letters.jsonl")
    assert lines[0] == {"value": {"user_id": "u"}, "error": "KeyError: 'ts'", "stage": "timestamp",
                        "split_id": "generator-0", "offset": 17}


def test_a_file_source_s_dead_letters_go_to_the_dead_letter_sink_with_their_split_and_offset(tmp_path):
    (tmp_path / "a.jsonl").write_text('{"a": 1}\nnope\n')
    source = FileSource(str(tmp_path), "jsonl")
    split = source.discover_splits()[0]
    batch = source.create_reader(split).read(10)
    sink = DeadLetterSink()
    sink.add_read_errors(split.split_id, batch.dead_letters)
    assert sink.counts() == {"source": 1}
    assert (sink.entries[0].value, sink.entries[0].split_id, sink.entries[0].offset) == ("nope", "a.jsonl", 1)
