"""The op dependency graph of a ggml run: edges, graph evaluations, layers and blocks, critical path.

Pure functions of :class:`~rocroof.records.OpMetadata` (the fork's ``GGML_ROOFLINE_OUT`` rows or
rocroof's sidecar, read by :func:`rocroof.capture.readers.ggml_meta.read_metadata`). Topology comes from
the row keys added by the fork's PR #66 (``shared/reference/llamacpp-roofline.md`` §1.6–1.7):
``out_storage_id`` (the view root of the output of the group's last node), ``in_storage_ids``
(the view roots the group reads and did not write itself) and ``in_names`` (their tensor
names). A *storage id* is the address of the ``ggml_tensor`` at the root of a view chain, not a
device address: it names one tensor object of one process.

**Edges** (:func:`build_edges`). Invocations are walked in invocation (launch) order. Each one
first reads its inputs, each from the *last writer so far* of that storage id (one edge per
input with a writer), then becomes the last writer of the storages it writes: its
``out_storage_id`` and the output of every node of its fused group that is not a view
(``VIEW``, ``RESHAPE``, ``PERMUTE``, ``TRANSPOSE``, ``NONE`` write nothing). "Last writer wins"
is PR #66's rule: the same tensor object is written again by every graph evaluation, and an
in-place op (whose output is a view of its input) writes the storage it reads, so it gets an
edge from the previous writer and becomes the writer for later readers. Registering the
intermediate nodes of a fused group matters: a MoE router group
(``SOFT_MAX+…+ARGSORT+VIEW+GET_ROWS+…``) writes the expert ids (``ffn_moe_argsort``) in an
inner node, and the ``MUL_MAT_ID`` launches read them.

Inputs that no earlier invocation wrote produce **no edge**: model weights, graph inputs the
host copies in (``inp_pos``, ``KQ_mask``, ``CUDA0#embd#0``…, written by memory copies, not by
ops), state written before the capture started (e.g. the KV cache before ``ggml reset``) and
tensors written by ops that launched no kernel (they have no row). Edges can cross graph
evaluations where state persists: the KV-cache ``SET_ROWS`` of one token depends on the previous
token's write of the same cache tensor.

Rows without the topology keys (fork builds before PR #66) fall back to the node-level ids: the
group's inputs are the ``src_storage_ids`` of its nodes that the group did not write before (the
hook's own rule), and its writes are the nodes' ``dst_storage_id``. Such rows carry no tensor
names, so their edges have no ``name``.

**Graph evaluations** (:func:`graph_evaluations`): see there. **Layers and blocks**:
:func:`layer_of`, :func:`part_of`, :func:`classify`, :func:`group_blocks`. **Critical path**:
:func:`critical_path`. **Exports**: :func:`to_json`, :func:`to_dot`.

Units: times in ns (GPU time, e.g. the sum of an invocation's kernel durations), bytes in bytes.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any, Literal

import pandas as pd

from ..records import OpMetadata

#: Columns of :func:`build_edges` (name: dtype).
EDGE_COLUMNS: dict[str, str] = {
    "src_invocation": "Int64",
    "dst_invocation": "Int64",
    "storage_id": "Int64",
    "name": "object",
}

#: Columns of :func:`classify` (name: dtype).
CLASSIFY_COLUMNS: dict[str, str] = {
    "invocation": "Int64",
    "evaluation": "Int64",
    "op": "object",
    "op_list": "object",
    "name": "object",
    "out_name": "object",
    "layer": "Int64",
    "layer_source": "object",
    "part": "object",
}

#: ggml ops whose output is a view of their input: they write no memory (ggml-cuda's
#: ``ggml_cuda_is_view_or_noop``).
VIEW_OPS = frozenset({"VIEW", "RESHAPE", "PERMUTE", "TRANSPOSE", "NONE"})

#: Node-name prefixes (after the ``-<layer>`` and `` (view)``-like suffixes are cut) and the part
#: of the transformer layer they belong to, first match wins. From the ``cb(tensor, name, il)``
#: names of llama.cpp's graph builders (``src/llama-graph.cpp``, ``src/models/*.cpp``):
#: attention ``attn_norm``, ``Qcur``/``Kcur``/``Vcur`` (also ``*_normed``), ``kq``,
#: ``kq_soft_max``, ``kqv``, ``kqv_out``, ``attn_out``, the KV cache views ``cache_k_l<n>`` /
#: ``cache_v_l<n>``, and ``ffn_inp`` (the residual add that closes attention:
#: ``ffn_inp = attn_out + inpSA``); FFN ``ffn_norm``, ``ffn_gate``, ``ffn_up``, ``ffn_swiglu``,
#: ``ffn_out`` and ``l_out`` (the residual add that closes the FFN); MoE ``ffn_moe_*``
#: (router, top-k, experts, weighting) and shared experts ``ffn_shexp*``. Token mixers of
#: non-attention layers (Mamba ``ssm_*``, RWKV ``time_mix*``/``wkv``) count as ``attention``
#: and RWKV ``channel_mix*`` as ``ffn``: the two halves of a layer.
PART_PREFIXES: tuple[tuple[str, str], ...] = (
    ("ffn_inp", "attention"),
    ("ffn_moe", "moe"),
    ("ffn_shexp", "moe"),
    ("ffn_exp_probs", "moe"),
    ("ffn_", "ffn"),
    ("l_out", "ffn"),
    ("channel_mix", "ffn"),
    ("attn_", "attention"),
    ("Qcur", "attention"),
    ("Kcur", "attention"),
    ("Vcur", "attention"),
    ("kq", "attention"),
    ("cache_", "attention"),
    ("k_cache", "attention"),
    ("v_cache", "attention"),
    ("q_pe", "attention"),
    ("k_pe", "attention"),
    ("q_nope", "attention"),
    ("kv_", "attention"),
    ("wkv", "attention"),
    ("time_mix", "attention"),
    ("ssm_", "attention"),
)

#: ggml ops whose part does not depend on the name.
PART_BY_OP: dict[str, str] = {"FLASH_ATTN_EXT": "attention", "MUL_MAT_ID": "moe"}

_SUFFIX_RE = re.compile(r"\s*\([^()]*\)$")
_LAYER_RE = re.compile(r"-(\d+)$")
_CACHE_LAYER_RE = re.compile(r"^cache_[A-Za-z]+_l(\d+)$")
_NODE_RE = re.compile(r"^node_(\d+)$")


def _base(name: str) -> str:
    """``name`` without the suffixes ggml appends to derived tensors (`` (view)``, `` (copy of x)``...)."""
    prev = None
    while prev != name:
        prev, name = name, _SUFFIX_RE.sub("", name)
    return name


def layer_of(name: str | None) -> int | None:
    """The layer number in a llama.cpp node name, or None.

    llama.cpp names per-layer tensors ``<name>-<il>`` (``cb(cur, "ffn_out", il)`` gives
    ``ffn_out-12``) and the KV cache tensors ``cache_k_l<il>``/``cache_v_l<il>``; ggml appends
    `` (view)``, `` (permuted)``, `` (reshaped)``, `` (transposed)``, `` (cont)``, `` (copy of …)``
    to derived tensors, which are cut first (``cache_v_l3 (view)`` is layer 3). Unnamed nodes
    (``node_<i>``), graph inputs (``CUDA0#inp_pos#0``) and tensors outside the layers (``norm``,
    ``result_output``) have none. This accepts more than the store's ``layer`` column, which
    reads only a bare ``-<n>`` suffix, and agrees with it wherever that one has a number.
    """
    if not name:
        return None
    base = _base(name)
    m = _LAYER_RE.search(base) or _CACHE_LAYER_RE.match(base)
    return int(m.group(1)) if m else None


def part_of(name: str | None) -> str | None:
    """The part of a transformer layer a node name belongs to (``attention``, ``ffn``, ``moe``), or None.

    Matches :data:`PART_PREFIXES` against the name without its suffixes. ``norm-<n>`` (the
    ``RMS_NORM`` head of both the attention and the FFN norm) and unnamed nodes give None:
    :func:`classify` resolves them from the output name and the neighbours.
    """
    if not name:
        return None
    base = _LAYER_RE.sub("", _base(name))
    for prefix, part in PART_PREFIXES:
        if base.startswith(prefix):
            return part
    return None


def _node_index(name: str | None) -> int | None:
    """The graph position in ggml's default name ``node_<i>`` (``ggml_visit_parents``), or None."""
    m = _NODE_RE.match(name) if name else None
    return int(m.group(1)) if m else None


