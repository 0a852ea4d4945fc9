"""tools/models/make_tiny_gguf.py: real-depth presets with llama-quantize's Q4_K_M type mix.

Everything expected here is written out independently of the generator: the Q4_K_M rule from
llama.cpp ``src/llama-quant.cpp`` (``llama_tensor_get_type_impl``, ``use_more_bits``,
``tensor_type_fallback``) as literal layer sets and a small decision table, the K-quant block
layouts from ``ggml/src/ggml-common.h`` via gguf-py's own ``GGML_QUANT_SIZES`` and dequantizers,
and the parameter counts as closed formulas over the model shapes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from .conftest import require_or_skip

gguf = pytest.importorskip("gguf")
np = pytest.importorskip("numpy")

from .test_tiny_models import mtg  # the script, loaded once  # noqa: E402

QT = gguf.GGMLQuantizationType
GGUF_ALIGNMENT = 32  # general.alignment default; the writer pads every tensor to it

DENSE = "dense-qwen3-0.6b"
MOE = "moe-qwen3-30b-a3b-scaled"

# use_more_bits(i, n) = i < n/8 || i >= 7n/8 || (i - n/8) % 3 == 2, enumerated by hand.
MORE_BITS_LAYERS = {
    28: {0, 1, 2, 5, 8, 11, 14, 17, 20, 23, 24, 25, 26, 27},  # n/8 = 3, 7n/8 = 24
    24: {0, 1, 2, 5, 8, 11, 14, 17, 20, 21, 22, 23},  # n/8 = 3, 7n/8 = 21
    8: {0, 3, 6, 7},  # n/8 = 1, 7n/8 = 7
    4: {2, 3},  # n/8 = 0, 7n/8 = 3
}


def preset(name: str, *extra: str) -> object:
    args = mtg.build_parser().parse_args(["--preset", name, "--out", "unused.gguf", *extra])
    return mtg.spec_from_args(args)


def expected_q4_k_m(name: str, n_layer: int, tied: bool, n_expert: int = 0) -> QT:
    """Q4_K_M type of a tensor whose rows are all multiples of 256 (no fallback needed)."""
    if name.endswith("_norm.weight") or name.endswith("ffn_gate_inp.weight"):
        return QT.F32  # 1-D norms and the router are never quantized
    if name == "output.weight" or (tied and name == "token_embd.weight"):
        return QT.Q6_K
    if name == "token_embd.weight":
        return QT.Q4_K
    layer = int(name.split(".")[1])
    if n_expert == 8 and (name.endswith("attn_v.weight") or name.endswith("attn_k.weight")):
        return QT.Q8_0
    if n_expert == 8 and name.endswith("attn_output.weight"):
        return QT.Q5_K
    if name.endswith("attn_v.weight") or ".ffn_down" in name:
        return QT.Q6_K if layer in MORE_BITS_LAYERS[n_layer] else QT.Q4_K
    return QT.Q4_K


def dense_param_count(v: int, e: int, n_layer: int, n_head: int, n_head_kv: int, hd: int, ff: int) -> int:
    """Qwen3 dense with tied embeddings: token_embd, output_norm, then per layer two RMS norms,
    q/k norms (head_dim each), q/k/v/o projections and the gated FFN."""
    per_layer = 2 * e + 2 * hd + 2 * e * n_head * hd + 2 * e * n_head_kv * hd + 3 * e * ff
    return v * e + e + n_layer * per_layer


def moe_param_count(
    v: int, e: int, n_layer: int, n_head: int, n_head_kv: int, hd: int, n_expert: int, ff_exp: int
) -> int:
    """Qwen3-MoE with untied output: token_embd + output + output_norm, per layer attention as in
    the dense model, the router (e x n_expert) and n_expert gated FFNs of width ff_exp."""
    per_layer = 2 * e + 2 * hd + 2 * e * n_head * hd + 2 * e * n_head_kv * hd + e * n_expert + 3 * e * ff_exp * n_expert
    return 2 * v * e + e + n_layer * per_layer


def read(path: Path) -> tuple[dict[str, object], list[object]]:
    reader = gguf.GGUFReader(path)
    return {k: f.contents() for k, f in reader.fields.items()}, list(reader.tensors)


def n_elements(t: object) -> int:
    return int(np.prod([int(d) for d in t.shape]))


def fp16_column(t: object, offset: int) -> np.ndarray:
    """The fp16 at byte ``offset`` of every block of a quantized tensor read by GGUFReader."""
    type_size = gguf.GGML_QUANT_SIZES[t.tensor_type][1]
    raw = np.asarray(t.data).reshape(-1, type_size)
    return np.ascontiguousarray(raw[:, offset : offset + 2]).view(np.float16).ravel()


def check_file(path: Path, expected_type: dict[str, QT]) -> dict[str, object]:
    """Types per name, byte sizes, contiguous layout, finite positive K-quant scales; returns the metadata."""
    meta, tensors = read(path)
    assert [t.name for t in tensors] == list(expected_type)
    wrong = {t.name: t.tensor_type.name for t in tensors if t.tensor_type != expected_type[t.name]}
    assert not wrong
    end = None
    for t in tensors:
        block, type_size = gguf.GGML_QUANT_SIZES[t.tensor_type]
        n = n_elements(t)
        assert n % block == 0 and int(t.shape[0]) % block == 0, t.name  # whole blocks per row
        assert int(t.n_bytes) == n // block * type_size == np.asarray(t.data).nbytes, t.name
        if end is not None:  # tensors follow each other, each padded to the alignment
            assert int(t.data_offset) == end + (-end % GGUF_ALIGNMENT), t.name
        end = int(t.data_offset) + int(t.n_bytes)
        if t.tensor_type in (QT.Q4_K, QT.Q5_K):
            for off in (0, 2):  # d, dmin
                col = fp16_column(t, off)
                assert np.all(np.isfinite(col)) and np.all(col > 0), t.name
                assert np.all(col >= np.finfo(np.float16).tiny), t.name  # normal, not subnormal
        elif t.tensor_type == QT.Q6_K:
            col = fp16_column(t, 208)  # d follows ql[128], qh[64], scales[16]
            assert np.all(np.isfinite(col)) and np.all(col >= np.finfo(np.float16).tiny), t.name
    assert end is not None and path.stat().st_size == end + (-end % GGUF_ALIGNMENT)
    assert meta["general.file_type"] == int(gguf.LlamaFileType.MOSTLY_Q4_K_M)
    assert meta["general.quantization_version"] == gguf.GGML_QUANT_VERSION
    return meta


# --- the rule, at full depth (plans only: no file is written) ---------------------------------


def test_use_more_bits_matches_the_hand_enumerated_layers() -> None:
    for n, layers in MORE_BITS_LAYERS.items():
        assert {i for i in range(n) if mtg.use_more_bits(i, n)} == layers


@pytest.mark.parametrize("name", [DENSE, MOE])
def test_full_preset_plan_follows_q4_k_m_rule(name: str) -> None:
    s = preset(name)
    plan = mtg.tensor_plan(s)
    n_expert = s.n_expert if s.is_moe else 0
    for t in plan:
        assert t.ggml_type == expected_q4_k_m(t.name, s.n_layer, s.tie_embeddings, n_expert), t.name
    q6 = sorted(int(t.name.split(".")[1]) for t in plan if t.name.endswith("attn_v.weight") and t.ggml_type == QT.Q6_K)
    assert set(q6) == MORE_BITS_LAYERS[s.n_layer]


def test_dense_preset_shapes_and_params() -> None:
    s = preset(DENSE)
    # huggingface.co/Qwen/Qwen3-0.6B config.json
    assert (s.arch, s.n_embd, s.n_layer, s.n_head, s.n_head_kv, s.n_embd_head, s.n_ff, s.n_vocab) == (
        "qwen3",
        1024,
        28,
        16,
        8,
        128,
        3072,
        151936,
    )
    assert s.tie_embeddings and s.weight_type == "q4_k_m" and s.rope_freq_base == 1e6 and s.n_ctx == 40960
    n = dense_param_count(151936, 1024, 28, 16, 8, 128, 3072)
    assert mtg.parameter_count(s) == n == 596_049_920
    assert 0.5e9 <= n <= 1.5e9


def test_moe_preset_shapes_and_params() -> None:
    s = preset(MOE)
    # Qwen3-30B-A3B per-layer shapes and routing; 24 of 48 layers, 32 of 128 experts.
    assert (s.arch, s.n_embd, s.n_head, s.n_head_kv, s.n_embd_head, s.n_ff_exp, s.n_expert_used, s.n_vocab) == (
        "qwen3moe",
        2048,
        32,
        4,
        128,
        768,
        8,
        151936,
    )
    assert s.n_layer >= 24 and s.n_expert >= 32 and s.n_expert_used >= 4 and not s.tie_embeddings
    n = moe_param_count(151936, 2048, s.n_layer, 32, 4, 128, s.n_expert, 768)
    assert mtg.parameter_count(s) == n
    file_bytes = sum(t.n_bytes for t in mtg.tensor_plan(s))
    assert 2.5e9 < file_bytes < 3.0e9


# --- files written and read back ---------------------------------------------------------------


def test_dense_preset_full_size_roundtrip(tmp_path: Path) -> None:
    s = preset(DENSE)
    out = tmp_path / "dense.gguf"
    try:
        mtg.write_model(s, out)
        expected = {t.name: expected_q4_k_m(t.name, 28, True) for t in mtg.tensor_plan(s)}
        meta = check_file(out, expected)
        assert meta["general.architecture"] == "qwen3"
        assert meta["qwen3.block_count"] == 28 and meta["qwen3.attention.key_length"] == 128
        _, tensors = read(out)
        assert sum(n_elements(t) for t in tensors) == dense_param_count(151936, 1024, 28, 16, 8, 128, 3072)
        by_name = {t.name: t for t in tensors}
        for name in ("blk.3.attn_q.weight", "blk.5.attn_v.weight", "blk.27.ffn_down.weight", "token_embd.weight"):
            t = by_name[name]
            values = gguf.quants.dequantize(np.asarray(t.data)[:32], t.tensor_type)
            assert np.all(np.isfinite(values)), name
            assert abs(float(values.mean())) < 1e-3 and 0.018 < float(values.std()) < 0.022, name
    finally:
        out.unlink(missing_ok=True)


def test_moe_preset_reduced_roundtrip(tmp_path: Path) -> None:
    # The full preset is ~2.9 GB: keep its per-layer shapes, experts and routing, cut depth and vocab.
    s = preset(MOE, "--n-layer", "8", "--n-vocab", "8192")
    out = tmp_path / "moe.gguf"
    try:
        mtg.write_model(s, out)
        expected = {t.name: expected_q4_k_m(t.name, 8, False, 32) for t in mtg.tensor_plan(s)}
        meta = check_file(out, expected)
        assert (meta["qwen3moe.expert_count"], meta["qwen3moe.expert_used_count"]) == (32, 8)
        assert meta["qwen3moe.expert_feed_forward_length"] == 768
        _, tensors = read(out)
        assert sum(n_elements(t) for t in tensors) == moe_param_count(8192, 2048, 8, 32, 4, 128, 32, 768)
        by_name = {t.name: t for t in tensors}
        router = by_name["blk.0.ffn_gate_inp.weight"]
        assert router.tensor_type == QT.F32 and tuple(int(d) for d in router.shape) == (2048, 32)
        assert by_name["blk.6.ffn_down_exps.weight"].tensor_type == QT.Q6_K
        assert by_name["blk.5.ffn_down_exps.weight"].tensor_type == QT.Q4_K
        assert tuple(int(d) for d in by_name["blk.6.ffn_down_exps.weight"].shape) == (768, 2048, 32)
        t = by_name["blk.7.ffn_gate_exps.weight"]
        values = gguf.quants.dequantize(np.asarray(t.data).reshape(-1, np.asarray(t.data).shape[-1])[:64], QT.Q4_K)
        assert abs(float(values.mean())) < 1e-3 and 0.018 < float(values.std()) < 0.022
    finally:
        out.unlink(missing_ok=True)


# --- K-quant packing -------------------------------------------------------------------------------


def get_scale_min_k4(j: int, q: np.ndarray) -> tuple[int, int]:
    """ggml-quants.c get_scale_min_k4, transcribed."""
    if j < 4:
        return int(q[j]) & 63, int(q[j + 4]) & 63
    return (int(q[j + 4]) & 0xF) | ((int(q[j - 4]) >> 6) << 4), (int(q[j + 4]) >> 4) | ((int(q[j]) >> 6) << 4)


def test_pack_scale_min_k4_inverts_get_scale_min_k4() -> None:
    rng = np.random.default_rng(1)
    sc = rng.integers(0, 64, size=(50, 8))
    m = rng.integers(0, 64, size=(50, 8))
    packed = mtg.pack_scale_min_k4(sc, m)
    assert packed.shape == (50, 12) and packed.dtype == np.uint8
    for b in range(50):
        assert [get_scale_min_k4(j, packed[b]) for j in range(8)] == list(
            zip(sc[b].tolist(), m[b].tolist(), strict=True)
        )


@pytest.mark.parametrize(("qtype", "type_size"), [(QT.Q4_K, 144), (QT.Q5_K, 176), (QT.Q6_K, 210)])
def test_pack_k_quant_blocks_decode_to_small_weights(qtype: QT, type_size: int) -> None:
    assert gguf.GGML_QUANT_SIZES[qtype] == (256, type_size)
    blocks = mtg.pack_k_quant(np.random.default_rng(0), qtype, 256 * 400, 0.02)
    assert blocks.shape == (400, type_size) and blocks.dtype == np.uint8
    d_offsets = (208,) if qtype == QT.Q6_K else (0, 2)
    for off in d_offsets:
        d = np.ascontiguousarray(blocks[:, off : off + 2]).view(np.float16).ravel()
        assert np.all(np.isfinite(d)) and np.all(d >= np.finfo(np.float16).tiny) and np.all(d < 2e-3)
    if qtype != QT.Q6_K:  # every sub-block centred: dmin * m == d * sc * (2^bits - 1) / 2
        for b in range(5):
            sm = [get_scale_min_k4(j, blocks[b, 4:16]) for j in range(8)]
            assert all(s == m and s > 0 for s, m in sm)
    values = gguf.quants.dequantize(blocks, qtype).ravel()
    assert values.size == 256 * 400 and np.all(np.isfinite(values))
    assert abs(float(values.mean())) < 5e-4
    assert 0.019 < float(values.std()) < 0.021
    assert float(np.abs(values).max()) < 0.1


def test_pack_k_quant_rejects_partial_blocks() -> None:
    with pytest.raises(ValueError, match="multiple of 256"):
        mtg.pack_k_quant(np.random.default_rng(0), QT.Q4_K, 1000, 0.02)


# --- fallbacks and other mixes (small models) ----------------------------------------------------


def test_fallback_for_rows_that_are_not_multiples_of_256(tmp_path: Path) -> None:
    # Qwen2.5-0.5B widths (n_embd 896 = 3.5 x 256, n_ff 4864 = 19 x 256): llama-quantize's
    # tensor_type_fallback stores Q4_K as Q5_0 and Q6_K as Q8_0; the tied token_embd takes the
    # output rule (rows % 256 != 0 -> Q8_0); a 200-wide FFN (not a multiple of 32) goes to F16.
    fields = {
        "arch": "llama",
        "n_embd": 896,
        "n_layer": 4,
        "n_head": 14,
        "n_head_kv": 2,
        "n_ff": 4864,
        "n_vocab": 320,
        "tie_embeddings": True,
        "weight_type": "q4_k_m",
    }
    spec = mtg.ModelSpec(**fields)
    plan = {t.name: t.ggml_type for t in mtg.tensor_plan(spec)}
    assert plan["token_embd.weight"] == QT.Q8_0
    for i in range(4):
        for kind in ("attn_q", "attn_k", "attn_output", "ffn_gate", "ffn_up"):
            assert plan[f"blk.{i}.{kind}.weight"] == QT.Q5_0
        more = i in MORE_BITS_LAYERS[4]
        assert plan[f"blk.{i}.attn_v.weight"] == (QT.Q8_0 if more else QT.Q5_0)
        assert plan[f"blk.{i}.ffn_down.weight"] == (QT.Q6_K if more else QT.Q4_K)  # rows of 4864
    out = tmp_path / "fallback.gguf"
    mtg.write_model(spec, out)
    _, tensors = read(out)
    assert {t.name: t.tensor_type for t in tensors} == plan
    t = next(t for t in tensors if t.name == "blk.0.attn_q.weight")
    values = gguf.quants.dequantize(np.asarray(t.data), QT.Q5_0)
    assert 0.018 < float(values.std()) < 0.022

    odd = mtg.ModelSpec(**{**fields, "n_ff": 200})
    odd_plan = {t.name: t.ggml_type for t in mtg.tensor_plan(odd)}
    assert odd_plan["blk.0.ffn_down.weight"] == QT.F16  # 200 % 32 != 0
    assert odd_plan["blk.0.ffn_gate.weight"] == QT.Q5_0  # rows of 896


def test_eight_expert_model_gets_the_8_expert_rules(tmp_path: Path) -> None:
    s = preset("moe-tiny", "--type", "q4_k_m", "--n-vocab", "512")
    plan = mtg.tensor_plan(s)
    for t in plan:
        assert t.ggml_type == expected_q4_k_m(t.name, 4, True, 8), t.name
    out = tmp_path / "moe8.gguf"
    mtg.write_model(s, out)
    _, tensors = read(out)
    t = next(t for t in tensors if t.name == "blk.0.attn_output.weight")
    assert t.tensor_type == QT.Q5_K
    values = gguf.quants.dequantize(np.asarray(t.data), QT.Q5_K)
    assert np.all(np.isfinite(values)) and 0.018 < float(values.std()) < 0.022


def test_q6_k_mix_and_determinism(tmp_path: Path) -> None:
    fields = {"arch": "qwen3", "n_embd": 256, "n_layer": 2, "n_head": 4, "n_head_kv": 2, "head_dim": 64}
    spec = mtg.ModelSpec(**fields, n_ff=512, n_vocab=320, weight_type="q6_k", seed=5)
    types = {t.name: t.ggml_type for t in mtg.tensor_plan(spec)}
    assert {t for n, t in types.items() if not n.endswith("norm.weight")} == {QT.Q6_K}
    a, b = tmp_path / "a.gguf", tmp_path / "b.gguf"
    mtg.write_model(spec, a)
    mtg.write_model(spec, b)
    assert a.read_bytes() == b.read_bytes()
    meta, _ = read(a)
    assert meta["general.file_type"] == int(gguf.LlamaFileType.MOSTLY_Q6_K)


def test_cli_reports_type_mix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cli.gguf"
    rc = mtg.main(["--preset", DENSE, "--n-layer", "2", "--n-vocab", "512", "--out", str(out)])
    assert rc == 0
    line = capsys.readouterr().out
    # 2 layers: use_more_bits(i, 2) holds for i = 1 only (7*2/8 = 1), so Q6_K: token_embd (tied),
    # blk.1.attn_v, blk.1.ffn_down; Q4_K: the other 12 matrices; F32: 4 norms per layer + output_norm.
    assert line.rstrip().endswith("tensor types: q4_k 12, f32 9, q6_k 3")


# --- optional: ggml's own C validator and dequantizers ---------------------------------------------

HARNESS_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include "ggml.h"
#include "ggml-quants.h"
void ggml_abort(const char * file, int line, const char * fmt, ...) {
    fprintf(stderr, "abort %s:%d\n", file, line);
    exit(3);
}
size_t ggml_type_size(enum ggml_type t) { return t == GGML_TYPE_Q4_K ? 144 : t == GGML_TYPE_Q5_K ? 176 : 210; }
size_t ggml_row_size(enum ggml_type t, int64_t ne) { return ggml_type_size(t) * (size_t) ne / 256; }
const char * ggml_type_name(enum ggml_type t) { (void) t; return "k-quant"; }
int main(int argc, char ** argv) {
    enum ggml_type type = (enum ggml_type) atoi(argv[1]);
    FILE * f = fopen(argv[2], "rb"); fseek(f, 0, SEEK_END); long n = ftell(f); fseek(f, 0, SEEK_SET);
    void * buf = malloc(n); if (fread(buf, 1, n, f) != (size_t) n) return 4; fclose(f);
    if (!ggml_validate_row_data(type, buf, n)) { puts("invalid"); return 1; }
    long nw = n / ggml_type_size(type) * 256;
    float * y = malloc(nw * sizeof(float));
    if (type == GGML_TYPE_Q4_K) dequantize_row_q4_K(buf, y, nw);
    else if (type == GGML_TYPE_Q5_K) dequantize_row_q5_K(buf, y, nw);
    else dequantize_row_q6_K(buf, y, nw);
    FILE * o = fopen(argv[3], "wb"); fwrite(y, sizeof(float), nw, o); fclose(o);
    puts("valid");
    return 0;
}
"""


