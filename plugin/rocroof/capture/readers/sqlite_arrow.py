"""SQLite query results as Arrow columns, through ADBC's SQLite driver (Apache Arrow).

rocpd and Nsight Systems exports are SQLite databases of millions of rows. Python's ``sqlite3``
makes a Python object of every value it returns (pandas' ``read_sql`` then types them column by
column); ADBC's driver (``adbc-driver-sqlite``, C) steps the same query into Arrow arrays, which
polars takes without a copy: 8x10^6 counter records in ~2 s instead of ~8 s (benchmarks/RESULTS.md).

The driver types each column from its first rows and fails at a later value of another type, so a
result is exact or absent: every caller keeps its ``sqlite3`` path, which reads anything and names
what is wrong, for when :func:`arrow_columns` returns None.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ...fileio import import_polars, sqlite_uri


class NotNumbers(Exception):
    """A column of a result is not of the numeric type a fast path needs."""


def sql_literal(value: object) -> str:
    """``value`` (a guid: text, integer or blob) as an SQL literal."""
    if isinstance(value, bool) or value is None:
        return "NULL"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, bytes):
        return f"x'{value.hex()}'"
    return "'" + str(value).replace("'", "''") + "'"


#: Read big query results through ADBC's SQLite driver (Apache Arrow; C, columns straight into
#: Arrow arrays) where it is installed; the tests turn it off to compare with the sqlite3 path.
USE_ADBC = True


def arrow_columns(conn: sqlite3.Connection, sql: str) -> dict[str, Any] | None:
    """The result of ``sql`` on ``conn``'s database file as polars Series by column name, or None.

    ADBC's SQLite driver types each column from its first rows and fails on a later value of
    another type: so a result comes back with one exact type per column, or not at all. None when
    the driver (or polars) is not installed or the query fails for any reason: the caller then
    reads the rows through sqlite3, which names what is wrong.
    """
    if not USE_ADBC:
        return None
    try:
        import adbc_driver_manager
        import adbc_driver_sqlite
    except ImportError:
        return None
    pl = import_polars()
    if pl is None:
        return None
    row = conn.execute("PRAGMA database_list").fetchone()
    if row is None or not row[2]:
        return None
    try:
        with (
            adbc_driver_sqlite.connect(sqlite_uri(Path(row[2]))) as db,
            adbc_driver_manager.AdbcConnection(db) as connection,
            adbc_driver_manager.AdbcStatement(connection) as statement,
        ):
            statement.set_sql_query(sql)
            stream, _ = statement.execute_query()
            data = pl.from_arrow(stream)
            frame = data.struct.unnest() if isinstance(data, pl.Series) else data
            columns = {name: frame.get_column(name) for name in frame.columns}
    except _recoverable():  # any failure: the sqlite3 path reads (and names) it
        return None
    return columns


def _recoverable() -> tuple[type[BaseException], ...]:
    """Exceptions after which the sqlite3 path takes over: every one but an interrupt or exit.

    polars reports some bad data (text that is not UTF-8) by a Rust panic, which Python sees as
    ``pyo3_runtime.PanicException``, a ``BaseException``.
    """
    try:
        from polars.exceptions import PanicException
    except ImportError:  # pragma: no cover - older polars
        return (Exception,)
    return (Exception, PanicException)


def arrow_integers(column: Any) -> pd.arrays.IntegerArray:
    """A polars integer (or all-null) Series as a nullable int64 array.

    Raises:
        NotNumbers: the column is of another type.
    """
    import polars as pl

    if column.dtype == pl.Null:
        return pd.arrays.IntegerArray(np.zeros(len(column), dtype=np.int64), np.ones(len(column), dtype=bool))
    if not column.dtype.is_integer():
        raise NotNumbers
    mask = column.is_null().to_numpy()
    values = column.fill_null(0).cast(pl.Int64).to_numpy(writable=True)
    return pd.arrays.IntegerArray(values, np.asarray(mask, dtype=bool))


def arrow_frame(
    conn: sqlite3.Connection,
    sql: str,
    *,
    texts: frozenset[str] = frozenset(),
    floats: frozenset[str] = frozenset(),
    derive: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> pd.DataFrame | None:
    """:func:`arrow_columns` as a pandas frame: integers nullable Int64, text a shared string per value.

    A column may be text only when named in ``texts`` and REAL only when named in ``floats``: the
    driver types a column from its first rows, so integers mixed with text there come back as
    text, and with REAL values as doubles (rounding integers past 2**53). Any column else must be
    integer or all NULL. A text column holds one Python string per distinct value (a few API
    names, repeated messages) unless most of its values differ (one string per row then).
    ``derive`` may replace or add polars columns before the conversion
    (work that polars does on a whole column faster than Python per value). None when
    :func:`arrow_columns` is, when ``derive`` fails, or when a column breaks these rules.
    """
    columns = _derived_columns(conn, sql, derive)
    if columns is None:
        return None
    try:
        return _frame_of(columns, texts, floats)
    except _recoverable():
        return None


def _derived_columns(
    conn: sqlite3.Connection, sql: str, derive: Callable[[dict[str, Any]], dict[str, Any]] | None
) -> dict[str, Any] | None:
    """:func:`arrow_columns` with ``derive`` applied; None when either fails."""
    columns = arrow_columns(conn, sql)
    if columns is None or derive is None:
        return columns
    try:
        return derive(columns)
    except _recoverable():
        return None


def arrow_slices(
    conn: sqlite3.Connection,
    sql: str,
    rows: int,
    *,
    texts: frozenset[str] = frozenset(),
    floats: frozenset[str] = frozenset(),
    derive: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> Iterator[pd.DataFrame] | None:
    """:func:`arrow_frame` a slice of ``rows`` rows at a time.

    The result is held as Arrow columns and one slice of it as pandas, not the whole result as
    pandas (marker messages: a Python string each).

    None when :func:`arrow_columns` is, or when ``derive`` fails; a slice that breaks
    :func:`arrow_frame`'s rules raises :class:`NotNumbers` (the caller reads the rows through
    sqlite3 instead, and drops the slices it got).
    """
    columns = _derived_columns(conn, sql, derive)
    if columns is None:
        return None
    n = len(next(iter(columns.values()))) if columns else 0

    def slices() -> Iterator[pd.DataFrame]:
        for lo in range(0, n, rows):
            try:
                frame = _frame_of({name: col.slice(lo, rows) for name, col in columns.items()}, texts, floats)
            except _recoverable() as exc:
                raise NotNumbers(str(exc)) from exc
            if frame is None:
                raise NotNumbers("a slice breaks the column rules")
            yield frame

    return slices()


def _frame_of(columns: dict[str, Any], texts: frozenset[str], floats: frozenset[str]) -> pd.DataFrame | None:
    """:func:`arrow_frame`'s conversion of the polars columns (None: a column breaks its rules).

    Takes ``columns``: each polars column is let go once converted (emptied dict), so that the
    Arrow data and its pandas copy are not both held whole.
    """
    import polars as pl

    out: dict[str, Any] = {}
    for name in list(columns):
        col = columns.pop(name)
        if col.dtype == pl.Null:
            out[name] = pd.Series([None] * len(col), dtype=object)
        elif col.dtype.is_integer():
            out[name] = arrow_integers(col)
        elif col.dtype.is_float() and name in floats:
            out[name] = col.to_numpy()
        elif col.dtype == pl.String and name in texts and col.n_unique() * 2 > len(col):
            # mostly distinct texts (marker messages): a string per row, decoded here (as below);
            # the distinct values and an Enum of them would cost ~300 MB for 10^6 messages
            try:
                strings = np.empty(len(col), dtype=object)
                strings[:] = [None if b is None else b.decode("utf-8") for b in col.cast(pl.Binary).to_list()]
            except UnicodeDecodeError:
                return None
            out[name] = strings
        elif col.dtype == pl.String and name in texts:
            distinct = col.unique(maintain_order=True).drop_nulls()
            # SQLite hands over text as stored, UTF-8 or not; polars would panic turning bad bytes
            # into Python strings: decode them here, and leave such a column to the sqlite3 path
            try:
                values = [b.decode("utf-8") for b in distinct.cast(pl.Binary).to_list()]
            except UnicodeDecodeError:
                return None
            codes = col.cast(pl.Enum(distinct)).to_physical().fill_null(-1).to_numpy().astype(np.int64)
            table = np.array([*values, None], dtype=object)
            out[name] = table[np.where(codes < 0, len(table) - 1, codes)]
        else:
            return None
    return pd.DataFrame(out, copy=False)


def typed_column(values: list[Any]) -> Any:
    """One column of sqlite3 rows, typed without rounding: Int64 when every value is an integer or NULL.

    pandas' ``read_sql`` makes an integer column with a NULL float64, which rounds integers past
    2**53 (epoch nanoseconds). Here: integers (and NULLs) -> ``Int64``; numbers with at least one
    REAL (and NULLs) -> float64; anything else, or all NULL, -> object, values as they are.
    """
    ints = floats = True
    seen = False
    for v in values:
        if v is None:
            continue
        seen = True
        if type(v) is int:
            continue
        ints = False
        if type(v) is not float:
            floats = False
            break
    if not seen:
        return np.array(values, dtype=object)
    if ints:
        mask = np.fromiter((v is None for v in values), dtype=bool, count=len(values))
        data = np.fromiter((0 if v is None else v for v in values), dtype=np.int64, count=len(values))
        return pd.arrays.IntegerArray(data, mask)
    if floats:
        return np.fromiter((np.nan if v is None else v for v in values), dtype=np.float64, count=len(values))
    return np.array(values, dtype=object)


def sqlite_frame(conn: sqlite3.Connection, sql: str, chunk_rows: int = 50_000) -> pd.DataFrame:
    """A query's rows through sqlite3, each column typed by :func:`typed_column` over the whole result.

    Rows are fetched ``chunk_rows`` at a time and kept as per-column lists (one Python object per
    value: the slow path, for results :func:`arrow_frame` does not take).
    """
    cur = conn.execute(sql)
    names = [d[0] for d in cur.description or ()]
    columns: list[list[Any]] = [[] for _ in names]
    while True:
        rows = cur.fetchmany(chunk_rows)
        if not rows:
            break
        for j, col in enumerate(zip(*rows, strict=True)):
            columns[j].extend(col)
    return pd.DataFrame({n: typed_column(c) for n, c in zip(names, columns, strict=True)}, copy=False)
