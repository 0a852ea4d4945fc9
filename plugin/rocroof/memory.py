"""Giving memory back to the operating system between the stages of a large ingest.

An ingest of 10^6 dispatches allocates and frees arrays of tens of MB at every stage. glibc's
allocator keeps freed heap memory for reuse instead of returning it, so the resident size of the
process grows with each stage even when the data it holds does not. :func:`release_free_memory`
asks the allocator to return what is free (``malloc_trim``); it changes no data and is a no-op
where the C library has no such call (macOS, musl).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from collections.abc import Callable

from .spill import release_pages


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


def release_free_memory() -> bool:
    """Return the heap memory the process has freed to the operating system (glibc ``malloc_trim``).

    Returns:
        True when the C library has the call (memory may have been returned), else False.
    """
    release_pages()  # the spilled columns' pages (rocroof.spill), read again from their files when touched
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