def _int_or_none(value: Any) -> int | None:
    return None if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)) else int(value)


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _topology(meta: OpMetadata) -> list[tuple[int, list[tuple[int, str | None]], list[int]]]:
    """Per invocation in order: ``(invocation, reads [(storage_id, name)], writes [storage_id])``."""
    reads: dict[int, list[tuple[int, str | None]]] = {}
    srcs: dict[int, dict[int, list[int]]] = {}
    dsts: dict[int, list[tuple[str, int | None]]] = {}
    ops = meta.operands
    for inv, node, role, sid, name in zip(
        ops["invocation"], ops["node_index"], ops["role"], ops["storage_id"], ops["name"], strict=True
    ):
        sid_i = _int_or_none(sid)
        if role == "in" and sid_i is not None:
            reads.setdefault(int(inv), []).append((sid_i, _str_or_none(name)))
        elif role == "src" and sid_i is not None:
            srcs.setdefault(int(inv), {}).setdefault(int(node), []).append(sid_i)
    nodes = meta.nodes
    for inv, op, sid in zip(nodes["invocation"], nodes["ggml_op"], nodes["dst_storage_id"], strict=True):
        dsts.setdefault(int(inv), []).append((str(op), _int_or_none(sid)))
    out: list[tuple[int, list[tuple[int, str | None]], list[int]]] = []
    for inv_v, out_v in zip(meta.ops["invocation"], meta.ops["out_storage_id"], strict=True):
        inv = int(inv_v)
        out_sid = _int_or_none(out_v)
        node_dsts = dsts.get(inv, [])
        writes = [sid for op, sid in node_dsts if sid is not None and op not in VIEW_OPS]
        if out_sid is not None:
            writes.append(out_sid)
            inputs = reads.get(inv, [])
        elif inv in reads:
            inputs = reads[inv]
        else:
            # before PR #66: the group's inputs are the sources it did not write itself (the hook's rule)
            inputs, written = [], set()
            for k, (_, dst) in enumerate(node_dsts):
                for sid in srcs.get(inv, {}).get(k, []):
                    # 0 stands for an absent middle source (``src[j] == NULL``)
                    if sid != 0 and sid not in written and sid not in (s for s, _ in inputs):
                        inputs.append((sid, None))
                if dst is not None:
                    written.add(dst)
        out.append((inv, inputs, writes))
    return out


