"""MoE routing load: how evenly a ``MUL_MAT_ID`` spreads its tokens over the experts.

Input is the fork's ``tokens_per_expert`` (the routed token count of each expert, read back by
the llama.cpp hook or AMD's ``GGML_ROOFLINE_OUT``; a JSON list of ``n_experts`` integers). Per
invocation:

* ``routed``: token-expert pairs, ``sum(tokens_per_expert)`` (= tokens x top_k).
* ``experts_used``: experts with at least one token.
* ``max_tokens`` and ``mean_tokens`` (= routed / n_experts, the uniform share).
* ``imbalance``: ``max_tokens / ceil(mean_tokens)``: the busiest expert against the busiest one of
  the most even routing whole tokens allow. The MoE literature's measure is the busiest expert
  over the uniform share (Fedus et al., "Switch Transformers", JMLR 2022, sec. 2.2); rounding the
  share up to whole tokens keeps a single decoded token (8 of 32 experts get 1 token, a uniform
  share of 0.25) at 1 instead of 4. 1 is as balanced as possible; the largest value is about
  ``n_experts / top_k`` (every token routed to the same top_k experts). A ``MUL_MAT_ID`` kernel
  runs as long as its busiest expert's tile of tokens, so in prefill this factor bounds the time
  lost to skew.
* ``bytes_per_routed_token``: the invocation's measured DRAM bytes / routed (bytes, when measured).

Pure functions of frames; nothing here reads the database.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pandas as pd

#: More tokens than any ubatch routes (llama.cpp's ubatch is at most a few thousand tokens x top_k):
#: a count above this is damage, and the list is left out (int64 sums stay exact below it).
MAX_TOKENS = 1 << 31

LOAD_COLUMNS = [
    "op_index",
    "layer",
    "evaluation",
    "n_experts",
    "top_k",
    "routed",
    "experts_used",
    "max_tokens",
    "mean_tokens",
    "imbalance",
    "bytes_per_routed_token",
]


def token_counts(text: Any) -> list[int] | None:
    """``tokens_per_expert`` JSON text as a list of ints in [0, :data:`MAX_TOKENS`]; None when absent or not one."""
    if text is None or (isinstance(text, float) and np.isnan(text)):
        return None
    try:
        values = json.loads(text) if isinstance(text, str) else text
    except ValueError:
        return None
    if not isinstance(values, list) or not values:
        return None
    if not all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= MAX_TOKENS for v in values):
        return None
    return list(values)


def expert_loads(ops: pd.DataFrame) -> pd.DataFrame:
    """The routing load of each ``MUL_MAT_ID`` invocation (module docstring).

    Args:
        ops: one row per invocation with ``op_index``, ``layer``, ``evaluation``, ``top_k``,
            ``tokens_per_expert`` (JSON text) and optionally ``n_experts`` and ``dram_bytes``
            (measured, bytes). Rows without readable counts, or with a count list whose length is
            not ``n_experts``, are left out.

    Returns:
        :data:`LOAD_COLUMNS`; ``n_experts`` is the length of the count list.
    """
    rows = []
    for r in ops.to_dict("records"):
        counts = token_counts(r.get("tokens_per_expert"))
        experts = pd.to_numeric(pd.Series([r.get("n_experts")]), errors="coerce").iloc[0]
        if counts is None or (pd.notna(experts) and int(experts) != len(counts)):
            continue  # unreadable, or not one count per expert of the weights
        routed = sum(counts)
        mean = routed / len(counts)
        dram = pd.to_numeric(pd.Series([r.get("dram_bytes")]), errors="coerce").iloc[0]
        rows.append(
            {
                "op_index": r["op_index"],
                "layer": r.get("layer"),
                "evaluation": r.get("evaluation"),
                "n_experts": len(counts),
                "top_k": r.get("top_k"),
                "routed": routed,
                "experts_used": sum(1 for c in counts if c > 0),
                "max_tokens": max(counts),
                "mean_tokens": mean,
                "imbalance": max(counts) / math.ceil(mean) if mean > 0 else float("nan"),
                "bytes_per_routed_token": float(dram) / routed if routed > 0 and pd.notna(dram) else float("nan"),
            }
        )
    return pd.DataFrame(rows, columns=LOAD_COLUMNS)


def layer_skew(loads: pd.DataFrame) -> pd.DataFrame:
    """Per layer: the routing of its ``MUL_MAT_ID`` invocations over every evaluation.

    Args:
        loads: :func:`expert_loads` rows.

    Returns:
        One row per layer (sorted): ``layer``, ``invocations``, ``batched_invocations`` (those routing
        more than one token: ``routed > top_k``), ``n_experts``, ``mean_imbalance`` and
        ``max_imbalance`` (over the batched invocations when the layer has any: one decoded token is
        always as even as whole tokens allow, 1.00, and would only dilute the prefill's skew; else over
        all), ``mean_experts_used`` and ``bytes_per_routed_token`` (mean over measured invocations;
        NaN when none).
    """
    if not len(loads):
        return pd.DataFrame(
            columns=[
                "layer",
                "invocations",
                "batched_invocations",
                "n_experts",
                "mean_imbalance",
                "max_imbalance",
                "mean_experts_used",
                "bytes_per_routed_token",
            ]
        )
    top_k = pd.to_numeric(loads["top_k"], errors="coerce")
    batched = (loads["routed"] > top_k).fillna(True)  # top_k unknown: count the call as batched
    skew = loads.assign(batched=batched)
    skew = skew[skew["batched"] | ~skew.groupby("layer", dropna=False)["batched"].transform("any")]
    g = loads.groupby("layer", dropna=False, sort=True)
    s = skew.groupby("layer", dropna=False, sort=True)
    return pd.DataFrame(
        {
            "invocations": g.size(),
            "batched_invocations": batched.groupby(loads["layer"], dropna=False).sum(),
            "n_experts": g["n_experts"].max(),
            "mean_imbalance": s["imbalance"].mean(),
            "max_imbalance": s["imbalance"].max(),
            "mean_experts_used": g["experts_used"].mean(),
            "bytes_per_routed_token": g["bytes_per_routed_token"].mean(),
        }
    ).reset_index()


def layer_expert_tokens(ops: pd.DataFrame) -> pd.DataFrame:
    """The heat map's matrix: tokens routed to each expert of each layer, over every evaluation.

    The gate, up and down matmuls of one MoE block share one routing: each layer's counts are
    taken once per evaluation (the first ``MUL_MAT_ID`` of the layer in that evaluation).

    Args:
        ops: as :func:`expert_loads` (``op_index``, ``layer``, ``evaluation``, ``tokens_per_expert``).

    Returns:
        A frame indexed by layer with one int column per expert (0-based), tokens routed.
    """
    first: dict[tuple[Any, Any], list[int]] = {}
    for r in ops.sort_values("op_index").to_dict("records"):
        counts = token_counts(r.get("tokens_per_expert"))
        layer = r.get("layer")
        if counts is None or layer is None or pd.isna(layer):
            continue
        first.setdefault((int(layer), r.get("evaluation")), counts)
    sums: dict[int, np.ndarray] = {}
    for (layer, _), counts in first.items():
        row = np.asarray(counts, dtype=np.int64)
        prev = sums.get(layer)
        if prev is None:
            sums[layer] = row
        else:
            width = max(len(prev), len(row))
            sums[layer] = np.pad(prev, (0, width - len(prev))) + np.pad(row, (0, width - len(row)))
    if not sums:
        return pd.DataFrame()
    width = max(len(v) for v in sums.values())
    return pd.DataFrame({layer: np.pad(v, (0, width - len(v))) for layer, v in sorted(sums.items())}).T.rename_axis(
        "layer"
    )
