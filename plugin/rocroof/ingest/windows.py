"""A run built a window of whole op invocations at a time (issue 15: memory that does not grow with the run).

:func:`rocroof.ingest.pipeline.build_run` works over whole columns: at 10^6 dispatches its
stages' temporaries (sort orders, joins, group keys) reach ~500 MB. :func:`build_windows` cuts
the capture into windows of host time and builds each with ``build_run``; the store writes each
window and lets it go (:attr:`RunFrames.windows`). Every stored row is the one the whole-run
build makes (``tests/test_windows.py`` compares them table by table); the plan and what each
window needs from outside itself are in ``docs/flat-ingest.md``.

**Where a window is cut.** At a host time where no ggml op range is open on any thread: the start
of a ggml range that begins after every earlier ggml range has ended (a gap in the union of the
ranges). An op invocation's range, its launch calls, and (the hook's grammar, ``tools/llama.cpp``)
its ``ggml-fused:`` mark then lie in one window, and a window's op tables are complete. A window
holds:

* the dispatches launched in it (by the host time of their launch call, joined by correlation
  id as the attribution joins it); they must be consecutive rows of the pass;
* the marker rows that start in it (owned: stored by this window) and every range that started
  earlier and is still open at its start (context: an application's outer ranges; they give the
  nesting depth and the innermost range of a launch, and are stored by the window they start in);
* the launch calls of its dispatches, and the counter values and instances of its dispatches.

**Which captures are windowed.** One pass with its own launch calls (every dispatch matched, one
process, one agent), ggml ranges whose invocations grow from window to window, no op metadata,
fused-group logs, counter sample or source attribution (regions, the profiler's own invocations);
or that pass (Nsight Systems) and a counter pass attributed by its kernels' NVTX stacks alone
(Nsight Compute: every kernel's region a ggml range, no markers or launch calls of its own).
Anything else is built whole (:func:`plan_windows` returns None): those captures are the small
ones (fixtures) or need a cross-pass join that is not windowed (rocprofv3 counter passes, a
sampled Nsight Compute pass). :func:`build`, what ``rocroof ingest`` calls, also needs the
passes' rows on disk (readers that spilled them): a pass held in memory peaks lower built
whole, which lets the read's frames go as it builds.

**Two passes** (``docs/flat-ingest.md``, step 5). The trace pass is cut as above. Nsight
Compute's kernels go to the window of their op invocation (from their region): window k takes
those from the lowest ggml invocation of window k's ranges up to that of the next window's,
which must be a slice of the pass (its kernels in window order, as Nsight Compute profiles them
in launch order). Its warm-up is what ``build_run`` cuts: the kernels of invocations before the
first measured one (the lowest of the trace pass's measured dispatches, found by attributing the
first window). Each window's ``join_pass`` then matches by (invocation, kernel ordinal) what the
whole pass matches (an invocation and its kernels are in one window of each pass); a kernel
outside every ggml range (numbered over the whole pass by ``join_pass``) keeps the capture whole.
Kernel and counter ids are given up front in the whole build's numbering (``RunFrames.tables``:
Nsight Compute spells kernel names its own way); the ``pass-mismatch`` note is made again from
the summed counts, with the first difference of the first window that has one, and the notes
made pass by pass are ordered so.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import pandas as pd

from ..capture.markers import ggml_fields
from ..keys import SortedIndex
from ..memory import release_file_pages, release_free_memory
from ..records import (
    WINDOW_FRAMES,
    Capture,
    Note,
    PassData,
    SpilledTexts,
    match_rows,
    non_decreasing,
    take_rows,
    text_table,
)
from ..spill import ColumnWriter, is_spilled, release_pages
from . import forked

if TYPE_CHECKING:
    from .pipeline import RunFrames

T = TypeVar("T")

#: Dispatches per window (about: a window ends at the first clean cut after this many). Set by
#: ``ROCROOF_WINDOW_DISPATCHES``; 0 builds every run whole.
WINDOW_DISPATCHES = 1 << 14


def window_size() -> int:
    """Dispatches per window: ``ROCROOF_WINDOW_DISPATCHES`` when it is a whole number >= 0, else the default."""
    text = os.environ.get("ROCROOF_WINDOW_DISPATCHES")
    try:
        return max(0, int(text)) if text else WINDOW_DISPATCHES
    except ValueError:
        return WINDOW_DISPATCHES


class WindowsDisagree(Exception):
    """A window cannot be built as the whole run builds it (found only once it is built).

    Raised from ``frames.windows`` while the store writes the run, so that its one transaction
    rolls back; :func:`ingest` then builds the capture whole. Not a user error: a capture that the
    plan could not tell apart beforehand (e.g. a Nsight Compute window whose trace dispatches are
    all outside ggml ranges, where ``join_pass`` would match by position over the whole pass).
    """


@dataclass
class Window:
    """One window of a pass, by rows of the pass's frames (all int64 arrays of positions).

    Attributes:
        dispatch_start, dispatch_stop: the window's dispatches, rows ``[start, stop)`` of the pass.
        markers: its marker rows (owned and context), ascending.
        owned: per entry of ``markers``, True where the row starts in this window.
        launches: its launch-call rows, ascending.
        counter_start, counter_stop: in a two-pass capture, the counter pass's rows (Nsight
            Compute's kernels) of the window's op invocations, ``[start, stop)`` of that pass's
            frames as read (its warm-up rows are before the first window's start); 0, 0 otherwise.
    """

    dispatch_start: int
    dispatch_stop: int
    markers: np.ndarray
    owned: np.ndarray
    launches: np.ndarray
    counter_start: int = 0
    counter_stop: int = 0


@dataclass
class WindowPlan:
    """How a capture is cut: the pass (warm-up dropped), its windows, and what the run needs once.

    Attributes:
        passdata: the capture's one pass, its warm-up dispatches and ranges dropped (as
            ``build_run`` drops them: the ``warmup-dropped`` note is in ``notes``).
        windows: in host-time order; their dispatch rows tile the pass.
        agents: the capture's agents with every label of the pass (so every window numbers them alike).
        notes: the notes of the cut (warm-up).
    """

    passdata: PassData
    windows: list[Window]
    agents: pd.DataFrame
    notes: list[Note]
    #: Per frame of the pass with a ``row`` column (``counters``, ``instances``): True when its rows
    #: are in dispatch order, so that a window's are one slice (checked once, not per window).
    in_row_order: dict[str, bool] = dataclasses.field(default_factory=dict)
    #: A two-pass capture's counter pass (Nsight Compute, ``nvtx_stack`` regions) as read, warm-up
    #: rows included (rows before ``windows[0].counter_start``); None for a one-pass capture.
    counters_pass: PassData | None = None
    #: The counter pass's ``counters`` frame as runs of non-decreasing ``row`` (Nsight Compute's
    #: values come counter by counter): the first record of each run, then the frame's length.
    #: A window's records are one slice of each run.
    counter_runs: np.ndarray | None = None
    #: The first op invocation measured (``build_run``'s ``first_measured``), where a warm-up was cut
    #: from a two-pass capture; its counter pass's rows of earlier invocations are the warm-up.
    first_measured: int | None = None
    #: The counter pass's regions by code (None last, for code -1) where they are a categorical.
    region_texts: np.ndarray | None = None
    #: The pass's marker text columns of many categories (the fused marks' messages: 92,107 at
    #: 10^6 dispatches) by code, in spill files (:class:`~rocroof.records.SpilledTexts`; a table in
    #: memory where a text is not a ``str``); ``passdata.markers`` holds their codes
    #: (:func:`_texts_on_disk`). A window takes its rows' texts, not a categorical of every text of
    #: the run (made into text window by window, and held by the run: 26 MB at 3x10^6 dispatches).
    marker_texts: dict[str, Any] = dataclasses.field(default_factory=dict)


def plan_windows(
    capture: Capture, *, size: int, keep_warmup: bool = False, on_disk_only: bool = False
) -> WindowPlan | None:
    """Cut ``capture`` into windows of about ``size`` dispatches, or None where it is built whole.

    None for a capture this module does not window (see the module docstring), and for one of at
    most ``size`` dispatches (one window: the whole build is the same and has no overhead). With
    ``on_disk_only``, also None when the reader holds the pass's rows in memory (its columns are
    not spilled, :mod:`rocroof.spill`): the whole build lets the read's frames go as it builds,
    where windows keep the whole pass until the last is written (rocpd at 10^6 dispatches: 641 MB
    whole, 709 MB windowed).
    """
    from .pipeline import _agent_index, _last_reset_ns, _subset, warmup_note

    if size <= 0 or len(capture.passes) not in (1, 2):
        return None
    if capture.op_metadata is not None or capture.fused_groups or capture.counter_sample is not None:
        return None
    p = capture.passes[0]
    q = capture.passes[1] if len(capture.passes) == 2 else None
    d, m, calls = p.dispatches, p.markers, p.launches
    n = len(d)
    if n <= size or not len(m) or not len(calls) or p.region_method == "nvtx_stack":
        return None
    if on_disk_only and not is_spilled(d["start_ns"].array):
        return None
    q_inv: np.ndarray | None = None  # the counter pass's op invocation per row
    if q is not None:
        if p.kind != "trace" or not _counter_pass_qualifies(q):
            return None
        if on_disk_only and not is_spilled(q.dispatches["dispatch_id"].array):
            return None
        q_inv = _region_invocations(q.dispatches)
        if q_inv is None:
            return None
    if d["invocation"].notna().any() or ("region" in d and d["region"].notna().any()) or "region_op" in d:
        return None
    if d["agent_label"].nunique(dropna=False) != 1:
        return None
    release_pages()  # the checks read spilled columns: their pages go (rocroof.spill)
    if len(_distinct_known(d["process_id"]) | _distinct_known(calls["process_id"])) > 1:
        return None
    # the launch call of every dispatch (one process: by correlation id, as the attribution joins them)
    joined = _launch_calls(d, calls)
    if joined is None:
        return None
    launch_ns, call_of = joined
    del joined
    release_pages()
    notes: list[Note] = []
    warmup_cut = False
    if not keep_warmup:
        last = _last_reset_ns(p)
        if last is not None:
            warm = launch_ns < last
            if warm.any():
                notes.append(warmup_note(p.label, int(warm.sum())))
                warmup_cut = True
            p = _subset(p, ~warm, markers_from_ns=last)
            first = int(np.argmin(warm)) if not warm.all() else len(warm)
            if not warm[first:].any():  # the warm-up is a prefix (the usual case): views
                launch_ns, call_of = launch_ns[first:], call_of[first:]
            else:
                launch_ns, call_of = launch_ns[~warm], call_of[~warm]
            del warm
            d, m, calls = p.dispatches, p.markers, p.launches
            n = len(d)
            if n <= size:
                return None
    starts = m["start_ns"]
    ends = m["end_ns"]
    if starts.isna().any() or ends.isna().any():
        return None
    m_start = starts.to_numpy(dtype=np.int64)
    m_end = ends.to_numpy(dtype=np.int64)
    del starts, ends
    release_pages()
    ggml_rows, m_inv = _ggml_invocations(m)
    cuts = _clean_cuts_of(m_start, m_end, ggml_rows)
    if not len(cuts) or not non_decreasing(launch_ns):
        return None  # no clean cut; or dispatches not in launch order (a window's rows would not be consecutive)
    # choose cuts about `size` dispatches apart: each the first clean cut at least `size` rows past
    # the last chosen (a search per window, not a Python int per cut: a cut per op in a run of
    # one thread, millions of them)
    cut_rows = np.searchsorted(launch_ns, cuts, side="left")  # non-decreasing, as the cuts are
    del launch_ns
    chosen: list[int] = []
    last_row = 0
    while True:
        at = int(np.searchsorted(cut_rows, last_row + size, side="left"))
        if at >= len(cut_rows) or cut_rows[at] >= n:
            break
        chosen.append(at)
        last_row = int(cut_rows[at])
    if not chosen:
        return None
    cut_times = cuts[chosen]
    bounds = [0, *cut_rows[chosen].tolist(), n]
    del cut_rows, cuts
    # ggml invocations must grow from window to window: the run's op numbering is their order
    lowest = np.full(len(chosen) + 1, np.iinfo(np.int64).max, dtype=np.int64)
    highest = np.full(len(chosen) + 1, np.iinfo(np.int64).min, dtype=np.int64)
    for lo in range(0, len(ggml_rows), _BLOCK):
        rows = ggml_rows[lo : lo + _BLOCK]
        which = np.searchsorted(cut_times, m_start[rows], side="right")
        np.minimum.at(lowest, which, m_inv[lo : lo + _BLOCK])
        np.maximum.at(highest, which, m_inv[lo : lo + _BLOCK])
    del ggml_rows, m_inv
    release_pages()
    seen = lowest <= highest  # windows with ggml ranges
    if (lowest[seen][1:] <= highest[seen][:-1]).any():
        return None
    # marker rows: owned by the window they start in; context where open at a window's start
    windows: list[Window] = []
    # a range is open at the start of window k (k >= 1) when it ends at or after cut k - 1:
    # the cuts at or before its end count the windows whose start it reaches (windows < 2**31)
    owner = np.empty(len(m_start), dtype=np.int32)
    reach = np.empty(len(m_start), dtype=np.int32)
    for lo in range(0, len(m_start), _BLOCK):
        owner[lo : lo + _BLOCK] = np.searchsorted(cut_times, m_start[lo : lo + _BLOCK], side="right")
        reach[lo : lo + _BLOCK] = np.searchsorted(cut_times, m_end[lo : lo + _BLOCK], side="right")
    del m_start, m_end
    release_pages()
    # every window's rows go to three spill files (a few bytes per marker and dispatch: 24 MB at
    # 3x10^6 dispatches in memory); each Window holds views of them
    marker_type, call_type = _row_type(len(m)), call_of.dtype
    all_markers, all_owned, all_launches = ColumnWriter(marker_type), ColumnWriter(np.bool_), ColumnWriter(call_type)
    marker_bounds, launch_bounds = [0], [0]
    with all_markers, all_owned, all_launches:  # an error drops the files
        for k in range(len(bounds) - 1):
            lo, hi = bounds[k], bounds[k + 1]
            mine = owner == k
            if k:
                mine |= (owner < k) & (reach >= k)
            rows_m = np.flatnonzero(mine).astype(marker_type)
            del mine
            calls_k = call_of[lo:hi]
            if non_decreasing(calls_k):  # launch calls in dispatch order (the usual case): no sort
                keep = np.ones(len(calls_k), dtype=bool)
                keep[1:] = calls_k[1:] != calls_k[:-1]
                calls_k = calls_k[keep]
            else:
                calls_k = np.unique(calls_k)
            all_markers.append(rows_m)
            all_owned.append(owner[rows_m] == k)
            all_launches.append(calls_k)
            marker_bounds.append(marker_bounds[-1] + len(rows_m))
            launch_bounds.append(launch_bounds[-1] + len(calls_k))
        marker_rows, owned_rows, launch_rows = (w.finish() for w in (all_markers, all_owned, all_launches))
    del owner, reach, call_of
    for k in range(len(bounds) - 1):
        a, b = marker_bounds[k], marker_bounds[k + 1]
        windows.append(
            Window(
                dispatch_start=bounds[k],
                dispatch_stop=bounds[k + 1],
                markers=marker_rows[a:b],
                owned=owned_rows[a:b],
                launches=launch_rows[launch_bounds[k] : launch_bounds[k + 1]],
            )
        )
    del marker_rows, owned_rows, launch_rows
    # every label of the pass, in order of first appearance (one agent row per label: numbered alike in every window)
    _idx, agents = _agent_index(pd.Series(d["agent_label"].unique(), dtype=object), capture.agents)
    if q is not None:  # then the counter pass's, as build_run numbers them pass after pass
        _idx, agents = _agent_index(pd.Series(q.dispatches["agent_label"].unique(), dtype=object), agents)
    release_free_memory()
    in_row_order = {
        name: non_decreasing(getattr(p, name)["row"].to_numpy(dtype=np.int64))
        for name in ("counters", "instances")
        if len(getattr(p, name))
    }
    release_pages()
    plan = WindowPlan(passdata=p, windows=windows, agents=agents, notes=notes, in_row_order=in_row_order)
    if q is not None and q_inv is not None and not _cut_counter_pass(plan, capture, q, q_inv, lowest, warmup_cut):
        return None
    _texts_on_disk(plan)
    return plan


#: Rows handled at a time by the plan's joins and parses (bounds their temporaries).
_BLOCK = 1 << 16


def _launch_calls(d: pd.DataFrame, calls: pd.DataFrame) -> tuple[np.ndarray, np.ndarray] | None:
    """``(launch_ns, call row)`` per dispatch: the host start time (ns) and row of its launch call.

    A dispatch's launch call is the first call (in ``calls`` order) with its correlation id, as
    :func:`rocroof.ingest.attribution._match_launches` finds it in a one-process capture. Where the
    calls are in correlation-id order (rocprofv3, rocpd, nsys write them so) the dispatches are
    looked up a block at a time; otherwise by one sort-based join. None when a dispatch has no call
    with a known start time, or no correlation id. Shapes: (dispatches,) each, int64 and
    :func:`_row_type`; read-only, in spill files from :data:`rocroof.spill.SPILL_MIN_BYTES` on.
    """
    d_corr = d["correlation_id"]
    c_corr = calls["correlation_id"]
    c_start = calls["start_ns"]
    if d_corr.isna().any():
        return None
    n = len(d)
    starts = c_start if isinstance(c_start.dtype, pd.Int64Dtype) else c_start.astype("Int64")
    # both results go to spill files a block at a time (16 bytes a dispatch: 48 MB at 3x10^6)
    with ColumnWriter(np.int64) as launch_out, ColumnWriter(_row_type(len(calls))) as call_out:

        def put(at: np.ndarray) -> bool:  # the calls at rows `at` launch the next dispatches
            picked = starts.array[at]
            if picked.isna().any():
                return False
            launch_out.append(picked.to_numpy(dtype=np.int64))
            call_out.append(at)
            return True

        # the calls' ids: a view of their spill file where none is missing, searched where they lie
        ids = None if c_corr.isna().any() else c_corr.to_numpy(dtype=np.int64)
        if ids is not None and non_decreasing(ids):
            index = SortedIndex(None, ids)
            for lo in range(0, n, _BLOCK):
                at = index.find(None, d_corr.iloc[lo : lo + _BLOCK].to_numpy(dtype=np.int64))
                if (at < 0).any() or not put(at):
                    return None
        else:
            known = np.flatnonzero(c_corr.notna().to_numpy(dtype=bool))
            hit = match_rows([c_corr.to_numpy(dtype=np.int64, na_value=0)[known]], [d_corr.to_numpy(dtype=np.int64)])
            if (hit < 0).any():
                return None
            call_of = known[hit]
            del known, hit
            for lo in range(0, n, _BLOCK):
                if not put(call_of[lo : lo + _BLOCK]):
                    return None
        del ids
        return launch_out.finish(), call_out.finish()


def _row_type(rows: int) -> type[np.signedinteger[Any]]:
    """The integer type of row numbers below ``rows``: int32 where they fit (half the bytes), else int64."""
    return np.int32 if rows < 2**31 else np.int64


def _distinct_known(column: pd.Series) -> set[int]:
    """The distinct known values of an integer column, a block at a time (no whole-length copy)."""
    out: set[int] = set()
    for lo in range(0, len(column), _BLOCK):
        block = column.iloc[lo : lo + _BLOCK].dropna()
        out.update(int(v) for v in pd.unique(block.to_numpy(dtype=np.int64)))
    return out


def _counter_pass_qualifies(q: PassData) -> bool:
    """Whether a second pass is one :func:`plan_windows` cuts by op invocation: Nsight Compute's kernels.

    A counter pass attributed by its kernels' NVTX stacks only (``region_method`` ``nvtx_stack``, a
    region per row, no markers, launch calls, launch times, the profiler's own invocations or
    per-instance values): its rows' invocations come from their regions alone.
    """
    d = q.dispatches
    if q.kind != "counter" or q.region_method != "nvtx_stack" or "region" not in d or not len(d):
        return False
    if len(q.markers) or len(q.launches) or len(q.instances):
        return False
    return not (d["invocation"].notna().any() or d["launch_ns"].notna().any())


def _region_invocations(d: pd.DataFrame) -> np.ndarray | None:
    """The op invocation of each dispatch's region (its innermost ggml range, ``ggml:<OP>:<node>:<inv>``), (rows,).

    From the regions' parts where the reader let their texts go (``region_invocation``), else
    parsed from the text. None when a row's region is missing or not a ggml range: such a row is
    unattributed, and :func:`rocroof.ingest.attribution.join_pass` numbers those over the whole
    pass (a window could not). A categorical (a spilled read) is parsed once per distinct text,
    other columns a block at a time.
    """
    from ..capture.markers import REGION_PART_COLUMNS, parse_ranges

    regions = d["region"]
    given = d[REGION_PART_COLUMNS[2]].array if REGION_PART_COLUMNS[2] in d else None
    array = regions.array
    out = np.empty(len(regions), dtype=np.int64)
    if isinstance(array, pd.Categorical):
        is_ggml, inv, _op, _node = parse_ranges(np.asarray(array.categories, dtype=object))
        valid = np.append(is_ggml, False)  # code -1 (missing): not a range
        table = np.append(inv, 0)
        codes = array.codes
    for lo in range(0, len(regions), _BLOCK):
        hi = min(lo + _BLOCK, len(regions))
        if isinstance(array, pd.Categorical):
            block = np.asarray(codes[lo:hi], dtype=np.int64)
            ok, values = valid[block], table[block]
        else:
            ok, values, _op, _node = parse_ranges(regions.iloc[lo:hi].to_numpy(dtype=object))
        if given is not None:  # the regions let go: their invocations
            part = given[lo:hi]
            known = ~np.asarray(part.isna(), dtype=bool)
            ok = ok | known
            values = np.where(known, part.to_numpy(dtype=np.int64, na_value=0), values)
        if not ok.all():
            return None
        out[lo:hi] = values
        release_pages()
    return out


def _cut_counter_pass(
    plan: WindowPlan, capture: Capture, q: PassData, q_inv: np.ndarray, lowest: np.ndarray, warmup_cut: bool
) -> bool:
    """Give ``plan``'s windows the counter pass ``q``'s rows of their op invocations; False where it cannot.

    Window k takes the rows whose invocation is at least the lowest of window k's ggml ranges and
    below the lowest of any later window's (``lowest``: per window, int64 max where it has none);
    the first window from the first measured invocation where a warm-up was cut (``build_run``
    cuts Nsight Compute's warm-up by it: ``first_measured``, the lowest invocation of the trace
    pass's measured dispatches, found here by attributing the first window's). The rows must come
    window after window (Nsight Compute profiles kernels in launch order), so that each window's
    are one slice of the pass. The ``warmup-dropped`` note of the counter pass joins ``plan.notes``.
    """
    from .attribution import attribute_pass
    from .pipeline import warmup_note

    first_measured = None
    if warmup_cut:
        attr = attribute_pass(_sub_capture(capture, plan, plan.windows[0]).passes[0])
        known = attr.dispatch["invocation"].dropna()
        if not len(known):
            return False  # no op in the first window: the measured part's first invocation lies beyond it
        first_measured = int(known.min())
        del attr, known
    k = len(plan.windows)
    bounds = np.minimum.accumulate(lowest[::-1])[::-1][1:k]  # window j >= 1 starts at the lowest invocation from j on
    window_of = np.empty(len(q_inv), dtype=np.int32)
    for lo in range(0, len(q_inv), _BLOCK):
        inv = q_inv[lo : lo + _BLOCK]
        w = np.searchsorted(bounds, inv, side="right").astype(np.int32)
        if first_measured is not None:
            w[inv < first_measured] = -1
        window_of[lo : lo + len(inv)] = w
    if not non_decreasing(window_of.astype(np.int64)):
        return False  # the pass's rows are not in window order: a window's would not be one slice
    starts = np.searchsorted(window_of, np.arange(k + 1), side="left")
    for j, window in enumerate(plan.windows):
        window.counter_start, window.counter_stop = int(starts[j]), int(starts[j + 1])
    warm = int(starts[0])
    if warm:
        plan.notes.append(warmup_note(q.label, warm, first_measured))
    plan.counters_pass = q
    plan.first_measured = first_measured
    regions = q.dispatches["region"].array
    if isinstance(regions, pd.Categorical):
        plan.region_texts = text_table(regions.categories)
    plan.counter_runs = _runs(q.counters["row"]) if len(q.counters) else np.zeros(1, dtype=np.int64)
    return True


def _texts_on_disk(plan: WindowPlan) -> None:
    """Give the pass's marker text columns of many texts to windows from spill files (:attr:`WindowPlan.marker_texts`).

    Each such categorical column of ``plan.passdata.markers`` becomes its codes (int, in their
    spill file), and its texts a :class:`~rocroof.records.SpilledTexts`: the run holds neither the
    texts as Python strings nor their index (the fused marks' messages grow with the run:
    92,107 at 10^6 dispatches). A window takes its rows' texts (:func:`_sub_capture`).
    """
    markers = plan.passdata.markers
    for name in list(markers.columns):
        texts = markers[name].array
        if not isinstance(texts, pd.Categorical) or len(texts.categories) <= _MANY_TEXTS:
            continue
        try:
            plan.marker_texts[name] = SpilledTexts(texts.categories)
        except TypeError:  # not all str: the texts stay in memory, as a table by code
            plan.marker_texts[name] = text_table(texts.categories)
        markers[name] = pd.Series(texts.codes, index=markers.index, copy=False)
        del texts
    release_pages()


#: A categorical of more texts than this is given to windows as text (:attr:`WindowPlan.marker_texts`).
_MANY_TEXTS = 1 << 10


def _runs(rows: pd.Series) -> np.ndarray:
    """Where ``rows`` (a column of dispatch rows) starts a run of non-decreasing values; then its length.

    Read a block at a time. Shape: (runs + 1,) int64, the first entry 0.
    """
    values = rows.array
    data = np.asarray(getattr(values, "_data", values))
    breaks = [np.zeros(1, dtype=np.int64)]
    last = None
    for lo in range(0, len(data), _BLOCK):
        block = np.asarray(data[lo : lo + _BLOCK], dtype=np.int64)
        if last is not None and block[0] < last:
            breaks.append(np.array([lo], dtype=np.int64))
        breaks.append(lo + 1 + np.flatnonzero(block[1:] < block[:-1]))
        last = int(block[-1])
        release_pages()
    breaks.append(np.array([len(data)], dtype=np.int64))
    return np.concatenate(breaks)


def _ggml_invocations(m: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """``(rows, invocation)`` of the ggml ranges among marker rows ``m`` (:func:`~rocroof.capture.markers.ggml_fields`).

    Parsed a block at a time; the ops and node names that ``ggml_fields`` also parses are not kept
    (a string per range). Shapes: (ggml ranges,) each, ascending rows (:func:`_row_type`) and int64;
    read-only, in spill files from :data:`rocroof.spill.SPILL_MIN_BYTES` on.
    """
    with ColumnWriter(_row_type(len(m))) as rows, ColumnWriter(np.int64) as inv:
        for lo in range(0, len(m), _BLOCK):
            g, i, _op, _node, _compacted = ggml_fields(m.iloc[lo : lo + _BLOCK])
            del _op, _node, _compacted
            rows.append(lo + np.flatnonzero(g))
            inv.append(i[g])
            release_pages()
        return rows.finish(), inv.finish()


def _clean_cuts_of(starts: np.ndarray, ends: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """:func:`_clean_cuts` of the ranges at ``rows`` of ``(starts, ends)``, swept a block at a time.

    Holds a block, and the ranges' start order (8 bytes a range) where they are not in start order
    already; not sorted copies of both columns.
    """
    if len(rows) < 2:
        return np.zeros(0, dtype=np.int64)
    order = None if _starts_ordered(starts, rows) else np.argsort(starts[rows], kind="stable")
    parts = []
    reach = np.iinfo(np.int64).min
    for lo in range(0, len(rows), _BLOCK):
        at = rows[lo : lo + _BLOCK] if order is None else rows[order[lo : lo + _BLOCK]]
        s, e = starts[at], ends[at]
        before = np.maximum.accumulate(np.concatenate(([reach], e[:-1])))  # reach of every earlier range
        parts.append(s[(s > before) & (before > np.iinfo(np.int64).min)])
        reach = max(reach, int(e.max()))
    cuts = np.concatenate(parts)
    keep = np.ones(len(cuts), dtype=bool)
    keep[1:] = cuts[1:] != cuts[:-1]
    return cuts[keep]


def _starts_ordered(starts: np.ndarray, rows: np.ndarray) -> bool:
    """Whether ``starts[rows]`` never decreases, checked a block at a time (no whole-length copy)."""
    last = np.iinfo(np.int64).min
    for lo in range(0, len(rows), _BLOCK):
        block = starts[rows[lo : lo + _BLOCK]]
        if block[0] < last or (block[1:] < block[:-1]).any():
            return False
        last = int(block[-1])
    return True


def _clean_cuts(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Host times (ns) where no range of ``(starts, ends)`` is open: each range start after every earlier range ended.

    Shapes: (ranges,) int64 each; returns the ascending cut times (a range's start), never the first.
    """
    if len(starts) < 2:
        return np.zeros(0, dtype=np.int64)
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    reach = np.maximum.accumulate(e)
    cuts = s[1:][s[1:] > reach[:-1]]  # ascending: the starts are sorted
    keep = np.ones(len(cuts), dtype=bool)
    keep[1:] = cuts[1:] != cuts[:-1]
    return cuts[keep]


