"""``rocroof diff RUN_A RUN_B``: what changed between two runs, per ggml op, with noise told apart.

Ops are matched by key ``(op list, node name, output shape, source shapes)``: the same graph node
of the same model at the same sizes (each layer's nodes have their own ``-<layer>`` names). A
node evaluated several times in a run (one graph per decoded token, llama-bench repetitions)
gives a sample of its time; the spread of those samples is the run-to-run noise.

A change is called **noise** when ``|mean_B - mean_A|`` is below twice the standard error of the
difference, ``2·sqrt(s_A²/n_A + s_B²/n_B)`` (about a 95% interval for a difference of means,
Welch), below a floor of 5% of the mean (``min_change``), or below 0.25 µs per call
(``min_change_us``). The spread inside one run misses what changes between runs (clocks, the GPU
a sweep point ran on): in the three decode repeat pairs of examples/h200-sweep (8 samples per
node, GPUs 0 and 1), 1-5 µs kernels moved by up to 0.20 µs per call, which is up to 8.5% of a
1.3 µs kernel, while 2 SE was far smaller. The 1% floor this module first used flagged 14 of
134 nodes of two repeat pairs, and the 5% floor alone still flagged 2 nodes (-5.9% and +5.4%,
0.17 and 0.14 µs). With a single sample on a side the spread is unknown and the verdict says so. Totals are
compared per op type on the *mean time of one evaluation of the node*, so runs with different
token counts compare fairly; the whole graph (all nodes, matched or not) is compared too, which
is the figure for changes that regroup nodes, such as fusion on vs off.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..errors import InputError
from ..store import Store
from ..text import markdown_text, one_line

#: Default relative change below which a difference is never called a gain or a loss (see above).
MIN_RELATIVE_CHANGE = 0.05
#: Default change per call, in µs, below which a difference is never called a gain or a loss.
MIN_ABSOLUTE_CHANGE_US = 0.25


@dataclass
class Diff:
    """A comparison of two runs.

    Attributes:
        run_a, run_b: the run ids (A = before, B = after).
        by_node: one row per matched key (columns: op, op_list, node_name, occurrence (the k-th node
            of that name and shapes in a graph evaluation, 0-based), shapes (output ne | sources' ne),
            n_a, n_b, mean_us_a, mean_us_b, delta_us, delta_pct, read_mb_a, read_mb_b, verdict).
        by_op: per op type: time per evaluation (sum of the node means), deltas, verdict counts.
        total: one row: total time per evaluation of the matched nodes, and unmatched counts.
        notes: one-line remarks (keys only in one run, missing shapes); the warnings among them.
        kind: ``node`` (per ggml graph node, :func:`diff_runs`) or ``kernel`` (per kernel name,
            :func:`diff_kernels`: ``by_node`` then holds one row per kernel, ``by_op`` nothing).
    """

    run_a: int
    run_b: int
    by_node: pd.DataFrame
    by_op: pd.DataFrame
    total: pd.DataFrame
    notes: list[str]
    kind: str = "node"
    #: What makes the comparison itself suspect (also in ``notes``): A and B are the same run, or ran
    #: on different GPUs. The command line prints each on stderr; nothing here prints.
    warnings: list[str] = field(default_factory=list)


def _run_checks(store: Store, run_a: int, run_b: int) -> tuple[list[str], list[str]]:
    """``(warnings, notes)`` about the pair of runs itself, before any row is compared.

    Warnings: A and B are the same run (every difference is zero by construction); the runs ran on
    different GPUs (their ``gpu_name`` or ``gpu_arch`` differ, where both runs know it). Notes: the
    runs' timing sources differ (a trace pass against a counter pass's serialised replay).
    """
    from .render import gpu_text

    if run_a == run_b:
        return [f"A and B are the same run ({run_a}): every difference is zero by construction"], []
    runs = store.query(
        f"SELECT run_id, gpu_name, gpu_arch, timing_source FROM run WHERE run_id IN ({int(run_a)}, {int(run_b)})"
    ).set_index("run_id")
    if len(runs) != 2:
        return [], []
    ra, rb = runs.loc[run_a], runs.loc[run_b]

    def differ(column: str) -> bool:
        va, vb = ra[column], rb[column]
        return not pd.isna(va) and not pd.isna(vb) and str(va) != str(vb)

    warnings, notes = [], []
    if differ("gpu_name") or differ("gpu_arch"):
        warnings.append(
            f"the runs ran on different GPUs ({gpu_text(ra['gpu_name'], ra['gpu_arch'])} vs "
            f"{gpu_text(rb['gpu_name'], rb['gpu_arch'])}): time differences include that"
        )
    if differ("timing_source"):
        notes.append(
            f"the runs have different timing sources ({ra['timing_source']} vs {rb['timing_source']}): "
            "time differences include that"
        )
    return warnings, notes


def _invocations(store: Store, run_id: int) -> pd.DataFrame:
    df = store.query(
        "SELECT s.op, s.op_list, s.node_name, s.duration_ns, s.dram_read_bytes, s.dram_write_bytes, s.evaluation, "
        f"i.ne, i.src_ne FROM op_roofline s JOIN op_invocation i USING (run_id, op_index) "
        f"WHERE s.run_id = {int(run_id)} ORDER BY s.op_index"
    )
    if not len(df):
        raise InputError(f"run {run_id} has no ggml op invocations to compare (was it attributed?)")
    df["key_shapes"] = df["ne"].fillna("") + "|" + df["src_ne"].fillna("")
    if df["evaluation"].notna().all():
        # one name can head two nodes of a graph (llama.cpp's norm-0 before attention and before the FFN):
        # the k-th occurrence within a graph evaluation tells them apart
        occurrence = df.groupby(["evaluation", "op_list", "node_name", "key_shapes"], dropna=False).cumcount()
        df["key_shapes"] = df["key_shapes"] + "#" + occurrence.astype(str)
    return df


def _ordinal(n: int) -> str:
    """``2nd``, ``3rd``, ``4th``..."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _verdict(
    row: pd.Series, min_change: float = MIN_RELATIVE_CHANGE, min_change_us: float = MIN_ABSOLUTE_CHANGE_US
) -> str:
    if row["n_a"] == 0:
        return "only in B"
    if row["n_b"] == 0:
        return "only in A"
    delta, mean_a = row["delta_us"], row["mean_us_a"]
    if pd.isna(delta):
        return "time unknown"
    if (mean_a and abs(delta) < min_change * mean_a) or abs(delta) < min_change_us:
        return "noise"
    if row["n_a"] < 2 or row["n_b"] < 2:
        return "unclear (1 sample: spread unknown)"
    se = math.sqrt(row["sd_us_a"] ** 2 / row["n_a"] + row["sd_us_b"] ** 2 / row["n_b"])
    if abs(delta) < 2 * se:
        return "noise"
    return "slower" if delta > 0 else "faster"


