"""Reading profiler text files: gzip, strict UTF-8, CSV with case-insensitive headers.

Every failure becomes a :class:`~rocroof.errors.ParseError` naming the file and the row
(1-based, the header being row 1), so that a user sees one line instead of a traceback.
"""

from __future__ import annotations

import csv
import gzip
import io
import itertools
import os
import queue
import re
import shutil
import sqlite3
import sys
import tempfile
import threading
import zlib
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping
from contextlib import contextmanager
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path
from typing import IO, Any, NamedTuple, TypeVar

import numpy as np
import pandas as pd

from .errors import ParseError

_INT_RE = r"[+-]?[0-9]+"
#: Decimal float text: ``16384.000000``, ``.5``, ``8.1097E+14`` (ASCII digits; no inf/nan, no ``_``).
_FLOAT_RE = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1
#: Files larger than this are read in chunks of CHUNK_ROWS rows.
CHUNK_ROWS = 200_000


def is_gzip(path: Path) -> bool:
    """True when ``path`` starts with the gzip magic bytes (whatever its suffix)."""
    try:
        with open(path, "rb") as fh:
            return fh.read(2) == b"\x1f\x8b"
    except OSError:
        return False


def logical_name(path: Path) -> str:
    """The file name without a trailing ``.gz`` (``x_kernel_trace.csv.gz`` -> ``x_kernel_trace.csv``)."""
    name = path.name
    return name[:-3] if name.endswith(".gz") else name


#: A gzip file may decompress to this many times its size: profiler exports compress 3-20x (nsys and
#: rocpd SQLite 3-6x, Nsight Compute and rocprofv3 CSV 4-20x, measured on the recorded captures);
#: one that grows beyond is damage or a decompression bomb (a 4 MB gzip of NUL bytes is 4 GB; deflate
#: tops out near 1000x).
MAX_GZIP_RATIO = 100
#: ... checked once this much was decompressed (a small file may compress better: harmless).
MIN_GZIP_CHECK_BYTES = 64 << 20


class _Bounded(io.RawIOBase):
    """A gzip stream that stops at :data:`MAX_GZIP_RATIO` times the compressed size."""

    def __init__(self, path: Path, inner: gzip.GzipFile, compressed_bytes: int) -> None:
        self.path = path
        self.inner = inner
        self.limit = max(MIN_GZIP_CHECK_BYTES, compressed_bytes * MAX_GZIP_RATIO)
        self.done = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        # read1: what one step decompresses, so that a stream cut short gives all it holds before
        # its EOFError (read() fills the whole buffer first, and loses the last part with the error)
        data = self.inner.read1(len(buffer))
        self.done += len(data)
        if self.done > self.limit:
            raise ParseError(
                self.path,
                f"decompresses to more than {MAX_GZIP_RATIO}x its size ({self.limit:,} bytes): the file is damaged "
                "or a decompression bomb; refusing to read on",
            )
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self.inner.close()
        super().close()


def open_binary(path: Path) -> io.BufferedReader:
    """Open ``path`` for binary reading, transparently decompressing gzip.

    A gzip file is read through a bound: decompressing beyond :data:`MAX_GZIP_RATIO` times its
    size (past :data:`MIN_GZIP_CHECK_BYTES`) raises a ParseError instead of filling memory or disk.

    Raises:
        ParseError: the file cannot be opened.
    """
    try:
        if is_gzip(path):
            inner = gzip.GzipFile(path, "rb")  # noqa: SIM115 - closed with the reader it is wrapped in
            return io.BufferedReader(_Bounded(path, inner, path.stat().st_size), 1 << 20)
        return open(path, "rb")
    except OSError as exc:
        raise ParseError(path, f"cannot open file: {exc.strerror or exc}") from exc


#: What SQLite keeps beside a database while a program writes it: the write-ahead log, the rollback journal.
SQLITE_WRITER_FILES = ("-wal", "-journal")


@contextmanager
def sqlite_file(path: Path) -> Iterator[Path]:
    """A plain SQLite file for ``path`` that reading leaves as it is: itself, or a temporary copy.

    SQLite reads uncompressed files only: a ``.gz`` is decompressed into a temporary file. A
    database with a non-empty ``-wal`` or ``-journal`` beside it (a program is writing it, or
    stopped before closing it) is copied with that file into a temporary folder and settled there
    (the log's commits taken in, a cut-short write rolled back) into one self-contained file: the
    user's files are never opened for writing, and a read-only folder is no obstacle. Otherwise
    the file itself, to be opened with :func:`sqlite_connect` (which writes nothing beside it).
    The copy is removed when the block ends.

    Raises:
        ParseError: the compressed data is damaged or truncated, or the copy cannot be made.
    """
    if not is_gzip(path):
        writers = sqlite_writer_files(path)
        if not writers:
            yield path
            return
        with tempfile.TemporaryDirectory(prefix="rocroof-") as tmp:
            plain = Path(tmp) / path.name
            try:
                shutil.copyfile(path, plain)
                for side in writers:
                    try:
                        shutil.copyfile(side, Path(tmp) / side.name)
                    except FileNotFoundError:  # its writer closed the database meanwhile
                        continue
            except OSError as exc:
                raise ParseError(path, f"cannot copy the database being written: {exc.strerror or exc}") from exc
            _settle(plain)
            yield plain
        return
    with tempfile.TemporaryDirectory(prefix="rocroof-") as tmp:
        plain = Path(tmp) / logical_name(path)
        try:
            with open_binary(path) as src, open(plain, "wb") as dst:  # bounded: no disk-filling bomb
                shutil.copyfileobj(src, dst, 1 << 20)
        except (OSError, EOFError, zlib.error) as exc:
            raise ParseError(path, f"compressed data is damaged or truncated ({exc})") from exc
        yield plain


def sqlite_writer_files(path: Path) -> list[Path]:
    """The non-empty ``-wal`` / ``-journal`` files beside ``path``, in :data:`SQLITE_WRITER_FILES` order.

    A non-empty one means a program is writing the database (or stopped before closing it); empty
    ones hold nothing to read (a read-only reader of a WAL database leaves them).
    """
    found = []
    for suffix in SQLITE_WRITER_FILES:
        side = path.with_name(path.name + suffix)
        try:
            if side.stat().st_size > 0:
                found.append(side)
        except OSError:  # none (the rule)
            continue
    return found


def _settle(copy: Path) -> None:
    """Make the temporary ``copy`` one file: its WAL checkpointed, a hot journal rolled back.

    Opened for writing (it is rocroof's own copy): a read-only connection can roll back no
    journal. A damaged copy is left as it is; its reader reports the damage.
    """
    try:
        con = sqlite3.connect(copy)
        try:
            con.execute("SELECT count(*) FROM sqlite_master").fetchone()  # rolls back a hot journal
            con.execute("PRAGMA journal_mode=DELETE").fetchone()  # checkpoints and removes the WAL
        finally:
            con.close()
    except (sqlite3.Error, UnicodeDecodeError, MemoryError):
        return


def sqlite_uri(path: Path) -> str:
    """The URI that reads the SQLite file ``path`` (from :func:`sqlite_file`) without writing anything.

    ``mode=ro`` alone still makes a ``-shm`` index and an empty ``-wal`` beside a database in WAL
    mode (and fails where the folder is read-only); ``immutable=1`` reads the file as it stands,
    without locks or side files. That is right for a finished capture; one being written is read
    through the copy :func:`sqlite_file` makes. The path is percent-encoded (a ``#`` or ``?`` in
    a file name is part of the name). ADBC's SQLite driver takes the same URI.
    """
    return f"{path.resolve().as_uri()}?mode=ro&immutable=1"


