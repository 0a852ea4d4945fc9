"""Integer columns written as expressions of other columns of their row (SQLite's bulk insert, issue 15).

Binding a Python value costs the SQLite insert ~0.1 us; many of a dispatch row's integer columns
repeat another one, exactly, over a whole chunk: ``ordinal`` and ``timing_dispatch_index`` are the
dispatch index in a one-pass run, ``dispatch_id`` is often the index + 1, ``grid_size`` is
``grid_x`` when ``grid_y`` and ``grid_z`` are 1, ``duration_ns`` is ``end_ns - start_ns``.
:func:`derive` finds such columns in a chunk, and :func:`rocroof.store._insert_many` writes them
as ``?N + c`` or ``?N - ?M`` over the row's own numbered parameters (``?NNN``, SQLite's
"parameters", https://sqlite.org/lang_expr.html#varparam) instead of binding them.

What SQLite stores is what binding the value stores: only columns of integers with no missing
value are taken, the source columns are bound ones, and every value is below 2**62 in magnitude,
so that the sum or difference SQLite computes is the exact integer (SQLite turns an int64
overflow into a float). The relation is checked on every row of the chunk, not sampled.
"""

from __future__ import annotations

import sqlite3
import warnings
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import pandas as pd

#: Values of at most this magnitude take part (their sum or difference is an exact int64).
_SAFE = 1 << 62
#: Rows of a chunk compared first, spread over it: a pair that differs there is not compared in full.
_SAMPLE_ROWS = 16


class Derived(NamedTuple):
    """A column whose value on each row is ``source + offset``, or ``source - minus`` (offset 0)."""

    source: str
    minus: str | None = None
    offset: int = 0

    def sql(self, parameter: dict[str, str]) -> str:
        """The expression over the row's parameters (``parameter``: column name -> ``?N``)."""
        if self.minus is not None:
            return f"({parameter[self.source]} - {parameter[self.minus]})"
        if not self.offset:
            return parameter[self.source]
        return f"({parameter[self.source]} {'+' if self.offset > 0 else '-'} {abs(self.offset)})"


def numbered_parameters() -> bool:
    """Whether this ``sqlite3`` module binds a sequence to ``?NNN`` parameters, silently.

    From CPython 3.12 a sequence bound to *named* parameters warns (3.14: refused); a Python
    whose module counts ``?NNN`` among them (python/cpython#117995: 3.12.1 does, 3.13.0 does not)
    writes every value bound. Probed once, when this module is imported: ``warnings.catch_warnings``
    changes the process's filters, which a probe racing another thread's could leave set.
    """
    return _NUMBERED_PARAMETERS


def _probe_numbered_parameters() -> bool:
    """:func:`numbered_parameters`, found by binding two values to ``?2 - ?1`` with warnings as errors."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            conn = sqlite3.connect(":memory:")
            try:
                return bool(conn.execute("SELECT ?2 - ?1, ?1", (1, 3)).fetchone() == (2, 1))
            finally:
                conn.close()
        except (sqlite3.Error, Warning):
            return False


_NUMBERED_PARAMETERS = _probe_numbered_parameters()


def exact_ints(values: pd.Series) -> np.ndarray | None:
    """``values`` as int64 when they are integers, none missing, all below 2**62 in magnitude; else None."""
    dtype = values.dtype
    if isinstance(dtype, pd.CategoricalDtype) or getattr(dtype, "kind", "O") not in "iu":
        return None
    if isinstance(dtype, pd.api.extensions.ExtensionDtype):
        if bool(values.isna().any()):
            return None
        data = values.to_numpy(dtype=dtype.numpy_dtype)
    else:
        data = values.to_numpy()
    # the bounds as Python ints, before the cast: an unsigned value past int64 does not wrap here
    if len(data) and (int(data.max()) >= _SAFE or int(data.min()) <= -_SAFE):
        return None
    out: np.ndarray = data.astype(np.int64, copy=False)
    return out


def derive(columns: Sequence[tuple[str, np.ndarray]]) -> dict[str, Derived]:
    """The columns of ``columns`` that are another's value plus a constant, or the difference of two.

    Args:
        columns: ``(name, values)`` in the statement's column order, each an int64 array from
            :func:`exact_ints`, all of one length (a chunk's rows).

    Returns:
        name -> :class:`Derived`, for the derived columns; each one's sources are earlier columns
        of ``columns`` that are not derived themselves (they stay bound). Empty for fewer than
        two columns or no rows.
    """
    k = len(columns)
    if k < 2 or not len(columns[0][1]):
        return {}
    names = [name for name, _ in columns]
    n = len(columns[0][1])
    at = np.unique(np.linspace(0, n - 1, min(n, _SAMPLE_ROWS)).astype(np.int64))
    sample = np.stack([values[at] for _, values in columns], axis=1)  # rows x k
    # diff[r, i, j] = column i - column j on sample row r (no overflow: |values| < 2**62)
    diff = sample[:, :, None] - sample[:, None, :]
    constant = (diff == diff[:1]).all(axis=0)  # k x k
    out: dict[str, Derived] = {}
    for i in range(1, k):
        values = columns[i][1]
        found: Derived | None = None
        for j in range(i):
            if names[j] in out or not constant[i, j]:
                continue
            offset = int(diff[0, i, j])
            if bool((values - columns[j][1] == offset).all()):
                found = Derived(names[j], offset=offset)
                break
        if found is None:
            # column i = column a - column b on every sample row, a and b earlier and bound
            hits = (diff[:, :i, :i] == sample[:, i, None, None]).all(axis=0)
            for a, b in zip(*np.nonzero(hits), strict=True):
                if a == b or names[a] in out or names[b] in out:
                    continue
                if bool((values == columns[a][1] - columns[b][1]).all()):
                    found = Derived(names[a], minus=names[b])
                    break
        if found is not None:
            out[names[i]] = found
    return out
