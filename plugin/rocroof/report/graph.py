"""A stored run's op graph for people: its nodes and edges from the store, and Graphviz DOT.

``rocroof graph`` prints what :func:`graph_dot` draws; the graph itself (edges by last writer of
a storage id, evaluations, the critical path) is built at ingest by :mod:`rocroof.analysis.graph`.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from ..analysis.graph import dot_quote
from ..errors import InputError
from ..text import one_line


def stored_graph(store: Any, run_id: int, evaluation: int | None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(nodes, edges)`` of a stored run's op graph, optionally one graph evaluation only.

    nodes: op_index, invocation, op_list, node_name, layer, evaluation, block_part,
    on_critical_path, duration_ns (ns), dram_bytes, model_bytes (bytes), flops. edges:
    src_op_index, dst_op_index, storage_id, tensor_name.

    A run has an op graph when its op metadata was read: the metadata gives the edges and puts
    every invocation in a graph evaluation. Op invocations without it (from ``ggml-fused:`` log
    lines or host markers alone) have no evaluation and no edges: they are not a graph.

    Raises:
        InputError: the run has no op graph (no invocation in a graph evaluation), or it has no
            evaluation ``evaluation`` (the message names the range it has).
    """
    nodes = store.query(
        "SELECT op_index, invocation, op_list, node_name, layer, evaluation, block_part, on_critical_path, "
        f"duration_ns, dram_bytes, model_bytes, flops FROM op_roofline WHERE run_id = {int(run_id)} ORDER BY op_index"
    )
    edges = store.query(
        f"SELECT src_op_index, dst_op_index, storage_id, tensor_name FROM op_edge WHERE run_id = {int(run_id)}"
    )
    evals = sorted({int(e) for e in nodes["evaluation"].dropna()})
    if not evals:
        raise InputError(f"run {run_id}: no op graph (it needs op metadata: the hook's sidecar or the fork's JSON)")
    if evaluation is not None:
        nodes = nodes[nodes["evaluation"] == evaluation]
        if not len(nodes):
            raise InputError(f"run {run_id}: no evaluation {evaluation}; it has evaluations {evals[0]}–{evals[-1]}")
        keep = set(nodes["op_index"])
        edges = edges[edges["src_op_index"].isin(keep) & edges["dst_op_index"].isin(keep)]
    return nodes.reset_index(drop=True), edges.reset_index(drop=True)


def graph_dot(nodes: pd.DataFrame, edges: pd.DataFrame, title: str) -> str:
    """Graphviz DOT of a stored op graph: a box per op (ops, name, µs, MB), critical path in red.

    Op, node and tensor names come from the capture: each is one line with its controls escaped
    (:func:`one_line`: ``\\x1b``, ``\\x0a``), so that a name cannot add a line to a box or send a
    control character to the terminal the DOT is printed on; the DOT quoting then keeps the backslash.
    """

    def num(v: Any, scale: float, unit: str) -> str:
        return "?" if v is None or pd.isna(v) else f"{float(v) / scale:,.2f} {unit}"

    lines = [f"digraph {dot_quote(title)} {{", "  rankdir=TB; node [shape=box, fontsize=10];"]
    for r in nodes.itertuples(index=False):
        node = "" if r.node_name is None or pd.isna(r.node_name) else one_line(str(r.node_name))
        label = f"{one_line(str(r.op_list))}\n{node}\n{num(r.duration_ns, 1e3, 'µs')}, {num(r.dram_bytes, 1e6, 'MB')}"
        color = ', color="red"' if bool(r.on_critical_path) else ""
        lines.append(f"  o{int(r.op_index)} [label={dot_quote(label)}{color}];")
    # the path is a chain: per evaluation, each critical op feeds the next critical op
    on_path: set[tuple[int, int]] = set()
    for _, g in nodes[nodes["on_critical_path"].fillna(False).astype(bool)].groupby("evaluation", dropna=False):
        chain = sorted(int(i) for i in g["op_index"])
        on_path.update(zip(chain, chain[1:], strict=False))
    lines.append('  label="red: the critical path (longest dependency chain by GPU time)"; labelloc=t;')
    for e in edges.itertuples(index=False):
        color = ', color="red"' if (int(e.src_op_index), int(e.dst_op_index)) in on_path else ""
        name = "" if e.tensor_name is None or pd.isna(e.tensor_name) else one_line(str(e.tensor_name))
        lines.append(f"  o{int(e.src_op_index)} -> o{int(e.dst_op_index)} [label={dot_quote(name)}{color}];")
    lines.append("}")
    return "\n".join(lines) + "\n"
