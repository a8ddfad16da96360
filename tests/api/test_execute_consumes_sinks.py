"""``execute()`` runs the sinks added since the previous ``execute()``, as Flink's does (issue 19).

PyFlink's ``basic_operations.py`` prints a stream and executes, three times over; PyFlink printed each
stream once (its recorded output in tests/api/test_pyflink_port.py), because Flink's ``execute`` takes the
transformations it runs off the environment.  Sluice kept them, and re-ran every earlier print.
"""

from __future__ import annotations

import pytest

from engine import JobDefinitionError, StreamExecutionEnvironment


def test_each_execute_runs_only_the_sinks_added_since_the_last(capsys) -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    source = env.from_collection([1, 2])
    source.map(lambda x: x * 10).print()
    env.execute("first")
    assert capsys.readouterr().out.splitlines() == ["10", "20"]
    source.map(lambda x: x * 100).print()
    env.execute("second")
    assert capsys.readouterr().out.splitlines() == ["100", "200"]
    with pytest.raises(JobDefinitionError) as err:
        env.execute("nothing new")
    assert err.value.parameter == "sinks"


def test_execute_async_consumes_the_sinks_too(capsys) -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.from_collection([1]).print()
    env.execute_async("async").get_job_execution_result().result(timeout=60)
    assert capsys.readouterr().out.splitlines() == ["1"]
    with pytest.raises(JobDefinitionError):
        env.execute("nothing new")


def test_execute_and_collect_runs_and_consumes_the_sinks_added_before_it(capsys) -> None:
    """Flink's ``executeAndCollect`` executes the environment's job, its other sinks included, and takes them."""
    env = StreamExecutionEnvironment.get_execution_environment()
    source = env.from_collection([1, 2])
    source.print()
    assert source.map(lambda x: x + 1).execute_and_collect() == [2, 3]
    assert capsys.readouterr().out.splitlines() == ["1", "2"]
    assert source.map(lambda x: x + 2).execute_and_collect() == [3, 4]
    assert capsys.readouterr().out == ""  # the print ran with the first job only
