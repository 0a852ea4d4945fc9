"""``rocroof advise``: what would pay most, with the evidence for why it is slow.

Op invocations are grouped by what a kernel engineer would change at once: the op (or fused
group), the weight type and the shapes (``op_invocation.op_list, quant, ne, src_ne``). Each group
is ranked by the time it would save at its governing roof (``op_verdict.time_over_roof_ns``,
Williams et al., CACM 2009); when only some invocations were counted (``collect --sample``) the
saving is the group's whole time times the measured invocations' share over the roof, and says so.

Each group carries its likely causes as evidence, not verdicts (thresholds below, each named):

* ``launch-bound``: kernels shorter than :data:`SHORT_CALL_US` on average (a call, one op invocation,
  may launch several) in evaluations where the GPU idles
  more than :data:`IDLE_SHARE` of the wall time (:mod:`rocroof.analysis.timeline`), or the
  roofline's latency verdict.
* ``re-reads``: measured / modelled DRAM bytes above :data:`REREAD_RATIO` (the reports' band).
* ``cache-resident``: measured DRAM bytes under :data:`CACHED_RATIO` of the model while the L2
  moves over :data:`L2_OVER_DRAM` times the DRAM traffic (Nsight ``lts__t_bytes.sum`` against
  ``dram__bytes_*``), in a run whose caches were not flushed before each kernel; a flushed run
  (Nsight's default ``--cache-control all``) cannot show residency, nor one whose replay passes
  warmed the L2 (the ``warm-replay`` warning), and the cause is not given.
* ``re-reads`` needs more than a few KB a call: tiny ops' fixed per-kernel traffic is not re-reading.
* ``low occupancy``: theoretical occupancy below :data:`LOW_OCCUPANCY_PCT` (Nsight
  ``sm__maximum_warps_per_active_cycle_pct``) or a grid of less than one wave
  (``launch__waves_per_multiprocessor`` < 1: SMs left empty).
* ``counted ops``: for matrix ops, the operations the counters counted (rocroof.analysis.ops: dp4a
  and int8 tensor ops for ggml's int8 matmuls, FLOPs otherwise) outside :data:`OPS_BAND` times the
  modelled FLOPs.
* ``compute-bound, low`` / ``memory-bound, low``: bound by a ceiling at under
  :data:`LOW_COMPUTE_PCT` / :data:`LOW_MEMORY_PCT` of it, with none of the causes above to explain it.

Nothing here prints; :func:`build_advice` returns data, :func:`render_advice` text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal, TypeGuard

import numpy as np
import pandas as pd
import sqlalchemy as sa

from ..analysis.moe import expert_loads, layer_expert_tokens, layer_skew
from ..analysis.ops import counter_names, measured_ops
from ..analysis.timeline import GRAPHS_RECOVER_AT_MOST, evaluation_timeline, host_gaps
from ..records import Note
from ..store import Store, schema
from ..text import cell_text, markdown_text
from .render import gpu_text
from .tables import json_records, render_frame, run_labels, run_notes

#: Calls shorter than this (µs) are launch/latency sized: a kernel launch costs a few µs of host time.
SHORT_CALL_US = 10.0
#: GPU idle share of an evaluation above which its short calls are called launch-bound.
IDLE_SHARE = 0.5
#: Measured / modelled DRAM bytes above this: re-reads (the band the reports mark, [0.7, 1.3]).
REREAD_RATIO = 1.3
#: Calls modelled under this many bytes are too small to call re-reading: a kernel moves a few KB of
#: its own (cache lines, partial writes), which the reports explain the same way.
SMALL_OP_BYTES = 64 * 1024
#: L2 bytes over DRAM bytes above this, with measured DRAM bytes under :data:`CACHED_RATIO` of the
#: model: the op's inputs were in the L2 (measured only without cache flush). L2 traffic far above DRAM
#: traffic alone is ordinary operand reuse (a matmul's tiles, a norm's row).
L2_OVER_DRAM = 3.0
CACHED_RATIO = 0.7
#: Theoretical occupancy (% of the SM's warp slots) below this: too few warps to hide latency.
LOW_OCCUPANCY_PCT = 25.0
#: Compute-bound groups under this % of their compute peak.
LOW_COMPUTE_PCT = 50.0
#: Memory-bound groups under this % of the DRAM ceiling (ggml's decode matmuls reach 60-90% on an H200).
LOW_MEMORY_PCT = 50.0

#: Counted operations over modelled FLOPs outside this band are flagged for matrix ops. Inside it:
#: ggml's quantized dot products add activation-sum dp4a (Q4_K: 1 + 1/rows per thread, 1.25 at four
#: rows, 2 at one; docs/measured-ops.md) and MMQ pads M to its tile; Q6_K counts 1.00.
OPS_BAND = (0.9, 2.05)
#: Ops whose FLOPs are products the model counts exactly (the band above applies to them).
_MATRIX_OPS = (
    "MUL_MAT",
    "MUL_MAT_ID",
    "FLASH_ATTN_EXT",
    "OUT_PROD",
    "CONV_2D",
    "CONV_TRANSPOSE_1D",
    "CONV_TRANSPOSE_2D",
)

#: Nsight's L2 bytes (reads and writes), summed per op invocation.
_L2 = {"lts__t_bytes.sum": "l2_bytes"}
#: Per-dispatch launch facts (means): theoretical occupancy %, waves per SM.
_OCCUPANCY = {
    "sm__maximum_warps_per_active_cycle_pct": "occupancy_pct",
    "launch__waves_per_multiprocessor": "waves_per_sm",
}
#: AMD L2 (TCC) hits and misses, summed over instances by the readers (``_sum`` in rocprofv3 names).
_TCC = {"TCC_HIT": "l2_hits", "TCC_HIT_sum": "l2_hits", "TCC_MISS": "l2_misses", "TCC_MISS_sum": "l2_misses"}

Format = Literal["table", "markdown", "csv", "json"]


@dataclass
class Advice:
    """What ``rocroof advise`` found for one run.

    Attributes:
        run: the run's row. labels: its labels. ceilings: ``run_ceiling`` name -> value.
        groups: the ranked op groups (columns in :data:`GROUP_COLUMNS`), most recoverable first.
        evaluations: :func:`rocroof.analysis.timeline.evaluation_timeline` rows, with ``tokens``.
        moe_layers: :func:`rocroof.analysis.moe.layer_skew` rows (empty without MoE routing).
        sampled: only some invocations were counted (the savings are scaled).
        flushed: the counter pass flushed caches before each kernel, or its DRAM bytes were counted on
            an L2 that earlier replay passes warmed (no cache-resident cause either way).
        whole_run: the run has no graph evaluations (no op metadata): ``evaluations`` holds one
            row for the whole run's timing-pass kernels.
        notes: the run's warnings.
    """

    run: dict[str, Any]
    labels: dict[str, str]
    ceilings: dict[str, float]
    groups: pd.DataFrame
    evaluations: pd.DataFrame
    moe_layers: pd.DataFrame
    sampled: bool = False
    flushed: bool = False
    whole_run: bool = False
    notes: list[Note] = field(default_factory=list)


GROUP_COLUMNS = [
    "rank",
    "group",
    "op_list",
    "quant",
    "ne",
    "src_ne",
    "example_node",
    "invocations",
    "dispatches",
    "duration_ns",
    "share_of_time_pct",
    "mean_us_per_call",
    "mean_us_per_kernel",
    "measured_invocations",
    "time_at_roof_ns",
    "recoverable_ns",
    "pct_of_ceiling",
    "bound",
    "governing_ceiling",
    "measured_over_model",
    "model_bytes_per_call",
    "l2_bytes",
    "l2_over_dram",
    "l2_achieved_gbps",
    "pct_of_l2_ceiling",
    "l2_hit_pct",
    "occupancy_pct",
    "waves_per_sm",
    "measured_flop",
    "measured_int_ops",
    "tensor_flop",
    "tensor_int_ops",
    "dp4a_ops",
    "model_flop",
    "measured_ops_over_model",
    "ops_counted_as",
    "idle_share",
    "host_us_per_op",
    "causes",
]


def _frame(store: Store, sql: str, run_id: int) -> pd.DataFrame:
    return store.frame(sa.text(sql), {"rid": run_id})


def _shape(op_list: str, ne: Any, src_ne: Any, quant: Any) -> str:
    """A short name of a group: its op list, weight type and shapes.

    ``MUL_MAT q4_K 1024x3072 @ 1`` (K x N weights at M tokens), ``MUL_MAT_ID q4_K 2048x768x32e @ 171``
    (32 experts), or the output shape for other ops.
    """
    try:
        srcs = json.loads(src_ne) if isinstance(src_ne, str) else None
        out = json.loads(ne) if isinstance(ne, str) else None
    except ValueError:
        srcs = out = None
    head = op_list.split("+")[0]
    q = f" {quant}" if isinstance(quant, str) and quant and head.startswith("MUL_MAT") else ""
    if head == "MUL_MAT_ID" and srcs and len(srcs) >= 2 and len(srcs[0]) >= 3 and len(srcs[1]) >= 3:
        # weights [K, N, experts], activations [K, experts used per token, tokens] (ggml_mul_mat_id)
        return f"{op_list}{q} {srcs[0][0]}x{srcs[0][1]}x{srcs[0][2]}e @ {srcs[1][2]}"
    if head.startswith("MUL_MAT") and srcs and len(srcs) >= 2 and len(srcs[0]) >= 2 and len(srcs[1]) >= 2:
        return f"{op_list}{q} {srcs[0][0]}x{srcs[0][1]} @ {srcs[1][1]}"
    if out:
        dims = [str(d) for d in out]
        while len(dims) > 1 and dims[-1] == "1":
            dims.pop()
        return f"{op_list} [{','.join(dims)}]"
    return op_list


def _node_stem(name: Any) -> str:
    """``ffn_gate-27`` -> ``ffn_gate`` (llama.cpp suffixes the layer)."""
    text = str(name) if isinstance(name, str) else ""
    head, sep, tail = text.rpartition("-")
    return head if sep and tail.isdigit() else text


def build_advice(store: Store, run_id: int) -> Advice:
    """Rank one stored run's op groups by recoverable time, with causes; the launch and MoE views.

    Reads ``op_verdict``, ``op_roofline``, ``op_invocation``, ``dispatch_record`` (timing pass),
    ``op_model.evaluation`` and ``counter_value`` (L2 bytes, occupancy). Raises nothing beyond the
    store's errors: a run without op metadata yields no groups (the verdicts need the model).
    """
    run = store.frame(sa.select(schema.run).where(schema.run.c.run_id == run_id)).to_dict("records")[0]
    ceil = store.frame(sa.select(schema.run_ceiling).where(schema.run_ceiling.c.run_id == run_id))
    ceilings = {str(r["name"]): float(r["value"]) for r in ceil.to_dict("records") if pd.notna(r["value"])}
    notes = run_notes(store, run_id)
    sampled = any(n.code == "counter-sample" for n in notes)
    # a counter pass that flushed the caches, or whose replay passes may have warmed the L2 (the
    # warm-replay warning): either way L2 / DRAM says nothing about residency
    flushed = str(run.get("cache_control") or "").lower() in ("all", "flush", "flush-all") or any(
        n.code == "warm-replay" for n in notes
    )

    kernels = _frame(
        store,
        "SELECT d.start_ns, d.end_ns, d.launch_ns, d.op_index, m.evaluation "
        "FROM dispatch_record d JOIN pass p ON p.run_id = d.run_id AND p.pass_index = d.pass_index "
        "LEFT JOIN op_model m ON m.run_id = d.run_id AND m.op_index = d.op_index "
        "WHERE d.run_id = :rid AND p.is_timing_pass",
        run_id,
    )
    whole_run = bool(len(kernels)) and not kernels["evaluation"].notna().any()
    if whole_run:  # no graph evaluations (no op metadata): the run's kernels as one window
        kernels = kernels.assign(evaluation=0)
    evaluations = evaluation_timeline(kernels)
    gaps = host_gaps(kernels)
    counters = _counter_sums(store, run_id, [*_L2, *_OCCUPANCY, *_TCC, *_op_counters(run.get("gpu_arch"))])
    counters["total"] = _measure(counters["total"])
    # a counter several passes collected (rocprofiler-compute repeats some in each pass) counts once:
    # the first pass's values
    counters = counters.sort_values(["pass_index", "op_index"], kind="stable").drop_duplicates(
        ["op_index", "counter_name"], keep="first"
    )
    facts = _counter_facts(counters, run.get("gpu_arch"))
    del counters
    totals = _GroupTotals()
    tokens: list[pd.Series] = []  # per batch: the largest MUL_MAT* ``m`` of each evaluation
    routed: list[pd.DataFrame] = []  # the routing load of the MUL_MAT_ID invocations (the MoE view)
    # the invocations a batch at a time: memory holds one batch and the groups' sums, not the run's
    # ~10^6 invocations of 24 columns (0.9 GB at 10^6)
    for inv in store.frame_batches(sa.text(_INVOCATIONS_SQL), {"rid": run_id}, batch_rows=INVOCATION_BATCH_ROWS):
        if not len(inv):
            continue
        if len(evaluations):
            mul_mat = inv[inv["op"].astype(str).str.startswith("MUL_MAT")]
            tokens.append(pd.to_numeric(mul_mat["m"], errors="coerce").groupby(mul_mat["evaluation"]).max())
        # each routed invocation's load: a dozen numbers, not its 24 columns and JSON counts
        loads = expert_loads(inv[inv["op"] == "MUL_MAT_ID"])
        if len(loads):
            routed.append(loads)
        with np.errstate(over="ignore", invalid="ignore"):  # damaged readings (1e308 summed): unknown, not a warning
            _invocation_facts(inv, facts, evaluations, gaps)
            totals.add(inv)
        del inv
    if len(evaluations) and totals.rows:
        by_evaluation = pd.concat(tokens) if tokens else pd.Series(dtype="float64")
        evaluations["tokens"] = evaluations["evaluation"].map(by_evaluation.groupby(level=0).max())
    else:
        evaluations["tokens"] = pd.Series(dtype="float64")
    moe_layers = layer_skew(pd.concat(routed, ignore_index=True) if routed else expert_loads(_no_invocations()))
    del routed
    with np.errstate(over="ignore", invalid="ignore"):
        groups = totals.groups(flushed=flushed, l2_gbps=ceilings.get("l2_gbps"))
    return Advice(
        run=run,
        labels=run_labels(store, run_id),
        ceilings=ceilings,
        groups=groups,
        evaluations=evaluations,
        moe_layers=moe_layers,
        sampled=sampled,
        flushed=flushed,
        whole_run=whole_run,
        notes=[n for n in notes if n.severity != "info"],
    )


def _counter_sums(store: Store, run_id: int, names: list[str]) -> pd.DataFrame:
    """Per op invocation, pass and counter of ``names``: the sum of the readings and of their times.

    Columns ``op_index, pass_index, counter_name, total, kernels, timed, time``: ``total`` the sum of
    the counter's numeric readings over the pass's dispatches of the invocation, ``kernels`` how many
    there are, ``timed`` the sum of reading x ``duration_ns``, ``time`` the ``duration_ns`` of those
    dispatches (ns). A row for each (invocation, pass, counter) with at least one stored reading,
    as a GROUP BY over the ``counter_value`` view gives; read from ``counter_reading``'s columns
    directly, one scan per block of 16 counters (through the view: 16 s at 10^6 dispatches, 8 counters).
    """
    cr, ct = schema.counter_reading, schema.counter
    found = store.frame(
        sa.select(ct.c.counter_index, ct.c.counter_name).where(
            ct.c.run_id == run_id, ct.c.counter_name.in_(sorted(set(names)))
        )
    ).itertuples(index=False)
    frames = []
    by_block: dict[int, list[tuple[int, str]]] = {}
    for index, name in found:
        block, slot = divmod(int(index), schema.COUNTERS_PER_READING)
        by_block.setdefault(block, []).append((slot, str(name)))
    sqlite = store.engine.dialect.name == "sqlite"
    d = schema.dispatch_record
    for block, counters in sorted(by_block.items()):
        columns: list[Any] = [d.c.op_index, d.c.pass_index]
        for k, (slot, _) in enumerate(counters):
            raw = cr.c[f"value_{slot}"]
            # SQLite keeps whatever a damaged row holds: text counts as unknown, not as 0
            value = sa.case((sa.func.typeof(raw).in_(("integer", "real")), raw)) if sqlite else raw
            columns += [
                sa.func.count(raw).label(f"stored_{k}"),
                sa.func.sum(value).label(f"total_{k}"),
                sa.func.count(value).label(f"kernels_{k}"),
                sa.func.sum(value * d.c.duration_ns).label(f"timed_{k}"),
                sa.func.sum(sa.case((value.is_not(None), d.c.duration_ns))).label(f"time_{k}"),
            ]
        wide = store.frame(
            sa.select(*columns)
            .select_from(cr.join(d, sa.and_(d.c.run_id == cr.c.run_id, d.c.dispatch_index == cr.c.dispatch_index)))
            .where(cr.c.run_id == run_id, cr.c.block == block, d.c.op_index.is_not(None))
            .group_by(d.c.op_index, d.c.pass_index)
        )
        for k, (_, name) in enumerate(counters):
            part = wide[wide[f"stored_{k}"].astype("int64") > 0]
            frames.append(
                pd.DataFrame(
                    {
                        "op_index": part["op_index"],
                        "pass_index": part["pass_index"],
                        "counter_name": name,
                        **{c: part[f"{c}_{k}"] for c in ("total", "kernels", "timed", "time")},
                    }
                )
            )
    columns_out = ["op_index", "pass_index", "counter_name", "total", "kernels", "timed", "time"]
    if not frames:
        return pd.DataFrame(columns=columns_out)
    return (
        pd.concat(frames, ignore_index=True)
        .sort_values(["op_index", "pass_index", "counter_name"], kind="stable")
        .reset_index(drop=True)[columns_out]
    )


def expert_tokens(store: Store, run_id: int) -> pd.DataFrame:
    """Tokens routed to each expert of each MoE layer over the run (the heat map's matrix; empty without routing).

    From the stored ``op_invocation`` rows of ``MUL_MAT_ID`` with ``tokens_per_expert``
    (:func:`rocroof.analysis.moe.layer_expert_tokens`).
    """
    ops = _frame(
        store,
        "SELECT i.op_index, i.layer, m.evaluation, i.tokens_per_expert FROM op_invocation i "
        "LEFT JOIN op_model m ON m.run_id = i.run_id AND m.op_index = i.op_index "
        "WHERE i.run_id = :rid AND i.op = 'MUL_MAT_ID' AND i.tokens_per_expert IS NOT NULL",
        run_id,
    )
    return layer_expert_tokens(ops) if len(ops) else pd.DataFrame()


def _op_counters(arch: Any) -> list[str]:
    """The measured-operation counters of ``arch`` under the names readers store (rocprofv3 adds ``_sum``)."""
    names = counter_names(arch if isinstance(arch, str) else None)
    return [*names, *(f"{n}_sum" for n in names if not n.startswith(("sm__", "sass__")))]


#: Invocations read at a time by :func:`build_advice` (each batch: ~40 columns once its facts are added).
INVOCATION_BATCH_ROWS = 1 << 15

#: Each op invocation with its verdict and what the groups need of it (one row per ``op_verdict`` row):
#: the columns of :data:`_INVOCATIONS_SQL`, each with the expression that gives it: ``op_verdict``'s
#: measured verdict per invocation; ``op_roofline``'s model bytes, node name and layer from their
#: tables (``op_verdict`` is built on ``op_roofline``, and joining the view again sums every
#: dispatch twice: 7 s at 10^6); and the invocation's shapes and routing.
_INVOCATION_SELECT: tuple[tuple[str, str], ...] = (
    *(
        (c, f"v.{c}")
        for c in (
            "op_index",
            "op",
            "op_list",
            "evaluation",
            "dispatches",
            "duration_ns",
            "dram_bytes",
            "time_at_roof_ns",
            "time_over_roof_ns",
            "pct_of_ceiling",
            "bound",
            "governing_ceiling",
            "flops",
            "compute_ceiling",
        )
    ),
    ("model_bytes", "md.model_read_bytes + md.model_write_bytes"),
    *(
        (c, f"i.{c}")
        for c in ("node_name", "layer", "quant", "ne", "src_ne", "m", "top_k", "n_experts", "tokens_per_expert")
    ),
)
_INVOCATION_COLUMNS = [name for name, _ in _INVOCATION_SELECT]
_INVOCATIONS_SQL = (
    "SELECT "
    + ", ".join(expr if expr.endswith(f".{name}") else f"{expr} AS {name}" for name, expr in _INVOCATION_SELECT)
    + " FROM op_verdict v JOIN op_invocation i ON i.run_id = v.run_id AND i.op_index = v.op_index "
    "LEFT JOIN op_model md ON md.run_id = v.run_id AND md.op_index = v.op_index WHERE v.run_id = :rid"
)
#: What groups the invocations: the op (or fused group), the weight type and the shapes.
_GROUP_KEYS = ["op_list", "quant", "ne", "src_ne"]
#: Per-invocation counter facts: L2 bytes, occupancy, AMD L2 hits and misses.
_FACTS = [*_L2.values(), *_OCCUPANCY.values(), "l2_hits", "l2_misses"]
#: The matrix units' parts of the measured operations, shown apart.
_OP_PARTS = ("tensor_flop", "tensor_int_ops", "dp4a_ops")


def _no_invocations() -> pd.DataFrame:
    return pd.DataFrame([], columns=_INVOCATION_COLUMNS, dtype=object)


def _counter_facts(counters: pd.DataFrame, arch: Any) -> dict[str, pd.Series]:
    """Per ``op_index``: each counter fact and measured operation, for :func:`_invocation_facts`.

    ``counters`` are :func:`_counter_sums` rows (one pass per counter, ``total`` measured). Keys:
    a fact of :data:`_FACTS` (the sum over the invocation's kernels, unknown where one reading is),
    ``<fact>_kernels`` (kernels counted), ``<fact>_timed`` (sum of reading x ``duration_ns``),
    ``<fact>_time`` (ns), and ``measured_flop``, ``measured_int_ops`` and :data:`_OP_PARTS`
    (:func:`rocroof.analysis.ops.measured_ops`). Only the facts the counters give are present.
    """
    out: dict[str, pd.Series] = {}
    if not len(counters):
        return out
    # an invocation's sum of a counter is known only when every counted kernel of it has the counter
    # (Nsight Compute leaves the per-opcode metric at 0, without instances, for some kernels)
    most = counters.groupby("op_index")["kernels"].transform("max")
    counters = counters.assign(total=counters["total"].where(counters["kernels"] >= most))
    names = {**_L2, **_OCCUPANCY, **_TCC}
    c = counters.assign(fact=counters["counter_name"].astype(str).map(names)).dropna(subset=["fact"])
    total = c.pivot_table(index="op_index", columns="fact", values="total", aggfunc="sum", dropna=False)
    # a sum of unknowns (an infinite or damaged reading, NaN after _measure) is unknown, not 0
    known = c.assign(known=c["total"].notna()).pivot_table(
        index="op_index", columns="fact", values="known", aggfunc="sum", dropna=False
    )
    total = total.where(known.reindex_like(total) > 0)
    kernels = c.pivot_table(index="op_index", columns="fact", values="kernels", aggfunc="sum")
    timed = c.pivot_table(index="op_index", columns="fact", values="timed", aggfunc="sum", dropna=False)
    time = c.pivot_table(index="op_index", columns="fact", values="time", aggfunc="sum", dropna=False)
    for col in total.columns:
        out[col] = total[col]
        out[f"{col}_kernels"] = kernels[col]
        out[f"{col}_timed"] = timed[col]
        out[f"{col}_time"] = time[col]
    ops_wide = counters.pivot(index="op_index", columns="counter_name", values="total")
    ops_wide.columns = [str(c) for c in ops_wide.columns]
    measured = measured_ops(ops_wide, arch if isinstance(arch, str) else None)
    for col in ("measured_flop", "measured_int_ops", *_OP_PARTS):
        if col in measured:
            out[col] = measured[col]
    return out


def _invocation_facts(
    inv: pd.DataFrame, facts: dict[str, pd.Series], evaluations: pd.DataFrame, gaps: pd.DataFrame
) -> None:
    """Measure a batch of :data:`_INVOCATIONS_SQL` rows in place and add what the groups sum.

    Adds the counter facts of ``facts`` (:func:`_counter_facts`; NaN, and 0 kernels, where an
    invocation has none), ``idle_share`` (of its evaluation, :func:`evaluation_timeline`) and
    ``host_gap_ns`` (:func:`host_gaps`). A verdict built on a damaged value (negative or infinite
    bytes, a roof time above the time) becomes unknown.
    """
    for c in (
        "duration_ns",
        "dram_bytes",
        "time_at_roof_ns",
        "time_over_roof_ns",
        "model_bytes",
        "dispatches",
        "flops",
    ):
        inv[c] = _measure(inv[c])
    bad = inv["dram_bytes"].isna() | (inv["time_at_roof_ns"] > inv["duration_ns"] * (1 + 1e-9))
    inv.loc[bad, ["time_at_roof_ns", "time_over_roof_ns"]] = np.nan
    for col in _FACTS:
        inv[col] = np.nan
        inv[f"{col}_kernels"] = 0
        inv[f"{col}_timed"] = inv[f"{col}_time"] = np.nan
    for col in ("measured_flop", "measured_int_ops", *_OP_PARTS):
        inv[col] = np.nan
    for col, by_op in facts.items():
        values = inv["op_index"].map(by_op)
        inv[col] = values.fillna(0) if col.endswith("_kernels") else values
    idle = evaluations.set_index("evaluation")["idle_share"] if len(evaluations) else pd.Series(dtype=float)
    inv["idle_share"] = pd.to_numeric(inv["evaluation"], errors="coerce").map(idle)
    gap = gaps.set_index("op_index")["host_gap_ns"] if len(gaps) else pd.Series(dtype=float)
    inv["host_gap_ns"] = inv["op_index"].map(gap)


def _null_key(value: Any) -> Any:
    """A group key's part as ``groupby(dropna=False)`` names it: NaN for any NULL."""
    return np.nan if value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value)) else value


