"""Modelled DRAM bytes and FLOPs of each ggml op invocation, computed from its op metadata.

The measured side of a roofline (hardware counters) needs a model to compare against: the bytes an
op must move between DRAM and the chip if every tensor it reads is read once and every tensor it
writes is written once, and the arithmetic it must do. This module computes both per op invocation
from :class:`~rocroof.records.OpMetadata` (AMD's fork ``GGML_ROOFLINE_OUT`` or rocroof's sidecar;
columns in :mod:`rocroof.capture.readers.ggml_meta`). It is pure: no I/O, no printing.

Public functions and their columns:

* :func:`tensor_bytes` ``(ggml_type, ne) -> int``.
* :func:`model_bytes` -> ``invocation`` (int64), ``model_read_bytes``, ``model_write_bytes``
  (nullable ``Int64``, bytes), ``model_note`` (str, ``""`` when nothing to flag).
* :func:`model_flops` -> ``invocation``, ``flops`` (float64, FLOP), ``flops_note`` (str).
* :func:`model_invocations` -> ``invocation``, ``model_read_bytes``, ``model_write_bytes``,
  ``flops``, ``model_note`` (both notes, ``"; "``-joined): what the pipeline stores.

One row per row of ``meta.ops``, in invocation order. Unknown is not zero: a byte count is
``<NA>`` and a FLOP count NaN when the metadata cannot settle it, with a note saying why.

**Byte model.** The fork's schema carries raw per-tensor facts (PR #48 of AMD-Ecosystem/llama.cpp:
"consumer owns policy": skip VIEW/RESHAPE, drop in-place CPY/SET_ROWS destinations, internal
tensors, dedup; summarised in ``shared/reference/llamacpp-roofline.md`` §1.6-1.7). The fork's own
``bytes`` field (``metadata_bytes``) is ``ggml_nbytes(dst) + Σ ggml_nbytes(src)`` of the head node:
it counts views at full size and counts the KV-cache twice. The rules here, each with its reason:

1. *No-kernel nodes move nothing.* ``VIEW``, ``RESHAPE``, ``PERMUTE``, ``TRANSPOSE``, ``NONE`` and
   empty tensors only relabel memory (upstream ``ggml_cuda_is_view_or_noop``; the fork and our hook
   give them no row of their own, but they appear inside fused groups). A kernel that reads through
   a view is charged for the tensor it reads (the view's shape), not for the view node.
2. *A tensor is read once per invocation*, at its logical size (:func:`tensor_bytes` of its type and
   shape, not ``ggml_nbytes``, which spans the gaps of strided views). Reads are deduplicated on
   tensor id (``src_tensor_ids``: the ``ggml_tensor`` address), not on storage id: two views of one
   buffer (the Q, K and V slices of a fused QKV output, the halves of a fused gate/up output) are
   distinct reads; the same tensor feeding two nodes of a group (the activation of a fused gate+up
   pair) is one read. Without tensor ids reads are deduplicated on (storage id, type, shape); without
   any ids (fork schemas before PR #48) not at all; both are flagged.
3. *In-place destinations are not read.* An operand that is the destination of a store op is
   written, not read: ``SET_ROWS`` src[2] (ggml's ``ggml_set_rows`` keeps the destination there,
   "for legacy reasons"), ``CPY`` src[1] (``ggml_cpy`` returns a view of it), and any ``DUP``/``SET``
   operand sharing the output's storage id. The fork counts such an operand as a read *and* the
   output as a write (the KV-cache double count PR #48 names). For every other op whose output
   shares an input's storage (in-place element-wise ops such as ``ggml_add_inplace``) the kernel
   does read the input and write the output over it: both are counted, the write once.
4. *The KV-cache write is counted once, at the size written.* ``SET_ROWS`` writes only the rows it
   is given: src[0] rows in the destination's type (``[dst.ne0, src0.ne1, src0.ne2, src0.ne3]``),
   not the whole cache view its ``ne`` describes. A ``CPY`` into a cache view writes the view.
5. *Tensors internal to a fused group are neither written nor read from DRAM.* A storage written by
   one node of the group and read by a later kernel node of it stays on chip, unless it is the
   group's output (the last node's storage, ``out_storage_id``) or a later invocation reads it
   before any invocation writes it again: then the fused kernel must also store it (the top-k MoE
   group writes the expert ids that the following ``MUL_MAT_ID`` reads). Writes to one storage in
   one group are counted once (the largest).
6. *``GET_ROWS`` reads the rows it gathers*: ``min(rows · row bytes, tensor bytes)`` of src[0],
   rows = ``dst.ne1 · dst.ne2 · dst.ne3`` (a token-embedding lookup does not read the whole table).
7. *``MUL_MAT_ID`` reads the weights of the experts it routes to*: the expert tensor's bytes times
   ``experts_used / n_experts`` (``experts_used`` from the routing read back, PR #50, or counted
   from ``tokens_per_expert``). When it is unknown (NULL, or 0 written by a failed read-back) the
   bound ``min(M · top_k, n_experts) / n_experts`` is used (M tokens each route to top_k experts,
   so no more experts than that can be touched) and the row is flagged. ``experts_used`` is per
   row; the ``MUL_MAT_ID`` nodes of one fused group share the routing (gate and up use one ids
   tensor), so all of them get the row's value.

Not modelled: scratch buffers a backend uses inside an op (the q8_1 copy of the activations that
the quantized matrix kernels write and read back, split-K partial sums), cache-line granularity of
strided or gathered access, and re-reads when a tensor does not fit in the last-level cache. The
model is the compulsory traffic: measured DRAM bytes can be above it (spills, granularity) or below
it (a tensor still resident in L2 from the previous op).

**FLOP model.** One FLOP is one floating-point add, subtract, multiply, divide, min/max, or
elementary-function evaluation (exp, tanh, sqrt, sin) on one element; a multiply-add is 2 FLOP
(the convention of dense linear algebra, where an m×r by r×n product costs 2·m·n·r flops: Golub &
Van Loan, *Matrix Computations*, ch. 1; and of the roofline model: Williams, Waterman & Patterson,
"Roofline: an insightful visual performance model for multicore architectures", CACM 52(4), 2009).
Index-producing comparisons (``ARGSORT``, ``TOP_K``, ``ARGMAX``), data movement and type conversion
count 0; per-row scalars (a norm's ``1/sqrt(mean + eps)``) and dequantization of quantized weights
are not counted. A fused group's FLOPs are the sum of its nodes'. Per node (``n`` = elements of the node's output):

* ``MUL_MAT``: ``2·M·N·K`` per matrix (M·N outputs, K multiply-adds each), times the batch dims:
  ``2·K·n`` with K = src0.ne0, since the output is ``[N, M, ne2, ne3]``.
* ``MUL_MAT_ID``: ``2·M·top_k·N·K`` (each of M tokens through top_k experts): ``2·K·n``, output
  ``[N, top_k, M]``. Independent of how many distinct experts were touched.
* ``FLASH_ATTN_EXT``: the two matrix products, ``QKᵀ`` then ``PV``:
  ``2·n_q·n_kv·d_k·heads + 2·n_q·n_kv·d_v·heads``, read from q = src[0] ``[d_k, n_q, heads, ne3]``
  (heads = ne2·ne3, every query head counted even when K/V heads are shared), k = src[1]
  ``[d_k, n_kv, ...]``, v = src[2] ``[d_v, n_kv, ...]``. All n_kv positions of the K/V views are
  counted, masked ones included (no causal halving): an upper bound, since kernels may skip
  fully-masked tiles. The softmax inside is not counted.
* Element-wise ``ADD``, ``ADD1``, ``ADD_ID``, ``SUB``, ``MUL``, ``DIV``, ``SCALE`` and unary ops
  (``SILU``, ``GELU``, ``EXP``, ``SQR``, ``CLAMP``...): 1 per output element (an activation counted
  as one function evaluation); ``SCALE`` with a non-zero bias (``x·s + b``) 2.
* GLU ops (``SWIGLU``, ``GEGLU``, ``REGLU``, ``GEGLU_ERF``, ``GEGLU_QUICK``, ``SWIGLU_OAI``):
  2 per output element, the activation of one half and the multiply by the other.
* ``RMS_NORM`` 3 per element (square and accumulate = 1 multiply-add, then scale), ``L2_NORM`` 3,
  ``NORM`` 5 (accumulate, subtract the mean, square and accumulate, scale), ``GROUP_NORM`` 5;
  ``SOFT_MAX`` 6 (scale, max, subtract, exp, accumulate, normalise) plus 2 with a mask
  (``+= slope·mask``). Counted from the reference loops of ggml's CPU backend
  (``ggml/src/ggml-cpu/ops.cpp``: ``ggml_compute_forward_rms_norm_f32``, ``..._norm_f32``,
  ``..._soft_max_f32``).
* ``ROPE``: 3 per rotated element: each pair becomes ``(x0·cos − x1·sin, x0·sin + x1·cos)``, 4
  multiplies and 2 adds per 2 elements; only the first ``n_dims`` (op_params[1]) of each row rotate,
  the rest are copied. The sin/cos table (per position, shared by all heads) is not counted.
* ``SUM``, ``SUM_ROWS``, ``MEAN``: 1 per input element.
* ``GET_ROWS``, ``SET_ROWS``, ``CPY``, ``DUP``, ``CONT``, ``CONCAT``, ``PAD``, ``REPEAT``, ``SET``,
  ``ARGSORT``, ``TOP_K``, ``ARGMAX`` and no-kernel nodes: 0.
* Any other op: NaN, with a ``no FLOP model for <OP>`` note.
"""