def _sub_capture(capture: Capture, plan: WindowPlan, w: Window) -> Capture:
    """The capture cut to window ``w``: its rows of the pass, the plan's agents, the capture's notes."""
    p = plan.passdata
    lo, hi = w.dispatch_start, w.dispatch_stop
    renumber = np.full(len(p.dispatches), -1, dtype=np.int64)
    renumber[lo:hi] = np.arange(hi - lo)
    counters, instances = (
        take_rows(
            frame,
            _rows_between(frame, lo, hi, renumber >= 0, sorted_rows=plan.in_row_order.get(name, False)),
            {"row": renumber},
        )
        for name, frame in (("counters", p.counters), ("instances", p.instances))
    )
    del renumber
    sub = dataclasses.replace(
        p,
        dispatches=_row_slice(p.dispatches, lo, hi, in_memory=True)
        if plan.counters_pass is not None
        else take_rows(p.dispatches, np.arange(lo, hi)),
        counters=counters,
        instances=instances,
        markers=take_rows(p.markers, w.markers),
        launches=take_rows(p.launches, w.launches),
    )
    for name, table in plan.marker_texts.items():
        codes = np.asarray(sub.markers[name], dtype=np.int64)  # the column's codes (_texts_on_disk)
        sub.markers[name] = pd.Series(table[codes], dtype=object, copy=False)
    release_pages()
    passes = [sub]
    q = plan.counters_pass
    if q is not None:
        passes.append(_counter_slice(q, plan, w.counter_start, w.counter_stop))
    return dataclasses.replace(capture, passes=passes, agents=plan.agents.drop(columns="agent_index", errors="ignore"))