class _GroupTotals:
    """The op groups' sums, added a batch of invocations at a time (:func:`_invocation_facts` rows).

    Each group keeps the sums and counts that its row of :data:`GROUP_COLUMNS` is made of, so the
    rows are those a ``groupby`` over every invocation at once gives: groups in order of their first
    invocation, each with its first invocation's name; sums over the same rows (a float sum's last
    digits may differ with the order of its terms). Counts and integer sums are exact.
    """

    def __init__(self) -> None:
        self.ids: dict[tuple[Any, ...], int] = {}  # group key (NULL as None) -> group id, first seen first
        self.keys: list[tuple[Any, ...]] = []  # as groupby names them
        self.first: list[tuple[str, Any]] = []  # group label and node name of the first invocation
        self.sums = pd.DataFrame()  # group id -> sums and counts (:meth:`_sums`)
        self.bound: dict[tuple[int, Any, Any], float] = {}  # (group, bound, ceiling) -> measured time (ns)
        self.ceiling: dict[tuple[int, str], list[int]] = {}  # (group, compute ceiling) -> [counted, first row]
        self.rows = 0  # invocations added

    def add(self, inv: pd.DataFrame) -> None:
        """Add a batch of invocations (rows of :func:`_invocation_facts`)."""
        # the batch's groups (first seen first), then each one's id over the run: a few hundred keys
        local = inv.groupby(_GROUP_KEYS, dropna=False, sort=False)
        codes = local.ngroup().to_numpy(dtype=np.int64)
        firsts = local.head(1)
        to_run = np.empty(len(firsts), dtype=np.int64)
        for code, (key, node) in enumerate(
            zip(zip(*(firsts[k] for k in _GROUP_KEYS), strict=True), firsts["node_name"], strict=True)
        ):
            norm = tuple(None if pd.isna(_null_key(v)) else v for v in key)
            gid = self.ids.get(norm)
            if gid is None:
                gid = self.ids[norm] = len(self.keys)
                self.keys.append(tuple(_null_key(v) for v in key))
                op_list, quant, ne, src_ne = key
                self.first.append((_shape(str(op_list), ne, src_ne, quant), node))
            to_run[code] = gid
        ids = to_run[codes]
        part = self._sums(inv).groupby(ids).sum()
        self.sums = part if not len(self.sums) else self.sums.add(part, fill_value=0)
        measured = self._measured(inv)
        timed = pd.DataFrame(
            {"id": ids, "bound": inv["bound"], "ceiling": inv["governing_ceiling"], "ns": inv["duration_ns"]}
        )[measured]
        for (gid, bound, ceiling), ns in timed.groupby(["id", "bound", "ceiling"], dropna=True)["ns"].sum().items():
            self.bound[(gid, bound, ceiling)] = self.bound.get((gid, bound, ceiling), 0.0) + float(ns)
        counted = inv["measured_flop"].notna().to_numpy() & inv["compute_ceiling"].notna().to_numpy()
        units = pd.DataFrame(
            {
                "id": ids[counted],
                "unit": inv["compute_ceiling"][counted].astype(str).to_numpy(),
                "row": self.rows + np.flatnonzero(counted),
            }
        )
        for (gid, unit), (n, first) in units.groupby(["id", "unit"])["row"].agg(["count", "min"]).iterrows():
            entry = self.ceiling.setdefault((int(gid), str(unit)), [0, int(first)])
            entry[0] += int(n)
        self.rows += len(inv)

    @staticmethod
    def _measured(inv: pd.DataFrame) -> pd.Series:
        return inv["time_at_roof_ns"].notna() & inv["duration_ns"].notna()

    @staticmethod
    def _sums(inv: pd.DataFrame) -> pd.DataFrame:
        """Per invocation, its terms of each group sum (0 where it does not count) and 0/1 counts."""

        def where(values: pd.Series, mask: pd.Series) -> np.ndarray:
            out: np.ndarray = np.where(mask.to_numpy(dtype=bool), values.to_numpy(dtype=np.float64), 0.0)
            return out

        def known(values: pd.Series) -> pd.Series:
            return values.notna()

        duration = inv["duration_ns"]
        measured = _GroupTotals._measured(inv)
        model = measured & inv["model_bytes"].notna() & (inv["model_bytes"] > 0)
        l2 = measured & inv["l2_bytes"].notna()
        counted = inv["measured_flop"].notna()
        flops = pd.to_numeric(inv["flops"], errors="coerce").astype("float64")
        idle = pd.to_numeric(inv["idle_share"], errors="coerce").astype("float64")
        weight = duration.fillna(0)
        weighed = idle.notna() & (weight > 0)
        terms = {
            "n": np.ones(len(inv)),
            "dispatches": where(inv["dispatches"], known(inv["dispatches"])),
            "duration": where(duration, known(duration)),
            "m_n": measured.to_numpy(dtype=np.float64),
            "m_duration": where(duration, measured),
            "m_at_roof": where(inv["time_at_roof_ns"], measured),
            "m_over_roof": where(inv["time_over_roof_ns"], measured),
            "k_n": model.to_numpy(dtype=np.float64),
            "k_model": where(inv["model_bytes"], model),
            "k_dram": where(inv["dram_bytes"], model & known(inv["dram_bytes"])),
            "l_n": l2.to_numpy(dtype=np.float64),
            "l_l2": where(inv["l2_bytes"], l2),
            "l_dram": where(inv["dram_bytes"], l2 & known(inv["dram_bytes"])),
            "l_duration": where(duration, l2),
            "c_n": counted.to_numpy(dtype=np.float64),
            "c_flop": where(inv["measured_flop"], counted),
            "c_int": where(inv["measured_int_ops"], counted & known(inv["measured_int_ops"])),
            "c_int_n": (counted & known(inv["measured_int_ops"])).to_numpy(dtype=np.float64),
            "c_model": where(flops, counted & known(flops)),
            "c_model_n": (counted & known(flops)).to_numpy(dtype=np.float64),
            "idle_w": where(idle * weight, weighed),
            "idle_weight": where(weight, weighed),
            "idle_weighed_n": weighed.to_numpy(dtype=np.float64),
            "idle": where(idle, known(idle)),
            "idle_n": known(idle).to_numpy(dtype=np.float64),
            "host": where(inv["host_gap_ns"], known(inv["host_gap_ns"])),
            "host_n": known(inv["host_gap_ns"]).to_numpy(dtype=np.float64),
        }
        for col in _OP_PARTS:
            values = pd.to_numeric(inv[col], errors="coerce").astype("float64")
            terms[f"c_{col}"] = where(values, counted & known(values))
            terms[f"c_{col}_n"] = (counted & known(values)).to_numpy(dtype=np.float64)
        for col in ("l2_hits", "l2_misses"):
            terms[col] = where(inv[col], known(inv[col]))
            terms[f"{col}_n"] = known(inv[col]).to_numpy(dtype=np.float64)
        for col in _OCCUPANCY.values():
            for part in ("_timed", "_time", ""):
                values = inv[col + part]
                terms[col + part] = where(values, known(values))
                terms[f"{col}{part}_n"] = known(values).to_numpy(dtype=np.float64)
            terms[f"{col}_kernels"] = inv[f"{col}_kernels"].to_numpy(dtype=np.float64)
        return pd.DataFrame(terms)

    def groups(self, *, flushed: bool, l2_gbps: float | None) -> pd.DataFrame:
        """The ranked op groups with their evidence (:data:`GROUP_COLUMNS`), most recoverable first."""
        if not self.rows:
            return pd.DataFrame(columns=GROUP_COLUMNS)
        nan = float("nan")
        s = self.sums.sort_index()
        total_time = float(s["duration"].sum())
        bounds: dict[int, list[tuple[Any, Any, float]]] = {}
        for (gid, bound, ceiling), ns in self.bound.items():
            bounds.setdefault(gid, []).append((bound, ceiling, ns))
        units: dict[int, tuple[int, int, str]] = {}  # group -> (-counted, first row, compute ceiling)
        for (gid, unit), (n, position) in self.ceiling.items():
            best = units.get(gid)
            if best is None or (-n, position) < best[:2]:
                units[gid] = (-n, position, unit)
        rows = []
        for gid, key in enumerate(self.keys):
            t = s.loc[gid]
            n = int(t["n"])
            duration, dispatches = float(t["duration"]), float(t["dispatches"])
            m_n, m_dur = int(t["m_n"]), float(t["m_duration"])
            at_roof, over = float(t["m_at_roof"]), float(t["m_over_roof"])
            if m_n and m_dur > 0:
                recoverable = over if m_n == n else duration * over / m_dur
                pct = 100.0 * at_roof / m_dur
            else:
                recoverable = pct = nan
            # the bound and ceiling of most of the measured time (the first in sorted order on a tie)
            bound = governing = None
            if gid in bounds:
                ranked = sorted(bounds[gid], key=lambda b: (b[0], b[1]))
                bound, governing, _ = max(ranked, key=lambda b: b[2])
            k_n = int(t["k_n"])
            model_per_call = float(t["k_model"]) / k_n if k_n else nan
            ratio = float(t["k_dram"] / t["k_model"]) if k_n else nan
            l_n = int(t["l_n"])
            l2 = float(t["l_l2"]) if l_n else nan
            l2_dram = float(t["l_dram"]) if l_n else nan
            l2_over = l2 / l2_dram if l_n and l2_dram > 0 else nan
            # the hierarchical roofline's L2 level: L2 bytes over the same invocations' time, against the
            # L2 ceiling where one was measured (rocprofiler-compute's roofline.csv L2Bw)
            l2_time = float(t["l_duration"]) if l_n else nan
            l2_achieved = l2 / l2_time if l_n and l2_time > 0 else nan  # bytes/ns = GB/s
            l2_pct = 100.0 * l2_achieved / l2_gbps if l2_gbps and pd.notna(l2_achieved) else nan
            hits = t["l2_hits"] if t["l2_hits_n"] else nan
            misses = t["l2_misses"] if t["l2_misses_n"] else nan
            hit_pct = (
                100.0 * hits / (hits + misses) if pd.notna(hits) and pd.notna(misses) and hits + misses > 0 else nan
            )
            # measured operations beside the modelled FLOPs of the same (counted) invocations
            c_n = int(t["c_n"])
            m_flop = float(t["c_flop"]) if c_n else nan
            m_int = float(t["c_int"]) if c_n and int(t["c_int_n"]) == c_n else nan
            model_flop = float(t["c_model"]) if c_n and t["c_model_n"] else nan
            # the counted operations of the units the op runs on: integer (dp4a, IMMA) for ggml's int8
            # matmuls on quantized weights, floating point otherwise
            on_int8 = bool(c_n) and gid in units and units[gid][2] == "int8_matrix_tops"
            counted_ops = m_int if on_int8 else m_flop
            ops_ratio = counted_ops / model_flop if pd.notna(counted_ops) and model_flop and model_flop > 0 else nan
            # the idle share of the evaluations the group's time falls in, weighted by that time
            if t["idle_weighed_n"]:
                idle_share = float(t["idle_w"] / t["idle_weight"])
            else:
                idle_share = float(t["idle"] / t["idle_n"]) if t["idle_n"] else nan
            label, node = self.first[gid]
            row = {
                "group": label,
                **dict(zip(_GROUP_KEYS, key, strict=True)),
                "example_node": _node_stem(node),
                "invocations": n,
                "dispatches": int(dispatches),
                "duration_ns": duration,
                "share_of_time_pct": 100.0 * duration / total_time if total_time else nan,
                "mean_us_per_call": duration / n / 1e3 if n else nan,
                "mean_us_per_kernel": duration / dispatches / 1e3 if dispatches else nan,
                "measured_invocations": m_n,
                # scaled like the recoverable time, so that the two add up to the group's time
                "time_at_roof_ns": duration - recoverable if pd.notna(recoverable) else nan,
                "recoverable_ns": recoverable,
                "pct_of_ceiling": pct,
                "bound": bound,
                "governing_ceiling": governing,
                "measured_over_model": ratio,
                "model_bytes_per_call": model_per_call,
                "l2_bytes": l2,
                "l2_over_dram": l2_over,
                "l2_achieved_gbps": l2_achieved,
                "pct_of_l2_ceiling": l2_pct,
                "l2_hit_pct": hit_pct,
                **{col: self._time_mean(t, col) for col in _OCCUPANCY.values()},
                "measured_flop": m_flop,
                "measured_int_ops": m_int,
                **{col: float(t[f"c_{col}"]) if c_n and int(t[f"c_{col}_n"]) == c_n else nan for col in _OP_PARTS},
                "model_flop": model_flop,
                "measured_ops_over_model": ops_ratio,
                "ops_counted_as": ("integer" if on_int8 else "floating point") if c_n else None,
                "idle_share": idle_share,
                "host_us_per_op": float(t["host"] / t["host_n"]) / 1e3 if t["host_n"] else nan,
            }
            row["causes"] = "; ".join(causes(row, flushed=flushed))
            rows.append(row)
        out = pd.DataFrame(rows)
        # a group's sum that overflowed (damaged readings of ~1e308) is no measurement: unknown
        numbers = out.select_dtypes("number").columns
        out[numbers] = out[numbers].replace([np.inf, -np.inf], np.nan)
        out = out.sort_values(["recoverable_ns", "duration_ns"], ascending=[False, False], na_position="last")
        out.insert(0, "rank", np.arange(1, len(out) + 1))
        return out[GROUP_COLUMNS].reset_index(drop=True)

    @staticmethod
    def _time_mean(t: pd.Series, col: str) -> float:
        """A per-kernel counter's mean over the group's counted kernels, weighted by each kernel's time.

        A quantize kernel of 3 µs at 0 waves beside a matmul of 10 µs at 1.16 waves is 0.89 waves: the
        kernel that takes the time decides. Kernels without a time (none in a counter pass of Nsight
        Compute) weigh nothing; without any, the plain mean over kernels.
        """
        timed = t[f"{col}_timed"] if t[f"{col}_timed_n"] else float("nan")
        time = t[f"{col}_time"] if t[f"{col}_time_n"] else float("nan")
        if pd.notna(timed) and pd.notna(time) and time > 0:
            return float(timed / time)
        n = float(t[f"{col}_kernels"])
        return float(t[col]) / n if n > 0 else float("nan")


