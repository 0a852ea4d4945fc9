"""ggml op metadata JSON (``GGML_ROOFLINE_OUT`` schema): rows built from the documented examples.

The rows follow ``shared/reference/llamacpp-roofline.md`` §1.8 (dense MUL_MAT, MoE MUL_MAT_ID,
fused RMS_NORM+MUL); expected values are the numbers written in those rows.
"""

from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from rocroof.capture.readers.ggml_meta import looks_like_metadata, read_metadata
from rocroof.errors import ParseError

_ZERO_PARAMS = [0] * 16

DENSE: dict[str, Any] = {
    "ggml_op": "MUL_MAT",
    "invocation": 1843,
    "name": "Qcur-0",
    "out_storage_id": 94813370012160,
    "in_storage_ids": [94813350000640, 94813369954304],
    "in_names": ["blk.0.attn_q.weight", "attn_norm-0"],
    "in_types": ["q4_K", "f32"],
    "in_ne": [[2048, 2048, 1, 1], [2048, 1, 1, 1]],
    "dtype": "f32",
    "quant": "q4_K",
    "ne": [2048, 1, 1, 1],
    "src_ne": [[2048, 2048, 1, 1], [2048, 1, 1, 1]],
    "src_types": ["q4_K", "f32"],
    "op_params": _ZERO_PARAMS,
    "bytes": 2375680,
    "dst_bytes": 8192,
    "dst_storage_id": 94813370012160,
    "src_bytes": [2359296, 8192],
    "src_tensor_ids": [94813350000640, 94813369954304],
    "src_storage_ids": [94813350000640, 94813369954304],
    "M": 1,
    "N": 2048,
    "K": 2048,
    "n_experts": 0,
    "top_k": 0,
    "experts_used": 0,
    "kernels": [
        {"name": "void quantize_q8_1<...>(...)", "gpu_time_us": 1.8},
        {"name": "void mul_mat_vec_q<(ggml_type)12, 1, false>(...)", "gpu_time_us": 9.64},
    ],
}

#: 128 experts, 71 of them routed, 16 tokens x top-8 = 128 routings.
TOKENS_PER_EXPERT = [3, 0, 1, 2, 0] + [2] * 54 + [1] * 14 + [0] * 55

MOE: dict[str, Any] = {
    "ggml_op": "MUL_MAT_ID",
    "invocation": 52210,
    "name": "ffn_moe_down-3",
    "out_storage_id": 140221883400192,
    "in_storage_ids": [140219000000000, 140221880000000, 140221881000000],
    "in_names": ["blk.3.ffn_down_exps.weight", "ffn_moe_swiglu-3", "ffn_moe_topk-3"],
    "in_types": ["q4_K", "f32", "i32"],
    "in_ne": [[768, 2048, 128, 1], [768, 8, 16, 1], [8, 16, 1, 1]],
    "dtype": "f32",
    "quant": "q4_K",
    "ne": [2048, 8, 16, 1],
    "src_ne": [[768, 2048, 128, 1], [768, 8, 16, 1], [8, 16, 1, 1]],
    "src_types": ["q4_K", "f32", "i32"],
    "op_params": _ZERO_PARAMS,
    "bytes": 114688512,
    "dst_bytes": 1048576,
    "dst_storage_id": 140221883400192,
    "src_bytes": [113246208, 393216, 512],
    "src_tensor_ids": [140219000000000, 140221880000000, 140221881000000],
    "src_storage_ids": [140219000000000, 140221880000000, 140221881000000],
    "M": 16,
    "N": 2048,
    "K": 768,
    "n_experts": 128,
    "top_k": 8,
    "experts_used": 71,
    "tokens_per_expert": TOKENS_PER_EXPERT,
    "kernels": [
        {"name": "void quantize_mmq_q8_1<...>(...)", "gpu_time_us": 2.1},
        {"name": "void mul_mat_q<(ggml_type)12, 16, true>(...)", "gpu_time_us": 61.3},
    ],
}

_NORM_NODE = {
    "ggml_op": "RMS_NORM",
    "dtype": "f32",
    "quant": "f32",
    "ne": [2048, 1, 1, 1],
    "src_ne": [[2048, 1, 1, 1]],
    "src_types": ["f32"],
    "op_params": [897988541] + [0] * 15,
    "dst_bytes": 8192,
    "dst_storage_id": 94813370010000,
    "src_bytes": [8192],
    "src_tensor_ids": [94813369990000],
    "src_storage_ids": [94813369990000],
    "M": 0,
    "N": 0,
    "K": 0,
    "n_experts": 0,
    "top_k": 0,
}

