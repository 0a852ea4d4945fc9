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

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import ParseError
from ..fileio import (
    column_map,
    logical_name,
    parse_float,
    parse_int,
    parse_str,
    pick,
    read_csv,
    read_csv_chunks,
    require,
)
from ..markers import parse_range
from ..records import (
    AGENT_COLUMNS,
    COUNTER_COLUMNS,
    DISPATCH_COLUMNS,
    LAUNCH_COLUMNS,
    MARKER_COLUMNS,
    Note,
    PassData,
    conform,
    empty_frame,
)

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


def _dispatches_from_kernel_trace(path: Path, pid: int | None) -> tuple[pd.DataFrame, pd.Series]:
    frames = []
    exact_parts = []
    for chunk, first in read_csv_chunks(path):
        cols = column_map(chunk.columns)
        out: dict[str, pd.Series] = {}
        did = require(path, cols, "dispatch id", "Dispatch_Id")
        out["dispatch_id"] = parse_int(path, chunk[did], first, did, required=True)[0]
        name = require(path, cols, "kernel name", "Kernel_Name")
        out["kernel_name"] = parse_str(chunk[name])
        start = require(path, cols, "kernel start time", "Start_Timestamp")
        end = require(path, cols, "kernel end time", "End_Timestamp")
        out["start_ns"], ex1 = parse_int(path, chunk[start], first, start, required=True)
        out["end_ns"], ex2 = parse_int(path, chunk[end], first, end, required=True)
        exact_parts.append(ex1 & ex2)
        agent = pick(cols, "Agent_Id")
        out["agent_label"] = parse_str(chunk[agent]) if agent else pd.Series([None] * len(chunk))
        for target, aliases in {
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
        }.items():
            col = pick(cols, *aliases)
            if col is not None:
                out[target] = parse_int(path, chunk[col], first, col)[0]
        df = pd.DataFrame(out)
        if "process_id" not in df and pid is not None:
            df["process_id"] = pid
        for axis in ("grid", "workgroup"):
            parts = [f"{axis}_{a}" for a in "xyz"]
            if all(p in df for p in parts):
                df[f"{axis}_size"] = df[parts[0]] * df[parts[1]] * df[parts[2]]
        frames.append(df)
    if not frames:
        return empty_frame(DISPATCH_COLUMNS), pd.Series(dtype=bool)
    df = pd.concat(frames, ignore_index=True)
    exact = pd.concat(exact_parts, ignore_index=True)
    keys = ["process_id", "dispatch_id"] if "process_id" in df else ["dispatch_id"]
    dup = df.duplicated(subset=keys, keep="first")
    if bool(dup.any()):
        pos = int(np.flatnonzero(dup.to_numpy())[0])
        raise ParseError(
            path, f"dispatch id {df['dispatch_id'].iloc[pos]} appears twice (expected one row per dispatch)", pos + 2
        )
    return df, exact