def _measure(values: pd.Series) -> pd.Series:
    """Numbers as float64 with what no measurement can be (text, negative, infinite) as NaN (unknown)."""
    v = pd.to_numeric(values, errors="coerce").astype("float64")
    return v.where(np.isfinite(v) & (v >= 0))


def causes(row: dict[str, Any], *, flushed: bool) -> list[str]:
    """The likely causes of one group's distance from its roof (module docstring), as short evidence."""
    out = []
    us, per_kernel = row.get("mean_us_per_call"), row.get("mean_us_per_kernel")
    idle = row.get("idle_share")
    kernels = ""
    if _num(us) and _num(per_kernel) and us > per_kernel * 1.05:
        kernels = f" ({us / per_kernel:.3g} kernels of {per_kernel:.1f} µs)"
    if _num(per_kernel) and per_kernel < SHORT_CALL_US and _num(idle) and idle > IDLE_SHARE:
        host = row.get("host_us_per_op")
        host_text = f", host {host:.1f} µs/op" if _num(host) else ""
        out.append(
            f"launch-bound: {us:.1f} µs calls{kernels}, GPU idle {100 * idle:.0f}% of their evaluations{host_text}"
        )
    elif row.get("bound") == "latency":
        out.append(f"latency: {us:.1f} µs calls{kernels}, under 10% of the roof" if _num(us) else "latency")
    ratio = row.get("measured_over_model")
    per_call_model = row.get("model_bytes_per_call")
    if _num(ratio) and ratio > REREAD_RATIO and (not _num(per_call_model) or per_call_model >= SMALL_OP_BYTES):
        out.append(f"re-reads: {ratio:.2f}x the modelled DRAM bytes")
    l2 = row.get("l2_over_dram")
    below_model = _num(ratio) and ratio < CACHED_RATIO
    if not flushed and _num(l2) and l2 > L2_OVER_DRAM and below_model:
        out.append(f"cache-resident: {ratio:.2f}x the modelled DRAM bytes, L2 moves {l2:.1f}x its DRAM bytes")
    occ, waves = row.get("occupancy_pct"), row.get("waves_per_sm")
    if _num(occ) and occ < LOW_OCCUPANCY_PCT:
        out.append(f"low occupancy: {occ:.0f}% theoretical")
    if _num(waves) and waves < 1.0:
        # Nsight prints waves with two decimals: a grid of a few blocks reads 0.00. A mean of kernels
        # that all read 0.01 is 0.01 give or take its sum's rounding: compared at half the last digit
        out.append(f"under one wave: {waves:.2g} waves per SM" if waves >= 0.005 else "under one wave: a few blocks")
    ops = row.get("measured_ops_over_model")
    head = str(row.get("op_list") or "").split("+")[0]
    if head in _MATRIX_OPS and _num(ops) and not OPS_BAND[0] <= ops <= OPS_BAND[1]:
        out.append(f"counted ops {ops:.2f}x the modelled FLOPs ({row.get('ops_counted_as')})")
    pct = row.get("pct_of_ceiling")
    if row.get("bound") == "compute" and _num(pct) and pct < LOW_COMPUTE_PCT:
        out.append(f"compute-bound at {pct:.0f}% of {row.get('governing_ceiling')}")
    if not out and row.get("bound") == "memory" and _num(pct) and pct < LOW_MEMORY_PCT:
        out.append(f"memory-bound at {pct:.0f}% of the DRAM ceiling (access pattern or too few bytes in flight)")
    return out


