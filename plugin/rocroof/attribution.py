"""Kernel dispatch -> ggml op invocation, and the join of passes.

Attribution rule: a dispatch belongs to the innermost roctx/NVTX range open on its launching
host thread at the host time of its launching API call (the HIP/CUDA runtime call with the
dispatch's correlation id). GPU start times are never used: llama.cpp enqueues many kernels
and synchronises later, so kernels run after their range closed
(``shared/reference/rocprofv3-formats.md`` §4). Methods, best first:

``profiler``
    the source attributed the dispatch itself (AMD fork's ``GGML_ROOFLINE_OUT`` kernels).
``launch_api``
    the launching API call (joined by correlation id) gives thread and host time.
``kernel_rename``
    rocprofv3 ``--kernel-rename`` recorded the innermost range as the kernel's region; used only
    without a launch record, because rocprofv3 never pops roctx marks from its rename stack, so a
    mark inside a range (e.g. ``ggml-fused:``) leaves that range's name on later kernels.
``nvtx_stack``
    Nsight Compute recorded the NVTX push/pop stack of each kernel at launch; the innermost
    ggml range is the op.
``enqueue_order``
    no launch record: roctx calls and kernel launches share the process-wide internal
    correlation id counter, so the roctx call with the next lower id on the dispatch's thread
    came just before the launch; the dispatch takes the innermost range open when that call
    started. Exact for flat ranges that enclose every launch (the ggml hook); a launch after a
    pop and before the next roctx call still lands in the popped range.
``none``
    unattributed: no markers, or no ggml range held the launch (``launch_ns`` and
    ``range_row`` still say where it was launched when known).

Passes are joined per ggml invocation and kernel ordinal inside it, or by dispatch order
when a pass has no ggml markers; kernel names must agree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .markers import is_reset, parse_fused, parse_range
from .records import Note, PassData

#: Methods where the profiler recorded the dispatch's innermost range itself.
REGION_METHODS = ("kernel_rename", "nvtx_stack")

ATTRIBUTION_COLUMNS = (
    "range_row",
    "ggml_range_row",
    "invocation",
    "op",
    "node_name",
    "kernel_ordinal",
    "launch_ns",
    "method",
)


@dataclass
class PassAttribution:
    """Attribution of one pass.

    Attributes:
        dispatch: one row per dispatch (same order as ``PassData.dispatches``) with
            :data:`ATTRIBUTION_COLUMNS`: ``range_row``/``ggml_range_row`` index the pass's
            markers (innermost range / innermost ggml range), ``invocation``, ``op`` and
            ``node_name`` come from the ggml range, ``kernel_ordinal`` is the 0-based position
            of the dispatch inside its invocation (or among unattributed dispatches),
            ``launch_ns`` the host launch time when known, ``method`` as in the module doc.
        marker_depth: nesting depth of each marker row (0 = outermost; marks get the depth of
            the ranges open around them).
        fused: ``{invocation: (op_list, node_names)}`` from ``ggml-fused:`` marks.
        methods: dispatch count per method.
    """

    dispatch: pd.DataFrame
    marker_depth: pd.Series
    fused: dict[int, tuple[str, list[str]]] = field(default_factory=dict)
    methods: dict[str, int] = field(default_factory=dict)


def _sweep(
    starts: np.ndarray, ends: np.ndarray, is_ggml: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Cut one thread's ranges into segments with their innermost open range.

    Ranges are closed intervals ``[start, end]`` in ns. Returns ``(seg_start, seg_inner,
    seg_inner_ggml, depth)``: segment k covers ``[seg_start[k], seg_start[k+1])``; inner
    indexes are positions in the input arrays (-1 = none); ``depth[i]`` is the number of
    ranges that contain range i. O(R log R + R * D) for nesting depth D.

    Back-to-back ranges may share a boundary (``end[a] == start[b]``): both contain that
    instant, so a is still open when b opens, but a does not contain b and does not count
    towards b's depth.
    """
    n = len(starts)
    times = np.concatenate([starts, ends + 1])
    kinds = np.concatenate([np.zeros(n, dtype=np.int8), np.ones(n, dtype=np.int8)])  # 0 open, 1 close
    ids = np.concatenate([np.arange(n), np.arange(n)])
    # at equal times: closes first (end+1 == next start means back-to-back), then opens;
    # among opens, the longer (outer) range first so the inner one ends up innermost
    lengths = np.concatenate([-(ends - starts), np.zeros(n, dtype=ends.dtype)])
    order = np.lexsort((lengths, -kinds, times))
    open_ids: list[int] = []
    open_ggml: list[int] = []
    depth = np.zeros(n, dtype=np.int64)
    seg_start: list[int] = []
    seg_inner: list[int] = []
    seg_ggml: list[int] = []
    for k in order:
        t, kind, i = int(times[k]), int(kinds[k]), int(ids[k])  # numpy scalars -> int
        if kind == 0:
            # open ranges started at or before this one; they contain it if they end no earlier
            depth[i] = sum(1 for j in open_ids if ends[j] >= ends[i])
            open_ids.append(i)
            if is_ggml[i]:
                open_ggml.append(i)
        else:
            if open_ids and open_ids[-1] == i:
                open_ids.pop()
            else:
                open_ids.remove(i)
            if is_ggml[i]:
                if open_ggml and open_ggml[-1] == i:
                    open_ggml.pop()
                else:
                    open_ggml.remove(i)
        inner = open_ids[-1] if open_ids else -1
        inner_g = open_ggml[-1] if open_ggml else -1
        if seg_start and seg_start[-1] == t:
            seg_inner[-1], seg_ggml[-1] = inner, inner_g
        else:
            seg_start.append(t)
            seg_inner.append(inner)
            seg_ggml.append(inner_g)
    return (
        np.asarray(seg_start, dtype=np.int64),
        np.asarray(seg_inner, dtype=np.int64),
        np.asarray(seg_ggml, dtype=np.int64),
        depth,
    )


