"""Kernel dispatch -> ggml op invocation, and the join of passes.

Attribution rule: a dispatch belongs to the innermost roctx/NVTX range open on its launching
host thread at the host time of its launching API call (the HIP/CUDA runtime call with the
dispatch's correlation id). GPU start times are never used: llama.cpp enqueues many kernels
and synchronises later, so kernels run after their range closed
(``shared/reference/rocprofv3-formats.md`` §4). Methods, best first:

``profiler``
    the source attributed the dispatch itself (AMD fork's ``GGML_ROOFLINE_OUT`` kernels).
``kernel_rename``
    rocprofv3 ``--kernel-rename`` recorded the innermost range as the kernel's region.
``launch_api``
    the launching API call (joined by correlation id) gives thread and host time.
``enqueue_order``
    no launch record: the latest range pushed on the dispatch's thread before the dispatch
    was enqueued, ordered by the process-wide internal correlation id that roctx calls and
    kernel launches share. Exact for flat ranges that enclose every launch (the ggml hook).
``none``
    no markers: the dispatch stays unattributed.

Passes are joined per ggml invocation and kernel ordinal inside it, or by dispatch order
when a pass has no ggml markers; kernel names must agree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .markers import is_reset, parse_fused, parse_range
from .records import Note, PassData

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
    indexes are positions in the input arrays (-1 = none); ``depth[i]`` is the nesting depth
    of range i when it opened. O(R log R).
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
            depth[i] = len(open_ids)
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


def _thread_key(pid: pd.Series, tid: pd.Series) -> pd.Series:
    """Threads are matched on (pid, tid); an unknown pid matches by tid alone (Linux tids are global)."""
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

    # 1. --kernel-rename regions
    todo = out["method"] == "none"
    region = d["region"].reset_index(drop=True)
    has_region = todo & region.notna()
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
            out.at[i, "method"] = "kernel_rename"

    ranges = m.index[m["kind"] == "range"].to_numpy()
    # 2. launch API calls, joined by correlation id
    launches = p.launches
    todo = (out["method"] == "none").to_numpy()
    launch_thread = pd.Series(pd.array([pd.NA] * n, dtype="Int64"))
    if len(launches) and todo.any():
        lk = launches.dropna(subset=["correlation_id"]).drop_duplicates(subset=["correlation_id"])
        lk = lk.set_index("correlation_id")
        corr = d["correlation_id"].reset_index(drop=True)
        hit = corr.isin(lk.index).to_numpy() & todo
        if hit.any():
            start = lk["start_ns"].reindex(corr[hit]).to_numpy()
            thr = lk["thread_id"].reindex(corr[hit]).to_numpy()
            out.loc[hit, "launch_ns"] = pd.array(start, dtype="Int64")
            launch_thread[hit] = pd.array(thr, dtype="Int64")
    # depth and innermost ranges by host time, per thread
    if len(ranges):
        rm = m.loc[ranges]
        rkey = _thread_key(rm["process_id"], rm["thread_id"]).to_numpy()
        for key in pd.unique(rkey):
            sel = ranges[rkey == key]
            starts = m.loc[sel, "start_ns"].to_numpy(dtype=np.int64)
            ends = m.loc[sel, "end_ns"].to_numpy(dtype=np.int64)
            seg_start, seg_inner, seg_ggml, dep = _sweep(starts, ends, is_ggml[sel])
            depth.iloc[sel] = dep
            thread_of_dispatch = launch_thread.where(launch_thread.notna(), d["thread_id"].reset_index(drop=True))
            want = (
                (out["method"] == "none").to_numpy()
                & out["launch_ns"].notna().to_numpy()
                & (thread_of_dispatch.astype("Int64").astype(str).to_numpy() == key)
            )
            if not want.any():
                continue
            t = out.loc[want, "launch_ns"].to_numpy(dtype=np.int64)
            k = np.searchsorted(seg_start, t, side="right") - 1
            inner = np.where(k >= 0, seg_inner[np.clip(k, 0, None)], -1)
            inner_g = np.where(k >= 0, seg_ggml[np.clip(k, 0, None)], -1)
            rows = np.flatnonzero(want)
            out.loc[rows, "range_row"] = pd.array(np.where(inner >= 0, sel[np.clip(inner, 0, None)], -1), dtype="Int64")
            out.loc[rows, "ggml_range_row"] = pd.array(
                np.where(inner_g >= 0, sel[np.clip(inner_g, 0, None)], -1), dtype="Int64"
            )
            out.loc[rows, "method"] = "launch_api"
        out.loc[out["range_row"] == -1, "range_row"] = pd.NA
        out.loc[out["ggml_range_row"] == -1, "ggml_range_row"] = pd.NA
    # marks take the depth of the ranges around them (not needed for attribution)
    out.loc[(out["method"] == "none").to_numpy() & out["launch_ns"].notna().to_numpy(), "method"] = "launch_api"

    # 3. enqueue order by correlation id (no launch record)
    todo = (out["method"] == "none").to_numpy() & d["correlation_id"].notna().to_numpy()
    ranged = m.loc[ranges]
    ranged = ranged[ranged["correlation_id"].notna()]
    if todo.any() and len(ranged):
        rkey = _thread_key(ranged["process_id"], ranged["thread_id"]).to_numpy()
        dkey = _thread_key(d["process_id"], d["thread_id"]).reset_index(drop=True).to_numpy()
        for key in pd.unique(rkey):
            sel = ranged.index.to_numpy()[rkey == key]
            corr = m.loc[sel, "correlation_id"].to_numpy(dtype=np.int64)
            order = np.argsort(corr, kind="stable")
            sel, corr = sel[order], corr[order]
            sel_g = sel[is_ggml[sel]]
            corr_g = m.loc[sel_g, "correlation_id"].to_numpy(dtype=np.int64)
            want = todo & (dkey == key)
            if not want.any():
                continue
            c = d.loc[want, "correlation_id"].to_numpy(dtype=np.int64)
            k = np.searchsorted(corr, c, side="left") - 1
            kg = np.searchsorted(corr_g, c, side="left") - 1
            rows = np.flatnonzero(want)
            out.loc[rows, "range_row"] = pd.array(np.where(k >= 0, sel[np.clip(k, 0, None)], pd.NA), dtype="Int64")
            if len(sel_g):
                out.loc[rows, "ggml_range_row"] = pd.array(
                    np.where(kg >= 0, sel_g[np.clip(kg, 0, None)], pd.NA), dtype="Int64"
                )
            out.loc[rows, "method"] = "enqueue_order"

    # invocation / op / node name from the ggml range
    g_rows = out["ggml_range_row"]
    have = g_rows.notna().to_numpy() & (out["method"] != "kernel_rename").to_numpy()
    if have.any():
        idx = g_rows[have].to_numpy(dtype=np.int64)
        out.loc[have, "invocation"] = m_inv[idx]
        out.loc[have, "op"] = [m_op[i] for i in idx]
        out.loc[have, "node_name"] = [m_name[i] for i in idx]
    _kernel_ordinals(out)
    if len(m):
        _mark_depths(m, depth)
    methods = out["method"].value_counts().to_dict()
    return PassAttribution(
        dispatch=out, marker_depth=depth, fused=fused, methods={str(k): int(v) for k, v in methods.items()}
    )


def _mark_depths(m: pd.DataFrame, depth: pd.Series) -> None:
    """Give marks the depth of the innermost range open around them on their thread."""
    marks = m.index[m["kind"] == "mark"].to_numpy()
    ranges = m.index[m["kind"] == "range"].to_numpy()
    if not len(marks) or not len(ranges):
        return
    for i in marks:
        same = ranges[(m.loc[ranges, "thread_id"].astype(str) == str(m.at[i, "thread_id"])).to_numpy()]
        if not len(same):
            continue
        t = m.at[i, "start_ns"]
        inside = (m.loc[same, "start_ns"] <= t) & (m.loc[same, "end_ns"] >= t)
        depth.iloc[i] = int(inside.sum())


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


def normalise_kernel_name(name: object) -> str:
    """Kernel name for cross-pass comparison (rocprofv2 appends `` (.kd)``)."""
    return _KD.sub("", str(name)).strip() if name is not None else ""


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
    if len(bad) or len(ok) != len(pk):
        parts = [f"{other.label}: {len(bad)} of {len(ok)} dispatches do not match the timing pass {primary.label}"]
        if len(ok) != len(pk):
            parts.append(f"({len(ok)} vs {len(pk)} dispatches)")
        if len(bad):
            first = bad.iloc[0]
            where = (
                f"invocation {first['k1']} kernel {first['k2']}"
                if by_invocation and first["k1"] >= 0
                else f"dispatch #{int(first['k2']) + 1}"
            )
            theirs = first["pname"] if isinstance(first["pname"], str) else "no dispatch"
            parts.append(f"; first difference at {where}: {first['oname'][:60]!r} vs {theirs[:60]!r}")
        parts.append("; unmatched dispatches keep their counters but add nothing to the timing pass")
        note = Note("warning", "pass-mismatch", " ".join(parts).replace(" ;", ";"))
    return result, note
