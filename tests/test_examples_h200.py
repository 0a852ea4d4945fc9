"""The committed H200 example captures (examples/h200): ingest them and check what they measured.

Expected values come from outside rocroof: the models' shapes (tools/models presets, written in
examples/h200/README.md), the Q8_0 block size of ggml (34 bytes per 32 weights: an fp16 scale
and 32 int8 quants, ggml-common.h ``block_q8_0``), and the NVTX ranges and marks of the Nsight
Systems export read here with sqlite3.
"""

from __future__ import annotations

import gzip
import json
import re
import sqlite3
from pathlib import Path

import pytest

from rocroof.capture.readers import find_captures, read_capture
from rocroof.ingest.pipeline import build_run
from rocroof.store import Store

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "h200"
CASES = ("dense-prefill", "moe-prefill", "dense500m-decode")


def q8_0_bytes(rows: int, cols: int) -> int:
    """Bytes of a rows x cols Q8_0 matrix: 34 bytes per block of 32 weights."""
    assert cols % 32 == 0
    return rows * cols // 32 * 34


#: dense-500m preset: llama, n_embd 2048, 10 layers, 16 heads / 4 KV heads of 128, n_ff 5632,
#: vocab 32000, output tied to token_embd, all matrices Q8_0.
EMBD, N_FF, KV, VOCAB, LAYERS = 2048, 5632, 4 * 128, 32000, 10
#: decode MUL_MAT ops by node-name prefix -> weight bytes read by one invocation
DECODE_WEIGHTS = {
    "Qcur": q8_0_bytes(EMBD, EMBD),
    "Kcur": q8_0_bytes(KV, EMBD),
    "Vcur": q8_0_bytes(KV, EMBD),
    "attn_out": q8_0_bytes(EMBD, EMBD),
    "ffn_gate": 2 * q8_0_bytes(N_FF, EMBD),  # fused with ffn_up: one op reads both matrices
    "ffn_out": q8_0_bytes(EMBD, N_FF),
    "result_output": q8_0_bytes(VOCAB, EMBD),
}
DECODE_TOKENS = 4  # llama-bench -p 0 -n 4


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Store:
    path = tmp_path_factory.mktemp("h200") / "r.db"
    store = Store(path)
    for case in CASES:
        store.write_run(build_run(read_capture(EXAMPLES / case)), labels={"case": case})
    return Store(path, read_only=True)


def run_id(db: Store, case: str) -> int:
    rid = db.query(f"SELECT run_id FROM run_label WHERE key='case' AND value='{case}'")["run_id"]
    return int(rid.iloc[0])


def nvtx_after_reset(case: str) -> tuple[list[str], int]:
    """(ggml range messages after the last 'ggml reset' mark, kernels launched after it), via sqlite3."""
    raw = gzip.decompress((EXAMPLES / case / "trace" / "nsys.sqlite.gz").read_bytes())
    con = sqlite3.connect(":memory:")
    con.deserialize(raw)
    text = "COALESCE(n.text, s.value)"
    events = con.execute(
        f"SELECT n.eventType, n.start, {text} FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId"
    ).fetchall()
    reset = max(start for kind, start, msg in events if kind == 34 and msg == "ggml reset")
    ranges = [msg for kind, start, msg in events if kind == 59 and start > reset and msg.startswith("ggml:")]
    kernels = con.execute(
        "SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN CUPTI_ACTIVITY_KIND_RUNTIME r "
        "ON r.correlationId = k.correlationId WHERE r.start > ?",
        (reset,),
    ).fetchone()[0]
    return ranges, int(kernels)


def test_the_examples_folder_is_three_captures() -> None:
    found = find_captures(EXAMPLES)  # README.md and the PNGs beside them are no capture
    assert len(found) == 3 and {f.path.name for f in found} == set(CASES) and all(f.files is None for f in found)


@pytest.mark.parametrize("case", CASES)
def test_every_measured_kernel_is_stored_and_attributed(db: Store, case: str) -> None:
    ranges, kernels = nvtx_after_reset(case)
    rid = run_id(db, case)
    row = db.query(
        "SELECT COUNT(*) n, SUM(duration_ns) t, SUM(CASE WHEN op IS NOT NULL THEN duration_ns END) ta, "
        f"COUNT(dram_read_bytes) nr FROM dispatch_dram WHERE run_id={rid}"
    ).iloc[0]
    assert row["n"] == kernels  # the warm-up before the reset mark is dropped, nothing else
    assert row["ta"] / row["t"] >= 0.999  # the bar; here every kernel is inside a ggml range
    assert row["nr"] == kernels  # every timed dispatch got its ncu counters (warm-up dropped there too)
    assert not db.query(f"SELECT 1 FROM run_note WHERE run_id={rid} AND severity='warning'").shape[0]


