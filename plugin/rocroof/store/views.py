"""SQL views over the results tables, written as SQLAlchemy Core selects.

Each view is compiled for the connected dialect (SQLite or PostgreSQL) when the schema is
created or upgraded, so a broken definition fails at once. Every view column is documented in
:data:`VIEWS` (``docs/schema.md`` is generated from it).

Aggregates follow "unknown is not zero": a sum is NULL when any of its inputs is NULL;
the ``_min``/``_max`` sums use each row's bounds (or its value when exact).
Bandwidth: bytes / ns = GB/s (1e9 B/s).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.sql.elements import ColumnElement

from . import schema as s


@dataclass(frozen=True)
class View:
    """A documented view: its select, a description and one doc line per column."""

    name: str
    doc: str
    columns: dict[str, str]
    build: Callable[[], sa.Select[Any]]


def _f(x: ColumnElement[Any]) -> ColumnElement[Any]:
    return sa.cast(x, sa.Float)


def _strict_sum(x: ColumnElement[Any]) -> ColumnElement[Any]:
    """SUM that is NULL when any input row is NULL.

    A sum of integers stays an integer: PostgreSQL's SUM(bigint) is NUMERIC (a decimal to its
    drivers), SQLite's an INTEGER.
    """
    total: ColumnElement[Any] = sa.func.sum(x)
    if isinstance(x.type, sa.Integer):
        total = sa.cast(total, sa.BigInteger)
    return sa.case((sa.func.count(x) == sa.func.count(), total), else_=sa.null())


def _bound_sum(bound: ColumnElement[Any], value: ColumnElement[Any]) -> ColumnElement[Any]:
    return _strict_sum(sa.func.coalesce(bound, value))


def _gbps(bytes_: ColumnElement[Any], ns: ColumnElement[Any]) -> ColumnElement[Any]:
    return _f(bytes_) / sa.func.nullif(_f(ns), 0.0)


def _add(a: ColumnElement[Any], b: ColumnElement[Any]) -> ColumnElement[Any]:
    return a + b  # NULL when either is NULL


def _method(index: ColumnElement[Any]) -> ColumnElement[Any]:
    """The attribution method's name from its number (:data:`rocroof.store.schema.ATTRIBUTION_METHODS`)."""
    names = {i: name for i, (name, _) in enumerate(s.ATTRIBUTION_METHODS)}
    return sa.case(names, value=index, else_=sa.null()).label("attribution_method")


def _dispatch_dram() -> sa.Select[Any]:
    d, o, r, a, k, n = s.dispatch_record, s.op_invocation, s.run, s.agent, s.kernel_symbol, s.dram_text.alias("n")
    read, write = d.c.dram_read_bytes, d.c.dram_write_bytes
    total = _add(read, write)
    read_min, read_max = (
        sa.func.coalesce(d.c.dram_read_bytes_min, read),
        sa.func.coalesce(d.c.dram_read_bytes_max, read),
    )
    write_min = sa.func.coalesce(d.c.dram_write_bytes_min, write)
    write_max = sa.func.coalesce(d.c.dram_write_bytes_max, write)
    total_min = _add(read_min, write_min)
    total_max = _add(read_max, write_max)
    gbps = _gbps(total, d.c.duration_ns)
    return (
        sa.select(
            d.c.run_id,
            d.c.dispatch_index,
            d.c.dispatch_id,
            d.c.pass_index,
            k.c.kernel_name,
            a.c.gfx_arch,
            d.c.start_ns,
            d.c.end_ns,
            d.c.duration_ns,
            read.label("dram_read_bytes"),
            read_min.label("dram_read_bytes_min"),
            read_max.label("dram_read_bytes_max"),
            write.label("dram_write_bytes"),
            write_min.label("dram_write_bytes_min"),
            write_max.label("dram_write_bytes_max"),
            total.label("dram_bytes"),
            total_min.label("dram_bytes_min"),
            total_max.label("dram_bytes_max"),
            gbps.label("achieved_gbps"),
            _gbps(total_min, d.c.duration_ns).label("achieved_gbps_min"),
            _gbps(total_max, d.c.duration_ns).label("achieved_gbps_max"),
            r.c.dram_peak_gbps,
            (100.0 * gbps / sa.func.nullif(r.c.dram_peak_gbps, 0.0)).label("pct_of_dram_peak"),
            (_f(total) / sa.func.nullif(r.c.dram_peak_gbps, 0.0)).label("dram_time_at_peak_ns"),
            d.c.op_index,
            o.c.invocation,
            o.c.op,
            o.c.op_list,
            o.c.node_name,
            o.c.layer,
            d.c.kernel_ordinal,
            _method(d.c.attribution_index),
            n.c.text.label("dram_bytes_note"),
        )
        .select_from(d)
        .join(r, r.c.run_id == d.c.run_id)
        .outerjoin(k, sa.and_(k.c.run_id == d.c.run_id, k.c.kernel_index == d.c.kernel_index))
        .outerjoin(o, sa.and_(o.c.run_id == d.c.run_id, o.c.op_index == d.c.op_index))
        .outerjoin(a, sa.and_(a.c.run_id == d.c.run_id, a.c.agent_index == d.c.agent_index))
        .outerjoin(n, sa.and_(n.c.run_id == d.c.run_id, n.c.text_index == d.c.dram_note_index))
        .where(d.c.timing_dispatch_index == d.c.dispatch_index)
    )


