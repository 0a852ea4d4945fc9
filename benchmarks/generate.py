"""Realistic large captures for the scale benchmark, in each format rocroof reads.

A synthetic llama.cpp run: a dense 24-layer model evaluated token after token by three host
threads at once (their evaluations overlap in time). Every ggml node launches its kernels
inside a roctx/NVTX range ``ggml:<OP>:<node>:<invocation>``, nested in two plain ranges per
evaluation (``llama_decode`` > ``ggml_backend_sched_graph_compute``); fused ``RMS_NORM+MUL``
groups add a ``ggml-fused:`` mark. Kernels carry llama.cpp's demangled names, run on one GPU
queue in launch order after their launch returned (so after their range closed), and carry 8
hardware counters each (the gfx942 DRAM counters plus three others; on NVIDIA the Nsight
Compute roofline metrics). Correlation ids are process-wide and follow host time, dispatch ids
follow launch order, timestamps have 17 digits (beyond float64), as rocprofv3 writes them.

Formats (the schemas rocroof's readers read; see the readers' docstrings):

* ``csv``: rocprofv3 ``-f csv``: ``<pid>_kernel_trace.csv``, ``<pid>_counter_collection.csv``
  (one row per dispatch and counter), ``<pid>_marker_api_trace.csv``,
  ``<pid>_hip_api_trace.csv`` and ``<pid>_agent_info.csv`` in one pass directory.
* ``rocpd``: one ``<pid>_results.db`` in the rocpd schema 3 layout (UUID-suffixed tables and
  the unsuffixed views, as ``tests/rocpd_builder.py`` writes them).
* ``nvidia``: ``trace/nsys.sqlite`` (Nsight Systems export tables the reader reads) and
  ``ncu/ncu_raw.csv`` (Nsight Compute ``--page raw`` with its units row, thousands separators
  and the NVTX stack column). The same N kernels appear in both passes.

    .venv/bin/python benchmarks/generate.py --format csv --dispatches 100000 --out /tmp/cap
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import rocpd_builder as rb  # noqa: E402  (the tests' rocpd layout: tables, DDL, views)

#: 17-digit host / GPU clock base (float64 cannot hold these exactly).
T0 = 12_345_678_901_234_567
PID = 31337
THREADS = (31337, 31342, 31343)
N_LAYER = 24
#: gfx942 counters: the five of its DRAM formula, then three others rocprofv3 users collect.
COUNTERS = (
    "TCC_EA0_RDREQ_sum",
    "TCC_EA0_RDREQ_32B_sum",
    "TCC_BUBBLE_sum",
    "TCC_EA0_WRREQ_sum",
    "TCC_EA0_WRREQ_64B_sum",
    "GRBM_GUI_ACTIVE",
    "SQ_WAVES",
    "SQ_INSTS_VALU",
)
#: Nsight Compute metrics (raw page names) and the unit each column is printed in.
NCU_METRICS = (
    ("dram__bytes_read.sum", "Mbyte", 1e-6),
    ("dram__bytes_write.sum", "Kbyte", 1e-3),
    ("gpu__time_duration.sum", "us", 1e-3),
    ("lts__t_bytes.sum", "Mbyte", 1e-6),
    ("smsp__sass_thread_inst_executed_op_ffma_pred_on.sum", "inst", 1.0),
    ("smsp__sass_thread_inst_executed_op_fadd_pred_on.sum", "inst", 1.0),
    ("smsp__sass_thread_inst_executed_op_fmul_pred_on.sum", "inst", 1.0),
    ("smsp__sass_thread_inst_executed_op_hfma_pred_on.sum", "inst", 1.0),
)

#: (demangled name, mean GPU ns, bytes read, bytes written, grid x, workgroup x)
KERNELS = (
    (
        "void k_get_rows_float<float, float>(float const*, int const*, float*, long, long, long, long, long, long, "
        "long, long, long, long, long, long)",
        2_400,
        16_384,
        8_192,
        2048,
        256,
    ),
    (
        "void rms_norm_f32<256, true, false>(float const*, float*, int, long, long, long, float, float const*, long, "
        "long, long, uint3, uint3, uint3, uint3, float const*, long, long, long, uint3, uint3, uint3, uint3)",
        3_100,
        24_576,
        8_192,
        256,
        256,
    ),
    (
        "void quantize_q8_1(float const*, void*, long, long, long, long, long, long, long, long)",
        2_200,
        8_192,
        2_304,
        2048,
        256,
    ),
    (
        "void mul_mat_vec_q<(ggml_type)12, 1, false>(void const*, void const*, int const*, float*, unsigned int, "
        "unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int)",
        18_500,
        4_718_592,
        8_192,
        65536,
        64,
    ),
    (
        "void mul_mat_vec_q<(ggml_type)14, 1, false>(void const*, void const*, int const*, float*, unsigned int, "
        "unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int)",
        24_300,
        6_881_280,
        8_192,
        65536,
        64,
    ),
    (
        "void rope_neox<true, false, float, float>(float const*, float*, int, int, int, int, int, int, int const*, "
        "float, float, float, float, rope_corr_dims, float const*, mrope_sections, bool)",
        2_900,
        8_192,
        8_192,
        1024,
        256,
    ),
    (
        "void k_set_rows<float, __half, long>(float const*, long const*, __half*, long, long, long, long, long, long, "
        "long, long, long, long, long, long, long, long, long, long)",
        2_100,
        4_096,
        2_048,
        1024,
        256,
    ),
    (
        "void flash_attn_ext_f16<128, 128, 4, 2, 64, false>(char const*, char const*, char const*, char const*, "
        "char const*, int const*, float*, HIP_vector_type<float, 2u>*, float, float, float, float, unsigned int, "
        "float, int, int, int, int, int, int, int, int, int, int, int, long, int, int, long, int, int, int, int, int, "
        "long)",
        31_000,
        1_310_720,
        65_536,
        32,
        128,
    ),
    (
        "void flash_attn_combine_results<128>(float const*, HIP_vector_type<float, 2u> const*, float*, int)",
        2_500,
        65_536,
        8_192,
        32,
        128,
    ),
    (
        "void k_bin_bcast<&op_add(float, float), float, float, float>(float const*, float const*, float*, int, int, "
        "int, int, int, int, int, int, int, int, int, int, int, int, int, int)",
        2_300,
        16_384,
        8_192,
        2048,
        256,
    ),
    (
        "void swiglu_kernel<float>(float const*, float const*, float*, long, long, long, long, long)",
        2_700,
        45_056,
        22_528,
        5632,
        256,
    ),
)
K_GET, K_RMS, K_Q8, K_MMVQ4, K_MMVQ6, K_ROPE, K_SETROWS, K_FA, K_FAC, K_ADD, K_SWIGLU = range(len(KERNELS))


def _layer_ops(layer: int) -> list[tuple[str, str, list[int], str | None]]:
    """(op, node name, kernels, fused mark tail or None) of one transformer layer."""
    return [
        ("RMS_NORM", f"attn_norm-{layer}", [K_RMS], f"RMS_NORM+MUL:norm-{layer}|attn_norm-{layer}"),
        ("MUL_MAT", f"Qcur-{layer}", [K_Q8, K_MMVQ4], None),
        ("MUL_MAT", f"Kcur-{layer}", [K_MMVQ4], None),
        ("MUL_MAT", f"Vcur-{layer}", [K_MMVQ6], None),
        ("ROPE", f"Qcur-{layer} (rope)", [K_ROPE], None),
        ("ROPE", f"Kcur-{layer} (rope)", [K_ROPE], None),
        ("SET_ROWS", f"k_cache_view-{layer}", [K_SETROWS], None),
        ("SET_ROWS", f"v_cache_view-{layer}", [K_SETROWS], None),
        ("FLASH_ATTN_EXT", f"__fattn__-{layer}", [K_FA, K_FAC], None),
        ("MUL_MAT", f"attn_out-{layer}", [K_Q8, K_MMVQ4], None),
        ("ADD", f"ffn_inp-{layer}", [K_ADD], None),
        ("RMS_NORM", f"ffn_norm-{layer}", [K_RMS], f"RMS_NORM+MUL:norm-{layer}|ffn_norm-{layer}"),
        ("MUL_MAT", f"ffn_gate-{layer}", [K_Q8, K_MMVQ4], None),
        ("MUL_MAT", f"ffn_up-{layer}", [K_MMVQ4], None),
        ("GLU", f"ffn_swiglu-{layer}", [K_SWIGLU], None),
        ("MUL_MAT", f"ffn_down-{layer}", [K_Q8, K_MMVQ6], None),
        ("ADD", f"l_out-{layer}", [K_ADD], None),
    ]


def _graph() -> list[tuple[str, str, list[int], str | None]]:
    ops: list[tuple[str, str, list[int], str | None]] = [("GET_ROWS", "inp_embd", [K_GET], None)]
    for layer in range(N_LAYER):
        ops += _layer_ops(layer)
    ops += [
        ("RMS_NORM", "norm", [K_RMS], "RMS_NORM+MUL:norm|result_norm"),
        ("MUL_MAT", "result_output", [K_Q8, K_MMVQ6], None),
    ]
    return ops


@dataclass
class Workload:
    """One synthetic capture, as arrays (dispatches in launch order)."""

    n: int
    # dispatches
    kernel: np.ndarray  # index into KERNELS
    tid: np.ndarray
    corr: np.ndarray  # correlation id of the launching call
    launch_start: np.ndarray
    launch_end: np.ndarray
    gpu_start: np.ndarray
    gpu_end: np.ndarray
    counters: np.ndarray  # (n, 8) float64, COUNTERS order
    # ranges (outer ranges and ggml op ranges), in start order
    r_msg: list[str]
    r_tid: np.ndarray
    r_start: np.ndarray
    r_end: np.ndarray
    r_corr: np.ndarray
    # marks (ggml-fused)
    m_msg: list[str]
    m_tid: np.ndarray
    m_t: np.ndarray
    m_corr: np.ndarray
    # non-launch HIP calls (hipStreamSynchronize at the end of each evaluation)
    s_tid: np.ndarray
    s_start: np.ndarray
    s_end: np.ndarray
    s_corr: np.ndarray

    @property
    def ops(self) -> int:
        """Number of ggml op ranges."""
        return sum(1 for m in self.r_msg if m.startswith("ggml:"))


def make_workload(n: int, seed: int = 0) -> Workload:
    """Exactly ``n`` kernel dispatches of whole-graph evaluations (the last ones cut at ``n``)."""
    rng = np.random.default_rng(seed)
    graph = _graph()
    n_ops = len(graph)
    k_per_op = np.array([len(k) for _, _, k, _ in graph])
    kern_template = np.concatenate([np.array(k) for _, _, k, _ in graph])
    k_eval = int(k_per_op.sum())
    n_eval = -(-n // k_eval)

    # host-time template of one evaluation (ns from its start): push outer ranges, then per op:
    # push (300 ns), launches (2 us each, 150 ns apart), fused mark, pop (300 ns)
    op_start = np.zeros(n_ops, dtype=np.int64)
    op_end = np.zeros(n_ops, dtype=np.int64)
    l_start = np.zeros(k_eval, dtype=np.int64)
    mark_t = np.full(n_ops, -1, dtype=np.int64)
    t, j = 1_000, 0
    for i, (_, _, kerns, fused) in enumerate(graph):
        op_start[i] = t
        t += 300
        if fused:
            mark_t[i] = t
            t += 200
        for _ in kerns:
            l_start[j] = t
            j += 1
            t += 2_150
        op_end[i] = t
        t += 300
    host_eval = t + 1_000
    period = 3 * host_eval  # each thread starts a new evaluation every period
    stagger = host_eval // 3  # threads overlap in time

    e = np.arange(n_eval, dtype=np.int64)
    thread_of_eval = np.array(THREADS)[e % len(THREADS)]
    eval_t0 = T0 + (e // len(THREADS)) * period + (e % len(THREADS)) * stagger
    inv_base = e * n_ops  # invocation = inv_base + op position + 1 (process-wide counter)

    # dispatches (eval-major), then launch order
    d_launch = (eval_t0[:, None] + l_start[None, :]).ravel()
    d_kernel = np.tile(kern_template, n_eval)
    d_tid = np.repeat(thread_of_eval, k_eval)
    d_op = np.tile(np.repeat(np.arange(n_ops), k_per_op), n_eval) + np.repeat(inv_base, k_eval)
    order = np.argsort(d_launch, kind="stable")[:n]
    d_launch, d_kernel, d_tid, d_op = d_launch[order], d_kernel[order], d_tid[order], d_op[order]

    # ggml op ranges that kept at least one kernel, and the two outer ranges per evaluation
    kept_ops = np.zeros(n_eval * n_ops, dtype=bool)
    kept_ops[d_op] = True
    op_ids = np.flatnonzero(kept_ops)
    oe, oi = op_ids // n_ops, op_ids % n_ops
    ggml_msg = [f"ggml:{graph[i][0]}:{graph[i][1]}:{g + 1}" for g, i in zip(op_ids.tolist(), oi.tolist(), strict=True)]
    evals = np.unique(oe)
    r_msg = ["llama_decode"] * len(evals) + ["ggml_backend_sched_graph_compute"] * len(evals) + ggml_msg
    r_tid = np.concatenate([thread_of_eval[evals], thread_of_eval[evals], thread_of_eval[oe]])
    r_start = np.concatenate([eval_t0[evals], eval_t0[evals] + 500, eval_t0[oe] + op_start[oi]])
    r_end = np.concatenate([eval_t0[evals] + host_eval, eval_t0[evals] + host_eval - 500, eval_t0[oe] + op_end[oi]])
    has_mark = mark_t[oi] >= 0
    m_msg = [
        f"ggml-fused:{g + 1}:{graph[i][3]}"
        for g, i in zip(op_ids[has_mark].tolist(), oi[has_mark].tolist(), strict=True)
    ]
    m_tid = thread_of_eval[oe[has_mark]]
    m_t = eval_t0[oe[has_mark]] + mark_t[oi[has_mark]]
    s_tid = thread_of_eval[evals]
    s_start = eval_t0[evals] + host_eval - 400
    s_end = s_start + 300

    # process-wide correlation ids in host-time order of every call
    starts = np.concatenate([r_start, m_t, d_launch, s_start])
    corr = np.empty(len(starts), dtype=np.int64)
    corr[np.argsort(starts, kind="stable")] = np.arange(1, len(starts) + 1)
    nr, nm, nd = len(r_start), len(m_t), len(d_launch)
    r_corr, m_corr, d_corr, s_corr = np.split(corr, [nr, nr + nm, nr + nm + nd])

    # GPU: one queue in launch order, each kernel starts >= 5 us after its launch returned
    mean = np.array([k[1] for k in KERNELS], dtype=np.float64)
    dur = np.maximum(500, (mean[d_kernel] * rng.lognormal(0.0, 0.08, n)).astype(np.int64))
    launch_end = d_launch + 2_000
    ready = launch_end + 5_000
    csum = np.cumsum(dur)
    prev = np.concatenate([[0], csum[:-1]])
    gpu_end = csum + np.maximum.accumulate(ready - prev)
    gpu_start = gpu_end - dur

    # counters: DRAM requests from the kernel's bytes (64 B requests, a few 32 B ones), then others
    rd = np.array([k[2] for k in KERNELS], dtype=np.float64)[d_kernel] * rng.uniform(0.97, 1.03, n)
    wr = np.array([k[3] for k in KERNELS], dtype=np.float64)[d_kernel] * rng.uniform(0.97, 1.03, n)
    rdreq = np.round(rd / 64)
    rd32 = np.round(rdreq * 0.02)
    bubble = np.round(rdreq * 0.01)
    wrreq = np.round(wr / 64)
    wr64 = np.round(wrreq * 0.9)
    waves = np.array([k[4] for k in KERNELS], dtype=np.float64)[d_kernel] / 64
    counters = np.column_stack([rdreq, rd32, bubble, wrreq, wr64, np.round(dur * 2.1), waves, waves * 37])
    return Workload(
        n=n,
        kernel=d_kernel,
        tid=d_tid,
        corr=d_corr,
        launch_start=d_launch,
        launch_end=launch_end,
        gpu_start=gpu_start,
        gpu_end=gpu_end,
        counters=counters,
        r_msg=r_msg,
        r_tid=r_tid,
        r_start=r_start,
        r_end=r_end,
        r_corr=r_corr,
        m_msg=m_msg,
        m_tid=m_tid,
        m_t=m_t,
        m_corr=m_corr,
        s_tid=s_tid,
        s_start=s_start,
        s_end=s_end,
        s_corr=s_corr,
    )


# ---- rocprofv3 CSV --------------------------------------------------------------------------------


def _q(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


def _write_lines(path: Path, header: Iterable[str], lines: Iterator[str]) -> None:
    with open(path, "w", encoding="utf-8", newline="") as fh:
        fh.write(",".join(_q(h) for h in header) + "\n")
        buf: list[str] = []
        for line in lines:
            buf.append(line)
            if len(buf) >= 50_000:
                fh.write("\n".join(buf) + "\n")
                buf.clear()
        if buf:
            fh.write("\n".join(buf) + "\n")


def write_rocprofv3_csv(w: Workload, out: Path) -> Path:
    """One rocprofv3 pass directory (kernel trace + counters + markers + HIP API + agents)."""
    out.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    import rocprof_csv as rc  # the tests' exact headers

    names = [_q(k[0]) for k in KERNELS]
    grid = np.array([k[4] for k in KERNELS])[w.kernel].tolist()
    wg = np.array([k[5] for k in KERNELS])[w.kernel].tolist()
    kern = w.kernel.tolist()
    tid, corr = w.tid.tolist(), w.corr.tolist()
    gs, ge = w.gpu_start.tolist(), w.gpu_end.tolist()
    did = range(1, w.n + 1)

    def kernel_lines() -> Iterator[str]:
        for i in range(w.n):
            k = kern[i]
            yield (
                f'"KERNEL_DISPATCH","Agent 1",1,1,{tid[i]},{did[i]},{k + 1},{names[k]},{corr[i]},{gs[i]},{ge[i]},'
                f"0,0,{64 + 8 * k},0,{24 + 2 * k},{wg[i]},1,1,{grid[i]},1,1"
            )

    _write_lines(out / f"{PID}_kernel_trace.csv", rc.KERNEL_TRACE_70, kernel_lines())

    cnames = [_q(c) for c in COUNTERS]
    values = w.counters.tolist()

    def counter_lines() -> Iterator[str]:
        for i in range(w.n):
            k = kern[i]
            head = (
                f'{corr[i]},{did[i]},"Agent 1",1,{PID},{tid[i]},{grid[i]},{k + 1},{names[k]},{wg[i]},0,0,'
                f"{64 + 8 * k},0,{24 + 2 * k},"
            )
            tail = f",{gs[i]},{ge[i]}"
            row = values[i]
            for c in range(len(COUNTERS)):
                yield f"{head}{cnames[c]},{row[c]:f}{tail}"

    _write_lines(out / f"{PID}_counter_collection.csv", rc.COUNTERS_70, counter_lines())

    def marker_lines() -> Iterator[str]:
        rows = sorted(
            [
                (e, f'"MARKER_CORE_RANGE_API",{_q(m)},{PID},{t},{c},{s},{e}')
                for m, t, c, s, e in zip(
                    w.r_msg, w.r_tid.tolist(), w.r_corr.tolist(), w.r_start.tolist(), w.r_end.tolist(), strict=True
                )
            ]
            + [
                (s, f'"MARKER_CORE_API",{_q(m)},{PID},{t},{c},{s},{s}')
                for m, t, c, s in zip(w.m_msg, w.m_tid.tolist(), w.m_corr.tolist(), w.m_t.tolist(), strict=True)
            ]
        )  # rocprofv3 writes records as they complete
        for _, line in rows:
            yield line

    _write_lines(out / f"{PID}_marker_api_trace.csv", rc.API_TRACE, marker_lines())

    def api_lines() -> Iterator[str]:
        ls, le = w.launch_start.tolist(), w.launch_end.tolist()
        rows = [
            (le[i], f'"HIP_RUNTIME_API_EXT","hipLaunchKernel",{PID},{tid[i]},{corr[i]},{ls[i]},{le[i]}')
            for i in range(w.n)
        ]
        rows += [
            (e, f'"HIP_RUNTIME_API_EXT","hipStreamSynchronize",{PID},{t},{c},{s},{e}')
            for t, c, s, e in zip(
                w.s_tid.tolist(), w.s_corr.tolist(), w.s_start.tolist(), w.s_end.tolist(), strict=True
            )
        ]
        rows.sort()
        for _, line in rows:
            yield line

    _write_lines(out / f"{PID}_hip_api_trace.csv", rc.API_TRACE, api_lines())

    agent_rows = [
        {
            "Node_Id": 0,
            "Logical_Node_Id": 0,
            "Agent_Type": "CPU",
            "Name": "AMD EPYC 9454",
            "Cu_Count": 0,
            "Wave_Front_Size": 0,
            "Product_Name": "AMD EPYC 9454 48-Core Processor",
        },
        {
            "Node_Id": 1,
            "Logical_Node_Id": 1,
            "Agent_Type": "GPU",
            "Name": "gfx942",
            "Cu_Count": 304,
            "Simd_Count": 1216,
            "Num_Xcc": 8,
            "Wave_Front_Size": 64,
            "Max_Engine_Clk_Fcompute": 2100,
            "Product_Name": "AMD Instinct MI300X",
        },
    ]
    rc.write_csv(out / f"{PID}_agent_info.csv", rc.AGENT_INFO, agent_rows)
    return out


# ---- rocpd --------------------------------------------------------------------------------------


def write_rocpd(w: Workload, out: Path) -> Path:
    """One ``<pid>_results.db`` in the rocpd schema 3 layout (suffixed tables + views)."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{PID}_results.db"
    path.unlink(missing_ok=True)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode = OFF")
    conn.execute("PRAGMA synchronous = OFF")
    b = rb.RocpdBuilder(conn, rb.UUID_A, pid=PID, tid=THREADS[0])
    rb.create_views(conn, [rb.UUID_A])
    b.add_node_and_process(hostname="bench", command="llama-bench -m llama-1b-q4_k_m.gguf -p 0 -n 2048")
    b.add_agent(
        agent_type="CPU", absolute_index=0, logical_index=0, name="AMD EPYC 9454", product_name="EPYC", extdata={}
    )
    gpu = b.add_agent(agent_id=2)
    sym = [b.add_kernel_symbol(k[0].split("(")[0].split("<")[0].removeprefix("void "), k[0]) for k in KERNELS]
    pmc = [b.add_pmc(c, gpu) for c in COUNTERS]
    cat = {
        c: b.string(c) for c in ("KERNEL_DISPATCH", "HIP_RUNTIME_API_EXT", "MARKER_CORE_RANGE_API", "MARKER_CORE_API")
    }
    name_launch, name_sync, name_range = (
        b.string(s) for s in ("hipLaunchKernel", "hipStreamSynchronize", "roctxThreadRangeA")
    )
    track = {
        t: b.insert("rocpd_track", nid=1, pid=PID, tid=t, name_id=b.string("MARKER_CORE_API"), extdata="{}")
        for t in THREADS
    }
    sfx = b.sfx
    guid = b.guid

    def ins(table: str, cols: tuple[str, ...], rows: Iterable[tuple[object, ...]]) -> None:
        sql = (
            f'INSERT INTO "{table}{sfx}" ({", ".join(chr(34) + c + chr(34) for c in cols)}) '
            f"VALUES ({', '.join('?' * len(cols))})"
        )
        conn.executemany(sql, rows)

    ev_cols = (
        "id",
        "guid",
        "category_id",
        "stack_id",
        "parent_stack_id",
        "correlation_id",
        "call_stack",
        "line_info",
        "extdata",
    )
    next_event = int(conn.execute(f'SELECT COALESCE(MAX(id), 0) FROM "rocpd_event{sfx}"').fetchone()[0]) + 1
    # dispatch events, then launch events, range events, mark events, sync events
    n, nr, nm, ns = w.n, len(w.r_msg), len(w.m_msg), len(w.s_tid)
    ev_disp = next_event + np.arange(n)
    ev_launch = ev_disp[-1] + 1 + np.arange(n) if n else ev_disp
    ev_range = next_event + 2 * n + np.arange(nr)
    ev_mark = next_event + 2 * n + nr + np.arange(nm)
    ev_sync = next_event + 2 * n + nr + nm + np.arange(ns)
    corr = w.corr.tolist()
    ins(
        "rocpd_event",
        ev_cols,
        ((int(ev_disp[i]), guid, cat["KERNEL_DISPATCH"], corr[i], corr[i], 0, "{}", "{}", "{}") for i in range(n)),
    )
    ins(
        "rocpd_event",
        ev_cols,
        (
            (int(ev_launch[i]), guid, cat["HIP_RUNTIME_API_EXT"], corr[i], corr[i], 0, "{}", "{}", "{}")
            for i in range(n)
        ),
    )
    ins(
        "rocpd_event",
        ev_cols,
        (
            (int(ev_range[i]), guid, cat["MARKER_CORE_RANGE_API"], c, c, 0, "{}", "{}", json.dumps({"message": m}))
            for i, (m, c) in enumerate(zip(w.r_msg, w.r_corr.tolist(), strict=True))
        ),
    )
    ins(
        "rocpd_event",
        ev_cols,
        (
            (int(ev_mark[i]), guid, cat["MARKER_CORE_API"], c, c, 0, "{}", "{}", json.dumps({"message": m}))
            for i, (m, c) in enumerate(zip(w.m_msg, w.m_corr.tolist(), strict=True))
        ),
    )
    ins(
        "rocpd_event",
        ev_cols,
        (
            (int(ev_sync[i]), guid, cat["HIP_RUNTIME_API_EXT"], c, c, 0, "{}", "{}", "{}")
            for i, c in enumerate(w.s_corr.tolist())
        ),
    )

    grid = np.array([k[4] for k in KERNELS])[w.kernel].tolist()
    wg = np.array([k[5] for k in KERNELS])[w.kernel].tolist()
    kern, tid = w.kernel.tolist(), w.tid.tolist()
    gs, ge = w.gpu_start.tolist(), w.gpu_end.tolist()
    empty = b.string("")
    kd_cols = (
        "id",
        "guid",
        "nid",
        "pid",
        "tid",
        "agent_id",
        "kernel_id",
        "dispatch_id",
        "queue_id",
        "stream_id",
        "start",
        "end",
        "private_segment_size",
        "group_segment_size",
        "workgroup_size_x",
        "workgroup_size_y",
        "workgroup_size_z",
        "grid_size_x",
        "grid_size_y",
        "grid_size_z",
        "region_name_id",
        "event_id",
        "extdata",
    )
    ins(
        "rocpd_kernel_dispatch",
        kd_cols,
        (
            (
                i + 1,
                guid,
                1,
                PID,
                tid[i],
                gpu,
                sym[kern[i]],
                i + 1,
                1,
                0,
                gs[i],
                ge[i],
                0,
                0,
                wg[i],
                1,
                1,
                grid[i],
                1,
                1,
                empty,
                int(ev_disp[i]),
                "{}",
            )
            for i in range(n)
        ),
    )
    values = w.counters.tolist()
    ins(
        "rocpd_pmc_event",
        ("guid", "event_id", "pmc_id", "value", "extdata"),
        ((guid, int(ev_disp[i]), pmc[c], values[i][c], "{}") for i in range(n) for c in range(len(COUNTERS))),
    )
    rg_cols = ("id", "guid", "nid", "pid", "tid", "start", "end", "name_id", "event_id", "extdata")
    ls, le = w.launch_start.tolist(), w.launch_end.tolist()
    ins(
        "rocpd_region",
        rg_cols,
        ((corr[i], guid, 1, PID, tid[i], ls[i], le[i], name_launch, int(ev_launch[i]), "{}") for i in range(n)),
    )
    ins(
        "rocpd_region",
        rg_cols,
        (
            (c, guid, 1, PID, t, s, e, name_range, int(ev_range[i]), "{}")
            for i, (c, t, s, e) in enumerate(
                zip(w.r_corr.tolist(), w.r_tid.tolist(), w.r_start.tolist(), w.r_end.tolist(), strict=True)
            )
        ),
    )
    ins(
        "rocpd_region",
        rg_cols,
        (
            (c, guid, 1, PID, t, s, e, name_sync, int(ev_sync[i]), "{}")
            for i, (c, t, s, e) in enumerate(
                zip(w.s_corr.tolist(), w.s_tid.tolist(), w.s_start.tolist(), w.s_end.tolist(), strict=True)
            )
        ),
    )
    ins(
        "rocpd_sample",
        ("id", "guid", "track_id", "timestamp", "event_id", "extdata"),
        (
            (c, guid, track[t], s, int(ev_mark[i]), "{}")
            for i, (c, t, s) in enumerate(zip(w.m_corr.tolist(), w.m_tid.tolist(), w.m_t.tolist(), strict=True))
        ),
    )
    conn.commit()
    conn.close()
    return out


