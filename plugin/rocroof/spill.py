"""Large columns of a capture kept in files instead of the process's memory ("spilled").

An ingest of 10^6 dispatches holds 8x10^6 counter values (136 MB as row, counter and value
columns) that no step between reading and writing looks at but the DRAM formulas, a chunk at a
time. A column written through a :class:`ColumnWriter` goes to an unnamed temporary file as it is
read; once complete, it is mapped read-only into memory and used as an ordinary numpy array. Its
pages are resident only while touched: :func:`release_pages` drops them from the process (they
stay in the kernel's page cache, or are read from the file again on the next touch), and
:func:`rocroof.memory.release_free_memory` calls it between the stages of an ingest; a loop over a
spilled column calls it every chunk. A spilled array is read-only: writing into it raises
``ValueError`` (never a write lost when its pages are dropped).

The files are unlinked when created (``tempfile.TemporaryFile``): nothing is left behind when the
process ends, killed or not. They go to :func:`tempfile.gettempdir` (``TMPDIR``), or to
``ROCROOF_SPILL_DIR`` when set. Columns under :data:`SPILL_MIN_BYTES` are read back into memory
instead (the file is then closed at once).
"""

from __future__ import annotations

import contextlib
import mmap
import os
import tempfile
import threading
import weakref
from collections.abc import Iterator
from typing import IO, Any

import numpy as np

from .errors import OutputError
from .text import printable


def _min_bytes(text: str | None, default: int = 1 << 20) -> int:
    """``ROCROOF_SPILL_MIN_BYTES`` as a byte count (a value that is not a whole number: the default)."""
    try:
        return max(0, int(text)) if text else default
    except ValueError:
        return default


#: A column of fewer bytes stays in memory (a small capture has nothing to gain from a mapping);
#: ``ROCROOF_SPILL_MIN_BYTES`` sets it (0 spills every column: the tests run the readers so).
SPILL_MIN_BYTES = _min_bytes(os.environ.get("ROCROOF_SPILL_MIN_BYTES"))

_maps: list[weakref.ref[mmap.mmap]] = []
#: Guards :data:`_maps`: the ingests of a local sweep run in threads of one process, each adding
#: mappings and dropping dead ones (two threads removing the same dead one raised ValueError).
_maps_lock = threading.Lock()


def _new_lock_after_fork() -> None:
    # a forked child (rocroof.ingest.forked) has only the forking thread: a lock another thread
    # held at the fork would never be released there
    global _maps_lock
    _maps_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_lock_after_fork)
#: ``madvise`` advice that drops pages (absent on Windows: the pages then stay until unmapped).
_DONTNEED: int | None = getattr(mmap, "MADV_DONTNEED", None)


@contextlib.contextmanager
def _spill_errors() -> Iterator[None]:
    """An OSError of a spill file as an OutputError naming the directory and what to do."""
    try:
        yield
    except OSError as exc:
        raise OutputError(
            f"{printable(spill_dir())}: cannot write the ingest's temporary column files there "
            f"({printable(exc.strerror or str(exc))}); set ROCROOF_SPILL_DIR (or TMPDIR) to a writable directory "
            "with space (up to 0.7 kB per dispatch)"
        ) from exc


def spill_dir() -> str:
    """Where spill files go: ``ROCROOF_SPILL_DIR`` when set, else the temporary directory."""
    return os.environ.get("ROCROOF_SPILL_DIR") or tempfile.gettempdir()


#: Bytes a :class:`ColumnWriter` keeps in memory before it opens its file (at most
#: :data:`SPILL_MIN_BYTES`): a column that stays this small (a window's rows) needs no file.
BUFFER_BYTES = 1 << 18


