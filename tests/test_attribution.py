"""Kernel dispatch -> ggml op attribution from recorded-format rocprofv3 CSV traces.

Every trace here is written by the test in the exact ROCm 7.0 CSV format, as a llama.cpp
process under rocprofv3 would leave it: ``ggml:<OP>:<node name>:<invocation>`` roctx ranges
on the host thread around ``hipLaunchKernel`` calls, and kernels that the GPU runs after the
range has closed. Expected attributions come from what the simulated program did (which range
was open when it launched each kernel), never from rocroof's output.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from rocroof.capture.readers import read_capture
from rocroof.ingest.pipeline import build_run, with_range_messages
from rocroof.store import Store

from .rocprof_csv import T0, Kernel, Recorder, api, rng, write_pass

# One decode step of a tiny llama graph: (op, node name, kernels it launches).
QUANT = "void quantize_q8_1<false>(float const*, void*, long, long, long, long)"
MMQ = "void mul_mat_q<(ggml_type)8, 64, false>(char const*, int const*, float*, float*, int, int, int, int, int)"
TOKEN_GRAPH: list[tuple[str, str, list[str]]] = [
    ("GET_ROWS", "inp_embd", ["void k_get_rows_float<float, float>(float const*, int const*, float*, long)"]),
    ("RMS_NORM", "norm-0", ["void rms_norm_f32<1024>(float const*, float*, int, long, long, long, float)"]),
    ("MUL_MAT", "Qcur-0", [QUANT, MMQ]),
    ("ROPE", "Qcur-0 (view): rope", ["void rope_neox<false, float>(float const*, float*, int, int)"]),
    ("SOFT_MAX", "kq_soft_max-0", ["void soft_max_f32<true, 0, 0>(float const*, float const*, float*)"]),
    ("MUL_MAT", "ffn_out-0", [QUANT, MMQ]),
    ("ADD", "l_out-0", ["void k_bin_bcast<op_add, float, float, float>(float const*, float const*, float*)"]),
]


def _ingest(path: Path, db: Path, **kwargs: Any) -> tuple[Store, int]:
    run_id = Store(db).write_run(build_run(read_capture(path), **kwargs))
    return Store(db, read_only=True), run_id


def _dispatches(store: Store, run_id: int) -> pd.DataFrame:
    """The dispatch_dram view plus the message of each dispatch's innermost range."""
    return store.query(
        "SELECT v.dispatch_id, v.kernel_name, v.start_ns, v.end_ns, v.duration_ns, v.invocation, v.op, v.op_list, "
        "v.node_name, v.kernel_ordinal, v.attribution_method, d.range_index, d.launch_ns, r.message AS range_message "
        "FROM dispatch_dram v JOIN dispatch d ON d.run_id = v.run_id AND d.dispatch_index = v.dispatch_index "
        "LEFT JOIN marker_range r ON r.run_id = d.run_id AND r.range_index = d.range_index "
        f"WHERE v.run_id = {run_id} ORDER BY v.dispatch_id"
    ).set_index("dispatch_id")


def _notes(store: Store, run_id: int) -> dict[str, str]:
    notes = store.query(f"SELECT code, message FROM run_note WHERE run_id = {run_id}")
    return dict(zip(notes["code"], notes["message"], strict=True))


def _missing(value: object) -> bool:
    return value is None or bool(pd.isna(value))


def _run_graph(rec: Recorder, graph: Sequence[tuple[str, str, list[str]]], first_invocation: int) -> dict[int, Any]:
    """Launch each op of ``graph`` inside its ggml range; return the truth per dispatch id."""
    truth: dict[int, Any] = {}
    for k, (op, name, kernels) in enumerate(graph):
        invocation = first_invocation + k
        message = f"ggml:{op}:{name}:{invocation}"
        rec.push(message)
        for ordinal, kernel_name in enumerate(kernels):
            kernel = rec.launch(kernel_name)
            truth[kernel.dispatch_id] = (invocation, op, name, ordinal, message)
        rec.pop()
    return truth


# --------------------------------------------------------------------------------------------
# 1. the llama.cpp pattern: GPU start after the range closed
# --------------------------------------------------------------------------------------------


def test_llamacpp_trace_attributes_every_dispatch_to_the_range_of_its_launch(tmp_path: Path) -> None:
    rec = Recorder(pid=4242)
    rec.call("hipMalloc")
    truth = _run_graph(rec, TOKEN_GRAPH, first_invocation=0)
    rec.sync()
    rec.call("hipMemcpy")  # logits D2H
    truth |= _run_graph(rec, TOKEN_GRAPH, first_invocation=len(TOKEN_GRAPH))
    rec.sync()
    capture = rec.write(tmp_path / "capture")
    assert sorted(p.name for p in capture.iterdir()) == [
        "4242_hip_api_trace.csv",
        "4242_kernel_trace.csv",
        "4242_marker_api_trace.csv",
    ]

    ranges = {r["Function"]: (r["Start_Timestamp"], r["End_Timestamp"]) for r in rec.markers}
    kernels = {k.dispatch_id: k for k in rec.kernels}
    # the premise: every kernel starts on the GPU after the range that launched it closed
    for did, (*_, message) in truth.items():
        assert kernels[did].start > ranges[message][1]

    store, run_id = _ingest(capture, tmp_path / "r.db")
    rows = _dispatches(store, run_id)
    assert sorted(rows.index) == sorted(truth)  # 2 tokens x 9 kernels
    assert len(rows) == 18
    for did, (invocation, op, name, ordinal, message) in truth.items():
        row = rows.loc[did]
        assert (row["invocation"], row["op"], row["node_name"], row["kernel_ordinal"]) == (
            invocation,
            op,
            name,
            ordinal,
        )
        assert row["attribution_method"] == "launch_api"
        assert row["range_message"] == message
        # the host time of the launching hipLaunchKernel call, all 17 digits
        assert row["launch_ns"] == next(
            a["Start_Timestamp"] for a in rec.apis if a["Correlation_Id"] == kernels[did].corr
        )
        assert row["start_ns"] == kernels[did].start
        assert row["duration_ns"] == rec.kernel_ns
    ops = store.query(
        f"SELECT invocation, op, node_name FROM op_invocation WHERE run_id = {run_id} ORDER BY invocation"
    )
    assert ops["invocation"].tolist() == list(range(2 * len(TOKEN_GRAPH)))
    assert ops.loc[3, "node_name"] == "Qcur-0 (view): rope"  # colons and spaces survive
    assert store.query(f"SELECT attribution_method FROM run WHERE run_id = {run_id}").iloc[0, 0] == "launch_api"
    assert "unattributed" not in _notes(store, run_id)

    # naive attribution, "the GPU start falls inside the range", computed here: wrong for every dispatch
    def naive(start: int) -> int | None:
        inside = [(s, m) for m, (s, e) in ranges.items() if s <= start <= e]
        return int(max(inside)[1].rsplit(":", 1)[1]) if inside else None

    answers = {did: naive(kernels[did].start) for did in truth}
    assert all(answers[did] != truth[did][0] for did in truth)
    # ...and not merely missing: some kernels land in the range of a later op
    assert any(answers[did] is not None for did in truth)