def build_edges(meta: OpMetadata) -> pd.DataFrame:
    """Producer → consumer edges between op invocations (the rule is in the module docstring).

    Args:
        meta: op metadata of one process (fork rows or rocroof's sidecar).

    Returns:
        One row per (consumer input, its last writer), ordered by ``dst_invocation`` then input
        position; columns :data:`EDGE_COLUMNS`: ``src_invocation`` (the producer),
        ``dst_invocation`` (the consumer; always greater), ``storage_id`` (the storage read, signed
        64-bit as the reader stores ids), ``name`` (the tensor name the consumer's ``in_names``
        gives the storage, or None). Inputs without a writer give no row.
    """
    last: dict[int, int] = {}
    rows: list[tuple[int, int, int, str | None]] = []
    for inv, reads, writes in _topology(meta):
        for sid, name in reads:
            src = last.get(sid)
            if src is not None and src != inv:
                rows.append((src, inv, sid, name))
        for sid in writes:
            last[sid] = inv
    return pd.DataFrame(
        {
            "src_invocation": pd.array([r[0] for r in rows], dtype="Int64"),
            "dst_invocation": pd.array([r[1] for r in rows], dtype="Int64"),
            "storage_id": pd.array([r[2] for r in rows], dtype="Int64"),
            "name": pd.Series([r[3] for r in rows], dtype=object),
        }
    )


