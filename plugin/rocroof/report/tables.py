"""Reports over the results database: per dispatch, per kernel, per ggml op.

:func:`build_report` returns data (a DataFrame plus run facts and notes); :func:`render`
turns it into text (a rich table, CSV, JSON or Markdown). Nothing here prints.

Machine formats (CSV, JSON) carry raw values with units in the column names; the table and
Markdown formats are for people (µs, MB, GB/s) and show unknown values as ``?`` with their
bounds when the data gives them.
"""

from __future__ import annotations

import io
import json
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd
import sqlalchemy as sa
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..analysis.peaks import DRAM_RULES, SHIPPED_LABEL
from ..records import Note
from ..store import Store, schema
from ..text import cell_text

By = Literal["dispatch", "kernel", "op", "invocation"]
Format = Literal["table", "csv", "json", "markdown"]

#: Bytes, bandwidth and ceiling columns shared by every grouping (bounds next to each value).
_MEASURES = [
    "dram_read_bytes",
    "dram_read_bytes_min",
    "dram_read_bytes_max",
    "dram_write_bytes",
    "dram_write_bytes_min",
    "dram_write_bytes_max",
    "achieved_gbps",
    "achieved_gbps_min",
    "achieved_gbps_max",
    "pct_of_dram_peak",
    "dram_time_at_peak_ns",
]
_TIME = ["dispatches", "duration_ns", "share_of_time_pct"]
#: Model-beside-measurement columns (op and invocation reports; see rocroof.analysis.roofline).
_ROOFLINE = [
    "model_read_bytes",
    "model_write_bytes",
    "measured_over_model",
    "flops",
    "arithmetic_intensity",
    "model_arithmetic_intensity",
    "achieved_tflops",
    "compute_peak",
    "compute_peak_tflops",
    "governing_ceiling",
    "attainable_tflops",
    "pct_of_ceiling",
    "bound",
    "mean_us_per_call",
    "time_at_roof_ns",
    "time_share",
    "flag",
    "model_note",
    "bytes_basis",
    "measured_invocations",
    "measured_duration_ns",
    "measured_read_bytes",
    "measured_write_bytes",
    "model_gbps",
    "model_pct_of_dram_peak",
    "model_pct_of_ceiling",
    "model_bound",
    "model_time_at_roof_ns",
]
_COLUMNS: dict[str, list[str]] = {
    "dispatch": [
        "run_id",
        "dispatch_id",
        "kernel_name",
        "duration_ns",
        *_MEASURES,
        "op",
        "op_list",
        "invocation",
        "node_name",
        "kernel_ordinal",
        "attribution_method",
        "dram_bytes_note",
    ],
    "kernel": [
        "run_id",
        "kernel_name",
        *_TIME,
        *_MEASURES,
        "bytes_basis",
        "measured_dispatches",
        "measured_duration_ns",
        "measured_read_bytes",
        "measured_write_bytes",
    ],
    "op": ["run_id", "op", "invocations", *_TIME, *_MEASURES, *_ROOFLINE],
    "invocation": [
        "run_id",
        "invocation",
        "op",
        "op_list",
        "node_name",
        "layer",
        "evaluation",
        "block_part",
        "on_critical_path",
        *_TIME,
        *_MEASURES,
        *_ROOFLINE,
    ],
}
_VIEW = {
    "dispatch": "dispatch_dram",
    "kernel": "kernel_summary",
    "op": "op_summary",
    "invocation": "op_roofline",
}


@dataclass
class Report:
    """A report: rows plus the facts a reader needs to trust them.

    Attributes:
        by: the grouping.
        rows: the rows (columns listed in ``_COLUMNS[by]``), sorted.
        run: the run's row (``run`` table) as a dict.
        notes: the run's notes.
        total_rows: rows before ``--top`` was applied.
        totals: whole-run sums (``duration_ns``, ``dispatches``, ``unattributed_dispatches``...).
        ceilings: the run's ``run_ceiling`` rows (name -> value, source, mark).
        labels: the run's labels (``run_label``: key -> value; a sweep point's parameters).
        fused: for ``--by op``: ``(op, op_list, invocations)`` of the fused groups counted under
            their first op, most invocations first.
    """

    by: By
    rows: pd.DataFrame
    run: dict[str, Any]
    notes: list[Note] = field(default_factory=list)
    total_rows: int = 0
    totals: dict[str, Any] = field(default_factory=dict)
    ceilings: dict[str, dict[str, Any]] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    fused: list[tuple[str, str, int]] = field(default_factory=list)


def run_labels(store: Store, run_id: int) -> dict[str, str]:
    """A run's labels (``run_label``), key -> value, in key order."""
    lab = schema.run_label
    rows = store.frame(sa.select(lab.c.key, lab.c.value).where(lab.c.run_id == run_id).order_by(lab.c.key))
    return dict(zip(rows["key"].astype(str), rows["value"].astype(str), strict=True))


def run_notes(store: Store, run_id: int) -> list[Note]:
    """A run's notes (``run_note``), in the order they were stored."""
    note = schema.run_note
    rows = store.frame(sa.select(note).where(note.c.run_id == run_id).order_by(note.c.note_index))
    return [Note(r["severity"], r["code"], r["message"]) for r in rows.to_dict("records")]


def build_report(store: Store, run_id: int, by: By = "op", top: int | None = None) -> Report:
    """Query one run's report.

    Args:
        store: an open store (read-only is fine).
        run_id: the run.
        by: ``dispatch`` (one row per timing dispatch, in enqueue order), ``kernel``, ``op`` or
            ``invocation`` (sorted by total time, longest first; unknown times last).
        top: keep only the N longest rows (for ``dispatch``: the N longest dispatches, longest first).

    Returns:
        The :class:`Report`.
    """
    rows = pd.DataFrame()
    if by == "op":  # stored with the run (the op_summary view sums every dispatch: seconds for 10^6)
        stored = ", ".join(schema.OP_TOTAL_COLUMNS)
        rows = store.frame(
            sa.text(f"SELECT {stored} FROM op_total WHERE run_id = :rid ORDER BY row_index"), {"rid": run_id}
        )
    if not len(rows):  # a run without them (or no dispatches at all): the view
        rows = store.frame(sa.text(f"SELECT * FROM {_VIEW[by]} WHERE run_id = :rid"), {"rid": run_id})
    run_row = store.frame(sa.select(schema.run).where(schema.run.c.run_id == run_id)).to_dict("records")[0]
    notes = run_notes(store, run_id)
    total_ns = rows["duration_ns"].sum(min_count=1) if "duration_ns" in rows else None
    known_total = pd.to_numeric(rows["duration_ns"], errors="coerce").sum() if "duration_ns" in rows else 0
    if by != "dispatch":
        rows["share_of_time_pct"] = (
            100.0 * pd.to_numeric(rows["duration_ns"], errors="coerce") / known_total if known_total else float("nan")
        )
        rows = rows.sort_values(["duration_ns", "dispatches"], ascending=[False, False], na_position="last")
    elif top is not None:
        rows = rows.sort_values(["duration_ns", "dispatch_index"], ascending=[False, True], na_position="last")
    else:
        rows = rows.sort_values("dispatch_index")
    totals = {
        "rows": len(rows),
        "duration_ns": None if total_ns is None or pd.isna(total_ns) else float(total_ns),
    }
    if by == "op" and "op" in rows:
        unattributed = rows[rows["op"].isna()]
        totals["unattributed_dispatches"] = int(unattributed["dispatches"].sum()) if len(unattributed) else 0
        totals["dispatches"] = int(rows["dispatches"].sum()) if len(rows) else 0
    ceil_df = store.frame(sa.select(schema.run_ceiling).where(schema.run_ceiling.c.run_id == run_id))
    ceilings = {r["name"]: r for r in ceil_df.to_dict("records")}
    sampled = any(n.code == "counter-sample" for n in notes)
    if by in ("op", "invocation") and len(rows):
        ceiling_values = {k: v["value"] for k, v in ceilings.items()}
        rows = _with_roofline(store, run_id, by, rows, run_row, ceiling_values, sampled=sampled)
    if (
        by == "kernel"
        and sampled
        and len(rows)
        and bool(pd.to_numeric(rows["dram_read_bytes"], errors="coerce").isna().any())
    ):
        rows = _kernel_samples(store, run_id, rows, run_row.get("dram_peak_gbps"))
    total_rows = len(rows)
    if top is not None:
        rows = rows.head(top)
    cols = [c for c in _COLUMNS[by] if c in rows.columns]
    labels = run_labels(store, run_id)
    fused: list[tuple[str, str, int]] = []
    if by == "op":
        inv = schema.op_invocation
        groups = store.frame(
            sa.select(inv.c.op, inv.c.op_list, sa.func.count().label("n"))
            .where(inv.c.run_id == run_id, inv.c.is_fused.is_(True))
            .group_by(inv.c.op, inv.c.op_list)
        )
        groups = groups.sort_values(["n", "op_list"], ascending=[False, True])
        fused = [(str(r.op), str(r.op_list), int(r.n)) for r in groups.itertuples(index=False)]
    return Report(
        by=by,
        rows=rows[cols].reset_index(drop=True),
        run=run_row,
        notes=notes,
        total_rows=total_rows,
        totals=totals,
        ceilings=ceilings,
        labels=labels,
        fused=fused,
    )