# --------------------------------------------------------------------------------------------
# 2. nesting, threads, boundaries, unattributed launches, fused groups, warm-up
# --------------------------------------------------------------------------------------------


def test_nested_ranges_innermost_ggml_range_wins(tmp_path: Path) -> None:
    rec = Recorder(pid=77)
    rec.push("llama_decode")  # a user range around the graph
    rec.push("ggml:MUL_MAT:Qcur-0:0")
    k_direct = rec.launch("quantize")
    rec.push("hipblasLt gemm")  # a library's own range inside the ggml range
    k_lib = rec.launch("Cijk_Alik_Bljk_HHS_BH_MT64x64x32")
    rec.mark("inside library")
    rec.pop()
    rec.pop()
    rec.push("ggml:ADD:l_out-0:1")
    k_add = rec.launch("k_bin_bcast")
    rec.pop()
    k_user = rec.launch("user kernel")  # only the user range is open
    rec.pop()
    rec.sync()
    store, run_id = _ingest(rec.write(tmp_path / "cap"), tmp_path / "r.db")
    rows = _dispatches(store, run_id)

    assert rows.loc[k_direct.dispatch_id, "range_message"] == "ggml:MUL_MAT:Qcur-0:0"
    # range_index names the innermost range (the library's); the op comes from the innermost ggml range
    assert rows.loc[k_lib.dispatch_id, "range_message"] == "hipblasLt gemm"
    assert rows.loc[k_lib.dispatch_id, ["invocation", "op", "kernel_ordinal"]].tolist() == [0, "MUL_MAT", 1]
    assert rows.loc[k_add.dispatch_id, ["invocation", "op", "kernel_ordinal"]].tolist() == [1, "ADD", 0]
    # inside "llama_decode" but no ggml range: unattributed, with its range still recorded
    assert rows.loc[k_user.dispatch_id, "range_message"] == "llama_decode"
    assert _missing(rows.loc[k_user.dispatch_id, "invocation"])
    assert rows.loc[k_user.dispatch_id, "attribution_method"] == "none"

    depth = store.query(f"SELECT message, kind, depth FROM marker_range WHERE run_id = {run_id}")
    assert dict(zip(depth["message"], depth["depth"], strict=True)) == {
        "llama_decode": 0,
        "ggml:MUL_MAT:Qcur-0:0": 1,
        "hipblasLt gemm": 2,
        "inside library": 3,  # a mark: the number of ranges open around it
        "ggml:ADD:l_out-0:1": 1,
    }


def test_ranges_are_matched_on_the_launching_thread(tmp_path: Path) -> None:
    main, worker = 500, 501
    t = T0
    markers = [
        rng("ggml:MUL_MAT:Qcur-0:0", 1, t + 100, t + 400, pid=500, tid=main),
        rng("ggml:ADD:l_out-0:1", 2, t + 150, t + 300, pid=500, tid=worker),
    ]
    apis = [
        api("hipLaunchKernel", 3, t + 200, t + 210, pid=500, tid=worker),  # inside both ranges in time
        api("hipLaunchKernel", 4, t + 350, t + 360, pid=500, tid=main),
        api("hipLaunchKernel", 5, t + 380, t + 390, pid=500, tid=worker),  # worker's range is closed
    ]
    kernels = [
        Kernel(1, "k_bin_bcast", 3, t + 1000, t + 1100, tid=worker),
        Kernel(2, "mul_mat_q", 4, t + 1100, t + 1300, tid=main),
        Kernel(3, "worker copy", 5, t + 1300, t + 1400, tid=worker),
    ]
    write_pass(tmp_path / "cap", 500, kernels=kernels, markers=markers, apis=apis)
    store, run_id = _ingest(tmp_path / "cap", tmp_path / "r.db")
    rows = _dispatches(store, run_id)
    assert rows.loc[1, ["invocation", "op"]].tolist() == [1, "ADD"]
    assert rows.loc[2, ["invocation", "op"]].tolist() == [0, "MUL_MAT"]
    assert _missing(rows.loc[3, "invocation"])  # the main thread's open range does not hold it
    assert _missing(rows.loc[3, "range_index"])


