"""Outputs of a subtask: fan-out to chained operators and record writers onto network channels.

A :class:`RecordWriter` partitions records to the channels of one edge
(forward, round-robin, by key group, to all, random, rescaled or by a custom
partitioner: Flink's ChannelSelector, engine/graph/partitioners.py) and ships them
in buffers; a :class:`FanOutOutput` is the ``Output`` of one node in a chain and
hands each result to the chained operators that consume it and to the record
writers of the node's network edges, main output and side outputs apart.
"""

from __future__ import annotations

import random
from typing import Any, Callable

from engine.api.functions import OutputTag
from engine.elements import StreamElement, StreamRecord, Watermark, WatermarkStatus, WatermarkStatusElement
from engine.graph.partitioners import rescale_targets
from engine.graph.transformations import Partitioning
from engine.operators.base import Output, key_failure
from engine.runtime.keyed_edges import NO_KEY, key_or_dead_letter, keyable
from engine.runtime.local.channels import Channel
from engine.state.codec import encode_key
from engine.state.key_groups import key_group_for_encoded_key, operator_index_for_key_group
from engine.state.key_identity import plain_key

_KEY_CACHE_LIMIT = 1 << 18


class RecordWriter:
    def __init__(self, channels: list[Channel], partitioning: Partitioning, key_selector: Callable[[Any], Any] | None,
                 max_parallelism: int, dead_letter: Callable[[Any, BaseException, str], None], start: int = 0,
                 producers: int = 1) -> None:
        """``start`` is the producer subtask's index, ``producers`` its vertex's parallelism (for RESCALE)."""
        self.channels = channels
        self.partitioning = partitioning
        self.key_selector = key_selector
        #: SHUFFLE, RESCALE, CUSTOM: the channel of each record (None for the other partitionings)
        self._select = self._selector(partitioning, key_selector, start, producers, len(channels))
        self.max_parallelism = max_parallelism
        self.dead_letter = dead_letter
        #: a keyed edge: every record goes through the key selector, even onto a single channel
        self._keyed = partitioning is Partitioning.HASH and key_selector is not None
        self._buffers: list[list[StreamRecord]] = [[] for _ in channels]
        self._rr = start % max(1, len(channels))
        #: key -> target channel, only for keys that are their own identity (engine/state/key_identity.py
        #: ``plain_key``): Python's equality merges keys the codec (and Flink) keep apart — 1, 1.0 and True, or
        #: (1, "a") and (1.0, "a") — which land in different key groups
        self._target_cache: dict[Any, int] = {}
        #: records put on the channels (counted per buffer as it is flushed: Flink's numRecordsOut of the task)
        self.records_sent = 0

    @staticmethod
    def _selector(partitioning: Partitioning, key_selector: Any, start: int, producers: int,
                  n: int) -> Callable[[Any], int] | None:
        if partitioning is Partitioning.SHUFFLE:
            pick = random.Random().randrange  # noqa: S311 - load spreading, not security
            return lambda value: pick(n)
        if partitioning is Partitioning.RESCALE:
            targets = rescale_targets(start, producers, n)
            state = {"next": -1}  # Flink's RescalePartitioner: the first record goes to the first target

            def rescale(value: Any) -> int:
                state["next"] = (state["next"] + 1) % len(targets)
                return targets[state["next"]]
            return rescale
        if partitioning is Partitioning.CUSTOM:
            return key_selector.bound(n)
        return None

    def emit(self, record: StreamRecord) -> None:
        n = len(self.channels)
        if self._select is not None:
            target = key_or_dead_letter(self._select, record.value, self.dead_letter)
            if target is not NO_KEY:
                self._buffers[target].append(record)
            return
        if self.partitioning is Partitioning.BROADCAST:
            for buf in self._buffers:
                buf.append(record)
            return
        if n == 1:
            if not self._keyed or key_or_dead_letter(self.key_selector, record.value, self.dead_letter) is not NO_KEY:
                self._buffers[0].append(record)
        elif self.partitioning is Partitioning.HASH:
            target = self._target_of(record)
            if target is not None:
                self._buffers[target].append(record)
        else:
            self._buffers[self._rr].append(record)
            self._rr = (self._rr + 1) % n

    def emit_batch(self, records: list[StreamRecord]) -> None:
        """:meth:`emit` for each record, in order, in one pass (same channels, same dead letters)."""
        n = len(self.channels)
        if self._select is not None:
            for record in records:
                self.emit(record)
            return
        if self.partitioning is Partitioning.BROADCAST:  # every record to every consumer subtask
            for buf in self._buffers:
                buf.extend(records)
            return
        if n == 1:
            if self._keyed:
                records = keyable(records, self.key_selector, self.dead_letter)
            self._buffers[0].extend(records)
            return
        buffers = self._buffers
        if self.partitioning is not Partitioning.HASH:
            rr = self._rr
            for r in records:
                buffers[rr].append(r)
                rr = (rr + 1) % n
            self._rr = rr
            return
        key_selector = self.key_selector
        cache = self._target_cache
        for record in records:
            try:
                key = key_selector(record.value)  # type: ignore[misc]
            except Exception as exc:  # a key selector failing on a record is bad data, not a bug in the job
                key_failure(key_selector, record.value, exc, self.dead_letter)
                continue
            if plain_key(key):
                target = cache.get(key)
                if target is None:
                    target = self._compute_target(key)
                    if len(cache) < _KEY_CACHE_LIMIT:
                        cache[key] = target
            else:
                target = self._compute_target(key)
            buffers[target].append(record)

    def _target_of(self, record: StreamRecord) -> int | None:
        key = key_or_dead_letter(self.key_selector, record.value, self.dead_letter)  # type: ignore[arg-type]
        if key is NO_KEY:
            return None
        if not plain_key(key):
            return self._compute_target(key)
        cache = self._target_cache
        target = cache.get(key)
        if target is None:
            target = self._compute_target(key)
            if len(cache) < _KEY_CACHE_LIMIT:
                cache[key] = target
        return target

    def _compute_target(self, key: Any) -> int:
        kg = key_group_for_encoded_key(encode_key(key), self.max_parallelism)
        return operator_index_for_key_group(self.max_parallelism, len(self.channels), kg)

    def flush(self) -> None:
        for i, buf in enumerate(self._buffers):
            if buf:
                self.channels[i].put(buf)
                self.records_sent += len(buf)
                self._buffers[i] = []

    def broadcast(self, element: StreamElement) -> None:
        self.flush()
        for ch in self.channels:
            ch.put(element)

    def is_backpressured(self) -> bool:
        return any(ch.is_full() for ch in self.channels)


