"""rocroof.analysis.graph: producer → consumer edges, graph evaluations, layers and blocks, critical path, exports.

Hand-built sidecars (written to ``tmp_path`` and read back with ``read_metadata``) check each edge
rule on a case small enough to work out by hand. The committed H200 captures check the
evaluation split and the layer/block grouping against counts taken from the models' shapes
(examples/h200/README.md: dense-500m has 10 layers, llama-bench decoded 4 tokens) and from the
node names themselves.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from rocroof.analysis import graph
from rocroof.capture.readers.ggml_meta import read_metadata
from rocroof.records import OpMetadata

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "h200"
DECODE_TOKENS, DECODE_LAYERS = 4, 10  # llama-bench -n 4 on dense-500m (10 layers)
PREFILL_LAYERS = 4  # dense-tiny and moe-tiny


# --- hand-built sidecars ----------------------------------------------------------------------


def row(
    inv: int,
    name: str,
    op: str = "ADD",
    *,
    out: int,
    ins: tuple[int, ...] = (),
    in_names: list[str] | None = None,
    fused: list[tuple[str, int, list[int]]] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A row in the sidecar schema; ``fused`` lists ``(ggml_op, dst_storage_id, src_storage_ids)``."""
    r: dict[str, Any] = {
        "invocation": inv,
        "name": name,
        "ggml_op": fused[0][0] if fused else op,
        "dst_storage_id": fused[0][1] if fused else out,
        "out_storage_id": out,
        "in_storage_ids": list(ins),
        "in_names": in_names if in_names is not None else [f"t{s}" for s in ins],
    }
    if fused:
        r["fused_ops"] = [{"ggml_op": o, "dst_storage_id": d, "src_storage_ids": s} for o, d, s in fused]
    r.update(extra)
    return r


def meta_of(tmp_path: Path, rows: list[dict[str, Any]]) -> OpMetadata:
    path = tmp_path / "ggml-op-meta.json"
    path.write_text(json.dumps({"device": "gfx942", "source": "test", "rows": rows}))
    meta, notes = read_metadata(path)
    assert notes == []
    return meta


def edge_set(edges: pd.DataFrame) -> set[tuple[int, int, int]]:
    cols = zip(edges.src_invocation, edges.dst_invocation, edges.storage_id, strict=True)
    return {(int(s), int(d), int(sid)) for s, d, sid in cols}


WEIGHT, WEIGHT2, INP_POS = 900, 901, 950  # storages no op writes


def test_edge_columns(tmp_path: Path) -> None:
    meta = meta_of(tmp_path, [row(1, "a", out=100, ins=(WEIGHT,)), row(2, "b", out=200, ins=(100,))])
    edges = graph.build_edges(meta)
    assert list(edges.columns) == list(graph.EDGE_COLUMNS)
    assert {c: str(t) for c, t in edges.dtypes.items()} == graph.EDGE_COLUMNS
    assert edges.to_dict("records") == [{"src_invocation": 1, "dst_invocation": 2, "storage_id": 100, "name": "t100"}]


def test_last_writer_wins(tmp_path: Path) -> None:
    # storage 100 is written by 1, read by 2, written again by 3 (the allocator reuses it), read by 4
    rows = [
        row(1, "a", out=100, ins=(WEIGHT,)),
        row(2, "b", out=200, ins=(100,)),
        row(3, "c", out=100, ins=(200,)),
        row(4, "d", out=300, ins=(100, 200), in_names=["c-out", "b-out"]),
    ]
    edges = graph.build_edges(meta_of(tmp_path, rows))
    assert edge_set(edges) == {(1, 2, 100), (2, 3, 200), (3, 4, 100), (2, 4, 200)}
    last = edges[edges.dst_invocation == 4]
    assert list(last.name) == ["c-out", "b-out"]  # the consumer's in_names, in input order


def test_in_place_op_reads_previous_writer_and_becomes_writer(tmp_path: Path) -> None:
    # 2 is an in-place ADD: its output is a view of its input 100, so it reads and writes 100
    rows = [
        row(1, "x", out=100, ins=(WEIGHT,)),
        row(2, "x_inplace", out=100, ins=(100, WEIGHT2)),
        row(3, "y", out=300, ins=(100,)),
    ]
    assert edge_set(graph.build_edges(meta_of(tmp_path, rows))) == {(1, 2, 100), (2, 3, 100)}