from __future__ import annotations

import bisect
import functools
import json
import math
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import pandas as pd
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

from ..records import OpMetadata

#: Columns of :func:`model_bytes`.
BYTE_COLUMNS = ("invocation", "model_read_bytes", "model_write_bytes", "model_note")
#: Columns of :func:`model_flops`.
FLOP_COLUMNS = ("invocation", "flops", "flops_note")
#: Columns of :func:`model_invocations`.
MODEL_COLUMNS = ("invocation", "model_read_bytes", "model_write_bytes", "flops", "model_note")

#: Nodes that launch no kernel (upstream ``ggml_cuda_is_view_or_noop``).
NO_KERNEL_OPS = frozenset({"NONE", "VIEW", "RESHAPE", "PERMUTE", "TRANSPOSE"})

#: Store ops: an operand sharing the output's storage is the destination, written and not read.
STORE_OPS = frozenset({"SET_ROWS", "CPY", "DUP", "SET"})
#: The operand index that *is* the destination, whatever the storage ids say (ggml.c).
_DESTINATION_OPERAND = {"SET_ROWS": 2, "CPY": 1}

_BINARY_OPS = frozenset({"ADD", "ADD1", "ADD_ID", "SUB", "MUL", "DIV"})
_UNARY_OPS = frozenset(
    {
        # GGML_OP_UNARY nodes are named by their unary op (ggml_op_desc)
        "ABS",
        "SGN",
        "NEG",
        "STEP",
        "TANH",
        "ELU",
        "RELU",
        "SIGMOID",
        "GELU",
        "GELU_QUICK",
        "GELU_ERF",
        "SILU",
        "HARDSWISH",
        "HARDSIGMOID",
        "EXP",
        "EXPM1",
        "SOFTPLUS",
        "XIELU",
        "FLOOR",
        "CEIL",
        "ROUND",
        "TRUNC",
        # element-wise ops of their own
        "SQR",
        "SQRT",
        "LOG",
        "SIN",
        "COS",
        "CLAMP",
        "LEAKY_RELU",
    }
)
_GLU_OPS = frozenset({"REGLU", "GEGLU", "SWIGLU", "SWIGLU_OAI", "GEGLU_ERF", "GEGLU_QUICK"})
#: FLOP per element of the output (norms) or, for SOFT_MAX, without a mask.
_NORM_FLOPS_PER_ELEMENT = {"RMS_NORM": 3, "L2_NORM": 3, "NORM": 5, "GROUP_NORM": 5, "SOFT_MAX": 6}
_SOFT_MAX_MASK_FLOPS = 2
_ROPE_FLOPS_PER_ELEMENT = 3
_REDUCE_OPS = frozenset({"SUM", "SUM_ROWS", "MEAN"})
_ZERO_FLOP_OPS = frozenset(
    {
        "GET_ROWS",
        "SET_ROWS",
        "CPY",
        "DUP",
        "CONT",
        "CONCAT",
        "PAD",
        "REPEAT",
        "SET",
        "ARGSORT",
        "TOP_K",
        "ARGMAX",
    }
)