def _counter_slice(q: PassData, plan: WindowPlan, lo: int, hi: int) -> PassData:
    """The counter pass ``q`` cut to its rows ``[lo, hi)`` (renumbered from 0), with their counter values.

    The values of rows ``[lo, hi)`` are one slice of each of :attr:`WindowPlan.counter_runs`,
    found by binary search. Slices of the pass's columns (views of its spill files, no copy); the
    regions as text (:attr:`WindowPlan.region_texts`: a window's categorical would carry every
    region of the run as its categories, which the attribution turns into text window by window).
    """
    counters = q.counters
    runs = plan.counter_runs
    if len(counters) and runs is not None:
        rows = counters["row"].array
        data = np.asarray(getattr(rows, "_data", rows))
        parts = []
        for a, b in zip(runs[:-1].tolist(), runs[1:].tolist(), strict=True):
            run = data[a:b]
            first, stop = int(np.searchsorted(run, lo, side="left")), int(np.searchsorted(run, hi, side="left"))
            if stop > first:
                parts.append(_row_slice(counters, a + first, a + stop))
        taken = pd.concat(parts, ignore_index=True) if parts else counters.iloc[:0].reset_index(drop=True)
        if len(taken):
            taken["row"] = taken["row"].to_numpy(dtype=np.int64) - lo
        counters = taken
    dispatches = _row_slice(q.dispatches, lo, hi, in_memory=True)
    if plan.region_texts is not None:
        codes = np.asarray(q.dispatches["region"].array.codes[lo:hi], dtype=np.int64)
        dispatches["region"] = pd.Series(plan.region_texts[codes], dtype=object, copy=False)
    out = dataclasses.replace(q, dispatches=dispatches, counters=counters)
    release_pages()
    return out


