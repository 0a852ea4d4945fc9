"""Integer row keys over spilled columns, a block at a time: order checks, sorting, lookups.

A reader that writes its columns to spill files (:mod:`rocroof.spill`) still has to sort its rows
(rocprofv3's dispatches into enqueue order, rocpd's ranges and launch calls into time order),
find repeated keys and match rows of one table to another (counter rows to dispatches). Done over
whole columns, each of those holds arrays of the table's length (a sort of 10^6 dispatches by
three keys: ~45 MB). The functions here read the key columns ``BLOCK`` rows at a time and let
their pages go after each block; what they keep is a few bytes per row at most
(:class:`DenseKeys`: 4 bytes per possible key, for keys that are dense; :func:`sorted_order`: a
bucket of rows), or a handful of numbers (:func:`lex_sorted`, :class:`SortedIndex`).

Key columns are 1-D integer arrays: numpy arrays or nullable ``Int64``/``boolean`` arrays (or a
Series of one), spilled or not. A missing value reads as ``fill``: -1 unless said otherwise (as
the readers' ``fillna(-1)`` sort keys did), or a :class:`Key`'s own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from . import spill
from .spill import ColumnWriter, release_pages

#: Rows of a key column read at a time (2 MB of int64), and the most rows sorted at once by
#: :func:`sorted_order`. Read when called: functions given no ``block`` use its value then.
BLOCK = 1 << 18

#: The smallest int64: a missing key that sorts first.
_MIN = -(2**63)


def values_at(column: Any, rows: slice | np.ndarray, fill: int = -1) -> np.ndarray:
    """A key column's values at ``rows`` (a slice or int positions) as int64, a missing value as ``fill``."""
    if isinstance(column, pd.Series):
        column = column.array
    if isinstance(column, pd.arrays.IntegerArray | pd.arrays.BooleanArray):
        values = np.asarray(column._data[rows], dtype=np.int64)  # noqa: SLF001 (the arrays themselves: no whole-column copy)
        mask = column._mask[rows]  # noqa: SLF001
        return np.where(mask, fill, values) if mask.any() else values
    return np.asarray(column[rows], dtype=np.int64)


def block_of(column: Any, lo: int, hi: int, fill: int = -1) -> np.ndarray:
    """Rows ``lo:hi`` of a key column as int64, a missing value as ``fill`` (:func:`values_at`)."""
    return values_at(column, slice(lo, hi), fill)


def first_row(n: int, test: Callable[[int, int], np.ndarray], block: int | None = None) -> int | None:
    """The first row (0-based) of ``n`` where ``test(lo, hi)`` (a bool array of rows lo:hi) is True; None if none.

    Rows are tested ``block`` at a time (default :data:`BLOCK`), the pages let go after each block.
    """
    block = block or BLOCK
    for lo in range(0, n, block):
        hit = np.flatnonzero(test(lo, min(lo + block, n)))
        release_pages()
        if len(hit):
            return lo + int(hit[0])
    return None


def has_missing(column: Any, block: int | None = None) -> bool:
    """True when a key column has a missing value (only nullable arrays can); read a block at a time."""
    array = column.array if isinstance(column, pd.Series) else column
    if not isinstance(array, pd.arrays.IntegerArray | pd.arrays.BooleanArray):
        return False
    return first_row(len(array), lambda lo, hi: array._mask[lo:hi], block) is not None  # noqa: SLF001


def only_value(column: np.ndarray, block: int | None = None) -> int | None:
    """The one value of an int64 column when every row holds it (None when empty or not); read in blocks."""
    if not len(column):
        return None
    value = int(column[0])
    if first_row(len(column), lambda lo, hi: column[lo:hi] != value, block) is not None:
        return None
    return value


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
    fill: int = -1


def _spec(keys: list[Any]) -> list[Key]:
    """``keys`` as :class:`Key` s (a bare column: ascending, missing as -1)."""
    return [k if isinstance(k, Key) else Key(k) for k in keys]


def _values(keys: list[Key], rows: slice | np.ndarray) -> list[np.ndarray]:
    """The int64 values of ``keys`` at some rows (a slice or an array of positions), descending ones negated."""
    out = []
    for key in keys:
        values = values_at(key.column, rows, key.fill)
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


def lex_sorted(keys: list[Any], block: int | None = None) -> tuple[bool, int | None]:
    """Whether the rows never decrease in the lexicographic order of ``keys``; and the first repeat.

    ``keys``: :class:`Key` s or bare columns (ascending, missing as -1), primary first; read
    ``block`` rows at a time (default :data:`BLOCK`), each block's pages let go.

    Returns:
        ``(sorted, repeat)``: ``repeat`` is the first row (0-based) whose key equals the row
        before it on every column, when ``sorted`` (the first row of a key seen twice, then), else None.
    """
    block = block or BLOCK
    spec = _spec(keys)
    n = len(spec[0].column) if spec else 0
    last: list[np.ndarray] | None = None
    repeat: int | None = None
    for lo in range(0, n, block):
        values = _values(spec, slice(lo, min(lo + block, n)))
        if last is not None:  # the block's rows after the last row of the one before
            values = [np.concatenate([a, k]) for a, k in zip(last, values, strict=True)]
        release_pages()
        if not bool(_ordered(values).all()):
            return False, None
        if repeat is None:
            equal = ~_ordered(values, strict=True)  # (rows in order: not after the one before is equal to it)
            if equal.any():
                repeat = lo - (1 if last is not None else 0) + int(np.flatnonzero(equal)[0]) + 1
        last = [k[-1:] for k in values]
    return True, repeat