# --------------------------------------------------------------------------- tensor sizes


def tensor_bytes(ggml_type: str, ne: Sequence[int]) -> int:
    """Bytes of a contiguous tensor of a ggml type and shape.

    Block sizes come from gguf (``gguf.constants.GGML_QUANT_SIZES``: ``(weights per block,
    bytes per block)``, e.g. Q4_K 256 weights in 144 bytes, Q8_0 32 in 34, f32 1 in 4), which
    mirrors ``ggml_type_traits`` of ggml.

    Args:
        ggml_type: a ggml type name as ``ggml_type_name`` writes it (``f32``, ``q4_K``, ``i32``);
            case-insensitive.
        ne: the shape in ggml order (ne0 = elements per row first), 1 to 4 non-negative ints.

    Returns:
        ``ne0 / block · block bytes · ne1 · ne2 · ne3``, in bytes.

    Raises:
        ValueError: the type is not a ggml type gguf knows (the message names it), the shape is
            empty or negative, or ne0 is not a whole number of blocks.
    """
    try:
        qtype = GGMLQuantizationType[str(ggml_type).strip().upper()]
        block, block_bytes = GGML_QUANT_SIZES[qtype]
    except KeyError:
        raise ValueError(f"unknown ggml type {ggml_type!r}") from None
    dims = [int(d) for d in ne]
    if not dims or len(dims) > 4 or any(d < 0 for d in dims):
        raise ValueError(f"invalid {ggml_type} shape {list(ne)}: expected 1 to 4 non-negative sizes")
    if dims[0] % block:
        raise ValueError(f"{ggml_type} rows of {dims[0]} elements are not whole blocks of {block}")
    return dims[0] // block * block_bytes * math.prod(dims[1:])


