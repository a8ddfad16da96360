"""The purchase stream as files landing in a monitored folder: how the demo and the Airflow example are fed.

The platform's main feed is a folder (or an ``s3://`` prefix) that keeps receiving files; the purchases
job reads one with ``input_dir`` (engine/examples/purchases.py: ``read_files(..., monitor_interval=...)``).
:func:`purchase_files` cuts the generator's purchase stream (seed 000's example, with its out-of-order, late
and malformed events) into JSON-lines files in event-time order: file k holds, from every generator split,
that split's events ``[k * n, (k + 1) * n)``, where ``n`` is ``rows_per_file / num_splits``.

:class:`FileFeeder` lands them one at a time through the storage layer (an atomic put: a local temp file
renamed into place, or an S3 put), and waits for the job to have read each file before landing the next.
One file per epoch is what makes a monitored run repeatable: every record of file k is judged against the
watermark the files before it left (engine/operators/timestamps_watermarks.py, ``monitored=True``), however
long the job took to list and read, so two runs fed this way give the same output (the demo compares them).
A real feed does not wait; its results then depend on when files land, as in Flink.

Run ``python -m engine.examples.purchase_files FOLDER`` to feed a folder by hand (the Airflow example
deployment's input, dags/sluice_deployments.yaml), one file every ``--every`` seconds.
"""

from __future__ import annotations

import json
import time
from typing import Any, Callable, Iterator

from engine.errors import JobDefinitionError

FILE_PREFIX = "purchases-"


def purchase_files(config: Any, rows_per_file: int) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """``(file name, events)`` in landing order, from the bounded generator ``config`` describes."""
    from engine.examples.purchases import purchase_source

    if config.events_per_split is None:
        raise JobDefinitionError("events_per_split", None, "must be a number: files are cut from a bounded stream")
    if isinstance(rows_per_file, bool) or not isinstance(rows_per_file, int) or rows_per_file < config.num_splits:
        raise JobDefinitionError("rows_per_file", rows_per_file,
                                 f"must be an int of at least num_splits ({config.num_splits})")
    source = purchase_source(config)
    streams = [source.create_reader(split).read(config.events_per_split).values
               for split in source.discover_splits()]
    per_split = rows_per_file // len(streams)
    for k in range(-(-max(len(s) for s in streams) // per_split)):
        rows = [event for s in streams for event in s[k * per_split:(k + 1) * per_split]]
        if rows:
            yield f"{FILE_PREFIX}{k:05d}.jsonl", rows


def encode_jsonl(rows: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(row, separators=(",", ":")) + "\n" for row in rows).encode("utf-8")


class FileFeeder:
    """Lands files in ``folder`` (a local path, ``file:///`` or ``s3://bucket/prefix``), each atomically."""

    def __init__(self, folder: str, files: Iterator[tuple[str, list[dict[str, Any]]]],
                 storage_options: dict[str, Any] | None = None) -> None:
        from engine.io.storage import open_folder

        self.folder = folder
        self._store = open_folder(folder, storage_options)
        self._files = iter(files)
        #: files and records landed so far
        self.landed_files = 0
        self.landed_records = 0

    def land_next(self) -> bool:
        """Land the next file; False when there is none left."""
        nxt = next(self._files, None)
        if nxt is None:
            return False
        name, rows = nxt
        self._store.put_bytes(name, encode_jsonl(rows))
        self.landed_files += 1
        self.landed_records += len(rows)
        return True

    def feed(self, records_read: Callable[[], int], files: int | None = None, timeout_s: float = 300.0,
             poll_s: float = 0.1) -> int:
        """Land up to ``files`` files (all when None), each once ``records_read()`` counts every record landed
        before it; returns how many landed."""
        landed = 0
        while files is None or landed < files:
            self.wait_read(records_read, timeout_s, poll_s)
            if not self.land_next():
                break
            landed += 1
        return landed

    def wait_read(self, records_read: Callable[[], int], timeout_s: float = 300.0, poll_s: float = 0.1) -> None:
        """Wait until ``records_read()`` counts every record landed so far."""
        deadline = time.monotonic() + timeout_s
        while records_read() < self.landed_records:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the job read {records_read()} of the {self.landed_records} records landed in "
                                   f"{self.folder} within {timeout_s:.0f} s")
            time.sleep(poll_s)


def main(argv: list[str] | None = None) -> None:
    import argparse
    import dataclasses

    from engine.examples.purchases import PurchaseJobConfig

    parser = argparse.ArgumentParser(description="Land purchase files in a folder the purchases job monitors")
    parser.add_argument("folder", help="a local folder, file:///path or s3://bucket/prefix")
    parser.add_argument("--events-per-split", type=int, default=5_000)
    parser.add_argument("--rows-per-file", type=int, default=1_000)
    parser.add_argument("--every", type=float, default=5.0, help="seconds between two files")
    args = parser.parse_args(argv)
    config = dataclasses.replace(PurchaseJobConfig(), events_per_split=args.events_per_split)
    feeder = FileFeeder(args.folder, purchase_files(config, args.rows_per_file))
    while feeder.land_next():
        print(f"landed file {feeder.landed_files} ({feeder.landed_records} events) in {args.folder}", flush=True)
        time.sleep(args.every)


if __name__ == "__main__":
    main()
