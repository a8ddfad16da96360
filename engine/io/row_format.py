"""PyFlink's row-format file sink settings (``pyflink.datastream.connectors.file_system``): ``Encoder``,
``RollingPolicy``, ``OutputFileConfig``, and the builder ``FileSink.for_row_format(...)`` returns.

PyFlink's examples end in ``ds.sink_to(FileSink.for_row_format(base_path, Encoder.simple_string_encoder())
.with_output_file_config(...).with_rolling_policy(...).build())``.  That chain builds Sluice's
exactly-once :class:`engine.io.file_sink.FileSink` (the one ``write_files`` uses) in its ``text`` format, so
such a program ports by changing imports: a line per record, Java's ``toString`` of the stream's declared type
as Flink's simple string encoder writes it (``(a,3)`` for a ``Types.TUPLE``, ``+I[a, 1.5]`` for a
``Types.ROW``, measured on PyFlink 2.3.0).  A stream without a declared type is written with Python's ``str``
(Flink writes its pickled bytes' Java identity, ``[B@6392b86c``, there).

**Supported**: ``for_row_format(base_path, encoder)`` with ``Encoder.simple_string_encoder()``;
``with_output_file_config``, ``with_rolling_policy``, ``with_bucket_check_interval`` are accepted.
**Not supported** (accepted and ignored, because Sluice's sink names and rolls its part files itself so
that a commit is idempotent, see engine/io/file_sink.py): part prefix and suffix, rolling by size or
time, bucket assigners (Flink writes into ``yyyy-MM-dd--HH`` folders; Sluice's parts are ``part-*.txt``
directly under the base path).  Bulk formats (``for_bulk_format``) are not offered: use
``stream.write_files(path, "parquet")``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.errors import JobDefinitionError


class Encoder:
    """How a row-format sink turns a record into bytes (PyFlink's ``Encoder``)."""

    def __init__(self, charset: str) -> None:
        self.charset = charset

    @staticmethod
    def simple_string_encoder(charset_name: str = "UTF-8") -> Encoder:
        if not isinstance(charset_name, str) or charset_name.replace("-", "").upper() != "UTF8":
            raise JobDefinitionError("charset_name", charset_name, "must be 'UTF-8' (Sluice writes UTF-8 only)")
        return Encoder(charset_name)

    def __repr__(self) -> str:
        return f"Encoder.simple_string_encoder({self.charset!r})"


class RollingPolicy:
    """When a part file is closed (PyFlink's ``RollingPolicy``); Sluice rolls on every checkpoint, whatever is set."""

    def __init__(self, kind: str, **settings: Any) -> None:
        self.kind = kind
        self.settings = settings

    @staticmethod
    def default_rolling_policy(part_size: int = 1024 * 1024 * 128, rollover_interval: int = 60 * 1000,
                               inactivity_interval: int = 60 * 1000) -> RollingPolicy:
        return RollingPolicy("default", part_size=part_size, rollover_interval=rollover_interval,
                             inactivity_interval=inactivity_interval)

    @staticmethod
    def on_checkpoint_rolling_policy() -> RollingPolicy:
        return RollingPolicy("on_checkpoint")


class OutputFileConfig:
    """Part file prefix and suffix (PyFlink's ``OutputFileConfig``); Sluice names its parts itself."""

    def __init__(self, part_prefix: str = "part", part_suffix: str = "") -> None:
        self.part_prefix = part_prefix
        self.part_suffix = part_suffix

    @staticmethod
    def builder() -> OutputFileConfig.OutputFileConfigBuilder:
        return OutputFileConfig.OutputFileConfigBuilder()

    class OutputFileConfigBuilder:
        def __init__(self) -> None:
            self._prefix = "part"
            self._suffix = ""

        def with_part_prefix(self, prefix: str) -> OutputFileConfig.OutputFileConfigBuilder:
            self._prefix = prefix
            return self

        def with_part_suffix(self, suffix: str) -> OutputFileConfig.OutputFileConfigBuilder:
            self._suffix = suffix
            return self

        def build(self) -> OutputFileConfig:
            return OutputFileConfig(self._prefix, self._suffix)


class RowFormatBuilder:
    """Collects PyFlink's row-format settings; :meth:`build` makes the sink (see the module docstring)."""

    def __init__(self, base_path: str, make_sink: Callable[[str], Any]) -> None:
        self._base_path = base_path
        self._make_sink = make_sink

    def with_bucket_check_interval(self, interval: int) -> RowFormatBuilder:
        return self

    def with_bucket_assigner(self, bucket_assigner: Any) -> RowFormatBuilder:
        return self

    def with_rolling_policy(self, policy: RollingPolicy) -> RowFormatBuilder:
        if not isinstance(policy, RollingPolicy):
            raise JobDefinitionError("policy", policy, "must be a RollingPolicy",
                                     "Use RollingPolicy.default_rolling_policy()")
        return self

    def with_output_file_config(self, output_file_config: OutputFileConfig) -> RowFormatBuilder:
        if not isinstance(output_file_config, OutputFileConfig):
            raise JobDefinitionError("output_file_config", output_file_config, "must be an OutputFileConfig",
                                     "Use OutputFileConfig.builder().with_part_prefix('p').build()")
        return self

    def build(self) -> Any:
        return self._make_sink(self._base_path)