def _dispatch() -> sa.Select[Any]:
    """Every dispatch record with its kernel's name: the ``dispatch`` table of schema versions 1-5."""
    d, k = s.dispatch_record, s.kernel_symbol
    columns = [
        _method(d.c.attribution_index) if name == "attribution_method" else d.c[name]
        for name, _, _ in s._DISPATCH_COLUMNS
    ]
    return (
        sa.select(
            d.c.run_id, d.c.dispatch_index, d.c.pass_index, d.c.ordinal, *columns[:1], k.c.kernel_name, *columns[1:]
        )
        .select_from(d)
        .outerjoin(k, sa.and_(k.c.run_id == d.c.run_id, k.c.kernel_index == d.c.kernel_index))
    )


def _counter_value() -> sa.Select[Any]:
    """One row per (dispatch, counter): each ``counter_reading`` row joined with its block's counters."""
    v, c = s.counter_reading, s.counter
    per = s.COUNTERS_PER_READING
    # the counter's slot in its block (no % operator: psycopg reads it as a placeholder)
    value = sa.case({slot: v.c[f"value_{slot}"] for slot in range(per)}, value=c.c.counter_index - v.c.block * per)
    return (
        sa.select(v.c.run_id, v.c.dispatch_index, c.c.counter_name, value.label("value"))
        .select_from(v)
        .join(
            c,
            sa.and_(
                c.c.run_id == v.c.run_id,
                c.c.counter_index >= v.c.block * per,
                c.c.counter_index < (v.c.block + 1) * per,
            ),
        )
        .where(value.is_not(None))
    )


def _counter_instance() -> sa.Select[Any]:
    v, c = s.counter_instance_reading, s.counter
    return (
        sa.select(v.c.run_id, v.c.dispatch_index, c.c.counter_name, v.c.instance, v.c.value)
        .select_from(v)
        .join(c, sa.and_(c.c.run_id == v.c.run_id, c.c.counter_index == v.c.counter_index))
    )


def _dram_traffic() -> sa.Select[Any]:
    d, f, n = s.dispatch_record, s.dram_text.alias("f"), s.dram_text.alias("n")
    has_bytes = sa.or_(
        d.c.dram_formula_index.is_not(None),
        d.c.dram_note_index.is_not(None),
        d.c.dram_read_bytes.is_not(None),
        d.c.dram_write_bytes.is_not(None),
    )
    return (
        sa.select(
            d.c.run_id,
            d.c.dispatch_index,
            d.c.dram_read_bytes,
            sa.func.coalesce(d.c.dram_read_bytes_min, d.c.dram_read_bytes).label("dram_read_bytes_min"),
            sa.func.coalesce(d.c.dram_read_bytes_max, d.c.dram_read_bytes).label("dram_read_bytes_max"),
            d.c.dram_write_bytes,
            sa.func.coalesce(d.c.dram_write_bytes_min, d.c.dram_write_bytes).label("dram_write_bytes_min"),
            sa.func.coalesce(d.c.dram_write_bytes_max, d.c.dram_write_bytes).label("dram_write_bytes_max"),
            f.c.text.label("dram_formula"),
            n.c.text.label("dram_bytes_note"),
        )
        .select_from(d)
        .outerjoin(f, sa.and_(f.c.run_id == d.c.run_id, f.c.text_index == d.c.dram_formula_index))
        .outerjoin(n, sa.and_(n.c.run_id == d.c.run_id, n.c.text_index == d.c.dram_note_index))
        .where(d.c.timing_dispatch_index == d.c.dispatch_index, has_bytes)
    )


