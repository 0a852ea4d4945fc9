"""Readers for NVIDIA captures: Nsight Compute raw CSV (counters) and Nsight Systems SQLite (trace).

Nsight Compute: ``ncu --import report.ncu-rep --csv --page raw``. Row 1 is the header, row 2
the unit of each column (chosen per column: ``us``, ``Mbyte``...; decimal prefixes, ``Kbyte`` =
1e3 bytes; ``nsecond``, ``byte`` with ``--print-units base``): a file without it is refused, as
its numbers' units are unknown. Numbers may carry thousands separators.
Each kernel row carries its NVTX push/pop stack in the column
``thread Domain:Push/Pop_Range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg`` as
``<tid>  "<domain>:<message>:<6 payload/color fields>" ...`` (outermost first); rocroof takes the
innermost ggml range as the kernel's region. Nsight Compute replays and serialises kernels (and by
default flushes caches before each), so its durations are not the timings.

Nsight Systems: ``nsys export --type sqlite``. Kernels from ``CUPTI_ACTIVITY_KIND_KERNEL``
(``correlationId`` links them to the launching ``CUPTI_ACTIVITY_KIND_RUNTIME`` call), NVTX ranges
and marks from ``NVTX_EVENTS`` (event type 59 push/pop range, 60 start/end range, 34 mark), names
from ``StringIds``, the GPU from ``TARGET_INFO_GPU``. ``globalTid`` packs the process and thread:
the low 24 bits are the thread id, the rest is the process's ``globalPid`` (table ``PROCESSES``).
"""

from __future__ import annotations

import csv
import gzip
import io
import re
import sqlite3
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ... import keys, spill
from ...errors import ParseError
from ...fileio import (
    check_counter_values,
    column_map,
    logical_name,
    open_binary,
    parse_int,
    parse_str,
    pick,
    read_csv_chunks,
    read_header,
    require,
    sqlite_connect,
    sqlite_file,
)
from ...memory import release_free_memory
from ...records import (
    AGENT_COLUMNS,
    COUNTER_COLUMNS,
    DISPATCH_COLUMNS,
    LAUNCH_COLUMNS,
    MARKER_COLUMNS,
    MARKER_PART_COLUMNS,
    SPILLED_ON_READ,
    Note,
    PassData,
    SpilledFrameWriter,
    code_dtype,
    conform,
    distinct,
    empty_frame,
    marker_kinds,
    non_decreasing,
    spill_columns,
    spilled_array,
    take_rows,
)
from ...spill import TAKE_ROWS, ColumnWriter, release_pages
from ...text import printable
from ..markers import RANGE_PART_COLUMNS, REGION_PART_COLUMNS, compact_ranges, split_ranges
from .sqlite_arrow import arrow_frame, sqlite_frame

NVTX_COLUMN = "thread Domain:Push/Pop_Range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg"
_STACK_ENTRY = re.compile(r'"([^"]*)"')
_PREFIX = {
    "": 1.0,
    "k": 1e3,
    "K": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
    "Ki": 1024.0,
    "Mi": 1024.0**2,
    "Gi": 1024.0**3,
    "Ti": 1024.0**4,
}
_TIME = {"ns": 1.0, "nsecond": 1.0, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6, "s": 1e9, "second": 1e9}
#: Columns of the raw page that describe the launch rather than measure it.
_META = {
    "id",
    "process id",
    "process name",
    "host name",
    "kernel name",
    "context",
    "stream",
    "block size",
    "grid size",
    "device",
    "cc",
    NVTX_COLUMN.lower(),
}


def unit_scale(unit: str) -> float | None:
    """The factor from an Nsight Compute unit to rocroof's base unit (bytes, ns, bytes/s...).

    ``Kbyte`` -> 1e3, ``Mbyte`` -> 1e6, ``us`` -> 1e3 (to ns), ``Gbyte/s`` -> 1e9 (to bytes/s).
    Returns None for units without a known prefix (the value is kept as printed).

    >>> unit_scale("Mbyte"), unit_scale("us"), unit_scale("Gbyte/s"), unit_scale("%")
    (1000000.0, 1000.0, 1000000000.0, 1.0)
    """
    u = unit.strip()
    if not u or u in ("%", "byte", "cycle", "inst", "warp", "thread", "block", "register/thread"):
        return 1.0
    if "/" in u:
        num, _, den = u.partition("/")
        a, b = unit_scale(num), _TIME.get(den.strip())
        if a is not None and b is not None:
            return a / (b / 1e9)  # per ns -> per second
        return unit_scale(num) if den.strip() in ("cycle", "block", "thread", "warp", "SM") else None
    if u in _TIME:
        return _TIME[u]
    m = re.fullmatch(r"(Ki|Mi|Gi|Ti|[kKMGTP]?)(byte|B|bytes)", u)
    if m:
        return _PREFIX[m.group(1)]
    m = re.fullmatch(r"([kKMGT]?)(hz|Hz|inst|cycle)", u)
    if m:
        return _PREFIX[m.group(1)]
    return None


#: Cells Nsight Compute writes for a metric it has no value of.
_NO_VALUE = ("", "n/a", "N/A", "nan")


def _number(text: pd.Series) -> pd.Series:
    """Nsight numbers: thousands separators dropped, ``n/a`` and empty cells as NaN (other text too)."""
    cleaned = text.astype(str).str.replace(",", "", regex=False).str.strip()
    return pd.to_numeric(cleaned.where(~cleaned.isin(_NO_VALUE), None), errors="coerce")


#: Opcodes whose thread instructions an instanced per-opcode metric keeps as counters of their own
#: (``<metric>:<OPCODE>``): those that do arithmetic rocroof counts (rocroof.analysis.ops); the
#: metric's total is kept too. IDP is dp4a; the MMA/GMMA ones are tensor-core instructions.
KEPT_OPCODES = frozenset(
    {"IDP", "FFMA", "FADD", "FMUL", "HFMA2", "HADD2", "HMUL2", "DFMA", "DADD", "DMUL"}
    | {"IMMA", "HMMA", "DMMA", "HGMMA", "IGMMA", "QGMMA"}
)
#: One cell of an instanced metric as ``ncu --print-metric-instances details`` prints it:
#: ``12,961,792 (IMAD: 1,720,320; LOP3: 1,703,936; ...)``.
_INSTANCES = re.compile(r"\s*([0-9][0-9,]*(?:\.[0-9]+)?)\s*\((.*)\)\s*", re.S)
_INSTANCE = re.compile(r"\s*([A-Za-z0-9_.]+)\s*:\s*([0-9][0-9,]*(?:\.[0-9]+)?)\s*")