def sqlite_connect(path: Path) -> sqlite3.Connection:
    """A read-only connection to the SQLite file ``path`` (from :func:`sqlite_file`) that writes nothing.

    Raises:
        sqlite3.Error: SQLite cannot open it.
    """
    return sqlite3.connect(sqlite_uri(path), uri=True)


def unreadable(path: Path) -> ParseError | None:
    """Why ``path`` cannot be read as a file of any format, or None: empty, or a damaged gzip stream.

    For the error path of format detection (an unknown file is named with its damage, not as an
    unknown format): a gzip file is decompressed to its end.
    """
    try:
        if path.stat().st_size == 0:
            return ParseError(path, "file is empty (0 bytes; expected profiler output)")
        if is_gzip(path):
            with open_binary(path) as fh:
                while fh.read(1 << 20):
                    pass
                if fh.tell() == 0:
                    return ParseError(path, "file is empty once decompressed (expected profiler output)")
    except (OSError, EOFError, zlib.error) as exc:
        return ParseError(path, f"compressed data is damaged or truncated ({exc})")
    except ParseError as exc:
        return exc
    return None


def sqlite_tables(path: Path) -> set[str] | None:
    """The table and view names of an uncompressed SQLite file; None when it is not one or cannot be read."""
    try:
        with open(path, "rb") as fh:
            if fh.read(16) != b"SQLite format 3\x00":
                return None
        con = sqlite_connect(path)
        try:
            return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}
        finally:
            con.close()
    except (OSError, sqlite3.Error, UnicodeDecodeError, MemoryError):  # damaged: SQLITE_NOMEM is a MemoryError
        return None


def read_text(path: Path, limit_bytes: int | None = None) -> str:
    """Read a whole (small) text file as strict UTF-8.

    Args:
        path: the file; gzip-compressed files are accepted.
        limit_bytes: refuse files whose (decompressed) size exceeds this many bytes.

    Raises:
        ParseError: unreadable, truncated gzip, too large, or not UTF-8 (with the line number).
    """
    with open_binary(path) as fh:
        try:
            data = fh.read() if limit_bytes is None else fh.read(limit_bytes + 1)
        except (EOFError, gzip.BadGzipFile, zlib.error, OSError) as exc:
            raise ParseError(path, f"compressed data is damaged or truncated ({exc})") from exc
    if limit_bytes is not None and len(data) > limit_bytes:
        raise ParseError(path, f"file is larger than {limit_bytes} bytes; refusing to load it into memory")
    return decode_utf8(path, data)


def decode_utf8(path: Path, data: bytes, first_line: int = 1) -> str:
    """Decode ``data`` as UTF-8 (a BOM is dropped), naming the line of the first bad byte."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = first_line + data.count(b"\n", 0, exc.start)
        raise ParseError(
            path, f"byte 0x{data[exc.start]:02x} is not valid UTF-8 (expected a UTF-8 text file)", line
        ) from exc
    return text[1:] if text.startswith("\ufeff") else text


def _iter_lines(path: Path) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, line)`` decoding strictly, for error localisation."""
    with open_binary(path) as fh:
        for number, raw in enumerate(fh, start=1):
            yield number, decode_utf8(path, raw, number)


#: A CSV row longer than this is damage (a profiler row is a few KB; Nsight Compute's header ~50 KB):
#: the CSV parser would buffer it whole.
MAX_LINE_BYTES = 16 << 20


class _TailTracker:
    """A binary file wrapper that keeps the last bytes read (to spot a file cut mid-row) and bounds lines."""

    KEEP = 1 << 16

    def __init__(self, fh: IO[bytes], path: Path | None = None) -> None:
        self.fh = fh
        self.tail = b""
        self.path = path
        self.line = 0  # bytes of the current line so far
        self.lines = 1

    def _count(self, data: bytes) -> None:
        if self.path is not None and b"\x00" in data:  # memchr: ~2 ms per 16 MB, a tenth of the newline count
            nul = data.index(b"\x00")
            raise ParseError(
                self.path,
                "a NUL byte (expected CSV text; the file is damaged, e.g. zero-filled after a crash)",
                self.lines + data.count(b"\n", 0, nul),
            )
        # the last KEEP bytes: from this block alone when it is that long (no copy of a whole block)
        self.tail = data[-self.KEEP :] if len(data) >= self.KEEP else (self.tail + data)[-self.KEEP :]
        if self.path is not None and self.line + len(data) > MAX_LINE_BYTES:
            self._check_lines(data)  # only when a line could be too long: a scan of this block's lines
        last = data.rfind(b"\n")
        if last < 0:
            self.line += len(data)
        else:
            self.lines += data.count(b"\n")
            self.line = len(data) - last - 1

    def _check_lines(self, data: bytes) -> None:
        """Raise ParseError at the first line of ``data`` (with what came before it) beyond the bound."""
        pos, so_far, number = 0, self.line, self.lines
        while True:
            nl = data.find(b"\n", pos)
            length = so_far + ((len(data) if nl < 0 else nl) - pos)
            if length > MAX_LINE_BYTES:
                assert self.path is not None
                raise ParseError(
                    self.path, f"a line longer than {MAX_LINE_BYTES:,} bytes (damaged, or not a CSV file)", number
                )
            if nl < 0:
                return
            pos, so_far, number = nl + 1, 0, number + 1

    def read(self, size: int = -1) -> bytes:
        data = self.fh.read(size)
        if data:
            self._count(data)
        return data

    def __iter__(self) -> Iterator[bytes]:
        for line in self.fh:
            if line:
                self._count(line)
            yield line

    def last_row_is_short(self, n_columns: int) -> bool:
        """True when the file does not end with a newline and its last row has too few fields."""
        return self.last_row_damage(n_columns) is not None

    def last_row_damage(self, n_columns: int) -> str | None:
        """What is wrong with a last row that has no newline after it, in words; None when it parses whole.

        A file cut while written ends inside its last row: with fewer fields than the header, inside
        a quoted field, or right after a separator (the last field empty). A last row that has
        every field and a last value (the rocprofv3 doc samples end so) is whole as far as the text
        tells; its values are checked by the reader.
        """
        if not self.tail or self.tail.endswith((b"\n", b"\r")):
            return None
        last = self.tail.rsplit(b"\n", 1)[-1].decode("utf-8", errors="replace")
        try:
            fields = next(csv.reader([last], strict=True), [])
        except csv.Error:
            return "the last row ends inside a quoted field (file truncated?)"
        if len(fields) < n_columns:
            return f"the last row has fewer fields than the header's {n_columns} (file truncated?)"
        if len(fields) == n_columns and last.endswith(","):
            return "the last row ends with an empty field and no newline (file truncated inside its last value?)"
        return None


