#!/usr/bin/env python3
"""Write a random-weight GGUF model that llama.cpp can load without any download.

Three architectures are supported: dense ``llama`` and ``qwen3`` (llama plus per-head q/k RMS
norms) and the mixture-of-experts ``qwen3moe``. Weight matrices are drawn from N(0, std^2) (std
0.02 by default, so logits stay finite) and stored as f32, f16, q8_0 or q4_0 (every matrix the
same type, like ``llama-quantize --pure``), or as the K-quant mixes ``q4_k_m`` / ``q6_k``, where
each tensor gets the type llama.cpp's quantizer picks for it (``llama_tensor_get_type`` in
``src/llama-quant.cpp``, see :func:`mix_tensor_type`). gguf-py cannot quantize K-quants, so
Q4_K / Q5_K / Q6_K blocks are packed here directly from random bits with chosen scales (see
:func:`pack_k_quant`). Norm weights are ones and stay f32, and the MoE router (``ffn_gate_inp``)
always stays f32.

The vocabulary is either ``none`` (``tokenizer.ggml.model = "no_vocab"`` plus
``<arch>.vocab_size``: enough for llama-bench, which feeds random token ids) or ``spm``, a minimal
SentencePiece-style ("llama") vocabulary with ``<unk>``, ``<s>``, ``</s>``, the 256 byte tokens and
filler pieces, enough to tokenize any text prompt (llama-completion).

Examples::

    python tools/models/make_tiny_gguf.py --preset dense-tiny --out /tmp/dense.gguf
    python tools/models/make_tiny_gguf.py --preset moe-tiny --out /tmp/moe.gguf
    python tools/models/make_tiny_gguf.py --preset dense-qwen3-0.6b --out /tmp/qwen3-0.6b-q4km.gguf
    python tools/models/make_tiny_gguf.py --preset moe-qwen3-30b-a3b-scaled --out /tmp/moe-q4km.gguf
    python tools/models/make_tiny_gguf.py --arch llama --n-embd 256 --n-layer 2 --vocab spm \
        --type f16 --out /tmp/dense_spm.gguf
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

try:
    import gguf
    import numpy as np
except ImportError as _exc:  # pragma: no cover - depends on the environment
    sys.exit(
        f"make_tiny_gguf: needs the Python packages 'gguf>=0.19' and 'numpy' ({_exc.name} is missing): "
        "pip install 'gguf>=0.19' numpy"
    )

ARCHS = ("llama", "qwen3", "qwen3moe")
VOCABS = ("none", "spm")
MOE_ARCHS = frozenset({"qwen3moe"})
QK_NORM_ARCHS = frozenset({"qwen3", "qwen3moe"})  # per-head attn_q_norm / attn_k_norm

QT = gguf.GGMLQuantizationType

#: --type -> (ggml type of the weight matrices, general.file_type). For a mix (MIXES) the first
#: entry is llama-quantize's default type, which mix_tensor_type() then adjusts per tensor.
WEIGHT_TYPES: dict[str, tuple[gguf.GGMLQuantizationType, gguf.LlamaFileType]] = {
    "f32": (QT.F32, gguf.LlamaFileType.ALL_F32),
    "f16": (QT.F16, gguf.LlamaFileType.MOSTLY_F16),
    "q8_0": (QT.Q8_0, gguf.LlamaFileType.MOSTLY_Q8_0),
    "q4_0": (QT.Q4_0, gguf.LlamaFileType.MOSTLY_Q4_0),
    "q4_k_m": (QT.Q4_K, gguf.LlamaFileType.MOSTLY_Q4_K_M),
    "q6_k": (QT.Q6_K, gguf.LlamaFileType.MOSTLY_Q6_K),
}
#: --type values whose per-tensor types follow llama.cpp's quantize rules instead of being uniform.
MIXES = frozenset({"q4_k_m", "q6_k"})

#: Super-block size of the K-quants (ggml QK_K).
QK_K = 256

#: SentencePiece token types (llama.cpp ``llama_token_type``).
TOKEN_NORMAL, TOKEN_UNKNOWN, TOKEN_CONTROL, TOKEN_BYTE = 1, 2, 3, 6
#: Ids of the special tokens in the ``spm`` vocabulary.
UNK_ID, BOS_ID, EOS_ID = 0, 1, 2
N_SPM_FIXED = 3 + 256

SPM_SPACE = "\u2581"  # SentencePiece's word-boundary marker


class SpecError(ValueError):
    """A model specification llama.cpp (or the quantizer) cannot accept; the message is one line."""


@dataclass(frozen=True)
class ModelSpec:
    """Everything that determines the generated file."""

    arch: str = "llama"
    n_embd: int = 256
    n_layer: int = 2
    n_head: int = 4
    n_head_kv: int = 2
    n_ff: int | None = 512  # dense FFN width; for qwen3moe only metadata (None: n_ff_exp * n_expert_used)
    n_vocab: int = 512
    n_ctx: int = 2048
    head_dim: int | None = None  # None: n_embd // n_head
    n_expert: int = 8
    n_expert_used: int = 2
    n_ff_exp: int = 256
    tie_embeddings: bool = False  # True: no output.weight, llama.cpp reuses token_embd for the logits
    weight_type: str = "q8_0"
    vocab: str = "none"
    seed: int = 0
    std: float = 0.02
    rms_eps: float = 1e-6
    rope_freq_base: float = 10000.0

    @property
    def is_moe(self) -> bool:
        """Whether the architecture routes its FFN through experts."""
        return self.arch in MOE_ARCHS

    @property
    def n_embd_head(self) -> int:
        """Per-head dimension (``<arch>.attention.key_length``)."""
        return self.head_dim if self.head_dim is not None else self.n_embd // self.n_head

    @property
    def n_ff_meta(self) -> int:
        """Value written as ``<arch>.feed_forward_length``."""
        if self.n_ff is not None:
            return self.n_ff
        return self.n_ff_exp * self.n_expert_used


#: Named size presets (fields of ModelSpec). ``--preset`` values are overridden by explicit options.
PRESETS: dict[str, dict[str, Any]] = {
    "dense-tiny": {
        "arch": "llama",
        "n_embd": 512,
        "n_layer": 4,
        "n_head": 8,
        "n_head_kv": 4,
        "n_ff": 1536,
        "n_vocab": 32000,
        "tie_embeddings": True,
        "weight_type": "q8_0",
    },
    "moe-tiny": {
        "arch": "qwen3moe",
        "n_embd": 512,
        "n_layer": 4,
        "n_head": 8,
        "n_head_kv": 4,
        "head_dim": 64,
        "n_expert": 8,
        "n_expert_used": 2,
        "n_ff_exp": 768,
        "n_ff": None,
        "n_vocab": 32000,
        "tie_embeddings": True,
        "weight_type": "q8_0",
    },
    "dense-500m": {
        "arch": "llama",
        "n_embd": 2048,
        "n_layer": 10,
        "n_head": 16,
        "n_head_kv": 4,
        "n_ff": 5632,
        "n_vocab": 32000,
        "tie_embeddings": True,
        "weight_type": "q8_0",
    },
    # Qwen3-0.6B at its real shapes (huggingface.co/Qwen/Qwen3-0.6B config.json: hidden_size 1024,
    # 28 layers, 16 heads / 8 KV heads, head_dim 128, intermediate_size 3072, vocab 151936,
    # tie_word_embeddings true, rope_theta 1e6, rms_norm_eps 1e-6, max_position_embeddings 40960),
    # with the tensor types llama-quantize gives it for Q4_K_M.
    "dense-qwen3-0.6b": {
        "arch": "qwen3",
        "n_embd": 1024,
        "n_layer": 28,
        "n_head": 16,
        "n_head_kv": 8,
        "head_dim": 128,
        "n_ff": 3072,
        "n_vocab": 151936,
        "n_ctx": 40960,
        "tie_embeddings": True,
        "weight_type": "q4_k_m",
        "rope_freq_base": 1e6,
    },
    # Qwen3-30B-A3B (huggingface.co/Qwen/Qwen3-30B-A3B config.json: hidden_size 2048, 48 layers,
    # 32 heads / 4 KV heads, head_dim 128, 128 experts, 8 used, moe_intermediate_size 768, vocab
    # 151936, untied output, rope_theta 1e6) with every per-layer shape and the top-8 routing kept,
    # but 24 of the 48 layers and 32 of the 128 experts per layer, so the Q4_K_M file is ~2.9 GB.
    "moe-qwen3-30b-a3b-scaled": {
        "arch": "qwen3moe",
        "n_embd": 2048,
        "n_layer": 24,
        "n_head": 32,
        "n_head_kv": 4,
        "head_dim": 128,
        "n_expert": 32,
        "n_expert_used": 8,
        "n_ff_exp": 768,
        "n_ff": 6144,
        "n_vocab": 151936,
        "n_ctx": 40960,
        "tie_embeddings": False,
        "weight_type": "q4_k_m",
        "rope_freq_base": 1e6,
    },
}

#: Defaults for the MoE fields when --arch qwen3moe is given without a preset.
MOE_DEFAULTS: dict[str, Any] = {"n_ff": None}


@dataclass(frozen=True)
class TensorPlan:
    """One tensor to write: GGUF name, ggml ``ne`` (fastest dimension first), type and role."""

    name: str
    ne: tuple[int, ...]
    ggml_type: gguf.GGMLQuantizationType
    role: str  # "norm", "router" or "matrix"

    @property
    def numpy_shape(self) -> tuple[int, ...]:
        """NumPy shape of the unquantized data: ``ne`` reversed."""
        return tuple(reversed(self.ne))

    @property
    def n_elements(self) -> int:
        """Number of weights."""
        n = 1
        for d in self.ne:
            n *= d
        return n

    @property
    def n_bytes(self) -> int:
        """Size of the stored data in bytes."""
        block, type_size = gguf.GGML_QUANT_SIZES[self.ggml_type]
        return self.n_elements // block * type_size


def validate(spec: ModelSpec) -> None:
    """Raise SpecError (one line) if llama.cpp or the quantizer could not use ``spec``."""
    if spec.arch not in ARCHS:
        raise SpecError(f"unknown --arch {spec.arch!r} (choose from {', '.join(ARCHS)})")
    if spec.weight_type not in WEIGHT_TYPES:
        raise SpecError(f"unknown --type {spec.weight_type!r} (choose from {', '.join(WEIGHT_TYPES)})")
    if spec.vocab not in VOCABS:
        raise SpecError(f"unknown --vocab {spec.vocab!r} (choose from {', '.join(VOCABS)})")
    sizes = {
        "n_embd": spec.n_embd,
        "n_layer": spec.n_layer,
        "n_head": spec.n_head,
        "n_head_kv": spec.n_head_kv,
        "n_vocab": spec.n_vocab,
        "n_ctx": spec.n_ctx,
    }
    if spec.n_ff is not None:
        sizes["n_ff"] = spec.n_ff
    if spec.head_dim is not None:
        sizes["head_dim"] = spec.head_dim
    if spec.is_moe:
        sizes |= {"n_expert": spec.n_expert, "n_expert_used": spec.n_expert_used, "n_ff_exp": spec.n_ff_exp}
    bad = [f"{k}={v}" for k, v in sizes.items() if v < 1]
    if bad:
        raise SpecError(f"sizes must be positive: {', '.join(bad)}")
    if not spec.std > 0:
        raise SpecError(f"--std must be positive, got {spec.std}")
    if spec.n_head % spec.n_head_kv:
        raise SpecError(f"n_head={spec.n_head} must be a multiple of n_head_kv={spec.n_head_kv}")
    if spec.head_dim is None and spec.n_embd % spec.n_head:
        raise SpecError(f"n_embd={spec.n_embd} is not divisible by n_head={spec.n_head}; pass --head-dim")
    if spec.n_embd_head % 2:
        raise SpecError(f"head_dim={spec.n_embd_head} must be even (RoPE rotates pairs)")
    if spec.is_moe and spec.n_expert_used > spec.n_expert:
        raise SpecError(f"n_expert_used={spec.n_expert_used} exceeds n_expert={spec.n_expert}")
    if spec.vocab == "spm" and spec.n_vocab < N_SPM_FIXED + 1:
        raise SpecError(
            f"--vocab spm needs n_vocab >= {N_SPM_FIXED + 1} (3 special + 256 byte tokens + 1), got {spec.n_vocab}"
        )
    if spec.weight_type in MIXES:
        for qtype, layout in K_LAYOUTS.items():
            lo, hi = layout.sc_range
            extremes = np.array([spec.std / (layout.q_rms * hi), spec.std / (layout.q_rms * lo)])
            scales = np.concatenate([extremes, extremes * (2**layout.bits - 1) / 2])
            with np.errstate(over="ignore"):
                as_fp16 = scales.astype(np.float16)
            if not (np.all(np.isfinite(as_fp16)) and np.all(as_fp16 > 0)):
                raise SpecError(
                    f"--std {spec.std} gives {qtype.name} block scales outside fp16 (zero or infinite); "
                    "use a std between about 1e-5 and 1e4"
                )
    # A mix never fails on row lengths: like llama-quantize it falls back per tensor (see mix_tensor_type).
    block = gguf.GGML_QUANT_SIZES[WEIGHT_TYPES[spec.weight_type][0]][0]
    if block > 1 and spec.weight_type not in MIXES:
        rows = {"n_embd": spec.n_embd, "n_head*head_dim": spec.n_head * spec.n_embd_head}
        if spec.is_moe:
            rows["n_ff_exp"] = spec.n_ff_exp
        else:
            assert spec.n_ff is not None
            rows["n_ff"] = spec.n_ff
        bad = [f"{k}={v}" for k, v in rows.items() if v % block]
        if bad:
            raise SpecError(
                f"--type {spec.weight_type} needs weight row lengths that are multiples of {block}, "
                f"but {', '.join(bad)} {'is' if len(bad) == 1 else 'are'} not"
            )


def _tensor_name(arch: gguf.MODEL_ARCH, kind: gguf.MODEL_TENSOR, bid: int | None = None) -> str:
    if kind not in gguf.MODEL_TENSORS[arch]:  # guards against a gguf release that renames tables
        raise RuntimeError(f"gguf {gguf.MODEL_ARCH_NAMES[arch]} has no tensor {kind.name}")
    base = gguf.TENSOR_NAMES[kind]
    return (base.format(bid=bid) if bid is not None else base) + ".weight"


def _arch_enum(arch: str) -> gguf.MODEL_ARCH:
    for enum, name in gguf.MODEL_ARCH_NAMES.items():
        if name == arch:
            return enum
    raise SpecError(f"gguf does not know architecture {arch!r}")


def use_more_bits(i_layer: int, n_layer: int) -> bool:
    """llama-quant.cpp ``use_more_bits``: the first and last eighth of the layers and every third between.

    (C++ integer division; ``i_layer - n_layer/8`` is never negative where the modulo decides.)
    """
    return i_layer < n_layer // 8 or i_layer >= 7 * n_layer // 8 or (i_layer - n_layer // 8) % 3 == 2


def _quant_category(name: str) -> str:
    """llama-quant.cpp ``tensor_get_category`` for the tensor names this script writes."""
    if name == "output.weight":
        return "output"
    if name == "token_embd.weight":
        return "token_embd"
    for key in (
        "attn_v.weight",
        "attn_k.weight",
        "attn_q.weight",
        "attn_output.weight",
        "ffn_up",
        "ffn_gate",
        "ffn_down",
    ):
        if key in name:
            return key.removesuffix(".weight")
    return "other"


#: llama-quant.cpp ``tensor_type_fallback``: the type used when a row length (ne[0]) is not a
#: multiple of the target's block size; a 32-block type that still does not fit becomes F16.
K_FALLBACK = {QT.Q4_K: QT.Q5_0, QT.Q5_K: QT.Q5_1, QT.Q6_K: QT.Q8_0}


def _block_size(t: gguf.GGMLQuantizationType) -> int:
    return gguf.GGML_QUANT_SIZES[t][0]


def type_fallback(target: gguf.GGMLQuantizationType, n_cols: int) -> gguf.GGMLQuantizationType:
    """The type llama-quantize stores a tensor in whose rows hold ``n_cols`` weights (``tensor_type_fallback``)."""
    if n_cols % _block_size(target) == 0:
        return target
    fallback = K_FALLBACK.get(target, target)
    return fallback if n_cols % _block_size(fallback) == 0 else QT.F16


def mix_tensor_type(spec: ModelSpec, name: str, ne: tuple[int, ...], layer: int | None) -> gguf.GGMLQuantizationType:
    """Type of a 2-D/3-D weight under the ``--type`` mix, as ``llama_tensor_get_type`` picks it.

    Follows llama.cpp ``src/llama-quant.cpp`` (vendored in llama-cpp-python 0.3.36) for
    LLAMA_FTYPE_MOSTLY_Q4_K_M and _Q6_K, without imatrix or overrides, for the tensors of the
    llama / qwen3 / qwen3moe architectures:

    * ``output.weight``, and ``token_embd.weight`` when the embeddings are tied: Q6_K (Q8_0 when
      its rows are not a multiple of 256); an untied ``token_embd`` keeps the default type;
    * ``attn_v``: Q6_K for Q4_K_M where ``use_more_bits(i_attention_wv, n_attention_wv)``; the
      counter runs over the attn_v tensors in llama.cpp's tensor order (sorted by layer), so it is
      the layer index; Q8_0 for a model with exactly 8 experts; Q5_K for a llama 70B (80 layers, GQA);
    * ``attn_k``: Q8_0 with exactly 8 experts; ``attn_output``: Q5_K for Q4_K_M with exactly 8 experts;
    * ``ffn_down`` and ``ffn_down_exps``: Q6_K for Q4_K_M where ``use_more_bits(layer, n_layer)``;
    * then ``tensor_type_fallback`` for rows that are not a multiple of the block size.
    """
    default = WEIGHT_TYPES[spec.weight_type][0]
    q4_k_m = spec.weight_type == "q4_k_m"
    n_expert = spec.n_expert if spec.is_moe else 0
    category = _quant_category(name)
    new = default
    if category == "output" or (spec.tie_embeddings and category == "token_embd"):
        if ne[0] % _block_size(default):
            new = QT.Q8_0
        elif new != QT.Q8_0:
            new = QT.Q6_K
    elif category == "token_embd":
        pass
    elif category == "attn_v":
        assert layer is not None
        if q4_k_m and use_more_bits(layer, spec.n_layer):
            new = QT.Q6_K
        if spec.arch == "llama" and spec.n_layer == 80 and spec.n_head != spec.n_head_kv and new == QT.Q4_K:
            new = QT.Q5_K  # LLM_TYPE_70B
        if n_expert == 8:
            new = QT.Q8_0
    elif category == "attn_k":
        if n_expert == 8:
            new = QT.Q8_0
    elif category == "ffn_down":
        assert layer is not None
        if q4_k_m and use_more_bits(layer, spec.n_layer):
            new = QT.Q6_K
    elif category == "attn_output" and n_expert == 8 and q4_k_m:
        new = QT.Q5_K
    return type_fallback(new, ne[0])


def tensor_plan(spec: ModelSpec) -> list[TensorPlan]:
    """The tensors llama.cpp requires for ``spec``, in file order, with ggml shapes and types."""
    T = gguf.MODEL_TENSOR
    arch = _arch_enum(spec.arch)
    wtype = WEIGHT_TYPES[spec.weight_type][0]
    mixed = spec.weight_type in MIXES
    e, hd = spec.n_embd, spec.n_embd_head
    q_dim, kv_dim = spec.n_head * hd, spec.n_head_kv * hd

    def mat(kind: gguf.MODEL_TENSOR, ne: tuple[int, ...], bid: int | None = None) -> TensorPlan:
        name = _tensor_name(arch, kind, bid)
        return TensorPlan(name, ne, mix_tensor_type(spec, name, ne, bid) if mixed else wtype, "matrix")

    def norm(kind: gguf.MODEL_TENSOR, n: int, bid: int | None = None) -> TensorPlan:
        return TensorPlan(_tensor_name(arch, kind, bid), (n,), QT.F32, "norm")

    plan = [mat(T.TOKEN_EMBD, (e, spec.n_vocab))]
    for i in range(spec.n_layer):
        plan += [
            norm(T.ATTN_NORM, e, i),
            mat(T.ATTN_Q, (e, q_dim), i),
            mat(T.ATTN_K, (e, kv_dim), i),
            mat(T.ATTN_V, (e, kv_dim), i),
            mat(T.ATTN_OUT, (q_dim, e), i),
        ]
        if spec.arch in QK_NORM_ARCHS:
            plan += [norm(T.ATTN_Q_NORM, hd, i), norm(T.ATTN_K_NORM, hd, i)]
        plan.append(norm(T.FFN_NORM, e, i))
        if spec.is_moe:
            f, x = spec.n_ff_exp, spec.n_expert
            plan += [
                TensorPlan(_tensor_name(arch, T.FFN_GATE_INP, i), (e, x), QT.F32, "router"),
                mat(T.FFN_GATE_EXP, (e, f, x), i),
                mat(T.FFN_UP_EXP, (e, f, x), i),
                mat(T.FFN_DOWN_EXP, (f, e, x), i),
            ]
        else:
            assert spec.n_ff is not None
            plan += [
                mat(T.FFN_GATE, (e, spec.n_ff), i),
                mat(T.FFN_UP, (e, spec.n_ff), i),
                mat(T.FFN_DOWN, (spec.n_ff, e), i),
            ]
    plan.append(norm(T.OUTPUT_NORM, e))
    if not spec.tie_embeddings:
        plan.append(mat(T.OUTPUT, (e, spec.n_vocab)))
    return plan


def parameter_count(spec: ModelSpec) -> int:
    """Total number of weights in the model."""
    return sum(t.n_elements for t in tensor_plan(spec))


def type_summary(spec: ModelSpec) -> str:
    """``"q4_k 155, q6_k 43, f32 113"``: how many tensors of each type the file holds, most first."""
    counts = Counter(t.ggml_type.name.lower() for t in tensor_plan(spec))
    return ", ".join(f"{name} {n}" for name, n in counts.most_common())


def spm_vocab(n_vocab: int) -> tuple[list[str], list[float], list[int]]:
    """A minimal SentencePiece-style vocabulary: tokens, scores and token types.

    Ids 0-2 are ``<unk>``, ``<s>``, ``</s>``; ids 3-258 the byte tokens ``<0x00>``..``<0xFF>``
    (type 6, so any text falls back to bytes); the rest are unique filler pieces (printable ASCII
    characters, then letter pairs and triples, with and without the word-boundary marker) with
    decreasing scores, so the SPM merge loop has something to merge.
    """
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [TOKEN_UNKNOWN, TOKEN_CONTROL, TOKEN_CONTROL] + [TOKEN_BYTE] * 256
    scores = [0.0] * len(tokens)
    seen = set(tokens)
    for piece in _filler_pieces():
        if len(tokens) >= n_vocab:
            break
        if piece in seen:
            continue
        seen.add(piece)
        tokens.append(piece)
        types.append(TOKEN_NORMAL)
        scores.append(-float(len(tokens) - N_SPM_FIXED))
    return tokens, scores, types


def _filler_pieces() -> Iterator[str]:
    printable = [chr(c) for c in range(0x21, 0x7F)]
    yield SPM_SPACE
    yield from printable
    yield from (SPM_SPACE + c for c in printable)
    letters = "abcdefghijklmnopqrstuvwxyz"
    for n in itertools.count(2):
        for combo in itertools.product(letters, repeat=n):
            word = "".join(combo)
            yield SPM_SPACE + word
            yield word


def _random_matrix(rng: np.random.Generator, plan: TensorPlan, std: float) -> np.ndarray:
    data = rng.standard_normal(plan.numpy_shape, dtype=np.float32)
    data *= np.float32(std)
    return data


@dataclass(frozen=True)
class KQuantLayout:
    """Byte layout of one ggml K-quant block (``ggml/src/ggml-common.h``) and how it is filled.

    ``d`` / ``dmin``: byte offsets of the fp16 super-block scales (``dmin`` None: none, Q6_K);
    ``scales``: offset of the packed sub-block scales; the remaining bytes are the quants, random.
    Weights decode (``dequantize_row_*`` in ``ggml/src/ggml-quants.c``) as
    ``d * sc * q - dmin * m`` (Q4_K, Q5_K; q in [0, 2^bits)) or ``d * sc * (q - 32)`` (Q6_K).
    """

    type_size: int
    bits: int
    d: int
    dmin: int | None
    scales: int
    n_sub: int  # sub-blocks per super-block (8 of 32 weights, or 16 of 16 for Q6_K)
    sc_range: tuple[int, int]  # inclusive range of the sub-block scale magnitudes drawn

    @property
    def q_rms(self) -> float:
        """RMS of the centred quant value for uniformly random bits."""
        levels = 2**self.bits
        var = (levels * levels - 1) / 12
        # Q4_K/Q5_K are centred exactly by dmin*m; Q6_K's q - 32 has mean -0.5.
        return float(np.sqrt(var + (0.25 if self.dmin is None else 0.0)))


#: block_q4_K: d, dmin (fp16), scales[12] (6-bit scales and mins), qs[128]  -> 144 bytes
#: block_q5_K: d, dmin (fp16), scales[12], qh[32], qs[128]                  -> 176 bytes
#: block_q6_K: ql[128], qh[64], scales[16] (int8), d (fp16)                 -> 210 bytes
#: The scale ranges keep d a normal fp16 (>= 6.1e-5) at std 0.02 (d ~ 9e-5).
K_LAYOUTS: dict[gguf.GGMLQuantizationType, KQuantLayout] = {
    QT.Q4_K: KQuantLayout(144, 4, d=0, dmin=2, scales=4, n_sub=8, sc_range=(32, 63)),
    QT.Q5_K: KQuantLayout(176, 5, d=0, dmin=2, scales=4, n_sub=8, sc_range=(16, 31)),
    QT.Q6_K: KQuantLayout(210, 6, d=208, dmin=None, scales=192, n_sub=16, sc_range=(8, 16)),
}


def pack_scale_min_k4(sc: np.ndarray, m: np.ndarray) -> np.ndarray:
    """Pack 8 six-bit scales and mins per block into 12 bytes (inverse of ggml's ``get_scale_min_k4``).

    Bytes 0-3: sc[0:4] | (sc[4:8] >> 4) << 6; bytes 4-7: m[0:4] | (m[4:8] >> 4) << 6;
    bytes 8-11: (sc[4:8] & 0xF) | (m[4:8] & 0xF) << 4, as ``quantize_row_q4_K_ref`` writes them.
    """
    sc = sc.astype(np.uint8)
    m = m.astype(np.uint8)
    if sc.shape[-1] != 8 or m.shape != sc.shape or int(sc.max(initial=0)) > 63 or int(m.max(initial=0)) > 63:
        raise ValueError("pack_scale_min_k4 needs (..., 8) arrays of 6-bit values")
    out = np.empty((*sc.shape[:-1], 12), dtype=np.uint8)
    out[..., 0:4] = (sc[..., 0:4] & 63) | ((sc[..., 4:8] >> 4) << 6)
    out[..., 4:8] = (m[..., 0:4] & 63) | ((m[..., 4:8] >> 4) << 6)
    out[..., 8:12] = (sc[..., 4:8] & 0xF) | ((m[..., 4:8] & 0xF) << 4)
    return out


def _random_bytes(rng: np.random.Generator, n: int) -> np.ndarray:
    # random_raw draws 64 bits per call, ~4x faster than integers(..., dtype=uint8) for GB-sized tensors.
    return rng.bit_generator.random_raw(-(-n // 8)).view(np.uint8)[:n]


def pack_k_quant(rng: np.random.Generator, ggml_type: gguf.GGMLQuantizationType, n: int, std: float) -> np.ndarray:
    """``n`` weights (a multiple of 256) as random but valid K-quant blocks; returns (n/256, type_size) uint8.

    The quants are uniformly random bits. Each sub-block scale is drawn from ``sc_range`` (Q6_K: with a
    random sign); for Q4_K/Q5_K the mins equal the scales and ``dmin = d * (2^bits - 1) / 2``, so every
    sub-block is centred on zero. ``d`` is set per block so the block's RMS is ``std``:
    ``d = std / (q_rms * rms(sc))``. Weights therefore have mean ~0 and standard deviation ~std (a
    uniform rather than a normal shape within a sub-block), and d / dmin are positive finite fp16.
    """
    layout = K_LAYOUTS[ggml_type]
    if n % QK_K:
        raise ValueError(f"{ggml_type.name} needs a multiple of {QK_K} weights, got {n}")
    nb = n // QK_K
    blocks = _random_bytes(rng, nb * layout.type_size).reshape(nb, layout.type_size)
    lo, hi = layout.sc_range
    sc = rng.integers(lo, hi + 1, size=(nb, layout.n_sub), dtype=np.int16)
    rms_sc = np.sqrt(np.mean(sc.astype(np.float64) ** 2, axis=1))
    d = (std / (layout.q_rms * rms_sc)).astype(np.float16)
    if not (np.all(np.isfinite(d)) and np.all(d > 0)):
        raise SpecError(f"--std {std} gives {ggml_type.name} block scales that are not positive finite fp16 values")
    blocks[:, layout.d : layout.d + 2] = d.view(np.uint8).reshape(nb, 2)
    if layout.dmin is None:
        sign = np.where(rng.integers(0, 2, size=sc.shape, dtype=np.int8) == 1, 1, -1).astype(np.int16)
        blocks[:, layout.scales : layout.scales + layout.n_sub] = (sc * sign).astype(np.int8).view(np.uint8)
    else:
        centre = (2**layout.bits - 1) / 2
        dmin = (d.astype(np.float32) * np.float32(centre)).astype(np.float16)
        blocks[:, layout.dmin : layout.dmin + 2] = dmin.view(np.uint8).reshape(nb, 2)
        blocks[:, layout.scales : layout.scales + 12] = pack_scale_min_k4(sc, sc)
    return blocks


def tensor_data(rng: np.random.Generator, plan: TensorPlan, std: float) -> np.ndarray:
    """The bytes-ready array for one tensor (float32, float16 or quantized uint8 blocks)."""
    if plan.ggml_type in K_LAYOUTS:
        out = pack_k_quant(rng, plan.ggml_type, plan.n_elements, std)
        if out.nbytes != plan.n_bytes:
            raise AssertionError(f"{plan.name}: {out.nbytes} bytes, expected {plan.n_bytes}")
        return out
    data = np.ones(plan.numpy_shape, dtype=np.float32) if plan.role == "norm" else _random_matrix(rng, plan, std)
    # An earlier trial wrote float64 router weights (NumPy type promotion), which crashed llama.cpp's
    # CPU backend: check the dtype explicitly before anything is written.
    if data.dtype != np.float32:
        raise AssertionError(f"{plan.name}: generated {data.dtype}, expected float32")
    if plan.ggml_type == QT.F32:
        out = data
    elif plan.ggml_type == QT.F16:
        out = data.astype(np.float16)
    else:
        out = gguf.quants.quantize(data, plan.ggml_type)
        if out.dtype != np.uint8:
            raise AssertionError(f"{plan.name}: quantizer returned {out.dtype}, expected uint8")
    if plan.role in ("norm", "router") and out.dtype != np.float32:
        raise AssertionError(f"{plan.name}: {plan.role} weights must be float32, got {out.dtype}")
    if out.nbytes != plan.n_bytes:
        raise AssertionError(f"{plan.name}: {out.nbytes} bytes, expected {plan.n_bytes}")
    return out


def _add_metadata(w: gguf.GGUFWriter, spec: ModelSpec) -> None:
    arch = spec.arch
    w.add_name(f"rocroof tiny {arch} (random weights)")
    w.add_description(
        "Random-weight test model written by rocroof tools/models/make_tiny_gguf.py "
        f"(seed {spec.seed}); its output is meaningless."
    )
    w.add_file_type(int(WEIGHT_TYPES[spec.weight_type][1]))
    if WEIGHT_TYPES[spec.weight_type][0] not in (QT.F32, QT.F16):
        w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    w.add_context_length(spec.n_ctx)
    w.add_embedding_length(spec.n_embd)
    w.add_block_count(spec.n_layer)
    w.add_feed_forward_length(spec.n_ff_meta)
    w.add_head_count(spec.n_head)
    w.add_head_count_kv(spec.n_head_kv)
    w.add_key_length(spec.n_embd_head)
    w.add_value_length(spec.n_embd_head)
    w.add_rope_dimension_count(spec.n_embd_head)
    w.add_rope_freq_base(spec.rope_freq_base)
    w.add_layer_norm_rms_eps(spec.rms_eps)
    if spec.is_moe:
        w.add_expert_count(spec.n_expert)
        w.add_expert_used_count(spec.n_expert_used)
        w.add_expert_feed_forward_length(spec.n_ff_exp)
    if spec.vocab == "none":
        w.add_tokenizer_model("no_vocab")
        w.add_vocab_size(spec.n_vocab)
    else:
        tokens, scores, types = spm_vocab(spec.n_vocab)
        if len(tokens) != spec.n_vocab:
            raise AssertionError(f"spm vocabulary has {len(tokens)} tokens, expected {spec.n_vocab}")
        w.add_tokenizer_model("llama")
        w.add_token_list(tokens)
        w.add_token_scores(scores)
        w.add_token_types(types)
        w.add_unk_token_id(UNK_ID)
        w.add_bos_token_id(BOS_ID)
        w.add_eos_token_id(EOS_ID)
        w.add_add_bos_token(True)
        w.add_add_eos_token(False)


def write_model(spec: ModelSpec, out: Path) -> int:
    """Validate ``spec`` and write the GGUF file to ``out``; returns the file size in bytes.

    Tensors are generated and written one at a time, so memory stays near the largest tensor.
    """
    validate(spec)
    plan = tensor_plan(spec)
    out.parent.mkdir(parents=True, exist_ok=True)
    w = gguf.GGUFWriter(out, spec.arch)
    try:
        _add_metadata(w, spec)
        for t in plan:
            # Quantized data is passed by its byte shape, exactly as add_tensor() does with raw_dtype.
            if t.ggml_type in (QT.F32, QT.F16):
                shape, dtype = t.numpy_shape, np.dtype(np.float32 if t.ggml_type == QT.F32 else np.float16)
            else:
                block, type_size = gguf.GGML_QUANT_SIZES[t.ggml_type]
                shape = (*t.numpy_shape[:-1], t.numpy_shape[-1] // block * type_size)
                dtype = np.dtype(np.uint8)
            w.add_tensor_info(t.name, shape, dtype, t.n_bytes, raw_dtype=t.ggml_type)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_ti_data_to_file()
        rng = np.random.default_rng(spec.seed)
        for t in plan:
            w.write_tensor_data(tensor_data(rng, t, spec.std))
    finally:
        w.close()
    return out.stat().st_size


_SPEC_FIELDS = {f.name for f in dataclasses.fields(ModelSpec)}


def spec_from_args(args: argparse.Namespace) -> ModelSpec:
    """Combine ModelSpec defaults, the preset, and explicitly given options (in that order)."""
    values: dict[str, Any] = {}
    if args.preset is not None:
        values |= PRESETS[args.preset]
    explicit = {k: v for k, v in vars(args).items() if k in _SPEC_FIELDS and v is not None}
    arch = explicit.get("arch", values.get("arch", ModelSpec.arch))
    if arch in MOE_ARCHS and args.preset is None:
        values |= MOE_DEFAULTS
    if arch not in MOE_ARCHS:
        given = sorted(k for k in ("n_expert", "n_expert_used", "n_ff_exp") if k in explicit)
        if given:
            raise SpecError(
                f"--arch {arch} is dense; {', '.join('--' + g.replace('_', '-') for g in given)} only apply to qwen3moe"
            )
    values |= explicit
    return ModelSpec(**values)


def build_parser() -> argparse.ArgumentParser:
    """The command-line interface."""
    p = argparse.ArgumentParser(
        description="Write a random-weight GGUF model (llama, qwen3 or qwen3moe) that llama.cpp loads offline.",
        epilog="Presets: "
        + "; ".join(f"{k}: " + ", ".join(f"{f}={v}" for f, v in d.items()) for k, d in PRESETS.items()),
    )
    p.add_argument("--out", type=Path, required=True, help="output .gguf path")
    p.add_argument("--preset", choices=sorted(PRESETS), help="named size preset; explicit options override it")
    p.add_argument("--arch", choices=ARCHS, help="architecture (default llama; qwen3 = llama + q/k norms)")
    p.add_argument(
        "--type",
        dest="weight_type",
        choices=list(WEIGHT_TYPES),
        help="type of the weight matrices (default q8_0): f32/f16/q8_0/q4_0 for every matrix, or the "
        "q4_k_m/q6_k mixes (per-tensor types as llama-quantize picks them); norms and the MoE router stay f32",
    )
    p.add_argument(
        "--vocab",
        choices=VOCABS,
        help="none: no_vocab + vocab_size (llama-bench); spm: minimal SentencePiece vocab (text prompts)",
    )
    p.add_argument(
        "--tie-embeddings",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="omit output.weight so the logits reuse token_embd (presets: tied; otherwise untied)",
    )
    p.add_argument("--seed", type=int, help="random seed (default 0)")
    p.add_argument("--std", type=float, help="standard deviation of the random weights (default 0.02)")
    for name, help_ in (
        ("n-embd", "hidden size"),
        ("n-layer", "number of blocks"),
        ("n-head", "attention heads"),
        ("n-head-kv", "KV heads (GQA)"),
        ("n-ff", "dense FFN width (qwen3moe: metadata only)"),
        ("n-vocab", "vocabulary size"),
        ("n-ctx", "training context length"),
        ("head-dim", "per-head dimension (default n_embd/n_head)"),
        ("n-expert", "qwen3moe: experts per layer"),
        ("n-expert-used", "qwen3moe: experts used per token"),
        ("n-ff-exp", "qwen3moe: expert FFN width"),
    ):
        p.add_argument(f"--{name}", dest=name.replace("-", "_"), type=int, help=help_)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        spec = spec_from_args(args)
        size = write_model(spec, args.out)
    except SpecError as exc:
        print(f"make_tiny_gguf: error: {exc}", file=sys.stderr)
        return 2
    n_params = parameter_count(spec)
    extra = (
        f", {spec.n_expert} experts/{spec.n_expert_used} used, n_ff_exp {spec.n_ff_exp}"
        if spec.is_moe
        else f", n_ff {spec.n_ff}"
    )
    tied = " (tied output)" if spec.tie_embeddings else ""
    print(
        f"wrote {args.out}: {spec.arch} {spec.weight_type}, vocab {spec.vocab}, n_embd {spec.n_embd}, "
        f"{spec.n_layer} layers, {spec.n_head}/{spec.n_head_kv} heads, head_dim {spec.n_embd_head}{extra}, "
        f"n_vocab {spec.n_vocab}{tied}; {n_params / 1e6:.1f} M params, {size:,} bytes ({size / 2**20:.1f} MiB); "
        f"tensor types: {type_summary(spec)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
