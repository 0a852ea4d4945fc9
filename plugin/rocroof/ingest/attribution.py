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
``host_dispatch``
    no launching API call, but the profiler recorded the host time of the dispatch on its
    launching thread (rocprof v1 ``DispatchNs``, taken inside the launch call).
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

from ..capture.markers import (
    REGION_PART_COLUMNS,
    ggml_fields,
    parse_fused,
    parse_ranges,
    range_messages,
    reset_rows,
)
from ..memory import release_free_memory
from ..records import Note, PassData, match_rows, text_values

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
        marker_invocation: per marker row, the ggml invocation of a ggml range (``<NA>`` for
            other markers), as :func:`rocroof.capture.markers.parse_range` reads the message.
        marker_op: per marker row, the op of a ggml range (None for other markers).
        marker_node: per marker row, the node name of a ggml range (None for other markers).
        message_rebuilt: per marker row, True where the pass's message was let go (``release``)
            because :func:`rocroof.capture.markers.range_messages` gives it back from the op,
            node name and invocation; None when no message was let go.
    """

    dispatch: pd.DataFrame
    marker_depth: pd.Series
    fused: dict[int, tuple[str, list[str]]] = field(default_factory=dict)
    methods: dict[str, int] = field(default_factory=dict)
    marker_invocation: pd.Series | None = None
    marker_op: np.ndarray | None = None
    marker_node: np.ndarray | None = None
    message_rebuilt: np.ndarray | None = None


def _fresh(text: str) -> str:
    """A new string object equal to ``text`` (lone surrogates included)."""
    return text.encode("utf-8", "surrogatepass").decode("utf-8", "surrogatepass")


#: Ggml ranges whose message is rebuilt and compared at a time by :func:`attribute_pass` (``release``).
_REBUILD_BLOCK = 1 << 16


def _sweep(
    starts: np.ndarray, ends: np.ndarray, is_ggml: np.ndarray, pushed: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Cut one thread's ranges into segments with their innermost open range.

    Ranges are closed intervals ``[start, end]`` in ns. Returns ``(seg_start, seg_inner,
    seg_inner_ggml, depth)``: segment k covers ``[seg_start[k], seg_start[k+1])``; inner
    indexes are positions in the input arrays (-1 = none); ``depth[i]`` is the number of
    ranges that contain range i. O(R log R + R * D) for nesting depth D: one sort, then one
    pass over the 2R open/close events with the open ranges on a stack.

    Back-to-back ranges may share a boundary (``end[a] == start[b]``): both contain that
    instant, so a is still open when b opens, but a does not contain b and does not count
    towards b's depth.

    Ranges that nest (the usual case) are swept with sorts and binary searches instead
    (:func:`_sweep_nested`, O(R log R)); the loop below handles the others.

    ``pushed`` (the ranges' roctx/NVTX correlation ids, or None) orders ranges with the same
    start and end: the one pushed later opens later and closes first, so it is the inner one.
    Without it such ranges nest in input order (a profiler may list them as popped: inner first).
    """
    n = len(starts)
    # a range closes just after its end (saturating: a damaged end at the int64 limit must not wrap)
    closes = np.where(ends < np.iinfo(np.int64).max, ends + 1, ends)
    times = np.concatenate([starts, closes])
    kinds = np.concatenate([np.zeros(n, dtype=np.int8), np.ones(n, dtype=np.int8)])  # 0 open, 1 close
    ids = np.concatenate([np.arange(n), np.arange(n)])
    # at equal times: closes first (end+1 == next start means back-to-back), then opens;
    # among opens (equal starts), the longer (outer) range first so the inner one ends up
    # innermost: the later end first, as ~end (exact integers: float lengths lost the last ns of
    # timestamps past 2**53, and -end overflows at the int64 minimum)
    lengths = np.concatenate([~ends.astype(np.int64), np.zeros(n, dtype=np.int64)])
    if pushed is not None:  # identical ranges: the later push opens after and closes before the earlier
        push = pushed.astype(np.int64)
        order = np.lexsort((np.concatenate([push, ~push]), lengths, -kinds, times))
        del push
    else:
        order = np.lexsort((lengths, -kinds, times))
    del lengths, closes
    # the events in that order; the unordered ones go (not both at once: 2R events of ~10^6 ranges)
    times = times[order]
    kinds = kinds[order]
    ids = ids[order]
    del order
    nested = _sweep_nested(times, kinds, ids, ends, is_ggml)
    if nested is not None:
        return nested
    end_of = ends.tolist()
    ggml = is_ggml.tolist()
    open_ids: list[int] = []
    open_ggml: list[int] = []
    depth = np.zeros(n, dtype=np.int64)
    seg_start = np.empty(2 * n, dtype=np.int64)
    seg_inner = np.empty(2 * n, dtype=np.int64)
    seg_ggml = np.empty(2 * n, dtype=np.int64)
    segments = 0
    last = None
    # the events a block at a time: Python ints for one block only, segments straight into arrays
    for lo in range(0, 2 * n, _SWEEP_BLOCK):
        block = slice(lo, lo + _SWEEP_BLOCK)
        out_start: list[int] = []
        out_inner: list[int] = []
        out_ggml: list[int] = []
        for t, kind, i in zip(times[block].tolist(), kinds[block].tolist(), ids[block].tolist(), strict=True):
            if kind == 0:
                # open ranges started at or before this one; they contain it if they end no earlier
                e = end_of[i]
                depth[i] = sum(1 for j in open_ids if end_of[j] >= e)
                open_ids.append(i)
                if ggml[i]:
                    open_ggml.append(i)
            else:
                if open_ids and open_ids[-1] == i:
                    open_ids.pop()
                else:
                    open_ids.remove(i)
                if ggml[i]:
                    if open_ggml and open_ggml[-1] == i:
                        open_ggml.pop()
                    else:
                        open_ggml.remove(i)
            inner = open_ids[-1] if open_ids else -1
            inner_g = open_ggml[-1] if open_ggml else -1
            if last == t:  # events at one instant make one segment: the last state wins
                if out_start:
                    out_inner[-1], out_ggml[-1] = inner, inner_g
                else:
                    seg_inner[segments - 1], seg_ggml[segments - 1] = inner, inner_g
            else:
                out_start.append(t)
                out_inner.append(inner)
                out_ggml.append(inner_g)
                last = t
        k = len(out_start)
        seg_start[segments : segments + k] = out_start
        seg_inner[segments : segments + k] = out_inner
        seg_ggml[segments : segments + k] = out_ggml
        segments += k
    return seg_start[:segments].copy(), seg_inner[:segments].copy(), seg_ggml[:segments].copy(), depth