@pytest.mark.parametrize("case", CASES)
def test_op_invocations_per_type_match_the_nvtx_ranges(db: Store, case: str) -> None:
    ranges, _ = nvtx_after_reset(case)
    expected: dict[str, int] = {}
    for msg in ranges:
        op = re.match(r"ggml:([A-Z_0-9]+)", msg)
        assert op is not None
        expected[op.group(1)] = expected.get(op.group(1), 0) + 1
    got = db.query(f"SELECT op, COUNT(*) n FROM op_invocation WHERE run_id={run_id(db, case)} GROUP BY op")
    assert dict(zip(got["op"], got["n"], strict=True)) == expected


def test_decode_op_counts_follow_the_model(db: Store) -> None:
    got = db.query(
        f"SELECT op, COUNT(*) n FROM op_invocation WHERE run_id={run_id(db, 'dense500m-decode')} GROUP BY op"
    )
    counts = dict(zip(got["op"], got["n"], strict=True))
    per_token_matmuls = LAYERS * 6 + 1  # q, k, v, attn_out, gate+up (fused), down per layer; the output head
    assert counts["MUL_MAT"] == DECODE_TOKENS * per_token_matmuls
    assert counts["FLASH_ATTN_EXT"] == DECODE_TOKENS * LAYERS


def test_decode_matmuls_read_their_weights_once(db: Store) -> None:
    df = db.query(
        "SELECT node_name, dram_read_bytes FROM op_invocation_summary "
        f"WHERE run_id={run_id(db, 'dense500m-decode')} AND op='MUL_MAT'"
    )
    assert len(df) == DECODE_TOKENS * (LAYERS * 6 + 1)
    ratios: dict[str, list[float]] = {}
    for name, read in zip(df["node_name"], df["dram_read_bytes"], strict=True):
        prefix = re.sub(r"-\d+$", "", name)
        ratios.setdefault(prefix, []).append(read / DECODE_WEIGHTS[prefix])
    assert set(ratios) == set(DECODE_WEIGHTS)
    for prefix, values in ratios.items():
        # the bar is +-15%; the weights dominate, activations and the KV cache add < 3%
        assert all(0.85 <= r <= 1.15 for r in values), (prefix, min(values), max(values))
        assert all(1.0 <= r <= 1.03 for r in values), (prefix, min(values), max(values))
    total_weights = DECODE_TOKENS * (
        LAYERS * sum(v for k, v in DECODE_WEIGHTS.items() if k != "result_output") + DECODE_WEIGHTS["result_output"]
    )
    assert df["dram_read_bytes"].sum() == pytest.approx(total_weights, rel=0.02)


#: moe-tiny preset: 8 experts of n_embd 512 x n_ff_exp 768, Q8_0 (gate, up and down are the same size)
EXPERT_BYTES = q8_0_bytes(768, 512)  # 417,792 B


def test_moe_routing_comes_from_the_sidecar_for_every_expert_matmul(db: Store) -> None:
    df = db.query(
        "SELECT node_name, m, n_experts, top_k, experts_used, tokens_per_expert FROM op_invocation "
        f"WHERE run_id={run_id(db, 'moe-prefill')} AND op='MUL_MAT_ID'"
    )
    # 4 layers: gate, up, down each, except the last layer, which keeps one token and fuses gate+up
    assert len(df) == 3 * 3 + 2
    assert (df["n_experts"] == 8).all() and (df["top_k"] == 2).all()  # moe-tiny: 8 experts, 2 used
    assert df["experts_used"].notna().all()  # the strided expert ids of a 64-token batch are read too
    assert sorted(set(df["m"])) == [1, 64]  # llama-bench -p 64; the last layer keeps only the last token
    for _, row in df.iterrows():
        counts = json.loads(row["tokens_per_expert"])
        assert len(counts) == 8
        assert sum(counts) == row["m"] * row["top_k"]  # every token goes to top_k experts
        assert row["experts_used"] == sum(1 for c in counts if c > 0)