FUSED: dict[str, Any] = {
    "ggml_op": "RMS_NORM",
    "invocation": 9012,
    "name": "norm-5",
    "out_storage_id": 94813370020352,
    "in_storage_ids": [94813369990000, 94813351111000],
    "in_names": ["l_out-4", "blk.5.attn_norm.weight"],
    "in_types": ["f32", "f32"],
    "in_ne": [[2048, 1, 1, 1], [2048, 1, 1, 1]],
    "fused_ops": [
        _NORM_NODE,
        {
            "ggml_op": "MUL",
            "dtype": "f32",
            "quant": "f32",
            "ne": [2048, 1, 1, 1],
            "src_ne": [[2048, 1, 1, 1], [2048, 1, 1, 1]],
            "src_types": ["f32", "f32"],
            "op_params": _ZERO_PARAMS,
            "dst_bytes": 8192,
            "dst_storage_id": 94813370020352,
            "src_bytes": [8192, 8192],
            "src_tensor_ids": [94813370010000, 94813351111000],
            "src_storage_ids": [94813370010000, 94813351111000],
            "M": 0,
            "N": 0,
            "K": 0,
            "n_experts": 0,
            "top_k": 0,
        },
    ],
    **{k: v for k, v in _NORM_NODE.items() if k != "ggml_op"},
    "bytes": 16384,
    "experts_used": 0,
    "kernels": [{"name": "void rms_norm_f32<256, true, false>(...)", "gpu_time_us": 2.4}],
}


