"""How a Sluice process logs: stdlib logging, human lines (rich on a terminal) or one JSON object per line.

``sluice run`` calls :func:`configure_logging` before the job master starts (``--log-level``,
``--log-format``; or ``SLUICE_LOG_LEVEL`` / ``SLUICE_LOG_FORMAT``).  Sluice's own loggers (``engine``,
``checkpoints``, ``plugins``) log at the chosen level; libraries that talk a lot at INFO (py4j, Spark's
Python side, Great Expectations, botocore, werkzeug, uvicorn) stay at WARNING, so a job's log is about
the job.  Events carry their figures as ``extra`` fields (``checkpoint_id``, ``duration_ms``, ...): the
JSON format writes them as keys, the human format only in the message.

Library code never configures logging; an embedding application (Airflow, a notebook) keeps its own.
"""

from __future__ import annotations

import logging
import sys
from typing import TextIO

from engine.errors import JobDefinitionError

#: the loggers of Sluice's own packages
SLUICE_LOGGERS = ("engine", "checkpoints", "plugins")
#: libraries kept at WARNING whatever the level: their INFO lines are about themselves, not the job
NOISY_LIBRARIES = ("py4j", "pyspark", "great_expectations", "botocore", "boto3", "s3transfer", "urllib3",
                   "werkzeug", "uvicorn", "uvicorn.access", "httpx", "httpcore", "asyncio", "fsspec")
FORMATS = ("human", "json")
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")

_HANDLER_NAME = "sluice"


def configure_logging(level: str = "INFO", fmt: str = "human", stream: TextIO | None = None) -> logging.Handler:
    """Send log records of level ``level`` and above from Sluice's loggers (WARNING and above from everyone
    else) to ``stream`` (default stderr) as ``fmt`` lines; calling it again replaces the handler it installed."""
    level_name = str(level).upper()
    if level_name not in LEVELS:
        raise JobDefinitionError("log_level", level, f"must be one of {', '.join(LEVELS)}")
    if fmt not in FORMATS:
        raise JobDefinitionError("log_format", fmt, f"must be one of {', '.join(FORMATS)}")
    stream = sys.stderr if stream is None else stream
    handler = _json_handler(stream) if fmt == "json" else _human_handler(stream)
    handler.set_name(_HANDLER_NAME)
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == _HANDLER_NAME]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    for name in SLUICE_LOGGERS:
        logging.getLogger(name).setLevel(level_name)
    for name in NOISY_LIBRARIES:
        logging.getLogger(name).setLevel(logging.WARNING)
    logging.captureWarnings(True)
    return handler


def _human_handler(stream: TextIO) -> logging.Handler:
    if stream.isatty():
        from rich.console import Console
        from rich.logging import RichHandler

        return RichHandler(console=Console(file=stream), show_path=False, rich_tracebacks=True,
                           log_time_format="[%X]")
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s"))
    return handler


def _json_handler(stream: TextIO) -> logging.Handler:
    from pythonjsonlogger.json import JsonFormatter

    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter(
        "{asctime}{levelname}{name}{message}", style="{", rename_fields={"asctime": "time", "levelname": "level",
                                                                         "name": "logger"},
        timestamp=False))
    return handler