def test_blocks_pass_ggml_c_validation_and_dequantize_alike(tmp_path: Path, sdist: Path) -> None:
    """Compile ggml-quants.c alone (seconds, no llama.cpp build) and decode our blocks with it.

    The ggml sources are the pinned llama.cpp's (the llama-cpp-python sdist's vendor/llama.cpp:
    ``sdist`` in conftest), or the tree ROCROOF_LLAMA_CPP_SRC names.
    """
    import tarfile

    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        require_or_skip("no C compiler (cc, gcc) to compile ggml-quants.c")
    src = os.environ.get("ROCROOF_LLAMA_CPP_SRC")
    if src:
        root = Path(src)
    else:
        root = tmp_path / "llama.cpp"
        with tarfile.open(sdist) as tar:
            for member in tar.getmembers():
                _, _, rel = member.name.partition("/vendor/llama.cpp/")
                # ggml's headers, its top-level sources and the CPU backend's headers (ggml-quants.c includes one)
                wanted = rel.startswith("ggml/include/") or (
                    rel.startswith("ggml/src/")
                    and (rel.count("/") == 2 or (rel.startswith("ggml/src/ggml-cpu/") and rel.endswith(".h")))
                )
                if member.isfile() and wanted:
                    (root / rel).parent.mkdir(parents=True, exist_ok=True)
                    data = tar.extractfile(member)
                    assert data is not None
                    (root / rel).write_bytes(data.read())
    (tmp_path / "h.c").write_text(HARNESS_C)
    includes = [f"-I{root / 'ggml' / 'include'}", f"-I{root / 'ggml' / 'src'}"]
    cmd = [cc, "-O1", "-std=gnu11", str(tmp_path / "h.c"), str(root / "ggml/src/ggml-quants.c"), *includes]
    subprocess.run([*cmd, "-lm", "-o", str(tmp_path / "h")], check=True, capture_output=True, timeout=120)
    for qtype in (QT.Q4_K, QT.Q5_K, QT.Q6_K):
        blocks = mtg.pack_k_quant(np.random.default_rng(int(qtype)), qtype, 256 * 256, 0.02)
        blocks.tofile(tmp_path / "in.bin")
        run = subprocess.run(
            [str(tmp_path / "h"), str(int(qtype)), str(tmp_path / "in.bin"), str(tmp_path / "out.bin")],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert run.returncode == 0 and run.stdout.strip() == "valid", (qtype.name, run.stdout, run.stderr)
        ggml_values = np.fromfile(tmp_path / "out.bin", dtype=np.float32)
        assert np.array_equal(ggml_values, gguf.quants.dequantize(blocks, qtype).ravel()), qtype.name
        assert 0.019 < float(ggml_values.std()) < 0.021


@pytest.mark.parametrize("std", [1e-7, 1e6])
def test_std_that_fp16_block_scales_cannot_hold_is_rejected_up_front(tmp_path: Path, std: float) -> None:
    out = tmp_path / "bad.gguf"
    with pytest.raises(mtg.SpecError, match="block scales outside fp16") as info:
        mtg.write_model(mtg.ModelSpec(n_embd=256, n_ff=512, weight_type="q4_k_m", std=std), out)
    assert "\n" not in str(info.value)
    assert not out.exists()
