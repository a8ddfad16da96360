"""Which consumer subtasks a record may go to over a SHUFFLE, RESCALE or CUSTOM edge (Flink's partitioners).

Both runtimes use these: the local runtime's RecordWriter (engine/runtime/local/writers.py) picks a channel
with them, the Spark runtime's Router (engine/runtime/spark/chains.py) calls the custom partitioner per record
so a bad partition index is the same dead letter there.

- RESCALE (Flink's ``RescalePartitioner`` on a POINTWISE edge): producer subtask ``i`` of ``m`` is wired to a
  contiguous range of the ``n`` consumer subtasks and deals its records round-robin over that range, starting
  at its first.  :func:`rescale_targets` computes the ranges as Flink wires pointwise edges: ``m == n`` one to
  one; ``m < n`` producer ``i`` feeds ``[ceil(i*n/m), ceil((i+1)*n/m))``; ``m > n`` consumer ``j`` reads
  producers ``[floor(j*m/n), floor((j+1)*m/n))``.  So 2 -> 4 gives {0,1},{2,3}; 4 -> 2 gives 0,1 -> 0 and
  2,3 -> 1; 2 -> 3 gives {0,1},{2}.
- SHUFFLE: a uniformly random consumer subtask per record.
- CUSTOM: ``partitioner.partition(key, num_partitions)`` (or a plain ``f(key, num_partitions)``) on the key
  the key selector gives.  An index outside ``[0, num_partitions)``, a partitioner or a key selector that
  raises makes the record a dead letter (stage ``partition_custom``) and the job goes on.
"""

from __future__ import annotations

from typing import Any, Callable


def rescale_targets(producer_index: int, producers: int, consumers: int) -> list[int]:
    """The consumer subtasks producer subtask ``producer_index`` (of ``producers``) sends to over a RESCALE edge."""
    if producers == consumers:
        return [producer_index]
    if producers < consumers:
        start = (producer_index * consumers + producers - 1) // producers
        end = ((producer_index + 1) * consumers + producers - 1) // producers
        return list(range(start, end))
    return [j for j in range(consumers)
            if j * producers // consumers <= producer_index < (j + 1) * producers // consumers]


class PartitionIndexError(ValueError):
    """A custom partitioner returned something that is not a subtask index."""


class CustomPartitioning:
    """``partition_custom(partitioner, key_selector)``: the consumer subtask of a record."""

    def __init__(self, partitioner: Callable[[Any, int], Any], key_selector: Callable[[Any], Any],
                 description: str) -> None:
        self.partitioner = partitioner
        self.key_selector = key_selector
        self.description = description

    def target(self, value: Any, num_partitions: int) -> int:
        index = self.partitioner(self.key_selector(value), num_partitions)
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < num_partitions:
            raise PartitionIndexError(
                f"partition_custom: partitioner {self.description} returned {index!r} for a record; it must return "
                f"an int in [0, {num_partitions}) (num_partitions = the parallelism of the next operator)")
        return index

    def bound(self, num_partitions: int) -> BoundCustomPartitioning:
        return BoundCustomPartitioning(self, num_partitions)


class BoundCustomPartitioning:
    """A CustomPartitioning for a known consumer parallelism, shaped like a key selector: ``self(value)`` is the
    subtask index; ``dead_letter_of`` names the stage of a record it fails on (engine/operators/base.py
    ``key_failure``), so both runtimes' keyed-edge helpers (engine/runtime/keyed_edges.py) route it."""

    def __init__(self, custom: CustomPartitioning, num_partitions: int) -> None:
        self.custom = custom
        self.num_partitions = num_partitions

    def __call__(self, value: Any) -> int:
        return self.custom.target(value, self.num_partitions)

    def dead_letter_of(self, value: Any) -> tuple[Any, str]:
        return value, "partition_custom"