def _nelements(ne: Sequence[int] | None) -> int | None:
    return None if ne is None else math.prod(ne)


# --------------------------------------------------------------------------- metadata -> records


class _Tensor(NamedTuple):
    """One operand of a node: type, shape, the producer's byte count and ids (None: not recorded).

    A tuple of atoms, which Python's garbage collector stops tracking: captures hold millions.
    """

    ggml_type: str | None
    ne: tuple[int, ...] | None
    recorded_bytes: int | None
    tensor_id: int | None
    storage_id: int | None

    @property
    def absent(self) -> bool:
        """A null src slot (``[0,0,0,0]`` with no type) or an empty tensor: nothing to move."""
        n = _nelements(self.ne)
        return n == 0 or (self.ggml_type is None and self.ne is None and self.recorded_bytes is None)


_NO_TENSOR = _Tensor(None, None, None, None, None)


@dataclass(slots=True)
class _Node:
    index: int
    op: str
    dst: _Tensor
    srcs: list[_Tensor]
    op_params: tuple[int, ...]
    top_k: int | None

    @property
    def launches(self) -> bool:
        """False for view/no-op nodes and empty outputs (no kernel, no traffic)."""
        return self.op not in NO_KERNEL_OPS and _nelements(self.dst.ne) != 0

    def src(self, j: int) -> _Tensor:
        return self.srcs[j] if j < len(self.srcs) else _NO_TENSOR


@dataclass(slots=True)
class _Invocation:
    invocation: int
    nodes: list[_Node]
    experts_used: int | None
    out_storage_id: int | None


def _opt_int(value: Any) -> int | None:
    if value is None or value is pd.NA:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    return int(value)


def _shape(text: Any) -> tuple[int, ...] | None:
    """A JSON list of ints (``ne``, ``op_params``) as a tuple; None when absent or not such a list."""
    return _parse_ints(text) if isinstance(text, str) else None


@functools.lru_cache(maxsize=4096)
def _parse_ints(text: str) -> tuple[int, ...] | None:
    value = json.loads(text)
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return None
    return tuple(value)


def _column(df: pd.DataFrame, name: str) -> list[Any]:
    """A column as Python values, missing ones as None (nullable Int64 -> int or None)."""
    if name not in df.columns:
        return [None] * len(df)
    col = df[name]
    return list(col.astype(object).where(col.notna(), None).tolist())