def _row_slice(frame: pd.DataFrame, lo: int, hi: int, *, in_memory: bool = False) -> pd.DataFrame:
    """Rows ``[lo, hi)`` of ``frame`` with a fresh index: views of its columns (spilled ones stay in their files).

    With ``in_memory``, copies in memory (a window's few MB): the build then works on plain arrays,
    not on spilled ones it would stack and narrow through spill files of its own.
    """
    columns = {name: frame[name].array[lo:hi] for name in frame.columns}
    if in_memory:
        columns = {name: values.copy() for name, values in columns.items()}
    return pd.DataFrame(columns, index=pd.RangeIndex(hi - lo), copy=False)


def _rows_between(records: pd.DataFrame, lo: int, hi: int, keep: np.ndarray, *, sorted_rows: bool) -> np.ndarray:
    """Positions of ``records`` (counters, instances) whose ``row`` is in ``[lo, hi)``, ascending.

    ``keep``: the same dispatch rows as a mask (for records not in row order, where
    :func:`rocroof.ingest.pipeline._rows_of_kept` scans them); ``sorted_rows``: ``row`` never
    decreases, so the records are one slice, found by binary search.
    """
    from .pipeline import _rows_of_kept

    if not len(records):
        return np.zeros(0, dtype=np.int64)
    if not sorted_rows:
        return _rows_of_kept(records, keep)
    rows = records["row"].to_numpy(dtype=np.int64)
    return np.arange(int(np.searchsorted(rows, lo, side="left")), int(np.searchsorted(rows, hi, side="left")))