class ColumnWriter:
    """One column appended a chunk at a time to a temporary file; :meth:`finish` gives the array.

    The file is opened once the column outgrows :data:`BUFFER_BYTES` (the chunks until then are
    copies in memory), or at a :meth:`finish` that asks for a mapping: a small column (thousands
    of them in a windowed ingest) costs no file.

    Args:
        dtype: the column's numpy dtype (every chunk is converted to it).

    Raises:
        OutputError: the spill directory cannot take the file (:func:`spill_dir`: missing, not
            writable, or full), from the call that opens or writes it.
    """

    def __init__(self, dtype: Any) -> None:
        self.dtype = np.dtype(dtype)
        self._file: IO[bytes] | None = None
        self._parts: list[np.ndarray] | None = []  # None once finished or closed
        self._buffered = 0
        self.rows = 0

    def _to_file(self) -> IO[bytes]:
        """The open file, opened now if need be, with the chunks held in memory written to it."""
        assert self._parts is not None
        if self._file is None:
            with _spill_errors():
                self._file = tempfile.TemporaryFile(dir=spill_dir())  # noqa: SIM115 (kept open)
        with _spill_errors():
            for part in self._parts:
                self._file.write(part.data.cast("B"))
        self._parts.clear()
        self._buffered = 0
        return self._file

    def append(self, values: np.ndarray) -> None:
        """Add ``values`` (1-D) at the column's end."""
        assert self._parts is not None, "ColumnWriter.append after finish"
        chunk = np.ascontiguousarray(values, dtype=self.dtype)
        try:
            if self._file is None and self._buffered + chunk.nbytes < min(BUFFER_BYTES, SPILL_MIN_BYTES):
                self._parts.append(np.array(chunk, copy=True))  # the caller may reuse its array
                self._buffered += chunk.nbytes
            else:
                fh = self._to_file()
                with _spill_errors():
                    fh.write(chunk.data.cast("B"))
        except BaseException:
            self.close()
            raise
        self.rows += len(chunk)

    def finish(self, *, mapped: bool = False) -> np.ndarray:
        """The whole column, shape (rows,): a read-only mapping of the file, or in memory when small.

        ``mapped``: a mapping however small (an empty column is in memory all the same), e.g. the
        codes of a text column whose per-row part is to stay out of memory (:class:`rocroof.records.TextWriter`).
        """
        assert self._parts is not None, "ColumnWriter.finish called twice"
        size = self.rows * self.dtype.itemsize
        small = not size or (size < max(SPILL_MIN_BYTES, 1) and not mapped)
        if self._file is None and small:
            parts, self._parts = self._parts, None
            return np.concatenate(parts) if parts else np.zeros(0, dtype=self.dtype)
        try:
            fh = self._to_file()
        except BaseException:
            self.close()
            raise
        self._file, self._parts = None, None
        try:
            with _spill_errors():
                fh.flush()
                if small:
                    fh.seek(0)
                    data = fh.read(size)
                    return np.frombuffer(data, dtype=self.dtype).copy() if size else np.zeros(0, dtype=self.dtype)
                mapping = mmap.mmap(fh.fileno(), size, access=mmap.ACCESS_READ)
        finally:
            fh.close()  # a mapping keeps the (unlinked) file's pages reachable by itself
        with _maps_lock:
            _maps.append(weakref.ref(mapping))
        return np.frombuffer(mapping, dtype=self.dtype)

    def __enter__(self) -> ColumnWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()  # a column not finished (an error while writing) drops its file

    def close(self) -> None:
        """Drop the file without making a column (an error while reading); nothing once finished."""
        self._parts = None
        if self._file is not None:
            fh, self._file = self._file, None
            with contextlib.suppress(OSError):  # its buffered rest cannot be written (a full disk): not needed
                fh.close()


def zeros(n: int, dtype: Any) -> np.ndarray:
    """``np.zeros(n, dtype)``, read-only; from :data:`SPILL_MIN_BYTES` on, an anonymous mapping.

    No page of memory backs it: it reads as the kernel's zero page (the data of an all-NULL
    nullable column: ~8 MB per 10^6 rows that nothing reads).
    """
    dtype = np.dtype(dtype)
    size = n * dtype.itemsize
    if size < max(SPILL_MIN_BYTES, 1) or not hasattr(mmap, "MAP_ANONYMOUS"):
        out = np.zeros(n, dtype=dtype)
        out.flags.writeable = False
        return out
    # an anonymous read-only mapping: every page reads as the kernel's one zero page (no file: a
    # hole in a file on a full tmpfs would fault with SIGBUS when read)
    mapped = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, prot=mmap.PROT_READ)
    with _maps_lock:
        _maps.append(weakref.ref(mapped))
    return np.frombuffer(mapped, dtype=dtype)


def arange(start: int, stop: int) -> np.ndarray:
    """``np.arange(start, stop)`` as int64, written to a spill file a chunk at a time.

    In memory when small (:data:`SPILL_MIN_BYTES`); read-only in a file.
    """
    with ColumnWriter(np.int64) as writer:
        for lo in range(start, stop, TAKE_ROWS):
            writer.append(np.arange(lo, min(lo + TAKE_ROWS, stop), dtype=np.int64))
        return writer.finish()