def test_back_to_back_ranges_with_equal_boundary_timestamps(tmp_path: Path) -> None:
    t = T0
    # the pop of one range and the push of the next carry the same timestamp
    markers = [
        rng("ggml:RMS_NORM:norm-0:0", 1, t + 100, t + 200),
        rng("ggml:MUL:attn_norm-0:1", 4, t + 200, t + 300),
        rng("ggml:MUL_MAT:Qcur-0:2", 7, t + 300, t + 400),
    ]
    apis = [
        api("hipLaunchKernel", 2, t + 150, t + 160),
        api("hipLaunchKernel", 5, t + 200, t + 210),  # starts at the shared boundary, after the second push
        api("hipLaunchKernel", 6, t + 299, t + 300),
        api("hipLaunchKernel", 8, t + 400, t + 400),  # at the last range's closing instant: still inside
    ]
    kernels = [Kernel(i + 1, f"k{i}", c, t + 1000 + 100 * i, t + 1050 + 100 * i) for i, c in enumerate((2, 5, 6, 8))]
    write_pass(tmp_path / "cap", 1234, kernels=kernels, markers=markers, apis=apis)
    store, run_id = _ingest(tmp_path / "cap", tmp_path / "r.db")
    rows = _dispatches(store, run_id)
    assert rows["invocation"].tolist() == [0, 1, 1, 2]
    assert rows["kernel_ordinal"].tolist() == [0, 0, 1, 0]
    # sequential ranges, none inside another
    depth = store.query(f"SELECT depth FROM marker_range WHERE run_id = {run_id}")["depth"]
    assert depth.tolist() == [0, 0, 0]


def test_launch_outside_any_range_is_stored_and_counted_unattributed(tmp_path: Path) -> None:
    rec = Recorder(pid=9)
    truth = _run_graph(rec, TOKEN_GRAPH[:2], first_invocation=0)
    stray = rec.launch("void memset_kernel<float>(float*, float, long)")  # e.g. a buffer clear between graphs
    truth |= _run_graph(rec, TOKEN_GRAPH[2:3], first_invocation=2)
    rec.sync()
    store, run_id = _ingest(rec.write(tmp_path / "cap"), tmp_path / "r.db")
    rows = _dispatches(store, run_id)
    assert len(rows) == len(truth) + 1 == 5
    row = rows.loc[stray.dispatch_id]
    assert _missing(row["invocation"]) and _missing(row["op"]) and _missing(row["range_index"])
    assert row["attribution_method"] == "none"
    assert row["launch_ns"] == next(a["Start_Timestamp"] for a in rec.apis if a["Correlation_Id"] == stray.corr)
    assert row["duration_ns"] == rec.kernel_ns
    for did, (invocation, _, _, ordinal, _) in truth.items():
        assert rows.loc[did, ["invocation", "kernel_ordinal"]].tolist() == [invocation, ordinal]
    assert _notes(store, run_id)["unattributed"].startswith("1 dispatch(es)")
    passes = store.query(f"SELECT dispatch_count FROM pass WHERE run_id = {run_id}")
    assert passes["dispatch_count"].tolist() == [5]
    kernels = store.query(f"SELECT COUNT(*) AS n FROM dispatch WHERE run_id = {run_id} AND op_index IS NULL")
    assert kernels["n"].iloc[0] == 1


@pytest.mark.parametrize("bad", ["ggml:MUL_MAT:blk.0.ffn_up:notanumber", "ggml:ADD:x:99999999999999999999999", "ggml:"])
def test_a_range_that_breaks_the_hook_grammar_is_warned_about(tmp_path: Path, bad: str) -> None:
    """A damaged or hand-edited ``ggml:`` range holds no op: its dispatch is unattributed, and a warning says why."""
    rec = Recorder(pid=12)
    truth = _run_graph(rec, TOKEN_GRAPH[:1], first_invocation=0)
    rec.push(bad)
    stray = rec.launch("void k_bin_bcast<op_add>(const float*, const float*, float*)")
    rec.pop()
    rec.sync()
    store, run_id = _ingest(rec.write(tmp_path / "cap"), tmp_path / "r.db")
    rows = _dispatches(store, run_id)
    assert rows.loc[stray.dispatch_id, "attribution_method"] == "none"
    assert all(rows.loc[did, "invocation"] == truth[did][0] for did in truth)
    message = _notes(store, run_id)["malformed-range"]
    assert message.startswith(
        "pass 1: 1 range(s) start with 'ggml:' but do not read ggml:<OP>:<node name>:<invocation>"
    )
    assert repr(bad) in message


def test_fused_group_mark_sets_the_op_list(tmp_path: Path) -> None:
    rec = Recorder(pid=31)
    rec.push("ggml:RMS_NORM:norm-0:0")
    fused = rec.launch("void rms_norm_f32<1024, true>(float const*, float*, float const*, int)")
    rec.mark("ggml-fused:0:RMS_NORM+MUL:norm-0|attn_norm-0")  # the hook names the fused nodes in the range
    rec.pop()
    rec.push("ggml:MUL_MAT:Qcur-0:2")
    plain = rec.launch(MMQ)
    rec.pop()
    rec.sync()
    store, run_id = _ingest(rec.write(tmp_path / "cap"), tmp_path / "r.db")
    rows = _dispatches(store, run_id)
    assert rows.loc[fused.dispatch_id, ["op", "op_list", "invocation"]].tolist() == ["RMS_NORM", "RMS_NORM+MUL", 0]
    assert rows.loc[plain.dispatch_id, ["op", "op_list"]].tolist() == ["MUL_MAT", "MUL_MAT"]
    ops = store.query(
        "SELECT invocation, op_list, node_names, is_fused FROM op_invocation "
        f"WHERE run_id = {run_id} ORDER BY invocation"
    )
    assert ops["op_list"].tolist() == ["RMS_NORM+MUL", "MUL_MAT"]
    assert ops["node_names"].iloc[0] == "norm-0|attn_norm-0"
    assert ops["is_fused"].astype(bool).tolist() == [True, False]


def _warmup_then_run(tmp_path: Path, hip: bool = True) -> tuple[Path, dict[int, Any], dict[int, Any]]:
    rec = Recorder(pid=64)
    warm = _run_graph(rec, TOKEN_GRAPH[:3], first_invocation=0)
    rec.sync()
    rec.mark("ggml reset")
    # invocation ids stay monotonic across the reset
    real = _run_graph(rec, TOKEN_GRAPH[:3], first_invocation=3)
    rec.sync()
    return rec.write(tmp_path / "cap", hip=hip), warm, real