def test_fused_group_is_one_invocation(tmp_path: Path) -> None:
    # RMS_NORM (internal 110) + MUL (out 111): the group reads 100 and the weight, writes 111
    rows = [
        row(1, "l_out-0", out=100, ins=(WEIGHT,)),
        row(
            2,
            "norm-1",
            out=111,
            ins=(100, WEIGHT2),
            in_names=["l_out-0", "blk.1.attn_norm.weight"],
            fused=[("RMS_NORM", 110, [100]), ("MUL", 111, [110, WEIGHT2])],
        ),
        row(3, "Qcur-1", "MUL_MAT", out=300, ins=(WEIGHT, 111), in_names=["blk.1.attn_q.weight", "attn_norm-1"]),
    ]
    meta = meta_of(tmp_path, rows)
    edges = graph.build_edges(meta)
    assert edge_set(edges) == {(1, 2, 100), (2, 3, 111)}
    assert (edges.src_invocation < edges.dst_invocation).all()
    table = graph.classify(meta, edges)
    assert list(table.out_name) == ["l_out-0", "attn_norm-1", None]  # the last node's name, from the consumer
    assert list(table.part) == ["ffn", "attention", "attention"]


def test_fused_group_inner_output_read_later(tmp_path: Path) -> None:
    # a MoE router group writes the expert ids (ARGSORT, inner node) that MUL_MAT_ID reads
    rows = [
        row(1, "ffn_moe_logits-0", "MUL_MAT", out=100, ins=(WEIGHT,)),
        row(
            2,
            "ffn_moe_probs-0",
            out=122,
            ins=(100,),
            fused=[
                ("SOFT_MAX", 120, [100]),
                ("ARGSORT", 121, [120]),
                ("VIEW", 121, [121]),
                ("GET_ROWS", 122, [120, 121]),
            ],
        ),
        row(3, "ffn_moe_gate-0", "MUL_MAT_ID", out=300, ins=(WEIGHT2, 100, 121)),
        row(4, "ffn_moe_weighted-0", "MUL", out=400, ins=(300, 122)),
    ]
    assert edge_set(graph.build_edges(meta_of(tmp_path, rows))) == {
        (1, 2, 100),
        (1, 3, 100),
        (2, 3, 121),
        (3, 4, 300),
        (2, 4, 122),
    }


def test_view_node_of_a_group_writes_nothing(tmp_path: Path) -> None:
    # node 0 views the graph input 950; the group did not write 950, so 2's read of it has no writer
    rows = [
        row(1, "x", out=130, ins=(INP_POS, WEIGHT), fused=[("VIEW", INP_POS, [INP_POS]), ("ADD", 130, [INP_POS])]),
        row(2, "y", out=200, ins=(INP_POS, 130)),
    ]
    assert edge_set(graph.build_edges(meta_of(tmp_path, rows))) == {(1, 2, 130)}


def test_inputs_without_writer_give_no_edge(tmp_path: Path) -> None:
    rows = [
        row(1, "Qcur-0", "MUL_MAT", out=100, ins=(WEIGHT, 960), in_names=["blk.0.attn_q.weight", "CUDA0#embd#0"]),
        row(2, "Qcur-0", "ROPE", out=101, ins=(100, INP_POS), in_names=["Qcur-0", "CUDA0#inp_pos#0"]),
    ]
    edges = graph.build_edges(meta_of(tmp_path, rows))
    assert edge_set(edges) == {(1, 2, 100)}
    assert set(edges.storage_id) == {100}


def test_fork_rows_unordered_with_large_ids_and_kernel_times(tmp_path: Path) -> None:
    big = 2**64 - 16  # a high host address: stored as a negative signed id, exported unsigned
    rows = [
        row(2, "b", out=2**63 + 8, ins=(big,), kernels=[{"name": "k", "gpu_time_us": 2.5}]),
        row(1, "a", out=big, ins=(WEIGHT,), kernels=[{"name": "k", "gpu_time_us": 1.0}]),
    ]
    meta = meta_of(tmp_path, rows)
    edges = graph.build_edges(meta)
    assert list(zip(edges.src_invocation, edges.dst_invocation, strict=True)) == [(1, 2)]
    assert int(edges.storage_id[0]) == big - 2**64
    doc = json.loads(graph.to_json(meta, edges))
    assert doc["edges"][0]["storage_id"] == big
    assert [n["time_ns"] for n in doc["nodes"]] == [1000.0, 2500.0]  # the fork's kernel times by default