def _match_launches(d: pd.DataFrame, launches: pd.DataFrame, todo: np.ndarray) -> tuple[np.ndarray, Any, Any]:
    """Find the launching API call of each dispatch in ``todo``.

    Correlation ids are per process (each process counts its own API calls), so a dispatch
    matches the call with its (process, correlation id); the process is ignored only where
    the dispatch or the call does not record it.

    Returns:
        ``(rows, start_ns, thread_id)``: matched dispatch positions, with the host start time
        and thread of their launching call.
    """
    key = pd.DataFrame(
        {
            "row": np.arange(len(d), dtype=np.int64),
            "process_id": d["process_id"].astype("Int64").to_numpy(),
            "correlation_id": d["correlation_id"].astype("Int64").to_numpy(),
        }
    )
    key = key[todo & key["correlation_id"].notna().to_numpy()]
    calls = launches.loc[launches["correlation_id"].notna(), ["process_id", "correlation_id", "start_ns", "thread_id"]]
    calls = calls.astype({"process_id": "Int64", "correlation_id": "Int64"})
    known = key["process_id"].notna()
    exact = key[known].merge(
        calls[calls["process_id"].notna()].drop_duplicates(["process_id", "correlation_id"]),
        on=["process_id", "correlation_id"],
        how="inner",
    )
    loose = pd.concat(
        [
            # dispatch process unknown: any call with that id (the first one)
            key[~known]
            .drop(columns="process_id")
            .merge(calls.drop_duplicates("correlation_id").drop(columns="process_id"), on="correlation_id"),
            # call process unknown
            key[known]
            .drop(columns="process_id")
            .merge(
                calls[calls["process_id"].isna()].drop_duplicates("correlation_id").drop(columns="process_id"),
                on="correlation_id",
            ),
        ],
        ignore_index=True,
    )
    loose = loose[~loose["row"].isin(exact["row"])]
    hits = pd.concat([exact.drop(columns="process_id"), loose], ignore_index=True).drop_duplicates("row")
    hits = hits.sort_values("row")
    return hits["row"].to_numpy(dtype=np.int64), hits["start_ns"].to_numpy(), hits["thread_id"].to_numpy()