_DISPATCH_DOCS = {
    "run_id": "The run.",
    "dispatch_index": "Run-local dispatch record (timing pass).",
    "dispatch_id": "Profiler dispatch id.",
    "pass_index": "The timing pass.",
    "kernel_name": "Kernel symbol.",
    "gfx_arch": "Architecture of the dispatch's agent.",
    "start_ns": "GPU start, ns.",
    "end_ns": "GPU end, ns.",
    "duration_ns": "GPU time, ns (NULL when unknown).",
    "dram_read_bytes": "DRAM bytes read (counters of all passes joined); NULL when undetermined.",
    "dram_read_bytes_min": "Lower bound of the read bytes.",
    "dram_read_bytes_max": "Upper bound of the read bytes.",
    "dram_write_bytes": "DRAM bytes written; NULL when undetermined.",
    "dram_write_bytes_min": "Lower bound of the written bytes.",
    "dram_write_bytes_max": "Upper bound of the written bytes.",
    "dram_bytes": "Read + write bytes (NULL if either is unknown).",
    "dram_bytes_min": "Lower bound of read + write bytes.",
    "dram_bytes_max": "Upper bound of read + write bytes.",
    "achieved_gbps": "dram_bytes / duration_ns, GB/s (1e9 B/s).",
    "achieved_gbps_min": "dram_bytes_min / duration_ns, GB/s.",
    "achieved_gbps_max": "dram_bytes_max / duration_ns, GB/s.",
    "dram_peak_gbps": "The run's DRAM ceiling, GB/s.",
    "pct_of_dram_peak": "achieved_gbps as % of the ceiling.",
    "dram_time_at_peak_ns": "dram_bytes / dram_peak_gbps: the time the traffic needs at the ceiling, ns "
    "(the roofline lower bound on duration_ns for a memory-bound kernel).",
    "op_index": "Attributed op invocation (NULL = unattributed).",
    "invocation": "ggml invocation id.",
    "op": "ggml op (head op of a fused group).",
    "op_list": "All ops of the group joined by '+'.",
    "node_name": "Head node name.",
    "layer": "Layer number from the node name.",
    "kernel_ordinal": "Position of the kernel inside its invocation.",
    "attribution_method": "How the dispatch was attributed.",
    "dram_bytes_note": "Why a byte count is unknown or approximate.",
}


def _aggregate_columns(v: sa.Subquery) -> list[ColumnElement[Any]]:
    c = v.c
    dur = _strict_sum(c.duration_ns)
    total = _strict_sum(c.dram_bytes)
    total_min = _bound_sum(c.dram_bytes_min, c.dram_bytes)
    total_max = _bound_sum(c.dram_bytes_max, c.dram_bytes)
    return [
        sa.func.count().label("dispatches"),
        dur.label("duration_ns"),
        _strict_sum(c.dram_read_bytes).label("dram_read_bytes"),
        _bound_sum(c.dram_read_bytes_min, c.dram_read_bytes).label("dram_read_bytes_min"),
        _bound_sum(c.dram_read_bytes_max, c.dram_read_bytes).label("dram_read_bytes_max"),
        _strict_sum(c.dram_write_bytes).label("dram_write_bytes"),
        _bound_sum(c.dram_write_bytes_min, c.dram_write_bytes).label("dram_write_bytes_min"),
        _bound_sum(c.dram_write_bytes_max, c.dram_write_bytes).label("dram_write_bytes_max"),
        total.label("dram_bytes"),
        _gbps(total, dur).label("achieved_gbps"),
        _gbps(total_min, dur).label("achieved_gbps_min"),
        _gbps(total_max, dur).label("achieved_gbps_max"),
        (100.0 * _gbps(total, dur) / sa.func.nullif(sa.func.max(c.dram_peak_gbps), 0.0)).label("pct_of_dram_peak"),
        _strict_sum(c.dram_time_at_peak_ns).label("dram_time_at_peak_ns"),
    ]