def _invocations(meta: OpMetadata) -> list[_Invocation]:
    """Rebuild each invocation's nodes and operands from the three frames of ``meta``."""
    o = meta.operands
    srcs: dict[tuple[int, int], dict[int, _Tensor]] = {}
    dsts: dict[tuple[int, int], _Tensor] = {}
    for inv, node_index, role, j, ggml_type, ne, nbytes, tid, sid in zip(
        *(_column(o, c) for c in ("invocation", "node_index", "role", "operand_index", "ggml_type", "ne")),
        *(_column(o, c) for c in ("bytes", "tensor_id", "storage_id")),
        strict=True,
    ):
        if role not in ("src", "dst") or node_index is None:
            continue
        t = _Tensor(ggml_type or None, _shape(ne), _opt_int(nbytes), _opt_int(tid) or None, _opt_int(sid) or None)
        key = (int(inv), int(node_index))
        if role == "dst":
            dsts[key] = t
        else:
            srcs.setdefault(key, {})[int(j)] = t
    nodes: dict[int, list[_Node]] = {}
    n = meta.nodes
    for inv, node_index, op, op_params, top_k in zip(
        *(_column(n, c) for c in ("invocation", "node_index", "ggml_op", "op_params", "top_k")), strict=True
    ):
        key = (int(inv), int(node_index))
        given = srcs.get(key, {})
        nodes.setdefault(key[0], []).append(
            _Node(
                index=key[1],
                op=str(op),
                dst=dsts.get(key, _NO_TENSOR),
                srcs=[given.get(j, _NO_TENSOR) for j in range(max(given, default=-1) + 1)],
                op_params=_shape(op_params) or (),
                top_k=_opt_int(top_k) or None,
            )
        )
    out = []
    ops = meta.ops
    for inv, used, tpe, out_sid in zip(
        *(_column(ops, c) for c in ("invocation", "experts_used", "tokens_per_expert", "out_storage_id")), strict=True
    ):
        experts_used = _opt_int(used) or None
        if experts_used is None and isinstance(tpe, str):
            experts_used = sum(1 for c in _shape(tpe) or () if c > 0) or None
        group = sorted(nodes.get(int(inv), []), key=lambda node: node.index)
        out.append(_Invocation(int(inv), group, experts_used, _opt_int(out_sid) or None))
    return out


# --------------------------------------------------------------------------- byte model


@dataclass
class _Flow:
    """What one invocation reads and writes, before the cross-invocation escape check."""

    reads: dict[object, int | None] = field(default_factory=dict)  # dedup key -> bytes
    writes: dict[object, int | None] = field(default_factory=dict)  # storage (or node) -> bytes
    internal: dict[int, int | None] = field(default_factory=dict)  # storage kept on chip -> bytes
    external_reads: set[int] = field(default_factory=set)  # storages read from outside the group
    written: set[int] = field(default_factory=set)  # storages the group writes
    notes: list[str] = field(default_factory=list)


def _size(t: _Tensor, what: str, notes: list[str]) -> int | None:
    """Logical bytes of an operand; the producer's byte count when gguf cannot size it."""
    try:
        if t.ggml_type is None or t.ne is None:
            raise ValueError(f"{what}: no type or shape recorded")
        return tensor_bytes(t.ggml_type, t.ne)
    except ValueError as exc:
        if t.recorded_bytes is not None:
            notes.append(f"{exc}; used the recorded size of {what}")
            return t.recorded_bytes
        notes.append(f"{exc}; size of {what} unknown")
        return None


