"""Keep freed memory in a Spark Python worker for the next epoch instead of handing it back to the OS.

A window task builds its operator from restored state every epoch: the columnar layout's arrays
(engine/windowing/slicing/columnar.py) are tens of megabytes each.  glibc serves allocations that big
with a fresh ``mmap`` and unmaps them on free, so every epoch pays the kernel's page faults
again on the whole grid (measured here: 4 arrays of 65536 x 128 cells, 0.21 s on fresh pages,
0.05 s on reused ones).  Raising glibc's mmap and trim thresholds in the worker process makes
big blocks come from the heap and stay there after a free, so the next epoch's arrays reuse
them.  The cost is that a worker keeps its peak footprint between tasks, which is what a
long-running job's next epoch needs anyway.

Only on glibc (Linux); elsewhere this does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_tuned: bool | None = None  # the first call's outcome


def keep_freed_memory() -> bool:
    """Tune this process's allocator once (module docstring); True when glibc took the settings."""
    global _tuned
    if _tuned is None:
        _tuned = _tune()
    return _tuned


def _tune() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False  # not glibc (musl has no mallopt): nothing to tune
    ok = mallopt(_M_MMAP_THRESHOLD, 1 << 30) == 1
    return mallopt(_M_TRIM_THRESHOLD, 1 << 31) == 1 and ok