_AGG_DOCS = {
    "dispatches": "Kernel dispatches.",
    "duration_ns": "Sum of GPU time, ns (NULL if any dispatch's is unknown).",
    "dram_read_bytes": "Sum of DRAM bytes read (NULL if any is unknown).",
    "dram_read_bytes_min": "Sum of the lower bounds of bytes read.",
    "dram_read_bytes_max": "Sum of the upper bounds of bytes read.",
    "dram_write_bytes": "Sum of DRAM bytes written (NULL if any is unknown).",
    "dram_write_bytes_min": "Sum of the lower bounds of bytes written.",
    "dram_write_bytes_max": "Sum of the upper bounds of bytes written.",
    "dram_bytes": "Sum of read + write bytes.",
    "achieved_gbps": "dram_bytes / duration_ns, GB/s.",
    "achieved_gbps_min": "Lower bound of the bandwidth from the byte bounds, GB/s.",
    "achieved_gbps_max": "Upper bound of the bandwidth from the byte bounds, GB/s.",
    "pct_of_dram_peak": "achieved_gbps as % of the run's DRAM ceiling.",
    "dram_time_at_peak_ns": "Sum of the dispatches' time at the DRAM ceiling, ns.",
}


def _op_invocation_summary() -> sa.Select[Any]:
    v = _dispatch_dram().subquery("dd")
    return (
        sa.select(
            v.c.run_id,
            v.c.op_index,
            v.c.invocation,
            v.c.op,
            v.c.op_list,
            v.c.node_name,
            v.c.layer,
            *_aggregate_columns(v),
        )
        .where(v.c.op_index.is_not(None))
        .group_by(v.c.run_id, v.c.op_index, v.c.invocation, v.c.op, v.c.op_list, v.c.node_name, v.c.layer)
    )


def _op_summary() -> sa.Select[Any]:
    v = _dispatch_dram().subquery("dd")
    return sa.select(
        v.c.run_id,
        v.c.op,
        sa.func.count(sa.distinct(v.c.op_index)).label("invocations"),
        *_aggregate_columns(v),
    ).group_by(v.c.run_id, v.c.op)


def _kernel_summary() -> sa.Select[Any]:
    v = _dispatch_dram().subquery("dd")
    return sa.select(v.c.run_id, v.c.kernel_name, *_aggregate_columns(v)).group_by(v.c.run_id, v.c.kernel_name)


def _op_roofline() -> sa.Select[Any]:
    v = _op_invocation_summary().subquery("ois")
    m = s.op_model
    model_bytes = m.c.model_read_bytes + m.c.model_write_bytes
    return sa.select(
        *v.c,
        m.c.model_read_bytes,
        m.c.model_write_bytes,
        model_bytes.label("model_bytes"),
        (_f(v.c.dram_bytes) / sa.func.nullif(_f(model_bytes), 0.0)).label("measured_over_model"),
        m.c.flops,
        (m.c.flops / sa.func.nullif(_f(v.c.dram_bytes), 0.0)).label("arithmetic_intensity"),
        (m.c.flops / sa.func.nullif(_f(model_bytes), 0.0)).label("model_arithmetic_intensity"),
        (m.c.flops / sa.func.nullif(_f(v.c.duration_ns), 0.0) / 1e3).label("achieved_tflops"),
        m.c.evaluation,
        m.c.block_part,
        sa.cast(m.c.on_critical_path, sa.Integer).label("on_critical_path"),  # 0/1 on SQLite and PostgreSQL alike
        m.c.model_note,
    ).select_from(v.outerjoin(m, sa.and_(m.c.run_id == v.c.run_id, m.c.op_index == v.c.op_index)))


