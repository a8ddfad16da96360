"""A dead-letter sink: input the job could not process, kept with its reason instead of failing the job.

The runtime decides what is a dead letter (a record without a usable timestamp,
a line a file source could not parse, a value state cannot store) and names the
*stage* it failed in; this sink only keeps them, counts them per stage and can
write them out as JSON lines for a human to look at.  Counts are exact even
when only the first ``max_kept`` entries are kept in memory.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from engine.errors import JobDefinitionError
from engine.io.source import MalformedInput
from engine.io.storage import check_folder_uri, open_folder


@dataclass(frozen=True, slots=True)
class DeadLetterEntry:
    """One value that could not be processed, why, and where."""

    value: Any
    error: str
    stage: str
    split_id: str | None = None
    offset: Any = None

    def to_json(self) -> dict:
        return {"value": self.value, "error": self.error, "stage": self.stage,
                "split_id": self.split_id, "offset": self.offset}


class DeadLetterSink:
    """Collects dead letters with per-stage counts; ``write_jsonl`` saves the kept ones."""

    def __init__(self, max_kept: int = 10_000) -> None:
        if isinstance(max_kept, bool) or not isinstance(max_kept, int) or max_kept < 0:
            raise JobDefinitionError("max_kept", max_kept, "must be an int >= 0")
        self.max_kept = max_kept
        self.entries: list[DeadLetterEntry] = []
        self._counts: Counter[str] = Counter()

    def add(self, value: Any, error: str | BaseException, stage: str, *,
            split_id: str | None = None, offset: Any = None) -> None:
        if isinstance(error, BaseException):
            error = f"{type(error).__name__}: {error}"
        self._counts[stage] += 1
        if len(self.entries) < self.max_kept:
            self.entries.append(DeadLetterEntry(value, str(error), stage, split_id, offset))

    def add_read_errors(self, split_id: str, dead_letters: Iterable[MalformedInput]) -> None:
        """Record what a source reader returned in ``ReadBatch.dead_letters`` (stage ``"source"``)."""
        for dead in dead_letters:
            self.add(dead.raw, dead.error, "source", split_id=split_id, offset=dead.offset)

    def counts(self) -> dict[str, int]:
        """Dead letters seen per stage (also those not kept)."""
        return dict(self._counts)

    @property
    def total(self) -> int:
        return sum(self._counts.values())

    def to_jsonl(self) -> bytes:
        """The kept entries as JSON lines; values JSON cannot hold are written as their repr."""
        return "".join(json.dumps(e.to_json(), ensure_ascii=False, default=repr, sort_keys=True) + "\n"
                       for e in self.entries).encode("utf-8")

    def write_jsonl(self, folder: str, name: str = "dead_letters.jsonl",
                    storage_options: dict[str, Any] | None = None) -> str:
        """Write the kept entries to ``folder/name`` (local or s3://); returns the object's URI."""
        store = open_folder(check_folder_uri("folder", folder), storage_options)
        store.put_bytes(name, self.to_jsonl())
        return store.key_uri(name)
