"""Giving memory back to the operating system between the stages of a large ingest.

An ingest of 10^6 dispatches allocates and frees arrays of tens of MB at every stage. glibc's
allocator keeps freed heap memory for reuse instead of returning it, so the resident size of the
process grows with each stage even when the data it holds does not. :func:`release_free_memory`
drops the pages of spilled columns and asks the allocator to return what is free
(``malloc_trim``) once the process has grown enough since it last did; it changes no data, and
the trim is a no-op where the C library has no such call (macOS, musl).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import threading
from collections.abc import Callable

from .spill import release_pages

#: Growth of the resident size (bytes) since the last release from which :func:`release_free_memory`
#: releases again. A release costs ~0.3 ms (a madvise per spill mapping and a trim that gives back
#: every free page, which the next allocations fault in again), and the stages of an ingest built
#: in windows call it ~20 times per window of 2^14 dispatches, each after a few MB of temporaries:
#: releasing every time cost ~1.5 s of a 10^6-dispatch ingest (benchmarks/RESULTS.md).
RELEASE_GROWTH_BYTES = 16 << 20

_PAGE_BYTES = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_lock = threading.Lock()
_resident_after_release: int | None = None  # bytes resident right after the last release


def _new_lock_after_fork() -> None:
    # as rocroof.spill's: the forked child's lock is its own, free
    global _lock
    _lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_lock_after_fork)


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else ctypes.CDLL(None)
    except OSError:
        return None
    trim = getattr(libc, "malloc_trim", None)
    if trim is None:
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim  # type: ignore[no-any-return]


def resident_bytes() -> int | None:
    """The process's resident set size in bytes (``/proc/self/statm``), or None where there is none."""
    try:
        with open("/proc/self/statm", "rb") as fh:
            return int(fh.read().split()[1]) * _PAGE_BYTES
    except (OSError, IndexError, ValueError):
        return None


def release_free_memory(*, force: bool = False) -> bool:
    """Drop the spilled columns' pages and return the freed heap memory to the operating system.

    The pages of spilled columns are dropped (:func:`rocroof.spill.release_pages`) and the heap is
    trimmed (glibc ``malloc_trim``) when the resident size grew by :data:`RELEASE_GROWTH_BYTES` or
    more since the last release (or since its lowest point after it, when memory went back by
    itself), or with ``force``; always where the resident size is unknown.

    Returns:
        True when released, else False (too little growth).
    """
    global _resident_after_release
    now = resident_bytes()
    with _lock:
        last = _resident_after_release
        if now is not None and last is not None and now < last:
            _resident_after_release = last = now  # memory went back by itself (a large array unmapped)
    if not force and now is not None and last is not None and now - last < RELEASE_GROWTH_BYTES:
        return False
    release_pages()  # the spilled columns' pages (rocroof.spill), read again from their files when touched
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
    after = resident_bytes()
    with _lock:
        _resident_after_release = after
    return True