def _with_roofline(
    store: Store,
    run_id: int,
    by: By,
    rows: pd.DataFrame,
    run: dict[str, Any],
    ceilings: dict[str, float],
    *,
    sampled: bool = False,
) -> pd.DataFrame:
    """Op or invocation rows with the model and roofline columns (rocroof.analysis.roofline)."""
    from ..analysis.roofline import add_roofline_columns, compute_peaks, per_op_compute_peaks, per_op_sums

    def shapes() -> pd.DataFrame:
        """What decides an invocation's compute units: weight type, batch, experts."""
        c = schema.op_invocation.c
        return store.frame(sa.select(c.op_index, c.quant, c.m, c.n_experts).where(c.run_id == run_id))

    arch = run.get("gpu_arch")
    if by == "invocation" and "op_index" in rows:
        rows = rows.merge(shapes(), on="op_index", how="left")
        rows = rows.join(compute_peaks(rows, arch, ceilings))
    if by == "op":
        modelled = store.frame(sa.text("SELECT 1 AS one FROM op_model WHERE run_id = :rid LIMIT 1"), {"rid": run_id})
        attributed = rows[rows["op"].notna()] if "op" in rows else rows
        unknown = bool(pd.to_numeric(attributed.get("dram_read_bytes"), errors="coerce").isna().any())
        if len(modelled) or unknown:  # the invocations give the model, and the measured ones of a sample
            inv = store.frame(sa.text("SELECT * FROM op_roofline WHERE run_id = :rid"), {"rid": run_id})
        else:  # no model: every modelled column is unknown; the invocations need not be read
            ops = rows["op"].dropna().unique().tolist() if "op" in rows else []
            inv = pd.DataFrame(
                {
                    "op": ops,
                    **dict.fromkeys(
                        ("model_read_bytes", "model_write_bytes", "flops", "dram_bytes", "duration_ns"), np.nan
                    ),
                    "model_note": None,
                }
            )
        if len(inv):
            rows = rows.merge(per_op_sums(inv, sampled=sampled), on="op", how="left")
            if "op_index" in inv:
                inv = inv.merge(shapes(), on="op_index", how="left")
            inv = inv.join(compute_peaks(inv, arch, ceilings))
            rows = rows.merge(per_op_compute_peaks(inv), on="op", how="left")
    if "dram_bytes" not in rows:
        rows["dram_bytes"] = pd.to_numeric(rows["dram_read_bytes"], errors="coerce") + pd.to_numeric(
            rows["dram_write_bytes"], errors="coerce"
        )
    if by == "op" and "bytes_basis" in rows:
        return _roofline_by_basis(rows, run, ceilings)
    return add_roofline_columns(rows, run, ceilings)


def _float64(values: Any) -> pd.Series:
    """A column as plain float64 (NaN for unknown; nullable Int64/Float64 NA too)."""
    v = pd.to_numeric(values, errors="coerce")
    if isinstance(v, pd.Series):
        return pd.Series(v.to_numpy(dtype=np.float64, na_value=np.nan), index=v.index)
    return pd.Series(v, dtype=np.float64)


def _kernel_samples(store: Store, run_id: int, rows: pd.DataFrame, peak: Any) -> pd.DataFrame:
    """Kernel rows with the measured subset of a counter sample (``bytes_basis`` ``sampled``).

    A kernel some of whose dispatches have DRAM bytes gets ``measured_*`` sums over those
    dispatches, and its bandwidth and % of peak from them; ``dram_time_at_peak_ns`` scales the
    measured dispatches' to the kernel's whole time (the others alike).
    """
    known = store.frame(
        sa.text(
            "SELECT kernel_name, COUNT(*) AS measured_dispatches, SUM(duration_ns) AS measured_duration_ns, "
            "SUM(dram_read_bytes) AS measured_read_bytes, SUM(dram_write_bytes) AS measured_write_bytes "
            "FROM dispatch_dram WHERE run_id = :rid AND dram_read_bytes IS NOT NULL "
            "AND dram_write_bytes IS NOT NULL AND duration_ns IS NOT NULL GROUP BY kernel_name"
        ),
        {"rid": run_id},
    )
    if not len(known):
        return rows
    out = rows.merge(known, on="kernel_name", how="left")
    for col in ("achieved_gbps", "pct_of_dram_peak", "dram_time_at_peak_ns"):
        out[col] = _float64(out[col])
    n = _float64(out["measured_dispatches"]).fillna(0)
    part = (n > 0) & (n < _float64(out["dispatches"]))
    out["bytes_basis"] = [("sampled" if p else "measured") if k > 0 else None for p, k in zip(part, n, strict=True)]
    nbytes = _float64(out["measured_read_bytes"]) + _float64(out["measured_write_bytes"])
    dur = _float64(out["measured_duration_ns"])
    gbps = nbytes / dur.where(dur > 0)
    out.loc[part, "achieved_gbps"] = gbps[part]
    if peak:
        out.loc[part, "pct_of_dram_peak"] = (100.0 * gbps / float(peak))[part]
        scale = _float64(out["duration_ns"]) / dur.where(dur > 0)
        out.loc[part, "dram_time_at_peak_ns"] = (nbytes / float(peak) * scale)[part]
    return out


def _roofline_by_basis(rows: pd.DataFrame, run: dict[str, Any], ceilings: dict[str, float]) -> pd.DataFrame:
    """Op rows with roofline columns from what is known of each op's bytes (``bytes_basis``).

    * ``measured``: every invocation measured (as before).
    * ``sampled``: a counter sample measured some invocations; bandwidth, % of peak, FLOP/B,
      bound and % roof come from those invocations alone (their bytes over their time); time,
      % time and µs/call from every invocation; ``time_at_roof_ns`` and ``dram_time_at_peak_ns``
      scale the measured ones' to the op's whole time (an extrapolation: the others alike).
    * ``modelled``: nothing measured; ``model_*`` columns hold the roofline of the modelled bytes
      (``model_gbps``, ``model_pct_of_dram_peak``, ``model_pct_of_ceiling``, ``model_bound``,
      ``model_time_at_roof_ns``) and the measured columns stay unknown.
    """
    from ..analysis.roofline import add_roofline_columns

    peak = run.get("dram_peak_gbps")
    basis = rows["bytes_basis"]
    sampled = (basis == "sampled").to_numpy(dtype=bool)
    meas = rows.copy()
    for col in ("duration_ns", "dram_bytes", "flops", "achieved_gbps", "pct_of_dram_peak"):
        if col in meas:  # plain floats: the sampled rows take values of another kind (no nullable NA)
            meas[col] = _float64(meas[col])
    if sampled.any():
        dur = _float64(meas["measured_duration_ns"])
        nbytes = _float64(meas["measured_bytes"])
        meas.loc[sampled, "duration_ns"] = dur[sampled]
        meas.loc[sampled, "dram_bytes"] = nbytes[sampled]
        meas.loc[sampled, "flops"] = _float64(meas["measured_flops"])[sampled]
        gbps = nbytes / dur.where(dur > 0)
        meas.loc[sampled, "achieved_gbps"] = gbps[sampled]
        meas.loc[sampled, "pct_of_dram_peak"] = (100.0 * gbps / float(peak))[sampled] if peak else np.nan
    out = add_roofline_columns(meas, run, ceilings)
    for col in ("time_at_roof_ns", "dram_time_at_peak_ns"):
        if col in out:
            out[col] = _float64(out[col])
    whole = _float64(rows["duration_ns"])
    part = _float64(rows["measured_duration_ns"])
    scale = whole / part.where(part > 0)
    out["duration_ns"] = rows["duration_ns"]
    out["dram_bytes"] = rows["dram_bytes"]
    out["flops"] = rows["flops"]
    calls = _float64(out["invocations"]) if "invocations" in out else 1.0
    out["mean_us_per_call"] = whole / 1e3 / calls
    if sampled.any():
        out.loc[sampled, "time_at_roof_ns"] = (_float64(out["time_at_roof_ns"]) * scale)[sampled]
        if peak:
            at_peak = _float64(rows["measured_bytes"]) / float(peak) * scale
            out.loc[sampled, "dram_time_at_peak_ns"] = at_peak[sampled]
    # the roofline of the modelled bytes, for ops without a measured byte
    model = rows.copy()
    model_bytes = _float64(rows["model_bytes"])
    model["dram_bytes"] = model_bytes
    model["arithmetic_intensity"] = rows["model_arithmetic_intensity"]
    model["achieved_gbps"] = model_bytes / whole.where(whole > 0)
    modelled = add_roofline_columns(model, run, ceilings)
    is_model = (basis == "modelled").to_numpy(dtype=bool)
    for src, dst in (
        ("achieved_gbps", "model_gbps"),
        ("pct_of_ceiling", "model_pct_of_ceiling"),
        ("bound", "model_bound"),
        ("time_at_roof_ns", "model_time_at_roof_ns"),
        ("governing_ceiling", "model_governing_ceiling"),
    ):
        out[dst] = modelled[src].where(is_model, None if src in ("bound", "governing_ceiling") else np.nan)
    out["model_pct_of_dram_peak"] = (100.0 * out["model_gbps"] / float(peak)) if peak else np.nan
    for col in ("bound", "governing_ceiling", "pct_of_ceiling", "time_at_roof_ns", "attainable_tflops"):
        if col in out:  # measured columns of ops with nothing measured stay unknown
            out.loc[is_model, col] = None if col in ("bound", "governing_ceiling") else np.nan
    out["flag"] = [f if b != "modelled" else None for f, b in zip(out["flag"], basis, strict=True)]
    return out


