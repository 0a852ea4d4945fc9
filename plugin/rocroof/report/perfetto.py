"""A stored run as a timeline: the JSON trace-event format that ui.perfetto.dev and chrome://tracing open.

Format: Google's "Trace Event Format" (the JSON object form: ``{"traceEvents": [...]}``), as
Perfetto's JSON importer reads it. Events used:

* ``M`` (metadata): ``process_name`` / ``thread_name`` / ``process_sort_index`` naming the tracks;
* ``X`` (complete): ``ts`` and ``dur`` in µs (floats with ns precision), one per kernel dispatch on
  its GPU queue/stream track, one per roctx/NVTX range on its host thread track;
  a dispatch whose start, end or duration is unknown (NULL) is left out and counted, never drawn
  at 0 (unknown is not zero): e.g. rocprofiler-compute's rounded timestamps give no duration;
* ``i`` (instant, thread scope): roctx/NVTX marks;
* ``C`` (counter): per GPU, ``DRAM GB/s`` (the kernel's measured read + write bytes over its
  time, set at its start and back to 0 at its end) and ``DRAM MB`` (the run's cumulative bytes).

Tracks: each GPU agent is a process (pid ``GPU_PID_BASE + agent_index``, named after the GPU) with
one thread per queue/stream (and one more lane for kernels that overlap the previous one on it);
each host process keeps its OS pid with one thread per OS thread.
Times are the trace pass's own (GPU and host timestamps on the profiler's one clock), shifted so
the run starts at 0. Kernel ``args``: op, op list, node, invocation, kernel ordinal, dispatch index,
measured read/write bytes (null when unknown), the invocation's modelled bytes and FLOPs, GB/s.
Only the timing pass is drawn (counter passes serialise kernels: their times are the profiler's).

Nothing here prints; :func:`trace_document` returns the JSON object.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

import pandas as pd
import sqlalchemy as sa

from ..store import Store, schema
from ..text import storable
from .render import short_kernel_name

#: pids of GPU tracks: far above any OS pid (Linux caps pids at 2**22).
GPU_PID_BASE = 1 << 30
#: tid of the n-th extra lane of a stream: stream id + n x this (for kernels that overlap on it).
LANE_STRIDE = 1 << 20


def _us(ns: float, t0: int) -> float:
    """Ns on the trace's clock -> µs since the run's start, rounded to the ns."""
    return round((ns - t0) / 1e3, 3)


def _num(v: Any) -> float | None:
    """A JSON-safe number or None (NaN, NULL, text)."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def trace_document(store: Store, run_id: int) -> dict[str, Any]:
    """The run's timeline as a trace-event JSON object (module docstring).

    Returns:
        ``{"traceEvents": [...], "displayTimeUnit": "ns", "otherData": {...}}``; ``otherData``
        names the run, the GPU and how many dispatches and ranges were left out:
        ``dispatches_left_out`` (all of them) = ``dispatches_without_timestamps`` (no start or
        end timestamp) + ``dispatches_without_duration`` (both timestamps stored, but no GPU time
        to draw), which is ``dispatches_ending_before_start`` + ``dispatches_with_rounded_timestamps``
        (no stored duration, in a timing pass whose profiler rounded timestamps) +
        ``dispatches_without_stored_duration`` (a start and a later end, in a pass with exact
        timestamps, yet ``duration_ns`` NULL: the ingest refused the profiler's duration, see the
        run's notes, or the database was changed); ``ranges_left_out``.
    """
    run = store.frame(sa.select(schema.run).where(schema.run.c.run_id == run_id)).to_dict("records")[0]
    params = {"rid": run_id}
    kernels = store.frame(
        sa.text(
            "SELECT d.dispatch_index, d.kernel_name, d.start_ns, d.end_ns, d.duration_ns, d.dram_read_bytes, "
            "d.dram_write_bytes, d.achieved_gbps, d.op, d.op_list, d.node_name, d.invocation, d.kernel_ordinal, "
            "r.agent_index, r.queue_id, r.stream_id, m.model_read_bytes, m.model_write_bytes, m.flops, "
            "p.timestamps_exact AS pass_timestamps_exact "
            "FROM dispatch_dram d "
            "JOIN dispatch_record r ON r.run_id = d.run_id AND r.dispatch_index = d.dispatch_index "
            "LEFT JOIN pass p ON p.run_id = r.run_id AND p.pass_index = r.pass_index "
            "LEFT JOIN op_model m ON m.run_id = d.run_id AND m.op_index = d.op_index WHERE d.run_id = :rid"
        ),
        params,
    )
    ranges = store.frame(
        sa.text(
            "SELECT g.range_index, g.kind, g.process_id, g.thread_id, g.start_ns, g.end_ns, g.message, g.invocation "
            "FROM marker_range g JOIN pass p ON p.run_id = g.run_id AND p.pass_index = g.pass_index "
            "WHERE g.run_id = :rid AND p.is_timing_pass"
        ),
        params,
    )
    agents = store.frame(
        sa.text("SELECT agent_index, agent_label, product_name FROM agent WHERE run_id = :rid"), params
    ).set_index("agent_index")

    k_start = pd.to_numeric(kernels["start_ns"], errors="coerce")
    k_end = pd.to_numeric(kernels["end_ns"], errors="coerce")
    k_stamped = k_start.notna() & k_end.notna()
    # the duration is the store's verdict on the timestamps: NULL where they were rounded or end
    # before they start, so such a kernel has no place on a timeline (not 0 µs at the run's start)
    k_ordered = k_stamped & (k_end >= k_start)
    k_ok = k_ordered & pd.to_numeric(kernels["duration_ns"], errors="coerce").notna()
    # why a dispatch with both timestamps has no time: the pass's rounding, or none the store can tell
    rounding_pass = (pd.to_numeric(kernels["pass_timestamps_exact"], errors="coerce") == 0).fillna(False).astype(bool)
    k_rounded = k_ordered & ~k_ok & rounding_pass
    r_start = pd.to_numeric(ranges["start_ns"], errors="coerce")
    r_end = pd.to_numeric(ranges["end_ns"], errors="coerce")
    r_ok = r_start.notna() & r_end.notna() & (r_end >= r_start)
    starts = [s for s in (k_start[k_ok].min(), r_start[r_ok].min()) if pd.notna(s)]
    t0 = int(min(starts)) if starts else 0

    events: list[dict[str, Any]] = []
    meta: list[dict[str, Any]] = []
    gpu_name = storable(str(run.get("gpu_name") or run.get("gpu_arch") or "GPU"))
    named_tracks: set[tuple[int, int]] = set()

    def name_track(pid: int, tid: int, process: str, thread: str, sort: int) -> None:
        if (pid, -1) not in named_tracks:
            named_tracks.add((pid, -1))
            meta.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": process}})
            meta.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": sort}})
        if (pid, tid) not in named_tracks:
            named_tracks.add((pid, tid))
            meta.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": thread}})

    cumulative = 0.0
    counters: list[dict[str, Any]] = []
    lane_ends: dict[tuple[int, int], list[float]] = defaultdict(list)  # per stream: each lane's last end
    good = kernels[k_ok.to_numpy(dtype=bool)].assign(_s=k_start[k_ok], _e=k_end[k_ok]).sort_values("_s", kind="stable")
    for k in good.to_dict("records"):
        agent = int(k["agent_index"]) if pd.notna(k["agent_index"]) else 0
        pid = GPU_PID_BASE + agent
        stream = k["stream_id"] if pd.notna(k["stream_id"]) else k["queue_id"]
        sid = int(stream) if pd.notna(stream) else 0
        # a kernel that starts before the last one on its stream ended (a few ns under programmatic
        # dependent launch, or truly concurrent) goes to the next lane of the stream: slices on one
        # track must nest, and no time is altered
        ends = lane_ends[(pid, sid)]
        lane = next((i for i, e in enumerate(ends) if k["_s"] >= e), len(ends))
        if lane == len(ends):
            ends.append(k["_e"])
        else:
            ends[lane] = k["_e"]
        tid = sid + lane * LANE_STRIDE
        label = agents["agent_label"].get(agent) if agent in agents.index else None
        product = agents["product_name"].get(agent) if agent in agents.index else None
        process = storable(f"GPU {label if pd.notna(label) else agent}: {product if pd.notna(product) else gpu_name}")
        kind = "stream" if pd.notna(k["stream_id"]) else "queue"
        name_track(pid, tid, process, f"{kind} {sid}" + (f" (overlapping, lane {lane})" if lane else ""), 0)
        read, write = _num(k["dram_read_bytes"]), _num(k["dram_write_bytes"])
        model = None
        if _num(k["model_read_bytes"]) is not None and _num(k["model_write_bytes"]) is not None:
            model = _num(k["model_read_bytes"]) + _num(k["model_write_bytes"])  # type: ignore[operator]
        ts, end = _us(k["_s"], t0), _us(k["_e"], t0)
        events.append(
            {
                "ph": "X",
                "name": storable(short_kernel_name(k["kernel_name"], width=60)),
                "cat": "kernel",
                "pid": pid,
                "tid": tid,
                "ts": ts,
                "dur": round(end - ts, 3),
                "args": {
                    "kernel": storable(str(k["kernel_name"])),
                    "op": None if pd.isna(k["op"]) else str(k["op"]),
                    "op_list": None if pd.isna(k["op_list"]) else str(k["op_list"]),
                    "node": None if pd.isna(k["node_name"]) else storable(str(k["node_name"])),
                    "invocation": None if pd.isna(k["invocation"]) else int(k["invocation"]),
                    "kernel_ordinal": None if pd.isna(k["kernel_ordinal"]) else int(k["kernel_ordinal"]),
                    "dispatch_index": int(k["dispatch_index"]),
                    "dram_read_bytes": read,
                    "dram_write_bytes": write,
                    "achieved_gbps": _num(k["achieved_gbps"]),
                    "invocation_model_bytes": model,
                    "invocation_model_flops": _num(k["flops"]),
                },
            }
        )
        gbps = _num(k["achieved_gbps"])
        if gbps is not None:
            counters.append({"ph": "C", "name": "DRAM GB/s", "pid": pid, "tid": 0, "ts": ts, "args": {"GB/s": gbps}})
            counters.append({"ph": "C", "name": "DRAM GB/s", "pid": pid, "tid": 0, "ts": end, "args": {"GB/s": 0.0}})
        if read is not None and write is not None:
            cumulative += read + write
            counters.append(
                {"ph": "C", "name": "DRAM MB", "pid": pid, "tid": 0, "ts": end, "args": {"MB": cumulative / 1e6}}
            )

    invocations = store.frame(
        sa.text("SELECT invocation, op_list, node_name FROM op_invocation WHERE run_id = :rid"), params
    )
    names = {
        int(r["invocation"]): f"{r['op_list']} {r['node_name']}" if pd.notna(r["node_name"]) else str(r["op_list"])
        for r in invocations.to_dict("records")
        if pd.notna(r["invocation"])
    }
    rgood = ranges[r_ok.to_numpy(dtype=bool)].assign(_s=r_start[r_ok], _e=r_end[r_ok])
    # outer ranges first at equal starts, so a viewer nests them in order
    rgood = rgood.assign(_len=rgood["_e"] - rgood["_s"]).sort_values(["_s", "_len"], ascending=[True, False])
    for r in rgood.to_dict("records"):
        pid = int(r["process_id"]) if pd.notna(r["process_id"]) else 0
        tid = int(r["thread_id"]) if pd.notna(r["thread_id"]) else 0
        name_track(pid, tid, f"host process {pid}", f"thread {tid}", 1)
        inv = int(r["invocation"]) if pd.notna(r["invocation"]) else None
        name = names.get(inv) if inv is not None else None
        text = storable(str(name or r["message"] or "(no message)"))
        ts = _us(r["_s"], t0)
        if r["kind"] == "mark":
            events.append({"ph": "i", "s": "t", "name": text, "cat": "mark", "pid": pid, "tid": tid, "ts": ts})
            continue
        events.append(
            {
                "ph": "X",
                "name": text,
                "cat": "range",
                "pid": pid,
                "tid": tid,
                "ts": ts,
                "dur": round(_us(r["_e"], t0) - ts, 3),
                "args": {"message": storable(str(r["message"])), "invocation": inv},
            }
        )
    return {
        "traceEvents": meta + events + counters,
        "displayTimeUnit": "ns",
        "otherData": {
            "rocroof_run_id": int(run_id),
            "gpu": gpu_name,
            "source_path": storable(str(run.get("source_path") or "")),
            "time_zero_ns": t0,
            "dispatches_left_out": int((~k_ok).sum()),
            "dispatches_without_timestamps": int((~k_stamped).sum()),
            "dispatches_without_duration": int((k_stamped & ~k_ok).sum()),
            "dispatches_ending_before_start": int((k_stamped & ~k_ordered).sum()),
            "dispatches_with_rounded_timestamps": int(k_rounded.sum()),
            "dispatches_without_stored_duration": int((k_ordered & ~k_ok & ~k_rounded).sum()),
            "ranges_left_out": int((~r_ok).sum()),
        },
    }