def read_csv_chunks(
    path: Path,
    chunk_rows: int = CHUNK_ROWS,
    *,
    numbers: Iterable[str] = (),
    skip_second_row: bool = False,
) -> Iterator[tuple[pd.DataFrame, int]]:
    """Read a CSV file as all-string columns, in chunks.

    Column names keep their spelling; use :func:`column_map` for case-insensitive access.
    Empty cells are empty strings; cells missing at the end of a short (truncated) row are
    empty strings or ``NaN`` (depending on the pandas version).

    Args:
        path: the CSV file (gzip accepted).
        chunk_rows: rows per chunk.
        numbers: header names of columns typed by the C parser instead (thousands separators
            ``,`` dropped): int64 or float64 when every cell of the chunk is a number, else
            strings as the other columns (the caller converts those itself).
        skip_second_row: leave out row 2 (Nsight Compute's units row); data starts at row 3.

    Yields:
        ``(chunk, first_row)`` where ``first_row`` is the file row number of the chunk's first
        data row (the header is row 1, so the first chunk starts at row 2).

    Raises:
        ParseError: empty file, bad UTF-8, damaged gzip, or a row with too many fields.
    """
    typed = set(numbers)
    dtype: Any = str
    if typed:  # the other columns as strings; the typed ones left out: inferred
        dtype = {name: str for name in read_header(path) if name not in typed}
    fh = open_binary(path)
    tail = _TailTracker(fh, path)
    shorts = _ShortRows(path, skip_second_row)
    try:
        reader = pd.read_csv(
            tail,
            dtype=dtype,
            thousands="," if typed else None,
            keep_default_na=False,
            na_filter=False,
            chunksize=chunk_rows,
            encoding="utf-8",
            encoding_errors="strict",
            skipinitialspace=False,
            skiprows=[1] if skip_second_row else None,
        )
        first = 3 if skip_second_row else 2
        pending: pd.DataFrame | None = None
        for chunk in reader:  # hold one chunk back: the last one is checked for truncation first
            if pending is None and first_row_is_wider(path, len(chunk.columns), skip_second_row):
                # pandas takes a first data row of one field more than the header as naming an index
                # column, and then every column would hold its right neighbour's values
                raise ParseError(
                    path,
                    f"this row has {len(chunk.columns) + 1} fields, the header {len(chunk.columns)} (expected one "
                    "field per header column; a trailing separator on every row?)",
                    first,
                )
            if pending is not None:
                shorts.check(pending, first)
                yield pending, first
                first += len(pending)
            pending = chunk
        if pending is not None:
            damage = tail.last_row_damage(len(pending.columns)) if len(pending) else None
            if damage is not None:
                raise ParseError(path, damage, tail.lines)  # the file's last line: no newline after it
            shorts.check(pending, first)
            yield pending, first
    except pd.errors.EmptyDataError as exc:
        raise ParseError(path, "file is empty (expected a CSV header row)") from exc
    except UnicodeDecodeError as exc:
        for _ in _iter_lines(path):  # raises ParseError at the bad line
            pass
        raise ParseError(path, f"not valid UTF-8 ({exc.reason})") from exc
    except pd.errors.ParserError as exc:
        match = re.search(r"line (\d+)", str(exc))
        row = int(match.group(1)) if match else None
        if row is None and (match := re.search(r"starting at row (\d+)", str(exc))):
            row = int(match.group(1)) + 1  # pandas counts file lines from 0 here
        if "EOF inside string" in str(exc):  # pandas' words name the row from 0: ours, with the line
            raise ParseError(
                path,
                "malformed CSV row: a quoted field opens here and the file ends before it closes (file truncated?)",
                row,
            ) from exc
        raise ParseError(path, f"malformed CSV row ({str(exc).strip().splitlines()[-1]})", row) from exc
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise ParseError(path, f"compressed data is damaged or truncated ({exc})") from exc
    except OSError as exc:
        raise ParseError(path, f"cannot read file: {exc}") from exc
    finally:
        fh.close()
        shorts.close()


class _ShortRows:
    """Finds data rows with fewer fields than the header, which pandas' C parser pads with empty cells.

    A short row ends in an empty cell of the last column, so only such rows are looked at: their
    fields are counted on the file's text, read a second time from the start up to the last such
    row (a file whose last column is never empty is not read again: none of the recorded captures
    has an empty last cell).
    """

    def __init__(self, path: Path, skip_second_row: bool) -> None:
        self.path = path
        self.skip_second_row = skip_second_row
        self.records: Iterator[tuple[int, int]] | None = None
        self.fh: IO[bytes] | None = None
        self.row = 2 if skip_second_row else 1  # the row of the last record read (the header is row 1)

    def check(self, chunk: pd.DataFrame, first: int) -> None:
        """Raise ParseError at the first short row of ``chunk``, whose first row is data row ``first``."""
        if not len(chunk) or not len(chunk.columns):
            return
        last = chunk.iloc[:, -1]
        empty = last.isna().to_numpy(dtype=bool)
        if last.dtype.kind not in "iufb":  # numbers are never "": no column of objects made to compare
            empty = empty | (last.astype(object) == "").to_numpy(dtype=bool)
        for pos in np.flatnonzero(empty):
            fields, line = self._fields_of(first + int(pos))
            if fields < len(chunk.columns):
                raise ParseError(
                    self.path,
                    f"this row has {fields} field(s), the header {len(chunk.columns)} (expected one field per "
                    "header column; the row was cut short or damaged)",
                    line,
                )

    def _fields_of(self, row: int) -> tuple[int, int]:
        """``(fields, physical line)`` of data row ``row`` (numbered as read_csv_chunks numbers them)."""
        if self.records is None:
            self.records = self._records()
        for fields, line in self.records:
            self.row += 1
            if self.row == row:
                return fields, line
        return 0, row  # pragma: no cover - pandas gave a row the text does not have

    def _records(self) -> Iterator[tuple[int, int]]:
        """``(fields, first line)`` of each non-blank data record, as pandas counts them."""
        self.fh = open_binary(self.path)
        rows = csv.reader(io.TextIOWrapper(self.fh, encoding="utf-8", newline=""))
        next(rows, None)  # the header
        if self.skip_second_row:
            next(rows, None)
        line = rows.line_num
        while True:
            try:
                record = next(rows, None)
            except csv.Error as exc:
                raise ParseError(self.path, f"malformed CSV row ({exc})", line + 1) from exc
            if record is None:
                return
            start, line = line + 1, rows.line_num
            if record:  # pandas skips blank lines
                yield len(record), start

    def close(self) -> None:
        if self.fh is not None:
            self.fh.close()


def ends_mid_row(path: Path) -> bool:
    """Whether a non-empty text file ends without a newline: a profiler ends every row with one.

    A CSV cut while written (a killed profiler, a full disk, a partial copy) ends inside its last
    row; when the cut falls inside the last field the row still has every field, but its value is
    short. Plain files are checked at their last byte; gzip files are decompressed to the end.
    Unreadable files give False (their reader reports the damage).
    """
    try:
        if is_gzip(path):
            last = b""
            with open_binary(path) as fh:
                while block := fh.read(1 << 20):
                    last = block[-1:]
            return last not in (b"", b"\n")
        with open(path, "rb") as fh:
            size = fh.seek(0, io.SEEK_END)
            if not size:
                return False
            fh.seek(size - 1)
            return fh.read(1) != b"\n"
    except (OSError, EOFError, zlib.error, ParseError):
        return False


class NotPlain(Exception):
    """A CSV file that :func:`read_csv_plain` cannot read exactly; read it with :func:`read_csv_chunks`."""


