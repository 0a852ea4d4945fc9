"""Roofline columns for report rows: governing ceiling, bound, % of ceiling, time share, flags.

Pure functions over the rows of the ``op_roofline`` view (per invocation) or their per-op sums,
and the run's ``run_ceiling`` rows. The roofline (Williams, Waterman, Patterson, CACM 52(4),
2009): attainable FLOP/s = min(compute peak, arithmetic intensity × DRAM bandwidth); an op is
**memory-bound** when its intensity is left of the ridge point (peak / bandwidth), else
**compute-bound**. The compute peak that governs an op (:func:`compute_type`): the INT8 matrix
peak for ``MUL_MAT`` / ``MUL_MAT_ID`` with integer-quantized weights where ggml's quantized matmul
kernels (MMQ/MMVQ, int8 dot products) run them, the BF16 matrix peak for BF16 weights, the FP16
matrix peak for the other matrix ops (``FLASH_ATTN_EXT``, ``OUT_PROD``, ``CONV*``, F16 weights,
and quantized weights that ggml dequantizes for BLAS), the FP32 vector peak for F32 weights and
the others. Ops without FLOPs (copies, gathers) are judged on bandwidth alone.

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
#: src0 types of ggml-cuda's quantized matmul kernels (MMQ; MMVQ for batches up to 8): the
#: activations are quantized to q8_1 and multiplied as int8 (ggml/src/ggml-cuda/mmq.cu
#: ``ggml_cuda_should_use_mmq``, llama.cpp 0c1e570). Lower-case ggml type names.
MMQ_TYPES = frozenset(
    {
        *("q1_0", "q2_0", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0"),
        *("q2_k", "q3_k", "q4_k", "q5_k", "q6_k"),
        *("iq1_s", "iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "iq4_xs", "iq4_nl"),
        *("mxfp4", "nvfp4"),
    }
)
#: Compute type -> (run_ceiling name, label) of its peak.
COMPUTE_PEAKS = {
    "int8": ("int8_matrix_tops", "INT8 matrix"),
    "bf16": ("bf16_matrix_tflops", "BF16 matrix"),
    "fp16": ("fp16_matrix_tflops", "FP16 matrix"),
    "fp32": ("fp32_vector_tflops", "FP32 vector"),
}
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


def _uses_mmq(quant: str, gpu_arch: str | None, tokens: float, n_experts: float) -> bool:
    """Whether ggml-cuda runs a matmul of ``quant`` weights with its int8 kernels (MMQ/MMVQ).

    Follows ``ggml_cuda_should_use_mmq`` (ggml/src/ggml-cuda/mmq.cu, llama.cpp 0c1e570) for the
    GPUs in ``configs/peaks.yaml``; an unknown batch counts as large. MMVQ (batches up to 8)
    also multiplies int8, with dot-product instructions on the vector units; rocroof still gives
    it the INT8 matrix roof, which a matrix-vector product (about 2 FLOP per weight byte) never
    reaches: it sits far left of the ridge, where DRAM governs.
    """
    from .dram import base_arch

    arch = base_arch(gpu_arch)
    big = not (np.isfinite(tokens) and tokens >= 0)
    experts = n_experts if np.isfinite(n_experts) else 0.0
    if arch.startswith("sm_"):
        try:
            cc = int(arch[3:].rstrip("abf"))
        except ValueError:
            return False
        if quant in ("mxfp4", "nvfp4") and cc >= 100:
            return False  # Blackwell multiplies FP4 natively: a roof the table does not list
        return cc >= 75  # Turing and newer: int8 tensor-core MMA (turing_mma_available)
    if arch in ("gfx940", "gfx941", "gfx942"):
        return True  # CDNA3: MMQ always (hipBLAS is slower there, per the source's comment)
    if arch in ("gfx908", "gfx90a", "gfx950"):  # other CDNA: MMQ for small batches and some types
        return (
            experts > 64
            or (not big and tokens <= 128)
            or quant in ("q4_0", "q4_1", "q5_0", "q5_1")
            or (not big and tokens <= 256 and quant in ("q4_k", "q5_k"))
        )
    if arch.startswith("gfx11"):  # RDNA3 (gfx110x) and RDNA3.5 (gfx115x): WMMA
        rdna3_5 = arch.startswith("gfx115")
        if experts >= 64:
            return True
        if quant == "q2_k":
            return not big and tokens <= 128
        if quant == "q6_k":
            return not big and tokens <= (256 if rdna3_5 else 128)
        if quant in ("iq2_xs", "iq2_s"):
            return rdna3_5 or (not big and tokens <= 128)
        return True
    return arch.startswith("gfx12")  # RDNA4: MMQ always; older GPUs: dequantize + BLAS


def compute_type(
    op: str, quant: str | None, gpu_arch: str | None, tokens: float = float("nan"), n_experts: float = float("nan")
) -> str:
    """The arithmetic an op invocation's FLOPs run on: ``int8``, ``bf16``, ``fp16`` or ``fp32``.

    Args:
        op: the ggml op (head op of a fused group).
        quant: src0's ggml type (``q8_0``, ``q4_K``, ``f16``...; the weights of a matmul), or None.
        gpu_arch: ``sm_90``, ``gfx942``... (the run's).
        tokens: the matmul's batch, M in rocroof's metadata (``src1->ne[1]``; ``ne[2]`` for
            ``MUL_MAT_ID``); NaN when unknown.
        n_experts: experts in a ``MUL_MAT_ID`` weight tensor; NaN otherwise.

    Returns:
        ``int8`` for ``MUL_MAT``/``MUL_MAT_ID`` whose weights ggml's int8 kernels multiply
        (:data:`MMQ_TYPES`, per GPU as ``ggml_cuda_should_use_mmq`` decides); ``bf16`` for BF16
        weights; ``fp32`` for F32 weights (ggml multiplies them in FP32) and for every op that is
        not a matrix op (vector units); ``fp16`` for the other matrix ops (:data:`MATRIX_OPS`),
        including quantized weights that ggml dequantizes for BLAS.
    """
    if op not in MATRIX_OPS:
        return "fp32"
    q = (quant or "").strip().lower()
    if op in ("MUL_MAT", "MUL_MAT_ID"):
        if q in MMQ_TYPES and _uses_mmq(q, gpu_arch, _f(tokens), _f(n_experts)):
            return "int8"
        if q == "bf16":
            return "bf16"
        if q == "f32":  # F32 weights: FP32 arithmetic (mmvf, or cublasSgemm in ggml-cuda.cu)
            return "fp32"
    return "fp16"


def compute_ceilings(ops: pd.DataFrame, gpu_arch: str | None) -> list[str | None]:
    """Per op invocation: the ``run_ceiling`` name of the compute peak that governs it.

    ``ops`` carries ``op`` and, where known, ``quant``, ``m`` and ``n_experts`` (``op_invocation``
    rows); the answer is :func:`compute_type` mapped through :data:`COMPUTE_PEAKS`
    (``int8_matrix_tops``, ``bf16_matrix_tflops``, ``fp16_matrix_tflops``, ``fp32_vector_tflops``),
    None where ``op`` is missing. Stored at ingest as ``op_model.compute_ceiling`` so that the
    ``op_verdict`` view can apply the roofline in SQL; one decision per distinct key.
    """
    cols = [ops[c] if c in ops else pd.Series(np.nan, index=ops.index) for c in ("op", "quant", "m", "n_experts")]
    decided: dict[tuple[Any, ...], str | None] = {}
    out: list[str | None] = []
    for key in zip(*cols, strict=True):
        k = tuple(None if pd.isna(v) else v for v in key)
        if k not in decided:
            op, quant, m, experts = k
            kind = None if op is None else compute_type(str(op), quant and str(quant), gpu_arch, _f(m), _f(experts))
            decided[k] = None if kind is None else COMPUTE_PEAKS[kind][0]
        out.append(decided[k])
    return out


def compute_peaks(
    inv: pd.DataFrame, gpu_arch: str | None, ceilings: Mapping[str, float], op_column: str = "op"
) -> pd.DataFrame:
    """Per invocation row: the compute peak that governs it, in TFLOP/s (TOP/s for int8), and its name.

    ``inv`` carries ``op`` and, where known, ``quant``, ``m`` (tokens) and ``n_experts``
    (``op_invocation``). A compute type whose peak the run does not have falls back to the FP16
    matrix peak (matrix ops) and says so in the name, e.g. ``FP16 matrix (INT8 peak unknown)``.

    Returns:
        ``inv``'s index with columns ``compute_type``, ``compute_peak_tflops`` (NaN when no peak
        is known) and ``compute_peak`` (the name).
    """
    ops = inv if op_column == "op" else inv.rename(columns={op_column: "op"})
    kind_of = {ceiling: kind for kind, (ceiling, _) in COMPUTE_PEAKS.items()}
    # one decision per distinct ceiling (compute_ceilings decides once per distinct op shape)
    decided: dict[str | None, tuple[str, float, str]] = {}
    chosen = []
    for name in compute_ceilings(ops, gpu_arch):
        if name not in decided:
            ct = kind_of[name] if name is not None else "fp32"  # no op: the vector units, as compute_type says
            ceiling, label = COMPUTE_PEAKS[ct]
            value = _f(ceilings.get(ceiling))
            fp16 = _f(ceilings.get("fp16_matrix_tflops"))
            if not np.isfinite(value) and ct in ("int8", "bf16") and np.isfinite(fp16):
                value, label = fp16, f"FP16 matrix ({label.split()[0]} peak unknown)"
            elif not np.isfinite(value):
                label = f"{label} (peak unknown)"
            decided[name] = (ct, value, label)
        chosen.append(decided[name])
    return pd.DataFrame(
        {
            "compute_type": [c[0] for c in chosen],
            "compute_peak_tflops": [c[1] for c in chosen],
            "compute_peak": [c[2] for c in chosen],
        },
        index=inv.index,
    )


def _share(fraction: float) -> str:
    """A FLOP share for people: ``97%``, ``<1%``, ``>99%``."""
    if 0 < fraction < 0.01:
        return "<1%"
    if 0.99 < fraction < 1:
        return ">99%"
    return f"{100 * fraction:.0f}%"


def per_op_compute_peaks(inv: pd.DataFrame, op_column: str = "op") -> pd.DataFrame:
    """Per op: one compute peak for invocations that may run on different units.

    The peak is the FLOP-weighted harmonic mean, so that time at the peak adds up: Σ flops / Σ (flops_i / peak_i).
    ``inv`` carries ``flops`` and the columns of :func:`compute_peaks`.

    Returns:
        Columns ``op``, ``compute_peak_tflops``, ``compute_peak`` (one name, or ``mixed:`` with each
        peak's share of the op's FLOP).
    """
    rows = []
    for op, g in inv.groupby(op_column, sort=False):
        flops = pd.to_numeric(g["flops"], errors="coerce")
        peak = pd.to_numeric(g["compute_peak_tflops"], errors="coerce")
        names = g["compute_peak"].astype(str)
        known = flops.notna() & (flops > 0)
        if not known.any() or names[known].nunique() <= 1:
            name = str(names[known].iloc[0] if known.any() else names.iloc[0])
            value = float(peak[known].iloc[0] if known.any() else peak.iloc[0])
        else:
            total = float(flops[known].sum())
            value = total / float((flops[known] / peak[known]).sum()) if peak[known].gt(0).all() else float("nan")
            share = flops[known].groupby(names[known]).sum().sort_values(ascending=False) / total
            name = "mixed: " + ", ".join(f"{n} {_share(v)}" for n, v in share.items())
        rows.append({op_column: op, "compute_peak_tflops": value, "compute_peak": name})
    return pd.DataFrame(rows, columns=[op_column, "compute_peak_tflops", "compute_peak"])


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
    ``arithmetic_intensity`` and ``share_of_time_pct``, and may carry ``compute_peak_tflops`` and
    ``compute_peak`` (:func:`compute_peaks`, :func:`per_op_compute_peaks`; without them matrix
    ops get the FP16 matrix peak and the others the FP32 vector peak); ``ceilings`` map
    ``run_ceiling`` names to values (``dram_gbps``, ``fp16_matrix_tflops``, ``fp32_vector_tflops``...).

    Returns:
        A copy with the added columns: ``governing_ceiling`` (which roof applies),
        ``attainable_tflops`` (the roof at the op's intensity, TFLOP/s), ``pct_of_ceiling``
        (achieved as % of the roof: FLOP/s for ops with FLOPs, bandwidth for the others),
        ``bound`` (``memory`` / ``compute`` at the roofline's ridge, or ``latency`` when the op runs
        below 10% of its roof in calls shorter than 20 µs on average), ``mean_us_per_call``,
        ``time_at_roof_ns`` (the op's time at its roof), ``time_share`` (0–1) and ``flag``.
    """
    out = rows.copy()
    n = len(out)
    bw = _f(ceilings.get("dram_gbps"))  # GB/s = 1e9 B/s
    matrix = _f(ceilings.get("fp16_matrix_tflops"))
    vector = _f(ceilings.get("fp32_vector_tflops"))
    # column at a time (10^5-10^6 rows in an invocation report): the same rules as one row at a time
    ops = [str(v or "") for v in out[op_column].tolist()] if op_column in out else [""] * n
    is_matrix = np.fromiter((op in MATRIX_OPS for op in ops), dtype=bool, count=n)
    peak = np.where(is_matrix, matrix, vector)
    names = np.where(is_matrix, "FP16 matrix", "FP32 vector").astype(object)
    if "compute_peak" in out:
        given = out["compute_peak"].tolist()
        own = np.fromiter((isinstance(v, str) and bool(v) for v in given), dtype=bool, count=n)
        if own.any():
            peak = np.where(own, _floats(out, "compute_peak_tflops"), peak)
            names[own] = [str(v) for v, o in zip(given, own.tolist(), strict=True) if o]
    ai, flops, dur = _floats(out, "arithmetic_intensity"), _floats(out, "flops"), _floats(out, "duration_ns")
    gbps = _floats(out, "achieved_gbps")
    with np.errstate(invalid="ignore", divide="ignore"):
        has_flops = np.isfinite(flops) & (flops > 0)
        by_flops = has_flops & np.isfinite(ai) & np.isfinite(bw) & np.isfinite(dur) & (dur > 0)
        mem_roof = ai * bw / 1e3  # FLOP/B × GB/s = GFLOP/s → TFLOP/s
        roof = np.where(np.isfinite(peak), np.minimum(mem_roof, peak), mem_roof)
        is_mem = ~np.isfinite(peak) | (mem_roof < peak)
        flop_pct = np.where(roof > 0, 100.0 * (flops / dur / 1e3) / roof, np.nan)
        byte_pct = np.where(np.isfinite(gbps) & (bw > 0), 100.0 * gbps / bw, np.nan) if np.isfinite(bw) else np.nan
    attainable = np.where(by_flops, roof, np.nan)
    pct = np.where(by_flops, flop_pct, byte_pct)
    peak_names = [f"compute peak ({name})" if name.startswith("mixed:") else f"{name} peak" for name in names.tolist()]
    dram = "DRAM bandwidth" if np.isfinite(bw) else None
    governing = [
        ("DRAM bandwidth" if m else p) if f else dram
        for f, m, p in zip(by_flops.tolist(), is_mem.tolist(), peak_names, strict=True)
    ]
    # without FLOPs an op only moves bytes: memory-bound; with FLOPs but no DRAM roof: unknown
    moves_bytes = np.isfinite(gbps) & (~has_flops | np.isfinite(bw))
    bound: list[str | None] = [
        ("memory" if m else "compute") if f else ("memory" if b else None)
        for f, m, b in zip(by_flops.tolist(), is_mem.tolist(), moves_bytes.tolist(), strict=True)
    ]
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
    nbytes = _floats(out, "dram_bytes")
    with np.errstate(invalid="ignore", divide="ignore"):
        by_rate = np.isfinite(attainable) & (attainable > 0) & has_flops
        by_bytes = np.isfinite(nbytes) & np.isfinite(bw) & (bw > 0)
        out["time_at_roof_ns"] = np.where(
            by_rate, flops / (attainable * 1e3), np.where(by_bytes, nbytes / bw, np.nan)
        )  # TFLOP/s = 1e3 FLOP/ns; GB/s = B/ns
    out["time_share"] = pd.to_numeric(out.get("share_of_time_pct"), errors="coerce") / 100.0
    # a flag only where the measured/modelled ratio leaves the band (flag_for's first test)
    ratio = _floats(out, "measured_over_model")
    with np.errstate(invalid="ignore"):
        outside = np.isfinite(ratio) & ((ratio < RATIO_BAND[0]) | (ratio > RATIO_BAND[1]))
    flags = np.full(n, "", dtype=object)
    rows_out = np.flatnonzero(outside)
    if len(rows_out):
        flags[rows_out] = [flag_for(r, run, ceilings) for r in out.iloc[rows_out].to_dict("records")]
    out["flag"] = flags
    return out