# ---- rendering -------------------------------------------------------------------------


def _nan(v: Any) -> bool:
    return v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v))


def _json_value(v: Any) -> Any:
    if isinstance(v, dict):
        return v
    if _nan(v):
        return None
    if isinstance(v, bytes | bytearray | memoryview):
        return bytes(v).hex()  # SQLite BLOB: hex text
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"  # JSON has no infinities
    return v


def _unique_names(columns: list[Any]) -> list[str]:
    """Column names made unique for JSON keys: a repeated ``x`` becomes ``x_2``, ``x_3``..."""
    seen: dict[str, int] = {}
    out = []
    taken = {str(c) for c in columns}
    for c in columns:
        name = str(c)
        if name in seen:
            n = seen[name]
            while f"{name}_{n + 1}" in taken:
                n += 1
            seen[name] = n + 1
            name = f"{name}_{n + 1}"
            taken.add(name)
        else:
            seen[name] = 1
        out.append(name)
    return out


def json_records(df: pd.DataFrame) -> list[dict[str, Any]]:
    """``df``'s rows as JSON-ready dicts: NaN/NULL -> None, numpy scalars -> Python, BLOB -> hex."""
    keys = _unique_names(list(df.columns))
    return [
        {k: _json_value(v) for k, v in zip(keys, row, strict=True)} for row in df.itertuples(index=False, name=None)
    ]


#: Report columns that machine formats leave out: ``time_share`` is ``share_of_time_pct`` / 100 (the plot's).
_NOT_EXPORTED = ("time_share",)
#: Run columns a JSON report leaves out (the machine's name; the database keeps it).
_RUN_PRIVATE = ("host",)


def report_document(report: Report) -> dict[str, Any]:
    """A report as one JSON object: what was measured, on what, against which ceilings, and the rows.

    Keys: ``rocroof`` (version), ``schema`` (the results database's schema version), ``report``
    (the grouping: op, invocation, kernel, dispatch), ``run`` (the run's row, without ``host``),
    ``labels``, ``ceilings`` (name -> value, source, mark; the unit in the name: ``_gbps`` GB/s,
    ``_tflops`` TFLOP/s, ``_tops`` TOP/s, ``_bytes`` bytes),
    ``totals`` (whole-run sums; ns and counts), ``rows_total`` (rows before ``--top``), ``notes``
    (severity, code, message) and ``rows`` (raw values in column units: ``_ns`` ns, ``_bytes``
    bytes, ``_gbps`` GB/s; null where unknown).
    """
    from .. import SCHEMA_VERSION, __version__

    run = {k: _json_value(v) for k, v in report.run.items() if k not in _RUN_PRIVATE}
    ceilings = {
        name: {k: _json_value(v) for k, v in row.items() if k in ("value", "source", "mark")}
        for name, row in report.ceilings.items()
    }
    return {
        "rocroof": __version__,
        "schema": SCHEMA_VERSION,
        "report": report.by,
        "run": run,
        "labels": dict(report.labels),
        "ceilings": ceilings,
        "totals": {k: _json_value(v) for k, v in report.totals.items()},
        "rows_total": report.total_rows,
        "notes": [{"severity": n.severity, "code": n.code, "message": n.message} for n in report.notes],
        "rows": json_records(report.rows.drop(columns=list(_NOT_EXPORTED), errors="ignore")),
    }


def _json_records(df: pd.DataFrame) -> str:
    return json.dumps(json_records(df), indent=2, allow_nan=False) + "\n"


def _num(v: Any, scale: float = 1.0, digits: int = 2) -> str:
    if _nan(v):
        return "?"
    return f"{float(v) / scale:,.{digits}f}"


def _bytes_cell(row: pd.Series, key: str) -> str:
    v = row.get(key)
    if not _nan(v):
        return _num(v, 1e6, 3)
    lo, hi = row.get(f"{key}_min"), row.get(f"{key}_max")
    if not _nan(lo) and not _nan(hi):
        return f"? ({_num(lo, 1e6, 2)}–{_num(hi, 1e6, 2)})"
    return "?"


def _gbps_cell(row: pd.Series) -> str:
    v = row.get("achieved_gbps")
    if not _nan(v):
        return _num(v, 1, 1)
    lo, hi = row.get("achieved_gbps_min"), row.get("achieved_gbps_max")
    if not _nan(lo) and not _nan(hi):
        return f"? ({_num(lo, 1, 0)}–{_num(hi, 1, 0)})"
    return "?"


def _pct_cell(row: pd.Series, peak: Any) -> str:
    v = row.get("pct_of_dram_peak")
    if not _nan(v):
        return _num(v, 1, 1)
    lo, hi = row.get("achieved_gbps_min"), row.get("achieved_gbps_max")
    if not _nan(lo) and not _nan(hi) and not _nan(peak) and peak:
        return f"? ({_num(100 * lo / peak, 1, 0)}–{_num(100 * hi / peak, 1, 0)})"
    return "?"


def _time_at_peak_cell(row: pd.Series, peak: Any) -> str:
    v = row.get("dram_time_at_peak_ns")
    if not _nan(v):
        return _num(v, 1e3)

    def total(suffix: str) -> float:
        parts = [row.get(f"{k}{suffix}") for k in ("dram_read_bytes", "dram_write_bytes")]
        return float("nan") if any(_nan(x) for x in parts) else float(sum(parts))

    lo, hi = total("_min"), total("_max")
    if not _nan(lo) and not _nan(hi) and not _nan(peak) and peak:
        return f"? ({_num(lo / peak, 1e3)}–{_num(hi / peak, 1e3)})"
    return "?"


def _human_rows(report: Report) -> tuple[list[str], list[list[str]]]:
    """The report's header and rows as cell text for people (table, Markdown, HTML), controls escaped."""
    headers, lines = _human_cells(report)
    return headers, [[cell_text(c) for c in line] for line in lines]


