"""Integer row keys over spilled columns, a block at a time: order checks, sorting, lookups.

A reader that writes its columns to spill files (:mod:`rocroof.spill`) still has to sort its rows
(rocprofv3's dispatches into enqueue order), find repeated keys and match rows of one table to
another (counter rows to dispatches). Done over whole columns, each of those holds arrays of the
table's length (a sort of 10^6 dispatches by three keys: ~45 MB). The functions here read the key
columns ``BLOCK`` rows at a time and let their pages go after each block; what they keep is a few
bytes per row at most (:class:`DenseKeys`: 4 bytes per possible key, for keys that are dense), or a
handful of numbers (:func:`lex_sorted`, :class:`SortedIndex`).

Key columns are 1-D integer arrays: numpy arrays or nullable ``Int64`` arrays (a missing value
reads as ``fill``, -1 unless said otherwise, as the readers' ``fillna(-1)`` sort keys did).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .spill import ColumnWriter, release_pages

#: Rows of a key column read at a time (2 MB of int64).
BLOCK = 1 << 18


def block_of(column: Any, lo: int, hi: int, fill: int = -1) -> np.ndarray:
    """Rows ``lo:hi`` of a key column as int64, a missing value as ``fill``."""
    if isinstance(column, pd.arrays.IntegerArray):
        values = column._data[lo:hi]  # noqa: SLF001 (the arrays themselves: no whole-column copy)
        mask = column._mask[lo:hi]  # noqa: SLF001
        if mask.any():
            return np.where(mask, fill, values)
        return np.asarray(values, dtype=np.int64)
    return np.asarray(column[lo:hi], dtype=np.int64)


def has_missing(column: Any) -> bool:
    """True when a key column has a missing value (read a block at a time)."""
    if not isinstance(column, pd.arrays.IntegerArray):
        return False
    mask = column._mask  # noqa: SLF001
    for lo in range(0, len(mask), BLOCK):
        if mask[lo : lo + BLOCK].any():
            release_pages()
            return True
    release_pages()
    return False


def lex_sorted(columns: list[Any], block: int = BLOCK) -> tuple[bool, int | None]:
    """Whether the rows never decrease in the lexicographic order of ``columns``; and the first repeat.

    Returns:
        ``(sorted, repeat)``: ``repeat`` is the first row (0-based) whose key equals the row
        before it on every column, when ``sorted`` (the first row of a key seen twice, then), else None.
    """
    n = len(columns[0]) if columns else 0
    previous: list[np.ndarray] | None = None
    repeat: int | None = None
    for lo in range(0, n, block):
        hi = min(lo + block, n)
        keys = [block_of(c, lo, hi) for c in columns]
        if previous is not None:  # the block's rows after the last row of the one before
            keys = [np.concatenate([p, k]) for p, k in zip(previous, keys, strict=True)]
        before = [k[:-1] for k in keys]
        after = [k[1:] for k in keys]
        ordered = np.ones(len(keys[0]) - 1, dtype=bool)
        equal = np.ones(len(keys[0]) - 1, dtype=bool)
        for b, a in zip(reversed(before), reversed(after), strict=True):  # the last column decides ties
            ordered = (b < a) | ((b == a) & ordered)
        for b, a in zip(before, after, strict=True):
            equal &= b == a
        release_pages()
        if not ordered.all():
            return False, None
        if repeat is None and equal.any():
            repeat = (lo - (1 if previous is not None else 0)) + int(np.flatnonzero(equal)[0]) + 1
        previous = [k[-1:] for k in keys]
    return True, repeat


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
        values = np.array(sorted(low), dtype=np.int64)
        spans = np.array([high[v] - low[v] + 1 for v in values.tolist()], dtype=np.int64)
        slots = int(spans.sum())
        if slots > 2 * n + (1 << 16):
            return None
        bases = np.concatenate([[0], np.cumsum(spans)[:-1]]).astype(np.int64)
        return cls(values, np.array([low[v] for v in values.tolist()], dtype=np.int64), bases, slots)

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