#: Notes whose message counts rows of a window: the pattern's ``count`` group is summed over the
#: windows (and ``total``, where the message says "N of M"); the rest of the message is the first
#: window's (its example is the first in row order, as the whole build's is), or, with a ``worst``
#: group, that of the window with the largest. The flag: the whole build writes the count with
#: thousands separators.
_COUNTED: dict[str, tuple[re.Pattern[str], bool]] = {
    "negative-duration": (re.compile(r"^(?P<head>.*?: )(?P<count>\d+)(?P<tail> dispatch\(es\) end before .*)$"), False),
    "implausible-duration": (
        re.compile(
            r"^(?P<head>.*?: )(?P<count>\d+)"
            r"(?P<tail> dispatch\(es\) last over an hour .*?: (?P<worst>[\d,]+) s from .*)$"
        ),
        False,
    ),
    "malformed-range": (re.compile(r"^(?P<head>.*?: )(?P<count>[\d,]+)(?P<tail> range\(s\) start with .*)$"), True),
    "dram-bytes-derived-metric": (re.compile(r"^(?P<head>)(?P<count>\d+)(?P<tail> dispatch\(es\): .*)$"), False),
    "dram-bytes-unknown": (re.compile(r"^(?P<head>)(?P<count>\d+)(?P<tail> dispatch\(es\): .*)$"), False),
    "dram-bytes-approximate": (re.compile(r"^(?P<head>)(?P<count>\d+)(?P<tail> dispatch\(es\): .*)$"), False),
    "dram-above-ceiling": (
        re.compile(
            r"^(?P<head>)(?P<count>[\d,]+)(?P<tail> dispatch\(es\) moved DRAM bytes .*?: (?P<worst>[\d,.]+)x\).*)$"
        ),
        True,
    ),
    "fused-mismatch": (re.compile(r"^(?P<head>)(?P<count>\d+) of (?P<total>\d+)(?P<tail> ggml-fused .*)$"), False),
    "fused-unmatched": (
        re.compile(
            r"^(?P<head>)(?P<count>\d+) of (?P<total>\d+)"
            r"(?P<tail> ggml-fused group\(s\) name an invocation this capture has no op for).*$"
        ),
        False,
    ),
}
#: Notes made again from the whole run's counts at the end (a window's own would be wrong).
_RUN_NOTES = ("unattributed", "attribution-enqueue-order")
#: The order in which ``build_run`` makes its notes (after the capture's own): the merged notes
#: are put in it, so that a note first made by a later window stands where the whole build has it.
_BUILD_ORDER = (
    "warmup-dropped",
    "serialised-timings",
    "timestamps-rounded",
    "negative-duration",
    "implausible-duration",
    "pass-mismatch",
    "malformed-range",
    "invocations-shared-by-processes",
    "fused-unmatched",
    "fused-mismatch",
    "dram-bytes-derived-metric",
    "dram-bytes-unknown",
    "dram-bytes-approximate",
    "no-gpu-arch",
    "measured-ceiling-implausible",
    "recorded-ceiling-implausible",
    "dram-above-ceiling",
    "no-ceiling",
    "unattributed",
    "no-markers",
    "attribution-enqueue-order",
)