def graph_evaluations(meta: OpMetadata, *, starts: Iterable[int] | None = None) -> dict[int, int]:
    """Split invocations into graph evaluations; returns ``{invocation: evaluation index}`` (0, 1, ...).

    The metadata names no graph. One *evaluation* is one pass over a ggml graph: one ubatch of
    one ``llama_decode`` (a decoded token, or up to ``n_ubatch`` prompt tokens), including all
    its backend splits. Walking invocations in order, a new evaluation starts at an invocation
    when the graph position its name shows goes *backward*:

    1. its layer (:func:`layer_of`) is lower than the highest layer seen in the current
       evaluation — llama.cpp builds layers in order ``il = 0 .. n_layer-1``, so within one graph
       the layer never decreases and it falls back to the first layer at the next token;
    2. it is an unnamed node ``node_<i>`` whose ``i`` is not above the highest such index seen in
       the current evaluation — ggml numbers unnamed nodes by their position in the graph;
    3. it has a layer and the current evaluation already ran a ``result_*`` node (``result_norm``,
       ``result_output``, ``result_embd_pooled``: the graph's outputs, after every layer) — this
       catches a one-layer model, where rule 1 cannot.

    The node-name sequence alone does not mark a restart: ``norm-0`` heads both the attention
    and the FFN norm of layer 0, and ``Qcur-0`` names both its ``MUL_MAT`` and its ``ROPE``.

    Limits: graphs whose names carry no layers and no ``node_<i>`` (not llama.cpp) stay one
    evaluation; a backend that reorders nodes across layers would split one evaluation; two
    evaluations of a graph that has neither layers, ``node_<i>`` nor ``result_*`` are not told
    apart; graphs evaluated at the same time from several host threads interleave their
    invocations and break the rule. Give ``starts`` when the boundaries are known otherwise.

    Args:
        meta: op metadata.
        starts: invocations that begin an evaluation (e.g. from host-side markers); replaces the
            rule above. The first invocation always begins evaluation 0.

    Returns:
        ``{invocation: evaluation}`` for every invocation of ``meta.ops``.
    """
    invocations = [int(v) for v in meta.ops["invocation"]]
    names = [_str_or_none(v) for v in meta.ops["node_name"]]
    return evaluations_by_name(invocations, names, starts=starts)


def evaluations_by_name(
    invocations: Sequence[int], names: Sequence[str | None], *, starts: Iterable[int] | None = None
) -> dict[int, int]:
    """:func:`graph_evaluations` of invocations and their node names in invocation order.

    The rule needs no op metadata: the node names of the ggml ranges (``ggml:<OP>:<name>:<inv>``)
    are enough, so a capture without the sidecar (and ``rocroof collect`` planning its counter
    sample from the trace pass) splits evaluations the same way.
    """
    out: dict[int, int] = {}
    if starts is not None:
        begin = set(int(s) for s in starts)
        k = -1
        for i, inv in enumerate(invocations):
            k += 1 if i == 0 or inv in begin else 0
            out[inv] = k
        return out
    k = 0
    max_layer: int | None = None
    max_node: int | None = None
    seen_result = False
    for i, (inv, name) in enumerate(zip(invocations, names, strict=True)):
        layer, node = layer_of(name), _node_index(name)
        if i and (
            (layer is not None and max_layer is not None and layer < max_layer)
            or (node is not None and max_node is not None and node <= max_node)
            or (layer is not None and seen_result)
        ):
            k += 1
            max_layer, max_node, seen_result = None, None, False
        if layer is not None:
            max_layer = layer if max_layer is None else max(max_layer, layer)
        if node is not None:
            max_node = node if max_node is None else max(max_node, node)
        seen_result = seen_result or bool(name and _base(name).startswith("result_"))
        out[inv] = k
    return out


def evaluation_members(evaluations: Mapping[int, int]) -> dict[int, list[int]]:
    """``{evaluation: [invocations in order]}`` from :func:`graph_evaluations`' mapping."""
    out: dict[int, list[int]] = {}
    for inv in sorted(evaluations):
        out.setdefault(evaluations[inv], []).append(inv)
    return out


def _out_names(edges: pd.DataFrame) -> dict[int, str]:
    """The name consumers give each producer's output (its earliest named consumer edge)."""
    out: dict[int, str] = {}
    for src, name in zip(edges["src_invocation"], edges["name"], strict=True):
        if isinstance(name, str) and name and int(src) not in out:
            out[int(src)] = name
    return out


def _nearest(values: Sequence[Any], groups: Sequence[Any], *, reverse: bool) -> list[Any]:
    """For each position, the nearest non-None value strictly before it (after it with ``reverse``) in its group.

    Positions whose group is None have no group (None).
    """
    out: list[Any] = [None] * len(values)
    seen: dict[Any, Any] = {}
    order = range(len(values) - 1, -1, -1) if reverse else range(len(values))
    for i in order:
        g = groups[i]
        if g is None:
            continue
        out[i] = seen.get(g)
        if values[i] is not None:
            seen[g] = values[i]
    return out