def instance_cells(column: pd.Series) -> tuple[pd.Series, dict[str, np.ndarray]] | None:
    """An instanced metric's column: ``(totals, {opcode: values})``; None when no cell is one.

    Each distinct cell is parsed once. Opcodes outside :data:`KEPT_OPCODES` are dropped; a kept
    opcode missing from a cell that lists others was not executed (0); a cell without instances
    (a plain number, ``n/a``) gives NaN for every opcode.
    """
    text = column.astype(str)
    if not text.str.contains("(", regex=False).any():
        return None
    codes, cells = pd.factorize(text)  # rows -> distinct cells: each is parsed once, then spread back
    totals_of = np.empty(len(cells), dtype=np.float64)
    found_of: list[dict[str, float] | None] = []
    for i, cell in enumerate(cells):
        m = _INSTANCES.fullmatch(cell)
        if m is None:
            totals_of[i] = float(_number(pd.Series([cell])).iloc[0])
            found_of.append(None)
            continue
        found = {}
        for part in m.group(2).split(";"):
            pm = _INSTANCE.fullmatch(part)
            if pm is not None and pm.group(1) in KEPT_OPCODES:
                found[pm.group(1)] = float(pm.group(2).replace(",", ""))
        totals_of[i] = float(m.group(1).replace(",", ""))
        found_of.append(found)
    names = sorted({k for found in found_of if found for k in found})
    per = {
        name: np.array([np.nan if f is None else f.get(name, 0.0) for f in found_of], dtype=np.float64)[codes]
        for name in names
    }
    return pd.Series(totals_of[codes], index=column.index, dtype="float64"), per


def _whole(path: Path, values: pd.Series, column: str, first_row: int, *, exact: bool = False) -> pd.Series:
    """Numbers rounded to ``Int64``; ParseError naming the first row outside the signed 64-bit range.

    With ``exact`` (ids), a value with a fraction is refused too: rounding ``1.5`` made it id 2.
    """
    rounded = values.round()
    if exact:
        fraction = rounded.notna() & (rounded != values)
        if bool(fraction.any()):
            pos = int(np.flatnonzero(fraction.to_numpy())[0])
            raise ParseError(
                path, f"column {column!r} has {values.iloc[pos]:g}; expected a whole number", first_row + pos
            )
    bad = rounded.notna() & ~((rounded >= -(2**63)) & (rounded < 2**63))
    if bool(bad.any()):
        pos = int(np.flatnonzero(bad.to_numpy())[0])
        raise ParseError(
            path, f"column {column!r} has {values.iloc[pos]:g}; expected a number within 64 bits", first_row + pos
        )
    return pd.Series(pd.array(rounded, dtype="Int64"))


def _shared_text(values: pd.Series) -> np.ndarray:
    """``values.astype(str)`` with one string object per distinct value (a device id on 10^6 kernel rows)."""
    codes, uniques = pd.factorize(values.reset_index(drop=True), use_na_sentinel=False)
    texts = np.empty(len(uniques), dtype=object)
    texts[:] = pd.Series(uniques).astype(str).tolist()
    out: np.ndarray = texts[codes]
    return out


def _innermost_ggml(cell: object) -> tuple[int | None, str | None]:
    """``(thread id, innermost ggml range message)`` of an NVTX stack cell."""
    if not isinstance(cell, str) or not cell.strip():
        return None, None
    head = cell.strip().split(None, 1)[0]
    tid = None
    if head.isdigit():
        try:
            value = int(head)
        except ValueError:  # superscript digits: digits to isdigit(), not to int()
            value = -1
        tid = value if 0 <= value < 2**63 else None  # a thread id past 64 bits is no thread id
    # the quoted entries, innermost last: the last one whose message is a ggml range
    for entry in reversed(_STACK_ENTRY.findall(cell)):
        if "ggml:" not in entry:
            continue
        # "<domain>:<message>:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg"; the message may hold colons
        body = entry.split(":", 1)[1] if entry.startswith("<") or ":" in entry else entry
        parts = body.rsplit(":", 6)
        text = parts[0] if len(parts) == 7 else body
        if text.startswith("ggml:"):
            return tid, text
    return tid, None


def is_ncu_csv(path: Path) -> bool:
    """True for an ``ncu --csv --page raw`` export (header holds ``Kernel Name`` and ncu metrics)."""
    if not logical_name(path).endswith(".csv"):
        return False
    data = bytearray()
    try:
        with open_binary(path) as fh:
            while len(data) < 1 << 16 and (piece := fh.read(1 << 12)):
                data += piece
    except (EOFError, gzip.BadGzipFile, zlib.error):
        pass  # a compressed file cut short: its header still tells what it is (the reader reports the damage)
    except Exception:
        return False
    head = data.decode("utf-8", errors="replace")
    first = head.splitlines()[0] if head else ""
    try:  # quoted or not: ncu quotes every cell, a script that filtered the rows may not
        cells = next(csv.reader(io.StringIO(first)), [])
    except csv.Error:
        return False
    return "Kernel Name" in cells and any("gpu__time_duration" in c or "Push/Pop_Range" in c for c in cells)


def _units_row(path: Path, header: list[str], id_col: str) -> list[str] | None:
    """Row 2 of an Nsight Compute raw export when it is the units row (its ID cell empty), else None."""
    try:
        with open_binary(path) as fh:
            fh.readline()
            second = fh.readline()
    except (OSError, EOFError, gzip.BadGzipFile, zlib.error):
        return None  # the reader reports the damage
    text = second.decode("utf-8", errors="replace")
    try:
        cells = next(csv.reader(io.StringIO(text)), [])
    except csv.Error:
        return None
    if not cells or len(cells) < len(header):
        return None
    units = dict(zip(header, cells, strict=False))
    return [units.get(name, "") for name in header] if units.get(id_col, "x").strip() == "" else None


def _has_second_line(path: Path) -> bool:
    """Whether the file has a second line with anything on it (a units row or a first data row)."""
    try:
        with open_binary(path) as fh:
            fh.readline()
            return bool(fh.readline().strip())
    except (OSError, EOFError, gzip.BadGzipFile, zlib.error):
        return False  # the reader reports the damage