def _read_size(inv: _Invocation, node: _Node, j: int, notes: list[str]) -> int | None:
    """Bytes node ``node`` reads from its src ``j``: whole tensor, gathered rows, or routed experts."""
    t = node.srcs[j]
    full = _size(t, f"{node.op} src[{j}]", notes)
    if full is None or t.ne is None:
        return full
    if node.op == "GET_ROWS" and j == 0 and node.dst.ne is not None and t.ggml_type is not None:
        rows = math.prod(node.dst.ne[1:])
        try:
            return min(full, rows * tensor_bytes(t.ggml_type, t.ne[:1]))
        except ValueError:
            return full
    if node.op == "MUL_MAT_ID" and j == 0 and len(t.ne) > 2 and t.ne[2] > 0:
        n_experts = t.ne[2]
        used = inv.experts_used
        if used is None:
            src1, ids = node.src(1), node.src(2)
            tokens = src1.ne[2] if src1.ne is not None and len(src1.ne) > 2 else None
            top_k = (ids.ne[0] if ids.ne else None) or node.top_k
            if tokens is None or not top_k:
                notes.append("experts_used unknown and M or top_k missing: all expert weights counted (upper bound)")
                return full
            used = min(tokens * top_k, n_experts)
            notes.append(
                f"experts_used unknown (routing not read back): expert weights bounded by "
                f"min(M*top_k, n_experts) = min({tokens}*{top_k}, {n_experts}) = {used} of {n_experts} experts"
            )
        return full // n_experts * min(used, n_experts)
    return full


def _write_size(node: _Node, notes: list[str]) -> int | None:
    """Bytes a kernel node writes: its output, or for SET_ROWS only the rows it stores."""
    if node.op == "SET_ROWS":
        rows = node.src(0)
        if rows.ne is not None and node.dst.ggml_type is not None and node.dst.ne is not None:
            try:
                return tensor_bytes(node.dst.ggml_type, (node.dst.ne[0], *rows.ne[1:]))
            except ValueError as exc:
                notes.append(f"SET_ROWS rows: {exc}; counted the whole destination")
    return _size(node.dst, f"{node.op} dst", notes)


def _is_destination(node: _Node, j: int) -> bool:
    """Whether src ``j`` of a store op is the buffer it writes into (not read)."""
    if _DESTINATION_OPERAND.get(node.op) == j:
        return True
    t = node.srcs[j]
    return node.op in STORE_OPS and t.storage_id is not None and t.storage_id == node.dst.storage_id


_NOTE_STORAGE_DEDUP = "no tensor ids: reads deduplicated by storage id, type and shape"
_NOTE_NO_DEDUP = "no tensor or storage ids: reads not deduplicated"


def _flow(inv: _Invocation) -> _Flow:
    flow = _Flow()
    produced: dict[int, int] = {}  # storage -> index of the first kernel node of the group writing it
    consumed: set[int] = set()  # storages produced in the group and read by a later kernel node
    preexisting: set[int] = set()  # storages written in place (a cache): the write always persists
    kernel_nodes = [n for n in inv.nodes if n.launches]
    for node in kernel_nodes:
        for j, t in enumerate(node.srcs):
            sid = t.storage_id
            if sid is not None and sid == node.dst.storage_id:
                preexisting.add(sid)
            if t.absent or _is_destination(node, j):
                continue
            if sid is not None and sid in produced and produced[sid] < node.index:
                consumed.add(sid)  # produced inside the group: read on chip
                continue
            if sid is not None:
                flow.external_reads.add(sid)
            key: object
            if t.tensor_id is not None:
                key = t.tensor_id
            elif sid is not None:
                key = ("storage", sid, t.ggml_type, t.ne)
                flow.notes.append(_NOTE_STORAGE_DEDUP)
            else:
                key = ("operand", node.index, j)
                flow.notes.append(_NOTE_NO_DEDUP)
            size = _read_size(inv, node, j, flow.notes)
            if key not in flow.reads or _greater(size, flow.reads[key]):
                flow.reads[key] = size
        if node.dst.storage_id is not None:
            produced.setdefault(node.dst.storage_id, node.index)
    last = inv.nodes[-1].dst.storage_id if inv.nodes else None
    out_sid = last if last is not None else inv.out_storage_id
    for node in kernel_nodes:
        sid = node.dst.storage_id
        size = _write_size(node, flow.notes)
        if sid is not None and sid in consumed and sid != out_sid and sid not in preexisting:
            if sid not in flow.internal or _greater(size, flow.internal[sid]):
                flow.internal[sid] = size
            continue
        key = sid if sid is not None else ("node", node.index)
        if key not in flow.writes or _greater(size, flow.writes[key]):
            flow.writes[key] = size
        if sid is not None:
            flow.written.add(sid)
    flow.written.update(flow.internal)
    return flow


def _greater(a: int | None, b: int | None) -> bool:
    """``a > b`` where None (unknown) wins: an unknown size must not be replaced by a known one."""
    return a is None or (b is not None and a > b)