def test_rows_without_topology_keys_use_node_ids(tmp_path: Path) -> None:
    # before PR #66 (and keys as named in fork commit 302448a): only node-level dst/src storage ids
    rows: list[dict[str, Any]] = [
        {"invocation": 1, "name": "a", "ggml_op": "MUL_MAT", "dst_sid": 100, "src_sids": [WEIGHT, 960]},
        {
            "invocation": 2,
            "name": "norm-0",
            "ggml_op": "RMS_NORM",
            "dst_storage_id": 110,
            "src_storage_ids": [100],
            "fused_ops": [
                {"ggml_op": "RMS_NORM", "dst_storage_id": 110, "src_storage_ids": [100]},
                {"ggml_op": "MUL", "dst_storage_id": 111, "src_storage_ids": [110, WEIGHT2]},
            ],
        },
        {"invocation": 3, "name": "c", "ggml_op": "ADD", "dst_storage_id": 300, "src_storage_ids": [111, 110, 100]},
    ]
    edges = graph.build_edges(meta_of(tmp_path, rows))
    assert edge_set(edges) == {(1, 2, 100), (2, 3, 111), (2, 3, 110), (1, 3, 100)}
    assert edges.name.isna().all()


def test_empty_metadata(tmp_path: Path) -> None:
    meta = meta_of(tmp_path, [])
    edges = graph.build_edges(meta)
    assert list(edges.columns) == list(graph.EDGE_COLUMNS) and len(edges) == 0
    assert graph.graph_evaluations(meta) == {}
    table = graph.classify(meta, edges)
    assert list(table.columns) == list(graph.CLASSIFY_COLUMNS) and len(table) == 0
    assert len(graph.group_blocks(table)) == 0
    assert graph.critical_path(edges, {}, []) == []
    assert json.loads(graph.to_json(meta, edges))["nodes"] == []
    assert graph.to_dot(meta, edges).startswith("digraph rocroof {")


# --- graph evaluations ------------------------------------------------------------------------


def names_meta(tmp_path: Path, names: list[str]) -> OpMetadata:
    return meta_of(tmp_path, [row(i + 1, n, out=1000 + i) for i, n in enumerate(names)])


def split(tmp_path: Path, names: list[str], **kw: Any) -> list[int]:
    evals = graph.graph_evaluations(names_meta(tmp_path, names), **kw)
    return [evals[i + 1] for i in range(len(names))]


def test_evaluations_restart_when_the_layer_goes_back(tmp_path: Path) -> None:
    names = ["norm-0", "Qcur-0", "norm-0", "ffn_out-0", "norm-1", "l_out-1", "norm", "result_output"] * 3
    assert split(tmp_path, names) == [0] * 8 + [1] * 8 + [2] * 8


def test_evaluations_of_a_one_layer_model_split_after_result(tmp_path: Path) -> None:
    # the layer never drops below 0; the graph output closes the evaluation
    names = ["norm-0", "Qcur-0", "l_out-0", "result_norm", "result_output"] * 2
    assert split(tmp_path, names) == [0] * 5 + [1] * 5


def test_evaluations_keep_unlayered_ops_after_the_output(tmp_path: Path) -> None:
    # e.g. sampling ops built into the graph after result_output: same evaluation
    names = ["norm-0", "l_out-0", "result_output", "sampler", "sampler", "norm-0", "l_out-0", "result_output"]
    assert split(tmp_path, names) == [0, 0, 0, 0, 0, 1, 1, 1]


def test_evaluations_from_unnamed_node_indices(tmp_path: Path) -> None:
    # no layer names: ggml's node_<i> positions restart
    assert split(tmp_path, ["node_3", "node_5", "x", "node_9", "node_3", "x", "node_5"]) == [0, 0, 0, 0, 1, 1, 1]


def test_evaluations_without_position_stay_one(tmp_path: Path) -> None:
    assert split(tmp_path, ["a", "b", "a", "b"]) == [0, 0, 0, 0]


def test_evaluations_from_explicit_starts(tmp_path: Path) -> None:
    names = ["a", "b", "c", "d", "e"]
    assert split(tmp_path, names, starts=[3, 5]) == [0, 0, 1, 1, 2]
    assert split(tmp_path, names, starts=[]) == [0] * 5


