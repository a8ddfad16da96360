"""The stable key hash of engine/state/key_groups.py, vectorized over an Arrow string array.

``key_group_for_encoded_key`` hashes one key per Python call (XXH64, seed 42,
over the UTF-8 bytes, read as signed, floor-modulo max parallelism).  Checking
the key group of every row of a 10M-row state that way costs seconds of driver
CPU, and so does routing a column fold read's 50k distinct keys to their
subtasks (engine/runtime/spark/column_fold.py ``distinct_key_groups``, once per
read in the reading task).  This module runs the same XXH64 (the reference
algorithm, xxhash.com spec "XXH64") in numpy: strings are grouped by byte
length, and each group is hashed as a matrix of 8-byte lanes, all rows of one
length at once.  uint64 arithmetic in numpy wraps modulo 2**64, as the
algorithm requires.  tests/engine/state/test_key_hash.py checks it against
``xxhash``.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_P1 = np.uint64(0x9E3779B185EBCA87)
_P2 = np.uint64(0xC2B2AE3D27D4EB4F)
_P3 = np.uint64(0x165667B19E3779F9)
_P4 = np.uint64(0x85EBCA77C2B2AE63)
_P5 = np.uint64(0x27D4EB2F165667C5)
_SEED = np.uint64(42)  # engine/state/key_groups.py _HASH_SEED


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


def _round(acc: np.ndarray, lane: np.ndarray) -> np.ndarray:
    acc = acc + lane * _P2
    return _rotl(acc, 31) * _P1


def _merge_round(h: np.ndarray, v: np.ndarray) -> np.ndarray:
    h = h ^ _round(np.zeros_like(v), v)
    return h * _P1 + _P4


def _xxh64_fixed(rows: np.ndarray) -> np.ndarray:
    """XXH64 (seed 42) of every row of an ``(n, length)`` uint8 matrix, as uint64."""
    n, length = rows.shape
    rows = np.ascontiguousarray(rows)

    def lanes8(at: int) -> np.ndarray:
        return np.ascontiguousarray(rows[:, at:at + 8]).view("<u8").reshape(n)

    pos = 0
    if length >= 32:
        v1 = np.full(n, _SEED + _P1 + _P2, dtype=np.uint64)
        v2 = np.full(n, _SEED + _P2, dtype=np.uint64)
        v3 = np.full(n, _SEED, dtype=np.uint64)
        v4 = np.full(n, _SEED - _P1, dtype=np.uint64)
        while pos + 32 <= length:
            v1 = _round(v1, lanes8(pos))
            v2 = _round(v2, lanes8(pos + 8))
            v3 = _round(v3, lanes8(pos + 16))
            v4 = _round(v4, lanes8(pos + 24))
            pos += 32
        h = _rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)
        for v in (v1, v2, v3, v4):
            h = _merge_round(h, v)
    else:
        h = np.full(n, _SEED + _P5, dtype=np.uint64)
    h = h + np.uint64(length)
    while pos + 8 <= length:
        h = h ^ _round(np.zeros(n, dtype=np.uint64), lanes8(pos))
        h = _rotl(h, 27) * _P1 + _P4
        pos += 8
    if pos + 4 <= length:
        lane = np.ascontiguousarray(rows[:, pos:pos + 4]).view("<u4").reshape(n).astype(np.uint64)
        h = h ^ (lane * _P1)
        h = _rotl(h, 23) * _P2 + _P3
        pos += 4
    while pos < length:
        h = h ^ (rows[:, pos].astype(np.uint64) * _P5)
        h = _rotl(h, 11) * _P1
        pos += 1
    h = h ^ (h >> np.uint64(33))
    h = h * _P2
    h = h ^ (h >> np.uint64(29))
    h = h * _P3
    return h ^ (h >> np.uint64(32))


def hash_encoded_keys(keys: pa.Array) -> np.ndarray:
    """Signed XXH64 (seed 42) of every string of ``keys`` (0 where null): ``hash_encoded_key`` per row."""
    n = len(keys)
    out = np.zeros(n, dtype=np.uint64)
    if n == 0:
        return out.view(np.int64)
    lengths = pc.fill_null(pc.binary_length(keys), -1).to_numpy(zero_copy_only=False).astype(np.int64)
    order = np.argsort(lengths, kind="stable")
    # taken in length order, the bytes of all keys of one length are one contiguous (count, length) block
    ordered = keys.take(pa.array(order)).cast(pa.large_string())
    offsets = np.frombuffer(ordered.buffers()[1], dtype=np.int64)[ordered.offset:ordered.offset + n + 1]
    data = ordered.buffers()[2]
    data = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, dtype=np.uint8)
    sorted_lengths = lengths[order]
    bounds = np.flatnonzero(np.diff(sorted_lengths)) + 1
    with np.errstate(over="ignore"):
        for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, n]):
            length = int(sorted_lengths[lo])
            if length < 0:
                continue  # null keys
            block = data[offsets[lo]:offsets[lo] + (hi - lo) * length].reshape(hi - lo, length)
            out[order[lo:hi]] = _xxh64_fixed(block)
    return out.view(np.int64)


def key_groups_of(keys: pa.Array | pa.ChunkedArray, max_parallelism: int) -> np.ndarray:
    """``key_group_for_encoded_key(key, max_parallelism)`` of every key (-1 where null), as int64."""
    array = keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys
    groups = np.mod(hash_encoded_keys(array), np.int64(max_parallelism))  # floor mod, as Python's %
    if array.null_count:
        groups[np.asarray(array.is_null().to_numpy(zero_copy_only=False))] = -1
    return groups