class _Notes:
    """The run's notes merged over windows, in the order the whole build makes them.

    A note that repeats unchanged (the capture's own, the ceiling's) is kept once; a counted one
    (:data:`_COUNTED`) has its counts summed; the others are kept as the first window gave them.
    Notes added with ``first=True`` (the capture's and its pass's own) stay ahead of the rest.
    ``labels``: the passes' labels, in pass order: the whole build makes a per-pass note pass
    after pass (a note names its pass first, ``<label>: ...``). The ``pass-mismatch`` note of a
    two-pass run is made again from the run's counts (:func:`_finish`): of the windows' own, the
    first difference they name is kept (:attr:`first_difference`).
    """

    def __init__(self, labels: list[str] | None = None) -> None:
        self.labels = list(labels or [])
        self.order: list[tuple[str, str]] = []
        self.rank: dict[tuple[str, str], tuple[int, int, int]] = {}
        self.kept: dict[tuple[str, str], Note] = {}
        self.counts: dict[tuple[str, str], list[int]] = {}
        self.worst: dict[tuple[str, str], float] = {}
        self.first_difference: str | None = None

    def add(self, notes: list[Note], *, first: bool = False, made: bool = False) -> None:
        """Merge ``notes`` (a window's, or with ``made`` one made from the run's counts) into the run's."""
        for note in notes:
            if note.code in _RUN_NOTES:
                continue
            if note.code == "pass-mismatch" and len(self.labels) > 1 and not (first or made):
                if self.first_difference is None:
                    self.first_difference = _first_difference(note.message)
                continue
            counted = _COUNTED.get(note.code)
            match = counted[0].match(note.message) if counted else None
            head = match.group("head") if match else note.message
            key = (note.severity if match is None or note.code != "fused-unmatched" else "", note.code + "\0" + head)
            if key not in self.kept:
                self.order.append(key)
                self.rank[key] = (-1, 0, 0) if first else _rank(note.code, self._pass_of(note.message))
                self.kept[key] = note
                if match is not None:
                    self.counts[key] = [0, 0]
                    if match.groupdict().get("worst") is not None:
                        self.worst[key] = float(match.group("worst").replace(",", ""))
            if match is None:
                continue
            parts = match.groupdict()
            self.counts[key][0] += int(parts["count"].replace(",", ""))
            self.counts[key][1] += int(parts["total"]) if parts.get("total") else 0
            if parts.get("worst") is not None:
                worst = float(parts["worst"].replace(",", ""))
                if worst > self.worst[key]:
                    self.worst[key] = worst
                    self.kept[key] = note

    def _pass_of(self, message: str) -> int:
        """The pass a note names first (``<label>: ...``; the longest such label), else 0."""
        named = [(len(label), i) for i, label in enumerate(self.labels) if message.startswith(f"{label}:")]
        return max(named)[1] if named else 0

    def notes(self) -> list[Note]:
        out = []
        for key in sorted(self.order, key=lambda k: self.rank[k]):  # stable: first-seen order within a rank
            note = self.kept[key]
            if key in self.counts:
                pattern, separators = _COUNTED[note.code]
                match = pattern.match(note.message)
                assert match is not None
                count, total = self.counts[key]
                shown = f"{count:,}" if separators else str(count)
                if note.code == "fused-unmatched":  # the whole build's wording, from the summed counts
                    everything = count == total
                    note = Note(
                        "warning" if everything else "info",
                        note.code,
                        f"{count} of {total}{match.group('tail')}"
                        + (" (is the log from another run?)" if everything else " (e.g. warm-up)"),
                    )
                elif "total" in match.groupdict():
                    note = Note(note.severity, note.code, f"{shown} of {total}{match.group('tail')}")
                else:
                    note = Note(note.severity, note.code, match.group("head") + shown + match.group("tail"))
            out.append(note)
        return out


def _rank(code: str, pass_index: int = 0) -> tuple[int, int, int]:
    """Where the whole build makes a note of ``code`` about pass ``pass_index``: a sort key.

    By the position of ``code`` in :data:`_BUILD_ORDER` (a code not listed: after every listed
    one), then by pass; except the notes made while the passes' dispatch rows are built (the
    durations, then the join to the timing pass), which come pass by pass.
    """
    at = _BUILD_ORDER.index(code) if code in _BUILD_ORDER else len(_BUILD_ORDER)
    if code in _DISPATCH_ROW_NOTES:
        return (_BUILD_ORDER.index(_DISPATCH_ROW_NOTES[0]), pass_index, at)
    return (at, pass_index, 0)


#: The notes ``build_run`` makes pass by pass as it builds each pass's dispatch rows.
_DISPATCH_ROW_NOTES = ("negative-duration", "implausible-duration", "pass-mismatch")


def _first_difference(message: str) -> str | None:
    """The ``; first difference at ...`` part of a ``pass-mismatch`` note, or None where it names none."""
    from .attribution import FIRST_DIFFERENCE, UNMATCHED_TAIL

    at = message.find(FIRST_DIFFERENCE)
    if at < 0 or not message.endswith(UNMATCHED_TAIL):
        return None
    return message[at : len(message) - len(UNMATCHED_TAIL)]


@dataclass
class _Totals:
    """What the run row and the pass row need, summed over windows."""

    dispatches: int = 0
    matched: int = 0
    methods: Counter[str] = dataclasses.field(default_factory=Counter)
    #: A two-pass run's counter pass: its dispatches, and those matched to a timing dispatch.
    counter_dispatches: int = 0
    counter_matched: int = 0


def build_windows(
    capture: Capture,
    plan: WindowPlan,
    *,
    arch_override: str | None = None,
    source_path: str | None = None,
) -> RunFrames:
    """The run of ``capture`` as :class:`~rocroof.ingest.pipeline.RunFrames` whose ``windows`` build as they are read.

    ``frames.tables`` holds the run-level tables (``agent``, ``pass``, ``op_model``, ``op_edge``,
    ``run_ceiling``) of the first window; ``frames.run``, ``frames.notes`` and the ``pass`` row's
    counts are final once ``frames.windows`` is exhausted. Each window is a dict of the per-row
    tables with run-wide numbering (``dispatch_index``, ``ordinal``, ``range_index``, ``op_index``,
    ``timing_dispatch_index``), as :meth:`rocroof.store.Store.write_run` takes them. The capture
    is taken (its frames let go as windows are built).

    Raises:
        InputError: as :func:`~rocroof.ingest.pipeline.build_run` (``--arch``), from the first window.
    """
    from .pipeline import RunFrames, build_run

    # the hash of a large capture is often still being computed (in a thread, beside the read):
    # the windows are built meanwhile, and the store claims the hash once it is done
    pending = capture.take_pending_hash()
    # the passes as read are the plan's now (its pass, warm-up cut): the capture lets go of them, and
    # with them of any frame the plan replaced (the marker texts of _texts_on_disk)
    capture.passes = []
    first = build_run(
        _sub_capture(capture, plan, plan.windows[0]),
        arch_override=arch_override,
        source_path=source_path,
        keep_warmup=True,
        release=plan.counters_pass is None,
    )
    run_tables = {k: v for k, v in first.tables.items() if k not in _WINDOW_TABLES}
    run_tables["pass"] = run_tables["pass"].copy()  # its counts are the run's (summed as windows are built)
    counters = _counter_numbering(plan)
    if counters is not None:
        run_tables["counter"] = counters
    if plan.counters_pass is not None:
        run_tables["kernel_symbol"] = _kernel_numbering(plan)
    frames = RunFrames(
        run=dict(first.run), tables=run_tables, notes=[], settings=dict(first.settings), pending_sha256=pending
    )
    # the read's code (polars' parser, most of it) runs no more: its pages (35-50 MB of libraries
    # after a read of 10^6 dispatches, as many after 10^5) would stay mapped here through the write
    release_file_pages()
    if not forked.enabled() or len(plan.windows) < 2:
        frames.windows = _windows(capture, plan, first, frames, arch_override, source_path)
        return frames

    def windows() -> Iterator[dict[str, pd.DataFrame]]:  # in the child: it has no hash job (the parent's thread)
        frames.pending_sha256 = None
        return _windows(capture, plan, first, frames, arch_override, source_path)

    def ended() -> tuple[dict[str, Any], list[Note], pd.DataFrame]:
        return frames.run, frames.notes, frames.tables["pass"]

    def end(state: tuple[dict[str, Any], list[Note], pd.DataFrame]) -> None:
        run, frames.notes, frames.tables["pass"] = state
        frames.run.update(run)
        if frames.pending_sha256 is not None:  # as _finish does in one process
            frames.run["content_sha256"] = frames.pending_sha256.result() or None

    frames.windows = forked.built_in_child(windows, ended, end)
    return frames


