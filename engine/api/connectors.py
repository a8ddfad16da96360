"""PyFlink's file source and sink names (``pyflink.datastream.connectors.file_system``), for programs that import them
from here: one ``FileSink`` (engine/io/file_sink.py), buildable the PyFlink way, and its settings
(engine/io/row_format.py, which says what is supported)."""

from __future__ import annotations

from engine.io.file_sink import FileSink
from engine.io.file_source import FileSource, FileSourceBuilder, StreamFormat
from engine.io.row_format import Encoder, OutputFileConfig, RollingPolicy, RowFormatBuilder

__all__ = ["Encoder", "FileSink", "FileSource", "FileSourceBuilder", "OutputFileConfig", "RollingPolicy",
           "RowFormatBuilder", "StreamFormat"]
