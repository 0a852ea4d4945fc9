"""``rocroof advise`` on recorded H200 captures, against values computed from the files and stored rows.

* ``examples/h200-counters/dense28-decode-flops``: a 28-layer dense decode (16 evaluations) timed by
  nsys, one decoded token counted by ncu with caches *not* flushed (L2 residency shows).
* ``examples/h200/moe-prefill``: a MoE prefill with routing read back (tokens_per_expert).

Idle shares come from the raw nsys export (sqlite3, a plain sweep over kernel intervals); L2 bytes,
waves and occupancy from the raw ncu CSV (csv module); the ranking from the stored op rows and
ceilings with the roofline worked here (min of the compute peak and intensity x bandwidth).
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
import re
import shutil
import sqlite3
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from rocroof.capture.readers import read_capture
from rocroof.cli import cli
from rocroof.ingest.pipeline import build_run
from rocroof.report import advise
from rocroof.report.advise import (
    CACHED_RATIO,
    L2_OVER_DRAM,
    LOW_OCCUPANCY_PCT,
    REREAD_RATIO,
    SMALL_OP_BYTES,
    build_advice,
    causes,
    launch_summary,
    render_advice,
)
from rocroof.store import Store

from .conftest import fixture_path, overlapping_capture

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
FLOPS = EXAMPLES / "h200-counters" / "dense28-decode-flops"
MOE = EXAMPLES / "h200" / "moe-prefill"
SCALE = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "ns": 1, "us": 1e3, "usecond": 1e3, "ms": 1e6}


def _store(capture: Path, db: Path) -> tuple[Store, int]:
    run_id = Store(db).write_run(build_run(read_capture(capture)))
    return Store(db, read_only=True), run_id


@pytest.fixture(scope="module")
def flops(tmp_path_factory: pytest.TempPathFactory) -> tuple[Store, int, Path]:
    db = tmp_path_factory.mktemp("advise") / "r.db"
    store, run_id = _store(FLOPS, db)
    return store, run_id, db


def _nsys(capture: Path) -> sqlite3.Connection:
    con = sqlite3.connect(":memory:")
    con.deserialize(gzip.decompress((capture / "trace" / "nsys.sqlite.gz").read_bytes()))
    return con


def _union_in(intervals: list[tuple[int, int]], lo: int, hi: int) -> int:
    """Busy ns inside [lo, hi): a plain sweep over the sorted intervals."""
    busy, cur_s, cur_e = 0, None, None
    for s, e in sorted((max(s, lo), min(e, hi)) for s, e in intervals if e > lo and s < hi):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                busy += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        busy += cur_e - cur_s
    return busy


def _idle_by_hand(capture: Path, db: Path, run_id: int) -> dict[int, tuple[int, int]]:
    """{evaluation: (wall_ns, busy_ns)} from the raw nsys kernels; membership from the stored rows."""
    stored = sqlite3.connect(db)
    members = defaultdict(set)
    for ev, corr in stored.execute(
        "SELECT m.evaluation, d.correlation_id FROM dispatch_record d JOIN pass p ON p.run_id = d.run_id "
        "AND p.pass_index = d.pass_index AND p.is_timing_pass JOIN op_model m ON m.run_id = d.run_id "
        "AND m.op_index = d.op_index WHERE d.run_id = ?",
        (run_id,),
    ):
        members[ev].add(corr)
    raw = _nsys(capture).execute("SELECT start, end, correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchall()
    intervals = [(s, e) for s, e, _ in raw]
    out = {}
    for ev, corrs in members.items():
        own = [(s, e) for s, e, c in raw if c in corrs]
        lo, hi = min(s for s, _ in own), max(e for _, e in own)
        out[ev] = (hi - lo, _union_in(intervals, lo, hi))
    return out


def test_idle_share_per_evaluation_matches_the_raw_trace(flops: tuple[Store, int, Path]) -> None:
    store, run_id, db = flops
    ev = build_advice(store, run_id).evaluations.set_index("evaluation")
    hand = _idle_by_hand(FLOPS, db, run_id)
    assert sorted(hand) == list(range(16)) == ev.index.tolist()  # -n 16: 16 graph evaluations
    for e, (wall, busy) in hand.items():
        assert ev.loc[e, "wall_ns"] == wall
        assert ev.loc[e, "busy_ns"] == busy
        assert ev.loc[e, "idle_share"] == pytest.approx(1 - busy / wall, rel=1e-12)
    # a token of this 0.6B model on an H200 under nsys: the GPU is idle most of the time (launch-bound)
    assert (ev.loc[1:, "idle_share"] > 0.5).all()
    assert (ev.loc[1:, "tokens"] == 1).all() and ev.loc[0, "tokens"] > 100  # the prompt, then decoded tokens


def test_overlapping_kernels_count_once(tmp_path: Path) -> None:
    # the same capture with kernels made to overlap: every third kernel of the trace starts with the one
    # before it (two streams' worth of concurrency); busy time must not count the overlap twice
    capture = overlapping_capture(FLOPS, tmp_path / "cap")
    db = tmp_path / "r.db"
    store, run_id = _store(capture, db)
    ev = build_advice(store, run_id).evaluations.set_index("evaluation")
    hand = _idle_by_hand(capture, db, run_id)
    overlapped = 0
    for e, (wall, busy) in hand.items():
        assert ev.loc[e, "busy_ns"] == busy
        assert ev.loc[e, "idle_share"] == pytest.approx(1 - busy / wall, rel=1e-12)
        overlapped += ev.loc[e, "kernel_sum_ns"] > busy
    assert overlapped == len(hand)  # the sum of kernel times now exceeds the busy time in every evaluation


def _ncu_by_invocation() -> dict[int, dict[str, float]]:
    """Per counted op invocation: summed DRAM and L2 bytes, and per-kernel waves and occupancy lists."""
    text = gzip.decompress((FLOPS / "ncu" / "ncu_raw.csv.gz").read_bytes()).decode()
    rows = list(csv.reader(io.StringIO(text)))
    head, units = rows[0], rows[1]
    col = {n: i for i, n in enumerate(head)}
    stack = col["thread Domain:Push/Pop_Range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg"]

    def num(row: list[str], name: str) -> float:
        return float(row[col[name]].replace(",", "")) * SCALE.get(units[col[name]], 1)

    out: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for row in rows[2:]:
        found = re.findall(r'"<default domain>:ggml:([A-Z_]+):[^"]*?:(\d+):', row[stack])
        inv = int(found[-1][1])
        o = out[inv]
        o["dram"] += num(row, "dram__bytes_read.sum") + num(row, "dram__bytes_write.sum")
        o["l2"] += num(row, "lts__t_bytes.sum")
        time = num(row, "gpu__time_duration.sum")  # us -> ns by the units row
        o["time"] += time
        o["waves_x_time"] += time * num(row, "launch__waves_per_multiprocessor")
        o["occupancy_x_time"] += time * num(row, "sm__maximum_warps_per_active_cycle_pct")
        o["kernels"] += 1
    return out


def _group_keys(db: Path, run_id: int) -> dict[int, tuple[object, ...]]:
    con = sqlite3.connect(db)
    return {
        inv: (ol, q, ne, src)
        for inv, ol, q, ne, src in con.execute(
            "SELECT invocation, op_list, quant, ne, src_ne FROM op_invocation WHERE run_id = ?", (run_id,)
        )
    }


def test_warm_replay_withholds_the_cache_cause(flops: tuple[Store, int, Path]) -> None:
    # ncu.log says up to 6 replay passes and the caches were kept: the warm-replay warning, no L2 cause
    store, run_id, _ = flops
    advice = build_advice(store, run_id)
    assert any(n.code == "warm-replay" for n in advice.notes) and advice.flushed
    assert not advice.groups["causes"].str.contains("cache-resident").any()


def test_l2_bytes_waves_and_occupancy_per_group_match_the_ncu_csv(tmp_path: Path) -> None:
    # the capture without Nsight Compute's log: no replay count, so no warm-replay warning
    capture = tmp_path / "cap"
    shutil.copytree(FLOPS, capture)
    (capture / "ncu" / "ncu.log").unlink()
    db = tmp_path / "r.db"
    store, run_id = _store(capture, db)
    advice = build_advice(store, run_id)
    assert not advice.flushed  # collected with --cache-control none
    keys = _group_keys(db, run_id)
    per_group: dict[tuple[object, ...], dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for inv, facts in _ncu_by_invocation().items():
        for k, v in facts.items():
            per_group[keys[inv]][k] += v
    groups = advice.groups.set_index(["op_list", "quant", "ne", "src_ne"])
    assert len(per_group) == groups["l2_bytes"].notna().sum()
    for key, facts in per_group.items():
        g = groups.loc[key]
        assert g["l2_bytes"] == pytest.approx(facts["l2"], rel=1e-9)
        assert g["l2_over_dram"] == pytest.approx(facts["l2"] / facts["dram"], rel=1e-9)
        # means over the counted kernels weighted by each kernel's time (the kernel that takes the time decides)
        waves, occupancy = facts["waves_x_time"] / facts["time"], facts["occupancy_x_time"] / facts["time"]
        assert g["waves_per_sm"] == pytest.approx(waves, rel=1e-9)
        assert g["occupancy_pct"] == pytest.approx(occupancy, rel=1e-9)
        causes = g["causes"]
        cached = g["measured_over_model"] < CACHED_RATIO and facts["l2"] / facts["dram"] > L2_OVER_DRAM
        assert ("cache-resident" in causes) == cached
        assert ("under one wave" in causes) == (waves < 1)
        assert ("low occupancy" in causes) == (occupancy < LOW_OCCUPANCY_PCT)
    # the L2 level of the hierarchical roofline: L2 bytes over the counted invocations' (trace) time
    con = sqlite3.connect(db)
    timed: dict[tuple[object, ...], float] = defaultdict(float)
    for ol, q, ne, src, dur in con.execute(
        "SELECT i.op_list, i.quant, i.ne, i.src_ne, r.duration_ns FROM op_roofline r JOIN op_invocation i "
        "ON i.run_id = r.run_id AND i.op_index = r.op_index WHERE r.run_id = ? AND r.dram_bytes IS NOT NULL",
        (run_id,),
    ):
        timed[(ol, q, ne, src)] += dur
    for key, facts in per_group.items():
        assert groups.loc[key]["l2_achieved_gbps"] == pytest.approx(facts["l2"] / timed[key], rel=1e-9)
        assert math.isnan(groups.loc[key]["pct_of_l2_ceiling"])  # no L2 ceiling is known for the H200
    # the norms re-read a 4 KB row from L2 many times: L2 traffic far above DRAM traffic
    norms = [k for k in per_group if k[0] == "RMS_NORM+MUL"]
    assert norms and all(per_group[k]["l2"] > 5 * per_group[k]["dram"] for k in norms)


def _attainable_tflops(ai: float, dram_gbps: float, peak: float | None) -> float:
    return min(peak, ai * dram_gbps / 1e3) if peak else ai * dram_gbps / 1e3


def _ranking_by_hand(db: Path, run_id: int) -> list[tuple[tuple[object, ...], float, float, float]]:
    """[(group key, recoverable ns, ratio measured/model, model bytes per call)], most recoverable first."""
    con = sqlite3.connect(db)
    ceilings = dict(con.execute("SELECT name, value FROM run_ceiling WHERE run_id = ?", (run_id,)))
    bw = ceilings["dram_gbps"]
    rows = con.execute(
        "SELECT i.op_list, i.quant, i.ne, i.src_ne, r.duration_ns, r.dram_bytes, r.flops, r.model_bytes, "
        "m.compute_ceiling FROM op_roofline r JOIN op_invocation i ON i.run_id = r.run_id AND i.op_index = r.op_index "
        "LEFT JOIN op_model m ON m.run_id = r.run_id AND m.op_index = r.op_index WHERE r.run_id = ?",
        (run_id,),
    ).fetchall()
    acc: dict[tuple[object, ...], dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for ol, q, ne, src, dur, dram, flops, model, ceiling in rows:
        a = acc[(ol, q, ne, src)]
        a["duration"] += dur
        if dram is None:
            continue
        if flops:
            peak = ceilings.get(ceiling) or ceilings.get("fp16_matrix_tflops")
            at_roof = flops / _attainable_tflops(flops / dram, bw, peak) / 1e3  # FLOP / (TFLOP/s) -> ns
        else:
            at_roof = dram / bw  # bytes / (GB/s) -> ns
        a["m_duration"] += dur
        a["over"] += dur - at_roof
        a["measured"] += 1
        if model:
            a["dram"] += dram
            a["model"] += model
            a["modelled"] += 1
    out = []
    for key, a in acc.items():
        if not a["measured"]:
            continue
        ratio = a["dram"] / a["model"] if a["model"] else None
        per_call = a["model"] / a["modelled"] if a["modelled"] else None
        out.append((key, a["duration"] * a["over"] / a["m_duration"], ratio, per_call))
    return sorted(out, key=lambda t: -t[1])


@pytest.mark.parametrize(
    "capture",
    [
        FLOPS,
        EXAMPLES / "h200" / "dense500m-decode",
        EXAMPLES / "h200" / "moe-prefill",
        EXAMPLES / "h200" / "dense-prefill",
        EXAMPLES / "h200-sampled" / "moe24-decode-sample",
    ],
    ids=lambda p: p.name,
)
def test_ranking_and_re_reads_match_the_roofline_worked_by_hand(capture: Path, tmp_path: Path) -> None:
    store, run_id = _store(capture, tmp_path / "r.db")
    advice = build_advice(store, run_id)
    hand = _ranking_by_hand(tmp_path / "r.db", run_id)
    got = advice.groups[advice.groups["recoverable_ns"].notna()]
    assert [tuple(k) for k in got[["op_list", "quant", "ne", "src_ne"]].to_numpy().tolist()] == [
        k for k, _, _, _ in hand
    ]
    for (_, recoverable, ratio, per_call), (_, g) in zip(hand, got.iterrows(), strict=True):
        assert g["recoverable_ns"] == pytest.approx(recoverable, rel=1e-9)
        # time at roof and recoverable time add up to the group's time (both scaled in a sample)
        assert g["time_at_roof_ns"] + g["recoverable_ns"] == pytest.approx(g["duration_ns"], rel=1e-9)
        if ratio is not None:
            assert g["measured_over_model"] == pytest.approx(ratio, rel=1e-9)
            assert ("re-reads" in g["causes"]) == (ratio > REREAD_RATIO and per_call >= SMALL_OP_BYTES)
    if capture == FLOPS:
        # one decoded token counted of 16 evaluations: savings scaled to the whole time; what the decode
        # of this model spends most on: the fused gate/up matmul (14.9% of GPU time)
        assert advice.sampled
        assert got.iloc[0]["op_list"] == "MUL_MAT+MUL_MAT+SWIGLU"


def test_launch_bound_cause_follows_call_length_and_idle_share(flops: tuple[Store, int, Path]) -> None:
    store, run_id, db = flops
    advice = build_advice(store, run_id)
    idle = advice.evaluations.set_index("evaluation")["idle_share"].to_dict()
    con = sqlite3.connect(db)
    per_group: dict[tuple[object, ...], list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for ol, q, ne, src, dur, disp, ev in con.execute(
        "SELECT i.op_list, i.quant, i.ne, i.src_ne, r.duration_ns, r.dispatches, r.evaluation FROM op_roofline r "
        "JOIN op_invocation i ON i.run_id = r.run_id AND i.op_index = r.op_index WHERE r.run_id = ?",
        (run_id,),
    ):
        acc = per_group[(ol, q, ne, src)]
        acc[0] += dur
        acc[1] += disp
        acc[2] += dur * idle[ev]
    groups = advice.groups.set_index(["op_list", "quant", "ne", "src_ne"])
    calls = dict(
        ((ol, q, ne, src), n)
        for ol, q, ne, src, n in con.execute(
            "SELECT op_list, quant, ne, src_ne, COUNT(*) FROM op_invocation WHERE run_id = ? "
            "GROUP BY op_list, quant, ne, src_ne",
            (run_id,),
        )
    )
    for key, (dur, disp, idle_time) in per_group.items():
        g = groups.loc[key]
        per_kernel, share = dur / disp / 1e3, idle_time / dur
        assert g["mean_us_per_call"] == pytest.approx(dur / calls[key] / 1e3, rel=1e-9)  # a call: an invocation
        assert g["mean_us_per_kernel"] == pytest.approx(per_kernel, rel=1e-9)
        assert g["idle_share"] == pytest.approx(share, rel=1e-9)
        assert ("launch-bound" in g["causes"]) == (per_kernel < 10 and share > 0.5)


def test_moe_example_shows_skew_per_layer(tmp_path: Path) -> None:
    store, run_id = _store(MOE, tmp_path / "m.db")
    advice = build_advice(store, run_id)
    sidecar = json.loads(gzip.decompress((MOE / "trace" / "ggml-op-meta.json.gz").read_bytes()))
    expected: dict[int, list[float]] = defaultdict(list)
    for op in sidecar["rows"]:
        counts = op.get("tokens_per_expert")
        if op.get("ggml_op") == "MUL_MAT_ID" and counts:
            layer = int(str(op["name"]).rsplit("-", 1)[1])
            # busiest expert over the most even whole-token share
            expected[layer].append(max(counts) / -(-sum(counts) // len(counts)))
    layers = advice.moe_layers.set_index("layer")
    assert sorted(expected) == layers.index.tolist()
    for layer, factors in expected.items():
        assert layers.loc[layer, "invocations"] == len(factors)
        assert layers.loc[layer, "max_imbalance"] == pytest.approx(max(factors))
    assert layers["max_imbalance"].max() > 2  # random routing of 64 tokens over 8 experts is far from even
    text = render_advice(advice, "markdown")
    assert "MoE routing" in text and "| layer |" in text


def test_advise_command_formats(flops: tuple[Store, int, Path]) -> None:
    _, _, db = flops
    runner = CliRunner()
    md = runner.invoke(cli, ["advise", "--db", str(db), "--format", "markdown", "--top", "5", "--evaluations"])
    assert md.exit_code == 0, md.output
    # Markdown: blocks apart (a line right after a table would join it), at most 9 columns per table
    tables = [b for b in md.output.split("\n\n") if b.startswith("|")]
    assert len(tables) == 2 and all(t.splitlines()[0].count("|") - 1 <= 9 for t in tables)
    assert all(all(line.startswith("|") for line in t.splitlines()) for t in tables)
    doc = json.loads(runner.invoke(cli, ["advise", "--db", str(db), "--format", "json"]).output)
    assert doc["report"] == "advise" and "host" not in doc["run"]
    assert len(doc["evaluations"]) == 16 and doc["groups"][0]["rank"] == 1
    csv_out = runner.invoke(cli, ["advise", "--db", str(db), "--format", "csv"]).output
    assert csv_out.splitlines()[0].startswith("rank,group,")
    table = runner.invoke(cli, ["advise", "--db", str(db)])
    assert table.exit_code == 0 and "Launch overhead" in table.output and "launch-bound" in table.output


OPS = EXAMPLES / "h200-counters" / "dense28-decode-ops"


def _fused_invocations(capture: Path) -> set[int]:
    con = _nsys(capture)
    texts = con.execute(
        "SELECT COALESCE(n.text, s.value) FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId"
    ).fetchall()
    return {int(t.split(":")[1]) for (t,) in texts if t and t.startswith("ggml-fused:")}


def test_decode_matmuls_count_the_hand_counted_dp4a() -> None:
    # ggml's MMVQ kernels multiply int8 by dp4a: one IDP instruction = 4 multiply-adds = 8 ops. The
    # products of an N x K weight matrix and one token are 2*N*K ops; Q4_K adds one activation-sum dp4a
    # per 4 / r value dp4a (r = rows a thread computes, sharing it: docs/measured-ops.md), Q6_K none.
    text = gzip.decompress((OPS / "ncu" / "ncu_raw.csv.gz").read_bytes()).decode()
    rows = list(csv.reader(io.StringIO(text)))
    head = rows[0]
    stack = head.index("thread Domain:Push/Pop_Range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg")
    opcodes = head.index("sass__thread_inst_executed_true_per_opcode")
    idp: dict[int, float] = defaultdict(float)
    unknown: set[int] = set()
    for row in rows[2:]:
        inv = int(re.findall(r'"<default domain>:ggml:[A-Z_]+:[^"]*?:(\d+):', row[stack])[-1])
        cell = row[opcodes]
        if "(" not in cell:  # Nsight Compute gave no instances for this kernel (the fused-ADD MMVQ variants)
            unknown.add(inv)
            continue
        m = re.search(r"\bIDP: ([0-9,]+)", cell)
        idp[inv] += float(m.group(1).replace(",", "")) if m else 0.0
    meta = json.loads(gzip.decompress((OPS / "trace" / "ggml-op-meta.json.gz").read_bytes()))
    fused = _fused_invocations(OPS)
    ratios: dict[str, list[float]] = defaultdict(list)
    for op in meta["rows"]:
        inv = op["invocation"]
        if op["ggml_op"] != "MUL_MAT" or inv in fused or inv in unknown or inv not in idp:
            continue
        (k, n, *_), (_, m, *_) = op["src_ne"][0], op["src_ne"][1]
        assert m == 1  # a decoded token
        ratios[op["src_types"][0]].append(8 * idp[inv] / (2 * n * k * m))
    assert sum(len(v) for v in ratios.values()) >= 28 * 3  # Q, K, V of every layer at least
    assert ratios["q6_K"] and all(r == pytest.approx(1.0, abs=1e-12) for r in ratios["q6_K"])
    assert ratios["q4_K"] and all(min(abs(r - (1 + 1 / rows)) for rows in (1, 2, 4, 8)) < 1e-12 for r in ratios["q4_K"])


def test_advise_counts_the_same_integer_ops(tmp_path: Path) -> None:
    store, run_id = _store(OPS, tmp_path / "o.db")
    advice = build_advice(store, run_id)
    assert advice.flushed  # the warm-replay warning with matmuls far under their weights: no L2 cause
    g = advice.groups.set_index("group")
    # Q6_K matvecs: exactly the model; Q4_K 1024 x 2048 (Q of every layer): 1.25
    assert g.loc["MUL_MAT q6_K 1024x151936 @ 1", "measured_ops_over_model"] == pytest.approx(1.0, abs=1e-12)
    assert g.loc["MUL_MAT q4_K 1024x2048 @ 1", "measured_ops_over_model"] == pytest.approx(1.25, abs=1e-12)
    # the fused-ADD variants have no per-opcode count: unknown, not zero
    assert math.isnan(g.loc["MUL_MAT+ADD q6_K 3072x1024 @ 1", "measured_int_ops"])


PREFILL = EXAMPLES / "h200-counters" / "dense28-prefill-ops"


def test_prefill_matmuls_count_the_padded_tensor_ops() -> None:
    # ggml's MMQ kernels multiply the 171-token prompt on the int8 tensor cores (IMMA), in tiles of J
    # tokens: mmq.cuh takes the first J (8..128, step 8, among those its config supports) with the
    # fewest tiles; the counted ops are 2 x N x K x M' with M' the tiles' tokens, the same for every
    # prompt matmul. Hand count from the raw CSV and the op metadata's shapes.
    text = gzip.decompress((PREFILL / "ncu" / "ncu_raw.csv.gz").read_bytes()).decode()
    rows = list(csv.reader(io.StringIO(text)))
    head = rows[0]
    stack = head.index("thread Domain:Push/Pop_Range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg")
    col = head.index("sm__ops_path_tensor_src_int8.sum")
    ops: dict[int, float] = defaultdict(float)
    for row in rows[2:]:
        inv = int(re.findall(r'"<default domain>:ggml:[A-Z_]+:[^"]*?:(\d+):', row[stack])[-1])
        ops[inv] += float(row[col].replace(",", ""))
    meta = json.loads(gzip.decompress((PREFILL / "trace" / "ggml-op-meta.json.gz").read_bytes()))
    padded = set()
    counted = 0
    for op in meta["rows"]:
        inv = op["invocation"]
        if op["ggml_op"] != "MUL_MAT" or inv not in ops or inv in _fused_invocations(PREFILL):
            continue
        (k, n, *_), (_, m, *_) = op["src_ne"][0], op["src_ne"][1]
        if m == 1:  # the prompt's last-token logits: a matvec (dp4a), no tensor ops
            assert ops[inv] == 0
            continue
        assert m == 171
        padded.add(ops[inv] / (2 * n * k))
        counted += 1
    assert counted >= 28 * 3
    assert padded == {192.0}  # two tiles of 96 tokens: 12% more work than the 171 tokens need


def test_advise_shows_the_prefill_tensor_ops(tmp_path: Path) -> None:
    store, run_id = _store(PREFILL, tmp_path / "p.db")
    g = build_advice(store, run_id).groups.set_index("group")
    row = g.loc["MUL_MAT q4_K 1024x3072 @ 171"]
    assert row["tensor_int_ops"] == pytest.approx(row["model_flop"] * 192 / 171, rel=1e-12)
    assert math.isnan(row["dp4a_ops"])  # not collected in this run: the integer total is unknown


def test_html_report_has_the_advice_section(flops: tuple[Store, int, Path]) -> None:
    _, _, db = flops
    page = CliRunner().invoke(cli, ["report", "--db", str(db), "--format", "html"]).output
    assert "<section id=advice><h2>What would pay most</h2>" in page
    section = page[page.index("<section id=advice>") : page.index("</section>", page.index("<section id=advice>"))]
    assert "MUL_MAT+MUL_MAT+SWIGLU q4_K 1024x3072 @ 1" in section and "launch-bound" in section
    assert section.count("<tr") == 1 + 10  # the header and the top 10 groups


def test_causes_from_planted_evidence() -> None:
    base = {"mean_us_per_call": 50.0, "mean_us_per_kernel": 50.0, "idle_share": 0.1, "bound": "memory"}
    assert causes({**base, "pct_of_ceiling": 80.0}, flushed=False) == []
    # served from L2: DRAM well under the model and L2 traffic far above it
    row = {**base, "pct_of_ceiling": 80.0, "measured_over_model": 0.2, "l2_over_dram": 9.0}
    assert causes(row, flushed=False) == ["cache-resident: 0.20x the modelled DRAM bytes, L2 moves 9.0x its DRAM bytes"]
    assert causes(row, flushed=True) == []  # caches flushed (or warmed by replay): cannot show
    # L2 traffic alone (a matmul's tile reuse) is not residency
    assert causes({**row, "measured_over_model": 1.0}, flushed=False) == []
    # re-reads need a call of some size; a few KB is a kernel's own traffic
    big = {**base, "pct_of_ceiling": 80.0, "measured_over_model": 1.6, "model_bytes_per_call": 1e6}
    assert causes(big, flushed=False) == ["re-reads: 1.60x the modelled DRAM bytes"]
    assert causes({**big, "model_bytes_per_call": 128.0}, flushed=False) == []
    # launch-bound goes by the kernels' length: 2 kernels of 4 µs in an idle GPU
    short = {**base, "mean_us_per_call": 8.0, "mean_us_per_kernel": 4.0, "idle_share": 0.8, "host_us_per_op": 20.0}
    assert causes(short, flushed=False)[0] == (
        "launch-bound: 8.0 µs calls (2 kernels of 4.0 µs), GPU idle 80% of their evaluations, host 20.0 µs/op"
    )
    low = {**base, "bound": "compute", "pct_of_ceiling": 20.0, "governing_ceiling": "int8_matrix_tops"}
    assert causes(low, flushed=False) == ["compute-bound at 20% of int8_matrix_tops"]


def test_waves_of_kernels_that_all_read_a_hundredth_are_a_hundredth() -> None:
    # Nsight prints waves per SM with two decimals: kernels that all read 0.01 average to 0.01, give or
    # take the last bit of the time-weighted sum; a grid that reads 0.00 is a few blocks
    base = {"mean_us_per_call": 50.0, "mean_us_per_kernel": 50.0, "idle_share": 0.1, "bound": "memory"}
    for waves in (0.01, 0.009999999999999998, 0.010000000000000002):
        assert causes({**base, "waves_per_sm": waves}, flushed=False) == ["under one wave: 0.01 waves per SM"]
    assert causes({**base, "waves_per_sm": 0.0}, flushed=False) == ["under one wave: a few blocks"]
    assert causes({**base, "waves_per_sm": 0.004}, flushed=False) == ["under one wave: a few blocks"]


@pytest.mark.parametrize("batch", [13, 500])
def test_advice_read_a_few_invocations_at_a_time_is_the_same(
    batch: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the invocations are read and summed a batch at a time (memory holds one batch): the groups, their
    # order and first names, the MoE view and the evaluations' tokens do not depend on the batch
    for capture in (MOE, FLOPS):
        db = tmp_path / f"{capture.name}.db"
        store, run_id = _store(capture, db)
        whole = build_advice(store, run_id)
        monkeypatch.setattr(advise, "INVOCATION_BATCH_ROWS", batch)
        parts = build_advice(store, run_id)
        monkeypatch.undo()
        assert len(whole.groups) > 5
        # float sums in another order: equal to their last digits
        pd.testing.assert_frame_equal(parts.groups, whole.groups, check_exact=False, rtol=1e-12)
        pd.testing.assert_frame_equal(parts.evaluations, whole.evaluations)
        pd.testing.assert_frame_equal(parts.moe_layers, whole.moe_layers)
        # and the ranking is still the one worked by hand from the stored roofline
        hand = _ranking_by_hand(db, run_id)
        got = parts.groups[parts.groups["recoverable_ns"].notna()]
        assert [tuple(k) for k in got[["op_list", "quant", "ne", "src_ne"]].to_numpy().tolist()] == [
            k for k, _, _, _ in hand
        ]
        for (_, recoverable, _, _), (_, g) in zip(hand, got.iterrows(), strict=True):
            assert g["recoverable_ns"] == pytest.approx(recoverable, rel=1e-9)
    assert len(parts.moe_layers) == 0 and len(whole.evaluations) == 16  # FLOPS: a dense decode of 16 tokens


def test_launch_overhead_of_rounded_timestamps_is_not_measurable(tmp_path: Path) -> None:
    # rocprofiler-compute's timestamps.csv of this workload rounds every kernel's start and end to the
    # same value (8.1097E+14): no window has a wall time, and nothing reads "0.0 µs" or "nan"
    store, run_id = _store(fixture_path("rocprof-compute", "vcopy", "MI300X_A1"), tmp_path / "r.db")
    advice = build_advice(store, run_id)
    line = launch_summary(advice)
    assert line is not None and line.startswith("Launch overhead: not measurable in this run")
    for fmt in ("table", "markdown"):
        text = render_advice(advice, fmt)
        assert "nan" not in text.lower() and "0.0 µs" not in text


@pytest.mark.parametrize("capture", [EXAMPLES / "h200-sampled" / "moe24-decode-sample", FLOPS], ids=lambda p: p.name)
def test_sampled_roofline_points_stay_under_the_memory_roof(capture: Path, tmp_path: Path) -> None:
    # a point's height over its intensity is the bandwidth it implies: the measured invocations' own
    # (DRAM bytes over their time, from the stored rows), never the bytes of one token over all tokens' time
    from rocroof.report.tables import build_report, roofline_points

    store, run_id = _store(capture, tmp_path / "s.db")
    rep = build_report(store, run_id, by="op")
    points = roofline_points(rep).set_index("label")
    con = sqlite3.connect(tmp_path / "s.db")
    for op, dram, dur in con.execute(
        "SELECT op, SUM(dram_bytes), SUM(duration_ns) FROM op_roofline WHERE run_id = ? AND dram_bytes IS NOT NULL "
        "AND op IS NOT NULL GROUP BY op",
        (run_id,),
    ):
        p = points.loc[op]
        if not p["ai_measured"] > 0:
            continue
        assert p["flops_per_s"] / p["ai_measured"] == pytest.approx(dram / dur * 1e9, rel=1e-6)
        assert p["flops_per_s"] / p["ai_measured"] <= rep.run["dram_peak_gbps"] * 1e9


def test_damaged_stored_values_are_unknown_not_nonsense(tmp_path: Path) -> None:
    # a database edited by hand (or by a bad tool): rows damaged after ingest must not crash advise or
    # become confident numbers
    db = tmp_path / "m.db"
    store, run_id = _store(MOE, db)
    con = sqlite3.connect(db)
    first = con.execute("SELECT MIN(dispatch_index) FROM dispatch_record WHERE dram_read_bytes IS NOT NULL").fetchone()[
        0
    ]
    con.execute("UPDATE dispatch_record SET dram_read_bytes = -1e9 WHERE dispatch_index = ?", (first,))
    con.execute("UPDATE dispatch_record SET dram_read_bytes = 9e999 WHERE dispatch_index = ?", (first + 1,))
    con.execute("UPDATE counter_reading SET value_0 = 'abc'")  # text where a count belongs
    con.execute(
        "UPDATE op_invocation SET tokens_per_expert = '[99999999999999999999999999999,1,2,3,4,5,6,7]' "
        "WHERE op_index = (SELECT MIN(op_index) FROM op_invocation WHERE op = 'MUL_MAT_ID')"
    )
    con.commit()
    advice = build_advice(Store(db, read_only=True), run_id)
    g = advice.groups
    for col in ("pct_of_ceiling", "recoverable_ns", "measured_over_model", "l2_bytes", "occupancy_pct"):
        v = pd.to_numeric(g[col], errors="coerce")
        assert ((v >= 0) | v.isna()).all() and np.isfinite(v.dropna()).all(), col
    assert (pd.to_numeric(g["recoverable_ns"], errors="coerce").fillna(0) <= g["duration_ns"] * (1 + 1e-9)).all()
    json.loads(render_advice(advice, "json"))  # strict JSON: no NaN or Infinity
    # the damaged routing is left out of the skew, not a crash or a wrapped sum
    assert advice.moe_layers["max_imbalance"].max() < 8
    page = CliRunner().invoke(cli, ["report", "--db", str(db), "--format", "html"])
    assert page.exit_code == 0, page.output


def test_counter_sums_read_from_the_wide_rows_equal_the_long_form_view(flops: tuple[Store, int, Path]) -> None:
    # advise reads counter_reading's columns directly; the documented counter_value view, grouped
    # here in plain SQL, must give the same sums, counts and times per invocation, pass and counter
    from rocroof.report.advise import _counter_sums

    store, run_id, db = flops
    con = sqlite3.connect(db)
    names = [n for (n,) in con.execute("SELECT counter_name FROM counter WHERE run_id = ?", (run_id,))]
    assert len(names) >= 3
    asked = [*names[:3], "not_a_counter"]
    expected = con.execute(
        "SELECT d.op_index, d.pass_index, c.counter_name, SUM(c.value), COUNT(c.value), "
        "SUM(c.value * d.duration_ns), SUM(CASE WHEN c.value IS NOT NULL THEN d.duration_ns END) "
        "FROM counter_value c JOIN dispatch_record d ON d.run_id = c.run_id AND d.dispatch_index = c.dispatch_index "
        f"WHERE c.run_id = ? AND d.op_index IS NOT NULL AND c.counter_name IN ({', '.join('?' * len(asked))}) "
        "GROUP BY d.op_index, d.pass_index, c.counter_name ORDER BY 1, 2, 3",
        (run_id, *asked),
    ).fetchall()
    con.close()
    assert len(expected) > 100
    got = _counter_sums(store, run_id, asked)
    assert [tuple(r) for r in got[["op_index", "pass_index", "counter_name"]].itertuples(index=False)] == [
        tuple(r[:3]) for r in expected
    ]
    for k, column in enumerate(("total", "kernels", "timed", "time"), start=3):
        np.testing.assert_allclose(got[column].astype(float).to_numpy(), [float(r[k]) for r in expected], rtol=1e-12)
    assert _counter_sums(store, run_id, ["not_a_counter"]).empty


def test_an_overflowing_l2_reading_is_unknown_not_zero(tmp_path: Path) -> None:
    # readings of 1e308 sum to infinity, which no measurement is: the group's L2 bytes are unknown
    # (null), not 0, and no numpy warning reaches the user
    db = tmp_path / "r.db"
    store, run_id = _store(EXAMPLES / "h200-counters" / "dense28-decode-ops", db)
    with sqlite3.connect(db) as con:
        (index,) = con.execute("SELECT counter_index FROM counter WHERE counter_name = 'lts__t_bytes.sum'").fetchone()
        con.execute(
            f"UPDATE counter_reading SET value_{index % 16} = 1e308 WHERE block = ? AND value_{index % 16} IS NOT NULL",
            (index // 16,),
        )
    con.close()
    out = CliRunner().invoke(cli, ["advise", "--db", str(db), "--format", "json"])
    assert out.exit_code == 0, out.output
    assert "RuntimeWarning" not in out.output
    groups = json.loads(out.stdout)["groups"]
    # unknown where a sum overflowed; a group of one reading keeps it (1e308 is finite)
    assert groups and all(g["l2_bytes"] is None or g["l2_bytes"] >= 1e308 for g in groups)
    assert sum(g["l2_bytes"] is None for g in groups) > len(groups) // 2
    assert "Infinity" not in out.stdout