def op_shape_sums(run_id: int) -> sa.Select[Any]:
    """Sums over one run's op invocations per (op, quant, m, n_experts): what a per-op roofline needs.

    The ``op_roofline`` rows of a run, summed in SQL instead of read one invocation at a time (a
    run of 10^6 dispatches has ~8x10^5 invocations and a few hundred shapes):
    :func:`rocroof.analysis.roofline.per_op_from_shapes` combines the groups of an op as
    :func:`rocroof.analysis.roofline.per_op_sums` combines its invocations.

    An invocation is one ``op_index`` with timing dispatches (``timing_dispatch_index =
    dispatch_index``), as in ``op_invocation_summary``; its ``duration_ns`` (ns) and
    ``dram_read_bytes``/``dram_write_bytes``/``dram_bytes`` (bytes) are strict sums (NULL when any
    dispatch's is unknown); it is *measured* when its ``dram_bytes`` and ``duration_ns`` are known.

    Columns per group: ``op``, ``quant``, ``m``, ``n_experts``; ``invocations``; ``first_op_index``
    (the group's lowest op index); for X in ``model_read_bytes``, ``model_write_bytes``, ``flops``
    (``op_model``) and ``duration_ns``: ``X_sum`` and ``X_count`` (non-NULL values) over every
    invocation; ``measured`` (invocations measured); for X in ``dram_bytes``, ``duration_ns``,
    ``dram_read_bytes``, ``dram_write_bytes``, ``model_read_bytes``, ``model_write_bytes``,
    ``flops``: ``measured_X_sum`` and ``measured_X_count`` over measured invocations;
    ``positive_flops`` (invocations with FLOPs > 0), ``positive_flops_sum`` and
    ``first_positive_op_index``; ``first_note_op_index`` (the lowest op index with a non-empty
    ``model_note``). Sorted by ``first_op_index``.
    """
    d, o, m = s.dispatch_record, s.op_invocation, s.op_model
    per_invocation = (
        sa.select(
            d.c.op_index,
            _strict_sum(d.c.duration_ns).label("duration_ns"),
            _strict_sum(d.c.dram_read_bytes).label("dram_read_bytes"),
            _strict_sum(d.c.dram_write_bytes).label("dram_write_bytes"),
            _strict_sum(_add(d.c.dram_read_bytes, d.c.dram_write_bytes)).label("dram_bytes"),
        )
        .where(d.c.run_id == run_id, d.c.timing_dispatch_index == d.c.dispatch_index, d.c.op_index.is_not(None))
        .group_by(d.c.op_index)
        .subquery("inv")
    )
    i = per_invocation.c
    measured = i.dram_bytes.is_not(None) & i.duration_ns.is_not(None)

    def when(condition: ColumnElement[Any], value: ColumnElement[Any]) -> ColumnElement[Any]:
        return sa.case((condition, value), else_=sa.null())

    model = {"model_read_bytes": m.c.model_read_bytes, "model_write_bytes": m.c.model_write_bytes, "flops": m.c.flops}
    every = {**model, "duration_ns": i.duration_ns}
    over_measured = {
        "dram_bytes": i.dram_bytes,
        "duration_ns": i.duration_ns,
        "dram_read_bytes": i.dram_read_bytes,
        "dram_write_bytes": i.dram_write_bytes,
        **model,
    }
    positive = m.c.flops > 0
    noted = m.c.model_note.is_not(None) & (m.c.model_note != "")
    shape = (o.c.op, o.c.quant, o.c.m, o.c.n_experts)
    return (
        sa.select(
            *shape,
            sa.func.count().label("invocations"),
            sa.func.min(i.op_index).label("first_op_index"),
            *[
                c
                for name, x in every.items()
                for c in (sa.func.sum(x).label(f"{name}_sum"), sa.func.count(x).label(f"{name}_count"))
            ],
            sa.func.sum(sa.case((measured, 1), else_=0)).label("measured"),
            *[
                c
                for name, x in over_measured.items()
                for c in (
                    sa.func.sum(when(measured, x)).label(f"measured_{name}_sum"),
                    sa.func.count(when(measured, x)).label(f"measured_{name}_count"),
                )
            ],
            sa.func.sum(sa.case((positive, 1), else_=0)).label("positive_flops"),
            sa.func.sum(when(positive, m.c.flops)).label("positive_flops_sum"),
            sa.func.min(when(positive, i.op_index)).label("first_positive_op_index"),
            sa.func.min(when(noted, i.op_index)).label("first_note_op_index"),
        )
        .select_from(per_invocation)
        .join(o, sa.and_(o.c.run_id == run_id, o.c.op_index == i.op_index))
        .outerjoin(m, sa.and_(m.c.run_id == run_id, m.c.op_index == i.op_index))
        .group_by(*shape)
        .order_by(sa.func.min(i.op_index))
    )


def invocation_time(run_id: int) -> sa.Select[Any]:
    """One row, one column ``duration_ns``: the sum of one run's known ``op_roofline.duration_ns``, ns.

    An invocation's time is the strict sum of its timing dispatches' (NULL when any is unknown), as
    in ``op_invocation_summary``; the invocations of unknown time add nothing, and NULL comes back
    when none is known. Read from ``dispatch_record`` alone: a second of SQLite at 10^6 dispatches,
    where summing the view evaluates every one of its columns (~5 s).
    """
    d = s.dispatch_record
    per_invocation = (
        sa.select(_strict_sum(d.c.duration_ns).label("duration_ns"))
        .where(d.c.run_id == run_id, d.c.timing_dispatch_index == d.c.dispatch_index, d.c.op_index.is_not(None))
        .group_by(d.c.op_index)
        .subquery("inv")
    )
    return sa.select(sa.func.sum(per_invocation.c.duration_ns).label("duration_ns"))