def full(n: int, value: Any, dtype: Any = np.int64) -> np.ndarray:
    """``np.full(n, value, dtype)``: :func:`zeros` for 0, else a spill file written a chunk at a time.

    In memory when small (:data:`SPILL_MIN_BYTES`); read-only in a file (e.g. the all-True mask
    of a column of missing values: a byte per row that nothing writes).
    """
    dtype = np.dtype(dtype)
    if value == 0:
        return zeros(n, dtype)
    if n * dtype.itemsize < max(SPILL_MIN_BYTES, 1):
        return np.full(n, value, dtype=dtype)  # in memory: no file to write and read back
    with ColumnWriter(dtype) as writer:
        for lo in range(0, n, TAKE_ROWS):
            writer.append(np.full(min(TAKE_ROWS, n - lo), value, dtype=dtype))
        return writer.finish()


#: Rows taken at a time by :func:`take` (~8 MB of int64 values).
TAKE_ROWS = 1 << 20


def take(
    values: np.ndarray, order: np.ndarray, lookup: np.ndarray | None = None, *, mapped: bool = False
) -> np.ndarray:
    """``values[order]`` (1-D), or ``lookup[values[order]]``, written to a spill file a chunk at a time.

    A spilled column reordered or filtered without a copy of it in memory (the source's pages are
    dropped after each chunk); a small result is in memory (:data:`SPILL_MIN_BYTES`) unless ``mapped``,
    its source's pages dropped only when its rows span :data:`TAKE_ROWS` or more (a window's rows
    lie together: dropping the pages of every mapping after each of its ~80 takes cost ~0.3 s per
    10^6 dispatches; :func:`rocroof.memory.release_free_memory` drops them between stages).
    """
    dtype = values.dtype if lookup is None else lookup.dtype
    if not mapped and len(order) * dtype.itemsize < max(SPILL_MIN_BYTES, 1):
        # what the file would give back, without the file (a window's rows: thousands of takes a run)
        part = values[order]
        small: np.ndarray = np.ascontiguousarray(part if lookup is None else lookup[part], dtype=dtype)
        if len(order) and int(order.max()) - int(order.min()) >= TAKE_ROWS and is_spilled(values):
            release_pages()  # rows spread over the column touch many pages; a window's rows, few
        return small
    with ColumnWriter(dtype) as writer:
        for lo in range(0, len(order), TAKE_ROWS):
            part = values[order[lo : lo + TAKE_ROWS]]
            writer.append(part if lookup is None else lookup[part])
            release_pages()
        return writer.finish(mapped=mapped)


def spilled_copy(values: np.ndarray, *, mapped: bool = False) -> np.ndarray:
    """A copy of ``values`` (1-D) in a spill file, written a chunk at a time (in memory when small).

    ``mapped``: a mapping however small (:meth:`ColumnWriter.finish`).
    """
    if not mapped and values.nbytes < max(SPILL_MIN_BYTES, 1):  # what the file would give back: no file for it
        return np.array(values, dtype=values.dtype, copy=True)
    with ColumnWriter(values.dtype) as writer:
        for lo in range(0, len(values), TAKE_ROWS):
            writer.append(values[lo : lo + TAKE_ROWS])
        return writer.finish(mapped=mapped)


def is_spilled(values: Any) -> bool:
    """True when ``values`` (a numpy array, a view of one, or a pandas array) lies in a spill mapping."""
    data = getattr(values, "_data", values)  # a nullable pandas array's values
    data = getattr(data, "_ndarray", data)
    base = data
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    if isinstance(base, memoryview):  # np.frombuffer's base: a view of the mapping
        base = base.obj
    return isinstance(base, mmap.mmap)


def release_pages() -> int:
    """Drop the resident pages of every live spill mapping from this process; return how many mappings.

    The data stays in the files: the next touch reads it again (from the page cache when the
    kernel kept it). Mappings whose arrays are all gone are forgotten.
    """
    with _maps_lock:
        live = [mapped for mapped in (ref() for ref in _maps) if mapped is not None and not mapped.closed]
        _maps[:] = [weakref.ref(mapped) for mapped in live]
    if _DONTNEED is not None:
        for mapped in live:
            with contextlib.suppress(ValueError):  # closed by another thread since
                mapped.madvise(_DONTNEED)
    return len(live)