def _rows_or_na(rows: np.ndarray) -> Any:
    """Marker rows as a nullable integer array, -1 becoming ``<NA>``."""
    arr = pd.array(rows, dtype="Int64")
    arr[rows < 0] = pd.NA
    return arr


def _thread_key(pid: pd.Series, tid: pd.Series) -> pd.Series:
    """Threads are matched on the thread id alone.

    Linux thread ids are unique host-wide, and not every source records the pid.
    """
    return tid.astype("Int64").astype(str)


def attribute_pass(p: PassData) -> PassAttribution:
    """Attribute the dispatches of one pass to marker ranges and ggml op invocations.

    Returns:
        The :class:`PassAttribution` of the pass.
    """
    d = p.dispatches
    n = len(d)
    out = pd.DataFrame(
        {
            "range_row": pd.array([pd.NA] * n, dtype="Int64"),
            "ggml_range_row": pd.array([pd.NA] * n, dtype="Int64"),
            "invocation": d["invocation"].astype("Int64").reset_index(drop=True),
            "op": pd.Series([None] * n, dtype=object),
            "node_name": pd.Series([None] * n, dtype=object),
            "kernel_ordinal": pd.array([pd.NA] * n, dtype="Int64"),
            "launch_ns": pd.array([pd.NA] * n, dtype="Int64"),
            "method": pd.Series(["none"] * n, dtype=object),
        }
    )
    out.loc[out["invocation"].notna(), "method"] = "profiler"

    m = p.markers.reset_index(drop=True)
    parsed = [parse_range(msg) if kind == "range" else None for msg, kind in zip(m["message"], m["kind"], strict=True)]
    m_inv = pd.array([g.invocation if g else pd.NA for g in parsed], dtype="Int64")
    m_op = [g.op if g else None for g in parsed]
    m_name = [g.node_name if g else None for g in parsed]
    is_ggml = np.array([g is not None for g in parsed], dtype=bool)
    depth = pd.Series(np.zeros(len(m), dtype=np.int64))
    fused: dict[int, tuple[str, list[str]]] = {}
    for msg, kind in zip(m["message"], m["kind"], strict=True):
        if kind == "mark":
            grp = parse_fused(msg)
            if grp is not None:
                fused[grp.invocation] = (grp.op_list, list(grp.node_names))

    ranges = m.index[m["kind"] == "range"].to_numpy()
    # innermost range / ggml range by host time, per thread: (segment starts, marker rows, ggml marker rows)
    segments: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    if len(ranges):
        rkey = _thread_key(m.loc[ranges, "process_id"], m.loc[ranges, "thread_id"]).to_numpy()
        for key in pd.unique(rkey):
            sel = ranges[rkey == key]
            starts = m.loc[sel, "start_ns"].to_numpy(dtype=np.int64)
            ends = m.loc[sel, "end_ns"].to_numpy(dtype=np.int64)
            seg_start, seg_inner, seg_ggml, dep = _sweep(starts, ends, is_ggml[sel])
            depth.iloc[sel] = dep
            segments[str(key)] = (
                seg_start,
                np.where(seg_inner >= 0, sel[np.clip(seg_inner, 0, None)], -1),
                np.where(seg_ggml >= 0, sel[np.clip(seg_ggml, 0, None)], -1),
            )

    def locate(rows: np.ndarray, t: np.ndarray, key: str, method: str) -> None:
        """Attribute dispatch ``rows`` launched on thread ``key`` at host times ``t``."""
        seg_start, inner, inner_g = segments[key]
        k = np.searchsorted(seg_start, t, side="right") - 1
        r = np.where(k >= 0, inner[np.clip(k, 0, None)], -1)
        g = np.where(k >= 0, inner_g[np.clip(k, 0, None)], -1)
        out.loc[rows, "range_row"] = _rows_or_na(r)
        out.loc[rows, "ggml_range_row"] = _rows_or_na(g)
        out.loc[rows, "method"] = method

    # 2. launch API calls, joined by correlation id
    todo = (out["method"] == "none").to_numpy()
    launch_thread = pd.Series(pd.array([pd.NA] * n, dtype="Int64"))
    if len(p.launches) and todo.any():
        rows, start, thr = _match_launches(d, p.launches, todo)
        if len(rows):
            out.loc[rows, "launch_ns"] = pd.array(start, dtype="Int64")
            launch_thread[rows] = pd.array(thr, dtype="Int64")
    # 2b. --kernel-rename regions, only where no launch record exists: rocprofv3 pushes roctx marks
    # on its rename stack and never pops them (rocm-systems PR #8141), so a ggml-fused mark inside a
    # range makes that range's name stick to later kernels; the launch time is the better witness
    region = d["region"].reset_index(drop=True)
    has_region = (out["method"] == "none") & region.notna() & out["launch_ns"].isna()
    if bool(has_region.any()):
        first_row_of = {}
        for i, (msg, g) in enumerate(zip(m["message"], parsed, strict=True)):
            if g is not None and msg not in first_row_of:
                first_row_of[msg] = i
        for pos in np.flatnonzero(has_region.to_numpy()):
            i = int(pos)
            g = parse_range(region.iloc[i])
            if g is None:
                continue
            out.at[i, "invocation"] = g.invocation
            out.at[i, "op"] = g.op
            out.at[i, "node_name"] = g.node_name
            row = first_row_of.get(region.iloc[i])
            if row is not None:
                out.at[i, "range_row"] = row
                out.at[i, "ggml_range_row"] = row
            out.at[i, "method"] = p.region_method

    # a dispatch whose launch is known stays out of the enqueue-order fallback, even if no range held it
    todo = (out["method"] == "none").to_numpy()
    launched = out["launch_ns"].notna().to_numpy()
    if segments and (todo & launched).any():
        thread_of_dispatch = launch_thread.where(launch_thread.notna(), d["thread_id"].reset_index(drop=True))
        tkey = thread_of_dispatch.astype("Int64").astype(str).to_numpy()
        for key in segments:
            rows = np.flatnonzero(todo & launched & (tkey == key))
            if len(rows):
                locate(rows, out.loc[rows, "launch_ns"].to_numpy(dtype=np.int64), key, "launch_api")

    # 3. enqueue order by correlation id (no launch record). On one thread the roctx call with the
    # next lower correlation id came just before the launch, so the launch happened after that
    # call's start: attribute at that instant (ranges that closed before it cannot hold the launch;
    # one that closed between it and the launch cannot be told from one still open).
    todo = (out["method"] == "none").to_numpy() & ~launched & d["correlation_id"].notna().to_numpy()
    events = m[m["correlation_id"].notna()]
    if todo.any() and segments and len(events):
        ekey = _thread_key(events["process_id"], events["thread_id"]).to_numpy()
        dkey = _thread_key(d["process_id"], d["thread_id"]).reset_index(drop=True).to_numpy()
        for key in segments:
            mine = events[ekey == key]
            rows = np.flatnonzero(todo & (dkey == key))
            if not len(rows) or not len(mine):
                continue
            order = np.argsort(mine["correlation_id"].to_numpy(dtype=np.int64), kind="stable")
            corr = mine["correlation_id"].to_numpy(dtype=np.int64)[order]
            t_call = mine["start_ns"].to_numpy(dtype=np.int64)[order]
            j = np.searchsorted(corr, d["correlation_id"].iloc[rows].to_numpy(dtype=np.int64), side="left") - 1
            if (j >= 0).any():
                locate(rows[j >= 0], t_call[j[j >= 0]], key, "enqueue_order")

    # invocation / op / node name from the ggml range
    g_rows = out["ggml_range_row"]
    have = g_rows.notna().to_numpy() & ~out["method"].isin(REGION_METHODS).to_numpy()
    if have.any():
        idx = g_rows[have].to_numpy(dtype=np.int64)
        out.loc[have, "invocation"] = m_inv[idx]
        out.loc[have, "op"] = [m_op[i] for i in idx]
        out.loc[have, "node_name"] = [m_name[i] for i in idx]
    # no ggml range held the launch: the dispatch is unattributed, whatever located it
    lost = out["invocation"].isna().to_numpy() & out["method"].isin(["launch_api", "enqueue_order"]).to_numpy()
    out.loc[lost, "method"] = "none"
    _kernel_ordinals(out)
    if len(m):
        _mark_depths(m, depth)
    methods = out["method"].value_counts().to_dict()
    return PassAttribution(
        dispatch=out, marker_depth=depth, fused=fused, methods={str(k): int(v) for k, v in methods.items()}
    )