def _num(v: Any) -> TypeGuard[float]:
    return v is not None and isinstance(v, (int, float, np.floating, np.integer)) and not pd.isna(v)


# ---- rendering -------------------------------------------------------------------------


def launch_summary(advice: Advice) -> str | None:
    """One paragraph on launch overhead over the run's evaluations (None without evaluations)."""
    ev = advice.evaluations
    if not len(ev):
        return None
    if advice.run.get("serialised_timings"):
        return (
            "Launch overhead: not measurable in this run (no trace pass: the profiler serialised the kernels to "
            "read counters, so the gaps between them are the profiler's)"
        )
    decode = ev[pd.to_numeric(ev["tokens"], errors="coerce") == 1] if "tokens" in ev else ev.iloc[0:0]
    part = decode if len(decode) else ev
    what = f"{len(part)} decode evaluation(s)" if len(decode) else f"{len(part)} graph evaluation(s)"
    if advice.whole_run:
        what = "the whole run as one window: no graph evaluations without op metadata"
    wall = float(part["wall_ns"].median())
    busy = float(part["busy_ns"].median())
    idle = float(part["idle_share"].median())
    if not wall > 0:  # every window of zero length (or unknown): no kernel time to compare the host with
        return (
            "Launch overhead: not measurable in this run (its kernels' start and end times are missing or rounded "
            "to the same value, so no evaluation has a wall time)"
        )
    host = pd.to_numeric(part["host_ns_per_op"], errors="coerce").median()
    ops = float(part["ops"].median())
    gpu_per_op = busy / ops / 1e3 if ops else float("nan")
    scope = what if advice.whole_run else f"{what} of {len(ev)}; medians"
    text = (
        f"Launch overhead ({scope}): wall {wall / 1e3:,.1f} µs, GPU busy {_us(busy)} µs, "
        f"idle {f'{100 * idle:.0f}' if _num(idle) else '?'}%"
    )
    if pd.notna(host):
        text += f"; the host launches an op every {host / 1e3:.1f} µs, the GPU runs one in {gpu_per_op:.1f} µs"
        text += " (launch-bound)" if host / 1e3 > gpu_per_op else ""
    if advice.whole_run:
        return text + "."
    text += (
        f". CUDA/HIP graphs: up to {(wall - busy) / 1e3:,.1f} µs per evaluation ({GRAPHS_RECOVER_AT_MOST}; "
        "host times are as traced: API tracing and the op markers add host time to every launch)."
    )
    return text