def _read_counter_file(path: Path, pid: int | None) -> tuple[pd.DataFrame, pd.DataFrame, pd.Series]:
    """Read a long-form counter_collection.csv.

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
        for target, aliases in {
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
        }.items():
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


def _read_markers(path: Path) -> pd.DataFrame:
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
        if domain is not None:
            keep = ~parse_str(chunk[domain]).isin(_MESSAGE_DOMAINS_EXCLUDED)
            df = df[keep.to_numpy()]
        bad = df["end_ns"] < df["start_ns"]
        if bool(bad.any()):
            # df keeps the chunk positions as its index (rows of other domains were dropped)
            pos = int(df.index[np.flatnonzero(bad.to_numpy())[0]])
            raise ParseError(path, "marker ends before it starts (End_Timestamp < Start_Timestamp)", first + pos)
        df["kind"] = np.where(df["start_ns"] == df["end_ns"], "mark", "range")
        frames.append(df)
    if not frames:
        return empty_frame(MARKER_COLUMNS)
    return conform(pd.concat(frames, ignore_index=True), MARKER_COLUMNS)


def _read_launches(path: Path, wanted: set[int], pid: int | None) -> pd.DataFrame:
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


def read_pass(files: PassFiles, label: str) -> PassData:
    """Read one pass directory into a :class:`~rocroof.records.PassData`.

    Dispatches come from ``kernel_trace.csv`` when present, else from the dispatch columns
    of ``counter_collection.csv``. Counters are joined to dispatches on (process, dispatch id).
    Launch records (``hip_api_trace.csv``) are kept only for correlation ids of dispatches.

    Raises:
        ParseError: a file lacks a required column or holds malformed values.
    """
    dispatch_frames = []
    exact_frames = []
    for prefix, path in files.files.get("kernel_trace", []):
        df, exact = _dispatches_from_kernel_trace(path, _pid_from_prefix(prefix))
        dispatch_frames.append(df)
        exact_frames.append(exact)
    counter_frames = []
    info_frames = []
    info_exact = []
    for prefix, path in files.files.get("counter_collection", []):
        counters, info, exact = _read_counter_file(path, _pid_from_prefix(prefix))
        counter_frames.append(counters)
        info_frames.append(info)
        info_exact.append(exact)

    if dispatch_frames:
        dispatches = pd.concat(dispatch_frames, ignore_index=True)
        exact = pd.concat(exact_frames, ignore_index=True)
    elif info_frames:
        dispatches = pd.concat(info_frames, ignore_index=True)
        exact = pd.concat(info_exact, ignore_index=True)
    else:
        dispatches = empty_frame(DISPATCH_COLUMNS)
        exact = pd.Series(dtype=bool)
    dispatches = conform(dispatches, DISPATCH_COLUMNS)
    # enqueue order: dispatch ids are assigned at enqueue time, per process
    order = np.lexsort(
        (
            dispatches["dispatch_id"].fillna(-1).to_numpy(np.int64),
            dispatches["process_id"].fillna(-1).to_numpy(np.int64),
        )
    )
    dispatches = dispatches.iloc[order].reset_index(drop=True)
    exact = exact.iloc[order].reset_index(drop=True) if len(exact) else exact
    renamed = dispatches["kernel_name"].map(lambda n: n if parse_range(n) is not None else None)
    dispatches["region"] = renamed.where(renamed.notna(), dispatches["region"])

    counters = empty_frame(COUNTER_COLUMNS)
    if counter_frames:
        long = pd.concat(counter_frames, ignore_index=True)
        key = dispatches[["process_id", "dispatch_id"]].copy()
        key["row"] = np.arange(len(key), dtype=np.int64)
        if long["process_id"].isna().all() or key["process_id"].isna().all():
            joined = long.drop(columns="process_id").merge(
                key.drop(columns="process_id").drop_duplicates("dispatch_id"), on="dispatch_id", how="left"
            )
        else:
            joined = long.merge(key, on=["process_id", "dispatch_id"], how="left")
        missing = joined["row"].isna()
        if bool(missing.any()):
            first_missing = joined.loc[missing, "dispatch_id"].iloc[0]
            path = files.files["counter_collection"][0][1]
            raise ParseError(
                path,
                f"counter rows for dispatch {first_missing} have no matching kernel_trace.csv dispatch",
            )
        counters = conform(joined[["row", "counter_name", "value"]].astype({"row": "int64"}), COUNTER_COLUMNS)
        counters = counters.groupby(["row", "counter_name"], as_index=False, sort=False)["value"].sum()

    markers = pd.concat(
        [_read_markers(p) for _, p in files.files.get("marker_api_trace", [])] or [empty_frame(MARKER_COLUMNS)],
        ignore_index=True,
    )
    wanted = set(dispatches["correlation_id"].dropna().astype(np.int64).tolist())
    launches = pd.concat(
        [_read_launches(p, wanted, _pid_from_prefix(pre)) for pre, p in files.files.get("hip_api_trace", [])]
        or [empty_frame(LAUNCH_COLUMNS)],
        ignore_index=True,
    )
    notes: list[Note] = []
    if len(exact):
        dispatches["timestamps_exact"] = pd.array(exact.to_numpy(dtype=bool), dtype="boolean")
    all_exact = bool(exact.all()) if len(exact) else True
    rounded_note = None
    if not all_exact:
        sources = files.files.get("kernel_trace") or files.files.get("counter_collection") or [(None, files.directory)]
        source = sources[0][1]
        first = int(np.flatnonzero(~exact.to_numpy(dtype=bool))[0])
        rounded_note = (
            f"{source}: {int((~exact).sum())} dispatch(es) have rounded timestamps (e.g. dispatch "
            f"{dispatches['dispatch_id'].iloc[first]}); their durations are unknown"
        )
    if dispatch_frames and info_frames:
        notes += _check_counter_timestamps(files, dispatches, pd.concat(info_frames, ignore_index=True))
    return PassData(
        kind="counter" if len(counters) else "trace",
        label=label,
        source=str(files.directory),
        dispatches=dispatches,
        counters=conform(counters, COUNTER_COLUMNS),
        markers=markers,
        launches=launches,
        timestamps_exact=all_exact,
        timestamps_note=rounded_note,
        notes=notes,
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
    both = dispatches[[*key, "start_ns", "kernel_name"]].merge(
        info[[*key, "start_ns", "kernel_name"]], on=key, suffixes=("_k", "_c")
    )
    differ = (both["start_ns_k"] != both["start_ns_c"]).fillna(False) | (
        both["kernel_name_k"].fillna("") != both["kernel_name_c"].fillna("")
    )
    if not bool(differ.any()):
        return []
    path = files.files["counter_collection"][0][1]
    return [
        Note(
            "warning",
            "files-disagree",
            f"{path}: {int(differ.sum())} of {len(both)} dispatches have other timestamps or kernel names than "
            "kernel_trace.csv; the two files look like different runs (counters were matched by dispatch id)",
        )
    ]