def _mark_depths(m: pd.DataFrame, depth: pd.Series) -> None:
    """Give marks the number of ranges open around them on their thread.

    A range ``[start, end]`` contains the mark at ``t`` when ``start <= t <= end``; that count
    is ``#(start <= t) - #(end < t)`` because a range that ended before ``t`` also started
    before it. O((M + R) log R).
    """
    is_mark = (m["kind"] == "mark").to_numpy()
    is_range = (m["kind"] == "range").to_numpy()
    if not is_mark.any() or not is_range.any():
        return
    thread = m["thread_id"].astype("Int64").astype(str).to_numpy()
    for key in pd.unique(thread[is_mark]):
        same = thread == key
        marks = np.flatnonzero(is_mark & same)
        ranges = is_range & same
        if not ranges.any():
            continue
        starts = np.sort(m.loc[ranges, "start_ns"].to_numpy(dtype=np.int64))
        ends = np.sort(m.loc[ranges, "end_ns"].to_numpy(dtype=np.int64))
        t = m.loc[marks, "start_ns"].to_numpy(dtype=np.int64)
        inside = np.searchsorted(starts, t, side="right") - np.searchsorted(ends, t, side="left")
        depth.iloc[marks] = inside


def _kernel_ordinals(out: pd.DataFrame) -> None:
    inv = out["invocation"]
    attributed = inv.notna()
    ordinal = pd.Series(np.zeros(len(out), dtype=np.int64))
    if bool(attributed.any()):
        ordinal[attributed] = out[attributed].groupby("invocation").cumcount().to_numpy()
    if bool((~attributed).any()):
        ordinal[~attributed] = np.arange(int((~attributed).sum()))
    out["kernel_ordinal"] = pd.array(ordinal, dtype="Int64")