#: The roofline's verdict rules, as rocroof.analysis.roofline.add_roofline_columns applies them.
LATENCY_PCT = 10.0
LATENCY_US = 20.0


def _op_verdict() -> sa.Select[Any]:
    v = _op_roofline().subquery("orl")
    m = s.op_model
    dram = s.run_ceiling.alias("dram")
    comp = s.run_ceiling.alias("comp")
    fp16 = s.run_ceiling.alias("fp16")
    bw = dram.c.value  # GB/s
    # int8/bf16 without their own peak fall back to the FP16 matrix peak (compute_peaks' rule)
    fallback = m.c.compute_ceiling.in_(("int8_matrix_tops", "bf16_matrix_tflops")) & comp.c.value.is_(None)
    peak = sa.case((fallback, fp16.c.value), else_=comp.c.value)
    peak_name = sa.case((fallback & fp16.c.value.is_not(None), "fp16_matrix_tflops"), else_=m.c.compute_ceiling)
    flops, ai, dur = _f(v.c.flops), _f(v.c.arithmetic_intensity), _f(v.c.duration_ns)
    roofline = (flops > 0) & ai.is_not(None) & bw.is_not(None) & (dur > 0)
    mem_roof = ai * bw / 1e3  # FLOP/B x GB/s = GFLOP/s -> TFLOP/s
    is_mem = peak.is_(None) | (mem_roof < peak)
    attainable = sa.case((roofline & is_mem, mem_roof), (roofline, peak), else_=sa.null())
    pct = sa.case(
        (roofline, 100.0 * (flops / dur / 1e3) / sa.func.nullif(attainable, 0.0)),
        else_=100.0 * v.c.achieved_gbps / sa.func.nullif(bw, 0.0),
    )
    no_flops = v.c.flops.is_(None) | (flops <= 0)
    bound = sa.case(
        (roofline & is_mem, "memory"),
        (roofline, "compute"),
        (v.c.achieved_gbps.is_not(None) & (no_flops | bw.is_not(None)), "memory"),
        else_=sa.null(),
    )
    latency = (pct < LATENCY_PCT) & (dur / 1e3 < LATENCY_US)
    at_roof = sa.case(
        ((attainable > 0) & (flops > 0), flops / (attainable * 1e3)),  # TFLOP/s = 1e3 FLOP/ns
        (v.c.dram_bytes.is_not(None) & (bw > 0), _f(v.c.dram_bytes) / bw),  # GB/s = B/ns
        else_=sa.null(),
    )
    on = sa.and_
    return sa.select(
        v.c.run_id,
        v.c.op_index,
        v.c.invocation,
        v.c.op,
        v.c.op_list,
        v.c.layer,
        v.c.evaluation,
        v.c.dispatches,
        v.c.duration_ns,
        v.c.dram_bytes,
        v.c.flops,
        v.c.arithmetic_intensity,
        v.c.achieved_gbps,
        v.c.achieved_tflops,
        bw.label("dram_ceiling_gbps"),
        peak_name.label("compute_ceiling"),
        peak.label("compute_ceiling_tflops"),
        attainable.label("attainable_tflops"),
        sa.case(
            (roofline & is_mem, "dram_gbps"),
            (roofline, peak_name),
            (bw.is_not(None), "dram_gbps"),
            else_=sa.null(),
        ).label("governing_ceiling"),
        sa.case((bound.is_not(None) & latency, "latency"), else_=bound).label("bound"),
        pct.label("pct_of_ceiling"),
        at_roof.label("time_at_roof_ns"),
        (dur - at_roof).label("time_over_roof_ns"),
    ).select_from(
        v.outerjoin(m, on(m.c.run_id == v.c.run_id, m.c.op_index == v.c.op_index))
        .outerjoin(dram, on(dram.c.run_id == v.c.run_id, dram.c.name == "dram_gbps"))
        .outerjoin(comp, on(comp.c.run_id == v.c.run_id, comp.c.name == m.c.compute_ceiling))
        .outerjoin(fp16, on(fp16.c.run_id == v.c.run_id, fp16.c.name == "fp16_matrix_tflops"))
    )