def _numeric(path: Path, column: pd.Series, first_row: int) -> pd.Series:
    """A column of a chunk as numbers: as the C parser typed it, else by :func:`_number`.

    A column of text only (``launch__cluster_scheduling_policy``: ``PolicySpread``) is a metric
    without a number: NaN, as not collected.

    Raises:
        ParseError: a cell that is neither a number nor one of :data:`_NO_VALUE` in a column that
            holds numbers (damage: it would read as "not collected" for that kernel), naming the
            column and row.
    """
    if column.dtype.kind in "iuf":
        return column.reset_index(drop=True)
    numbers = _number(column).reset_index(drop=True)
    missing = numbers.isna()
    if not (bool(missing.any()) and bool(numbers.notna().any())):
        return numbers  # every cell a number, or none (a text metric): the cells need no second look
    cells = column.astype(str).str.strip().reset_index(drop=True)
    bad = missing & ~cells.isin(_NO_VALUE)
    if bool(bad.any()):
        pos = int(np.flatnonzero(bad.to_numpy())[0])
        raise ParseError(
            path,
            f"column {column.name!r} holds {printable(cells.iloc[pos])!r}; expected a number (or n/a)",
            first_row + pos,
        )
    return numbers


@dataclass(frozen=True)
class _NcuLayout:
    """The columns of an Nsight Compute raw-page CSV, from its header (and units row)."""

    cols: dict[str, str]  # column_map of the header
    units: pd.Series  # each column's unit ("" where none)
    unit_cells: list[str] | None  # the units row, when the file has one
    metrics: list[tuple[str, float]]  # (column, scale to the counter's unit): counters of each dispatch
    name_col: str
    id_col: str
    dur_col: str | None


#: The byte and time metrics rocroof computes with: DRAM bytes (``dram__bytes_read.sum``...), L2
#: bytes (``lts__t_bytes``) and the kernel time (``gpu__time_duration``). Their unit must be one
#: rocroof scales. Other metrics in units it does not scale (``pass``, ``SM``, ``cluster`` in the
#: recorded exports, ``byte/sector`` ratios) are left out, as before.
_MEASURES_BYTES_OR_TIME = re.compile(r"^(dram__bytes|lts__t_bytes|gpu__time_duration)")


def _ncu_layout(path: Path) -> _NcuLayout:
    """The layout of ``path``'s columns.

    Raises:
        ParseError: a repeated or missing column, or a second line that is not the units row.
    """
    header = read_header(path)
    repeated = sorted({str(c) for c in header if header.count(c) > 1})
    if repeated:
        raise ParseError(path, f"column {repeated[0]!r} appears more than once (expected one column per metric)", 1)
    cols = column_map(header)
    name_col = require(path, cols, "kernel name", "Kernel Name")
    id_col = require(path, cols, "kernel id", "ID")
    unit_cells = _units_row(path, header, id_col)
    if unit_cells is None and _has_second_line(path):
        # without the units row a "Mbyte" column would be read as bytes (10^6 off): refuse, never guess
        raise ParseError(
            path,
            f"row 2 is not Nsight Compute's units row (its {id_col!r} cell empty, units such as Mbyte, usecond); "
            "export again with ncu --import REPORT.ncu-rep --csv --page raw, keeping every line",
            2,
        )
    units = pd.Series(unit_cells if unit_cells is not None else [""] * len(header), index=header).fillna("")
    metrics = []
    for col in header:
        if str(col).strip().lower() in _META or "__" not in str(col) or str(col).startswith("device__attribute"):
            continue  # device attributes repeat on every row: facts of the GPU, not counters of a dispatch
        scale = unit_scale(units[col])
        if scale is not None:
            metrics.append((col, scale))
        elif _MEASURES_BYTES_OR_TIME.search(str(col)):
            # read as printed, a byte or time counter would be off by the unit's factor: refuse, never guess
            raise ParseError(
                path,
                f"column {printable(str(col))!r} has the unit {printable(str(units[col]))!r} in the units row; "
                "expected a byte or time unit of Nsight Compute (byte, Kbyte, Mbyte, Gbyte, nsecond, usecond, "
                "msecond, or one of them per second or per cycle)",
                2,
            )
    return _NcuLayout(cols, units, unit_cells, metrics, name_col, id_col, pick(cols, "gpu__time_duration.sum"))


#: Kernel rows parsed at a time. A row of the raw page is ~20 text cells (metrics with thousands
#: separators, the NVTX stack): a chunk of 200,000 rows was ~300 MB of Python strings at once.
NCU_CHUNK_ROWS = 25_000


def read_ncu_csv(path: Path, label: str) -> tuple[PassData, dict[str, str]]:
    """Read an Nsight Compute raw-page CSV as one counter pass, a chunk of rows at a time.

    Returns:
        ``(pass, facts)``: facts hold the GPU (``CC``, device name when present).

    Raises:
        ParseError: a missing or repeated column, or a row without a kernel name / duration.
    """
    layout = _ncu_layout(path)
    # every dispatch column to spill files as read (rocroof.spill): integers as they are, text
    # (kernel names, regions, agent labels) as a code per row into its distinct texts
    with (
        SpilledFrameWriter(DISPATCH_COLUMNS) as frames,
        SpilledFrameWriter(_REGION_PARTS) as region_parts,
        _MetricFiles() as metric_files,
    ):
        return _ncu_rows(path, layout, frames, region_parts, metric_files, label)


#: The regions' parts as read (:data:`rocroof.capture.markers.REGION_PART_COLUMNS`).
_REGION_PARTS = dict(zip(REGION_PART_COLUMNS, ("object", "object", "Int64"), strict=True))


