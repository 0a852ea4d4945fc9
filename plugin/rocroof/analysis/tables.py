"""The analysis rows of a run: modelled bytes and FLOPs per op, the op graph, the run's ceilings.

Glue between the pure models (:mod:`rocroof.analysis.model`, :mod:`rocroof.analysis.graph`,
:mod:`rocroof.analysis.peaks`) and the store: it maps invocation ids to the run's ``op_index``
and shapes the ``op_model``, ``op_edge`` and ``run_ceiling`` tables. The pipeline
calls :func:`analysis_tables` once per run.
"""

from __future__ import annotations

from dataclasses import fields

import numpy as np
import pandas as pd

from ..records import Note, OpMetadata
from .graph import build_edges, classify, critical_path, evaluation_members
from .model import model_invocations
from .peaks import MEASURED, Ceilings, find_ceilings, peaks_label

#: run_ceiling names written, in this order (attribute of :class:`~rocroof.analysis.peaks.Ceilings`).
CEILING_NAMES = (
    "dram_gbps",
    "fp16_matrix_tflops",
    "bf16_matrix_tflops",
    "fp32_vector_tflops",
    "int8_matrix_tops",
    "llc_bytes",
    "compute_units",
    "l2_gbps",
)


def ceiling_rows(
    gpu_name: str | None,
    arch: str | None,
    dram_gbps: float | None,
    dram_source: str | None,
    measured: Ceilings | None = None,
    *,
    cu_count: int | None = None,
    device_id: int | None = None,
    dram_rule: str | None = None,
) -> pd.DataFrame:
    """``run_ceiling`` rows: the DRAM ceiling the run uses, plus the compute and cache ceilings.

    ``dram_gbps``/``dram_source`` are the run's DRAM ceiling as already chosen (a measured
    roofline.csv value, sysinfo, or the table); the other values come from ``measured`` where
    given, else from ``configs/peaks.yaml`` (:func:`rocroof.analysis.peaks.find_ceilings`, with
    the GPU's ``cu_count`` and PCI ``device_id`` where recorded). The DRAM row's mark follows
    ``dram_rule`` (:data:`rocroof.analysis.peaks.DRAM_RULES`): ``measured`` for a probe or
    roofline.csv, ``recorded`` for a bandwidth the capture states, else the table value's mark.
    """
    table = find_ceilings(gpu_name, arch, cu_count=cu_count, device_id=device_id)
    rows = []
    for name in CEILING_NAMES:
        if name == "dram_gbps":
            if dram_gbps is not None:
                listed = table.dram_gbps if table is not None else None
                if dram_rule in ("probe", "roofline_csv") or (dram_rule is None and "measured" in str(dram_source)):
                    mark: str | None = "measured"
                elif dram_rule == "capture":
                    mark = "recorded"
                elif listed is not None and abs(listed.value - float(dram_gbps)) < 1e-6:
                    mark = listed.mark
                else:
                    mark = None
                rows.append({"name": name, "value": float(dram_gbps), "source": dram_source, "mark": mark})
            continue
        c = None
        for source in (measured, table):
            if source is not None and name in {f.name for f in fields(source)}:
                c = getattr(source, name)
                if c is not None:
                    break
        if c is not None:
            # a table value names its table (configs/peaks.yaml or ROCROOF_PEAKS), a measured one its file
            origin = f"{peaks_label()}: " if c.mark != MEASURED else ""
            rows.append({"name": name, "value": float(c.value), "source": origin + c.describe(), "mark": c.mark})
    return pd.DataFrame(rows, columns=["name", "value", "source", "mark"])


def analysis_tables(
    meta: OpMetadata | None, ops: pd.DataFrame, duration_by_op_index: pd.Series, notes: list[Note]
) -> dict[str, pd.DataFrame]:
    """``op_model`` and ``op_edge`` rows for a run with op metadata (empty frames without).

    Args:
        meta: the run's op metadata (fork JSON or the hook's sidecar).
        ops: the run's ``op_invocation`` rows (``invocation``, ``op_index``).
        duration_by_op_index: GPU time per op_index in ns (timing pass), for the critical path.
        notes: run notes, appended to when the models flag something run-wide.
    """
    empty = {"op_model": pd.DataFrame(), "op_edge": pd.DataFrame()}
    if meta is None or not len(meta.ops) or not len(ops):
        return empty
    to_op = dict(zip(ops["invocation"].astype(np.int64), ops["op_index"].astype(np.int64), strict=True))
    model = model_invocations(meta)
    edges = build_edges(meta)
    cls = classify(meta, edges)
    by_inv = model.merge(cls[["invocation", "evaluation", "part"]], on="invocation", how="left")
    by_inv["op_index"] = by_inv["invocation"].map(to_op)
    by_inv = by_inv[by_inv["op_index"].notna()].copy()
    inv_of_op = {v: k for k, v in to_op.items()}
    duration = {
        inv_of_op[int(i)]: float(t) for i, t in duration_by_op_index.items() if pd.notna(t) and int(i) in inv_of_op
    }
    critical: set[int] = set()
    for members in evaluation_members(dict(zip(cls["invocation"], cls["evaluation"], strict=True))).values():
        timed = [m for m in members if m in duration]
        if timed:
            critical.update(critical_path(edges, duration, timed, missing="zero"))
    op_model = pd.DataFrame(
        {
            "op_index": by_inv["op_index"].astype(np.int64).to_numpy(),
            "model_read_bytes": pd.array(by_inv["model_read_bytes"], dtype="Int64"),
            "model_write_bytes": pd.array(by_inv["model_write_bytes"], dtype="Int64"),
            "flops": by_inv["flops"].astype(float).to_numpy(),
            "model_note": by_inv["model_note"].fillna("").to_numpy(),
            "evaluation": pd.array(by_inv["evaluation"], dtype="Int64"),
            "block_part": by_inv["part"].to_numpy(),
            "on_critical_path": by_inv["invocation"].isin(critical).to_numpy(),
        }
    ).sort_values("op_index")
    e = edges.copy()
    e["src_op_index"] = e["src_invocation"].map(lambda v: to_op.get(int(v)) if pd.notna(v) else None)
    e["dst_op_index"] = e["dst_invocation"].map(lambda v: to_op.get(int(v)) if pd.notna(v) else None)
    e = e[e["src_op_index"].notna() & e["dst_op_index"].notna()]
    op_edge = pd.DataFrame(
        {
            "edge_index": np.arange(len(e)),
            "src_op_index": e["src_op_index"].astype(np.int64).to_numpy(),
            "dst_op_index": e["dst_op_index"].astype(np.int64).to_numpy(),
            "storage_id": pd.array(e["storage_id"], dtype="Int64"),
            "tensor_name": e["name"].to_numpy(),
        }
    )
    flagged = int((op_model["model_note"] != "").sum())
    if flagged:
        notes.append(
            Note(
                "info",
                "model-assumption",
                f"{flagged} op invocation(s) carry a byte/FLOP model note (op_model.model_note), e.g. "
                f"{op_model.loc[op_model['model_note'] != '', 'model_note'].iloc[0][:160]}",
            )
        )
    return {"op_model": op_model, "op_edge": op_edge}