def read_example(case: str) -> OpMetadata:
    meta, _ = read_metadata(EXAMPLES / case / "trace" / "ggml-op-meta.json.gz")
    return meta


def test_decode_example_has_one_evaluation_per_token() -> None:
    meta = read_example("dense500m-decode")
    evals = graph.graph_evaluations(meta)
    members = graph.evaluation_members(evals)
    assert len(members) == DECODE_TOKENS
    # own count: a token's graph ends with its logits (result_output); the next op begins the next
    names = list(meta.ops.node_name)
    invs = [int(i) for i in meta.ops.invocation]
    ends = [i for i, n in enumerate(names) if n == "result_output"]
    assert len(ends) == DECODE_TOKENS and ends[-1] == len(names) - 1
    starts = [invs[0]] + [invs[e + 1] for e in ends[:-1]]
    assert [m[0] for m in members.values()] == starts
    assert [m[-1] for m in members.values()] == [invs[e] for e in ends]
    assert Counter(len(m) for m in members.values()) == {len(invs) // DECODE_TOKENS: DECODE_TOKENS}
    # each evaluation runs every layer once, in order
    for m in members.values():
        layers = [graph.layer_of(names[invs.index(i)]) for i in m]
        seen = [x for x in layers if x is not None]
        assert seen == sorted(seen) and set(seen) == set(range(DECODE_LAYERS))


@pytest.mark.parametrize("case", ["dense-prefill", "moe-prefill"])
def test_prefill_examples_are_one_evaluation(case: str) -> None:
    meta = read_example(case)
    assert set(graph.graph_evaluations(meta).values()) == {0}
    assert list(meta.ops.node_name).count("result_output") == 1


# --- layers and blocks -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "layer"),
    [
        ("ffn_out-12", 12),
        ("norm-0", 0),
        ("Kcur-3 (view) (permuted)", 3),
        ("cache_v_l7 (view)", 7),
        ("cache_k_l10", 10),
        ("cache_k_l0 (view) (copy of Kcur-0)", 0),
        ("norm", None),
        ("result_output", None),
        ("node_21", None),
        ("CUDA0#embd#0", None),
        ("blk.3.attn_q.weight", None),
        ("", None),
        (None, None),
    ],
)
def test_layer_of(name: str | None, layer: int | None) -> None:
    assert graph.layer_of(name) == layer


@pytest.mark.parametrize(
    ("name", "part"),
    [
        ("Qcur-0", "attention"),
        ("Kcur_normed-2", "attention"),
        ("Vcur-1", "attention"),
        ("kq_soft_max-4", "attention"),
        ("kqv_out-4", "attention"),
        ("attn_out-0", "attention"),
        ("attn_norm-0", "attention"),
        ("cache_v_l3 (view)", "attention"),
        ("ffn_inp-5", "attention"),
        ("ffn_norm-0", "ffn"),
        ("ffn_gate-0", "ffn"),
        ("ffn_swiglu-0", "ffn"),
        ("ffn_out-9", "ffn"),
        ("l_out-9", "ffn"),
        ("ffn_moe_logits-0", "moe"),
        ("ffn_moe_argsort-0", "moe"),
        ("ffn_moe_down-3", "moe"),
        ("ffn_shexp-1", "moe"),
        ("norm-0", None),
        ("node_21", None),
        ("result_output", None),
        (None, None),
    ],
)
def test_part_of(name: str | None, part: str | None) -> None:
    assert graph.part_of(name) == part