@pytest.mark.parametrize("hip", [True, False], ids=["launch-time", "correlation-order"])
def test_ggml_reset_drops_the_warmup_dispatches(tmp_path: Path, hip: bool) -> None:
    capture, warm, real = _warmup_then_run(tmp_path, hip)
    store, run_id = _ingest(capture, tmp_path / "r.db")
    rows = _dispatches(store, run_id)
    assert sorted(rows.index) == sorted(real)
    for did, (invocation, op, _, ordinal, _) in real.items():
        assert rows.loc[did, ["invocation", "op", "kernel_ordinal"]].tolist() == [invocation, op, ordinal]
    assert _notes(store, run_id)["warmup-dropped"] == (
        f"pass 1: dropped {len(warm)} warm-up dispatches before the last 'ggml reset' mark"
    )
    assert store.query(f"SELECT dispatch_count FROM pass WHERE run_id = {run_id}").iloc[0, 0] == len(real)


def test_keep_warmup_keeps_the_dispatches_before_the_reset(tmp_path: Path) -> None:
    capture, warm, real = _warmup_then_run(tmp_path)
    store, run_id = _ingest(capture, tmp_path / "r.db", keep_warmup=True)
    rows = _dispatches(store, run_id)
    assert sorted(rows.index) == sorted(warm | real)
    assert rows.loc[min(warm), "invocation"] == 0
    assert "warmup-dropped" not in _notes(store, run_id)


# --------------------------------------------------------------------------------------------
# 3. fallbacks: correlation-id order without a HIP trace; --kernel-rename names
# --------------------------------------------------------------------------------------------


def test_enqueue_order_attributes_by_correlation_id_without_hip_trace(tmp_path: Path) -> None:
    rec = Recorder(pid=4242)
    rec.push("llama_decode")  # a user range around the ggml ranges
    truth = _run_graph(rec, TOKEN_GRAPH, first_invocation=0)
    rec.pop()
    rec.sync()
    capture = rec.write(tmp_path / "cap", hip=False)
    assert not list(capture.glob("*hip_api_trace*"))
    store, run_id = _ingest(capture, tmp_path / "r.db")
    rows = _dispatches(store, run_id)
    assert len(rows) == len(truth)
    for did, (invocation, op, name, ordinal, message) in truth.items():
        row = rows.loc[did]
        assert (row["invocation"], row["op"], row["node_name"], row["kernel_ordinal"]) == (
            invocation,
            op,
            name,
            ordinal,
        )
        assert row["attribution_method"] == "enqueue_order"
        assert row["range_message"] == message
        assert _missing(row["launch_ns"])
    assert "attribution-enqueue-order" in _notes(store, run_id)


def test_enqueue_order_with_nested_and_user_ranges(tmp_path: Path) -> None:
    rec = Recorder(pid=4242)
    rec.push("ggml:MUL_MAT:Qcur-0:0")
    k1 = rec.launch(QUANT)
    rec.push("hipblasLt gemm")  # a library range inside the ggml range
    k2 = rec.launch("Cijk_Alik_Bljk_HHS_BH_MT64x64x32")
    rec.pop()
    rec.pop()
    rec.push("sampling")  # a user range after the ggml range closed
    k3 = rec.launch("void top_k_kernel<float>(float const*, int*, int)")
    rec.pop()
    rec.push("ggml:ADD:l_out-0:1")
    k4 = rec.launch("k_bin_bcast")
    rec.pop()
    rec.sync()
    store, run_id = _ingest(rec.write(tmp_path / "cap", hip=False), tmp_path / "r.db")
    rows = _dispatches(store, run_id)
    assert rows.loc[k1.dispatch_id, ["invocation", "range_message"]].tolist() == [0, "ggml:MUL_MAT:Qcur-0:0"]
    assert rows.loc[k2.dispatch_id, ["invocation", "kernel_ordinal", "range_message"]].tolist() == [
        0,
        1,
        "hipblasLt gemm",
    ]
    # "sampling" was pushed after the MUL_MAT range had closed: that range cannot hold the launch
    assert rows.loc[k3.dispatch_id, "range_message"] == "sampling"
    assert _missing(rows.loc[k3.dispatch_id, "invocation"])
    assert rows.loc[k3.dispatch_id, "attribution_method"] == "none"
    assert rows.loc[k4.dispatch_id, ["invocation", "op", "attribution_method"]].tolist() == [1, "ADD", "enqueue_order"]


def test_enqueue_order_keeps_threads_apart(tmp_path: Path) -> None:
    t = T0
    markers = [
        rng("ggml:MUL_MAT:Qcur-0:0", 1, t + 100, t + 400, pid=8, tid=80),
        rng("ggml:ADD:l_out-0:1", 3, t + 150, t + 300, pid=8, tid=81),
    ]
    # correlation 4 was launched after both pushes, on thread 80
    kernels = [
        Kernel(1, "mul_mat_q", 4, t + 1000, t + 1100, tid=80),
        Kernel(2, "k_bin_bcast", 5, t + 1100, t + 1200, tid=81),
    ]
    write_pass(tmp_path / "cap", 8, kernels=kernels, markers=markers)
    store, run_id = _ingest(tmp_path / "cap", tmp_path / "r.db")
    rows = _dispatches(store, run_id)
    assert rows["invocation"].tolist() == [0, 1]
    assert rows["attribution_method"].tolist() == ["enqueue_order", "enqueue_order"]


