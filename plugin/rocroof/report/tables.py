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
from collections.abc import Iterable, Iterator
from typing import Any, Literal

import numpy as np
import pandas as pd
import sqlalchemy as sa

from ..errors import InputError
from ..records import Note
from ..store import Store, schema, views
from ..text import cell_text, markdown_text, one_line
from .render import (
    _COMPUTE_CEILINGS,
    _TEXT_COLUMNS,
    By,
    Report,
    _flag_lines,
    _fused_line,
    _header_lines,
    _human_rows,
    _legend,
    _nan,
    _record_blocks,
    _table_origins,
    _table_width,
    _width,
    gpu_text,
    note_line,
    render_text,
)

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


#: The largest N that ``--top N`` passes to an SQL ``LIMIT`` (SQLite and PostgreSQL take 64-bit integers).
_SQL_LIMIT_MAX = 2**63 - 1


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
    if top is not None:
        top = min(int(top), _SQL_LIMIT_MAX)  # what an SQL LIMIT takes (a larger N keeps every row anyway)
    if by == "op":  # stored with the run (the op_summary view sums every dispatch: seconds for 10^6)
        stored = ", ".join(schema.OP_TOTAL_COLUMNS)
        rows = store.frame(
            sa.text(f"SELECT {stored} FROM op_total WHERE run_id = :rid ORDER BY row_index"), {"rid": run_id}
        )
    counted: tuple[int, Any] | None = None  # (rows, their total time) counted in SQL, for top dispatches
    if by == "dispatch":
        dispatch_cells_typed(store, run_id)  # text in a number column: one line, not a traceback below
    if by == "dispatch" and top is not None:
        # the N longest of 10^6 dispatches: sorted and cut by the database, not loaded whole (~20 s)
        view = _VIEW[by]
        agg = store.frame(
            sa.text(f"SELECT COUNT(*) AS n, SUM(duration_ns) AS duration_ns FROM {view} WHERE run_id = :rid"),
            {"rid": run_id},
        )
        counted = (int(agg["n"].iloc[0]), agg["duration_ns"].iloc[0])
        rows = store.frame(
            sa.text(
                f"SELECT * FROM {view} WHERE run_id = :rid "
                "ORDER BY duration_ns IS NULL, duration_ns DESC, dispatch_index LIMIT :top"
            ),
            {"rid": run_id, "top": int(top)},
        )
    elif by == "invocation" and top is not None:
        # the N longest of ~10^6 invocations: the view is summed, counted and cut in one query, and only
        # N rows come back (loading every invocation took ~20 s and 1.5 GB at 10^6 dispatches). One query
        # evaluates the grouped view once: 11 s against 16-19 s for the two queries of the dispatches
        # above, where the window's wide rows make one query 3x slower instead. At least one row comes
        # back, for the counts (rows.head(top) below keeps N).
        rows = store.frame(
            sa.text(
                f"SELECT *, COUNT(*) OVER () AS _all_rows, SUM(duration_ns) OVER () AS _all_duration_ns "
                f"FROM {_VIEW[by]} WHERE run_id = :rid "
                "ORDER BY duration_ns IS NULL, duration_ns DESC, dispatches DESC, op_index LIMIT :top"
            ),
            {"rid": run_id, "top": max(int(top), 1)},
        )
        counted = (int(rows["_all_rows"].iloc[0]), rows["_all_duration_ns"].iloc[0]) if len(rows) else (0, None)
        rows = rows.drop(columns=["_all_rows", "_all_duration_ns"])
    elif not len(rows):  # a run without them (or no dispatches at all): the view
        rows = store.frame(sa.text(f"SELECT * FROM {_VIEW[by]} WHERE run_id = :rid"), {"rid": run_id})
    run_row = _run_row(store, run_id)
    notes = run_notes(store, run_id)
    if counted is not None:
        total_ns = counted[1]  # NULL (no known time) comes back None or NaN: both are unknown below
    else:
        total_ns = rows["duration_ns"].sum(min_count=1) if "duration_ns" in rows else None
    if counted is not None:  # the rows are the N longest: their shares are of every row's known time
        known_total = 0 if counted[1] is None or pd.isna(counted[1]) else float(counted[1])
    else:
        known_total = pd.to_numeric(rows["duration_ns"], errors="coerce").sum() if "duration_ns" in rows else 0
    if by != "dispatch":
        rows["share_of_time_pct"] = _time_shares(rows["duration_ns"], known_total)
        rows = rows.sort_values(["duration_ns", "dispatches"], ascending=[False, False], na_position="last")
    elif top is not None:
        rows = rows.sort_values(["duration_ns", "dispatch_index"], ascending=[False, True], na_position="last")
    else:
        rows = rows.sort_values("dispatch_index")
    totals = {
        "rows": counted[0] if counted is not None else len(rows),
        "duration_ns": None if total_ns is None or pd.isna(total_ns) else float(total_ns),
    }
    if by == "op" and "op" in rows:
        unattributed = rows[rows["op"].isna()]
        totals["unattributed_dispatches"] = int(unattributed["dispatches"].sum()) if len(unattributed) else 0
        totals["dispatches"] = int(rows["dispatches"].sum()) if len(rows) else 0
    ceilings = _ceiling_rows(store, run_id)
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
    total_rows = counted[0] if counted is not None else len(rows)
    if top is not None:
        rows = rows.head(top)
    cols = [c for c in _COLUMNS[by] if c in rows.columns]
    labels = run_labels(store, run_id)
    fused: list[tuple[str, str, int]] = []
    if by == "op":
        # the groups of the invocations the capture has (a ggml range or an attributed dispatch:
        # from_marker), as the op rows count them; rows of the op metadata alone (a warm-up the capture
        # dropped, or another run's metadata) are in no row of the table
        inv = schema.op_invocation
        groups = store.frame(
            sa.select(inv.c.op, inv.c.op_list, sa.func.count().label("n"))
            .where(inv.c.run_id == run_id, inv.c.is_fused.is_(True), inv.c.from_marker.is_(True))
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


def _time_shares(durations: pd.Series, known_total: Any) -> Any:
    """Each row's % of ``known_total`` ns (the run's known time); NaN for all when it is 0 or unknown."""
    return 100.0 * pd.to_numeric(durations, errors="coerce") / known_total if known_total else float("nan")


def _run_row(store: Store, run_id: int) -> dict[str, Any]:
    """The run's ``run`` row, column -> value."""
    row: dict[str, Any] = store.frame(sa.select(schema.run).where(schema.run.c.run_id == run_id)).to_dict("records")[0]
    return row


def _ceiling_rows(store: Store, run_id: int) -> dict[str, dict[str, Any]]:
    """The run's ``run_ceiling`` rows by name (``value`` in the unit the name ends with)."""
    ceil_df = store.frame(sa.select(schema.run_ceiling).where(schema.run_ceiling.c.run_id == run_id))
    return {r["name"]: r for r in ceil_df.to_dict("records")}


#: Groupings whose report is stored with the run (``stored_report``), read back by :mod:`.quick`.
STORED_GROUPINGS: tuple[By, ...] = ("op",)


def _plain(v: Any) -> Any:
    """A report value as JSON keeps it: unknown -> None, numpy scalars -> Python (infinities stay floats)."""
    if _nan(v):
        return None
    if hasattr(v, "item"):
        v = v.item()
    return v


def stored_document(report: Report) -> str:
    """A report (all rows, before ``--top``) as the JSON document ``stored_report`` keeps.

    Keys: ``columns`` (the rows' column names but ``run_id``), ``rows`` (one list per row in report order,
    null for unknown; infinities as JSON's ``Infinity``, which Python's json reads back),
    ``total_rows``, ``totals`` and ``fused`` (``[op, op_list, invocations]``); see
    :func:`rocroof.report.quick.stored_report` for the way back.
    """
    rows = report.rows.drop(columns=["run_id"], errors="ignore")  # the run's own id when read back (a merge renumbers)
    doc = {
        "columns": [str(c) for c in rows.columns],
        "rows": [[_plain(v) for v in row] for row in rows.itertuples(index=False, name=None)],
        "total_rows": report.total_rows,
        "totals": {k: _plain(v) for k, v in report.totals.items()},
        "fused": [[op, op_list, int(n)] for op, op_list, n in report.fused],
    }
    return json.dumps(doc, allow_nan=True, separators=(",", ":"))


def stored_reports(store: Store, run_id: int) -> dict[str, str]:
    """The reports kept with a run as it is stored: grouping -> :func:`stored_document`.

    Passed to :meth:`rocroof.store.Store.write_run` (``reports=``), which calls it inside the
    run's write transaction.
    """
    return {by: stored_document(build_report(store, run_id, by=by)) for by in STORED_GROUPINGS}


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
    from ..analysis.roofline import (
        add_roofline_columns,
        compute_peaks,
        per_op_compute_peaks,
        per_op_from_shapes,
        per_op_sums,
    )

    def shapes() -> pd.DataFrame:
        """What decides an invocation's compute units: weight type, batch, experts (of ``rows``' invocations)."""
        c = schema.op_invocation.c
        stmt = sa.select(c.op_index, c.quant, c.m, c.n_experts).where(c.run_id == run_id)
        wanted = pd.to_numeric(rows["op_index"], errors="coerce").dropna().astype(np.int64).unique()
        if len(wanted) <= 500:  # the N longest (--top): their rows, not the ~10^6 of the run
            stmt = stmt.where(c.op_index.in_(wanted.tolist()))
        return store.frame(stmt)

    arch = run.get("gpu_arch")
    if by == "invocation" and "op_index" in rows:
        return _invocation_roofline(rows.merge(shapes(), on="op_index", how="left"), run, ceilings)
    if by == "op":
        modelled = store.frame(sa.text("SELECT 1 AS one FROM op_model WHERE run_id = :rid LIMIT 1"), {"rid": run_id})
        attributed = rows[rows["op"].notna()] if "op" in rows else rows
        unknown = bool(pd.to_numeric(attributed.get("dram_read_bytes"), errors="coerce").isna().any())
        if len(modelled) or unknown:  # the invocations give the model, and the measured ones of a sample
            # summed per shape in SQL (~10^6 invocations stay in the database), combined per op here
            groups = store.frame(views.op_shape_sums(run_id))
            per_op = per_op_from_shapes(groups, _first_notes(store, run_id, groups), arch, ceilings, sampled=sampled)
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
            per_op = pd.DataFrame()
            if len(inv):
                peaks = per_op_compute_peaks(inv.join(compute_peaks(inv, arch, ceilings)))
                per_op = per_op_sums(inv, sampled=sampled).merge(peaks, on="op", how="left")
        if len(per_op):
            rows = rows.merge(per_op, on="op", how="left")
    rows = _with_dram_bytes(rows)
    if by == "op" and "bytes_basis" in rows:
        return _roofline_by_basis(rows, run, ceilings)
    return add_roofline_columns(rows, run, ceilings)


def _with_dram_bytes(rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` with ``dram_bytes`` (read + write bytes; NaN when either is unknown) where they lack it."""
    if "dram_bytes" not in rows:
        rows["dram_bytes"] = pd.to_numeric(rows["dram_read_bytes"], errors="coerce") + pd.to_numeric(
            rows["dram_write_bytes"], errors="coerce"
        )
    return rows


def _invocation_roofline(rows: pd.DataFrame, run: dict[str, Any], ceilings: dict[str, float]) -> pd.DataFrame:
    """Invocation rows with their compute peak and roofline columns (times in ns, bytes, TFLOP/s).

    ``rows``: ``op_roofline`` rows with ``op_invocation``'s ``quant``, ``m`` and ``n_experts``. Each
    row's values depend on that row and the run alone (``run``, ``ceilings``), so rows may come a
    batch at a time.
    """
    from ..analysis.roofline import add_roofline_columns, compute_peaks

    rows = rows.join(compute_peaks(rows, run.get("gpu_arch"), ceilings))
    return add_roofline_columns(_with_dram_bytes(rows), run, ceilings)


def _first_notes(store: Store, run_id: int, groups: pd.DataFrame) -> dict[int, str]:
    """``model_note`` of the op indexes in ``groups["first_note_op_index"]`` (views.op_shape_sums)."""
    if not len(groups):
        return {}
    wanted = sorted({int(v) for v in pd.to_numeric(groups["first_note_op_index"], errors="coerce").dropna()})
    notes: dict[int, str] = {}
    m = schema.op_model.c
    for lo in range(0, len(wanted), 500):
        part = store.frame(
            sa.select(m.op_index, m.model_note).where(m.run_id == run_id, m.op_index.in_(wanted[lo : lo + 500]))
        )
        notes.update(zip(part["op_index"].astype(int), part["model_note"].astype(str), strict=True))
    return notes


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


#: Report columns that machine formats leave out: ``time_share`` is ``share_of_time_pct`` / 100 (the plot's).
_NOT_EXPORTED = ("time_share",)
#: Run columns a JSON report leaves out (the machine's name; the database keeps it).
_RUN_PRIVATE = ("host",)


def json_records(df: pd.DataFrame) -> list[dict[str, Any]]:
    """``df``'s rows as JSON-ready dicts: NaN/NULL -> None, numpy scalars -> Python, BLOB -> hex."""
    keys = _unique_names(list(df.columns))
    return [
        {k: _json_value(v) for k, v in zip(keys, row, strict=True)} for row in df.itertuples(index=False, name=None)
    ]


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


#: Cell starts that spreadsheets take for a formula (OWASP "CSV injection"): ``=HYPERLINK(...)``,
#: ``+cmd|...``, ``-2+3``, ``@SUM(...)``, and a tab or carriage return before one.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_text(df: pd.DataFrame, raw: bool = False, header: bool = True) -> str:
    """A frame as CSV; text cells a spreadsheet would run as a formula get a leading ``'``.

    Numbers are never touched (``-2.5`` stays a number); ``raw`` leaves text cells as they are.
    Control characters are written as they are: the command that prints the text escapes them
    (``\\x1b``), unless ``--raw`` asks for the cells as stored (:func:`rocroof.cli.app.echo`). A
    cell holding a newline is quoted, and one holding a carriage return too when ``raw``: Python's
    csv writer quotes only the characters of its line ending, so the rows of such a frame end in
    CRLF, RFC 4180's line ending, which readers take as they take LF.
    """
    if not raw:
        df = df.copy()
        for i in range(df.shape[1]):
            col = df.iloc[:, i]
            if col.dtype == object or pd.api.types.is_string_dtype(col.dtype):
                df.isetitem(i, col.map(lambda v: "'" + v if isinstance(v, str) and v.startswith(_FORMULA_START) else v))
    ending = "\r\n" if raw and _has_carriage_return(df, header) else None  # None: the platform's line ending
    return str(df.to_csv(index=False, header=header, lineterminator=ending))


def _has_carriage_return(df: pd.DataFrame, header: bool) -> bool:
    """Whether a text cell of ``df`` (or a column name, with ``header``) holds a carriage return."""
    if header and any("\r" in str(c) for c in df.columns):
        return True
    for i in range(df.shape[1]):
        col = df.iloc[:, i]
        if (col.dtype == object or pd.api.types.is_string_dtype(col.dtype)) and any(
            isinstance(v, str) and "\r" in v for v in col
        ):
            return True
    return False


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
        report: from :func:`build_report` (or :func:`rocroof.report.quick.stored_report`).
        fmt: ``table`` (rich, for terminals), ``csv``, ``json`` (one object: run, ceilings,
            notes and the rows as raw values, null for unknown; :func:`report_document`) or
            ``markdown`` (for PR reviews); the last two by :func:`rocroof.report.render.render_text`.
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
    return render_text(report, fmt, width, all_columns=all_columns)


#: Rows read, typed and written at a time by :func:`dispatch_csv_chunks` and :func:`invocation_csv_chunks`
#: (~3 MB of CSV text).
CSV_BATCH_ROWS = 8192
#: ``dispatch_record``'s integer and real columns that the dispatch report prints (or derives from).
_DISPATCH_INTEGERS = ("dispatch_id", "duration_ns", "kernel_ordinal")
_DISPATCH_REALS = tuple(f"dram_{d}_bytes{b}" for d in ("read", "write") for b in ("", "_min", "_max"))


def dispatch_cells_typed(store: Store, run_id: int) -> bool:
    """Whether each stored number the run's dispatch report prints has its column's type.

    SQLite keeps any value in any column: rocroof writes integers and reals, but a database
    changed by hand may hold a real in an integer column (then that column prints as floats, as
    a whole: the report cannot be written a batch at a time) or text in a number column.

    Returns:
        False when an integer column (:data:`_DISPATCH_INTEGERS`) holds a real number; True
        otherwise (always on PostgreSQL, whose columns are typed).

    Raises:
        InputError: a number column holds text or bytes: not a measurement (the message names the
            dispatch and the column).
    """
    if store.engine.dialect.name != "sqlite":
        return True
    cols = (*_DISPATCH_INTEGERS, *_DISPATCH_REALS)
    text = " OR ".join(f"typeof({c}) IN ('text', 'blob')" for c in cols)
    found = store.frame(
        sa.text(
            f"SELECT dispatch_index, {', '.join(f'typeof({c}) AS {c}' for c in cols)} FROM dispatch_record "
            f"WHERE run_id = :rid AND ({text}) LIMIT 1"
        ),
        {"rid": run_id},
    )
    if len(found):
        row = found.iloc[0]
        column = next(c for c in cols if row[c] in ("text", "blob"))
        raise InputError(
            f"run {run_id}, dispatch {int(row['dispatch_index'])}: {column} holds {row[column]}, not a number "
            "(the database was changed outside rocroof); correct or delete that row"
        )
    reals = " OR ".join(f"typeof({c}) = 'real'" for c in _DISPATCH_INTEGERS)
    mixed = store.frame(
        sa.text(f"SELECT 1 AS one FROM dispatch_record WHERE run_id = :rid AND ({reals}) LIMIT 1"), {"rid": run_id}
    )
    return not len(mixed)


def dispatch_csv_chunks(store: Store, run_id: int, *, raw: bool = False) -> Iterator[str]:
    """The whole dispatch report of a run as CSV, a batch of dispatches at a time.

    The text of ``render(build_report(store, run_id, by="dispatch"), "csv", raw=raw)`` (one row
    per timing dispatch in ``dispatch_index`` order, the same columns, header first), read and
    written :data:`CSV_BATCH_ROWS` rows at a time: a run of 10^6 dispatches is
    never held whole (44 s and 1.4 GB that way, benchmarks/RESULTS.md). The view's columns are
    type-stable (integers, floats or text throughout), so a batch prints its values as the whole
    frame would.
    """
    if not dispatch_cells_typed(store, run_id):  # a real number in an integer column: typed as a whole
        yield render(build_report(store, run_id, by="dispatch"), "csv", raw=raw)
        return
    view = _VIEW["dispatch"]
    present = set(store.frame(sa.text(f"SELECT * FROM {view} WHERE 0")).columns)
    cols = [c for c in _COLUMNS["dispatch"] if c in present and c not in _NOT_EXPORTED]
    sql = sa.text(f"SELECT {', '.join(cols)} FROM {view} WHERE run_id = :rid ORDER BY dispatch_index")
    for i, frame in enumerate(store.frame_batches(sql, {"rid": run_id}, CSV_BATCH_ROWS)):
        yield csv_text(frame, raw, header=i == 0)


#: ``op_invocation`` and ``op_model`` columns that the invocation report prints as they are stored, and
#: the storage classes (besides NULL) each holds when rocroof wrote it.
_INVOCATION_CELLS = {
    "op_invocation": {
        "invocation": "integer",
        "layer": "integer",
        "op": "text",
        "op_list": "text",
        "node_name": "text",
    },
    "op_model": {
        "model_read_bytes": "integer",
        "model_write_bytes": "integer",
        "flops": "real",
        "evaluation": "integer",
        "block_part": "text",
        "model_note": "text",
    },
}


def invocation_cells_typed(store: Store, run_id: int) -> bool:
    """Whether each stored value the run's invocation report prints as it is has its column's type.

    A column is typed over all of its rows (:func:`rocroof.store.frame_of_batches`): a real number
    among the integers of ``model_read_bytes`` prints every value of it as a float (``5.0``), which
    a report written a batch at a time cannot know before its last batch. rocroof writes one type
    per column (:data:`_INVOCATION_CELLS`); a database changed by hand may not. The report's other
    columns are sums, casts and quotients computed in SQL, of one type whatever is stored.

    Returns:
        False when a column of :data:`_INVOCATION_CELLS` holds a value of another storage class than
        its own (or NULL) in one of the run's rows; True otherwise (always on PostgreSQL, whose columns
        are typed).
    """
    if store.engine.dialect.name != "sqlite":
        return True
    for table, cells in _INVOCATION_CELLS.items():
        other = " OR ".join(f"typeof({c}) NOT IN ('{kind}', 'null')" for c, kind in cells.items())
        found = store.frame(
            sa.text(f"SELECT 1 AS one FROM {table} WHERE run_id = :rid AND ({other}) LIMIT 1"), {"rid": run_id}
        )
        if len(found):
            return False
    return True


def invocation_csv_chunks(store: Store, run_id: int, *, raw: bool = False) -> Iterator[str]:
    """The whole invocation report of a run as CSV, a batch of invocations at a time.

    The text of ``render(build_report(store, run_id, by="invocation"), "csv", raw=raw)``, read,
    computed and written :data:`CSV_BATCH_ROWS` invocations at a time: a run of 10^6 dispatches
    (~8x10^5 invocations) is never held whole (53 s and 1.2 GB that way, benchmarks/RESULTS.md).

    The database sorts the rows as the whole report does (time, longest first, unknown last; then
    dispatches, most first; then ``op_index``, the order the whole report's view gives its ties).
    Each row's roofline columns depend on that row and on the run's constants alone (its GPU,
    DRAM peak, ceilings: read once), and ``share_of_time_pct`` on the run's known time, summed in
    SQL before the first row (:func:`rocroof.store.views.invocation_time`). A run whose stored
    cells are not of their column's type (:func:`invocation_cells_typed`) is written as the whole
    report.
    """
    if not invocation_cells_typed(store, run_id):  # a real number among integers: typed as a whole
        yield render(build_report(store, run_id, by="invocation"), "csv", raw=raw)
        return
    for i, rows in enumerate(_invocation_batches(store, run_id)):
        yield csv_text(rows, raw, header=i == 0)


def _invocation_batches(store: Store, run_id: int) -> Iterator[pd.DataFrame]:
    """The whole invocation report's rows, :data:`CSV_BATCH_ROWS` at a time, in its order and columns.

    What :func:`invocation_csv_chunks` and :func:`invocation_json_chunks` write (their docstrings
    say how the database sorts them and why each batch computes as the whole report does); the
    caller checks :func:`invocation_cells_typed` first. At least one frame comes (an empty one,
    with the view's columns, for no rows).
    """
    known_total = store.frame(views.invocation_time(run_id))["duration_ns"].iloc[0]
    known_total = 0 if known_total is None or pd.isna(known_total) else known_total
    run_row = _run_row(store, run_id)
    ceilings = {k: v["value"] for k, v in _ceiling_rows(store, run_id).items()}
    view = _VIEW["invocation"]
    # op_invocation's shape columns decide each row's compute peak (the whole report merges them in)
    sql = sa.text(
        f"SELECT v.*, i.quant, i.m, i.n_experts FROM {view} v LEFT JOIN op_invocation i "
        "ON i.run_id = v.run_id AND i.op_index = v.op_index WHERE v.run_id = :rid "
        "ORDER BY v.duration_ns IS NULL, v.duration_ns DESC, v.dispatches DESC, v.op_index"
    )
    for rows in store.frame_batches(sql, {"rid": run_id}, CSV_BATCH_ROWS):
        rows["share_of_time_pct"] = _time_shares(rows["duration_ns"], known_total)
        if len(rows):  # (no rows: only the header, of the view's columns, as the whole report has)
            rows = _invocation_roofline(rows, run_row, ceilings)
        yield rows[[c for c in _COLUMNS["invocation"] if c in rows.columns and c not in _NOT_EXPORTED]]


def invocation_json_chunks(store: Store, run_id: int) -> Iterator[str]:
    """The whole invocation report of a run as JSON, a batch of invocations at a time.

    The text of ``render(build_report(store, run_id, by="invocation"), "json")`` (one
    :func:`report_document`): its head (run, labels, ceilings, notes; the totals and
    ``rows_total`` counted by the database, as ``--top`` does) first, then the rows of
    :func:`invocation_csv_chunks`'s order :data:`CSV_BATCH_ROWS` at a time, each object indented as
    the whole document nests it. A run whose stored cells are not of their column's type
    (:func:`invocation_cells_typed`) is written as the whole report.
    """
    if not invocation_cells_typed(store, run_id):  # a real number among integers: typed as a whole
        yield render(build_report(store, run_id, by="invocation"), "json")
        return
    head = build_report(store, run_id, by="invocation", top=1)  # the counts and totals of every row
    head.rows = head.rows.iloc[:0]
    marker = "\x00rows\x00"  # a string no key or value holds: where the rows go
    doc = report_document(head)
    doc["rows"] = marker
    before, after = json.dumps(doc, indent=2, allow_nan=False).split(json.dumps(marker))
    first = True
    for rows in _invocation_batches(store, run_id):
        for record in json_records(rows):
            text = json.dumps(record, indent=2, allow_nan=False).replace("\n", "\n    ")
            yield (before + "[\n    " if first else ",\n    ") + text
            first = False
    yield (before + "[]" if first else "\n  ]") + after + "\n"


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
    (its last parts name the capture), GPU name and arch in one column, the dispatch counts with
    thousands separated (``9,208``), labels separated by
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
            "dispatches": [f"{int(v):,}" for v in df["dispatches"]],  # 9,208: counts read by people
            "attributed": [f"{int(v):,}" for v in df["attributed"]],
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
        # the cells quote captures and results (kernel names, labels, notes): Markdown's markup escaped
        out = ["| " + " | ".join(markdown_text(str(c)) for c in df.columns) + " |", "|" + "|".join(align) + "|"]
        out += ["| " + " | ".join(markdown_text(c) for c in row) + " |" for row in cells]
        return "\n".join(out) + "\n"
    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

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
    """``run N: <source> — <GPU>`` for a figure or a page, on one line (the capture's controls escaped)."""
    r = report.run
    gpu = gpu_text(r.get("gpu_name"), r.get("gpu_arch"))
    return one_line(f"run {r['run_id']}: {r.get('source_path') or ''} — {gpu}")


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
        paragraphs = "".join(f"<p>{html.escape(one_line(t))}</p>" for t in text)  # notes quote the capture
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
    notes += [note_line(n) for n in report.notes]
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