def _us(v: Any, digits: int = 1) -> str:
    return "?" if not _num(v) else f"{v / 1e3:,.{digits}f}"


def _pct(v: Any) -> str:
    return "?" if not _num(v) else f"{v:.1f}"


def _people_groups(advice: Advice, top: int | None) -> pd.DataFrame:
    g = advice.groups.head(top) if top else advice.groups
    return pd.DataFrame(
        {
            "#": g["rank"].astype(int),
            "op group": [cell_text(str(x)) for x in g["group"]],
            "calls": g["invocations"].map(lambda v: f"{int(v):,}"),
            "time µs": g["duration_ns"].map(_us),
            "% run": g["share_of_time_pct"].map(_pct),
            ("~" if advice.sampled else "") + "recoverable µs": g["recoverable_ns"].map(_us),
            "% roof": g["pct_of_ceiling"].map(_pct),
            "bound": g["bound"].map(lambda v: v if isinstance(v, str) else "?"),
            "causes": g["causes"].map(lambda v: v or "—"),
        }
    )


def _people_moe(advice: Advice) -> pd.DataFrame:
    m = advice.moe_layers
    return pd.DataFrame(
        {
            "layer": m["layer"].map(lambda v: "?" if pd.isna(v) else str(int(v))),
            "MUL_MAT_ID calls": m["invocations"].map(int),
            "experts": m["n_experts"].map(int),
            "mean imbalance": m["mean_imbalance"].map(lambda v: f"{v:.2f}"),
            "worst": m["max_imbalance"].map(lambda v: f"{v:.2f}"),
            "experts used": m["mean_experts_used"].map(lambda v: f"{v:.1f}"),
            "bytes / routed token": m["bytes_per_routed_token"].map(lambda v: "?" if pd.isna(v) else f"{v:,.0f}"),
        }
    )