class _MetricFiles:
    """Each counter's values and dispatch rows, appended chunk by chunk to spill files of its own.

    The counter frame is counter-major (a counter's values, then the next's): each counter's are
    written as its column is parsed and copied into the frame's files at the end, a block at a time,
    so that no counter's values are held in memory (8x10^6 values at 10^6 kernels: ~130 MB).
    A context manager: leaving it drops the files.
    """

    def __init__(self) -> None:
        self._files: dict[str, tuple[ColumnWriter, ColumnWriter]] = {}
        self.counts: dict[str, int] = {}

    def add(self, name: str, first: int, kept: np.ndarray | None, values: np.ndarray) -> None:
        """Counter ``name``'s ``values`` of dispatch rows ``first ..`` (every row) or ``kept``."""
        if name not in self._files:
            self._files[name] = (ColumnWriter(np.int64), ColumnWriter(np.float64))
            self.counts[name] = 0
        rows, out = self._files[name]
        rows.append(np.arange(first, first + len(values), dtype=np.int64) if kept is None else kept)
        out.append(values)
        self.counts[name] += len(values)

    def drain(self, name: str) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Counter ``name``'s ``(rows, values)`` a block at a time; its files are dropped after."""
        rows_file, values_file = self._files.pop(name)
        rows, values = rows_file.finish(mapped=True), values_file.finish(mapped=True)
        for lo in range(0, len(rows), TAKE_ROWS):
            yield np.asarray(rows[lo : lo + TAKE_ROWS]), np.asarray(values[lo : lo + TAKE_ROWS])
            release_pages()
        del rows, values

    def close(self) -> None:
        for rows, values in self._files.values():
            rows.close()
            values.close()
        self._files.clear()

    def __enter__(self) -> _MetricFiles:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _ncu_rows(
    path: Path,
    layout: _NcuLayout,
    frames: SpilledFrameWriter,
    region_parts: SpilledFrameWriter,
    metric_files: _MetricFiles,
    label: str,
) -> tuple[PassData, dict[str, str]]:
    """:func:`read_ncu_csv` past its header: the rows, a chunk at a time, through ``frames``."""
    cols, units, unit_cells, metrics = layout.cols, layout.units, layout.unit_cells, layout.metrics
    name_col, id_col, dur_col = layout.name_col, layout.id_col, layout.dur_col
    id_like = [c for c in (pick(cols, "Process ID"), pick(cols, "Stream"), pick(cols, "Context")) if c]
    numbers = [id_col, *id_like, *(m for m, _ in metrics), *([dur_col] if dur_col else [])]
    nvtx = pick(cols, NVTX_COLUMN)
    device = pick(cols, "Device")
    facts: dict[str, str] = {}
    instance_names: list[str] = []  # "<metric>:<OPCODE>" counters found in instanced cells, in order
    offset = 0
    chunks = read_csv_chunks(path, chunk_rows=NCU_CHUNK_ROWS, numbers=numbers, skip_second_row=unit_cells is not None)
    for chunk, first_row in chunks:
        if not facts and len(chunk):
            facts = _ncu_facts(chunk, cols)
        disp = pd.DataFrame({"kernel_name": parse_str(chunk[name_col])})
        disp["dispatch_id"] = _whole(path, _numeric(path, chunk[id_col], first_row), id_col, first_row, exact=True)
        if bool(disp["kernel_name"].isna().any()):
            pos = int(np.flatnonzero(disp["kernel_name"].isna().to_numpy())[0])
            raise ParseError(path, f"column {name_col!r} is empty; expected a kernel name", first_row + pos)
        if dur_col is not None:
            dur_scale = unit_scale(units[dur_col]) or 1.0
            disp["duration_ns"] = _whole(
                path, _numeric(path, chunk[dur_col], first_row) * dur_scale, dur_col, first_row
            )
        for target, alias in (("process_id", "Process ID"), ("stream_id", "Stream"), ("queue_id", "Context")):
            column = pick(cols, alias)
            if column is not None:
                disp[target] = _whole(path, _numeric(path, chunk[column], first_row), column, first_row)
        for target, alias in (("grid", "Grid Size"), ("workgroup", "Block Size")):
            column = pick(cols, alias)
            if column is not None:
                xyz = _dims(chunk[column])
                for i, axis in enumerate("xyz"):
                    disp[f"{target}_{axis}"] = parse_int(path, xyz[i], first_row, column)[0]
        if "workgroup_x" in disp and "grid_x" in disp:
            # ncu's Grid Size counts blocks; rocroof's grid sizes count work-items (threads)
            for a in "xyz":
                disp[f"grid_{a}"] = disp[f"grid_{a}"] * disp[f"workgroup_{a}"]
            disp["workgroup_size"] = disp["workgroup_x"] * disp["workgroup_y"] * disp["workgroup_z"]
            disp["grid_size"] = disp["grid_x"] * disp["grid_y"] * disp["grid_z"]
        if nvtx is not None:
            parsed = [_innermost_ggml(c) for c in chunk[nvtx].to_numpy(dtype=object).tolist()]
            disp["thread_id"] = pd.array([t for t, _ in parsed], dtype="Int64")
            # the ggml ranges' messages as their parts (op, node name, invocation) where these give
            # them back exactly: a region is then None, not a string per op invocation
            messages = np.empty(len(parsed), dtype=object)
            messages[:] = [msg for _, msg in parsed]
            kept, parts = split_ranges(messages)
            disp["region"] = pd.Series(kept, dtype=object, copy=False)
            region_parts.add(
                pd.DataFrame(
                    {new: parts[old] for new, old in zip(REGION_PART_COLUMNS, RANGE_PART_COLUMNS, strict=True)}
                )
            )
            del parsed, messages, kept, parts
        disp["agent_label"] = parse_str(chunk[device]) if device else "0"
        frames.add(disp)
        local = np.arange(offset, offset + len(chunk), dtype=np.int64)
        for col, scale in metrics:
            inst = None if pd.api.types.is_numeric_dtype(chunk[col]) else instance_cells(chunk[col])
            if inst is not None:  # an instanced metric: its total, and its kept opcodes as counters
                for name, v in inst[1].items():
                    key = f"{col}:{name}"
                    check_counter_values(path, v, first_row, key)
                    keep = ~np.isnan(v)
                    metric_files.add(key, offset, None if keep.all() else local[keep], v[keep])
                    if key not in instance_names:
                        instance_names.append(key)
            numbers_of = inst[0] if inst is not None else _numeric(path, chunk[col], first_row)
            v = (numbers_of * scale).to_numpy(dtype=np.float64, na_value=np.nan)
            check_counter_values(path, v, first_row, str(col))
            if str(units[col]).strip().lower().endswith("byte") and str(col).endswith(".sum"):
                v = np.round(v)  # a byte count: 0.509952 Mbyte is 509,952 B, not 509,951.99999999994
            keep = ~np.isnan(v)
            metric_files.add(col, offset, None if keep.all() else local[keep], v if keep.all() else v[keep])
        offset += len(chunk)
    dispatches = frames.finish() if frames.rows else empty_frame(DISPATCH_COLUMNS)
    if region_parts.rows:
        for name, column in region_parts.finish().items():
            dispatches[name] = column
    # a kernel's ID is unique in a report (per profiled process): a repeated row is damage
    repeat = _first_repeated_kernel(dispatches)
    if repeat is not None:
        raise ParseError(
            path,
            f"kernel ID {dispatches['dispatch_id'].iloc[repeat]} appears twice (expected one row per profiled kernel)",
            (3 if unit_cells is not None else 2) + repeat,
        )
    counter_frame = empty_frame(COUNTER_COLUMNS)
    present = [m for m in [*(m for m, _ in metrics), *instance_names] if metric_files.counts.get(m, 0)]
    if present:  # counter-major, as the columns come: one row per dispatch and counter measured
        # each counter's files copied into the frame's a block at a time (rocroof.spill): 8x10^6
        # values are never held in memory; the codes in the type a categorical keeps (from_codes
        # takes them as they are)
        code_type = code_dtype(len(present))
        with (
            ColumnWriter(np.int64) as row_file,
            ColumnWriter(np.float64) as value_file,
            ColumnWriter(code_type) as code_file,
        ):
            for j, m in enumerate(present):
                for rows_part, values_part in metric_files.drain(m):
                    row_file.append(rows_part)
                    code_file.append(np.full(len(values_part), j, dtype=code_type))
                    value_file.append(values_part)
            categories = pd.CategoricalDtype(pd.Index([str(m) for m in present], dtype=object))
            counter_frame = pd.DataFrame(
                {
                    "row": row_file.finish(),
                    "counter_name": pd.Categorical.from_codes(code_file.finish(), dtype=categories, validate=False),
                    "value": value_file.finish(),
                },
                copy=False,
            )
    return (
        PassData(
            kind="counter",
            label=label,
            source=str(path),
            dispatches=dispatches,
            counters=counter_frame,
            region_method="nvtx_stack",
        ),
        facts,
    )


