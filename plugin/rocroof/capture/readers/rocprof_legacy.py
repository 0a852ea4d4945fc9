"""Reader for the legacy rocprof tools: rocprof v1 (``rocprof``, ROCm 3-6) and rocprofv2 CSV.

rocprof v1 writes, per profiled command (``ROCm/rocprofiler`` ``bin/rpl_run.sh``,
``bin/tblextr.py``, ``bin/sqlitedb.py``, ``test/tool/tool.cpp``; read at ``7fa8139``):

* ``<name>.csv``: one row per kernel dispatch, ``Index,KernelName,gpu-id,queue-id,...`` (the
  property columns of :mod:`.rocprof_columns`), then the counters and derived metrics of every
  ``pmc:`` line of the input file (``-i input.txt`` gives ``input.csv``; without ``-i``,
  ``results.csv``), then ``DispatchNs,BeginNs,EndNs,CompleteNs`` when timestamps were on. With
  ``--stats`` or any ``--*-trace`` the file is re-written from SQLite: every header name quoted
  and ``DurationNs`` appended. Missing cells are the text ``None``. Derived ``FETCH_SIZE`` and
  ``WRITE_SIZE`` are kilobytes (``metrics.xml``: "The total kilobytes fetched from the video
  memory", ``expr=.../1024``); :mod:`rocroof.analysis.dram` converts them to bytes.
* ``<name>.db``: the SQLite database the CSV was dumped from: ``KERN`` (``A`` up to ROCm 4.0) holds
  the kernel rows, ``rocTX`` the roctx ranges (``BeginNs, EndNs, pid, tid, Name``; a mark is
  written with ``EndNs = BeginNs + 1``), ``HIP``/``HSA``/``COPY``/``OPS`` the API and activity traces.
* ``<name>.sysinfo.txt``: ``rocminfo`` output (agents: node, ``gfx`` name, marketing name, CUs).
* ``<name>.stats.csv``, ``<name>.json`` (the same trace for chrome://tracing),
  ``<name>.hip_stats.csv``...: summaries of the above, not read.
* ``roctx_trace.txt`` (kept with ``-d DIR``): one line per roctx call, ``<ns> <pid>:<tid>
  <cid>:<rid>:"<message>"``; ``cid`` 0 mark, 1 push, 2 pop, 3 range start, 4 range stop.

rocprofv2 (``plugin/file/file.cpp``) writes ``results_<pid>.csv`` (``Dispatch_ID,GPU_ID,...,
Kernel_Name,Start_Timestamp,End_Timestamp,Correlation_ID,<counters>``, a blank line after the
header) into ``pmc_<k>/`` per counter pass.

Each kernel CSV of rocprof v1 is one application run (one pass); rocprofv2 files of one
directory are one pass. Timings are ``BeginNs``/``EndNs`` (GPU start and end). A file with only
``DispatchNs``/``CompleteNs`` (host times around the dispatch) gives durations that are upper
bounds, with a warning. ``DispatchNs`` on ``tid`` is also the host time of the launch, which
attributes dispatches to the roctx ranges of the ``rocTX`` table.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ...errors import InputError, ParseError
from ...fileio import (
    TIME_MAX_NS,
    check_times,
    logical_name,
    parse_int,
    read_csv,
    read_header,
    read_text,
    sqlite_connect,
    sqlite_file,
    sqlite_tables,
)
from ...records import (
    AGENT_COLUMNS,
    DISPATCH_COLUMNS,
    MARKER_COLUMNS,
    Note,
    PassData,
    conform,
    empty_frame,
    marker_kinds,
    merge_passes,
)
from .rocprof_columns import (
    PROPERTY_COLUMNS,
    property_frame,
    settle_times,
    split_columns,
    wide_counters,
)

#: Detected format name.
FORMAT = "rocprof-legacy"
#: Kernel tables of a rocprof v1 ``results.db``: ``KERN`` from ROCm 4.5, ``A`` before.
KERNEL_TABLES = ("KERN", "A")
#: Summary files of a rocprof v1 run that hold nothing the kernel CSV and database do not.
SUMMARY_SUFFIXES = (
    ".stats.csv",
    ".hip_stats.csv",
    ".hsa_stats.csv",
    ".copy_stats.csv",
    ".memcopy_info.csv",
    ".json",
)
#: Trace text files rocprof v1 keeps with ``-d DIR`` that rocroof does not read.
UNREAD_TRACES = ("hip_api_trace.txt", "hsa_api_trace.txt", "hcc_ops_trace.txt", "async_copy_trace.txt")

_V1_FIRST = ("index", "kernelname")
#: Property names only rocprof v1 writes (test/tool/tool.cpp), lower-cased.
_V1_ONLY = frozenset(
    {"gpu-id", "queue-id", "queue-index", "grd", "wgr", "dispatchns", "beginns", "endns", "completens"}
)
_V2_NAME = re.compile(r"^results(?:_(?P<pid>\d+))?\.csv$")
_ROCTX_LINE = re.compile(r'^(?P<ts>\d+) (?P<pid>\d+):(?P<tid>\d+) (?P<cid>\d+):(?P<rid>\d+):"(?P<msg>.*)"$')


def _clean(name: str) -> str:
    return name.strip().strip('"').strip().lower()


def csv_generation(path: Path) -> str | None:
    """``v1`` or ``v2`` for a legacy rocprof kernel CSV, None for any other file.

    rocprof v1 headers start ``Index,KernelName`` (quoted with ``--stats``); rocprofv2 headers
    start ``Dispatch_ID`` and name ``Kernel_Name`` and ``GRD`` or ``Grid_Size`` (rocprofv3 files,
    whose names end ``_kernel_trace.csv``, are told apart by name before this is asked).
    """
    name = logical_name(path)
    if not name.endswith(".csv") or name.endswith(SUMMARY_SUFFIXES):
        return None
    try:
        header = [_clean(h) for h in read_header(path)]
    except (ParseError, OSError):
        return None
    if tuple(header[:2]) == _V1_FIRST:
        return "v1"
    if len(set(header) & _V1_ONLY) >= 3:  # rocprof v1's own property names, its Index or KernelName lost
        return "v1"
    if header[:1] == ["dispatch_id"] and "kernel_name" in header and ("grd" in header or "grid_size" in header):
        return "v2" if _V2_NAME.match(name) or "gpu_id" in header else None
    return None


def _db_tables(path: Path) -> set[str]:
    """The tables of an SQLite file, gzipped or not (empty when it is not one or cannot be read)."""
    try:
        with sqlite_file(path) as plain:
            return sqlite_tables(plain) or set()
    except ParseError:  # damaged compression: not a database rocroof recognises
        return set()


def is_results_db(path: Path) -> bool:
    """True for rocprof v1's own SQLite database (``KERN``/``A`` kernel table or ``rocTX`` ranges)."""
    if not logical_name(path).endswith(".db"):
        return False
    tables = _db_tables(path)
    return bool(tables & {*KERNEL_TABLES, "rocTX"}) and "rocpd_kernel_dispatch" not in tables


