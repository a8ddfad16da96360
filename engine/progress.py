"""Progress of the CLI's long steps (validation, restore, waiting for the first checkpoint), on stderr.

On a terminal a step is a rich spinner while it runs, then one line saying how it ended and how long it
took; stdout stays clean for the JSON lines scripts read.  Off a terminal (a pipe, a CI log, an Airflow
task) nothing is shown unless asked for (``sluice run --progress``): then each step is two plain lines,
when it starts and when it ends.  ``--no-progress`` turns it off on a terminal too.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class Progress:
    """``with progress.step("validating ..."):`` — shown when ``enabled``; a no-op otherwise."""

    def __init__(self, enabled: bool | None = None, console: Any = None) -> None:
        from rich.console import Console

        self.console = console or Console(stderr=True, highlight=False)
        #: None: on a terminal only
        self.enabled = self.console.is_terminal if enabled is None else enabled

    @contextmanager
    def step(self, text: str) -> Iterator[list[str]]:
        """Yields a list: a step that ends otherwise than done appends how (printed instead of "done")."""
        outcome: list[str] = []
        if not self.enabled:
            yield outcome
            return
        started = time.monotonic()
        live = self.console.is_terminal
        if not live:
            self._line(f"{text} ...")
        try:
            if live:
                with self.console.status(text):
                    yield outcome
            else:
                yield outcome
        except BaseException as exc:
            self._line(f"{text}: failed after {time.monotonic() - started:.1f} s ({type(exc).__name__})")
            raise
        ended = outcome[0] if outcome else "done"
        self._line(f"{text}: {ended} in {time.monotonic() - started:.1f} s")

    def _line(self, text: str) -> None:
        self.console.print(text, markup=False, highlight=False, soft_wrap=True)
        self.console.file.flush()