def _counter_numbering(plan: WindowPlan) -> pd.DataFrame | None:
    """The ``counter`` rows of the whole build (id, name), where windows would number them otherwise; else None.

    The store numbers counters by first appearance over the run's counter values, then its
    instances (``store._counter_tables``). Windows in dispatch order see the values' names in that
    order when the values are in dispatch order and there are no instances; otherwise a name can
    first come in a later window than the whole run has it, and the store is given the whole
    run's numbering up front (``RunFrames.tables``).
    """
    p = plan.passdata
    q = plan.counters_pass
    if q is not None:
        if len(p.counters) or len(p.instances):
            raise AssertionError("a two-pass plan's trace pass has no counters")  # _counter_pass_qualifies
        start = plan.windows[0].counter_start
        column = q.counters["counter_name"]
        first = _first_seen(column, q.counters["row"], start) if start else _first_seen(column)  # warm-up rows left out
        release_pages()
        return pd.DataFrame({"counter_index": np.arange(len(first)), "counter_name": first})
    if not len(p.instances) and plan.in_row_order.get("counters", True):
        return None
    names: dict[Any, None] = {}
    for frame in (p.counters, p.instances):
        if len(frame):
            names.update(dict.fromkeys(pd.unique(frame["counter_name"].dropna()).tolist()))
    release_pages()
    return pd.DataFrame({"counter_index": np.arange(len(names)), "counter_name": list(names)})


def _kernel_numbering(plan: WindowPlan) -> pd.DataFrame:
    """The ``kernel_symbol`` rows of the whole build of a two-pass plan (kernel_index, kernel_name).

    The store numbers kernel names by first appearance over the whole run's dispatches, pass after
    pass; a window holds both passes' rows of its ops, so a name Nsight Compute spells its own way
    would come before a later trace name. Given up front (``RunFrames.tables``).
    """
    q = plan.counters_pass
    assert q is not None
    names = _first_seen(plan.passdata.dispatches["kernel_name"])
    start = plan.windows[0].counter_start
    seen = set(names)
    names += [v for v in _first_seen(q.dispatches["kernel_name"], None, start) if v not in seen]
    release_pages()
    return pd.DataFrame({"kernel_index": np.arange(len(names)), "kernel_name": names})


def _first_seen(column: pd.Series, rows: pd.Series | None = None, start: int = 0) -> list[Any]:
    """The distinct known values of ``column`` in order of first appearance, a block at a time.

    Only where ``rows`` (a column of the same length: dispatch rows) is at least ``start``, or,
    without ``rows``, from position ``start`` on. A categorical is read through its codes.
    """
    array = column.array
    categorical = isinstance(array, pd.Categorical)
    values = np.asarray(array.codes) if categorical else None
    row_data = None if rows is None else np.asarray(getattr(rows.array, "_data", rows.array))
    seen: dict[Any, None] = {}
    lo0 = start if rows is None else 0
    for lo in range(lo0, len(column), _BLOCK):
        hi = min(lo + _BLOCK, len(column))
        keep = None if row_data is None else np.asarray(row_data[lo:hi]) >= start
        if values is not None:
            block = np.asarray(values[lo:hi])
            block = block if keep is None else block[keep]
            codes = pd.unique(block[block >= 0])
            seen.update(dict.fromkeys(array.categories[codes].tolist()))
        else:
            part = column.iloc[lo:hi]
            part = part if keep is None else part[keep]
            seen.update(dict.fromkeys(pd.unique(part.dropna()).tolist()))
        release_pages()  # the block's pages of spilled columns (8x10^6 counter rows: 64 MB of them)
    return list(seen)


#: The per-row tables a window holds (the others are the run's).
_WINDOW_TABLES = WINDOW_FRAMES


def _windows(
    capture: Capture,
    plan: WindowPlan,
    first: Any,
    frames: Any,
    arch_override: str | None,
    source_path: str | None,
) -> Iterator[dict[str, pd.DataFrame]]:
    from .pipeline import build_run

    q = plan.counters_pass
    notes = _Notes([plan.passdata.label, *([q.label] if q is not None else [])])
    own = [*capture.notes, *plan.passdata.notes, *(q.notes if q is not None else [])]
    notes.add(own, first=True)  # the capture's own, as each window repeats them
    notes.add(plan.notes)
    timing_total = len(plan.passdata.dispatches)  # a counter pass's dispatches are numbered after these
    counter_first = plan.windows[0].counter_start if q is not None else 0
    totals = _Totals()
    op_offset = 0
    built = first
    for k, w in enumerate(plan.windows):
        if k:
            built = build_run(
                _sub_capture(capture, plan, w),
                arch_override=arch_override,
                source_path=source_path,
                keep_warmup=True,
                # a two-pass window's frames are views of the passes' (rows of the run's spill files)
                # and its own small copies: nothing to let go early, and its passes' dispatch frames
                # are stacked without deleting a column at a time (a tenth of a second per window)
                release=q is None,
            )
        notes.add(built.notes)
        tables = built.tables
        out: dict[str, pd.DataFrame] = {}
        d_off = w.dispatch_start
        local_timing = w.dispatch_stop - w.dispatch_start  # the window's trace dispatches (its dispatch rows 0 ..)
        # the counter pass's rows: window-local dispatch index local_timing + j -> the run's
        c_off = timing_total + (w.counter_start - counter_first) - local_timing
        ranges = tables.get("marker_range", pd.DataFrame())
        range_global = w.markers  # local range_index -> the pass's marker row
        ops = tables.get("op_invocation", pd.DataFrame())
        dispatch = tables.get("dispatch", pd.DataFrame())
        if len(dispatch):
            dispatch = dispatch.copy(deep=False)
            timing = dispatch["pass_index"].to_numpy() == 0
            if q is None:
                for col in ("dispatch_index", "ordinal", "timing_dispatch_index"):
                    dispatch[col] = _shift(dispatch[col], d_off)
            else:
                dispatch["dispatch_index"] = _shift_by_pass(dispatch["dispatch_index"], timing, d_off, c_off)
                ordinal_off = w.counter_start - counter_first
                dispatch["ordinal"] = _shift_by_pass(dispatch["ordinal"], timing, d_off, ordinal_off)
                dispatch["timing_dispatch_index"] = _shift(dispatch["timing_dispatch_index"], d_off)
                if (~timing).any() and not (dispatch["attribution_method"][timing].astype(object) != "none").any():
                    # join_pass would match this window's counter pass by position, not by op invocation
                    raise WindowsDisagree(
                        f"window {k}: counter-pass kernels, but no trace dispatch attributed to an op"
                    )
            dispatch["range_index"] = _mapped(dispatch["range_index"], range_global)
            dispatch["op_index"] = _shift(dispatch["op_index"], op_offset)
            totals.methods.update(dispatch["attribution_method"][timing].astype(object).tolist())
        out["dispatch"] = dispatch
        for name in ("counter_value", "counter_instance", "dram_traffic"):
            frame = tables.get(name)
            if frame is not None and len(frame):
                frame = frame.copy(deep=False)
                if q is None:
                    frame["dispatch_index"] = _shift(frame["dispatch_index"], d_off)
                else:
                    index = frame["dispatch_index"]
                    is_timing = index.astype("Int64").to_numpy(dtype=np.int64, na_value=0) < local_timing
                    frame["dispatch_index"] = _shift_by_pass(index, is_timing, d_off, c_off)
            out[name] = frame if frame is not None else pd.DataFrame()
        if len(ranges):
            keep = w.owned[ranges["range_index"].to_numpy(dtype=np.int64)]
            ranges = ranges[keep].copy(deep=False) if not keep.all() else ranges.copy(deep=False)
            ranges["range_index"] = range_global[ranges["range_index"].to_numpy(dtype=np.int64)]
        out["marker_range"] = ranges
        if len(ops):
            ops = ops.copy(deep=False)
            ops["op_index"] = ops["op_index"].to_numpy(dtype=np.int64) + op_offset
            op_offset += len(ops)
        out["op_invocation"] = ops
        out["op_node"] = tables.get("op_node", pd.DataFrame())
        out["op_operand"] = tables.get("op_operand", pd.DataFrame())
        pass_row = tables["pass"]
        totals.dispatches += int(pass_row["dispatch_count"].iloc[0])
        matched = pass_row["matched_count"].iloc[0]
        totals.matched += int(matched) if pd.notna(matched) else 0
        if q is not None:
            totals.counter_dispatches += int(pass_row["dispatch_count"].iloc[1])
            matched = pass_row["matched_count"].iloc[1]
            totals.counter_matched += int(matched) if pd.notna(matched) else 0
        del tables, built, dispatch, ranges, ops
        first = None
        release_free_memory()
        yield out
        del out
        release_free_memory()
    _finish(frames, totals, notes, plan)