def read_csv_plain(
    path: Path,
    ints: Iterable[str],
    floats: Iterable[str] = (),
    strings: Iterable[str] = (),
    chunk_rows: int = CHUNK_ROWS,
    columns: Iterable[str] | None = None,
    split: Mapping[str, Callable[[Any], tuple[np.ndarray, dict[str, Any]]]] | None = None,
) -> Generator[tuple[pd.DataFrame, int], None, None]:
    """Read a CSV file whose numbers are all plain, typed by the C parser (the fast path of big files).

    Columns in ``ints`` must hold integer text in every row (ASCII digits, an optional sign,
    surrounding blanks: what :func:`parse_int` reads exactly) and come back as int64; those in
    ``floats`` finite numbers (float64); every other column comes back as a categorical of its
    cell text (a code per row, one string per distinct value: no string per cell), except those in
    ``strings`` (mostly distinct values, e.g. marker messages), which come back as text. Anything
    else (an empty or float-looking cell in an integer column, a value beyond int64, text that is
    not UTF-8, a malformed or cut-short row) raises :class:`NotPlain` while iterating, and the
    caller reads the file again with :func:`read_csv_chunks` + :func:`parse_int`, which give the
    same values for plain files and name the file and row of what is wrong in the others.

    Args:
        path: the CSV file (gzip accepted).
        ints: header names (as spelled in the file) of integer columns.
        floats: header names of number columns.
        strings: header names of text columns read as strings rather than categoricals.
        chunk_rows: rows per chunk of the pandas path (polars reads blocks of :data:`POLARS_BLOCK_BYTES`).
        columns: header names of the columns to read (the others are skipped by the C parser, not
            typed: a 2.4 GB counter file of 8x10^6 rows reads in 4.6 s instead of 11.7 s when its
            kernel names are skipped); None reads every column. The chunks hold them in file order.
        split: ``{name: fn}`` for columns of ``strings``: each chunk's column goes to ``fn`` as read
            (a polars String Series on the polars path, an object array of the cell text on the
            other), and ``fn`` returns ``(texts, columns)``: the column's texts (object, one per
            row) and more columns for the chunk (e.g. :func:`rocroof.capture.markers.split_ranges`,
            which keeps most marker messages from ever becoming Python strings).

    Yields:
        ``(chunk, first_row)``, as :func:`read_csv_chunks`.

    Raises:
        NotPlain: see above; chunks already yielded are to be discarded.
    """
    ints, floats, texts = set(ints), set(floats), set(strings)
    header = read_header(path)
    numeric = ints | floats
    if len(set(header)) != len(header) or not numeric <= set(header):
        raise NotPlain(f"{path}: repeated or missing header names")
    wanted = set(header) if columns is None else set(columns) | numeric | texts
    if not wanted <= set(header):
        raise NotPlain(f"{path}: missing header names")
    plan = _Plan(header, [name for name in header if name in wanted], ints, floats, texts, dict(split or {}))
    # a file with split columns goes to polars whatever its size: the texts split away never become
    # Python strings (on the pandas path each cell does, and the memory of those freed stays with the
    # allocator, interleaved with the kept ones)
    big = path.stat().st_size >= (SPLIT_POLARS_MIN_BYTES if split else POLARS_MIN_BYTES)
    if not is_gzip(path) and big and _polars() is not None:
        fast = _staged(_polars_chunks(path, plan))
        try:
            head = [chunk for chunk in (next(fast, None),) if chunk is not None]
        except NotPlain:
            pass  # polars refused the start of the file: the pandas C parser decides
        else:
            first = 2
            for chunk in itertools.chain(head, fast):
                yield chunk, first
                first += len(chunk)
            return
    yield from _pandas_chunks(path, plan, chunk_rows, columns is not None)


#: On polars' path of :func:`read_csv_plain`, cut the next block of records in one thread and parse
#: it in another while the caller converts the last chunk (:func:`read_ahead`, twice). Reading,
#: cutting and parsing leave the GIL free for most of their time, so the stages overlap on a
#: second core: the 2.4 GB counter file of 10^6 dispatches (three columns) read in 4.1-4.6 s
#: instead of 5.7-6.5 s. Off: one thread.
READ_AHEAD = True

T = TypeVar("T")


