"""Measured operations per dispatch from hardware counters: floating point and integer.

rocroof's FLOPs are modelled from shapes (:mod:`rocroof.analysis.model`); these are the counted
ones, to put beside them. Formulas and their sources:

NVIDIA (Nsight Compute metric names; the instruction counters count *thread* instructions):

* FP32 FLOP = fadd + fmul + 2 x ffma, FP64 = dadd + dmul + 2 x dfma
  (``sm__sass_thread_inst_executed_op_<op>_pred_on.sum``; Nsight Compute's
  ``SpeedOfLight_RooflineChart.section``: an FMA is two operations).
* FP16 FLOP = 2 x hadd + 2 x hmul + 4 x hfma: HADD2/HMUL2/HFMA2 work on two halves
  (``SpeedOfLight_HierarchicalHalfRooflineChart.section``: ``hadd_pred_on_x2``, ``hfma_pred_on_x4``).
  The hfma counter also counts ``HFMA2.MMA``, which the compiler uses to move registers: in an
  H200 probe a dp4a loop with no half arithmetic counted 16,896 hfma thread instructions, its 528
  ``HFMA2.MMA`` warp instructions x 32 (docs/measured-ops.md). FP16 FLOPs of FP32 kernels are such
  moves; they are small beside real work.
* Tensor-core FLOP = ``sm__ops_path_tensor_src_{fp16,bf16_dst_fp32,tf32_dst_fp32,fp8,fp64}.sum``
  and tensor int8 ops = ``sm__ops_path_tensor_src_int8.sum``: "math ops", multiply and add counted
  apart (H200 probe: 540,672 m16n8k32 IMMA warp instructions gave 4,429,185,024 = 540,672 x 2 x 16
  x 8 x 32; m16n8k16 HMMA 540,672 x 2 x 16 x 8 x 16).
* dp4a ops = 8 x the ``IDP`` thread instructions of ``sass__thread_inst_executed_true_per_opcode``
  (one ``IDP.4A`` is four int8 multiply-adds; H200 probe: 17,301,504 dp4a calls counted as IDP
  17,301,504). No other counter separates them: ``op_integer`` counts IDP as one integer
  instruction among address arithmetic.

AMD CDNA (gfx90a, gfx942, gfx950; rocprofiler-compute's ``0200_system-speed-of-light`` and
``roofline_calc.py``): the SQ counters count instructions per wavefront (64 lanes):

* VALU FLOP = 64 x sum over F16, F32, F64 of (ADD + MUL + TRANS + 2 x FMA) (``SQ_INSTS_VALU_*``),
* MFMA FLOP = 512 x (MOPS_F16 + MOPS_BF16 + MOPS_F32 + MOPS_F64 + MOPS_F8) (``SQ_INSTS_VALU_MFMA_MOPS_*``
  count in units of 512 operations),
* VALU integer ops = 64 x (INT32 + INT64), MFMA int8 ops = 512 x MOPS_I8.

gfx908 (MI100) has no FLOP counters. A total is NaN (not counted) unless every counter of its
formula was collected: an integer total without the dp4a count would hide ggml's MMVQ kernels.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .dram import base_arch

_NV = "sm__sass_thread_inst_executed_op_{}_pred_on.sum"
#: (counter, weight) of each NVIDIA floating-point formula.
NVIDIA_FLOP: dict[str, tuple[tuple[str, float], ...]] = {
    "fp32_flop": ((_NV.format("fadd"), 1.0), (_NV.format("fmul"), 1.0), (_NV.format("ffma"), 2.0)),
    "fp64_flop": ((_NV.format("dadd"), 1.0), (_NV.format("dmul"), 1.0), (_NV.format("dfma"), 2.0)),
    "fp16_flop": ((_NV.format("hadd"), 2.0), (_NV.format("hmul"), 2.0), (_NV.format("hfma"), 4.0)),
    "tensor_flop": tuple(
        (f"sm__ops_path_tensor_src_{s}.sum", 1.0) for s in ("fp16", "bf16_dst_fp32", "tf32_dst_fp32", "fp8", "fp64")
    ),
}
#: The per-opcode metric and the opcode of dp4a in it (rocroof's reader names instances ``metric:OPCODE``).
OPCODE_METRIC = "sass__thread_inst_executed_true_per_opcode"
DP4A_COUNTER = f"{OPCODE_METRIC}:IDP"
NVIDIA_INT: dict[str, tuple[tuple[str, float], ...]] = {
    "tensor_int_ops": (("sm__ops_path_tensor_src_int8.sum", 1.0),),
    "dp4a_ops": ((DP4A_COUNTER, 8.0),),
}
_SQ = "SQ_INSTS_VALU_{}"
AMD_FLOP: dict[str, tuple[tuple[str, float], ...]] = {
    "valu_flop": tuple(
        (_SQ.format(f"{op}_{t}"), w * 64.0)
        for t in ("F16", "F32", "F64")
        for op, w in (("ADD", 1.0), ("MUL", 1.0), ("TRANS", 1.0), ("FMA", 2.0))
    ),
    "mfma_flop": tuple((_SQ.format(f"MFMA_MOPS_{t}"), 512.0) for t in ("F16", "BF16", "F32", "F64")),
}
AMD_INT: dict[str, tuple[tuple[str, float], ...]] = {
    "valu_int_ops": ((_SQ.format("INT32"), 64.0), (_SQ.format("INT64"), 64.0)),
    "mfma_int_ops": ((_SQ.format("MFMA_MOPS_I8"), 512.0),),
}
#: Counters that are optional parts of a formula (counted when collected, else taken as 0): MOPS_F8
#: (absent before gfx942); the tensor sources other than FP16 (an FP16-only collection, as the
#: examples', still counts ggml's FP16 tensor work; the ops preset collects them all).
_OPTIONAL = {_SQ.format("MFMA_MOPS_F8")} | {
    f"sm__ops_path_tensor_src_{s}.sum" for s in ("bf16_dst_fp32", "tf32_dst_fp32", "fp8", "fp64")
}
AMD_FLOP["mfma_flop"] = (*AMD_FLOP["mfma_flop"], (_SQ.format("MFMA_MOPS_F8"), 512.0))


def formulas(
    arch: str | None,
) -> tuple[dict[str, tuple[tuple[str, float], ...]], dict[str, tuple[tuple[str, float], ...]]]:
    """``(floating-point parts, integer parts)`` for an architecture; empty when it has no counters."""
    a = base_arch(arch or "")
    if a.startswith("sm_"):
        return NVIDIA_FLOP, NVIDIA_INT
    if a in ("gfx90a", "gfx940", "gfx941", "gfx942", "gfx950"):
        return AMD_FLOP, AMD_INT
    return {}, {}


def counter_names(arch: str | None) -> list[str]:
    """Every counter the formulas of ``arch`` read (the names to fetch; ``:IDP`` instances included)."""
    flop, ints = formulas(arch)
    return sorted({c for parts in (*flop.values(), *ints.values()) for c, _ in parts})


def _lookup(wide: pd.DataFrame, name: str) -> pd.Series | None:
    """A counter column by its name, or its rocprofv3 ``_sum`` form."""
    for candidate in (name, f"{name}_sum"):
        if candidate in wide:
            return pd.to_numeric(wide[candidate], errors="coerce").astype("float64")
    return None


def measured_ops(wide: pd.DataFrame, arch: str | None) -> pd.DataFrame:
    """Counted operations per row (dispatch or op invocation: the formulas are sums, so rows may be sums).

    Args:
        wide: one column per counter (names as stored, e.g. ``sm__ops_path_tensor_src_int8.sum``,
            ``sass__thread_inst_executed_true_per_opcode:IDP``, ``SQ_INSTS_VALU_FMA_F32``); NaN = not
            counted for that row.
        arch: the run's GPU architecture (``sm_90``, ``gfx942``...).

    Returns:
        Same index: one column per formula part (``fp32_flop``, ``tensor_int_ops``, ``dp4a_ops``,
        ``valu_flop``...; FLOP / ops), ``measured_flop`` (floating point, tensor included) and
        ``measured_int_ops`` (integer); a part is NaN when one of its counters was not collected, a
        total NaN when one of its parts is.
    """
    flop, ints = formulas(arch)
    out = pd.DataFrame(index=wide.index)
    for total, parts in (("measured_flop", flop), ("measured_int_ops", ints)):
        if not parts:
            out[total] = np.nan
            continue
        for part, terms in parts.items():
            acc = pd.Series(0.0, index=wide.index)
            for name, weight in terms:
                col = _lookup(wide, name)
                if col is None:
                    if name in _OPTIONAL:
                        continue
                    acc = pd.Series(np.nan, index=wide.index)
                    break
                acc = acc + weight * col
            out[part] = acc
        out[total] = out[list(parts)].sum(axis=1, min_count=len(parts))
    return out
