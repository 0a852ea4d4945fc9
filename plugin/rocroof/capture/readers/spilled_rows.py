"""A reader's tables written to spill files as they are read, and the whole-table steps done in blocks.

A reader that takes a large table a chunk of rows at a time (the rocpd reader: 10^6 dispatches,
8x10^6 counter records, 10^6 ranges and launch calls) hands each chunk to a :class:`FrameWriter`:
its integers go to spill files (:mod:`rocroof.spill`) and its texts become codes in a spill file,
each distinct text held once (:class:`TextCodes`). The finished frame maps its columns from the
files, so that the read holds its chunk buffers and not the rows.

What a reader then does over the whole table is done here a block of rows at a time, each block's
pages let go once read: the sort into the table's order (:func:`sorted_order`: nothing when the rows
are in order already, else a sort a bucket of rows at a time, the order written to a spill file),
and the reordering itself (:func:`take_frame`). Key columns are 1-D integer arrays, numpy or
nullable ``Int64`` (spilled or not).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ... import spill
from ...spill import ColumnWriter, release_pages

#: Rows of a key column read at a time (2 MB of int64), and the most rows sorted at once by
#: :func:`sorted_order`.
BLOCK = 1 << 18

#: The smallest int64: a missing key that sorts first.
_MIN = -(2**63)


def code_dtype(categories: int) -> np.dtype[Any]:
    """The integer type pandas keeps the codes of a categorical of ``categories`` categories in.

    ``pd.Categorical.from_codes`` converts codes of any other type (a copy of the whole column in
    memory); codes of this type, a read-only spill mapping included, are used as they are.
    """
    for dtype in (np.int8, np.int16, np.int32):
        if categories < np.iinfo(dtype).max:
            return np.dtype(dtype)
    return np.dtype(np.int64)


def small(rows: int, itemsize: int = 8) -> bool:
    """True when a column of ``rows`` values of ``itemsize`` bytes stays in memory (``SPILL_MIN_BYTES``)."""
    return rows * itemsize < max(spill.SPILL_MIN_BYTES, 1)


class TextCodes:
    """A text column appended a chunk at a time: a code per row in a spill file, each distinct text once.

    Codes are written in the type pandas keeps for the number of texts so far (:func:`code_dtype`),
    the file rewritten wider when a chunk brings more texts than that type numbers; -1 is a
    missing value (None or NaN).

    Args:
        categories: with ``fixed``, the column's categories in their order (every value must be
            one of them); otherwise none (the categories are sorted at :meth:`finish`, so that the
            column does not depend on the order the rows were read in).
        fixed: see ``categories``.
        categorical: :meth:`finish` gives a categorical however few the rows (a marker's kind).

    Raises:
        OutputError: the spill directory cannot take the file.
        ValueError: (:meth:`append`) a value outside fixed categories.
    """

    def __init__(self, categories: tuple[str, ...] = (), *, fixed: bool = False, categorical: bool = False) -> None:
        self.fixed = fixed
        self.categorical = categorical
        self._number: dict[Any, int] = {text: i for i, text in enumerate(categories)}
        self._codes = ColumnWriter(code_dtype(len(self._number)))
        self.rows = 0

    def append(self, values: Any) -> None:
        """Add ``values``: a categorical (a Series of one or its array), or object values, None/NaN missing."""
        array = values.array if isinstance(values, pd.Series) else values
        if isinstance(array, pd.Categorical):
            texts = list(array.categories)
            local = np.asarray(array.codes)
        else:
            local, uniques = pd.factorize(np.asarray(array, dtype=object), use_na_sentinel=True)
            texts = list(uniques)
        table = np.empty(len(texts) + 1, dtype=np.int64)
        for i, text in enumerate(texts):
            code = self._number.get(text)
            if code is None:
                if self.fixed:
                    raise ValueError(f"{text!r} is not one of the column's categories {list(self._number)}")
                code = self._number[text] = len(self._number)
            table[i] = code
        table[-1] = -1  # local code -1: missing
        wanted = code_dtype(len(self._number))
        if wanted.itemsize > self._codes.dtype.itemsize:
            self._widen(wanted)
        self._codes.append(table[local].astype(self._codes.dtype))
        self.rows += len(local)

    def _widen(self, dtype: np.dtype[Any]) -> None:
        """Rewrite the codes written so far in the wider ``dtype``."""
        written = self._codes.finish(mapped=True)
        wider = ColumnWriter(dtype)
        try:
            for lo in range(0, len(written), BLOCK):
                wider.append(written[lo : lo + BLOCK])
        except BaseException:
            wider.close()
            raise
        del written
        release_pages()
        self._codes = wider

    def finish(self) -> Any:
        """The column, shape (rows,): a categorical whose codes are a spill mapping; a small one as object values.

        A column under :data:`rocroof.spill.SPILL_MIN_BYTES` as object pointers (8 bytes a row) is
        an object array with None for missing values (what the readers held before), unless
        ``categorical``.
        """
        big = not small(self.rows)  # (as a column of object pointers: 8 bytes a row)
        codes = self._codes.finish(mapped=big)
        texts = list(self._number)
        if not self.fixed:
            ranked = sorted(range(len(texts)), key=texts.__getitem__)
            if ranked != list(range(len(texts))):
                renumber = np.empty(len(texts) + 1, dtype=codes.dtype)
                renumber[np.array(ranked, dtype=np.int64)] = np.arange(len(texts), dtype=codes.dtype)
                renumber[-1] = -1
                codes = _renumbered(codes, renumber, big) if len(codes) else codes
                texts = [texts[i] for i in ranked]
        if not big and not self.categorical:
            table = np.empty(len(texts) + 1, dtype=object)
            table[: len(texts)] = texts
            table[-1] = None
            values: np.ndarray = table[np.asarray(codes, dtype=np.int64)]
            return values
        categories = pd.Index(texts, dtype=object)
        return pd.Categorical.from_codes(codes, dtype=pd.CategoricalDtype(categories), validate=False)

    def close(self) -> None:
        """Drop the file (an error while reading); nothing once finished."""
        self._codes.close()

    def __enter__(self) -> TextCodes:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _renumbered(codes: np.ndarray, renumber: np.ndarray, mapped: bool) -> np.ndarray:
    """``renumber[codes]`` (code -1 reads ``renumber[-1]``), written to a spill file a block at a time."""
    with ColumnWriter(codes.dtype) as writer:
        for lo in range(0, len(codes), BLOCK):
            writer.append(renumber[codes[lo : lo + BLOCK]])
            release_pages()
        return writer.finish(mapped=mapped)


def _kind(dtype: str) -> str:
    """How :class:`FrameWriter` writes a column of ``dtype``: ``Int64``, ``boolean``, ``text`` or a numpy dtype."""
    if dtype in ("Int64", "boolean"):
        return dtype
    if dtype == "object":
        return "text"
    return str(np.dtype(dtype))


class FrameWriter:
    """A frame of ``columns`` added a chunk at a time, every column written to spill files as it comes.

    Nullable integers and booleans go to two :class:`rocroof.spill.ColumnWriter` files (values,
    mask), numpy columns to one, text columns to :class:`TextCodes`. A chunk may lack a column
    (missing values there). The finished frame maps its columns from the files; columns under
    :data:`rocroof.spill.SPILL_MIN_BYTES` come back in memory (text then as object values).

    A context manager: leaving the block drops the files of a frame not finished.

    Args:
        columns: ``{name: dtype}``: ``Int64``, ``boolean``, ``object`` (text) or a numpy dtype.
        fixed: text columns with fixed categories, in order (``{"kind": ("range", "mark")}``),
            given as categoricals however small.

    Raises:
        OutputError: the spill directory cannot take the files.
    """

    def __init__(self, columns: dict[str, str], *, fixed: dict[str, tuple[str, ...]] | None = None) -> None:
        self.columns = dict(columns)
        self.rows = 0
        self._writers: dict[str, Any] = {}
        try:
            for name, dtype in self.columns.items():
                kind = _kind(dtype)
                if kind == "text":
                    seeds = (fixed or {}).get(name)
                    self._writers[name] = (
                        TextCodes(seeds, fixed=True, categorical=True) if seeds is not None else TextCodes()
                    )
                elif kind in ("Int64", "boolean"):
                    values = ColumnWriter(np.int64 if kind == "Int64" else np.bool_)
                    self._writers[name] = (values, ColumnWriter(np.bool_))
                else:
                    self._writers[name] = ColumnWriter(kind)
        except BaseException:
            self.close()
            raise

    def add(self, chunk: pd.DataFrame) -> None:
        """Write ``chunk``'s rows at the frame's end (its columns of the frame's dtypes; others ignored).

        Raises:
            ValueError: a column of another type than the frame's (a reader's bug).
        """
        n = len(chunk)
        for name, writer in self._writers.items():
            column = chunk[name] if name in chunk.columns else None
            dtype = self.columns[name]
            if isinstance(writer, TextCodes):
                writer.append(column if column is not None else np.full(n, None, dtype=object))
            elif isinstance(writer, tuple):
                values, mask = writer
                if column is None:
                    values.append(np.zeros(n, dtype=values.dtype))
                    mask.append(np.ones(n, dtype=np.bool_))
                    continue
                if str(column.dtype) != dtype:
                    raise ValueError(f"column {name!r} of a chunk is {column.dtype}, not {dtype}")
                array = column.array
                values.append(array._data)  # noqa: SLF001 (the arrays themselves, not copies)
                mask.append(array._mask)  # noqa: SLF001
            else:
                if column is None:
                    raise ValueError(f"column {name!r} missing from a chunk")
                writer.append(column.to_numpy(dtype=writer.dtype))
        self.rows += n

    def finish(self) -> pd.DataFrame:
        """The frame, with a fresh index (the writer is spent)."""
        out: dict[str, Any] = {}
        big = not small(self.rows)  # every column of a large frame in a file, its masks and codes too
        try:
            for name, writer in self._writers.items():
                if isinstance(writer, TextCodes):
                    text = writer.finish()
                    out[name] = pd.Series(text, dtype=None if isinstance(text, pd.Categorical) else object, copy=False)
                elif isinstance(writer, tuple):
                    values, mask = writer
                    data, missing = values.finish(mapped=big), mask.finish(mapped=big)
                    array = (
                        pd.arrays.IntegerArray(data, missing)
                        if data.dtype.kind == "i"
                        else pd.arrays.BooleanArray(data, missing)
                    )
                    out[name] = pd.Series(array, copy=False)
                else:
                    out[name] = pd.Series(writer.finish(mapped=big), copy=False)
        finally:
            self.close()
        return pd.DataFrame(out, index=pd.RangeIndex(self.rows), copy=False)

    def close(self) -> None:
        """Drop the files of columns not finished (an error while reading)."""
        for writer in self._writers.values():
            for part in writer if isinstance(writer, tuple) else (writer,):
                part.close()

    def __enter__(self) -> FrameWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def key_block(column: Any, lo: int, hi: int, fill: int = 0) -> np.ndarray:
    """Rows ``lo:hi`` of a key column as int64 (a missing value as ``fill``)."""
    if isinstance(column, pd.Series):
        column = column.array
    if isinstance(column, pd.arrays.IntegerArray | pd.arrays.BooleanArray):
        values = np.asarray(column._data[lo:hi], dtype=np.int64)  # noqa: SLF001 (no whole-column copy)
        mask = column._mask[lo:hi]  # noqa: SLF001
        return np.where(mask, fill, values) if mask.any() else values
    return np.asarray(column[lo:hi], dtype=np.int64)


def key_rows(column: Any, rows: np.ndarray, fill: int = 0) -> np.ndarray:
    """The key column's values at ``rows`` (positions) as int64 (a missing value as ``fill``)."""
    if isinstance(column, pd.Series):
        column = column.array
    if isinstance(column, pd.arrays.IntegerArray | pd.arrays.BooleanArray):
        values = np.asarray(column._data[rows], dtype=np.int64)  # noqa: SLF001
        mask = column._mask[rows]  # noqa: SLF001
        return np.where(mask, fill, values) if mask.any() else values
    return np.asarray(column[rows], dtype=np.int64)


@dataclass(frozen=True)
class Key:
    """A sort key: a key column, its direction and the value a missing entry counts as.

    Attributes:
        column: 1-D integers (numpy, bool, or nullable ``Int64``/``boolean``; spilled or not).
        descending: compared negated (numpy's negation: -(-2**63) wraps, as a negated lexsort key did).
        fill: the value of a missing entry (before negation).
    """

    column: Any
    descending: bool = False
    fill: int = 0


def _spec(keys: list[Any]) -> list[Key]:
    """``keys`` as :class:`Key` s (a bare column: ascending, missing as 0)."""
    return [k if isinstance(k, Key) else Key(k) for k in keys]


def _keys(keys: list[Key], rows: np.ndarray | tuple[int, int]) -> list[np.ndarray]:
    """The int64 values of ``keys`` at some rows: ``rows`` a range (lo, hi) or an array of positions."""
    out = []
    for key in keys:
        if isinstance(rows, tuple):
            values = key_block(key.column, *rows, fill=key.fill)
        else:
            values = key_rows(key.column, rows, fill=key.fill)
        with np.errstate(over="ignore"):
            out.append(-values if key.descending else values)
    return out


def _ordered(keys: list[np.ndarray], strict: bool = False) -> np.ndarray:
    """Per pair of consecutive rows of ``keys`` (primary first): the later is not before (``strict``: after) it."""
    n = len(keys[0])
    ordered = np.full(max(n - 1, 0), not strict, dtype=bool)
    for k in reversed(keys):  # the first key decides; equal ones fall through to the next
        before, after = k[:-1], k[1:]
        ordered = (before < after) | ((before == after) & ordered)
    return ordered


def in_order(keys: list[Any], *, strict: bool = False, block: int | None = None) -> bool:
    """True when the rows never go backwards in the lexicographic order of ``keys`` (primary first).

    Then a stable sort leaves them where they are; with ``strict``, every row is after the one
    before it (no key twice). ``keys``: :class:`Key` s or bare columns (ascending, missing as 0).
    Read ``block`` rows at a time (default :data:`BLOCK`), each block's pages let go.
    """
    block = block or BLOCK
    spec = _spec(keys)
    n = len(spec[0].column) if spec else 0
    last: list[np.ndarray] | None = None
    for lo in range(0, n, block):
        values = _keys(spec, (lo, min(lo + block, n)))
        if last is not None:
            values = [np.concatenate([a, k]) for a, k in zip(last, values, strict=True)]
        release_pages()
        if not bool(_ordered(values, strict).all()):
            return False
        last = [k[-1:] for k in values]
    return True


def sorted_order(keys: list[Any], *, block: int | None = None) -> np.ndarray | None:
    """The rows' stable order by ``keys`` (:class:`Key` s or bare columns; primary first).

    What ``np.lexsort`` of the key values (last key first) gives, without the keys and the
    order of the whole table in memory at once: None when the rows are in order already
    (:func:`in_order`); else the rows are split by ranges of the primary key into buckets of
    about ``block`` rows (default :data:`BLOCK`; their positions written to spill files), each
    bucket sorted alone, and the order written to a spill file (in memory when small). Rows with
    equal keys keep their order. The primary key should tell most rows apart: rows of one
    primary value are sorted in one bucket, however many.

    Returns:
        None, or the order: int64 row positions, shape (rows,).
    """
    block = block or BLOCK
    spec = _spec(keys)
    n = len(spec[0].column) if spec else 0
    if in_order(spec, block=block):
        return None
    with ColumnWriter(np.int64) as out:
        for positions in _buckets(spec[0], n, block):
            values = _keys(spec, positions)
            release_pages()
            out.append(positions[np.lexsort(values[::-1])])
            del values
        return out.finish()


def _buckets(primary: Key, n: int, block: int) -> Iterator[np.ndarray]:
    """The row positions (ascending) of each range of primary key values, the ranges in key order.

    A sample of the primary key sets ranges of about ``block`` rows each (rows of one value are
    in one range however many); every range's positions are written to a spill file in one pass.
    """
    if n <= block:
        yield np.arange(n, dtype=np.int64)
        return
    parts = -(-n // block)
    step = max(1, n // (64 * parts))
    picks = [np.arange(lo, min(lo + block, n), step) for lo in range(0, n, block)]
    sample = np.sort(np.concatenate([_keys([primary], rows)[0] for rows in picks]))
    release_pages()
    bounds = np.unique(sample[(np.arange(1, parts) * len(sample)) // parts])
    writers = [ColumnWriter(np.int64) for _ in range(len(bounds) + 1)]
    try:
        for lo in range(0, n, block):
            hi = min(lo + block, n)
            first = _keys([primary], (lo, hi))[0]
            release_pages()
            bucket = np.searchsorted(bounds, first, side="right")
            order = np.argsort(bucket, kind="stable")
            counts = np.bincount(bucket, minlength=len(writers))
            at = 0
            for j, count in enumerate(counts.tolist()):
                if count:
                    writers[j].append(lo + order[at : at + count])
                    at += count
        for writer in writers:
            positions = writer.finish()
            if len(positions):
                yield np.array(positions)  # (in memory: a bucket's positions, ~8 bytes a row of it)
            del positions
            release_pages()
    finally:
        for writer in writers:
            writer.close()


def take_column(column: pd.Series, order: np.ndarray) -> Any:
    """``column`` (a frame's column) in ``order``, a spilled one written to spill files a block at a time.

    Categoricals keep their categories, their codes taken; nullable integers and booleans their
    values and mask; numpy columns their values; an object column in memory is taken in memory,
    as is any column in memory whose result is small (:func:`small`). A result of many rows is in
    files entirely, its masks and codes included.
    """
    array = column.array
    big = not small(len(order))
    if column.dtype == object:
        return column.to_numpy()[order]
    if not big and not spill.is_spilled(array):  # a small column in memory: taken in memory
        return (
            array.take(order)
            if isinstance(array, pd.Categorical | pd.arrays.IntegerArray | pd.arrays.BooleanArray)
            else column.to_numpy()[order]
        )
    if isinstance(array, pd.Categorical):
        codes = spill.take(np.asarray(array.codes), order, mapped=big)
        return pd.Categorical.from_codes(codes, dtype=array.dtype, validate=False)
    if isinstance(array, pd.arrays.IntegerArray | pd.arrays.BooleanArray):
        data = spill.take(array._data, order, mapped=big)  # noqa: SLF001
        mask = spill.take(array._mask, order, mapped=big)  # noqa: SLF001
        return type(array)(data, mask)
    return spill.take(column.to_numpy(), order, mapped=big)


def take_frame(frame: pd.DataFrame, order: np.ndarray) -> pd.DataFrame:
    """``frame.iloc[order]`` with a fresh index, a column at a time (:func:`take_column`).

    ``frame`` loses each column once taken: the frame and its reordering are never both held whole.
    """
    out: dict[str, Any] = {}
    for name in list(frame.columns):
        taken = take_column(frame[name], order)
        text = isinstance(taken, np.ndarray) and taken.dtype == object
        out[name] = pd.Series(taken, dtype=object if text else None, copy=False)  # (pandas would infer "str")
        del frame[name]
        release_pages()
    return pd.DataFrame(out, index=pd.RangeIndex(len(order)), copy=False)


def first_row(n: int, test: Any, block: int | None = None) -> int | None:
    """The first row (0-based) of ``n`` where ``test(lo, hi)`` (a bool array of rows lo:hi) is True; None if none."""
    block = block or BLOCK
    for lo in range(0, n, block):
        hit = np.flatnonzero(test(lo, min(lo + block, n)))
        release_pages()
        if len(hit):
            return lo + int(hit[0])
    return None


def has_missing(column: Any, block: int | None = None) -> bool:
    """True when a key column (numpy, or nullable ``Int64``: spilled or not) has a missing value; read in blocks."""
    block = block or BLOCK
    array = column.array if isinstance(column, pd.Series) else column
    if not isinstance(array, pd.arrays.IntegerArray | pd.arrays.BooleanArray):
        return False
    return first_row(len(array), lambda lo, hi: array._mask[lo:hi], block) is not None  # noqa: SLF001


def only_value(column: np.ndarray, block: int | None = None) -> int | None:
    """The one value of an int64 column when every row holds it (None when empty or not); read in blocks."""
    block = block or BLOCK
    if not len(column):
        return None
    value = int(column[0])
    if first_row(len(column), lambda lo, hi: column[lo:hi] != value, block) is not None:
        return None
    return value


def sorted_keys(column: Any, block: int | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """The non-missing values of a key column in ascending order, and the rows they are at.

    Returns:
        ``(values, rows)``, int64 each, shape (non-missing rows,): ``rows`` are the values'
        positions in the column, equal values in row order (a stable sort); ``rows`` is None when
        the column is in order already and has no missing value (``values`` is then the column's
        own values, not a copy). Sorted a bucket at a time (:func:`sorted_order`), the results in
        spill files (in memory when small).
    """
    block = block or BLOCK
    array = column.array if isinstance(column, pd.Series) else column
    if isinstance(array, pd.arrays.IntegerArray):
        data, mask = array._data, array._mask  # noqa: SLF001
    else:
        data, mask = np.asarray(array, dtype=np.int64), None
    missing = mask is not None and has_missing(array, block)
    # a missing entry as the smallest integer, before any value equal to it: the missing rows come first
    keys: list[Any] = [Key(array, fill=_MIN), Key(mask, descending=True)] if missing else [data]
    order = sorted_order(keys, block=block)
    if order is None and not missing:
        return data, None
    if order is None:
        order = spill.arange(0, len(data))
    if missing:
        assert mask is not None
        skip = sum(int(mask[lo : lo + block].sum()) for lo in range(0, len(mask), block))
        order = order[skip:]
    values = spill.take(data, order)
    release_pages()
    return values, order
