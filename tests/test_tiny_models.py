"""tools/models/make_tiny_gguf.py: tiny random-weight GGUF models that llama.cpp loads offline.

The expected keys and tensors below are written out independently of the generator (from
llama.cpp's llama / qwen3 / qwen3moe loaders), so a wrong table in the script cannot confirm itself.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

gguf = pytest.importorskip("gguf")
np = pytest.importorskip("numpy")

SCRIPT = Path(__file__).resolve().parents[1] / "tools" / "models" / "make_tiny_gguf.py"
QT = gguf.GGMLQuantizationType


def _load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_tiny_gguf", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(module)
    return module


mtg = _load_script()

# Small enough for CI (well under 1 MB per file), multiples of 32 everywhere.
SMALL = {"n_embd": 128, "n_layer": 2, "n_head": 4, "n_head_kv": 2, "n_vocab": 320, "n_ctx": 256}
SMALL_DENSE = {**SMALL, "arch": "llama", "n_ff": 192}
SMALL_QWEN3 = {**SMALL_DENSE, "arch": "qwen3", "head_dim": 64}
SMALL_MOE = {
    **SMALL,
    "arch": "qwen3moe",
    "n_ff": None,
    "head_dim": 64,
    "n_expert": 4,
    "n_expert_used": 2,
    "n_ff_exp": 96,
}

COMMON_KEYS = [
    "general.architecture",
    "general.file_type",
    "{a}.context_length",
    "{a}.embedding_length",
    "{a}.block_count",
    "{a}.feed_forward_length",
    "{a}.attention.head_count",
    "{a}.attention.head_count_kv",
    "{a}.attention.layer_norm_rms_epsilon",
    "{a}.attention.key_length",
    "{a}.attention.value_length",
    "{a}.rope.dimension_count",
    "{a}.rope.freq_base",
    "tokenizer.ggml.model",
]
MOE_KEYS = ["{a}.expert_count", "{a}.expert_used_count", "{a}.expert_feed_forward_length"]
DENSE_LAYER = ["attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down"]
MOE_LAYER = [
    "attn_norm",
    "attn_q",
    "attn_k",
    "attn_v",
    "attn_output",
    "attn_q_norm",
    "attn_k_norm",
    "ffn_norm",
    "ffn_gate_inp",
    "ffn_gate_exps",
    "ffn_up_exps",
    "ffn_down_exps",
]


def make(tmp_path: Path, name: str = "m.gguf", **fields: object) -> tuple[object, Path]:
    spec = mtg.ModelSpec(**fields)
    out = tmp_path / name
    size = mtg.write_model(spec, out)
    assert size == out.stat().st_size
    return spec, out


def read(path: Path) -> tuple[dict[str, object], dict[str, object]]:
    reader = gguf.GGUFReader(path)
    fields = {k: f.contents() for k, f in reader.fields.items()}
    tensors = {t.name: t for t in reader.tensors}
    return fields, tensors


def ne(tensor: object) -> tuple[int, ...]:
    return tuple(int(d) for d in tensor.shape)  # GGUFReader.shape is ggml order (ne0 first)


def expected_shapes(arch: str, f: dict[str, int], tied: bool) -> dict[str, tuple[int, ...]]:
    """ggml ne of every tensor llama.cpp creates for the architecture (llama-model.cpp)."""
    e, v = f["n_embd"], f["n_vocab"]
    hd = f.get("head_dim") or e // f["n_head"]
    q, kv = f["n_head"] * hd, f["n_head_kv"] * hd
    shapes: dict[str, tuple[int, ...]] = {"token_embd.weight": (e, v), "output_norm.weight": (e,)}
    if not tied:
        shapes["output.weight"] = (e, v)
    for i in range(f["n_layer"]):
        b = f"blk.{i}."
        shapes |= {
            b + "attn_norm.weight": (e,),
            b + "attn_q.weight": (e, q),
            b + "attn_k.weight": (e, kv),
            b + "attn_v.weight": (e, kv),
            b + "attn_output.weight": (q, e),
            b + "ffn_norm.weight": (e,),
        }
        if arch in ("qwen3", "qwen3moe"):
            shapes |= {b + "attn_q_norm.weight": (hd,), b + "attn_k_norm.weight": (hd,)}
        if arch == "qwen3moe":
            x, fe = f["n_expert"], f["n_ff_exp"]
            shapes |= {
                b + "ffn_gate_inp.weight": (e, x),
                b + "ffn_gate_exps.weight": (e, fe, x),
                b + "ffn_up_exps.weight": (e, fe, x),
                b + "ffn_down_exps.weight": (fe, e, x),
            }
        else:
            ff = f["n_ff"]
            shapes |= {b + "ffn_gate.weight": (e, ff), b + "ffn_up.weight": (e, ff), b + "ffn_down.weight": (ff, e)}
    return shapes


@pytest.mark.parametrize("wtype", ["f32", "f16", "q8_0", "q4_0"])
@pytest.mark.parametrize("fields", [SMALL_DENSE, SMALL_QWEN3, SMALL_MOE], ids=["llama", "qwen3", "qwen3moe"])
def test_roundtrip_keys_tensors_shapes_types(tmp_path: Path, fields: dict[str, object], wtype: str) -> None:
    spec, out = make(tmp_path, weight_type=wtype, **fields)
    meta, tensors = read(out)
    arch = fields["arch"]
    assert meta["general.architecture"] == arch
    keys = COMMON_KEYS + (MOE_KEYS if arch == "qwen3moe" else [])
    missing = [k.format(a=arch) for k in keys if k.format(a=arch) not in meta]
    assert not missing
    assert meta[f"{arch}.embedding_length"] == fields["n_embd"]
    assert meta[f"{arch}.block_count"] == fields["n_layer"]
    assert meta[f"{arch}.attention.head_count"] == fields["n_head"]
    assert meta[f"{arch}.attention.head_count_kv"] == fields["n_head_kv"]
    assert meta[f"{arch}.context_length"] == fields["n_ctx"]
    assert meta["general.file_type"] == {"f32": 0, "f16": 1, "q4_0": 2, "q8_0": 7}[wtype]
    if arch == "qwen3moe":
        assert meta[f"{arch}.expert_count"] == fields["n_expert"]
        assert meta[f"{arch}.expert_used_count"] == fields["n_expert_used"]
        assert meta[f"{arch}.expert_feed_forward_length"] == fields["n_ff_exp"]
        assert meta[f"{arch}.attention.key_length"] == fields["head_dim"]
    else:
        assert meta[f"{arch}.feed_forward_length"] == fields["n_ff"]
        assert meta[f"{arch}.attention.key_length"] == fields.get("head_dim", fields["n_embd"] // fields["n_head"])

    shapes = expected_shapes(arch, fields, tied=False)
    assert {name: ne(t) for name, t in tensors.items()} == shapes
    assert [t.name for t in gguf.GGUFReader(out).tensors] == [p.name for p in mtg.tensor_plan(spec)]
    matrix_type = {"f32": QT.F32, "f16": QT.F16, "q8_0": QT.Q8_0, "q4_0": QT.Q4_0}[wtype]
    for name, t in tensors.items():
        is_vector = len(ne(t)) == 1
        if is_vector or name.endswith("ffn_gate_inp.weight"):
            assert t.tensor_type == QT.F32, name
            assert t.data.dtype == np.float32, name
        else:
            assert t.tensor_type == matrix_type, name


def test_router_is_f32_random_and_finite(tmp_path: Path) -> None:
    _, out = make(tmp_path, weight_type="q4_0", **SMALL_MOE)
    _, tensors = read(out)
    router = tensors["blk.0.ffn_gate_inp.weight"]
    assert router.tensor_type == QT.F32
    assert router.data.dtype == np.float32
    assert router.n_bytes == 4 * SMALL_MOE["n_embd"] * SMALL_MOE["n_expert"]
    assert np.all(np.isfinite(router.data)) and 0.01 < float(router.data.std()) < 0.04


def test_tensor_data_rejects_float64(monkeypatch: pytest.MonkeyPatch) -> None:
    plan = mtg.TensorPlan("blk.0.ffn_gate_inp.weight", (32, 4), QT.F32, "router")
    monkeypatch.setattr(mtg, "_random_matrix", lambda rng, p, std: np.zeros(p.numpy_shape, dtype=np.float64))
    with pytest.raises(AssertionError, match="float64"):
        mtg.tensor_data(np.random.default_rng(0), plan, 0.02)


@pytest.mark.parametrize("wtype", ["f16", "q8_0", "q4_0"])
def test_weights_are_small_normal(tmp_path: Path, wtype: str) -> None:
    _, out = make(tmp_path, weight_type=wtype, **SMALL_DENSE)
    _, tensors = read(out)
    t = tensors["blk.1.ffn_down.weight"]
    values = gguf.quants.dequantize(t.data, t.tensor_type)
    assert values.shape == (SMALL_DENSE["n_embd"], SMALL_DENSE["n_ff"])
    assert np.all(np.isfinite(values))
    assert abs(float(values.mean())) < 0.005 and 0.015 < float(values.std()) < 0.025
    norm = tensors["blk.1.ffn_norm.weight"].data
    assert np.array_equal(norm, np.ones_like(norm))


def test_seed_is_deterministic(tmp_path: Path) -> None:
    _, a = make(tmp_path, "a.gguf", seed=7, **SMALL_DENSE)
    _, b = make(tmp_path, "b.gguf", seed=7, **SMALL_DENSE)
    _, c = make(tmp_path, "c.gguf", seed=8, **SMALL_DENSE)
    assert a.read_bytes() == b.read_bytes()
    assert a.read_bytes() != c.read_bytes()


def test_head_dim_differs_from_n_embd_over_n_head(tmp_path: Path) -> None:
    fields = {**SMALL_DENSE, "head_dim": 64}  # 4 heads x 64 = 256 != n_embd 128
    _, out = make(tmp_path, **fields)
    meta, tensors = read(out)
    assert meta["llama.attention.key_length"] == meta["llama.attention.value_length"] == 64
    assert meta["llama.rope.dimension_count"] == 64
    assert ne(tensors["blk.0.attn_q.weight"]) == (128, 256)
    assert ne(tensors["blk.0.attn_k.weight"]) == (128, 128)
    assert ne(tensors["blk.0.attn_output.weight"]) == (256, 128)


def test_tied_embeddings_drop_output(tmp_path: Path) -> None:
    _, out = make(tmp_path, tie_embeddings=True, **SMALL_DENSE)
    _, tensors = read(out)
    assert "output.weight" not in tensors
    assert {n: ne(t) for n, t in tensors.items()} == expected_shapes("llama", SMALL_DENSE, tied=True)


def test_vocab_none(tmp_path: Path) -> None:
    _, out = make(tmp_path, vocab="none", **SMALL_DENSE)
    meta, _ = read(out)
    assert meta["tokenizer.ggml.model"] == "no_vocab"
    assert meta["llama.vocab_size"] == SMALL_DENSE["n_vocab"]
    assert "tokenizer.ggml.tokens" not in meta


def test_vocab_spm(tmp_path: Path) -> None:
    _, out = make(tmp_path, vocab="spm", **SMALL_MOE)
    meta, tensors = read(out)
    n = SMALL_MOE["n_vocab"]
    assert meta["tokenizer.ggml.model"] == "llama"
    tokens, scores, types = (meta[f"tokenizer.ggml.{k}"] for k in ("tokens", "scores", "token_type"))
    assert len(tokens) == len(scores) == len(types) == n == ne(tensors["token_embd.weight"])[1]
    assert len(set(tokens)) == n
    assert tokens[:3] == ["<unk>", "<s>", "</s>"]
    assert types[:3] == [2, 3, 3]
    assert tokens[3:259] == [f"<0x{b:02X}>" for b in range(256)]
    assert set(types[3:259]) == {6}
    assert set(types[259:]) == {1}
    assert all(s > t for s, t in zip(scores[259:], scores[260:], strict=False))
    assert (
        meta["tokenizer.ggml.unknown_token_id"],
        meta["tokenizer.ggml.bos_token_id"],
        meta["tokenizer.ggml.eos_token_id"],
    ) == (0, 1, 2)
    assert meta["tokenizer.ggml.add_bos_token"] is True


def test_spm_vocab_fills_a_full_size_vocabulary() -> None:
    tokens, scores, types = mtg.spm_vocab(32000)
    assert len(tokens) == len(set(tokens)) == len(scores) == len(types) == 32000


@pytest.mark.parametrize(
    ("fields", "fragment"),
    [
        ({**SMALL_DENSE, "n_ff": 200, "weight_type": "q8_0"}, "multiples of 32, but n_ff=200 is not"),
        (
            {**SMALL_DENSE, "n_embd": 80, "weight_type": "q4_0"},
            "multiples of 32, but n_embd=80, n_head*head_dim=80 are not",
        ),
        ({**SMALL_DENSE, "n_embd": 100}, "head_dim=25 must be even"),
        ({**SMALL_MOE, "n_ff_exp": 80}, "multiples of 32, but n_ff_exp=80 is not"),
        ({**SMALL_DENSE, "n_head_kv": 3}, "n_head=4 must be a multiple of n_head_kv=3"),
        ({**SMALL_DENSE, "n_embd": 130, "weight_type": "f16"}, "not divisible by n_head=4"),
        ({**SMALL_MOE, "n_expert_used": 5}, "n_expert_used=5 exceeds n_expert=4"),
        ({**SMALL_DENSE, "n_vocab": 200, "vocab": "spm"}, "needs n_vocab >= 260"),
        ({**SMALL_DENSE, "n_layer": 0}, "sizes must be positive: n_layer=0"),
    ],
)
def test_validation_errors_are_one_line(tmp_path: Path, fields: dict[str, object], fragment: str) -> None:
    out = tmp_path / "bad.gguf"
    with pytest.raises(mtg.SpecError) as info:
        mtg.write_model(mtg.ModelSpec(**fields), out)
    message = str(info.value)
    assert fragment in message
    assert "\n" not in message
    assert not out.exists()


def test_unquantized_types_accept_any_row_length(tmp_path: Path) -> None:
    _, out = make(tmp_path, **{**SMALL_DENSE, "n_ff": 200, "weight_type": "f16"})
    _, tensors = read(out)
    assert ne(tensors["blk.0.ffn_down.weight"]) == (200, 128)


def test_cli_error_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "bad.gguf"
    rc = mtg.main(["--arch", "llama", "--n-embd", "128", "--n-ff", "100", "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.count("\n") == 1
    assert err.startswith("make_tiny_gguf: error: --type q8_0 needs weight row lengths that are multiples of 32")
    assert not out.exists()


def test_cli_rejects_expert_options_for_dense(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = mtg.main(["--arch", "llama", "--n-expert", "4", "--out", str(tmp_path / "x.gguf")])
    assert rc == 2
    assert "--n-expert only apply to qwen3moe" in capsys.readouterr().err


def test_cli_writes_and_reports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cli.gguf"
    rc = mtg.main(
        [
            "--arch",
            "qwen3moe",
            "--n-embd",
            "128",
            "--n-layer",
            "1",
            "--n-head",
            "2",
            "--n-head-kv",
            "1",
            "--head-dim",
            "64",
            "--n-expert",
            "4",
            "--n-expert-used",
            "2",
            "--n-ff-exp",
            "64",
            "--n-vocab",
            "300",
            "--vocab",
            "spm",
            "--type",
            "q4_0",
            "--seed",
            "3",
            "--out",
            str(out),
        ]
    )
    assert rc == 0
    line = capsys.readouterr().out
    assert line.startswith(f"wrote {out}: qwen3moe q4_0, vocab spm") and "bytes" in line
    meta, tensors = read(out)
    assert meta["qwen3moe.feed_forward_length"] == 64 * 2  # n_ff_exp * n_expert_used when --n-ff is absent
    assert tensors["blk.0.ffn_gate_exps.weight"].tensor_type == QT.Q4_0
    assert ne(tensors["blk.0.ffn_gate_exps.weight"]) == (128, 64, 4)


def _preset(name: str, *extra: str) -> object:
    args = mtg.build_parser().parse_args(["--preset", name, "--out", "unused.gguf", *extra])
    return mtg.spec_from_args(args)


def _file_estimate(spec: object) -> int:
    return sum(t.n_bytes for t in mtg.tensor_plan(spec))


def test_preset_dense_tiny() -> None:
    s = _preset("dense-tiny")
    assert (s.arch, s.n_embd, s.n_layer, s.n_head, s.n_head_kv, s.n_ff, s.n_vocab, s.weight_type) == (
        "llama",
        512,
        4,
        8,
        4,
        1536,
        32000,
        "q8_0",
    )
    assert s.n_embd_head == 64 and s.tie_embeddings and s.vocab == "none"
    assert round(mtg.parameter_count(s) / 1e6, 1) == 29.0
    assert 30.0e6 < _file_estimate(s) < 31.0e6  # the H200 trial's ~30 MB


def test_preset_moe_tiny() -> None:
    s = _preset("moe-tiny")
    assert (s.arch, s.n_embd, s.n_layer, s.n_head, s.n_head_kv, s.n_embd_head) == ("qwen3moe", 512, 4, 8, 4, 64)
    assert (s.n_expert, s.n_expert_used, s.n_ff_exp, s.n_vocab, s.weight_type) == (8, 2, 768, 32000, "q8_0")
    assert s.n_ff_meta == 768 * 2
    assert round(mtg.parameter_count(s) / 1e6, 1) == 57.3
    plan = {t.name: t for t in mtg.tensor_plan(s)}
    assert plan["blk.3.ffn_gate_inp.weight"].ggml_type == QT.F32
    assert plan["blk.3.ffn_down_exps.weight"].ne == (768, 512, 8)


def test_preset_dense_500m_streams_far_more_than_l2() -> None:
    s = _preset("dense-500m")
    assert (s.arch, s.n_embd, s.n_layer, s.n_head, s.n_head_kv, s.n_ff, s.n_vocab, s.weight_type) == (
        "llama",
        2048,
        10,
        16,
        4,
        5632,
        32000,
        "q8_0",
    )
    assert s.n_embd_head == 128
    assert round(mtg.parameter_count(s) / 1e6, 1) == 516.5
    assert 0.5e9 < _file_estimate(s) < 0.6e9
    mm = [t for t in mtg.tensor_plan(s) if t.role == "matrix" and t.name.startswith("blk.")]
    assert sum(t.n_bytes for t in mm) > 9 * 50e6  # one decoded token streams ~0.48 GB of block weights >> 50 MB L2


def test_explicit_options_override_preset() -> None:
    s = _preset("dense-tiny", "--type", "q4_0", "--n-layer", "2", "--vocab", "spm", "--no-tie-embeddings")
    assert (s.weight_type, s.n_layer, s.vocab, s.tie_embeddings, s.n_embd) == ("q4_0", 2, "spm", False, 512)


def test_every_preset_validates() -> None:
    for name in mtg.PRESETS:
        mtg.validate(_preset(name))
        for wtype in mtg.WEIGHT_TYPES:
            mtg.validate(_preset(name, "--type", wtype))
