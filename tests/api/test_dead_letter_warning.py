"""A job whose records all become dead letters (a misspelled field) must not end silently through the API.

The new-user trial: ``key_by("user").window(...).sum("qyt")`` ran to its end with empty output and nothing on
stderr; only ``sluice run`` printed the dead-letter count.  ``execute``/``execute_and_collect`` now warn on the
``engine.api.environment`` logger, which Python prints to stderr when the program configured no logging.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import textwrap

from engine import StreamExecutionEnvironment, Time, TumblingEventTimeWindows, WatermarkStrategy

ROWS = [{"user": "a", "qty": 1, "ts": 1000}, {"user": "b", "qty": 2, "ts": 2000}, {"user": "a", "qty": 3, "ts": 3000}]


def _job(folder: str, field: str):
    env = StreamExecutionEnvironment.get_execution_environment()
    stream = env.read_files(folder, "jsonl").assign_timestamps_and_watermarks(
        WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner("ts")).key_by("user") \
        .window(TumblingEventTimeWindows.of(Time.seconds(10))).sum(field)
    return env, stream


def test_a_misspelled_field_warns_with_the_count_and_the_first_reason(tmp_path, caplog):
    (tmp_path / "e.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    env, stream = _job(str(tmp_path), "qyt")
    with caplog.at_level(logging.WARNING, logger="engine.api.environment"):
        assert stream.execute_and_collect() == []
    [warning] = [r for r in caplog.records if r.name == "engine.api.environment"]
    assert warning.levelno == logging.WARNING
    assert "3 records could not be processed and became dead letters" in warning.getMessage()
    assert "stage aggregate: MalformedRecordError: the record has no field 'qyt', sum needs a number" \
        in warning.getMessage()
    assert env.get_last_result().dead_letter_count == 3


def test_a_clean_job_warns_nothing_and_execute_keeps_its_result_too(tmp_path, caplog):
    (tmp_path / "e.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    env, stream = _job(str(tmp_path), "qty")
    stream.print()
    with caplog.at_level(logging.WARNING, logger="engine.api.environment"):
        result = env.execute("clean")
    assert [r for r in caplog.records if r.name == "engine.api.environment"] == []
    assert env.get_last_result() is result and result.dead_letter_count == 0


def test_a_program_that_configured_no_logging_sees_the_warning_on_stderr(tmp_path):
    (tmp_path / "e.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    program = textwrap.dedent(f"""
        from engine import StreamExecutionEnvironment, Time, TumblingEventTimeWindows, WatermarkStrategy
        env = StreamExecutionEnvironment.get_execution_environment()
        print(env.read_files({str(tmp_path)!r}, "jsonl").assign_timestamps_and_watermarks(
            WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner("ts")).key_by("user")
            .window(TumblingEventTimeWindows.of(Time.seconds(10))).sum("qyt").execute_and_collect())
    """)
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    assert "3 records could not be processed and became dead letters" in done.stderr, done.stderr