def read_ahead(items: Iterator[T]) -> Generator[T, None, None]:
    """``items`` as they come, each produced in a thread while the caller works on the one before.

    The thread makes the next item while one waits for the caller: up to two items more than a
    plain iteration holds (one here, one in the making). An exception raised by ``items`` is raised
    here, after the items before it, as a plain iteration would raise it. When the caller stops
    early (an error, ``close``), the thread ends after the item it is making, and ``items`` is
    closed in it; this generator returns only once the thread has ended (no thread of a read runs
    when :mod:`rocroof.ingest.forked` forks after it, holding a lock the child would inherit).
    """
    ready: queue.Queue[tuple[bool, Any]] = queue.Queue(maxsize=1)
    stop = threading.Event()

    def put(entry: tuple[bool, Any]) -> bool:
        while not stop.is_set():
            try:
                ready.put(entry, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def run() -> None:
        try:
            for item in items:
                if not put((True, item)):
                    return
            put((False, None))
        except BaseException as exc:  # noqa: BLE001 (raised again in the caller's thread)
            put((False, exc))
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()

    worker = threading.Thread(target=run, name="rocroof-read-ahead", daemon=True)
    try:
        worker.start()
        while True:
            more, item = ready.get()
            if more:
                yield item
            elif item is None:
                return
            else:
                raise item
    finally:
        stop.set()
        if worker.ident is not None:  # started
            worker.join()


def _staged(items: Iterator[T]) -> Iterator[T]:
    """``items`` read ahead in a thread (:func:`read_ahead`) when :data:`READ_AHEAD` is on, else as they are."""
    return read_ahead(items) if READ_AHEAD else items


def _polars() -> Any:
    """The polars module, or None when it is not installed or :data:`USE_POLARS` is off."""
    if not USE_POLARS:
        return None
    return import_polars()


#: The settings of polars' allocator (jemalloc) that rocroof imports it with, unless
#: ``_RJEM_MALLOC_CONF`` is set already: freed pages go back to the system at once. polars keeps
#: them 0.5-1 s by default, and a read that parses a 16 MB block every few milliseconds then holds
#: several blocks' worth: the rocprofv3 CSV read of 10^6 dispatches peaked 236-244 MB so, 215-221
#: MB with them returned at once, in the same time (9.2-11.7 s against 9.5-12.8 s on a loaded machine).
POLARS_ALLOCATOR = "dirty_decay_ms:0,muzzy_decay_ms:0"


def import_polars() -> Any:
    """The polars module (None when it is not installed), imported with :data:`POLARS_ALLOCATOR`.

    The allocator reads its settings when polars is first imported: every first import of
    polars in rocroof goes through here (an application that imported it before keeps its own).
    """
    if "polars" not in sys.modules and "_RJEM_MALLOC_CONF" not in os.environ:
        os.environ["_RJEM_MALLOC_CONF"] = POLARS_ALLOCATOR  # polars puts its defaults before it
    try:
        import polars
    except ImportError:
        return None
    return polars


#: Read big plain uncompressed CSV files with polars. Its parser read the five columns rocroof uses
#: of a 2.4 GB counter file (10^6 dispatches x 8 counters) in 1.7-1.9 s where pandas' C parser took
#: 6.6 s; it is given the file in blocks of whole records (:data:`POLARS_BLOCK_BYTES`), so that it
#: holds one block, not the file (benchmarks/RESULTS.md). Off: pandas' C parser only (the tests run both).
USE_POLARS = True
#: The smallest file read with polars, bytes. Below it pandas is as fast overall: a 10^5-dispatch
#: capture (files of 240 MB at most) ingests in 2.8-3.0 s and 335-339 MB peak either way, as does
#: the 10^6 one (19.8-19.9 s, 1,152 MB) with its 95-98 MB marker and HIP API traces on either
#: parser (2026-12-05).
POLARS_MIN_BYTES = 256 << 20
#: The smallest file with ``split`` columns read with polars (:func:`read_csv_plain`), bytes. Split
#: as polars reads it, a 99 MB marker trace of 868,422 ranges (10^6 dispatches) leaves 41 MB less
#: held after the read than through pandas, whose freed strings the allocator keeps; below this a
#: read is not worth polars' import (~7 MB resident at 10^5 dispatches).
SPLIT_POLARS_MIN_BYTES = 32 << 20


class _Plan(NamedTuple):
    """What :func:`read_csv_plain` reads of a file: its header, the columns kept and how each is typed."""

    header: list[str]
    selected: list[str]
    ints: set[str]
    floats: set[str]
    texts: set[str]
    split: Mapping[str, Callable[[Any], tuple[np.ndarray, dict[str, Any]]]] = {}  # noqa: RUF012 (never changed)


#: Bytes of CSV text handed to polars at a time (whole records): a read holds one block's text and
#: columns, not the file's. (``LazyFrame.collect_batches`` ran the whole query ahead of its consumer
#: and queued the parsed file: the 292 MB kernel trace of 10^6 dispatches held 750 MB.) Measured on
#: the 2.4 GB counter file of 10^6 dispatches (three columns read): 8 MB blocks 2.5 s, 16 MB 2.25 s
#: and 200 MB peak (the scan: 1.95 s and 486 MB), 32 MB 4.1 s: glibc maps a block of 32 MB or more
#: afresh each time (its largest dynamic mmap threshold), and the page faults cost more than the parse.
#: Since the rocprofv3 CSV read spills every column as read, the blocks are its peak: the whole read
#: of 10^6 dispatches peaked 216-220 MB in 16 MB blocks, 201-202 MB in 8 MB ones, in the same time
#: (10.6-11.7 s against 10.6-11.0 s on a loaded machine; 4 MB blocks: 200 MB, 12.5-12.9 s).
#: Since windows are built in a second process (rocroof.ingest.forked) the read is no longer the
#: ingest's peak, and 16 MB blocks read 10^6 dispatches 0.5-1.1 s faster (8.1-8.3 s against
#: 8.8-9.2 s, read-only peak 263 MB against 220 MB; the whole ingest's peak +7 MB PSS). Read
#: ahead (:data:`READ_AHEAD`), a block is held in three stages at once, and 8 MB blocks are as
#: fast: the counter file above in 4.3 s and 201 MB peak, against 4.1 s and 257 MB (4 MB: 5.2 s).
POLARS_BLOCK_BYTES = 8 << 20
#: Bytes per block of a file with ``split`` columns (:func:`read_csv_plain`; at most
#: :data:`POLARS_BLOCK_BYTES`). Splitting a block's texts makes several columns of its size: the
#: 99 MB marker trace of 10^6 dispatches peaked 276 MB read in 16 MB blocks, 187 MB in 4 MB ones,
#: and read faster (1.7 s against 2.0 s; 2 MB blocks: 174 MB, 2.0 s).
SPLIT_POLARS_BLOCK_BYTES = 4 << 20


def _record_blocks(path: Path, block_bytes: int) -> Iterator[bytes]:
    """The data records of a CSV file after its header line, as blocks of whole records.

    A block ends after a newline outside quotes: RFC 4180 quotes a field holding a newline and
    doubles a quote inside one, so a newline ends a record exactly when the quotes before it are
    even in number (counted by numpy on the block's bytes: 0.12 s/GB against 0.38 for
    ``bytes.count``). The file is read into one buffer, reused for every block: the bytes after a
    block's last record move to the buffer's front and the next read fills the rest (a fresh
    buffer per block faulted every page of the file in anew: 1.5 s of system time per 2.4 GB). A
    record longer than :data:`MAX_LINE_BYTES` raises NotPlain (the pandas path names its row).

    Raises:
        NotPlain: a header line with an open quote, or a record longer than MAX_LINE_BYTES.
    """
    with open(path, "rb") as fh:
        header = fh.readline()
        if header.count(b'"') % 2:
            raise NotPlain(f"{path}: the header line has an open quote")
        buf = bytearray(block_bytes)
        view = memoryview(buf)
        have = 0  # bytes at the buffer's front: the start of a record the last block did not end
        while True:
            filled = have
            while filled < len(buf):  # a buffered read fills all it can: one call but near the end
                got = fh.readinto(view[filled:])
                if not got:
                    break
                filled += got
            if filled < len(buf):  # the end of the file: its last record ends the block
                if filled:
                    block = bytes(view[:filled])
                    yield block if block.endswith(b"\n") else block + b"\n"
                return
            cut = buf.rfind(b"\n", 0, filled)
            if cut >= 0:
                quotes = int(np.count_nonzero(np.frombuffer(buf, dtype=np.uint8, count=cut) == 34))
                while cut >= 0 and quotes % 2:  # that newline is inside a quoted field: the one before
                    before = buf.rfind(b"\n", 0, cut)
                    quotes -= buf.count(b'"', before + 1, cut)
                    cut = before
            if cut < 0:  # no record ends in the buffer: a longer one
                if len(buf) > MAX_LINE_BYTES:
                    raise NotPlain(f"{path}: a record longer than {MAX_LINE_BYTES:,} bytes")
                view.release()
                buf.extend(bytes(len(buf)))
                view, have = memoryview(buf), filled
                continue
            yield bytes(view[: cut + 1])
            have = filled - (cut + 1)
            view[:have] = bytes(view[cut + 1 : filled])  # the unended record to the front


def _polars_chunks(path: Path, plan: _Plan) -> Iterator[pd.DataFrame]:
    """:func:`read_csv_plain`'s chunks through polars' CSV parser (same values and types).

    The file goes to polars a block of whole records at a time (:func:`_record_blocks`,
    :data:`POLARS_BLOCK_BYTES`, rather than ``chunk_rows``): the memory of a read is one block's,
    whatever the file's size. Every cell is read as text unless typed: integer columns as Int64
    (polars accepts the blanks and sign :func:`parse_int` does), number columns as Float64. A row
    with fewer fields than the header gets empty trailing cells from polars rather than an error:
    the file's last column is read too and must be non-empty in every row (a rocprofv3 CSV ends
    with a timestamp), so a short row or a blank line shows as an empty or null cell and raises
    NotPlain, as does any polars error (invalid UTF-8, an unterminated quote, a number that does
    not parse).

    Raises:
        NotPlain: see above; chunks already yielded are to be discarded.
    """
    pl = _polars()
    header, selected, ints, floats, texts, split = plan
    last = header[-1]
    schema: dict[str, Any] = {name: pl.String for name in header}
    schema.update({name: pl.Int64 for name in ints})
    schema.update({name: pl.Float64 for name in floats})
    read = selected if last in selected else [*selected, last]
    positions = [header.index(name) for name in read]
    try:
        block_bytes = min(POLARS_BLOCK_BYTES, SPLIT_POLARS_BLOCK_BYTES) if split else POLARS_BLOCK_BYTES
        for block in _staged(_record_blocks(path, block_bytes)):
            batch = pl.read_csv(
                block,
                has_header=False,
                schema=schema,
                columns=positions,  # by position: names select nothing in a file read without its header
                empty_string_is_null=False,
                encoding="utf8",
                raise_if_empty=False,
            )
            del block
            if not len(batch):
                continue
            if batch[last].null_count() or (
                batch[last].dtype == pl.String and bool((batch[last].str.len_bytes() == 0).any())
            ):
                raise NotPlain(f"{path}: a row with fewer fields than the header, or a blank line")
            if last not in selected and bool(batch[last].str.contains("\x00", literal=True).any()):
                raise NotPlain(f"{path}: a NUL byte in column {last!r}")  # read for its check only: see below
            out: dict[str, Any] = {}
            for name in selected:
                col = batch[name]
                if name in ints or name in floats:
                    if col.null_count():
                        raise NotPlain(f"{path}: column {name!r} has an empty cell")
                    values = col.to_numpy(writable=True)
                    if name in floats and not bool(np.isfinite(values).all()):
                        raise NotPlain(f"{path}: column {name!r} is not all finite numbers")
                    out[name] = values
                elif name in split or name in texts:
                    if bool(col.str.contains("\x00", literal=True).any()):
                        raise NotPlain(f"{path}: a NUL byte in column {name!r}")  # the pandas path names its line
                    if name in split:
                        out.update(_split_column(name, split[name], col))
                    else:
                        out[name] = np.array(col.to_list(), dtype=object)
                else:
                    distinct = col.unique(maintain_order=True)
                    if bool(distinct.str.contains("\x00", literal=True).any()):
                        raise NotPlain(f"{path}: a NUL byte in column {name!r}")
                    codes = col.cast(pl.Enum(distinct)).to_physical().to_numpy().astype(np.int32)
                    out[name] = pd.Categorical.from_codes(codes, categories=pd.Index(distinct.to_list(), dtype=object))
            del batch
            yield pd.DataFrame(out, copy=False)
    except NotPlain:
        raise
    except Exception as exc:  # polars' ComputeError, ShapeError... and OSError: the pandas path decides
        raise NotPlain(f"{path}: {exc}") from exc


def _pandas_chunks(path: Path, plan: _Plan, chunk_rows: int, some_columns: bool) -> Iterator[tuple[pd.DataFrame, int]]:
    """:func:`read_csv_plain`'s chunks through pandas' C parser (any plain file, gzip included)."""
    header, selected, ints, floats, texts, split = plan
    numeric = ints | floats
    # the file's last column is read too, as on the polars path: a row cut short has it empty
    last = header[-1]
    read = selected if last in selected else [*selected, last]
    dtypes: dict[str, Any] = {name: "category" for name in read if name not in numeric}
    dtypes.update({name: object for name in texts if name in dtypes})
    fh = open_binary(path)
    tail = _TailTracker(fh, path)
    try:
        reader = pd.read_csv(
            tail,
            dtype=dtypes,
            usecols=read if some_columns else None,
            na_filter=False,
            chunksize=chunk_rows,
            encoding="utf-8",
            encoding_errors="strict",
        )
        first = 2
        pending: pd.DataFrame | None = None
        for chunk in reader:  # hold one chunk back: the last one is checked for truncation first
            if list(chunk.columns) != (read if some_columns else selected) or (
                pending is None and first_row_is_wider(path, len(header))
            ):
                raise NotPlain(f"{path}: columns {list(chunk.columns)} differ from the header")
            ends = chunk[last]
            if ends.dtype.kind not in "iuf" and bool((ends.astype(object) == "").any()):
                raise NotPlain(f"{path}: a row with fewer fields than the header, or an empty last cell")
            if last not in selected:
                chunk = chunk.drop(columns=last)
            for name in ints:
                if chunk[name].dtype.kind != "i":
                    raise NotPlain(f"{path}: column {name!r} is not all plain integers")
            for name in floats:
                col = chunk[name]
                if col.dtype.kind not in "if" or not bool(np.isfinite(col.to_numpy(dtype=np.float64)).all()):
                    raise NotPlain(f"{path}: column {name!r} is not all finite numbers")
            if pending is not None:
                yield _split_chunk(pending, split), first
                first += len(pending)
            pending = chunk
        if pending is not None:
            if len(pending) and tail.last_row_is_short(len(header)):
                raise NotPlain(f"{path}: the last row is cut short")
            yield _split_chunk(pending, split), first
    except NotPlain:
        raise
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, ValueError, OverflowError) as exc:
        raise NotPlain(f"{path}: {exc}") from exc
    except (EOFError, gzip.BadGzipFile, zlib.error, OSError) as exc:
        raise NotPlain(f"{path}: {exc}") from exc
    finally:
        fh.close()