def _total(values: Iterable[int | None]) -> int | None:
    total = 0
    for v in values:
        if v is None:
            return None
        total += v
    return total


def _dedup(notes: Iterable[str]) -> str:
    return "; ".join(dict.fromkeys(n for n in notes if n))


def model_bytes(meta: OpMetadata) -> pd.DataFrame:
    """Modelled DRAM read and write bytes of each op invocation (rules in the module docstring).

    Args:
        meta: op metadata as :func:`rocroof.capture.readers.ggml_meta.read_metadata` returns it.

    Returns:
        One row per ``meta.ops`` row, in invocation order: ``invocation`` (int64),
        ``model_read_bytes`` and ``model_write_bytes`` (``Int64`` bytes; ``<NA>`` when an
        operand's size cannot be determined), ``model_note`` (str, ``""`` when nothing to flag:
        e.g. the MoE expert bound, an unknown type sized from the recorded bytes).
    """
    return _bytes_frame(_invocations(meta))


def _bytes_frame(invs: list[_Invocation]) -> pd.DataFrame:
    """Byte rows of the invocations, in their order (which is execution order)."""
    # storage -> positions of the invocations that read or write it, and whether each reads it
    events: dict[int, tuple[list[int], list[bool]]] = {}
    reads: list[int | None] = []
    writes: list[int | None] = []
    notes: list[str] = []
    internal: list[tuple[int, int, int | None]] = []  # (position, storage, bytes) kept on chip
    for pos, inv in enumerate(invs):
        flow = _flow(inv)
        for sid in flow.external_reads | flow.written:
            positions, is_read = events.setdefault(sid, ([], []))
            positions.append(pos)
            is_read.append(sid in flow.external_reads)
        reads.append(_total(flow.reads.values()))
        writes.append(_total(flow.writes.values()))
        notes.append(_dedup(flow.notes))
        internal += [(pos, sid, size) for sid, size in flow.internal.items()]
    # a group-internal storage escapes when the next invocation naming it reads it (the fused kernel
    # must have stored it) rather than writing it anew (storage ids are tensor addresses, which a
    # later graph reuses)
    for pos, sid, size in internal:
        positions, is_read = events[sid]
        k = bisect.bisect_right(positions, pos)
        if k < len(positions) and is_read[k]:
            w = writes[pos]
            writes[pos] = None if w is None or size is None else w + size
    return _frame(
        {
            "invocation": [inv.invocation for inv in invs],
            "model_read_bytes": reads,
            "model_write_bytes": writes,
            "model_note": notes,
        },
        BYTE_COLUMNS,
    )


# --------------------------------------------------------------------------- FLOP model


def _float_param(node: _Node, k: int) -> float:
    """op_params[k] as the float its int32 bits encode (ggml stores float params bit-cast)."""
    if k >= len(node.op_params):
        return 0.0
    return float(struct.unpack("<f", struct.pack("<i", node.op_params[k]))[0])