def in_order(keys: list[Any], *, strict: bool = False, block: int | None = None) -> bool:
    """True when the rows never go backwards in the lexicographic order of ``keys`` (:func:`lex_sorted`).

    Then a stable sort leaves them where they are; with ``strict``, every row is after the one
    before it (no key twice).
    """
    ordered, repeat = lex_sorted(keys, block)
    return ordered and not (strict and repeat is not None)


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
            values = _values(spec, positions)
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
    sample = np.sort(np.concatenate([_values([primary], rows)[0] for rows in picks]))
    release_pages()
    bounds = np.unique(sample[(np.arange(1, parts) * len(sample)) // parts])
    writers = [ColumnWriter(np.int64) for _ in range(len(bounds) + 1)]
    try:
        for lo in range(0, n, block):
            hi = min(lo + block, n)
            first = _values([primary], slice(lo, hi))[0]
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


class DenseKeys:
    """(process id, id) keys numbered densely: slot = the key's place among all keys of its id range.

    For keys whose first column has a few distinct values (processes) and whose second is dense
    within each (dispatch ids: 1, 2, 3... per process), every possible key gets a slot; a table of
    one int32 per slot then sorts or finds repeats in one pass over the rows, where a sort of the
    keys would hold the key columns and its temporaries (~45 MB at 10^6 rows).

    Use :meth:`build`: None when the keys are not dense enough (or have too many processes).
    """

    #: Most distinct values of the first key column.
    MAX_GROUPS = 64

    def __init__(self, values: np.ndarray, low: np.ndarray, bases: np.ndarray, slots: int) -> None:
        self.values = values  # distinct first-column values, sorted
        self.low = low  # the smallest second-column value of each
        self.bases = bases  # the first slot of each
        self.slots = slots

    @classmethod
    def build(cls, first: Any, second: Any, block: int = BLOCK) -> DenseKeys | None:
        """The dense numbering of ``(first, second)`` keys (no missing values), or None.

        None when the first column has more than :data:`MAX_GROUPS` values or the keys span more
        than twice as many slots as there are rows (plus 65,536).
        """
        n = len(second)
        low: dict[int, int] = {}
        high: dict[int, int] = {}
        for lo in range(0, n, block):
            hi = min(lo + block, n)
            p, i = block_of(first, lo, hi), block_of(second, lo, hi)
            groups = [int(p[0])] if bool((p == p[0]).all()) else np.unique(p).tolist()
            if len(set(low) | set(groups)) > cls.MAX_GROUPS:
                release_pages()
                return None
            for v in groups:
                ids = i if len(groups) == 1 else i[p == v]
                small, large = int(ids.min()), int(ids.max())
                low[v] = min(low.get(v, small), small)
                high[v] = max(high.get(v, large), large)
            release_pages()
        groups = sorted(low)
        # in Python ints first: ids at both ends of int64 span more than an int64 holds
        spans_of = [high[v] - low[v] + 1 for v in groups]
        slots = sum(spans_of)
        if slots > 2 * n + (1 << 16):
            return None
        spans = np.array(spans_of, dtype=np.int64)
        bases = np.concatenate([[0], np.cumsum(spans)[:-1]]).astype(np.int64)
        lows = np.array([low[v] for v in groups], dtype=np.int64)
        return cls(np.array(groups, dtype=np.int64), lows, bases, slots)

    def slot(self, first: np.ndarray, second: np.ndarray) -> np.ndarray:
        """The slot of each key (keys of the columns it was built from)."""
        group = np.searchsorted(self.values, first)
        slots: np.ndarray = self.bases[group] + (second - self.low[group])
        return slots

    def _table(self) -> np.ndarray:
        return np.full(self.slots, -1, dtype=np.int32 if self.slots < 2**31 - 1 else np.int64)

    def first_repeat(self, first: Any, second: Any, block: int = BLOCK) -> int | None:
        """The first row (0-based) whose key an earlier row has; None when every key is distinct."""
        seen = np.zeros(self.slots, dtype=bool)
        n = len(second)
        for lo in range(0, n, block):
            hi = min(lo + block, n)
            s = self.slot(block_of(first, lo, hi), block_of(second, lo, hi))
            release_pages()
            repeated = seen[s]
            _, firsts = np.unique(s, return_index=True)
            again = np.ones(len(s), dtype=bool)
            again[firsts] = False  # a key's first row in the block
            repeated |= again
            if repeated.any():
                return lo + int(np.flatnonzero(repeated)[0])
            seen[s] = True
        return None

    def order(self, first: Any, second: Any, block: int = BLOCK) -> np.ndarray | None:
        """The rows in key order (a spill file of row numbers), or None when a key repeats."""
        table = self._table()
        n = len(second)
        for lo in range(0, n, block):
            hi = min(lo + block, n)
            s = self.slot(block_of(first, lo, hi), block_of(second, lo, hi))
            release_pages()
            if (table[s] >= 0).any():
                return None
            rows = np.arange(lo, hi, dtype=table.dtype)
            table[s] = rows
            if not np.array_equal(table[s], rows):  # a key twice in the block: the later row won
                return None
        with ColumnWriter(table.dtype) as writer:
            for lo in range(0, self.slots, block):
                part = table[lo : lo + block]
                writer.append(part[part >= 0])
            del table
            return writer.finish()


def sorted_distinct(column: Any, block: int = BLOCK) -> np.ndarray | None:
    """The distinct non-missing values of a column that never decreases, in a spill file; None if it decreases.

    Missing values are skipped wherever they are (the order is that of the values present).
    """
    n = len(column)
    last: int | None = None
    with ColumnWriter(np.int64) as writer:
        for lo in range(0, n, block):
            hi = min(lo + block, n)
            if isinstance(column, pd.arrays.IntegerArray):
                values = np.asarray(column._data[lo:hi])[~np.asarray(column._mask[lo:hi])]  # noqa: SLF001
            else:
                values = np.asarray(column[lo:hi], dtype=np.int64)
            release_pages()
            if not len(values):
                continue
            if (last is not None and values[0] < last) or bool((values[1:] < values[:-1]).any()):
                return None
            keep = np.ones(len(values), dtype=bool)
            keep[1:] = values[1:] != values[:-1]
            if last is not None and values[0] == last:
                keep[0] = False
            writer.append(values[keep])
            last = int(values[-1])
        return writer.finish()


def isin_sorted(values: np.ndarray, table: np.ndarray) -> np.ndarray:
    """``np.isin(values, table)`` for a sorted, distinct ``table`` (a spilled one is read where searched)."""
    if not len(table) or not len(values):
        return np.zeros(len(values), dtype=bool)
    at = np.searchsorted(table, values)
    np.clip(at, 0, len(table) - 1, out=at)
    found: np.ndarray = table[at] == values
    return found


class SortedIndex:
    """The first row of each key in a table sorted by ``(groups, ids)``: binary search on the columns themselves.

    The table's columns (spilled or not) are searched where they lie: nothing is copied or sorted
    (:class:`rocroof.records.KeyIndex` holds a sorted copy of the keys and the order: 16 bytes
    per row). The table must be sorted by (group, id) with no missing values in either
    (:func:`lex_sorted`); the groups (processes) are few.

    Args:
        groups: the table's first key column (or None: one group).
        ids: its second key column.
    """

    def __init__(self, groups: Any, ids: Any, block: int = BLOCK) -> None:
        self.ids = ids._data if isinstance(ids, pd.arrays.IntegerArray) else ids  # noqa: SLF001
        n = len(ids)
        bounds: list[tuple[int, int, int]] = []  # (group, first row, end row), in table order
        if groups is None or not n:
            bounds = [(0, 0, n)] if n else []
        else:
            start, current = 0, None
            for lo in range(0, n, block):
                g = block_of(groups, lo, min(lo + block, n))
                if current is None:
                    current = int(g[0])
                for at in np.flatnonzero(np.r_[g[0] != current, g[1:] != g[:-1]]).tolist():
                    bounds.append((current, start, lo + at))
                    start, current = lo + at, int(g[at])
                release_pages()
            assert current is not None
            bounds.append((current, start, n))
        self.bounds = bounds

    def find(self, groups: np.ndarray | None, ids: np.ndarray) -> np.ndarray:
        """For each query key, the table's first row with it; -1 where none has it.

        ``groups`` None: matched on the id alone (the first group, in table order, that has it).
        """
        out = np.full(len(ids), -1, dtype=np.int64)
        if not len(ids):
            return out
        # counter rows repeat a dispatch's key on consecutive rows: each run is looked up once
        heads = np.ones(len(ids), dtype=bool)
        heads[1:] = ids[1:] != ids[:-1]
        if groups is not None:
            heads[1:] |= groups[1:] != groups[:-1]
        starts = np.flatnonzero(heads)
        q_ids = ids[starts]
        q_groups = groups[starts] if groups is not None else None
        found = np.full(len(starts), -1, dtype=np.int64)
        for group, lo, hi in self.bounds:
            pending = found < 0
            if q_groups is not None:
                pending &= q_groups == group
            sel = np.flatnonzero(pending)
            if not len(sel):
                continue
            part = self.ids[lo:hi]
            at = np.searchsorted(part, q_ids[sel])
            hit = at < len(part)
            hit[hit] = part[at[hit]] == q_ids[sel][hit]
            found[sel[hit]] = lo + at[hit]
        release_pages()
        return np.repeat(found, np.diff(np.append(starts, len(ids))))