def _check_thresholds(min_change: float, min_change_us: float) -> None:
    """Refuse noise thresholds outside their ranges (InputError): a fraction in [0, 1) and µs >= 0."""
    if not 0 <= min_change < 1:
        raise InputError(f"minimum change {min_change:g}: expected a fraction in [0, 1), e.g. 0.05 for 5%")
    if not min_change_us >= 0:
        raise InputError(f"minimum change {min_change_us:g} µs: expected 0 or more")


def diff_runs(
    store: Store,
    run_a: int,
    run_b: int,
    *,
    min_change: float = MIN_RELATIVE_CHANGE,
    min_change_us: float = MIN_ABSOLUTE_CHANGE_US,
) -> Diff:
    """Compare two stored runs per matched graph node and per op type.

    Args:
        store: the results database.
        run_a: run id of A (before).
        run_b: run id of B (after).
        min_change: relative change (0.05 = 5%) below which a node's difference is noise.
        min_change_us: change of the mean time per call, in µs, below which it is noise.

    Raises:
        InputError: a run without op invocations, ``min_change`` outside [0, 1) or a negative
            ``min_change_us``.
    """
    _check_thresholds(min_change, min_change_us)
    a, b = _invocations(store, run_a), _invocations(store, run_b)
    warnings, checks = _run_checks(store, run_a, run_b)
    notes = [*warnings, *checks]
    if not a["ne"].notna().any() or not b["ne"].notna().any():
        notes.append("no op shapes in at least one run (no op metadata): nodes matched by op and name only")
    keys = ["op_list", "node_name", "key_shapes"]

    def stats(df: pd.DataFrame, side: str) -> pd.DataFrame:
        g = df.groupby(keys, dropna=False, sort=False)
        out = pd.DataFrame(
            {
                f"n_{side}": g.size(),
                f"mean_us_{side}": g["duration_ns"].mean() / 1e3,
                f"sd_us_{side}": g["duration_ns"].std(ddof=1).fillna(0.0) / 1e3,
                f"read_mb_{side}": g["dram_read_bytes"].mean() / 1e6,
                f"op_{side}": g["op"].first(),
            }
        )
        return out

    m = stats(a, "a").join(stats(b, "b"), how="outer").reset_index()
    for side in ("a", "b"):
        m[f"n_{side}"] = m[f"n_{side}"].fillna(0).astype(int)
    m["op"] = m["op_a"].where(m["op_a"].notna(), m["op_b"])
    m["delta_us"] = m["mean_us_b"] - m["mean_us_a"]
    m["delta_pct"] = 100 * m["delta_us"] / m["mean_us_a"]
    m["verdict"] = m.apply(_verdict, axis=1, min_change=min_change, min_change_us=min_change_us)
    # the k-th node of that name in a graph evaluation (0 = first): llama.cpp names two norms norm-0
    split = m["key_shapes"].str.rsplit("#", n=1)
    m["occurrence"] = pd.to_numeric(split.str[1], errors="coerce").fillna(0).astype(int)
    m["shapes"] = split.str[0]  # output ne | sources' ne (JSON): one name can head nodes of other shapes
    only_a, only_b = int((m["n_b"] == 0).sum()), int((m["n_a"] == 0).sum())
    if only_a or only_b:
        notes.append(
            f"{only_a} node(s) only in run {run_a}, {only_b} only in run {run_b} (different model, sizes or fusion)"
        )
    by_node = (
        m[
            [
                "op",
                "op_list",
                "node_name",
                "occurrence",
                "shapes",
                "n_a",
                "n_b",
                "mean_us_a",
                "mean_us_b",
                "delta_us",
                "delta_pct",
                "read_mb_a",
                "read_mb_b",
                "verdict",
            ]
        ]
        .sort_values("delta_us", key=lambda s: -s.abs(), na_position="last")
        .reset_index(drop=True)
    )

    both = m[(m["n_a"] > 0) & (m["n_b"] > 0)]
    rows = []
    for op, g in m.groupby("op", sort=False):
        matched = g[(g["n_a"] > 0) & (g["n_b"] > 0)]
        ta, tb = matched["mean_us_a"].sum(), matched["mean_us_b"].sum()
        counts = matched["verdict"].str.split(" ").str[0].value_counts()
        rows.append(
            {
                "op": op,
                "nodes": len(matched),
                "us_per_eval_a": ta if len(matched) else np.nan,
                "us_per_eval_b": tb if len(matched) else np.nan,
                "delta_us": tb - ta if len(matched) else np.nan,
                "delta_pct": 100 * (tb - ta) / ta if ta else np.nan,
                "us_all_a": g.loc[g["n_a"] > 0, "mean_us_a"].sum(),
                "us_all_b": g.loc[g["n_b"] > 0, "mean_us_b"].sum(),
                "read_mb_per_eval_a": matched["read_mb_a"].sum(min_count=1),
                "read_mb_per_eval_b": matched["read_mb_b"].sum(min_count=1),
                "faster": int(counts.get("faster", 0)),
                "slower": int(counts.get("slower", 0)),
                "noise": int(counts.get("noise", 0)),
                "unclear": int(counts.get("unclear", 0)),
                "only_a": int((g["n_b"] == 0).sum()),
                "only_b": int((g["n_a"] == 0).sum()),
            }
        )
    by_op = pd.DataFrame(rows).sort_values(["us_all_a", "us_all_b"], ascending=False).reset_index(drop=True)
    ta, tb = both["mean_us_a"].sum(), both["mean_us_b"].sum()
    all_a, all_b = m.loc[m["n_a"] > 0, "mean_us_a"].sum(), m.loc[m["n_b"] > 0, "mean_us_b"].sum()
    total = pd.DataFrame(
        [
            {
                "min_change": min_change,
                "min_change_us": min_change_us,
                "nodes_a": int((m["n_a"] > 0).sum()),
                "nodes_b": int((m["n_b"] > 0).sum()),
                "us_per_eval_all_a": all_a,
                "us_per_eval_all_b": all_b,
                "delta_pct_all": 100 * (all_b - all_a) / all_a if all_a else np.nan,
                "matched_nodes": len(both),
                "us_per_eval_a": ta if len(both) else np.nan,  # no node in both runs: unknown, not 0
                "us_per_eval_b": tb if len(both) else np.nan,
                "delta_us": tb - ta if len(both) else np.nan,
                "delta_pct": 100 * (tb - ta) / ta if ta else np.nan,
                "nodes_faster": int(both["verdict"].eq("faster").sum()),
                "nodes_slower": int(both["verdict"].eq("slower").sum()),
                "nodes_noise": int(both["verdict"].eq("noise").sum()),
                "nodes_unclear": int(both["verdict"].str.startswith("unclear").sum()),
                "only_in_a": only_a,
                "only_in_b": only_b,
            }
        ]
    )
    return Diff(run_a=run_a, run_b=run_b, by_node=by_node, by_op=by_op, total=total, notes=notes, warnings=warnings)