def advice_html_rows(advice: Advice, top: int = 10) -> tuple[list[str], list[str], list[list[str]]]:
    """For the HTML report: the launch paragraph, key and MoE lines, then the headers and cells of the top groups."""
    text = [t for t in (launch_summary(advice), key_line(advice), unknown_line(advice)) if t]
    if len(advice.moe_layers):
        text.append(moe_line(advice))
    text += [f"{n.severity}: {n.message}" for n in advice.notes]
    table = _people_groups(advice, top)
    return text, [str(c) for c in table.columns], [[str(v) for v in row] for row in table.itertuples(index=False)]


def advice_document(advice: Advice) -> dict[str, Any]:
    """The advice as one JSON object.

    Keys: ``rocroof``, ``schema``, ``report`` ("advise"), ``run``, ``labels``, ``ceilings``,
    ``sampled``, ``caches_flushed``, ``notes``, ``groups`` (raw values, units in names),
    ``evaluations`` and ``moe_layers``.
    """
    from .. import SCHEMA_VERSION, __version__

    return {
        "rocroof": __version__,
        "schema": SCHEMA_VERSION,
        "report": "advise",
        "run": {k: v for k, v in json_records(pd.DataFrame([advice.run]))[0].items() if k != "host"},
        "labels": advice.labels,
        "ceilings": advice.ceilings,
        "sampled": advice.sampled,
        "caches_flushed": advice.flushed,
        "notes": [{"severity": n.severity, "code": n.code, "message": n.message} for n in advice.notes],
        "groups": json_records(advice.groups),
        "evaluations": json_records(advice.evaluations),
        "moe_layers": json_records(advice.moe_layers),
    }