def is_roctx_trace(path: Path) -> bool:
    """True for rocprof v1's raw ``roctx_trace.txt``."""
    return logical_name(path).endswith("roctx_trace.txt")


def belongs(path: Path) -> bool:
    """True for any file of a legacy rocprof capture that rocroof recognises."""
    name = logical_name(path)
    return (
        csv_generation(path) is not None
        or is_results_db(path)
        or is_roctx_trace(path)
        or name.endswith(".sysinfo.txt")
        or name.endswith(SUMMARY_SUFFIXES)
        or name in UNREAD_TRACES
    )


@dataclass
class LegacyCapture:
    """What :func:`read_legacy` found: passes in run order, agents, facts and notes."""

    passes: list[PassData]
    agents: pd.DataFrame
    files_read: list[Path]
    notes: list[Note] = field(default_factory=list)
    profiler: str = "rocprof"
    command: str | None = None


def stem(path: Path) -> str:
    """The run name of a rocprof v1 file: ``results`` for ``results.csv``, ``.db``, ``.sysinfo.txt``."""
    name = logical_name(path)
    for suffix in (".csv", ".db", ".sysinfo.txt"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def _text_frame(path: Path, df: pd.DataFrame) -> pd.DataFrame:
    """Rocprof v1 writes missing cells as ``None``: make them empty cells."""
    return df.replace("None", "")


def _kernel_pass(path: Path, df: pd.DataFrame, label: str, first_row: int, *, v1_csv: bool = False) -> PassData:
    """One pass from a table of rocprof v1/v2 kernel rows (text cells).

    ``v1_csv``: the table is a rocprof v1 CSV, which writes ``None`` for a missing value and never
    an empty cell: an empty cell is a row cut short (pandas pads a short row with empty cells).
    """
    if v1_csv and len(df) and len(df.columns):
        short = (df.iloc[:, -1].astype(object) == "").to_numpy(dtype=bool)
        if short.any():
            pos = int(np.flatnonzero(short)[0])
            raise ParseError(
                path,
                f"the row has fewer fields than the header's {len(df.columns)} (cut short or damaged)",
                first_row + pos,
            )
    df = _text_frame(path, df)
    split = split_columns(df.columns)
    for target, name in (("dispatch_id", "Index"), ("kernel_name", "KernelName")):
        if target not in split.properties:
            raise ParseError(path, f"missing column {name!r} (a rocprof kernel table needs it); the header is row 1", 1)
    meta, exact = property_frame(path, df, first_row, split)
    counters, instances = wide_counters(path, df, split.counters, first_row)
    meta, upper_bound = settle_times(path, meta)
    notes = [upper_bound] if upper_bound else []
    note = upper_bound.message if upper_bound else None
    # one row per dispatch, in dispatch order (Index counts the process's dispatches from 0)
    order = np.argsort(meta["dispatch_id"].to_numpy(dtype=np.int64, na_value=-1), kind="stable")
    keys = ["process_id", "dispatch_id"] if "process_id" in meta else ["dispatch_id"]
    dup = meta.duplicated(subset=keys)
    if bool(dup.any()):
        pos = int(np.flatnonzero(dup.to_numpy())[0])
        raise ParseError(
            path,
            f"dispatch {meta['dispatch_id'].iloc[pos]} appears twice (expected one row per dispatch)",
            first_row + pos,
        )
    remap = np.empty(len(order), dtype=np.int64)
    remap[order] = np.arange(len(order))
    meta = meta.iloc[order].reset_index(drop=True)
    exact = exact[order]
    meta["timestamps_exact"] = pd.array(exact, dtype="boolean")
    if len(counters):
        counters["row"] = remap[counters["row"].to_numpy()]
    if len(instances):
        instances["row"] = remap[instances["row"].to_numpy()]
    return PassData(
        kind="counter" if len(split.counters) else "trace",
        label=label,
        source=str(path),
        dispatches=conform(meta, DISPATCH_COLUMNS),
        counters=counters,
        instances=instances,
        timestamps_exact=bool(exact.all()) if len(exact) else True,
        timestamps_note=note,
        notes=notes,
        region_method="kernel_rename",
    )


def _db_frame(path: Path, table: str) -> pd.DataFrame:
    """Every row of one table of an SQLite file (gzipped or not) as text cells (NULL as empty)."""
    with sqlite_file(path) as plain:
        try:
            con = sqlite_connect(plain)
            try:
                cur = con.execute(f'SELECT * FROM "{table}"')
                names = [d[0] for d in cur.description]
                rows = cur.fetchall()
            finally:
                con.close()
        except (sqlite3.Error, UnicodeDecodeError, MemoryError) as exc:
            raise ParseError(path, f"cannot read table {table} ({exc}); the rocprof database is damaged") from exc
    return pd.DataFrame(
        [["" if v is None else str(v) for v in row] for row in rows], columns=names, dtype=object
    ).reindex(columns=names)


def _db_markers(path: Path) -> pd.DataFrame:
    """The ``rocTX`` table: push/pop and start/stop ranges, and marks (``EndNs = BeginNs + 1``)."""
    if "rocTX" not in _db_tables(path):
        return empty_frame(MARKER_COLUMNS)
    df = _db_frame(path, "rocTX")
    return _markers_from_table(path, df)


def _table_ints(path: Path, table: str, df: pd.DataFrame, column: str, *, times: bool) -> pd.Series:
    """An integer column of a database table read as text; errors name the table and its row."""
    try:
        values, _ = parse_int(path, df[column], 1, column, required=True)
        if times:
            check_times(path, values, 1, column)
    except ParseError as exc:
        raise ParseError(path, f"table {table} row {exc.row}: {exc.reason}") from exc
    return values


def _markers_from_table(path: Path, df: pd.DataFrame) -> pd.DataFrame:
    cols = {c.lower(): c for c in df.columns}
    for need in ("beginns", "endns", "tid", "name"):
        if need not in cols:
            raise ParseError(path, f"table rocTX lacks column {need!r} (expected rocprof v1's roctx table)")
    begin = _table_ints(path, "rocTX", df, cols["beginns"], times=True)
    end = _table_ints(path, "rocTX", df, cols["endns"], times=True)
    bad = (end < begin).to_numpy(dtype=bool)
    if bad.any():
        pos = int(np.flatnonzero(bad)[0])
        raise ParseError(path, f"table rocTX row {pos + 1}: EndNs {end.iloc[pos]} is before BeginNs {begin.iloc[pos]}")
    # tblextr.py writes a mark as the instant [t, t + 1]; a push/pop range is never a nanosecond long
    mark = ((end - begin) <= 1).to_numpy(dtype=bool)
    out = pd.DataFrame(
        {
            "process_id": _table_ints(path, "rocTX", df, cols["pid"], times=False) if "pid" in cols else pd.NA,
            "thread_id": _table_ints(path, "rocTX", df, cols["tid"], times=False),
            "start_ns": begin,
            "end_ns": end.where(~mark, begin),
            "message": df[cols["name"]].astype(object),
            "kind": marker_kinds(mark),
        }
    )
    return conform(out, MARKER_COLUMNS)


def read_roctx_trace(path: Path) -> tuple[pd.DataFrame, list[Note]]:
    """Ranges and marks of a raw ``roctx_trace.txt``, paired as ``tblextr.py`` pairs them.

    Push/pop pairs nest per thread; a start/stop pair is matched by its range id (and may cross
    threads: it is kept on the thread that stopped it). A pop or stop without its opening line is
    left out; ranges still open at the end are left out with a note.

    Returns:
        ``(markers, notes)``.

    Raises:
        ParseError: a line that is not a roctx record, a time beyond 2**62 ns, or a pop or stop
            earlier than its push or start (file and line named).
    """
    stacks: dict[tuple[int, int], list[tuple[int, str]]] = {}
    started: dict[int, tuple[int, str]] = {}
    rows: list[tuple[int, int, int, int, str, str]] = []
    for lineno, line in enumerate(read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        m = _ROCTX_LINE.match(line)
        if m is None:
            raise ParseError(path, 'expected a roctx record: <ns> <pid>:<tid> <cid>:<rid>:"<message>"', lineno)
        ts, pid, tid, cid = int(m["ts"]), int(m["pid"]), int(m["tid"]), int(m["cid"])
        if ts >= TIME_MAX_NS or max(pid, tid, int(m["rid"])) >= 2**63:
            raise ParseError(path, "a time beyond 2**62 ns or an id beyond 64 bits; expected a roctx record", lineno)
        msg = m["msg"]
        opened: tuple[int, str] | None = None
        if cid == 0:
            rows.append((pid, tid, ts, ts, msg, "mark"))
        elif cid == 1:
            stacks.setdefault((pid, tid), []).append((ts, msg))
        elif cid == 2 and stacks.get((pid, tid)):
            opened = stacks[(pid, tid)].pop()
        elif cid == 3:
            started[int(m["rid"])] = (ts, msg)
        elif cid == 4 and int(m["rid"]) in started:
            opened = started.pop(int(m["rid"]))
        if opened is not None:
            if ts < opened[0]:
                raise ParseError(path, f"the range {opened[1]!r} ends at {ts}, before it starts at {opened[0]}", lineno)
            rows.append((pid, tid, opened[0], ts, opened[1], "range"))
    df = pd.DataFrame(rows, columns=["process_id", "thread_id", "start_ns", "end_ns", "message", "kind"])
    notes = []
    open_left = sum(len(v) for v in stacks.values()) + len(started)
    if open_left:
        notes.append(
            Note(
                "warning",
                "roctx-never-closed",
                f"{logical_name(path)}: {open_left} roctx range(s) pushed or started but never popped or stopped; "
                "left out (the application ended or was stopped inside them)",
            )
        )
    return conform(df, MARKER_COLUMNS), notes


#: rocminfo agent fields read from ``results.sysinfo.txt``.
_ROCMINFO_FIELDS = {
    "name": "gfx_arch",
    "marketing name": "product_name",
    "device type": "agent_type",
    "node": "node_id",
    "compute unit": "cu_count",
    "max clock freq. (mhz)": "max_clock_mhz",
    "wavefront size": "wave_size",
    "chip id": "pci_device_id",
}


def read_sysinfo(path: Path) -> pd.DataFrame:
    """The agents of ``rocminfo`` output (``results.sysinfo.txt``), labelled by their node id.

    rocprof v1 names a dispatch's GPU by ``gpu-id``: the agent's node id since ROCm 5.5 (CPU
    nodes first), its index among GPUs before.
    """
    agents: list[dict[str, object]] = []
    current: dict[str, object] | None = None
    for line in read_text(path, limit_bytes=16 << 20).splitlines():
        text = line.strip()
        if re.fullmatch(r"Agent \d+", text):
            current = {}
            agents.append(current)
            continue
        if current is None or ":" not in line or not line.startswith("  ") or line.startswith("    "):
            continue  # only the agent's own fields (two spaces), not its pools and caches
        key, _, value = text.partition(":")
        target = _ROCMINFO_FIELDS.get(key.strip().lower())
        if target and target not in current:
            current[target] = value.strip() or None
    rows = []
    for a in agents:
        kind = str(a.get("agent_type") or "").upper()
        row: dict[str, object] = {
            "agent_type": "GPU" if "GPU" in kind else "CPU" if "CPU" in kind else kind or None,
            "gfx_arch": a.get("gfx_arch") if "GPU" in kind else None,
            "product_name": a.get("product_name"),
        }
        for key in ("node_id", "cu_count", "wave_size", "pci_device_id"):
            value = str(a.get(key) or "").split("(")[0].strip()
            row[key] = int(value) if value.isdigit() and len(value) <= 18 else None  # a garbled field is unknown
        clock = str(a.get("max_clock_mhz") or "").strip()
        row["max_clock_mhz"] = float(clock) if re.fullmatch(r"\d+(\.\d+)?", clock) else None
        row["agent_label"] = str(row["node_id"]) if row["node_id"] is not None else None
        rows.append(row)
    if not rows:
        return empty_frame(AGENT_COLUMNS)
    return conform(pd.DataFrame(rows), AGENT_COLUMNS)


def _relabel_by_gpu_index(agents: pd.DataFrame, passes: list[PassData]) -> pd.DataFrame:
    """Before ROCm 5.5 ``gpu-id`` was the index among GPUs: label GPU agents so when no node matches."""
    used = {str(v) for p in passes for v in p.dispatches["agent_label"].dropna()}
    gpus = agents.index[agents["agent_type"] == "GPU"]
    if not used or used & set(agents["agent_label"].dropna()):
        return agents
    if all(u.isdigit() and int(u) < len(gpus) for u in used):
        agents = agents.copy()
        agents.loc[gpus, "agent_label"] = [str(i) for i in range(len(gpus))]
    return agents


def _natural(path: Path) -> list[object]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(path))]