def test_kernel_rename_names_carry_the_invocation(tmp_path: Path) -> None:
    t = T0
    # rocprofv3 --kernel-rename: Kernel_Name is the innermost range's message
    kernels = [
        Kernel(1, "ggml:MUL_MAT:Qcur-0:5", 10, t + 1000, t + 1200),
        Kernel(2, "ggml:MUL_MAT:Qcur-0:5", 11, t + 1200, t + 1300),
        Kernel(3, "ggml:ROPE:Qcur-0 (view): rope:6", 13, t + 1300, t + 1350),
        Kernel(4, "void memset_kernel<float>(float*, float, long)", 15, t + 1350, t + 1360),
    ]
    write_pass(tmp_path / "cap", 1234, kernels=kernels)
    store, run_id = _ingest(tmp_path / "cap", tmp_path / "r.db")
    rows = _dispatches(store, run_id)
    assert rows["invocation"].tolist()[:3] == [5, 5, 6]
    assert rows["op"].tolist()[:3] == ["MUL_MAT", "MUL_MAT", "ROPE"]
    assert rows.loc[3, "node_name"] == "Qcur-0 (view): rope"
    assert rows["kernel_ordinal"].tolist()[:3] == [0, 1, 0]
    assert rows["attribution_method"].tolist() == ["kernel_rename"] * 3 + ["none"]
    assert _missing(rows.loc[4, "invocation"])
    ops = store.query(f"SELECT invocation, op FROM op_invocation WHERE run_id = {run_id} ORDER BY invocation")
    assert ops.values.tolist() == [[5, "MUL_MAT"], [6, "ROPE"]]


def test_kernel_rename_with_marker_trace_points_at_the_range(tmp_path: Path) -> None:
    t = T0
    markers = [rng("ggml:MUL_MAT:Qcur-0:5", 9, t + 100, t + 200), rng("ggml:ROPE:Qcur-0:6", 12, t + 210, t + 300)]
    kernels = [
        Kernel(1, "ggml:MUL_MAT:Qcur-0:5", 10, t + 1000, t + 1200),
        Kernel(2, "ggml:ROPE:Qcur-0:6", 13, t + 1300, t + 1350),
    ]
    write_pass(tmp_path / "cap", 1234, kernels=kernels, markers=markers)
    store, run_id = _ingest(tmp_path / "cap", tmp_path / "r.db")
    rows = _dispatches(store, run_id)
    assert rows["range_message"].tolist() == ["ggml:MUL_MAT:Qcur-0:5", "ggml:ROPE:Qcur-0:6"]
    assert rows["attribution_method"].tolist() == ["kernel_rename", "kernel_rename"]


def test_two_processes_in_one_pass_match_their_own_launch_calls(tmp_path: Path) -> None:
    """Correlation ids are counted per process: the same id in two processes names two calls."""
    t = T0
    cap = tmp_path / "cap"
    for pid, op, offset in ((111, "ADD", 0), (222, "MUL", 5000)):
        write_pass(
            cap,
            pid,
            kernels=[Kernel(1, f"k_{op}", 2, t + offset + 1000, t + offset + 1100, tid=pid)],
            markers=[rng(f"ggml:{op}:x-0:0", 1, t + offset + 100, t + offset + 200, pid=pid, tid=pid)],
            apis=[api("hipLaunchKernel", 2, t + offset + 150, t + offset + 160, pid=pid, tid=pid)],
        )
    capture = read_capture(cap)
    assert len(capture.passes) == 1
    frames = build_run(capture)
    d = frames.tables["dispatch"].set_index("process_id")
    assert d.loc[111, "launch_ns"] == t + 150
    assert d.loc[222, "launch_ns"] == t + 5150
    ranges = with_range_messages(frames.tables["marker_range"]).set_index("range_index")
    assert ranges.loc[d.loc[222, "range_index"], "message"] == "ggml:MUL:x-0:0"


# --------------------------------------------------------------------------------------------
# 4. multi-pass: trace pass + counter passes joined per invocation and kernel ordinal
# --------------------------------------------------------------------------------------------

COUNTERS_1 = ("TCC_EA0_RDREQ_sum", "TCC_EA0_RDREQ_32B_sum")
COUNTERS_2 = ("TCC_EA0_WRREQ_sum", "TCC_EA0_WRREQ_64B_sum")


def _counter_pass(
    directory: Path, pid: int, graph: Sequence[tuple[str, str, list[str]]], names: Sequence[str], *, hip: bool
) -> dict[tuple[int, int], dict[str, float]]:
    """A counter pass (another run of the program): serialised kernels, its own pid and ids."""
    rec = Recorder(pid=pid, t0=T0 + pid * 10**9, gpu_lag=0)
    for _ in range(pid % 5 + 1):  # shifts this run's correlation ids
        rec.call("hipMalloc")
    truth = _run_graph(rec, graph, first_invocation=0)
    rec.sync()
    values: dict[int, dict[str, float]] = {}
    by_key: dict[tuple[int, int], dict[str, float]] = {}
    for did, (invocation, _, _, ordinal, _) in truth.items():
        values[did] = {name: float(1000 * pid + 10 * did + i) for i, name in enumerate(names)}
        by_key[(invocation, ordinal)] = values[did]
    write_pass(
        directory,
        pid,
        markers=rec.markers,
        apis=rec.apis if hip else None,
        counters=values,
        counter_kernels=rec.kernels,
    )
    return by_key


def _multipass(
    tmp_path: Path, graph_2: Sequence[tuple[str, str, list[str]]]
) -> tuple[Path, dict[int, Any], list[dict[Any, Any]]]:
    root = tmp_path / "capture"
    trace = Recorder(pid=100)
    truth = _run_graph(trace, TOKEN_GRAPH, first_invocation=0)
    trace.sync()
    trace.write(root / "trace")
    c1 = _counter_pass(root / "pmc_1", 201, TOKEN_GRAPH, COUNTERS_1, hip=True)
    c2 = _counter_pass(root / "pmc_2", 302, graph_2, COUNTERS_2, hip=False)
    return root, truth, [c1, c2]