def key_line(advice: Advice) -> str:
    """What the ranking's columns mean, and what this run's data cannot show."""
    key = (
        "recoverable = time − time at the governing roof (op_verdict); % roof = time at roof / time; "
        "causes are evidence (thresholds in rocroof.report.advise)"
    )
    if advice.sampled:
        key += "; ~ = counters cover a sample of the invocations: scaled to the group's whole time"
    if advice.flushed:
        key += (
            "; caches were flushed before each counted kernel: L2 residency cannot show"
            if str(advice.run.get("cache_control") or "").lower() == "all"
            else "; Nsight Compute's replay passes may have warmed the L2 before DRAM bytes were counted "
            "(warning below): L2 residency cannot show"
        )
    return key


def unknown_line(advice: Advice) -> str | None:
    """The groups without a counted invocation and their share of the time (None when every group has one)."""
    unknown = advice.groups[advice.groups["recoverable_ns"].isna()]
    if not len(unknown):
        return None
    share = float(pd.to_numeric(unknown["share_of_time_pct"], errors="coerce").sum())
    return (
        f"{len(unknown)} group(s) with {share:.1f}% of the GPU time had no counted invocation (no DRAM bytes): "
        "their recoverable time is unknown (?), ranked last; collect with --sample covering them "
        "(e.g. --sample prefill=1,decode=1)"
    )