def _first_repeated_kernel(dispatches: pd.DataFrame) -> int | None:
    """The first row (0-based) whose (process id, kernel ID) an earlier row has, or None.

    Nsight Compute writes its kernels in ID order: repeats are then next to each other, found a
    block at a time (:func:`rocroof.keys.lex_sorted`) without a hash table of every key; rows in
    another order or with missing ids are checked by pandas.
    """
    pids, ids = dispatches["process_id"].array, dispatches["dispatch_id"].array
    if not keys.has_missing(pids) and not keys.has_missing(ids):
        in_order, repeat = keys.lex_sorted([pids, ids])
        if in_order:
            return repeat
    repeated = dispatches.duplicated(subset=["process_id", "dispatch_id"], keep="first").to_numpy()
    return int(np.flatnonzero(repeated)[0]) if repeated.any() else None


def _dims(column: pd.Series) -> pd.DataFrame:
    """``(x, y, z)`` text of each ``(x, y, z)`` cell, computed once per distinct cell."""
    codes, uniques = pd.factorize(column.to_numpy(dtype=object), use_na_sentinel=False)
    parsed = pd.Series(uniques, dtype=object).astype(str).str.extract(r"\(\s*(\d+),\s*(\d+),\s*(\d+)\s*\)")
    return pd.DataFrame({i: parsed[i].to_numpy(dtype=object)[codes] for i in range(3)})


def _ncu_facts(chunk: pd.DataFrame, cols: dict[str, str]) -> dict[str, str]:
    """Facts of the GPU from the first kernel row: CC, device attributes, host name."""
    facts: dict[str, str] = {}
    cc = pick(cols, "CC")
    if cc is not None:
        major_minor = str(chunk[cc].iloc[0]).strip()
        if re.fullmatch(r"\d+\.\d+", major_minor):
            facts["gfx_arch"] = "sm_" + major_minor.replace(".", "")
    for fact, column in (
        ("nvidia_l2_cache_bytes", "device__attribute_l2_cache_size"),
        ("nvidia_sm_count", "device__attribute_multiprocessor_count"),
        ("nvidia_memory_bus_width_bits", "device__attribute_global_memory_bus_width"),
        ("nvidia_memory_clock_khz", "device__attribute_memory_clock_rate"),
        ("gpu_name", "device__attribute_display_name"),
    ):
        col = pick(cols, column)
        if col is not None:
            facts[fact] = str(chunk[col].iloc[0]).replace(",", "").strip()
    host = pick(cols, "Host Name")
    if host is not None:
        facts["host"] = str(chunk[host].iloc[0])
    return facts


def is_nsys_sqlite(path: Path) -> bool:
    """True for an ``nsys export --type sqlite`` database with a kernel activity table."""
    if not logical_name(path).endswith((".sqlite", ".db", ".sqlite3")):
        return False
    try:
        with sqlite_file(path) as plain:
            return _has_kernel_table(plain)
    except ParseError:
        return False


