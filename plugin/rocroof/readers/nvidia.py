"""Readers for NVIDIA captures: Nsight Compute raw CSV (counters) and Nsight Systems SQLite (trace).

Nsight Compute: ``ncu --import report.ncu-rep --csv --page raw``. Row 1 is the header, row 2
the unit of each column (chosen per column: ``us``, ``Mbyte``...; decimal prefixes, ``Kbyte`` =
1e3 bytes) unless exported with ``--print-units base``; numbers may carry thousands separators.
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

import contextlib
import gzip
import re
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import ParseError
from ..fileio import column_map, is_gzip, logical_name, open_binary, parse_int, parse_str, pick, read_csv, require
from ..records import (
    AGENT_COLUMNS,
    COUNTER_COLUMNS,
    DISPATCH_COLUMNS,
    LAUNCH_COLUMNS,
    MARKER_COLUMNS,
    PassData,
    conform,
    empty_frame,
)

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


def _number(text: pd.Series) -> pd.Series:
    """Nsight numbers: thousands separators dropped, ``n/a`` and empty cells as NaN."""
    cleaned = text.astype(str).str.replace(",", "", regex=False).str.strip()
    return pd.to_numeric(cleaned.where(~cleaned.isin(["", "n/a", "N/A", "nan"]), None), errors="coerce")


def _whole(path: Path, values: pd.Series, column: str, first_row: int) -> pd.Series:
    """Numbers rounded to ``Int64``; ParseError naming the first row outside the signed 64-bit range."""
    rounded = values.round()
    bad = rounded.notna() & ~((rounded >= -(2**63)) & (rounded < 2**63))
    if bool(bad.any()):
        pos = int(np.flatnonzero(bad.to_numpy())[0])
        raise ParseError(
            path, f"column {column!r} has {values.iloc[pos]:g}; expected a number within 64 bits", first_row + pos
        )
    return pd.Series(pd.array(rounded, dtype="Int64"))


def _innermost_ggml(cell: object) -> tuple[int | None, str | None]:
    """``(thread id, innermost ggml range message)`` of an NVTX stack cell."""
    if not isinstance(cell, str) or not cell.strip():
        return None, None
    head = cell.strip().split(None, 1)[0]
    tid = int(head) if head.isdigit() else None
    message = None
    for entry in _STACK_ENTRY.findall(cell):
        # "<domain>:<message>:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg"; the message may hold colons
        body = entry.split(":", 1)[1] if entry.startswith("<") or ":" in entry else entry
        parts = body.rsplit(":", 6)
        text = parts[0] if len(parts) == 7 else body
        if text.startswith("ggml:"):
            message = text
    return tid, message


def is_ncu_csv(path: Path) -> bool:
    """True for an ``ncu --csv --page raw`` export (header holds ``Kernel Name`` and ncu metrics)."""
    if not logical_name(path).endswith(".csv"):
        return False
    try:
        with open_binary(path) as fh:
            head = fh.read(1 << 16).decode("utf-8", errors="replace")
    except Exception:
        return False
    first = head.splitlines()[0] if head else ""
    return '"Kernel Name"' in first and ("gpu__time_duration" in first or "Push/Pop_Range" in first)


def read_ncu_csv(path: Path, label: str) -> tuple[PassData, dict[str, str]]:
    """Read an Nsight Compute raw-page CSV as one counter pass.

    Returns:
        ``(pass, facts)``: facts hold the GPU (``CC``, device name when present).

    Raises:
        ParseError: a missing required column, or a row without a kernel name / duration.
    """
    df = read_csv(path)
    cols = column_map(df.columns)
    name_col = require(path, cols, "kernel name", "Kernel Name")
    id_col = require(path, cols, "kernel id", "ID")
    units = pd.Series([""] * len(df.columns), index=df.columns)
    # the units row: its ID cell is empty and its metric cells hold unit names
    if len(df) and str(df[id_col].iloc[0]).strip() == "":
        units = df.iloc[0].fillna("").astype(str)
        df = df.iloc[1:].reset_index(drop=True)
        first_row = 3
    else:
        first_row = 2
    disp = pd.DataFrame({"kernel_name": parse_str(df[name_col])})
    disp["dispatch_id"] = _whole(path, _number(df[id_col]), id_col, first_row)
    if bool(disp["kernel_name"].isna().any()):
        pos = int(np.flatnonzero(disp["kernel_name"].isna().to_numpy())[0])
        raise ParseError(path, f"column {name_col!r} is empty; expected a kernel name", first_row + pos)
    dur_col = pick(cols, "gpu__time_duration.sum")
    if dur_col is not None:
        dur_scale = unit_scale(units[dur_col]) or 1.0
        disp["duration_ns"] = _whole(path, _number(df[dur_col]) * dur_scale, dur_col, first_row)
    for target, alias in (("process_id", "Process ID"), ("stream_id", "Stream"), ("queue_id", "Context")):
        col = pick(cols, alias)
        if col is not None:
            disp[target] = _whole(path, _number(df[col]), col, first_row)
    for target, alias in (("grid", "Grid Size"), ("workgroup", "Block Size")):
        col = pick(cols, alias)
        if col is not None:
            xyz = df[col].astype(str).str.extract(r"\(\s*(\d+),\s*(\d+),\s*(\d+)\s*\)")
            for i, axis in enumerate("xyz"):
                disp[f"{target}_{axis}"] = parse_int(path, xyz[i], first_row, col)[0]
    if "workgroup_x" in disp and "grid_x" in disp:
        # ncu's Grid Size counts blocks; rocroof's grid sizes count work-items (threads)
        for a in "xyz":
            disp[f"grid_{a}"] = disp[f"grid_{a}"] * disp[f"workgroup_{a}"]
        disp["workgroup_size"] = disp["workgroup_x"] * disp["workgroup_y"] * disp["workgroup_z"]
        disp["grid_size"] = disp["grid_x"] * disp["grid_y"] * disp["grid_z"]
    nvtx = pick(cols, NVTX_COLUMN)
    if nvtx is not None:
        parsed = [_innermost_ggml(c) for c in df[nvtx]]
        disp["thread_id"] = pd.array([t for t, _ in parsed], dtype="Int64")
        disp["region"] = [msg for _, msg in parsed]
    disp["agent_label"] = parse_str(df[pick(cols, "Device") or name_col]) if pick(cols, "Device") else "0"
    counters = []
    rows = np.arange(len(df), dtype=np.int64)
    for col in df.columns:
        if str(col).strip().lower() in _META or "__" not in str(col) or str(col).startswith("device__attribute"):
            continue  # device attributes repeat on every row: facts of the GPU, not counters of a dispatch
        scale = unit_scale(units[col])
        values = _number(df[col])
        if values.notna().sum() == 0 or scale is None:
            continue
        counters.append(pd.DataFrame({"row": rows, "counter_name": str(col), "value": values * scale}))
    counter_frame = (
        pd.concat(counters, ignore_index=True).dropna(subset=["value"]) if counters else empty_frame(COUNTER_COLUMNS)
    )
    facts: dict[str, str] = {}
    cc = pick(cols, "CC")
    if cc is not None and len(df):
        major_minor = str(df[cc].iloc[0]).strip()
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
        if col is not None and len(df):
            facts[fact] = str(df[col].iloc[0]).replace(",", "").strip()
    host = pick(cols, "Host Name")
    if host is not None and len(df):
        facts["host"] = str(df[host].iloc[0])
    return (
        PassData(
            kind="counter",
            label=label,
            source=str(path),
            dispatches=conform(disp, DISPATCH_COLUMNS),
            counters=conform(counter_frame, COUNTER_COLUMNS),
            region_method="nvtx_stack",
        ),
        facts,
    )


@contextlib.contextmanager
def sqlite_file(path: Path) -> Iterator[Path]:
    """A plain SQLite file for ``path``: itself, or a temporary decompressed copy of a ``.gz``."""
    if not is_gzip(path):
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="rocroof-") as tmp:
        plain = Path(tmp) / logical_name(path)
        try:
            with gzip.open(path, "rb") as src, open(plain, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
        except (OSError, EOFError) as exc:
            raise ParseError(path, f"compressed data is damaged or truncated ({exc})") from exc
        yield plain


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
        conn = sqlite3.connect(f"file:{path.resolve().as_posix()}?mode=ro", uri=True)
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


def _read_nsys(path: Path, label: str) -> tuple[PassData, pd.DataFrame, dict[str, str]]:
    try:
        conn = sqlite3.connect(f"file:{path.resolve().as_posix()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise ParseError(path, f"cannot open the Nsight Systems database ({exc})") from exc
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if "CUPTI_ACTIVITY_KIND_KERNEL" not in tables:
            raise ParseError(path, "not an nsys SQLite export (no CUPTI_ACTIVITY_KIND_KERNEL table)")
        k = pd.read_sql_query(
            "SELECT k.start, k.end, k.deviceId, k.contextId, k.streamId, k.correlationId, k.globalPid, "
            "COALESCE(d.value, s.value) AS name, k.registersPerThread, k.gridX, k.gridY, k.gridZ, k.blockX, "
            "k.blockY, k.blockZ, k.staticSharedMemory, k.dynamicSharedMemory, k.localMemoryPerThread "
            "FROM CUPTI_ACTIVITY_KIND_KERNEL k LEFT JOIN StringIds d ON d.id = k.demangledName "
            "LEFT JOIN StringIds s ON s.id = k.shortName ORDER BY k.correlationId, k.start",
            conn,
        )
        pids = (
            pd.read_sql_query("SELECT globalPid, pid FROM PROCESSES", conn) if "PROCESSES" in tables else pd.DataFrame()
        )
        runtime = pd.DataFrame()
        if "CUPTI_ACTIVITY_KIND_RUNTIME" in tables:
            runtime = pd.read_sql_query(
                "SELECT r.start, r.end, r.globalTid, r.correlationId, s.value AS api_name "
                "FROM CUPTI_ACTIVITY_KIND_RUNTIME r LEFT JOIN StringIds s ON s.id = r.nameId",
                conn,
            )
        nvtx = pd.DataFrame()
        if "NVTX_EVENTS" in tables:
            nvtx = pd.read_sql_query(
                "SELECT e.start, e.end, e.eventType, e.globalTid, COALESCE(e.text, s.value) AS message "
                "FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId WHERE e.eventType IN (34, 59, 60)",
                conn,
            )
        gpus = pd.read_sql_query("SELECT * FROM TARGET_INFO_GPU", conn) if "TARGET_INFO_GPU" in tables else None
    except (sqlite3.Error, pd.errors.DatabaseError, UnicodeDecodeError) as exc:
        raise ParseError(path, f"query failed ({exc}); is this a complete nsys SQLite export?") from exc
    except MemoryError as exc:  # SQLITE_NOMEM: a damaged page can claim a record of any size
        raise ParseError(path, "SQLite ran out of memory reading it; the file is damaged or cut short") from exc
    finally:
        conn.close()

    # every value is checked, so that a damaged export is a ParseError naming the table and column
    kt = "CUPTI_ACTIVITY_KIND_KERNEL"

    def ints(frame: pd.DataFrame, column: str, table: str = kt) -> pd.Series:
        return _ints(path, table, frame, column)

    pid_of: dict[int, int] = {}
    if len(pids):
        process_ids = ints(pids, "pid", "PROCESSES")
        for g, p in zip(ints(pids, "globalPid", "PROCESSES"), process_ids, strict=True):
            if pd.notna(g) and pd.notna(p):
                pid_of[int(g)] = int(p)

    def pid(global_id: pd.Series) -> pd.Series:
        gpid = global_id & ~0xFFFFFF if len(global_id) else global_id
        return pd.array([pid_of.get(int(g)) if pd.notna(g) else None for g in gpid], dtype="Int64")

    def tid(global_tid: pd.Series) -> pd.Series:
        return (global_tid & 0xFFFFFF).astype("Int64")

    block = {a: ints(k, f"block{a.upper()}") for a in "xyz"}
    disp = pd.DataFrame(
        {
            "kernel_name": k["name"],
            "start_ns": ints(k, "start"),
            "end_ns": ints(k, "end"),
            "agent_label": k["deviceId"].astype(str),
            "queue_id": ints(k, "contextId"),
            "stream_id": ints(k, "streamId"),
            "correlation_id": ints(k, "correlationId"),
            "process_id": pid(ints(k, "globalPid")),
            "vgpr_count": ints(k, "registersPerThread"),
            "lds_bytes": ints(k, "staticSharedMemory") + ints(k, "dynamicSharedMemory"),
            "scratch_bytes": ints(k, "localMemoryPerThread"),
            "workgroup_x": block["x"],
            "workgroup_y": block["y"],
            "workgroup_z": block["z"],
            "grid_x": ints(k, "gridX") * block["x"],
            "grid_y": ints(k, "gridY") * block["y"],
            "grid_z": ints(k, "gridZ") * block["z"],
        }
    )
    disp["dispatch_id"] = pd.array(np.arange(1, len(disp) + 1), dtype="Int64")
    disp["workgroup_size"] = disp["workgroup_x"] * disp["workgroup_y"] * disp["workgroup_z"]
    disp["grid_size"] = disp["grid_x"] * disp["grid_y"] * disp["grid_z"]
    launches = empty_frame(LAUNCH_COLUMNS)
    if len(runtime):
        rt = "CUPTI_ACTIVITY_KIND_RUNTIME"
        wanted = runtime[ints(runtime, "correlationId", rt).isin(set(disp["correlation_id"].dropna()))]
        gtid = ints(wanted, "globalTid", rt)
        launches = conform(
            pd.DataFrame(
                {
                    "correlation_id": ints(wanted, "correlationId", rt),
                    "process_id": pid(gtid),
                    "thread_id": tid(gtid),
                    "start_ns": ints(wanted, "start", rt),
                    "end_ns": ints(wanted, "end", rt),
                    "api_name": wanted["api_name"],
                }
            ),
            LAUNCH_COLUMNS,
        )
        by_corr = launches.drop_duplicates("correlation_id").set_index("correlation_id")
        disp["thread_id"] = pd.array(by_corr["thread_id"].reindex(disp["correlation_id"]).to_numpy(), dtype="Int64")
    markers = empty_frame(MARKER_COLUMNS)
    if len(nvtx):
        nt = "NVTX_EVENTS"
        is_mark = (ints(nvtx, "eventType", nt) == 34).fillna(False).to_numpy(dtype=bool)
        start = ints(nvtx, "start", nt)
        end = ints(nvtx, "end", nt).where(~is_mark, start)
        gtid = ints(nvtx, "globalTid", nt)
        markers = conform(
            pd.DataFrame(
                {
                    "process_id": pid(gtid),
                    "thread_id": tid(gtid),
                    "start_ns": start,
                    "end_ns": end,
                    "message": nvtx["message"],
                    "kind": np.where(is_mark, "mark", "range"),
                }
            ).dropna(subset=["message", "end_ns"]),
            MARKER_COLUMNS,
        )
    agents = empty_frame(AGENT_COLUMNS)
    facts: dict[str, str] = {}
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
        dispatches=conform(disp, DISPATCH_COLUMNS),
        markers=markers,
        launches=launches,
    )
    return p, agents, facts