def _human_cells(report: Report) -> tuple[list[str], list[list[str]]]:
    by = report.by
    headers: list[str] = []
    lines: list[list[str]] = []
    if by == "dispatch":
        headers = ["#", "kernel", "op", "time µs", "read MB", "write MB", "GB/s", "% peak", "µs at peak"]
        for _, r in report.rows.iterrows():
            op = r.get("op_list") if isinstance(r.get("op_list"), str) else r.get("op")
            lines.append(
                [
                    str(r["dispatch_id"]) if not _nan(r["dispatch_id"]) else "",
                    _short(r["kernel_name"]),
                    f"{op} #{int(r['invocation'])}" if isinstance(op, str) and not _nan(r.get("invocation")) else "—",
                    _num(r["duration_ns"], 1e3),
                    _bytes_cell(r, "dram_read_bytes"),
                    _bytes_cell(r, "dram_write_bytes"),
                    _gbps_cell(r),
                    _pct_cell(r, report.run.get("dram_peak_gbps")),
                    _time_at_peak_cell(r, report.run.get("dram_peak_gbps")),
                ]
            )
        return headers, lines
    label = {"kernel": "kernel", "op": "ggml op", "invocation": "op invocation"}[by]
    headers = [label]
    if by == "op":
        headers.append("invocations")
    headers += ["dispatches", "time µs", "% time", "read MB", "write MB", "GB/s", "% peak", "µs at peak"]
    modelled = _has_roofline(report)
    if modelled:  # the roofline's columns replace "% peak" and "µs at peak" (same numbers for memory-bound ops)
        headers = [{"invocations": "inv.", "dispatches": "disp."}.get(h, h) for h in headers[:-2]]
        headers.insert(headers.index("% time") + 1, "µs/call")
        headers += ["model MB", "meas/model", "FLOP/B", "bound", "% roof", "µs at roof"]
    for _, r in report.rows.iterrows():
        if by == "kernel":
            name = _short(r["kernel_name"])
        elif by == "op":
            name = r["op"] if isinstance(r["op"], str) else "(unattributed)"
        else:
            op = r["op_list"] if isinstance(r.get("op_list"), str) else r["op"]
            node = "" if _nan(r["node_name"]) else str(r["node_name"])  # NULL is NaN here, and NaN is truthy
            name = " ".join(x for x in (str(op), node, f"#{int(r['invocation'])}") if x)
        line = [name]
        if by == "op":
            line.append(str(int(r["invocations"])))
        basis = r.get("bytes_basis") if isinstance(r.get("bytes_basis"), str) else None
        peak = report.run.get("dram_peak_gbps")
        if basis == "sampled":  # over the measured evaluations (the header says which)
            read, write = _num(r.get("measured_read_bytes"), 1e6, 3), _num(r.get("measured_write_bytes"), 1e6, 3)
        else:
            read, write = _bytes_cell(r, "dram_read_bytes"), _bytes_cell(r, "dram_write_bytes")
        gbps, pct, at_peak = _gbps_cell(r), _pct_cell(r, peak), _time_at_peak_cell(r, peak)
        if basis == "modelled":  # from the byte model: marked ~
            gbps = _modelled(r.get("model_gbps"), 1, 1)
            pct = _modelled(r.get("model_pct_of_dram_peak"), 1, 1)
            model_b = pd.to_numeric(pd.Series([r.get("model_read_bytes"), r.get("model_write_bytes")])).sum(min_count=2)
            at_peak = _modelled(model_b / float(peak) if peak else np.nan, 1e3, 2)
        line += [
            str(int(r["dispatches"])),
            _num(r["duration_ns"], 1e3),
            _num(r["share_of_time_pct"], 1, 1),
            read,
            write,
            gbps,
            pct,
            at_peak,
        ]
        if modelled:
            model_bytes = pd.to_numeric(pd.Series([r.get("model_read_bytes"), r.get("model_write_bytes")])).sum(
                min_count=2
            )
            flag = "*" if isinstance(r.get("flag"), str) and r.get("flag") else ""
            flag += "†" if isinstance(r.get("model_note"), str) and r.get("model_note") else ""
            if basis == "modelled":
                tail = [
                    "",
                    _modelled(r.get("model_arithmetic_intensity"), 1, 2),
                    "" if _nan(r.get("model_bound")) else "~" + str(r.get("model_bound")),
                    _modelled(r.get("model_pct_of_ceiling"), 1, 1),
                    _modelled(r.get("model_time_at_roof_ns"), 1e3, 2),
                ]
            else:
                tail = [
                    _num(r.get("measured_over_model"), 1, 2) + flag,
                    _num(r.get("arithmetic_intensity"), 1, 2),
                    "" if _nan(r.get("bound")) else str(r.get("bound")),
                    _num(r.get("pct_of_ceiling"), 1, 1),
                    _num(r.get("time_at_roof_ns"), 1e3, 2),
                ]
            line = line[:-2] + [_num(model_bytes, 1e6, 3), *tail]
            line.insert(headers.index("µs/call"), _num(r.get("mean_us_per_call"), 1, 2))
        lines.append(line)
    return headers, lines


def _has_values(rows: pd.DataFrame, column: str) -> bool:
    """Whether ``rows`` has ``column`` with at least one known number in it."""
    return column in rows and bool(pd.to_numeric(rows[column], errors="coerce").notna().any())


def _has_roofline(report: Report) -> bool:
    """Whether the report's rows have the byte/FLOP model, so its tables show the roofline columns."""
    return report.by in ("op", "invocation") and _has_values(report.rows, "model_read_bytes")


def _modelled(v: Any, scale: float = 1.0, digits: int = 2) -> str:
    """A value from the byte model, marked ``~`` (unknown: ``?``)."""
    return "?" if _nan(v) else "~" + _num(v, scale, digits)


def _row_name(report: Report, r: pd.Series) -> str:
    if report.by == "op":
        return str(r["op"])
    name = f"{r.get('op_list') or r['op']} {'' if _nan(r.get('node_name')) else r.get('node_name')}".strip()
    return name + (f" #{int(r['invocation'])}" if not _nan(r.get("invocation")) else "")


def _grouped(items: list[tuple[str, str, float]], mark: str) -> list[str]:
    """``mark names — text`` lines, one per distinct text; names listed up to 3, ratios as a range."""
    by_text: dict[str, list[tuple[str, float]]] = {}
    for name, text, ratio in items:
        by_text.setdefault(text, []).append((name, ratio))
    out = []
    for text, rows in by_text.items():
        names = ", ".join(n for n, _ in rows[:3]) + (f" and {len(rows) - 3} more" if len(rows) > 3 else "")
        ratios = [x for _, x in rows if x == x]
        span = ""
        if ratios:
            lo, hi = min(ratios), max(ratios)
            span = f"measured {lo:.2f}x model: " if lo == hi else f"measured {lo:.2f}–{hi:.2f}x model: "
        out.append(f"{mark} {names} — {span}{text}")
    return out


def _flag_lines(report: Report) -> list[str]:
    """Grouped explanations of rows outside [0.7, 1.3] (*) and of model assumptions (†)."""
    if "flag" not in report.rows:
        return []
    flags, assumptions = [], []
    for _, r in report.rows.iterrows():
        ratio = float(r["measured_over_model"]) if not _nan(r.get("measured_over_model")) else float("nan")
        if isinstance(r.get("flag"), str) and r["flag"]:
            text = r["flag"].split(" model: ", 1)[-1]
            flags.append((_row_name(report, r), text, ratio))
        if isinstance(r.get("model_note"), str) and r["model_note"]:
            assumptions.append((_row_name(report, r), r["model_note"], float("nan")))
    out = []
    if flags:
        out.append("measured/modelled DRAM bytes outside [0.7, 1.3] (marked *):")
        out += _grouped(flags, "*")
    if assumptions:
        out.append("model assumptions (marked †):")
        out += _grouped(assumptions, "†")
    return out


def _fused_line(report: Report) -> str | None:
    """Which fused groups an op's row includes (rows are keyed by the group's first op)."""
    if not report.fused:
        return None
    by_op: dict[str, list[str]] = {}
    for op, op_list, n in report.fused:
        by_op.setdefault(op, []).append(f"{op_list} ({n} inv.)")
    parts = [f"{op} includes {', '.join(groups)}" for op, groups in by_op.items()]
    return "fused groups count under their first op: " + "; ".join(parts)


#: What each column of a human report means, by header: the key line lists those of the columns shown.
_ROOF_TEXT = (
    "against the governing ceiling (DRAM bandwidth left of the ridge, right of it the compute peak: INT8 matrix "
    "for matmuls on quantized weights, FP16/BF16 matrix for the other matrix ops, FP32 vector otherwise)"
)
_COLUMN_KEYS: dict[str, str] = {
    "#": "# = the profiler's dispatch id",
    "op": "op #N = the ggml op invocation (range) that launched it",
    "% time": "% time = share of the run's GPU time",
    "read MB": "read MB = DRAM bytes read (10^6)",
    "write MB": "write MB = DRAM bytes written (10^6)",
    "GB/s": "GB/s = (read + write DRAM bytes) / time",
    "% peak": "% peak = that as % of the DRAM ceiling",
    "µs at peak": "µs at peak = the time those bytes take at the DRAM ceiling",
    "µs/call": "µs/call = time per op invocation",
    "model MB": "model MB = the byte model's DRAM bytes (the ops' tensor sizes)",
    "meas/model": "meas/model = measured / modelled DRAM bytes",
    "FLOP/B": "FLOP/B = modelled FLOP per measured DRAM byte",
    "bound": "bound = side of the roofline's ridge (latency: under 10% of the roof in calls under 20 µs: launch, "
    "latency or too little parallelism)",
    "% roof": "% roof = % of the roof " + _ROOF_TEXT,
    "µs at roof": "µs at roof = the time at that roof",
}