def _split_chunk(
    chunk: pd.DataFrame, split: Mapping[str, Callable[[Any], tuple[np.ndarray, dict[str, Any]]]]
) -> pd.DataFrame:
    """``chunk`` with each ``split`` column replaced by what its function returns (see :func:`read_csv_plain`)."""
    for name, fn in split.items():
        if name in chunk.columns:
            for column, values in _split_column(name, fn, chunk[name].to_numpy(dtype=object), chunk.index).items():
                chunk[column] = values
    return chunk


def _split_column(
    name: str, fn: Callable[[Any], tuple[np.ndarray, dict[str, Any]]], values: Any, index: pd.Index | None = None
) -> dict[str, pd.Series]:
    """The chunk columns that ``fn`` makes of column ``name``'s ``values``: ``name`` itself and its extra ones.

    Not copied; an object array stays object (pandas would infer text).
    """
    texts, more = fn(values)
    out = {}
    for column, array in {name: texts, **more}.items():
        dtype = object if isinstance(array, np.ndarray) and array.dtype.kind == "O" else None
        out[column] = pd.Series(array, dtype=dtype, index=index, copy=False)
    return out


def categorical_text(column: pd.Series) -> np.ndarray:
    """A column of cell text of :func:`read_csv_plain` as :func:`parse_str` gives it: None for empty cells.

    For a categorical, one lookup per distinct value: the strings are shared, not copied per row.
    """
    if not isinstance(column.dtype, pd.CategoricalDtype):
        texts: np.ndarray = parse_str(column).to_numpy(dtype=object)
        return texts
    cats = [None if c == "" else str(c) for c in column.cat.categories]
    table = np.array([*cats, None], dtype=object)
    by_code: np.ndarray = table[column.cat.codes.to_numpy()]
    return by_code


def read_csv(path: Path) -> pd.DataFrame:
    """Read a whole CSV file as strings (see :func:`read_csv_chunks`); for small files."""
    chunks = [c for c, _ in read_csv_chunks(path, chunk_rows=1_000_000)]
    if not chunks:
        header = read_header(path)
        return pd.DataFrame({name: pd.Series(dtype=object) for name in header})
    return chunks[0] if len(chunks) == 1 else pd.concat(chunks, ignore_index=True)