def has_op_invocations(store: Store, run_id: int) -> bool:
    """True when the run has ggml op invocations with a timing dispatch (what :func:`diff_runs` compares)."""
    # op_roofline has a row when a timing dispatch has an op: asked of dispatch_record directly, as
    # LIMIT 1 on the grouped view sums every dispatch first (~2.6 s at 10^6 dispatches)
    found = store.query(
        f"SELECT 1 AS one FROM dispatch_record WHERE run_id = {int(run_id)} AND op_index IS NOT NULL "
        "AND timing_dispatch_index = dispatch_index LIMIT 1"
    )
    return bool(len(found))


def _kernels(store: Store, run_id: int) -> pd.DataFrame:
    """Per kernel name of the run's timing dispatches: dispatches, timed ones, mean and spread of their time.

    Summed in SQL (a run's 10^6 dispatches stay in the database): ``n``, ``timed``, ``mean_us``,
    ``sd_us`` (sample standard deviation, from the sums of the times and of their squares) and
    ``read_mb`` (mean DRAM read MB per dispatch where known).
    """
    df = store.query(
        "SELECT kernel_name, COUNT(*) AS n, COUNT(duration_ns) AS timed, SUM(CAST(duration_ns AS REAL)) AS total_ns, "
        "SUM(CAST(duration_ns AS REAL) * duration_ns) AS square_ns, AVG(CAST(dram_read_bytes AS REAL)) AS read_bytes "
        f"FROM dispatch_dram WHERE run_id = {int(run_id)} GROUP BY kernel_name"
    )
    if not len(df):
        raise InputError(f"run {run_id} has no timing dispatches to compare")
    timed = pd.to_numeric(df["timed"], errors="coerce").astype(float)
    total = pd.to_numeric(df["total_ns"], errors="coerce").astype(float)
    mean = total / timed.where(timed > 0)
    square = pd.to_numeric(df["square_ns"], errors="coerce").astype(float)
    variance = ((square - timed * mean**2) / (timed - 1).where(timed > 1)).clip(lower=0)
    return pd.DataFrame(
        {
            "kernel": df["kernel_name"].astype(object),
            "n": pd.to_numeric(df["n"]).astype(int),
            "timed": timed.fillna(0).astype(int),
            "mean_us": mean / 1e3,
            "sd_us": np.sqrt(variance).fillna(0.0) / 1e3,
            "total_us": total / 1e3,
            "read_mb": pd.to_numeric(df["read_bytes"], errors="coerce").astype(float) / 1e6,
        }
    )