def _legend(report: Report, headers: list[str]) -> str | None:
    """The key line: what each of the ``headers`` shown means, in their order (None without rows)."""
    if not len(report.rows):
        return None
    time = {
        "dispatch": "time µs = GPU kernel time",
        "kernel": "time µs = GPU kernel time summed over the dispatches",
    }.get(report.by, "time µs = summed GPU kernel time")
    keys = {**_COLUMN_KEYS, "time µs": time}
    if "% roof" not in headers:
        keys["µs at roof"] = "µs at roof = the time at the roof " + _ROOF_TEXT
    if "read MB" in headers and "write MB" in headers:  # one clause for the pair
        keys["read MB"] = keys["write MB"] = "read/write MB = DRAM bytes (10^6)"
    parts: list[str] = []
    if "bytes_basis" in report.rows and bool((report.rows["bytes_basis"] == "modelled").any()):
        parts.append("~ = from the byte model (no DRAM counters for the op)")
    for header in headers:
        text = keys.get(header)
        if text and text not in parts:
            parts.append(text)
    return "key: " + "; ".join(parts) if parts else None


#: Compute ceilings shown in headers and plots: run_ceiling name, label, unit.
_COMPUTE_CEILINGS = (
    ("int8_matrix_tops", "INT8 matrix", "TOP/s"),
    ("fp16_matrix_tflops", "FP16 matrix", "TFLOP/s"),
    ("fp32_vector_tflops", "FP32 vector", "TFLOP/s"),
)


def _ceiling_line(report: Report) -> str | None:
    parts = []
    for key, label, unit in _COMPUTE_CEILINGS:
        c = report.ceilings.get(key)
        if c and not _nan(c.get("value")):
            parts.append(f"{label} {float(c['value']):,.1f} {unit} ({c.get('mark') or '?'})")
    origins = _table_origins(report)
    return (
        ("compute ceilings: " + ", ".join(parts) + (f" — {', '.join(origins)}" if origins else "")) if parts else None
    )


def _table_origins(report: Report) -> list[str]:
    """The peaks tables the run's compute ceilings come from (``configs/peaks.yaml``, a ROCROOF_PEAKS path)."""
    found = set()
    for key, _label, _unit in _COMPUTE_CEILINGS:
        source = str((report.ceilings.get(key) or {}).get("source") or "")
        head = source.split(": ", 1)[0] if ": " in source else ""
        if head.endswith((".yaml", ".yml")):
            found.add(head)
        elif source and (report.ceilings.get(key) or {}).get("mark") != "measured":
            found.add(SHIPPED_LABEL)  # stored before sources named their table: the shipped one
    return sorted(found)