def reset_cutoff(p: PassData, attr: PassAttribution) -> np.ndarray | None:
    """Dispatches launched before the last ``ggml reset`` mark (warm-up), or None if no reset.

    The launch is placed by host launch time when known, else by correlation id; dispatches
    with neither are kept.

    Returns:
        A boolean mask over the pass's dispatches (True = warm-up, to drop).
    """
    m = p.markers
    resets = m[(m["kind"] == "mark") & m["message"].map(is_reset)]
    if not len(resets):
        return None
    last = resets.sort_values("start_ns").iloc[-1]
    launch = attr.dispatch["launch_ns"]
    corr = p.dispatches["correlation_id"].reset_index(drop=True)
    before = pd.Series(False, index=range(len(p.dispatches)))
    if pd.notna(last["start_ns"]):
        before |= (launch < int(last["start_ns"])).fillna(False).astype(bool)
    if pd.notna(last["correlation_id"]):
        before |= (launch.isna() & (corr < int(last["correlation_id"]))).fillna(False).astype(bool)
    result: np.ndarray = before.to_numpy(dtype=bool)
    return result


_KD = re.compile(r"\s*\(\.kd\)\s*$")
# A C-style cast in front of a template literal: nsys writes ``rms_norm_f32<(int)256, (bool)1>``
# where ncu (and the source) write ``rms_norm_f32<256, 1>``.
_LITERAL_CAST = re.compile(r"\((?:[A-Za-z_][\w:]*)(?: [A-Za-z_][\w:]*)*\)(?=-?\d)")
_SPACES = re.compile(r"\s+")


