"""From a :class:`~rocroof.records.Capture` to the rows of one run (pure; no database).

Steps: map agents, attribute each pass's dispatches to ggml op invocations, drop warm-up
before the last ``ggml reset``, pick the timing pass (a trace pass if there is one, else the
first counter pass: serialised timings), join every other pass to it, merge the ggml op
metadata and fused groups, compute DRAM bytes from the joined counters, and collect notes.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Iterable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .. import __version__, spill
from ..analysis.arch import check_arch
from ..analysis.dram import BYTE_COLUMNS as DRAM_BYTE_COLUMNS
from ..analysis.dram import OUTPUT_COLUMNS as DRAM_OUTPUT_COLUMNS
from ..analysis.dram import base_arch, dram_bytes, is_input_counter
from ..analysis.peaks import choose_dram_ceiling
from ..capture.markers import RANGE_PREFIX, REGION_PART_COLUMNS, ggml_fields, range_messages, reset_rows
from ..errors import InputError
from ..memory import release_free_memory
from ..records import (
    AGENT_COLUMNS,
    PAYLOAD_COLUMNS,
    Capture,
    Note,
    PassData,
    conform,
    distinct,
    per_distinct,
    spill_columns,
    stack_column,
    take_rows,
    text_values,
)
from ..spill import ColumnWriter, is_spilled, release_pages
from ..text import printable
from .attribution import PassAttribution, attribute_pass, join_pass, reset_cutoff

_LAYER_RE = re.compile(r"-(\d+)$")


@dataclass
class RunFrames:
    """All rows of one run, by table name (see :mod:`rocroof.store.schema`), without ``run_id``.

    A run is given whole (``windows`` None: ``tables`` holds every frame) or as a sequence of
    windows (:meth:`rocroof.store.Store.write_run` writes them one after the other in the run's
    one transaction, and lets each go once written). With ``windows``:

    - ``tables`` holds the run-level frames only: ``agent`` and ``pass`` (written before the
      first window), and ``op_model``, ``op_edge``, ``run_ceiling`` (written after the last).
      The store numbers kernel names, DRAM texts and counters by first appearance over the
      windows; where that order is not the whole run's (a name of a later pass seen in an earlier
      window than a name of an earlier pass: a multi-pass run), ``tables`` may also hold
      ``kernel_symbol``, ``dram_text`` and ``counter`` in the stored tables' columns, numbering every
      name the windows hold as the whole run would (the store writes them before the first window).
    - Each window is a dict of any of the per-row frames ``dispatch``, ``counter_value``,
      ``counter_instance``, ``dram_traffic``, ``marker_range``, ``op_invocation``, ``op_node`` and
      ``op_operand``, in :func:`build_run`'s columns, numbered as the whole run numbers them
      (``dispatch_index``, ``range_index``, ``op_index``, ``timing_dispatch_index`` and ``ordinal``
      unique over the windows). Windows come in ``dispatch_index`` order (each pass's dispatches in
      increasing order); every dispatch of an op is in the window of the op's ``op_invocation``
      row; a dispatch's ``range_index`` and ``timing_dispatch_index`` name rows of its own window or
      of an earlier one.
    - ``run``, ``notes``, ``settings``, the ``pass`` rows and the run-level tables after the
      windows may be filled in while the windows are produced: they are read once the last
      window is written. ``run["content_sha256"]`` is known before the first (the duplicate
      check), or ``pending_sha256`` is the job computing it: the store then claims the hash
      between windows once the job is done, and at the latest after the last window, and the
      producer puts the job's result in ``run["content_sha256"]`` by the end of its last window.
      ``run["dram_peak_gbps"]`` should be known before the first (else the per-op time at the
      ceiling is summed again from the stored rows at the end).
    """

    run: dict[str, Any]
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    notes: list[Note] = field(default_factory=list)
    settings: dict[str, str] = field(default_factory=dict)
    windows: Iterable[dict[str, pd.DataFrame]] | None = None
    #: The content hash while it is still being computed (windowed runs only; ``run["content_sha256"]`` None).
    pending_sha256: Future[str] | None = None


def _agent_index(labels: pd.Series, agents: pd.DataFrame) -> tuple[pd.Series, pd.DataFrame]:
    """Map trace agent labels to rows of ``agents`` (adding unknown labels as new agents).

    rocprofv3 7.0 writes ``Agent N`` (logical node id), 6.x a bare node id, ``-A type-relative``
    ``GPU k``; rocpd and rocprof-compute labels are the agent table's own keys.
    """
    agents = agents.reset_index(drop=True).copy()
    lookup: dict[str, int] = {}
    for i, row in agents.iterrows():
        lookup[str(row["agent_label"])] = int(i)
    gpus = agents[agents["agent_type"] == "GPU"].sort_values("node_id")
    cpus = agents[agents["agent_type"] == "CPU"].sort_values("node_id")
    # per distinct label, not per dispatch: a pass of 10^6 dispatches names a handful of agents
    codes, uniques = _label_codes(labels)
    for label in uniques:
        if label is None or (isinstance(label, float) and np.isnan(label)):
            continue
        text = str(label).strip()
        if text in lookup:
            continue
        m = re.fullmatch(r"(?i)(agent|gpu|cpu)\s+(\d+)", text)
        hit: int | None = None
        if m:
            kind, num = m.group(1).upper(), int(m.group(2))
            if kind == "AGENT":
                sel = agents.index[agents["logical_node_id"] == num]
                if not len(sel):
                    sel = agents.index[agents["node_id"] == num]
                hit = int(sel[0]) if len(sel) else None
            else:
                pool = gpus if kind == "GPU" else cpus
                hit = int(pool.index[num]) if num < len(pool) else None
        elif text.isdigit():
            sel = agents.index[agents["node_id"] == int(text)]
            hit = int(sel[0]) if len(sel) else None
        if hit is None:
            agents = pd.concat(
                [agents, conform(pd.DataFrame([{"agent_label": text, "agent_type": "GPU"}]), AGENT_COLUMNS)],
                ignore_index=True,
            )
            hit = len(agents) - 1
        lookup[text] = hit
    hits = [lookup.get(str(v).strip()) for v in uniques]
    table = np.array([-1 if h is None else h for h in hits] + [-1], dtype=np.int64)  # code -1: missing label
    result = table[codes]
    return pd.Series(pd.arrays.IntegerArray(result, result < 0)), agents


def _label_codes(labels: pd.Series) -> tuple[np.ndarray, list[Any]]:
    """A code per row of ``labels`` (-1: missing) and the distinct labels in order of first appearance.

    A categorical (a large read's text, its codes in a spill file) is read through its codes a
    block at a time, without an object per row; other columns through :func:`pandas.factorize`.
    Shapes: codes (rows,) integers; one label per code.
    """
    array = labels.array
    if not isinstance(array, pd.Categorical):
        codes, uniques = pd.factorize(labels.astype(object), use_na_sentinel=True)
        return codes, list(uniques)
    codes = np.asarray(array.codes)
    first = np.full(len(array.categories), len(codes), dtype=np.int64)  # each code's first row
    for lo in range(0, len(codes), _CATEGORY_BLOCK):
        present, at = np.unique(codes[lo : lo + _CATEGORY_BLOCK], return_index=True)
        keep = present >= 0
        np.minimum.at(first, present[keep].astype(np.int64), lo + at[keep])
        release_pages()
    seen = np.flatnonzero(first < len(codes))
    ordered = seen[np.argsort(first[seen], kind="stable")]  # the codes in order of first appearance
    renumber = np.full(len(array.categories) + 1, -1, dtype=np.int64)
    renumber[ordered] = np.arange(len(ordered))
    categories = list(array.categories)
    return renumber[codes], [categories[i] for i in ordered.tolist()]


def _durations(p: PassData, notes: list[Note]) -> pd.Series:
    """GPU time per dispatch, ns: the source's duration, else end - start when both are exact."""
    d = p.dispatches.reset_index(drop=True)
    given = d["duration_ns"].astype("Int64")
    derived = (d["end_ns"] - d["start_ns"]).astype("Int64")
    rounded = (d["timestamps_exact"] == False).fillna(False).to_numpy(dtype=bool)  # noqa: E712 (nullable)
    if not p.timestamps_exact and not rounded.any():
        rounded = np.ones(len(d), dtype=bool)  # the reader flagged the pass, not single dispatches
    derived = derived.where(~rounded, pd.NA)
    dur = given.where(given.notna(), derived)
    negative = (dur < 0).fillna(False).to_numpy(dtype=bool)
    if negative.any():
        first = int(np.flatnonzero(negative)[0])
        notes.append(
            Note(
                "warning",
                "negative-duration",
                f"{p.label}: {int(negative.sum())} dispatch(es) end before they start (e.g. dispatch "
                f"{d['dispatch_id'].iloc[first]}); their durations are unknown",
            )
        )
    implausible = (dur > MAX_DISPATCH_NS).fillna(False).to_numpy(dtype=bool)
    if implausible.any():
        longest = int(np.flatnonzero(implausible)[int(np.argmax(dur[implausible].to_numpy(dtype=np.int64)))])
        notes.append(
            Note(
                "warning",
                "implausible-duration",
                f"{p.label}: {int(implausible.sum())} dispatch(es) last over an hour (e.g. dispatch "
                f"{d['dispatch_id'].iloc[longest]}: {int(dur.iloc[longest]) / 1e9:,.0f} s from its start to its end); "
                "their timestamps are damaged and their durations unknown",
            )
        )
    return dur.where(~(negative | implausible), pd.NA)


#: Longer than this, a dispatch's recorded time is taken as damaged (ns): no GPU kernel of a
#: ggml application runs for an hour, and one such value would make every share of time meaningless.
MAX_DISPATCH_NS = 3600 * 10**9


def _vendor(source_format: str) -> str | None:
    """``"AMD"`` or ``"NVIDIA"`` for a capture format that only that vendor's profilers write, else None.

    AMD: rocprofv3 (CSV, rocpd), rocprofiler-compute, rocprof v1/v2, RPD; NVIDIA: Nsight Systems and
    Compute. The fork's ``GGML_ROOFLINE_OUT`` JSON names no vendor (None).
    """
    from ..capture.readers import rocprof_legacy, rpd

    if source_format == "nvidia":
        return "NVIDIA"
    if source_format in ("rocprofv3-csv", "rocpd", "rocprof-compute", rocprof_legacy.FORMAT, rpd.FORMAT):
        return "AMD"
    return None


def _as_categories(df: pd.DataFrame, columns: tuple[str, ...]) -> None:
    """Turn the text ``columns`` of ``df`` present in it into categoricals, in place (same values)."""
    for name in columns:
        if name in df.columns and df[name].dtype == object and len(df):
            df[name] = _categorical(df[name].to_numpy(dtype=object))


#: Rows of a text column coded at a time by :func:`_categorical` (its temporaries: ~10 MB).
_CATEGORY_BLOCK = 1 << 18


def _categorical(values: np.ndarray, block: int = _CATEGORY_BLOCK) -> pd.Categorical:
    """``values`` (objects) as ``astype("category")`` makes them: the distinct values, sorted, as categories.

    The readers and the attribution share one string object per distinct name (a kernel name of
    ~170 characters on 10^6 rows is a few dozen objects): the objects are told apart by identity
    first (0.07 s for 10^6 rows) and only the distinct ones compared by value, instead of
    hashing every row's string (0.25 s). ``block`` rows at a time, so that the temporaries stay
    the size of a block (a whole-column pass held ~130 MB at 2x10^6 rows). Values that are not
    all strings (or NaN/None) go through pandas.
    """
    n = len(values)
    codes = np.empty(n, dtype=np.int64)
    seen: dict[int, int] = {}  # id of a distinct object -> its number, in order of first sight
    objects: list[Any] = []  # ``values`` keeps every object alive: an id names one object throughout
    for lo in range(0, n, block):
        part = values[lo : lo + block]
        ids = np.fromiter(map(id, part.tolist()), dtype=np.int64, count=len(part))
        distinct_ids, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
        local = np.empty(len(distinct_ids), dtype=np.int64)
        for j, (ident, at) in enumerate(zip(distinct_ids.tolist(), first.tolist(), strict=True)):
            number = seen.get(ident)
            if number is None:
                number = seen[ident] = len(objects)
                objects.append(part[at])
            local[j] = number
        codes[lo : lo + len(part)] = local[inverse.reshape(-1)]
    missing = [v is None or (isinstance(v, float) and v != v) for v in objects]
    present = [v for v, gone in zip(objects, missing, strict=True) if not gone]
    if not all(type(v) is str for v in present):
        return pd.Categorical(values)
    categories = sorted(set(present))
    position = {v: i for i, v in enumerate(categories)}
    code_of = np.array([-1 if gone else position[v] for v, gone in zip(objects, missing, strict=True)], dtype=np.int64)
    for lo in range(0, n, block):  # in place, a block at a time
        codes[lo : lo + block] = code_of[codes[lo : lo + block]]
    return pd.Categorical.from_codes(codes, categories=pd.Index(categories, dtype=object))


def build_run(
    capture: Capture,
    *,
    arch_override: str | None = None,
    source_path: str | None = None,
    keep_warmup: bool = False,
    release: bool = False,
) -> RunFrames:
    """Turn a capture into the rows of one run.

    Args:
        capture: what a reader returned.
        arch_override: GPU architecture to assume for every GPU agent (``--arch``), for
            captures that do not record it.
        source_path: the path the user gave, recorded in the run.
        keep_warmup: keep dispatches before the last ``ggml reset`` mark.
        release: take the capture: a pass's dispatch and marker frames are emptied once the run's
            frames hold copies of them (several passes are copied into one frame), so that a
            multi-pass capture is not held twice, and its launch calls and its dispatches'
            ``region`` texts once attributed; ``capture`` cannot be built again.

    Returns:
        The :class:`RunFrames` for :meth:`rocroof.store.Store.write_run`.
    """
    notes = list(capture.notes)
    for p in capture.passes:
        notes += p.notes
    _align_to_fork(capture, notes)
    agent_idx_per_pass = []
    agents = conform(capture.agents, AGENT_COLUMNS)
    for p in capture.passes:
        idx, agents = _agent_index(p.dispatches["agent_label"], agents)
        agent_idx_per_pass.append(idx)
    if arch_override:
        arch_override = check_arch(arch_override)
        vendor = _vendor(capture.source_format)
        given = "NVIDIA" if arch_override.startswith("sm_") else "AMD"
        if vendor is not None and vendor != given:
            raise InputError(
                f"--arch {arch_override}: an {given} architecture, but this is an {vendor} capture "
                f"({capture.source_format}); give its GPU's own (gfx942, gfx90a... for AMD; sm_90, sm_89... for NVIDIA)"
            )
        gpu = ((agents["agent_type"] == "GPU") | agents["agent_type"].isna()).to_numpy(dtype=bool)
        recorded = {str(a) for a in agents.loc[gpu, "gfx_arch"].dropna() if str(a)}
        conflict = {a for a in recorded if base_arch(a) != base_arch(arch_override)}
        if conflict:
            raise InputError(
                f"--arch {arch_override}: the capture records {', '.join(sorted(conflict))}; --arch only fills in an "
                "architecture the capture does not record"
            )
        recorded_arch = agents.loc[gpu, "gfx_arch"]
        agents.loc[gpu, "gfx_arch"] = recorded_arch.where(recorded_arch.notna(), arch_override)
    agents = agents.reset_index(drop=True)
    agents["agent_index"] = np.arange(len(agents))

    # attribution per pass, then warm-up removal
    attrs: list[PassAttribution] = []
    passes: list[PassData] = []
    first_measured: int | None = None  # first op invocation after a 'ggml reset' in a pass that records marks
    attrs0 = []
    for p in capture.passes:
        # a pass cut at a 'ggml reset' mark (or, from Nsight Compute, at the first measured
        # invocation) is attributed again once cut: it keeps its launch calls until then
        again = not keep_warmup and (p.region_method == "nvtx_stack" or _has_reset(p))
        attrs0.append(attribute_pass(p, release=release and not again))
        release_free_memory()  # the attribution's temporaries, freed on its return
    cuts = [None if keep_warmup else reset_cutoff(p, a) for p, a in zip(capture.passes, attrs0, strict=True)]
    for a, cut in zip(attrs0, cuts, strict=True):
        if cut is not None and cut.any() and a.dispatch["invocation"][~cut].notna().any():
            first = int(a.dispatch["invocation"][~cut].min())
            first_measured = first if first_measured is None else max(first_measured, first)
    _check_metadata_matches(capture, attrs0, notes)  # before the sidecar's first invocation cuts a warm-up
    meta = capture.op_metadata
    sidecar = meta is not None and meta.source == "ggml-cuda-markers" and len(meta.ops) > 0
    if first_measured is None and not keep_warmup and sidecar and meta is not None:
        # no pass records the reset mark (Nsight Compute alone): the hook's sidecar restarts at the
        # reset and holds the measured part only, so its first invocation is the first measured one
        first_measured = int(meta.ops["invocation"].min())
    for i, (p, aidx) in enumerate(zip(capture.passes, agent_idx_per_pass, strict=True)):
        attr, cut = attrs0[i], cuts[i]
        if cut is None and first_measured is not None and p.region_method == "nvtx_stack":
            # Nsight Compute records each kernel's NVTX stack but not the marks: its warm-up is found
            # by the op invocation ids, which the hook numbers monotonically across the reset
            cut = (attr.dispatch["invocation"] < first_measured).fillna(False).to_numpy(dtype=bool)
        if cut is not None:
            keep = ~cut
            if cut.any():
                by_marks = p.markers is not None and len(p.markers) > 0
                notes.append(warmup_note(p.label, int(cut.sum()), None if by_marks else first_measured))
            # the warm-up's ranges go too, so its op invocations do not appear without dispatches
            p = _subset(p, keep, markers_from_ns=_last_reset_ns(p))
            aidx = aidx[keep].reset_index(drop=True)
            attr = attribute_pass(p)
        attrs.append(attr)
        passes.append(p)
        agent_idx_per_pass[len(passes) - 1] = aidx
    # the passes' data: the capture's and those cut to the measured part (the same object where not cut)
    every_pass = list({id(q): q for q in (*passes, *capture.passes)}.values())
    if release:
        # the launch calls and the kernels' region texts (--kernel-rename, an Nsight Compute NVTX
        # stack) served the attribution only: their memory goes now (~50 and ~140 MB at 10^6)
        for q in every_pass:
            q.launches = q.launches.iloc[:0].copy()
            for column in ("region", *REGION_PART_COLUMNS):
                if column in q.dispatches.columns:
                    del q.dispatches[column]

    # timing pass
    timing = next((i for i, p in enumerate(passes) if p.kind == "trace"), 0 if passes else None)
    timing_source = "none"
    serialised = False
    if timing is not None:
        tp = passes[timing]
        if capture.profiler in ("ggml-roofline",) or tp.label == "ggml-roofline":
            timing_source = "profiler"
        elif tp.kind == "trace":
            timing_source = "trace"
        else:
            timing_source = "merged_counters" if tp.kind == "merged" else "counter_pass"
            serialised = True
            notes.append(
                Note(
                    "info",
                    "serialised-timings",
                    f"no trace pass: durations come from {tp.label}, where the profiler serialised kernels to read "
                    "counters; expect them to differ from an unprofiled run",
                )
            )
        if not tp.timestamps_exact:
            notes.append(Note("warning", "timestamps-rounded", tp.timestamps_note or f"{tp.label}: timestamps rounded"))

    # dispatch rows
    disp_frames = []
    offset = 0
    offsets = []
    timing_rows: pd.Series | None = None
    matched_counts: list[int | None] = []
    for i, (p, attr, aidx) in enumerate(zip(passes, attrs, agent_idx_per_pass, strict=True)):
        offsets.append(offset)
        d = p.dispatches.reset_index(drop=True)
        a = attr.dispatch
        frame = pd.DataFrame(
            {
                # numbering columns in spill files (rocroof.spill): ~24 MB less held at 10^6 rows
                "dispatch_index": spill.arange(offset, offset + len(d)),
                "pass_index": spill.full(len(d), i),
                "ordinal": spill.arange(0, len(d)),
                "dispatch_id": d["dispatch_id"],
                "kernel_name": d["kernel_name"],
                "kernel_id": d["kernel_id"],
                "agent_index": aidx,
                "queue_id": d["queue_id"],
                "stream_id": d["stream_id"],
                "process_id": d["process_id"],
                "thread_id": d["thread_id"],
                "correlation_id": d["correlation_id"],
                "start_ns": d["start_ns"],
                "end_ns": d["end_ns"],
                "duration_ns": _durations(p, notes),
                "grid_size": d["grid_size"],
                "workgroup_size": d["workgroup_size"],
                **{c: d[c] for c in ("grid_x", "grid_y", "grid_z", "workgroup_x", "workgroup_y", "workgroup_z")},
                "lds_bytes": d["lds_bytes"],
                "scratch_bytes": d["scratch_bytes"],
                "vgpr_count": d["vgpr_count"],
                "accum_vgpr_count": d["accum_vgpr_count"],
                "sgpr_count": d["sgpr_count"],
                "launch_ns": a["launch_ns"],
                "_range_row": a["range_row"],
                "_invocation": a["invocation"],
                "kernel_ordinal": a["kernel_ordinal"],
                "attribution_method": a["method"],
            },
            copy=False,  # the pass's columns are shared, not copied (copy-on-write)
        )
        if i == timing:
            frame["timing_dispatch_index"] = frame["dispatch_index"]
            matched_counts.append(len(frame))
        elif timing is not None:
            match, note = join_pass(passes[timing], attrs[timing], p, attr)
            frame["timing_dispatch_index"] = (match + offsets[timing]).astype("Int64") if timing < i else match
            matched_counts.append(int(match.notna().sum()))
            if note and capture.counter_sample is not None and p.kind == "counter" and bool(match.notna().all()):
                note = None  # a sample counts some evaluations by design; the counter-sample note says which
            if note:
                notes.append(note)
        else:
            frame["timing_dispatch_index"] = pd.NA
            matched_counts.append(None)
        disp_frames.append(frame)
        offset += len(d)
    # passes before the timing pass were matched with unshifted rows: shift them now
    if timing is not None:
        for i in range(timing):
            disp_frames[i]["timing_dispatch_index"] = (
                disp_frames[i]["timing_dispatch_index"].astype("Int64") + offsets[timing]
            )
        timing_rows = disp_frames[timing]["dispatch_index"]
    dispatch_counts = [len(p.dispatches) for p in passes]
    del d, frame  # the loop's last pass (its columns are in disp_frames)
    match = aidx = None  # the last join's rows and agents (in disp_frames too)
    agent_idx_per_pass.clear()
    release_free_memory()  # the passes' joins (join_pass) and durations

    # marker ranges
    range_frames = []
    r_offset = 0
    range_offsets = []
    for i, (p, attr) in enumerate(zip(passes, attrs, strict=True)):
        range_offsets.append(r_offset)
        m = p.markers.reset_index(drop=True)
        inv = attr.marker_invocation
        if inv is None:  # an attribution made elsewhere: read the ggml ranges here
            is_ggml, values, _, _, _ = ggml_fields(m)
            inv = pd.Series(pd.arrays.IntegerArray(values, ~is_ggml))
        malformed = _malformed_ranges(p.label, m, inv)
        if malformed is not None:
            notes.append(malformed)
        range_frames.append(
            pd.DataFrame(
                {
                    "range_index": spill.arange(r_offset, r_offset + len(m)),
                    "pass_index": spill.full(len(m), i),
                    "kind": m["kind"],
                    "process_id": m["process_id"],
                    "thread_id": m["thread_id"],
                    "start_ns": m["start_ns"],
                    "end_ns": m["end_ns"],
                    "message": m["message"],
                    "depth": attr.marker_depth.to_numpy(dtype=np.int64) if len(m) else np.zeros(0, dtype=np.int64),
                    "correlation_id": m["correlation_id"],
                    "invocation": inv.array,
                },
                copy=False,
            )
        )
        if attr.message_rebuilt is not None and attr.marker_op is not None and attr.marker_node is not None:
            # the ranges whose messages the attribution let go: rebuilt as they are written
            for hidden, values in zip(RANGE_REBUILD_COLUMNS, (attr.marker_op, attr.marker_node), strict=True):
                if np.array_equal(pd.notna(values), attr.message_rebuilt):  # None elsewhere already: shared
                    kept = values
                else:
                    kept = np.full(len(values), None, dtype=object)
                    kept[attr.message_rebuilt] = values[attr.message_rebuilt]
                range_frames[-1][hidden] = pd.Series(kept, index=range_frames[-1].index, copy=False)  # not copied
                del kept
        r_offset += len(m)
    copied = sum(1 for f in range_frames if len(f)) > 1
    had_markers = any(len(p.markers) for p in passes)
    ranges = _concat(range_frames)
    del range_frames

    # op invocations
    for p, attr in zip(passes, attrs, strict=True):
        shared = _invocations_of_several_processes(p, attr)
        if shared:
            notes.append(
                Note(
                    "warning",
                    "invocations-shared-by-processes",
                    f"{p.label}: {shared:,} ggml op invocation number(s) appear in the ranges of more than one "
                    "process: each process numbers its own ops, and a run keeps one op per number, so these "
                    "processes' ops are merged; ingest each process's files on their own (rocroof ingest "
                    "DIR/<pid>_kernel_trace.csv reads that process's files)",
                )
            )
    fused: dict[int, tuple[str, list[str]]] = dict(capture.fused_groups)
    own: set[int] = set()  # the groups of the capture's own ggml-fused marks (they win over a log's)
    for attr in attrs:
        fused.update(attr.fused)
        own.update(attr.fused)
    from_logs = frozenset(capture.fused_groups) - own
    release_free_memory()  # the joins' and the ranges' temporaries, before the op tables are built
    ops, nodes, operands = _op_tables(passes, attrs, timing, capture, _FusedGroups(fused, from_logs), notes)
    if release and copied:  # the ranges above are a copy of every pass's markers: let those go
        for p in every_pass:
            p.markers = p.markers.iloc[:0].copy()
    # what the run's rows need of the attributions is in the dispatch frame now: let the rest go
    del attrs, attrs0
    attr = a = None  # type: ignore[assignment]
    release_free_memory()
    # the passes' dispatch frames stacked only now: the attribution columns they share with the
    # attributions (let go above) are not held twice while stacked (~190 MB at 2x10^6 dispatch rows)
    if release and len(passes) > 1:
        # a column at a time, each pass's copy of it let go once stacked: never two whole copies
        dispatches = _concat_releasing(disp_frames, [q.dispatches for q in every_pass])
        for p in every_pass:
            p.dispatches = p.dispatches.iloc[:0].copy()  # a fresh frame: a slice would keep the arrays
        release_free_memory()
    else:
        dispatches = _concat(disp_frames)
    del disp_frames
    # the columns only stored from here on, in the narrowest integers that hold them (owned by the
    # run's frame: under release, the passes let their copies go)
    _narrow_payload(dispatches, [q.dispatches for q in every_pass] if release else [])
    if len(dispatches):
        shift = np.repeat(np.asarray(range_offsets, dtype=np.int64), dispatch_counts)
        dispatches["range_index"] = (dispatches["_range_row"].astype("Int64") + shift).astype("Int64")
    if len(dispatches):
        inv = dispatches["_invocation"].astype("Int64")
        known = inv.notna().to_numpy(dtype=bool)
        op_index = np.full(len(dispatches), -1, dtype=np.int64)
        if len(ops) and known.any():
            pos = pd.Index(ops["invocation"].to_numpy(dtype=np.int64)).get_indexer(
                inv.to_numpy(dtype=np.int64, na_value=0)[known]
            )
            op_index[known] = np.where(pos >= 0, ops["op_index"].to_numpy(dtype=np.int64)[np.clip(pos, 0, None)], -1)
            del pos
        dispatches["op_index"] = pd.arrays.IntegerArray(op_index, op_index < 0)
        del dispatches["_range_row"], dispatches["_invocation"]  # in place: no copy of the frame
        del shift, inv, known, op_index  # the lookups' temporaries (~60 MB at 2x10^6 rows)
        # the columns only stored from here on go to spill files (rocroof.spill), and under release
        # the passes let go of their frames: the rest of the run is built beside ~90 MB less at 10^6
        dispatches = spill_columns(dispatches, _STORED_AFTER_BUILD)
        if release:
            for p in every_pass:
                p.dispatches = p.dispatches.iloc[:0].copy()  # a fresh frame: a slice would keep the arrays
        release_free_memory()

    # counters (their columns shared with the passes', not copied)
    cv_frames, ci_frames = [], []
    cv_passes: list[int] = []  # the pass of each counter frame, in order
    for i, p in enumerate(passes):
        if len(p.counters):
            cv_passes.append(i)
            c = p.counters.reset_index(drop=True)
            rows = c["row"].to_numpy()
            cv_frames.append(
                pd.DataFrame(
                    {
                        "counter_name": c["counter_name"],
                        "value": c["value"],
                        # the first pass's rows are its dispatch indexes: the same array, no copy
                        "dispatch_index": rows if offsets[i] == 0 else _shifted(rows, offsets[i]),
                    },
                    copy=False,
                )
            )
        if len(p.instances):
            inst = p.instances.reset_index(drop=True)
            ci_frames.append(
                pd.DataFrame(
                    {
                        "counter_name": inst["counter_name"],
                        "instance": inst["instance"],
                        "value": inst["value"],
                        "dispatch_index": inst["row"].to_numpy(dtype=np.int64) + offsets[i],
                    },
                    copy=False,
                )
            )
    counter_values = (
        _stack_counters(cv_frames) if cv_frames else pd.DataFrame(columns=["counter_name", "value", "dispatch_index"])
    )
    counter_instances = (
        _concat(ci_frames)
        if ci_frames
        else pd.DataFrame(columns=["counter_name", "instance", "value", "dispatch_index"])
    )
    cv_lengths = [len(f) for f in cv_frames]
    del cv_frames, ci_frames

    # DRAM bytes per timing dispatch
    dram = pd.DataFrame()
    if timing_rows is not None and len(timing_rows):
        starts = np.cumsum([0, *cv_lengths]).tolist()
        spans = [(k, starts[j], starts[j + 1]) for j, k in enumerate(cv_passes)]
        dram = _dram(dispatches, counter_values, spans, agents, timing, notes, capture.counter_sample is not None)

    # run row
    # the timing pass's dispatches, only the columns the run row needs (not a copy of every column)
    columns = [c for c in ("agent_index", "attribution_method", "op_index", "duration_ns") if c in dispatches]
    if timing is not None and len(dispatches):
        tdisp = dispatches[columns][(dispatches["pass_index"] == timing).to_numpy(dtype=bool)]
    else:
        tdisp = dispatches[columns] if len(dispatches) else dispatches
    arch, name, cus, device = _run_gpu(tdisp, agents)
    if arch is None and len(tdisp):
        notes.append(
            Note(
                "warning",
                "no-gpu-arch",
                f"the {capture.source_format} capture does not record the GPU's architecture: DRAM bytes and the "
                "ceiling need it; ingest again with --arch (gfx942, gfx90a, sm_90...)",
            )
        )
    stated: tuple[float, str, str] | None = None  # the capture's own ceiling: (GB/s, source, rule)
    if capture.dram_peak_gbps is not None:
        stated = (float(capture.dram_peak_gbps), str(capture.dram_peak_source), capture.dram_peak_rule or "capture")
    ceiling = choose_dram_ceiling(stated, name, arch, cu_count=cus, device_id=device)
    for text in ceiling.warnings:
        measured = stated is not None and stated[2] != "capture"
        code = "measured-ceiling-implausible" if measured else "recorded-ceiling-implausible"
        notes.append(Note("warning", code, text))
    peak_gbps, peak_source = ceiling.gbps, ceiling.source
    above = _above_ceiling_note(dispatches, dram, peak_gbps)
    if above is not None:
        notes.append(above)
    if peak_gbps is None:
        notes.append(
            Note(
                "info",
                "no-ceiling",
                f"no DRAM bandwidth ceiling known for {name or arch or 'this GPU'}; add it to configs/peaks.yaml "
                "(or point ROCROOF_PEAKS at your own table)",
            )
        )
    methods = Counter(tdisp["attribution_method"]) if len(tdisp) else Counter()
    method = run_method(methods)
    unattributed = unattributed_note(methods)
    if unattributed is not None:
        notes.append(unattributed)
    if method == "none" and not had_markers and meta is None:
        notes.append(
            Note(
                "info",
                "no-markers",
                f"no roctx/NVTX ranges in this {capture.source_format} capture: its {len(tdisp):,} dispatch(es) are "
                "stored unattributed (record with the llama.cpp hook of tools/llama.cpp and the profiler's marker "
                "trace to attribute them to ggml ops)",
            )
        )
    if method == "enqueue_order":
        notes.append(ENQUEUE_ORDER_NOTE)
    pass_rows = pd.DataFrame(
        {
            "pass_index": np.arange(len(passes)),
            "kind": [p.kind for p in passes],
            "label": [p.label for p in passes],
            "source": [p.source for p in passes],
            "is_timing_pass": [i == timing for i in range(len(passes))],
            "dispatch_count": dispatch_counts,
            "matched_count": matched_counts,
            "requested_counters": [" ".join(p.requested_counters) if p.requested_counters else None for p in passes],
            "timestamps_exact": [p.timestamps_exact for p in passes],
        }
    )
    run = {
        "source_format": capture.source_format,
        "source_path": source_path or (capture.source_paths[0] if capture.source_paths else None),
        "content_sha256": capture.content_sha256 or None,
        "profiler": capture.profiler,
        "profiler_version": capture.profiler_version,
        "command": capture.command,
        "host": capture.host,
        "gpu_arch": arch,
        "gpu_name": name,
        "timing_source": timing_source,
        "serialised_timings": serialised,
        "attribution_method": method,
        "dram_peak_gbps": peak_gbps,
        "dram_peak_source": peak_source,
        "dram_peak_rule": ceiling.rule,
        "cache_control": capture.sysinfo.get("cache_control") or capture.sysinfo.get("ncu_cache_control"),
        "rocroof_version": __version__,
    }
    from ..analysis.tables import analysis_tables, ceiling_rows

    if capture.op_metadata is not None and len(tdisp) and "op_index" in tdisp:  # read by analysis_tables only
        op_time = tdisp.groupby("op_index")["duration_ns"].sum(min_count=1)
    else:
        op_time = pd.Series(dtype=float)
    if capture.counter_sample is not None and timing is not None and len(ops):
        sample_note = _sample_note(capture, ops, tdisp, dram)
        if sample_note is not None:
            notes.append(sample_note)
    extra = analysis_tables(capture.op_metadata, ops, op_time, notes)
    if len(extra["op_model"]):
        from ..analysis.roofline import compute_ceilings

        shapes = extra["op_model"][["op_index"]].merge(ops, on="op_index", how="left")
        extra["op_model"]["compute_ceiling"] = compute_ceilings(shapes, arch)
    extra["run_ceiling"] = ceiling_rows(
        name,
        arch,
        peak_gbps,
        peak_source,
        capture.measured_ceilings,
        cu_count=cus,
        device_id=device,
        dram_rule=ceiling.rule,
    )
    release_free_memory()  # DRAM bytes' and the run row's temporaries (~230 MB at 2x10^6 Nsight rows)
    # text that repeats (a few dozen kernel names and formulas over 10^6 rows) as categoricals: one
    # string per distinct value instead of one per row (~220 MB of kernel names at 10^6 dispatches)
    _as_categories(dispatches, ("kernel_name", "agent_label", "attribution_method"))
    _as_categories(dram, ("dram_formula", "dram_bytes_note"))
    _as_categories(ops, ("op", "op_list"))
    tables = {
        "agent": agents,
        "pass": pass_rows,
        "dispatch": dispatches,
        "counter_value": counter_values,
        "counter_instance": counter_instances,
        "marker_range": ranges,
        "op_invocation": ops,
        "op_node": nodes,
        "op_operand": operands,
        "dram_traffic": dram,
        **extra,
    }
    release_free_memory()
    return RunFrames(run=run, tables=tables, notes=_dedupe(notes), settings=dict(capture.sysinfo))


def warmup_note(label: str, count: int, first_measured: int | None = None) -> Note:
    """``warmup-dropped``: ``count`` dispatches of pass ``label`` before the last ``ggml reset`` mark.

    ``first_measured``: the first measured op invocation, named where the pass has no marks (its
    warm-up found by invocation number: Nsight Compute).
    """
    return Note(
        "info",
        "warmup-dropped",
        f"{label}: dropped {count} warm-up dispatches before the last 'ggml reset' mark"
        + ("" if first_measured is None else f" (op invocations < {first_measured})"),
    )


def run_method(methods: Counter[str]) -> str:
    """The run's attribution method: the commonest of its timing dispatches' methods but ``none`` (else ``none``)."""
    attributed = {k: v for k, v in methods.items() if k != "none"}
    return max(attributed, key=lambda k: attributed[k]) if attributed else "none"


def unattributed_note(methods: Counter[str]) -> Note | None:
    """``unattributed``: timing dispatches no ggml range held, in a run where others were attributed."""
    if methods.get("none") and any(k != "none" for k in methods):
        return Note("info", "unattributed", f"{methods['none']} dispatch(es) launched outside any ggml range")
    return None


#: The run note of a run attributed by correlation-id order (no launch record).
ENQUEUE_ORDER_NOTE = Note(
    "info",
    "attribution-enqueue-order",
    "no HIP API trace: dispatches were attributed to the latest range pushed on their thread before "
    "launch (correlation-id order); record with --hip-runtime-trace for launch-time attribution",
)


#: A dispatch whose measured DRAM bytes over its time exceed this many times the DRAM ceiling is
#: flagged: real captures stay below it (at most 0.71x in the recorded fixtures and examples: MI250X
#: laplacian; H200 decode 0.39x), while a damaged counter or timestamp gives any ratio.
ABOVE_CEILING = 2.0


def _above_ceiling_note(dispatches: pd.DataFrame, dram: pd.DataFrame, peak_gbps: float | None) -> Note | None:
    """``dram-above-ceiling``: timing dispatches whose DRAM bytes per ns exceed :data:`ABOVE_CEILING` x the ceiling.

    ``dram`` rows are timing dispatches by ``dispatch_index`` (the row of ``dispatches``); GB/s =
    bytes per ns. Their values are kept: the note says which to distrust.
    """
    if not peak_gbps or not len(dram) or "duration_ns" not in dispatches:
        return None
    rows = dram["dispatch_index"].to_numpy(dtype=np.int64)
    ns = pd.to_numeric(dispatches["duration_ns"], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)[rows]
    total = sum(
        pd.to_numeric(dram[c], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
        for c in ("dram_read_bytes", "dram_write_bytes")
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = total / ns / float(peak_gbps)
    above = np.flatnonzero(np.isfinite(ratio) & (ratio > ABOVE_CEILING) & (ns > 0))
    if not len(above):
        return None
    worst = int(above[int(np.argmax(ratio[above]))])
    ident = dispatches["dispatch_id"].iloc[rows[worst]] if "dispatch_id" in dispatches else rows[worst]
    return Note(
        "warning",
        "dram-above-ceiling",
        f"{len(above):,} dispatch(es) moved DRAM bytes faster than {ABOVE_CEILING:g}x the {float(peak_gbps):,.0f} GB/s "
        f"ceiling (dispatch {ident}: {ratio[worst]:,.1f}x): a counter value or a time is damaged, or the ceiling is "
        "wrong; their bandwidths are not to be trusted",
    )


def _sample_note(capture: Capture, ops: pd.DataFrame, tdisp: pd.DataFrame, dram: pd.DataFrame) -> Note | None:
    """``counter-sample``: which graph evaluations the sampled counter pass measured (from the data).

    An evaluation counts as measured when every one of its timing dispatches has DRAM bytes;
    one with some is named as measured in part (the profiler's launch count and the trace
    disagreed). Evaluations are split as :func:`rocroof.analysis.graph.evaluations_by_name` does.
    """
    from ..analysis.graph import evaluations_by_name
    from .sample import describe_evaluations, evaluation_tokens, phase_of

    order = ops.sort_values("invocation")
    names = [n if isinstance(n, str) else None for n in order["node_name"]]
    evals = evaluations_by_name([int(v) for v in order["invocation"]], names)
    eval_of_op = dict(zip(order["op_index"].astype(int), (evals[int(v)] for v in order["invocation"]), strict=True))
    known = pd.Series(False, index=tdisp.index)
    if len(dram) and "dram_read_bytes" in dram:
        have = set(dram.loc[dram["dram_read_bytes"].notna(), "dispatch_index"].astype(int))
        known = pd.Series(tdisp.index.map(lambda i: i in have), index=tdisp.index)
    op_index = tdisp["op_index"] if "op_index" in tdisp else pd.Series(pd.NA, index=tdisp.index)
    frame = pd.DataFrame({"evaluation": op_index.map(lambda v: eval_of_op.get(int(v)) if pd.notna(v) else None)})
    frame["known"] = known.to_numpy(dtype=bool)
    frame = frame.dropna(subset=["evaluation"])
    if not len(frame):
        return None
    per = frame.groupby("evaluation")["known"].agg(["sum", "count"])
    tokens = evaluation_tokens(capture.op_metadata, evals)
    whole = [(int(k), phase_of(tokens.get(int(k)))) for k, r in per.iterrows() if r["sum"] == r["count"]]
    part = [int(k) for k, r in per.iterrows() if 0 < r["sum"] < r["count"]]
    text = "DRAM bytes measured on " + describe_evaluations(whole, len(per))
    if part:
        text += f"; in part: evaluation(s) {', '.join(map(str, part))}"
    spec = capture.counter_sample.get("spec") if capture.counter_sample else None
    text += "; times cover every evaluation" + (f" (rocroof collect --sample {spec})" if spec else "")
    return Note("info", "counter-sample", text)


def _align_to_fork(capture: Capture, notes: list[Note]) -> None:
    """Give marker-free passes the invocations of the fork's kernel pass, by kernel sequence.

    The reader puts the fork's kernels (``GGML_ROOFLINE_OUT`` rows) first, as the pass labelled
    ``ggml-roofline``, when no pass of the capture says which op launched a kernel
    (:func:`rocroof.capture.readers.has_op_attribution`); each such pass is aligned to it
    (:func:`rocroof.ingest.align.align`) and its matched kernels take their partner's invocation,
    so attribution ("profiler") and the join to the timing pass work as for any attributed pass.

    When no pass aligns (each matches under :data:`rocroof.ingest.align.MIN_MATCHED` of the fork's
    kernels), the JSON is of another run: named by the user (``--attach``) it is refused; found
    beside the capture, the run is stored without it (the fork's pass and its op metadata) and a
    ``metadata-unmatched`` warning says why, as :func:`_check_metadata_matches` does for op metadata
    without kernels.

    Raises:
        InputError: no pass aligns and the JSON was named with ``--attach``; or one pass aligns and
            another does not (not the same command, or only a window of it).
    """
    from ..capture.readers import has_op_attribution
    from .align import MIN_MATCHED, Alignment, align

    ref = next((p for p in capture.passes if p.label == "ggml-roofline"), None)
    if ref is None or not bool(ref.dispatches["invocation"].notna().any()):
        return
    ref_names = text_values(ref.dispatches["kernel_name"]).tolist()
    ref_inv = ref.dispatches["invocation"].astype("Int64").to_numpy(dtype=np.int64, na_value=-1)
    aligned: list[tuple[PassData, Alignment, str]] = []
    refused: list[str] = []
    for p in capture.passes:
        if p is ref or not len(p.dispatches) or has_op_attribution(p):
            continue
        a = align(ref_names, text_values(p.dispatches["kernel_name"]).tolist())
        where = f"{p.label}: {a.matched:,} of its {len(p.dispatches):,} kernels match the fork's {len(ref_names):,}"
        if not a.acceptable:
            refused.append(
                f"{where} by kernel sequence ({100 * a.share_of_pass:.1f}% of the pass, "
                f"{100 * a.share_of_reference:.1f}% of the fork's; {100 * MIN_MATCHED:.0f}% of the fork's needed)"
            )
            continue
        aligned.append((p, a, where))
    file = capture.op_metadata_file or ref.source or "the fork's JSON"
    if refused and not aligned:
        if capture.op_metadata_attached:
            raise InputError(
                f"--attach {file}: {refused[0]}: is it from another run? The fork's kernels must be a run of the same "
                "command, whole (with repeated graph evaluations a window cannot be placed); or record the counters "
                "with the marker hook instead"
            )
        capture.passes.remove(ref)
        capture.op_metadata = None
        notes[:] = [n for n in notes if n.code != "fork-timing-pass"]
        notes.append(
            Note(
                "warning",
                "metadata-unmatched",
                f"{file} left out (found beside the capture): {refused[0]}: is it from another run? "
                "The run is stored without op metadata; attach this run's JSON with --attach",
            )
        )
        return
    if refused:
        raise InputError(
            f"{file}: {refused[0]}: not a run of the same command, or only part of it (with repeated graph "
            "evaluations a window cannot be placed); record the counters with the marker hook instead"
        )
    for p, a, where in aligned:
        inv = np.where(a.partner >= 0, ref_inv[np.clip(a.partner, 0, None)], -1)
        p.dispatches["invocation"] = pd.arrays.IntegerArray(inv, inv < 0)
        notes.append(
            Note(
                "info",
                "aligned-to-fork",
                f"{where} by kernel sequence ({100 * a.share_of_pass:.2f}% of the pass, "
                f"{100 * a.share_of_reference:.2f}% of the fork's): {len(p.dispatches) - a.matched:,} unmatched "
                "kernel(s) (memsets, warm-up, kernels the fork does not list) stay unattributed",
            )
        )


def _check_metadata_matches(capture: Capture, attrs: list[PassAttribution], notes: list[Note]) -> None:
    """Refuse, or leave out, op metadata that matches none of the capture's op invocations.

    The op metadata (rocroof's hook sidecar, AMD's fork's ``GGML_ROOFLINE_OUT`` JSON) is merged
    with the capture invocation by invocation (:func:`_op_tables`). An invocation of the metadata
    matches when the capture has an op invocation of the same number (a ggml range, or a dispatch
    attributed to it: NVTX stack, region, the fork's own kernels) whose op is the metadata's head
    op, or whose op the capture does not name. Some invocations of the metadata may find none (a
    warm-up the sidecar holds and the capture dropped: ``metadata-only``; a few ops that differ:
    ``metadata-mismatch``); none at all means it is of another run (a trial user attached an
    NVIDIA llama.cpp run's sidecar to an AMD vcopy capture without markers, and 65 op invocations
    without a dispatch were stored). Then, as for the fork's JSON whose kernels do not align
    (:func:`_align_to_fork`): a file the user named (``--attach``) is refused; one found beside the
    capture is left out (``capture.op_metadata`` becomes None) with a ``metadata-unmatched`` warning.

    Args:
        capture: the capture; its passes are those ``attrs`` attribute (before any warm-up cut:
            the metadata may hold the warm-up too).
        attrs: each pass's attribution.
        notes: the run's notes, appended to.

    Raises:
        InputError: the metadata was named with ``--attach`` (or is the capture) and matches none.
    """
    meta = capture.op_metadata
    if meta is None or not len(meta.ops):
        return
    meta_inv, first = np.unique(
        meta.ops["invocation"].astype("Int64").to_numpy(dtype=np.int64, na_value=-1), return_index=True
    )
    meta_op = meta.ops["op"].to_numpy(dtype=object)[first]
    seen: list[np.ndarray] = []  # the capture's distinct invocations, per source (for the message)
    for p, a in zip(capture.passes, attrs, strict=True):
        is_ggml, marker_inv, marker_op, _ = _marker_ggml(p, a)
        d_inv = a.dispatch["invocation"].astype("Int64")
        has = d_inv.notna().to_numpy(dtype=bool)
        sources = (
            (marker_inv[is_ggml], np.asarray(marker_op, dtype=object)[is_ggml]),
            (d_inv.to_numpy(dtype=np.int64, na_value=0)[has], a.dispatch["op"].to_numpy(dtype=object)[has]),
        )
        for inv, op in sources:
            if not len(inv):
                continue
            at = np.clip(np.searchsorted(meta_inv, inv), 0, max(len(meta_inv) - 1, 0))
            same_number = meta_inv[at] == inv
            if same_number.any():
                theirs, ours = meta_op[at[same_number]], op[same_number]
                unnamed = np.fromiter((not isinstance(o, str) for o in ours), dtype=bool, count=len(ours))
                if bool(unnamed.any()) or bool((theirs == ours).any()):
                    return  # one invocation of the metadata is the capture's: it belongs to the run
            seen.append(np.unique(inv))
    distinct_capture = np.unique(np.concatenate(seen)) if seen else np.zeros(0, dtype=np.int64)
    if len(distinct_capture):
        what = (
            f"none of its {len(meta_inv):,} op invocations ({_span(meta_inv)}) has the number and op of one of the "
            f"capture's {len(distinct_capture):,} ({_span(distinct_capture)})"
        )
    else:
        timing = next((p for p in capture.passes if p.kind == "trace"), capture.passes[0] if capture.passes else None)
        dispatches = len(timing.dispatches) if timing is not None else 0
        what = (
            f"its {len(meta_inv):,} op invocations match none of the capture's {dispatches:,} dispatches "
            "(the capture has no ggml op markers to attribute them by)"
        )
    file = capture.op_metadata_file or "the op metadata JSON"
    if capture.op_metadata_attached:
        raise InputError(
            f"--attach {file}: {what}: is it from another run? Attach the op metadata this run wrote "
            "(GGML_CUDA_OP_META or GGML_ROOFLINE_OUT of the profiled command)"
        )
    capture.op_metadata = None
    notes.append(
        Note(
            "warning",
            "metadata-unmatched",
            f"{file} left out (found beside the capture): {what}: is it from another run? The run is stored "
            "without op metadata; attach this run's with --attach",
        )
    )


def _span(invocations: np.ndarray) -> str:
    """``"invocations 3-67"`` (or ``"invocation 3"``) of a non-empty array of invocation numbers."""
    lo, hi = int(invocations.min()), int(invocations.max())
    return f"invocation {lo}" if lo == hi else f"invocations {lo}-{hi}"


def _malformed_ranges(label: str, markers: pd.DataFrame, invocation: pd.Series) -> Note | None:
    """``malformed-range``: ranges whose message starts like the hook's (``ggml:``) but does not follow its grammar.

    ``markers``: a pass's markers (fresh index); ``invocation``: per marker row the ggml invocation
    its message gives (``<NA>`` where it gives none). Such a range holds no op, so the dispatches
    launched in it are counted unattributed: without this warning a damaged or hand-edited marker
    trace reads as a capture that was never marked.
    """
    rows = np.flatnonzero((markers["kind"] == "range").to_numpy(dtype=bool) & invocation.isna().to_numpy(dtype=bool))
    messages = markers["message"].to_numpy(dtype=object)[rows]
    bad = [text for text in messages.tolist() if isinstance(text, str) and text.startswith(RANGE_PREFIX)]
    if not bad:
        return None
    return Note(
        "warning",
        "malformed-range",
        f"{label}: {len(bad):,} range(s) start with {RANGE_PREFIX!r} but do not read "
        "ggml:<OP>:<node name>:<invocation> with a whole-number invocation below 2**63 (e.g. "
        f"{printable(bad[0][:100])!r}): the dispatches launched in them are not attributed to an op",
    )


def _dedupe(notes: list[Note]) -> list[Note]:
    return list(dict.fromkeys(notes))


#: Hidden ``marker_range`` frame columns: the op and node name of each range whose message the
#: attribution let go (None elsewhere); see :func:`with_range_messages`.
RANGE_REBUILD_COLUMNS = ("_range_op", "_range_node")


def with_range_messages(ranges: pd.DataFrame) -> pd.DataFrame:
    """``marker_range`` rows (all, or a chunk) with every message: those let go rebuilt.

    :func:`rocroof.ingest.attribution.attribute_pass` with ``release`` lets go of the text of each
    ggml range that its op, node name and invocation give back; :func:`build_run` then marks
    those rows in :data:`RANGE_REBUILD_COLUMNS`, and the store calls this a chunk of rows at a
    time as it writes them (:func:`rocroof.capture.markers.range_messages`). A frame without
    those columns is returned as it is; the result has none of them.
    """
    if RANGE_REBUILD_COLUMNS[0] not in ranges.columns:
        return ranges
    op = ranges[RANGE_REBUILD_COLUMNS[0]].to_numpy(dtype=object)
    todo = np.flatnonzero(~np.asarray(pd.isna(op), dtype=bool))
    out = ranges.drop(columns=list(RANGE_REBUILD_COLUMNS))
    if len(todo):
        messages = text_values(ranges["message"]).copy()
        node = ranges[RANGE_REBUILD_COLUMNS[1]].to_numpy(dtype=object)
        invocation = ranges["invocation"].to_numpy(dtype=object)
        messages[todo] = range_messages(op[todo], node[todo], invocation[todo])
        out["message"] = pd.Series(messages, dtype=object, index=out.index, copy=False)  # text, None (not NaN)
    return out


def _has_reset(p: PassData) -> bool:
    """True when the pass records a ``ggml reset`` mark (:func:`reset_cutoff` may cut it)."""
    m = p.markers
    return bool(len(m)) and bool(reset_rows(m).any())


def _last_reset_ns(p: PassData) -> int | None:
    m = p.markers
    resets = m[reset_rows(m)]
    return int(resets["start_ns"].max()) if len(resets) and resets["start_ns"].notna().any() else None


def _subset(p: PassData, keep: np.ndarray, markers_from_ns: int | None = None) -> PassData:
    """The pass restricted to ``keep`` dispatches (and to markers ending at or after ``markers_from_ns``)."""
    rows = np.flatnonzero(keep)
    renumber = np.full(len(keep), -1, dtype=np.int64)  # a kept dispatch's new row
    renumber[rows] = np.arange(len(rows))
    # counter rows of kept dispatches, renumbered; spilled columns stay spilled (records.take_rows)
    counters = take_rows(p.counters, _rows_of_kept(p.counters, keep), {"row": renumber})
    inst = take_rows(p.instances, _rows_of_kept(p.instances, keep), {"row": renumber})
    return dataclasses.replace(  # every other field (region method, notes...) carries over
        p,
        dispatches=take_rows(p.dispatches, rows),
        counters=counters,
        instances=inst,
        markers=p.markers
        if markers_from_ns is None
        else p.markers[(p.markers["end_ns"] >= markers_from_ns).fillna(True).to_numpy()].reset_index(drop=True),
    )


def _rows_of_kept(records: pd.DataFrame, keep: np.ndarray) -> np.ndarray:
    """Positions of the ``records`` (counters, instances) whose ``row`` is a kept dispatch, in order."""
    dispatch_rows = records["row"].to_numpy(dtype=np.int64)
    parts = [
        lo + np.flatnonzero(keep[dispatch_rows[lo : lo + _RELEASE_EVERY]])
        for lo in range(0, len(dispatch_rows), _RELEASE_EVERY)
    ]
    release_pages()
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def _run_gpu(tdisp: pd.DataFrame, agents: pd.DataFrame) -> tuple[str | None, str | None, int | None, int | None]:
    """``(arch, product name, CU count, PCI device id)`` of the GPU most timing dispatches ran on."""
    if len(tdisp) and tdisp["agent_index"].notna().any():
        top = int(tdisp["agent_index"].dropna().astype(int).mode().iloc[0])
        row = agents.iloc[top]
    else:
        gpus = agents[agents["agent_type"] == "GPU"]
        if not len(gpus):
            return None, None, None, None
        row = gpus.iloc[0]
    arch = row["gfx_arch"] if isinstance(row["gfx_arch"], str) else None
    name = row["product_name"] if isinstance(row["product_name"], str) else None
    cus = int(row["cu_count"]) if pd.notna(row["cu_count"]) else None
    device = int(row["pci_device_id"]) if pd.notna(row["pci_device_id"]) else None
    return arch, name, cus, device


#: A byte count taken from the profiler's derived FETCH_SIZE / WRITE_SIZE (see rocroof.analysis.dram).
_DERIVED_SIZE = re.compile(r"from (?:FETCH|WRITE)_SIZE \(KB x 1024\)")

#: Counter values and dispatches handled at a time when computing DRAM bytes (bounds the memory it needs).
_DRAM_CHUNK = 1 << 16


#: Dispatch columns that no step after the dispatch frame is built reads as a whole (the store
#: writes them a chunk at a time): spilled there (:func:`rocroof.records.spill_columns`).
_STORED_AFTER_BUILD = (
    *PAYLOAD_COLUMNS,
    "ordinal",
    "start_ns",
    "end_ns",
    "launch_ns",
    "kernel_ordinal",
    "range_index",
    "correlation_id",
    "thread_id",
    "process_id",
)


def _narrow_payload(dispatches: pd.DataFrame, owners: list[pd.DataFrame]) -> None:
    """Store-only ``Int64`` columns of ``dispatches`` as ``Int8``/``Int16``/``Int32`` where their values fit.

    The values and NULLs are unchanged (the store writes Python integers of any width): 9 bytes a
    value become 2-5 (a 2x10^6-row Nsight run: ~150 MB less). Each column is deleted from
    ``owners`` (frames that share its old array, e.g. the passes' dispatch frames) once replaced.
    """
    for name in PAYLOAD_COLUMNS:
        if name not in dispatches.columns or not isinstance(dispatches[name].dtype, pd.Int64Dtype):
            continue
        column = dispatches[name]
        if is_spilled(column.array):  # in a spill file, not in memory: nothing to gain
            continue
        mask = column.isna().to_numpy(dtype=bool)
        data = column.to_numpy(dtype=np.int64, na_value=0)
        present = data[~mask]
        low, high = (int(present.min()), int(present.max())) if len(present) else (0, 0)
        del present
        narrow = next(
            (t for t in (np.int8, np.int16, np.int32) if np.iinfo(t).min <= low and high <= np.iinfo(t).max), None
        )
        if narrow is None:
            continue
        dispatches[name] = pd.arrays.IntegerArray(data.astype(narrow), mask)
        del column, data
        for owner in owners:
            if owner is not dispatches and name in owner.columns:
                del owner[name]


def _concat_releasing(frames: list[pd.DataFrame], owners: list[pd.DataFrame]) -> pd.DataFrame:
    """:func:`_concat` of frames with the same columns, built a column at a time.

    Each column, once stacked, is deleted from ``frames`` and from ``owners`` (frames that share
    their arrays, e.g. the passes' dispatch frames): peak memory is the result plus one column,
    not two whole copies. ``frames`` and ``owners`` lose those columns.
    """
    out: dict[str, Any] = {}
    for name in list(frames[0].columns):
        out[name] = stack_column([f[name] for f in frames])  # a spilled column stays spilled
        for f in (*frames, *owners):
            if name in f.columns:
                del f[name]
    return pd.DataFrame(out, copy=False)


#: Counter rows read between two releases of spilled pages in :func:`_dram` (~16 MB of them).
_RELEASE_EVERY = 16 * _DRAM_CHUNK


def _shifted(rows: np.ndarray, offset: int) -> np.ndarray:
    """``rows + offset`` as int64, written to a spill file a chunk at a time (:mod:`rocroof.spill`)."""
    with ColumnWriter(np.int64) as writer:
        for lo in range(0, len(rows), _RELEASE_EVERY):
            writer.append(rows[lo : lo + _RELEASE_EVERY].astype(np.int64) + offset)
            release_pages()
        return writer.finish()


def _stack_counters(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Counter frames (``counter_name``, ``value``, ``dispatch_index``) one after the other.

    One frame is returned as it is. Several are stacked a column at a time through spill files
    (:mod:`rocroof.spill`), a chunk of rows at a time, so that the passes' counters (spilled by
    their readers) are not copied into memory whole; counter names become one categorical over
    the names of every frame, in order of first appearance.
    """
    if len(frames) == 1:
        return frames[0].reset_index(drop=True)
    categories: dict[Any, int] = {}
    remaps = []
    for f in frames:
        codes, uniques = _name_codes(f["counter_name"])
        remaps.append(np.array([categories.setdefault(u, len(categories)) for u in uniques] + [-1], dtype=np.int32))
    width = np.int8 if len(categories) < 127 else np.int16 if len(categories) < 32767 else np.int32
    writers = {
        "counter_name": ColumnWriter(width),
        "value": ColumnWriter(np.float64),
        "dispatch_index": ColumnWriter(np.int64),
    }
    try:
        for f, remap in zip(frames, remaps, strict=True):
            codes, _ = _name_codes(f["counter_name"])
            values = f["value"].to_numpy(dtype=np.float64)
            rows = f["dispatch_index"].to_numpy(dtype=np.int64)
            for lo in range(0, len(f), _RELEASE_EVERY):
                hi = lo + _RELEASE_EVERY
                writers["counter_name"].append(remap[codes[lo:hi]])
                writers["value"].append(values[lo:hi])
                writers["dispatch_index"].append(rows[lo:hi])
                release_pages()
        names = pd.Categorical.from_codes(writers["counter_name"].finish(), categories=list(categories))
        return pd.DataFrame(
            {
                "counter_name": names,
                "value": writers["value"].finish(),
                "dispatch_index": writers["dispatch_index"].finish(),
            },
            copy=False,
        )
    finally:
        for writer in writers.values():
            writer.close()


def _name_codes(names: pd.Series) -> tuple[np.ndarray, list[Any]]:
    """Codes (-1: missing) and distinct values of a column of counter names (categorical or not)."""
    if isinstance(names.dtype, pd.CategoricalDtype):
        return names.cat.codes.to_numpy(), list(names.cat.categories)
    codes, uniques = pd.factorize(names.to_numpy(dtype=object), use_na_sentinel=True)
    return codes, list(uniques)


def _concat(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Frames one after the other with a fresh index; a single frame (or one with rows) is not copied."""
    if not frames:
        return pd.DataFrame()
    if len(frames) == 1:
        return frames[0].reset_index(drop=True)
    columns = list(frames[0].columns)
    filled = [f for f in frames if len(f)]
    if len(filled) == 1 and all(set(f.columns) <= set(filled[0].columns) for f in frames):
        return filled[0].reset_index(drop=True)  # the others are empty: no copy (a pass without markers)
    if all(list(f.columns) == columns for f in frames[1:]):  # a spilled column stays spilled (rocroof.spill)
        return pd.DataFrame({c: stack_column([f[c] for f in frames]) for c in columns}, copy=False)
    return pd.concat(frames, ignore_index=True)


def _dram(
    dispatches: pd.DataFrame,
    counter_values: pd.DataFrame,
    spans: list[tuple[int, int, int]],
    agents: pd.DataFrame,
    timing: int | None,
    notes: list[Note],
    sampled: bool = False,
) -> pd.DataFrame:
    """DRAM bytes of each timing-pass dispatch from the counters of every pass joined to it.

    With ``sampled`` (a counter sample of ``rocroof collect``), dispatches that no counter pass
    measured get no per-dispatch note (their bytes are simply unknown).

    A counter measured in several passes comes from the timing pass, else from the earliest
    pass. Only the counters a DRAM formula reads are gathered (:func:`rocroof.analysis.dram.is_input_counter`),
    into one row per timing dispatch and one column per counter: O(counter values).
    """
    if not len(counter_values):
        return pd.DataFrame()
    is_timing = (dispatches["pass_index"] == timing).to_numpy(dtype=bool)
    timing_index = dispatches["dispatch_index"].to_numpy(dtype=np.int64)[is_timing]
    n_timing = len(timing_index)
    first_timing = int(timing_index[0]) if n_timing else 0  # the timing pass's rows are contiguous
    names = counter_values["counter_name"]
    if isinstance(names.dtype, pd.CategoricalDtype):
        all_codes, labels = names.cat.codes.to_numpy(), list(names.cat.categories)
    else:
        factor, uniques = pd.factorize(names.to_numpy(dtype=object), use_na_sentinel=True)
        all_codes, labels = factor, list(uniques)
    wanted = [j for j, name in enumerate(labels) if isinstance(name, str) and is_input_counter(name)]
    column_of = np.full(len(labels) + 1, -1, dtype=np.int64)  # code -1 (a missing name) stays out
    column_of[wanted] = np.arange(len(wanted))
    k = max(len(wanted), 1)
    wide = np.full(n_timing * k, np.nan)
    filled = np.zeros(n_timing * k, dtype=bool)
    target_of = dispatches["timing_dispatch_index"].astype("Int64").to_numpy(dtype=np.int64, na_value=-1)
    all_rows = counter_values["dispatch_index"].to_numpy(dtype=np.int64)
    all_values = counter_values["value"].to_numpy(dtype=np.float64)
    # spans: (pass, first row, end row) of each pass's counter rows; the timing pass's come first,
    # then the others in pass order; a (dispatch, counter) already filled keeps its value
    for _, start, stop in sorted(spans, key=lambda span: (span[0] != timing, span[0])):
        for lo in range(start, stop, _DRAM_CHUNK):
            hi = min(lo + _DRAM_CHUNK, stop)
            col = column_of[all_codes[lo:hi]]
            target = target_of[all_rows[lo:hi]]
            sel = np.flatnonzero((col >= 0) & (target >= 0))
            flat = (target[sel] - first_timing) * k + col[sel]
            if len(flat) > 1 and not bool((np.diff(flat) > 0).all()):
                flat, first = np.unique(flat, return_index=True)  # the first row of each (dispatch, counter)
                sel = sel[first]
            fresh = ~filled[flat]
            wide[flat[fresh]] = all_values[lo:hi][sel[fresh]]
            filled[flat[fresh]] = True
            if (lo - start) % _RELEASE_EVERY == 0:
                release_pages()  # spilled counter values: their pages go once read (rocroof.spill)
        release_pages()
    table = wide.reshape(n_timing, k)
    present = [j for j in range(len(wanted)) if filled.reshape(n_timing, k)[:, j].any()]
    unmeasured = ~filled.reshape(n_timing, k).any(axis=1)  # no counter-pass row for the dispatch at all
    del filled, wide
    gfx = agents.set_index("agent_index")["gfx_arch"]
    arch_of_agent = np.array([*[a if isinstance(a, str) else "" for a in gfx.tolist()], ""], dtype=object)
    position = pd.Index(gfx.index.to_numpy(dtype=np.int64)).get_indexer(
        dispatches["agent_index"].astype("Int64").to_numpy(dtype=np.int64, na_value=-1)[is_timing]
    )
    arch = arch_of_agent[position]  # position -1: no agent -> ""
    if not n_timing:
        return pd.DataFrame()
    # the formulas a chunk of dispatches at a time, each chunk's bytes written into the run's columns
    # (no concatenation of the chunks: that held the bytes of every dispatch twice)
    # the byte columns go to spill files chunk by chunk (rocroof.spill): they are only summed and
    # stored from here on (6 x 8 MB at 10^6 dispatches)
    texts = {c: np.full(n_timing, None, dtype=object) for c in DRAM_OUTPUT_COLUMNS if c not in DRAM_BYTE_COLUMNS}
    writers = {c: ColumnWriter(np.float64) for c in DRAM_OUTPUT_COLUMNS if c in DRAM_BYTE_COLUMNS}
    try:
        for lo in range(0, n_timing, _DRAM_CHUNK):
            hi = min(lo + _DRAM_CHUNK, n_timing)
            index = pd.Index(timing_index[lo:hi], name="dispatch_index")
            frame = pd.DataFrame({labels[wanted[j]]: table[lo:hi, j] for j in present}, index=index)
            part = dram_bytes(frame, pd.Series(arch[lo:hi], index=index, dtype=object))
            for c, writer in writers.items():
                writer.append(part[c].to_numpy(dtype=np.float64))
            for c, values in texts.items():
                values[lo:hi] = part[c].to_numpy(dtype=object)
            del frame, part
        del table
        columns = {c: writers[c].finish() if c in writers else texts[c] for c in DRAM_OUTPUT_COLUMNS}
    finally:
        for writer in writers.values():
            writer.close()
    out = pd.DataFrame({"dispatch_index": timing_index, **columns}, copy=False)
    if sampled and unmeasured.any():
        # a counter sample leaves the other evaluations unmeasured by design: their bytes are unknown
        # (NULL) and the counter-sample note says which evaluations were measured, not one note each
        out.loc[unmeasured, "dram_bytes_note"] = None
    for text, count in out["dram_bytes_note"].dropna().value_counts().items():
        unknown = "unknown" in str(text) or "undetermined" in str(text) or "no DRAM byte formula" in str(text)
        if all(_DERIVED_SIZE.fullmatch(part) for part in str(text).split("; ")):
            # the tool's own FETCH_SIZE/WRITE_SIZE: the same formula, summed by the tool (exact)
            notes.append(Note("info", "dram-bytes-derived-metric", f"{count} dispatch(es): {text}"))
            continue
        notes.append(
            Note(
                "warning",
                "dram-bytes-unknown" if unknown else "dram-bytes-approximate",
                f"{count} dispatch(es): {text}",
            )
        )
    return out


def _marker_ggml(p: PassData, a: PassAttribution) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(is_ggml, invocation, op, node_name)`` per marker row of a pass (see :func:`parse_ranges`)."""
    if a.marker_invocation is not None and a.marker_op is not None and a.marker_node is not None:
        inv = a.marker_invocation.astype("Int64")
        return (
            inv.notna().to_numpy(dtype=bool),
            inv.to_numpy(dtype=np.int64, na_value=0),
            np.asarray(a.marker_op, dtype=object),
            np.asarray(a.marker_node, dtype=object),
        )
    return ggml_fields(p.markers)[:4]


def _op_tables(
    passes: list[PassData],
    attrs: list[PassAttribution],
    timing: int | None,
    capture: Capture,
    fused: _FusedGroups,
    notes: list[Note],
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    # every ggml invocation seen: per pass (the timing pass first) its ranges, then its dispatches'
    # invocations (regions, the profiler's own); the first sighting of an invocation names it
    order = ([timing] if timing is not None else []) + [i for i in range(len(passes)) if i != timing]
    inv_parts: list[np.ndarray] = []
    op_parts: list[np.ndarray] = []
    name_parts: list[np.ndarray] = []
    for i in order:
        is_ggml, marker_inv, op, name = _marker_ggml(passes[i], attrs[i])
        inv_parts.append(marker_inv[is_ggml])
        op_parts.append(op[is_ggml])
        name_parts.append(name[is_ggml])
        dd = attrs[i].dispatch
        d_op = dd["op"].to_numpy(dtype=object)
        d_inv = dd["invocation"].astype("Int64")
        sel = np.flatnonzero(d_inv.notna().to_numpy(dtype=bool) & ~pd.isna(d_op))
        values = d_inv.to_numpy(dtype=np.int64, na_value=0)[sel]
        # a dispatch's invocation already sighted (its range, an earlier pass) cannot be a first
        # sighting: only the others are kept (most dispatches: no copy of 10^6 ops and names)
        seen = distinct(np.concatenate(inv_parts))
        at = np.searchsorted(seen, values)
        known = (at < len(seen)) & (seen[np.clip(at, 0, max(len(seen) - 1, 0))] == values) if len(seen) else at < 0
        sel, values = sel[~known], values[~known]
        del seen, at, known
        inv_parts.append(values)
        op_parts.append(d_op[sel])
        name_parts.append(dd["node_name"].to_numpy(dtype=object)[sel])
    all_inv = np.concatenate(inv_parts) if inv_parts else np.zeros(0, dtype=np.int64)
    invocations, first = np.unique(all_inv, return_index=True)  # sorted, first sighting of each
    base_op = np.concatenate(op_parts)[first] if len(first) else np.zeros(0, dtype=object)
    base_name = np.concatenate(name_parts)[first] if len(first) else np.zeros(0, dtype=object)
    del inv_parts, op_parts, name_parts, all_inv
    meta = capture.op_metadata
    nodes = pd.DataFrame()
    operands = pd.DataFrame()
    if meta is None or not len(meta.ops):
        return _op_frame(invocations, base_op, base_name, fused, notes), nodes, operands
    records: dict[int, dict[str, Any]] = {
        inv: {
            "invocation": inv,
            "op": op,
            "op_list": op,
            "node_name": name,
            "from_marker": True,
            "from_metadata": False,
        }
        for inv, op, name in zip(invocations.tolist(), base_op.tolist(), base_name.tolist(), strict=True)
    }
    # op metadata: merged invocation by invocation
    marker_invs = set(records)
    meta_cols = [
        "dtype",
        "quant",
        "ne",
        "src_ne",
        "src_types",
        "op_params",
        "metadata_bytes",
        "dst_bytes",
        "dst_storage_id",
        "out_storage_id",
        "m",
        "n",
        "k",
        "n_experts",
        "top_k",
        "experts_used",
        "tokens_per_expert",
    ]
    disagree = 0
    for row in meta.ops.to_dict("records"):
        inv = int(row["invocation"])
        rec = records.get(inv)
        if rec is None:
            rec = {
                "invocation": inv,
                "op": row["op"],
                "op_list": row["op_list"],
                "node_name": row["node_name"],
                "from_marker": False,
                "from_metadata": True,
            }
            records[inv] = rec
        else:
            rec["from_metadata"] = True
            if rec["op"] != row["op"]:
                disagree += 1
            if row.get("is_fused"):
                rec["op_list"] = row["op_list"]
            rec["node_name"] = rec.get("node_name") or row["node_name"]
        for col in meta_cols:
            rec[col] = row.get(col)
        rec["metadata_gpu_time_ns"] = row.get("gpu_time_ns")
    if marker_invs and disagree:
        notes.append(
            Note(
                "warning",
                "metadata-mismatch",
                f"{disagree} op invocation(s) name a different op in the metadata JSON than in the markers",
            )
        )
    if marker_invs:
        only_meta = len(set(meta.ops["invocation"].astype(int)) - marker_invs)
        if only_meta:
            notes.append(
                Note(
                    "info",
                    "metadata-only",
                    f"{only_meta} invocation(s) of the metadata JSON have no profiler marker (e.g. warm-up dropped)",
                )
            )
    nodes = meta.nodes.copy()
    operands = meta.operands.copy()
    _fused_note(fused.groups, set(records), notes)
    found = [(inv, rec) for inv in fused.groups if (rec := records.get(inv)) is not None]
    applied = fused.applied([(inv, rec.get("op")) for inv, rec in found], notes)
    for inv, rec in found:
        if inv in applied:
            op_list, names = fused.groups[inv]
            rec["op_list"] = op_list
            rec["node_names"] = "|".join(names)
    ops = pd.DataFrame(sorted(records.values(), key=lambda r: r["invocation"]))
    if not len(ops):
        return pd.DataFrame(), pd.DataFrame(), pd.DataFrame()
    ops = _finish_ops(ops)
    inv_to_op = dict(zip(ops["invocation"].astype(int), ops["op_index"], strict=True))
    for frame in (nodes, operands):
        if len(frame):
            frame["op_index"] = frame["invocation"].map(inv_to_op)
    if len(nodes):
        nodes = nodes[nodes["op_index"].notna()].drop(columns="invocation")
    if len(operands):
        operands = operands[operands["op_index"].notna()].drop(columns="invocation")
    return ops, nodes, operands


def _invocations_of_several_processes(p: PassData, attr: PassAttribution) -> int:
    """How many ggml invocation numbers the ranges of more than one process of pass ``p`` carry.

    The llama.cpp hook numbers op invocations per process (from 0 in each); a pass holding two
    processes' ranges would give both processes' ops one number (found by a trial user: two
    processes' ADD and MUL ranges became ADD only).
    """
    inv = attr.marker_invocation
    if inv is None or not len(inv) or "process_id" not in p.markers or p.markers["process_id"].nunique() < 2:
        return 0
    pairs = pd.DataFrame(
        {"invocation": inv.to_numpy(), "process_id": p.markers["process_id"].reset_index(drop=True).to_numpy()}
    ).dropna()
    per = pairs.drop_duplicates().groupby("invocation")["process_id"].size()
    return int((per > 1).sum())


def _fused_note(fused: dict[int, tuple[str, list[str]]], known: set[int] | np.ndarray, notes: list[Note]) -> None:
    """Note the ``ggml-fused:`` groups whose invocation the run has no op for."""
    have = known if isinstance(known, set) else set(np.asarray(known).tolist())
    unmatched = sum(1 for inv in fused if inv not in have)
    if unmatched:
        notes.append(
            Note(
                "warning" if unmatched == len(fused) else "info",
                "fused-unmatched",
                f"{unmatched} of {len(fused)} ggml-fused group(s) name an invocation this capture has no op for"
                + (" (is the log from another run?)" if unmatched == len(fused) else " (e.g. warm-up)"),
            )
        )


@dataclass
class _FusedGroups:
    """A run's ``ggml-fused:`` groups, ``{invocation: (op_list, node_names)}``, and which came from logs.

    The hook's range around a fused group carries the group's first node, so its op is the first
    op of the group's list (the marker grammar, ``tools/llama.cpp``). A group that names another op
    comes from another run or model: a log of another capture in the folder, or of an earlier build
    whose invocation numbers differ. Such a log is not applied at all (its groups that happen to
    agree are as unfounded as the others); a group of the capture's own marks that disagrees is
    left out alone.

    Attributes:
        groups: every group, the capture's own marks over a log's.
        from_logs: the invocations whose group came from a log (``*.log`` beside the capture or
            ``--attach``), not from the capture's own marks.
    """

    groups: dict[int, tuple[str, list[str]]]
    from_logs: frozenset[int] = frozenset()

    def applied(self, ops: list[tuple[int, object]], notes: list[Note]) -> set[int]:
        """The invocations among ``ops`` (``(invocation, op of its range)``) whose group applies; notes the others.

        Adds the ``fused-mismatch`` warning when a group's first op is not its invocation's op.
        """
        bad = [(inv, op) for inv, op in ops if isinstance(op, str) and self.groups[inv][0].split("+", 1)[0] != op]
        if not bad:
            return {inv for inv, _ in ops}
        rejected = {inv for inv, _ in bad}
        log_bad = [inv for inv in rejected if inv in self.from_logs]
        if log_bad:
            rejected |= self.from_logs
        inv, op = next(((i, o) for i, o in bad if i in self.from_logs), bad[0])
        example = (
            f"e.g. invocation {inv}: {printable(self.groups[inv][0][:80])!r} but its range is {printable(str(op))!r}"
        )
        what = (
            f"the log(s) are of another run or model: none of their {len(self.from_logs)} group(s) is applied "
            "(two runs' logs in one folder? ingest each run's files on their own, or pass the right log with --attach)"
            if log_bad
            else "the capture's own marks disagree with its ranges there: those groups are not applied"
        )
        notes.append(
            Note(
                "warning",
                "fused-mismatch",
                f"{len(bad)} of {len(self.groups)} ggml-fused group(s) name other ops than the ranges of their "
                f"invocations ({example}); {what}",
            )
        )
        return {i for i, _ in ops} - rejected


def _op_frame(
    invocations: np.ndarray,
    op: np.ndarray,
    node_name: np.ndarray,
    fused: _FusedGroups,
    notes: list[Note],
) -> pd.DataFrame:
    """``op_invocation`` rows of a run without op metadata, from its sorted distinct invocations."""
    _fused_note(fused.groups, invocations, notes)
    if not len(invocations):
        return pd.DataFrame()
    op_list = op.copy()
    node_names = np.full(len(invocations), None, dtype=object)
    if fused.groups:  # parse_fused keeps invocations within int64
        keys = np.fromiter(fused.groups, dtype=np.int64, count=len(fused.groups))
        at = np.searchsorted(invocations, keys)
        found = [
            (pos, inv)
            for pos, inv in zip(at.tolist(), keys.tolist(), strict=True)
            if pos < len(invocations) and invocations[pos] == inv
        ]
        applied = fused.applied([(inv, op[pos]) for pos, inv in found], notes)
        for pos, inv in found:
            if inv in applied:
                op_list[pos], names = fused.groups[inv]
                node_names[pos] = "|".join(names)
    columns: dict[str, Any] = {
        "invocation": invocations.astype(np.int64),
        "op": op,
        "op_list": op_list,
        "node_name": node_name,
        "from_marker": np.ones(len(invocations), dtype=bool),
        "from_metadata": np.zeros(len(invocations), dtype=bool),
    }
    if any(v is not None for v in node_names.tolist()):
        columns["node_names"] = node_names
    return _finish_ops(pd.DataFrame(columns))


def _finish_ops(ops: pd.DataFrame) -> pd.DataFrame:
    """Add ``op_index`` (row order), ``is_fused`` and ``layer`` (a ``-<n>`` node-name suffix)."""
    ops["op_index"] = np.arange(len(ops))
    # each once per distinct op list and node name (a few hundred in 10^6 ops)
    ops["is_fused"] = per_distinct(ops["op_list"], lambda t: isinstance(t, str) and "+" in t, bool)
    layer = per_distinct(ops["node_name"], _layer_of, np.int64)
    ops["layer"] = pd.arrays.IntegerArray(layer, layer < 0)
    return ops


def _layer_of(name: object) -> int:
    """The layer of a node name (its ``-<n>`` suffix), or -1 (no name, no suffix, or digits beyond int64)."""
    found = _LAYER_RE.search(name) if isinstance(name, str) else None
    layer = int(found.group(1)) if found else -1
    return layer if layer < 2**63 else -1
