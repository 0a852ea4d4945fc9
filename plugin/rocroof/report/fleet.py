"""Many runs at once: the fleet view of a sweep, and sweep-to-sweep regressions.

* :func:`fleet_view`: per op (fused groups apart: ``op_invocation.op_list``) over a set of runs —
  runs it appears in, its share of the fleet's GPU time, its time-weighted % of roof over the
  measured invocations (``op_verdict``: time at roof / time), and the runs where it is furthest
  from its roof.
* :func:`fleet_diff`: two sets of runs (a sweep name or a label selection each), paired by the
  labels that tell runs apart within a side and that both sides share values of (the matrix
  values; a key whose values differ between the sides entirely, like ``env`` or ``case``, is what
  the sides compare, not a pairing key), then :func:`rocroof.report.diff.diff_runs` on every pair
  (its noise rules) and the per-op changes of all pairs ranked by the time they add per graph
  evaluation.

Nothing here prints: :func:`render_fleet` and :func:`render_fleet_diff` return text.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import sqlalchemy as sa

from ..errors import InputError
from ..labels import parse_selector
from ..store import Store
from ..text import markdown_text, one_line
from .diff import MIN_ABSOLUTE_CHANGE_US, MIN_RELATIVE_CHANGE, diff_runs, has_op_invocations

#: Labels every run of a sweep point has of its own (never pairing keys).
_OWN_KEYS = ("sweep_point",)


def select_runs(store: Store, spec: str) -> list[int]:
    """Run ids of a side: ``key=value[,key=value]`` labels, or a sweep's name (the label ``sweep``).

    Raises:
        InputError: nothing matches (the message names the selection).
    """
    text = spec.strip()
    selector = parse_selector(text) if "=" in text else {"sweep": text}
    runs = sorted(store.runs_with_labels(selector))
    if not runs:
        shown = ", ".join(f"{k}={v}" for k, v in selector.items())
        raise InputError(f"{spec!r}: no stored run has the labels {shown} (rocroof runs --label ... lists them)")
    return runs


def labels_of(store: Store, runs: list[int]) -> dict[int, dict[str, str]]:
    """``{run_id: {key: value}}`` of the given runs."""
    if not runs:
        return {}
    rows = store.frame(
        sa.text(f"SELECT run_id, key, value FROM run_label WHERE run_id IN ({', '.join(str(int(r)) for r in runs)})")
    )
    out: dict[int, dict[str, str]] = {int(r): {} for r in runs}
    for r in rows.to_dict("records"):
        out[int(r["run_id"])][str(r["key"])] = str(r["value"])
    return out


def run_names(labels: dict[int, dict[str, str]]) -> dict[int, str]:
    """A short name per run: the labels whose values differ between the runs (``model=a phase=decode``)."""
    keys = sorted({k for lab in labels.values() for k in lab if k not in _OWN_KEYS})
    varying = [k for k in keys if len({lab.get(k) for lab in labels.values()}) > 1 and k != "case"]
    if not varying and any("case" in lab for lab in labels.values()):
        varying = ["case"]
    return {rid: " ".join(f"{k}={lab[k]}" for k in varying if k in lab) or f"run {rid}" for rid, lab in labels.items()}


def split_by_ops(store: Store, runs: list[int]) -> tuple[list[int], list[int]]:
    """``(with ops, without)``: the runs with ggml op rows, and those without, each in the order given.

    A run has op rows when a timing dispatch is attributed to an op invocation; a plain rocprof or
    Nsight capture (no ggml markers or op metadata) has none. Per-op figures cover the first only
    (:func:`left_out_line` names the others).
    """
    with_ops = [r for r in runs if has_op_invocations(store, r)]
    return with_ops, [r for r in runs if r not in with_ops]


def left_out_line(left_out: list[int]) -> str | None:
    """The line that says which runs the per-op figures leave out, and why (None when none is)."""
    if not left_out:
        return None
    ids = ", ".join(str(r) for r in left_out)
    return (
        f"{len(left_out)} run(s) left out: no ggml op rows (captured without ggml markers or op metadata; "
        f"rocroof report --by kernel shows them): run(s) {ids}"
    )


def _per_run_ops(store: Store, runs: list[int]) -> pd.DataFrame:
    """Per run and op list (op_verdict): invocations, time, measured time, time at roof, ``share`` (% of the run).

    Empty (no rows) without runs or op invocations. Times in ns, as floats.
    """
    if not runs:
        return pd.DataFrame()
    ids = ", ".join(str(int(r)) for r in runs)
    per = store.frame(
        sa.text(
            "SELECT run_id, op_list, COUNT(*) AS invocations, SUM(duration_ns) AS duration_ns, "
            "SUM(CASE WHEN time_at_roof_ns IS NOT NULL THEN duration_ns END) AS measured_ns, "
            "SUM(time_at_roof_ns) AS at_roof_ns "
            f"FROM op_verdict WHERE run_id IN ({ids}) AND op_list IS NOT NULL GROUP BY run_id, op_list"
        )
    )
    for c in ("duration_ns", "measured_ns", "at_roof_ns", "invocations"):
        per[c] = pd.to_numeric(per[c], errors="coerce").astype("float64")
    per["share"] = 100.0 * per["duration_ns"] / per.groupby("run_id")["duration_ns"].transform("sum")
    return per


def fleet_view(store: Store, runs: list[int], worst: int = 3) -> pd.DataFrame:
    """Per op over ``runs``: the fleet's view (module docstring).

    Runs without op rows (:func:`split_by_ops`) have no part in it: they add no time to the fleet's
    and do not name the others (the labels that tell runs apart are those of the runs with ops).

    Returns:
        One row per op list, most fleet time first: ``op_list``, ``runs`` (runs it ran in),
        ``invocations``, ``duration_ns``, ``share_of_fleet_pct`` (of all the runs' GPU time),
        ``mean_share_of_run_pct`` (its share of each run's time, averaged over the runs it ran
        in), ``pct_of_roof`` (time at roof / time over its measured invocations, all runs),
        ``measured_runs``, ``worst_runs`` (the ``worst`` runs furthest from the roof:
        ``name (pct%)``, ``; ``-joined) and ``worst_run_ids`` (their run ids, space-separated).
    """
    cols = [
        "op_list",
        "runs",
        "invocations",
        "duration_ns",
        "share_of_fleet_pct",
        "mean_share_of_run_pct",
        "pct_of_roof",
        "measured_runs",
        "worst_runs",
        "worst_run_ids",
    ]
    per = _per_run_ops(store, runs)
    if not len(per):
        return pd.DataFrame(columns=cols)
    per["pct"] = 100.0 * per["at_roof_ns"] / per["measured_ns"]
    names = run_names(labels_of(store, [r for r in runs if r in set(per["run_id"].astype(int))]))
    total = float(per["duration_ns"].sum())
    rows = []
    for op_list, g in per.groupby("op_list", sort=False):
        m = g[g["measured_ns"] > 0]
        pct = float(m["at_roof_ns"].sum() / m["measured_ns"].sum() * 100.0) if len(m) else np.nan
        furthest = m.sort_values("pct").head(worst)
        rows.append(
            {
                "op_list": str(op_list),
                "runs": int(g["run_id"].nunique()),
                "invocations": int(g["invocations"].sum()),
                "duration_ns": float(g["duration_ns"].sum()),
                "share_of_fleet_pct": 100.0 * float(g["duration_ns"].sum()) / total if total else np.nan,
                "mean_share_of_run_pct": float(g["share"].mean()),
                "pct_of_roof": pct,
                "measured_runs": int(len(m)),
                "worst_runs": "; ".join(f"{names[int(r.run_id)]} ({r.pct:.1f}%)" for r in furthest.itertuples()),
                "worst_run_ids": " ".join(str(int(r)) for r in furthest["run_id"]),
            }
        )
    return pd.DataFrame(rows, columns=cols).sort_values("duration_ns", ascending=False).reset_index(drop=True)


def fleet_matrix(store: Store, runs: list[int], ops: int = 20) -> pd.DataFrame:
    """Each op's share (%) of each run's GPU time: the fleet heat map's matrix.

    Returns:
        Index: the ``ops`` op lists with the most fleet time (most first); columns: the runs with op
        rows (:func:`split_by_ops`), named by :func:`run_names`, in run order; NaN where an op did not run.
    """
    per = _per_run_ops(store, runs)
    if not len(per):
        return pd.DataFrame()
    order = per.groupby("op_list")["duration_ns"].sum().sort_values(ascending=False).head(ops).index
    present = set(per["run_id"].astype(int))
    runs = [r for r in runs if r in present]  # a run without op rows: no column of NaN
    names = run_names(labels_of(store, runs))
    wide = per.pivot(index="op_list", columns="run_id", values="share").reindex(index=order, columns=runs)
    wide.columns = [names[int(r)] for r in wide.columns]
    return wide


@dataclass
class FleetDiff:
    """Two sides compared pair by pair.

    Attributes:
        keys: the labels runs were paired by.
        pairs: one row per pair: ``pair`` (the pairing labels), ``run_a``, ``run_b``,
            ``us_per_eval_a``/``_b`` (all nodes, µs per graph evaluation), ``delta_pct``,
            ``nodes_slower``, ``nodes_faster``.
        ops: per pair and op, ranked by the µs it adds per evaluation (regressions first): ``pair``,
            ``op``, ``us_a``, ``us_b`` (all nodes of that op), ``delta_us``, ``delta_pct``,
            ``slower``, ``faster``, ``only_a``, ``only_b`` (nodes), ``verdict``.
        unpaired_a, unpaired_b: runs without a partner (name per run).
        ambiguous: pairing values held by several runs of one side (not compared).
        skipped: pairs not compared, one line each with why (a run of the pair has no ggml op rows).
    """

    keys: list[str]
    pairs: pd.DataFrame
    ops: pd.DataFrame
    unpaired_a: list[str] = field(default_factory=list)
    unpaired_b: list[str] = field(default_factory=list)
    ambiguous: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def pairing_keys(labels_a: dict[int, dict[str, str]], labels_b: dict[int, dict[str, str]]) -> list[str]:
    """Label keys every run of both sides has, whose values the two sides share at least one of."""
    every = [set(lab) for lab in (*labels_a.values(), *labels_b.values())]
    common = set.intersection(*every) if every else set()
    keys = []
    for k in sorted(common - set(_OWN_KEYS)):
        va = {lab[k] for lab in labels_a.values()}
        vb = {lab[k] for lab in labels_b.values()}
        if va & vb:
            keys.append(k)
    return keys


def fleet_diff(
    store: Store,
    runs_a: list[int],
    runs_b: list[int],
    *,
    min_change: float = MIN_RELATIVE_CHANGE,
    min_change_us: float = MIN_ABSOLUTE_CHANGE_US,
) -> FleetDiff:
    """Pair the runs of two sides and diff every pair (module docstring).

    A pair with a run that has no ggml op rows (a plain kernel capture) is not compared: it is
    listed in :attr:`FleetDiff.skipped` with the run that lacks them.

    Raises:
        InputError: the sides overlap, or no pair could be made (or every pair was skipped).
    """
    both = sorted(set(runs_a) & set(runs_b))
    if both:
        raise InputError(f"runs {', '.join(map(str, both))} are on both sides: the sides must not overlap")
    la, lb = labels_of(store, runs_a), labels_of(store, runs_b)
    keys = pairing_keys(la, lb)
    names = run_names({**la, **lb})

    def key_of(lab: dict[str, str]) -> tuple[str, ...]:
        return tuple(lab[k] for k in keys)

    index_a: dict[tuple[str, ...], list[int]] = {}
    index_b: dict[tuple[str, ...], list[int]] = {}
    for rid, lab in la.items():
        index_a.setdefault(key_of(lab), []).append(rid)
    for rid, lab in lb.items():
        index_b.setdefault(key_of(lab), []).append(rid)
    ambiguous = [
        " ".join(f"{k}={v}" for k, v in zip(keys, key, strict=True))
        for key in sorted(set(index_a) | set(index_b))
        if len(index_a.get(key, [])) > 1 or len(index_b.get(key, [])) > 1
    ]
    pair_rows, op_rows, skipped = [], [], []
    paired_a: set[int] = set()  # runs with a partner, compared or skipped
    paired_b: set[int] = set()
    # a pair is named by the pairing labels whose values differ between pairs (model=a phase=decode)
    paired_keys = sorted(set(index_a) & set(index_b))
    shown = [i for i, k in enumerate(keys) if len({key[i] for key in paired_keys}) > 1]
    for key in paired_keys:
        if len(index_a[key]) != 1 or len(index_b[key]) != 1:
            continue
        a, b = index_a[key][0], index_b[key][0]
        name = " ".join(f"{keys[i]}={key[i]}" for i in shown) or f"run {a} vs run {b}"
        paired_a.add(a)
        paired_b.add(b)
        without = [r for r in (a, b) if not has_op_invocations(store, r)]
        if without:
            skipped.append(
                f"{name} (runs {a} → {b}): run {' and run '.join(map(str, without))} "
                f"{'has' if len(without) == 1 else 'have'} no ggml op rows (captured without ggml markers or "
                "op metadata; rocroof report --by kernel shows them)"
            )
            continue
        d = diff_runs(store, a, b, min_change=min_change, min_change_us=min_change_us)
        t = d.total.iloc[0]
        pair_rows.append(
            {
                "pair": name,
                "run_a": a,
                "run_b": b,
                "us_per_eval_a": float(t["us_per_eval_all_a"]),
                "us_per_eval_b": float(t["us_per_eval_all_b"]),
                "delta_pct": float(t["delta_pct_all"]),
                "nodes_slower": int(t["nodes_slower"]),
                "nodes_faster": int(t["nodes_faster"]),
            }
        )
        for r in d.by_op.to_dict("records"):
            us_a, us_b = float(r["us_all_a"]), float(r["us_all_b"])
            delta = us_b - us_a
            if r["slower"] or r["only_b"]:
                verdict = "slower" if delta > 0 else "mixed"
            elif r["faster"] or r["only_a"]:
                verdict = "faster" if delta < 0 else "mixed"
            else:
                verdict = "noise"
            op_rows.append(
                {
                    "pair": name,
                    "op": r["op"],
                    "us_a": us_a,
                    "us_b": us_b,
                    "delta_us": delta,
                    "delta_pct": 100.0 * delta / us_a if us_a else np.nan,
                    "slower": int(r["slower"]),
                    "faster": int(r["faster"]),
                    "only_a": int(r["only_a"]),
                    "only_b": int(r["only_b"]),
                    "verdict": verdict,
                }
            )
    if not pair_rows and skipped:
        raise InputError(f"no pair could be compared: every one has a run without ggml op rows: {'; '.join(skipped)}")
    if not pair_rows:
        raise InputError(
            f"no run of A pairs with one of B by the labels they share ({', '.join(keys) or 'none'}): "
            "give sides that differ in one label, e.g. env=fusion and env=no-fusion"
        )
    ops = pd.DataFrame(op_rows).sort_values("delta_us", ascending=False, kind="stable").reset_index(drop=True)
    return FleetDiff(
        keys=keys,
        pairs=pd.DataFrame(pair_rows).sort_values("delta_pct", ascending=False).reset_index(drop=True),
        ops=ops,
        unpaired_a=[names[r] for r in runs_a if r not in paired_a],
        unpaired_b=[names[r] for r in runs_b if r not in paired_b],
        ambiguous=ambiguous,
        skipped=skipped,
    )


def _num(v: object, signed: bool = False) -> str:
    if v is None or pd.isna(v):
        return "?"
    return f"{v:+,.1f}" if signed else f"{v:,.1f}"


def render_fleet(view: pd.DataFrame, fmt: str, runs: int, left_out: list[int] | None = None) -> str:
    """Text of :func:`fleet_view`: CSV/JSON raw rows; a table or Markdown for people, with its key.

    ``runs``: the runs the view covers (those with op rows); ``left_out``: the selected runs without
    op rows, named under the heading (:func:`left_out_line`; CSV and JSON carry rows only).
    """
    from .tables import render_frame

    if fmt in ("csv", "json"):
        return render_frame(view, fmt)  # type: ignore[arg-type]
    people = pd.DataFrame(
        {
            "op": view["op_list"],
            "runs": view["runs"].map(lambda v: f"{int(v):,}"),
            "time µs": view["duration_ns"].map(lambda v: f"{v / 1e3:,.1f}"),
            "% fleet": view["share_of_fleet_pct"].map(_num),
            "mean % run": view["mean_share_of_run_pct"].map(_num),
            "% roof": view["pct_of_roof"].map(_num),
            "furthest from the roof": view["worst_runs"].map(lambda v: v or "—"),
        }
    )
    gap = "\n" if fmt == "markdown" else ""  # Markdown keeps a table apart from the lines around it
    left = left_out_line(left_out or [])
    return (
        f"{runs} run(s); {len(view)} op(s), most GPU time first"
        + (("  \n" if fmt == "markdown" else "\n") + left if left else "")  # Markdown: a line break, not a space
        + "\n"
        + gap
        + render_frame(people, fmt, wrap=["op", "furthest from the roof"])  # type: ignore[arg-type]
        + f"{gap}% fleet = share of all the runs' GPU time; % roof = time at the governing roof / time over the "
        "measured invocations (op_verdict); furthest = the runs with the lowest % roof\n"
    )


def regressions(d: FleetDiff, fail_pct: float) -> tuple[list[str], bool]:
    """The lines a CI log needs for ``--fail-on-regression``, and whether it fails.

    One warning per side with runs left uncompared, one line per pair whose GPU time per graph
    evaluation grew by more than ``fail_pct`` percent.

    Raises:
        InputError: ``fail_pct`` is negative or not finite (NaN or infinite would pass every pair).
    """
    if not np.isfinite(fail_pct) or fail_pct < 0:
        raise InputError(f"--fail-on-regression {fail_pct}: expected a finite percentage >= 0")
    lines = [
        one_line(f"warning: {len(names)} run(s) {what} were not compared: {'; '.join(names)}")
        for what, names in (("only in A", d.unpaired_a), ("only in B", d.unpaired_b))
        if names
    ]
    lines += [one_line(f"warning: pair not compared: {line}") for line in d.skipped]
    failing = d.pairs[d.pairs["delta_pct"] > fail_pct]
    lines += [
        one_line(
            f"regression: {r.pair} (runs {r.run_a} → {r.run_b}) {r.delta_pct:+.1f}% GPU time per graph evaluation, "
            f"above --fail-on-regression {fail_pct:g}%"
        )
        for r in failing.itertuples()
    ]
    return lines, bool(len(failing))


def render_fleet_diff(
    d: FleetDiff, fmt: str, side_a: str, side_b: str, *, top: int = 15, fail_pct: float | None = None
) -> str:
    """Text of :func:`fleet_diff`.

    JSON: every pair and op change, the pairing labels, unpaired and ambiguous runs, skipped pairs,
    the threshold and whether it was crossed; CSV: the op changes; table and Markdown: the pairs,
    the ``top`` op changes adding the most time, those saving the most (matched nodes that got
    faster: an op whose time moved into a fused group of the other side is regrouping, not a
    saving), the runs not compared, and one line per pair skipped (a run without ggml op rows).
    Markdown keeps each table between blank lines.
    """
    import json

    from .tables import json_records, render_frame

    if fmt == "json":
        doc = {
            "side_a": side_a,
            "side_b": side_b,
            "fail_on_regression_pct": fail_pct,
            "regressed": bool(fail_pct is not None and (d.pairs["delta_pct"] > fail_pct).any()),
            "paired_by": d.keys,
            "pairs": json_records(d.pairs),
            "ops": json_records(d.ops),
            "unpaired_a": d.unpaired_a,
            "unpaired_b": d.unpaired_b,
            "ambiguous": d.ambiguous,
            "skipped": d.skipped,
        }
        return json.dumps(doc, indent=2, allow_nan=False) + "\n"
    if fmt == "csv":
        return render_frame(d.ops, "csv")
    md = fmt == "markdown"
    pairs = pd.DataFrame(
        {
            "pair": d.pairs["pair"],
            "runs": [f"{a} → {b}" for a, b in zip(d.pairs["run_a"], d.pairs["run_b"], strict=True)],
            "µs/eval": [
                f"{_num(a)} → {_num(b)}"
                for a, b in zip(d.pairs["us_per_eval_a"], d.pairs["us_per_eval_b"], strict=True)
            ],
            "Δ %": d.pairs["delta_pct"].map(lambda v: _num(v, True)),
        }
    )
    head = one_line(f"{side_a} → {side_b}: {len(d.pairs)} pair(s), paired by {', '.join(d.keys) or 'nothing'}")
    out = [f"**{markdown_text(head)}**\n" if md else head]  # the sides as typed: their markup escaped
    out.append(render_frame(pairs, fmt).rstrip("\n"))  # type: ignore[arg-type]

    def op_table(ops: pd.DataFrame) -> pd.DataFrame:
        return pd.DataFrame(
            {
                "pair": ops["pair"],
                "op": ops["op"],
                "µs/eval": [f"{_num(a)} → {_num(b)}" for a, b in zip(ops["us_a"], ops["us_b"], strict=True)],
                "Δ µs": ops["delta_us"].map(lambda v: _num(v, True)),
                "Δ %": ops["delta_pct"].map(lambda v: _num(v, True)),
                "nodes only in B": ops["only_b"].map(str),
                "verdict": ops["verdict"],
            }
        )

    added = d.ops[(d.ops["delta_us"] > 0) & (d.ops["verdict"] != "noise")].head(top)
    saved = (
        d.ops[(d.ops["delta_us"] < 0) & (d.ops["verdict"] == "faster")].sort_values("delta_us").head(max(1, top // 3))
    )
    for rows, title in (
        (added, f"Op changes adding the most time per graph evaluation (top {len(added)} of {len(d.ops)}):"),
        (saved, f"Op changes saving the most time (top {len(saved)}):"),
    ):
        if len(rows):
            out.append(("\n**" + title + "**\n") if md else "\n" + title)
            out.append(render_frame(op_table(rows), fmt).rstrip("\n"))  # type: ignore[arg-type]
    for what, names in (("only in A", d.unpaired_a), ("only in B", d.unpaired_b), ("ambiguous", d.ambiguous)):
        if names:
            line = f"{what} (not compared): {'; '.join(names)}"  # runs named by their labels
            out.append("\n" + markdown_text(line) if md else one_line(line))
    for line in d.skipped:  # one line per pair, with why
        text = f"not compared: {line}"
        out.append("\n" + markdown_text(text) if md else one_line(text))
    return "\n".join(out) + "\n"