def _floats(rows: pd.DataFrame, name: str) -> np.ndarray:
    """``rows[name]`` as float64 (NaN where missing or not a number, as :func:`_f`); all NaN without the column."""
    if name not in rows:
        return np.full(len(rows), np.nan)
    column = rows[name]
    if pd.api.types.is_numeric_dtype(column.dtype) and not pd.api.types.is_bool_dtype(column.dtype):
        values: np.ndarray = column.to_numpy(dtype=np.float64, na_value=np.nan)
        return values
    return np.fromiter((_f(v) for v in column.tolist()), dtype=np.float64, count=len(column))


#: How an op's DRAM bytes are known (``bytes_basis``): every invocation measured, some measured
#: (a counter sample: the ratios are over the measured ones), none measured but modelled, or neither.
BASES = ("measured", "sampled", "modelled")


def _op_sums_row(
    op: object,
    *,
    invocations: float,
    measured: int,
    model_read: float,
    model_write: float,
    flops: float,
    measured_bytes: float,
    measured_ns: float,
    measured_model: float,
    measured_flops: float,
    all_ns: float,
    measured_read: float,
    measured_write: float,
    note: str,
    sampled: bool,
) -> dict[str, Any]:
    """One row of :func:`per_op_sums` from an op's sums (bytes, FLOP, ns; NaN for unknown).

    ``measured`` of ``invocations`` had DRAM bytes and time known; ``measured_*`` sum over those.
    The basis and ratios follow :func:`per_op_sums`' rules (shared by :func:`per_op_from_shapes`).
    """
    model = model_read + model_write
    if measured and measured == invocations:
        basis: str | None = "measured"
    elif measured:
        basis = "sampled" if sampled else None
        if not sampled:  # some bytes unknown outside a sample: no ratio over a subset
            measured_model = measured_flops = np.nan
    else:
        basis = "modelled" if np.isfinite(model) else None
    return {
        "op": op,
        "model_read_bytes": model_read,
        "model_write_bytes": model_write,
        "model_bytes": model,
        "flops": flops,
        "measured_over_model": (
            measured_bytes / measured_model if measured_model and np.isfinite(measured_model) else np.nan
        ),
        "arithmetic_intensity": (
            measured_flops / measured_bytes if measured_bytes and np.isfinite(measured_bytes) else np.nan
        ),
        "model_arithmetic_intensity": flops / model if model and np.isfinite(model) else np.nan,
        "achieved_tflops": flops / all_ns / 1e3 if all_ns and np.isfinite(all_ns) else np.nan,
        "model_note": note,
        "bytes_basis": basis,
        "measured_invocations": measured,
        "measured_duration_ns": measured_ns,
        "measured_read_bytes": measured_read,
        "measured_write_bytes": measured_write,
        "measured_bytes": measured_bytes,
        "measured_flops": measured_flops,
    }


