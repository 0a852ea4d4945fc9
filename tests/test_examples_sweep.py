"""The recorded H200 sweep (examples/h200-sweep, configs/sweeps/h200-tiny.yaml on 2 GPUs): replay it
and check what ``rocroof diff`` says about repeats and about fusion on vs off.

Expected values come from the Nsight Systems exports read here with sqlite3: the ggml NVTX ranges
after the last ``ggml reset`` mark (nodes per graph evaluation) and the kernel durations of the
CUDA activity table (GPU time per evaluation), not from rocroof.
"""

from __future__ import annotations

import gzip
import json
import sqlite3
from pathlib import Path

import pytest
import yaml

from rocroof.report.diff import diff_runs, render_diff
from rocroof.store import Store
from rocroof.sweep import load_sweep, run_sweep

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "h200-sweep"
SWEEP = ROOT / "configs" / "sweeps" / "replay-h200-sweep.yaml"
DECODE_TOKENS = 8  # h200-tiny.yaml: decode = llama-bench -p 0 -n 8


def cases() -> list[str]:
    return sorted(p.name for p in EXAMPLES.iterdir() if p.is_dir())


def nsys_export(case: str) -> tuple[sqlite3.Connection, list[tuple[int, int, int | None, int, str]], int]:
    """A point's Nsight Systems export in memory, its NVTX events ``(type, start, end, globalTid,
    message)`` in start order, and the time of the last ``ggml reset`` mark (ns)."""
    con = sqlite3.connect(":memory:")
    con.deserialize(gzip.decompress((EXAMPLES / case / "trace" / "nsys.sqlite.gz").read_bytes()))
    events = con.execute(
        "SELECT n.eventType, n.start, n.end, n.globalTid, COALESCE(n.text, s.value) FROM NVTX_EVENTS n "
        "LEFT JOIN StringIds s ON s.id = n.textId ORDER BY n.start"
    ).fetchall()
    reset = max(e[1] for e in events if e[0] == 34 and e[4] == "ggml reset")
    return con, events, reset


def nsys_graph(case: str) -> tuple[int, float]:
    """(ggml ranges after the reset mark, summed kernel ns launched after it), via sqlite3."""
    con, events, reset = nsys_export(case)
    ranges = sum(1 for kind, start, _, _, msg in events if kind == 59 and start > reset and msg.startswith("ggml:"))
    ns = con.execute(
        "SELECT SUM(k.end - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN CUPTI_ACTIVITY_KIND_RUNTIME r "
        "ON r.correlationId = k.correlationId WHERE r.start > ?",
        (reset,),
    ).fetchone()[0]
    return ranges, float(ns)


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> tuple[Store, dict[str, int]]:
    path = tmp_path_factory.mktemp("sweep") / "s.db"
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(ROOT)  # the sweep file's capture paths are relative to the repository root
        outcome = run_sweep(load_sweep(SWEEP), db=str(path))
    assert [r.status for r in outcome.results] == ["done"] * len(cases())
    store = Store(path, read_only=True)
    labels = store.query("SELECT run_id, value FROM run_label WHERE key = 'case'")
    return store, dict(zip(labels["value"], labels["run_id"].astype(int), strict=True))


def test_the_replay_sweep_names_every_recorded_point() -> None:
    matrix = yaml.safe_load(SWEEP.read_text())["matrix"]["case"]
    assert sorted(matrix) == cases()
    # 2 models x prefill/decode x fusion on/off x 2 repeats, less the one point the recording stopped in
    assert len(cases()) == 15 and "moe-tiny-decode-no-fusion-r2" not in cases()


@pytest.mark.parametrize("model", ["dense-tiny", "moe-tiny"])
def test_fusion_off_regroups_the_decode_graph_and_costs_gpu_time(db: tuple[Store, dict[str, int]], model: str) -> None:
    store, run = db
    on, off = f"{model}-decode-fusion-r1", f"{model}-decode-no-fusion-r1"
    t = diff_runs(store, run[on], run[off]).total.iloc[0]
    (ranges_on, ns_on), (ranges_off, ns_off) = nsys_graph(on), nsys_graph(off)
    assert t["nodes_a"] == ranges_on // DECODE_TOKENS and t["nodes_b"] == ranges_off // DECODE_TOKENS
    assert t["nodes_b"] > t["nodes_a"]  # unfused: each op of a fused group is its own node again
    # the whole-graph time per evaluation is the summed kernel time over the decoded tokens
    assert t["us_per_eval_all_a"] == pytest.approx(ns_on / DECODE_TOKENS / 1e3, rel=1e-6)
    assert t["us_per_eval_all_b"] == pytest.approx(ns_off / DECODE_TOKENS / 1e3, rel=1e-6)
    assert t["delta_pct_all"] == pytest.approx(100 * (ns_off / ns_on - 1), abs=1e-6)
    assert t["delta_pct_all"] > 10  # measured: dense +19%, MoE +41%
    # the JSON output carries the same whole-graph totals, beside every node
    doc = json.loads(render_diff(diff_runs(store, run[on], run[off]), "json", names=(on, off)))
    assert (doc["run_a"], doc["run_b"], doc["name_a"]) == (run[on], run[off], on)
    assert doc["total"]["us_per_eval_all_b"] == pytest.approx(ns_off / DECODE_TOKENS / 1e3, rel=1e-6)
    assert doc["total"]["delta_pct_all"] == pytest.approx(100 * (ns_off / ns_on - 1), abs=1e-6)
    assert len(doc["nodes"]) == ranges_on // DECODE_TOKENS + ranges_off // DECODE_TOKENS - doc["total"]["matched_nodes"]
    assert sum(op["only_b"] for op in doc["by_op"]) == doc["total"]["only_in_b"]
    # llama.cpp names both norms of a layer norm-N (and qwen3's q/k norms too, with other shapes):
    # shapes and occurrence tell the nodes apart
    keys = [(n["op_list"], n["node_name"], n["shapes"], n["occurrence"]) for n in doc["nodes"]]
    assert len(set(keys)) == len(keys)
    assert {n["occurrence"] for n in doc["nodes"] if n["node_name"] == "norm-0"} == {0, 1}