def test_moe_dram_reads_grow_by_one_expert_per_expert_used(db: Store) -> None:
    """Measured DRAM reads of the expert matmuls scale with experts_used by one expert's Q8_0 bytes."""
    df = db.query(
        "SELECT s.node_name, i.m, i.experts_used, s.dram_read_bytes FROM op_invocation_summary s "
        "JOIN op_invocation i ON i.run_id = s.run_id AND i.invocation = s.invocation "
        f"WHERE s.run_id={run_id(db, 'moe-prefill')} AND s.op='MUL_MAT_ID'"
    )
    batch = df[df["m"] == 64]
    for kind in ("ffn_moe_gate", "ffn_moe_up", "ffn_moe_down"):
        rows = batch[batch["node_name"].str.startswith(kind + "-")].sort_values("experts_used")
        assert len(rows) == 3 and rows["experts_used"].nunique() == 3  # three layers, routed differently
        used, read = rows["experts_used"].to_numpy(), rows["dram_read_bytes"].to_numpy()
        slope = (read[-1] - read[0]) / (used[-1] - used[0])
        assert slope == pytest.approx(EXPERT_BYTES, rel=0.02), kind  # bytes per extra expert used
    single = df[df["m"] == 1].set_index("node_name")
    # one token: the fused gate+up op reads two matrices of each used expert, down one
    gate_up = single.loc["ffn_moe_gate-3"]
    assert gate_up["dram_read_bytes"] / (2 * gate_up["experts_used"] * EXPERT_BYTES) == pytest.approx(1.0, abs=0.03)
    down = single.loc["ffn_moe_down-3"]
    assert down["dram_read_bytes"] / (down["experts_used"] * EXPERT_BYTES) == pytest.approx(1.0, abs=0.03)


@pytest.mark.parametrize("folder", ["h200", "h200-probe", "h200-sampled"])
def test_the_examples_hold_no_environment_or_paths(folder: str) -> None:
    for path in (EXAMPLES.parent / folder).rglob("*"):
        if not path.is_file() or path.suffix in (".md", ".png"):
            continue
        data = path.read_bytes()
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
        for needle in (b"PATH=", b"HOME=", b"/tmp/", b"/root", b"/home/", b"CONTAINER_NAME", b"127.0.0.1"):
            assert needle not in data, (path, needle)


@pytest.mark.parametrize("case", ["dense500m-decode", "moe-prefill"])
def test_a_released_build_gives_the_same_run_frames(case: str) -> None:
    """``build_run(release=True)`` (what ``ingest`` does: passes stacked a column at a time, each
    pass's frames let go) gives the frames a plain build gives, on two-pass Nsight captures."""
    import pandas as pd

    from rocroof.ingest.pipeline import with_range_messages

    root = Path(__file__).resolve().parent.parent / "examples" / "h200" / case
    plain = build_run(read_capture(root))
    capture = read_capture(root)
    assert len(capture.passes) == 2
    released = build_run(capture, release=True)
    assert all(len(p.dispatches) == 0 for p in capture.passes)  # let go
    assert plain.tables.keys() == released.tables.keys()
    for name, frame in plain.tables.items():
        # the range messages the read and the released attribution let go are rebuilt as they are written
        got = with_range_messages(released.tables[name]) if name == "marker_range" else released.tables[name]
        want = with_range_messages(frame) if name == "marker_range" else frame
        pd.testing.assert_frame_equal(want, got, obj=name)
    assert plain.run == released.run and plain.notes == released.notes


def test_dram_bytes_faster_than_twice_the_ceiling_are_flagged() -> None:
    """1e6 B in 1,000 ns is 1,000 GB/s (0.2x a 5,000 GB/s ceiling); 2e7 B is 20,000 GB/s (4x): flagged."""
    import pandas as pd

    from rocroof.ingest.pipeline import _above_ceiling_note

    dispatches = pd.DataFrame({"dispatch_id": [11, 12], "duration_ns": pd.array([1000, 1000], dtype="Int64")})
    dram = pd.DataFrame({"dispatch_index": [0, 1], "dram_read_bytes": [6e5, 1.5e7], "dram_write_bytes": [4e5, 5e6]})
    note = _above_ceiling_note(dispatches, dram, 5000.0)
    assert note is not None and note.code == "dram-above-ceiling" and note.severity == "warning"
    assert note.message.startswith("1 dispatch(es) moved DRAM bytes faster than 2x the 5,000 GB/s ceiling")
    assert "(dispatch 12: 4.0x)" in note.message
    assert _above_ceiling_note(dispatches, dram, 20_000.0) is None  # 1x: within the ceiling's reach


@pytest.mark.parametrize("case", ["dense500m-decode", "moe-prefill", "dense-prefill"])
def test_recorded_runs_stay_under_the_ceiling(case: str) -> None:
    frames = build_run(read_capture(Path(__file__).resolve().parent.parent / "examples" / "h200" / case))
    assert not [n for n in frames.notes if n.code == "dram-above-ceiling"]
