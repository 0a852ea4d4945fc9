"""Reader for rocprofv3 CSV output (``--output-format csv``) and ``rocpd convert -f csv``.

Formats: rocprofiler-sdk ``source/lib/output/generateCSV.cpp`` (ROCm 7.0, rocm-systems
``1b1610f``) and the ROCm 6.3 headers of ``ROCm/rocprofiler-sdk`` ``8ab1ed7``
(``Private_Segment_Size``/``Group_Segment_Size``, no ``Stream_Id``, no counter timestamps);
``rocpd convert`` prepends ``Guid`` (traces) or ``Pid`` (counters), see
``source/lib/python/rocpd/source/csv.cpp``. Column names are matched case-insensitively and
unknown columns are ignored.

File names are ``[<prefix>_]<domain>.csv`` where the prefix is ``<pid>`` by default
(``%hostname%/%pid%``) or ``out`` for ``rocpd convert``; ``.gz`` is accepted. One directory
holds one pass (one application run); several processes of that run may share it.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ... import keys, spill
from ...errors import ParseError
from ...fileio import (
    NotPlain,
    categorical_text,
    check_counter_values,
    column_map,
    ends_mid_row,
    logical_name,
    parse_float,
    parse_int,
    parse_str,
    pick,
    read_csv,
    read_csv_chunks,
    read_csv_plain,
    read_header,
    require,
)
from ...memory import release_free_memory
from ...records import (
    AGENT_COLUMNS,
    COUNTER_COLUMNS,
    DISPATCH_COLUMNS,
    LAUNCH_COLUMNS,
    MARKER_COLUMNS,
    MARKER_PART_COLUMNS,
    KeyIndex,
    Note,
    PassData,
    SpilledFrameWriter,
    TextWriter,
    code_dtype,
    conform,
    dispatch_blocks,
    empty_frame,
    marker_kinds,
    match_rows,
    non_decreasing,
    per_distinct,
    stack_spilled,
    take_rows,
)
from ...spill import ColumnWriter, is_spilled, release_pages, zeros
from ..markers import RANGE_PART_COLUMNS, compact_ranges, parse_range, split_ranges

DOMAINS = ("kernel_trace", "counter_collection", "marker_api_trace", "hip_api_trace", "agent_info")
_NAME_RE = re.compile(r"^(?:(?P<prefix>.*)_)?(?P<domain>" + "|".join(DOMAINS) + r")\.csv$")

#: Marker domains that carry user messages (roctxMarkA / roctxRangePush / roctxRangeStart).
_MESSAGE_DOMAINS_EXCLUDED = {"MARKER_CONTROL_API", "MARKER_NAME_API"}


@dataclass
class PassFiles:
    """The rocprofv3 CSV files of one pass directory, by domain (one list entry per process)."""

    directory: Path
    files: dict[str, list[tuple[str | None, Path]]] = field(default_factory=dict)

    def all_paths(self) -> list[Path]:
        """Every file of the pass."""
        return [p for entries in self.files.values() for _, p in entries]


def _dispatch_chunk(df: pd.DataFrame, pid: int | None) -> pd.DataFrame:
    """A chunk of kernel-trace rows, finished (in place, and returned).

    Adds the file's process id where no column gives it, and ``grid_size`` / ``workgroup_size`` as
    the product of their x, y, z columns when all three are there.
    """
    if "process_id" not in df and pid is not None:
        df["process_id"] = pid
    for axis in ("grid", "workgroup"):
        parts = [f"{axis}_{a}" for a in "xyz"]
        if all(p in df for p in parts):
            df[f"{axis}_size"] = df[parts[0]] * df[parts[1]] * df[parts[2]]
    return df


def classify(path: Path) -> tuple[str, str | None] | None:
    """``(domain, prefix)`` of a rocprofv3 CSV file name, or None if it is not one.

    >>> classify(Path("4242_kernel_trace.csv"))
    ('kernel_trace', '4242')
    >>> classify(Path("out_counter_collection.csv.gz"))
    ('counter_collection', 'out')
    """
    match = _NAME_RE.match(logical_name(path))
    if not match:
        return None
    return match.group("domain"), match.group("prefix")


def group_pass_files(paths: Iterable[Path]) -> dict[Path, PassFiles]:
    """Group rocprofv3 CSV files by directory (one directory = one pass)."""
    passes: dict[Path, PassFiles] = {}
    for path in sorted(paths):
        kind = classify(path)
        if kind is None:
            continue
        domain, prefix = kind
        entry = passes.setdefault(path.parent, PassFiles(path.parent))
        entry.files.setdefault(domain, []).append((prefix, path))
    return passes


def _pid_from_prefix(prefix: str | None) -> int | None:
    if prefix is None:
        return None
    tail = prefix.rsplit("_", 1)[-1]
    return int(tail) if tail.isdigit() else None


def read_agents(paths: list[Path]) -> pd.DataFrame:
    """Read ``agent_info.csv`` files into :data:`~rocroof.records.AGENT_COLUMNS` rows."""
    frames = []
    for path in paths:
        df = read_csv(path)
        cols = column_map(df.columns)
        node = require(path, cols, "agent node id", "Node_Id")
        out = pd.DataFrame(
            {
                # the agent's key: kernel records name their agent by it
                "node_id": parse_int(path, df[node], 2, node, required=True)[0],
            }
        )
        for target, aliases in {
            "logical_node_id": ("Logical_Node_Id",),
            "cu_count": ("Cu_Count",),
            "simd_count": ("Simd_Count",),
            "num_xcc": ("Num_Xcc",),
            "wave_size": ("Wave_Front_Size",),
            "pci_device_id": ("Device_Id",),
        }.items():
            col = pick(cols, *aliases)
            if col is not None:
                out[target] = parse_int(path, df[col], 2, col)[0]
        clk = pick(cols, "Max_Engine_Clk_Fcompute")
        if clk is not None:
            out["max_clock_mhz"] = parse_float(path, df[clk], 2, clk)
        text_columns: dict[str, tuple[str, ...]] = {
            "agent_type": ("Agent_Type", "Type"),
            "gfx_arch": ("Name",),
            "product_name": ("Product_Name", "Marketing_Name", "Model_Name"),
        }
        for target, names in text_columns.items():
            col = pick(cols, *names)
            if col is not None:
                out[target] = parse_str(df[col])
        if "agent_type" in out:
            out["agent_type"] = out["agent_type"].map(_agent_type)
            if "gfx_arch" in out:
                # a CPU agent's Name is its model ("AMD EPYC 9454"), not a gfx target
                out["gfx_arch"] = out["gfx_arch"].where(out["agent_type"] != "CPU", None)
        out["agent_label"] = out["node_id"].astype(str)
        frames.append(out)
    if not frames:
        return empty_frame(AGENT_COLUMNS)
    agents = pd.concat(frames, ignore_index=True).drop_duplicates(subset=["node_id"])
    return conform(agents, AGENT_COLUMNS)


def _agent_type(value: object) -> object:
    if value is None:
        return None
    text = str(value).upper()
    for known in ("GPU", "CPU"):
        if known in text:
            return known
    return text


def _kernel_trace_text(path: Path, pid: int | None) -> tuple[pd.DataFrame, pd.Series]:
    frames = []
    exact_parts = []
    for chunk, first in read_csv_chunks(path):
        cols = column_map(chunk.columns)
        name = require(path, cols, "kernel name", "Kernel_Name")
        start = require(path, cols, "kernel start time", "Start_Timestamp")
        end = require(path, cols, "kernel end time", "End_Timestamp")
        did = pick(cols, "Dispatch_Id")  # ROCm 6.2 kernel traces have none (see _EARLY_NOTE)
        # every integer column is read before a bad cell is reported: the message names the first bad row
        wanted = [("dispatch_id", did, True), ("start_ns", start, True), ("end_ns", end, True)]
        wanted += [(target, pick(cols, *aliases), False) for target, aliases in _KERNEL_TRACE_INTS.items()]
        ints: dict[str, pd.Series] = {}
        exact: dict[str, pd.Series] = {}
        failures: list[ParseError] = []
        for target, col, required in wanted:
            if col is not None:
                try:
                    ints[target], exact[target] = parse_int(path, chunk[col], first, col, required=required)
                except ParseError as exc:
                    failures.append(exc)
        if failures:
            raise min(failures, key=lambda exc: exc.row if exc.row is not None else 2**63)
        exact_parts.append(exact["start_ns"] & exact["end_ns"])
        agent = pick(cols, "Agent_Id")
        # the columns in the typed path's order: dispatch id, name, times, agent, the other integers
        out: dict[str, pd.Series] = {"dispatch_id": ints["dispatch_id"]} if "dispatch_id" in ints else {}
        out["kernel_name"] = parse_str(chunk[name])
        out["start_ns"], out["end_ns"] = ints["start_ns"], ints["end_ns"]
        out["agent_label"] = parse_str(chunk[agent]) if agent else pd.Series([None] * len(chunk))
        out.update({target: ints[target] for target in _KERNEL_TRACE_INTS if target in ints})
        frames.append(_dispatch_chunk(pd.DataFrame(out), pid))
    if not frames:
        return empty_frame(DISPATCH_COLUMNS), pd.Series(dtype=bool)
    df = pd.concat(frames, ignore_index=True)
    exact = pd.concat(exact_parts, ignore_index=True)
    keys = ["process_id", "dispatch_id"] if "process_id" in df else ["dispatch_id"]
    dup = df.duplicated(subset=keys, keep="first") if "dispatch_id" in df else pd.Series(False, index=df.index)
    if bool(dup.any()):
        pos = int(np.flatnonzero(dup.to_numpy())[0])
        raise ParseError(
            path, f"dispatch id {df['dispatch_id'].iloc[pos]} appears twice (expected one row per dispatch)", pos + 2
        )
    return df, exact


def _counter_file_text(path: Path, pid: int | None) -> tuple[pd.DataFrame, pd.DataFrame, pd.Series]:
    """Read a long-form counter_collection.csv cell by cell (any file; errors name their row).

    Returns:
        ``(counters, dispatch_info, exact)``: counters with columns ``process_id, dispatch_id,
        counter_name, value``; one dispatch row per (process, dispatch id) in first-seen
        order, in :data:`DISPATCH_COLUMNS` names; and timestamp exactness per dispatch row.
    """
    counter_parts = []
    info_parts = []
    for chunk, first in read_csv_chunks(path):
        cols = column_map(chunk.columns)
        did = require(path, cols, "dispatch id", "Dispatch_Id")
        cname = require(path, cols, "counter name", "Counter_Name")
        cval = require(path, cols, "counter value", "Counter_Value")
        dispatch_id = parse_int(path, chunk[did], first, did, required=True)[0]
        names = parse_str(chunk[cname])
        if bool(names.isna().any()):
            pos = int(np.flatnonzero(names.isna().to_numpy())[0])
            raise ParseError(path, f"column {cname!r} is empty; expected a counter name", first + pos)
        values = parse_float(path, chunk[cval], first, cval, required=True)
        check_counter_values(path, values.to_numpy(dtype=np.float64), first, cval)
        pcol = pick(cols, "Process_Id", "Pid")
        proc = (
            parse_int(path, chunk[pcol], first, pcol)[0]
            if pcol
            else pd.Series(pd.array([pid] * len(chunk), dtype="Int64"))
        )
        counter_parts.append(
            pd.DataFrame({"process_id": proc, "dispatch_id": dispatch_id, "counter_name": names, "value": values})
        )
        info: dict[str, pd.Series] = {"process_id": proc, "dispatch_id": dispatch_id}
        kname = pick(cols, "Kernel_Name")
        info["kernel_name"] = parse_str(chunk[kname]) if kname else pd.Series([None] * len(chunk))
        agent = pick(cols, "Agent_Id")
        info["agent_label"] = parse_str(chunk[agent]) if agent else pd.Series([None] * len(chunk))
        exact = pd.Series(np.ones(len(chunk), dtype=bool))
        for target, aliases in _COUNTER_INFO_INTS.items():
            col = pick(cols, *aliases)
            if col is not None:
                # rocprofv3 always fills the timestamps when it writes the columns: an empty one is
                # a row cut short (a file still being written), whose Counter_Value may be cut too
                stamp = target in ("start_ns", "end_ns")
                info[target], ex = parse_int(path, chunk[col], first, col, required=stamp)
                if stamp:
                    exact &= ex
        info_df = pd.DataFrame(info)
        info_df["_exact"] = exact
        info_parts.append(info_df.drop_duplicates(subset=["process_id", "dispatch_id"]))
    if not counter_parts:
        return (
            pd.DataFrame(columns=["process_id", "dispatch_id", "counter_name", "value"]),
            empty_frame(DISPATCH_COLUMNS),
            pd.Series(dtype=bool),
        )
    counters = pd.concat(counter_parts, ignore_index=True)
    merged = pd.concat(info_parts, ignore_index=True).drop_duplicates(subset=["process_id", "dispatch_id"])
    merged = merged.reset_index(drop=True)
    return counters, merged.drop(columns="_exact"), merged["_exact"]


#: The markers this reader gives: their ggml ranges' messages split into parts as read.
_MARKER_COLUMNS = {**MARKER_COLUMNS, **MARKER_PART_COLUMNS}


def _marker_chunk(path: Path, df: pd.DataFrame, domains: pd.Series | None, first: int) -> pd.DataFrame:
    """A chunk of markers, checked and given its ``kind``, without the rows of excluded domains.

    ``df``: message, times and ids, indexed by position in the chunk; ``domains``: each row's
    domain text (None: the file has no Domain column).

    Raises:
        ParseError: a marker ends before it starts (its line: ``first`` + chunk position).
    """
    if domains is not None:
        df = df[(~domains.isin(_MESSAGE_DOMAINS_EXCLUDED)).to_numpy()]
    bad = df["end_ns"] < df["start_ns"]
    if bool(bad.any()):
        # df keeps the chunk positions as its index (rows of other domains were dropped)
        pos = int(df.index[np.flatnonzero(bad.to_numpy())[0]])
        raise ParseError(path, "marker ends before it starts (End_Timestamp < Start_Timestamp)", first + pos)
    df["kind"] = marker_kinds(df["start_ns"] == df["end_ns"])
    return compact_ranges(df)  # the ggml ranges' texts as their parts: ~70 MB less at 10^6 ranges


def _markers_text(path: Path) -> pd.DataFrame:
    frames = []
    for chunk, first in read_csv_chunks(path):
        cols = column_map(chunk.columns)
        func = require(path, cols, "marker message", "Function")
        start = require(path, cols, "marker start time", "Start_Timestamp")
        end = require(path, cols, "marker end time", "End_Timestamp")
        domain = pick(cols, "Domain")
        df = pd.DataFrame(
            {
                "message": parse_str(chunk[func]),
                "start_ns": parse_int(path, chunk[start], first, start, required=True)[0],
                "end_ns": parse_int(path, chunk[end], first, end, required=True)[0],
            }
        )
        for target, aliases in {
            "process_id": ("Process_Id", "Pid"),
            "thread_id": ("Thread_Id", "Tid"),
            "correlation_id": ("Correlation_Id",),
        }.items():
            col = pick(cols, *aliases)
            if col is not None:
                df[target] = parse_int(path, chunk[col], first, col)[0]
        frames.append(_marker_chunk(path, df, parse_str(chunk[domain]) if domain is not None else None, first))
    if not frames:
        return empty_frame(_MARKER_COLUMNS)
    return conform(pd.concat(frames, ignore_index=True), _MARKER_COLUMNS)


def _launches_text(path: Path, wanted: np.ndarray, pid: int | None) -> pd.DataFrame:
    frames = []
    for chunk, first in read_csv_chunks(path):
        cols = column_map(chunk.columns)
        corr = require(path, cols, "correlation id", "Correlation_Id")
        corr_ids = parse_int(path, chunk[corr], first, corr, required=True)[0]
        keep = corr_ids.isin(wanted).to_numpy()
        if not keep.any():
            continue
        start = require(path, cols, "API start time", "Start_Timestamp")
        end = require(path, cols, "API end time", "End_Timestamp")
        df = pd.DataFrame(
            {
                "correlation_id": corr_ids,
                "start_ns": parse_int(path, chunk[start], first, start, required=True)[0],
                "end_ns": parse_int(path, chunk[end], first, end, required=True)[0],
            }
        )
        for target, aliases in {"process_id": ("Process_Id", "Pid"), "thread_id": ("Thread_Id", "Tid")}.items():
            col = pick(cols, *aliases)
            if col is not None:
                df[target] = parse_int(path, chunk[col], first, col)[0]
        if "process_id" not in df and pid is not None:
            df["process_id"] = pid
        func = pick(cols, "Function")
        if func is not None:
            df["api_name"] = parse_str(chunk[func])
        frames.append(df[keep])
    if not frames:
        return empty_frame(LAUNCH_COLUMNS)
    return conform(pd.concat(frames, ignore_index=True), LAUNCH_COLUMNS)


# ---- the typed fast paths ------------------------------------------------------------------------
#
# A file whose numbers are all plain integers (what rocprofv3 writes) is read by the C parser with
# its columns typed (fileio.read_csv_plain): no string per cell. Any other file raises NotPlain
# and is read cell by cell by the *_text functions above, which give the same values for plain
# files and name the row of what is wrong in the others.
#
# Every per-row column of a pass goes to spill files as it is read (records.SpilledFrameWriter):
# integers as they are, text as a code per row into the column's distinct texts (kernel names,
# agent labels, API names, marker kinds and messages). What the read keeps in memory is the chunk
# being parsed, the distinct texts, and a few bytes per dispatch while it sorts them into
# enqueue order and matches counter rows to them (rocroof.keys).

_KERNEL_TRACE_INTS = {
    "kernel_id": ("Kernel_Id",),
    "queue_id": ("Queue_Id",),
    "stream_id": ("Stream_Id",),
    "thread_id": ("Thread_Id",),
    "process_id": ("Process_Id", "Pid"),
    "correlation_id": ("Correlation_Id",),
    "grid_x": ("Grid_Size_X",),
    "grid_y": ("Grid_Size_Y",),
    "grid_z": ("Grid_Size_Z",),
    "workgroup_x": ("Workgroup_Size_X",),
    "workgroup_y": ("Workgroup_Size_Y",),
    "workgroup_z": ("Workgroup_Size_Z",),
    "lds_bytes": ("LDS_Block_Size", "Group_Segment_Size"),
    "scratch_bytes": ("Scratch_Size", "Private_Segment_Size"),
    "vgpr_count": ("VGPR_Count", "Arch_VGPR_Count"),
    "accum_vgpr_count": ("Accum_VGPR_Count",),
    "sgpr_count": ("SGPR_Count",),
}
_COUNTER_INFO_INTS = {
    "kernel_id": ("Kernel_Id",),
    "queue_id": ("Queue_Id",),
    "thread_id": ("Thread_Id",),
    "correlation_id": ("Correlation_Id",),
    "grid_size": ("Grid_Size",),
    "workgroup_size": ("Workgroup_Size",),
    "lds_bytes": ("LDS_Block_Size",),
    "scratch_bytes": ("Scratch_Size",),
    "vgpr_count": ("VGPR_Count", "Arch_VGPR_Count"),
    "accum_vgpr_count": ("Accum_VGPR_Count",),
    "sgpr_count": ("SGPR_Count",),
    "start_ns": ("Start_Timestamp",),
    "end_ns": ("End_Timestamp",),
}


#: Rows per chunk of the pandas parser (files below fileio.POLARS_MIN_BYTES) for the kernel and HIP
#: API traces. Reading the 95 MB HIP API trace of 10^6 dispatches raised the resident size by ~50 MB
#: in chunks of 200,000 rows, ~40 MB in chunks of 50,000 and ~22 MB in chunks of 25,000, in the same
#: time (0.5-0.8 s). The counter file keeps fileio.CHUNK_ROWS (its chunks of 50,000 rows took 10%
#: longer), and so does a marker trace: a chunk of 50,000 messages or more is split by polars
#: (capture.markers.POLARS_MIN_MESSAGES), and those of 10^5 dispatches (86,843) were split 0.2 s
#: slower in chunks of 25,000.
_TRACE_CHUNK_ROWS = 25_000


def _ints(column: pd.Series) -> pd.Series:
    """An int64 column of a plain chunk as exact nullable ``Int64`` (what :func:`parse_int` gives)."""
    values = column.to_numpy(dtype=np.int64)
    return pd.Series(pd.arrays.IntegerArray(values, np.zeros(len(values), dtype=bool)), copy=False)


def _texts(column: pd.Series) -> pd.Series:
    """A categorical column of a plain chunk as :func:`parse_str` gives it (None for empty cells)."""
    return pd.Series(categorical_text(column), dtype=object)


def _cells(column: pd.Series) -> pd.Series:
    """A categorical column of a plain chunk as a categorical of its texts, empty cells missing.

    The values of :func:`_texts` without a string per row: :class:`rocroof.records.TextWriter`
    codes them by category.
    """
    if not isinstance(column.dtype, pd.CategoricalDtype):
        return _texts(column)
    cells = column.array
    texts = [str(c) for c in cells.categories]
    codes = np.asarray(cells.codes)
    if "" in texts:
        empty = texts.index("")
        table = np.arange(len(texts) + 1, dtype=np.int64) - (np.arange(len(texts) + 1) > empty)
        table[empty] = table[-1] = -1
        codes = table[codes]
        del texts[empty]
    categories = pd.Index(texts, dtype=object)
    return pd.Series(
        pd.Categorical.from_codes(codes.astype(code_dtype(len(categories))), dtype=pd.CategoricalDtype(categories)),
        copy=False,
    )


def _present(cols: dict[str, str], wanted: dict[str, tuple[str, ...]]) -> dict[str, str]:
    """``{target: the file's column}`` of the ``wanted`` aliases the header has."""
    return {target: col for target, aliases in wanted.items() if (col := pick(cols, *aliases)) is not None}


def _regions(kernel_names: pd.Series, known: dict[str, str | None]) -> pd.Series:
    """The ``region`` of each dispatch: its kernel name where that is a ggml range (``--kernel-rename``), else None.

    ``known``: names already looked at (one parse per distinct name across chunks). A categorical
    gives a categorical (codes per chunk, never a string per row).
    """

    def region(name: object) -> str | None:
        if not isinstance(name, str):
            return None
        if name not in known:
            known[name] = name if parse_range(name) is not None else None
        return known[name]

    if isinstance(kernel_names.dtype, pd.CategoricalDtype):
        names = kernel_names.array
        renamed = [region(c) for c in names.categories]
        kept = [c for c in renamed if c is not None]
        number = {c: i for i, c in enumerate(kept)}
        table = np.array([*(number[c] if c is not None else -1 for c in renamed), -1], dtype=np.int64)
        categories = pd.Index(kept, dtype=object)
        codes = table[np.asarray(names.codes)].astype(code_dtype(len(categories)))
        return pd.Series(pd.Categorical.from_codes(codes, dtype=pd.CategoricalDtype(categories)), copy=False)
    return pd.Series(per_distinct(kernel_names, region), dtype=object)


def _dispatches_from_kernel_trace(path: Path, pid: int | None) -> pd.DataFrame:
    """Dispatches of a kernel_trace.csv (typed fast path, else cell by cell), in file order.

    Returns:
        :data:`DISPATCH_COLUMNS` (``region`` from ``--kernel-rename`` names, ``timestamps_exact``
        filled), every column in spill files from :data:`rocroof.spill.SPILL_MIN_BYTES` on.

    Raises:
        ParseError: malformed rows, or a dispatch id twice (the first repeat's row).
    """
    try:
        return _kernel_trace_plain(path, pid)
    except NotPlain:
        df, exact = _kernel_trace_text(path, pid)  # the repeated ids checked already
        df = conform(df, DISPATCH_COLUMNS)
        df["region"] = _regions(df["kernel_name"], {})
        df["timestamps_exact"] = pd.array(exact.to_numpy(dtype=bool), dtype="boolean")
        return _spilled_frame(df, DISPATCH_COLUMNS)


def _kernel_trace_plain(path: Path, pid: int | None) -> pd.DataFrame:
    cols = column_map(read_header(path))
    did = pick(cols, "Dispatch_Id")  # ROCm 6.2 kernel traces have none (see _EARLY_NOTE)
    name = require(path, cols, "kernel name", "Kernel_Name")
    start = require(path, cols, "kernel start time", "Start_Timestamp")
    end = require(path, cols, "kernel end time", "End_Timestamp")
    agent = pick(cols, "Agent_Id")
    optional = _present(cols, _KERNEL_TRACE_INTS)
    known: dict[str, str | None] = {}  # kernel name -> its region
    with SpilledFrameWriter(DISPATCH_COLUMNS) as frame:  # every column to spill files as read
        ints = [*([did] if did else []), start, end, *optional.values()]
        for chunk, _ in read_csv_plain(path, ints=ints, chunk_rows=_TRACE_CHUNK_ROWS):
            n = len(chunk)
            out: dict[str, Any] = {
                "dispatch_id": _ints(chunk[did]) if did else None,
                "kernel_name": _cells(chunk[name]),
                "start_ns": _ints(chunk[start]),
                "end_ns": _ints(chunk[end]),
                "agent_label": _cells(chunk[agent]) if agent else None,
            }
            for target, col in optional.items():
                out[target] = _ints(chunk[col])
            out["region"] = _regions(out["kernel_name"], known)
            out["timestamps_exact"] = pd.Series(pd.arrays.BooleanArray(np.ones(n, bool), np.zeros(n, bool)), copy=False)
            frame.add(_dispatch_chunk(pd.DataFrame({k: v for k, v in out.items() if v is not None}, copy=False), pid))
        df = frame.finish()
    if did:
        pos = _first_repeated_dispatch(df)
        if pos is not None:
            raise ParseError(
                path,
                f"dispatch id {df['dispatch_id'].iloc[pos]} appears twice (expected one row per dispatch)",
                pos + 2,
            )
    return df


def _first_repeated_dispatch(df: pd.DataFrame) -> int | None:
    """The first row (0-based) whose (process id, dispatch id) an earlier row has, or None.

    The ids of a plain file have no missing value (a file's process ids are all missing or all
    there): a file in key order has its repeats next to each other; any other is checked by a
    table of its dense keys (:class:`rocroof.keys.DenseKeys`), else by pandas over the keys.
    """
    pids, ids = df["process_id"].array, df["dispatch_id"].array
    in_order, repeat = keys.lex_sorted([pids, ids])
    if in_order:
        return repeat
    if not keys.has_missing(ids):
        dense = keys.DenseKeys.build(pids, ids)
        if dense is not None:
            return dense.first_repeat(pids, ids)
    frame = pd.DataFrame({"p": pids, "d": ids}, copy=False)
    dup = frame.duplicated(keep="first").to_numpy()
    return int(np.flatnonzero(dup)[0]) if dup.any() else None


def _spilled_frame(df: pd.DataFrame, columns: dict[str, str], **kwargs: Any) -> pd.DataFrame:
    """``df`` (conformed to ``columns``) with every column in spill files (as :class:`SpilledFrameWriter` gives them).

    A frame whose columns are all spilled already, or too small to spill, is returned as it is.
    """
    df = conform(df, columns)
    if len(df) * 8 < max(spill.SPILL_MIN_BYTES, 1) or all(_is_spilled_column(df[c]) for c in df.columns):
        return df
    with SpilledFrameWriter(columns, **kwargs) as writer:
        writer.add_frame(df)
        del df
        return writer.finish()


def _is_spilled_column(column: pd.Series) -> bool:
    """True when a column's per-row data lies in spill files (a categorical: its codes)."""
    array = column.array
    if isinstance(array, pd.Categorical):
        return is_spilled(array.codes)
    if isinstance(array, pd.arrays.IntegerArray | pd.arrays.BooleanArray):
        return is_spilled(array._data) and is_spilled(array._mask)  # noqa: SLF001
    return is_spilled(array)


def _read_counter_file(
    path: Path, pid: int | None, lookup: _SortedRows | _RowLookup | None = None, error_path: Path | None = None
) -> tuple[pd.DataFrame, pd.DataFrame, pd.Series | None]:
    """Read a long-form counter_collection.csv.

    Args:
        path: the file.
        pid: the process id of its file name, if any.
        lookup: the pass's dispatches, when known: a plain file's rows are then matched to them
            as they are read (no (process, dispatch id) column of every counter row is kept).
        error_path: the file named when a counter row matches no dispatch.

    Returns:
        ``(counters, dispatch_info, exact)``: counters with columns ``process_id, dispatch_id,
        counter_name, value`` (or ``row, counter_name, value`` when matched by ``lookup``);
        one dispatch row per (process, dispatch id) in first-seen order, in
        :data:`DISPATCH_COLUMNS` names; and timestamp exactness per dispatch row. When
        ``lookup`` matched a plain file, the info is :data:`_MATCHED_INFO` instead (the first
        counter row of each run of one dispatch: ``_row``, ids and start time, in spill files)
        and ``exact`` None (the pass's dispatches are known).

    Raises:
        ParseError: malformed rows, or (with ``lookup``) a counter row of no dispatch.
    """
    try:
        return _counter_file_plain(path, pid, lookup, error_path or path)
    except NotPlain:
        return _counter_file_text(path, pid)


#: The dispatch info of a counter file matched as read (:func:`_read_counter_file`): each run of
#: counter rows of one dispatch gives its first row: the dispatch row, the ids and the start time.
_MATCHED_INFO = {"_row": "int64", "process_id": "Int64", "dispatch_id": "Int64", "start_ns": "Int64"}


def _counter_file_plain(
    path: Path, pid: int | None, lookup: _SortedRows | _RowLookup | None, error_path: Path
) -> tuple[pd.DataFrame, pd.DataFrame, pd.Series | None]:
    """:func:`_read_counter_file` of a plain file.

    Counter names come back as a categorical; the dispatch columns are converted only for each
    dispatch's first row (the other rows repeat them).
    """
    cols = column_map(read_header(path))
    did = require(path, cols, "dispatch id", "Dispatch_Id")
    cname = require(path, cols, "counter name", "Counter_Name")
    cval = require(path, cols, "counter value", "Counter_Value")
    pcol = pick(cols, "Process_Id", "Pid")
    kname = pick(cols, "Kernel_Name")
    agent = pick(cols, "Agent_Id")
    info_cols = _present(cols, _COUNTER_INFO_INTS)
    ints = [did, *([pcol] if pcol else []), *info_cols.values()]
    # with the dispatches known, only the ids, names and values are read: the repeated dispatch
    # columns (a kernel name of ~170 characters on every counter row) are skipped by the parser
    # (the start timestamp stays: it tells a counter file of another run, _check_counter_timestamps)
    start = info_cols.get("start_ns")
    needed = None if lookup is None else [did, cname, cval, *([pcol] if pcol else []), *([start] if start else [])]
    if lookup is not None:
        ints = [did, *([pcol] if pcol else []), *([start] if start else [])]
    info_parts: list[pd.DataFrame] = []
    # the counter rows' columns go to spill files as they are read (rocroof.spill): the file's 8x10^6
    # rows (10^6 dispatches) are not held in memory, nor their parts and concatenation at once;
    # (process id, dispatch id or dispatch row, counter code, value), each dispatch's first row to info_parts
    # (with the dispatches known: to spill files as well)
    with (
        ColumnWriter(np.int64) as proc_parts,
        ColumnWriter(np.int64) as id_parts,
        TextWriter(categorical=True) as code_parts,
        ColumnWriter(np.float64) as value_parts,
        SpilledFrameWriter(_MATCHED_INFO) as matched_info,
    ):
        unmatched: np.ndarray | None = None
        for chunk, first in read_csv_plain(path, ints=ints, floats=[cval], columns=needed):
            names = chunk[cname].array
            labels = [str(c) for c in names.categories]
            local = np.asarray(names.codes)
            if "" in labels and bool((local == labels.index("")).any()):
                pos = int(np.flatnonzero(local == labels.index(""))[0])
                raise ParseError(path, f"column {cname!r} is empty; expected a counter name", first + pos)
            code_parts.append(names)
            values = chunk[cval].to_numpy(dtype=np.float64)
            check_counter_values(path, values, first, cval)
            value_parts.append(values)
            ids = chunk[did].to_numpy(dtype=np.int64)
            proc = chunk[pcol].to_numpy(dtype=np.int64) if pcol else None
            if lookup is not None:
                pids = proc if proc is not None else np.full(len(ids), pid if pid is not None else _NA_KEY, np.int64)
                row = lookup.rows(pids, ids)
                if unmatched is None and bool((row < 0).any()):
                    unmatched = ids[row < 0][:1]  # reported once the whole file was read (as the text path)
                id_parts.append(row)  # the dispatch rows themselves
                # the first row of each run of one dispatch (the repeats are dropped after the file)
                firsts = np.flatnonzero(np.r_[True, row[1:] != row[:-1]]) if len(row) else np.zeros(0, np.int64)
                heads = chunk.iloc[firsts]
                matched_info.add(
                    pd.DataFrame(
                        {
                            "_row": row[firsts],
                            "process_id": _ints(heads[pcol])
                            if pcol
                            else pd.Series(pd.array([pid] * len(heads), dtype="Int64")),
                            "dispatch_id": _ints(heads[did]),
                            **({"start_ns": _ints(heads[start])} if start else {}),
                        },
                        copy=False,
                    )
                )
                continue
            id_parts.append(ids)
            if proc is not None:
                proc_parts.append(proc)
            # one dispatch row per (process, dispatch id): its first row in the chunk
            keyed = pd.DataFrame(
                {"p": proc if proc is not None else np.zeros(len(ids), np.int64), "d": ids}, copy=False
            )
            sub = chunk.iloc[np.flatnonzero(~keyed.duplicated().to_numpy())]
            info: dict[str, pd.Series] = {
                "process_id": _ints(sub[pcol]) if pcol else pd.Series(pd.array([pid] * len(sub), dtype="Int64")),
                "dispatch_id": _ints(sub[did]),
                "kernel_name": _texts(sub[kname]) if kname else pd.Series([None] * len(sub), dtype=object),
                "agent_label": _texts(sub[agent]) if agent else pd.Series([None] * len(sub), dtype=object),
            }
            for target, col in info_cols.items():
                info[target] = _ints(sub[col])
            info_df = pd.DataFrame(info, copy=False)
            info_df["_exact"] = True
            info_parts.append(info_df)
        if lookup is not None and unmatched is not None:
            _refuse_unmatched(np.array([-1]), unmatched, error_path)
        names_column = code_parts.finish()
        if lookup is not None:
            counters = pd.DataFrame(
                {"row": id_parts.finish(), "counter_name": names_column, "value": value_parts.finish()}, copy=False
            )
            return counters, matched_info.finish(), None
        if not id_parts.rows:
            info_parts.append(empty_frame(DISPATCH_COLUMNS).assign(_exact=pd.Series(dtype=bool)))
            counters = pd.DataFrame(columns=["process_id", "dispatch_id", "counter_name", "value"])
        else:
            n = id_parts.rows
            if pcol:
                process = pd.arrays.IntegerArray(proc_parts.finish(), np.zeros(n, dtype=bool))
            else:
                if pid is None:
                    process = pd.arrays.IntegerArray(zeros(n, np.int64), spill.full(n, True, np.bool_))
                else:
                    process = pd.arrays.IntegerArray(spill.full(n, pid), zeros(n, np.bool_))
            counters = pd.DataFrame(
                {
                    "process_id": process,
                    "dispatch_id": id_parts.finish(),
                    "counter_name": names_column,
                    "value": value_parts.finish(),
                },
                copy=False,
            )
    merged = pd.concat(info_parts, ignore_index=True).drop_duplicates(subset=["process_id", "dispatch_id"])
    merged = merged.reset_index(drop=True)
    return counters, merged.drop(columns="_exact"), merged["_exact"]


def _read_markers(path: Path) -> pd.DataFrame:
    """Roctx markers of a marker_api_trace.csv (typed fast path, else cell by cell), in spill files."""
    try:
        return _markers_plain(path)
    except NotPlain:
        return _spilled_frame(_markers_text(path), _MARKER_COLUMNS, **_MARKER_TEXT)


#: How the markers' text columns are spilled: the kind a categorical of ``range`` and ``mark`` (as
#: :func:`rocroof.records.marker_kinds` makes it), whatever the size.
_MARKER_TEXT: dict[str, Any] = {"categorical": ("kind",), "categories": {"kind": ("range", "mark")}}


def _markers_plain(path: Path) -> pd.DataFrame:
    cols = column_map(read_header(path))
    func = require(path, cols, "marker message", "Function")
    start = require(path, cols, "marker start time", "Start_Timestamp")
    end = require(path, cols, "marker end time", "End_Timestamp")
    domain = pick(cols, "Domain")
    optional = _present(
        cols,
        {"process_id": ("Process_Id", "Pid"), "thread_id": ("Thread_Id", "Tid"), "correlation_id": ("Correlation_Id",)},
    )
    # the ggml ranges' messages split into their parts as read: ~70 MB of strings never made at 10^6
    ints = [start, end, *optional.values()]
    split = {func: split_ranges}
    # closed on an error too: a traceback kept (a future's) would keep its read-ahead threads running
    with (
        SpilledFrameWriter(_MARKER_COLUMNS, **_MARKER_TEXT) as frame,
        contextlib.closing(read_csv_plain(path, ints=ints, strings=[func], split=split)) as chunks,
    ):
        for chunk, first in chunks:
            df = pd.DataFrame(
                {
                    "message": _texts(chunk[func]),
                    "start_ns": _ints(chunk[start]),
                    "end_ns": _ints(chunk[end]),
                    **{name: chunk[name].reset_index(drop=True) for name in RANGE_PART_COLUMNS},
                },
                copy=False,
            )
            for target, col in optional.items():
                df[target] = _ints(chunk[col])
            domains = _texts(chunk[domain]) if domain is not None else None
            frame.add(_marker_chunk(path, df, domains, first))
        if not frame.rows:
            return empty_frame(_MARKER_COLUMNS)
        return frame.finish()


def _read_launches(path: Path, wanted: np.ndarray, pid: int | None) -> pd.DataFrame:
    """The hip_api_trace.csv calls whose correlation id is in ``wanted`` (typed fast path, else cell by cell).

    ``wanted``: the dispatches' correlation ids (int64, sorted, distinct; spilled or not).
    """
    try:
        return _launches_plain(path, wanted, pid)
    except NotPlain:
        return _spilled_frame(_launches_text(path, wanted, pid), LAUNCH_COLUMNS)


def _launches_plain(path: Path, wanted: np.ndarray, pid: int | None) -> pd.DataFrame:
    cols = column_map(read_header(path))
    corr = require(path, cols, "correlation id", "Correlation_Id")
    start = require(path, cols, "API start time", "Start_Timestamp")
    end = require(path, cols, "API end time", "End_Timestamp")
    optional = _present(cols, {"process_id": ("Process_Id", "Pid"), "thread_id": ("Thread_Id", "Tid")})
    func = pick(cols, "Function")
    with SpilledFrameWriter(LAUNCH_COLUMNS) as frame:
        for chunk, _ in read_csv_plain(path, ints=[corr, start, end, *optional.values()], chunk_rows=_TRACE_CHUNK_ROWS):
            keep = keys.isin_sorted(chunk[corr].to_numpy(dtype=np.int64), wanted)
            release_pages()
            if not keep.any():
                continue
            sub = chunk[keep]
            df = pd.DataFrame(
                {"correlation_id": _ints(sub[corr]), "start_ns": _ints(sub[start]), "end_ns": _ints(sub[end])},
                copy=False,
            )
            for target, col in optional.items():
                df[target] = _ints(sub[col])
            if "process_id" not in df and pid is not None:
                df["process_id"] = pid
            if func is not None:
                df["api_name"] = _cells(sub[func])
            frame.add(df)
        if not frame.rows:
            return empty_frame(LAUNCH_COLUMNS)
        return frame.finish()


def _correlation_ids(dispatches: pd.DataFrame) -> np.ndarray:
    """The dispatches' distinct correlation ids, sorted (int64; a spill file when they come in order)."""
    column = dispatches["correlation_id"].array
    ordered = keys.sorted_distinct(column)
    if ordered is not None:
        return ordered
    # an array, not a set of Python ints (~60 MB at 10^6 dispatches)
    return np.unique(dispatches["correlation_id"].dropna().to_numpy(dtype=np.int64))


def read_pass(files: PassFiles, label: str) -> PassData:
    """Read one pass directory into a :class:`~rocroof.records.PassData`.

    Dispatches come from ``kernel_trace.csv`` when present, else from the dispatch columns
    of ``counter_collection.csv``. Counters are joined to dispatches on (process, dispatch id).
    Launch records (``hip_api_trace.csv``) are kept only for correlation ids of dispatches.
    Every per-row column is in spill files (:mod:`rocroof.spill`; text as categorical codes) from
    :data:`rocroof.spill.SPILL_MIN_BYTES` on.

    The marker trace and then the launch calls are read in a second thread beside the counters,
    once the kernel trace is read (polars parses them outside the GIL: ~0.6 s less at 10^6
    dispatches on 2 cores; beside the counter file, whose parse leaves the GIL free for most of
    its time, rather than beside the kernel trace, whose conversion holds it: ~0.5 s less again).
    Errors are raised in the order of a read in one thread.

    Raises:
        ParseError: a file lacks a required column or holds malformed values.
    """
    beside = ThreadPoolExecutor(1, thread_name_prefix="rocroof-read")
    try:
        return _read_pass(files, label, beside)
    finally:
        beside.shutdown(wait=True, cancel_futures=True)  # an error: the other file's read ends first


def _all_markers(files: PassFiles) -> list[pd.DataFrame]:
    return [_read_markers(p) for _, p in files.files.get("marker_api_trace", [])]


def _all_launches(files: PassFiles, wanted: np.ndarray) -> list[pd.DataFrame]:
    return [_read_launches(p, wanted, _pid_from_prefix(pre)) for pre, p in files.files.get("hip_api_trace", [])]


def _read_pass(files: PassFiles, label: str, beside: ThreadPoolExecutor) -> PassData:
    """:func:`read_pass`, with ``beside`` to read the markers and launch calls in."""
    dispatch_frames = [
        _dispatches_from_kernel_trace(path, _pid_from_prefix(prefix))
        for prefix, path in files.files.get("kernel_trace", [])
    ]
    dispatches = None
    notes: list[Note] = []
    counter_files = files.files.get("counter_collection", [])
    if dispatch_frames:
        dispatches = _in_enqueue_order(stack_spilled(dispatch_frames))
        release_free_memory()
        if len(dispatches) and bool(dispatches["dispatch_id"].isna().all()):
            notes.append(Note("info", "early-rocprofv3", _EARLY_NOTE))
            if counter_files:
                _dispatch_ids_from_counters(dispatches, counter_files)
    # the markers, then the launch calls of the dispatches' correlation ids, read beside the counters
    marker_job = beside.submit(_all_markers, files)
    launch_job = beside.submit(_all_launches, files, _correlation_ids(dispatches)) if dispatches is not None else None
    counter_frames = []
    info_frames = []
    info_exact = []
    # counters are matched on (process, dispatch id), or on the dispatch id alone when one side
    # has no process ids; with the dispatches known, a plain file's rows are matched as it is read
    use_pid = None
    if dispatches is not None:
        file_pids = [_file_has_pids(path, prefix) for prefix, path in counter_files]
        use_pid = not keys.has_missing(dispatches["process_id"].array) and all(file_pids)
        if not use_pid and (dispatches["process_id"].notna().any() and any(file_pids)):
            use_pid = None  # a mix of known and unknown process ids: matched after reading, as a whole
    lookup = _lookup(dispatches, use_pid) if dispatches is not None and use_pid is not None and counter_files else None
    error_path = counter_files[0][1] if counter_files else files.directory
    for prefix, path in counter_files:
        counters, info, info_ok = _read_counter_file(path, _pid_from_prefix(prefix), lookup, error_path)
        counter_frames.append(counters)
        info_frames.append(info)
        info_exact.append(info_ok)
        release_free_memory()
    del lookup

    if dispatches is None:
        info = pd.concat(info_frames, ignore_index=True) if info_frames else empty_frame(DISPATCH_COLUMNS)
        exact = pd.concat(info_exact, ignore_index=True) if info_exact else pd.Series(dtype=bool)
        info = conform(info, DISPATCH_COLUMNS)
        info["region"] = _regions(info["kernel_name"], {})
        if len(exact):
            info["timestamps_exact"] = pd.array(exact.to_numpy(dtype=bool), dtype="boolean")
        dispatches = _in_enqueue_order(_spilled_frame(info, DISPATCH_COLUMNS))
        del info, exact

    counters = empty_frame(COUNTER_COLUMNS)
    if counter_frames:
        mapped = [f for f in counter_frames if "row" in f.columns]
        longs = [f for f in counter_frames if "row" not in f.columns]
        del counter_frames
        if longs:
            long = pd.concat(longs, ignore_index=True) if len(longs) > 1 else longs[0]
            del longs
            mapped.append(_spilled_frame(_counter_rows(long, dispatches, error_path), COUNTER_COLUMNS))
            del long
        counters = _summed(stack_spilled(mapped))
    counters = _spilled_frame(counters, COUNTER_COLUMNS, categorical=("counter_name",))

    markers = stack_spilled(marker_job.result() or [empty_frame(MARKER_COLUMNS)])
    del marker_job
    release_free_memory()
    if launch_job is None:  # dispatches from the counter file: known only now
        launch_job = beside.submit(_all_launches, files, _correlation_ids(dispatches))
    launches = stack_spilled(launch_job.result() or [empty_frame(LAUNCH_COLUMNS)])
    del launch_job
    release_free_memory()
    rounded, first_rounded = _rounded(dispatches["timestamps_exact"].array)
    rounded_note = None
    if rounded:
        sources = files.files.get("kernel_trace") or files.files.get("counter_collection") or [(None, files.directory)]
        source = sources[0][1]
        example = dispatches["dispatch_id"].iloc[first_rounded]
        which = (
            f"dispatch {example}" if pd.notna(example) else f"the {_ordinal(first_rounded + 1)} dispatch by start time"
        )
        rounded_note = (
            f"{source}: {rounded} dispatch(es) have rounded timestamps (e.g. {which}); their durations are unknown"
        )
    if files.files.get("kernel_trace") and info_frames:
        notes += _counter_timestamp_notes(files, dispatches, info_frames, use_pid)
    del info_frames
    for _, path in [*files.files.get("kernel_trace", []), *counter_files]:
        if ends_mid_row(path):
            notes.append(Note("warning", "file-cut", _CUT_NOTE.format(path=path)))
    return PassData(
        kind="counter" if len(counters) else "trace",
        label=label,
        source=str(files.directory),
        dispatches=dispatches,
        counters=counters,
        markers=markers,
        launches=launches,
        timestamps_exact=not rounded,
        timestamps_note=rounded_note,
        notes=notes,
    )


def _rounded(exact: Any) -> tuple[int, int]:
    """``(how many, first row)`` of the dispatches whose timestamps are not exact (False, not missing)."""
    count, first = 0, -1
    n = len(exact)
    for lo in range(0, n, keys.BLOCK):
        part = exact[lo : lo + keys.BLOCK]
        inexact = ~np.asarray(part.to_numpy(dtype=bool, na_value=True))
        if inexact.any():
            if first < 0:
                first = lo + int(np.flatnonzero(inexact)[0])
            count += int(inexact.sum())
    release_pages()
    return count, first


#: A kernel trace or counter file whose last row has every field but no newline after it. rocprofv3
#: ends every row with one, so the file may have been cut inside the row's last value; the samples
#: published in rocprofv3's documentation end so too (copied without it), so this is a doubt, not a verdict.
_CUT_NOTE = (
    "{path}: the file ends inside its last row (no newline after it, where rocprofv3 writes one): it may have "
    "been cut while written (profiler killed, disk full, partial copy), and then that row's last value may be "
    "short and later dispatches missing (their bytes unknown); check the file's end, or profile again"
)


def _ordinal(n: int) -> str:
    """``1st``, ``2nd``, ``3rd``, ``11th``..."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


#: Why a kernel trace has no dispatch ids (rocprofiler-sdk ``generateCSV.cpp`` at ``rocm-6.2.0``).
_EARLY_NOTE = (
    "kernel_trace.csv has no Dispatch_Id or Thread_Id (rocprofv3 of ROCm 6.2): dispatches are ordered by GPU "
    "start time, keyed by Correlation_Id, and attributed to ranges by launch record or correlation order only"
)


def _dispatch_ids_from_counters(dispatches: pd.DataFrame, counter_files: list[tuple[str | None, Path]]) -> None:
    """Give a ROCm 6.2 kernel trace the dispatch ids of the counter file of the same run.

    Both files carry the launching call's ``Correlation_Id`` and the kernel name; one call may
    launch several kernels, so the n-th dispatch of a (correlation id, kernel) in start order is
    the n-th in dispatch-id order. Dispatches no counter row names keep no id.
    """
    info = [_read_counter_file(path, _pid_from_prefix(prefix))[1] for prefix, path in counter_files]
    ids = pd.concat(info, ignore_index=True).sort_values("dispatch_id", kind="stable")
    ids = ids[ids["correlation_id"].notna()]
    if not len(ids):
        return
    key = ["correlation_id", "kernel_name"]
    ids = ids.assign(_n=ids.groupby(key, dropna=False).cumcount())
    mine = pd.DataFrame(
        {"correlation_id": dispatches["correlation_id"], "kernel_name": dispatches["kernel_name"].astype(object)}
    )
    mine = mine.assign(_n=mine.groupby(key, dropna=False).cumcount())
    found = mine.merge(ids[[*key, "_n", "dispatch_id"]], on=[*key, "_n"], how="left")
    dispatches["dispatch_id"] = pd.array(found["dispatch_id"].to_numpy(), dtype="Int64")


def _in_enqueue_order(dispatches: pd.DataFrame) -> pd.DataFrame:
    """Dispatches (:data:`DISPATCH_COLUMNS`) sorted by (process, dispatch id, start); spilled columns stay spilled.

    Dispatch ids are assigned at enqueue, per process; a trace without them (ROCm 6.2) is in GPU
    start order. rocprofv3 writes a kernel trace in completion order, nearly sorted: dispatches
    already in order are not copied; keys of one process (or a few) dense in their ids are
    ordered through a table of one int32 per id (:class:`rocroof.keys.DenseKeys`), others by a
    sort of the three keys in memory.
    """
    pids, ids, starts = (dispatches[c].array for c in ("process_id", "dispatch_id", "start_ns"))
    in_order, _ = keys.lex_sorted([pids, ids, starts])
    if in_order:
        return dispatches
    order = None
    if not keys.has_missing(pids) and not keys.has_missing(ids):
        dense = keys.DenseKeys.build(pids, ids)
        order = dense.order(pids, ids) if dense is not None else None  # None: a key twice (files of one process)
    if order is None:
        order = np.lexsort(
            (
                dispatches["start_ns"].fillna(-1).to_numpy(np.int64),
                dispatches["dispatch_id"].fillna(-1).to_numpy(np.int64),
                dispatches["process_id"].fillna(-1).to_numpy(np.int64),
            )
        )
    return take_rows(dispatches, order, consume=True)


def _file_has_pids(path: Path, prefix: str | None) -> bool:
    """True when every counter row of the file carries a process id (a column, or the file name's pid)."""
    if _pid_from_prefix(prefix) is not None:
        return True
    try:
        return pick(column_map(read_header(path)), "Process_Id", "Pid") is not None
    except ParseError:
        return False  # the reader names what is wrong with the file


def _lookup(dispatches: pd.DataFrame, use_pid: bool) -> _SortedRows | _RowLookup:
    """The pass's dispatches as a lookup of counter rows: searched where they lie when sorted by their keys."""
    pids, ids = dispatches["process_id"].array, dispatches["dispatch_id"].array
    if not keys.has_missing(pids) and not keys.has_missing(ids) and keys.lex_sorted([pids, ids])[0]:
        return _SortedRows(dispatches, use_pid)
    return _RowLookup(dispatches, use_pid)  # ids that are missing or out of order (a ROCm 6.2 trace)


class _SortedRows:
    """(process id, dispatch id) -> row of the pass's dispatches sorted by that key, without a copy of the keys.

    The rows :class:`_RowLookup` finds (the first dispatch with the key), by binary search on the
    dispatch columns themselves (:class:`rocroof.keys.SortedIndex`).
    """

    def __init__(self, dispatches: pd.DataFrame, use_pid: bool) -> None:
        self.use_pid = use_pid
        self.index = keys.SortedIndex(dispatches["process_id"].array, dispatches["dispatch_id"].array)

    def rows(self, pids: np.ndarray | None, ids: np.ndarray) -> np.ndarray:
        """The dispatch row of each counter row; -1 where no dispatch has its key."""
        return self.index.find(pids if self.use_pid else None, ids)


class _RowLookup:
    """(process id, dispatch id) -> row of the pass's dispatches, for counter rows a chunk at a time."""

    def __init__(self, dispatches: pd.DataFrame, use_pid: bool) -> None:
        self.use_pid = use_pid
        pids = dispatches["process_id"].astype("Int64").to_numpy(dtype=np.int64, na_value=_NA_KEY)
        ids = dispatches["dispatch_id"].astype("Int64").to_numpy(dtype=np.int64, na_value=_NA_KEY)
        self.index = KeyIndex([pids, ids] if use_pid else [ids])  # sorted once, not per chunk

    def rows(self, pids: np.ndarray | None, ids: np.ndarray) -> np.ndarray:
        """The dispatch row of each counter row; -1 where no dispatch has its key."""
        if not self.use_pid:
            return self.index.find([ids])
        assert pids is not None
        return self.index.find([pids, ids])


def _summed(counters: pd.DataFrame) -> pd.DataFrame:
    """Counter rows (row, counter_name, value) with the values of one (dispatch, counter) summed.

    Rows stay in file order; nothing is grouped when every (dispatch, counter) has one value.
    """
    names = counters["counter_name"]
    if isinstance(names.dtype, pd.CategoricalDtype):
        codes = np.asarray(names.array.codes)  # the codes themselves (Series.cat.codes copies them)
        width = max(len(names.cat.categories), 1)
    else:
        factor, uniques = pd.factorize(names.to_numpy(dtype=object), use_na_sentinel=False)
        codes, width = factor.astype(np.int64), max(len(uniques), 1)
    rows = counters["row"].to_numpy(dtype=np.int64)
    if not _repeats(rows, codes, width):
        return counters
    frame = conform(
        pd.DataFrame({"row": counters["row"], "counter_name": names.astype(object), "value": counters["value"]}),
        COUNTER_COLUMNS,
    )
    return frame.groupby(["row", "counter_name"], as_index=False, sort=False)["value"].sum()


def _repeats(rows: np.ndarray, codes: np.ndarray, width: int, block: int = 1 << 18) -> bool:
    """True when some (row, code) pair occurs twice.

    Counter rows come grouped by dispatch: then only a dispatch's own rows can repeat a pair, and
    the check sorts a block of whole dispatches at a time (no sorted copy of the whole column).
    """
    if len(rows) < 2:
        return False
    if not non_decreasing(rows, block):  # (the rows may be spilled: their pages go once read)
        if width > 64:
            key = np.sort(rows * width + codes)
            return bool((key[1:] == key[:-1]).any())
        # counter rows in no dispatch order: a bit per (dispatch, counter) seen, 8 bytes per dispatch
        top = max(int(rows[lo : lo + block].max()) for lo in range(0, len(rows), block))
        seen = np.zeros(top + 1, dtype=np.uint64)
        for lo in range(0, len(rows), block):
            part, names = rows[lo : lo + block], codes[lo : lo + block]
            key = np.sort(part * width + names)
            bits = np.left_shift(np.uint64(1), names.astype(np.uint64))
            if bool((key[1:] == key[:-1]).any()) or bool((seen[part] & bits).any()):
                return True
            np.bitwise_or.at(seen, part, bits)
            release_pages()
        return False
    for lo, hi in dispatch_blocks(rows, block):
        key = np.sort(rows[lo:hi] * width + codes[lo:hi])
        if bool((key[1:] == key[:-1]).any()):
            return True
        release_pages()
    return False


def _counter_rows(long: pd.DataFrame, dispatches: pd.DataFrame, path: Path) -> pd.DataFrame:
    """Counter values by dispatch row: (process, dispatch id) looked up in the pass's dispatches.

    Matched on the dispatch id alone (its first dispatch) when either side lacks process ids;
    a missing process id matches a missing one. Values of one (dispatch, counter) are summed.

    Raises:
        ParseError: a counter row names a dispatch the pass does not have.
    """
    ids = long["dispatch_id"].astype("Int64").to_numpy(dtype=np.int64, na_value=_NA_KEY)
    d_ids = dispatches["dispatch_id"].astype("Int64").to_numpy(dtype=np.int64, na_value=_NA_KEY)
    if long["process_id"].isna().all() or dispatches["process_id"].isna().all():
        row = match_rows([d_ids], [ids])
    else:
        row = match_rows(
            [dispatches["process_id"].astype("Int64").to_numpy(dtype=np.int64, na_value=_NA_KEY), d_ids],
            [long["process_id"].astype("Int64").to_numpy(dtype=np.int64, na_value=_NA_KEY), ids],
        )
    _refuse_unmatched(row, long["dispatch_id"].array, path)
    return pd.DataFrame(
        {"row": row, "counter_name": long["counter_name"].array, "value": long["value"].to_numpy()}, copy=False
    )


def _refuse_unmatched(row: np.ndarray, ids: Any, path: Path) -> None:
    """ParseError naming the first counter row's dispatch id that matched no dispatch (row -1)."""
    missing = np.flatnonzero(row < 0)
    if len(missing):
        raise ParseError(
            path,
            f"counter rows for dispatch {ids[int(missing[0])]} have no matching kernel_trace.csv dispatch",
        )


#: The key of a missing process or dispatch id (equal to itself, as pandas merges missing keys).
_NA_KEY = np.iinfo(np.int64).min


def _counter_timestamp_notes(
    files: PassFiles, dispatches: pd.DataFrame, infos: list[pd.DataFrame], use_pid: bool | None
) -> list[Note]:
    """:func:`_check_counter_timestamps` of the counter files' dispatch info (one frame per file).

    Files matched as read (:data:`_MATCHED_INFO`) are checked a block at a time: each file's first
    run of each dispatch row against that dispatch (a byte per dispatch marks the rows seen), when
    a dispatch row stands for one key of the file (matched on (process, dispatch id), or the file
    names one process). Any other mix is checked as a whole, in memory.
    """
    matched = [info for info in infos if "_row" in info.columns]
    if len(matched) == len(infos) and all(use_pid or _one_process(info) for info in matched):
        return _matched_timestamp_notes(files, dispatches, matched)
    whole = [
        info.drop(columns="_row").drop_duplicates(subset=["process_id", "dispatch_id"])
        if "_row" in info.columns
        else info
        for info in infos
    ]
    return _check_counter_timestamps(files, dispatches, pd.concat(whole, ignore_index=True))


def _one_process(info: pd.DataFrame) -> bool:
    """True when every row of ``info`` has the same process id (or every one none)."""
    pids = info["process_id"].array
    if not len(pids):
        return True
    missing = np.asarray(pids._mask)  # noqa: SLF001
    if missing.all():
        return True
    if missing.any():
        return False
    values = np.asarray(pids._data)  # noqa: SLF001
    same = bool((values == values[0]).all())
    release_pages()
    return same


#: Dispatch runs cross-checked at a time (:func:`_matched_timestamp_notes`): its temporaries, ~80
#: bytes per run, stay with the allocator once freed (blocks of 2^18 runs: 23 MB at 10^6 dispatches).
_CHECK_ROWS = 1 << 16


def _matched_timestamp_notes(files: PassFiles, dispatches: pd.DataFrame, infos: list[pd.DataFrame]) -> list[Note]:
    """:func:`_check_counter_timestamps` of files matched as read, a block at a time (see the caller)."""
    if not any("start_ns" in info.columns and bool(info["start_ns"].notna().any()) for info in infos):
        return []
    starts = dispatches["start_ns"].array
    matched = differ = 0
    # per dispatch row: whether a run of the file named it already, and (for the block at hand) its
    # first run in the block; no sort of the block (its temporaries stayed with the allocator)
    stamp = np.zeros(len(dispatches), dtype=np.int32)
    for info in infos:
        seen = np.zeros(len(dispatches), dtype=bool)
        with_start = "start_ns" in info.columns
        for lo in range(0, len(info), _CHECK_ROWS):
            rows = np.asarray(info["_row"].array[lo : lo + _CHECK_ROWS])
            candidates = np.flatnonzero(~seen[rows]).astype(np.int32)
            named = rows[candidates]
            stamp[named[::-1]] = candidates[::-1]  # a row named twice in the block: its first run wins
            first = candidates[stamp[named] == candidates]
            distinct = rows[first]
            seen[distinct] = True
            matched += len(distinct)
            if with_start and len(distinct):
                mine = info["start_ns"].array[lo : lo + _CHECK_ROWS][first]
                theirs = starts[distinct]
                differ += int((mine != theirs).fillna(False).to_numpy(dtype=bool).sum())
            release_pages()
    if not differ:
        return []
    path = files.files["counter_collection"][0][1]
    return [_disagree_note(path, differ, matched)]


def _disagree_note(path: Path, differ: int, matched: int) -> Note:
    return Note(
        "warning",
        "files-disagree",
        f"{path}: {differ} of {matched} dispatches have other timestamps or kernel names than "
        "kernel_trace.csv; the two files look like different runs (counters were matched by dispatch id)",
    )


def _check_counter_timestamps(files: PassFiles, dispatches: pd.DataFrame, info: pd.DataFrame) -> list[Note]:
    """Warn when counter_collection.csv and kernel_trace.csv disagree.

    counter_collection.csv repeats each dispatch's GPU timestamps (ROCm >= 6.4): they must match
    kernel_trace.csv, else the two files come from different runs.
    """
    if "start_ns" not in info or info["start_ns"].isna().all():
        return []
    key = (
        ["dispatch_id"]
        if info["process_id"].isna().all() or dispatches["process_id"].isna().all()
        else [
            "process_id",
            "dispatch_id",
        ]
    )

    # each counter-file dispatch against the first kernel-trace dispatch of its key (an inner join on
    # the key, NULL matching NULL as in pandas' merge), without the joined copies of both frames
    def key_columns(frame: pd.DataFrame) -> list[np.ndarray]:
        return [frame[k].astype("Int64").to_numpy(dtype=np.int64, na_value=_NA_KEY) for k in key]

    row = KeyIndex(key_columns(dispatches)).find(key_columns(info))
    matched = np.flatnonzero(row >= 0)
    row = row[matched]
    start_k = dispatches["start_ns"].astype("Int64").array[row]
    start_c = info["start_ns"].astype("Int64").array[matched]
    differ = (start_k != start_c).fillna(False).to_numpy(dtype=bool)
    name_c = info["kernel_name"].to_numpy(dtype=object)[matched]
    named = ~pd.isna(name_c)  # a plain counter file matched as read carries no names
    if named.any():
        name_k = dispatches["kernel_name"].to_numpy(dtype=object)[row[named]]
        differ[named] |= pd.Series(name_k).fillna("").to_numpy() != pd.Series(name_c[named]).fillna("").to_numpy()
    if not bool(differ.any()):
        return []
    return [_disagree_note(files.files["counter_collection"][0][1], int(differ.sum()), len(matched))]