def first_row_is_wider(path: Path, columns: int, skip_second_row: bool = False) -> bool:
    """True when the first data row of a CSV file has exactly one field more than its ``columns`` header names.

    pandas reads such a row as an index column plus data, and every row after it the same way
    (each column then holds its right neighbour's values) without a word, and makes an index of
    0, 1, 2... (Nsight Compute's ``ID``) indistinguishable from its own: the row is counted here.
    False when the file cannot be read this way (the parse that follows reports it).
    """
    try:
        with open_binary(path) as fh:
            rows = csv.reader(io.TextIOWrapper(fh, encoding="utf-8", newline=""))
            next(rows)
            if skip_second_row:
                next(rows)
            return len(next(rows)) == columns + 1
    except (StopIteration, csv.Error, UnicodeDecodeError, EOFError, gzip.BadGzipFile, zlib.error, OSError):
        return False


def read_header(path: Path) -> list[str]:
    """The header row of a CSV file.

    Raises:
        ParseError: the file is empty, not UTF-8, or its first row is not CSV.
    """
    with open_binary(path) as fh:
        try:
            raw = fh.readline()
        except (EOFError, gzip.BadGzipFile, zlib.error, OSError) as exc:
            raise ParseError(path, f"compressed data is damaged or truncated ({exc})") from exc
    line = decode_utf8(path, raw)
    if not line.strip():
        raise ParseError(path, "file is empty (expected a CSV header row)", 1)
    try:
        return next(csv.reader(io.StringIO(line)))
    except csv.Error as exc:  # e.g. a stray carriage return inside the header
        raise ParseError(path, f"the header row is not CSV ({exc})", 1) from exc


def column_map(columns: Iterable[str]) -> dict[str, str]:
    """Map lower-cased column names to their spelling in the file."""
    return {str(c).strip().lower(): str(c) for c in columns}


def pick(cols: dict[str, str], *aliases: str) -> str | None:
    """The file's spelling of the first alias present (case-insensitive), else None."""
    for alias in aliases:
        hit = cols.get(alias.lower())
        if hit is not None:
            return hit
    return None


def require(path: Path, cols: dict[str, str], what: str, *aliases: str) -> str:
    """Like :func:`pick`, but raise when none of the aliases is present.

    Raises:
        ParseError: naming the file, row 1 (the header) and the expected column.
    """
    hit = pick(cols, *aliases)
    if hit is None:
        raise ParseError(path, f"missing column {aliases[0]!r} ({what}); the header is row 1", 1)
    return hit


def _bad_row(path: Path, series: pd.Series, bad: pd.Series, first_row: int, column: str, expected: str) -> None:
    """Raise a ParseError for the first True entry of ``bad``."""
    if bool(bad.any()):
        pos = int(np.flatnonzero(bad.to_numpy())[0])
        value = series.iloc[pos]
        # pd.isna, not ``== ""`` alone: a nullable string column holds pd.NA, whose truth value raises
        shown = "an empty cell" if pd.isna(value) or str(value).strip() == "" else repr(str(value)[:40])
        raise ParseError(path, f"column {column!r} has {shown}; expected {expected}", first_row + pos)


def parse_int(
    path: Path,
    series: pd.Series,
    first_row: int,
    column: str,
    *,
    required: bool = False,
    allow_float_text: bool = True,
) -> tuple[pd.Series, pd.Series]:
    """Parse a string column into exact nullable 64-bit integers.

    Plain integer text is parsed exactly (no float round trip, so 17-digit timestamps keep
    every digit). Float text (``16384.000000``, ``8.1097E+14``) is accepted when
    ``allow_float_text`` and converted without a float round trip; a value is *exact* only if
    its text carries every integer digit and no fraction (``1.5`` is rounded, half to even).

    Args:
        path: the file, for error messages.
        series: string cells (``""`` or NaN means missing).
        first_row: file row number of ``series.iloc[0]``.
        column: the column name, for error messages.
        required: raise on a missing cell instead of returning ``<NA>``.
        allow_float_text: accept float text; when False, ``16384.000000`` is an error too.

    Returns:
        ``(values, exact)``: an ``Int64`` series and a bool series, False where the text was
        rounded (e.g. ``8.1097E+14`` stands for any value in a 1e10-wide interval).

    Raises:
        ParseError: a cell that is not a number, a missing required cell, or a value outside
            the signed 64-bit range.
    """
    s = series.reset_index(drop=True)
    runs = _runs(s)
    if runs is not None:
        # parse each run of equal cells once; a bad cell is always the first of its run, so on an
        # error the whole column is parsed again below to name its first bad row
        heads, run_of_row = runs
        try:
            values, exact = _parse_int(
                path, s.iloc[heads], first_row, column, required=required, allow_float_text=allow_float_text
            )
        except ParseError:
            pass
        else:
            return (
                values.iloc[run_of_row].reset_index(drop=True),
                exact.iloc[run_of_row].reset_index(drop=True),
            )
    return _parse_int(path, s, first_row, column, required=required, allow_float_text=allow_float_text)


def _runs(s: pd.Series) -> tuple[np.ndarray, np.ndarray] | None:
    """``(first position of each run, run number of each row)`` for runs of equal consecutive cells.

    None when compressing does not pay (fewer than two rows per run on average). A NaN cell never
    equals its neighbour, so it is a run of its own; ``pd.NA`` cannot be compared: None.
    """
    n = len(s)
    if n < 64:
        return None
    cells = s.to_numpy(dtype=object)
    try:
        change = np.empty(n, dtype=bool)
        change[0] = True
        np.not_equal(cells[1:], cells[:-1], out=change[1:])
    except (TypeError, ValueError):
        return None
    heads = np.flatnonzero(change)
    if 2 * len(heads) > n:
        return None
    return heads, np.cumsum(change) - 1


def _parse_int(
    path: Path, series: pd.Series, first_row: int, column: str, *, required: bool, allow_float_text: bool
) -> tuple[pd.Series, pd.Series]:
    s = series.reset_index(drop=True)
    fast = _fast_int(s)
    if fast is not None:
        return fast, pd.Series(np.ones(len(fast), dtype=bool))
    text = s.astype(object).where(s.notna(), "").astype(str).str.strip()
    if allow_float_text:
        # "16384.000000" is an integer spelled as a float: keep every digit of the whole part
        text = text.str.replace(r"^([+-]?[0-9]+)\.0*$", r"\1", regex=True)
    empty = text == ""
    if required:
        _bad_row(path, s, empty, first_row, column, "an integer")
    is_int = text.str.fullmatch(_INT_RE)
    out = pd.Series(pd.array([pd.NA] * len(text), dtype="Int64"))
    exact = pd.Series(np.ones(len(text), dtype=bool))
    if bool(is_int.any()):
        ints = text[is_int]
        try:
            # more digits than any int64 has is too big; int() also refuses text over 4300 digits
            as_py = [int(v) if len(v) <= 24 else _INT64_MAX + 1 for v in ints]
        except ValueError:  # pragma: no cover - regex guarantees digits
            as_py = []
        too_big = pd.Series([not _INT64_MIN <= v <= _INT64_MAX for v in as_py], index=ints.index, dtype=bool)
        if bool(too_big.any()):
            full = pd.Series(False, index=text.index)
            full[too_big[too_big].index] = True
            _bad_row(path, s, full, first_row, column, "an integer that fits in 64 bits")
        out[is_int] = pd.array(as_py, dtype="Int64")
    rest = ~is_int & ~empty
    if bool(rest.any()):
        bad = pd.Series(False, index=text.index)
        bad[rest] = ~text[rest].map(lambda t: _FLOAT_RE.fullmatch(t) is not None).astype(bool)
        if not allow_float_text:
            bad = rest
        _bad_row(path, s, bad, first_row, column, "an integer")
        # decimal arithmetic, not float64: a float round trip would lose digits above 2**53
        parsed = [_float_text_int(t) for t in text[rest]]
        big = pd.Series([v is None for v, _ in parsed], index=text[rest].index, dtype=bool)
        if bool(big.any()):
            full = pd.Series(False, index=text.index)
            full[big[big].index] = True
            _bad_row(path, s, full, first_row, column, "an integer that fits in 64 bits")
        out[rest] = pd.array([v for v, _ in parsed], dtype="Int64")
        exact[rest] = [e for _, e in parsed]
    return out, exact


