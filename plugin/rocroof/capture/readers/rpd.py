"""Reader for rocmProfileData (RPD) traces: the ``.rpd`` SQLite files of ``rpd_tracer``.

Not rocprofv3's rocpd (``rocpd_kernel_dispatch`` and friends, :mod:`.rocpd`): RPD is the
older format of ``ROCm/rocmProfileData`` (read at ``e943e7a``: ``rocpd_python/rocpd/
schema_data/tableSchema.cmd``, ``rpd_tracer/RoctracerDataSource.cpp``, ``ApiTable.cpp``,
``OpTable.cpp``). Its tables:

* ``rocpd_string`` (``id, string``): interned text (``rocpd_ustring`` in schema 3 for API
  arguments, roctx messages included);
* ``rocpd_op`` (``id, gpuId, queueId, sequenceId, start, end, description_id, opType_id``): GPU
  work, ns on ``CLOCK_MONOTONIC``; kernels are ``KernelExecution`` (``Task`` when launched by a HIP
  graph; ``Kernel``/``ConcurrentKernel`` from the CUDA source), ``description`` the kernel name;
* ``rocpd_api`` (``id, pid, tid, start, end, apiName_id, args_id``): host API calls on the same
  clock, ``id`` being the call's correlation id; ``rocpd_api_ops`` (``api_id, op_id``) links a
  call to the ops it launched;
* roctx calls are ``rocpd_api`` rows named ``UserMarker``: one row per push/pop pair (start at the
  push, end at the pop, the message in ``args``), a mark as one row with ``start == end``;
  ``roctxRangeStart``/``Stop`` are not recorded;
* ``rocpd_kernelapi`` (``api_ptr_id, gridX.., workgroupX.., ...``): launch sizes (schema 2+);
* ``rocpd_counter`` (``op_id, name_id, value``, schema 3): per-op counters, when a tool wrote any;
* ``rocpd_metadata`` (``schema_version``), ``rocpd_monitor`` (clock samples; not read).

Kernels are attributed like rocprofv3 ones: the launching call (``rocpd_api_ops``) gives the host
thread and time, and the innermost ``ggml:`` roctx range open there is the op. RPD records no GPU
model or architecture: give ``--arch`` for DRAM formulas and ceilings.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from ...errors import ParseError
from ...fileio import check_times, logical_name, parse_int, sqlite_connect, sqlite_file, sqlite_tables
from ...records import (
    AGENT_COLUMNS,
    COUNTER_COLUMNS,
    DISPATCH_COLUMNS,
    LAUNCH_COLUMNS,
    MARKER_COLUMNS,
    Note,
    PassData,
    conform,
    empty_frame,
    marker_kinds,
)

#: Detected format name.
FORMAT = "rpd"
#: ``rocpd_op`` types that are kernels (roctracer, graph launches, CUPTI).
KERNEL_OP_TYPES = ("KernelExecution", "Task", "Kernel", "ConcurrentKernel")
#: The tables a readable RPD trace has.
REQUIRED = ("rocpd_op", "rocpd_api", "rocpd_string", "rocpd_api_ops")
#: HIP launches whose ``gridX`` counts work-items (the others count workgroups; RoctracerDataSource.cpp).
_GRID_IN_WORK_ITEMS = ("hipExtModuleLaunchKernel", "hipHccModuleLaunchKernel", "hipExtLaunchKernel")


def resembles_rpd(path: Path) -> bool:
    """True for a file named ``*.rpd`` or an SQLite file with RPD tables (not rocprofv3's rocpd).

    A file that resembles RPD but lacks what rocroof reads is then refused by :func:`read_pass`
    with the reason, not taken for another format.
    """
    name = logical_name(path)
    if name.endswith(".rpd"):
        return True
    if not name.endswith((".db", ".sqlite", ".sqlite3")):
        return False
    try:
        with sqlite_file(path) as plain:
            tables = sqlite_tables(plain)
    except ParseError:
        return False
    if not tables or any(t.startswith("rocpd_kernel_dispatch") for t in tables):
        return False
    return len(tables & {*REQUIRED, "rocpd_kernelapi", "rocpd_metadata"}) >= 2


def _query(con: sqlite3.Connection, path: Path, sql: str, params: Sequence[object] = ()) -> pd.DataFrame:
    try:
        cur = con.execute(sql, params)
        names = [d[0] for d in cur.description]
        return pd.DataFrame(cur.fetchall(), columns=names)
    except (sqlite3.Error, UnicodeDecodeError, MemoryError) as exc:
        raise ParseError(path, f"cannot read the RPD trace ({exc}); the file may be truncated or damaged") from exc


def _columns(con: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in con.execute(f'PRAGMA table_info("{table}")')}


def _ints(path: Path, df: pd.DataFrame, column: str, table: str, *, required: bool, time: bool = False) -> pd.Series:
    """An integer column of a query result (SQLite keeps whatever was stored: text, reals, huge ints).

    Raises:
        ParseError: a value that is not an integer of 64 bits (a time: from 0 to 2**62 ns), or a
            missing one where ``required``; the message names the table and the row's id.
    """
    cells = df[column].astype(object)
    text = cells.map(lambda v: "" if v is None or (isinstance(v, float) and np.isnan(v)) else str(v))
    try:
        values, _ = parse_int(path, text, 0, column, required=required, allow_float_text=False)
        if time:
            check_times(path, values, 0, column)
    except ParseError as exc:
        pos = int(exc.row or 0)
        shown = "NULL" if cells.iloc[pos] is None else repr(str(cells.iloc[pos])[:40])
        expected = "a time in ns from 0 to 2**62" if time else "an integer"
        raise ParseError(
            path, f"{table} id {df['id'].iloc[pos]}: column {column!r} is {shown}; expected {expected}"
        ) from exc
    return values


def read_pass(path: Path, label: str) -> tuple[PassData, dict[str, str]]:
    """Read one RPD trace (``.gz`` accepted) as a trace pass.

    Returns:
        ``(pass, facts)``: the kernels in GPU start order with their launching call, the launch
        calls, the roctx ranges and marks; ``facts`` holds ``rpd_schema_version``.

    Raises:
        ParseError: a required table is missing (the file resembles RPD but is not one rocroof
            can read), a value is not what the schema says, or the file is damaged.
    """
    with sqlite_file(path) as plain:
        tables = sqlite_tables(plain)
        if tables is None:
            raise ParseError(path, "cannot open as an SQLite database; an RPD trace (.rpd) is one")
        missing = [t for t in REQUIRED if t not in tables]
        if missing:
            raise ParseError(
                path,
                f"resembles a rocmProfileData (RPD) trace but has no {', '.join(missing)} table(s); expected the "
                "rocpd_op / rocpd_api / rocpd_api_ops / rocpd_string tables rpd_tracer writes",
            )
        con = sqlite_connect(plain)
        try:
            return _read(con, path, label, tables)
        finally:
            con.close()


def _read(con: sqlite3.Connection, path: Path, label: str, tables: set[str]) -> tuple[PassData, dict[str, str]]:
    facts: dict[str, str] = {}
    if "rocpd_metadata" in tables:
        meta = _query(con, path, "SELECT tag, value FROM rocpd_metadata")
        facts = {f"rpd_{t}": str(v) for t, v in zip(meta["tag"], meta["value"], strict=True) if t == "schema_version"}
    marks = ",".join("?" * len(KERNEL_OP_TYPES))
    ops = _query(
        con,
        path,
        f"""SELECT o.id, o.gpuId, o.queueId, o.start, o."end", d.string AS kernel_name, t.string AS op_type,
                   (SELECT MIN(ao.api_id) FROM rocpd_api_ops ao WHERE ao.op_id = o.id) AS api_id
            FROM rocpd_op o
            JOIN rocpd_string t ON t.id = o.opType_id
            LEFT JOIN rocpd_string d ON d.id = o.description_id
            WHERE t.string IN ({marks})
            ORDER BY o.start, o.id""",
        KERNEL_OP_TYPES,
    )
    n = len(ops)
    start = _ints(path, ops, "start", "rocpd_op", required=True, time=True)
    end = _ints(path, ops, "end", "rocpd_op", required=True, time=True)
    if bool((end < start).any()):
        pos = int(np.flatnonzero((end < start).to_numpy(dtype=bool))[0])
        raise ParseError(
            path, f"rocpd_op id {ops['id'].iloc[pos]}: end {end.iloc[pos]} is before start {start.iloc[pos]}"
        )
    disp = pd.DataFrame(
        {
            "dispatch_id": _ints(path, ops, "id", "rocpd_op", required=True),
            "kernel_name": ops["kernel_name"].astype(object),
            "agent_label": _ints(path, ops, "gpuId", "rocpd_op", required=False).astype(str),
            "queue_id": _ints(path, ops, "queueId", "rocpd_op", required=False),
            "correlation_id": _ints(path, ops, "api_id", "rocpd_op", required=False),
            "start_ns": start,
            "end_ns": end,
        }
    )
    api_ids = sorted(set(disp["correlation_id"].dropna().astype(np.int64).tolist()))
    launches = _launches(con, path, api_ids)
    by_call = launches.set_index("correlation_id")
    for target in ("process_id", "thread_id"):
        disp[target] = (
            pd.array(
                by_call[target].reindex(disp["correlation_id"].astype("float64")).to_numpy(dtype="float64"),
                dtype="Int64",
            )
            if len(by_call)
            else pd.array([pd.NA] * n, dtype="Int64")
        )
    if "rocpd_kernelapi" in tables and {"gridX", "workgroupX"} <= _columns(con, "rocpd_kernelapi"):
        _launch_sizes(con, path, disp, launches)
    counters = _counters(con, path, disp) if "rocpd_counter" in tables else empty_frame(COUNTER_COLUMNS)
    notes: list[Note] = []
    markers = _markers(con, path, tables)
    orphans = int(disp["correlation_id"].notna().sum()) - int(
        disp["correlation_id"].isin(launches["correlation_id"]).sum()
    )
    unlinked = int(disp["correlation_id"].isna().sum())
    if orphans or unlinked:
        notes.append(
            Note(
                "warning",
                "rpd-no-launch",
                f"{path.name}: {orphans + unlinked:,} kernel(s) without their launching call ({unlinked:,} not in "
                f"rocpd_api_ops, {orphans:,} naming an API call that rocpd_api lacks): they cannot be attributed",
            )
        )
    other = int(_query(con, path, "SELECT COUNT(*) AS n FROM rocpd_op")["n"].iloc[0]) - n
    if other:
        notes.append(
            Note("info", "rpd-other-ops", f"{path.name}: {other:,} memory copies and fills are not kernels; left out")
        )
    p = PassData(
        kind="counter" if len(counters) else "trace",
        label=label,
        source=str(path),
        dispatches=conform(disp, DISPATCH_COLUMNS),
        counters=counters,
        markers=markers,
        launches=launches,
        notes=notes,
    )
    return p, facts


def _launches(con: sqlite3.Connection, path: Path, api_ids: list[int]) -> pd.DataFrame:
    """The API calls that launched kernels (``rocpd_api`` rows by id = correlation id)."""
    if not api_ids:
        return empty_frame(LAUNCH_COLUMNS)
    frames = []
    for lo in range(0, len(api_ids), 500):  # SQLite's host-parameter limit
        chunk = api_ids[lo : lo + 500]
        frames.append(
            _query(
                con,
                path,
                f"""SELECT a.id, a.pid, a.tid, a.start, a."end", s.string AS api_name FROM rocpd_api a
                    LEFT JOIN rocpd_string s ON s.id = a.apiName_id WHERE a.id IN ({",".join("?" * len(chunk))})""",
                chunk,
            )
        )
    df = pd.concat(frames, ignore_index=True)
    out = pd.DataFrame(
        {
            "correlation_id": _ints(path, df, "id", "rocpd_api", required=True),
            "process_id": _ints(path, df, "pid", "rocpd_api", required=False),
            "thread_id": _ints(path, df, "tid", "rocpd_api", required=False),
            "start_ns": _ints(path, df, "start", "rocpd_api", required=True, time=True),
            "end_ns": _ints(path, df, "end", "rocpd_api", required=True, time=True),
            "api_name": df["api_name"].astype(object),
        }
    )
    return conform(out, LAUNCH_COLUMNS)


def _launch_sizes(con: sqlite3.Connection, path: Path, disp: pd.DataFrame, launches: pd.DataFrame) -> None:
    """Workgroup and grid sizes (in work-items) from ``rocpd_kernelapi``, by launching call."""
    sizes = _query(
        con,
        path,
        "SELECT api_ptr_id AS id, gridX, gridY, gridZ, workgroupX, workgroupY, workgroupZ FROM rocpd_kernelapi",
    )
    if not len(sizes):
        return
    sizes = sizes.set_index("id")
    api_of = launches.set_index("correlation_id")["api_name"]
    corr = disp["correlation_id"].astype("float64")
    names = api_of.reindex(corr).to_numpy(dtype=object)
    items = np.isin(names, _GRID_IN_WORK_ITEMS)
    for axis in "XYZ":
        wg = pd.to_numeric(sizes[f"workgroup{axis}"], errors="coerce").reindex(corr).to_numpy(dtype="float64")
        grid = pd.to_numeric(sizes[f"grid{axis}"], errors="coerce").reindex(corr).to_numpy(dtype="float64")
        work_items = np.where(items, grid, grid * wg)
        disp[f"workgroup_{axis.lower()}"] = pd.array(np.where(np.isnan(wg), np.nan, wg), dtype="Float64").astype(
            "Int64"
        )
        disp[f"grid_{axis.lower()}"] = pd.array(work_items, dtype="Float64").astype("Int64")
    disp["workgroup_size"] = disp["workgroup_x"] * disp["workgroup_y"] * disp["workgroup_z"]
    disp["grid_size"] = disp["grid_x"] * disp["grid_y"] * disp["grid_z"]


def _markers(con: sqlite3.Connection, path: Path, tables: set[str]) -> pd.DataFrame:
    """``UserMarker`` rows: roctx push/pop ranges (one row each) and marks (``start == end``)."""
    cols = _columns(con, "rocpd_api")
    # schema 3 keeps arguments (the roctx message) in rocpd_ustring; schema 2 in rocpd_string
    args = "rocpd_ustring" if "rocpd_ustring" in tables and "domain_id" in cols else "rocpd_string"
    df = _query(
        con,
        path,
        f"""SELECT a.id, a.pid, a.tid, a.start, a."end", m.string AS message FROM rocpd_api a
            JOIN rocpd_string n ON n.id = a.apiName_id LEFT JOIN {args} m ON m.id = a.args_id
            WHERE n.string = 'UserMarker' ORDER BY a.start, a.id""",
    )
    if not len(df):
        return empty_frame(MARKER_COLUMNS)
    start = _ints(path, df, "start", "rocpd_api", required=True, time=True)
    end = _ints(path, df, "end", "rocpd_api", required=True, time=True)
    if bool((end < start).any()):
        pos = int(np.flatnonzero((end < start).to_numpy(dtype=bool))[0])
        raise ParseError(path, f"rocpd_api id {df['id'].iloc[pos]}: a UserMarker ends before it starts")
    out = pd.DataFrame(
        {
            "process_id": _ints(path, df, "pid", "rocpd_api", required=False),
            "thread_id": _ints(path, df, "tid", "rocpd_api", required=False),
            "start_ns": start,
            "end_ns": end,
            "message": df["message"].astype(object),
            "kind": marker_kinds(start == end),
        }
    )
    return conform(out, MARKER_COLUMNS)


def _counters(con: sqlite3.Connection, path: Path, disp: pd.DataFrame) -> pd.DataFrame:
    """Per-op counters of schema 3 (``rocpd_counter``), on the kernels' rows."""
    df = _query(
        con,
        path,
        "SELECT c.op_id AS id, s.string AS counter_name, c.value FROM rocpd_counter c "
        "JOIN rocpd_string s ON s.id = c.name_id",
    )
    if not len(df):
        return empty_frame(COUNTER_COLUMNS)
    row_of = pd.Series(np.arange(len(disp)), index=disp["dispatch_id"].astype(np.int64))
    rows = row_of.reindex(pd.to_numeric(df["id"], errors="coerce")).to_numpy(dtype="float64")
    keep = ~np.isnan(rows)
    values = pd.to_numeric(df["value"], errors="coerce")
    out = pd.DataFrame(
        {"row": rows[keep].astype(np.int64), "counter_name": df["counter_name"][keep], "value": values[keep]}
    )
    return conform(out.groupby(["row", "counter_name"], as_index=False)["value"].sum(), COUNTER_COLUMNS)


def agents(p: PassData) -> pd.DataFrame:
    """One GPU agent per ``gpuId`` the kernels ran on; RPD records neither its model nor its architecture."""
    labels = [str(v) for v in p.dispatches["agent_label"].dropna().unique()]
    rows = [{"agent_label": label, "agent_type": "GPU"} for label in labels]
    return conform(pd.DataFrame(rows), AGENT_COLUMNS) if rows else empty_frame(AGENT_COLUMNS)