# ---- NVIDIA: nsys SQLite export + ncu raw CSV -------------------------------------------------------

NVTX_COLUMN = "thread Domain:Push/Pop_Range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg"
NCU_META = (
    "ID",
    "Process ID",
    "Process Name",
    "Host Name",
    NVTX_COLUMN,
    "Kernel Name",
    "Context",
    "Stream",
    "Block Size",
    "Grid Size",
    "Device",
    "CC",
)


def _nvtx_stacks(w: Workload) -> list[str]:
    """Each kernel's NVTX push/pop stack cell (outermost first), as Nsight Compute prints it."""
    # the ranges open on the launching thread at launch: the two outer ranges and the op range
    is_ggml = np.array([m.startswith("ggml:") for m in w.r_msg])
    out = [""] * w.n
    for t in THREADS:
        sel = np.flatnonzero(w.r_tid == t)
        d = np.flatnonzero(w.tid == t)
        g = sel[is_ggml[sel]]
        g = g[np.argsort(w.r_start[g])]
        k = np.searchsorted(w.r_start[g], w.launch_start[d], side="right") - 1
        for row, gi in zip(d.tolist(), g[k].tolist(), strict=True):
            entries = ["llama_decode", "ggml_backend_sched_graph_compute", w.r_msg[gi]]
            out[row] = (
                f"{t}  " + " ".join(f'"<default domain>:{e}:none:none:none:none:none:none"' for e in entries) + " "
            )
    return out