def classify(
    meta: OpMetadata, edges: pd.DataFrame | None = None, evaluations: Mapping[int, int] | None = None
) -> pd.DataFrame:
    """Each invocation's evaluation, layer and part of the layer (attention / FFN / MoE).

    ``out_name`` is the name the consumers give the invocation's output (``in_names`` of the
    edges): the *last* node of a fused group, which is more telling than the head's name
    (``norm-0`` → ``attn_norm-0`` or ``ffn_norm-0``; ``attn_out-0`` fused with its ``ADD`` →
    ``ffn_inp-0``).

    **Layer**: :func:`layer_of` of the head name (``layer_source`` ``name``), else of
    ``out_name`` (``out_name``), else — for an unnamed op such as ``FLASH_ATTN_EXT`` named
    ``node_21`` — the layer of the nearest named ops before and after it in the same evaluation
    when both agree (``neighbours``); otherwise <NA>.

    **Part** (``attention``, ``ffn``, ``moe``; ``input``/``output`` outside the layers): by
    :data:`PART_PREFIXES` on ``out_name``, then on the head name, then by op
    (:data:`PART_BY_OP`). A ``norm`` op takes the part of the next classified op of its layer (a
    norm opens a block); any other unclassified op the part of the previous one in its layer (it
    continues the block), or the next one at the start of a layer. In a layer with any ``moe``
    op, the ``ffn`` ops (its norm, the shared-expert sum, ``l_out``) become ``moe``: the layer's
    FFN part is a MoE block. Ops without a layer are ``input`` before the evaluation's first
    layered op and ``output`` after its last (``norm`` → ``result_norm``, ``result_output``);
    between two layers, None.

    Args:
        meta: op metadata.
        edges: :func:`build_edges` of ``meta`` (computed when None).
        evaluations: :func:`graph_evaluations` of ``meta`` (computed when None).

    Returns:
        One row per invocation in order, columns :data:`CLASSIFY_COLUMNS`.
    """
    edges = build_edges(meta) if edges is None else edges
    evaluations = graph_evaluations(meta) if evaluations is None else evaluations
    out_names = _out_names(edges)
    invs = [int(v) for v in meta.ops["invocation"]]
    names = [_str_or_none(v) for v in meta.ops["node_name"]]
    ops = [str(v) for v in meta.ops["op"]]
    evals = [evaluations.get(inv) for inv in invs]
    outs = [out_names.get(inv) for inv in invs]
    n = len(invs)
    layers: list[int | None] = []
    sources: list[str | None] = []
    for name, out in zip(names, outs, strict=True):
        by_name, by_out = layer_of(name), layer_of(out)
        layers.append(by_name if by_name is not None else by_out)
        sources.append("name" if by_name is not None else "out_name" if by_out is not None else None)
    prev_layer = _nearest(layers, evals, reverse=False)
    next_layer = _nearest(layers, evals, reverse=True)
    for i in range(n):
        if layers[i] is None and prev_layer[i] is not None and prev_layer[i] == next_layer[i]:
            layers[i], sources[i] = prev_layer[i], "neighbours"
    parts: list[str | None] = [
        part_of(out) or part_of(name) or PART_BY_OP.get(op) for out, name, op in zip(outs, names, ops, strict=True)
    ]
    blocks = [(ev, layer) if layer is not None else None for ev, layer in zip(evals, layers, strict=True)]
    prev_part = _nearest(parts, blocks, reverse=False)
    next_part = _nearest(parts, blocks, reverse=True)
    for i in range(n):
        if parts[i] is None and layers[i] is not None:
            is_norm = _LAYER_RE.sub("", _base(names[i] or "")) == "norm"
            parts[i] = (next_part[i] or prev_part[i]) if is_norm else (prev_part[i] or next_part[i])
    moe_layers = {blocks[i] for i in range(n) if parts[i] == "moe"}
    first: dict[Any, int] = {}
    last: dict[Any, int] = {}
    for i in range(n):
        if parts[i] == "ffn" and blocks[i] in moe_layers:
            parts[i] = "moe"
        if layers[i] is not None:
            first.setdefault(evals[i], i)
            last[evals[i]] = i
    for i in range(n):
        if layers[i] is None:
            before = evals[i] in first and first[evals[i]] < i
            after = evals[i] in last and last[evals[i]] > i
            parts[i] = "input" if not before else "output" if not after else None
    return pd.DataFrame(
        {
            "invocation": pd.array(invs, dtype="Int64"),
            "evaluation": pd.array(evals, dtype="Int64"),
            "op": pd.Series(ops, dtype=object),
            "op_list": pd.Series([_str_or_none(v) for v in meta.ops["op_list"]], dtype=object),
            "name": pd.Series(names, dtype=object),
            "out_name": pd.Series(outs, dtype=object),
            "layer": pd.array(layers, dtype="Int64"),
            "layer_source": pd.Series(sources, dtype=object),
            "part": pd.Series(parts, dtype=object),
        }
    )