def _finish(frames: RunFrames, totals: _Totals, notes: _Notes, plan: WindowPlan) -> None:
    """Fill the run row, the pass rows and the notes with what the windows sum to."""
    from .attribution import pass_mismatch_note
    from .pipeline import ENQUEUE_ORDER_NOTE, run_method, unattributed_note

    method = run_method(totals.methods)
    frames.run["attribution_method"] = method
    if frames.pending_sha256 is not None:  # the last window built: the hash is the run's now
        frames.run["content_sha256"] = frames.pending_sha256.result() or None
    q = plan.counters_pass
    if q is not None:
        mismatch = pass_mismatch_note(
            q.label,
            plan.passdata.label,
            totals.counter_dispatches,
            totals.dispatches,
            totals.counter_matched,
            notes.first_difference,
        )
        if mismatch is not None:
            notes.add([mismatch], made=True)
    out = notes.notes()
    unattributed = unattributed_note(totals.methods)
    if unattributed is not None:
        out.append(unattributed)
    if method == "enqueue_order":
        out.append(ENQUEUE_ORDER_NOTE)
    frames.notes = list(dict.fromkeys(out))
    pass_row = frames.tables["pass"]
    if q is None:
        pass_row["dispatch_count"] = [totals.dispatches]
        pass_row["matched_count"] = [totals.matched]
    else:
        pass_row["dispatch_count"] = [totals.dispatches, totals.counter_dispatches]
        pass_row["matched_count"] = [totals.matched, totals.counter_matched]


def _shift(column: pd.Series, offset: int) -> Any:
    """``column + offset`` as nullable Int64 (missing stays missing)."""
    values = column.astype("Int64")
    return (values + offset).array if offset else values.array


def _shift_by_pass(column: pd.Series, timing: np.ndarray, timing_offset: int, other_offset: int) -> Any:
    """``column`` plus ``timing_offset`` where ``timing`` (bool per row), else plus ``other_offset``; nullable Int64."""
    values = column.astype("Int64")
    known = values.notna().to_numpy(dtype=bool)
    raw = values.to_numpy(dtype=np.int64, na_value=0) + np.where(timing, timing_offset, other_offset)
    return pd.arrays.IntegerArray(np.where(known, raw, 0).astype(np.int64), ~known)


def _mapped(column: pd.Series, lookup: np.ndarray) -> Any:
    """``lookup[column]`` as nullable Int64 (missing stays missing)."""
    values = column.astype("Int64")
    known = values.notna().to_numpy(dtype=bool)
    raw = values.to_numpy(dtype=np.int64, na_value=0)
    out = np.where(known, lookup[np.clip(raw, 0, max(len(lookup) - 1, 0))] if len(lookup) else 0, 0)
    return pd.arrays.IntegerArray(out.astype(np.int64), ~known)


def materialise(frames: RunFrames) -> RunFrames:
    """A windowed :class:`RunFrames` as a whole one (its windows' tables stacked): for tests and comparisons.

    A whole one (``windows`` None) is returned as it is; the names a windowed one numbers up
    front for the store (``counter``) are left out, as a whole build has none.
    """
    from .pipeline import RunFrames

    if frames.windows is None:
        return frames
    parts: dict[str, list[pd.DataFrame]] = {name: [] for name in _WINDOW_TABLES}
    for window in frames.windows:
        for name, frame in window.items():
            if frame is not None and len(frame):
                parts[name].append(frame)
    # the names numbered up front (counter ids) instruct the store; a whole build has no such table
    tables = {k: v for k, v in frames.tables.items() if k not in ("kernel_symbol", "dram_text", "counter")}
    for name, frames_of in parts.items():
        tables[name] = pd.concat(frames_of, ignore_index=True) if frames_of else pd.DataFrame()
    return RunFrames(run=frames.run, tables=tables, notes=frames.notes, settings=frames.settings)


def build(
    capture: Capture,
    *,
    arch_override: str | None = None,
    source_path: str | None = None,
    keep_warmup: bool = False,
    release: bool = False,
    whole: bool = False,
) -> RunFrames:
    """The run of ``capture``: windowed where :func:`plan_windows` cuts it, else ``build_run`` whole.

    Windowed only where the readers hold the passes' rows on disk (``on_disk_only``): today the
    rocprofv3 CSV, rocpd and Nsight (Systems + Compute) readers, for runs whose columns pass
    ``SPILL_MIN_BYTES`` (~2^17 dispatches).

    Takes the same arguments as :func:`rocroof.ingest.pipeline.build_run` and returns its
    :class:`~rocroof.ingest.pipeline.RunFrames`, with ``windows`` set when windowed
    (:meth:`rocroof.store.Store.write_run` writes either). A windowed build always takes the
    capture (as ``release``). The window size is :func:`window_size` (``ROCROOF_WINDOW_DISPATCHES``).

    ``whole``: build the run whole however large (:func:`ingest` after :class:`WindowsDisagree`).

    Raises:
        InputError: as ``build_run`` (``--arch``).
    """
    from .pipeline import build_run

    plan = None if whole else plan_windows(capture, size=window_size(), keep_warmup=keep_warmup, on_disk_only=True)
    if plan is None:
        return build_run(
            capture, arch_override=arch_override, source_path=source_path, keep_warmup=keep_warmup, release=release
        )
    return build_windows(capture, plan, arch_override=arch_override, source_path=source_path)


def ingest(read: Callable[[], Capture], write: Callable[[RunFrames], T], **kwargs: Any) -> tuple[T, RunFrames]:
    """Build the capture that ``read()`` returns (:func:`build`) and ``write`` it; whole when a window disagrees.

    ``write`` stores the frames in one transaction (:meth:`rocroof.store.Store.write_run`); a
    :class:`WindowsDisagree` from the windows rolls it back, and the capture is read again and
    built whole (the rare capture the plan could not tell apart: it costs a second read).
    ``kwargs`` go to :func:`build` (``release`` is set: each read is the build's alone).

    Returns:
        ``(what write returned, the frames written)``: a windowed run's ``frames.run`` and
        ``frames.notes`` are final once written.
    """
    frames = build(read(), release=True, **kwargs)
    try:
        return write(frames), frames
    except WindowsDisagree:
        del frames
        release_free_memory()
        frames = build(read(), release=True, whole=True, **kwargs)
        return write(frames), frames