def test_decode_example_layers_and_blocks() -> None:
    meta = read_example("dense500m-decode")
    table = graph.classify(meta)
    assert list(table.columns) == list(graph.CLASSIFY_COLUMNS)
    # the store's layer column (a bare '-<n>' suffix) agrees wherever it has one
    simple = meta.ops.node_name.str.extract(r"-(\d+)$")[0]
    has = simple.notna()
    assert (table.layer[has].astype(int) == simple[has].astype(int)).all()
    # FLASH_ATTN_EXT is an unnamed node (node_<i>): its layer comes from the named ops around it
    fa = table[table.op == "FLASH_ATTN_EXT"]
    assert len(fa) == DECODE_TOKENS * DECODE_LAYERS
    assert set(fa.layer_source) == {"neighbours"} and set(fa.part) == {"attention"}
    assert sorted(Counter(fa.layer).values()) == [DECODE_TOKENS] * DECODE_LAYERS
    # the two RMS_NORM+MUL of a layer, both named norm-<n>: the attention norm, then the FFN norm
    norms = table[(table.op_list == "RMS_NORM+MUL") & table.layer.notna()]
    assert list(norms.out_name.str.replace(r"-\d+$", "", regex=True).unique()) == ["attn_norm", "ffn_norm"]
    assert (norms.part == norms.out_name.str.replace(r"_norm-\d+$", "", regex=True).replace("attn", "attention")).all()
    blocks = graph.group_blocks(table)
    assert len(blocks) == DECODE_TOKENS * (2 * DECODE_LAYERS + 1)
    assert blocks.n_invocations.sum() == len(meta.ops)
    layered = blocks[blocks.layer.notna()]
    assert set(layered.part) == {"attention", "ffn"}
    # per layer: norm, Qcur, ROPE, Vcur, Kcur, ROPE+SET_ROWS, SET_ROWS, FLASH_ATTN, attn_out | norm, ffn_gate, ffn_out;
    # the last layer also keeps only the output rows (2 GET_ROWS) and adds its own ffn_inp
    attn = layered[layered.part == "attention"]
    assert Counter(zip(attn.layer.astype(int), attn.n_invocations, strict=True)) == Counter(
        {(layer, 12 if layer == DECODE_LAYERS - 1 else 9): DECODE_TOKENS for layer in range(DECODE_LAYERS)}
    )
    assert set(layered[layered.part == "ffn"].n_invocations) == {3}
    out = blocks[blocks.layer.isna()]
    assert set(out.part) == {"output"}
    outs = [table.set_index("invocation").loc[list(b), "name"].tolist() for b in out.invocations]
    assert outs == [["norm", "result_output"]] * DECODE_TOKENS


def test_moe_example_blocks() -> None:
    meta = read_example("moe-prefill")
    table = graph.classify(meta)
    assert set(table.part) == {"attention", "moe", "output"}
    assert set(table[table.op == "MUL_MAT_ID"].part) == {"moe"}
    assert set(table[table.name.str.startswith("ffn_moe_", na=False)].part) == {"moe"}
    blocks = graph.group_blocks(table)
    layered = blocks[blocks.layer.notna()]
    assert Counter(layered.layer.astype(int)) == {layer: 2 for layer in range(PREFILL_LAYERS)}
    assert list(layered.part) == ["attention", "moe"] * PREFILL_LAYERS
    # the router group's expert ids (an inner node of the fused group) feed all three expert matmuls
    edges = graph.build_edges(meta)
    router = table[table.name == "ffn_moe_probs-0"].invocation.iloc[0]
    consumers = set(edges[(edges.src_invocation == router) & (edges.name == "ffn_moe_argsort-0")].dst_invocation)
    by_inv = table.set_index("invocation")
    assert set(by_inv.loc[sorted(consumers), "name"]) == {"ffn_moe_gate-0", "ffn_moe_up-0", "ffn_moe_down-0"}


def test_dense_prefill_blocks() -> None:
    blocks = graph.group_blocks(graph.classify(read_example("dense-prefill")))
    layered = blocks[blocks.layer.notna()]
    assert list(layered.part) == ["attention", "ffn"] * PREFILL_LAYERS
    assert list(blocks.part.iloc[-1:]) == ["output"]


def test_group_blocks_durations(tmp_path: Path) -> None:
    names = ["norm-0", "Qcur-0", "attn_out-0", "norm-0", "ffn_out-0", "l_out-0", "norm", "result_output"]
    meta = names_meta(tmp_path, names)
    table = graph.classify(meta)
    assert list(table.part) == ["attention"] * 3 + ["ffn"] * 3 + ["output"] * 2
    dur = {i: float(i) for i in range(1, 9)}
    blocks = graph.group_blocks(table, dur)
    assert list(blocks.duration_ns) == [6.0, 15.0, 15.0]
    del dur[5]
    blocks = graph.group_blocks(table, dur)
    assert blocks.duration_ns.iloc[0] == 6.0 and math.isnan(blocks.duration_ns.iloc[1])  # unknown, not zero
    assert graph.group_blocks(table).duration_ns.isna().all()