def read_legacy(root: Path, files: Iterable[Path]) -> LegacyCapture:
    """Read the legacy rocprof files of one capture.

    Args:
        root: the capture directory (pass labels are relative to it).
        files: the capture's files.

    Returns:
        The :class:`LegacyCapture`: one pass per rocprof v1 kernel CSV (or ``KERN`` table of a
        database without its CSV) and per directory of rocprofv2 CSV files, the trace pass
        (timestamps, no counters) first; roctx ranges on the pass recorded with them.

    Raises:
        InputError: no kernel table in the files.
        ParseError: a malformed file (file and row named).
    """
    files = sorted(files, key=_natural)
    notes: list[Note] = []
    read: list[Path] = []
    for f in files:  # a kernel CSV that is empty or whose compression is cut would not be told from other files
        name = logical_name(f)
        if name.endswith(".csv") and not name.endswith(SUMMARY_SUFFIXES) and csv_generation(f) is None:
            read_header(f)  # raises ParseError naming the damage; a readable header of another CSV is left out
    v1 = [f for f in files if csv_generation(f) == "v1"]
    v2 = [f for f in files if csv_generation(f) == "v2"]
    dbs = [f for f in files if is_results_db(f)]
    runs = sorted({f.parent for f in v1 + dbs}, key=_natural)
    if len(runs) > 1:
        # rocprof v1 writes one run's files into one folder (rocprofv2's pmc_N/ are passes of one run)
        shown = ", ".join(str(r.relative_to(root)) if r.is_relative_to(root) else str(r) for r in runs[:5])
        raise InputError(
            f"{root}: holds {len(runs)} rocprof runs ({shown}{', ...' if len(runs) > 5 else ''}); one run is one "
            "capture: ingest each folder"
        )
    csv_stems = {(f.parent, stem(f)) for f in v1}

    def label(path: Path) -> str:
        try:
            return str(path.relative_to(root)) if root.is_dir() else logical_name(path)
        except ValueError:
            return logical_name(path)

    passes: list[PassData] = []
    stems: list[tuple[Path, str]] = []
    for f in v1:
        table = read_csv(f)
        if not len(table):
            raise ParseError(
                f, "holds only its header row (expected one row per kernel dispatch; the file was cut short?)", 2
            )
        passes.append(_kernel_pass(f, table, label(f), 2, v1_csv=True))
        stems.append((f.parent, stem(f)))
        read.append(f)
    for db in dbs:
        if (db.parent, stem(db)) in csv_stems:
            continue
        kern = next((t for t in KERNEL_TABLES if t in _db_tables(db)), None)
        if kern is None:
            continue
        df = _db_frame(db, kern)
        passes.append(_kernel_pass(db, df, f"{label(db)} ({kern})", 1))
        stems.append((db.parent, stem(db)))
        read.append(db)
    by_dir: dict[Path, list[Path]] = {}
    for f in v2:
        by_dir.setdefault(f.parent, []).append(f)
    for directory, group in by_dir.items():
        parts = [_kernel_pass(f, read_csv(f), label(f), 2) for f in group]
        for part, f in zip(parts, group, strict=True):
            pid = _V2_NAME.match(logical_name(f))
            if pid and pid.group("pid") and part.dispatches["process_id"].isna().all():
                part.dispatches["process_id"] = pd.array([int(pid.group("pid"))] * len(part.dispatches), dtype="Int64")
        merged = merge_passes(parts, label(directory) or "rocprofv2", str(directory))
        passes.append(merged)
        stems.append((directory, ""))
        read += group
    if not passes:
        shown = ", ".join(logical_name(f) for f in files[:5])
        raise InputError(
            f"{root}: rocprof output without a kernel table (saw {shown}); expected results.csv (or <input>.csv) "
            "with an Index,KernelName header, or results.db with a KERN table"
        )

    # roctx ranges: the database's rocTX table goes to the pass dumped from that database
    marker_dbs = [db for db in dbs if "rocTX" in _db_tables(db)]
    for db in marker_dbs:
        key = (db.parent, stem(db))
        target = stems.index(key) if key in stems else _trace_index(passes)
        markers = _db_markers(db)
        passes[target].markers = pd.concat([passes[target].markers, markers], ignore_index=True)
        read.append(db)
    raw = [f for f in files if is_roctx_trace(f)]
    if raw and not marker_dbs:
        target = _trace_index(passes)
        traced = [read_roctx_trace(f) for f in raw]
        passes[target].markers = conform(pd.concat([m for m, _ in traced], ignore_index=True), MARKER_COLUMNS)
        notes += [n for _, found in traced for n in found]
        read += raw

    sysinfo = [f for f in files if logical_name(f).endswith(".sysinfo.txt")]
    agents = read_sysinfo(sysinfo[0]) if sysinfo else empty_frame(AGENT_COLUMNS)
    read += sysinfo[:1]
    agents = _relabel_by_gpu_index(agents, passes)
    skipped = sorted({logical_name(f) for f in files if f not in read and belongs(f) and f not in dbs})
    if skipped:
        notes.append(
            Note(
                "info",
                "not-read",
                f"rocprof summaries and traces not needed (the kernel table holds their data): {', '.join(skipped[:8])}"
                + (" ..." if len(skipped) > 8 else ""),
            )
        )
    # the trace pass (GPU timestamps without counter collection) first: its durations are the run's
    trace = _trace_index(passes)
    passes.insert(0, passes.pop(trace))
    cmd = [f for f in files if f.name == "cmd"]
    command = read_text(cmd[0], limit_bytes=1 << 16).strip() if cmd else None
    return LegacyCapture(
        passes=passes,
        agents=agents,
        files_read=list(dict.fromkeys(read)),
        notes=notes,
        profiler="rocprofv2" if v2 and not v1 else "rocprof",
        command=command or None,
    )


def _trace_index(passes: list[PassData]) -> int:
    """The pass whose durations are the run's: the first without counters that has GPU times."""
    for i, p in enumerate(passes):
        if p.kind == "trace" and p.dispatches["start_ns"].notna().any():
            return i
    for i, p in enumerate(passes):
        if p.dispatches["start_ns"].notna().any():
            return i
    return 0


__all__ = [
    "FORMAT",
    "PROPERTY_COLUMNS",
    "LegacyCapture",
    "belongs",
    "csv_generation",
    "is_results_db",
    "read_legacy",
    "read_roctx_trace",
    "read_sysinfo",
]