def _fast_int(s: pd.Series) -> pd.Series | None:
    """Vectorised path for a column of plain integers (no empty cells); None when it does not apply.

    pandas' C parser returns an integer dtype only when every cell is integer text, so the
    values are exact; anything else (empty cells, float text, garbage, values above int64)
    falls back to the cell-by-cell path, which also locates errors.
    """
    if not len(s):
        return None
    ascii_ints = _ascii_ints(s)
    if ascii_ints is not None:
        return pd.Series(pd.array(ascii_ints, dtype="Int64"))
    try:
        values = pd.to_numeric(s, errors="raise")
    except (ValueError, TypeError, OverflowError):
        return None
    kind = getattr(values.dtype, "kind", "")
    if kind != "i" or bool(values.isna().any()):  # floats, uint64 (above int64), missing cells: slow path
        return None
    return values.astype("Int64").reset_index(drop=True)


def _ascii_ints(s: pd.Series) -> np.ndarray | None:
    """int64 values of a column of ASCII integer text (surrounding white space allowed), else None.

    numpy's bytes -> int64 cast parses like Python's ``int``: it takes ``1_000`` and ignores
    trailing NUL bytes, which are not integers here, so cells holding ``_`` or NUL are left to
    the other paths, like missing cells, float text and values outside int64.
    """
    cells = s.to_numpy(dtype=object)
    try:
        joined = "".join(cells)
    except TypeError:  # a missing cell (NaN, None, pd.NA) or a non-string value
        return None
    if not joined.isascii() or "_" in joined or "\x00" in joined:
        return None
    if max(map(len, cells)) > 64:  # the cast allocates rows x the longest cell; an int64 needs 20 characters
        return None
    try:
        values: np.ndarray = cells.astype("S").astype(np.int64)
    except (ValueError, OverflowError, TypeError):
        return None
    return values


def _float_text_int(text: str) -> tuple[int | None, bool]:
    """The integer that float text stands for (half to even), and whether the text is exact.

    Exact means the text spells every integer digit and no fraction: ``16384.000000`` and
    ``1.6384E+04`` are exact; ``8.1097E+14`` (any value in a 1e10-wide interval) and ``1.5``
    are not.

    Returns:
        ``(value, exact)``; value None when it is outside the signed 64-bit range.
    """
    number = Decimal(text)
    if not Decimal(_INT64_MIN) <= number <= Decimal(_INT64_MAX):
        return None, False
    value = int(number.to_integral_value(rounding=ROUND_HALF_EVEN))
    exponent = number.as_tuple().exponent
    exact = isinstance(exponent, int) and exponent <= 0 and number == value
    return value, exact


def parse_float(path: Path, series: pd.Series, first_row: int, column: str, *, required: bool = False) -> pd.Series:
    """Parse a string column into float64 (NaN for missing cells).

    Raises:
        ParseError: a cell that is not a finite number, or a missing required cell.
    """
    s = series.reset_index(drop=True)
    runs = _runs(s)
    if runs is not None:  # each run of equal cells once, as in parse_int
        heads, run_of_row = runs
        try:
            values = _parse_float(path, s.iloc[heads], first_row, column, required=required)
        except ParseError:
            pass
        else:
            return values.iloc[run_of_row].reset_index(drop=True)
    return _parse_float(path, s, first_row, column, required=required)


def _parse_float(path: Path, series: pd.Series, first_row: int, column: str, *, required: bool) -> pd.Series:
    s = series.reset_index(drop=True)
    try:  # vectorised path: every cell is a finite number
        fast = pd.to_numeric(s, errors="raise")
        if getattr(fast.dtype, "kind", "") in "iuf":
            fast = fast.astype("float64")
            if bool(np.isfinite(fast.to_numpy(dtype="float64", na_value=np.nan)).all()):
                return fast
    except (ValueError, TypeError, OverflowError):
        pass
    text = s.astype(object).where(s.notna(), "").astype(str).str.strip()
    empty = text == ""
    if required:
        _bad_row(path, s, empty, first_row, column, "a number")
    values = pd.to_numeric(text.where(~empty, None), errors="coerce").astype("float64")
    bad = values.isna() & ~empty
    bad |= ~np.isfinite(values.fillna(0.0))
    _bad_row(path, s, bad, first_row, column, "a finite number")
    return values


#: Timestamps are ns on a 64-bit clock: one beyond 2**62 ns (146 years) is damage, not a time.
TIME_MAX_NS = 2**62


def check_times(path: Path, values: pd.Series, first_row: int, column: str) -> None:
    """Refuse timestamps no profiler clock gives: negative, or beyond :data:`TIME_MAX_NS`.

    Missing values pass (they are unknown, handled by the caller).

    Args:
        path: the file, for the message.
        values: integer times (ns) of consecutive rows, nullable.
        first_row: the file row of ``values.iloc[0]``.
        column: the column name, for the message.

    Raises:
        ParseError: naming the first bad value's row.
    """
    v = pd.Series(values).astype("Int64")
    bad = ((v < 0) | (v >= TIME_MAX_NS)).fillna(False).to_numpy(dtype=bool)
    if bad.any():
        pos = int(np.flatnonzero(bad)[0])
        raise ParseError(
            path, f"column {column!r} has {v.iloc[pos]}; expected a time in ns from 0 to 2**62", first_row + pos
        )


#: Hardware counters are 64-bit: a value beyond this is damage, not a count.
COUNTER_MAX = float(2**64)


def check_counter_values(path: Path, values: np.ndarray, first_row: int, column: str) -> None:
    """Refuse counter values no hardware counter gives: negative, not finite, or beyond 2**64.

    Missing values (NaN) pass: readers leave those out as not collected.

    Args:
        path: the file, for the message.
        values: float64 values of consecutive rows.
        first_row: the file row of ``values[0]``.
        column: the column (or counter) name, for the message.

    Raises:
        ParseError: naming the first bad value's row.
    """
    v = np.asarray(values, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        bad = ~np.isnan(v) & ((v < 0) | ~np.isfinite(v) | (v > COUNTER_MAX))
    if bool(bad.any()):
        pos = int(np.flatnonzero(bad)[0])
        raise ParseError(
            path,
            f"{column} is {float(v[pos]):g}; expected a counter value: a finite number from 0 to 2**64",
            first_row + pos,
        )


def parse_str(series: pd.Series) -> pd.Series:
    """String cells with missing/empty cells as None (object dtype)."""
    s = series.reset_index(drop=True).astype(object)
    return s.where(s.notna() & (s != ""), None)