def _node_flops(node: _Node) -> tuple[float | None, str]:
    """FLOPs of one node (formulas in the module docstring), or None with the reason."""
    op = node.op
    if op in NO_KERNEL_OPS or op in _ZERO_FLOP_OPS:
        return 0.0, ""
    n = _nelements(node.dst.ne)
    if n is None:
        return None, f"{op}: output shape not recorded"
    if op in ("MUL_MAT", "MUL_MAT_ID"):
        a = node.src(0).ne
        if not a:
            return None, f"{op}: src[0] shape not recorded"
        return 2.0 * a[0] * n, ""
    if op == "FLASH_ATTN_EXT":
        q, k, v = node.src(0).ne, node.src(1).ne, node.src(2).ne
        if q is None or k is None or v is None or len(q) < 2 or len(k) < 2:
            return None, f"{op}: q/k/v shapes not recorded"
        n_q, heads, n_kv = q[1], math.prod(q[2:]), k[1]
        return 2.0 * n_q * n_kv * heads * (q[0] + v[0]), ""
    if op in _BINARY_OPS or op in _UNARY_OPS:
        return float(n), ""
    if op == "SCALE":
        return float(n) * (2 if _float_param(node, 1) != 0.0 else 1), ""
    if op in _GLU_OPS:
        return 2.0 * n, ""
    if op in _NORM_FLOPS_PER_ELEMENT:
        per = _NORM_FLOPS_PER_ELEMENT[op]
        if op == "SOFT_MAX" and not node.src(1).absent:
            per += _SOFT_MAX_MASK_FLOPS
        return float(per) * n, ""
    if op == "ROPE":
        ne = node.dst.ne or (0,)
        n_dims = node.op_params[1] if len(node.op_params) > 1 else 0
        rotated = n_dims if 0 < n_dims <= ne[0] else ne[0]
        return (float(_ROPE_FLOPS_PER_ELEMENT) * (n // ne[0]) * rotated if ne[0] else 0.0), ""
    if op in _REDUCE_OPS:
        m = _nelements(node.src(0).ne)
        return (float(m), "") if m is not None else (None, f"{op}: src[0] shape not recorded")
    return None, f"no FLOP model for {op}"


def model_flops(meta: OpMetadata) -> pd.DataFrame:
    """FLOPs of each op invocation from its shapes (formulas and sources in the module docstring).

    Args:
        meta: op metadata as :func:`rocroof.capture.readers.ggml_meta.read_metadata` returns it.

    Returns:
        One row per ``meta.ops`` row, in invocation order: ``invocation`` (int64), ``flops``
        (float64, FLOP; a fused group sums its nodes; NaN when a node has no FLOP model or its
        shapes are missing) and ``flops_note`` (str, ``""`` or why ``flops`` is NaN).
    """
    return _flops_frame(_invocations(meta))


def _flops_frame(invs: list[_Invocation]) -> pd.DataFrame:
    """FLOP rows of the invocations, in their order."""
    flops: list[float] = []
    notes: list[str] = []
    for inv in invs:
        total: float | None = 0.0
        why = []
        for node in inv.nodes:
            value, note = _node_flops(node)
            why.append(note)
            total = None if total is None or value is None else total + value
        flops.append(math.nan if total is None else total)
        notes.append(_dedup(why))
    return _frame(
        {"invocation": [inv.invocation for inv in invs], "flops": flops, "flops_note": notes},
        FLOP_COLUMNS,
    )


# --------------------------------------------------------------------------- together


def model_invocations(meta: OpMetadata) -> pd.DataFrame:
    """Modelled DRAM bytes and FLOPs of each op invocation: what the pipeline stores per op.

    Args:
        meta: op metadata as :func:`rocroof.capture.readers.ggml_meta.read_metadata` returns it.

    Returns:
        One row per ``meta.ops`` row, in invocation order, with :data:`MODEL_COLUMNS`:
        ``invocation`` (int64), ``model_read_bytes``, ``model_write_bytes`` (``Int64`` bytes,
        ``<NA>`` when unknown), ``flops`` (float64 FLOP, NaN when unknown), ``model_note`` (str:
        the byte and FLOP notes joined by ``"; "``, ``""`` when nothing to flag).
    """
    invs = _invocations(meta)
    b = _bytes_frame(invs)
    f = _flops_frame(invs)  # same invocations, same order
    notes = [_dedup((x, y)) for x, y in zip(b["model_note"], f["flops_note"], strict=True)]
    return _frame(
        {
            "invocation": b["invocation"].tolist(),
            "model_read_bytes": b["model_read_bytes"].tolist(),
            "model_write_bytes": b["model_write_bytes"].tolist(),
            "flops": f["flops"].tolist(),
            "model_note": notes,
        },
        MODEL_COLUMNS,
    )


def _frame(data: dict[str, list[Any]], columns: tuple[str, ...]) -> pd.DataFrame:
    """Columns as a frame with the output dtypes (also when empty)."""
    out = {}
    for c in columns:
        if c == "invocation":
            out[c] = pd.Series(data[c], dtype="int64")
        elif c in ("model_read_bytes", "model_write_bytes"):
            out[c] = pd.Series(pd.array(data[c], dtype="Int64"))
        elif c == "flops":
            out[c] = pd.Series(data[c], dtype="float64")
        else:
            out[c] = pd.Series(data[c], dtype=object).astype(str)
    return pd.DataFrame(out, columns=list(columns))