def group_blocks(classified: pd.DataFrame, duration_ns: Mapping[int, float] | None = None) -> pd.DataFrame:
    """Invocations grouped per evaluation, layer and part (one transformer block half per row).

    Args:
        classified: :func:`classify`'s frame.
        duration_ns: GPU time per invocation, ns (e.g. the summed kernel durations); optional.

    Returns:
        One row per ``(evaluation, layer, part)`` in order of first invocation, columns
        ``evaluation`` (Int64), ``layer`` (Int64, <NA> for ``input``/``output``), ``part``,
        ``invocations`` (tuple of ints, in order), ``n_invocations``, ``first_invocation``,
        ``last_invocation``, ``duration_ns`` (float64: the sum, NaN when ``duration_ns`` is not
        given or lacks one of the block's invocations — unknown, not zero).
    """
    groups: dict[tuple[Any, Any, Any], list[int]] = {}
    for inv, ev, layer, part in zip(
        classified["invocation"], classified["evaluation"], classified["layer"], classified["part"], strict=True
    ):
        key = (_int_or_none(ev), _int_or_none(layer), _str_or_none(part))
        groups.setdefault(key, []).append(int(inv))
    rows = sorted(groups.items(), key=lambda kv: kv[1][0])

    def total(invs: list[int]) -> float:
        if duration_ns is None:
            return math.nan
        vals = [duration_ns.get(i) for i in invs]
        return math.nan if any(v is None or math.isnan(v) for v in vals) else float(sum(v for v in vals if v))

    return pd.DataFrame(
        {
            "evaluation": pd.array([k[0] for k, _ in rows], dtype="Int64"),
            "layer": pd.array([k[1] for k, _ in rows], dtype="Int64"),
            "part": pd.Series([k[2] for k, _ in rows], dtype=object),
            "invocations": pd.Series([tuple(v) for _, v in rows], dtype=object),
            "n_invocations": pd.array([len(v) for _, v in rows], dtype="int64"),
            "first_invocation": pd.array([v[0] for _, v in rows], dtype="int64"),
            "last_invocation": pd.array([v[-1] for _, v in rows], dtype="int64"),
            "duration_ns": pd.array([total(v) for _, v in rows], dtype="float64"),
        }
    )


def critical_path(
    edges: pd.DataFrame,
    duration_ns: Mapping[int, float],
    evaluation: Iterable[int],
    *,
    missing: Literal["error", "zero"] = "error",
) -> list[int]:
    """The longest dependency chain of one graph evaluation, by summed op time.

    The ops of a ggml graph run one after the other on one stream, so the evaluation takes the
    sum of all op times. The critical path is the chain of data dependencies that would still
    bound it if independent ops overlapped (several streams, CUDA-graph concurrency): a lower
    bound on the evaluation's time, and the ops to shorten first. In a decoder the residual
    stream makes almost every op depend on the one before; the ops off the path (e.g. ``Kcur``
    beside ``Qcur``) are those concurrency could hide.

    Only edges with both ends in ``evaluation`` count (cross-evaluation edges, e.g. through the
    KV cache, are ignored). Edges run forward in invocation order, so the graph is a DAG and one
    pass in that order solves it. Ties go to the earlier invocation (deterministic).

    Args:
        edges: :func:`build_edges`' frame (``src_invocation``, ``dst_invocation``).
        duration_ns: GPU time per invocation, ns (non-negative).
        evaluation: the invocations of one evaluation (e.g. ``evaluation_members(...)[k]``).
        missing: an invocation without a (finite) time raises ``error`` (unknown is not zero), or
            counts as 0 with ``zero``.

    Returns:
        The invocations of the path, in order; ``[]`` for an empty evaluation.

    Raises:
        ValueError: a missing or negative time (``missing="error"``), or an edge that runs
            backward.
    """
    members = sorted({int(i) for i in evaluation})
    if not members:
        return []
    weight: dict[int, float] = {}
    absent = []
    for inv in members:
        d = duration_ns.get(inv)
        if d is None or not math.isfinite(d):
            absent.append(inv)
            d = 0.0
        if d < 0:
            raise ValueError(f"invocation {inv}: negative duration {d} ns")
        weight[inv] = float(d)
    if absent and missing == "error":
        shown = ", ".join(str(i) for i in absent[:5]) + (" ..." if len(absent) > 5 else "")
        raise ValueError(f"no duration for {len(absent)} invocation(s) of the evaluation: {shown} (missing='zero')")
    inside = set(members)
    preds: dict[int, set[int]] = {}
    for src_v, dst_v in zip(edges["src_invocation"], edges["dst_invocation"], strict=True):
        src, dst = int(src_v), int(dst_v)
        if src in inside and dst in inside:
            if src >= dst:
                raise ValueError(f"edge {src} -> {dst} runs backward in invocation order")
            preds.setdefault(dst, set()).add(src)
    best: dict[int, float] = {}
    via: dict[int, int | None] = {}
    for inv in members:
        p = max(sorted(preds.get(inv, ())), key=lambda j: best[j], default=None)
        best[inv] = weight[inv] + (best[p] if p is not None else 0.0)
        via[inv] = p
    end: int | None = max(members, key=lambda j: best[j])
    path = []
    while end is not None:
        path.append(end)
        end = via[end]
    return path[::-1]


