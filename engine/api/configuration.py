"""PyFlink's ``Configuration`` (``pyflink.common.Configuration``): string key/value settings an environment is built
with, ``StreamExecutionEnvironment.get_execution_environment(config)`` or ``env.configure(config)``.

Values are kept as strings, as PyFlink keeps them, and read back typed (``get_integer`` ...).  The Flink keys
Sluice honours are applied to the environment (:data:`APPLIED`); any other key is kept and logged once as not
used, rather than refused, because Flink itself ignores keys it does not know and ported programs set many that
concern Flink's cluster (memory, network, jars).  ``python.fn-execution.bundle.size`` is one of those: PyFlink's
bundle is how many records cross to a Python worker at a time, which Sluice has no counterpart of (its local
runtime's ``bundle_size`` option is how many records a source reads per step, and changes when watermarks are
emitted).
"""

from __future__ import annotations

import logging
import re
from typing import Any

from engine.api.execution_mode import RuntimeExecutionMode
from engine.errors import JobDefinitionError

log = logging.getLogger(__name__)

#: the Flink keys applied to the environment, and what they set
APPLIED = {
    "parallelism.default": "env.set_parallelism",
    "pipeline.max-parallelism": "env.set_max_parallelism",
    "execution.runtime-mode": "env.set_runtime_mode (streaming, batch, automatic)",
    "pipeline.auto-watermark-interval": "env.get_config().set_auto_watermark_interval",
    "execution.checkpointing.interval": "env.enable_checkpointing",
}

_DURATION = re.compile(r"\s*(\d+)\s*(ms|milli|millis|millisecond|milliseconds|s|sec|secs|second|seconds|"
                       r"min|minute|minutes|h|hour|hours)?\s*", re.IGNORECASE)
_UNIT_MS = {"ms": 1, "milli": 1, "millis": 1, "millisecond": 1, "milliseconds": 1, "s": 1000, "sec": 1000,
            "secs": 1000, "second": 1000, "seconds": 1000, "min": 60_000, "minute": 60_000, "minutes": 60_000,
            "h": 3_600_000, "hour": 3_600_000, "hours": 3_600_000}


class Configuration:
    """String settings by key (PyFlink's ``Configuration``)."""

    def __init__(self, other: Configuration | None = None) -> None:
        if other is not None and not isinstance(other, Configuration):
            raise JobDefinitionError("other", other, "must be a Configuration to copy, or None")
        self._values: dict[str, str] = dict(other._values) if other is not None else {}

    @staticmethod
    def from_dict(values: dict[str, str]) -> Configuration:
        config = Configuration()
        for key, value in values.items():
            config.set_string(key, value)
        return config

    def set_string(self, key: str, value: str) -> Configuration:
        if not isinstance(key, str) or not key:
            raise JobDefinitionError("key", key, "must be a non-empty string")
        if not isinstance(value, str):
            raise JobDefinitionError("value", value, f"of {key!r} must be a string (set_integer, set_boolean ... "
                                     "for other types)")
        self._values[key] = value
        return self

    def get_string(self, key: str, default_value: str) -> str:
        return self._values.get(key, default_value)

    def set_integer(self, key: str, value: int) -> Configuration:
        if isinstance(value, bool) or not isinstance(value, int):
            raise JobDefinitionError("value", value, f"of {key!r} must be an int")
        return self.set_string(key, str(value))

    def get_integer(self, key: str, default_value: int) -> int:
        return int(self._values[key]) if key in self._values else default_value

    def set_boolean(self, key: str, value: bool) -> Configuration:
        if not isinstance(value, bool):
            raise JobDefinitionError("value", value, f"of {key!r} must be a bool")
        return self.set_string(key, "true" if value else "false")

    def get_boolean(self, key: str, default_value: bool) -> bool:
        return self._values[key].strip().lower() == "true" if key in self._values else default_value

    def set_float(self, key: str, value: float) -> Configuration:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise JobDefinitionError("value", value, f"of {key!r} must be a number")
        return self.set_string(key, str(float(value)))

    def get_float(self, key: str, default_value: float) -> float:
        return float(self._values[key]) if key in self._values else default_value

    def key_set(self) -> set[str]:
        return set(self._values)

    def contains_key(self, key: str) -> bool:
        return key in self._values

    def remove_config(self, key: str) -> bool:
        return self._values.pop(key, None) is not None

    def add_all(self, other: Configuration, prefix: str | None = None) -> Configuration:
        for key, value in other._values.items():
            self._values[(prefix or "") + key] = value
        return self

    def to_dict(self) -> dict[str, str]:
        return dict(self._values)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Configuration) and other._values == self._values

    def __hash__(self) -> int:
        return hash(tuple(sorted(self._values.items())))

    def __repr__(self) -> str:
        return f"Configuration({self._values!r})"


def apply_configuration(env: Any, config: Configuration) -> None:
    """Set what ``config`` says on ``env`` (:data:`APPLIED`); a bad value is refused naming its key."""
    for key, value in config.to_dict().items():
        try:
            if key == "parallelism.default":
                env.set_parallelism(int(value))
            elif key == "pipeline.max-parallelism":
                env.set_max_parallelism(int(value))
            elif key == "execution.runtime-mode":
                modes = {m.name.lower(): m for m in RuntimeExecutionMode}
                if value.strip().lower() not in modes:
                    raise ValueError(f"must be one of {sorted(modes)}")
                env.set_runtime_mode(modes[value.strip().lower()])
            elif key == "pipeline.auto-watermark-interval":
                env.get_config().set_auto_watermark_interval(_duration_ms(value))
            elif key == "execution.checkpointing.interval":
                env.enable_checkpointing(_duration_ms(value))
            else:
                log.warning("configuration key %r is not used by Sluice (it applies %s)", key,
                            ", ".join(sorted(APPLIED)))
        except (ValueError, JobDefinitionError) as exc:
            raise JobDefinitionError(key, value, str(exc) if isinstance(exc, ValueError) else exc.rule) from exc


def _duration_ms(value: str) -> int:
    """Flink's duration text (``200``, ``200 ms``, ``5 s``, ``1 min``) in ms; a bare number is ms."""
    match = _DURATION.fullmatch(value)
    if match is None:
        raise ValueError("must be a duration such as '200 ms', '5 s' or '1 min'")
    return int(match.group(1)) * _UNIT_MS[(match.group(2) or "ms").lower()]