def diff_kernels(
    store: Store,
    run_a: int,
    run_b: int,
    *,
    min_change: float = MIN_RELATIVE_CHANGE,
    min_change_us: float = MIN_ABSOLUTE_CHANGE_US,
) -> Diff:
    """Compare two stored runs per kernel name: for runs without ggml ops (any rocprof or Nsight capture).

    Each kernel's dispatches are its samples: the verdicts follow the same rules as the nodes of
    :func:`diff_runs` (noise under twice the standard error of the difference of the mean times per
    dispatch, under ``min_change`` of A's mean or under ``min_change_us``). Totals compare the GPU
    time of every timing dispatch (µs) and of the kernels in both runs.

    Raises:
        InputError: a run without timing dispatches, or thresholds as in :func:`diff_runs`.
    """
    _check_thresholds(min_change, min_change_us)
    a, b = _kernels(store, run_a), _kernels(store, run_b)
    warnings, checks = _run_checks(store, run_a, run_b)
    notes = [*warnings, *checks]
    m = a.set_index("kernel").add_suffix("_a").join(b.set_index("kernel").add_suffix("_b"), how="outer")
    m = m.reset_index()
    for side in ("a", "b"):
        m[f"dispatches_{side}"] = m[f"n_{side}"].fillna(0).astype(int)
        m[f"n_{side}"] = m[f"timed_{side}"].fillna(0).astype(int)  # the samples: dispatches with a time
    m["delta_us"] = m["mean_us_b"] - m["mean_us_a"]
    m["delta_pct"] = 100 * m["delta_us"] / m["mean_us_a"]
    present_a, present_b = m["dispatches_a"] > 0, m["dispatches_b"] > 0
    m["verdict"] = m.apply(_verdict, axis=1, min_change=min_change, min_change_us=min_change_us)
    # a kernel on both sides whose dispatches have no time on one: no samples there, not "only in"
    m.loc[(m["n_a"] == 0) | (m["n_b"] == 0), "verdict"] = "time unknown"
    m.loc[~present_a, "verdict"] = "only in B"
    m.loc[~present_b, "verdict"] = "only in A"
    only_a, only_b = int((~present_b).sum()), int((~present_a).sum())
    if only_a or only_b:
        notes.append(f"{only_a} kernel(s) only in run {run_a}, {only_b} only in run {run_b}")
    by_kernel = (
        m[
            [
                "kernel",
                "dispatches_a",
                "dispatches_b",
                "mean_us_a",
                "mean_us_b",
                "delta_us",
                "delta_pct",
                "total_us_a",
                "total_us_b",
                "read_mb_a",
                "read_mb_b",
                "verdict",
            ]
        ]
        # the largest change of GPU time first: the change per dispatch times A's dispatches (B's when only in B)
        .assign(
            _weight=(m["delta_us"] * m["dispatches_a"])
            .abs()
            .where(present_a & present_b, m["total_us_a"].fillna(0))
            .where(present_a, m["total_us_b"].fillna(0))
        )
        .sort_values("_weight", ascending=False, na_position="last", kind="stable")
        .drop(columns="_weight")
        .reset_index(drop=True)
    )
    both = m[present_a & present_b]
    # NaN (unknown) where no dispatch of a side has a time: not 0
    all_a, all_b = float(m["total_us_a"].sum(min_count=1)), float(m["total_us_b"].sum(min_count=1))
    ta, tb = float(both["total_us_a"].sum(min_count=1)), float(both["total_us_b"].sum(min_count=1))
    total = pd.DataFrame(
        [
            {
                "min_change": min_change,
                "min_change_us": min_change_us,
                "kernels_a": int(present_a.sum()),
                "kernels_b": int(present_b.sum()),
                "dispatches_a": int(m["dispatches_a"].sum()),
                "dispatches_b": int(m["dispatches_b"].sum()),
                "us_all_a": all_a,
                "us_all_b": all_b,
                "delta_pct_all": 100 * (all_b - all_a) / all_a if all_a else np.nan,
                "matched_kernels": len(both),
                "us_matched_a": ta if len(both) else np.nan,
                "us_matched_b": tb if len(both) else np.nan,
                "delta_pct": 100 * (tb - ta) / ta if ta else np.nan,
                "kernels_faster": int(both["verdict"].eq("faster").sum()),
                "kernels_slower": int(both["verdict"].eq("slower").sum()),
                "kernels_noise": int(both["verdict"].eq("noise").sum()),
                "kernels_unclear": int(both["verdict"].str.startswith("unclear").sum()),
                # in both runs, but without a timed dispatch in A, in B: not compared
                "kernels_untimed_a": int((both["n_a"] == 0).sum()),
                "kernels_untimed_b": int((both["n_b"] == 0).sum()),
                "kernels_time_unknown": int(both["verdict"].eq("time unknown").sum()),
                "only_in_a": only_a,
                "only_in_b": only_b,
            }
        ]
    )
    return Diff(
        run_a=run_a,
        run_b=run_b,
        by_node=by_kernel,
        by_op=pd.DataFrame(),
        total=total,
        notes=notes,
        kind="kernel",
        warnings=warnings,
    )