def per_op_from_shapes(
    groups: pd.DataFrame,
    notes: Mapping[int, str],
    gpu_arch: str | None,
    ceilings: Mapping[str, float],
    *,
    sampled: bool = False,
) -> pd.DataFrame:
    """:func:`per_op_sums` and :func:`per_op_compute_peaks` of a run from its invocations summed per shape.

    The same rules, applied to sums instead of rows, so that a run's ~10^6 invocations stay in
    the database: a strict sum over an op's invocations is the sum of its groups' sums when every
    invocation's value is known (``X_count`` adds up to the invocations), else NaN; the compute
    peak of a shape is :func:`compute_peaks`' (it depends on op, quant, m and n_experts only), and
    an op with several peaks gets the FLOP-weighted harmonic mean Σ flops / Σ (flops / peak) over
    groups. Float sums may differ from :func:`per_op_sums`' in the last bits (another order).

    Args:
        groups: the rows of :func:`rocroof.store.views.op_shape_sums` (its columns), sorted by
            ``first_op_index``.
        notes: ``model_note`` by op index, for the ``first_note_op_index`` values (others absent).
        gpu_arch: the run's GPU architecture, as for :func:`compute_peaks`.
        ceilings: the run's ceilings by name, as for :func:`compute_peaks`.
        sampled: as for :func:`per_op_sums`.

    Returns:
        One row per op, in order of first invocation: :func:`per_op_sums`' columns and
        ``compute_peak_tflops``, ``compute_peak`` (an empty frame for no groups, as
        :func:`per_op_sums` gives for no rows).
    """
    if not len(groups):
        return pd.DataFrame()
    g = groups.reset_index(drop=True)

    def num(name: str) -> np.ndarray:
        out: np.ndarray = pd.to_numeric(g[name], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
        return out

    def strict(name: str, k: np.ndarray, count: float) -> float:
        """The strict sum over ``count`` invocations (NaN unless each has a value) of groups ``k``."""
        total, counted = num(f"{name}_sum")[k], num(f"{name}_count")[k]
        return float(np.nansum(total)) if count and float(counted.sum()) == count else np.nan

    def measured(name: str, k: np.ndarray, n_known: int) -> float:
        return float(np.nansum(num(f"measured_{name}_sum")[k])) if n_known else np.nan

    peaks = compute_peaks(g, gpu_arch, ceilings)
    names = peaks["compute_peak"].astype(str).to_numpy()
    values = peaks["compute_peak_tflops"].to_numpy(dtype=np.float64)
    rows = []
    members = g.groupby("op", sort=False, dropna=False).indices
    for op in pd.unique(g["op"]):  # in order of first invocation
        k = np.asarray(members[op])
        n = float(num("invocations")[k].sum())
        n_known = int(num("measured")[k].sum())
        first_note = num("first_note_op_index")[k]
        first_note = first_note[~np.isnan(first_note)]
        note = notes.get(int(first_note.min()), "") if len(first_note) else ""
        # the compute peak: one per shape; several (of invocations with FLOPs) give their harmonic mean
        positive = k[num("positive_flops")[k] > 0]
        if not len(positive) or len(set(names[positive])) <= 1:
            pick = positive if len(positive) else k
            order = num("first_positive_op_index" if len(positive) else "first_op_index")[pick]
            first = int(pick[int(np.argmin(order))])
            peak_name, peak_value = str(names[first]), float(values[first])
        else:
            flops = num("positive_flops_sum")[positive]
            total = float(flops.sum())
            known_peaks = values[positive]
            peak_value = total / float((flops / known_peaks).sum()) if bool((known_peaks > 0).all()) else np.nan
            share = pd.Series(flops).groupby(names[positive]).sum().sort_values(ascending=False) / total
            peak_name = "mixed: " + ", ".join(f"{name} {_share(v)}" for name, v in share.items())
        measured_model = strict("measured_model_read_bytes", k, n_known) + strict(
            "measured_model_write_bytes", k, n_known
        )
        row = _op_sums_row(
            op,
            invocations=n,
            measured=n_known,
            model_read=strict("model_read_bytes", k, n),
            model_write=strict("model_write_bytes", k, n),
            flops=strict("flops", k, n),
            measured_bytes=measured("dram_bytes", k, n_known),
            measured_ns=measured("duration_ns", k, n_known),
            measured_model=measured_model,
            measured_flops=strict("measured_flops", k, n_known),
            all_ns=strict("duration_ns", k, n),
            measured_read=measured("dram_read_bytes", k, n_known),
            measured_write=measured("dram_write_bytes", k, n_known),
            note=note,
            sampled=sampled,
        )
        rows.append({**row, "compute_peak_tflops": peak_value, "compute_peak": peak_name})
    return pd.DataFrame(rows)


def per_op_sums(inv: pd.DataFrame, sampled: bool = False) -> pd.DataFrame:
    """Per-op sums of the ``op_roofline`` rows: modelled bytes and FLOPs, measured ones, their ratios.

    With ``sampled`` (a counter sample measured some graph evaluations; the others stay unknown,
    never zero), measured bytes count only the invocations whose DRAM bytes and time are both
    known, and every ratio pairs quantities of those same invocations: ``measured_over_model`` =
    their measured / their modelled bytes, ``arithmetic_intensity`` = their FLOPs / their measured
    bytes. Without it an op with any unknown invocation has unknown ratios (its bounds tell more).

    Returns columns ``op``, ``model_read_bytes``, ``model_write_bytes``, ``model_bytes``,
    ``flops`` (all invocations; NULL if any is unknown), ``measured_over_model``,
    ``arithmetic_intensity``, ``model_arithmetic_intensity``, ``achieved_tflops``,
    ``model_note`` (the first note seen), ``bytes_basis`` (:data:`BASES`, or None),
    ``measured_invocations``, ``measured_duration_ns``, ``measured_read_bytes``,
    ``measured_write_bytes``, ``measured_bytes`` and ``measured_flops`` (over the measured
    invocations; FLOPs NULL if any of theirs is unknown).
    """

    def strict(v: pd.Series) -> float:
        return float(v.sum()) if len(v) and v.notna().all() else np.nan

    def num(g: pd.DataFrame, col: str) -> pd.Series:
        return pd.to_numeric(g[col], errors="coerce") if col in g else pd.Series(np.nan, index=g.index)

    rows = []
    for op, g in inv.groupby("op", sort=False):
        dram, dur = num(g, "dram_bytes"), num(g, "duration_ns")
        known = dram.notna() & dur.notna()
        n_known = int(known.sum())
        notes = [n for n in g["model_note"].fillna("") if n] if "model_note" in g else []
        rows.append(
            _op_sums_row(
                op,
                invocations=len(g),
                measured=n_known,
                model_read=strict(num(g, "model_read_bytes")),
                model_write=strict(num(g, "model_write_bytes")),
                flops=strict(num(g, "flops")),
                measured_bytes=float(dram[known].sum()) if n_known else np.nan,
                measured_ns=float(dur[known].sum()) if n_known else np.nan,
                measured_model=strict(num(g, "model_read_bytes")[known]) + strict(num(g, "model_write_bytes")[known]),
                measured_flops=strict(num(g, "flops")[known]),
                all_ns=strict(dur),
                measured_read=float(num(g, "dram_read_bytes")[known].sum()) if n_known else np.nan,
                measured_write=float(num(g, "dram_write_bytes")[known].sum()) if n_known else np.nan,
                note=notes[0] if notes else "",
                sampled=sampled,
            )
        )
    return pd.DataFrame(rows)