def _joined_counters(store: Store, run_id: int) -> pd.DataFrame:
    return store.query(
        "SELECT t.dispatch_id AS timing_dispatch_id, p.label, c.counter_name, c.value "
        "FROM counter_value c "
        "JOIN dispatch d ON d.run_id = c.run_id AND d.dispatch_index = c.dispatch_index "
        "JOIN dispatch t ON t.run_id = d.run_id AND t.dispatch_index = d.timing_dispatch_index "
        "JOIN pass p ON p.run_id = d.run_id AND p.pass_index = d.pass_index "
        f"WHERE c.run_id = {run_id}"
    )


def test_counter_passes_join_the_trace_per_invocation_and_kernel_ordinal(tmp_path: Path) -> None:
    root, truth, counters = _multipass(tmp_path, TOKEN_GRAPH)
    store, run_id = _ingest(root, tmp_path / "r.db")
    passes = store.query(
        f"SELECT label, kind, is_timing_pass, dispatch_count, matched_count FROM pass WHERE run_id = {run_id} "
        "ORDER BY pass_index"
    )
    assert passes["label"].tolist() == ["pmc_1", "pmc_2", "trace"]
    assert passes["kind"].tolist() == ["counter", "counter", "trace"]
    assert passes["is_timing_pass"].astype(bool).tolist() == [False, False, True]
    assert passes["dispatch_count"].tolist() == [9, 9, 9]
    assert passes["matched_count"].tolist() == [9, 9, 9]
    methods = store.query(f"SELECT pass_index, attribution_method FROM dispatch WHERE run_id = {run_id}")
    assert set(methods.groupby("pass_index")["attribution_method"].unique().map(tuple)) == {
        ("launch_api",),
        ("enqueue_order",),
    }

    joined = _joined_counters(store, run_id)
    assert len(joined) == 9 * 4
    for did, (invocation, _, _, ordinal, _) in truth.items():
        got = joined[joined["timing_dispatch_id"] == did]
        expected = {**counters[0][(invocation, ordinal)], **counters[1][(invocation, ordinal)]}
        assert dict(zip(got["counter_name"], got["value"], strict=True)) == expected
    assert "pass-mismatch" not in _notes(store, run_id)
    # the counter passes' dispatch and correlation ids differ from the trace pass's
    ids = store.query(f"SELECT pass_index, MIN(correlation_id) AS c FROM dispatch WHERE run_id = {run_id} GROUP BY 1")
    assert ids["c"].nunique() == 3


def test_mismatched_kernel_sequence_in_a_pass_warns_and_stays_unmatched(tmp_path: Path) -> None:
    # in pmc_2 the run chose another kernel for the second MUL_MAT (invocation 5, kernel 1)
    graph_2 = [*TOKEN_GRAPH[:5], ("MUL_MAT", "ffn_out-0", [QUANT, "mul_mat_vec_q"]), TOKEN_GRAPH[6]]
    root, truth, counters = _multipass(tmp_path, graph_2)
    store, run_id = _ingest(root, tmp_path / "r.db")
    notes = store.query(f"SELECT severity, code, message FROM run_note WHERE run_id = {run_id}")
    mismatch = notes[notes["code"] == "pass-mismatch"]
    assert len(mismatch) == 1
    assert mismatch["severity"].iloc[0] == "warning"
    message = mismatch["message"].iloc[0]
    assert message.startswith("pmc_2: 1 of 9 dispatches do not match the timing pass trace")
    assert "invocation 5 kernel 1" in message and "mul_mat_vec_q" in message

    passes = store.query(f"SELECT label, matched_count FROM pass WHERE run_id = {run_id} ORDER BY pass_index")
    assert passes["matched_count"].tolist() == [9, 8, 9]
    unmatched = store.query(
        f"SELECT d.kernel_name FROM dispatch d JOIN pass p ON p.run_id = d.run_id AND p.pass_index = d.pass_index "
        f"WHERE d.run_id = {run_id} AND d.timing_dispatch_index IS NULL"
    )
    assert unmatched["kernel_name"].tolist() == ["mul_mat_vec_q"]
    joined = _joined_counters(store, run_id)
    mmq_5 = next(did for did, v in truth.items() if v[0] == 5 and v[3] == 1)
    got = joined[joined["timing_dispatch_id"] == mmq_5]
    assert set(got["label"]) == {"pmc_1"}  # nothing from the mismatched pass
    # every other dispatch still gets both passes' counters
    assert len(joined) == 9 * 4 - 2


def test_an_extra_kernel_in_a_counter_pass_is_left_unmatched(tmp_path: Path) -> None:
    # pmc_2's run launched one more kernel in invocation 2 (e.g. another split of the matmul)
    graph_2 = [*TOKEN_GRAPH[:2], ("MUL_MAT", "Qcur-0", [QUANT, MMQ, "mul_mat_q_stream_k_fixup"]), *TOKEN_GRAPH[3:]]
    root, truth, counters = _multipass(tmp_path, graph_2)
    store, run_id = _ingest(root, tmp_path / "r.db")
    message = _notes(store, run_id)["pass-mismatch"]
    assert message.startswith("pmc_2: 1 of 10 dispatches do not match the timing pass trace (10 vs 9 dispatches)")
    passes = store.query(f"SELECT dispatch_count, matched_count FROM pass WHERE run_id = {run_id} ORDER BY pass_index")
    assert passes.values.tolist() == [[9, 9], [10, 9], [9, 9]]
    joined = _joined_counters(store, run_id)
    for did, (invocation, _, _, ordinal, _) in truth.items():
        got = joined[(joined["timing_dispatch_id"] == did) & (joined["label"] == "pmc_2")]
        assert dict(zip(got["counter_name"], got["value"], strict=True)) == counters[1][(invocation, ordinal)]


