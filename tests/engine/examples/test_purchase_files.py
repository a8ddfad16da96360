"""The purchase stream cut into files for a monitored folder (engine/examples/purchase_files.py)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from engine.errors import JobDefinitionError
from engine.examples.purchase_files import FileFeeder, purchase_files
from engine.examples.purchases import PurchaseJobConfig, purchase_source
from engine.io.file_source import FileSource


def test_the_files_hold_every_generated_event_once_each_split_in_order() -> None:
    config = PurchaseJobConfig(num_splits=4, events_per_split=250)
    files = list(purchase_files(config, 100))
    assert [name for name, _ in files] == [f"purchases-{k:05d}.jsonl" for k in range(10)]
    assert all(len(rows) == 100 for _, rows in files)
    source = purchase_source(config)
    generated = [source.create_reader(s).read(250).values for s in source.discover_splits()]
    # file k holds rows [25k, 25k + 25) of every split, split by split
    assert files[3][1] == [e for split in generated for e in split[75:100]]
    assert sorted(json.dumps(e, sort_keys=True) for _, rows in files for e in rows) == \
        sorted(json.dumps(e, sort_keys=True) for split in generated for e in split)


@pytest.mark.parametrize(("field", "value"), [("events_per_split", None), ("rows_per_file", 3)])
def test_an_unbounded_stream_or_a_file_smaller_than_the_splits_is_refused_by_name(field, value) -> None:
    config = PurchaseJobConfig(num_splits=4, events_per_split=None if field == "events_per_split" else 10)
    with pytest.raises(JobDefinitionError, match=field):
        next(purchase_files(config, value if field == "rows_per_file" else 100))


def test_the_feeder_lands_a_file_only_once_the_job_read_the_ones_before(tmp_path: Path) -> None:
    files = list(purchase_files(PurchaseJobConfig(num_splits=2, events_per_split=30), 20))
    feeder = FileFeeder(str(tmp_path / "in"), iter(files))
    source = FileSource(str(tmp_path / "in"), "jsonl", continuous=True)
    read = {"records": 0}

    def job() -> None:  # reads each file that lands, as a monitored source would
        seen: set[str] = set()
        while len(seen) < len(files):
            for split in source.discover_splits():
                if split.split_id not in seen:
                    assert len(seen) == len(source.discover_splits()) - 1, "a file landed before the last was read"
                    seen.add(split.split_id)
                    read["records"] += len(source.create_reader(split).read(1000).values)

    reader = threading.Thread(target=job, name="purchase-files-reader")
    reader.start()
    assert feeder.feed(lambda: read["records"], timeout_s=30, poll_s=0.01) == 3
    feeder.wait_read(lambda: read["records"], timeout_s=30, poll_s=0.01)
    reader.join(30)
    assert (feeder.landed_files, feeder.landed_records, read["records"]) == (3, 60, 60)
    assert sorted(p.name for p in (tmp_path / "in").iterdir()) == [name for name, _ in files]  # no temp left