def moe_line(advice: Advice) -> str:
    """One line on the run's MoE routing (the layers' table follows it)."""
    m = advice.moe_layers
    worst = m.loc[m["max_imbalance"].idxmax()]
    batched = int(m["batched_invocations"].sum())
    over = f"over the {batched:,} calls routing several tokens" if batched else "over every call"
    return (
        f"MoE routing: {int(m['invocations'].sum()):,} MUL_MAT_ID calls over {len(m)} layer(s); imbalance (busiest "
        f"expert / most even share, {over}) mean {m['mean_imbalance'].mean():.2f}, worst "
        f"{worst['max_imbalance']:.2f} (layer {'?' if pd.isna(worst['layer']) else int(worst['layer'])})"
    )


def _people_evaluations(advice: Advice) -> pd.DataFrame:
    ev = advice.evaluations
    return pd.DataFrame(
        {
            "evaluation": ev["evaluation"].map(int),
            "tokens": ev["tokens"].map(lambda v: "?" if pd.isna(v) else f"{int(v):,}"),
            "ops": ev["ops"].map(lambda v: f"{int(v):,}"),
            "kernels": ev["dispatches"].map(lambda v: f"{int(v):,}"),
            "wall µs": ev["wall_ns"].map(_us),
            "GPU busy µs": ev["busy_ns"].map(_us),
            "idle %": (100 * ev["idle_share"]).map(_pct),
            "host µs/op": ev["host_ns_per_op"].map(_us),
        }
    )


def render_advice(advice: Advice, fmt: Format = "table", top: int | None = 10, *, evaluations: bool = False) -> str:
    """Text of :func:`build_advice`: a header, the launch paragraph, the ranked groups, MoE skew.

    ``csv`` gives the groups (raw values; with ``evaluations`` the evaluations instead); ``json``
    everything (:func:`advice_document`). ``evaluations``: add the per-evaluation table (wall,
    busy, idle, host time per op), left out when the timings are a counter pass's (serialised).
    Blocks are separated by blank lines, so that Markdown keeps each table apart.
    """
    if fmt == "json":
        return json.dumps(advice_document(advice), indent=2, allow_nan=False) + "\n"
    if fmt == "csv":  # one table: the groups, or with ``evaluations`` the evaluations
        return render_frame(advice.evaluations if evaluations else advice.groups, "csv")
    md = fmt == "markdown"

    def bold(text: str) -> str:
        return f"**{text}**" if md else text

    # text from the capture (GPU name, labels, notes) on one line, and in Markdown with its markup escaped
    quoted = markdown_text if md else cell_text
    run = advice.run
    blocks = []
    title = bold(f"rocroof advise — run {run['run_id']}: {quoted(gpu_text(run.get('gpu_name'), run.get('gpu_arch')))}")
    if advice.labels:
        title += (
            ("  \n" if md else "\n")
            + "labels: "
            + ", ".join(f"{quoted(k)}={quoted(v)}" for k, v in advice.labels.items())
        )
    blocks.append(title)
    launch = launch_summary(advice)
    if launch:
        blocks.append(launch)
    if evaluations and len(advice.evaluations) and not advice.run.get("serialised_timings"):
        blocks.append(bold("Graph evaluations:"))
        blocks.append(render_frame(_people_evaluations(advice), fmt).rstrip("\n"))
    if not len(advice.groups):
        blocks.append(
            "No op groups: the run has no op verdicts (record with the llama.cpp hook's op metadata, "
            "rocroof collect, to get the model the ranking needs)."
        )
    else:
        shown = len(advice.groups) if top is None else min(top, len(advice.groups))
        blocks.append(
            bold(f"Op groups ranked by time recoverable at their roof (top {shown} of {len(advice.groups)}):")
        )
        blocks.append(render_frame(_people_groups(advice, top), fmt, wrap=["op group", "causes"]).rstrip("\n"))
        blocks.append(key_line(advice))
        unknown = unknown_line(advice)
        if unknown:
            blocks.append(unknown)
    if len(advice.moe_layers):
        blocks.append(bold(moe_line(advice)))
        blocks.append(render_frame(_people_moe(advice), fmt).rstrip("\n"))
    if advice.notes:
        blocks.append(("  \n" if md else "\n").join(f"{n.severity}: {quoted(n.message)}" for n in advice.notes))
    return "\n\n".join(blocks) + "\n"