def test_counter_pass_without_markers_joins_by_dispatch_order(tmp_path: Path) -> None:
    root = tmp_path / "capture"
    trace = Recorder(pid=100)
    truth = _run_graph(trace, TOKEN_GRAPH, first_invocation=0)
    trace.sync()
    trace.write(root / "trace")
    pmc = Recorder(pid=7, gpu_lag=0)
    _run_graph(pmc, TOKEN_GRAPH, first_invocation=0)
    values = {k.dispatch_id: {"SQ_WAVES": float(100 + k.dispatch_id)} for k in pmc.kernels}
    write_pass(root / "pmc_1", 7, counters=values, counter_kernels=pmc.kernels)  # counters only, no markers
    store, run_id = _ingest(root, tmp_path / "r.db")
    joined = _joined_counters(store, run_id)
    # the n-th dispatch of the counter pass belongs to the n-th dispatch of the trace
    assert dict(zip(joined["timing_dispatch_id"], joined["value"], strict=True)) == {did: 100.0 + did for did in truth}
    assert "pass-mismatch" not in _notes(store, run_id)


def test_launch_record_beats_a_stale_kernel_rename_region() -> None:
    """rocprofv3 never pops roctx marks from its --kernel-rename stack (rocm-systems PR #8141): a
    ggml-fused mark inside a range leaves the range's name on kernels launched after it closed.
    With a HIP launch record the launch time decides."""
    import pandas as pd

    from rocroof.ingest.attribution import attribute_pass
    from rocroof.records import DISPATCH_COLUMNS, LAUNCH_COLUMNS, MARKER_COLUMNS, PassData, conform

    markers = conform(
        pd.DataFrame(
            [
                {
                    "process_id": 1,
                    "thread_id": 1,
                    "start_ns": 100,
                    "end_ns": 200,
                    "message": "ggml:MUL_MAT:a:0",
                    "kind": "range",
                    "correlation_id": 1,
                },
                {
                    "process_id": 1,
                    "thread_id": 1,
                    "start_ns": 110,
                    "end_ns": 110,
                    "message": "ggml-fused:0:MUL_MAT+ADD:a|b",
                    "kind": "mark",
                    "correlation_id": 2,
                },
            ]
        ),
        MARKER_COLUMNS,
    )
    dispatches = conform(
        pd.DataFrame(
            [
                {
                    "dispatch_id": 1,
                    "kernel_name": "ggml:MUL_MAT:a:0",
                    "region": "ggml:MUL_MAT:a:0",
                    "process_id": 1,
                    "thread_id": 1,
                    "correlation_id": 3,
                    "start_ns": 1000,
                    "end_ns": 1100,
                },
                {
                    "dispatch_id": 2,
                    "kernel_name": "ggml:MUL_MAT:a:0",
                    "region": "ggml:MUL_MAT:a:0",
                    "process_id": 1,
                    "thread_id": 1,
                    "correlation_id": 4,
                    "start_ns": 1200,
                    "end_ns": 1300,
                },
            ]
        ),
        DISPATCH_COLUMNS,
    )
    launches = conform(
        pd.DataFrame(
            [
                {
                    "correlation_id": 3,
                    "process_id": 1,
                    "thread_id": 1,
                    "start_ns": 150,
                    "end_ns": 160,
                    "api_name": "hipLaunchKernel",
                },
                {
                    "correlation_id": 4,
                    "process_id": 1,
                    "thread_id": 1,
                    "start_ns": 300,
                    "end_ns": 310,
                    "api_name": "hipLaunchKernel",
                },
            ]
        ),
        LAUNCH_COLUMNS,
    )
    p = PassData(kind="trace", label="t", source="t", dispatches=dispatches, markers=markers, launches=launches)
    attr = attribute_pass(p).dispatch
    assert attr["method"].tolist() == ["launch_api", "none"]
    assert attr["invocation"].tolist()[0] == 0
    assert pd.isna(attr["invocation"].tolist()[1])


def _sweep_by_loop(starts: Any, ends: Any, is_ggml: Any) -> Any:
    """The event loop of ``_sweep`` alone (the vectorised path for nested ranges turned off)."""
    from rocroof.ingest import attribution

    fast = attribution._sweep_nested
    attribution._sweep_nested = lambda *args: None  # type: ignore[assignment]
    try:
        return attribution._sweep(starts, ends, is_ggml)
    finally:
        attribution._sweep_nested = fast  # type: ignore[assignment]


def test_sweep_of_nested_ranges_by_hand() -> None:
    """Outer user range [0, 20] holding ggml ranges [2, 4], [5, 9] and [12, 12].

    By hand (a range covers its end ns, so it closes at end + 1): from 0 the outer range is
    innermost and no ggml range is open; from 2 range 1; at 5 range 1 closes and range 2 opens
    (one segment, range 2); from 10 the outer again; at 12 range 3; from 13 the outer; from 21
    nothing. Depths: the outer 0, the others 1. These ranges nest, so the vectorised path answers.
    Then ranges 1 and 2 back to back ([2, 5], [5, 9]): range 1 is still open when range 2 opens
    and closes under it, which the event loop handles: a segment at 6 (range 1 closed) keeps 2.
    """
    import numpy as np

    from rocroof.ingest import attribution

    starts = np.array([0, 2, 5, 12], dtype=np.int64)
    ends = np.array([20, 4, 9, 12], dtype=np.int64)
    ggml = np.array([False, True, True, True])
    closes = ends + 1
    times = np.concatenate([starts, closes])
    kinds = np.r_[np.zeros(4, np.int8), np.ones(4, np.int8)]
    order = np.lexsort((np.r_[starts - ends, np.zeros(4)], -kinds, times))
    nested = attribution._sweep_nested(times[order], kinds[order], np.r_[np.arange(4), np.arange(4)][order], ends, ggml)
    assert nested is not None
    seg_start, inner, inner_g, depth = nested
    assert seg_start.tolist() == [0, 2, 5, 10, 12, 13, 21]
    assert inner.tolist() == [0, 1, 2, 0, 3, 0, -1]
    assert inner_g.tolist() == [-1, 1, 2, -1, 3, -1, -1]
    assert depth.tolist() == [0, 1, 1, 1]
    assert all(np.array_equal(a, b) for a, b in zip(nested, attribution._sweep(starts, ends, ggml), strict=True))

    ends = np.array([20, 5, 9, 12], dtype=np.int64)
    seg_start, inner, inner_g, depth = attribution._sweep(starts, ends, ggml)
    assert seg_start.tolist() == [0, 2, 5, 6, 10, 12, 13, 21]
    assert inner.tolist() == [0, 1, 2, 2, 0, 3, 0, -1]
    assert inner_g.tolist() == [-1, 1, 2, 2, -1, 3, -1, -1]
    assert depth.tolist() == [0, 1, 1, 1]