def _doc(*rows: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {"device": "gfx1151", "total_gpu_time_us": 76.24, "rows": [copy.deepcopy(r) for r in rows], **top}


def _write(tmp_path: Path, doc: Any, name: str = "roofline.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc, indent=1), encoding="utf-8")
    return path


def _operands(meta_operands: pd.DataFrame, inv: int, role: str, node_index: int) -> pd.DataFrame:
    o = meta_operands
    sel = o[(o["invocation"] == inv) & (o["role"] == role) & (o["node_index"] == node_index)]
    return sel.sort_values("operand_index")


def test_example_rows_in_shuffled_order_are_sorted_by_invocation(tmp_path: Path) -> None:
    meta, notes = read_metadata(_write(tmp_path, _doc(MOE, DENSE, FUSED)))
    assert notes == []
    assert meta.ops["invocation"].tolist() == [1843, 9012, 52210]
    assert meta.ops["op"].tolist() == ["MUL_MAT", "RMS_NORM", "MUL_MAT_ID"]
    assert meta.ops["node_name"].tolist() == ["Qcur-0", "norm-5", "ffn_moe_down-3"]
    assert meta.device == "gfx1151"
    assert meta.source == "ggml-roofline"
    for frame in (meta.nodes, meta.operands, meta.kernels):
        assert frame["invocation"].is_monotonic_increasing


def test_dense_row(tmp_path: Path) -> None:
    meta, _ = read_metadata(_write(tmp_path, _doc(DENSE)))
    op = meta.ops.iloc[0]
    assert (op["m"], op["n"], op["k"]) == (1, 2048, 2048)
    assert op["op_list"] == "MUL_MAT" and not op["is_fused"]
    assert op["dtype"] == "f32" and op["quant"] == "q4_K"
    assert json.loads(op["ne"]) == [2048, 1, 1, 1]
    assert json.loads(op["src_ne"]) == [[2048, 2048, 1, 1], [2048, 1, 1, 1]]
    assert op["metadata_bytes"] == 2375680
    # Q4_K: 144 bytes per 256 weights; the row's src_bytes[0] says the same
    assert 2048 * 2048 * 144 // 256 == 2359296
    assert op["dst_bytes"] == 2048 * 4
    assert op["out_storage_id"] == 94813370012160
    assert op["tokens_per_expert"] is None
    assert len(meta.nodes) == 1 and meta.nodes.iloc[0]["ggml_op"] == "MUL_MAT"


def test_dense_operands(tmp_path: Path) -> None:
    meta, _ = read_metadata(_write(tmp_path, _doc(DENSE)))
    src = _operands(meta.operands, 1843, "src", 0)
    assert src["bytes"].tolist() == [2359296, 8192]
    assert src["ggml_type"].tolist() == ["q4_K", "f32"]
    assert src["storage_id"].tolist() == [94813350000640, 94813369954304]
    assert src["tensor_id"].tolist() == [94813350000640, 94813369954304]
    assert [json.loads(n) for n in src["ne"]] == [[2048, 2048, 1, 1], [2048, 1, 1, 1]]
    dst = _operands(meta.operands, 1843, "dst", 0)
    assert dst["bytes"].tolist() == [8192]
    assert dst["storage_id"].tolist() == [94813370012160]
    inputs = _operands(meta.operands, 1843, "in", -1)
    assert inputs["name"].tolist() == ["blk.0.attn_q.weight", "attn_norm-0"]
    assert inputs["ggml_type"].tolist() == ["q4_K", "f32"]
    assert inputs["storage_id"].tolist() == [94813350000640, 94813369954304]
    out = _operands(meta.operands, 1843, "out", -1)
    assert out["storage_id"].tolist() == [94813370012160]
    assert out["name"].tolist() == ["Qcur-0"]


def test_moe_row_tokens_per_expert(tmp_path: Path) -> None:
    assert len(TOKENS_PER_EXPERT) == 128
    meta, _ = read_metadata(_write(tmp_path, _doc(MOE)))
    op = meta.ops.iloc[0]
    assert (op["m"], op["n"], op["k"], op["n_experts"], op["top_k"]) == (16, 2048, 768, 128, 8)
    assert op["experts_used"] == 71
    tpe = json.loads(op["tokens_per_expert"])
    assert tpe == TOKENS_PER_EXPERT
    assert len(tpe) == op["n_experts"]
    assert sum(tpe) == op["m"] * op["top_k"]  # every token routed to top_k experts
    assert sum(1 for t in tpe if t) == op["experts_used"]
    assert _operands(meta.operands, 52210, "in", -1)["name"].tolist() == [
        "blk.3.ffn_down_exps.weight",
        "ffn_moe_swiglu-3",
        "ffn_moe_topk-3",
    ]


def test_fused_row(tmp_path: Path) -> None:
    meta, _ = read_metadata(_write(tmp_path, _doc(FUSED)))
    op = meta.ops.iloc[0]
    assert op["op"] == "RMS_NORM"
    assert op["op_list"] == "RMS_NORM+MUL"
    assert op["is_fused"]
    assert op["out_storage_id"] == 94813370020352
    nodes = meta.nodes.sort_values("node_index")
    assert nodes["node_index"].tolist() == [0, 1]
    assert nodes["ggml_op"].tolist() == ["RMS_NORM", "MUL"]
    assert nodes["dst_storage_id"].tolist() == [94813370010000, 94813370020352]
    assert json.loads(nodes.iloc[0]["op_params"])[0] == 897988541  # 1e-6f as bits
    # MUL reads the RMS_NORM output (an intermediate) and the norm weight
    mul_src = _operands(meta.operands, 9012, "src", 1)
    assert mul_src["storage_id"].tolist() == [94813370010000, 94813351111000]
    assert mul_src["bytes"].tolist() == [8192, 8192]
    assert _operands(meta.operands, 9012, "src", 0)["storage_id"].tolist() == [94813369990000]
    assert _operands(meta.operands, 9012, "dst", 1)["storage_id"].tolist() == [94813370020352]
    inputs = _operands(meta.operands, 9012, "in", -1)
    assert inputs["name"].tolist() == ["l_out-4", "blk.5.attn_norm.weight"]
    assert 94813370010000 not in inputs["storage_id"].tolist()  # the internal tensor is not an input


def test_kernels_gpu_time_us_to_ns(tmp_path: Path) -> None:
    meta, _ = read_metadata(_write(tmp_path, _doc(DENSE, FUSED)))
    k = meta.kernels
    assert k["invocation"].tolist() == [1843, 1843, 9012]
    assert k["kernel_index"].tolist() == [0, 1, 0]
    assert k["kernel_name"].tolist()[0] == "void quantize_q8_1<...>(...)"
    assert k["gpu_time_ns"].tolist() == pytest.approx([1800.0, 9640.0, 2400.0])
    assert meta.ops["gpu_time_ns"].tolist() == pytest.approx([11440.0, 2400.0])


def test_row_without_kernels_has_no_gpu_time(tmp_path: Path) -> None:
    row = {k: v for k, v in DENSE.items() if k != "kernels"}
    meta, _ = read_metadata(_write(tmp_path, _doc(row, source="rocroof-hook")))
    assert pd.isna(meta.ops["gpu_time_ns"].iloc[0])
    assert len(meta.kernels) == 0
    assert meta.source == "rocroof-hook"


def test_old_key_names(tmp_path: Path) -> None:
    old = copy.deepcopy(DENSE)
    old["dst_sid"] = old.pop("dst_storage_id")
    old["src_ids"] = old.pop("src_tensor_ids")
    old["src_sids"] = old.pop("src_storage_ids")
    meta, _ = read_metadata(_write(tmp_path, _doc(old)))
    assert meta.ops.iloc[0]["dst_storage_id"] == 94813370012160
    src = _operands(meta.operands, 1843, "src", 0)
    assert src["tensor_id"].tolist() == [94813350000640, 94813369954304]
    assert src["storage_id"].tolist() == [94813350000640, 94813369954304]


def test_ids_at_or_above_2_63_are_twos_complement(tmp_path: Path) -> None:
    row = copy.deepcopy(DENSE)
    row["out_storage_id"] = 2**64 - 4096
    row["dst_storage_id"] = 2**64 - 4096
    row["src_tensor_ids"] = [2**63, 2**63 - 1]
    row["src_storage_ids"] = [2**64 - 1, 5]
    meta, _ = read_metadata(_write(tmp_path, _doc(row)))
    assert meta.ops.iloc[0]["out_storage_id"] == -4096
    src = _operands(meta.operands, 1843, "src", 0)
    # exact: a float64 column would round -2**63 + 1 and 2**63 - 1
    assert src["tensor_id"].tolist() == [-(2**63), 2**63 - 1]
    assert src["storage_id"].tolist() == [-1, 5]
    assert meta.operands["tensor_id"].dtype == "Int64"


@pytest.mark.parametrize("bad_id", [2**64, -1, "94813370012160", 1.5, True])
def test_bad_ids_are_parse_errors(tmp_path: Path, bad_id: Any) -> None:
    row = copy.deepcopy(DENSE)
    row["src_storage_ids"] = [1, bad_id]
    path = _write(tmp_path, _doc(FUSED, row))
    with pytest.raises(ParseError) as err:
        read_metadata(path)
    assert err.value.path == str(path)
    assert "rows[1].src_storage_ids[1]" in str(err.value)


def test_missing_rows_is_a_parse_error(tmp_path: Path) -> None:
    for doc in ({"device": "gfx942"}, {"rows": {}}, [DENSE]):
        path = _write(tmp_path, doc)
        with pytest.raises(ParseError) as err:
            read_metadata(path)
        assert err.value.path == str(path)
        assert "'rows'" in str(err.value)


def test_invalid_json_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"device": "gfx942",\n "rows": [\n  {"ggml_op": "ADD",, "invocation": 1}\n ]\n}\n')
    with pytest.raises(ParseError) as err:
        read_metadata(path)
    assert err.value.row == 3
    assert str(err.value).startswith(f"{path}:3: invalid JSON")


@pytest.mark.parametrize(
    ("index", "key", "value", "where"),
    [
        (1, "M", "1", "rows[1].M"),
        (0, "dst_bytes", 8192.5, "rows[0].dst_bytes"),
        (1, "invocation", "1843", "rows[1].invocation"),
        (1, "invocation", -5, "rows[1].invocation"),
        (0, "name", 17, "rows[0].name"),
        (0, "dtype", ["f32"], "rows[0].dtype"),
        (0, "in_names", ["a", 3], "rows[0].in_names[1]"),
        (1, "src_bytes", [1, "2"], "rows[1].src_bytes[1]"),
        (1, "tokens_per_expert", [1, 2.5], "rows[1].tokens_per_expert"),
        (1, "src_ne", {"0": 1}, "rows[1].src_ne"),
        (1, "kernels", [{"name": "k", "gpu_time_us": "1.0"}], "rows[1].kernels[0].gpu_time_us"),
        (1, "kernels", [{"name": "k", "gpu_time_us": -1.0}], "rows[1].kernels[0].gpu_time_us"),
        (1, "kernels", [{"name": "k", "gpu_time_us": float("nan")}], "rows[1].kernels[0].gpu_time_us"),
        (1, "kernels", ["k"], "rows[1].kernels[0]"),
        (1, "ggml_op", "", "rows[1]"),
    ],
)
def test_wrong_types_name_the_row_and_key(tmp_path: Path, index: int, key: str, value: Any, where: str) -> None:
    doc = _doc(FUSED, MOE)
    doc["rows"][index][key] = value
    path = _write(tmp_path, doc)
    with pytest.raises(ParseError) as err:
        read_metadata(path)
    assert err.value.path == str(path)
    assert where in str(err.value)


def test_fused_entry_wrong_type_names_the_node(tmp_path: Path) -> None:
    doc = _doc(FUSED)
    doc["rows"][0]["fused_ops"][1]["dst_storage_id"] = "x"
    with pytest.raises(ParseError) as err:
        read_metadata(_write(tmp_path, doc))
    assert "rows[0].fused_ops[1].dst_storage_id" in str(err.value)


def test_rows_without_invocation_get_synthetic_ids_and_a_warning(tmp_path: Path) -> None:
    rows = [{k: v for k, v in r.items() if k != "invocation"} for r in (MOE, DENSE, FUSED)]
    meta, notes = read_metadata(_write(tmp_path, {"device": "gfx1151", "rows": rows}))
    assert meta.ops["invocation"].tolist() == [1, 2, 3]  # file order
    assert meta.ops["op"].tolist() == ["MUL_MAT_ID", "MUL_MAT", "RMS_NORM"]
    assert [(n.severity, n.code) for n in notes] == [("warning", "no-invocation-ids")]
    assert "roofline.json" in notes[0].message


def test_some_rows_without_invocation_is_an_error(tmp_path: Path) -> None:
    doc = _doc(DENSE, MOE)
    del doc["rows"][1]["invocation"]
    with pytest.raises(ParseError) as err:
        read_metadata(_write(tmp_path, doc))
    assert "rows[1]" in str(err.value) and "invocation" in str(err.value)


def test_duplicate_invocation_keeps_the_first_with_a_warning(tmp_path: Path) -> None:
    second = copy.deepcopy(MOE)
    second["invocation"] = DENSE["invocation"]
    meta, notes = read_metadata(_write(tmp_path, _doc(DENSE, second)))
    assert meta.ops["op"].tolist() == ["MUL_MAT"]
    assert [n.code for n in notes] == ["duplicate-invocation"]


def test_gzip_json(tmp_path: Path) -> None:
    path = tmp_path / "roofline.json.gz"
    path.write_bytes(gzip.compress(json.dumps(_doc(FUSED, DENSE)).encode()))
    assert looks_like_metadata(path)
    meta, _ = read_metadata(path)
    assert meta.ops["invocation"].tolist() == [1843, 9012]


def test_empty_rows_give_empty_frames_with_columns(tmp_path: Path) -> None:
    meta, notes = read_metadata(_write(tmp_path, {"device": "", "rows": []}))
    assert notes == []
    assert meta.device is None
    assert len(meta.ops) == 0 and "invocation" in meta.ops.columns and "op_list" in meta.ops.columns
    assert len(meta.operands) == 0 and "storage_id" in meta.operands.columns
    assert len(meta.kernels) == 0 and "gpu_time_ns" in meta.kernels.columns


def test_non_utf8_json_is_a_parse_error(tmp_path: Path) -> None:
    path = tmp_path / "latin1.json"
    path.write_bytes(b'{"rows": [\n{"ggml_op": "ADD", "name": "caf\xe9", "invocation": 1}]}')
    with pytest.raises(ParseError) as err:
        read_metadata(path)
    assert err.value.row == 2


def test_looks_like_metadata(tmp_path: Path) -> None:
    yes = _write(tmp_path, _doc(DENSE), "a.json")
    other = _write(tmp_path, {"hello": 1}, "b.json")
    assert looks_like_metadata(yes)
    assert not looks_like_metadata(other)
    assert not looks_like_metadata(tmp_path / "absent.json")