#: Column pairs a compact Markdown diff shows in one cell, ``A → B``: (A column, B column, the cell's header).
_PAIRS = (
    ("µs/eval A", "µs/eval B", "µs/eval A → B"),
    ("all nodes µs A", "all nodes µs B", "all nodes µs A → B"),
    ("read MB A", "read MB B", "read MB A → B"),
    ("n A", "n B", "n A → B"),
    ("µs A", "µs B", "µs A → B"),
    ("only A", "only B", "only in A / B"),
    ("dispatches A", "dispatches B", "dispatches A → B"),
    ("total µs A", "total µs B", "total µs A → B"),
)
#: The verdict counts of a per-op row, shown in one cell ``faster / slower / noise / unclear``.
_VERDICT_COUNTS = ("faster", "slower", "noise", "unclear")


def _paired(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` (formatted cells) with each A/B pair of :data:`_PAIRS` in one column and the verdict counts in one."""
    out = df.copy()
    for a, b, header in _PAIRS:
        if a in out.columns and b in out.columns:
            sep = " / " if header == "only in A / B" else " → "
            values = [f"{x}{sep}{y}" for x, y in zip(out[a], out[b], strict=True)]
            at = list(out.columns).index(a)
            out = out.drop(columns=[a, b])
            out.insert(at, header, values)
    if all(c in out.columns for c in _VERDICT_COUNTS):
        at = list(out.columns).index(_VERDICT_COUNTS[0])
        cells = [" / ".join(str(v) for v in row) for row in out[list(_VERDICT_COUNTS)].itertuples(index=False)]
        out = out.drop(columns=list(_VERDICT_COUNTS))
        out.insert(at, "faster / slower / noise / unclear", cells)
    return out


def render_diff(
    d: Diff,
    fmt: str = "markdown",
    top: int = 15,
    names: tuple[str, str] = ("", ""),
    *,
    raw: bool = False,
    all_columns: bool = False,
) -> str:
    """The diff as Markdown (for a PR review comment), a terminal table, CSV or JSON.

    ``top`` limits the per-node table to the largest changes beyond noise (all rows in csv/json);
    ``names`` describe runs A and B (source, labels) in the heading. CSV is the per-node table;
    JSON is one object: ``run_a``, ``run_b``, ``name_a``, ``name_b``, ``total`` (the whole-graph
    and matched-node totals of :attr:`Diff.total`: µs per graph evaluation, % change, verdict
    counts, the noise thresholds), ``by_op``, ``nodes`` (every matched key), ``notes`` and ``warnings``.
    ``raw``: CSV text cells as they are (else formula-leading cells get a ``'``: :func:`.tables.csv_text`).
    Markdown tables pair A and B in one cell (``45.42 → 44.82``) and the verdict counts in one,
    to stay within :data:`.render.MARKDOWN_COLUMNS` columns; ``all_columns`` gives one column each.
    """
    from .tables import json_records, render_frame

    if d.kind == "kernel" and fmt not in ("csv", "json"):
        return _render_kernel_diff(d, fmt, top, names, all_columns=all_columns)
    if fmt == "csv":
        return render_frame(d.by_node, "csv", raw=raw)
    if fmt == "json":
        doc = {
            "run_a": d.run_a,
            "run_b": d.run_b,
            "name_a": names[0],
            "name_b": names[1],
            "total": json_records(d.total)[0],
            "by_op": json_records(d.by_op),
            "nodes": json_records(d.by_node),
            "notes": d.notes,
            "warnings": d.warnings,
        }
        if d.kind == "kernel":  # per kernel: no op types, one row per kernel name
            doc = {**{k: v for k, v in doc.items() if k not in ("by_op", "nodes")}, "kernels": doc["nodes"]}
        return json.dumps(doc, indent=2, allow_nan=False) + "\n"
    md = fmt == "markdown"
    t = d.total.iloc[0]
    pct = "" if pd.isna(t["delta_pct"]) else f" ({t['delta_pct']:+.1f}%)"
    title = _title(d, names, md=md, all_columns=all_columns)
    regrouped = bool(t["only_in_a"] or t["only_in_b"])
    pct_all = "" if pd.isna(t["delta_pct_all"]) else f" ({t['delta_pct_all']:+.1f}%)"
    whole = (
        f"GPU time per graph evaluation, all nodes: {t['us_per_eval_all_a']:,.1f} µs in {int(t['nodes_a'])} nodes → "
        f"{t['us_per_eval_all_b']:,.1f} µs in {int(t['nodes_b'])} nodes{pct_all}."
    )
    verdicts = (
        f"Nodes faster {int(t['nodes_faster'])}, slower {int(t['nodes_slower'])}, within noise {int(t['nodes_noise'])}"
        + (f", unclear (one sample) {int(t['nodes_unclear'])}" if t["nodes_unclear"] else "")
        + (f"; only in A {int(t['only_in_a'])}, only in B {int(t['only_in_b'])}" if regrouped else "")
        + "."
    )
    if not t["matched_nodes"]:
        matched = (
            "No node is in both runs (different models, sizes or graphs): only whole-graph and per-op totals compare."
        )
    else:
        matched = (
            f"{'Of that, the ' if regrouped else 'GPU time per graph evaluation over the '}{int(t['matched_nodes'])} "
            f"nodes in both runs: {t['us_per_eval_a']:,.1f} µs → {t['us_per_eval_b']:,.1f} µs{pct}. {verdicts}"
        )
    head = [title, ""] + ([whole, matched] if regrouped else [matched])
    head.append(
        f"Noise: under 2 standard errors of the difference, under {100 * t['min_change']:g}% of A's time or under "
        f"{t['min_change_us']:g} µs per call."
    )
    head += _note_lines(d.notes, md=md)
    changed = d.by_node[d.by_node["verdict"].isin(["faster", "slower"])]
    if not len(changed) and not t["only_in_a"] and not t["only_in_b"]:
        return "\n".join(head + ["", "No change beyond run-to-run noise."]) + "\n"

    op_frame = d.by_op if (t["only_in_a"] or t["only_in_b"]) else d.by_op.drop(columns=["us_all_a", "us_all_b"])
    by_op = _cells(op_frame).rename(
        columns={
            "us_all_a": "all nodes µs A",
            "us_all_b": "all nodes µs B",
            "us_per_eval_a": "µs/eval A",
            "us_per_eval_b": "µs/eval B",
            "delta_us": "Δ µs",
            "delta_pct": "Δ %",
            "read_mb_per_eval_a": "read MB A",
            "read_mb_per_eval_b": "read MB B",
            "only_a": "only A",
            "only_b": "only B",
        }
    )
    shown = changed.head(top).copy()
    second = shown["occurrence"] > 0  # norm-0 (2nd): the second node of that name in a graph evaluation
    shown["node_name"] = (
        shown["node_name"]
        .astype(str)
        .where(~second, shown["node_name"].astype(str) + " (" + (shown["occurrence"] + 1).map(_ordinal) + ")")
    )
    nodes = _cells(shown.drop(columns=["op_list", "occurrence", "shapes"])).rename(
        columns={
            "node_name": "node",
            "n_a": "n A",
            "n_b": "n B",
            "mean_us_a": "µs A",
            "mean_us_b": "µs B",
            "delta_us": "Δ µs",
            "delta_pct": "Δ %",
            "read_mb_a": "read MB A",
            "read_mb_b": "read MB B",
        }
    )
    if md and not all_columns:
        by_op, nodes = _paired(by_op), _paired(nodes)
    kind = "markdown" if md else "table"
    parts = ["\n".join(head), ""]
    parts.append(
        "**Per op type** (µs per evaluation: sum of the node mean times; µs/eval and Δ over matched nodes)\n"
        if md
        else "Per op type"
    )
    # short numeric cells: a table of up to 16 columns still reads best as columns
    parts.append(render_frame(by_op, kind, width=200, max_columns=20))  # type: ignore[arg-type]
    if len(changed):
        title = f"Nodes that changed beyond noise (largest first, {min(top, len(changed))} of {len(changed)})"
        parts.append(f"**{title}**\n" if md else title)
        parts.append(render_frame(nodes, kind, width=200, max_columns=20))  # type: ignore[arg-type]
    return "\n".join(parts)


#: Columns of a change (B - A): their cells are signed, ``+1.29`` beside ``-0.60``.
_DELTA_COLUMNS = ("delta_us", "delta_pct")


def _cell(v: float, signed: bool = False) -> str:
    """One number as cell text: two decimals, thousands separated, ``—`` for unknown.

    ``signed``: a change, ``+`` before a gain as ``-`` before a loss; one that rounds to zero has
    no sign (``0.00``).
    """
    if pd.isna(v):
        return "—"
    rounded = round(v, 2) + 0.0  # + 0.0 turns -0.0 into 0.0
    return f"{rounded:+,.2f}" if signed and rounded else f"{rounded:,.2f}"


def _cells(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with its float columns as cell text (:func:`_cell`), the changes (:data:`_DELTA_COLUMNS`) signed."""
    out = df.copy()
    for c in out.columns:
        if out[c].dtype.kind == "f":
            out[c] = out[c].map(lambda v, signed=c in _DELTA_COLUMNS: _cell(v, signed))
    return out


def _note_lines(notes: list[str], *, md: bool) -> list[str]:
    """``Note: ...`` lines, each one line whatever the capture holds.

    A note may quote the runs (their GPUs): its controls are escaped, and in Markdown its markup too
    (:func:`~rocroof.text.markdown_text`).
    """
    return [f"Note: {markdown_text(n)}" if md else one_line(f"Note: {n}") for n in notes]


def _title(d: Diff, names: tuple[str, str], *, md: bool, all_columns: bool) -> str:
    """The diff's heading: ``rocroof diff[ per kernel]: A = run 3 (path [labels]), B = run 4 (...)``.

    Compact Markdown folds the runs' paths and labels into a ``<details>`` block, so that the title
    stays one short line. The paths and labels come from the captures: their controls (a newline
    too) are escaped, so that each run's line stays one line, and in Markdown their markup too.
    """
    what = " per kernel" if d.kind == "kernel" else ""
    shown = markdown_text if md else one_line
    a_name = f" ({shown(names[0])})" if names[0] else ""
    b_name = f" ({shown(names[1])})" if names[1] else ""
    if md and not all_columns:
        title = f"**rocroof diff**{what}: run {d.run_a} → run {d.run_b}"
        if any(names):
            runs = f"A = run {d.run_a}{a_name}  \nB = run {d.run_b}{b_name}"
            title += f"\n\n<details><summary>the runs</summary>\n\n{runs}\n\n</details>"
        return title
    bold = "**" if md else ""
    return f"{bold}rocroof diff{bold}{what}: A = run {d.run_a}{a_name}, B = run {d.run_b}{b_name}"


def _us(value: float) -> str:
    """µs for a sentence: ``1,234.5 µs``, or ``unknown time`` for NaN."""
    return "unknown time" if pd.isna(value) else f"{value:,.1f} µs"


def _no_change_line(d: Diff) -> str:
    """The last line of a per-kernel diff where no kernel changed beyond noise, saying what was not compared.

    A kernel in both runs without a timed dispatch on one side (a capture whose timestamps are
    rounded to one value, say) has no samples there: when every kernel is so, nothing was compared,
    and "no change" would mislead.
    """
    t = d.total.iloc[0]
    unknown = int(t.get("kernels_time_unknown", 0) or 0)
    if not unknown:
        return "No change beyond run-to-run noise."
    runs = [run for run, side in ((d.run_a, "a"), (d.run_b, "b")) if t.get(f"kernels_untimed_{side}")]
    where = (
        f"no timed dispatch in run {' or run '.join(str(r) for r in dict.fromkeys(runs))} "
        f"(rocroof runs --notes {runs[0]} says why)"
    )
    if unknown == int(t["matched_kernels"]):
        return f"Nothing to compare: the {unknown} kernel(s) in both runs have {where}."
    return (
        f"No change beyond run-to-run noise in the {int(t['matched_kernels']) - unknown} kernel(s) with times on "
        f"both sides; {unknown} kernel(s) were not compared: {where}."
    )


def _render_kernel_diff(d: Diff, fmt: str, top: int, names: tuple[str, str], *, all_columns: bool) -> str:
    """A :func:`diff_kernels` diff as Markdown or a terminal table (see :func:`render_diff`)."""
    from .render import distinct_short_names
    from .tables import render_frame

    md = fmt == "markdown"
    t = d.total.iloc[0]
    title = _title(d, names, md=md, all_columns=all_columns)
    pct_all = "" if pd.isna(t["delta_pct_all"]) else f" ({t['delta_pct_all']:+.1f}%)"
    pct = "" if pd.isna(t["delta_pct"]) else f" ({t['delta_pct']:+.1f}%)"
    head = [
        title,
        "",
        f"GPU time of the timed dispatches: {_us(t['us_all_a'])} in {int(t['dispatches_a']):,} dispatch(es) of "
        f"{int(t['kernels_a'])} kernel(s) → {_us(t['us_all_b'])} in {int(t['dispatches_b']):,} dispatch(es) of "
        f"{int(t['kernels_b'])} kernel(s){pct_all}.",
    ]
    if t["matched_kernels"]:
        head.append(
            f"The {int(t['matched_kernels'])} kernel(s) in both runs: {_us(t['us_matched_a'])} → "
            f"{_us(t['us_matched_b'])}{pct}. Kernels faster {int(t['kernels_faster'])}, slower "
            f"{int(t['kernels_slower'])}, within noise {int(t['kernels_noise'])}"
            + (f", unclear (one dispatch) {int(t['kernels_unclear'])}" if t["kernels_unclear"] else "")
            + (f", time unknown {int(t['kernels_time_unknown'])}" if t.get("kernels_time_unknown") else "")
            + (
                f"; only in A {int(t['only_in_a'])}, only in B {int(t['only_in_b'])}"
                if t["only_in_a"] or t["only_in_b"]
                else ""
            )
            + "."
        )
    else:
        head.append("No kernel name is in both runs: only the totals compare.")
    head.append(
        f"Noise: under 2 standard errors of the difference of the mean time per dispatch, under "
        f"{100 * t['min_change']:g}% of A's mean or under {t['min_change_us']:g} µs per dispatch."
    )
    head += _note_lines(d.notes, md=md)
    changed = d.by_node[d.by_node["verdict"].isin(["faster", "slower", "only in A", "only in B"])]
    if not len(changed):
        return "\n".join([*head, "", _no_change_line(d)]) + "\n"
    shown = _cells(changed.head(top).drop(columns=["read_mb_a", "read_mb_b"]))
    shown["kernel"] = distinct_short_names(shown["kernel"].tolist(), width=60)
    shown = shown.rename(
        columns={
            "dispatches_a": "dispatches A",
            "dispatches_b": "dispatches B",
            "mean_us_a": "µs A",
            "mean_us_b": "µs B",
            "delta_us": "Δ µs",
            "delta_pct": "Δ %",
            "total_us_a": "total µs A",
            "total_us_b": "total µs B",
        }
    )
    if md and not all_columns:
        shown = _paired(shown)
    label = (
        f"Kernels that changed beyond noise (largest change of GPU time first, {len(shown)} of {len(changed)}; "
        "µs per dispatch)"
    )
    parts = ["\n".join(head), "", f"**{label}**\n" if md else label]
    parts.append(render_frame(shown, "markdown" if md else "table", width=200, max_columns=20))
    return "\n".join(parts)