_VERDICT_DOCS = {
    "run_id": "The run.",
    "op_index": "Run-local op invocation.",
    "invocation": "ggml invocation id.",
    "op": "ggml op (head op).",
    "op_list": "Ops of a fused group.",
    "layer": "Layer number.",
    "evaluation": "Graph evaluation (one llama_decode), 0-based.",
    "dispatches": "Kernel dispatches of the invocation.",
    "duration_ns": "GPU time, ns.",
    "dram_bytes": "Measured DRAM bytes read + written.",
    "flops": "Modelled FLOP (multiply-add = 2).",
    "arithmetic_intensity": "flops / measured dram_bytes, FLOP per byte.",
    "achieved_gbps": "dram_bytes / duration_ns, GB/s.",
    "achieved_tflops": "flops / duration_ns, TFLOP/s.",
    "dram_ceiling_gbps": "The run's DRAM ceiling (run_ceiling dram_gbps), GB/s.",
    "compute_ceiling": "run_ceiling name of the compute peak for this op (op_model.compute_ceiling; "
    "fp16_matrix_tflops when an int8/bf16 peak is unknown).",
    "compute_ceiling_tflops": "That peak, TFLOP/s (TOP/s for int8); NULL when unknown.",
    "attainable_tflops": "The roof at the op's intensity: min(compute peak, intensity x DRAM ceiling / 1e3), TFLOP/s; "
    "NULL for ops without FLOPs.",
    "governing_ceiling": "run_ceiling name of the roof that applies: dram_gbps left of the ridge point (and for ops "
    "without FLOPs), else the compute ceiling.",
    "bound": "memory or compute (which side of the ridge point; ops without FLOPs are memory), or latency when "
    "below 10% of the roof in a call shorter than 20 us; NULL when unknown.",
    "pct_of_ceiling": "Achieved as % of the roof: FLOP/s of attainable_tflops for ops with FLOPs, else GB/s of the "
    "DRAM ceiling.",
    "time_at_roof_ns": "The invocation's time at its roof: flops at attainable_tflops, or dram_bytes at the DRAM "
    "ceiling, ns.",
    "time_over_roof_ns": "duration_ns - time_at_roof_ns: what reaching the roof would save, ns.",
}


_ROOFLINE_DOCS = {
    "model_read_bytes": "Modelled DRAM bytes read (op_model; NULL without op metadata).",
    "model_write_bytes": "Modelled DRAM bytes written.",
    "model_bytes": "model_read_bytes + model_write_bytes.",
    "measured_over_model": "dram_bytes / model_bytes: 1 = the model's traffic; < 1 cache hits or writes still in "
    "cache; > 1 re-reads or scratch traffic.",
    "flops": "Modelled FLOP (multiply-add = 2).",
    "arithmetic_intensity": "flops / measured dram_bytes, FLOP per byte.",
    "model_arithmetic_intensity": "flops / model_bytes, FLOP per byte.",
    "achieved_tflops": "flops / duration_ns, TFLOP/s (1e12 FLOP/s).",
    "evaluation": "Graph evaluation (one llama_decode), 0-based.",
    "block_part": "attention, ffn, moe, input or output.",
    "on_critical_path": "1 when on the longest dependency chain by time of its evaluation, else 0.",
    "model_note": "What the model assumed or could not know.",
}


