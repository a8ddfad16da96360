"""PyFlink's ``Configuration``: a program that builds its environment with one ports by changing imports
(a new user's PyFlink program failed with ``ImportError: cannot import name 'Configuration'``)."""

from __future__ import annotations

import logging

import pytest

from engine import Configuration, RuntimeExecutionMode, StreamExecutionEnvironment
from engine.errors import JobDefinitionError


def test_the_flink_keys_sluice_honours_are_applied_to_the_environment() -> None:
    config = Configuration().set_integer("parallelism.default", 3).set_string("pipeline.max-parallelism", "64")
    config.set_string("execution.runtime-mode", "BATCH").set_string("pipeline.auto-watermark-interval", "50 ms")
    config.set_string("execution.checkpointing.interval", "2 s")
    env = StreamExecutionEnvironment.get_execution_environment(config)
    assert (env.get_parallelism(), env.get_max_parallelism()) == (3, 64)
    assert env._runtime_mode is RuntimeExecutionMode.BATCH
    assert env.get_config().get_auto_watermark_interval() == 50
    assert env.get_checkpoint_interval() == 2000


def test_a_key_sluice_does_not_use_is_kept_and_logged_not_refused(caplog: pytest.LogCaptureFixture) -> None:
    config = Configuration()
    config.set_string("python.fn-execution.bundle.size", "1")
    with caplog.at_level(logging.WARNING, logger="engine.api.configuration"):
        env = StreamExecutionEnvironment.get_execution_environment(config)
    assert env.get_parallelism() == StreamExecutionEnvironment().get_parallelism()
    assert any("python.fn-execution.bundle.size" in r.getMessage() and "not used" in r.getMessage()
               for r in caplog.records)
    assert config.get_integer("python.fn-execution.bundle.size", 0) == 1 and config.key_set() == \
        {"python.fn-execution.bundle.size"}


@pytest.mark.parametrize("key, value", [("parallelism.default", "two"), ("parallelism.default", "0"),
                                        ("execution.runtime-mode", "fast"),
                                        ("execution.checkpointing.interval", "soon")])
def test_a_bad_value_is_refused_naming_its_key(key: str, value: str) -> None:
    with pytest.raises(JobDefinitionError, match=f"`{key}`"):
        StreamExecutionEnvironment.get_execution_environment(Configuration().set_string(key, value))


def test_typed_setters_check_their_values() -> None:
    config = Configuration()
    assert config.set_boolean("a", True).get_boolean("a", False) is True
    assert config.set_float("b", 1.5).get_float("b", 0.0) == 1.5
    assert config.get_string("missing", "dflt") == "dflt"
    with pytest.raises(JobDefinitionError, match="`value`"):
        config.set_integer("c", "3")
    assert Configuration(config) == config and Configuration.from_dict({"x": "1"}).to_dict() == {"x": "1"}