def _top_of_stack(is_open: np.ndarray, step: np.ndarray) -> np.ndarray:
    """Per event of a last-in-first-out sequence: the event position of the innermost open item after it.

    ``step`` is +1 for an open, -1 for a close, 0 for an event that does not touch this stack;
    ``is_open`` marks the opens. Returns -1 where nothing is open. With ``level`` the number of
    open items after each event, the innermost one after event k is the last open at or before k
    whose own level equals ``level[k]`` (the opens above it have closed since): one sort of the
    opens by (level, position) and a binary search per event.
    """
    total = len(step)
    level = np.cumsum(step, dtype=np.int64)
    opens = np.flatnonzero(is_open)
    if not len(opens):
        return np.full(total, -1, dtype=np.int64)
    span = total + 1
    key = level[opens] * span + opens  # sorted by level, then position (level <= total, no overflow)
    order = np.argsort(key, kind="stable")
    key, opens = key[order], opens[order]
    del order
    out = np.empty(total, dtype=np.int64)
    # a block of events at a time: the search's temporaries are of one block, not of every event
    for lo in range(0, total, _SEARCH_BLOCK):
        lev = level[lo : lo + _SEARCH_BLOCK]
        at = np.searchsorted(key, lev * span + np.arange(lo, lo + len(lev), dtype=np.int64), side="right") - 1
        found = (at >= 0) & (lev > 0)
        np.clip(at, 0, None, out=at)
        found &= key[at] // span == lev
        out[lo : lo + len(lev)] = np.where(found, opens[at], -1)
    return out


#: Events searched at a time by :func:`_top_of_stack` (~2 MB of int64 temporaries each).
_SEARCH_BLOCK = 1 << 18