def test_parts_of_unnamed_and_unlayered_ops(tmp_path: Path) -> None:
    names = [
        "inp_embd",  # before any layer: input
        "norm-0",  # a norm opens the block of the op after it: attention
        "Qcur-0",
        "node_7",  # unnamed, between two ops of layer 0: layer 0, continues attention
        "attn_out-0",
        "norm-0",  # opens the FFN
        "ffn_out-0",
        "x",  # no layer of its own, inside layer 0: continues the FFN
        "l_out-0",
        "y",  # between layers 0 and 1: neither
        "norm-1",
        "Qcur-1",
        "norm",  # after the last layer: output
        "result_output",
    ]
    table = graph.classify(names_meta(tmp_path, names))
    assert list(table.part) == [
        "input", "attention", "attention", "attention", "attention", "ffn", "ffn", "ffn", "ffn", None,
        "attention", "attention", "output", "output",
    ]  # fmt: skip
    assert [None if pd.isna(x) else int(x) for x in table.layer] == [None] + [0] * 8 + [None, 1, 1, None, None]
    assert list(table.layer_source)[3] == "neighbours" and list(table.layer_source)[9] is None


# --- critical path -----------------------------------------------------------------------------


def edges_of(pairs: list[tuple[int, int]]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "src_invocation": pd.array([s for s, _ in pairs], dtype="Int64"),
            "dst_invocation": pd.array([d for _, d in pairs], dtype="Int64"),
            "storage_id": pd.array(range(len(pairs)), dtype="Int64"),
            "name": pd.Series([None] * len(pairs), dtype=object),
        }
    )


DIAMOND = edges_of([(1, 2), (1, 3), (2, 4), (3, 4)])


def test_critical_path_takes_the_longer_branch() -> None:
    assert graph.critical_path(DIAMOND, {1: 1, 2: 5, 3: 1, 4: 1}, [1, 2, 3, 4]) == [1, 2, 4]
    assert graph.critical_path(DIAMOND, {1: 1, 2: 1, 3: 5, 4: 1}, [1, 2, 3, 4]) == [1, 3, 4]
    assert graph.critical_path(DIAMOND, {1: 1, 2: 1, 3: 1, 4: 1}, [4, 3, 2, 1]) == [1, 2, 4]  # tie: earlier


def test_critical_path_of_independent_chains() -> None:
    edges = edges_of([(1, 3), (2, 4)])
    assert graph.critical_path(edges, {1: 1, 2: 2, 3: 1, 4: 2}, [1, 2, 3, 4]) == [2, 4]
    assert graph.critical_path(edges, {1: 10, 2: 2, 3: 1, 4: 2}, [1, 2, 3, 4]) == [1, 3]


def test_critical_path_stays_inside_the_evaluation() -> None:
    edges = edges_of([(1, 2), (2, 3), (3, 4)])
    assert graph.critical_path(edges, {2: 1.0, 3: 1.0, 4: 1.0}, [2, 3, 4]) == [2, 3, 4]
    assert graph.critical_path(edges, {3: 1.0, 4: 5.0}, [3, 4]) == [3, 4]


def test_critical_path_unknown_and_invalid_durations() -> None:
    with pytest.raises(ValueError, match="no duration for 1 invocation"):
        graph.critical_path(DIAMOND, {1: 1, 2: 5, 4: 1}, [1, 2, 3, 4])
    with pytest.raises(ValueError, match="no duration"):
        graph.critical_path(DIAMOND, {1: 1, 2: math.nan, 3: 1, 4: 1}, [1, 2, 3, 4])
    assert graph.critical_path(DIAMOND, {1: 1, 3: 2, 4: 1}, [1, 2, 3, 4], missing="zero") == [1, 3, 4]
    with pytest.raises(ValueError, match="negative"):
        graph.critical_path(DIAMOND, {1: 1, 2: -5, 3: 1, 4: 1}, [1, 2, 3, 4])
    with pytest.raises(ValueError, match="backward"):
        graph.critical_path(edges_of([(3, 2)]), {2: 1, 3: 1}, [2, 3])


