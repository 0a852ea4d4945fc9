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
def _libc() -> ctypes.CDLL | None:
    """The C library (None where it cannot be loaded), for the calls that give memory back."""
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name) if name else ctypes.CDLL(None)
    except OSError:
        return None


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    trim = getattr(_libc(), "malloc_trim", None)
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


#: ``MADV_DONTNEED`` (Linux's value; the call is made only where /proc/self/smaps exists).
_MADV_DONTNEED = 4


@functools.cache
def _madvise() -> Callable[[int, int, int], int] | None:
    call = getattr(_libc(), "madvise", None)
    if call is None:
        return None
    call.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    call.restype = ctypes.c_int
    return call  # type: ignore[no-any-return]


def clean_file_mappings(smaps: str) -> list[tuple[int, int, int]]:
    """The mappings of ``smaps`` whose resident pages are all clean copies of a file.

    ``smaps`` is the text of ``/proc/<pid>/smaps`` (format: proc(5), "/proc/pid/smaps"). A mapping
    qualifies when it maps a file outside ``/dev`` (its path starts with ``/``), is not writable (no
    ``w`` in its permissions: the code and read-only data of shared libraries, read-only mappings
    of spill files), holds no private copy of a page (``Anonymous: 0 kB``: a page written before
    the mapping turned read-only, as relocations are, would be lost), is neither locked nor a
    device's memory (no ``lo``, ``io`` or ``pf`` among its ``VmFlags``) and has resident pages.

    Returns:
        (start address, length in bytes, resident bytes) per mapping, in the file's order.
    """
    found: list[tuple[int, int, int]] = []
    start = end = rss = anonymous = 0
    candidate = False
    flagged = False

    def close() -> None:
        if candidate and rss and not anonymous and not flagged:
            found.append((start, end - start, rss))

    for line in smaps.splitlines():
        first, _, rest = line.partition(" ")
        if first.endswith(":"):
            if first == "Rss:":
                rss = int(rest.split()[0]) * 1024
            elif first == "Anonymous:":
                anonymous = int(rest.split()[0]) * 1024
            elif first == "VmFlags:":
                flagged = not {"lo", "io", "pf"}.isdisjoint(rest.split())
            continue
        close()  # a mapping's header line: the one before it is complete
        candidate = False
        lo, dash, hi = first.partition("-")
        fields = rest.split(None, 4)
        if not dash or len(fields) < 5:
            continue  # no path: anonymous memory, or a line this parser does not know
        try:
            start, end = int(lo, 16), int(hi, 16)
        except ValueError:
            continue
        path = fields[4].strip()
        candidate = path.startswith("/") and not path.startswith("/dev/") and "w" not in fields[0]
        rss = anonymous = 0
        flagged = False
    close()
    return found


def release_file_pages() -> int:
    """Unmap the resident pages of this process's clean, read-only file mappings; return the bytes.

    The code of the libraries a stage no longer runs (polars' parser: ~35 MB after a CSV read)
    stays resident in the process that ran it, counted in its RSS and PSS; a forked child never
    maps those pages. ``madvise(MADV_DONTNEED)`` on a mapping of :func:`clean_file_mappings` drops
    them from this process: they stay in the kernel's page cache, and a later touch maps them again
    (a minor fault) with the same contents, read from the file.

    Returns:
        The resident bytes of the mappings dropped: 0 where ``/proc/self/smaps`` cannot be read
        (not Linux) or the C library has no ``madvise``. Raises nothing.
    """
    try:
        with open("/proc/self/smaps", encoding="ascii", errors="replace") as fh:
            text = fh.read()
    except OSError:
        return 0  # not Linux (or no /proc): nothing to read, and no madvise to call
    call = _madvise()
    if call is None:
        return 0
    dropped = 0
    for start, length, resident in clean_file_mappings(text):
        if call(start, length, _MADV_DONTNEED) == 0:
            dropped += resident
    return dropped
