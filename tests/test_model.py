"""Modelled DRAM bytes and FLOPs per op invocation (rocroof.analysis.model).

Every expected number is computed by hand in the comment beside it, from the block sizes of the
ggml types (Q4_K: 144 bytes per 256 weights, Q8_0: 34 per 32, f32 4, f16 2, i32 4, i64 8) and the
shapes in the rows, never from the module's output. Rows are written in the sidecar schema
(``shared/reference/llamacpp-roofline.md`` §1.6) and read with the real reader.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from rocroof.analysis.model import MODEL_COLUMNS, model_bytes, model_flops, model_invocations, tensor_bytes
from rocroof.capture.readers.ggml_meta import read_metadata
from rocroof.records import OpMetadata

REPO = Path(__file__).resolve().parents[1]
DECODE = REPO / "examples" / "h200" / "dense500m-decode" / "trace" / "ggml-op-meta.json.gz"
MOE_PREFILL = REPO / "examples" / "h200" / "moe-prefill" / "trace" / "ggml-op-meta.json.gz"

_ZERO = [0] * 16

# ---------------------------------------------------------------- the three rows of §1.8

DENSE = {
    "ggml_op": "MUL_MAT", "invocation": 1843, "name": "Qcur-0", "out_storage_id": 94813370012160,
    "in_storage_ids": [94813350000640, 94813369954304],
    "dtype": "f32", "quant": "q4_K", "ne": [2048, 1, 1, 1],
    "src_ne": [[2048, 2048, 1, 1], [2048, 1, 1, 1]], "src_types": ["q4_K", "f32"], "op_params": _ZERO,
    "bytes": 2375680, "dst_bytes": 8192, "dst_storage_id": 94813370012160,
    "src_bytes": [2359296, 8192], "src_tensor_ids": [94813350000640, 94813369954304],
    "src_storage_ids": [94813350000640, 94813369954304],
    "M": 1, "N": 2048, "K": 2048, "n_experts": 0, "top_k": 0, "experts_used": 0,
}  # fmt: skip

MOE = {
    "ggml_op": "MUL_MAT_ID", "invocation": 52210, "name": "ffn_moe_down-3", "out_storage_id": 140221883400192,
    "in_storage_ids": [140219000000000, 140221880000000, 140221881000000],
    "dtype": "f32", "quant": "q4_K", "ne": [2048, 8, 16, 1],
    "src_ne": [[768, 2048, 128, 1], [768, 8, 16, 1], [8, 16, 1, 1]], "src_types": ["q4_K", "f32", "i32"],
    "op_params": _ZERO, "bytes": 114688512, "dst_bytes": 1048576, "dst_storage_id": 140221883400192,
    "src_bytes": [113246208, 393216, 512],
    "src_tensor_ids": [140219000000000, 140221880000000, 140221881000000],
    "src_storage_ids": [140219000000000, 140221880000000, 140221881000000],
    "M": 16, "N": 2048, "K": 768, "n_experts": 128, "top_k": 8, "experts_used": 71,
}  # fmt: skip

_NORM_NODE = {
    "ggml_op": "RMS_NORM", "dtype": "f32", "quant": "f32", "ne": [2048, 1, 1, 1],
    "src_ne": [[2048, 1, 1, 1]], "src_types": ["f32"], "op_params": [897988541] + [0] * 15,
    "dst_bytes": 8192, "dst_storage_id": 94813370010000, "src_bytes": [8192],
    "src_tensor_ids": [94813369990000], "src_storage_ids": [94813369990000],
    "M": 0, "N": 0, "K": 0, "n_experts": 0, "top_k": 0,
}  # fmt: skip
_MUL_NODE = {
    "ggml_op": "MUL", "dtype": "f32", "quant": "f32", "ne": [2048, 1, 1, 1],
    "src_ne": [[2048, 1, 1, 1], [2048, 1, 1, 1]], "src_types": ["f32", "f32"], "op_params": _ZERO,
    "dst_bytes": 8192, "dst_storage_id": 94813370020352, "src_bytes": [8192, 8192],
    "src_tensor_ids": [94813370010000, 94813351111000], "src_storage_ids": [94813370010000, 94813351111000],
    "M": 0, "N": 0, "K": 0, "n_experts": 0, "top_k": 0,
}  # fmt: skip
FUSED = {
    **_NORM_NODE, "invocation": 9012, "name": "norm-5", "out_storage_id": 94813370020352,
    "in_storage_ids": [94813369990000, 94813351111000], "fused_ops": [_NORM_NODE, _MUL_NODE],
    "bytes": 16384, "experts_used": 0,
}  # fmt: skip


# ---------------------------------------------------------------- builders of synthetic rows


def src(ggml_type: str, ne: list[int], tid: int, sid: int | None = None) -> tuple[str, list[int], int, int]:
    """A source operand: type, shape, tensor id, storage id (the tensor's own unless a view)."""
    return (ggml_type, ne, tid, tid if sid is None else sid)


def node(
    op: str,
    dst: tuple[str, list[int], int],
    srcs: list[tuple[str, list[int], int, int]],
    op_params: list[int] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """One node in the sidecar schema; ``dst`` is (type, shape, storage id)."""
    params = list(op_params or [])
    return {
        "ggml_op": op,
        "dtype": dst[0],
        "quant": srcs[0][0] if srcs else "",
        "ne": dst[1],
        "dst_storage_id": dst[2],
        "src_ne": [s[1] for s in srcs],
        "src_types": [s[0] for s in srcs],
        "src_tensor_ids": [s[2] for s in srcs],
        "src_storage_ids": [s[3] for s in srcs],
        "op_params": params + [0] * (16 - len(params)),
        **extra,
    }


def row(invocation: int, *nodes: dict[str, Any], **top: Any) -> dict[str, Any]:
    """An invocation row: the head node's keys, plus ``fused_ops`` for a group of several."""
    out = {**nodes[0], "invocation": invocation, "name": f"node-{invocation}", **top}
    if len(nodes) > 1:
        out["fused_ops"] = list(nodes)
    return out


def meta_of(tmp_path: Path, *rows: dict[str, Any]) -> OpMetadata:
    path = tmp_path / "ggml-op-meta.json"
    path.write_text(json.dumps({"device": "sm_90", "source": "ggml-cuda-markers", "rows": list(rows)}))
    meta, _ = read_metadata(path)
    return meta


def by_invocation(df: pd.DataFrame) -> dict[int, dict[str, Any]]:
    return {int(r["invocation"]): r for r in df.to_dict("records")}


# ---------------------------------------------------------------- tensor_bytes


def test_block_sizes_from_gguf() -> None:
    assert tensor_bytes("q4_K", [256]) == 144  # one Q4_K block: 256 weights in 144 bytes
    assert tensor_bytes("q8_0", [32]) == 34  # one Q8_0 block: 32 weights in 34 bytes
    assert tensor_bytes("q4_K", [2048, 2048, 1, 1]) == 2_359_296  # 2048*2048/256*144
    assert tensor_bytes("Q8_0", [2048, 2048]) == 4_456_448  # 2048*2048/32*34, case-insensitive
    assert tensor_bytes("q6_K", [256, 2]) == 420  # 2 blocks of 210
    assert tensor_bytes("q4_0", [64]) == 36  # 2 blocks of 18
    assert tensor_bytes("f32", [2048, 1, 1, 1]) == 8192
    assert tensor_bytes("f16", [512, 256]) == 262_144
    assert tensor_bytes("bf16", [10]) == 20
    assert tensor_bytes("i32", [8, 16, 1, 1]) == 512
    assert tensor_bytes("i64", [1, 1, 1, 1]) == 8
    assert tensor_bytes("f32", [0, 4]) == 0


def test_unknown_type_is_named() -> None:
    with pytest.raises(ValueError, match="'q4_2'"):
        tensor_bytes("q4_2", [32])


def test_partial_block_and_bad_shape_are_refused() -> None:
    with pytest.raises(ValueError, match="whole blocks of 32"):
        tensor_bytes("q8_0", [48])
    with pytest.raises(ValueError, match="shape"):
        tensor_bytes("f32", [-1])
    with pytest.raises(ValueError, match="shape"):
        tensor_bytes("f32", [])


# ---------------------------------------------------------------- the reference rows


def test_reference_example_rows(tmp_path: Path) -> None:
    out = by_invocation(model_invocations(meta_of(tmp_path, MOE, DENSE, FUSED)))
    assert list(out) == [1843, 9012, 52210]
    dense = out[1843]
    # reads: Q4_K weight 2048*2048/256*144 = 2,359,296 + f32 activation 2048*4 = 8,192 -> 2,367,488
    assert dense["model_read_bytes"] == 2_367_488
    assert dense["model_write_bytes"] == 8_192  # f32 [2048]
    assert dense["flops"] == 8_388_608  # 2*M*N*K = 2*1*2048*2048
    assert dense["model_note"] == ""
    moe = out[52210]
    # per expert 768*2048/256*144 = 884,736 B; 71 of 128 experts routed -> 62,816,256
    # + activations f32 768*8*16*4 = 393,216 + ids i32 8*16*4 = 512 -> 63,209,984
    assert moe["model_read_bytes"] == 63_209_984
    assert moe["model_write_bytes"] == 1_048_576  # f32 2048*8*16*4
    assert moe["flops"] == 402_653_184  # 2*M*top_k*N*K = 2*16*8*2048*768
    assert moe["model_note"] == ""
    fused = out[9012]
    # reads l_out-4 (8,192) and the norm weight (8,192); norm-5 stays on chip; writes attn_norm-5
    assert fused["model_read_bytes"] == 16_384
    assert fused["model_write_bytes"] == 8_192
    assert fused["flops"] == 8_192  # RMS_NORM 3*2048 + MUL 1*2048


# ---------------------------------------------------------------- exclusion rules


def test_views_move_nothing_and_kv_write_is_the_rows_set(tmp_path: Path) -> None:
    # ROPE+VIEW+SET_ROWS as in the decode sidecar: K rope'd on chip, stored as f16 rows of the cache
    rope = node("ROPE", ("f32", [128, 4, 1, 1], 20), [src("f32", [128, 4, 1, 1], 11, 10), src("i32", [1], 12)],
                [0, 128])  # fmt: skip
    view = node("VIEW", ("f32", [512, 1, 1, 1], 20), [src("f32", [128, 4, 1, 1], 20)])
    set_rows = node(
        "SET_ROWS",
        ("f16", [512, 256, 1, 1], 30),
        [src("f32", [512, 1, 1, 1], 21, 20), src("i64", [1], 13), src("f16", [512, 256, 1, 1], 30)],
    )
    lone_view = node("RESHAPE", ("f32", [4, 128, 1, 1], 40), [src("f32", [128, 4, 1, 1], 41, 40)])
    out = by_invocation(model_bytes(meta_of(tmp_path, row(1, rope, view, set_rows), row(2, lone_view))))
    # reads: Kcur 128*4*4 = 2,048 + pos 4 + row index 8 = 2,060 (the rope'd K and its view stay on chip,
    # the cache is the destination, not an input)
    assert out[1]["model_read_bytes"] == 2_060
    # write: one f16 row of 512 = 1,024 B (not the 262,144 B cache view, not twice)
    assert out[1]["model_write_bytes"] == 1_024
    assert (out[2]["model_read_bytes"], out[2]["model_write_bytes"]) == (0, 0)


def test_set_rows_destination_is_not_read(tmp_path: Path) -> None:
    # the standalone V-cache store of the decode sidecar; the fork's bytes say 526,344
    # (= 262,144 dst + 2,048 + 8 + 262,144 src[2]: the cache counted twice, whole)
    set_rows = node(
        "SET_ROWS",
        ("f16", [512, 256, 1, 1], 30),
        [src("f32", [512, 1, 1, 1], 21, 20), src("i64", [1, 1, 1, 1], 13), src("f16", [512, 256, 1, 1], 30)],
    )
    out = by_invocation(model_bytes(meta_of(tmp_path, row(5, set_rows, bytes=526344))))[5]
    assert out["model_read_bytes"] == 2_056  # Vcur f32 512*4 + i64 index 8
    assert out["model_write_bytes"] == 1_024  # f16 512*2


def test_cpy_into_a_cache_view_writes_once(tmp_path: Path) -> None:
    # older KV store: ggml_cpy(k_cur, view of the cache); src[1] and dst are that view (storage 100)
    cpy = node("CPY", ("f16", [512, 3, 1, 1], 100), [src("f32", [512, 3, 1, 1], 1), src("f16", [512, 3, 1, 1], 2, 100)])
    out = by_invocation(model_bytes(meta_of(tmp_path, row(1, cpy))))[1]
    assert out["model_read_bytes"] == 6_144  # f32 512*3*4; the destination view is not read
    assert out["model_write_bytes"] == 3_072  # f16 512*3*2, once


def test_in_place_elementwise_reads_its_input_and_writes_once(tmp_path: Path) -> None:
    # ggml_add_inplace(a, b): the output is a view of a (storage 7)
    add = node("ADD", ("f32", [1024, 1, 1, 1], 7), [src("f32", [1024, 1, 1, 1], 7), src("f32", [1024, 1, 1, 1], 8)])
    out = by_invocation(model_bytes(meta_of(tmp_path, row(1, add))))[1]
    assert out["model_read_bytes"] == 8_192  # a and b, 4,096 each: a read-modify-write reads a
    assert out["model_write_bytes"] == 4_096  # a written once


def test_internal_tensor_escapes_when_a_later_op_reads_it(tmp_path: Path) -> None:
    # group: t = MUL(x, w) (storage 50), y = ADD(t, r) (storage 60); 4 KiB f32 each
    f = [1024, 1, 1, 1]
    mul = node("MUL", ("f32", f, 50), [src("f32", f, 1), src("f32", f, 2)])
    add = node("ADD", ("f32", f, 60), [src("f32", f, 50), src("f32", f, 3)])
    reader = node("SCALE", ("f32", f, 70), [src("f32", f, 50)])
    rewriter = node("SCALE", ("f32", f, 50), [src("f32", f, 4)])
    late_reader = node("SCALE", ("f32", f, 80), [src("f32", f, 50)])
    kept = by_invocation(model_bytes(meta_of(tmp_path, row(1, mul, add))))
    assert (kept[1]["model_read_bytes"], kept[1]["model_write_bytes"]) == (12_288, 4_096)  # x, w, r; y
    escaped = by_invocation(model_bytes(meta_of(tmp_path, row(1, mul, add), row(2, reader))))
    assert escaped[1]["model_write_bytes"] == 8_192  # y and t: invocation 2 reads t
    rewritten = by_invocation(model_bytes(meta_of(tmp_path, row(1, mul, add), row(2, rewriter), row(3, late_reader))))
    assert rewritten[1]["model_write_bytes"] == 4_096  # invocation 2 writes storage 50 anew before 3 reads it


def test_reads_dedup_on_tensor_id_not_storage_id(tmp_path: Path) -> None:
    # fused gate+up: both matmuls read one activation tensor (id 5) -> read once
    act = src("f32", [2048, 1, 1, 1], 5)
    gate = node("MUL_MAT", ("f32", [5632, 1, 1, 1], 61), [src("q8_0", [2048, 5632, 1, 1], 1), act])
    up = node("MUL_MAT", ("f32", [5632, 1, 1, 1], 62), [src("q8_0", [2048, 5632, 1, 1], 2), act])
    glu = node(
        "SWIGLU", ("f32", [5632, 1, 1, 1], 63), [src("f32", [5632, 1, 1, 1], 61), src("f32", [5632, 1, 1, 1], 62)]
    )
    # two halves of one buffer (storage 9), distinct tensors 91 and 92 -> both read
    halves = node(
        "ADD", ("f32", [1024, 1, 1, 1], 64), [src("f32", [1024, 1, 1, 1], 91, 9), src("f32", [1024, 1, 1, 1], 92, 9)]
    )
    out = by_invocation(model_bytes(meta_of(tmp_path, row(1, gate, up, glu), row(2, halves))))
    # 2 weights 2048*5632/32*34 = 12,255,232 each + activation 8,192 once = 24,518,656
    assert out[1]["model_read_bytes"] == 24_518_656
    assert out[1]["model_write_bytes"] == 22_528  # SWIGLU f32 5632*4; gate and up outputs stay on chip
    assert out[2]["model_read_bytes"] == 8_192  # 4,096 + 4,096


def test_without_tensor_ids_reads_dedup_on_storage_and_shape_and_say_so(tmp_path: Path) -> None:
    r = row(1, node("MUL", ("f32", [256, 1, 1, 1], 3), [src("f32", [256, 1, 1, 1], 1), src("f32", [256, 1, 1, 1], 1)]))
    del r["src_tensor_ids"]
    out = by_invocation(model_bytes(meta_of(tmp_path, r)))[1]
    assert out["model_read_bytes"] == 1_024  # x*x: one 256-float tensor read once
    assert "no tensor ids" in out["model_note"]


def _moe_row(invocation: int, tokens: int, **top: Any) -> dict[str, Any]:
    # up-projection of 128 Q4_K experts [2048 -> 768], top-8, `tokens` tokens
    return row(
        invocation,
        node(
            "MUL_MAT_ID",
            ("f32", [768, 8, tokens, 1], 500 + invocation),
            [src("q4_K", [2048, 768, 128, 1], 1), src("f32", [2048, 1, tokens, 1], 2),
             src("i32", [8, tokens, 1, 1], 3)],
            M=tokens, N=768, K=2048, n_experts=128, top_k=8,
        ),
        **top,
    )  # fmt: skip


def test_moe_expert_weights_scale_with_experts_used_and_bound_when_unknown(tmp_path: Path) -> None:
    rows = [
        _moe_row(1, 16, experts_used=40),
        _moe_row(2, 1, experts_used=0),  # routing not read back: the fork writes 0
        _moe_row(3, 16),  # no experts_used at all
        _moe_row(4, 2, experts_used=0, tokens_per_expert=[1] * 12 + [2] * 2 + [0] * 114),
    ]
    out = by_invocation(model_bytes(meta_of(tmp_path, *rows)))
    per_expert = 2048 * 768 // 256 * 144  # 221,184 B per expert
    # tokens=16: activations 2048*16*4 = 131,072, ids 8*16*4 = 512
    assert out[1]["model_read_bytes"] == 40 * per_expert + 131_072 + 512  # 8,847,360 + 131,584
    assert out[1]["model_note"] == ""
    # 1 token x top-8 can touch at most min(1*8, 128) = 8 experts: 8*221,184 + 8,192 + 32
    assert out[2]["model_read_bytes"] == 8 * per_expert + 8_192 + 32
    assert "experts_used unknown" in out[2]["model_note"] and "min(1*8, 128) = 8 of 128" in out[2]["model_note"]
    # 16 tokens x 8 = 128 routings: the bound is all 128 experts
    assert out[3]["model_read_bytes"] == 128 * per_expert + 131_072 + 512
    assert "= 128 of 128" in out[3]["model_note"]
    # tokens_per_expert names 14 distinct experts: 14*221,184 + 2048*2*4 + 8*2*4
    assert out[4]["model_read_bytes"] == 14 * per_expert + 16_384 + 64
    assert out[4]["model_note"] == ""
    for inv in (1, 2, 3):  # output f32 768*8*tokens*4
        assert out[inv]["model_write_bytes"] == 768 * 8 * (1 if inv == 2 else 16) * 4


def test_get_rows_reads_the_rows_it_gathers(tmp_path: Path) -> None:
    # token embedding lookup: 4 rows of a Q8_0 [2048, 32000] table
    get = node("GET_ROWS", ("f32", [2048, 4, 1, 1], 9), [src("q8_0", [2048, 32000, 1, 1], 1), src("i32", [4], 2)])
    out = by_invocation(model_bytes(meta_of(tmp_path, row(1, get))))[1]
    assert out["model_read_bytes"] == 4 * 2176 + 16  # row = 2048/32*34 = 2,176 B; 4 int32 ids
    assert out["model_write_bytes"] == 32_768  # f32 2048*4*4


def test_unknown_type_falls_back_to_recorded_bytes_with_a_note(tmp_path: Path) -> None:
    r = row(1, node("MUL_MAT", ("f32", [64, 1, 1, 1], 9), [src("q9_Z", [256, 64, 1, 1], 1), src("f32", [256], 2)],
                    src_bytes=[12345, 1024]))  # fmt: skip
    out = by_invocation(model_invocations(meta_of(tmp_path, r)))[1]
    assert out["model_read_bytes"] == 12_345 + 1_024
    assert "'q9_Z'" in out["model_note"] and "recorded size" in out["model_note"]
    del r["src_bytes"]
    out = by_invocation(model_invocations(meta_of(tmp_path, r)))[1]
    assert pd.isna(out["model_read_bytes"])
    assert out["model_write_bytes"] == 256
    assert "unknown" in out["model_note"]


# ---------------------------------------------------------------- FLOP formulas


def test_flop_formulas(tmp_path: Path) -> None:
    f = [4096, 1, 1, 1]
    one_half, one = 1056964608, 1065353216  # float bits of 0.5f and 1.0f
    rows = [
        # batched MUL_MAT: [64,256,8] x [64,32,8] -> 2*M*N*K*batch = 2*32*256*64*8
        row(1, node("MUL_MAT", ("f32", [256, 32, 8, 1], 9),
                    [src("f16", [64, 256, 8, 1], 1), src("f32", [64, 32, 8, 1], 2)])),
        # decode attention of the H200 capture: q [128,1,16], k/v [128,256,4]:
        # 2*n_q*n_kv*d_k*heads + 2*n_q*n_kv*d_v*heads = 2*1*256*128*16 * 2
        row(2, node("FLASH_ATTN_EXT", ("f32", [128, 16, 1, 1], 9),
                    [src("f32", [128, 1, 16, 1], 1), src("f16", [128, 256, 4, 1], 2), src("f16", [128, 256, 4, 1], 3),
                     src("f16", [256, 1, 1, 1], 4)])),
        # prefill GQA, d_k 64, d_v 64: 2*512*512*64*8 * 2
        row(3, node("FLASH_ATTN_EXT", ("f32", [64, 8, 512, 1], 9),
                    [src("f32", [64, 512, 8, 1], 1), src("f16", [64, 512, 4, 1], 2), src("f16", [64, 512, 4, 1], 3)])),
        row(4, node("ADD", ("f32", f, 9), [src("f32", f, 1), src("f32", f, 2)])),  # 4096
        row(5, node("SCALE", ("f32", f, 9), [src("f32", f, 1)], [one_half])),  # 4096
        row(6, node("SCALE", ("f32", f, 9), [src("f32", f, 1)], [one_half, one])),  # x*s+b: 8192
        row(7, node("SILU", ("f32", f, 9), [src("f32", f, 1)])),  # 4096
        row(8, node("SWIGLU", ("f32", [5632, 1, 1, 1], 9), [src("f32", [5632], 1), src("f32", [5632], 2)])),  # 2*5632
        row(9, node("RMS_NORM", ("f32", [2048, 4, 1, 1], 9), [src("f32", [2048, 4, 1, 1], 1)])),  # 3*8192
        row(10, node("NORM", ("f32", [2048, 4, 1, 1], 9), [src("f32", [2048, 4, 1, 1], 1)])),  # 5*8192
        row(11, node("SOFT_MAX", ("f32", [256, 32, 1, 1], 9), [src("f32", [256, 32, 1, 1], 1)])),  # 6*8192
        row(12, node("SOFT_MAX", ("f32", [256, 32, 1, 1], 9),
                     [src("f32", [256, 32, 1, 1], 1), src("f16", [256, 32, 1, 1], 2)])),  # (6+2)*8192
        row(13, node("ROPE", ("f32", [128, 16, 1, 1], 9), [src("f32", [128, 16, 1, 1], 1), src("i32", [1], 2)],
                     [0, 128])),  # 3*128*16
        row(14, node("ROPE", ("f32", [128, 16, 1, 1], 9), [src("f32", [128, 16, 1, 1], 1), src("i32", [1], 2)],
                     [0, 64])),  # partial rotary: 3*64*16
        row(15, node("GET_ROWS", ("f32", [2048, 4, 1, 1], 9), [src("q8_0", [2048, 100, 1, 1], 1), src("i32", [4], 2)])),
        row(16, node("SET_ROWS", ("f16", [512, 256, 1, 1], 30),
                     [src("f32", [512], 1), src("i64", [1], 2), src("f16", [512, 256, 1, 1], 30)])),
        row(17, node("CPY", ("f16", f, 9), [src("f32", f, 1), src("f16", f, 9)])),
        row(18, node("SUM_ROWS", ("f32", [1, 64, 1, 1], 9), [src("f32", [2, 64, 1, 1], 1)])),  # 2*64 adds
        row(19, node("SSM_SCAN", ("f32", f, 9), [src("f32", f, 1)])),
        row(20, node("RMS_NORM", ("f32", [2048, 1, 1, 1], 50), [src("f32", [2048], 1)]),
            node("SSM_CONV", ("f32", [2048, 1, 1, 1], 51), [src("f32", [2048], 50)])),
    ]  # fmt: skip
    out = by_invocation(model_flops(meta_of(tmp_path, *rows)))
    expected = {
        1: 8_388_608,
        2: 2_097_152,
        3: 536_870_912,
        4: 4_096,
        5: 4_096,
        6: 8_192,
        7: 4_096,
        8: 11_264,
        9: 24_576,
        10: 40_960,
        11: 49_152,
        12: 65_536,
        13: 6_144,
        14: 3_072,
        15: 0,
        16: 0,
        17: 0,
        18: 128,
    }
    assert {inv: out[inv]["flops"] for inv in expected} == expected
    assert all(out[inv]["flops_note"] == "" for inv in expected)
    assert math.isnan(out[19]["flops"]) and out[19]["flops_note"] == "no FLOP model for SSM_SCAN"
    assert math.isnan(out[20]["flops"]) and "SSM_CONV" in out[20]["flops_note"]


def test_mul_mat_id_flops_count_every_routing(tmp_path: Path) -> None:
    out = by_invocation(model_flops(meta_of(tmp_path, _moe_row(1, 16, experts_used=3))))
    assert out[1]["flops"] == 2 * 16 * 8 * 768 * 2048  # 2*M*top_k*N*K = 402,653,184, whatever experts_used


def test_fused_group_flops_are_the_sum_of_its_nodes(tmp_path: Path) -> None:
    out = by_invocation(model_flops(meta_of(tmp_path, FUSED)))
    assert out[9012]["flops"] == 3 * 2048 + 2048  # RMS_NORM + MUL


# ---------------------------------------------------------------- the recorded H200 captures

#: Q8_0 weight bytes (rows * cols / 32 * 34) of the 0.5 GB dense model: n_embd 2048, KV width 512
#: (4 KV heads of 128), n_ff 5632, vocabulary 32000 (output tied to token_embd).
W_Q = 2048 * 2048 // 32 * 34  # 4,456,448 (attn_q, attn_output)
W_KV = 2048 * 512 // 32 * 34  # 1,114,112 (attn_k, attn_v)
W_FF = 2048 * 5632 // 32 * 34  # 12,255,232 (ffn_gate, ffn_up, ffn_down)
W_OUT = 2048 * 32000 // 32 * 34  # 69,632,000 (output)
ACT = 2048 * 4  # one f32 token of n_embd
ACT_FF = 5632 * 4  # one f32 token of n_ff


def test_decode_matmuls_read_their_weights_and_activations_once() -> None:
    meta, _ = read_metadata(DECODE)
    out = model_invocations(meta).merge(meta.ops[["invocation", "op_list", "node_name"]], on="invocation")
    assert out["model_read_bytes"].notna().all() and out["flops"].notna().all()
    assert (out["model_note"] == "").all()
    expected = {  # (op_list, node) -> (read bytes, write bytes, FLOPs)
        ("MUL_MAT", "Qcur"): (W_Q + ACT, ACT, 2 * 2048 * 2048),
        ("MUL_MAT", "Kcur"): (W_KV + ACT, 512 * 4, 2 * 2048 * 512),
        ("MUL_MAT", "Vcur"): (W_KV + ACT, 512 * 4, 2 * 2048 * 512),
        ("MUL_MAT", "attn_out"): (W_Q + ACT, ACT, 2 * 2048 * 2048),
        ("MUL_MAT", "result_output"): (W_OUT + ACT, 32000 * 4, 2 * 2048 * 32000),
        # + the residual read by the fused ADD, + one ADD per output
        ("MUL_MAT+ADD", "attn_out"): (W_Q + ACT + ACT, ACT, 2 * 2048 * 2048 + 2048),
        ("MUL_MAT+ADD", "ffn_out"): (W_FF + ACT_FF + ACT, ACT, 2 * 5632 * 2048 + 2048),
        # gate and up weights, the normed activation once; writes the SWIGLU output only
        ("MUL_MAT+MUL_MAT+SWIGLU", "ffn_gate"): (2 * W_FF + ACT, ACT_FF, 2 * (2 * 2048 * 5632) + 2 * 5632),
    }
    seen = set()
    for r in out[out["op_list"].str.contains("MUL_MAT")].itertuples():
        key = (r.op_list, r.node_name.split("-")[0])
        assert (r.model_read_bytes, r.model_write_bytes, r.flops) == expected[key], (r.invocation, key)
        seen.add(key)
    assert seen == set(expected)
    assert (out["op_list"].str.contains("MUL_MAT")).sum() == 4 * (10 * 6 + 1)  # 4 tokens x (6 per layer + output)


def test_decode_kv_store_and_attention() -> None:
    meta, _ = read_metadata(DECODE)
    out = model_invocations(meta).merge(meta.ops[["invocation", "op_list"]], on="invocation")
    v_store = out[out["op_list"] == "SET_ROWS"]
    assert len(v_store) == 40
    assert (v_store["model_read_bytes"] == 512 * 4 + 8).all()  # Vcur f32 + one i64 index
    assert (v_store["model_write_bytes"] == 512 * 2).all()  # one f16 row of the cache
    k_store = out[out["op_list"] == "ROPE+VIEW+SET_ROWS"]
    assert (k_store["model_read_bytes"] == 512 * 4 + 4 + 8).all()  # Kcur, position, index
    assert (k_store["model_write_bytes"] == 512 * 2).all()
    assert (k_store["flops"] == 3 * 512).all()  # rope of 4 heads of 128
    fa = out[out["op_list"] == "FLASH_ATTN_EXT"]
    # q f32 128*16*4 = 8,192, K and V views f16 128*256*4*2 = 262,144 each, mask f16 256*2 = 512
    assert (fa["model_read_bytes"] == 8_192 + 2 * 262_144 + 512).all()
    assert (fa["flops"] == 2 * 256 * 16 * (128 + 128)).all()


def test_moe_prefill_routing_scaled_or_flagged() -> None:
    meta, _ = read_metadata(MOE_PREFILL)
    ops = meta.ops[["invocation", "op_list", "node_name", "experts_used"]]
    out = model_invocations(meta).merge(ops, on="invocation")
    moe = out[out["op_list"].str.startswith("MUL_MAT_ID")]
    expert = 512 * 768 // 32 * 34  # 417,792 B per Q8_0 expert of [512 -> 768]
    assert len(moe) == 11 and moe["experts_used"].notna().all() and (moe["model_note"] == "").all()
    # layers 0-2, 64 tokens: the experts the routing used, the f32 tokens once, the i32 ids [2, 64]
    for name, used in (("ffn_moe_gate-0", 8), ("ffn_moe_gate-1", 5), ("ffn_moe_gate-2", 3)):
        row = moe[moe["node_name"] == name].iloc[0]
        assert row["experts_used"] == used
        assert row["model_read_bytes"] == used * expert + 512 * 64 * 4 + 2 * 64 * 4
    # last layer, 1 token: gate+up group reads 2 of 8 experts of each weight, the token once, 2 ids
    group = moe[moe["op_list"] == "MUL_MAT_ID+MUL_MAT_ID+SWIGLU"].iloc[0]
    assert group["experts_used"] == 2
    assert group["model_read_bytes"] == 2 * 2 * expert + 512 * 4 + 2 * 4
    assert group["model_write_bytes"] == 768 * 2 * 4  # SWIGLU output [768, 2, 1]
    # the top-k group's expert ids are read by the MUL_MAT_IDs after it: stored with the weights
    topk = out[(out["op_list"].str.startswith("SOFT_MAX+")) & (out["node_name"] == "ffn_moe_probs-0")].iloc[0]
    assert topk["model_read_bytes"] == 8 * 64 * 4  # router logits
    assert topk["model_write_bytes"] == 8 * 64 * 4 + 2 * 64 * 4  # argsort i32 [8,64] + weights f32 [2,64]


def test_moe_routing_not_read_back_takes_the_bound_and_says_so() -> None:
    meta, _ = read_metadata(MOE_PREFILL)
    mm_id = meta.ops["op_list"].str.startswith("MUL_MAT_ID")
    meta.ops["experts_used"] = meta.ops["experts_used"].astype("Int64").mask(mm_id)  # as an older hook left it
    meta.ops["tokens_per_expert"] = meta.ops["tokens_per_expert"].mask(mm_id)
    out = model_invocations(meta).merge(meta.ops[["invocation", "node_name", "op_list"]], on="invocation")
    expert = 512 * 768 // 32 * 34
    unread = out[out["op_list"].str.startswith("MUL_MAT_ID")]
    assert unread["model_note"].str.contains("experts_used unknown").all()
    # 64 tokens x top-2 = 128 routings >= 8 experts: bound = all 8
    gate = unread[unread["node_name"] == "ffn_moe_gate-1"].iloc[0]
    assert gate["model_read_bytes"] == 8 * expert + 512 * 64 * 4 + 2 * 64 * 4
    # 1 token x top-2 = 2 routings: bound = 2 experts of each of the group's two weights
    group = unread[unread["op_list"] == "MUL_MAT_ID+MUL_MAT_ID+SWIGLU"].iloc[0]
    assert group["model_read_bytes"] == 2 * 2 * expert + 512 * 4 + 2 * 4


# ---------------------------------------------------------------- frame shape


def test_columns_and_dtypes(tmp_path: Path) -> None:
    out = model_invocations(meta_of(tmp_path, DENSE, FUSED))
    assert tuple(out.columns) == MODEL_COLUMNS
    assert str(out["invocation"].dtype) == "int64"
    assert str(out["model_read_bytes"].dtype) == "Int64" and str(out["model_write_bytes"].dtype) == "Int64"
    assert str(out["flops"].dtype) == "float64"
    assert tuple(model_bytes(meta_of(tmp_path, DENSE)).columns) == (
        "invocation", "model_read_bytes", "model_write_bytes", "model_note"
    )  # fmt: skip
    assert tuple(model_flops(meta_of(tmp_path, DENSE)).columns) == ("invocation", "flops", "flops_note")


def test_no_rows_gives_empty_frames(tmp_path: Path) -> None:
    out = model_invocations(meta_of(tmp_path))
    assert len(out) == 0 and tuple(out.columns) == MODEL_COLUMNS