@pytest.mark.parametrize("case", ["dense-tiny-decode-fusion", "dense-tiny-decode-no-fusion", "moe-tiny-decode-fusion"])
def test_two_repeats_differ_by_noise(db: tuple[Store, dict[str, int]], case: str) -> None:
    store, run = db
    d = diff_runs(store, run[f"{case}-r1"], run[f"{case}-r2"])
    t = d.total.iloc[0]
    (r1, ns1), (r2, ns2) = nsys_graph(f"{case}-r1"), nsys_graph(f"{case}-r2")
    assert r1 == r2 and t["only_in_a"] == t["only_in_b"] == 0  # the same graph
    assert t["delta_pct_all"] == pytest.approx(100 * (ns2 / ns1 - 1), abs=1e-6)
    assert abs(t["delta_pct_all"]) < 3  # the same run twice: the whole graph within a few %
    assert d.by_node["verdict"].eq("noise").all()  # the same run twice: noise only
    # what the floors rest on, from the exports: per graph position, the mean kernel time per call
    # moved by under 0.25 µs between the repeats (8 samples each)
    a, b = node_means_us(f"{case}-r1"), node_means_us(f"{case}-r2")
    assert len(a) == len(b) == t["matched_nodes"]
    assert max(abs(y - x) for x, y in zip(a, b, strict=True)) < 0.25
    # without the absolute floor, 5% alone calls some of those small moves a change
    if case == "dense-tiny-decode-fusion":
        loose = diff_runs(store, run[f"{case}-r1"], run[f"{case}-r2"], min_change_us=0).by_node
        changed = loose[loose["verdict"].isin(["faster", "slower"])]
        assert len(changed) and (changed["delta_us"].abs() < 0.25).all()


def node_means_us(case: str) -> list[float]:
    """Mean GPU time per call of each graph position after the reset mark, µs, via sqlite3.

    A kernel belongs to the ggml range that holds its launching runtime call on the same thread;
    the k-th range of every evaluation is graph position k (decode evaluates the same graph per
    token).
    """
    con, events, reset = nsys_export(case)
    ranges = [
        (start, end, tid)
        for kind, start, end, tid, msg in events
        if kind == 59 and start > reset and msg.startswith("ggml:")
    ]
    launches = con.execute(
        "SELECT r.start, r.globalTid, k.end - k.start FROM CUPTI_ACTIVITY_KIND_KERNEL k "
        "JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId WHERE r.start > ?",
        (reset,),
    ).fetchall()
    ns = [0.0] * len(ranges)
    for t, tid, dur in launches:
        hit = [i for i, (s, e, rt) in enumerate(ranges) if rt == tid and s <= t <= e]
        assert len(hit) == 1, (case, t)
        ns[hit[0]] += dur
    per_eval = len(ranges) // DECODE_TOKENS
    assert per_eval * DECODE_TOKENS == len(ranges)
    return [sum(ns[k::per_eval]) / DECODE_TOKENS / 1e3 for k in range(per_eval)]


def test_the_sweep_captures_hold_no_environment_or_paths() -> None:
    for path in EXAMPLES.rglob("*"):
        if not path.is_file() or path.suffix == ".md":
            continue
        data = path.read_bytes()
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
        for needle in (b"PATH=", b"HOME=", b"/tmp/", b"/root", b"/home/", b"CONTAINER_NAME", b"127.0.0.1", b"GPU-"):
            assert needle not in data, (path, needle)


def test_the_terminal_table_of_a_diff_keeps_columns(db: tuple[Store, dict[str, int]]) -> None:
    from rocroof.report.diff import render_diff

    store, run = db
    d = diff_runs(store, run["dense-tiny-decode-fusion-r1"], run["dense-tiny-decode-no-fusion-r1"])
    text = render_diff(d, "table")
    assert "-- row 1 --" not in text  # not one block per op type
    header = next(line for line in text.splitlines() if line.startswith("op "))
    assert "µs/eval A" in header and "all nodes µs B" in header and "only B" in header


def test_the_op_report_names_the_fused_groups_each_row_includes(db: tuple[Store, dict[str, int]]) -> None:
    from rocroof.report.tables import build_report, render

    store, run = db
    case = "moe-tiny-decode-fusion-r1"
    # the hook's ggml-fused marks after the reset, counted per op list from the export
    _, events, reset = nsys_export(case)
    marks: dict[str, int] = {}
    for kind, start, _, _, msg in events:
        if kind == 34 and start > reset and msg.startswith("ggml-fused:"):
            op_list = msg.split(":")[2]
            marks[op_list] = marks.get(op_list, 0) + 1
    rep = build_report(store, run[case], "op")
    assert {op_list: n for _, op_list, n in rep.fused} == marks
    assert all(op == op_list.split("+")[0] for op, op_list, _ in rep.fused)
    line = next(x for x in render(rep, "table").splitlines() if x.startswith("fused groups count under"))
    assert f"RMS_NORM+MUL ({marks['RMS_NORM+MUL']} inv.)" in line