_COMPAT_VIEWS: list[View] = [
    View(
        "dispatch",
        "Every dispatch record of every pass with its kernel's name (the table of schema versions 1-5; stored as "
        "dispatch_record + kernel_symbol).",
        {
            "run_id": "The run.",
            "dispatch_index": "Run-local row number (0-based, pass by pass).",
            "pass_index": "The pass the record comes from.",
            "ordinal": "0-based enqueue order within the pass.",
            s._DISPATCH_COLUMNS[0][0]: s._DISPATCH_COLUMNS[0][2],
            "kernel_name": "Kernel symbol (or the renamed region under --kernel-rename CSV).",
            **{name: doc for name, _, doc in s._DISPATCH_COLUMNS[1:]},
        },
        _dispatch,
    ),
    View(
        "counter_value",
        "One row per (dispatch, counter): the value summed over hardware instances (stored 16 to a row as "
        "counter_reading + counter).",
        {
            "run_id": "The run.",
            "dispatch_index": "The dispatch record (of the pass that measured it).",
            "counter_name": "Counter name as collected (e.g. TCC_EA0_RDREQ_sum).",
            "value": "Value summed over hardware instances (counts; KB for FETCH_SIZE/WRITE_SIZE).",
        },
        _counter_value,
    ),
    View(
        "counter_instance",
        "Per-instance counter values (stored as counter_instance_reading + counter).",
        {
            "run_id": "The run.",
            "dispatch_index": "The dispatch record.",
            "counter_name": "Counter name without the [i] suffix.",
            "instance": "0-based hardware instance (e.g. TCC channel).",
            "value": "Value of this instance.",
        },
        _counter_instance,
    ),
    View(
        "dram_traffic",
        "DRAM bytes of each timing-pass dispatch with the formula used (stored on dispatch_record + dram_text); "
        "exact values have their bounds equal to them.",
        {
            "run_id": "The run.",
            "dispatch_index": "The timing-pass dispatch (counters of all passes joined).",
            "dram_read_bytes": "DRAM bytes read; NULL when undetermined.",
            "dram_read_bytes_min": "Lower bound of DRAM bytes read.",
            "dram_read_bytes_max": "Upper bound of DRAM bytes read.",
            "dram_write_bytes": "DRAM bytes written; NULL when undetermined.",
            "dram_write_bytes_min": "Lower bound of DRAM bytes written.",
            "dram_write_bytes_max": "Upper bound of DRAM bytes written.",
            "dram_formula": "The formula used (see rocroof.analysis.dram).",
            "dram_bytes_note": "Why a value is unknown or approximate.",
        },
        _dram_traffic,
    ),
]

VIEWS: list[View] = [
    *_COMPAT_VIEWS,
    View(
        "dispatch_dram",
        "One row per kernel dispatch of the timing pass: time, DRAM bytes joined across passes, bandwidth and op.",
        _DISPATCH_DOCS,
        _dispatch_dram,
    ),
    View(
        "op_invocation_summary",
        "One row per ggml op invocation: its dispatches summed.",
        {
            "run_id": "The run.",
            "op_index": "Run-local op invocation.",
            "invocation": "ggml invocation id.",
            "op": "ggml op (head op).",
            "op_list": "Ops of a fused group.",
            "node_name": "Head node name.",
            "layer": "Layer number.",
            **_AGG_DOCS,
        },
        _op_invocation_summary,
    ),
    View(
        "op_roofline",
        "One row per ggml op invocation: measured time and DRAM bytes beside the modelled bytes and FLOPs.",
        {
            "run_id": "The run.",
            "op_index": "Run-local op invocation.",
            "invocation": "ggml invocation id.",
            "op": "ggml op (head op).",
            "op_list": "Ops of a fused group.",
            "node_name": "Head node name.",
            "layer": "Layer number.",
            **_AGG_DOCS,
            **_ROOFLINE_DOCS,
        },
        _op_roofline,
    ),
    View(
        "op_verdict",
        "One row per ggml op invocation: its roofline verdict (Williams et al., CACM 2009) - the governing ceiling, "
        "memory/compute/latency bound, % of the roof and the time it would take at the roof.",
        _VERDICT_DOCS,
        _op_verdict,
    ),
    View(
        "op_summary",
        "One row per ggml op name per run (op NULL = dispatches outside any ggml range).",
        {
            "run_id": "The run.",
            "op": "ggml op (head op of fused groups); NULL for unattributed dispatches.",
            "invocations": "Distinct op invocations.",
            **_AGG_DOCS,
        },
        _op_summary,
    ),
    View(
        "kernel_summary",
        "One row per kernel name per run.",
        {"run_id": "The run.", "kernel_name": "Kernel symbol.", **_AGG_DOCS},
        _kernel_summary,
    ),
]


def compiled(view: View, dialect: sa.Dialect) -> str:
    """The ``SELECT`` of a view as SQL text for ``dialect``."""
    return str(view.build().compile(dialect=dialect, compile_kwargs={"literal_binds": True}))


def drop_all(conn: sa.Connection) -> None:
    """Drop every view of :data:`VIEWS` that exists (a table of the same name, from schemas 1-5, stays)."""
    existing = set(sa.inspect(conn).get_view_names())
    for view in reversed(VIEWS):
        if view.name in existing:
            conn.execute(sa.text(f"DROP VIEW {view.name}"))


def create_all(conn: sa.Connection) -> None:
    """Drop and re-create every view (in dependency order)."""
    drop_all(conn)
    for view in VIEWS:
        conn.execute(sa.text(f"CREATE VIEW {view.name} AS {compiled(view, conn.dialect)}"))
