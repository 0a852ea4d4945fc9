"""Roofline columns for report rows: governing ceiling, bound, % of ceiling, time share, flags.

Pure functions over the rows of the ``op_roofline`` view (per invocation) or their per-op sums,
and the run's ``run_ceiling`` rows. The roofline (Williams, Waterman, Patterson, CACM 52(4),
2009): attainable FLOP/s = min(compute peak, arithmetic intensity × DRAM bandwidth); an op is
**memory-bound** when its intensity is left of the ridge point (peak / bandwidth), else
**compute-bound**. The compute peak that governs an op: the FP16 matrix peak for the matrix ops
(``MUL_MAT``, ``MUL_MAT_ID``, ``FLASH_ATTN_EXT``, ``OUT_PROD``, ``CONV*``: ggml runs them on the
matrix engines when it can), the FP32 vector peak for the others. Ops without FLOPs (copies,
gathers) are judged on bandwidth alone.

Flags: measured / modelled DRAM bytes outside [0.7, 1.3] get a one-line explanation that
depends on how the run was measured (Nsight Compute's default cache flush makes every kernel
start cold, so "served from cache" cannot explain a low ratio there; rocprofv3 and
``--cache-control none`` keep warm caches).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

MATRIX_OPS = frozenset({"MUL_MAT", "MUL_MAT_ID", "FLASH_ATTN_EXT", "OUT_PROD", "CONV_2D", "CONV_TRANSPOSE_2D"})
#: Measured / modelled DRAM bytes outside this range are flagged.
RATIO_BAND = (0.7, 1.3)
#: Below this many bytes of excess over the model, the excess is fixed per-kernel traffic (cache
#: lines, partial writes, the flush): decode matvecs show 22-52 KB (examples/h200/README.md).
SMALL_EXCESS_BYTES = 64 * 1024
#: Below this % of the roof with calls shorter than LATENCY_US on average, an op is launch- or
#: latency-bound: the roofline's memory/compute verdict does not describe it.
LATENCY_PCT = 10.0
LATENCY_US = 20.0


def _f(v: Any) -> float:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return float("nan")
    return x


def flag_for(row: Mapping[str, Any], run: Mapping[str, Any], ceilings: Mapping[str, float]) -> str:
    """One line explaining a measured/modelled byte ratio outside :data:`RATIO_BAND` ("" inside).

    ``row`` needs ``measured_over_model``, ``dram_write_bytes``, ``model_write_bytes``,
    ``model_bytes`` and may carry ``model_note``; ``run`` its ``cache_control``, ``gpu_arch``
    and ``profiler``; ``ceilings`` ``llc_bytes`` when known.
    """
    ratio = _f(row.get("measured_over_model"))
    if not np.isfinite(ratio) or RATIO_BAND[0] <= ratio <= RATIO_BAND[1]:
        return ""
    cold = str(run.get("cache_control") or "") == "all"
    arch = str(run.get("gpu_arch") or "")
    model_bytes = _f(row.get("model_bytes"))
    note = str(row.get("model_note") or "")
    extra = " FETCH_SIZE counts about half on gfx1151 (rocm-systems#2352)." if arch.startswith("gfx1151") else ""
    if ratio < RATIO_BAND[0]:
        w_meas, w_model = _f(row.get("dram_write_bytes")), _f(row.get("model_write_bytes"))
        if w_model > 0 and (not np.isfinite(w_meas) or w_meas < 0.1 * w_model):
            why = "DRAM writes near zero: the results stay in the write-back L2 and reach DRAM after the kernel"
        elif note and ("bound" in note or "unknown" in note):
            why = f"the model is an upper bound here ({note[:80]})"
        elif not cold:
            llc = _f(ceilings.get("llc_bytes"))
            fits = (
                f" (the op's {model_bytes / 1e6:.1f} MB fit the {llc / 2**20:.0f} MiB last-level cache)"
                if (np.isfinite(llc) and np.isfinite(model_bytes) and model_bytes < llc)
                else ""
            )
            why = f"served from L2/Infinity Cache: caches stay warm between kernels in this run{fits}"
        else:
            why = "fewer DRAM bytes than modelled with cold caches: the kernel reads only part of a tensor"
        return f"measured {ratio:.2f}x model: {why}.{extra}"
    excess = model_bytes * (ratio - 1) if np.isfinite(model_bytes) else float("nan")
    calls = _f(row.get("invocations")) if np.isfinite(_f(row.get("invocations"))) else 1.0
    if np.isfinite(excess) and excess / max(calls, 1.0) < SMALL_EXCESS_BYTES:
        why = "small op: a fixed few KB per kernel (cache lines, partial writes, the profiler's flush) dominate"
    else:
        why = "more traffic than modelled: re-reads of tiles not kept in L2, scratch buffers (quantized activations, "
        why += "split-K partials) or read-modify-write"
        if cold:
            why += "; with caches flushed before each kernel, partial results that would stay in L2 between a "
            why += "kernel and its fix-up kernel go through DRAM (see --by kernel)"
    return f"measured {ratio:.2f}x model: {why}.{extra}"


def add_roofline_columns(
    rows: pd.DataFrame, run: Mapping[str, Any], ceilings: Mapping[str, float], op_column: str = "op"
) -> pd.DataFrame:
    """Rows with ``pct_of_ceiling``, ``bound``, ``governing_ceiling``, ``time_share`` and ``flag``.

    ``rows`` carry ``duration_ns``, ``dram_bytes`` (or read + write), ``flops``,
    ``arithmetic_intensity`` and ``share_of_time_pct``; ``ceilings`` map ``run_ceiling`` names
    to values (``dram_gbps``, ``fp16_matrix_tflops``, ``fp32_vector_tflops``...).

    Returns:
        A copy with the added columns: ``governing_ceiling`` (which roof applies),
        ``attainable_tflops`` (the roof at the op's intensity, TFLOP/s), ``pct_of_ceiling``
        (achieved as % of the roof: FLOP/s for ops with FLOPs, bandwidth for the others),
        ``bound`` (``memory`` / ``compute`` at the roofline's ridge, or ``latency`` when the op runs
        below 10% of its roof in calls shorter than 20 µs on average), ``mean_us_per_call``,
        ``time_at_roof_ns`` (the op's time at its roof), ``time_share`` (0–1) and ``flag``.
    """
    out = rows.copy()
    bw = _f(ceilings.get("dram_gbps"))  # GB/s = 1e9 B/s
    matrix = _f(ceilings.get("fp16_matrix_tflops"))
    vector = _f(ceilings.get("fp32_vector_tflops"))
    governing: list[str | None] = []
    bound: list[str | None] = []
    attainable: list[float] = []
    pct: list[float] = []
    for _, r in out.iterrows():
        op = str(r.get(op_column) or "")
        ai = _f(r.get("arithmetic_intensity"))
        flops = _f(r.get("flops"))
        dur = _f(r.get("duration_ns"))
        peak, name = (matrix, "FP16 matrix") if op in MATRIX_OPS else (vector, "FP32 vector")
        if np.isfinite(flops) and flops > 0 and np.isfinite(ai) and np.isfinite(bw) and np.isfinite(dur) and dur > 0:
            mem_roof = ai * bw / 1e3  # FLOP/B × GB/s = GFLOP/s → TFLOP/s
            roof = min(mem_roof, peak) if np.isfinite(peak) else mem_roof
            is_mem = not np.isfinite(peak) or mem_roof < peak
            governing.append("DRAM bandwidth" if is_mem else f"{name} peak")
            attainable.append(roof)
            pct.append(100.0 * (flops / dur / 1e3) / roof if roof > 0 else np.nan)
            bound.append("memory" if is_mem else "compute")
        else:
            gbps = _f(r.get("achieved_gbps"))
            governing.append("DRAM bandwidth" if np.isfinite(bw) else None)
            attainable.append(np.nan)
            pct.append(100.0 * gbps / bw if np.isfinite(gbps) and np.isfinite(bw) and bw > 0 else np.nan)
            bound.append("memory" if np.isfinite(gbps) else None)
    out["governing_ceiling"] = governing
    out["attainable_tflops"] = attainable
    out["pct_of_ceiling"] = pct
    calls = pd.to_numeric(out["invocations"], errors="coerce") if "invocations" in out else pd.Series(1.0, out.index)
    out["mean_us_per_call"] = pd.to_numeric(out["duration_ns"], errors="coerce") / 1e3 / calls
    # far below the roof with short calls: launch/latency-bound, where the roofline says little
    latency = (pd.Series(pct, index=out.index) < LATENCY_PCT) & (out["mean_us_per_call"] < LATENCY_US)
    out["bound"] = [("latency" if lat and b else b) for lat, b in zip(latency, bound, strict=True)]
    # time at the roof: what the op would take at the governing ceiling (FLOP at the attainable
    # rate, or bytes at the DRAM bandwidth for ops without FLOPs)
    at_roof = []
    for a, r in zip(attainable, out.to_dict("records"), strict=True):
        flops, nbytes = _f(r.get("flops")), _f(r.get("dram_bytes"))
        if np.isfinite(a) and a > 0 and np.isfinite(flops) and flops > 0:
            at_roof.append(flops / (a * 1e3))  # TFLOP/s = 1e3 FLOP/ns
        elif np.isfinite(nbytes) and np.isfinite(bw) and bw > 0:
            at_roof.append(nbytes / bw)  # GB/s = B/ns
        else:
            at_roof.append(np.nan)
    out["time_at_roof_ns"] = at_roof
    out["time_share"] = pd.to_numeric(out.get("share_of_time_pct"), errors="coerce") / 100.0
    out["flag"] = [flag_for(r, run, ceilings) for r in out.to_dict("records")]
    return out


def per_op_sums(inv: pd.DataFrame) -> pd.DataFrame:
    """Per-op sums of the ``op_roofline`` rows: modelled bytes and FLOPs (NULL if any is), ratios.

    Returns columns ``op``, ``model_read_bytes``, ``model_write_bytes``, ``model_bytes``,
    ``flops``, ``measured_over_model``, ``arithmetic_intensity``, ``model_arithmetic_intensity``,
    ``achieved_tflops``, ``model_note`` (the first note seen).
    """

    def strict(s: pd.Series) -> float:
        v = pd.to_numeric(s, errors="coerce")
        return float(v.sum()) if len(v) and v.notna().all() else np.nan

    rows = []
    for op, g in inv.groupby("op", sort=False):
        mr, mw, fl = strict(g["model_read_bytes"]), strict(g["model_write_bytes"]), strict(g["flops"])
        meas = strict(g["dram_bytes"])
        dur = strict(g["duration_ns"])
        mb = mr + mw
        notes = [n for n in g["model_note"].fillna("") if n]
        rows.append(
            {
                "op": op,
                "model_read_bytes": mr,
                "model_write_bytes": mw,
                "model_bytes": mb,
                "flops": fl,
                "measured_over_model": meas / mb if mb and np.isfinite(mb) else np.nan,
                "arithmetic_intensity": fl / meas if meas and np.isfinite(meas) else np.nan,
                "model_arithmetic_intensity": fl / mb if mb and np.isfinite(mb) else np.nan,
                "achieved_tflops": fl / dur / 1e3 if dur and np.isfinite(dur) else np.nan,
                "model_note": notes[0] if notes else "",
            }
        )
    return pd.DataFrame(rows)