class FanOutOutput(Output):
    """The Output of one node: chained consumers get elements directly, network edges through writers."""

    def __init__(self) -> None:
        self.chained_main: list[Any] = []  # operators
        self.chained_side: dict[str, list[Any]] = {}
        self.writers_main: list[RecordWriter] = []
        self.writers_side: dict[str, list[RecordWriter]] = {}

    def all_writers(self) -> list[RecordWriter]:
        return self.writers_main + [w for ws in self.writers_side.values() for w in ws]

    def all_chained(self) -> list[Any]:
        return self.chained_main + [op for ops in self.chained_side.values() for op in ops]

    def collect(self, record: StreamRecord) -> None:
        for op in self.chained_main:
            op.process_element(record)
        for w in self.writers_main:
            w.emit(record)

    def collect_batch(self, records: list[StreamRecord]) -> None:
        for op in self.chained_main:
            op.process_batch(records)
        for w in self.writers_main:
            w.emit_batch(records)

    def collect_side(self, tag: OutputTag, record: StreamRecord) -> None:
        for op in self.chained_side.get(tag.tag_id, ()):
            op.process_element(record)
        for w in self.writers_side.get(tag.tag_id, ()):
            w.emit(record)

    def emit_watermark(self, watermark: Watermark) -> None:
        # watermarks go to every consumer, side outputs included (Flink broadcasts them on all outputs)
        for op in self.all_chained():
            op.process_watermark(watermark)
        for w in self.all_writers():
            w.broadcast(watermark)

    def emit_watermark_status(self, status: WatermarkStatus) -> None:
        for op in self.all_chained():
            op.process_watermark_status(status)
        for w in self.all_writers():
            w.broadcast(WatermarkStatusElement(status))