def _has_kernel_table(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            if fh.read(16) != b"SQLite format 3\x00":
                return False
        conn = sqlite_connect(path)
    except (OSError, sqlite3.Error):
        return False
    try:
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except (sqlite3.Error, UnicodeDecodeError, MemoryError):  # damage: text that is not UTF-8, SQLITE_NOMEM
        return False
    finally:
        conn.close()
    return "CUPTI_ACTIVITY_KIND_KERNEL" in names


def read_nsys_sqlite(path: Path, label: str) -> tuple[PassData, pd.DataFrame, dict[str, str]]:
    """Read an Nsight Systems SQLite export (``.gz`` accepted) as the trace pass.

    Returns:
        ``(pass, agents, facts)``.

    Raises:
        ParseError: not an nsys export, or a query failure.
    """
    with sqlite_file(path) as plain:
        try:
            result = _read_nsys(plain, label)
        except ParseError as exc:
            if exc.path == str(path):
                raise
            raise ParseError(path, exc.reason, exc.row) from exc  # the user's file, not the decompressed copy
    result[0].source = str(path)
    # the queries' Arrow and conversion buffers, freed, go back before the Nsight Compute read
    # (~260 MB at 10^6 kernels: glibc keeps freed memory for reuse until asked)
    release_free_memory()
    return result


def _ints(path: Path, table: str, frame: pd.DataFrame, column: str) -> pd.Series:
    """A column of an nsys table as ``Int64``; ParseError naming the table and column when it is not one."""
    if column not in frame.columns:
        raise ParseError(path, f"{table} has no column {column!r}; is this a complete nsys SQLite export?")
    values = frame[column]
    try:
        with np.errstate(invalid="ignore", over="ignore"):
            return values.astype("Int64")
    except (ValueError, TypeError, OverflowError) as exc:
        bad = next((v for v in values if not _is_int(v)), None)
        raise ParseError(path, f"{table}.{column} holds {bad!r}, not an integer") from exc


def _floats(path: Path, table: str, frame: pd.DataFrame, column: str) -> pd.Series:
    """A numeric column of an nsys table as float64 (NaN when missing or not finite)."""
    if column not in frame.columns:
        raise ParseError(path, f"{table} has no column {column!r}; is this a complete nsys SQLite export?")
    values = pd.to_numeric(frame[column], errors="coerce").astype("float64")
    bad = frame[column].notna() & values.isna()
    if bool(bad.any()):
        raise ParseError(path, f"{table}.{column} holds {frame[column][bad].iloc[0]!r}, not a number")
    return values.where(np.isfinite(values.fillna(0.0)))


def _is_int(value: object) -> bool:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return True
    if isinstance(value, bool):
        return False
    if isinstance(value, float):
        return value.is_integer() and -(2**63) <= value < 2**63
    return isinstance(value, int | np.integer) and -(2**63) <= int(value) < 2**63


#: Rows fetched and converted per step (bounds the Python objects alive at once).
FETCH_ROWS = 50_000


def _query(conn: sqlite3.Connection, sql: str, texts: frozenset[str] = frozenset()) -> pd.DataFrame:
    """A query's rows: Arrow columns where each has one type, else sqlite3 rows, typed without rounding.

    See :func:`~.sqlite_arrow.arrow_frame` and :func:`~.sqlite_arrow.sqlite_frame`.
    """
    arrow = arrow_frame(conn, sql, texts=texts)
    return arrow if arrow is not None else sqlite_frame(conn, sql, FETCH_ROWS)


def _strings(conn: sqlite3.Connection, ids_sql: str) -> dict[object, object]:
    """``{id: value}`` of the StringIds rows whose id the query ``ids_sql`` names (the first row of an id)."""
    out: dict[object, object] = {}
    for key, value in conn.execute(f"SELECT id, value FROM StringIds WHERE id IN ({ids_sql}) ORDER BY rowid"):
        out.setdefault(key, value)
    return out


def _names(first: pd.Series, second: pd.Series | None, strings: dict[object, object]) -> pd.Series:
    """``COALESCE(name of first id, name of second id)`` per row, looked up once per distinct pair of ids."""
    # each column's distinct ids, then the distinct pairs of their codes (integers): no tuple per row
    codes_a, ids_a = pd.factorize(first.to_numpy(dtype=object), use_na_sentinel=False)
    if second is not None:
        codes_b, ids_b = pd.factorize(second.to_numpy(dtype=object), use_na_sentinel=False)
    else:
        codes_b, ids_b = np.zeros(len(first), dtype=np.intp), np.array([None], dtype=object)
    codes, pair_codes = pd.factorize(codes_a.astype(np.int64) * len(ids_b) + codes_b)
    table = []
    for code in pair_codes.tolist():
        a, b = ids_a[code // len(ids_b)], ids_b[code % len(ids_b)]
        name = strings.get(a) if _is_key(a) else None
        if name is None and second is not None and _is_key(b):
            name = strings.get(b)
        table.append(name)
    return pd.Series(np.array([*table, None], dtype=object)[:-1][codes], dtype=object)


def _is_key(value: object) -> bool:
    """A value that can be a StringIds id (a number or text; not NULL/NaN)."""
    return value is not None and not (isinstance(value, float) and np.isnan(value))


#: Rows of an Nsight Systems table read per query (by rowid): the query's Arrow columns and their
#: pandas copy are those of one slice, and the checked columns go to spill files slice by slice.
SLICE_ROWS = 1 << 16

_KERNEL_SQL = (
    "SELECT k.start, k.end, k.deviceId, k.contextId, k.streamId, k.correlationId, k.globalPid, "
    "k.demangledName AS demangled_id, k.shortName AS short_id, k.registersPerThread, k.gridX, k.gridY, "
    "k.gridZ, k.blockX, k.blockY, k.blockZ, k.staticSharedMemory, k.dynamicSharedMemory, "
    "k.localMemoryPerThread FROM CUPTI_ACTIVITY_KIND_KERNEL k"
)
_RUNTIME_SQL = (
    "SELECT r.start, r.end, r.globalTid, r.correlationId, r.nameId AS name_id FROM CUPTI_ACTIVITY_KIND_RUNTIME r"
)
_NVTX_SQL = (
    "SELECT e.start, e.end, e.eventType, e.globalTid, COALESCE(e.text, s.value) AS message "
    "FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId WHERE e.eventType IN (34, 59, 60)"
)
#: The marker frame as read: the ggml ranges' messages let go where their parts give them back
#: (:func:`rocroof.capture.markers.compact_ranges`), every column in spill files.
_MARKER_READ = {**MARKER_COLUMNS, **MARKER_PART_COLUMNS}
_MARKER_TEXT: dict[str, Any] = {"categorical": ("kind",), "categories": {"kind": ("range", "mark")}}


def _slices(conn: sqlite3.Connection, sql: str, table: str, alias: str, texts: frozenset[str] = frozenset()) -> Any:
    """The rows of ``sql`` (over ``table`` as ``alias``), :data:`SLICE_ROWS` rowids a query, in rowid order."""
    lo, hi = conn.execute(f"SELECT MIN(rowid), MAX(rowid) FROM {table}").fetchone()
    if lo is None:
        return
    glue = " AND " if " WHERE " in sql else " WHERE "
    for first in range(int(lo), int(hi) + 1, SLICE_ROWS):
        last = min(first + SLICE_ROWS - 1, int(hi))
        yield _query(conn, f"{sql}{glue}{alias}.rowid BETWEEN {first} AND {last} ORDER BY {alias}.rowid", texts)


def _pids(global_id: pd.Series, pid_of: dict[int, int]) -> Any:
    """The process id of each ``globalPid``/``globalTid`` (its high bits), looked up once per distinct value."""
    gpid = global_id & ~0xFFFFFF if len(global_id) else global_id
    codes, uniques = pd.factorize(gpid, use_na_sentinel=True)  # a few processes: looked up once each
    table = np.array([*(pid_of.get(int(g)) for g in uniques), None], dtype=object)
    return pd.array(table[codes], dtype="Int64")


def _kernel_slice(path: Path, k: pd.DataFrame, names: dict[object, object], pid_of: dict[int, int]) -> pd.DataFrame:
    """A slice of kernel rows as dispatch columns, every value checked (ParseError naming the table and column)."""
    kt = "CUPTI_ACTIVITY_KIND_KERNEL"

    def ints(column: str) -> pd.Series:
        return _ints(path, kt, k, column)

    block = {a: ints(f"block{a.upper()}") for a in "xyz"}
    out: dict[str, Any] = {"kernel_name": _names(k.pop("demangled_id"), k.pop("short_id"), names)}
    for target, column in (
        ("start_ns", "start"),
        ("end_ns", "end"),
        ("queue_id", "contextId"),
        ("stream_id", "streamId"),
        ("correlation_id", "correlationId"),
    ):
        out[target] = ints(column)
    out["process_id"] = _pids(ints("globalPid"), pid_of)
    out["vgpr_count"] = ints("registersPerThread")
    out["lds_bytes"] = ints("staticSharedMemory") + ints("dynamicSharedMemory")
    out["scratch_bytes"] = ints("localMemoryPerThread")
    out["agent_label"] = _shared_text(k["deviceId"])
    for a in "xyz":
        out[f"workgroup_{a}"] = block[a]
    for a in "xyz":
        out[f"grid_{a}"] = ints(f"grid{a.upper()}") * block[a]
    out["workgroup_size"] = out["workgroup_x"] * out["workgroup_y"] * out["workgroup_z"]
    out["grid_size"] = out["grid_x"] * out["grid_y"] * out["grid_z"]
    return pd.DataFrame({c: pd.Series(v).reset_index(drop=True) for c, v in out.items()}, copy=False)


def _in_correlation_order(disp: pd.DataFrame) -> pd.DataFrame:
    """``disp`` ordered by correlation id, then start (missing first, as SQLite's ORDER BY puts NULL).

    The kernels as read (rowid order) are usually in that order already: checked a block at a time
    (:func:`rocroof.keys.lex_sorted`); otherwise reordered by one sort (spilled columns stay spilled).
    """
    corr, start = disp["correlation_id"].array, disp["start_ns"].array
    if not keys.has_missing(corr) and not keys.has_missing(start) and keys.lex_sorted([corr, start])[0]:
        return disp
    c = pd.array(corr, dtype="Int64")
    t = pd.array(start, dtype="Int64")
    order = np.lexsort(
        (
            t.to_numpy(dtype=np.int64, na_value=0),
            ~np.asarray(t.isna(), dtype=bool),
            c.to_numpy(dtype=np.int64, na_value=0),
            ~np.asarray(c.isna(), dtype=bool),
        )
    )
    return take_rows(disp, order)


def _nvtx_slice(path: Path, nvtx: pd.DataFrame, pid_of: dict[int, int]) -> tuple[int, int, pd.DataFrame]:
    """A slice of NVTX events as marker rows: ``(open ranges, ranges, markers)``.

    Open ranges (no end) and events without a message are left out; the ggml ranges' messages are
    let go where their parts give them back (:func:`rocroof.capture.markers.compact_ranges`).

    Raises:
        ParseError: an event without a start time, or a range that ends before it starts.
    """
    nt = "NVTX_EVENTS"
    is_mark = (_ints(path, nt, nvtx, "eventType") == 34).fillna(False).to_numpy(dtype=bool)
    start = _ints(path, nt, nvtx, "start")
    unstarted = (start.isna() & nvtx["message"].notna()).to_numpy(dtype=bool)
    if unstarted.any():  # a damaged export (nsys writes every event's start)
        pos = int(np.flatnonzero(unstarted)[0])
        what = "mark" if is_mark[pos] else "range"
        raise ParseError(path, f"{nt}: {what} {str(nvtx['message'].iloc[pos])[:80]!r} has no start time (NULL)")
    end = _ints(path, nt, nvtx, "end").where(~is_mark, start)
    backwards = (end < start).fillna(False).to_numpy(dtype=bool)
    if backwards.any():
        pos = int(np.flatnonzero(backwards)[0])
        raise ParseError(
            path,
            f"{nt}: range {str(nvtx['message'].iloc[pos])[:80]!r} ends before it starts "
            f"(start {start.iloc[pos]}, end {end.iloc[pos]} ns)",
        )
    opened = int((end.isna() & nvtx["message"].notna()).sum())
    gtid = _ints(path, nt, nvtx, "globalTid")
    markers = conform(
        pd.DataFrame(
            {
                "process_id": _pids(gtid, pid_of),
                "thread_id": (gtid & 0xFFFFFF).astype("Int64"),
                "start_ns": start,
                "end_ns": end,
                "message": nvtx.pop("message"),
                "kind": marker_kinds(is_mark),
            }
        ).dropna(subset=["message", "end_ns"]),
        MARKER_COLUMNS,
    ).reset_index(drop=True)
    return opened, int((~is_mark).sum()), compact_ranges(markers)


def _read_nsys(path: Path, label: str) -> tuple[PassData, pd.DataFrame, dict[str, str]]:
    try:
        conn = sqlite_connect(path)
    except sqlite3.Error as exc:
        raise ParseError(path, f"cannot open the Nsight Systems database ({exc})") from exc
    try:
        return _read_nsys_tables(path, label, conn)
    except (sqlite3.Error, pd.errors.DatabaseError, UnicodeDecodeError) as exc:
        raise ParseError(path, f"query failed ({exc}); is this a complete nsys SQLite export?") from exc
    except MemoryError as exc:  # SQLITE_NOMEM: a damaged page can claim a record of any size
        raise ParseError(path, "SQLite ran out of memory reading it; the file is damaged or cut short") from exc
    finally:
        conn.close()


def _launch_threads(dispatch_corr: pd.Series, launches: pd.DataFrame) -> Any:
    """The thread of each dispatch's launch call (the first call with its correlation id), nullable Int64.

    ``dispatch_corr``: the dispatches' correlation ids (nullable); ``launches``: the kept runtime
    calls, every one with a correlation id. Where the calls come in correlation-id order (nsys
    writes a process's calls in time order, and its ids grow with time) the dispatches are looked up
    a block at a time and the result is written to spill files: no hash table or whole-length copy
    (~100 MB at 3x10^6 dispatches); otherwise by a join in memory. Shape (dispatches,); missing
    where a dispatch has no correlation id or no call of it.
    """
    ids = launches["correlation_id"].to_numpy(dtype=np.int64)
    if not non_decreasing(ids):
        by_corr = launches.drop_duplicates("correlation_id").set_index("correlation_id")
        return spilled_array(pd.array(by_corr["thread_id"].reindex(dispatch_corr).to_numpy(), dtype="Int64"))
    index = keys.SortedIndex(None, ids)  # the first call of each id, searched where the ids lie
    threads = launches["thread_id"].astype("Int64").array
    with ColumnWriter(np.int64) as values, ColumnWriter(np.bool_) as missing:
        for lo in range(0, len(dispatch_corr), keys.BLOCK):
            block = dispatch_corr.iloc[lo : lo + keys.BLOCK]
            at = index.find(None, block.to_numpy(dtype=np.int64, na_value=0))
            hit = block.notna().to_numpy(dtype=bool) & (at >= 0)
            picked = threads[np.where(hit, at, 0)]
            gone = ~hit | picked.isna()
            values.append(np.where(gone, 0, picked.to_numpy(dtype=np.int64, na_value=0)))
            missing.append(gone)
            release_pages()
        return pd.arrays.IntegerArray(values.finish(), missing.finish())


def _read_nsys_tables(
    path: Path, label: str, conn: sqlite3.Connection
) -> tuple[PassData, pd.DataFrame, dict[str, str]]:
    """:func:`_read_nsys` on the open database: each table a slice of rows at a time, its columns to spill files.

    Every value is checked as read, so that a damaged export is a ParseError naming the table and
    column. Kernel names, agent labels, API names and marker messages are written as codes into
    their distinct texts (:class:`rocroof.records.SpilledFrameWriter`); the ggml ranges' messages
    as their op, node name and invocation (:func:`rocroof.capture.markers.compact_ranges`).
    """
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if "CUPTI_ACTIVITY_KIND_KERNEL" not in tables:
        raise ParseError(path, "not an nsys SQLite export (no CUPTI_ACTIVITY_KIND_KERNEL table)")
    # names by id from StringIds (a handful of kernels), not a string per row
    names = (
        _strings(
            conn,
            "SELECT DISTINCT demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL UNION "
            "SELECT DISTINCT shortName FROM CUPTI_ACTIVITY_KIND_KERNEL",
        )
        if "StringIds" in tables
        else {}
    )
    pids = pd.read_sql_query("SELECT globalPid, pid FROM PROCESSES", conn) if "PROCESSES" in tables else pd.DataFrame()
    pid_of: dict[int, int] = {}
    if len(pids):
        process_ids = _ints(path, "PROCESSES", pids, "pid")
        for g, p in zip(_ints(path, "PROCESSES", pids, "globalPid"), process_ids, strict=True):
            if pd.notna(g) and pd.notna(p):
                pid_of[int(g)] = int(p)

    with SpilledFrameWriter(DISPATCH_COLUMNS) as writer:
        for k in _slices(conn, _KERNEL_SQL, "CUPTI_ACTIVITY_KIND_KERNEL", "k"):
            writer.add(_kernel_slice(path, k, names, pid_of))
            del k
        disp = writer.finish() if writer.rows else empty_frame(DISPATCH_COLUMNS)
    disp = _in_correlation_order(disp)
    n = len(disp)
    disp["dispatch_id"] = pd.arrays.IntegerArray(spill.arange(1, n + 1), spill.full(n, False, np.bool_))
    release_free_memory()  # the slices' Arrow and conversion buffers

    launches = empty_frame(LAUNCH_COLUMNS)
    if "CUPTI_ACTIVITY_KIND_RUNTIME" in tables:
        rt = "CUPTI_ACTIVITY_KIND_RUNTIME"
        api = _strings(conn, "SELECT DISTINCT nameId FROM CUPTI_ACTIVITY_KIND_RUNTIME") if "StringIds" in tables else {}
        # the launches' correlation ids as a sorted array, not a set of Python ints (~60 MB at 10^6)
        dispatched = distinct(disp["correlation_id"].dropna().to_numpy(dtype=np.int64))
        with SpilledFrameWriter(LAUNCH_COLUMNS) as writer:
            for runtime in _slices(conn, _RUNTIME_SQL, rt, "r"):
                called = _ints(path, rt, runtime, "correlationId")
                keep = called.notna().to_numpy(dtype=bool) & np.isin(
                    called.to_numpy(dtype=np.int64, na_value=0), dispatched
                )
                wanted = runtime[keep].reset_index(drop=True)
                del runtime, called, keep
                if not len(wanted):
                    continue
                gtid = _ints(path, rt, wanted, "globalTid")
                writer.add(
                    pd.DataFrame(
                        {
                            "correlation_id": _ints(path, rt, wanted, "correlationId"),
                            "process_id": _pids(gtid, pid_of),
                            "thread_id": (gtid & 0xFFFFFF).astype("Int64"),
                            "start_ns": _ints(path, rt, wanted, "start"),
                            "end_ns": _ints(path, rt, wanted, "end"),
                            "api_name": _names(wanted["name_id"], None, api),
                        }
                    )
                )
            if writer.rows:
                launches = writer.finish()
        del dispatched
        if len(launches):
            disp["thread_id"] = _launch_threads(disp["correlation_id"], launches)
        release_free_memory()

    markers = empty_frame(MARKER_COLUMNS)
    pass_notes: list[Note] = []
    if "NVTX_EVENTS" in tables:
        nt = "NVTX_EVENTS"
        open_ranges = ranges = 0
        with SpilledFrameWriter(_MARKER_READ, **_MARKER_TEXT) as writer:
            for nvtx in _slices(conn, _NVTX_SQL, nt, "e", texts=frozenset({"message"})):
                opened, counted, chunk = _nvtx_slice(path, nvtx, pid_of)
                open_ranges += opened
                ranges += counted
                if len(chunk):
                    writer.add(chunk)
                del nvtx, chunk
            if writer.rows:
                markers = writer.finish()
        if open_ranges:
            pass_notes.append(
                Note(
                    "warning",
                    "open-ranges",
                    f"{path.name}: {open_ranges} of {ranges} NVTX ranges never ended (the application "
                    "stopped inside them?); they are left out, and kernels they held are not attributed",
                )
            )
        release_free_memory()
    gpus = pd.read_sql_query("SELECT * FROM TARGET_INFO_GPU", conn) if "TARGET_INFO_GPU" in tables else None
    agents = empty_frame(AGENT_COLUMNS)
    facts: dict[str, str] = {}

    def ints(frame: pd.DataFrame, column: str, table: str) -> pd.Series:
        return _ints(path, table, frame, column)

    if gpus is not None and len(gpus):
        gt = "TARGET_INFO_GPU"
        clock = _floats(path, gt, gpus, "clockRate")
        agents = conform(
            pd.DataFrame(
                {
                    "agent_label": gpus["id"].astype(str),
                    "node_id": ints(gpus, "id", gt),
                    "agent_type": "GPU",
                    "gfx_arch": "sm_"
                    + ints(gpus, "computeMajor", gt).astype(str)
                    + ints(gpus, "computeMinor", gt).astype(str),
                    "product_name": gpus["name"] if "name" in gpus.columns else None,
                    "cu_count": ints(gpus, "smCount", gt),
                    "wave_size": ints(gpus, "threadsPerWarp", gt),
                    "max_clock_mhz": clock / 1e6,
                }
            ),
            AGENT_COLUMNS,
        )
        bandwidth = _floats(path, gt, gpus, "memoryBandwidth").iloc[0]
        l2 = ints(gpus, "l2CacheSize", gt).iloc[0]
        if pd.notna(bandwidth):
            facts["nsys_gpu_memory_bandwidth_gbps"] = f"{float(bandwidth) / 1e9:.1f}"
        if pd.notna(l2):
            facts["nsys_gpu_l2_bytes"] = str(int(l2))
    p = PassData(
        kind="trace",
        label=label,
        source=str(path),
        dispatches=spill_columns(conform(disp, DISPATCH_COLUMNS), SPILLED_ON_READ),  # rocroof.spill
        markers=markers,
        launches=launches,
        notes=pass_notes,
    )
    return p, agents, facts
