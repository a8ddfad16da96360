"""``records_per_second`` in the job status (issue 18: it read 0.0 on Spark).

The Spark runtime counts records once per epoch, so two status reads a moment apart often see the same
count: a rate between consecutive reads said 0.0, then spiked.  The rate now spans a window.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from engine.api.job_client import RATE_WINDOW_S, JobClient


class _Handle:
    job_id = "rate"

    def __init__(self) -> None:
        self.ended = threading.Event()

    def wait(self):
        self.ended.wait()


@contextmanager
def _client() -> Iterator[JobClient]:
    handle = _Handle()
    try:
        yield JobClient(handle, "rate", None, 1)
    finally:
        handle.ended.set()  # the client's result thread ends with the job


def test_a_count_that_moves_once_per_epoch_reads_as_its_average_rate_not_zero() -> None:
    rates = []
    records = 0
    with _client() as client:
        for tick in range(0, 200):  # a status read every 0.1 s, an epoch of 5,000 records every 2 s
            now = 1_000.0 + tick * 0.1
            if tick and tick % 20 == 0:
                records += 5_000
            rates.append(client._records_per_second(now, records))
    settled = rates[120:]  # once the window is full
    assert min(settled) > 1_500 and max(settled) < 3_500, (min(settled), max(settled))
    assert abs(sum(settled) / len(settled) - 2_500) < 300


def test_the_window_forgets_old_samples_and_a_restart_never_reads_negative() -> None:
    with _client() as client:
        client._records_per_second(0.0, 0)
        client._records_per_second(5.0, 5_000)
        assert client._records_per_second(12.0, 12_000) == 1_000.0  # over the 12 s since the oldest sample
        # 30 s without a record: the samples older than the window go, and the rate says so
        assert client._records_per_second(12.0 + 3 * RATE_WINDOW_S, 12_000) == 0.0
        assert len(client._rate_samples) == 2
        assert client._records_per_second(13.0 + 3 * RATE_WINDOW_S, 4_000) == 0.0  # counted again from a checkpoint