def _thousands(values: np.ndarray, decimals: int) -> list[str]:
    return [f"{v:,.{decimals}f}" for v in values.tolist()]


def write_nvidia(w: Workload, out: Path) -> Path:
    """``trace/nsys.sqlite`` and ``ncu/ncu_raw.csv`` of the same N kernels."""
    (out / "trace").mkdir(parents=True, exist_ok=True)
    (out / "ncu").mkdir(parents=True, exist_ok=True)
    # -- ncu raw CSV: all cells quoted, units row, thousands separators
    stacks = _nvtx_stacks(w)
    names = [k[0] for k in KERNELS]
    dur_ns = (w.gpu_end - w.gpu_start).astype(np.float64)
    rd = w.counters[:, 0] * 64
    wr = w.counters[:, 3] * 64
    metric_values = [
        rd,
        wr,
        dur_ns,
        rd * 3.1,
        w.counters[:, 7] * 32,
        w.counters[:, 7] * 4,
        w.counters[:, 7] * 2,
        np.zeros(w.n),
    ]
    cols = [
        _thousands(v * scale, 6 if unit in ("Mbyte", "Kbyte", "us") else 0)
        for v, (_, unit, scale) in zip(metric_values, NCU_METRICS, strict=True)
    ]
    grid = np.array([k[4] for k in KERNELS])[w.kernel]
    wg = np.array([k[5] for k in KERNELS])[w.kernel]
    blocks = (grid // wg).tolist()
    wgl, kern = wg.tolist(), w.kernel.tolist()
    header = [*NCU_META, *(m for m, _, _ in NCU_METRICS)]

    def ncu_lines() -> Iterator[str]:
        yield ",".join(_q(u) for u in [""] * len(NCU_META) + [u for _, u, _ in NCU_METRICS])
        for i in range(w.n):
            cells = [
                str(i),
                str(PID),
                "llama-bench",
                "host",
                stacks[i],
                names[kern[i]],
                "1",
                "14",
                f"({wgl[i]}, 1, 1)",
                f"({blocks[i]}, 1, 1)",
                "0",
                "9.0",
                *(c[i] for c in cols),
            ]
            yield ",".join(_q(c) for c in cells)

    _write_lines(out / "ncu" / "ncu_raw.csv", header, ncu_lines())

    # -- nsys SQLite export
    path = out / "trace" / "nsys.sqlite"
    path.unlink(missing_ok=True)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode = OFF")
    conn.executescript(
        """
        CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE PROCESSES (globalPid INTEGER, pid INTEGER, name TEXT);
        CREATE TABLE TARGET_INFO_GPU (vmId INTEGER NOT NULL, id INTEGER NOT NULL, name TEXT, busLocation TEXT,
            isDiscrete INTEGER, l2CacheSize INTEGER, totalMemory INTEGER, memoryBandwidth INTEGER, clockRate INTEGER,
            smCount INTEGER, threadsPerWarp INTEGER, computeMajor INTEGER, computeMinor INTEGER);
        CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL,
            deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL,
            correlationId INTEGER, globalPid INTEGER, demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL,
            mangledName INTEGER, launchType INTEGER, cacheConfig INTEGER, registersPerThread INTEGER NOT NULL,
            gridX INTEGER NOT NULL, gridY INTEGER NOT NULL, gridZ INTEGER NOT NULL, blockX INTEGER NOT NULL,
            blockY INTEGER NOT NULL, blockZ INTEGER NOT NULL, staticSharedMemory INTEGER NOT NULL,
            dynamicSharedMemory INTEGER NOT NULL, localMemoryPerThread INTEGER NOT NULL,
            localMemoryTotal INTEGER NOT NULL, gridId INTEGER NOT NULL, sharedMemoryExecuted INTEGER,
            graphNodeId INTEGER, sharedMemoryLimitConfig INTEGER);
        CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL,
            eventClass INTEGER NOT NULL, globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL,
            returnValue INTEGER NOT NULL, callchainId INTEGER);
        CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER,
            category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER,
            domainId INTEGER, uint64Value INTEGER, int64Value INTEGER, doubleValue REAL, uint32Value INTEGER,
            int32Value INTEGER, floatValue REAL, jsonTextId INTEGER, jsonText TEXT, binaryData TEXT);
        """
    )
    gpid = PID << 24
    strings = {
        s: i + 1
        for i, s in enumerate(
            [k[0] for k in KERNELS]
            + [k[0].split("(")[0] for k in KERNELS]
            + ["cudaLaunchKernel", "cudaStreamSynchronize"]
        )
    }
    conn.executemany("INSERT INTO StringIds VALUES (?, ?)", [(i, s) for s, i in strings.items()])
    conn.execute("INSERT INTO PROCESSES VALUES (?, ?, ?)", (gpid, PID, "llama-bench"))
    conn.execute(
        "INSERT INTO TARGET_INFO_GPU VALUES (0, 0, 'NVIDIA H200', '0000:19:00.0', 1, 62914560, 150109880320, "
        "4800000000000, 1980000000, 132, 32, 9, 0)"
    )
    gs, ge, corr, tid = w.gpu_start.tolist(), w.gpu_end.tolist(), w.corr.tolist(), w.tid.tolist()
    conn.executemany(
        "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?,?,0,1,NULL,14,?,?,?,?,NULL,0,0,?,?,1,1,?,1,1,0,0,0,0,?,0,"
        "NULL,NULL)",
        (
            (
                gs[i],
                ge[i],
                corr[i],
                gpid,
                strings[names[kern[i]]],
                strings[names[kern[i]].split("(")[0]],
                32 + kern[i],
                blocks[i],
                wgl[i],
                i + 1,
            )
            for i in range(w.n)
        ),
    )
    ls, le = w.launch_start.tolist(), w.launch_end.tolist()
    conn.executemany(
        "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?,?,1,?,?,?,0,NULL)",
        ((ls[i], le[i], gpid | tid[i], corr[i], strings["cudaLaunchKernel"]) for i in range(w.n)),
    )
    conn.executemany(
        "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?,?,1,?,?,?,0,NULL)",
        (
            (s, e, gpid | t, c, strings["cudaStreamSynchronize"])
            for s, e, t, c in zip(
                w.s_start.tolist(), w.s_end.tolist(), w.s_tid.tolist(), w.s_corr.tolist(), strict=True
            )
        ),
    )
    conn.executemany(
        "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid) VALUES (?,?,59,?,?)",
        (
            (s, e, m, gpid | t)
            for s, e, m, t in zip(w.r_start.tolist(), w.r_end.tolist(), w.r_msg, w.r_tid.tolist(), strict=True)
        ),
    )
    conn.executemany(
        "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid) VALUES (?,NULL,34,?,?)",
        ((s, m, gpid | t) for s, m, t in zip(w.m_t.tolist(), w.m_msg, w.m_tid.tolist(), strict=True)),
    )
    conn.commit()
    conn.close()
    return out


WRITERS: dict[str, Callable[[Workload, Path], Path]] = {
    "csv": write_rocprofv3_csv,
    "rocpd": write_rocpd,
    "nvidia": write_nvidia,
}


def ensure(fmt: str, n: int, root: Path, seed: int = 0) -> Path:
    """The capture directory of ``fmt`` with ``n`` dispatches under ``root``, written once (cached)."""
    out = root / f"{fmt}-{n}"
    stamp = root / f"{fmt}-{n}.complete"
    if stamp.is_file() and out.is_dir():
        return out
    if out.exists():
        for p in sorted(out.rglob("*"), reverse=True):
            p.unlink() if p.is_file() else p.rmdir()
    WRITERS[fmt](make_workload(n, seed), out)
    stamp.write_text("ok\n")
    return out


def main() -> None:
    """Write the captures asked for (cached) and print their directories."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--format", choices=[*WRITERS, "all"], default="all")
    ap.add_argument("--dispatches", type=int, default=10_000)
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "rocroof-bench")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    for fmt in WRITERS if args.format == "all" else [args.format]:
        print(ensure(fmt, args.dispatches, args.out, args.seed))


if __name__ == "__main__":
    main()
