"""The results database: a SQLite file by default, a PostgreSQL server by URL for teams.

:class:`Store` writes each run in one transaction (a failed ingest leaves the database as it
was), refuses to ingest the same raw output twice (content hash) unless asked to replace it,
and opens read-only for queries. Several processes may write one database at once: a SQLite
file is in WAL mode and its writers queue for up to :data:`WRITE_TIMEOUT_S` (in short tries:
Ctrl-C stops a wait at once, and an ``on_wait`` hook hears of it; see :mod:`.locking`);
PostgreSQL writers run side by side.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import functools
import importlib.util
import itertools
import math
import os
import re
import sqlite3
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import pandas as pd
import sqlalchemy as sa

from .. import __version__
from ..analysis.dram import OUTPUT_COLUMNS as DRAM_BYTE_COLUMNS
from ..dbfile import damaged, damaged_message, read_only_uri
from ..errors import DuplicateRunError, InputError, QueryError, SchemaError
from ..labels import label_problem, parse_run_labels, runs_matching
from ..memory import release_free_memory
from ..records import WINDOW_FRAMES, non_decreasing, spilled_array
from ..spill import ColumnWriter, release_pages, take
from ..text import printable, storable
from . import migrations, schema
from .derived import Derived, derive, exact_ints, numbered_parameters
from .locking import (
    READ_TIMEOUT_S,
    WRITE_TIMEOUT_S,
    LockWait,
    begin_immediate,
    is_locked,
    retry_while_locked,
    short_tries,
    wait_readable,
)

if TYPE_CHECKING:  # the ingest pipeline (and its imports) only where a run is written
    from ..ingest.pipeline import RunFrames

#: progress(stage, done, total)
Progress = Callable[[str, int, int], None]

INSERT_CHUNK = 20_000

#: Page size of a new SQLite database (SQLite's default is 4096): a 10^6-dispatch run's pages are
#: written to the log and copied back at commit a quarter as many times (benchmarks/RESULTS.md).
PAGE_BYTES = 16_384
#: The PostgreSQL driver (psycopg 3; ``pip install 'rocroof[postgres]'``).
PG_DRIVER = "psycopg"
_PG_INSTALL = "pip install 'rocroof[postgres]' (or: pip install 'psycopg[binary]')"
_PG_READ_ONLY = "-c default_transaction_read_only=on"
_TABLE_ORDER = [
    "agent",
    "pass",
    "marker_range",
    "op_invocation",
    "op_node",
    "op_operand",
    "op_model",
    "op_edge",
    "run_ceiling",
    "kernel_symbol",
    "dram_text",
    "dispatch_record",
    "counter",
    "counter_reading",
    "counter_instance_reading",
]
#: The run frames that the store keeps in another layout (schema 6; see :data:`_GROUPS`).
_LOGICAL = ("dispatch", "counter_value", "counter_instance", "dram_traffic")


def _distinct(values: pd.Series) -> int:
    """Distinct non-missing values of a column (categorical: its used categories)."""
    if isinstance(values.dtype, pd.CategoricalDtype):
        # the codes' own narrow type (int8 for a few counters): a sorted copy of 8x10^6 codes is 8 MB,
        # where bincount's int64 copy was 64 MB, made while every frame of the run is held
        used = np.unique(values.cat.codes.to_numpy())
        return int((used >= 0).sum())
    return int(values.nunique())


def _numbered(values: pd.Series, dtype: Any = np.int64) -> tuple[np.ndarray, list[Any]]:
    """``(codes, distinct values)`` of a text column in order of first appearance; code -1 for missing.

    ``codes`` has ``dtype`` (a signed integer type wide enough for the distinct values).
    """
    if isinstance(values.dtype, pd.CategoricalDtype):
        codes = values.cat.codes.to_numpy()
        remap = np.full(len(values.cat.categories) + 1, -1, dtype=dtype)
        first = pd.unique(codes[codes >= 0])  # categories in order of first appearance
        remap[first] = np.arange(len(first))
        return remap[codes], [values.cat.categories[c] for c in first]
    codes, uniques = pd.factorize(values.to_numpy(dtype=object), use_na_sentinel=True)
    return codes.astype(dtype), list(uniques)


_METHOD_NUMBER = {name: i for i, (name, _) in enumerate(schema.ATTRIBUTION_METHODS)}


def _method_numbers(methods: pd.Series) -> pd.arrays.IntegerArray:
    """Attribution method names as ``attribution_index`` numbers (missing: NULL).

    Raises:
        SchemaError: a method :data:`rocroof.store.schema.ATTRIBUTION_METHODS` does not list.
    """
    codes, names = _numbered(methods)
    unknown = [n for n in names if n not in _METHOD_NUMBER]
    if unknown:
        raise SchemaError(f"attribution method {unknown[0]!r} has no number in schema.ATTRIBUTION_METHODS")
    table = np.array([_METHOD_NUMBER[n] for n in names] + [0], dtype=np.int64)
    return pd.arrays.IntegerArray(table[codes], codes < 0)


class _Numbering:
    """Ids of names in order of first appearance, kept over the windows of one run (see :class:`_RunNames`)."""

    def __init__(self) -> None:
        self.ids: dict[Any, int] = {}
        self.used = np.zeros(0, dtype=bool)  # of the names given to :meth:`seed`: which values had

    def seed(self, names: list[Any]) -> None:
        """Number ``names`` 0, 1, ... before any value comes (their rows are stored by the caller)."""
        self.ids = {name: i for i, name in enumerate(names)}
        self.used = np.zeros(len(names), dtype=bool)

    def unused(self) -> list[Any]:
        """The names given to :meth:`seed` that no value had."""
        return [name for name, i in self.ids.items() if i < len(self.used) and not self.used[i]]

    def number(self, values: pd.Series, dtype: Any = np.int64) -> tuple[np.ndarray, pd.DataFrame]:
        """``(ids, new)``: each value's id (-1 for missing; shape (n,), ``dtype``), and the names not seen before.

        ``new`` has columns ``id`` and ``name``, in id order: the rows to store for these values.
        """
        codes, uniques = _numbered(values, dtype)
        start = len(self.ids)
        remap = np.array([self.ids.setdefault(u, len(self.ids)) for u in uniques] + [-1], dtype=dtype)
        ids = remap[:-1].astype(np.int64)
        self.used[ids[ids < len(self.used)]] = True
        fresh = [u for u, i in zip(uniques, ids.tolist(), strict=True) if i >= start]
        return remap[codes], pd.DataFrame({"id": np.arange(start, start + len(fresh)), "name": fresh})


class _RunNames:
    """The name-to-id maps of one run's numbered tables: ``kernel_symbol``, ``dram_text`` and ``counter``.

    A run written whole uses a fresh one; a run written window by window (:meth:`Store.write_run`
    with ``RunFrames.windows``) keeps one over its windows, so that each window numbers only the
    names no earlier window had, after theirs (or after the names the run gave before its first
    window: :data:`_NUMBERED`).
    """

    def __init__(self) -> None:
        self.kernels = _Numbering()
        self.texts = _Numbering()
        self.counters = _Numbering()

    def of(self, table: str) -> _Numbering:
        """The map of a numbered table (a key of :data:`_NUMBERED`)."""
        return {"kernel_symbol": self.kernels, "dram_text": self.texts, "counter": self.counters}[table]


#: The tables whose rows the store numbers by first appearance: (id column, name column). A run
#: given as windows may give them in ``RunFrames.tables`` to fix the numbering up front.
_NUMBERED = {
    "kernel_symbol": ("kernel_index", "kernel_name"),
    "dram_text": ("text_index", "text"),
    "counter": ("counter_index", "counter_name"),
}


def _dispatch_tables(tables: dict[str, pd.DataFrame], names: _RunNames | None = None) -> dict[str, pd.DataFrame]:
    """``kernel_symbol``, ``dram_text`` and ``dispatch_record`` of a run's ``dispatch`` and ``dram_traffic``.

    ``names``: the run's maps when ``tables`` is one window of the run (its new names only are
    returned in ``kernel_symbol`` and ``dram_text``); None: a fresh one (a whole run).
    """
    names = names or _RunNames()
    out: dict[str, pd.DataFrame] = {}
    disp = tables.get("dispatch")
    if disp is not None and len(disp):
        codes, new = names.kernels.number(disp["kernel_name"])
        out["kernel_symbol"] = new.rename(columns={"id": "kernel_index", "name": "kernel_name"})
        rec = disp.drop(columns=["kernel_name", "attribution_method"], errors="ignore")
        rec["kernel_index"] = spilled_array(pd.arrays.IntegerArray(np.where(codes >= 0, codes, 0), codes < 0))
        del codes
        if "attribution_method" in disp:
            rec["attribution_index"] = spilled_array(_method_numbers(disp["attribution_method"]))
        dram = tables.get("dram_traffic")
        if dram is not None and len(dram):
            ids = rec["dispatch_index"].to_numpy(dtype=np.int64)
            wanted = dram["dispatch_index"].to_numpy(dtype=np.int64)
            if _numbered_in_order(ids):  # the pipeline's numbering: a row's index is its position
                rows = np.where((wanted >= 0) & (wanted < len(ids)), wanted, -1)
            else:
                index = pd.Index(ids)
                if not index.is_unique:  # a repeated dispatch index: the insert refuses it (primary key)
                    first = pd.Series(np.arange(len(rec))).groupby(ids).first()
                    rows = first.reindex(wanted).fillna(-1).to_numpy(dtype=np.int64)
                else:
                    rows = index.get_indexer(wanted)
                del index
            del ids, wanted
            keep = rows >= 0
            rows = rows[keep]

            def floats(name: str) -> np.ndarray:
                if name not in dram:
                    return np.full(int(keep.sum()), np.nan)
                values: np.ndarray = pd.to_numeric(dram[name], errors="coerce").to_numpy(
                    dtype=np.float64, na_value=np.nan
                )
                kept: np.ndarray = values[keep]
                return kept

            def texts_of(name: str) -> pd.Series:
                return dram[name].astype(object) if name in dram else pd.Series([None] * len(dram), dtype=object)

            for value in ("dram_read_bytes", "dram_write_bytes"):
                v = floats(value)
                column = np.full(len(rec), np.nan)
                column[rows] = v
                rec[value] = spilled_array(column)  # only written from here on: to a spill file (rocroof.spill)
                del column
                for side in ("_min", "_max"):
                    b = floats(value + side)
                    bound = np.full(len(rec), np.nan)
                    bound[rows] = np.where(b == v, np.nan, b)  # exact: NULL (the views show the value)
                    rec[value + side] = spilled_array(bound)
                    del bound, b
                del v
                release_free_memory()  # the column's temporaries, before the next (~60 MB at 2x10^6 rows)
            text = pd.concat([texts_of("dram_formula"), texts_of("dram_bytes_note")], ignore_index=True)
            text_codes, new = names.texts.number(text.astype(object))
            out["dram_text"] = new.rename(columns={"id": "text_index", "name": "text"})
            for name, part in (
                ("dram_formula_index", text_codes[: len(dram)]),
                ("dram_note_index", text_codes[len(dram) :]),
            ):
                column = np.full(len(rec), -1, dtype=np.int64)
                column[rows] = part[keep]
                rec[name] = spilled_array(pd.arrays.IntegerArray(np.where(column >= 0, column, 0), column < 0))
                del column
                release_free_memory()
        out["dispatch_record"] = rec
    return out


def _numbered_in_order(ids: np.ndarray, block: int = 1 << 20) -> bool:
    """True when ``ids`` (int64) is ``0, 1, ..., n - 1``: each row's id is its position.

    n values from 0 to n - 1 that always increase are exactly those (checked ``block`` at a time).
    """
    if not len(ids) or ids[0] != 0 or ids[-1] != len(ids) - 1:
        return False
    return non_decreasing(ids, block, strict=True)


def _counter_tables(tables: dict[str, pd.DataFrame], names: _RunNames | None = None) -> dict[str, pd.DataFrame]:
    """``counter``, ``counter_reading`` and ``counter_instance_reading`` of a run's counter frames.

    ``names``: as for :func:`_dispatch_tables` (``counter`` holds a window's new counters only).
    """
    names = names or _RunNames()
    out: dict[str, pd.DataFrame] = {}
    values, instances = tables.get("counter_value"), tables.get("counter_instance")
    parts = [df for df in (values, instances) if df is not None and len(df)]
    if parts:
        # counter names numbered over both frames, without a Python string per reading
        coded, fresh = [], []
        for df in parts:
            codes, new = names.counters.number(df["counter_name"], np.int32)
            coded.append(codes)  # -1: a missing name
            fresh.append(new)
        out["counter"] = pd.concat([f for f in fresh if len(f)] or fresh[:1], ignore_index=True).rename(
            columns={"id": "counter_index", "name": "counter_name"}
        )
        if values is not None and len(values):
            out["counter_reading"] = _side_by_side(values["dispatch_index"], coded[0], values["value"])
        if instances is not None and len(instances):
            frame = instances.drop(columns=["counter_name"])
            frame["counter_index"] = coded[-1]
            out["counter_instance_reading"] = frame
    return out


class _StrictSums:
    """Per group, the sum of each column, NaN where any row of the group is NaN (SQL's strict sum).

    Accumulated a chunk of rows at a time (:meth:`add`).
    """

    def __init__(self, n_groups: int) -> None:
        self.n_groups = n_groups
        self.totals: dict[str, np.ndarray] = {}
        self.missing: dict[str, np.ndarray] = {}
        self.rows = np.zeros(n_groups, dtype=np.int64)

    def add(self, values: dict[str, np.ndarray], groups: np.ndarray) -> None:
        """Add rows: ``values`` (name -> float64 column) of rows in ``groups`` (0 .. n_groups - 1)."""
        totals, missing = {}, {}
        for name, col in values.items():
            gone = np.isnan(col)
            # floats also for a chunk of no rows (numpy's bincount of empty weights is int64, which a
            # later NaN or float chunk cannot go into: a chunk of counter-pass rows only is such a chunk)
            weights = np.where(gone, 0.0, col)
            totals[name] = np.bincount(groups, weights=weights, minlength=self.n_groups).astype(np.float64)
            missing[name] = np.bincount(groups, weights=gone, minlength=self.n_groups).astype(np.float64)
        self.add_sums(totals, missing, np.bincount(groups, minlength=self.n_groups))

    def add_sums(self, totals: dict[str, np.ndarray], missing: dict[str, np.ndarray], rows: np.ndarray) -> None:
        """Add one chunk already summed by group (shape (n_groups,) each); :meth:`add` sums its rows so.

        ``totals[name]`` must be the chunk's known values summed in row order from 0.0, as
        ``np.bincount`` sums them, ``missing[name]`` its NaN count per group. A column's first sums
        are copied (a caller may reuse its arrays: :class:`_WindowOpTotals` zeroes them for its next chunk).
        """
        self.rows += rows
        for name, total in totals.items():
            if name in self.totals:
                self.totals[name] += total
                self.missing[name] += missing[name]
            else:
                self.totals[name], self.missing[name] = total.copy(), missing[name].copy()

    def frame(self) -> pd.DataFrame:
        """The sums by column, and ``_rows`` (rows per group)."""
        out = {}
        for name, total in self.totals.items():
            total[self.missing[name] > 0] = np.nan
            out[name] = total
        frame = pd.DataFrame(out)
        frame["_rows"] = self.rows
        return frame


#: ``dispatch_record`` rows summed at a time by :func:`_op_totals` (its temporaries: ~25 MB).
_OP_TOTAL_CHUNK = 1 << 18
#: The byte sums of an op_total row, in its order: read, read min/max, write, write min/max.
_OP_TOTAL_SUMS = DRAM_BYTE_COLUMNS[:6]


def _timing_values(part: pd.DataFrame, peak: float | None) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """The timing dispatches of ``part`` (``dispatch_record`` rows) and the values :func:`_op_totals` sums of them.

    Returns:
        ``(dispatch_index, op_index, values)``: of the n rows whose ``timing_dispatch_index`` is their own
        ``dispatch_index``, those two (int64, shape (n,); op index -1 where NULL) and the summed columns
        (name -> float64, shape (n,); NaN where unknown): time (ns), the byte columns and their bounds (a
        missing bound is the value), and the time at the ceiling ``peak`` (GB/s; NaN without one).
    """
    ids = part["dispatch_index"].to_numpy(dtype=np.int64)
    timing = part["timing_dispatch_index"].astype("Int64").to_numpy(dtype=np.int64, na_value=-1)
    keep = timing == ids
    n = int(keep.sum())

    def floats(name: str) -> np.ndarray:
        if name not in part:
            return np.full(n, np.nan)
        values: np.ndarray = pd.to_numeric(part[name], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
        kept: np.ndarray = values[keep]
        return kept

    op_index = part["op_index"].astype("Int64").to_numpy(dtype=np.int64, na_value=-1)[keep]
    read, write = floats("dram_read_bytes"), floats("dram_write_bytes")
    bound = {
        side: {
            v: np.where(np.isnan(b := floats(f"dram_{v}_bytes_{side}")), x, b)
            for v, x in (("read", read), ("write", write))
        }
        for side in ("min", "max")
    }
    total = read + write
    values = {
        "duration_ns": floats("duration_ns"),
        "dram_read_bytes": read,
        "dram_read_bytes_min": bound["min"]["read"],
        "dram_read_bytes_max": bound["max"]["read"],
        "dram_write_bytes": write,
        "dram_write_bytes_min": bound["min"]["write"],
        "dram_write_bytes_max": bound["max"]["write"],
        "dram_bytes": total,
        "dram_bytes_min": bound["min"]["read"] + bound["min"]["write"],
        "dram_bytes_max": bound["max"]["read"] + bound["max"]["write"],
        "dram_time_at_peak_ns": total / peak if peak else np.full(n, np.nan),
    }
    return ids[keep], op_index, values


def _op_totals(record: pd.DataFrame, ops: pd.DataFrame | None, peak_gbps: float | None) -> pd.DataFrame:
    """The ``op_summary`` view's rows of one run, from its ``dispatch_record`` frame (as stored) and its ops.

    Summed here, before the rows are written, instead of through the view after (a scan of every
    stored dispatch: ~3 s at 10^6 dispatches), a chunk of :data:`_OP_TOTAL_CHUNK` rows at a time.
    The same rules as the view (:mod:`rocroof.store.views`): timing dispatches only
    (``timing_dispatch_index = dispatch_index``); op NULL for dispatches of no op invocation; a sum
    is NULL when any of its rows is NULL; a missing bound is the value; GB/s = bytes / ns; the time
    at the ceiling is each dispatch's bytes / ``peak_gbps`` (ns), summed. Rows in byte order of op,
    NULL first, ``row_index`` from 0. Float sums may differ from the view's in the last bits
    (another summation order).

    Args:
        record: ``dispatch_record`` columns of the run: ``dispatch_index``, ``timing_dispatch_index``,
            ``op_index``, ``duration_ns`` and, when known, ``dram_read_bytes``, ``dram_write_bytes``
            and their ``_min``/``_max`` (NaN where exact).
        ops: ``op_invocation`` rows (``op_index``, ``op``), or None.
        peak_gbps: the run's DRAM ceiling, GB/s, or None.

    Returns:
        One row per op: ``row_index`` and :data:`schema.OP_TOTAL_COLUMNS` but ``run_id``.
    """
    # each op row's group: 1 + the rank of its op name in byte order (0: the NULL op)
    op_slot = np.zeros(1, dtype=np.int64)  # the last entry: dispatches of no op row
    distinct: list[str] = []
    op_rows: pd.Index | None = None
    if ops is not None and len(ops):
        codes, uniques = pd.factorize(ops["op"].astype(object), use_na_sentinel=True)
        distinct = sorted({str(u) for u in uniques})
        rank = np.array([distinct.index(str(u)) + 1 for u in uniques] + [0], dtype=np.int64)
        op_slot = np.append(rank[codes], 0)  # code -1 (no name) -> the last entry of rank: 0
        op_rows = pd.Index(ops["op_index"].to_numpy(dtype=np.int64))
    n_groups = len(distinct) + 1
    peak = float(peak_gbps) if peak_gbps else None
    sums = _StrictSums(n_groups)
    invocation_parts: list[np.ndarray] = []  # distinct op indexes of each chunk
    group_parts: list[np.ndarray] = []  # and their groups
    for lo in range(0, len(record), _OP_TOTAL_CHUNK):
        _, op_index, values = _timing_values(record.iloc[lo : lo + _OP_TOTAL_CHUNK], peak)
        pos = np.full(len(op_index), -1, dtype=np.int64)
        if op_rows is not None:
            attributed = op_index >= 0
            pos[attributed] = op_rows.get_indexer(op_index[attributed])
        groups = op_slot[pos]  # pos -1: the last entry (0)
        sums.add(values, groups)
        # distinct op invocations per group: an op index belongs to one group (its op row's name, or NULL)
        first = np.unique(op_index, return_index=True)[1]
        first = first[op_index[first] >= 0]
        invocation_parts.append(op_index[first])
        group_parts.append(groups[first])
        release_pages()  # a spilled column's pages, once summed
    every, first = np.unique(
        np.concatenate(invocation_parts) if invocation_parts else np.zeros(0, np.int64), return_index=True
    )
    invocations = np.bincount(
        (np.concatenate(group_parts) if group_parts else np.zeros(0, np.int64))[first], minlength=n_groups
    )
    del every
    return _op_total_rows(sums.frame(), invocations, distinct, peak)


def _op_total_rows(
    frame: pd.DataFrame, invocations: np.ndarray, distinct: list[str], peak: float | None
) -> pd.DataFrame:
    """``op_total`` rows from the sums by group, as :func:`_op_totals` returns them.

    Args:
        frame: :meth:`_StrictSums.frame` of the groups: group 0 the NULL op, group i ``distinct[i - 1]``.
        invocations: distinct op invocations per group, shape (groups,).
        distinct: the op names in byte order.
        peak: the run's DRAM ceiling, GB/s, or None.

    Returns:
        The rows of the groups that hold a dispatch, ``row_index`` from 0.
    """
    n_groups = len(distinct) + 1
    used = frame["_rows"].to_numpy() > 0
    dur = frame["duration_ns"].to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        per_ns = np.where(dur == 0, np.nan, 1.0 / dur)
        gbps = frame["dram_bytes"].to_numpy() * per_ns
        out = pd.DataFrame(
            {
                "op": [None, *distinct],
                "invocations": invocations,
                "dispatches": frame["_rows"].to_numpy(dtype=np.int64),
                "duration_ns": pd.array([None if np.isnan(v) else int(v) for v in dur], dtype="Int64"),
                **{c: frame[c].to_numpy() for c in _OP_TOTAL_SUMS},
                "dram_bytes": frame["dram_bytes"].to_numpy(),
                "achieved_gbps": gbps,
                "achieved_gbps_min": frame["dram_bytes_min"].to_numpy() * per_ns,
                "achieved_gbps_max": frame["dram_bytes_max"].to_numpy() * per_ns,
                "pct_of_dram_peak": 100.0 * gbps / peak if peak else np.full(n_groups, np.nan),
                "dram_time_at_peak_ns": frame["dram_time_at_peak_ns"].to_numpy(),
            }
        )
    out = out[used].reset_index(drop=True)
    out.insert(0, "row_index", np.arange(len(out)))
    return out


class _WindowOpTotals:
    """The ``op_total`` rows of a run written window by window (:meth:`Store.write_run` with ``windows``).

    Fed one window's ``dispatch_record`` frame and ``op_invocation`` rows at a time (:meth:`add_window`);
    it holds sums per op name only (the run's and the current chunk's), never rows. It gives the
    rows :func:`_op_totals` gives for the whole run's frame, float sums to the last bit, when that
    frame's row i is dispatch i (the pipeline's numbering) and the timing dispatches come in
    ``dispatch_index`` order over the windows: the sums are taken over the same chunks (dispatches
    ``k * _OP_TOTAL_CHUNK`` .. ``(k + 1) * _OP_TOTAL_CHUNK - 1``, whatever windows they came in),
    each from 0.0 in row order, as ``np.bincount`` sums a chunk: a chunk's part in one window is
    added to the chunk's sums so far by ``np.add.at``, which adds element after element in order,
    as ``np.bincount``'s loop does, so a chunk split over windows sums to the same bits. (It held
    the chunk's values until the chunk was complete before: 2^18 dispatches of 11 float columns,
    ~25 MB.) An op's dispatches are all in the window of its op row.

    Args:
        peak_gbps: the DRAM ceiling each dispatch's time at the ceiling is taken with.
    """

    _SUMMED = (
        "duration_ns",
        *_OP_TOTAL_SUMS,
        "dram_bytes",
        "dram_bytes_min",
        "dram_bytes_max",
        "dram_time_at_peak_ns",
    )

    def __init__(self, peak_gbps: float | None) -> None:
        self.peak = float(peak_gbps) if peak_gbps else None
        self.slots: dict[str, int] = {}  # op name -> its group (1, 2, ... by first appearance; 0: NULL)
        self.sums = _StrictSums(1)  # the chunks summed so far, by group
        self.folded = 0  # chunks summed so far: 0 .. folded - 1
        # the chunk being gathered, summed by group so far (known values, NaN counts, rows)
        self.chunk_totals = {name: np.zeros(1) for name in self._SUMMED}
        self.chunk_missing = {name: np.zeros(1) for name in self._SUMMED}
        self.chunk_rows = np.zeros(1, dtype=np.int64)
        self.invocations = np.zeros(1, dtype=np.int64)
        self.dangling: list[np.ndarray] = []  # op indexes of timing dispatches that name no op row

    def _grow(self, n: int) -> None:
        """Room for ``n`` groups (a new op name: its sums so far are 0, as the chunks' bincounts gave it)."""
        extra = n - self.sums.n_groups
        if extra <= 0:
            return
        for sums in (self.sums.totals, self.sums.missing, self.chunk_totals, self.chunk_missing):
            for name, values in sums.items():
                sums[name] = np.concatenate([values, np.zeros(extra)])
        self.sums.rows = np.concatenate([self.sums.rows, np.zeros(extra, dtype=np.int64)])
        self.chunk_rows = np.concatenate([self.chunk_rows, np.zeros(extra, dtype=np.int64)])
        self.sums.n_groups = n
        self.invocations = np.concatenate([self.invocations, np.zeros(extra, dtype=np.int64)])

    def group_of(self, names: Iterable[Any]) -> np.ndarray:
        """The groups of op names (None: 0), numbering new names."""
        out = np.array([0 if n is None else self.slots.setdefault(str(n), len(self.slots) + 1) for n in names])
        self._grow(len(self.slots) + 1)
        return out.astype(np.int64)

    def _fold(self) -> None:
        """Add the chunk gathered (all zeros: a chunk of no timing dispatch) to the totals, as :func:`_op_totals`."""
        self.sums.add_sums(self.chunk_totals, self.chunk_missing, self.chunk_rows)
        for sums in (self.chunk_totals, self.chunk_missing):
            for values in sums.values():
                values[:] = 0.0
        self.chunk_rows[:] = 0
        self.folded += 1

    def add(self, ids: np.ndarray, groups: np.ndarray, values: dict[str, np.ndarray]) -> None:
        """Add timing dispatches: their ``dispatch_index`` (in increasing order), groups and values (shape (n,) each).

        A dispatch of an earlier chunk than one already summed goes into the chunk being gathered
        (the sums then differ from the whole run's in the last bits at most).
        """
        if not len(ids):
            return
        chunk = ids // _OP_TOTAL_CHUNK
        cuts = np.flatnonzero(chunk[1:] != chunk[:-1]) + 1
        for lo, hi in zip([0, *cuts.tolist()], [*cuts.tolist(), len(ids)], strict=True):
            while self.folded < int(chunk[lo]):
                self._fold()
            part = groups[lo:hi]
            self.chunk_rows += np.bincount(part, minlength=len(self.chunk_rows))
            for name in self._SUMMED:
                col = values[name][lo:hi]
                gone = np.isnan(col)
                # in row order from the chunk's sums so far: the bits np.bincount gives for the whole chunk
                np.add.at(self.chunk_totals[name], part, np.where(gone, 0.0, col))
                self.chunk_missing[name] += np.bincount(part, weights=gone, minlength=len(self.chunk_rows))

    def add_window(self, record: pd.DataFrame, ops: pd.DataFrame | None, earlier_ops: _KeySpans) -> None:
        """Add a window: its ``dispatch_record`` frame and its ``op_invocation`` rows (or None).

        Raises:
            ValueError: a timing dispatch of an op that an earlier window holds (ops never
                straddle windows).
        """
        op_groups = np.zeros(1, dtype=np.int64)  # the last entry: dispatches of no op row
        op_rows = pd.Index(np.zeros(0, dtype=np.int64))
        if ops is not None and len(ops):
            codes, uniques = pd.factorize(ops["op"].astype(object), use_na_sentinel=True)
            op_groups = np.append(np.append(self.group_of(uniques), 0)[codes], 0)  # code -1: NULL
            op_rows = pd.Index(ops["op_index"].to_numpy(dtype=np.int64))
        found: list[np.ndarray] = []
        for lo in range(0, len(record), _OP_TOTAL_CHUNK):
            ids, op_index, values = _timing_values(record.iloc[lo : lo + _OP_TOTAL_CHUNK], self.peak)
            attributed = op_index >= 0
            pos = np.full(len(op_index), -1, dtype=np.int64)
            pos[attributed] = op_rows.get_indexer(op_index[attributed])
            lost = attributed & (pos < 0)
            if lost.any():
                elsewhere = earlier_ops.contains(op_index[lost])
                if elsewhere.any():
                    raise ValueError(
                        f"op_index {int(op_index[lost][elsewhere][0])} is an op of an earlier window: every "
                        "dispatch of an op must be in the window of its op_invocation row"
                    )
                self.dangling.append(_distinct_sorted(op_index[lost]))
            self.add(ids, op_groups[pos], values)
            found.append(_distinct_sorted(op_index[pos >= 0]))
            release_pages()  # a spilled column's pages, once summed
        if found:
            ops_found = _distinct_sorted(np.concatenate(found))  # each op of the window once (its dispatches are here)
            np.add.at(self.invocations, op_groups[op_rows.get_indexer(ops_found)], 1)

    def finish(self, dispatches: int) -> None:
        """Sum the last chunks, once every window is added (``dispatches``: the run's ``dispatch_record`` rows).

        The whole frame's chunks are its rows / ``_OP_TOTAL_CHUNK``, rounded up: those of no timing
        dispatch are summed too (they add 0.0, as the whole run's do).
        """
        while self.folded < -(-dispatches // _OP_TOTAL_CHUNK):
            self._fold()

    def times_again(self, batches: Iterable[pd.DataFrame], peak_gbps: float | None, dispatches: int) -> None:
        """Sum the time at the ceiling again, with another ceiling, from the run's stored timing dispatches.

        For a ceiling that was not known when the first window came: each dispatch's time is its
        bytes / the ceiling, summed in the same order as :meth:`add` sums, so the rows are those
        of :func:`_op_totals` with this ceiling. Call it after :meth:`finish`.

        Args:
            batches: frames of ``dispatch_index`` (increasing), ``op`` (its op row's name; None for
                none), ``dram_read_bytes`` and ``dram_write_bytes`` (NaN or None where unknown), of
                every timing dispatch.
            peak_gbps: the ceiling, GB/s, or None.
            dispatches: as for :meth:`finish`.
        """
        again = _WindowOpTotals(peak_gbps)
        again.slots = dict(self.slots)
        again._grow(self.sums.n_groups)
        for batch in batches:
            ids = batch["dispatch_index"].to_numpy(dtype=np.int64)
            read, write = (
                pd.to_numeric(batch[c], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
                for c in ("dram_read_bytes", "dram_write_bytes")
            )
            total = read + write
            values = {name: np.zeros(len(ids)) for name in self._SUMMED}
            values["dram_time_at_peak_ns"] = total / again.peak if again.peak else np.full(len(ids), np.nan)
            again.add(ids, again.group_of(batch["op"].tolist()), values)
        again.finish(dispatches)
        n = self.sums.n_groups
        self.sums.totals["dram_time_at_peak_ns"] = again.sums.totals["dram_time_at_peak_ns"][:n]
        self.sums.missing["dram_time_at_peak_ns"] = again.sums.missing["dram_time_at_peak_ns"][:n]
        self.peak = again.peak

    def frame(self, ops: _KeySpans) -> pd.DataFrame:
        """The ``op_total`` rows, after :meth:`finish` (``ops``: every op index of the run's op rows).

        Raises:
            ValueError: a timing dispatch names an op whose row a later window held.
        """
        if self.dangling:
            dangling = _distinct_sorted(np.concatenate(self.dangling))
            later = ops.contains(dangling)
            if later.any():
                raise ValueError(
                    f"op_index {int(dangling[later][0])} is an op of a later window: every dispatch of an op must "
                    "be in the window of its op_invocation row"
                )
            self.invocations[0] += len(dangling)
        distinct = sorted(self.slots)
        n = self.sums.n_groups
        order = np.zeros(n, dtype=np.int64)  # group by first appearance -> 1 + rank in byte order
        for name, group in self.slots.items():
            order[group] = distinct.index(name) + 1
        ranked = _StrictSums(n)
        for name in self._SUMMED:
            ranked.totals[name] = np.empty(n)
            ranked.totals[name][order] = self.sums.totals[name]
            ranked.missing[name] = np.empty(n)
            ranked.missing[name][order] = self.sums.missing[name]
        ranked.rows[order] = self.sums.rows
        invocations = np.empty_like(self.invocations)
        invocations[order] = self.invocations
        return _op_total_rows(ranked.frame(), invocations, distinct, self.peak)


_TWO_READINGS = "two values of one counter for one dispatch; a run stores one per counter and dispatch"
#: Readings turned side by side per slice (bounds the temporaries: ~40 bytes a reading).
_SIDE_BY_SIDE_SLICE = 1 << 20


def _side_by_side(dispatch: pd.Series, counter: np.ndarray, value: pd.Series) -> pd.DataFrame:
    """Long counter readings as ``counter_reading`` rows: 16 counters to a row, in key order.

    Args:
        dispatch: the dispatch index of each reading, shape (n,).
        counter: its run-local counter index (>= 0), shape (n,).
        value: its value, shape (n,).

    Returns:
        One row per (dispatch, block) that has a reading: ``dispatch_index``, ``block`` and
        ``value_0`` .. ``value_{k-1}`` (k: the highest slot used + 1; NaN where a dispatch has no
        reading of that counter), sorted by (dispatch_index, block).

    Raises:
        SchemaError: two readings of one counter for one dispatch (the readers sum those first).
    """
    per = schema.COUNTERS_PER_READING
    counter = np.asarray(counter)
    blocks = int(counter.max()) // per + 1 if len(counter) else 1
    width = min(per, int(counter.max()) + 1) if len(counter) else 1
    n = len(counter)

    def keys_of(start: int, stop: int) -> np.ndarray:
        d: np.ndarray = dispatch.iloc[start:stop].to_numpy(dtype=np.int64)
        return np.asarray(d * blocks + counter[start:stop] // per) if blocks > 1 else d

    def values_of(start: int, stop: int) -> np.ndarray:
        if value.dtype == np.float64:  # a view: no copy of a (spilled) column (na_value would copy it)
            view: np.ndarray = value.to_numpy()[start:stop]
            return view
        part = pd.to_numeric(value.iloc[start:stop], errors="coerce")
        out: np.ndarray = np.asarray(part.to_numpy(dtype=np.float64, na_value=np.nan))
        return out

    ordered, last = True, None
    for start in range(0, n, _SIDE_BY_SIDE_SLICE):  # in key order? (slice by slice: no whole-run temporaries)
        k = keys_of(start, min(start + _SIDE_BY_SIDE_SLICE, n))
        if (last is not None and k[0] < last) or not bool((k[1:] >= k[:-1]).all()):
            ordered = False
            break
        last = k[-1]
        release_pages()
    if not ordered:  # sort once (Nsight Compute's readings come counter by counter)
        keys = keys_of(0, n)
        if len(keys) and int(keys.max()) < 2**31:  # half the memory of int64 keys (10^6 dispatches: all)
            keys = keys.astype(np.int32)
        order = np.argsort(keys, kind="stable")
        del keys
        # a spilled column is reordered into a spill file, not copied into memory (rocroof.spill)
        dispatch = pd.Series(take(dispatch.to_numpy(dtype=np.int64), order), copy=False)
        counter = counter[order]
        value = pd.Series(take(values_of(0, n), order), copy=False)
        del order
    # the rows go to spill files piece by piece (rocroof.spill): 10^6 dispatches' readings are not
    # held in memory as pieces and their concatenation at once
    writers: dict[str, ColumnWriter] = {}
    try:
        _side_by_side_pieces(n, keys_of, values_of, counter, blocks, width, writers)
        if not writers:
            return pd.DataFrame({"dispatch_index": [], "block": [], "value_0": []})
        return pd.DataFrame({name: writer.finish() for name, writer in writers.items()}, copy=False)
    finally:
        for writer in writers.values():
            writer.close()


def _side_by_side_pieces(
    n: int,
    keys_of: Callable[[int, int], np.ndarray],
    values_of: Callable[[int, int], np.ndarray],
    counter: np.ndarray,
    blocks: int,
    width: int,
    writers: dict[str, ColumnWriter],
) -> None:
    """The rows of :func:`_side_by_side`, a slice of readings at a time, appended to ``writers`` (one per column)."""
    per = schema.COUNTERS_PER_READING
    start = 0
    while start < n:
        stop = min(start + _SIDE_BY_SIDE_SLICE, n)
        k = keys_of(start, stop + 64)  # a few readings past the slice: a (dispatch, block) stays in one slice
        cut = stop - start
        while start + cut < n and cut < len(k) and k[cut] == k[cut - 1]:
            cut += 1
        if start + cut < n and cut >= len(k):
            # a block holds at most 16 counters: more readings of one (dispatch, block) repeat a counter
            raise SchemaError(_TWO_READINGS)
        k = k[:cut]
        stop = start + cut
        vals = values_of(start, stop)
        change = k[1:] != k[:-1]
        row = np.concatenate(([0], np.cumsum(change))).astype(np.int64)
        keys = k[np.concatenate(([True], change))]
        cell = row * width + counter[start:stop] % per
        flat = np.full(len(keys) * width, np.nan)
        flat[cell] = vals
        if int(np.count_nonzero(~np.isnan(flat))) != int(np.count_nonzero(~np.isnan(vals))):
            raise SchemaError(_TWO_READINGS)
        grid = flat.reshape(len(keys), width)
        if not writers:
            writers.update({"dispatch_index": ColumnWriter(np.int64), "block": ColumnWriter(np.int64)})
            writers.update({f"value_{j}": ColumnWriter(np.float64) for j in range(width)})
        writers["dispatch_index"].append(keys // blocks)
        writers["block"].append(keys % blocks)
        for j in range(width):
            writers[f"value_{j}"].append(grid[:, j])
        start = stop
        release_pages()  # the spilled readings read so far


#: A run's frames in the store's layout (schema 6), by the first stored table of each group in
#: :data:`_TABLE_ORDER`: ``dispatch`` + ``dram_traffic`` become ``kernel_symbol`` (names numbered in
#: order of first dispatch), ``dram_text`` and ``dispatch_record`` (``kernel_index``; the DRAM bytes of
#: timing dispatches, bounds NULL where they equal the value, formula and note by number);
#: ``counter_value`` + ``counter_instance`` become ``counter``, ``counter_reading`` (16 a row) and
#: ``counter_instance_reading``. The other frames are stored as they are. Each group is built only
#: when it is written, so that one group's new frames exist at a time.
_GROUPS: dict[str, Callable[[dict[str, pd.DataFrame], _RunNames | None], dict[str, pd.DataFrame]]] = {
    "kernel_symbol": _dispatch_tables,
    "counter": _counter_tables,
}
#: The logical frames each group is built from (let go once it is built, under ``release``).
_GROUP_SOURCES = {"kernel_symbol": ("dispatch", "dram_traffic"), "counter": ("counter_value", "counter_instance")}
#: The frames of a window of a run (``RunFrames.windows``): the per-row ones.
_WINDOW_FRAMES = WINDOW_FRAMES
#: The tables a window's frames are written to, in :data:`_TABLE_ORDER`.
_WINDOW_TABLES = tuple(
    n
    for n in _TABLE_ORDER
    if n in _WINDOW_FRAMES
    or n in ("kernel_symbol", "dram_text", "dispatch_record", "counter", "counter_reading", "counter_instance_reading")
)
#: The run-level tables a windowed run writes after its windows (``agent`` and ``pass`` go before them).
_RUN_LEVEL_TABLES = tuple(n for n in _TABLE_ORDER if n not in _WINDOW_TABLES and n not in ("agent", "pass"))


class CopiedRun(NamedTuple):
    """What :meth:`Store.copy_run` did: the new run id, or the id of the run that already held that content."""

    run_id: int | None
    existing_run_id: int | None
    rows: int


def is_url(target: str) -> bool:
    """True for an SQLAlchemy URL (``postgresql://...``), False for a file path."""
    return "://" in target


def shown_db(target: object) -> str:
    """A database file or URL as messages and logs may show it: a URL's password hidden.

    A URL SQLAlchemy cannot parse is shown without what precedes its ``@`` (where a password sits).
    """
    text = str(target)
    if not is_url(text):
        return text
    try:
        return sa.make_url(text).render_as_string(hide_password=True)
    except sa.exc.ArgumentError:
        return text.split("@", 1)[-1]


def _database_url(target: str) -> sa.URL:
    """``target`` as an SQLAlchemy URL; ``postgresql://`` and ``postgres://`` get the psycopg 3 driver.

    Raises:
        InputError: not a URL, or a PostgreSQL driver other than psycopg 3 (read-only queries rely on
            its extended-protocol execution to refuse several statements at once).
    """
    try:
        url = sa.make_url(target)
    except sa.exc.ArgumentError as exc:
        raise InputError(f"{target}: not a database URL ({exc})") from exc
    if url.drivername in ("postgresql", "postgres"):
        url = url.set(drivername=f"postgresql+{PG_DRIVER}")
    elif url.get_backend_name() == "postgresql" and url.get_driver_name() != PG_DRIVER:
        shown = url.render_as_string(hide_password=True)
        raise InputError(
            f"{shown}: rocroof talks to PostgreSQL through psycopg 3; write the URL as postgresql://... "
            f"(not {url.drivername}://)"
        )
    return url


#: Rows per frame that ``rocroof query`` holds at a time.
QUERY_BATCH_ROWS = 50_000


class Store:
    """A rocroof results database.

    Args:
        target: a file path (SQLite) or an SQLAlchemy URL.
        read_only: open without write access (SQLite ``mode=ro`` + ``query_only``;
            PostgreSQL ``default_transaction_read_only``).
        on_wait: told while a SQLite file stays locked by another process (see
            :data:`~rocroof.store.locking.LockWait`; it may raise to stop waiting); the
            attribute of that name may be set later too.

    Raises:
        InputError: ``read_only`` and the SQLite file does not exist; a directory; a URL that
            does not parse or whose database driver is not installed.
    """

    def __init__(self, target: str | Path, *, read_only: bool = False, on_wait: LockWait | None = None) -> None:
        self.target = str(target)
        self.read_only = read_only
        self.on_wait = on_wait
        #: Migrations this object applied to a database that held runs of an older schema (not the
        #: creation of a new one): what a write command tells the user it changed.
        self.upgraded: list[str] = []
        #: The run that the last :meth:`write_run` replaced (``replace``: the same content stored
        #: before, deleted in the same transaction), once that transaction committed; else None.
        self.replaced_run_id: int | None = None
        #: The write transaction that :meth:`frame` reads through while :meth:`write_run` builds a
        #: run's stored reports (they see the run's rows before the commit); None otherwise.
        self._within: sa.Connection | None = None
        if is_url(self.target):
            url = _database_url(self.target)
            if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:"):
                # sqlite:///file.db is a file: open it like one (read-only mode, WAL, checks)
                self.target = str(url.database)
        if is_url(self.target):
            self.location = sa.make_url(self.target).render_as_string(hide_password=True)  # as the user wrote it
            kwargs: dict[str, Any] = {}
            if url.get_backend_name() not in ("sqlite", "postgresql"):
                alias = url.get_backend_name() in ("postgres", "pgsql", "psql")  # SQLAlchemy takes one spelling
                raise InputError(
                    f"{self.location}: rocroof stores results in SQLite (a file path, or sqlite:///path) or "
                    f"PostgreSQL (postgresql://user@host/db), not {url.get_backend_name()!r}"
                    + ("; write postgresql:// for PostgreSQL" if alias else "")
                )
            if url.get_backend_name() == "postgresql":
                # a connection per use, closed after it: no session outlives a query (SET ...), no
                # pooled connection is left for the garbage collector when a command ends
                kwargs["poolclass"] = sa.pool.NullPool
                if read_only:  # every transaction read-only; user options (search_path...) kept
                    options = " ".join(filter(None, [str(url.query.get("options") or ""), _PG_READ_ONLY]))
                    kwargs["connect_args"] = {"options": options}
                if importlib.util.find_spec(PG_DRIVER) is None:
                    raise InputError(f"{self.location}: the PostgreSQL driver is not installed; {_PG_INSTALL}")
            try:
                self.engine = sa.create_engine(url, **kwargs)
            except (sa.exc.NoSuchModuleError, ImportError) as exc:
                hint = f" ({_PG_INSTALL})" if url.get_backend_name() == "postgresql" else ""
                raise InputError(
                    f"{self.location}: no database driver for {url.drivername!r}{hint}: {exc}".rstrip()
                ) from exc
            location = self.location

            @sa.event.listens_for(self.engine, "handle_error")
            def _connect_failed(ctx: sa.engine.ExceptionContext) -> None:
                # a server that is down, a wrong password or database: one line, not a traceback
                if ctx.connection is None and isinstance(ctx.original_exception, Exception):
                    reason = str(ctx.original_exception).strip().splitlines() or ["no reason given"]
                    raise InputError(f"{location}: cannot connect ({reason[0]})") from ctx.original_exception

        else:
            path = Path(self.target).expanduser()
            self.location = str(path)
            if path.is_dir():
                raise InputError(f"{path}: is a directory; --db wants a database file (e.g. {path / 'rocroof.db'})")
            if read_only:
                if not path.is_file():
                    raise InputError(
                        f"{path}: no such database (ingest a capture first: rocroof ingest PATH --db {path})"
                    )
                uri = read_only_uri(path)  # percent-encoded; immutable in a read-only folder (rocroof.dbfile)

                def connect() -> sqlite3.Connection:
                    conn = sqlite3.connect(uri, uri=True, timeout=READ_TIMEOUT_S)
                    try:
                        conn.execute("PRAGMA query_only = ON")
                        # a file another process holds (not in WAL mode): wait in short tries, Ctrl-C stops it
                        wait_readable(conn, location=self.location, timeout_s=READ_TIMEOUT_S, on_wait=self.on_wait)
                    except BaseException:
                        conn.close()
                        raise
                    return conn

                self.engine = sa.create_engine("sqlite://", creator=connect)
            else:
                if path.parent and not path.parent.exists():
                    raise InputError(f"{path}: directory {path.parent} does not exist")
                # the busy timeout lets writers of parallel processes queue up (WAL: readers never wait)
                # the path as the URL's database, not parsed out of a URL string ('?' or '#' in a name)
                file_url = sa.engine.URL.create("sqlite", database=str(path))
                self.engine = sa.create_engine(file_url, connect_args={"timeout": WRITE_TIMEOUT_S})

                @sa.event.listens_for(self.engine, "connect")
                def _pragmas(dbapi_conn: Any, _record: Any) -> None:
                    cur = dbapi_conn.cursor()
                    cur.execute("PRAGMA foreign_keys = ON")
                    cur.close()
                    # busy timeout WRITE_TIMEOUT_S after a first look at the file, in short tries
                    try:
                        wait_readable(
                            dbapi_conn, location=self.location, timeout_s=WRITE_TIMEOUT_S, on_wait=self.on_wait
                        )
                    except BaseException:  # stopped (Ctrl-C, the hook) or timed out: the connection is not pooled
                        dbapi_conn.close()
                        raise

    def close(self) -> None:
        """Release connections."""
        self.engine.dispose()

    # ---- schema -----------------------------------------------------------------------
    def upgrade(self, *, recreate_views: bool = False) -> list[str]:
        """Create or upgrade the schema; returns the migrations applied now.

        Args:
            recreate_views: drop and re-create the views even when no migration ran.

        Raises:
            SchemaError: a newer or foreign schema, or a file that is not an SQLite database.
        """
        try:
            with self.engine.connect() as conn:  # refuse before changing anything (journal mode included)
                migrations.refuse_foreign_or_newer(conn, self.location)
            if self.engine.dialect.name == "sqlite" and not self.read_only:
                self._use_wal()
            ran = migrations.upgrade(
                self.engine,
                self.location,
                recreate_views=recreate_views,
                timeout_s=WRITE_TIMEOUT_S,
                on_wait=self.on_wait,
            )
        except sa.exc.DatabaseError as exc:
            if is_locked(exc):  # another writer held the file for the whole timeout
                raise self._locked_error(exc) from exc
            why = None if is_url(self.target) else _why_not_created(Path(self.location))
            raise SchemaError(f"{self.location}: cannot open the database ({why or _reason(exc)})") from exc
        if ran and ran[0] != migrations.MIGRATIONS[0][0]:  # not a new database
            self.upgraded += ran
        return ran

    def _use_wal(self) -> None:
        """Put the SQLite file in WAL mode (readers do not block the writer; writers queue).

        Switching needs the file to itself and SQLite does not wait for that (no busy handler):
        processes opening a new file at once retry until one of them has switched it.
        """

        def switch() -> None:
            with self.engine.connect() as conn, short_tries(conn):
                if conn.exec_driver_sql("PRAGMA journal_mode").scalar() != "wal":
                    if not conn.exec_driver_sql("PRAGMA page_count").scalar():
                        # a new file: its page size is set before its first page (never after, in WAL)
                        conn.exec_driver_sql(f"PRAGMA page_size = {PAGE_BYTES}")
                    conn.exec_driver_sql("PRAGMA journal_mode = WAL")

        retry_while_locked(
            switch, location=self.location, timeout_s=WRITE_TIMEOUT_S, on_wait=self.on_wait, pause_s=0.02
        )

    def preflight(self) -> None:
        """Check, without changing anything, that :meth:`write_run` can use this database.

        A missing SQLite file passes (it is created on the first write). Call it before reading
        a large capture so that a wrong ``--db`` fails in a second, not after the parse.

        Raises:
            SchemaError: a file that is not a database, a foreign database or a newer schema.
        """
        if is_url(self.target):
            checker = self
        elif Path(self.location).exists():
            checker = Store(self.location, read_only=True, on_wait=self.on_wait)
        else:
            return
        try:
            with checker.engine.connect() as conn:
                migrations.refuse_foreign_or_newer(conn, self.location)
        except sa.exc.DatabaseError as exc:
            raise SchemaError(f"{self.location}: cannot open the database ({_reason(exc)})") from exc
        finally:
            if checker is not self:
                checker.close()

    def check(self) -> int:
        """Verify the schema is current; return its version.

        Raises:
            SchemaError: empty, foreign, newer or out-of-date database.
        """
        try:
            with self.engine.connect() as conn:
                return migrations.check(conn, self.location)
        except sa.exc.DatabaseError as exc:
            raise SchemaError(f"{self.location}: not a readable database ({_reason(exc)})") from exc

    def status(self) -> list[tuple[str, str | None]]:
        """The migrations and when they were applied.

        Returns:
            ``[(migration, applied_at or None)]``: the known migrations in order, then any
            migration recorded by a newer rocroof (names not in
            :data:`~rocroof.store.migrations.MIGRATIONS`).

        Raises:
            SchemaError: the file is not an SQLite database, or a database of another program.
        """
        try:
            with self.engine.connect() as conn:
                tables = set(sa.inspect(conn).get_table_names())  # first: see migrations.refuse_foreign_or_newer
                done = migrations.applied(conn)
                if not done and tables - {"rocroof_migration"}:
                    raise SchemaError(f"{self.location}: not a rocroof database (no rocroof_migration table)")
        except sa.exc.DatabaseError as exc:
            raise SchemaError(f"{self.location}: not a readable database ({_reason(exc)})") from exc
        known = [name for name, _ in migrations.MIGRATIONS]
        return [(name, done.get(name)) for name in known] + [
            (name, done[name]) for name in sorted(set(done) - set(known))
        ]

    # ---- writing ------------------------------------------------------------------------
    def write_run(
        self,
        frames: RunFrames,
        *,
        labels: dict[str, str] | None = None,
        replace: bool = False,
        progress: Progress | None = None,
        release: bool = False,
        reports: Callable[[Store, int], dict[str, str]] | None = None,
    ) -> int:
        """Store one run in a single transaction; return its ``run_id``.

        The rows go in a chunk of :data:`INSERT_CHUNK` at a time (multi-row ``INSERT`` on SQLite,
        ``COPY`` on PostgreSQL); the same transaction then stores the run's ``op_summary`` rows in
        ``op_total`` (what ``rocroof report --by op`` reads).

        A run given as windows (``frames.windows``; see :class:`~rocroof.ingest.pipeline.RunFrames`)
        is written in the same one transaction, a window at a time, and its database rows are
        those of the same run given whole: the duplicate check, the ``run`` row and the ``agent``
        and ``pass`` rows come before the first window is asked for; each window's rows follow,
        its kernel names, DRAM texts and counters numbered after the earlier windows' (one map
        per run, a window writes its new names only); after the last window the ``run`` and
        ``pass`` rows are set to their final values and the labels, notes, settings,
        ``op_model``, ``op_edge``, ``run_ceiling`` and ``op_total`` rows written. An error of the
        window iterator stores nothing.

        Args:
            frames: from :func:`rocroof.ingest.pipeline.build_run`.
            labels: user labels (``key=value``).
            replace: replace a run with the same content hash instead of refusing; the new run
                gets a new id and keeps the old run's labels that ``labels`` does not set.
            progress: called with (stage, rows done, rows total) while inserting. For a run given
                as windows the total counts the rows of the windows received so far: it grows as
                they come.
            release: take the frames: each is removed from ``frames.tables`` (and from its window's
                dict) once stored (or once the tables built from it are), so that its memory goes
                before the next is built; ``frames`` cannot be written again.
            reports: ``reports(store, run_id)`` -> {grouping: JSON document}, called inside the
                transaction once the run's rows are in (``store.frame`` reads them there); the
                documents go to ``stored_report`` with this rocroof's version
                (:func:`rocroof.report.tables.stored_reports` builds them).

        Raises:
            DuplicateRunError: the same raw output is already stored and ``replace`` is False.
            SchemaError: the database has a foreign or newer schema.
            InputError: the database cannot hold a value of the run (PostgreSQL: an integer past its
                column's 32 or 64 bits, NUL in text), or a label the run selector could not pick again
                (:func:`rocroof.labels.label_problem`: ``,`` in it...); nothing is stored.
            ValueError: windows that break :class:`~rocroof.ingest.pipeline.RunFrames`' rules (a
                per-row frame among the run's tables, an op's dispatches in another window, a
                content hash or passes changed while the windows were written); nothing is stored.
        """
        for key, value in (labels or {}).items():
            problem = label_problem(str(key), str(value))
            if problem:
                raise InputError(
                    f"{frames.run.get('source_path')}: label {key}={value!r}: {problem}; nothing was stored"
                )
        self.upgrade()
        self.replaced_run_id = None
        try:
            return self._write_run(frames, labels or {}, replace, progress, release, reports)
        except sa.exc.DataError as exc:
            # a value this database's types cannot hold (PostgreSQL: a 32-bit INTEGER column, NUL in
            # text), where SQLite stores anything: nothing is stored, and the user is told in one line
            raise InputError(
                f"{frames.run.get('source_path')}: {self.location} cannot store a value of this capture "
                f"({printable(_reason(exc))}); nothing was stored"
            ) from exc
        except sa.exc.IntegrityError as exc:
            # two ingests of the same capture at once: the loser fails on the unique content hash
            if "content_sha256" not in str(exc.orig):
                raise
            raise DuplicateRunError(
                f"{frames.run.get('source_path')}: this capture was stored by another ingest meanwhile (same "
                f"content); use --replace to re-ingest it"
            ) from exc

    def _write_run(
        self,
        frames: RunFrames,
        labels: dict[str, str],
        replace: bool,
        progress: Progress | None,
        release: bool,
        reports: Callable[[Store, int], dict[str, str]] | None,
    ) -> int:
        if frames.windows is not None:
            try:
                return self._write_windows(frames, labels, replace, progress, release, reports)
            finally:  # a producer stopped early lets go of what it holds (rocroof.ingest.forked: its process)
                close = getattr(frames.windows, "close", None)
                if close is not None:
                    close()
        tables = {name: df for name, df in frames.tables.items() if name not in _LOGICAL}
        logical = frames.tables if release else dict(frames.tables)
        written = _RowsWritten(
            progress, sum(len(tables.get(name, ())) for name in _TABLE_ORDER) + _logical_rows(logical)
        )

        referred: dict[tuple[str, str], _KeySpans] = {}  # the keys written so far that rows refer to
        with self.begin_write(sqlite_key_lookups=False) as conn:
            check_keys = conn.dialect.name == "sqlite"
            inline = isinstance(conn.connection.dbapi_connection, sqlite3.Connection)  # see _chunks
            replace_id, labels, replaced = _claim_content(conn, frames, labels, replace)
            run_id = _insert_run_row(conn, frames.run, replace_id)
            _insert_run_lists(conn, run_id, labels, frames)
            op_total: pd.DataFrame | None = None
            for name in _TABLE_ORDER:
                if name in _GROUPS:  # built now, written, then let go: one group's new frames at a time
                    tables.update(_GROUPS[name](logical, None))
                    for source in _GROUP_SOURCES[name]:
                        logical.pop(source, None)
                if name != "op_invocation":  # op_total needs the invocations' op names
                    logical.pop(name, None)
                df = tables.pop(name, None)
                if df is None or not len(df):
                    continue
                _write_frame(
                    conn, name, df, run_id, inline=inline, referred=referred if check_keys else None, written=written
                )
                if name == "dispatch_record":
                    # summed once the rows are written: the sums are not held beside the chunks' values
                    release_free_memory()
                    op_total = _op_totals(df, logical.pop("op_invocation", None), frames.run.get("dram_peak_gbps"))
                del df
                release_free_memory()  # the table's frame, written: its memory back before the next is built
            written("op_total", 0)
            if op_total is not None and len(op_total):  # the report's per-op rows, summed once here
                for names, rows, fixed in _chunks(op_total, schema.op_total, run_id, inline=inline):
                    _insert_many(conn, schema.op_total, names, rows, fixed)
            if reports is not None:
                written("stored_report", 0)
                self._store_reports(conn, run_id, reports)
        self.replaced_run_id = replaced  # committed
        return run_id

    def _write_windows(
        self,
        frames: RunFrames,
        labels: dict[str, str],
        replace: bool,
        progress: Progress | None,
        release: bool,
        reports: Callable[[Store, int], dict[str, str]] | None,
    ) -> int:
        """:meth:`write_run` of a run given as windows (``frames.windows``; see :class:`RunFrames`)."""
        assert frames.windows is not None
        _refuse_stray_frames(frames.tables, "RunFrames.tables with windows")
        agent, passes = frames.tables.get("agent"), frames.tables.get("pass")
        written = _RowsWritten(
            progress, len(agent if agent is not None else ()) + len(passes if passes is not None else ())
        )

        referred: dict[tuple[str, str], _KeySpans] = {}  # the keys written so far that rows refer to
        ops = _KeySpans()  # the op indexes of the windows written so far
        names = _RunNames()  # kernel names, DRAM texts and counters numbered over the windows
        op_totals: _WindowOpTotals | None = None
        dispatches = 0  # dispatch_record rows written
        with self.begin_write(sqlite_key_lookups=False) as conn:
            check_keys = conn.dialect.name == "sqlite"
            keys = referred if check_keys else None
            inline = isinstance(conn.connection.dbapi_connection, sqlite3.Connection)  # see _chunks
            replace_id, labels, replaced = _claim_content(conn, frames, labels, replace)  # before any window
            digest = frames.run.get("content_sha256")
            # a hash still being computed is claimed between windows once done: a duplicate is
            # refused (the transaction rolled back) a few windows in rather than after the build
            pending = frames.pending_sha256 if not digest else None
            run_id = _insert_run_row(conn, frames.run, replace_id)
            for name, df in (("agent", agent), ("pass", passes)):
                if df is not None and len(df):
                    _write_frame(conn, name, df, run_id, inline=inline, referred=keys, written=written)
            pass_keys = set() if passes is None else set(passes["pass_index"].astype(np.int64).tolist())
            del agent, passes
            for name in _NUMBERED:  # names numbered up front (the whole run's order), before any window
                given = frames.tables.get(name)
                if given is not None and len(given):
                    names.of(name).seed(_numbering_of(name, given))
                    written.total += len(given)
                    _write_frame(conn, name, given, run_id, inline=inline, referred=keys, written=written)
                del given
            for window in frames.windows:
                logical = window if release else dict(window)
                del window  # the producer's dict: under release, its frames go as they are written
                _refuse_unknown_window_frames(logical)
                written.total += _logical_rows(logical) + sum(len(df) for n, df in logical.items() if n not in _LOGICAL)
                tables = {n: df for n, df in logical.items() if n not in _LOGICAL}
                for name in _WINDOW_TABLES:
                    if name in _GROUPS:
                        tables.update(_GROUPS[name](logical, names))
                        for source in _GROUP_SOURCES[name]:
                            logical.pop(source, None)
                    if name != "op_invocation":
                        logical.pop(name, None)
                    df = tables.pop(name, None)
                    if df is None or not len(df):
                        continue
                    _write_frame(conn, name, df, run_id, inline=inline, referred=keys, written=written)
                    if name == "op_invocation":
                        ops.add(df["op_index"].to_numpy(dtype=np.int64))
                    elif name == "dispatch_record":
                        dispatches += len(df)
                        if op_totals is None:
                            op_totals = _WindowOpTotals(frames.run.get("dram_peak_gbps"))
                        op_totals.add_window(df, logical.pop("op_invocation", None), ops)
                    del df
                logical.pop("op_invocation", None)
                del logical, tables
                if pending is not None and pending.done():
                    digest = pending.result()
                    _, labels, replaced = _claim_content(conn, frames, labels, replace, digest=digest)
                    pending = None
                release_free_memory()  # the window's frames, written: their memory back before the next
            for name in _NUMBERED:
                unused = names.of(name).unused()
                if unused:
                    raise ValueError(
                        f"RunFrames.tables[{name!r}] numbers {unused[0]!r}, which no window has: the run "
                        "would store a row its whole frames do not"
                    )
            # the run's own rows, final now that every window is in
            if pending is not None:  # the hash done only with the last window
                digest = pending.result()
                _, labels, replaced = _claim_content(conn, frames, labels, replace, digest=digest)
            if (frames.run.get("content_sha256") or None) != (digest or None):
                raise ValueError("RunFrames.run's content_sha256 changed while its windows were written")
            final = {k: v for k, v in frames.run.items() if k not in ("run_id", "created_at")}
            if final:
                conn.execute(schema.run.update().where(schema.run.c.run_id == run_id).values(**_clean(final)))
            _update_passes(conn, run_id, frames.tables.get("pass"), pass_keys)
            _insert_run_lists(conn, run_id, labels, frames)
            _refuse_stray_frames(frames.tables, "RunFrames.tables after its windows")
            level = frames.tables if release else dict(frames.tables)
            for name in _RUN_LEVEL_TABLES:  # op_model, op_edge, run_ceiling: they may refer to any window's op
                df = level.pop(name, None)
                if df is not None and len(df):
                    written.total += len(df)
                    _write_frame(conn, name, df, run_id, inline=inline, referred=keys, written=written)
                del df
            if release:
                for name in ("agent", "pass", *_NUMBERED):
                    frames.tables.pop(name, None)
            written("op_total", 0)
            if op_totals is not None:
                op_totals.finish(dispatches)
                peak = frames.run.get("dram_peak_gbps")
                if (float(peak) if peak else None) != op_totals.peak:
                    # a ceiling the first window did not know: the times at it are summed again from the rows
                    op_totals.times_again(_stored_timing_bytes(conn, run_id), peak, dispatches)
                op_total = op_totals.frame(ops)
                for names_, rows, fixed in _chunks(op_total, schema.op_total, run_id, inline=inline):
                    _insert_many(conn, schema.op_total, names_, rows, fixed)
            if reports is not None:
                written("stored_report", 0)
                self._store_reports(conn, run_id, reports)
        self.replaced_run_id = replaced  # committed
        return run_id

    def _store_reports(self, conn: sa.Connection, run_id: int, reports: Callable[[Store, int], dict[str, str]]) -> None:
        """Replace run ``run_id``'s ``stored_report`` rows with ``reports(self, run_id)``, read through ``conn``."""
        self._within = conn
        try:
            documents = reports(self, run_id)
        finally:
            self._within = None
        conn.execute(schema.stored_report.delete().where(schema.stored_report.c.run_id == run_id))
        if documents:
            conn.execute(
                schema.stored_report.insert(),
                [
                    {"run_id": run_id, "grouping": g, "rocroof_version": __version__, "document": d}
                    for g, d in documents.items()
                ],
            )

    def runs_without_reports(self) -> list[int]:
        """Runs with no ``stored_report`` of this rocroof version (stored before schema 9, or by another version)."""
        r, rep = schema.run.c, schema.stored_report.c
        current = sa.select(rep.run_id).where(rep.rocroof_version == __version__)
        with self.engine.connect() as conn:
            found = conn.execute(sa.select(r.run_id).where(r.run_id.not_in(current)).order_by(r.run_id)).scalars()
            return [int(x) for x in found]

    def store_reports(self, run_id: int, reports: Callable[[Store, int], dict[str, str]]) -> None:
        """Build and store run ``run_id``'s reports again (one transaction; see :meth:`write_run`'s ``reports``)."""
        with self.begin_write() as conn:
            self._store_reports(conn, run_id, reports)

    @contextlib.contextmanager
    def begin_write(self, *, sqlite_key_lookups: bool = True) -> Iterator[sa.Connection]:
        """A write transaction (committed at the end of the block, rolled back on an error).

        On SQLite it takes the write lock first (``BEGIN IMMEDIATE``), waiting up to
        :data:`WRITE_TIMEOUT_S` for other processes' writes, in tries of
        :data:`~rocroof.store.locking.BUSY_SLICE_MS` (a signal stops the wait at once; ``on_wait``
        hears of it after each try); what it reads (the content-hash check) then cannot change
        before it writes. PostgreSQL writers do not wait for each other.

        Args:
            sqlite_key_lookups: False turns SQLite's foreign-key enforcement off for this
                transaction (``PRAGMA foreign_keys``, which only takes effect outside one, and is
                turned on again after it): for :meth:`write_run`, which checks the keys of the
                rows it writes itself (:func:`_check_keys`) rather than have SQLite look up a
                parent row for each of 10^6 dispatch rows. PostgreSQL always enforces them.

        Raises:
            InputError: the SQLite file stayed locked by another writer for the whole timeout.
        """
        try:
            with self.engine.connect() as conn:
                sqlite = conn.dialect.name == "sqlite"
                if sqlite and not sqlite_key_lookups:
                    conn.exec_driver_sql("PRAGMA foreign_keys = OFF")
                    conn.commit()
                try:
                    with conn.begin():
                        if sqlite:
                            begin_immediate(
                                conn, location=self.location, timeout_s=WRITE_TIMEOUT_S, on_wait=self.on_wait
                            )
                        yield conn
                finally:
                    if sqlite and not sqlite_key_lookups and not conn.invalidated:
                        conn.exec_driver_sql("PRAGMA foreign_keys = ON")
                        conn.commit()
        except sa.exc.OperationalError as exc:
            if is_locked(exc):
                raise self._locked_error(exc) from exc
            raise

    def _locked_error(self, exc: sa.exc.DBAPIError) -> InputError:
        """The one-line error for a SQLite file that another writer kept locked for :data:`WRITE_TIMEOUT_S`."""
        return InputError(
            f"{self.location}: another process kept the database locked for {WRITE_TIMEOUT_S} s "
            f"({_reason(exc)}); try again when it has finished"
        )

    def copy_run(self, source: Store, run_id: int) -> CopiedRun:
        """Copy run ``run_id`` of ``source`` with all its rows into this database, in one transaction.

        The copy gets a new run id and keeps everything else (ingest time, labels, notes). A run
        whose content hash this database already holds is not copied. Both schemas must be
        current (see :func:`rocroof.store.merge.merge`).

        Raises:
            InputError: ``source`` has no such run.
        """
        with source.engine.connect() as src:
            found = src.execute(sa.select(schema.run).where(schema.run.c.run_id == run_id)).mappings().first()
            if found is None:
                raise InputError(f"{source.location}: no run {run_id}")
            row = {k: v for k, v in found.items() if k != "run_id"}
            digest = row.get("content_sha256")
            try:
                with self.begin_write() as conn:
                    if digest:
                        old = conn.execute(sa.select(schema.run.c.run_id).where(schema.run.c.content_sha256 == digest))
                        existing = old.scalar()
                        if existing is not None:
                            return CopiedRun(None, int(existing), 0)
                    result = conn.execute(schema.run.insert().values(**row))
                    new_id = int(result.inserted_primary_key[0])  # type: ignore[index]
                    copied = 0
                    for table in schema.metadata.sorted_tables:
                        if table is schema.run or "run_id" not in table.c:
                            continue
                        names = [c.name for c in table.columns]
                        at = names.index("run_id")
                        stmt = sa.select(table).where(table.c.run_id == run_id).order_by(*table.primary_key.columns)
                        for part in src.execution_options(yield_per=INSERT_CHUNK).execute(stmt).partitions():
                            _insert_many(conn, table, names, [(*r[:at], new_id, *r[at + 1 :]) for r in part])
                            copied += len(part)
                    return CopiedRun(new_id, None, copied)
            except sa.exc.IntegrityError as exc:
                if not digest or "content_sha256" not in str(exc.orig):
                    raise
                # stored by another writer between the check and the insert
                with self.engine.connect() as conn:
                    existing = conn.execute(
                        sa.select(schema.run.c.run_id).where(schema.run.c.content_sha256 == digest)
                    ).scalar()
                return CopiedRun(None, None if existing is None else int(existing), 0)

    def delete_run(self, run_id: int) -> None:
        """Delete a run and all its rows (one transaction).

        Raises:
            InputError: no such run.
        """
        with self.begin_write() as conn:
            if conn.execute(sa.select(schema.run.c.run_id).where(schema.run.c.run_id == run_id)).scalar() is None:
                raise InputError(f"{self.location}: no run {run_id}")
            _delete_run(conn, run_id)

    # ---- reading ------------------------------------------------------------------------
    def frame(self, stmt: sa.Select[Any] | sa.TextClause, params: dict[str, Any] | None = None) -> pd.DataFrame:
        """Run a select and return a DataFrame (inside :meth:`write_run`'s transaction while it builds reports)."""
        if self._within is not None:
            return _frame_of_result(self._within.execute(stmt, params or {}))
        with self.engine.connect() as conn:
            return _frame_of_result(conn.execute(stmt, params or {}))

    def frame_batches(
        self, stmt: sa.Select[Any] | sa.TextClause, params: dict[str, Any] | None = None, batch_rows: int | None = None
    ) -> Iterator[pd.DataFrame]:
        """Run a select and yield its rows as DataFrames of ``batch_rows`` rows at a time.

        ``batch_rows`` defaults to :data:`FRAME_BATCH_ROWS`; at least one frame comes (an empty
        one for no rows). Each frame is typed on its own rows (:func:`frame_of_batches`): a column of integers in
        one batch and of floats in another comes as ``Int64`` and float64 frames, where
        :meth:`frame` would give float64 for all. The result is read as it is consumed, so its
        rows are never all held at once.
        """
        with contextlib.ExitStack() as stack:
            conn = self._within if self._within is not None else stack.enter_context(self.engine.connect())
            result = conn.execute(stmt, params or {})
            yield from _frames(result, list(result.keys()), batch_rows or FRAME_BATCH_ROWS)

    def runs_with_labels(self, selector: dict[str, str]) -> list[int]:
        """Ids of the runs whose labels match every ``key: pattern`` of ``selector``, oldest first.

        A pattern matches a label's whole value; ``*`` in it matches any text (case sensitive, no
        other wildcard). An empty selector matches every run.
        """
        self.check()
        lab = schema.run_label
        with self.engine.connect() as conn:
            labels: dict[int, dict[str, str]] = {
                int(r): {} for r in conn.execute(sa.select(schema.run.c.run_id)).scalars()
            }
            for rid, key, value in conn.execute(sa.select(lab.c.run_id, lab.c.key, lab.c.value)):
                labels.setdefault(int(rid), {})[str(key)] = str(value)
        return runs_matching(labels, selector)

    def resolve_run(self, spec: str | int | None) -> int:
        """A run id from ``latest``/None, a number, or labels (``key=value[,key=value...]``).

        Labels must pick one run; ``latest:`` before them picks the newest of several.

        Raises:
            InputError: no runs, no such run, or labels that match no run or several.
        """
        self.check()
        if isinstance(spec, str):
            spec = spec.strip()
        if spec is not None and "=" in str(spec):
            newest, selector = parse_run_labels(str(spec))
            found = self.runs_with_labels(selector)
            shown = ",".join(f"{k}={v}" for k, v in selector.items())
            if not found:
                raise InputError(f"{self.location}: no run has the labels {shown} (see 'rocroof runs')")
            if len(found) > 1 and not newest:
                listed = ", ".join(map(str, found[:10])) + (f" and {len(found) - 10} more" if len(found) > 10 else "")
                raise InputError(
                    f"{self.location}: the labels {shown} match runs {listed}: add a label that tells them apart "
                    f"('rocroof runs --label {shown}' shows theirs), give a run id, or write latest:{shown}"
                )
            return found[-1]
        not_a_run = InputError(f"run must be a number, 'latest' or labels key=value[,key=value], not {spec!r}")
        if isinstance(spec, bool) or (isinstance(spec, float) and not spec.is_integer()):
            raise not_a_run
        if isinstance(spec, str) and spec.strip().lower() != "latest" and not re.fullmatch(r"-?[0-9]+", spec.strip()):
            raise not_a_run
        with self.engine.connect() as conn:
            if spec is None or str(spec).lower() == "latest":
                rid = conn.execute(sa.select(sa.func.max(schema.run.c.run_id))).scalar()
                if rid is None:
                    raise InputError(f"{self.location}: no runs stored yet")
                return int(rid)
            try:
                wanted = int(spec)
            except ValueError as exc:
                raise not_a_run from exc
            if not 0 < wanted < 2**31:  # run ids are positive 32-bit integers (PostgreSQL refuses larger)
                raise InputError(f"{self.location}: no run {wanted} (see 'rocroof runs')")
            rid = conn.execute(sa.select(schema.run.c.run_id).where(schema.run.c.run_id == wanted)).scalar()
            if rid is None:
                raise InputError(f"{self.location}: no run {wanted} (see 'rocroof runs')")
            return int(rid)

    def query(self, sql: str) -> pd.DataFrame:
        """Run one user SQL statement on a read-only connection; the whole result (see :meth:`query_batches`).

        Raises:
            QueryError: as :meth:`query_batches`.
        """
        return next(iter(self.query_batches(sql, None)))

    def query_batches(self, sql: str, batch_rows: int | None = QUERY_BATCH_ROWS) -> Generator[pd.DataFrame, None, None]:
        """Run one user SQL statement on a read-only connection, yielding its rows ``batch_rows`` at a time.

        On SQLite an authorizer admits only reads (``SELECT``, read-only ``PRAGMA``s): besides
        writes to the database, ``ATTACH``, ``VACUUM INTO`` and setting ``PRAGMA``s are refused,
        since they would create files or change the connection. On PostgreSQL the statement must
        begin like a read (``SELECT``, ``WITH``, ``VALUES``, ``TABLE``, ``SHOW``, ``EXPLAIN``: no
        ``COPY ... TO`` a server file, ``SET``, ``DO``, ``CALL``), runs alone (the extended
        protocol refuses a second statement) in a ``READ ONLY`` transaction, and is rolled back.

        Args:
            sql: one statement.
            batch_rows: rows per frame; None: one frame of every row.

        Yields:
            Frames of the result rows (the first one even when there are none, to give the
            columns); integer columns stay exact (nullable ``Int64``). The connection stays open
            until the generator is exhausted or closed.

        Raises:
            QueryError: the statement is empty, fails, writes, or returns no rows.
        """
        try:
            sql.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise QueryError("the query contains bytes that are not UTF-8") from exc
        if not self.read_only:
            raise QueryError("Store.query needs a read-only store (Store(path, read_only=True))")
        if not sql.strip():
            raise QueryError("empty query; give one SELECT statement, e.g. rocroof query 'SELECT * FROM run'")
        denied: list[str] = []
        try:
            with self.engine.connect() as conn:
                if conn.dialect.name == "postgresql":
                    yield from _pg_query(conn, sql, batch_rows)
                    return
                dbapi = conn.connection.dbapi_connection
                guard = isinstance(dbapi, sqlite3.Connection)
                if guard:
                    dbapi.set_authorizer(_read_only_authorizer(denied))  # type: ignore[union-attr]
                    # SQLite runs a statement in C, where Python never sees Ctrl-C: a handler called every
                    # PROGRESS_OPS VM steps runs Python, so a pending SIGINT raises there and aborts it
                    dbapi.set_progress_handler(lambda: 0, PROGRESS_OPS)  # type: ignore[union-attr]
                try:
                    result = conn.exec_driver_sql(sql)
                    if not result.returns_rows:
                        raise QueryError(f"the statement returned no result; {_READS_ONLY}")
                    yield from _frames(result, list(result.keys()), batch_rows)
                finally:
                    if guard:
                        dbapi.set_authorizer(None)  # type: ignore[union-attr]
                        dbapi.set_progress_handler(None, 0)  # type: ignore[union-attr]
        except sa.exc.DBAPIError as exc:
            msg = _reason(exc)
            if isinstance(exc.orig, sqlite3.OperationalError) and msg == "interrupted":
                raise KeyboardInterrupt from exc  # Ctrl-C during the statement (see above)
            if denied:
                raise _refused(_sqlite_would(sql, denied[0]), self.location, sql) from exc
            if "because it is a view" in msg:  # a write to a view (dispatch, counter_value...): refused as well
                raise QueryError(
                    f"refused: {_READS_ONLY}, and this one would {_view_write(sql, msg)}, a view; the database was "
                    "not changed (a view's rows come from its tables: docs/schema.md)"
                ) from exc
            if "readonly" in msg.replace("-", "").lower() or "read-only" in msg.lower() or "query_only" in msg:
                raise _refused(f"write ({msg})", self.location, sql) from exc
            if damaged(msg):
                raise QueryError(damaged_message(printable(self.location), msg, writes=False)) from exc
            raise QueryError(f"query failed: {msg}") from exc


#: What ``rocroof query`` runs, for its messages.
_READS_ONLY = "rocroof query runs read-only SELECT/WITH statements"
#: Where a refused statement can be run on PostgreSQL.
_PG_WRITES = "To run statements that write, use the database's own client (psql)"


def _refused(would: str, location: str, sql: str) -> QueryError:
    """The refusal of a statement that is not a read: what it would do, and how to run it on a SQLite file.

    ``location`` is the database as shown (a file, or a URL with its password masked); the
    statement is quoted into the ``sqlite3`` command line when it is one short line.
    """
    if is_url(location):  # PostgreSQL: the server's own client
        how = _PG_WRITES
    else:
        import shlex

        text = " ".join(sql.split())
        shown = shlex.quote(text) if len(text) <= 120 and "\n" not in sql.strip() else "'STATEMENT'"
        how = (
            "To run statements that write, use the sqlite3 shell, after a backup: "
            f"sqlite3 {shlex.quote(location)} {shown}"
        )
    return QueryError(f"refused: {_READS_ONLY}, and this one would {would}; the database was not changed. {how}")


def _sqlite_would(sql: str, denied: str) -> str:
    """What a statement the authorizer refused would do, in words: ``denied``, or by its first word.

    SQLite reports VACUUM to the authorizer as the attachment of a temporary file (its copy of
    the database); the statement's first word says what it is.
    """
    match = _LEADING_WORD.match(sql)
    if match is not None and match.group(1).upper() == "VACUUM":
        into = re.search(r"\bINTO\s+'((?:[^']|'')*)'", sql, re.I)
        if into is not None:
            return f"write a copy of the database to {into.group(1)}"
        return "vacuum (rewrite) the database file"
    return denied


def _view_write(sql: str, msg: str) -> str:
    """What a statement refused for writing to a view would have done: ``delete from dispatch``.

    SQLite refuses such a statement while preparing it ("cannot modify X because it is a view"),
    before the authorizer sees it, so the verb is read back from the SQL text.
    """
    found = re.search(
        r"\b(delete\s+from|insert\s+(?:or\s+\w+\s+)?into|replace\s+into|update(?:\s+or\s+\w+)?)\s+[\"`\[]?(\w+)",
        sql,
        re.IGNORECASE,
    )
    if found is None:
        view = re.search(r"modify (\S+) because", msg)
        return f"modify {view.group(1) if view else 'a view'}"
    return f"{' '.join(found.group(1).lower().split())} {found.group(2)}"


#: SQLite virtual-machine steps between two chances for Ctrl-C to stop a running query.
PROGRESS_OPS = 100_000

#: The statements a read-only query on PostgreSQL may be (its first word).
_PG_READ_STATEMENTS = ("SELECT", "WITH", "VALUES", "TABLE", "SHOW", "EXPLAIN")
#: Whitespace, comments and opening parentheses before a statement's first word.
_LEADING_WORD = re.compile(r"(?:\s+|--[^\n]*|/\*.*?\*/|\()*([A-Za-z_]*)", re.S)


def _frames(cursor: Any, columns: list[str], batch_rows: int | None) -> Iterator[pd.DataFrame]:
    """Frames of ``batch_rows`` rows (None: one frame of all); at least one.

    ``cursor``: a DB-API cursor or an SQLAlchemy result (anything with ``fetchmany``/``fetchall``).
    """
    first = True
    while True:
        rows = cursor.fetchmany(batch_rows) if batch_rows else cursor.fetchall()
        if rows or first:
            yield _to_frame(rows, columns)
        first = False
        if not rows or not batch_rows or len(rows) < batch_rows:
            return


def _pg_query(conn: sa.Connection, sql: str, batch_rows: int | None) -> Iterator[pd.DataFrame]:
    """One user statement on PostgreSQL, read-only (see :meth:`Store.query`); the transaction is rolled back."""
    match = _LEADING_WORD.match(sql)
    word = match.group(1).upper() if match else ""
    if word not in _PG_READ_STATEMENTS:
        raise QueryError(
            f"refused: {_READS_ONLY} (on PostgreSQL one {', '.join(_PG_READ_STATEMENTS[:-1])} or "
            f"{_PG_READ_STATEMENTS[-1]} statement), not one beginning with {word or sql.strip()[:12]!r}; "
            f"the database was not changed. {_PG_WRITES}"
        )
    conn.exec_driver_sql("SET TRANSACTION READ ONLY")  # besides the connection's default_transaction_read_only
    cur: Any = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]  # a psycopg cursor
    dbapi = conn.dialect.loaded_dbapi
    try:
        if batch_rows is None:
            # prepare=True: psycopg sends Parse/Bind/Execute, which takes exactly one statement ("SELECT 1;
            # SET default_transaction_read_only = off; COMMIT; DELETE ..." fails whole, before running)
            cur.execute(sql, prepare=True)
            if cur.description is None:
                raise QueryError(f"the statement returned no result; {_READS_ONLY}")
            yield _to_frame(cur.fetchall(), [d[0] for d in cur.description])
            return
        # stream(): the same one-statement extended protocol, rows arriving as they are read (libpq's
        # single-row mode) instead of the whole result in the client's memory
        try:
            rows = cur.stream(sql)
            first = list(itertools.islice(rows, batch_rows))
        except dbapi.ProgrammingError as exc:
            if "didn't produce a result" in str(exc):
                raise QueryError(f"the statement returned no result; {_READS_ONLY}") from exc
            raise
        if cur.description is None:  # no rows: psycopg names the columns with the first row only; ask again
            conn.rollback()
            conn.exec_driver_sql("SET TRANSACTION READ ONLY")
            cur.execute(sql, prepare=True)
            if cur.description is None:
                raise QueryError(f"the statement returned no result; {_READS_ONLY}")
            yield _to_frame(cur.fetchall(), [d[0] for d in cur.description])
            return
        columns = [d[0] for d in cur.description]
        yield _to_frame(first, columns)
        while len(first) == batch_rows:
            first = list(itertools.islice(rows, batch_rows))
            if first:
                yield _to_frame(first, columns)
    except dbapi.Error as exc:
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if getattr(exc, "sqlstate", None) == "25006":  # read_only_sql_transaction
            raise QueryError(
                f"refused: {_READS_ONLY}, and this one would write ({msg}); the database was not changed. {_PG_WRITES}"
            ) from exc
        if "multiple commands" in msg:
            raise QueryError(f"query failed: give one statement at a time ({msg})") from exc
        raise QueryError(f"query failed: {msg}") from exc
    finally:
        cur.close()
        conn.rollback()  # whatever the statement did to the session (SET ...) is undone


#: Introspection pragmas a read-only query may use with an argument (``PRAGMA table_info(run)``).
_READ_PRAGMAS = {
    "table_info",
    "table_xinfo",
    "table_list",
    "index_list",
    "index_info",
    "index_xinfo",
    "foreign_key_list",
    "foreign_key_check",
    "integrity_check",
    "quick_check",
    "database_list",
    "collation_list",
    "function_list",
    "module_list",
    "pragma_list",
    "compile_options",
}
_SCHEMA_TABLES = {"sqlite_master", "sqlite_schema", "sqlite_temp_master", "sqlite_temp_schema"}


def _action_text(action: int, arg1: str | None, arg2: str | None) -> str:
    """What a denied sqlite3 authorizer action would have done, in words."""
    names = {
        value: name.removeprefix("SQLITE_").lower().replace("_", " ")
        for name, value in vars(sqlite3).items()
        if name.startswith(("SQLITE_CREATE_", "SQLITE_DROP_")) and isinstance(value, int)
    }
    if action in names:  # "create table x", "drop view y", ...
        return f"{names[action]} {arg1}"
    verbs = {
        sqlite3.SQLITE_INSERT: "insert into",
        sqlite3.SQLITE_UPDATE: "update",
        sqlite3.SQLITE_DELETE: "delete from",
        sqlite3.SQLITE_ATTACH: "attach (create or open) the file",
        sqlite3.SQLITE_DETACH: "detach",
        sqlite3.SQLITE_REINDEX: "rebuild the index",
        sqlite3.SQLITE_ANALYZE: "analyze",
    }
    if action == sqlite3.SQLITE_PRAGMA:
        return f"set PRAGMA {arg1}={arg2}" if arg2 is not None else f"run PRAGMA {arg1}"
    if action == sqlite3.SQLITE_TRANSACTION:
        return f"{arg1} a transaction"
    if action == sqlite3.SQLITE_SAVEPOINT:
        return f"{(arg1 or '').lower()} savepoint {arg2}"
    if action == sqlite3.SQLITE_ALTER_TABLE:  # arg1 is the schema, arg2 the table
        return f"alter table {arg2}"
    return f"{verbs.get(action, f'perform SQLite action {action} on')} {arg1 or ''}".strip()


def _read_only_authorizer(denied: list[str]) -> Callable[[int, str | None, str | None, str | None, str | None], int]:
    """An sqlite3 authorizer that admits reads only and records what it denied in ``denied``."""

    def authorize(action: int, arg1: str | None, arg2: str | None, _db: str | None, _trigger: str | None) -> int:
        if action in (sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE):
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_PRAGMA and arg1 is not None:
            name = arg1.lower()
            if name in _READ_PRAGMAS or (
                arg2 is None and name not in ("optimize", "shrink_memory", "wal_checkpoint", "incremental_vacuum")
            ):
                return sqlite3.SQLITE_OK
        # Table-valued pragmas (SELECT * FROM pragma_table_info('run')) report an UPDATE of the schema
        # table while they only read it, and DDL reports its schema-table row before the specific
        # action (drop table run), which is denied next with a better message. PRAGMA query_only
        # and the read-only file mode still refuse any real write to the schema tables.
        if (
            action in (sqlite3.SQLITE_UPDATE, sqlite3.SQLITE_INSERT, sqlite3.SQLITE_DELETE)
            and (arg1 or "").lower() in _SCHEMA_TABLES
        ):
            return sqlite3.SQLITE_OK
        denied.append(_action_text(action, arg1, arg2))
        return sqlite3.SQLITE_DENY

    return authorize


def _why_not_created(path: Path) -> str | None:
    """Why SQLite could not create a new database file at ``path`` (its folder missing or not writable), or None."""
    if path.exists():
        return None
    folder = path.parent
    if folder.exists() and not folder.is_dir():
        return f"{folder} is not a folder"
    if not folder.exists():  # gone since the store was opened
        return f"its folder {folder} does not exist; create it first"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"a new database cannot be created: its folder {folder} is not writable"
    return None


def _reason(exc: sa.exc.DBAPIError) -> str:
    """The driver's first message line of a database error."""
    return str(exc.orig).strip().splitlines()[0] if exc.orig is not None and str(exc.orig).strip() else str(exc)


#: Rows typed at a time by :meth:`Store.frame`: the driver's Python objects (~40 bytes a cell) are
#: held for one batch, not the whole result (10^6 dispatch rows of 35 columns: ~1.3 GB as objects,
#: ~0.3 GB as typed columns).
FRAME_BATCH_ROWS = 1 << 16

_NONE = type(None)


def _is_int(kind: type) -> bool:
    return issubclass(kind, int) and not issubclass(kind, bool)


class _Column:
    """One result column, gathered a batch of rows at a time and typed as a whole by :meth:`result`.

    A batch of integers (and NULLs) is kept as int64 values with a NULL mask, a batch of floats
    (and NULLs) as float64 values with a NULL mask, a batch of NULLs as its length; any other batch
    as its Python objects. The column is then what :func:`frame_of_batches` documents, exactly as
    if its values had been seen at once: a column whose batches differ in kind (integers in one,
    floats or text in another) is rebuilt as objects first.
    """

    __slots__ = ("kinds", "length", "pieces", "texts")

    def __init__(self) -> None:
        self.kinds: set[type] = set()  # the Python types of the column's non-NULL values
        self.length = 0
        # one object per distinct text (the driver makes one per cell: 10^6 rows naming a few dozen
        # ops or shapes); None once the column's texts are mostly distinct (the table costs more)
        self.texts: dict[str, str] | None = {}
        # ("null", None, None) | ("int" | "float", values, NULL mask or None) | ("object", list, None)
        self.pieces: list[tuple[str, Any, np.ndarray | None]] = []

    def add(self, values: list[Any]) -> None:
        kinds = set(map(type, values))
        if decimal.Decimal in kinds:
            values = [_from_decimal(v) if isinstance(v, decimal.Decimal) else v for v in values]
            kinds = set(map(type, values))
        has_null = _NONE in kinds
        kinds.discard(_NONE)
        self.kinds |= kinds
        self.length += len(values)
        if not kinds:
            self.pieces.append(("null", len(values), None))
            return
        if kinds == {float} or all(_is_int(k) for k in kinds):
            kind, dtype = ("float", np.float64) if kinds == {float} else ("int", np.int64)
            try:
                if not has_null:
                    self.pieces.append((kind, np.array(values, dtype=dtype), None))
                    return
                cells = np.array(values, dtype=object)
                null = np.equal(cells, None)  # type: ignore[call-overload]  # elementwise "is NULL"
                cells[null] = 0
                self.pieces.append((kind, cells.astype(dtype), null))
                return
            except OverflowError:  # an integer beyond int64: kept as it is
                pass
        if self.texts is not None and kinds == {str}:
            texts = self.texts
            values = [texts.setdefault(v, v) if v is not None else None for v in values]
            if len(texts) > self.length // 2:
                self.texts = None
        self.pieces.append(("object", values, None))

    def result(self) -> Any:
        """The column: ``Int64``, float64, or ``pd.Series`` of the objects (NULLs only: ``object`` Nones)."""
        kinds = {kind for kind, _, _ in self.pieces if kind != "null"}
        if not kinds:
            return pd.Series(np.full(self.length, None, dtype=object), dtype=object)
        if kinds <= {"int", "float"}:
            values, nulls = [], []
            for kind, cells, null in self.pieces:
                if kind == "null":
                    values.append(np.zeros(cells, dtype=np.int64))
                    nulls.append(np.ones(cells, dtype=bool))
                else:
                    values.append(cells)
                    nulls.append(null if null is not None else np.zeros(len(cells), dtype=bool))
            mask = np.concatenate(nulls)
            if kinds == {"int"}:
                return pd.arrays.IntegerArray(np.concatenate(values), mask)
            floats = np.concatenate([v.astype(np.float64, copy=False) for v in values])
            floats[mask] = np.nan
            return pd.Series(floats)
        objects: list[Any] = []
        for kind, cells, null in self.pieces:
            if kind == "null":
                objects.extend([None] * cells)
            elif kind == "object":
                objects.extend(cells)
            else:
                boxed = cells.astype(object)
                if null is not None:
                    boxed[null] = None
                objects.extend(boxed.tolist())
        return pd.Series(objects)


def _frame_of_result(result: sa.CursorResult[Any]) -> pd.DataFrame:
    """A result's rows as a DataFrame, fetched :data:`FRAME_BATCH_ROWS` at a time (:func:`frame_of_batches`)."""
    columns = list(result.keys())
    return frame_of_batches(iter(lambda: result.fetchmany(FRAME_BATCH_ROWS), []), columns)


def frame_of_batches(batches: Iterable[Sequence[Any]], columns: list[str]) -> pd.DataFrame:
    """Batches of rows as one DataFrame, each column typed over all of its values.

    A column of integers (and NULLs) becomes exact nullable ``Int64`` (without this, one NULL turns
    an integer column into float64, which prints ``5.0`` for ``5`` and loses digits of nanosecond
    timestamps beyond 2**53); a column of NULLs only stays ``object``; any other column is what
    ``pd.Series`` of its values gives (floats and NULLs: float64 with NaN; text: ``str``). A
    PostgreSQL ``NUMERIC`` is read as SQLite would give it (:func:`_from_decimal`). Each batch's
    cells are typed, and its Python objects can go, before the next batch is read.
    """
    gathered = [_Column() for _ in columns]
    for batch in batches:
        if len(batch):
            for column, values in zip(gathered, zip(*batch, strict=True), strict=True):
                column.add(list(values))
    if not gathered or not gathered[0].length:
        return pd.DataFrame([], columns=columns, dtype=object)
    df = pd.DataFrame({i: c.result() for i, c in enumerate(gathered)})
    df.columns = columns
    return df


def _to_frame(rows: Sequence[Any], columns: list[str]) -> pd.DataFrame:
    """Rows as a DataFrame, each column typed over all of its values (:func:`frame_of_batches`)."""
    return frame_of_batches([rows], columns)


def _from_decimal(value: decimal.Decimal) -> int | float:
    """A PostgreSQL ``NUMERIC`` (``SUM``/``AVG`` of integers...) as SQLite would give it: int when whole."""
    if value.is_finite() and int(value.as_tuple().exponent) >= 0:
        return int(value)
    return float(value)


def _keys_within_run(table: sa.Table) -> list[tuple[str, str, str]]:
    """``(column, referred table, referred column)`` of ``table``'s foreign keys to rows of the same run.

    Every such key in the schema is ``(run_id, X) -> (run_id, Y)``; the key to ``run`` itself is
    left out (each run's rows are written after its run row, in the same transaction).
    """
    keys = []
    for fk in table.foreign_key_constraints:
        if fk.referred_table.name == "run":
            continue
        own = [c.name for c in fk.columns if c.name != "run_id"]
        theirs = [e.column.name for e in fk.elements if e.column.name != "run_id"]
        if len(own) != 1 or len(theirs) != 1:  # pragma: no cover - a schema change would need this extended
            raise NotImplementedError(f"{table.name}: foreign key {own} -> {fk.referred_table.name} {theirs}")
        keys.append((own[0], fk.referred_table.name, theirs[0]))
    return keys


#: The (table, column) pairs that foreign keys within a run refer to: their values are kept while
#: a run is written, to check the rows that refer to them.
_REFERRED = {(t, c) for table in schema.metadata.tables.values() for _, t, c in _keys_within_run(table)}


def _distinct_sorted(values: np.ndarray) -> np.ndarray:
    """The distinct values of an int64 array, sorted (by a sort: numpy 2's hashing ``np.unique`` is slower here)."""
    ordered = np.sort(np.asarray(values, dtype=np.int64))
    return ordered[np.concatenate(([True], ordered[1:] != ordered[:-1]))] if len(ordered) else ordered


class _RowsWritten:
    """The ``written(stage, rows)`` callback of one run's write: counts rows, calls ``progress(stage, done, total)``.

    ``total`` (rows) may grow while the run is written (windows come one at a time).
    """

    def __init__(self, progress: Progress | None, total: int) -> None:
        self.progress = progress
        self.total = total
        self.done = 0

    def __call__(self, stage: str, rows: int) -> None:
        self.done += rows
        if self.progress:
            self.progress(stage, self.done, self.total)


class _KeySpans:
    """A set of integers as sorted, disjoint ``[start, stop)`` spans: keys numbered 0 .. n-1 are one span.

    What a run's written rows may refer to (see :func:`_check_keys`), kept over the windows of a
    run in memory that does not grow with the run when its keys are numbered without gaps.
    """

    def __init__(self) -> None:
        self.starts = np.zeros(0, dtype=np.int64)
        self.stops = np.zeros(0, dtype=np.int64)

    def add(self, values: np.ndarray) -> None:
        """Add ``values`` (int64, any order, repeats allowed)."""
        v = _distinct_sorted(values)
        if not len(v):
            return
        breaks = np.flatnonzero(np.diff(v) != 1) + 1
        starts = np.concatenate([self.starts, v[np.concatenate(([0], breaks))]])
        stops = np.concatenate([self.stops, v[np.concatenate((breaks - 1, [len(v) - 1]))] + 1])
        order = np.argsort(starts, kind="stable")
        starts, stops = starts[order], stops[order]
        reach = np.maximum.accumulate(stops)  # spans that overlap or touch the ones before merge into them
        first = np.flatnonzero(np.concatenate(([True], starts[1:] > reach[:-1])))
        self.starts, self.stops = starts[first], np.maximum.reduceat(stops, first)

    def contains(self, values: np.ndarray) -> np.ndarray:
        """Which of ``values`` (int64, shape (n,)) are in the set: bool, shape (n,)."""
        values = np.asarray(values, dtype=np.int64)
        at = np.searchsorted(self.starts, values, side="right") - 1
        inside = at >= 0
        inside[inside] = values[inside] < self.stops[at[inside]]
        return inside


def _check_keys(table: sa.Table, df: pd.DataFrame, referred: dict[tuple[str, str], _KeySpans]) -> None:
    """Check ``df``'s foreign keys within the run against the rows written before; keep its referred keys.

    What SQLite's ``PRAGMA foreign_keys`` would check row by row (a B-tree lookup in the parent
    table per row and key: ~2.3 s of a 10^6-dispatch write, benchmarks/RESULTS.md), done once per
    column (a sorted search in the referred keys' spans). A missing key value (NULL) refers to
    nothing, as in SQL. ``referred`` gathers the keys of every frame given, so that the rows of a
    run's later window may refer to those of an earlier one.

    Raises:
        sqlalchemy.exc.IntegrityError: a value names no row of the referred table (a bug in the
            frames :func:`rocroof.ingest.pipeline.build_run` gave, never the capture's content).
    """
    for column, parent, parent_column in _keys_within_run(table):
        if column not in df:
            continue
        values = df[column]
        present = values.notna().to_numpy(dtype=bool)
        if not present.any():
            continue
        wanted = values.astype("Int64").to_numpy(dtype=np.int64, na_value=0)[present]
        found = referred.get((parent, parent_column), _KeySpans()).contains(wanted)
        if not bool(found.all()):
            bad = int(wanted[~found][0])
            statement = f"{table.name}.{column} -> {parent}.{parent_column}"
            raise sa.exc.IntegrityError(
                statement, None, sqlite3.IntegrityError(f"FOREIGN KEY constraint failed: {statement} = {bad}")
            )
    for name, column in _REFERRED:
        if name == table.name and column in df:
            referred.setdefault((name, column), _KeySpans()).add(df[column].dropna().to_numpy(dtype=np.int64))


def _delete_run(conn: sa.Connection, run_id: int) -> None:
    for table in reversed(schema.metadata.sorted_tables):
        if "run_id" in table.c:
            conn.execute(table.delete().where(table.c.run_id == run_id))


def _logical_rows(logical: dict[str, pd.DataFrame]) -> int:
    """Rows the store writes for a run's (or a window's) logical frames, for progress.

    Counter readings are ~1/counters of the long ones (16 a row).
    """
    values = logical.get("counter_value")
    per_row = max(1, min(schema.COUNTERS_PER_READING, _distinct(values["counter_name"]))) if values is not None else 1
    return sum(len(logical.get(name, ())) // (per_row if name == "counter_value" else 1) for name in _LOGICAL)


def _refuse_stray_frames(tables: dict[str, pd.DataFrame], where: str) -> None:
    """Refuse rows of a window's frame among a windowed run's run-level tables (the producer's bug).

    Raises:
        ValueError: such a frame holds rows.
    """
    per_row = [n for n in _WINDOW_FRAMES + _WINDOW_TABLES if n not in _NUMBERED]
    stray = [name for name in per_row if name in tables and len(tables[name])]
    if stray:
        raise ValueError(f"{where}: {', '.join(stray)} belong in the windows, not in the run's tables")


def _numbering_of(table: str, given: pd.DataFrame) -> list[Any]:
    """The names of a numbered table's rows given up front (see :data:`_NUMBERED`), in id order.

    Raises:
        ValueError: ids other than 0, 1, ... in order, or names missing or repeated.
    """
    id_column, name_column = _NUMBERED[table]
    ids = given[id_column].to_numpy(dtype=np.int64)
    names: list[Any] = given[name_column].tolist()
    if not np.array_equal(ids, np.arange(len(ids))) or given[name_column].isna().any() or len(set(names)) < len(names):
        raise ValueError(
            f"RunFrames.tables[{table!r}]: {id_column} must be 0, 1, ... in order, each with its own {name_column}"
        )
    return names


def _refuse_unknown_window_frames(window: dict[str, pd.DataFrame]) -> None:
    """Refuse rows of a frame other than :data:`_WINDOW_FRAMES` in a window (the producer's bug).

    Raises:
        ValueError: such a frame holds rows.
    """
    unknown = [name for name, df in window.items() if name not in _WINDOW_FRAMES and len(df)]
    if unknown:
        raise ValueError(
            f"a window holds {', '.join(unknown)}: a window has {', '.join(_WINDOW_FRAMES)}; the run's other "
            "tables go in RunFrames.tables"
        )


def _claim_content(
    conn: sa.Connection, frames: RunFrames, labels: dict[str, str], replace: bool, *, digest: str | None = None
) -> tuple[int | None, dict[str, str], int | None]:
    """Refuse a run whose content hash is stored, or delete that run to replace it (in ``conn``'s transaction).

    The hash is ``digest`` when given (``frames.pending_sha256``'s, done once windows were written:
    the new run's row is in already, its id past a replaced run's), else ``frames.run``'s.

    Returns:
        The run id the new run must take (SQLite, replacing: past every id given so far) or None,
        the labels it gets (a replaced run's labels that ``labels`` does not set, kept), and the id
        of the run replaced (deleted) or None.

    Raises:
        DuplicateRunError: the hash is stored and ``replace`` is False.
    """
    digest = digest or frames.run.get("content_sha256")
    if not digest:
        return None, labels, None
    old = conn.execute(sa.select(schema.run.c.run_id).where(schema.run.c.content_sha256 == digest)).scalar()
    if old is None:
        return None, labels, None
    if not replace:
        raise DuplicateRunError(
            f"{frames.run.get('source_path')}: this capture is already stored as run {old} "
            f"(same content); use --replace to re-ingest it"
        )
    replace_id: int | None = None
    if conn.dialect.name == "sqlite":
        # SQLite would hand the deleted id out again: a replaced run gets a new id, so
        # that a report saved for the old run cannot be mistaken for the new one
        next_id = conn.execute(sa.select(sa.func.max(schema.run.c.run_id))).scalar()
        replace_id = int(next_id or old) + 1
    lab = schema.run_label
    kept = conn.execute(sa.select(lab.c.key, lab.c.value).where(lab.c.run_id == old)).all()
    labels = {**{k: v for k, v in kept}, **labels}  # the labels stay unless given again
    _delete_run(conn, int(old))
    return replace_id, labels, int(old)


def _insert_run_row(conn: sa.Connection, run: dict[str, Any], run_id: int | None) -> int:
    """Insert the ``run`` row (ingest time now; ``run_id`` when given, else the database's next); return its id."""
    row = dict(run)
    if run_id is not None:
        row["run_id"] = run_id
    row["created_at"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    result = conn.execute(schema.run.insert().values(**_clean(row)))
    return int(result.inserted_primary_key[0])  # type: ignore[index]


def _insert_run_lists(conn: sa.Connection, run_id: int, labels: dict[str, str], frames: RunFrames) -> None:
    """Insert a run's ``run_label``, ``run_note`` and ``run_setting`` rows."""
    small: dict[str, list[dict[str, Any]]] = {
        "run_label": [{"key": k, "value": v} for k, v in labels.items()],
        "run_note": [
            {"note_index": i, "severity": n.severity, "code": n.code, "message": n.message}
            for i, n in enumerate(frames.notes)
        ],
        "run_setting": [{"key": k, "value": v} for k, v in frames.settings.items()],
    }
    for name, records in small.items():
        if records:
            conn.execute(schema.metadata.tables[name].insert(), [{"run_id": run_id, **r} for r in records])


def _write_frame(
    conn: sa.Connection,
    name: str,
    df: pd.DataFrame,
    run_id: int,
    *,
    inline: bool,
    referred: dict[tuple[str, str], _KeySpans] | None,
    written: Callable[[str, int], None],
) -> None:
    """Insert ``df``'s rows into table ``name`` for run ``run_id``, a chunk at a time.

    Args:
        conn: the write transaction's connection.
        name: the table.
        df: its rows, in :func:`_chunks`' columns.
        run_id: the run.
        inline: as for :func:`_chunks` (SQLite's own connections).
        referred: the keys written so far, to check ``df``'s against (:func:`_check_keys`; SQLite,
            whose own checks are off), or None (PostgreSQL checks them).
        written: told ``(name, rows)`` after each chunk.
    """
    table = schema.metadata.tables[name]
    if referred is not None:
        _check_keys(table, df, referred)
    for names, rows, fixed in _chunks(df, table, run_id, inline=inline):
        _insert_many(conn, table, names, rows, fixed)
        release_pages()  # spilled columns (rocroof.spill): the chunk's pages go once written
        written(name, len(rows))


def _update_passes(conn: sa.Connection, run_id: int, passes: pd.DataFrame | None, keys: set[int]) -> None:
    """Set a windowed run's ``pass`` rows (written before its windows) to their final values.

    Raises:
        ValueError: the final frame's passes are not the ones written before the windows.
    """
    final = set() if passes is None else set(passes["pass_index"].astype(np.int64).tolist())
    if final != keys:
        raise ValueError(
            f"RunFrames.tables['pass'] holds passes {sorted(final)} after its windows, {sorted(keys)} before them"
        )
    if passes is None or not len(passes):
        return
    table = schema.pass_
    columns = [c for c in table.columns if c.name in passes.columns and c.name not in ("run_id", "pass_index")]
    if not columns:
        return
    values = {c.name: _py_values(passes[c.name], whole=isinstance(c.type, sa.Integer)) for c in columns}
    stmt = (
        table.update()
        .where(table.c.run_id == sa.bindparam("_run_id"), table.c.pass_index == sa.bindparam("_pass_index"))
        .values({c.name: sa.bindparam(f"_{c.name}") for c in columns})
    )
    keys_ = passes["pass_index"].astype(np.int64).tolist()
    conn.execute(
        stmt,
        [
            {"_run_id": run_id, "_pass_index": key, **{f"_{name}": v[i] for name, v in values.items()}}
            for i, key in enumerate(keys_)
        ],
    )


def _stored_timing_bytes(conn: sa.Connection, run_id: int) -> Iterator[pd.DataFrame]:
    """A run's timing dispatches as stored so far, :data:`INSERT_CHUNK` rows a frame, in dispatch order.

    Each frame has ``dispatch_index``, ``op`` (its op row's name, None for none), ``dram_read_bytes``
    and ``dram_write_bytes`` (None where unknown).
    """
    d, o = schema.dispatch_record.c, schema.op_invocation.c
    stmt = (
        sa.select(d.dispatch_index, o.op, d.dram_read_bytes, d.dram_write_bytes)
        .select_from(
            schema.dispatch_record.outerjoin(
                schema.op_invocation, sa.and_(o.run_id == d.run_id, o.op_index == d.op_index)
            )
        )
        .where(d.run_id == run_id, d.timing_dispatch_index == d.dispatch_index)
        .order_by(d.dispatch_index)
        .execution_options(yield_per=INSERT_CHUNK)
    )
    columns = ["dispatch_index", "op", "dram_read_bytes", "dram_write_bytes"]
    for part in conn.execute(stmt).partitions():
        yield pd.DataFrame([tuple(r) for r in part], columns=columns)


def _clean(row: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in row.items():
        if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)):
            out[k] = None
        elif hasattr(v, "item"):
            out[k] = v.item()
        elif isinstance(v, str):
            out[k] = storable(v)
        else:
            out[k] = v
    return out


def _chunks(
    df: pd.DataFrame, table: sa.Table, run_id: int, *, inline: bool = False
) -> Iterator[tuple[list[str], np.ndarray, dict[str, str | Derived]]]:
    """Rows of ``df`` for ``table`` as ``(column names, rows, fixed)`` chunks.

    ``rows`` is a 2-D object array of Python scalars (None for missing values), at most
    :data:`INSERT_CHUNK` rows: a run of any size is converted a chunk at a time. Without
    ``inline``, ``run_id`` is the first column and ``fixed`` is empty. With ``inline`` (SQLite),
    a column holding one value on every row of the chunk (the run id; a pass, agent or queue; a
    NULL DRAM bound) is left out of ``rows`` and given in ``fixed`` as an SQL literal
    (:func:`_sql_literal`) for :func:`_insert_many` to write into the statement: binding a
    Python value costs ~0.1 us, ~40% of a 10^6-dispatch write in such columns (benchmarks/RESULTS.md).
    With ``inline``, an integer column that is another bound column plus a constant over the
    chunk, or the difference of two (:func:`rocroof.store.derived.derive`), is given in ``fixed``
    as a :class:`~rocroof.store.derived.Derived` and left out of ``rows`` too.
    """
    # marker ranges whose messages the attribution let go get them back a chunk at a time
    rebuild = table.name == "marker_range" and "_range_op" in df.columns
    if rebuild:
        from ..ingest.pipeline import with_range_messages
    # a column with no value in the whole frame is left out of the INSERT (NULL by default): fewer values to bind
    cols = [
        c
        for c in table.columns
        if c.name in df.columns
        and c.name != "run_id"
        and (c.primary_key or (rebuild and c.name == "message") or not _all_missing(df[c.name]))
    ]
    n = len(df)
    for start in range(0, n, INSERT_CHUNK):
        part = df.iloc[start : start + INSERT_CHUNK]
        if rebuild:
            part = with_range_messages(part)
        fixed: dict[str, str | Derived] = {"run_id": str(int(run_id))} if inline else {}
        bound: list[tuple[str, pd.Series, bool]] = []
        for c in cols:
            whole = isinstance(c.type, sa.Integer)
            literal = _fixed_literal(part[c.name], whole) if inline else None
            if literal is None:
                bound.append((c.name, part[c.name], whole))
            else:
                fixed[c.name] = literal
        if inline and len(bound) > 1 and numbered_parameters():
            ints = [(name, v) for name, values, whole in bound if whole and (v := exact_ints(values)) is not None]
            expressions = derive(ints)
            if expressions:
                fixed.update(expressions)
                bound = [b for b in bound if b[0] not in expressions]
        names = [name for name, _, _ in bound]
        block = np.empty((len(part), len(names) + (0 if inline else 1)), dtype=object)
        if not inline:
            names = ["run_id", *names]
            block[:, 0] = run_id
        for j, (_, values, whole) in enumerate(bound, start=0 if inline else 1):
            block[:, j] = _py_values(values, whole=whole)
        yield names, block, fixed


def _all_missing(col: pd.Series) -> bool:
    """Whether ``col`` holds no value (True when empty); a column whose first row holds one is not scanned."""
    if not len(col):
        return True
    first = pd.isna(col.array[0])
    if isinstance(first, (bool, np.bool_)) and not first:
        return False
    return bool(col.isna().all())


def _fixed_literal(col: pd.Series, whole: bool) -> str | None:
    """The SQL literal of the one value every row of ``col`` holds, or None (values differ, or no exact literal).

    Only values whose literal SQLite stores exactly as it would the bound value are taken: NULL,
    integers (and booleans, bound as 0/1), and short text without NUL. Floats other than NULL
    are always bound (a decimal literal is parsed by SQLite's own conversion, not Python's).
    """
    if not len(col):
        return None
    dtype = col.dtype
    if isinstance(dtype, pd.CategoricalDtype):
        codes = col.cat.codes.to_numpy()
        if not bool((codes == codes[0]).all()):
            return None
    elif isinstance(dtype, pd.api.extensions.ExtensionDtype) and getattr(dtype, "kind", "O") in "iub":
        mask = col.isna().to_numpy(dtype=bool)
        if mask.all():
            return "NULL"
        data = col.to_numpy(dtype=dtype.numpy_dtype, na_value=0)
        if mask.any() or not bool((data == data[0]).all()):
            return None
    elif getattr(dtype, "kind", "O") in "iub":
        data = col.to_numpy()
        if not bool((data == data[0]).all()):
            return None
    elif getattr(dtype, "kind", "O") == "f":
        return "NULL" if bool(np.isnan(col.to_numpy()).all()) else None
    else:  # text (or mixed) objects: one string on every row, or none
        values = col.to_numpy(dtype=object)
        first = values[0]
        if not isinstance(first, str):
            return "NULL" if bool(col.isna().all()) else None
        last = values[-1]
        if type(last) is not str or last != first:  # most text columns differ by their last row: no scan
            return None
        if not (all(type(v) is str for v in values.tolist()) and bool((values == first).all())):
            return None
    return _sql_literal(_py_values(col.iloc[:1], whole=whole)[0])


#: Longer text is bound even when every row of a chunk holds it (the statement repeats it per row).
_LITERAL_TEXT_MAX = 256


def _sql_literal(value: object) -> str | None:
    """``value`` (a Python scalar from :func:`_py_values`) as an SQL literal, or None.

    The literal is one that SQLite stores as it would store the value bound; None where there is
    none (floats, blobs, long text or text with NUL).
    """
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        # -2**63 has no literal (its magnitude overflows before the minus applies)
        return str(value) if -(2**63) < value < 2**63 else None
    if isinstance(value, str) and len(value) <= _LITERAL_TEXT_MAX and "\x00" not in value:
        return "'" + value.replace("'", "''") + "'"
    return None


#: Rows per ``INSERT ... VALUES (...), (...)`` statement on SQLite (fewer when the columns x rows
#: would pass the connection's bound-parameter limit): the inserts of a 10^6-dispatch run take
#: ~8% less time than with 64 rows, as long with 1024 (benchmarks/RESULTS.md).
_ROWS_PER_STATEMENT = 256


#: Rows per statement of what is left of a chunk after its statements of _ROWS_PER_STATEMENT rows.
_REST_ROWS_PER_STATEMENT = (64, 16, 4, 1)


def _insert_many(
    conn: sa.Connection,
    table: sa.Table,
    names: list[str],
    rows: Sequence[Sequence[Any]] | np.ndarray,
    fixed: Mapping[str, str | Derived] | None = None,
) -> None:
    """Bulk insert: ``COPY ... FROM STDIN`` on PostgreSQL, multi-row ``INSERT`` on SQLite.

    SQLAlchemy's per-row parameter handling is the bottleneck for millions of rows, so the
    driver is used directly. On SQLite, one statement inserts :data:`_ROWS_PER_STATEMENT` rows
    (a third less time than one row per statement). COPY is ~20x faster than psycopg's
    (pipelined) executemany; its errors are raised as SQLAlchemy's, like those of the other
    paths.

    Args:
        conn: the write transaction's connection.
        table: the target table.
        names: column names, in the order of each row's values.
        rows: row tuples, or a 2-D object array of Python scalars (see :func:`_chunks`).
        fixed: column -> SQL literal, the same on every row, written into the statement
            (:func:`_chunks` with ``inline``), or a :class:`~rocroof.store.derived.Derived`
            expression of the row's bound values (numbered parameters, ``?NNN``); SQLite
            connections of the ``sqlite3`` module only.

    Raises:
        ValueError: ``fixed`` given for another connection (a caller's bug).
    """
    quote = conn.dialect.identifier_preparer.quote
    fixed = fixed or {}
    literals = {k: v for k, v in fixed.items() if isinstance(v, str)}
    expressions = tuple((k, v) for k, v in fixed.items() if not isinstance(v, str))
    columns = ", ".join(quote(n) for n in [*literals, *names, *(k for k, _ in expressions)])
    if fixed and not isinstance(conn.connection.dbapi_connection, sqlite3.Connection):
        raise ValueError(f"{table.name}: values written into the statement are for sqlite3 connections only")
    if conn.dialect.name == "postgresql" and conn.dialect.driver == PG_DRIVER:
        sql = f"COPY {quote(table.name)} ({columns}) FROM STDIN"
        dbapi_error = conn.dialect.loaded_dbapi.Error
        records = rows.tolist() if isinstance(rows, np.ndarray) else rows
        try:
            with conn.connection.dbapi_connection.cursor() as cur, cur.copy(sql) as copy:  # type: ignore[union-attr]
                for row in records:
                    copy.write_row(row)
        except dbapi_error as exc:
            raise sa.exc.DBAPIError.instance(sql, None, exc, dbapi_error) from exc
        return
    placeholder = {"qmark": "?", "format": "%s", "pyformat": "%s"}.get(conn.dialect.paramstyle)
    if placeholder is None:
        records = rows.tolist() if isinstance(rows, np.ndarray) else rows
        conn.execute(table.insert(), [dict(zip(names, row, strict=True)) for row in records])
        return
    one = "(" + ", ".join([*literals.values(), *[placeholder] * len(names)]) + ")"
    sql = f"INSERT INTO {quote(table.name)} ({columns}) VALUES "
    dbapi = conn.connection.dbapi_connection
    if not isinstance(dbapi, sqlite3.Connection):
        records = rows.tolist() if isinstance(rows, np.ndarray) else rows
        conn.exec_driver_sql(sql + one, [tuple(r) for r in records])
        return
    per = max(1, min(_ROWS_PER_STATEMENT, dbapi.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) // max(len(names), 1)))
    # statements of `per` rows, then of fewer for what is left (a rest of up to 255 rows one row
    # per statement took 3.7% of a 10^6-dispatch write for 1% of its rows)
    sizes = [per, *(size for size in _REST_ROWS_PER_STATEMENT if size < per)] if names else [1]
    cur = dbapi.cursor()
    statement = sql + one
    done = 0
    try:
        for size in sizes:
            count = (len(rows) - done) // size * size
            if not count:
                continue
            part = rows[done : done + count]
            if size == 1:
                grouped: list[Any] = part.tolist() if isinstance(part, np.ndarray) else list(part)
                if not names:  # every value of the rows written into the statement: one empty row each
                    grouped = [()] * count
            elif isinstance(part, np.ndarray):
                grouped = part.reshape(-1, size * len(names)).tolist()
            else:
                grouped = [tuple(itertools.chain.from_iterable(part[i : i + size])) for i in range(0, count, size)]
            values = (
                _numbered_rows(tuple(literals.values()), tuple(names), expressions, size)
                if expressions
                else ", ".join([one] * size)
            )
            statement = sql + values
            cur.executemany(statement, grouped)
            done += count
    except sqlite3.Error as exc:  # as SQLAlchemy raises it (IntegrityError for a duplicate content hash...)
        raise sa.exc.DBAPIError.instance(statement, None, exc, sqlite3.Error) from exc
    finally:
        cur.close()


@functools.lru_cache(maxsize=64)
def _numbered_rows(
    literals: tuple[str, ...], names: tuple[str, ...], expressions: tuple[tuple[str, Derived], ...], rows: int
) -> str:
    """The ``VALUES`` rows of a statement of ``rows`` rows with numbered parameters, ``?1`` on.

    Each row is its literals, one parameter per bound column (row ``r``'s column ``j`` is
    ``?(r * len(names) + j + 1)``: the rows' values bound flat, in order) and its derived columns'
    expressions over its own parameters.
    """
    width = len(names)
    out = []
    for r in range(rows):
        parameter = {name: f"?{r * width + j + 1}" for j, name in enumerate(names)}
        out.append("(" + ", ".join([*literals, *parameter.values(), *(e.sql(parameter) for _, e in expressions)]) + ")")
    return ", ".join(out)


def _py_values(col: pd.Series, *, whole: bool = False) -> np.ndarray:
    """Column values as a 1-D object array of Python scalars, None for missing (sqlite3 rejects numpy types).

    Vectorised per dtype: numpy and nullable (``Int64``, ``boolean``) columns are converted in C;
    categorical columns through their categories; text columns are checked for strings that
    UTF-8 cannot store as a whole, and only then value by value (:func:`_text`).

    ``whole``: the column is an integer column; whole floats (a float column with NULLs, e.g.
    ``8.0``) become ints, as SQLite would store them and as PostgreSQL's ``COPY`` needs them.
    """
    dtype = col.dtype
    if isinstance(dtype, pd.CategoricalDtype):
        cats = _py_values(pd.Series(dtype.categories, dtype=object), whole=whole)
        lookup = np.empty(len(cats) + 1, dtype=object)
        lookup[: len(cats)] = cats
        lookup[-1] = None  # code -1: missing
        by_code: np.ndarray = lookup[col.cat.codes.to_numpy()]
        return by_code
    kind = getattr(dtype, "kind", "O")
    if isinstance(dtype, pd.api.extensions.ExtensionDtype) and kind in "iub":  # Int64, boolean: data + mask
        mask = col.isna().to_numpy(dtype=bool)
        data = col.to_numpy(dtype=dtype.numpy_dtype, na_value=0)
        out: np.ndarray = data.astype(object)
        if mask.any():
            out[mask] = None
        return out
    if kind in "iub" and not isinstance(dtype, pd.api.extensions.ExtensionDtype):
        plain: np.ndarray = col.to_numpy().astype(object)
        return plain
    if kind == "f" and not isinstance(dtype, pd.api.extensions.ExtensionDtype):
        values = col.to_numpy()
        out = values.astype(object)
        nan = np.isnan(values)
        if nan.any():
            out[nan] = None
        if whole:
            exact = ~nan & np.isfinite(values) & (values == np.floor(values))
            if exact.any():
                out[exact] = [int(v) for v in values[exact].tolist()]
        return out
    values = col.to_numpy(dtype=object)
    out = values.copy()
    missing = pd.isna(values)
    if missing.any():
        out[missing] = None
    present = out[~missing]
    types = set(map(type, present.tolist()))
    if types <= {str}:
        try:
            "".join(present.tolist()).encode("utf-8")
        except UnicodeEncodeError:
            out[~missing] = [storable(v) for v in present.tolist()]
        return out
    mixed: np.ndarray = np.array(_py_list_slow(out.tolist(), whole=whole) + [None], dtype=object)[:-1]
    return mixed


def _py_list_slow(values: list[Any], *, whole: bool) -> list[Any]:
    """Value-by-value conversion of a column of mixed types (numpy scalars, floats, strings)."""
    out = [
        None
        if (v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)))
        else (v.item() if hasattr(v, "item") else storable(v) if isinstance(v, str) else v)
        for v in values
    ]
    if whole:
        out = [int(v) if isinstance(v, float) and v.is_integer() else v for v in out]
    return out