@pytest.mark.parametrize("search_block", [1 << 18, 1, 3])
def test_sweep_vectorised_path_equals_the_event_loop(search_block: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Random ranges, nested (pushed and popped on a stack, with equal times) and overlapping.

    The vectorised path answers only for ranges that nest and must give the loop's segments,
    innermost ranges and depths exactly; it must be used for the nested ones with distinct times.
    Its stack search goes a block of events at a time: any block size gives the same answer.
    """
    import random

    import numpy as np

    from rocroof.ingest import attribution

    monkeypatch.setattr(attribution, "_SEARCH_BLOCK", search_block)
    gen = random.Random(7)
    used = 0
    for trial in range(3000):
        n = gen.randint(1, 25)
        if trial % 2:
            t, stack, spans = 0, [], []
            while len(spans) < n or stack:
                if len(spans) < n and (not stack or gen.random() < 0.5):
                    t += gen.choice([0, 1, 3]) if trial % 4 == 1 else gen.randint(2, 5)
                    stack.append(len(spans))
                    spans.append([t, t])
                else:
                    t += gen.choice([0, 1, 2]) if trial % 4 == 1 else gen.randint(2, 5)
                    spans[stack.pop()][1] = t
            starts = np.array([s for s, _ in spans], dtype=np.int64)
            ends = np.array([e for _, e in spans], dtype=np.int64)
        else:
            starts = np.array([gen.randint(0, 20) for _ in range(n)], dtype=np.int64)
            ends = starts + np.array([gen.randint(0, 8) for _ in range(n)], dtype=np.int64)
        perm = np.array(gen.sample(range(len(starts)), len(starts)))
        starts, ends = starts[perm], ends[perm]
        ggml = np.array([gen.random() < 0.6 for _ in range(len(starts))])
        fast = attribution._sweep(starts, ends, ggml)
        slow = _sweep_by_loop(starts, ends, ggml)
        for a, b in zip(fast, slow, strict=True):
            assert np.array_equal(a, b), (trial, starts.tolist(), ends.tolist(), ggml.tolist())
        if trial % 4 == 3:  # nested, distinct times: must take the vectorised path
            calls = []
            real = attribution._sweep_nested

            def spy(*args: Any, real: Any = real, calls: list[Any] = calls) -> Any:
                out = real(*args)
                calls.append(out is not None)
                return out

            attribution._sweep_nested = spy  # type: ignore[assignment]
            try:
                attribution._sweep(starts, ends, ggml)
            finally:
                attribution._sweep_nested = real  # type: ignore[assignment]
            assert calls == [True], (starts.tolist(), ends.tolist())
            used += 1
    assert used == 750


@pytest.mark.parametrize("base", [1_000_000, 12_345_678_901_234_567, 2**63 - 100])
def test_ranges_opening_in_the_same_ns_nest_by_their_ends_at_any_timestamp(base: int) -> None:
    """Outer [T+10, T+41] and inner [T+10, T+40], listed inner first (rocprofv3 writes ranges as popped).

    From T+10 the inner range is innermost and has depth 1. Past 2**53 ns (17-digit timestamps) the
    lengths 31 and 30 were compared as floats, tied, and the outer range won (found by a trial).
    """
    import numpy as np

    from rocroof.ingest.attribution import _sweep

    starts = np.array([base + 10, base + 10], dtype=np.int64)
    ends = np.array([base + 40, base + 41], dtype=np.int64)
    seg_start, inner, inner_g, depth = _sweep(starts, ends, np.array([True, True]))
    at = int(np.searchsorted(seg_start, base + 20, side="right")) - 1
    assert inner[at] == 0 and inner_g[at] == 0
    assert depth.tolist() == [1, 0]


def test_identical_ranges_nest_in_the_order_they_were_pushed() -> None:
    """Two ranges over the same [10, 40] ns on one thread: the one pushed later (larger correlation
    id) is the inner one, whichever the file lists first (found by a trial: the outer got the kernel).
    """
    import numpy as np

    from rocroof.ingest.attribution import _sweep

    starts = np.array([10, 10], dtype=np.int64)
    ends = np.array([40, 40], dtype=np.int64)
    ggml = np.array([True, True])
    for pushed, inner_range, depths in (([11, 10], 0, [1, 0]), ([10, 11], 1, [0, 1])):
        seg_start, inner, inner_g, depth = _sweep(starts, ends, ggml, np.array(pushed, dtype=np.int64))
        at = int(np.searchsorted(seg_start, 20, side="right")) - 1
        assert inner[at] == inner_range and inner_g[at] == inner_range
        assert depth.tolist() == depths
        after = int(np.searchsorted(seg_start, 41, side="right")) - 1
        assert inner[after] == -1  # both closed
    # an outer range around them keeps its place: [0, 100] pushed first
    starts3 = np.array([10, 0, 10], dtype=np.int64)
    ends3 = np.array([40, 100, 40], dtype=np.int64)
    seg_start, inner, _, depth = _sweep(starts3, ends3, np.array([True, False, True]), np.array([12, 5, 11]))
    assert inner[int(np.searchsorted(seg_start, 20, side="right")) - 1] == 0
    assert inner[int(np.searchsorted(seg_start, 50, side="right")) - 1] == 1
    assert depth.tolist() == [2, 0, 1]