def test_critical_path_of_a_decode_token() -> None:
    meta = read_example("dense500m-decode")
    edges = graph.build_edges(meta)
    members = graph.evaluation_members(graph.graph_evaluations(meta))
    names = dict(zip(meta.ops.invocation.astype(int), meta.ops.node_name, strict=True))
    pairs = set(zip(edges.src_invocation.astype(int), edges.dst_invocation.astype(int), strict=True))
    for invs in members.values():
        path = graph.critical_path(edges, {i: 1.0 for i in invs}, invs)
        assert set(path) <= set(invs)
        assert all((a, b) in pairs for a, b in zip(path, path[1:], strict=False))
        # the residual stream chains the whole token: from the first norm to the logits
        assert path[0] == invs[0] and names[path[-1]] == "result_output"
        # with the key projection made expensive the path goes through the K cache write instead
        heavy = {i: (100.0 if names[i] == "Kcur-0" else 1.0) for i in invs}
        kpath = [names[i] for i in graph.critical_path(edges, heavy, invs)]
        assert kpath[:5] == ["norm-0", "Kcur-0", "Kcur-0", "node_21", "attn_out-0"]


# --- exports ------------------------------------------------------------------------------------


_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"')


def dot_structure_ok(text: str) -> bool:
    """Quoted strings close, and braces and brackets balance outside them."""
    for line in text.splitlines():
        if '"' in _QUOTED.sub("", line):
            return False
    bare = _QUOTED.sub("", text)
    return bare.count("{") == bare.count("}") and bare.count("[") == bare.count("]")


def tricky_meta(tmp_path: Path) -> OpMetadata:
    rows = [
        row(1, "norm-0", out=100, ins=(WEIGHT,), in_names=["w"], kernels=[{"name": "k", "gpu_time_us": 1.5}]),
        row(2, 'say "hi" \\ there-0', out=200, ins=(100,), in_names=['a"b\\c\nd'], kernels=[]),
        row(3, "l_out-0", out=300, ins=(200, 100), in_names=["x", "y"], kernels=[{"name": "k", "gpu_time_us": 2}]),
    ]
    return meta_of(tmp_path, rows)


def test_to_json_round_trip(tmp_path: Path) -> None:
    meta = tricky_meta(tmp_path)
    edges = graph.build_edges(meta)
    doc = json.loads(graph.to_json(meta, edges, dram_bytes={1: 1e6, 3: 2.5e6}, path=[1, 2, 3], indent=2))
    assert doc["format"] == "rocroof-op-graph" and doc["version"] == 1 and doc["device"] == "gfx942"
    nodes = {n["invocation"]: n for n in doc["nodes"]}
    assert list(nodes) == [1, 2, 3]
    keys = "invocation evaluation op op_list name out_name layer part time_ns bytes critical"
    assert list(nodes[1]) == keys.split()
    assert nodes[2]["name"] == 'say "hi" \\ there-0' and nodes[2]["layer"] == 0
    assert [nodes[i]["time_ns"] for i in (1, 2, 3)] == [1500.0, None, 2000.0]  # 2 has no kernel time: null
    assert [nodes[i]["bytes"] for i in (1, 2, 3)] == [1e6, None, 2.5e6]
    assert all(n["critical"] for n in nodes.values())
    assert [(e["src"], e["dst"], e["name"], e["critical"]) for e in doc["edges"]] == [
        (1, 2, 'a"b\\c\nd', True),
        (2, 3, "x", True),
        (1, 3, "y", False),
    ]
    for e in doc["edges"]:
        assert e["src"] in nodes and e["dst"] in nodes
    part = json.loads(graph.to_json(meta, edges, duration_ns={2: 5.0, 3: math.nan}, invocations=[2, 3]))
    assert [n["invocation"] for n in part["nodes"]] == [2, 3]
    assert [n["time_ns"] for n in part["nodes"]] == [5.0, None]
    assert [(e["src"], e["dst"]) for e in part["edges"]] == [(2, 3)]
    assert not any(n["critical"] for n in part["nodes"])