def short_kernel_name(name: Any, width: int = 72) -> str:
    """A kernel name for tables: no ``void`` return type, no argument list, at most ``width`` chars.

    >>> short_kernel_name("void mul_mat_vec_q<(ggml_type)8, 1, false>(const void *, const void *, float *)")
    'mul_mat_vec_q<(ggml_type)8, 1, false>'
    """
    text = "" if _nan(name) else str(name).strip()
    if text.startswith("void "):
        text = text[5:]
    if text.endswith(")"):
        depth = 0
        for i in range(len(text) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(text[i], 0)
            if depth == 0:
                if i > 0:  # keep "(anonymous namespace)"-style names whole
                    text = text[:i].rstrip()
                break
    return text if len(text) <= width else text[: width - 1] + "…"


def _short(name: Any, width: int = 72) -> str:
    return short_kernel_name(name, width)


def gpu_text(name: Any, arch: Any) -> str:
    """The GPU for people: ``MI300X (gfx942)``, ``gfx942`` or ``MI300X``; empty when unknown.

    Args:
        name: product name, or None.
        arch: architecture (gfx target), or None.

    Returns:
        The text.
    """
    name = name.strip() if isinstance(name, str) and name.strip() else None
    arch = arch.strip() if isinstance(arch, str) and arch.strip() else None
    if name and arch:
        return f"{name} ({arch})"
    return name or arch or ""


_TIMING_SOURCES = {
    "trace": "a trace pass",
    "counter_pass": "a counter pass (kernels serialised)",
    "merged_counters": "merged counter passes (kernels serialised)",
    "profiler": "the profiler's own per-kernel times",
    "none": "no timing source",
}


def timing_text(source: Any) -> str:
    """Where a run's durations come from, for people (``run.timing_source`` values)."""
    return _TIMING_SOURCES.get(str(source), str(source))


def ceiling_rule_text(run: Any) -> str:
    """`` (peaks table, GPU matched by product name)``: how a run's DRAM ceiling was chosen, or ``""``."""
    rule = run.get("dram_peak_rule") if hasattr(run, "get") else None
    text = DRAM_RULES.get(str(rule)) if isinstance(rule, str) else None
    return f" ({text})" if text else ""


def _header_lines(report: Report) -> list[str]:
    r = report.run
    gpu = gpu_text(r.get("gpu_name"), r.get("gpu_arch"))
    timing = timing_text(r.get("timing_source"))
    if report.totals.get("duration_ns") is None and report.total_rows:
        warned = any(n.severity == "warning" and "timestamp" in n.code for n in report.notes)
        timing += " (durations unknown: see the warnings)" if warned else " (durations unknown: no kernel timestamps)"
    lines = [
        f"run {r['run_id']}: {r.get('source_path') or ''} — {r.get('profiler') or '?'} on {gpu or 'unknown GPU'}",
        f"timings from {timing}; attribution: {r.get('attribution_method')}",
    ]
    if report.labels:
        lines.insert(1, "labels: " + ", ".join(f"{k}={v}" for k, v in report.labels.items()))
    if r.get("dram_peak_gbps"):
        lines.append(
            f"DRAM ceiling {float(r['dram_peak_gbps']):,.1f} GB/s{ceiling_rule_text(r)} — {r.get('dram_peak_source')}"
        )
    else:
        lines.append("DRAM ceiling: unknown (no % of peak)")
    compute = _ceiling_line(report) if _has_roofline(report) else None  # only where FLOP/B and % roof show
    if compute:
        lines.append(compute)
    sample = next((n.message for n in report.notes if n.code == "counter-sample"), None)
    if sample and report.by != "dispatch":
        lines.append(
            f"{sample}. Read/write MB, GB/s, % peak, meas/model, FLOP/B, bound and % roof are over the measured "
            "ones; µs at peak/roof scale them to the whole time, and model MB covers every evaluation"
        )
    elif sample:
        lines.append(f"{sample} (the other dispatches' bytes are unknown: ?)")
    measured = any(
        _has_values(report.rows, c) for c in ("dram_read_bytes", "measured_read_bytes", "dram_read_bytes_min")
    )
    if not measured and report.total_rows and report.by in ("op", "invocation"):
        any_model = _has_roofline(report)
        lines.append(
            "no DRAM counters in this run: values marked ~ come from the byte model (the ops' tensor sizes), not "
            "from measurement"
            if any_model
            else "no DRAM counters and no op metadata in this run: times only"
        )
    if str(r.get("profiler") or "").startswith("ncu") and r.get("cache_control") == "all" and measured:
        lines.append(
            "DRAM bytes: Nsight Compute replay with caches flushed before each kernel (cold); "
            "times: the Nsight Systems run (warm caches, kernels back to back)"
        )
    return lines


def _stdout_is_terminal() -> bool:
    """Whether standard output is a terminal (not a file or a pipe)."""
    import sys

    try:
        return bool(sys.stdout.isatty())
    except (AttributeError, ValueError):  # replaced or closed
        return False


def _width() -> int:
    """The terminal's width (``COLUMNS`` or the tty; 160 when output goes to a file or pipe)."""
    import shutil

    return max(40, shutil.get_terminal_size((160, 24)).columns)


#: Report columns a narrow terminal drops first (one at a time, until the table fits): those
#: another column implies or that matter least when reading a roofline table.
_DROP_FIRST = (
    *("µs at roof", "µs at peak", "disp.", "dispatches", "write MB", "model MB", "µs/call", "% peak", "% time"),
    *("FLOP/B", "inv."),
)
#: Report columns that may fold onto several lines (long names), with the fewest characters each
#: is given before columns are dropped; every other cell stays whole.
_FOLDING_COLUMNS = {"kernel": 24, "op invocation": 28, "op": 16}


def _record_blocks(headers: list[str], rows: list[list[str]]) -> list[str]:
    """Lines of one block per row (``-- row N --``, then ``header: value``), for tables too wide to print."""
    pad = max((len(h) for h in headers), default=0)
    lines: list[str] = []
    for i, row in enumerate(rows):
        lines.append(f"-- row {i + 1} --")
        lines += [f"{h.rjust(pad)}: {v}" for h, v in zip(headers, row, strict=True)]
    return lines


def _table_width(headers: list[str], rows: list[list[str]], cols: list[int], caps: dict[int, int]) -> int:
    """Characters a rich SIMPLE_HEAVY table of columns ``cols`` needs on one line per row.

    Each column is as wide as its widest cell or header, at most ``caps[j]`` for a column that may
    fold; three characters separate columns (padding, rule, padding).
    """
    total = 0
    for j in cols:
        w = max([len(headers[j])] + [len(row[j]) for row in rows])
        total += min(w, caps[j]) if j in caps else w
    return total + 3 * (len(cols) - 1)


def _fit_columns(
    headers: list[str], lines: list[list[str]], width: int
) -> tuple[list[str], list[list[str]], list[str], int]:
    """Drop columns (:data:`_DROP_FIRST` order) until the table fits ``width`` characters.

    Numbers are never folded across lines: a table too wide for the terminal loses whole columns
    instead, and the caller names them. A name column of :data:`_FOLDING_COLUMNS` counts as its
    minimum there (it folds); three characters separate columns (padding, rule, padding).

    Returns:
        The headers and lines kept, the dropped headers in the order dropped, and the width the
        kept columns need (more than ``width`` when even the fewest columns do not fit).
    """
    caps = {j: _FOLDING_COLUMNS[h] for j, h in enumerate(headers) if h in _FOLDING_COLUMNS}

    def needed(cols: list[int]) -> int:
        return _table_width(headers, lines, cols, caps)

    keep, dropped = _drop_columns(headers, _DROP_FIRST, lambda cols: needed(cols) <= width)
    return [headers[j] for j in keep], [[line[j] for j in keep] for line in lines], dropped, needed(keep)


def _md_cell(text: str, code: bool) -> str:
    """A Markdown table cell: kernel names as code spans (``<float>`` survives), ``|`` escaped."""
    if code and text:
        return "`" + text.replace("`", "'").replace("|", "\\|") + "`"
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


#: Cell starts that spreadsheets take for a formula (OWASP "CSV injection"): ``=HYPERLINK(...)``,
#: ``+cmd|...``, ``-2+3``, ``@SUM(...)``, and a tab or carriage return before one.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_text(df: pd.DataFrame, raw: bool = False, header: bool = True) -> str:
    """A frame as CSV; text cells a spreadsheet would run as a formula get a leading ``'``.

    Numbers are never touched (``-2.5`` stays a number); ``raw`` leaves text cells as they are.
    """
    if not raw:
        df = df.copy()
        for i in range(df.shape[1]):
            col = df.iloc[:, i]
            if col.dtype == object or pd.api.types.is_string_dtype(col.dtype):
                df.isetitem(i, col.map(lambda v: "'" + v if isinstance(v, str) and v.startswith(_FORMULA_START) else v))
    return str(df.to_csv(index=False, header=header))


def render_batch(df: pd.DataFrame, fmt: Literal["csv", "json"], first: bool, raw: bool = False) -> str:
    """One batch of a streamed result: CSV rows (the header with the first batch), or JSON objects.

    The JSON batches and a closing ``"\\n]"`` (``"]"`` after no rows) make one array, as
    :func:`render_frame` writes it.
    """
    if fmt == "csv":
        return csv_text(df, raw, header=first)
    text = json.dumps(json_records(df), indent=2, allow_nan=False)
    if not len(df):
        return "[" if first else ""
    body = text[1:-2]  # the objects, without the array's "[" and "\n]"
    return ("[" if first else ",") + body


#: Columns a Markdown report and diff table have at most by default (a PR review's width).
MARKDOWN_COLUMNS = 9
#: Columns a Markdown table loses first to fit :data:`MARKDOWN_COLUMNS`: the verdicts (bound,
#: % roof, µs at roof, meas/model) and time stay; counts, per-call time and the byte split go.
_MARKDOWN_DROP_FIRST = (
    *("disp.", "dispatches", "inv.", "µs/call", "write MB", "model MB", "read MB"),
    *("µs at peak", "% peak", "% time", "FLOP/B", "invocations"),
)


def _markdown_budget(headers: list[str], lines: list[list[str]]) -> tuple[list[str], list[list[str]], list[str]]:
    """Drop columns (:data:`_MARKDOWN_DROP_FIRST` order) down to :data:`MARKDOWN_COLUMNS`; the dropped named."""
    keep, dropped = _drop_columns(headers, _MARKDOWN_DROP_FIRST, lambda cols: len(cols) <= MARKDOWN_COLUMNS)
    return [headers[j] for j in keep], [[line[j] for j in keep] for line in lines], dropped


def _drop_columns(
    headers: list[str], order: Iterable[str], fits: Callable[[list[int]], bool]
) -> tuple[list[int], list[str]]:
    """Column positions kept after dropping headers in ``order`` until ``fits(kept)``, and those dropped."""
    keep = list(range(len(headers)))
    dropped: list[str] = []
    for name in order:
        if fits(keep):
            break
        if name in headers and headers.index(name) in keep:
            keep.remove(headers.index(name))
            dropped.append(name)
    return keep, dropped


def render(
    report: Report,
    fmt: Format = "table",
    width: int | None = None,
    *,
    raw: bool = False,
    all_columns: bool = False,
) -> str:
    """Render a report.

    Args:
        report: from :func:`build_report`.
        fmt: ``table`` (rich, for terminals), ``csv``, ``json`` (one object: run, ceilings,
            notes and the rows as raw values, null for unknown; :func:`report_document`) or
            ``markdown`` (for PR reviews).
        width: terminal width for ``table``.
        raw: CSV only: keep text cells that start like a spreadsheet formula as they are
            (:func:`csv_text`).
        all_columns: Markdown only: every column, not :data:`MARKDOWN_COLUMNS` at most.

    Returns:
        The text, ending with a newline.
    """
    if fmt == "json":
        return json.dumps(report_document(report), indent=2, allow_nan=False) + "\n"
    if fmt == "csv":
        return csv_text(report.rows.drop(columns=list(_NOT_EXPORTED), errors="ignore"), raw)
    headers, lines = _human_rows(report)
    footer = []
    if report.total_rows == 0:
        footer.append(
            "no ggml op invocations in this run (no ggml markers or op metadata were captured); try --by kernel"
            if report.by == "invocation"
            else "no kernel dispatches in this run"
        )
    if report.total_rows > len(report.rows):
        footer.append(f"showing {len(report.rows)} of {report.total_rows} rows (--top)")
    footer += _flag_lines(report)
    fused_line = _fused_line(report)
    if fused_line:
        footer.append(fused_line)
    legend_at = len(footer)  # the key line goes here, once the columns shown are known
    if report.by == "op" and report.totals.get("unattributed_dispatches"):
        footer.append(
            f"{report.totals['unattributed_dispatches']} of {report.totals['dispatches']} dispatches "
            "are outside any ggml range"
        )
    if fmt == "markdown":
        md_dropped: list[str] = []
        if not all_columns:
            headers, lines, md_dropped = _markdown_budget(headers, lines)
        legend = _legend(report, headers)
        if legend:
            footer.insert(legend_at, legend)
        if md_dropped:
            footer.insert(
                0,
                f"left out to fit a review ({MARKDOWN_COLUMNS} columns at most): {', '.join(md_dropped)} "
                "(--all-columns shows them)",
            )
        header_lines = _header_lines(report)
        labels = [line for line in header_lines[1:] if line.startswith("labels: ")]
        out = [f"**rocroof** {header_lines[0]}  ", *(f"{line}  " for line in labels), ""]
        # the provenance (timings, ceilings and their sources) folded: one click away in a PR comment
        out += ["<details><summary>how it was measured</summary>", ""]
        out += [f"{line}  " for line in header_lines[1:] if line not in labels]
        out += ["", "</details>", ""]
        text_cols = {i for i, h in enumerate(headers) if i == 0 or h in ("kernel", "op", "bound")}
        out.append("| " + " | ".join(headers) + " |")
        out.append("|" + "|".join(":---" if i in text_cols else "---:" for i in range(len(headers))) + "|")
        for line in lines:
            out.append("| " + " | ".join(_md_cell(c, code=headers[i] == "kernel") for i, c in enumerate(line)) + " |")
        out.append("")
        for f in footer:
            out.append(f"_{f}_  ")
        for n in report.notes:
            if n.severity != "info":
                out.append(f"- **{n.severity}** ({n.code}): {n.message}")
        n_info = sum(1 for n in report.notes if n.severity == "info")
        if n_info:
            out.append(f"_({n_info} info note(s): rocroof runs --notes {report.run['run_id']})_")
        return "\n".join(out).rstrip() + "\n"
    # going to a file or a pipe (no width given, no terminal): prose lines stay whole, unwrapped
    # (a PR or a log reflows them); the table still fits the width
    soft = width is None and not _stdout_is_terminal()

    def say(text: str) -> None:
        console.print(text, highlight=False, markup=False, soft_wrap=soft)

    width = width or _width()
    all_headers, all_lines = headers, lines
    headers, lines, dropped, needed = _fit_columns(headers, lines, width)
    console = Console(file=io.StringIO(), width=width, force_terminal=False, color_system=None)
    for text in _header_lines(report):
        say(text)
    if needed > width:  # not even the fewest columns fit: one block per row, every value whole
        legend = _legend(report, all_headers)
        if legend:
            footer.insert(legend_at, legend)
        for block_line in _record_blocks(all_headers, all_lines):
            console.print(block_line, highlight=False, markup=False)
    else:
        legend = _legend(report, headers)  # the key explains the columns shown
        if legend:
            footer.insert(legend_at, legend)
        if dropped:
            footer.insert(
                0,
                f"left out for a terminal of {width} columns: {', '.join(dropped)} (a wider terminal or "
                "--format markdown|csv|json shows every column)",
            )
        table = Table(box=box.SIMPLE_HEAVY, show_edge=False, pad_edge=False)
        for i, h in enumerate(headers):
            table.add_column(
                h,
                justify="left" if i == 0 or h in _TEXT_COLUMNS else "right",
                overflow="fold",
                no_wrap=h not in _FOLDING_COLUMNS,  # numbers and op names stay whole; long names fold
            )
        for cells in lines:
            table.add_row(*(Text(c) for c in cells))  # literal text: '[ref-5]' is not console markup
        console.print(table)
    for f in footer:
        say(f)
    for n in report.notes:
        if n.severity != "info":
            say(f"{n.severity}: {n.message}")
    infos = [n for n in report.notes if n.severity == "info"]
    if infos:
        say(f"({len(infos)} info note(s): rocroof runs --notes {report.run['run_id']})")
    out = console.file.getvalue()  # type: ignore[attr-defined]
    return str(out)


def runs_frame(store: Store, *, labels_as_mapping: bool = False) -> pd.DataFrame:
    """One row per run: id, time, source, profiler, GPU, timing source, dispatch counts, labels.

    ``labels`` is ``key=value,...`` text (CSV, tables), or with ``labels_as_mapping`` a
    ``{key: value}`` dict per run (JSON: values may hold commas).
    """
    r, d, lab = schema.run, schema.dispatch_record, schema.run_label
    counts = (
        sa.select(d.c.run_id, sa.func.count().label("dispatches"), sa.func.count(d.c.op_index).label("attributed"))
        .where(d.c.timing_dispatch_index == d.c.dispatch_index)
        .group_by(d.c.run_id)
        .subquery()
    )
    df = store.frame(
        sa.select(
            r.c.run_id,
            r.c.created_at,
            r.c.source_path,
            r.c.profiler,
            r.c.gpu_arch,
            r.c.gpu_name,
            r.c.timing_source,
            counts.c.dispatches,
            counts.c.attributed,
        )
        .outerjoin(counts, counts.c.run_id == r.c.run_id)
        .order_by(r.c.run_id)
    )
    for col in ("dispatches", "attributed"):  # a run without dispatches has 0 of them, not an unknown number
        df[col] = df[col].astype("Int64").fillna(0)
    labels = store.frame(sa.select(lab))
    if labels_as_mapping:
        mapping: dict[int, dict[str, str]] = {}
        for rid, key, value in zip(labels["run_id"], labels["key"], labels["value"], strict=True):
            mapping.setdefault(int(rid), {})[str(key)] = str(value)
        df["labels"] = [mapping.get(int(rid), {}) for rid in df["run_id"]]
    elif len(labels):
        joined = labels.groupby("run_id").apply(
            lambda g: ",".join(f"{k}={v}" for k, v in zip(g["key"], g["value"], strict=True)), include_groups=False
        )
        df["labels"] = df["run_id"].map(joined)
    else:
        df["labels"] = None
    return df


def runs_for_people(df: pd.DataFrame, path_width: int = 40) -> tuple[pd.DataFrame, str]:
    """The :func:`runs_frame` rows shaped for a terminal table (csv and json keep the raw columns).

    ``created_at`` to the minute, the capture path cut from the left to ``path_width`` characters
    (its last parts name the capture), GPU name and arch in one column, labels separated by
    ``", "`` so that a table wraps them between labels, not inside one. Labels that every row
    has (``key=value`` alike: a sweep's name, its device) leave the rows when there are two or
    more and come back as the second value, ``", "``-joined ("" when none).
    """
    per_row = [[] if _nan(v) else [p for p in str(v).split(",") if p] for v in df["labels"]]
    common: list[str] = []
    if len(per_row) >= 2:
        common = [label for label in per_row[0] if all(label in row for row in per_row[1:])]
    out = pd.DataFrame(
        {
            "run": df["run_id"],
            "created": [str(v)[:16].replace("T", " ") if not _nan(v) else "" for v in df["created_at"]],
            "capture": [_left_cut(str(v), path_width) if not _nan(v) else "" for v in df["source_path"]],
            "profiler": df["profiler"],
            "GPU": [gpu_text(n, a) for n, a in zip(df["gpu_name"], df["gpu_arch"], strict=True)],
            "timing": df["timing_source"],
            "dispatches": df["dispatches"],
            "attributed": df["attributed"],
            "labels": [", ".join(label for label in row if label not in common) for row in per_row],
        }
    )
    return out, ", ".join(common)


def _left_cut(text: str, width: int) -> str:
    """``text`` cut from the left to ``width`` characters, with a leading ``…`` when cut.

    The cut falls at a ``/`` where one is in the kept part, so that path parts stay whole.
    """
    if len(text) <= width:
        return text
    kept = text[len(text) - width + 1 :]
    slash = kept.find("/")
    return "…" + (kept[slash:] if 0 <= slash < len(kept) - 1 else kept)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def render_frame(
    df: pd.DataFrame,
    fmt: Format = "table",
    width: int | None = None,
    max_columns: int = 12,
    wrap: Iterable[str] | None = None,
    *,
    raw: bool = False,
) -> str:
    """Render any DataFrame (runs, query results) in one of the report formats.

    ``table`` prints one block per record (``name: value`` lines) when the frame has more than
    ``max_columns`` columns; ``width`` is the table's width in characters (default 160).
    ``wrap`` names the only columns a table may wrap (default: any column). ``raw``: CSV text
    cells are left as they are (:func:`csv_text`).
    """
    if fmt == "json":
        return _json_records(df)
    if fmt == "csv":
        return csv_text(df, raw)
    cells = [[("" if _nan(v) else cell_text(str(v))) for v in rec] for rec in df.itertuples(index=False)]
    wrapping = None if wrap is None else set(wrap)
    width = width or _width()

    names = [str(c) for c in df.columns]
    # columns that may wrap count as 12 characters; the others must fit whole, or one block per record
    caps = {j: 12 for j, c in enumerate(df.columns) if wrapping is not None and c in wrapping}
    too_wide = _table_width(names, cells, list(range(len(names))), caps) > width
    if fmt == "table" and (len(df.columns) > max_columns or (wrapping is not None and too_wide)):
        # too wide for columns: one block per record, "name: value" per line
        lines = _record_blocks(names, cells)
        return "\n".join(lines) + ("\n" if lines else "(no rows)\n")

    def numeric(j: int) -> bool:
        """Whether column ``j`` holds numbers only (right-aligned, as reports align them).

        A cell of numbers paired by `` → `` or `` / `` (a diff's ``A → B``) counts as numbers.
        """
        parts = [
            part.replace(",", "").replace("%", "").strip()
            for r in cells
            for part in re.split(r" → | / ", r[j])
            if part.strip() not in ("", "—", "?")
        ]
        return bool(parts) and all(_is_number(v.lstrip("+~")) for v in parts)

    if fmt == "markdown":
        align = ["---:" if numeric(j) else "---" for j in range(len(df.columns))]
        out = ["| " + " | ".join(str(c) for c in df.columns) + " |", "|" + "|".join(align) + "|"]
        out += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in cells]
        return "\n".join(out) + "\n"
    table = Table(box=box.SIMPLE_HEAVY, show_edge=False, pad_edge=False)
    for j, c in enumerate(df.columns):
        table.add_column(
            Text(str(c)),
            overflow="fold",
            no_wrap=wrapping is not None and c not in wrapping,
            justify="right" if numeric(j) else "left",
        )
    for row in cells:
        table.add_row(*(Text(v) for v in row))  # literal text: '[ref-5]' is not console markup
    console = Console(file=io.StringIO(), width=width, force_terminal=False, color_system=None)
    console.print(table)
    if not len(df):
        console.print("(no rows)", highlight=False, markup=False)
    return str(console.file.getvalue())  # type: ignore[attr-defined]