def _unsigned(sid: int) -> int:
    """A storage id as the source wrote it (unsigned 64-bit)."""
    return sid + 2**64 if sid < 0 else sid


def _finite(value: Any) -> float | None:
    if value is None or value is pd.NA:
        return None
    f = float(value)
    return f if math.isfinite(f) else None


def _graph(
    meta: OpMetadata,
    edges: pd.DataFrame,
    duration_ns: Mapping[int, float] | None,
    dram_bytes: Mapping[int, float] | None,
    invocations: Collection[int] | None,
    path: Sequence[int] | None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Nodes and edges for the exports (shared by :func:`to_json` and :func:`to_dot`)."""
    table = classify(meta, edges)
    own_time = dict(zip(meta.ops["invocation"].astype(int), meta.ops["gpu_time_ns"], strict=True))
    keep = None if invocations is None else {int(i) for i in invocations}
    on_path = [int(i) for i in path] if path is not None else []
    path_nodes, path_edges = set(on_path), set(zip(on_path, on_path[1:], strict=False))
    nodes = []
    for r in table.itertuples(index=False):
        inv = int(r.invocation)
        if keep is not None and inv not in keep:
            continue
        t = duration_ns.get(inv) if duration_ns is not None else own_time.get(inv)
        nodes.append(
            {
                "invocation": inv,
                "evaluation": _int_or_none(r.evaluation),
                "op": r.op,
                "op_list": r.op_list,
                "name": r.name,
                "out_name": r.out_name,
                "layer": _int_or_none(r.layer),
                "part": r.part,
                "time_ns": _finite(t),
                "bytes": _finite(dram_bytes.get(inv)) if dram_bytes is not None else None,
                "critical": inv in path_nodes,
            }
        )
    present = {n["invocation"] for n in nodes}
    out_edges = []
    for src_v, dst_v, sid, name in zip(
        edges["src_invocation"], edges["dst_invocation"], edges["storage_id"], edges["name"], strict=True
    ):
        src, dst = int(src_v), int(dst_v)
        if src in present and dst in present:
            out_edges.append(
                {
                    "src": src,
                    "dst": dst,
                    "storage_id": _unsigned(int(sid)),
                    "name": _str_or_none(name),
                    "critical": (src, dst) in path_edges,
                }
            )
    return nodes, out_edges


def to_json(
    meta: OpMetadata,
    edges: pd.DataFrame,
    *,
    duration_ns: Mapping[int, float] | None = None,
    dram_bytes: Mapping[int, float] | None = None,
    invocations: Collection[int] | None = None,
    path: Sequence[int] | None = None,
    indent: int | None = None,
) -> str:
    """The op graph as JSON text.

    ``{"format": "rocroof-op-graph", "version": 1, "device", "source", "nodes": [...],
    "edges": [...]}``. A node: ``invocation``, ``evaluation``, ``op`` (head op), ``op_list``,
    ``name`` (head node name), ``out_name``, ``layer``, ``part`` (see :func:`classify`),
    ``time_ns`` (GPU time, ns), ``bytes`` (DRAM bytes read + written), ``critical`` (on
    ``path``). An edge: ``src``, ``dst`` (invocations), ``storage_id`` (unsigned, as in the source
    file), ``name``, ``critical``. Unknown values are ``null``, never 0.

    Args:
        meta: op metadata.
        edges: :func:`build_edges` of ``meta``.
        duration_ns: GPU time per invocation, ns; by default the fork's per-row kernel times
            (``gpu_time_ns``), which rocroof's sidecar does not carry.
        dram_bytes: measured DRAM bytes per invocation (e.g. ``SUM(dram_bytes)`` of the store's
            ``dispatch_dram`` view per ``invocation``); null when not given.
        invocations: keep only these invocations and the edges between them (e.g. one evaluation).
        path: a :func:`critical_path` to mark.
        indent: passed to :func:`json.dumps`.

    Returns:
        JSON text (no NaN or Infinity).
    """
    nodes, out_edges = _graph(meta, edges, duration_ns, dram_bytes, invocations, path)
    doc = {
        "format": "rocroof-op-graph",
        "version": 1,
        "device": meta.device,
        "source": meta.source,
        "nodes": nodes,
        "edges": out_edges,
    }
    return json.dumps(doc, indent=indent, allow_nan=False)


def dot_quote(text: str) -> str:
    """``text`` as a double-quoted Graphviz DOT string.

    ``\\`` and ``"`` are escaped (DOT's only string escape is ``\\"``, and in labels a backslash
    starts an escape such as ``\\n``, so a literal one is doubled); line breaks become ``\\n``.
    """
    body = text.replace("\\", "\\\\").replace('"', '\\"').replace("\r\n", "\n").replace("\r", "\n")
    return '"' + body.replace("\n", "\\n") + '"'


def _plain(value: float) -> str:
    """A number without exponent or trailing ``.0`` when it is whole (``4479232``, ``3104.5``)."""
    return str(int(value)) if value.is_integer() and abs(value) < 2**63 else repr(value)


def _fmt_time(ns: float | None) -> str:
    return "? µs" if ns is None else f"{ns / 1e3:.2f} µs"


def _fmt_bytes(b: float | None) -> str:
    return "? MB" if b is None else f"{b / 1e6:.3f} MB"


def to_dot(
    meta: OpMetadata,
    edges: pd.DataFrame,
    *,
    duration_ns: Mapping[int, float] | None = None,
    dram_bytes: Mapping[int, float] | None = None,
    invocations: Collection[int] | None = None,
    path: Sequence[int] | None = None,
) -> str:
    """The op graph as Graphviz DOT text (``dot -Tsvg``).

    One box per invocation, id ``i<invocation>``, labelled with the invocation, ``op_list``, the
    head node name, and time (µs, 1e-6 s) and DRAM bytes (MB, 1e6 B) — ``?`` when unknown; the
    raw values are also attributes ``time_ns`` and ``bytes`` (absent when unknown). Nodes are
    grouped in clusters per evaluation, layer and part. Edges are labelled with the tensor name.
    The ``path`` is drawn red and bold. Arguments as :func:`to_json`.

    Returns:
        DOT text.
    """
    nodes, out_edges = _graph(meta, edges, duration_ns, dram_bytes, invocations, path)
    lines = [
        "digraph rocroof {",
        "  graph [rankdir=TB, fontname=Helvetica];",
        "  node [shape=box, fontname=Helvetica, fontsize=10];",
        "  edge [fontname=Helvetica, fontsize=8];",
    ]
    clusters: dict[tuple[Any, Any, Any], list[dict[str, Any]]] = {}
    for node in nodes:
        clusters.setdefault((node["evaluation"], node["layer"], node["part"]), []).append(node)
    for k, ((ev, layer, part), members) in enumerate(clusters.items()):
        title = " / ".join(
            s
            for s in (
                f"evaluation {ev}" if ev is not None else "",
                f"layer {layer}" if layer is not None else "",
                part or "",
            )
            if s
        )
        lines.append(f"  subgraph cluster_{k} {{")
        lines.append(f"    label={dot_quote(title)};")
        for node in members:
            label = "\\n".join(
                dot_quote(s)[1:-1]
                for s in (
                    f"#{node['invocation']} {node['op_list'] or node['op']}",
                    node["name"] or "",
                    f"{_fmt_time(node['time_ns'])} · {_fmt_bytes(node['bytes'])}",
                )
            )
            attrs = [f'label="{label}"']
            for key in ("time_ns", "bytes"):
                if node[key] is not None:
                    attrs.append(f'{key}="{_plain(node[key])}"')
            if node["critical"]:
                attrs += ["color=red", "penwidth=2.5"]
            lines.append(f"    i{node['invocation']} [{', '.join(attrs)}];")
        lines.append("  }")
    for edge in out_edges:
        attrs = [f"label={dot_quote(edge['name'])}"] if edge["name"] else []
        if edge["critical"]:
            attrs += ["color=red", "penwidth=2.5"]
        suffix = f" [{', '.join(attrs)}]" if attrs else ""
        lines.append(f"  i{edge['src']} -> i{edge['dst']}{suffix};")
    lines.append("}")
    return "\n".join(lines) + "\n"