def _sweep_nested(
    times: np.ndarray, kinds: np.ndarray, ids: np.ndarray, ends: np.ndarray, is_ggml: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """:func:`_sweep` without a Python loop, for ranges that nest (every close ends the innermost open range).

    Takes the events in :func:`_sweep`'s order (``kinds`` 0 open, 1 close; ``ids`` the range).
    Ranges pushed and popped on one thread (roctx, NVTX, the llama.cpp hook) always nest; for
    them the innermost open range is the top of a stack (:func:`_top_of_stack`), and every range
    open when range i opens closes after it, so its depth is the number of ranges then open. None
    when the ranges do not nest, or an end is at the int64 limit (its close saturates): the loop
    of :func:`_sweep` handles those.
    """
    n = len(ends)
    if n == 0 or bool((ends >= np.iinfo(np.int64).max - 1).any()):
        return None
    is_open = kinds == 0
    step = np.where(is_open, 1, -1).astype(np.int8)
    top = _top_of_stack(is_open, step)
    # nesting: each close finds its own range on top just before it (the state after the previous event)
    closing = np.flatnonzero(~is_open)
    before = np.r_[-1, top[:-1]][closing]
    nests = not bool((before < 0).any()) and bool((ids[np.clip(before, 0, None)] == ids[closing]).all())
    del closing, before
    if not nests:
        return None
    # events at one instant make one segment: the state after the last of them
    last = np.flatnonzero(np.r_[times[1:] != times[:-1], True])
    top = top[last]
    inner = np.where(top >= 0, ids[np.clip(top, 0, None)], -1)
    del top
    ggml_event = is_ggml[ids]
    g_top = _top_of_stack(is_open & ggml_event, np.where(ggml_event, step, 0).astype(np.int8))[last]
    del ggml_event
    inner_g = np.where(g_top >= 0, ids[np.clip(g_top, 0, None)], -1)
    del g_top
    depth = np.zeros(n, dtype=np.int64)
    opened = np.flatnonzero(is_open)
    depth[ids[opened]] = np.cumsum(step, dtype=np.int64)[opened] - 1
    return times[last], inner, inner_g, depth


#: Open/close events of :func:`_sweep` turned into Python values at a time.
_SWEEP_BLOCK = 1 << 16


def _match_launches(d: pd.DataFrame, launches: pd.DataFrame, todo: np.ndarray) -> tuple[np.ndarray, Any, Any]:
    """Find the launching API call of each dispatch in ``todo``.

    Correlation ids are per process (each process counts its own API calls), so a dispatch
    matches the call with its (process, correlation id); the process is ignored only where
    the dispatch or the call does not record it. When several calls share a key, the first one
    (in ``launches`` order) is the launch. A sort-based join (:func:`rocroof.records.match_rows`).

    Returns:
        ``(rows, start_ns, thread_id)``: matched dispatch positions (ascending), with the host
        start time and thread of their launching call (nullable ``Int64``).
    """
    d_corr = d["correlation_id"].astype("Int64")
    rows = np.flatnonzero(todo & d_corr.notna().to_numpy(dtype=bool))
    c_corr = launches["correlation_id"].astype("Int64")
    calls = np.flatnonzero(c_corr.notna().to_numpy(dtype=bool))
    empty = np.zeros(0, dtype=np.int64)
    if not len(rows) or not len(calls):
        return empty, pd.array(empty, dtype="Int64"), pd.array(empty, dtype="Int64")
    d_pid = d["process_id"].astype("Int64")
    c_pid = launches["process_id"].astype("Int64")
    corr_r = _known_values(d_corr, rows)
    corr_c = _known_values(c_corr, calls)
    one = _one_process(d_pid, c_pid)
    release_free_memory()  # the checks' temporaries, and the spilled ids' pages they read
    if one:  # a per-process capture: the correlation id alone (no key copies)
        hit = match_rows([corr_c], [corr_r])
        del corr_r, corr_c
        release_free_memory()
        return _launch_fields(rows, calls, hit, launches)
    pid_r = d_pid.to_numpy(dtype=np.int64, na_value=0)[rows]
    pid_c = c_pid.to_numpy(dtype=np.int64, na_value=0)[calls]
    known_r = d_pid.notna().to_numpy(dtype=bool)[rows]
    known_c = c_pid.notna().to_numpy(dtype=bool)[calls]
    hit = np.full(len(rows), -1, dtype=np.int64)
    if known_r.all() and known_c.all():  # process known everywhere (the usual case): no copies
        hit = match_rows([pid_c, corr_c], [pid_r, corr_r])
    elif known_r.any() and known_c.any():  # process known on both sides
        among = np.flatnonzero(known_c)
        found = match_rows([pid_c[among], corr_c[among]], [pid_r[known_r], corr_r[known_r]])
        hit[known_r] = np.where(found >= 0, among[np.clip(found, 0, None)], -1)
        del among, found
    if (~known_r).any():  # dispatch process unknown: any call with that id
        hit[~known_r] = match_rows([corr_c], [corr_r[~known_r]])
    loose = known_r & (hit < 0)
    if loose.any() and (~known_c).any():  # call process unknown
        among = np.flatnonzero(~known_c)
        found = match_rows([corr_c[among]], [corr_r[loose]])
        hit[loose] = np.where(found >= 0, among[np.clip(found, 0, None)], -1)
    return _launch_fields(rows, calls, hit, launches)


def _known_values(column: pd.Series, rows: np.ndarray) -> np.ndarray:
    """``column``'s int64 values at ``rows`` (positions where it holds one), without a whole-length copy first.

    All rows: the column's own values (a read-only view; a spilled column's mapping, not a copy).
    """
    values: np.ndarray = column.array._data  # noqa: SLF001 (an Int64 array's values, read only here)
    return values if len(rows) == len(values) else values[rows]


def _one_process(d_pid: pd.Series, c_pid: pd.Series) -> bool:
    """True when every dispatch and every call record the same process id (min and max, no copies)."""
    if not len(d_pid) or not len(c_pid) or d_pid.hasnans or c_pid.hasnans:
        return False
    return bool(d_pid.min() == d_pid.max() == c_pid.min() == c_pid.max())


def _launch_fields(
    rows: np.ndarray, calls: np.ndarray, hit: np.ndarray, launches: pd.DataFrame
) -> tuple[np.ndarray, Any, Any]:
    """:func:`_match_launches`' answer from each row's matched call (``hit``: a position in ``calls``, -1: none)."""
    matched = hit >= 0
    picked = calls[hit[matched]]
    start = launches["start_ns"].astype("Int64").array[picked]
    thread = launches["thread_id"].astype("Int64").array[picked]
    return rows[matched], start, thread


#: The thread key of a missing thread id (see :func:`_thread_keys`).
_NO_THREAD = np.iinfo(np.int64).min


def _thread_keys(tid: pd.Series) -> np.ndarray:
    """Threads are matched on the thread id alone, as int64 keys (missing ids share one key).

    Linux thread ids are unique host-wide, and not every source records the pid.
    """
    keys: np.ndarray = tid.astype("Int64").to_numpy(dtype=np.int64, na_value=_NO_THREAD)
    return keys


def _int64_or_na(values: np.ndarray, known: np.ndarray) -> Any:
    """A nullable ``Int64`` array of ``values``, ``<NA>`` where not ``known``."""
    return pd.arrays.IntegerArray(values.astype(np.int64, copy=False), ~known)


def attribute_pass(p: PassData, *, release: bool = False) -> PassAttribution:
    """Attribute the dispatches of one pass to marker ranges and ggml op invocations.

    Every step is vectorised over the pass's dispatches and markers: O((N + M) log M) for N
    dispatches and M markers (a sort of each thread's ranges, a binary search per dispatch),
    plus O(M * D) for the nesting depth D of the ranges.

    With ``release``, the pass gives up what its rows no longer need once attributed, before the
    rest of the attribution is built (the pass cannot be attributed again): its launch calls once
    joined to its dispatches (``p.launches`` loses its rows: ~50 MB at 10^6 dispatches), and the
    message text of each ggml range that its op, node name and invocation give back exactly
    (``p.markers["message"]`` None there, :attr:`PassAttribution.message_rebuilt`: ~70 MB of
    strings at 10^6 ranges; :func:`rocroof.ingest.pipeline.with_range_messages` puts them back).

    Returns:
        The :class:`PassAttribution` of the pass.
    """
    d = p.dispatches
    n = len(d)
    given = d["invocation"].astype("Int64").reset_index(drop=True)
    has_inv = np.array(given.notna().to_numpy(dtype=bool))  # copies: pandas hands out read-only views
    invocation = np.array(given.to_numpy(dtype=np.int64, na_value=0))
    range_row = np.full(n, -1, dtype=np.int64)
    ggml_row = np.full(n, -1, dtype=np.int64)
    op = np.full(n, None, dtype=object)
    node_name = np.full(n, None, dtype=object)
    launch_ns = np.zeros(n, dtype=np.int64)
    launched = np.zeros(n, dtype=bool)
    method = np.empty(n, dtype=object)
    method[:] = "none"  # one string object for every row (np.full would make one per row: ~60 MB at 10^6)
    method[has_inv] = "profiler"

    m = p.markers.reset_index(drop=True)
    kinds = m["kind"].to_numpy(dtype=object)
    is_range_row = kinds == "range"
    messages = text_values(m["message"])
    # a reader may have let go of the ranges' messages already (compact_ranges): their parts are columns
    is_ggml, m_inv_values, m_op, m_name, compacted = ggml_fields(m)
    m_inv = _int64_or_na(m_inv_values, is_ggml)
    depth = np.zeros(len(m), dtype=np.int64)
    fused: dict[int, tuple[str, list[str]]] = {}
    names: dict[str, str] = {}  # one string per distinct op list and node name (every evaluation repeats them)
    for msg in messages[kinds == "mark"].tolist():
        grp = parse_fused(msg)
        if grp is not None:
            op_list = grp.op_list
            fused[grp.invocation] = (
                names.setdefault(op_list, op_list),
                [names.setdefault(x, x) for x in grp.node_names],
            )

    rebuilt: np.ndarray | None = compacted if compacted.any() else None
    if release and (is_ggml & ~compacted).any():
        # the ranges' messages, where op, node name and invocation give them back exactly, are let
        # go: the pass's marker frame and this function hold the only references to the strings
        ggml_rows = np.flatnonzero(is_ggml & ~compacted)
        same = np.zeros(len(ggml_rows), dtype=bool)
        for lo in range(0, len(ggml_rows), _REBUILD_BLOCK):  # a block of rebuilt strings at a time
            rows = ggml_rows[lo : lo + _REBUILD_BLOCK]
            again = range_messages(m_op[rows], m_name[rows], m_inv_values[rows])
            same[lo : lo + len(rows)] = [a == b for a, b in zip(again, messages[rows].tolist(), strict=True)]
            del again
        if same.any():
            rebuilt = compacted.copy()
            rebuilt[ggml_rows[same]] = True
            kept = messages.copy()
            kept[rebuilt] = None
            # the other messages as new strings: the old ones then all go, and the allocator's arenas
            # they filled with them (freed strings among kept ones would hold every arena)
            others = np.flatnonzero(~rebuilt & np.array([type(v) is str for v in kept.tolist()], dtype=bool))
            kept[others] = [_fresh(v) for v in kept[others].tolist()]
            column = pd.Series(kept, dtype=object, index=p.markers.index, copy=False)  # None, not NaN
            p.markers["message"] = column
            m["message"] = column.set_axis(m.index)
            messages = kept
        del ggml_rows, same
    ranges = np.flatnonzero(is_range_row)
    # innermost range / ggml range by host time, per thread: (segment starts, marker rows, ggml marker rows)
    segments: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    if len(ranges):
        rkey = _thread_keys(m["thread_id"].iloc[ranges])
        range_start = m["start_ns"].iloc[ranges].to_numpy(dtype=np.int64)
        range_end = m["end_ns"].iloc[ranges].to_numpy(dtype=np.int64)
        range_corr = m["correlation_id"].iloc[ranges].astype("Int64")
        corr_known = range_corr.notna().to_numpy(dtype=bool)
        corr = range_corr.to_numpy(dtype=np.int64, na_value=0)
        by_thread = np.argsort(rkey, kind="stable")
        bounds = np.flatnonzero(np.diff(rkey[by_thread])) + 1
        for group in np.split(by_thread, bounds):
            sel = ranges[group]
            pushed = corr[group] if bool(corr_known[group].all()) else None  # push order, where every range has it
            seg_start, seg_inner, seg_ggml, dep = _sweep(range_start[group], range_end[group], is_ggml[sel], pushed)
            depth[sel] = dep
            segments[int(rkey[group[0]])] = (
                seg_start,
                np.where(seg_inner >= 0, sel[np.clip(seg_inner, 0, None)], -1),
                np.where(seg_ggml >= 0, sel[np.clip(seg_ggml, 0, None)], -1),
            )
            del seg_start, seg_inner, seg_ggml, dep
            release_free_memory()  # this thread's sweep temporaries, before the next thread's
        # the ranges' columns go (the sweeps' segments hold what locating needs): ~50 MB at 10^6 ranges
        del rkey, range_start, range_end, range_corr, corr_known, corr, by_thread, bounds
    del ranges, kinds, is_range_row

    release_free_memory()  # the sweeps' temporaries

    def locate(rows: np.ndarray, t: np.ndarray, key: int, how: str) -> None:
        """Attribute dispatch ``rows`` launched on thread ``key`` at host times ``t``."""
        seg_start, inner, inner_g = segments[key]
        k = np.searchsorted(seg_start, t, side="right") - 1
        range_row[rows] = np.where(k >= 0, inner[np.clip(k, 0, None)], -1)
        ggml_row[rows] = np.where(k >= 0, inner_g[np.clip(k, 0, None)], -1)
        method[rows] = how

    # 2. launch API calls, joined by correlation id
    todo = method == "none"
    launch_thread = np.full(n, _NO_THREAD, dtype=np.int64)
    has_launch_thread = np.zeros(n, dtype=bool)
    if len(p.launches) and todo.any():
        rows, start, thr = _match_launches(d, p.launches, todo)
        if len(rows):
            start_known = pd.array(start, dtype="Int64")
            known = ~np.asarray(pd.isna(start_known), dtype=bool)
            launch_ns[rows[known]] = start_known[known].to_numpy(dtype=np.int64)
            launched[rows[known]] = True
            thr_known = pd.array(thr, dtype="Int64")
            tk = ~np.asarray(pd.isna(thr_known), dtype=bool)
            launch_thread[rows[tk]] = thr_known[tk].to_numpy(dtype=np.int64)
            has_launch_thread[rows[tk]] = True
            del start_known, known, thr_known, tk
        del rows, start, thr
        if release:
            p.launches = p.launches.iloc[:0].copy()  # a fresh frame: a slice would keep the arrays
        release_free_memory()  # the join's temporaries
    # 2a. the dispatch's own host time on its launching thread (rocprof v1 DispatchNs)
    own = (method == "none") & ~launched & d["launch_ns"].notna().to_numpy(dtype=bool)
    if own.any():
        launch_ns[own] = d["launch_ns"].to_numpy(dtype=np.int64, na_value=0)[own]
        launched[own] = True
    own_time = own
    # 2b. --kernel-rename regions, only where no launch record exists: rocprofv3 pushes roctx marks
    # on its rename stack and never pops them (rocm-systems PR #8141), so a ggml-fused mark inside a
    # range makes that range's name stick to later kernels; the launch time is the better witness
    region = text_values(d["region"])
    # a reader may have let go of the regions' texts (Nsight Compute: REGION_PART_COLUMNS): their parts
    parts = REGION_PART_COLUMNS[0] in d.columns
    compact = d[REGION_PART_COLUMNS[0]].notna().to_numpy(dtype=bool) if parts else np.zeros(n, dtype=bool)
    has_region = (method == "none") & (~np.asarray(pd.isna(region), dtype=bool) | compact) & ~launched
    if has_region.any():
        candidates = np.flatnonzero(has_region)
        r_ggml = np.zeros(len(candidates), dtype=bool)
        r_inv = np.zeros(len(candidates), dtype=np.int64)
        r_op = np.full(len(candidates), None, dtype=object)
        r_name = np.full(len(candidates), None, dtype=object)
        as_text = np.flatnonzero(~compact[candidates])
        if len(as_text):
            r_ggml[as_text], r_inv[as_text], r_op[as_text], r_name[as_text] = parse_ranges(region[candidates[as_text]])
        as_parts = np.flatnonzero(compact[candidates])
        if len(as_parts):
            at_rows = candidates[as_parts]
            r_ggml[as_parts] = True
            r_inv[as_parts] = d[REGION_PART_COLUMNS[2]].to_numpy(dtype=np.int64, na_value=0)[at_rows]
            r_op[as_parts] = text_values(d[REGION_PART_COLUMNS[0]])[at_rows]
            r_name[as_parts] = text_values(d[REGION_PART_COLUMNS[1]])[at_rows]
        rows = candidates[r_ggml]
        invocation[rows] = r_inv[r_ggml]
        has_inv[rows] = True
        op[rows] = r_op[r_ggml]
        node_name[rows] = r_name[r_ggml]
        method[rows] = p.region_method
        # the first ggml range row with the region's message, when the pass recorded the ranges
        ggml_rows = np.flatnonzero(is_ggml)
        if len(ggml_rows):
            texts = messages[ggml_rows]
            if rebuilt is not None:  # the messages let go, rebuilt for the lookup
                back = np.flatnonzero(rebuilt[ggml_rows])
                texts[back] = range_messages(
                    m_op[ggml_rows[back]], m_name[ggml_rows[back]], m_inv_values[ggml_rows[back]]
                )
            first_row_of = pd.Series(ggml_rows, index=texts).groupby(level=0, sort=False).first()
            wanted = region[rows].copy()
            given_back = np.flatnonzero(compact[rows])  # the regions let go, rebuilt for the lookup
            wanted[given_back] = range_messages(
                op[rows[given_back]], node_name[rows[given_back]], invocation[rows[given_back]]
            )
            found = first_row_of.reindex(wanted).to_numpy(dtype=np.float64)
            at = ~np.isnan(found)
            range_row[rows[at]] = found[at].astype(np.int64)
            ggml_row[rows[at]] = found[at].astype(np.int64)
            del first_row_of, found, at, texts, wanted
        del candidates, r_ggml, r_inv, r_op, r_name, rows, ggml_rows
    del region, has_region

    # a dispatch whose launch is known stays out of the enqueue-order fallback, even if no range held it
    todo = method == "none"
    if segments and (todo & launched).any():
        thread_of_dispatch = np.where(has_launch_thread, launch_thread, _thread_keys(d["thread_id"]))
        for key in segments:
            rows = np.flatnonzero(todo & launched & (thread_of_dispatch == key))
            if len(rows):
                locate(rows, launch_ns[rows], key, "launch_api")
                mine = rows[own_time[rows]]
                method[mine] = "host_dispatch"
        del thread_of_dispatch
    del launch_thread, has_launch_thread

    # 3. enqueue order by correlation id (no launch record). On one thread the roctx call with the
    # next lower correlation id came just before the launch, so the launch happened after that
    # call's start: attribute at that instant (ranges that closed before it cannot hold the launch;
    # one that closed between it and the launch cannot be told from one still open).
    d_corr = d["correlation_id"].astype("Int64").reset_index(drop=True)
    todo = (method == "none") & ~launched & d_corr.notna().to_numpy(dtype=bool)
    events = m[m["correlation_id"].notna()]
    if todo.any() and segments and len(events):
        ekey = _thread_keys(events["thread_id"])
        dkey = _thread_keys(d["thread_id"].reset_index(drop=True))
        corr_of_dispatch = d_corr.to_numpy(dtype=np.int64, na_value=0)
        for key in segments:
            mine = events[ekey == key]
            rows = np.flatnonzero(todo & (dkey == key))
            if not len(rows) or not len(mine):
                continue
            order = np.argsort(mine["correlation_id"].to_numpy(dtype=np.int64), kind="stable")
            corr = mine["correlation_id"].to_numpy(dtype=np.int64)[order]
            t_call = mine["start_ns"].to_numpy(dtype=np.int64)[order]
            j = np.searchsorted(corr, corr_of_dispatch[rows], side="left") - 1
            if (j >= 0).any():
                locate(rows[j >= 0], t_call[j[j >= 0]], key, "enqueue_order")
        del ekey, dkey, corr_of_dispatch
    del d_corr, todo, events

    # invocation / op / node name from the ggml range
    have = (ggml_row >= 0) & ~np.isin(method, REGION_METHODS)
    if have.any():
        idx = ggml_row[have]
        invocation[have] = m_inv_values[idx]
        has_inv[have] = is_ggml[idx]
        op[have] = m_op[idx]
        node_name[have] = m_name[idx]
        del idx
    del have
    segments.clear()  # located: the segments are not needed again
    # no ggml range held the launch: the dispatch is unattributed, whatever located it
    lost = ~has_inv & np.isin(method, ("launch_api", "host_dispatch", "enqueue_order"))
    method[lost] = "none"
    out = pd.DataFrame(
        {
            "range_row": _int64_or_na(range_row, range_row >= 0),
            "ggml_range_row": _int64_or_na(ggml_row, ggml_row >= 0),
            "invocation": _int64_or_na(invocation, has_inv),
            "op": pd.Series(op, dtype=object, copy=False),
            "node_name": pd.Series(node_name, dtype=object, copy=False),
            "kernel_ordinal": _kernel_ordinals(invocation, has_inv),
            "launch_ns": _int64_or_na(launch_ns, launched),
            "method": pd.Series(method, dtype=object, copy=False),
        },
        copy=False,  # the arrays above are this function's own: no second copy of each (~60 MB at 10^6)
    )
    marker_depth = pd.Series(depth)
    if len(m):
        _mark_depths(m, marker_depth)
    return PassAttribution(
        dispatch=out,
        marker_depth=marker_depth,
        fused=fused,
        methods={str(k): int(v) for k, v in out["method"].value_counts().items()},
        marker_invocation=pd.Series(m_inv),
        marker_op=m_op,
        marker_node=m_name,
        message_rebuilt=rebuilt,
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
    thread = _thread_keys(m["thread_id"])
    for key in pd.unique(thread[is_mark]).tolist():
        same = thread == key
        marks = np.flatnonzero(is_mark & same)
        ranges = is_range & same
        if not ranges.any():
            continue
        starts = np.sort(m["start_ns"].to_numpy()[ranges].astype(np.int64))
        ends = np.sort(m["end_ns"].to_numpy()[ranges].astype(np.int64))
        t = m["start_ns"].to_numpy()[marks].astype(np.int64)
        inside = np.searchsorted(starts, t, side="right") - np.searchsorted(ends, t, side="left")
        depth.iloc[marks] = inside


def _kernel_ordinals(invocation: np.ndarray, attributed: np.ndarray) -> pd.arrays.IntegerArray:
    """Each dispatch's position among those of its invocation (``kernel_ordinal``), shape (n,).

    ``invocation``: each dispatch's invocation (int64), meaningful where ``attributed``. In
    dispatch order; unattributed dispatches are numbered among themselves. A stable sort, no
    grouped copy of the frame; the temporaries are let go as they are used (~8 MB each at 10^6).
    """
    ordinal = np.zeros(len(invocation), dtype=np.int64)
    rows = np.flatnonzero(attributed)
    if len(rows):
        values = invocation[rows]
        order = np.argsort(values, kind="stable")
        values = values[order]
        starts = np.ones(len(values), dtype=bool)
        np.not_equal(values[1:], values[:-1], out=starts[1:])
        del values
        position = np.arange(len(order), dtype=np.int64)
        first_of_group = np.where(starts, position, 0)
        del starts
        np.maximum.accumulate(first_of_group, out=first_of_group)
        position -= first_of_group
        del first_of_group
        ordinal[rows[order]] = position
        del position, order
    del rows
    if not attributed.all():
        unattributed = ~attributed
        ordinal[unattributed] = np.arange(int(unattributed.sum()))
    return pd.arrays.IntegerArray(ordinal, np.zeros(len(ordinal), dtype=bool))


def reset_cutoff(p: PassData, attr: PassAttribution) -> np.ndarray | None:
    """Dispatches launched before the last ``ggml reset`` mark (warm-up), or None if no reset.

    The launch is placed by host launch time when known, else by correlation id; dispatches
    with neither are kept.

    Returns:
        A boolean mask over the pass's dispatches (True = warm-up, to drop).
    """
    m = p.markers
    resets = m[reset_rows(m)]
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


def _normalised_names(names: pd.Series) -> np.ndarray:
    """:func:`normalise_kernel_name` of each name, computed once per distinct name."""
    codes, uniques = pd.factorize(text_values(names), use_na_sentinel=False)
    table = np.array([*(normalise_kernel_name(u) for u in uniques), ""], dtype=object)[:-1]
    out: np.ndarray = table[codes]
    return out


def join_pass(
    primary: PassData,
    primary_attr: PassAttribution,
    other: PassData,
    other_attr: PassAttribution,
) -> tuple[pd.Series, Note | None]:
    """Match the dispatches of ``other`` to those of ``primary``.

    Key: (invocation, kernel ordinal) when both passes carry ggml invocations, else the
    dispatch order, or the dispatch id when both passes have unique ids, the passes differ (in
    length or in what the order matches) and the ids match at least as many dispatches (a pass
    that profiled a subset of the dispatches). A match also
    needs equal kernel names (``(.kd)`` suffix ignored).

    Returns:
        ``(primary_row, note)``: for each row of ``other`` the matched row of ``primary``
        (``<NA>`` when unmatched), and a warning when some dispatches did not match.
    """
    pa, oa = primary_attr.dispatch, other_attr.dispatch
    by_invocation = bool(pa["invocation"].notna().any()) and bool(oa["invocation"].notna().any())
    by_id = False

    def keys(attr: pd.DataFrame, d: pd.DataFrame) -> pd.DataFrame:
        n = len(d)
        if by_invocation:
            return pd.DataFrame(
                {
                    "k1": attr["invocation"].fillna(-1).astype(np.int64),
                    "k2": attr["kernel_ordinal"].astype(np.int64),
                }
            )
        if by_id:
            return pd.DataFrame({"k1": np.full(n, -1, dtype=np.int64), "k2": d["dispatch_id"].astype(np.int64)})
        return pd.DataFrame({"k1": np.full(n, -1, dtype=np.int64), "k2": np.arange(n, dtype=np.int64)})

    def join() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.Series]:
        pk = keys(pa, primary.dispatches)
        pk["prow"] = np.arange(len(pk))
        pk["pname"] = _normalised_names(primary.dispatches["kernel_name"])
        ok = keys(oa, other.dispatches)
        ok["orow"] = np.arange(len(ok))
        ok["oname"] = _normalised_names(other.dispatches["kernel_name"])
        merged = ok.merge(pk.drop_duplicates(["k1", "k2"]), on=["k1", "k2"], how="left")
        return pk, ok, merged, merged["prow"].notna() & (merged["pname"] == merged["oname"])

    pk, ok, merged, matched = join()
    ids_known = all(
        len(d) and bool(d["dispatch_id"].notna().all()) and not bool(d["dispatch_id"].duplicated().any())
        for d in (primary.dispatches, other.dispatches)
    )
    if not by_invocation and ids_known and (not bool(matched.all()) or len(pk) != len(ok)):
        # passes that profiled different dispatches (a kernel filter, a dispatch the tool skipped): the
        # dispatch ids, which count the application's dispatches the same way in every run, line them up;
        # by position, a pass missing its first dispatch would give each dispatch its neighbour's counters
        by_id = True
        pk_id, ok_id, merged_id, matched_id = join()
        if int(matched_id.sum()) >= int(matched.sum()):
            pk, ok, merged, matched = pk_id, ok_id, merged_id, matched_id
        else:
            by_id = False
    result = pd.Series(pd.array([pd.NA] * len(ok), dtype="Int64"))
    result[merged.loc[matched, "orow"].to_numpy()] = pd.array(
        merged.loc[matched, "prow"].astype(np.int64).to_numpy(), dtype="Int64"
    )
    bad = merged[~matched]
    first_difference = None
    if len(bad):
        first = bad.iloc[0]
        if by_invocation and first["k1"] >= 0:
            where = f"invocation {first['k1']} kernel {first['k2']}"
        else:
            where = f"dispatch id {int(first['k2'])}" if by_id else f"dispatch #{int(first['k2']) + 1}"
        theirs = first["pname"] if isinstance(first["pname"], str) else "no dispatch"
        first_difference = f"{FIRST_DIFFERENCE}{where}: {first['oname'][:60]!r} vs {theirs[:60]!r}"
    note = pass_mismatch_note(other.label, primary.label, len(ok), len(pk), int(matched.sum()), first_difference)
    return result, note


#: How a ``pass-mismatch`` note names the first counter-pass dispatch that matched no timing
#: dispatch, and how it ends when some did not match.
FIRST_DIFFERENCE = "; first difference at "
UNMATCHED_TAIL = "; unmatched dispatches keep their counters but add nothing to the timing pass"


def pass_mismatch_note(
    other: str, primary: str, rows: int, timing_rows: int, matched: int, first_difference: str | None
) -> Note | None:
    """The ``pass-mismatch`` warning of :func:`join_pass`, from its counts; None where every dispatch matched.

    ``other``/``primary``: the passes' labels; ``rows``: the other pass's dispatches;
    ``timing_rows``: the timing pass's; ``matched``: the other pass's dispatches matched;
    ``first_difference``: ``"; first difference at ..."`` naming the first unmatched one, if any.
    A windowed build (:mod:`rocroof.ingest.windows`) makes it again from the counts summed over
    its windows, with the first window's first difference.
    """
    bad = rows - matched
    if not bad and rows == timing_rows:
        return None
    if bad:
        head = f"{other}: {bad} of {rows} dispatches do not match the timing pass {primary}"
        if rows != timing_rows:
            head += f" ({rows} vs {timing_rows} dispatches)"
        text = head + (first_difference or "") + UNMATCHED_TAIL
    else:
        text = (
            f"{other}: {timing_rows - matched} of {timing_rows} dispatches of the timing pass {primary} have no row "
            f"in this pass (it holds {rows}; cut short, filtered, or the run ended early)"
        )
    return Note("warning", "pass-mismatch", text)
