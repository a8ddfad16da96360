"""Validation changes process-wide pandas/GX settings only while GX runs, and puts them back."""

from __future__ import annotations

import threading

import pandas as pd
from great_expectations.execution_engine import pandas_execution_engine

from checkpoints.validation import validate_snapshot
from checkpoints.validation.runner import _gx_pandas_settings


def test_a_validation_leaves_copy_on_write_and_gx_fingerprinting_as_it_found_them(healthy_uri):
    before = (pd.get_option("mode.copy_on_write"), pandas_execution_engine.HASH_THRESHOLD)
    assert validate_snapshot(healthy_uri, build_data_docs=False, write_results=False).passed
    assert (pd.get_option("mode.copy_on_write"), pandas_execution_engine.HASH_THRESHOLD) == before


def test_overlapping_runs_restore_the_settings_after_the_last_one_ends():
    before = (pd.get_option("mode.copy_on_write"), pandas_execution_engine.HASH_THRESHOLD)
    inside, release = threading.Event(), threading.Event()

    def other_run():
        with _gx_pandas_settings():
            inside.set()
            release.wait(10)

    thread = threading.Thread(target=other_run)
    thread.start()
    assert inside.wait(10)
    with _gx_pandas_settings():
        assert pd.get_option("mode.copy_on_write") is True and pandas_execution_engine.HASH_THRESHOLD == 0
    assert pandas_execution_engine.HASH_THRESHOLD == 0  # the other run is still validating
    release.set()
    thread.join(10)
    assert (pd.get_option("mode.copy_on_write"), pandas_execution_engine.HASH_THRESHOLD) == before
