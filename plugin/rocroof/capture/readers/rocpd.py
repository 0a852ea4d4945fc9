"""Reader for rocprofv3 rocpd SQLite databases (``--output-format rocpd``, ROCm >= 7.0).

Two generations of the schema are read; which one a table follows is told by its columns, never
by the ``schema_version`` tag (``rocpd merge`` and hand-made files may lack it):

* **Schema 3** (every released rocprofiler-sdk so far, 1.0.0 for ROCm 7.0 to 1.3.5 for ROCm 10.0;
  ``schema_version`` "3" at rocm-systems ``1b1610f``, versioned 3.0.0 to 3.0.5 since):
  rocprofiler-sdk ``source/share/rocprofiler-sdk-rocpd/rocpd_tables.sql`` and
  ``rocpd_views.sql`` (rocm-systems ``1b1610f``) and the writer
  ``source/lib/output/generateRocpd.cpp``. Records carry ``nid``/``pid``/``tid`` (dispatches also
  ``agent_id``/``queue_id``/``stream_id``) and ``start``/``end`` in ns; a ``rocpd_sample`` carries
  ``timestamp``; an event's ``category_id`` is a ``rocpd_string`` id (``MARKER_CORE_RANGE_API``...).
* **Schema 4.0** (not in any release: an in-development rocpd ``rocpd_tables.sql`` and its
  ``generateRocpd.cpp`` writer, both in the public code index; ``schema_version`` "4.0.0" in the
  test fixtures of a schema 4 reader there): the time of every record is a row of
  ``rocpd_timestamp`` (``id``, ``guid``, ``value`` in ns, ``phase`` 0 instant / 1 start / 2 end,
  ``track_id``); ``rocpd_kernel_dispatch``, ``rocpd_region``, ``rocpd_memory_copy`` and
  ``rocpd_memory_allocate`` carry ``track_id``, ``start_id`` and ``end_id``, ``rocpd_sample``
  ``track_id`` and ``timestamp_id``; node, process, thread, agent, queue and stream move to
  ``rocpd_track`` (``nid``, ``ppid``, ``pid``, ``tid``, ``agent_id``, ``queue_id``,
  ``stream_id``, ``name_id``); ``category_id`` is a ``rocpd_info_category`` id whose ``name`` is
  the Perfetto category (``marker_api``, ``hip_api``, ``kernel_dispatch``...); an agent's gfx
  target moves from ``name`` to ``generic_name``; and a roctx range's message is the region's
  *name* (``name_id``) while its event's ``extdata`` ``$.message`` holds the roctx operation
  (``roctxThreadRangeA``, ``roctxMarkA``). The unsuffixed ``rocpd_kernel_dispatch`` view stays
  ``SELECT *`` of its table (ids, not times); only the convenience views (``kernels``,
  ``regions``, ``samples``, ``regions_and_samples``) join ``rocpd_timestamp`` back in. A table
  with ``track_id`` and inline ``start``/``end`` (rocm-systems ``versions/4.1.0``) is read too.

Physical tables carry a UUID suffix (``rocpd_kernel_dispatch_0000ddb5_...``); the unsuffixed
``rocpd_*`` views select from them. This reader queries the views, and falls back to the
suffixed tables (``UNION ALL`` of all suffixes, as ``rocpd merge`` does) when a database lacks
the views. It joins the base tables itself: the convenience views drop rows (``INNER JOIN``).

What is read, and from where (all times in ns of the profiler's clock):

* dispatches: ``rocpd_kernel_dispatch`` (``id`` = dispatch id) joined to
  ``rocpd_info_kernel_symbol`` (name, registers), ``rocpd_event`` (``stack_id`` = the internal
  correlation id of the launching API call), ``rocpd_string`` (``region_name_id``: the
  renamed region under ``--kernel-rename``, ``""`` otherwise) and, in schema 4,
  ``rocpd_track`` and ``rocpd_timestamp``. A dispatch without a start or an end time, or
  ending before it starts, is refused (rocprofiler-sdk writes both for every dispatch).
* counters: ``rocpd_pmc_event`` rows (one per hardware instance record) joined to
  ``rocpd_info_pmc`` on ``pmc_id`` and to the dispatch on ``event_id``; summed per dispatch and
  counter name (the ``counters_collection`` view does the same ``SUM``; schema 4 has one
  ``rocpd_info_pmc`` row per counter instance, all of one name); instance values are kept in
  record order.
* roctx ranges: ``rocpd_region`` rows whose event category is ``MARKER_*`` (schema 3) or
  ``marker_api`` (schema 4); the message is ``rocpd_event.extdata`` ``$.message`` (schema 3) or
  the region name (schema 4). Marks (start == end) are ``rocpd_sample`` rows on a
  ``rocpd_track`` (schema 3; schema 4 writes them as regions).
* launches: the non-marker ``rocpd_region`` (HIP API call) whose event ``stack_id`` equals a
  dispatch's.

Every join also matches ``guid``: ids restart in each process's tables, so in a merged
database only (guid, id) is unique. Files are opened read-only and ``immutable`` (no lock or
``-shm`` files needed) unless a non-empty ``-wal`` file holds rows not yet checkpointed. Every
failure (not SQLite, not rocpd, damaged, a value of the wrong type, marker ``extdata`` that is
not JSON, a time reference to no ``rocpd_timestamp`` row) is a :class:`~rocroof.errors.ParseError`
naming the file.

The read holds its chunk buffers, not the tables: dispatches, counter records, ranges, marks and
launch calls are read a range of ids per query (one process's file) and a slice of rows at a
time, and each shaped slice goes to spill files (:class:`rocroof.records.SpilledFrameWriter`).
A table past :data:`rocroof.spill.SPILL_MIN_BYTES` (as 8 bytes a row) comes back with every
column mapped from its file: integers as they are, texts (kernel names, agent labels, regions,
messages, API names) as categoricals whose codes are in a file, and the ggml ranges' messages as
their op, node name and invocation (:data:`rocroof.records.MARKER_PART_COLUMNS`, as
:func:`rocroof.capture.markers.compact_ranges` makes them). A smaller table is in memory, as it
always was. The sorts into time order, the matching of counter records and launch calls to
dispatches and the checks for damage go a block of rows at a time (:mod:`rocroof.keys`; a merged
database's matching excepted: its keys are sorted in memory), and the per-instance counter
values of :func:`_counters_summed` are joined in memory before they are spilled.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import re
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

import numpy as np
import pandas as pd

from ... import spill
from ...errors import ParseError
from ...fileio import COUNTER_MAX, sqlite_connect, sqlite_file
from ...keys import BLOCK, Key, has_missing, in_order, only_value, sorted_keys, sorted_order
from ...memory import release_free_memory
from ...records import (
    AGENT_COLUMNS,
    COUNTER_COLUMNS,
    DISPATCH_COLUMNS,
    INSTANCE_COLUMNS,
    LAUNCH_COLUMNS,
    MARKER_COLUMNS,
    MARKER_PART_COLUMNS,
    KeyIndex,
    PassData,
    SpilledFrameWriter,
    code_dtype,
    conform,
    dispatch_blocks,
    empty_frame,
    marker_kinds,
    non_decreasing,
    small_frame,
    stack_frames,
    take_rows,
)
from ...spill import ColumnWriter, release_pages
from ..markers import marker_messages, parse_range, split_ranges
from . import sqlite_arrow
from .sqlite_arrow import (
    NotNumbers,
    arrow_columns,
    arrow_integers,
    arrow_slices,
    sql_literal,
)

_T = TypeVar("_T")

_TABLES = (
    "rocpd_metadata",
    "rocpd_string",
    "rocpd_info_node",
    "rocpd_info_process",
    "rocpd_info_agent",
    "rocpd_info_pmc",
    "rocpd_info_kernel_symbol",
    "rocpd_track",
    "rocpd_timestamp",
    "rocpd_info_category",
    "rocpd_event",
    "rocpd_pmc_event",
    "rocpd_region",
    "rocpd_sample",
    "rocpd_kernel_dispatch",
)

#: ``_<uuid>`` with ``-`` replaced by ``_`` (``generateRocpd.cpp`` ``replace_uuid``).
_UUID_SUFFIX = re.compile(r"_[0-9A-Fa-f]{8}_[0-9A-Fa-f]{4}_[0-9A-Fa-f]{4}_[0-9A-Fa-f]{4}_[0-9A-Fa-f]{12}$")

#: How far :func:`is_rocpd` looks for rocpd table names in a file whose schema SQLite cannot read.
_PROBE_BYTES = 8 << 20

_DAMAGED = "the file may be truncated, damaged or still being written"


def is_rocpd(path: Path) -> bool:
    """True when ``path`` is an SQLite file with a rocpd kernel dispatch view or table.

    A file with the SQLite header whose schema cannot be read (truncated, damaged) still counts
    when its first pages name a rocpd kernel dispatch table, so that reading it reports the
    damage instead of an unknown format.
    """
    try:
        with sqlite_file(path) as plain:  # scrub --gzip writes *_results.db.gz
            with open(plain, "rb") as fh:
                if fh.read(16) != b"SQLite format 3\x00":
                    return False
            conn = _connect(plain)
            try:
                names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
            except (sqlite3.Error, UnicodeDecodeError, MemoryError):  # damaged (MemoryError: SQLITE_NOMEM)
                return _names_rocpd_table(plain)
            finally:
                conn.close()
    except (OSError, sqlite3.Error, ParseError):
        return False
    return any(_logical_name(n) == "rocpd_kernel_dispatch" for n in names)


def _names_rocpd_table(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            head = fh.read(_PROBE_BYTES)
    except OSError:
        return False
    return b"rocpd_kernel_dispatch" in head


def _reason(exc: BaseException) -> str:
    """What went wrong, in words (sqlite3 reports SQLITE_NOMEM as a MemoryError without a message)."""
    if isinstance(exc, MemoryError):
        return "SQLite ran out of memory: a damaged page can claim a record of any size"
    return str(exc)


def _logical_name(name: str) -> str:
    """``rocpd_x_<uuid>`` -> ``rocpd_x``; other names unchanged."""
    m = _UUID_SUFFIX.search(name)
    return name[: m.start()] if m else name


def _connect(path: Path) -> sqlite3.Connection:
    # immutable: no lock, -wal or -shm file beside the capture; sqlite_file copies one being written
    return sqlite_connect(path)


@contextmanager
def _open(path: Path) -> Iterator[tuple[sqlite3.Connection, dict[str, str]]]:
    """A read-only connection and the resolved table sources (a ``.gz`` decompressed); ParseError when unreadable."""
    with sqlite_file(path) as plain:
        try:
            conn = _connect(plain)
        except sqlite3.Error as exc:
            raise ParseError(path, f"cannot open as an SQLite database ({exc})") from exc
        try:
            try:
                src = _resolve(conn, path)
            except (sqlite3.Error, UnicodeDecodeError, MemoryError) as exc:
                raise ParseError(path, f"cannot read the rocpd database ({_reason(exc)}); {_DAMAGED}") from exc
            yield conn, src
        finally:
            conn.close()


def _resolve(conn: sqlite3.Connection, path: Path) -> dict[str, str]:
    """Map each logical rocpd table to a FROM-clause source (view, table, or UNION ALL)."""
    rows = conn.execute("SELECT name, type FROM sqlite_master WHERE type IN ('table','view')").fetchall()
    names = {str(name) for name, _ in rows}
    out: dict[str, str] = {}
    for logical in _TABLES:
        if logical in names:
            out[logical] = f'"{logical}"'
            continue
        suffixed = sorted(n for n in names if n != logical and _logical_name(n) == logical)
        if suffixed:
            out[logical] = "(" + " UNION ALL ".join(f'SELECT * FROM "{n}"' for n in suffixed) + ")"
    if "rocpd_kernel_dispatch" not in out:
        raise ParseError(path, "not a rocpd database (no rocpd_kernel_dispatch view or table)")
    return out


def _columns(conn: sqlite3.Connection, source: str) -> frozenset[str]:
    """The column names of a resolved table source (a view, a table or a ``UNION ALL``)."""
    cur = conn.execute(f"SELECT * FROM {source} LIMIT 0")
    return frozenset(str(d[0]) for d in cur.description or ())


@dataclass(frozen=True)
class _Placement:
    """SQL for where a record's process, thread, agent, queue, stream and times are.

    Schema 3 keeps them on the record (``pid``, ``start``...); schema 4 moves process, thread,
    agent, queue and stream to the record's ``rocpd_track`` row and (4.0) its times to
    ``rocpd_timestamp`` rows that ``start_id``/``end_id`` (a sample: ``timestamp_id``) name.
    Each field is an SQL expression over the record's alias and :attr:`joins`; ``refs`` are the
    record's timestamp reference columns (``None`` where its times are inline) and ``ref_names``
    their column names, for messages.
    """

    pid: str
    tid: str
    agent: str
    queue: str
    stream: str
    start: str
    end: str
    joins: str
    refs: tuple[str, str] | None = None
    ref_names: tuple[str, str] = ("start_id", "end_id")


def _placement(
    conn: sqlite3.Connection, src: dict[str, str], path: Path, table: str, alias: str, *, instant: bool = False
) -> _Placement:
    """Where ``table``'s records (SQL alias ``alias``) keep their owner and times, from its columns.

    Args:
        conn: the open database.
        src: the resolved table sources (:func:`_resolve`).
        path: the file, for messages.
        table: the logical table (``rocpd_kernel_dispatch``, ``rocpd_region``, ``rocpd_sample``).
        alias: the table's alias in the query the fragments go into.
        instant: the table records instants (``rocpd_sample``: ``timestamp`` or ``timestamp_id``)
            rather than intervals (``start``/``end`` or ``start_id``/``end_id``).

    Raises:
        ParseError: the table has none of those time columns, or references ``rocpd_timestamp``
            in a database without it.
    """
    cols = _columns(conn, src[table])
    joins: list[str] = []
    owner, owner_cols = alias, cols
    if "pid" not in cols and "track_id" in cols and "rocpd_track" in src:
        owner = f"{alias}_track"
        owner_cols = _columns(conn, src["rocpd_track"])
        joins.append(
            f"LEFT JOIN {src['rocpd_track']} {owner} ON {owner}.id = {alias}.track_id AND {owner}.guid = {alias}.guid"
        )

    def of_owner(column: str) -> str:
        return f"{owner}.{column}" if column in owner_cols else "NULL"

    first, last = ("timestamp", "timestamp") if instant else ("start", "end")
    refs: tuple[str, str] | None = None
    ref_names = ("timestamp_id", "timestamp_id") if instant else ("start_id", "end_id")
    if first in cols:
        start, end = f'{alias}."{first}"', f'{alias}."{last}"'
    elif ref_names[0] in cols:
        if "rocpd_timestamp" not in src:
            raise ParseError(
                path, f"{table} refers to rocpd_timestamp rows ({ref_names[0]}) but the database has no rocpd_timestamp"
            )
        times = []
        for name in dict.fromkeys(ref_names):  # a sample's one timestamp is joined once
            ts = f"{alias}_{name}"
            joins.append(
                f"LEFT JOIN {src['rocpd_timestamp']} {ts} ON {ts}.id = {alias}.{name} AND {ts}.guid = {alias}.guid"
            )
            times.append(f"{ts}.value")
        start, end = times[0], times[-1]
        refs = (f"{alias}.{ref_names[0]}", f"{alias}.{ref_names[1]}")
    else:
        wanted = "timestamp or timestamp_id" if instant else "start/end or start_id/end_id"
        raise ParseError(path, f"{table} has no {wanted} column: not a rocpd schema 3 or 4 table")
    return _Placement(
        pid=of_owner("pid"),
        tid=of_owner("tid"),
        agent=of_owner("agent_id"),
        queue=of_owner("queue_id"),
        stream=of_owner("stream_id"),
        start=start,
        end=end,
        joins=" ".join(joins),
        refs=refs,
        ref_names=ref_names,
    )


def _category(src: dict[str, str], event: str, alias: str) -> tuple[str, str]:
    """The JOIN giving an event's category name, and the SQL of that name.

    Schema 3 names categories in ``rocpd_string`` (``MARKER_CORE_RANGE_API``); schema 4 in
    ``rocpd_info_category`` (``marker_api``), whose presence tells them apart.
    """
    if "rocpd_info_category" in src:
        table, column = src["rocpd_info_category"], "name"
    else:
        table, column = src["rocpd_string"], "string"
    join = f"LEFT JOIN {table} {alias} ON {alias}.id = {event}.category_id AND {alias}.guid = {event}.guid"
    return join, f"{alias}.{column}"


def _is_marker(category: str) -> str:
    """SQL: the category (SQL expression) is a roctx one (schema 3 ``MARKER_*``, schema 4 ``marker_api``)."""
    return f"({category} GLOB 'MARKER*' OR {category} = 'marker_api')"


#: Rows converted per step: a large result (8 counter rows per dispatch...) is turned into columns
#: chunk by chunk, so that its Python row tuples never all exist at once.
FETCH_ROWS = 50_000

#: Rows of an ADBC result turned into pandas at a time (:func:`_arrow_pages`: markers and API
#: calls; at most :data:`FETCH_ROWS`): a marker's message is a Python string while its slice is
#: shaped (2^14 rows a slice: the read's peak ~12 MB lower at 10^6 dispatches, ~7% slower).
SLICE_ROWS = 1 << 15


@contextmanager
def _query_failed(path: Path) -> Iterator[None]:
    """A query that fails in the block (damaged database) as a :class:`~rocroof.errors.ParseError` naming ``path``."""
    try:
        yield
    except (sqlite3.Error, pd.errors.DatabaseError, UnicodeDecodeError, MemoryError) as exc:
        # pandas wraps the sqlite3 error in a message that repeats the whole statement
        cause = exc.__cause__ if isinstance(exc.__cause__, sqlite3.Error) else exc
        raise ParseError(
            path, f"rocpd query failed ({_reason(cause)}); {_DAMAGED}, or not a rocpd schema 3 or 4 database"
        ) from exc


def _query(conn: sqlite3.Connection, path: Path, sql: str, params: Sequence[object] = ()) -> pd.DataFrame:
    """A query's rows in memory, every column typed as by one read of the whole result.

    Raises:
        ParseError: the query fails (damaged database).
    """
    parts = list(_query_chunks(conn, path, sql, params))
    if len(parts) == 1:
        return parts[0]
    if all(p.dtypes.equals(parts[0].dtypes) for p in parts):
        return pd.concat(parts, ignore_index=True)
    # the chunks typed a column differently (NULLs or mixed values in part of it): read the result
    # whole, so that every column gets the type of one read
    del parts
    with _query_failed(path):
        return _shared_strings(pd.read_sql_query(sql, conn, params=list(params)))


def _query_chunks(
    conn: sqlite3.Connection, path: Path, sql: str, params: Sequence[object] = ()
) -> Iterator[pd.DataFrame]:
    """A query's rows through pandas' typed read, :data:`FETCH_ROWS` at a time (each column typed per chunk).

    Raises:
        ParseError: (while iterating) the query fails (damaged database).
    """
    with _query_failed(path):
        for part in pd.read_sql_query(sql, conn, params=list(params), chunksize=FETCH_ROWS):
            yield _shared_strings(part)


def _shaped(
    conn: sqlite3.Connection,
    path: Path,
    sql: str,
    params: Sequence[object],
    shape: Callable[[pd.DataFrame], pd.DataFrame],
    columns: dict[str, str],
) -> pd.DataFrame:
    """Run a query a chunk of :data:`FETCH_ROWS` rows at a time; the chunks ``shape`` makes, in spill files.

    ``shape(chunk)`` gives each chunk its final columns and dtypes (``columns``, as
    :class:`~rocroof.records.SpilledFrameWriter` takes them), so that a raw chunk lives only while it is
    shaped and written out: the result maps its columns from spill files (in memory when small).

    Raises:
        ParseError: the query fails (damaged database), or ``shape`` finds a bad value.
    """
    with SpilledFrameWriter(columns, **_KIND) as writer:
        for part in _query_chunks(conn, path, sql, params):
            writer.add(shape(part))
            del part
        return writer.finish()


#: :func:`_shaped` where it reads a table through sqlite3 because the fast paths cannot take it
#: (dispatches, ranges, launch calls): a name of its own, that tells those reads from the marks'
#: only read (the tests count them).
_chunked = _shaped


def _spilled_frame(frame: pd.DataFrame, columns: dict[str, str]) -> pd.DataFrame:
    """``frame`` (of ``columns``' dtypes) in spill files, a block at a time (:class:`SpilledFrameWriter`)."""
    with SpilledFrameWriter(columns, **_KIND) as writer:
        writer.add_frame(frame, BLOCK)
        del frame
        return writer.finish()


def _shared_strings(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with each repeated value of a text column held once (same values and dtypes).

    sqlite3 returns a new string object per row: a guid or counter name repeated on millions of
    rows would take that many copies.
    """
    for name in df.columns:
        col = df[name]
        if len(col) < 2 or col.dtype == object or not pd.api.types.is_string_dtype(col.dtype):
            continue
        codes = col.astype("category")
        if 2 * len(codes.cat.categories) < len(col):
            df[name] = codes.astype(col.dtype)
    return df


#: The rocpd column each of rocroof's record columns is read from, for messages (rocprofiler-sdk's
#: ``rocpd_kernel_dispatch``, ``rocpd_region``, ``rocpd_event`` views; times may come through
#: ``rocpd_timestamp`` in schema 4, the process and thread through ``rocpd_info_*``).
_ROCPD_COLUMN = {
    "dispatch_id": "id",
    "start_ns": "start",
    "end_ns": "end",
    "correlation_id": "stack_id",
    "process_id": "pid",
    "thread_id": "tid",
    "scratch_bytes": "private_segment_size",
    "lds_bytes": "group_segment_size",
    "vgpr_count": "arch_vgpr_count",
    **{f"grid_{c}": f"grid_size_{c}" for c in "xyz"},
    **{f"workgroup_{c}": f"workgroup_size_{c}" for c in "xyz"},
}


def _conform(df: pd.DataFrame, columns: dict[str, str], path: Path, what: str) -> pd.DataFrame:
    """:func:`conform`, with a ParseError naming the record and its rocpd column when a value has the wrong type.

    The record is named by ``df``'s ``id`` (or ``dispatch_id``: a dispatch's rocpd id) where it has one.
    """
    try:
        with np.errstate(invalid="ignore", over="ignore"):  # 1e308 in an integer column: no stray warning
            return conform(df, columns)
    except (ValueError, TypeError, OverflowError):
        for name, dtype in columns.items():
            if name not in df.columns or dtype == "object":
                continue
            try:
                with np.errstate(invalid="ignore", over="ignore"):
                    df[name].astype(dtype)
            except (ValueError, TypeError, OverflowError) as exc:
                values = df[name].tolist()
                pos = next((i for i, v in enumerate(values) if not _castable(v, dtype)), None)
                bad = values[pos] if pos is not None else None
                key = next((k for k in ("id", "dispatch_id") if k in df.columns and k != name), None)
                record = f" id {_shown(df[key].iloc[pos])}" if key is not None and pos is not None else ""
                kind = "a number" if dtype.startswith("float") else "an integer"
                column = _ROCPD_COLUMN.get(name, name)
                raise ParseError(path, f"{what}{record}: {column} holds {bad!r}, not {kind}") from exc
        raise


def _castable(value: object, dtype: str) -> bool:
    try:
        with np.errstate(invalid="ignore", over="ignore"):
            pd.Series([value]).astype(dtype)
    except (ValueError, TypeError, OverflowError):
        return False
    return True


#: A marker's extdata as rocprofv3 writes it: one "message" string with no escapes or control characters.
_SIMPLE_MESSAGE = re.compile(r'\{[ \t\n\r]*"message"[ \t\n\r]*:[ \t\n\r]*"([^"\\\x00-\x1f]*)"[ \t\n\r]*\}')


#: :data:`_SIMPLE_MESSAGE` for polars' regex engine (Rust), anchored at both ends as ``fullmatch`` is.
_SIMPLE_MESSAGE_WHOLE = f"^{_SIMPLE_MESSAGE.pattern}$"


def _simple_messages(columns: dict[str, Any]) -> dict[str, Any]:
    """Polars columns ``simple_message`` and ``extdata`` as :func:`_extdata_columns`' SQL gives them.

    A text ``extdata`` that :data:`_SIMPLE_MESSAGE` matches whole gives its message and drops out of
    ``extdata``; every other value stays for :func:`_message` to read or refuse. Raises (and the
    caller reads the rows through sqlite3) when ``extdata`` is not one text column.
    """
    import polars as pl

    ext = columns["extdata"]
    if ext.dtype == pl.Null or not len(ext):  # no text (an empty result is typed by the driver's guess)
        return columns
    if ext.dtype != pl.String:
        raise NotNumbers("extdata is not text")
    simple = ext.str.extract(_SIMPLE_MESSAGE_WHOLE, 1)
    return {**columns, "simple_message": simple, "extdata": ext.set(simple.is_not_null(), None)}


def _has_json(conn: sqlite3.Connection) -> bool:
    """Whether the SQLite library has the JSON functions (built in from 3.38; an extension before)."""
    try:
        conn.execute("SELECT json_valid('{}')").fetchone()
    except sqlite3.Error:
        return False
    return True


def _extdata_columns(extdata: str) -> str:
    """SQL for ``simple_message`` and ``extdata``: a marker's message found by SQLite where that is sure.

    ``simple_message`` is the ``$.message`` of an ``extdata`` that is text, valid JSON, an object
    with that one key, a string value and no escape anywhere (what rocprofv3 writes): there
    SQLite's reading equals :func:`_message`'s. Every other ``extdata`` comes back as it is, in
    ``extdata``, for :func:`_message` to read or refuse; a simple one comes back NULL there.
    """
    sure = (
        f"typeof({extdata}) = 'text' AND instr({extdata}, char(92)) = 0 "
        f"AND NOT {extdata} GLOB ('*[' || char(1) || '-' || char(31) || ']*') AND json_valid({extdata}) "
        f"AND json_type({extdata}) = 'object' AND json_type({extdata}, '$.message') = 'text' "
        f"AND json_remove({extdata}, '$.message') = '{{}}'"
    )
    return (
        f"(CASE WHEN {sure} THEN json_extract({extdata}, '$.message') END) AS simple_message, "
        f"(CASE WHEN {sure} THEN NULL ELSE {extdata} END) AS extdata"
    )


def _message(path: Path, table: str, row_id: object, event_id: object, extdata: object) -> str | None:
    """The ``$.message`` of a marker event's ``extdata`` (None when absent)."""
    if extdata is None or (isinstance(extdata, float) and np.isnan(extdata)):
        return None
    if isinstance(extdata, bytes):
        try:
            extdata = extdata.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ParseError(path, f"rocpd_event id {event_id} ({table} id {row_id}): extdata is not UTF-8") from exc
    text = str(extdata)
    simple = _SIMPLE_MESSAGE.fullmatch(text)
    if simple is not None:  # {"message": "..."} without escapes: what json.loads would give
        return simple.group(1)
    if not text.strip():
        return None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseError(
            path, f"rocpd_event id {event_id} ({table} id {row_id}): extdata is not valid JSON ({exc.msg})"
        ) from exc
    except RecursionError as exc:  # json.loads recurses once per nesting level
        raise ParseError(
            path, f"rocpd_event id {event_id} ({table} id {row_id}): extdata is not valid JSON (nested too deeply)"
        ) from exc
    msg = data.get("message") if isinstance(data, dict) else None
    return None if msg is None else str(msg)


def read_metadata(path: Path) -> dict[str, str]:
    """Run-level facts of a rocpd database: command, host, schema version, profiler.

    Returns:
        ``rocpd_<tag>`` for each ``rocpd_metadata`` row, plus ``command`` (the first process's
        command line) and ``host`` (the node's host name) when recorded.

    Raises:
        ParseError: not a readable rocpd database.
    """
    with _open(path) as (conn, src):
        try:
            meta: dict[str, str] = {}
            if "rocpd_metadata" in src:
                for tag, value in conn.execute(f"SELECT tag, value FROM {src['rocpd_metadata']} ORDER BY id"):
                    meta[f"rocpd_{tag}"] = str(value)
            if "rocpd_info_process" in src:
                row = conn.execute(f"SELECT command FROM {src['rocpd_info_process']} LIMIT 1").fetchone()
                if row and row[0]:
                    meta["command"] = str(row[0])
            if "rocpd_info_node" in src:
                row = conn.execute(f"SELECT hostname FROM {src['rocpd_info_node']} LIMIT 1").fetchone()
                if row and row[0]:
                    meta["host"] = str(row[0])
            return meta
        except (sqlite3.Error, UnicodeDecodeError, MemoryError) as exc:
            raise ParseError(path, f"rocpd query failed ({_reason(exc)}); {_DAMAGED}") from exc


def _int_or_none(value: object) -> int | None:
    """An integer extdata field, or None (bools, strings, floats with a fraction are not counts)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def read_agents(path: Path) -> pd.DataFrame:
    """GPU and CPU agents of a rocpd database as :data:`~rocroof.records.AGENT_COLUMNS`.

    ``agent_label`` is the ``rocpd_info_agent.id`` that dispatches reference; ``gfx_arch`` is its
    ``name`` (schema 3) or ``generic_name`` (schema 4, where ``name`` is the product name). ``cu_count``,
    ``simd_count``, ``num_xcc``, ``wave_size`` and ``pci_device_id`` come from the agent's
    ``extdata`` JSON when it holds them as integers (``wave_front_size`` for the wave size,
    ``device_id`` for the PCI device id).

    Raises:
        ParseError: not a readable rocpd database.
    """
    with _open(path) as (conn, src):
        if "rocpd_info_agent" not in src:
            return empty_frame(AGENT_COLUMNS)
        try:
            # schema 4 moves the gfx target to generic_name ("name" becomes an optional user name)
            generic = "generic_name" in _columns(conn, src["rocpd_info_agent"])
        except (sqlite3.Error, UnicodeDecodeError, MemoryError) as exc:
            raise ParseError(path, f"rocpd query failed ({_reason(exc)}); {_DAMAGED}") from exc
        gfx = "COALESCE(NULLIF(generic_name, ''), name)" if generic else "name"
        df = _query(
            conn,
            path,
            f"SELECT id, type, absolute_index, logical_index, {gfx} AS name, product_name, extdata "
            f"FROM {src['rocpd_info_agent']} ORDER BY id",
        )
    rows = []
    for rec in df.itertuples(index=False):
        extra: dict[str, object] = {}
        if isinstance(rec.extdata, str | bytes) and rec.extdata:
            try:
                loaded = json.loads(rec.extdata)
                extra = loaded if isinstance(loaded, dict) else {}
            except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
                extra = {}  # agent details are optional: a bad extdata loses them, nothing else
        rows.append(
            {
                "agent_label": None if pd.isna(rec.id) else str(int(rec.id)),
                "node_id": rec.absolute_index,
                "logical_node_id": rec.logical_index,
                "agent_type": rec.type,
                "gfx_arch": rec.name,
                "product_name": rec.product_name,
                "cu_count": _int_or_none(extra.get("cu_count")),
                "simd_count": _int_or_none(extra.get("simd_count")),
                "num_xcc": _int_or_none(extra.get("num_xcc")),
                "wave_size": _int_or_none(extra.get("wave_front_size")),
                "pci_device_id": _int_or_none(extra.get("device_id")),  # rocprofiler_agent_v0_t.device_id
            }
        )
    return _conform(pd.DataFrame(rows), AGENT_COLUMNS, path, "rocpd_info_agent")


def read_pass(path: Path, label: str, keep_instances: bool = True) -> PassData:
    """Read one rocpd database (one process of one pass) into a :class:`PassData`.

    A database merged from several processes (``rocpd merge``: several table suffixes) is read
    as a whole; rows are told apart by their ``guid``. Dispatches are ordered by process id,
    guid and dispatch id.

    Args:
        path: the ``*_results.db`` file.
        label: the pass label to record.
        keep_instances: also return per-instance counter values (can be large: one row per
            TCC channel per counter per dispatch).

    Returns:
        The pass: ``counter`` kind when it holds counter values, else ``trace``.

    Raises:
        ParseError: not a rocpd database, or a query/JSON decoding failure.
    """
    with _open(path) as (conn, src):
        try:
            return _read_pass(conn, src, path, label, keep_instances)
        except (sqlite3.Error, UnicodeDecodeError, MemoryError) as exc:
            raise ParseError(path, f"rocpd query failed ({_reason(exc)}); {_DAMAGED}") from exc


def _read_pass(conn: sqlite3.Connection, src: dict[str, str], path: Path, label: str, keep_instances: bool) -> PassData:
    kd, ev, st, ks = (
        src["rocpd_kernel_dispatch"],
        src.get("rocpd_event"),
        src.get("rocpd_string"),
        src.get("rocpd_info_kernel_symbol"),
    )
    # ids restart in every process of a merged database: rows are told apart by guid, which is
    # fetched as a small code (its position among the dispatches' guids), not as text per row
    guids = [r[0] for r in conn.execute(f"SELECT DISTINCT guid FROM {kd}")]
    at = _placement(conn, src, path, "rocpd_kernel_dispatch", "kd")
    select = [
        f"{_code('kd.guid', guids)} AS guid",
        "kd.id AS dispatch_id",
        f"{at.pid} AS process_id",
        f"{at.tid} AS thread_id",
        f"{at.agent} AS agent_label",
        "kd.kernel_id AS kernel_id",
        f"{at.queue} AS queue_id",
        f"{at.stream} AS stream_id",
        f"{at.start} AS start_ns",
        f"{at.end} AS end_ns",
        "kd.private_segment_size AS scratch_bytes",
        "kd.group_segment_size AS lds_bytes",
        "kd.workgroup_size_x AS workgroup_x",
        "kd.workgroup_size_y AS workgroup_y",
        "kd.workgroup_size_z AS workgroup_z",
        "kd.grid_size_x AS grid_x",
        "kd.grid_size_y AS grid_y",
        "kd.grid_size_z AS grid_z",
        "kd.event_id AS event_id",
    ]
    if at.refs is not None:
        select += [f"{at.refs[0]} AS start_ref", f"{at.refs[1]} AS end_ref"]
    joins = [at.joins]
    if ks:
        select += [
            # display_name is the demangled name; an empty one falls back to the symbol
            "COALESCE(NULLIF(ks.display_name, ''), ks.kernel_name) AS kernel_name",
            "ks.sgpr_count AS sgpr_count",
            "ks.arch_vgpr_count AS vgpr_count",
            "ks.accum_vgpr_count AS accum_vgpr_count",
        ]
        joins.append(f"LEFT JOIN {ks} ks ON ks.id = kd.kernel_id AND ks.guid = kd.guid")
    if ev:
        select.append("e.stack_id AS correlation_id")
        joins.append(f"LEFT JOIN {ev} e ON e.id = kd.event_id AND e.guid = kd.guid")
    if st:
        select.append("rs.string AS region")
        joins.append(f"LEFT JOIN {st} rs ON rs.id = kd.region_name_id AND rs.guid = kd.guid")

    def owner(chunk: pd.DataFrame, i: int) -> str:
        """The words naming row ``i``'s process in a merged database (where ids repeat), else ""."""
        code = int(chunk["guid"].iloc[i])
        return f" of process {guids[code]}" if len(guids) > 1 and 0 <= code < len(guids) else ""

    def shape(chunk: pd.DataFrame) -> pd.DataFrame:
        """A chunk of dispatch rows in their final form (plus the guid code and event id)."""
        if "region" in chunk:
            chunk["region"] = _per_value(
                chunk["region"], lambda r: r if isinstance(r, str) and parse_range(r) is not None else None
            )
        for axis in ("grid", "workgroup"):
            dims = [f"{axis}_{c}" for c in "xyz"]
            # (the dispatch's id along, to name a bad value's record; conform leaves it out)
            chunk[dims] = _conform(
                chunk[[*dims, "dispatch_id"]], dict.fromkeys(dims, "Int64"), path, "rocpd_kernel_dispatch"
            )
            chunk[f"{axis}_size"] = chunk[dims[0]] * chunk[dims[1]] * chunk[dims[2]]
        chunk["agent_label"] = _per_value(chunk["agent_label"], _label)
        out = _conform(chunk, DISPATCH_COLUMNS, path, "rocpd_kernel_dispatch")
        _refuse_bad_times(
            path, "rocpd_kernel_dispatch", out["dispatch_id"], out, chunk, at, "dispatch", lambda i: owner(chunk, i)
        )
        out["guid"] = chunk["guid"].to_numpy(dtype=np.int64)
        out["event_id"] = _int_ids(chunk["event_id"], path, "rocpd_kernel_dispatch", "event_id").array
        return out

    # the dispatches' (guid code, correlation id), set before the API calls are read (which need it)
    launched: _Launched | None = None
    with (
        _beside(conn, lambda c: _host_markers(c, src, path)) as host_markers,
        _beside(conn, lambda c: _host_calls(c, src, path, guids, launched)) as host_calls,
    ):
        host_markers.start()  # the markers need nothing of the dispatches: read while they are
        order_by = f"ORDER BY {at.pid}, kd.guid, kd.id"
        fast = _dispatches_as_integers(conn, src, path, guids, at, joins, order_by, bool(ev), owner) if _FAST else None
        if fast is not None:
            dispatches = fast
        else:
            dispatches = _chunked(
                conn,
                path,
                f"SELECT {', '.join(select)} FROM {kd} kd {' '.join(joins)} {order_by}",
                guids,
                shape,
                _DISPATCH_READ,
            )
        guid_code = dispatches.pop("guid").to_numpy(dtype=np.int64)  # (the spilled column itself, not a copy)
        event_ids = dispatches.pop("event_id").array
        _refuse_repeated_dispatches(guid_code, dispatches["dispatch_id"], guids, path)
        # (guid, event id) -> dispatch row: ids restart in every process of a merged database
        rows = _EventRows(guid_code, event_ids)
        del event_ids
        launched = _Launched(guid_code, dispatches["correlation_id"]) if ev else None
        del guid_code

        release_free_memory()  # each query's Arrow and conversion buffers go back before the next query
        host_calls.start()  # the API calls, read while the counters are (and the markers' rest)
        counters, instances = _pass_counters(conn, src, path, guids, rows, keep_instances)
        del rows
        release_free_memory()
        markers, calls = host_markers(), host_calls()
    launches = empty_frame(LAUNCH_COLUMNS) if calls is None else calls
    del calls
    return PassData(
        kind="counter" if len(counters) else "trace",
        label=label,
        source=str(path),
        dispatches=dispatches,
        counters=counters,
        instances=instances,
        markers=markers,
        launches=launches,
    )


def _pass_counters(
    conn: sqlite3.Connection,
    src: dict[str, str],
    path: Path,
    guids: list[object],
    rows: _EventRows,
    keep_instances: bool,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The pass's counter values (summed per dispatch) and per-instance values (COUNTER_COLUMNS, INSTANCE_COLUMNS).

    ``rows`` finds the dispatch row of a record's (guid code, event id).
    """
    counters = empty_frame(COUNTER_COLUMNS)
    instances = empty_frame(INSTANCE_COLUMNS)
    if "rocpd_pmc_event" in src and "rocpd_info_pmc" in src:
        _refuse_unnamed_counters(conn, src, path)
        fast = _counters_one_record_each(conn, src, path, guids, rows)
        if fast is not None:
            counters = fast
        else:  # several records of one counter per dispatch (hardware instances), or damage: SQL sums them
            counters, instances = _counters_summed(conn, src, path, guids, rows.frame(), keep_instances)
            # (summed by SQL and joined in memory: the path of hardware instances; its results are spilled)
            counters = _spilled_frame(counters, COUNTER_COLUMNS)
            instances = _spilled_frame(instances, INSTANCE_COLUMNS)
    return counters, instances


def _has_regions(src: dict[str, str]) -> bool:
    """True when the database has what roctx markers and API calls are read from (events, strings, regions)."""
    return bool(src.get("rocpd_event") and src.get("rocpd_string") and "rocpd_region" in src)


def _host_markers(conn: sqlite3.Connection, src: dict[str, str], path: Path) -> pd.DataFrame:
    """The pass's roctx markers (MARKER_COLUMNS); none without a region table."""
    if not _has_regions(src):
        return empty_frame(MARKER_COLUMNS)
    markers = _markers(conn, src, path, paged=_one_guid(conn, src["rocpd_region"]))
    release_free_memory()
    return markers


def _host_calls(
    conn: sqlite3.Connection, src: dict[str, str], path: Path, guids: list[object], launched: _Launched | None
) -> pd.DataFrame | None:
    """The API calls that launched the pass's dispatches (:func:`_api_calls`).

    ``launched``: the dispatches' (guid code, correlation id) keys (None without an event
    table). None without a region table or without dispatches.
    """
    if not _has_regions(src) or launched is None or not len(launched):
        return None
    return _api_calls(conn, src, path, guids, launched)


def _one_guid(conn: sqlite3.Connection, table: str) -> bool:
    """True when ``table``'s rows carry at most one ``guid`` (one process's records)."""
    (count,) = conn.execute(f"SELECT COUNT(*) FROM (SELECT DISTINCT guid FROM {table} LIMIT 2)").fetchone()
    return bool(count <= 1)


class _Beside(Generic[_T]):
    """Work started on a second thread when asked (:meth:`start`), its result read by calling the object."""

    def __init__(self, pool: ThreadPoolExecutor | None, job: Callable[[], _T]) -> None:
        self._pool, self._job = pool, job
        self.future: Future[_T] | None = None

    def start(self) -> None:
        """Start the work now (on the second thread), unless started already."""
        if self.future is None and self._pool is not None:
            self.future = self._pool.submit(self._job)

    def __call__(self) -> _T:
        """The work's result (run here, now, when it was never started); its error is raised here."""
        if self.future is None:
            return self._job()
        return self.future.result()


@contextmanager
def _beside(conn: sqlite3.Connection, work: Callable[[sqlite3.Connection], _T]) -> Iterator[_Beside[_T]]:
    """Run ``work`` on a second connection to ``conn``'s file in a second thread, once started; yield its handle.

    SQLite steps a query into Arrow without the GIL (:mod:`.sqlite_arrow`), so the host-side
    queries run while the main thread reads the dispatches and counters: :func:`_read_pass` starts
    the markers at once and the API calls (which need the dispatches' keys) once the dispatches
    are read, each on its own thread (``handle.start()``). Every read goes to spill files a chunk
    at a time, so they may overlap: at 10^6 dispatches the read took 8.3 s instead of 10.0 s
    (markers and calls one after the other, from the end of the dispatches), at a 243 MB peak.
    An error of the block comes before one of ``work`` (the order of a sequential read);
    ``work``'s comes out of the handle's call. Where the file has no name (a database in
    memory), ``work`` runs on ``conn`` when the handle is called.
    """
    row = conn.execute("PRAGMA database_list").fetchone()
    if row is None or not row[2]:
        yield _Beside(None, lambda: work(conn))
        return
    file = Path(row[2])

    def job() -> _T:
        own = _connect(file)
        try:
            return work(own)
        finally:
            own.close()

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="rocroof-rocpd") as pool:
        handle = _Beside(pool, job)
        try:
            yield handle
        finally:
            if handle.future is not None:
                handle.future.cancel()  # the block failed before it asked: do not start what nobody reads


#: Read dispatch records as integers (:func:`_dispatches_as_integers`) where they allow it; the
#: tests turn it off to compare with the general path.
_FAST = True


def _unique_ids(conn: sqlite3.Connection, table: str) -> bool:
    """True when ``table``'s (guid, id) pairs are unique (a LEFT JOIN on them adds no rows)."""
    row = conn.execute(f"SELECT COUNT(*), COUNT(DISTINCT quote(guid) || ':' || quote(id)) FROM {table}").fetchone()
    return bool(row is not None and row[0] == row[1])


def _dispatches_as_integers(
    conn: sqlite3.Connection,
    src: dict[str, str],
    path: Path,
    guids: list[object],
    at: _Placement,
    joins: list[str],
    order_by: str,
    with_events: bool,
    owner: Any,
) -> pd.DataFrame | None:
    """The dispatch rows of :func:`_read_pass` read as integers: the same frame, several times faster.

    Every column of a dispatch record is an integer but the kernel's name and the
    ``--kernel-rename`` region, which are numbers too (the kernel symbol's and the string's id)
    until they are looked up once per distinct id (a chunk of rows at a time). Returns None (the
    caller reads the rows through pandas, which names a bad value) when a value is not an integer,
    or when kernel symbol or string ids repeat within a process (a join on them would add rows).

    Returns:
        :data:`_DISPATCH_READ` columns, in spill files (:class:`~rocroof.records.SpilledFrameWriter`).

    Raises:
        ParseError: a dispatch without a start or end time, or ending before it starts.
    """
    kd, ks, st = src["rocpd_kernel_dispatch"], src.get("rocpd_info_kernel_symbol"), src.get("rocpd_string")
    if (ks and not _unique_ids(conn, ks)) or (st and not _unique_ids(conn, st)):
        return None
    exprs = {
        "guid": _literal_code("kd.guid", guids),  # no parameters: ADBC statements take none
        "dispatch_id": "kd.id",
        "process_id": at.pid,
        "thread_id": at.tid,
        "agent": at.agent,
        "kernel_id": "kd.kernel_id",
        "queue_id": at.queue,
        "stream_id": at.stream,
        "start_ns": at.start,
        "end_ns": at.end,
        "scratch_bytes": "kd.private_segment_size",
        "lds_bytes": "kd.group_segment_size",
        **{f"workgroup_{c}": f"kd.workgroup_size_{c}" for c in "xyz"},
        **{f"grid_{c}": f"kd.grid_size_{c}" for c in "xyz"},
        "event_id": "kd.event_id",
    }
    if at.refs is not None:
        exprs.update(start_ref=at.refs[0], end_ref=at.refs[1])
    if ks:
        exprs.update(
            sgpr_count="ks.sgpr_count", vgpr_count="ks.arch_vgpr_count", accum_vgpr_count="ks.accum_vgpr_count"
        )
    if with_events:
        exprs["correlation_id"] = "e.stack_id"
    if st:
        exprs["region_id"] = "kd.region_name_id"
    # the joins of the general query but the string's (its id is read instead)
    kept_joins = [j for j in joins if " rs ON " not in j]
    tables = f"{kd} kd {' '.join(kept_joins)}"
    select = f"SELECT {', '.join(f'{e} AS c{j}' for j, e in enumerate(exprs.values()))} FROM {tables}"
    # one process's dispatches a range of ids per query (bounded Arrow results), else in one query
    pages = _id_pages(conn, kd, "kd", TABLE_PAGE_IDS) if len(guids) <= 1 else [""]
    kernel_names = (
        _TextsById(
            conn.execute(
                f"SELECT {_code('guid', guids)}, id, COALESCE(NULLIF(display_name, ''), kernel_name) FROM {ks}", guids
            ).fetchall()
        )
        if ks
        else None
    )
    refs = {"start_ref": "Int64", "end_ref": "Int64"} if at.refs is not None else {}

    def shape(raw: pd.DataFrame) -> pd.DataFrame:
        """Some rows of the query (nullable Int64 columns named as ``exprs``) in their final form."""
        guid_code = raw["guid"].to_numpy(dtype=np.int64, na_value=-1)
        frame = pd.DataFrame({name: raw[name] for name in exprs if name in DISPATCH_COLUMNS}, copy=False)
        frame["agent_label"] = _per_value(raw["agent"], _label)
        if kernel_names is not None:
            frame["kernel_name"] = kernel_names.find(guid_code, raw["kernel_id"])
        if st:
            ids = pd.unique(raw["region_id"].dropna().to_numpy(dtype=np.int64))
            strings = (
                conn.execute(
                    f"SELECT {_code('guid', guids)}, id, string FROM {st} WHERE id IN (SELECT value FROM json_each(?))",
                    [*guids, json.dumps(ids.tolist())],
                ).fetchall()
                if len(ids)
                else []
            )
            regions = _TextsById(strings).find(guid_code, raw["region_id"])
            frame["region"] = _per_value(
                regions, lambda r: r if isinstance(r, str) and parse_range(r) is not None else None
            )
        for axis in ("grid", "workgroup"):
            frame[f"{axis}_size"] = frame[f"{axis}_x"] * frame[f"{axis}_y"] * frame[f"{axis}_z"]
        out = conform(frame, DISPATCH_COLUMNS)
        out["guid"] = guid_code
        out["event_id"] = raw["event_id"].array
        for name in refs:
            out[name] = raw[name].array
        return out

    columns = {**_DISPATCH_READ, **refs}
    names = list(exprs)
    try:
        out = _integer_pages(conn, [f"{select} WHERE 1{where} {order_by}" for where in pages], names, shape, columns)
        if out is not None and len(pages) > 1 and not _non_decreasing_or_null(out["process_id"]):
            # one process with several process ids out of id order: the ranges are not in query order
            out = _integer_pages(conn, [f"{select} {order_by}"], names, shape, columns)
        if out is None:
            out = _integer_rows(conn, list(exprs.values()), f"{tables} {order_by}", names, shape, columns)
    except NotNumbers:
        return None
    except sqlite3.Error as exc:
        raise ParseError(
            path, f"rocpd query failed ({_reason(exc)}); {_DAMAGED}, or not a rocpd schema 3 or 4 database"
        ) from exc
    _refuse_bad_times_in_blocks(path, "rocpd_kernel_dispatch", out, "dispatch_id", at, "dispatch", owner)
    return out.drop(columns=list(refs)) if refs else out


#: The dispatch frame as read: :data:`DISPATCH_COLUMNS`, the guid code and the dispatch's event id.
_DISPATCH_READ = {**DISPATCH_COLUMNS, "guid": "int64", "event_id": "Int64"}

#: Text columns of a fixed set of values (categoricals however small, as :func:`marker_kinds` made them).
_KIND: dict[str, Any] = {"categorical": ("kind",), "categories": {"kind": ("range", "mark")}, "fixed": True}


def _integer_pages(
    conn: sqlite3.Connection,
    queries: list[str],
    names: list[str],
    shape: Callable[[pd.DataFrame], pd.DataFrame],
    columns: dict[str, str],
) -> pd.DataFrame | None:
    """The results of ``queries`` (columns ``c0``, ``c1``... named ``names``), shaped, in spill files.

    Through ADBC, one query's Arrow result held at a time, turned into nullable Int64 columns
    :data:`FETCH_ROWS` rows at a time; ``shape`` gives each such chunk its final ``columns``
    (:class:`~rocroof.records.SpilledFrameWriter`), and the chunk goes to spill files. None when ADBC
    cannot read the first query (the caller reads through sqlite3).

    Raises:
        NotNumbers: a column is not integers, or ADBC cannot read a later query.
    """
    with SpilledFrameWriter(columns, **_KIND) as writer:
        for i, sql in enumerate(queries):
            arrow = arrow_columns(conn, sql)
            if arrow is None:
                if i:
                    raise NotNumbers
                return None
            n = len(arrow["c0"]) if arrow else 0
            for lo in range(0, n, FETCH_ROWS):
                raw = pd.DataFrame(
                    {name: arrow_integers(arrow[f"c{j}"].slice(lo, FETCH_ROWS)) for j, name in enumerate(names)},
                    copy=False,
                )
                writer.add(shape(raw))
                del raw
            del arrow
            release_free_memory()
        return writer.finish()


def _integer_rows(
    conn: sqlite3.Connection,
    exprs: list[str],
    sql_from: str,
    names: list[str],
    shape: Callable[[pd.DataFrame], pd.DataFrame],
    columns: dict[str, str],
) -> pd.DataFrame:
    """:func:`_integer_pages` through sqlite3: :func:`_integer_chunks`' chunks, shaped, in spill files.

    Raises:
        NotNumbers: a value is neither an integer nor NULL.
        sqlite3.Error: the query fails.
    """
    with SpilledFrameWriter(columns, **_KIND) as writer:
        for chunk in _integer_chunks(conn, exprs, sql_from):
            writer.add(shape(pd.DataFrame(dict(zip(names, chunk, strict=True)), copy=False)))
        return writer.finish()


def _non_decreasing_or_null(values: pd.Series) -> bool:
    """True when ``values`` (nullable integers) are in SQLite's ascending order: NULLs first, then never decreasing.

    Read a block at a time (a spilled column's pages let go after each).
    """
    array = values.array
    mask = array._mask if isinstance(array, pd.arrays.IntegerArray) else np.zeros(len(array), dtype=bool)  # noqa: SLF001
    return in_order([Key(mask, descending=True), array])


class _TextsById:
    """The text of each (guid code, id) among rows of (guid code, id, text): kernel names, strings.

    Args:
        rows: ``(guid code, id, text)`` rows (an id that is not an integer never matches).
    """

    def __init__(self, rows: list[tuple[Any, ...]]) -> None:
        self.rows = len(rows)
        key_guid = np.array([int(r[0]) for r in rows], dtype=np.int64)
        key_id = np.array([int(r[1]) if isinstance(r[1], int) else -(2**62) for r in rows], dtype=np.int64)
        self.texts = np.array([*(r[2] for r in rows), None], dtype=object)
        self.index = KeyIndex([key_guid, key_id])

    def find(self, guid_code: np.ndarray, ids: pd.Series) -> pd.Series:
        """The text of each (guid code, id); None where no row has it. Shape (len(ids),), object."""
        if not self.rows:
            return pd.Series([None] * len(ids), dtype=object)
        missing = ids.isna().to_numpy(dtype=bool)
        at = self.index.find([guid_code, ids.to_numpy(dtype=np.int64, na_value=0)])
        at = np.where(missing | (at < 0), self.rows, at)
        return pd.Series(self.texts[at], dtype=object)


def _literal_code(column: str, values: list[object]) -> str:
    """:func:`_code` with the values written into the SQL (ADBC statements take no Python parameters)."""
    whens = " ".join(f"WHEN {sql_literal(v)} THEN {i}" for i, v in enumerate(values) if v is not None)
    return f"(CASE {column} {whens} ELSE -1 END)" if whens else "-1"


def _code(column: str, values: list[object]) -> str:
    """An SQL expression giving ``column``'s position in ``values`` (bound as ``?1``...), -1 for others."""
    if not values:
        return "-1"
    whens = " ".join(f"WHEN ?{i + 1} THEN {i}" for i in range(len(values)))
    return f"(CASE {column} {whens} ELSE -1 END)"


def _per_value(column: pd.Series, fn: Any) -> pd.Series:
    """``column.map(fn)``, calling ``fn`` once per distinct value (a few agents, kernels, regions)."""
    values = column.to_numpy(dtype=object)
    codes, uniques = pd.factorize(values, use_na_sentinel=False)
    table = np.array([*(fn(u) for u in uniques), None], dtype=object)[:-1]
    return pd.Series(table[codes], index=column.index, dtype=object)


def _shown(value: object) -> str:
    """A value for a message: text quoted, numbers as numbers."""
    return repr(value) if isinstance(value, str | bytes) else str(value)


def _refuse_repeated_dispatches(guid_code: np.ndarray, ids: pd.Series, guids: list[object], path: Path) -> None:
    """A (process, dispatch id) twice is a damaged database or a bad merge: ParseError naming the id.

    Rows in strictly increasing (guid code, id) order (one process's file, read in id order) are
    checked a block at a time; other files by pandas over the whole columns.
    """
    if not has_missing(ids) and in_order([guid_code, ids.array], strict=True):
        return
    dup = pd.DataFrame({"guid": guid_code, "id": ids.array}, copy=False).duplicated(keep="first")
    if bool(dup.any()):
        pos = int(np.flatnonzero(dup.to_numpy())[0])
        code = int(guid_code[pos])
        owner = f" of process {guids[code]}" if 0 <= code < len(guids) else ""
        raise ParseError(
            path,
            f"rocpd_kernel_dispatch: dispatch id {_shown(ids.iloc[pos])}{owner} appears twice (expected one row per "
            "dispatch; a damaged database, or one merged twice)",
        )


class _EventRows:
    """The dispatch row of each (guid code, event id): how counter records find their dispatch.

    One process's dispatches (one guid code, every event id known) are found by binary search
    in their event ids, sorted in spill files when not in order already (:func:`sorted_keys`: a
    few bytes per dispatch at most in memory); a merged database's by sorted copies in memory.

    Args:
        guid_code: the dispatches' guid codes (int64), shape (dispatches,).
        event_ids: their event ids (nullable Int64), shape (dispatches,).
    """

    def __init__(self, guid_code: np.ndarray, event_ids: Any) -> None:
        self.count = len(guid_code)
        self.guid = only_value(guid_code)
        self._guid_code, self._event_ids = guid_code, event_ids
        self._by_guid: dict[int, tuple[np.ndarray, np.ndarray]] | None = None
        self._sorted: tuple[np.ndarray, np.ndarray | None] | None = None
        if self.guid is not None and not has_missing(event_ids):
            self._sorted = sorted_keys(event_ids)
        else:
            self._by_guid = _sorted_keymap(self.frame())

    def frame(self) -> pd.DataFrame:
        """``guid``, ``event_id``, ``row`` of each dispatch with an event id, its first row per key (in memory)."""
        keymap = pd.DataFrame(
            {"guid": np.asarray(self._guid_code), "event_id": self._event_ids, "row": np.arange(self.count)}
        )
        return keymap[keymap["event_id"].notna()].drop_duplicates(["guid", "event_id"])

    def find(self, guid: np.ndarray, event: np.ndarray) -> np.ndarray:
        """The dispatch row of each (guid code, event id); -1 where no dispatch has it."""
        if self._by_guid is not None:
            return _guid_rows(self._by_guid, guid, event)
        assert self._sorted is not None
        keys, targets = self._sorted
        rows = np.full(len(event), -1, dtype=np.int64)
        sel = np.flatnonzero(guid == self.guid)
        if len(sel) and len(keys):
            at = np.searchsorted(keys, event[sel])
            ok = at < len(keys)
            ok[ok] = keys[at[ok]] == event[sel][ok]
            rows[sel[ok]] = at[ok] if targets is None else targets[at[ok]]
        release_pages()
        return rows


class _Launched:
    """Whether a (guid code, correlation id) is a dispatch's: which API calls launched a dispatch.

    One process's dispatches are looked up by binary search in their correlation ids, sorted in
    spill files when not in order already (:func:`sorted_keys`); a merged database's through a
    :class:`~rocroof.records.KeyIndex` in memory.

    Args:
        guid_code: the dispatches' guid codes (int64), shape (dispatches,).
        correlation: their correlation ids (nullable Int64).
    """

    def __init__(self, guid_code: np.ndarray, correlation: pd.Series) -> None:
        self.count = len(guid_code)
        self.guid = only_value(guid_code)
        self._index: KeyIndex | None = None
        self._values: np.ndarray | None = None
        if self.guid is not None:
            self._values = sorted_keys(correlation)[0]
        else:
            known = correlation.notna().to_numpy(dtype=bool)
            self._index = KeyIndex(
                [np.asarray(guid_code)[known], correlation.to_numpy(dtype=np.int64, na_value=0)[known]]
            )

    def __len__(self) -> int:
        return self.count

    def contains(self, guid: np.ndarray, correlation: np.ndarray) -> np.ndarray:
        """Per (guid code, correlation id): True where a dispatch has it. Shape (len(guid),), bool."""
        if self._index is not None:
            found: np.ndarray = self._index.find([guid, correlation]) >= 0
            return found
        assert self._values is not None
        out = np.zeros(len(guid), dtype=bool)
        values = self._values
        sel = np.flatnonzero(guid == self.guid)
        if len(sel) and len(values):
            at = np.searchsorted(values, correlation[sel])
            ok = at < len(values)
            ok[ok] = values[at[ok]] == correlation[sel][ok]
            out[sel] = ok
        release_pages()
        return out


def _refuse_bad_times(
    path: Path,
    table: str,
    ids: pd.Series,
    times: pd.DataFrame,
    raw: pd.DataFrame,
    at: _Placement,
    what: str,
    owner: Any = None,
) -> None:
    """Refuse a record without a start or an end time, or ending before it starts.

    rocprofiler-sdk writes both times of every dispatch and region (the schema has them ``NOT
    NULL``); a record without one is a damaged or hand-made database, and taking it would skew
    every share of time. In schema 4.0 a missing time is a ``start_id``/``end_id`` that names no
    ``rocpd_timestamp`` row of the record's process.

    Args:
        path: the file, for messages.
        table: the logical table, for messages.
        ids: the records' ``id`` (position-aligned with ``raw``).
        times: ``start_ns`` and ``end_ns`` as nullable integers (position-aligned with ``raw``).
        raw: the query rows, with ``start_ref``/``end_ref`` where ``at`` has references.
        at: where the records' times are (:func:`_placement`).
        what: the record in words ("dispatch", "marker range").
        owner: ``owner(i)`` names the process of record ``i`` in a merged database ("" otherwise).

    Raises:
        ParseError: naming ``table`` and the record id.
    """
    start, end = times["start_ns"], times["end_ns"]
    missing = (start.isna() | end.isna()).to_numpy(dtype=bool)
    backwards = (end < start).fillna(False).to_numpy(dtype=bool)
    bad = missing | backwards
    if not bad.any():
        return
    i = int(np.flatnonzero(bad)[0])
    row = f"{table} id {_shown(ids.iloc[i])}{owner(i) if owner is not None else ''}"
    damaged = f"rocprofiler-sdk writes start and end for every {what}; the database is damaged"
    if missing[i]:
        for side, column, ref in (("start", "start_ns", "start_ref"), ("end", "end_ns", "end_ref")):
            if not pd.isna(times[column].iloc[i]):
                continue
            if at.refs is None:
                raise ParseError(path, f"{row}: no {side} time ({damaged})")
            name = at.ref_names[0 if side == "start" else 1]
            value = raw[ref].iloc[i]
            if value is None or pd.isna(value):
                raise ParseError(path, f"{row}: no {name} ({damaged})")
            raise ParseError(path, f"{row}: {name} {_shown(value)} points to no rocpd_timestamp row ({damaged})")
    raise ParseError(
        path,
        f"{row}: end {end.iloc[i]} ns is before start {start.iloc[i]} ns (a {what} cannot end before it starts; "
        "the database is damaged)",
    )


def _refuse_bad_times_in_blocks(
    path: Path,
    table: str,
    frame: pd.DataFrame,
    id_column: str,
    at: _Placement,
    what: str,
    owner: Callable[[pd.DataFrame, int], str] | None = None,
) -> None:
    """:func:`_refuse_bad_times` over ``frame`` a block of rows at a time (its spilled pages let go after each).

    ``frame`` holds ``start_ns``, ``end_ns``, ``id_column`` (the record's id) and, where ``at``
    has references, ``start_ref``/``end_ref``; ``owner(rows, i)`` names the process of row ``i``
    of the block ``rows`` (a slice of ``frame``). The first bad record in ``frame``'s order is named.

    Raises:
        ParseError: as :func:`_refuse_bad_times`.
    """
    for lo in range(0, len(frame), BLOCK):
        rows = frame.iloc[lo : lo + BLOCK]
        named = (lambda i, rows=rows: owner(rows, i)) if owner is not None else None
        _refuse_bad_times(path, table, rows[id_column], rows, rows, at, what, named)
        del rows
        release_pages()


def _sorted_keymap(keymap: pd.DataFrame) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Per guid code: the dispatches' event ids (sorted) and their rows, for :func:`_guid_rows`."""
    out = {}
    guid = keymap["guid"].to_numpy(dtype=np.int64)
    event = keymap["event_id"].to_numpy(dtype=np.int64)
    row = keymap["row"].to_numpy(dtype=np.int64)
    for code in pd.unique(guid).tolist():
        sel = np.flatnonzero(guid == code)
        order = np.argsort(event[sel], kind="stable")
        out[int(code)] = (event[sel][order], row[sel][order])
    return out


def _guid_rows(keymap: dict[int, tuple[np.ndarray, np.ndarray]], guid: np.ndarray, event: np.ndarray) -> np.ndarray:
    """The dispatch row of each (guid code, event id); -1 where no dispatch has it."""
    rows = np.full(len(event), -1, dtype=np.int64)
    for code in pd.unique(guid).tolist():
        if code not in keymap:
            continue
        keys, targets = keymap[code]
        sel = np.flatnonzero(guid == code)
        at = np.searchsorted(keys, event[sel])
        ok = at < len(keys)
        ok[ok] = keys[at[ok]] == event[sel][ok]
        rows[sel[ok]] = targets[at[ok]]
    return rows


def _counters_one_record_each(
    conn: sqlite3.Connection, src: dict[str, str], path: Path, guids: list[object], dispatch_rows: _EventRows
) -> pd.DataFrame | None:
    """Counter values when each dispatch has one record per counter (the usual rocprofv3 output).

    Reads ``rocpd_pmc_event`` in table order as numbers only (names come from the small
    ``rocpd_info_pmc``), so that no per-row text or grouping is needed: the same values as
    :func:`_counters_summed` (``SUM`` of one value is the value, as REAL). Returns None when the
    data needs that path: several records of one (dispatch, counter), counter ids or names that
    are not unique, values that are not numbers.
    """
    pe, pmc = src["rocpd_pmc_event"], src["rocpd_info_pmc"]
    info = _query(conn, path, f"SELECT {_code('guid', guids)} AS guid, id, name FROM {pmc}", guids)
    if not all(k in ("i", "u") for k in (info["guid"].dtype.kind, info["id"].dtype.kind)):
        return None
    names = info["name"].to_numpy(dtype=object)
    if not all(isinstance(n, str) for n in names.tolist()) or info.duplicated(["guid", "id"]).any():
        return None
    # records as numbers only, a chunk at a time: (guid code, event id, counter id, value)
    labels = sorted(set(names.tolist()))
    name_code = np.searchsorted(np.array(labels, dtype=object), names).astype(np.int64)
    info_guid, info_id = info["guid"].to_numpy(dtype=np.int64), info["id"].to_numpy(dtype=np.int64)
    lookups = []  # per guid code: its counter ids (sorted) and their name codes
    for g in range(-1, len(guids)):
        mine = np.flatnonzero(info_guid == g)
        order = np.argsort(info_id[mine])
        lookups.append((info_id[mine][order], name_code[mine][order]))
    guid_code = _literal_code("pe.guid", guids)
    select = (
        f"SELECT {guid_code}, {_integer('pe.event_id')}, {_integer('pe.pmc_id')}, "
        f"{_counter_value('pe.value')} FROM {pe} pe WHERE pe.event_id IS NOT NULL"
    )
    raw = f"SELECT {guid_code}, pe.event_id, pe.pmc_id, pe.value FROM {pe} pe WHERE pe.event_id IS NOT NULL"
    # (dispatch row, counter code, value) written to spill files (rocroof.spill) a chunk at a time:
    # 8x10^6 records are not held in memory
    chunks = 0
    # codes of the type pandas keeps them in (an int8 per record for up to 126 counters): no copy
    code_type = code_dtype(len(labels))
    with ColumnWriter(np.int64) as rows, ColumnWriter(code_type) as codes, ColumnWriter(np.float64) as values:
        try:
            for guid, event_id, pmc_id, value in _counter_records(conn, select, raw, pe):
                chunks += 1
                code = np.full(len(guid), -1, dtype=np.int64)
                for g in pd.unique(guid).tolist():
                    keys, targets = lookups[g + 1]
                    sel = np.flatnonzero(guid == g)
                    at = np.searchsorted(keys, pmc_id[sel])
                    ok = at < len(keys)
                    ok[ok] = keys[at[ok]] == pmc_id[sel][ok]
                    code[sel[ok]] = targets[at[ok]]
                if bool(np.isnan(value).any()):  # NULL, or not a counter value: the path that names it
                    raise NotNumbers
                row = dispatch_rows.find(guid, event_id)
                keep = (code >= 0) & (row >= 0)  # as the joins: records of no counter or no dispatch are left out
                rows.append(row[keep])
                codes.append(code[keep].astype(code_type))
                values.append(value[keep])
        except NotNumbers:
            return None
        if not chunks:
            return empty_frame(COUNTER_COLUMNS)
        row, code, value = rows.finish(), codes.finish(), values.finish()
    if _increasing(row, code, len(labels)):
        pass  # dispatch order, each dispatch's counters in name order: as stored
    elif non_decreasing(row, _RECORD_BLOCK):
        # each dispatch's records together, its counters in table (id) order: sorted a block of
        # whole dispatches at a time into spill files, with no key or order array of the whole pass
        ordered = _sorted_per_dispatch(row, code, value, len(labels))
        if ordered is None:
            return None  # a counter recorded twice for one dispatch: summed by SQL instead
        row, code, value = ordered
    else:  # records in any order: sorted a bucket of records at a time, the order in a spill file
        by_key = sorted_order([row, code])
        assert by_key is not None  # (not in order: _increasing said so)
        row, code, value = (spill.take(column, by_key) for column in (row, code, value))
        del by_key
        if not _increasing(row, code, len(labels)):
            return None  # a counter recorded twice for one dispatch: summed by SQL instead
    # the names as a categorical column: a code per value (in a spill file), not a pointer to a string
    names_column = pd.Categorical.from_codes(code, dtype=pd.CategoricalDtype(labels), validate=False)
    return pd.DataFrame({"row": row, "counter_name": names_column, "value": value}, copy=False)


#: Counter records checked or sorted at a time (:func:`_increasing`, :func:`_sorted_per_dispatch`):
#: ~0.5 MB per int64 temporary (2^18 records: the read's peak ~10 MB higher at 10^6 dispatches).
_RECORD_BLOCK = 1 << 16


def _increasing(row: np.ndarray, code: np.ndarray, width: int, block: int = _RECORD_BLOCK) -> bool:
    """True when the records' keys ``row * width + code`` strictly increase (dispatch order, each counter once).

    Checked a block at a time: no key array of the whole pass (64 MB at 8x10^6 records).
    """
    last = -1
    for lo in range(0, len(row), block):
        key = row[lo : lo + block] * width + code[lo : lo + block]
        if key[0] <= last or (len(key) > 1 and not bool((np.diff(key) > 0).all())):
            return False
        last = int(key[-1])
        release_pages()  # spilled rows: their pages go once checked
    return True


def _sorted_per_dispatch(
    row: np.ndarray, code: np.ndarray, value: np.ndarray, width: int, block: int = _RECORD_BLOCK
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The records ``(row, code, value)`` (each of shape (n,)) in ``row * width + code`` order.

    ``row`` must not decrease (:func:`rocroof.records.non_decreasing`): then sorting each block of
    ~``block`` records, cut where a dispatch's records end (:func:`rocroof.records.dispatch_blocks`),
    sorts the whole. The columns are written to spill files (:mod:`rocroof.spill`) a block at a
    time. Returns None when a key repeats (a counter recorded twice for one dispatch).
    """
    with ColumnWriter(np.int64) as rows, ColumnWriter(code.dtype) as codes, ColumnWriter(np.float64) as values:
        for lo, hi in dispatch_blocks(row, block):
            key = row[lo:hi] * width + code[lo:hi]
            order = np.argsort(key, kind="stable")
            if bool((np.diff(key[order]) == 0).any()):
                return None
            rows.append(row[lo:hi][order])
            codes.append(code[lo:hi][order])
            values.append(value[lo:hi][order])
            release_pages()
        return rows.finish(), codes.finish(), values.finish()


def _refuse_unnamed_counters(conn: sqlite3.Connection, src: dict[str, str], path: Path) -> None:
    """Refuse a ``rocpd_info_pmc`` row without a name (NULL, empty, not text) that counter records use.

    Raises:
        ParseError: naming the row's id.
    """
    pe, pmc = src["rocpd_pmc_event"], src["rocpd_info_pmc"]
    bad = conn.execute(
        f"SELECT p.id FROM {pmc} p WHERE (typeof(p.name) <> 'text' OR p.name = '') "
        f"AND EXISTS (SELECT 1 FROM {pe} e WHERE e.pmc_id = p.id AND e.guid = p.guid) LIMIT 1"
    ).fetchone()
    if bad is not None:
        raise ParseError(
            path,
            f"rocpd_info_pmc id {_shown(bad[0])}: no counter name, but counter records refer to it "
            "(expected the counter's name as text; the database is damaged)",
        )


def _counter_records(
    conn: sqlite3.Connection, select: str, raw: str, source: str
) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """``(guid code, event id, counter id, value)`` arrays of :func:`_counters_one_record_each`'s query, by chunks.

    Through ADBC when it reads ``raw`` (the columns as stored) with integer ids and number values,
    checked here as ``select`` checks them in SQL (a value from 0 to 2**64); else ``select``
    through sqlite3 (:func:`_number_chunks`). ADBC reads ``raw`` a range of record ids of
    ``source`` (``rocpd_pmc_event``) at a time (:func:`_id_pages`), so that the Arrow result of
    one range is held, not of every record (8x10^6 records: 256 MB).

    Raises:
        NotNumbers: (while iterating) an id is not an integer or a value not a counter value, or
            ADBC cannot read a range after it read others: the caller's other path reads them.
    """
    pages = _id_pages(conn, source)
    read = 0
    for where in pages:
        arrow = arrow_columns(conn, raw + where)
        if arrow is None:
            if read:  # a range ADBC cannot read after others it did: the other path decides
                raise NotNumbers
            break  # sqlite3 reads every record
        guid_c, event_c, pmc_c, value_c = arrow.values()
        del arrow
        if not len(guid_c):  # a range of ids without records
            continue
        if event_c.null_count() or pmc_c.null_count() or value_c.null_count():
            raise NotNumbers
        if not (value_c.dtype.is_float() or value_c.dtype.is_integer()):
            raise NotNumbers
        # converted a slice at a time: the numpy copies of a range's records never exist all at once
        step = FETCH_ROWS * 20
        for lo in range(0, len(guid_c), step):
            value = value_c.slice(lo, step).to_numpy().astype(np.float64, copy=False)
            if len(value) and not bool(((value >= 0) & (value <= COUNTER_MAX)).all()):  # NaN fails too
                raise NotNumbers
            yield (
                arrow_integers(guid_c.slice(lo, step)).to_numpy(dtype=np.int64, na_value=-1),
                arrow_integers(event_c.slice(lo, step)).to_numpy(dtype=np.int64),
                arrow_integers(pmc_c.slice(lo, step)).to_numpy(dtype=np.int64),
                value,
            )
        read += len(guid_c)
        del guid_c, event_c, pmc_c, value_c
    else:
        return
    for block in _number_chunks(conn, select, (), 4):
        yield block[:, 0].astype(np.int64), block[:, 1].astype(np.int64), block[:, 2].astype(np.int64), block[:, 3]


#: Counter records read through ADBC per query (:func:`_id_pages`): ~2 MB of Arrow columns and
#: their conversions (2^18 records: the read's peak ~15 MB higher at 10^6 dispatches, no faster).
PAGE_IDS = 1 << 16

#: Dispatch and region (roctx range, API call) records read through ADBC per query
#: (:func:`_id_pages`): ~30 MB of Arrow columns for a dispatch's ~25 columns (2^18 ids: the read's
#: peak ~45 MB higher at 10^6 dispatches; 2^16: ~5% slower for a few MB less).
TABLE_PAGE_IDS = 1 << 17


#: Ranges of ids up to which :func:`_id_pages` splits by arithmetic (no query); beyond, the
#: ranges start at every ``size``-th id of the table (one pass over its ids).
_ARITHMETIC_RANGES = 1024


def _id_pages(conn: sqlite3.Connection, source: str, alias: str = "pe", size: int | None = None) -> list[str]:
    """SQL conditions that split ``source``'s records into ranges of ``size`` ids (``{alias}.id``).

    ``size`` defaults to :data:`PAGE_IDS`. ``[""]`` (one query of every record) without ADBC, for
    a merged database's ``UNION ALL`` of suffixed tables, when the ids are not integers at both
    ends, or when one range holds every id. SQLite orders NULL before numbers and text and blobs
    after them, so integer ids at both ends mean that every id is a number from the first to the
    last: each record is in exactly one range. rocpd's ``id`` is its tables' INTEGER PRIMARY KEY,
    so a range is a search of the table's b-tree. Ids so far apart that more than
    :data:`_ARITHMETIC_RANGES` ranges would span them start a range at every ``size``-th id instead.
    """
    size = PAGE_IDS if size is None else size
    if not sqlite_arrow.USE_ADBC or source.startswith("("):
        # a merged file's UNION ALL: ranges would interleave its tables' records (each table in
        # dispatch order, one after the other, when read whole), and a sort of every record would follow
        return [""]
    try:
        view = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'view' AND name = ?", (source.strip('"'),))
        row = view.fetchone()
        if row is not None and "UNION" in str(row[0]).upper():  # a merged file's view of several tables: as above
            return [""]
        low = conn.execute(f"SELECT t.id FROM {source} t ORDER BY t.id LIMIT 1").fetchone()
        high = conn.execute(f"SELECT t.id FROM {source} t ORDER BY t.id DESC LIMIT 1").fetchone()
    except sqlite3.Error:
        return [""]
    if low is None or high is None or type(low[0]) is not int or type(high[0]) is not int:
        return [""]
    first, last = int(low[0]), int(high[0])
    if last - first < size:  # one range holds them all
        return [""]
    if (last - first) // size < _ARITHMETIC_RANGES:
        return [f" AND {alias}.id >= {lo} AND {alias}.id < {lo + size}" for lo in range(first, last + 1, size)]
    # ids far apart (a gap of 10^10 would be 38,000 ranges of 2^18 ids, most of them empty): the
    # ranges start at every size-th id, found in one pass over the table's ids
    try:
        starts = [
            int(r[0])
            for r in conn.execute(
                f"SELECT id FROM (SELECT t.id AS id, ROW_NUMBER() OVER (ORDER BY t.id) AS n FROM {source} t) "
                f"WHERE (n - 1) % {size} = 0"
            )
        ]
    except (sqlite3.Error, TypeError, ValueError):
        return [""]
    if len(starts) <= 1:
        return [""]
    bounds = [*starts[1:], None]
    return [
        f" AND {alias}.id >= {lo}" + (f" AND {alias}.id < {hi}" if hi is not None else "")
        for lo, hi in zip(starts, bounds, strict=True)
    ]


#: Integers a float64 holds exactly: record ids beyond this are read the slow way.
_EXACT = float(2**53)


def _counter_value(column: str) -> str:
    """``column`` as REAL when it is a counter value (a number from 0 to 2**64), else NULL.

    SQLite turns text into 0 in arithmetic (``'abc' + 0.0`` is 0.0): anything else goes to the
    path that names the record (:func:`_check_pmc_values`).
    """
    return (
        f"(CASE WHEN typeof({column}) IN ('integer', 'real') AND {column} >= 0 AND {column} <= {COUNTER_MAX!r} "
        f"THEN {column} + 0.0 END)"
    )


def _check_pmc_values(conn: sqlite3.Connection, src: dict[str, str], path: Path) -> None:
    """Refuse a counter record whose value no hardware counter gives (NULL, text, negative, huge).

    Raises:
        ParseError: naming the ``rocpd_pmc_event`` record id and its value.
    """
    pe = src["rocpd_pmc_event"]
    bad = conn.execute(
        f"SELECT id, value FROM {pe} WHERE event_id IS NOT NULL AND {_counter_value('value')} IS NULL LIMIT 1"
    ).fetchone()
    if bad is not None:
        raise ParseError(
            path,
            f"rocpd_pmc_event record id {bad[0]}: value {_shown(bad[1])} is not a counter value "
            "(expected a number from 0 to 2**64)",
        )


def _integer(column: str) -> str:
    """``column`` when it holds an integer, else NULL (which makes :func:`_numbers` give up)."""
    return f"(CASE WHEN typeof({column}) = 'integer' THEN {column} END)"


def _number_chunks(conn: sqlite3.Connection, sql: str, params: Sequence[object], width: int) -> Iterator[np.ndarray]:
    """The rows of a query whose values are all numbers, a chunk at a time, as float64 arrays.

    Rows become arrays in C (no per-row Python objects are kept). Raises :class:`NotNumbers`
    (while iterating) at a value that is NULL or not a number, or an integer in the first
    ``width - 1`` columns beyond 2**53: the caller then reads the rows with :func:`_query`,
    which types and reports such values.
    """
    for block in _blocks(conn.execute(sql, list(params)), width, np.float64):
        if not bool((np.abs(block[:, : width - 1]) < _EXACT).all()):
            raise NotNumbers
        yield block


def _blocks(cur: sqlite3.Cursor, width: int, dtype: Any) -> Iterator[np.ndarray]:
    """A cursor's rows of ``width`` values, :data:`FETCH_ROWS` at a time, as ``(rows, width)`` arrays.

    Made in C by :func:`numpy.fromiter`; raises :class:`NotNumbers` (while iterating) at a value
    ``dtype`` cannot hold (NULL, text, an integer out of range).
    """
    while True:
        rows = cur.fetchmany(FETCH_ROWS)
        if not rows:
            return
        try:
            block = np.fromiter(itertools.chain.from_iterable(rows), dtype=dtype, count=len(rows) * width)
        except (TypeError, ValueError, OverflowError) as exc:
            raise NotNumbers from exc
        del rows
        yield block.reshape(-1, width)


def _integer_chunks(
    conn: sqlite3.Connection, exprs: Sequence[str], sql_from: str
) -> Iterator[list[pd.arrays.IntegerArray]]:
    """The query ``SELECT exprs FROM sql_from`` as nullable int64 columns, :data:`FETCH_ROWS` rows at a time.

    Built without pandas' row objects: each expression must give an integer or NULL in every row;
    a row is fetched as the values (0 for NULL) and one integer whose bits say which are NULL,
    then turned into arrays by :func:`numpy.fromiter` a chunk at a time. At most 62 expressions.

    Raises:
        NotNumbers: (while iterating) a value is neither an integer nor NULL (text, REAL): the
            caller reads the rows the slow way, which names such a value.
        sqlite3.Error: the query fails.
    """
    k = len(exprs)
    assert 0 < k <= 62
    values = [f"(CASE typeof({e}) WHEN 'integer' THEN {e} WHEN 'null' THEN 0 END)" for e in exprs]
    # SQLite gives <<, >>, & and | one precedence: each term in parentheses
    nulls = " | ".join(f"((({e}) IS NULL) << {j})" for j, e in enumerate(exprs))
    for table in _blocks(conn.execute(f"SELECT {', '.join(values)}, {nulls} FROM {sql_from}"), k + 1, np.int64):
        bits = table[:, k]
        yield [
            pd.arrays.IntegerArray(np.ascontiguousarray(table[:, j]), ((bits >> j) & 1).astype(bool)) for j in range(k)
        ]


def _counters_summed(
    conn: sqlite3.Connection,
    src: dict[str, str],
    path: Path,
    guids: list[object],
    keymap: pd.DataFrame,
    keep_instances: bool,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Counter values summed per dispatch and counter by SQL, and the per-instance values."""
    pe, pmc = src["rocpd_pmc_event"], src["rocpd_info_pmc"]
    _check_pmc_values(conn, src, path)
    instances = empty_frame(INSTANCE_COLUMNS)
    summed = _query(
        conn,
        path,
        f"SELECT {_code('pe.guid', guids)} AS guid, pe.event_id AS event_id, pmc.name AS counter_name, "
        f"SUM(pe.value) AS value, COUNT(*) AS records FROM {pe} pe JOIN {pmc} pmc ON pmc.id = pe.pmc_id AND "
        f"pmc.guid = pe.guid WHERE pe.event_id IS NOT NULL GROUP BY pe.guid, pe.event_id, pmc.name",
        guids,
    )
    summed = _with_rows(summed, keymap, path)
    counters = _conform(
        summed.sort_values(["row", "counter_name"], kind="stable"), COUNTER_COLUMNS, path, "rocpd_pmc_event"
    )
    multi = summed.loc[summed["records"] > 1, ["guid", "event_id", "counter_name"]]
    if keep_instances and len(multi):
        inst = _query(
            conn,
            path,
            f"SELECT {_code('pe.guid', guids)} AS guid, pe.event_id AS event_id, pmc.name AS counter_name, "
            f"pe.value AS value FROM {pe} pe JOIN {pmc} pmc ON pmc.id = pe.pmc_id AND pmc.guid = pe.guid "
            f"WHERE pe.event_id IS NOT NULL ORDER BY pe.guid, pe.id",
            guids,
        )
        inst = _with_rows(inst, keymap, path).merge(multi, on=["guid", "event_id", "counter_name"])
        inst["instance"] = inst.groupby(["row", "counter_name"], sort=False).cumcount()
        inst = inst.sort_values(["row", "counter_name", "instance"], kind="stable")
        instances = _conform(inst, INSTANCE_COLUMNS, path, "rocpd_pmc_event")
    return counters, instances


def _markers(conn: sqlite3.Connection, src: dict[str, str], path: Path, paged: bool = False) -> pd.DataFrame:
    """Roctx ranges (``rocpd_region`` rows of a marker category) and marks (``rocpd_sample``).

    Schema 3 keeps the message in the event's ``extdata`` ``$.message``; schema 4 in the
    record's name (see :func:`_marker_message`). Times are host ns. ``paged``: the database is
    one process's (one guid), and its regions may be read a range of ids at a time
    (:func:`_id_pages`). Ranges and marks are put in time order (at equal starts the longer
    first) by :func:`~rocroof.keys.sorted_order`, a bucket of rows at a time.

    Returns:
        :data:`~rocroof.records.MARKER_COLUMNS` (and, in a large table whose ggml ranges' messages
        were let go, :data:`~rocroof.records.MARKER_PART_COLUMNS`: :func:`_whole_messages`), in
        spill files when large.
    """
    ev, st, rg = src["rocpd_event"], src["rocpd_string"], src["rocpd_region"]
    at = _placement(conn, src, path, "rocpd_region", "r")
    named = "pid" not in _columns(conn, rg)  # schema 4: the message is the region's name
    category_join, category = _category(src, "e", "c")
    refs = f", {at.refs[0]} AS start_ref, {at.refs[1]} AS end_ref" if at.refs is not None else ""

    def shape(chunk: pd.DataFrame) -> pd.DataFrame:
        """Marker rows with their message (from the extdata JSON or the name), the JSON text dropped."""
        chunk["message"] = _messages(path, "rocpd_region", chunk, named)
        chunk = chunk[chunk["message"].notna()].copy()
        for column, name in (("start_ns", "start"), ("end_ns", "end")):  # SQLite lets text in: refuse it by name
            chunk[column] = _int_ids(chunk[column], path, "rocpd_region", name)
        if at.refs is not None:
            _refuse_bad_times(path, "rocpd_region", chunk["id"], chunk, chunk, at, "marker range")
        bad = (
            chunk["start_ns"].isna() | chunk["end_ns"].isna() | (chunk["end_ns"] < chunk["start_ns"]).fillna(False)
        ).to_numpy(dtype=bool)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ParseError(
                path,
                f"rocpd_region id {chunk['id'].iloc[i]}: a marker needs a start and an end, not before its start "
                f"(start {chunk['start_ns'].iloc[i]}, end {chunk['end_ns'].iloc[i]})",
            )
        chunk["kind"] = marker_kinds(chunk["start_ns"] == chunk["end_ns"])
        return _split_ranges(_conform(chunk, MARKER_COLUMNS, path, "rocpd_region/rocpd_sample"))

    # the simple messages are found by polars on the ADBC path (one regex over the column: ~2 s less
    # than SQLite's JSON functions for 10^6 markers), by SQLite's JSON functions otherwise
    with_json = _has_json(conn) and not sqlite_arrow.USE_ADBC
    extdata = _extdata_columns("e.extdata") if with_json else "NULL AS simple_message, e.extdata AS extdata"

    def query(where: str) -> str:
        """The markers' query, of the records that ``where`` (``" AND ..."`` or "") leaves."""
        return (
            f"SELECT r.id AS id, {at.pid} AS process_id, {at.tid} AS thread_id, {at.start} AS start_ns, "
            f"{at.end} AS end_ns, e.id AS event_id, e.stack_id AS correlation_id, {extdata}, "
            f"n.string AS name{refs} FROM {rg} r "
            f"JOIN {ev} e ON e.id = r.event_id AND e.guid = r.guid {category_join} {at.joins} "
            f"LEFT JOIN {st} n ON n.id = r.name_id AND n.guid = r.guid "
            f"WHERE ({_is_marker(category)}){where} ORDER BY {at.start}, r.guid, r.id"
        )

    # a range of region ids per query (one process: the sort below puts the ranges in time order),
    # each result as Arrow columns turned into pandas (a Python string per message) a slice at a time
    pages = _id_pages(conn, rg, "r", TABLE_PAGE_IDS) if paged else [""]
    mk = _arrow_pages(
        conn,
        [query(where) for where in pages],
        shape,
        _MARKER_READ,
        texts=frozenset({"simple_message", "extdata", "name"}),
        derive=None if with_json else _simple_messages,
    )
    if mk is None:  # a result the fast path cannot type: every record through sqlite3
        mk = _chunked(conn, path, query(""), (), shape, _MARKER_READ)
    frames = [mk]
    if "rocpd_sample" in src and "rocpd_track" in src:
        sa = _placement(conn, src, path, "rocpd_sample", "s", instant=True)
        sample_named = "name_id" in _columns(conn, src["rocpd_sample"])
        name = "n.string" if sample_named else "NULL"
        name_join = f"LEFT JOIN {st} n ON n.id = s.name_id AND n.guid = s.guid " if sample_named else ""
        sample_refs = f", {sa.refs[0]} AS start_ref, {sa.refs[1]} AS end_ref" if sa.refs is not None else ""

        def marks(samples: pd.DataFrame) -> pd.DataFrame:
            """Sample rows that are roctx marks, with their message, as marker rows."""
            keep = samples["category"].map(lambda c: isinstance(c, str) and _marker_category(c)).astype(bool)
            samples = samples[keep].copy()
            samples["message"] = _messages(path, "rocpd_sample", samples, named and sample_named)
            samples = samples[samples["message"].notna()].copy()
            if sa.refs is not None:
                for column, which in (("start_ns", "timestamp"), ("end_ns", "timestamp")):
                    samples[column] = _int_ids(samples[column], path, "rocpd_sample", which)
                _refuse_bad_times(path, "rocpd_sample", samples["id"], samples, samples, sa, "mark")
            samples["kind"] = "mark"
            return _conform(samples, MARKER_COLUMNS, path, "rocpd_region/rocpd_sample")

        frames.append(
            _shaped(
                conn,
                path,
                f"SELECT s.id AS id, {sa.pid} AS process_id, {sa.tid} AS thread_id, {sa.start} AS start_ns, "
                f"{sa.end} AS end_ns, e.id AS event_id, e.stack_id AS correlation_id, e.extdata AS extdata, "
                f"{category} AS category, {name} AS name{sample_refs} FROM {src['rocpd_sample']} s "
                f"JOIN {ev} e ON e.id = s.event_id AND e.guid = s.guid {sa.joins} {category_join} {name_join}"
                f"ORDER BY {sa.start}, s.guid, s.id",
                (),
                marks,
                _MARKER_READ,
            )
        )
    del mk
    frames = [f for f in frames if len(f)]
    if not frames:
        return empty_frame(MARKER_COLUMNS)
    both = _stacked(frames, _MARKER_READ)
    # by host time; at equal starts the outer (longer) range first (a stable sort of the rows as read)
    order = sorted_order([Key(both["start_ns"], fill=0), Key(both["end_ns"], descending=True, fill=0)])
    if order is not None:
        both = take_rows(both, order, consume=True)  # a column at a time, each let go once reordered
    del order
    return _whole_messages(both)


#: The marker frame as read: :data:`MARKER_COLUMNS` and the ggml ranges' parts (their messages let go).
_MARKER_READ = {**MARKER_COLUMNS, **MARKER_PART_COLUMNS}


def _split_ranges(chunk: pd.DataFrame) -> pd.DataFrame:
    """``chunk`` (marker rows) with its ggml ranges' messages let go, their parts in :data:`MARKER_PART_COLUMNS`.

    As :func:`rocroof.capture.markers.compact_ranges` does it: a ``range`` row whose message
    parses and is written back exactly by its op, node name and invocation gets those and a
    message of None; every other row keeps its message. A marker table of 10^6 ranges then holds
    their parts as codes (:class:`~rocroof.records.TextWriter`), not a text per range;
    :func:`_whole_messages` writes them back in a table small enough to stay in memory.
    """
    import polars as pl

    n = len(chunk)
    messages = chunk["message"].to_numpy(dtype=object)
    ranges = np.flatnonzero((chunk["kind"] == "range").to_numpy(dtype=bool))
    op = np.full(n, None, dtype=object)
    node = np.full(n, None, dtype=object)
    invocation = np.zeros(n, dtype=np.int64)
    unknown = np.ones(n, dtype=bool)
    if len(ranges):
        texts: Any = messages[ranges]
        # polars splits the texts and checks them without a Python string per part; a text it refuses
        # (a lone surrogate) leaves them to the Python reading
        with contextlib.suppress(Exception):
            texts = pl.Series("m", texts, dtype=pl.String)
        kept, parts = split_ranges(texts)
        messages = messages.copy()
        messages[ranges] = kept
        op[ranges] = parts["range_op"]
        node[ranges] = parts["range_node"]
        numbers = parts["range_invocation"]
        invocation[ranges] = numbers.to_numpy(dtype=np.int64, na_value=0)
        unknown[ranges] = numbers.isna()
    return chunk.assign(
        message=pd.Series(messages, index=chunk.index, dtype=object),
        range_op=pd.Series(op, index=chunk.index, dtype=object),
        range_node=pd.Series(node, index=chunk.index, dtype=object),
        range_invocation=pd.Series(pd.arrays.IntegerArray(invocation, unknown), index=chunk.index),
    )


def _whole_messages(markers: pd.DataFrame) -> pd.DataFrame:
    """``markers`` as :data:`MARKER_COLUMNS` alone (every message written back) when small or none was let go.

    A marker table that stays in memory (:data:`rocroof.spill.SPILL_MIN_BYTES`) keeps its texts as
    before; a large one keeps the parts of the ranges whose messages were let go
    (:func:`_split_ranges`), which :func:`rocroof.capture.markers.ggml_fields` reads and the store
    writes back.
    """
    if "range_op" not in markers.columns:
        return markers
    if not small_frame(len(markers)) and not markers["range_op"].isna().all():
        return markers
    if bool(markers["range_op"].notna().any()):
        markers = markers.assign(message=pd.Series(marker_messages(markers), dtype=object))
    return markers[list(MARKER_COLUMNS)]


def _stacked(frames: list[pd.DataFrame], columns: dict[str, str]) -> pd.DataFrame:
    """Frames of ``columns`` one after the other, written to spill files a block at a time (``frames`` emptied).

    Frames of few rows in all (:func:`~rocroof.records.small_frame`) are stacked in memory.
    """
    if len(frames) == 1:
        return frames.pop()
    if small_frame(sum(len(f) for f in frames)):
        return stack_frames(frames)
    with SpilledFrameWriter(columns, **_KIND) as writer:
        while frames:
            writer.add_frame(frames.pop(0), BLOCK)
        return writer.finish()


def _arrow_pages(
    conn: sqlite3.Connection,
    queries: list[str],
    shape: Callable[[pd.DataFrame], pd.DataFrame],
    columns: dict[str, str],
    *,
    texts: frozenset[str] = frozenset(),
    derive: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> pd.DataFrame | None:
    """The results of ``queries`` through ADBC, each a slice at a time (:func:`arrow_slices`), shaped, in spill files.

    One query's Arrow result is held at a time, and one slice of it as pandas; each shaped slice
    (of ``columns``) goes to spill files (:class:`~rocroof.records.SpilledFrameWriter`). None (the caller
    reads every record through sqlite3) when ADBC cannot read or type a result, when no query
    returns a row (an empty result's columns come from sqlite3), or when ``shape`` refuses a record
    of one of several queries (the one read names the record first in the query's order, as a
    read of the file at once would).
    """
    with SpilledFrameWriter(columns, **_KIND) as writer:
        for sql in queries:
            slices = arrow_slices(conn, sql, min(FETCH_ROWS, SLICE_ROWS), texts=texts, derive=derive)
            if slices is None:
                return None
            try:
                for frame in slices:
                    writer.add(shape(frame))
                    del frame
            except NotNumbers:
                return None
            except ParseError:
                if len(queries) == 1:
                    raise
                return None  # a damaged record: the read of every record at once names the one it meets first
            del slices
            release_free_memory()
        return writer.finish() if writer.rows else None  # no rows: sqlite3 gives the columns


def _marker_category(category: str) -> bool:
    """A roctx category name, as :func:`_is_marker` tests it in SQL."""
    return category.startswith("MARKER") or category == "marker_api"


def _messages(path: Path, table: str, rows: pd.DataFrame, named: bool) -> pd.Series:
    """The marker message of each row (None: no marker), from ``extdata`` and, in schema 4, the name."""
    n = len(rows)
    out = (
        rows["simple_message"].to_numpy(dtype=object).copy()
        if "simple_message" in rows
        else np.full(n, None, dtype=object)
    )
    # the messages SQLite did not find: read (or refused) here, row by row
    todo = np.flatnonzero(pd.isna(out))
    if len(todo):
        ids, events, extdata = (rows[c].to_numpy(dtype=object)[todo] for c in ("id", "event_id", "extdata"))
        out[todo] = [_message(path, table, i, e, x) for i, e, x in zip(ids, events, extdata, strict=True)]
    if named:
        names = rows["name"].to_numpy(dtype=object)
        out = np.array([_marker_message(nm, m) for nm, m in zip(names, out, strict=True)] + [None], dtype=object)[:-1]
    return pd.Series(out, index=rows.index, dtype=object)


def _marker_message(name: object, extdata_message: str | None) -> str | None:
    """A schema 4 marker's message: the record's name, where the writer put it.

    The schema 4.0 ``generateRocpd.cpp`` writes a roctx range that has a message with ``name_id``
    = the message and ``extdata`` = ``{"message": <the roctx operation>}`` (``roctxThreadRangeA``,
    ``roctxMarkA``), and one without a message with the operation as name and ``extdata`` ``{}``.
    So: no ``$.message``, no marker; a name that is itself a roctx operation while ``$.message``
    is not (the schema 3 layout in a schema 4 file) gives ``$.message``; otherwise the name.
    """
    if extdata_message is None:
        return None
    if not isinstance(name, str) or not name:
        return extdata_message
    if name.startswith("roctx") and not extdata_message.startswith("roctx"):
        return extdata_message
    return name


def _api_calls(
    conn: sqlite3.Connection, src: dict[str, str], path: Path, guids: list[object], launched: _Launched
) -> pd.DataFrame:
    """The HIP API calls that launched a dispatch, in time order, as :data:`LAUNCH_COLUMNS` (their times checked).

    ``rocpd_region`` rows of other categories than markers whose (guid, correlation id) a
    dispatch has (``launched``): an inner join, made as each slice of the result is read, so that
    other calls are never held; the calls kept go to spill files a slice at a time.
    """
    rg = src["rocpd_region"]
    at = _placement(conn, src, path, "rocpd_region", "r")
    category_join, category = _category(src, "e", "c")
    refs = f", {at.refs[0]} AS start_ref, {at.refs[1]} AS end_ref" if at.refs is not None else ""
    query = _api_query(src, at, guids, refs, category_join, category)
    # one process's calls a range of region ids per query (bounded Arrow results), put in query order
    pages = _id_pages(conn, rg, "r", TABLE_PAGE_IDS) if len(guids) <= 1 else [""]
    # read in several queries, the calls keep their guid code, id (and references) for the sort and the checks
    ranged = {"guid": "Int64", "id": "Int64", **({"start_ref": "Int64", "end_ref": "Int64"} if refs else {})}

    def launches_only(calls: pd.DataFrame, *, checked: bool = False) -> pd.DataFrame:
        """The rows of ``calls`` whose (guid, correlation id) a dispatch has, as launch rows.

        ``checked``: their times are refused here (a read in one query: the rows in their final order).
        """
        calls["correlation_id"] = _int_ids(calls["correlation_id"], path, "rocpd_event", "stack_id")
        keep = calls["correlation_id"].notna().to_numpy(dtype=bool).copy()  # (pandas may give a read-only view)
        keep[keep] = launched.contains(
            calls["guid"].to_numpy(dtype=np.int64)[keep],
            calls["correlation_id"].to_numpy(dtype=np.int64, na_value=0)[keep],
        )
        calls = calls if keep.all() else calls[keep].reset_index(drop=True)
        if at.refs is not None and len(calls):
            for column, which in (("start_ns", "start"), ("end_ns", "end")):
                calls[column] = _int_ids(calls[column], path, "rocpd_region", which)
            if checked:
                _refuse_bad_times(path, "rocpd_region", calls["id"], calls, calls, at, "API call")
        out = _conform(calls, LAUNCH_COLUMNS, path, "rocpd_region")
        if not checked:
            for name in ranged:
                out[name] = calls[name].array
        return out

    if len(pages) > 1:
        calls = _arrow_pages(
            conn,
            [query(where) for where in pages],
            launches_only,
            {**LAUNCH_COLUMNS, **ranged},
            texts=frozenset({"api_name"}),
        )
        if calls is not None:
            # the query's order: start (NULL first, as SQLite sorts it, before the smallest start), guid, id
            start = calls["start_ns"]
            unknown = Key(start.array._mask, descending=True)  # noqa: SLF001
            order = sorted_order([Key(start, fill=-(2**63)), unknown, calls["guid"], calls["id"]])
            if order is not None:
                calls = take_rows(calls, order, consume=True)
            del order, start, unknown
            if at.refs is not None:
                _refuse_bad_times_in_blocks(path, "rocpd_region", calls, "id", at, "API call")
            return calls[list(LAUNCH_COLUMNS)]

    def checked(calls: pd.DataFrame) -> pd.DataFrame:
        """:func:`launches_only` of a read in one query."""
        return launches_only(calls, checked=True)

    if len(pages) == 1:
        calls = _arrow_pages(conn, [query("")], checked, LAUNCH_COLUMNS, texts=frozenset({"api_name"}))
        if calls is not None:
            return calls
    return _chunked(conn, path, query(""), (), checked, LAUNCH_COLUMNS)


def _api_query(
    src: dict[str, str], at: _Placement, guids: list[object], refs: str, category_join: str, category: str
) -> Callable[[str], str]:
    """The API calls' query (:func:`_api_calls`) of the records that ``where`` (``" AND ..."`` or "") leaves."""
    ev, st, rg = src["rocpd_event"], src["rocpd_string"], src["rocpd_region"]

    def query(where: str) -> str:
        return (
            f"SELECT {_literal_code('r.guid', guids)} AS guid, r.id AS id, {at.pid} AS process_id, "
            f"{at.tid} AS thread_id, {at.start} AS start_ns, {at.end} AS end_ns, e.stack_id AS correlation_id, "
            f"n.string AS api_name{refs} "
            f"FROM {rg} r JOIN {ev} e ON e.id = r.event_id AND e.guid = r.guid {category_join} {at.joins} "
            f"LEFT JOIN {st} n ON n.id = r.name_id AND n.guid = r.guid "
            f"WHERE ({category} IS NULL OR NOT {_is_marker(category)}){where} ORDER BY {at.start}, r.guid, r.id"
        )

    return query


def _label(agent: object) -> str | None:
    if agent is None or pd.isna(agent):
        return None
    try:
        return str(int(agent))  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return str(agent)


def _int_ids(values: pd.Series, path: Path, table: str, column: str) -> pd.Series:
    """``values`` as nullable integers (same index); ParseError naming ``table.column`` otherwise."""
    out = _conform(pd.DataFrame({column: values.to_numpy(dtype=object)}), {column: "Int64"}, path, table)[column]
    return out.set_axis(values.index)


def _with_rows(df: pd.DataFrame, keymap: pd.DataFrame, path: Path) -> pd.DataFrame:
    """Add the dispatch ``row`` of each (guid code, event_id); rows of no dispatch are dropped."""
    df = df.assign(
        guid=df["guid"].to_numpy(dtype=np.int64), event_id=_int_ids(df["event_id"], path, "rocpd_pmc_event", "event_id")
    )
    return df.merge(keymap, on=["guid", "event_id"], how="inner")