def test_to_dot_structure_and_escaping(tmp_path: Path) -> None:
    meta = tricky_meta(tmp_path)
    edges = graph.build_edges(meta)
    text = graph.to_dot(meta, edges, dram_bytes={1: 1234567.0}, path=[1, 3])
    assert text.startswith("digraph rocroof {\n") and text.endswith("}\n")
    assert dot_structure_ok(text)
    for inv in (1, 2, 3):
        assert len(re.findall(rf"^\s+i{inv} \[label=", text, flags=re.M)) == 1
    arrows = re.findall(r"^\s+i(\d+) -> i(\d+)", text, flags=re.M)
    assert sorted((int(a), int(b)) for a, b in arrows) == [(1, 2), (1, 3), (2, 3)]
    # a quote and a backslash in a name, and a line break in a tensor name, stay inside their strings
    assert r"say \"hi\" \\ there-0" in text
    assert r'label="a\"b\\c\nd"' in text
    # time and bytes on the nodes: µs and MB in the label, raw values as attributes; ? when unknown
    line1 = next(x for x in text.splitlines() if x.strip().startswith("i1 ["))
    assert r"\n1.50 µs · 1.235 MB" in line1 and 'time_ns="1500"' in line1 and 'bytes="1234567"' in line1
    assert "color=red" in line1
    line2 = next(x for x in text.splitlines() if x.strip().startswith("i2 ["))
    assert "? µs · ? MB" in line2 and "time_ns" not in line2 and "color=red" not in line2
    assert re.search(r"i1 -> i3 \[.*color=red", text) and not re.search(r"i1 -> i2 \[.*color=red", text)
    assert 'label="evaluation 0 / layer 0 / ffn"' in text  # norm-0 opens the block of l_out-0


def test_dot_quote() -> None:
    assert graph.dot_quote('a"b') == r'"a\"b"'
    assert graph.dot_quote("a\\b") == r'"a\\b"'
    assert graph.dot_quote("a\r\nb") == r'"a\nb"'


def test_exports_of_a_decode_token() -> None:
    meta = read_example("dense500m-decode")
    edges = graph.build_edges(meta)
    invs = graph.evaluation_members(graph.graph_evaluations(meta))[2]
    doc = json.loads(graph.to_json(meta, edges, invocations=invs))
    assert len(doc["nodes"]) == len(invs)
    inside = set(invs)
    expected = edges[edges.src_invocation.isin(inside) & edges.dst_invocation.isin(inside)]
    assert len(doc["edges"]) == len(expected) > 0
    text = graph.to_dot(meta, edges, invocations=invs)
    assert dot_structure_ok(text)
    assert text.count(" -> ") == len(expected)
    assert text.count("subgraph cluster_") == 2 * DECODE_LAYERS + 1


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz 'dot' is not installed")
def test_graphviz_reads_the_dot(tmp_path: Path) -> None:
    meta = tricky_meta(tmp_path)
    text = graph.to_dot(meta, graph.build_edges(meta), path=[1, 2, 3])
    done = subprocess.run(["dot", "-Tsvg"], input=text, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "<svg" in done.stdout


@pytest.mark.parametrize("extra", [[], ["--evaluation", "0"], ["--format", "json"]])
def test_graph_of_a_run_without_op_metadata_is_one_error(tmp_path: Path, extra: list[str]) -> None:
    # the H200 trial's nsys + ncu exports and its ggml-fused: log: op invocations from the log lines,
    # no op metadata, so no edges and no evaluations; plain `graph` printed the nodes with 0 edges
    from click.testing import CliRunner

    from rocroof.capture.readers import read_capture
    from rocroof.cli import cli
    from rocroof.ingest.pipeline import build_run
    from rocroof.store import Store

    from .conftest import fixture_path

    capture = tmp_path / "dense"
    capture.mkdir()
    for f in fixture_path("h200-trial").glob("dense_*"):
        shutil.copy(f, capture / f.name)
    db = tmp_path / "r.db"
    Store(db).write_run(build_run(read_capture(capture)))
    result = CliRunner().invoke(cli, ["graph", "--db", str(db), *extra])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.output == "Error: run 1: no op graph (it needs op metadata: the hook's sidecar or the fork's JSON)\n"


def test_stored_graph_without_evaluations_raises() -> None:
    from rocroof.errors import InputError
    from rocroof.report.graph import stored_graph

    class NoGraph:  # op invocations without evaluations (no op metadata) and no edges
        def query(self, sql: str) -> pd.DataFrame:
            if "op_edge" in sql:
                return pd.DataFrame(columns=["src_op_index", "dst_op_index", "storage_id", "tensor_name"])
            return pd.DataFrame({"op_index": [0, 1], "evaluation": [None, None], "op_list": ["ADD", "MUL"]})

    with pytest.raises(InputError, match=r"^run 4: no op graph"):
        stored_graph(NoGraph(), 4, None)