# ---- roofline plot and HTML ------------------------------------------------------------


def roofline_points(report: Report) -> pd.DataFrame:
    """One plot point per row of an op report (see :data:`rocroof.report.plot.POINT_COLUMNS`).

    The height is the achieved FLOP/s of the invocations the intensity comes from: in a counter
    sample (``bytes_basis`` = ``sampled``) the measured invocations' FLOPs over their time, so that
    a point's implied bandwidth (FLOP/s / intensity) is the one measured, never above the roof
    because the time covers other evaluations than the bytes.
    """
    r = report.rows
    if "achieved_tflops" not in r:
        return pd.DataFrame(columns=["label", "ai_measured", "ai_model", "flops_per_s", "time_share"])
    flops_per_s = pd.to_numeric(r["achieved_tflops"], errors="coerce") * 1e12
    if "bytes_basis" in r and "achieved_gbps" in r:
        # the measured invocations' FLOP/s = their intensity x their bandwidth (both over the same bytes)
        sampled = (r["bytes_basis"] == "sampled").to_numpy(dtype=bool)
        measured = (
            pd.to_numeric(r["arithmetic_intensity"], errors="coerce")
            * pd.to_numeric(r["achieved_gbps"], errors="coerce")
            * 1e9
        )
        flops_per_s = flops_per_s.where(~sampled, measured)
    return pd.DataFrame(
        {
            "label": r["op"].fillna("(unattributed)").astype(str),
            "ai_measured": pd.to_numeric(r["arithmetic_intensity"], errors="coerce"),
            "ai_model": pd.to_numeric(r["model_arithmetic_intensity"], errors="coerce"),
            "flops_per_s": flops_per_s,
            "time_share": pd.to_numeric(r["time_share"], errors="coerce").fillna(0.0),
        }
    )


