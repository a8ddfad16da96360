"""Key groups: the unit in which keyed state is partitioned, snapshotted and rescaled.

Flink hashes a key into one of ``max_parallelism`` key groups and gives each
subtask a contiguous range of them (KeyGroupRangeAssignment).  Sluice does the
same with a hash that is stable across processes and runtimes: XXH64 with seed
42 over the UTF-8 bytes of the key's canonical encoding (:func:`codec.encode_key`),
read as a signed 64-bit integer, floor-modulo ``max_parallelism``.  That is
exactly Spark SQL's ``pmod(xxhash64(encoded_key), max_parallelism)``, so the
Spark runtime can compute key groups without calling Python per row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

import xxhash

from engine.errors import JobDefinitionError
from engine.state.codec import encode_key

DEFAULT_MAX_PARALLELISM = 128
UPPER_BOUND_MAX_PARALLELISM = 1 << 15
_HASH_SEED = 42


def hash_encoded_key(encoded_key: str) -> int:
    """Signed XXH64 (seed 42) of the encoded key, identical to Spark's ``xxhash64``."""
    h = xxhash.xxh64_intdigest(encoded_key.encode("utf-8"), _HASH_SEED)
    return h - (1 << 64) if h >= (1 << 63) else h


def key_group_for_encoded_key(encoded_key: str, max_parallelism: int) -> int:
    return hash_encoded_key(encoded_key) % max_parallelism


def assign_to_key_group(key: Any, max_parallelism: int) -> int:
    """The key group of ``key`` (Flink's KeyGroupRangeAssignment.assignToKeyGroup)."""
    return key_group_for_encoded_key(encode_key(key), max_parallelism)


def operator_index_for_key_group(max_parallelism: int, parallelism: int, key_group: int) -> int:
    """Which subtask owns ``key_group`` (Flink's computeOperatorIndexForKeyGroup)."""
    return key_group * parallelism // max_parallelism


@dataclass(frozen=True, slots=True, order=True)
class KeyGroupRange:
    """The inclusive range [start_key_group, end_key_group]; empty when end < start."""

    start_key_group: int
    end_key_group: int

    @staticmethod
    def of(start: int, end: int) -> KeyGroupRange:
        return KeyGroupRange(start, end)

    @staticmethod
    def empty() -> KeyGroupRange:
        return KeyGroupRange(0, -1)

    def __len__(self) -> int:
        return max(0, self.end_key_group - self.start_key_group + 1)

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.start_key_group, self.end_key_group + 1))

    def contains(self, key_group: int) -> bool:
        return self.start_key_group <= key_group <= self.end_key_group

    def intersection(self, other: KeyGroupRange) -> KeyGroupRange:
        start = max(self.start_key_group, other.start_key_group)
        end = min(self.end_key_group, other.end_key_group)
        return KeyGroupRange(start, end) if start <= end else KeyGroupRange.empty()


def key_group_range_for_operator(max_parallelism: int, parallelism: int, operator_index: int) -> KeyGroupRange:
    """Key groups owned by subtask ``operator_index`` (Flink's computeKeyGroupRangeForOperatorIndex)."""
    check_parallelism(parallelism, max_parallelism)
    start = (operator_index * max_parallelism + parallelism - 1) // parallelism
    end = ((operator_index + 1) * max_parallelism - 1) // parallelism
    return KeyGroupRange(start, end)


def check_parallelism(parallelism: int, max_parallelism: int) -> None:
    if not isinstance(max_parallelism, int) or not 1 <= max_parallelism <= UPPER_BOUND_MAX_PARALLELISM:
        raise JobDefinitionError(
            "max_parallelism", max_parallelism, f"must be an int between 1 and {UPPER_BOUND_MAX_PARALLELISM}"
        )
    if not isinstance(parallelism, int) or not 1 <= parallelism <= max_parallelism:
        raise JobDefinitionError(
            "parallelism",
            parallelism,
            f"must be an int between 1 and max_parallelism ({max_parallelism})",
            "Raise max_parallelism with env.set_max_parallelism(n) (it fixes the number of key groups)",
        )