def normalise_kernel_name(name: object) -> str:
    """Kernel name for cross-pass comparison.

    Drops what differs between tools for the same kernel: the `` (.kd)`` suffix of rocprofv2,
    the casts nsys puts in front of template literals (``<(int)256>`` for ncu's ``<256>``),
    and runs of white space.
    """
    if name is None:
        return ""
    text = _LITERAL_CAST.sub("", _KD.sub("", str(name)))
    return _SPACES.sub(" ", text).strip()


def join_pass(
    primary: PassData,
    primary_attr: PassAttribution,
    other: PassData,
    other_attr: PassAttribution,
) -> tuple[pd.Series, Note | None]:
    """Match the dispatches of ``other`` to those of ``primary``.

    Key: (invocation, kernel ordinal) when both passes carry ggml invocations, else the
    dispatch order. A match also needs equal kernel names (``(.kd)`` suffix ignored).

    Returns:
        ``(primary_row, note)``: for each row of ``other`` the matched row of ``primary``
        (``<NA>`` when unmatched), and a warning when some dispatches did not match.
    """
    pa, oa = primary_attr.dispatch, other_attr.dispatch
    by_invocation = bool(pa["invocation"].notna().any()) and bool(oa["invocation"].notna().any())

    def keys(attr: pd.DataFrame, n: int) -> pd.DataFrame:
        if by_invocation:
            return pd.DataFrame(
                {
                    "k1": attr["invocation"].fillna(-1).astype(np.int64),
                    "k2": attr["kernel_ordinal"].astype(np.int64),
                }
            )
        return pd.DataFrame({"k1": np.full(n, -1, dtype=np.int64), "k2": np.arange(n, dtype=np.int64)})

    pk = keys(pa, len(primary.dispatches))
    pk["prow"] = np.arange(len(pk))
    pk["pname"] = primary.dispatches["kernel_name"].map(normalise_kernel_name).to_numpy()
    ok = keys(oa, len(other.dispatches))
    ok["orow"] = np.arange(len(ok))
    ok["oname"] = other.dispatches["kernel_name"].map(normalise_kernel_name).to_numpy()
    merged = ok.merge(pk.drop_duplicates(["k1", "k2"]), on=["k1", "k2"], how="left")
    same = merged["pname"] == merged["oname"]
    matched = merged["prow"].notna() & same
    result = pd.Series(pd.array([pd.NA] * len(ok), dtype="Int64"))
    result[merged.loc[matched, "orow"].to_numpy()] = pd.array(
        merged.loc[matched, "prow"].astype(np.int64).to_numpy(), dtype="Int64"
    )
    bad = merged[~matched]
    note = None
    missing = len(pk) - int(matched.sum())  # timing-pass dispatches that this pass has no row for
    if len(bad) or len(ok) != len(pk):
        if len(bad):
            parts = [f"{other.label}: {len(bad)} of {len(ok)} dispatches do not match the timing pass {primary.label}"]
            if len(ok) != len(pk):
                parts.append(f"({len(ok)} vs {len(pk)} dispatches)")
        else:
            parts = [
                f"{other.label}: {missing} of {len(pk)} dispatches of the timing pass {primary.label} have no row in "
                f"this pass (it holds {len(ok)}; cut short, filtered, or the run ended early)"
            ]
        if len(bad):
            first = bad.iloc[0]
            where = (
                f"invocation {first['k1']} kernel {first['k2']}"
                if by_invocation and first["k1"] >= 0
                else f"dispatch #{int(first['k2']) + 1}"
            )
            theirs = first["pname"] if isinstance(first["pname"], str) else "no dispatch"
            parts.append(f"; first difference at {where}: {first['oname'][:60]!r} vs {theirs[:60]!r}")
        if len(bad):
            parts.append("; unmatched dispatches keep their counters but add nothing to the timing pass")
        note = Note("warning", "pass-mismatch", " ".join(parts).replace(" ;", ";"))
    return result, note