def plot_ceilings(report: Report) -> Any:
    """The :class:`rocroof.report.plot.PlotCeilings` of a report's run (None without a DRAM ceiling)."""
    from .plot import PlotCeilings

    dram = report.ceilings.get("dram_gbps", {}).get("value") or report.run.get("dram_peak_gbps")
    if not dram:
        return None
    compute = {}
    for key, label, _unit in _COMPUTE_CEILINGS:
        c = report.ceilings.get(key)
        if c and not _nan(c.get("value")):
            compute[f"{label} ({c.get('mark')})"] = float(c["value"])
    mark = report.ceilings.get("dram_gbps", {}).get("mark") or ""
    return PlotCeilings(
        float(dram),
        compute,
        source=f"ceilings: {', '.join(_table_origins(report)) or 'measured'} (marks in parentheses)",
        dram_mark=str(mark),
    )


def plot_title(report: Report) -> str:
    """``run N: <source> — <GPU>`` for a figure."""
    r = report.run
    return f"run {r['run_id']}: {r.get('source_path') or ''} — {gpu_text(r.get('gpu_name'), r.get('gpu_arch'))}"


#: Report columns of text (left-aligned in tables and HTML); the others are numbers.
_TEXT_COLUMNS = ("kernel", "op", "bound")


#: The HTML report's sorting: a click on a column's header sorts its table by it (numbers as numbers,
#: again for the other direction); ``#sort=<table id>:<column>[:desc]`` in the address sorts on load.
_SORT_SCRIPT = r"""
function rrKey(t){t=t.replace(/[,~*\u2020%\u00b5]/g,'').trim();var n=parseFloat(t);return isNaN(n)?null:n}
function rrSort(table,col,desc){var body=table.tBodies[0],rows=Array.prototype.slice.call(body.rows);
rows.sort(function(a,b){var x=a.cells[col].textContent,y=b.cells[col].textContent,p=rrKey(x),q=rrKey(y),r;
if(p===null&&q===null){r=x.localeCompare(y)}else if(p===null){r=1}else if(q===null){r=-1}else{r=p-q}
return desc?-r:r});rows.forEach(function(r){body.appendChild(r)});
table.setAttribute('data-sorted',col+(desc?':desc':':asc'))}
document.querySelectorAll('table.sortable').forEach(function(table){
Array.prototype.forEach.call(table.tHead.rows[0].cells,function(th,col){th.addEventListener('click',function(){
var was=table.getAttribute('data-sorted');rrSort(table,col,was===col+':asc')})})});
var m=/#sort=([\w-]+):(\d+)(:desc)?/.exec(location.hash);
if(m){var t=document.getElementById(m[1]);if(t){rrSort(t,parseInt(m[2],10),!!m[3])}}
"""


def _html_table(table_id: str, headers: list[str], lines: list[list[str]]) -> str:
    """A sortable HTML table (see :data:`_SORT_SCRIPT`); names left-aligned, numbers right-aligned."""
    import html

    text_columns = {i for i, h in enumerate(headers) if i == 0 or h in _TEXT_COLUMNS}
    th = "".join(f"<th title='click to sort'>{html.escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>"
        + "".join(
            f"<td class=l>{html.escape(c)}</td>" if i in text_columns else f"<td>{html.escape(c)}</td>"
            for i, c in enumerate(row)
        )
        + "</tr>"
        for row in lines
    )
    return f"<table class=sortable id={table_id}><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def render_html(
    report: Report,
    svg: str | None,
    kernels: Report | None = None,
    *,
    experts_svg: str | None = None,
    advice: tuple[list[str], list[str], list[list[str]]] | None = None,
) -> str:
    """A self-contained HTML page a reviewer can explore, with no network access at all.

    Sections: the run (its header lines), the roofline plot (the SVG, full width), the report's
    table (``id=rows``), what would pay most when ``advice`` is given (``id=advice``: its text lines,
    the headers and the rows of ``rocroof advise``), the kernels' table when ``kernels`` is given
    (``id=kernels``), the MoE routing heat map when ``experts_svg`` is given (``id=experts``), and the
    notes (flags, fused groups, warnings, every note of the run, the key). Every table sorts by a
    click on a column header (inline script: :data:`_SORT_SCRIPT`); a Content-Security-Policy
    forbids loading anything (``default-src 'none'``).
    """
    import html

    headers, lines = _human_rows(report)
    head = "".join(f"<p>{html.escape(t)}</p>" for t in _header_lines(report))
    sections = [f"<section id=run><h2>Run</h2>{head}</section>"]
    figure = svg[svg.find("<svg") :] if svg and "<svg" in svg else ""
    if figure:
        sections.append(f"<section id=roofline><h2>Roofline</h2><div class=plot>{figure}</div></section>")
    title = {"op": "ggml ops", "kernel": "Kernels", "dispatch": "Dispatches", "invocation": "Op invocations"}
    shown = (
        f" (showing {len(report.rows)} of {report.total_rows}: --top)" if report.total_rows > len(report.rows) else ""
    )
    sections.append(
        f"<section id=table><h2>{title[report.by]}{html.escape(shown)}</h2>{_html_table('rows', headers, lines)}"
        f"<p class=key>{html.escape(_legend(report, headers) or '')}</p></section>"
    )
    if advice is not None and advice[2]:
        text, a_headers, a_lines = advice
        paragraphs = "".join(f"<p>{html.escape(t)}</p>" for t in text)
        sections.append(
            f"<section id=advice><h2>What would pay most</h2>{paragraphs}{_html_table('advice', a_headers, a_lines)}"
            "</section>"
        )
    if kernels is not None and len(kernels.rows):
        k_headers, k_lines = _human_rows(kernels)
        sections.append(
            f"<section id=kernels-section><h2>Kernels</h2>{_html_table('kernels', k_headers, k_lines)}</section>"
        )
    experts = experts_svg[experts_svg.find("<svg") :] if experts_svg and "<svg" in experts_svg else ""
    if experts:
        sections.append(
            "<section id=experts><h2>MoE routing: tokens per expert and layer</h2>"
            f"<div class=plot>{experts}</div></section>"
        )
    notes = _flag_lines(report) + [line for line in (_fused_line(report),) if line]
    notes += [f"{n.severity}: {n.message}" for n in report.notes]
    items = "".join(f"<li>{html.escape(t.lstrip('* '))}</li>" for t in notes)
    sections.append(f"<section id=notes><h2>Notes</h2><ul>{items or '<li>none</li>'}</ul></section>")
    style = (
        "body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}h2{font-size:16px;margin:1.2em 0 .4em}"
        "table{border-collapse:collapse;font-size:13px}th,td{border-bottom:1px solid #ddd;padding:3px 8px;"
        "text-align:right}td.l,th:first-child{text-align:left}th{background:#f4f4f4;cursor:pointer}"
        "p{margin:.2em 0;font-size:13px}p.key{color:#555;max-width:80em}div.plot svg{width:100%;height:auto}"
        "li{font-size:13px;margin:.2em 0}"
    )
    csp = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"
    return (
        f"<!doctype html><html><head><meta charset='utf-8'>"
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">'
        f"<title>{html.escape(plot_title(report))}</title><style>{style}</style></head><body>"
        f"<h1 style='font-size:20px'>rocroof {html.escape(report.by)} report</h1>"
        + "".join(sections)
        + f"<script>{_SORT_SCRIPT}</script></body></html>\n"
    )
