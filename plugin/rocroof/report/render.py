"""Reports as text for people (terminal tables and Markdown), without pandas.

:class:`Report` holds a report's rows and the run facts a reader needs; its rows are a pandas
DataFrame (:func:`rocroof.report.tables.build_report`) or a :class:`Rows` read back from the
report stored with the run (:mod:`rocroof.report.quick`), and every function here reads them
as one mapping per row, so that both render alike. Nothing here imports pandas, numpy or
SQLAlchemy: ``rocroof report`` of a stored report starts in well under a second (issue 15's
0.5 s goal for 10^6 dispatches). Nothing here prints.
"""

from __future__ import annotations

import io
import math
import numbers
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ..analysis.ceiling_text import DRAM_RULES, SHIPPED_LABEL
from ..note import Note
from ..text import cell_text, markdown_code, markdown_text, one_line

By = Literal["dispatch", "kernel", "op", "invocation"]


class Rows:
    """Report rows without pandas: the column names and one dict per row, in report order.

    Supports what rendering asks of a DataFrame: ``len(rows)``, ``column in rows`` and
    :func:`records`.
    """

    def __init__(self, columns: list[str], rows: list[dict[str, Any]]) -> None:
        self.columns = list(columns)
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    def __contains__(self, column: object) -> bool:
        return column in self.columns

    def head(self, n: int) -> Rows:
        """The first ``n`` rows."""
        return Rows(self.columns, self.rows[:n])


def records(rows: Any) -> list[dict[str, Any]]:
    """A report's rows (a DataFrame or :class:`Rows`) as one dict per row, column -> value."""
    if isinstance(rows, Rows):
        return rows.rows
    return list(rows.to_dict("records"))


def column_values(rows: Any, column: str) -> list[Any]:
    """One column of a report's rows (a DataFrame or :class:`Rows`), without converting the others."""
    if isinstance(rows, Rows):
        return [r.get(column) for r in rows.rows]
    return list(rows[column].tolist())


def _is_known_number(v: Any) -> bool:
    """Whether ``v`` is a known number, as ``pandas.to_numeric(errors="coerce")`` would keep it."""
    if _nan(v):
        return False
    if isinstance(v, numbers.Number):
        return not (isinstance(v, numbers.Real) and math.isnan(float(v)))
    if isinstance(v, str):
        try:
            return not math.isnan(float(v))
        except ValueError:
            return False
    return False


def _sum_known(a: Any, b: Any) -> float:
    """``a + b`` as a float, NaN when either is unknown (``Series.sum(min_count=2)``)."""
    if not (_is_known_number(a) and _is_known_number(b)):
        return math.nan
    return float(a) + float(b)


@dataclass
class Report:
    """A report: rows plus the facts a reader needs to trust them.

    Attributes:
        by: the grouping.
        rows: the rows (columns listed in ``_COLUMNS[by]``), sorted.
        run: the run's row (``run`` table) as a dict.
        notes: the run's notes.
        total_rows: rows before ``--top`` was applied.
        totals: whole-run sums (``duration_ns``, ``dispatches``, ``unattributed_dispatches``...).
        ceilings: the run's ``run_ceiling`` rows (name -> value, source, mark).
        labels: the run's labels (``run_label``: key -> value; a sweep point's parameters).
        fused: for ``--by op``: ``(op, op_list, invocations)`` of the fused groups counted under
            their first op (the invocations the capture has: ``from_marker``), most invocations first.
    """

    by: By
    rows: Any
    run: dict[str, Any]
    notes: list[Note] = field(default_factory=list)
    total_rows: int = 0
    totals: dict[str, Any] = field(default_factory=dict)
    ceilings: dict[str, dict[str, Any]] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    fused: list[tuple[str, str, int]] = field(default_factory=list)


def _nan(v: Any) -> bool:
    """Whether ``v`` is unknown: None, NaN, or pandas' NA/NaT (told by type: pandas is not imported here)."""
    return v is None or (isinstance(v, float) and math.isnan(v)) or type(v).__name__ in ("NAType", "NaTType")


def _num(v: Any, scale: float = 1.0, digits: int = 2) -> str:
    if _nan(v):
        return "?"
    return f"{float(v) / scale:,.{digits}f}"


def _bytes_cell(row: Mapping[str, Any], key: str) -> str:
    v = row.get(key)
    if not _nan(v):
        return _num(v, 1e6, 3)
    lo, hi = row.get(f"{key}_min"), row.get(f"{key}_max")
    if not _nan(lo) and not _nan(hi):
        return f"? ({_num(lo, 1e6, 2)}–{_num(hi, 1e6, 2)})"
    return "?"


def _gbps_cell(row: Mapping[str, Any]) -> str:
    v = row.get("achieved_gbps")
    if not _nan(v):
        return _num(v, 1, 1)
    lo, hi = row.get("achieved_gbps_min"), row.get("achieved_gbps_max")
    if not _nan(lo) and not _nan(hi):
        return f"? ({_num(lo, 1, 0)}–{_num(hi, 1, 0)})"
    return "?"


def _pct_cell(row: Mapping[str, Any], peak: Any) -> str:
    v = row.get("pct_of_dram_peak")
    if not _nan(v):
        return _num(v, 1, 1)
    lo: Any = row.get("achieved_gbps_min")
    hi: Any = row.get("achieved_gbps_max")
    if not _nan(lo) and not _nan(hi) and not _nan(peak) and peak:
        return f"? ({_num(100 * lo / peak, 1, 0)}–{_num(100 * hi / peak, 1, 0)})"
    return "?"


def _time_at_peak_cell(row: Mapping[str, Any], peak: Any) -> str:
    v = row.get("dram_time_at_peak_ns")
    if not _nan(v):
        return _num(v, 1e3)

    def total(suffix: str) -> float:
        parts: list[Any] = [row.get(f"{k}{suffix}") for k in ("dram_read_bytes", "dram_write_bytes")]
        return float("nan") if any(_nan(x) for x in parts) else float(sum(parts))

    lo, hi = total("_min"), total("_max")
    if not _nan(lo) and not _nan(hi) and not _nan(peak) and peak:
        return f"? ({_num(lo / peak, 1e3)}–{_num(hi / peak, 1e3)})"
    return "?"


def _human_rows(report: Report) -> tuple[list[str], list[list[str]]]:
    """The report's header and rows as cell text for people (table, Markdown, HTML), controls escaped."""
    headers, lines = _human_cells(report)
    return headers, [[cell_text(c) for c in line] for line in lines]


def _human_cells(report: Report) -> tuple[list[str], list[list[str]]]:
    by = report.by
    headers: list[str] = []
    lines: list[list[str]] = []
    if by == "dispatch":
        headers = ["#", "kernel", "op", "time µs", "read MB", "write MB", "GB/s", "% peak", "µs at peak"]
        rows = records(report.rows)
        kernel_names = distinct_short_names([r["kernel_name"] for r in rows])
        for r, kernel in zip(rows, kernel_names, strict=True):
            op = r.get("op_list") if isinstance(r.get("op_list"), str) else r.get("op")
            lines.append(
                [
                    str(r["dispatch_id"]) if not _nan(r["dispatch_id"]) else "",
                    kernel,
                    f"{op} #{int(r['invocation'])}" if isinstance(op, str) and not _nan(r.get("invocation")) else "—",
                    _num(r["duration_ns"], 1e3),
                    _bytes_cell(r, "dram_read_bytes"),
                    _bytes_cell(r, "dram_write_bytes"),
                    _gbps_cell(r),
                    _pct_cell(r, report.run.get("dram_peak_gbps")),
                    _time_at_peak_cell(r, report.run.get("dram_peak_gbps")),
                ]
            )
        return headers, lines
    label = {"kernel": "kernel", "op": "ggml op", "invocation": "op invocation"}[by]
    headers = [label]
    if by == "op":
        headers.append("invocations")
    headers += ["dispatches", "time µs", "% time", "read MB", "write MB", "GB/s", "% peak", "µs at peak"]
    modelled = _has_roofline(report)
    if modelled:  # the roofline's columns replace "% peak" and "µs at peak" (same numbers for memory-bound ops)
        headers = [{"invocations": "inv.", "dispatches": "disp."}.get(h, h) for h in headers[:-2]]
        headers.insert(headers.index("% time") + 1, "µs/call")
        headers += ["model MB", "meas/model", "FLOP/B", "bound", "% roof", "µs at roof"]
    rows = records(report.rows)
    kernel_names = distinct_short_names([r["kernel_name"] for r in rows]) if by == "kernel" else []
    for i, r in enumerate(rows):
        if by == "kernel":
            name = kernel_names[i]
        elif by == "op":
            name = r["op"] if isinstance(r["op"], str) else "(unattributed)"
        else:
            op = r["op_list"] if isinstance(r.get("op_list"), str) else r["op"]
            node = "" if _nan(r["node_name"]) else str(r["node_name"])  # NULL is NaN here, and NaN is truthy
            name = " ".join(x for x in (str(op), node, f"#{int(r['invocation'])}") if x)
        line = [name]
        if by == "op":
            line.append(str(int(r["invocations"])))
        basis = r.get("bytes_basis") if isinstance(r.get("bytes_basis"), str) else None
        peak = report.run.get("dram_peak_gbps")
        if basis == "sampled":  # over the measured evaluations (the header says which)
            read, write = _num(r.get("measured_read_bytes"), 1e6, 3), _num(r.get("measured_write_bytes"), 1e6, 3)
        else:
            read, write = _bytes_cell(r, "dram_read_bytes"), _bytes_cell(r, "dram_write_bytes")
        gbps, pct, at_peak = _gbps_cell(r), _pct_cell(r, peak), _time_at_peak_cell(r, peak)
        if basis == "modelled":  # from the byte model: marked ~
            gbps = _modelled(r.get("model_gbps"), 1, 1)
            pct = _modelled(r.get("model_pct_of_dram_peak"), 1, 1)
            model_b = _sum_known(r.get("model_read_bytes"), r.get("model_write_bytes"))
            at_peak = _modelled(model_b / float(peak) if peak else math.nan, 1e3, 2)
        line += [
            str(int(r["dispatches"])),
            _num(r["duration_ns"], 1e3),
            _num(r["share_of_time_pct"], 1, 1),
            read,
            write,
            gbps,
            pct,
            at_peak,
        ]
        if modelled:
            model_bytes = _sum_known(r.get("model_read_bytes"), r.get("model_write_bytes"))
            flag = "*" if isinstance(r.get("flag"), str) and r.get("flag") else ""
            flag += "†" if isinstance(r.get("model_note"), str) and r.get("model_note") else ""
            if basis == "modelled":
                tail = [
                    "",
                    _modelled(r.get("model_arithmetic_intensity"), 1, 2),
                    "" if _nan(r.get("model_bound")) else "~" + str(r.get("model_bound")),
                    _modelled(r.get("model_pct_of_ceiling"), 1, 1),
                    _modelled(r.get("model_time_at_roof_ns"), 1e3, 2),
                ]
            else:
                tail = [
                    _num(r.get("measured_over_model"), 1, 2) + flag,
                    _num(r.get("arithmetic_intensity"), 1, 2),
                    "" if _nan(r.get("bound")) else str(r.get("bound")),
                    _num(r.get("pct_of_ceiling"), 1, 1),
                    _num(r.get("time_at_roof_ns"), 1e3, 2),
                ]
            line = line[:-2] + [_num(model_bytes, 1e6, 3), *tail]
            line.insert(headers.index("µs/call"), _num(r.get("mean_us_per_call"), 1, 2))
        lines.append(line)
    return headers, lines


def _has_values(rows: Any, column: str) -> bool:
    """Whether ``rows`` (a DataFrame or :class:`Rows`) has ``column`` with at least one known number in it."""
    return column in rows and any(_is_known_number(v) for v in column_values(rows, column))


def _has_roofline(report: Report) -> bool:
    """Whether the report's rows have the byte/FLOP model, so its tables show the roofline columns."""
    return report.by in ("op", "invocation") and _has_values(report.rows, "model_read_bytes")


def _modelled(v: Any, scale: float = 1.0, digits: int = 2) -> str:
    """A value from the byte model, marked ``~`` (unknown: ``?``)."""
    return "?" if _nan(v) else "~" + _num(v, scale, digits)


def _row_name(report: Report, r: Mapping[str, Any]) -> str:
    if report.by == "op":
        return str(r["op"])
    name = f"{r.get('op_list') or r['op']} {'' if _nan(r.get('node_name')) else r.get('node_name')}".strip()
    return name + (f" #{int(r['invocation'])}" if not _nan(r.get("invocation")) else "")


def _grouped(items: list[tuple[str, str, float]], mark: str) -> list[str]:
    """``mark names — text`` lines, one per distinct text; names listed up to 3, ratios as a range."""
    by_text: dict[str, list[tuple[str, float]]] = {}
    for name, text, ratio in items:
        by_text.setdefault(text, []).append((name, ratio))
    out = []
    for text, rows in by_text.items():
        names = ", ".join(n for n, _ in rows[:3]) + (f" and {len(rows) - 3} more" if len(rows) > 3 else "")
        ratios = [x for _, x in rows if x == x]
        span = ""
        if ratios:
            lo, hi = min(ratios), max(ratios)
            span = f"measured {lo:.2f}x model: " if lo == hi else f"measured {lo:.2f}–{hi:.2f}x model: "
        out.append(f"{mark} {names} — {span}{text}")
    return out


def _flag_lines(report: Report) -> list[str]:
    """Grouped explanations of rows outside [0.7, 1.3] (*) and of model assumptions (†), one line each.

    Op and node names come from the capture: their controls (a newline too) are escaped (:func:`one_line`).
    """
    if "flag" not in report.rows:
        return []
    flags, assumptions = [], []
    for r in records(report.rows):
        ratio = float(r["measured_over_model"]) if not _nan(r.get("measured_over_model")) else float("nan")
        if isinstance(r.get("flag"), str) and r["flag"]:
            text = r["flag"].split(" model: ", 1)[-1]
            flags.append((_row_name(report, r), text, ratio))
        if isinstance(r.get("model_note"), str) and r["model_note"]:
            assumptions.append((_row_name(report, r), r["model_note"], float("nan")))
    out = []
    if flags:
        out.append("measured/modelled DRAM bytes outside [0.7, 1.3] (marked *):")
        out += _grouped(flags, "*")
    if assumptions:
        out.append("model assumptions (marked †):")
        out += _grouped(assumptions, "†")
    return [one_line(line) for line in out]


def _fused_line(report: Report) -> str | None:
    """Which fused groups an op's row includes (rows are keyed by the group's first op), on one line."""
    if not report.fused:
        return None
    by_op: dict[str, list[str]] = {}
    for op, op_list, n in report.fused:
        by_op.setdefault(op, []).append(f"{op_list} ({n} inv.)")
    parts = [f"{op} includes {', '.join(groups)}" for op, groups in by_op.items()]
    return one_line("fused groups count under their first op: " + "; ".join(parts))


#: What each column of a human report means, by header: the key line lists those of the columns shown.
_ROOF_TEXT = (
    "against the governing ceiling (DRAM bandwidth left of the ridge, right of it the compute peak: INT8 matrix "
    "for matmuls on quantized weights, FP16/BF16 matrix for the other matrix ops, FP32 vector otherwise)"
)
_COLUMN_KEYS: dict[str, str] = {
    "#": "# = the profiler's dispatch id",
    "op": "op #N = the ggml op invocation (range) that launched it",
    "% time": "% time = share of the run's GPU time",
    "read MB": "read MB = DRAM bytes read (10^6)",
    "write MB": "write MB = DRAM bytes written (10^6)",
    "GB/s": "GB/s = (read + write DRAM bytes) / time",
    "% peak": "% peak = that as % of the DRAM ceiling",
    "µs at peak": "µs at peak = the time those bytes take at the DRAM ceiling",
    "µs/call": "µs/call = time per op invocation",
    "model MB": "model MB = the byte model's DRAM bytes (the ops' tensor sizes)",
    "meas/model": "meas/model = measured / modelled DRAM bytes",
    "FLOP/B": "FLOP/B = modelled FLOP per measured DRAM byte",
    "bound": "bound = side of the roofline's ridge (latency: under 10% of the roof in calls under 20 µs: launch, "
    "latency or too little parallelism)",
    "% roof": "% roof = % of the roof " + _ROOF_TEXT,
    "µs at roof": "µs at roof = the time at that roof",
}


def _legend(report: Report, headers: list[str]) -> str | None:
    """The key line: what each of the ``headers`` shown means, in their order (None without rows)."""
    if not len(report.rows):
        return None
    time = {
        "dispatch": "time µs = GPU kernel time",
        "kernel": "time µs = GPU kernel time summed over the dispatches",
    }.get(report.by, "time µs = summed GPU kernel time")
    keys = {**_COLUMN_KEYS, "time µs": time}
    if "% roof" not in headers:
        keys["µs at roof"] = "µs at roof = the time at the roof " + _ROOF_TEXT
    if "read MB" in headers and "write MB" in headers:  # one clause for the pair
        keys["read MB"] = keys["write MB"] = "read/write MB = DRAM bytes (10^6)"
    parts: list[str] = []
    if "bytes_basis" in report.rows and "modelled" in column_values(report.rows, "bytes_basis"):
        parts.append("~ = from the byte model (no DRAM counters for the op)")
    for header in headers:
        text = keys.get(header)
        if text and text not in parts:
            parts.append(text)
    return "key: " + "; ".join(parts) if parts else None


#: Compute ceilings shown in headers and plots: run_ceiling name, label, unit.
_COMPUTE_CEILINGS = (
    ("int8_matrix_tops", "INT8 matrix", "TOP/s"),
    ("fp16_matrix_tflops", "FP16 matrix", "TFLOP/s"),
    ("fp32_vector_tflops", "FP32 vector", "TFLOP/s"),
)


def _ceiling_line(report: Report) -> str | None:
    parts = []
    for key, label, unit in _COMPUTE_CEILINGS:
        c = report.ceilings.get(key)
        if c and not _nan(c.get("value")):
            parts.append(f"{label} {float(c['value']):,.1f} {unit} ({c.get('mark') or '?'})")
    origins = _table_origins(report)
    return (
        ("compute ceilings: " + ", ".join(parts) + (f" — {', '.join(origins)}" if origins else "")) if parts else None
    )


def _table_origins(report: Report) -> list[str]:
    """The peaks tables the run's compute ceilings come from (``configs/peaks.yaml``, a ROCROOF_PEAKS path)."""
    found = set()
    for key, _label, _unit in _COMPUTE_CEILINGS:
        source = str((report.ceilings.get(key) or {}).get("source") or "")
        head = source.split(": ", 1)[0] if ": " in source else ""
        if head.endswith((".yaml", ".yml")):
            found.add(head)
        elif source and (report.ceilings.get(key) or {}).get("mark") != "measured":
            found.add(SHIPPED_LABEL)  # stored before sources named their table: the shipped one
    return sorted(found)


def short_kernel_name(name: Any, width: int = 72) -> str:
    """A kernel name for tables: no ``void`` return type, no argument list, at most ``width`` chars.

    >>> short_kernel_name("void mul_mat_vec_q<(ggml_type)8, 1, false>(const void *, const void *, float *)")
    'mul_mat_vec_q<(ggml_type)8, 1, false>'
    """
    text = "" if _nan(name) else str(name).strip()
    if text.startswith("void "):
        text = text[5:]
    if text.endswith(")"):
        depth = 0
        for i in range(len(text) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(text[i], 0)
            if depth == 0:
                if i > 0:  # keep "(anonymous namespace)"-style names whole
                    text = text[:i].rstrip()
                break
    return text if len(text) <= width else text[: width - 1] + "…"


def _short(name: Any, width: int = 72) -> str:
    return short_kernel_name(name, width)


def distinct_short_names(names: list[Any], width: int = 72) -> list[str]:
    """:func:`short_kernel_name` of each name, cut in the middle where two different names would read the same.

    Generated kernels (Tensile's ``Cijk_Alik_Bljk_..._MT128x128x64_MI16x16x1_...``, CK's templates)
    differ in their last parameters: cut at the end, two of them show one text. Those keep their
    start and their end around a ``…``.

    >>> distinct_short_names(["Cijk_" + "x" * 80 + "_ISA942", "Cijk_" + "x" * 80 + "_ISA90a"], width=20)
    ['Cijk_xxxx…xxx_ISA942', 'Cijk_xxxx…xxx_ISA90a']
    """
    shown = [short_kernel_name(n, width) for n in names]
    full = [short_kernel_name(n, 10**9) for n in names]
    wholes: dict[str, set[str]] = {}
    for cut, whole in zip(shown, full, strict=True):
        wholes.setdefault(cut, set()).add(whole)
    head = (width - 1) // 2
    tail = width - 1 - head
    out = [
        whole[:head] + "…" + whole[-tail:] if len(wholes[cut]) > 1 and len(whole) > width else cut
        for cut, whole in zip(shown, full, strict=True)
    ]
    # names that differ in their middle only: numbered in order of appearance (#1, #2...)
    seen: dict[str, dict[str, int]] = {}  # shown text -> {whole name: its number}
    for text, whole in zip(out, full, strict=True):
        numbers = seen.setdefault(text, {})
        numbers.setdefault(whole, len(numbers) + 1)
    return [
        f"{text} #{seen[text][whole]}" if len(seen[text]) > 1 else text for text, whole in zip(out, full, strict=True)
    ]


def gpu_text(name: Any, arch: Any) -> str:
    """The GPU for people: ``MI300X (gfx942)``, ``gfx942`` or ``MI300X``; empty when unknown.

    Args:
        name: product name, or None.
        arch: architecture (gfx target), or None.

    Returns:
        The text.
    """
    name = name.strip() if isinstance(name, str) and name.strip() else None
    arch = arch.strip() if isinstance(arch, str) and arch.strip() else None
    if name and arch:
        return f"{name} ({arch})"
    return name or arch or ""


_TIMING_SOURCES = {
    "trace": "a trace pass",
    "counter_pass": "a counter pass (kernels serialised)",
    "merged_counters": "merged counter passes (kernels serialised)",
    "profiler": "the profiler's own per-kernel times",
    "none": "no timing source",
}


def timing_text(source: Any) -> str:
    """Where a run's durations come from, for people (``run.timing_source`` values)."""
    return _TIMING_SOURCES.get(str(source), str(source))


def ceiling_rule_text(run: Any) -> str:
    """`` (peaks table, GPU matched by product name)``: how a run's DRAM ceiling was chosen, or ``""``."""
    rule = run.get("dram_peak_rule") if hasattr(run, "get") else None
    text = DRAM_RULES.get(str(rule)) if isinstance(rule, str) else None
    return f" ({text})" if text else ""


def note_line(note: Note) -> str:
    """``warning: <message>`` on one line: a note's message may quote the capture (a file name, a kernel)."""
    return one_line(f"{note.severity}: {note.message}")


def _header_lines(report: Report) -> list[str]:
    """The lines above a report: the run, its labels, timings, ceilings, sample and measurement notes.

    Each is one line whatever the capture holds: its path, GPU name, labels and ceiling sources
    come from files someone else wrote, so their controls (a newline too) are escaped
    (:func:`one_line`). A path with a newline would otherwise start a line of the capture's
    choosing under the report's own first line.
    """
    r = report.run
    gpu = gpu_text(r.get("gpu_name"), r.get("gpu_arch"))
    timing = timing_text(r.get("timing_source"))
    if report.totals.get("duration_ns") is None and report.total_rows:
        warned = any(n.severity == "warning" and "timestamp" in n.code for n in report.notes)
        timing += " (durations unknown: see the warnings)" if warned else " (durations unknown: no kernel timestamps)"
    lines = [
        f"run {r['run_id']}: {r.get('source_path') or ''} — {r.get('profiler') or '?'} on {gpu or 'unknown GPU'}",
        f"timings from {timing}; attribution: {r.get('attribution_method')}",
    ]
    if report.labels:
        lines.insert(1, "labels: " + ", ".join(f"{k}={v}" for k, v in report.labels.items()))
    if r.get("dram_peak_gbps"):
        lines.append(
            f"DRAM ceiling {float(r['dram_peak_gbps']):,.1f} GB/s{ceiling_rule_text(r)} — {r.get('dram_peak_source')}"
        )
    else:
        lines.append("DRAM ceiling: unknown (no % of peak)")
    compute = _ceiling_line(report) if _has_roofline(report) else None  # only where FLOP/B and % roof show
    if compute:
        lines.append(compute)
    sample = next((n.message for n in report.notes if n.code == "counter-sample"), None)
    if sample and report.by != "dispatch":
        lines.append(
            f"{sample}. Read/write MB, GB/s, % peak, meas/model, FLOP/B, bound and % roof are over the measured "
            "ones; µs at peak/roof scale them to the whole time, and model MB covers every evaluation"
        )
    elif sample:
        lines.append(f"{sample} (the other dispatches' bytes are unknown: ?)")
    measured = any(
        _has_values(report.rows, c) for c in ("dram_read_bytes", "measured_read_bytes", "dram_read_bytes_min")
    )
    if not measured and report.total_rows and report.by in ("op", "invocation"):
        any_model = _has_roofline(report)
        lines.append(
            "no DRAM counters in this run: values marked ~ come from the byte model (the ops' tensor sizes), not "
            "from measurement"
            if any_model
            else "no DRAM counters and no op metadata in this run: times only"
        )
    if str(r.get("profiler") or "").startswith("ncu") and r.get("cache_control") == "all" and measured:
        lines.append(
            "DRAM bytes: Nsight Compute replay with caches flushed before each kernel (cold); "
            "times: the Nsight Systems run (warm caches, kernels back to back)"
        )
    return [one_line(line) for line in lines]


def _stdout_is_terminal() -> bool:
    """Whether standard output is a terminal (not a file or a pipe)."""
    import sys

    try:
        return bool(sys.stdout.isatty())
    except (AttributeError, ValueError):  # replaced or closed
        return False


def _width() -> int:
    """The terminal's width (``COLUMNS`` or the tty; 160 when output goes to a file or pipe)."""
    import shutil

    return max(40, shutil.get_terminal_size((160, 24)).columns)


#: Report columns a narrow terminal drops first (one at a time, until the table fits): those
#: another column implies or that matter least when reading a roofline table.
_DROP_FIRST = (
    *("µs at roof", "µs at peak", "disp.", "dispatches", "write MB", "model MB", "µs/call", "% peak", "% time"),
    *("FLOP/B", "inv."),
)
#: Report columns that may fold onto several lines (long names), with the fewest characters each
#: is given before columns are dropped; every other cell stays whole.
_FOLDING_COLUMNS = {"kernel": 24, "op invocation": 28, "op": 16}


def _record_blocks(headers: list[str], rows: list[list[str]]) -> list[str]:
    """Lines of one block per row (``-- row N --``, then ``header: value``), for tables too wide to print."""
    pad = max((len(h) for h in headers), default=0)
    lines: list[str] = []
    for i, row in enumerate(rows):
        lines.append(f"-- row {i + 1} --")
        lines += [f"{h.rjust(pad)}: {v}" for h, v in zip(headers, row, strict=True)]
    return lines


def _table_width(headers: list[str], rows: list[list[str]], cols: list[int], caps: dict[int, int]) -> int:
    """Characters a rich SIMPLE_HEAVY table of columns ``cols`` needs on one line per row.

    Each column is as wide as its widest cell or header, at most ``caps[j]`` for a column that may
    fold; three characters separate columns (padding, rule, padding).
    """
    total = 0
    for j in cols:
        w = max([len(headers[j])] + [len(row[j]) for row in rows])
        total += min(w, caps[j]) if j in caps else w
    return total + 3 * (len(cols) - 1)


def _fit_columns(
    headers: list[str], lines: list[list[str]], width: int
) -> tuple[list[str], list[list[str]], list[str], int]:
    """Drop columns (:data:`_DROP_FIRST` order) until the table fits ``width`` characters.

    Numbers are never folded across lines: a table too wide for the terminal loses whole columns
    instead, and the caller names them. A name column of :data:`_FOLDING_COLUMNS` counts as its
    minimum there (it folds); three characters separate columns (padding, rule, padding).

    Returns:
        The headers and lines kept, the dropped headers in the order dropped, and the width the
        kept columns need (more than ``width`` when even the fewest columns do not fit).
    """
    caps = {j: _FOLDING_COLUMNS[h] for j, h in enumerate(headers) if h in _FOLDING_COLUMNS}

    def needed(cols: list[int]) -> int:
        return _table_width(headers, lines, cols, caps)

    keep, dropped = _drop_columns(headers, _DROP_FIRST, lambda cols: needed(cols) <= width)
    return [headers[j] for j in keep], [[line[j] for j in keep] for line in lines], dropped, needed(keep)


def _md_cell(text: str, code: bool) -> str:
    """A Markdown table cell: kernel names as code spans, other text with its markup escaped.

    A code span (:func:`markdown_code`) shows ``<float>``, ``*`` and backticks as they are; other
    cells pass :func:`markdown_text`.
    """
    return markdown_code(text) if code else markdown_text(text)


#: Columns a Markdown report and diff table have at most by default (a PR review's width).
MARKDOWN_COLUMNS = 9
#: Columns a Markdown table loses first to fit :data:`MARKDOWN_COLUMNS`: the verdicts (bound,
#: % roof, µs at roof, meas/model) and time stay; counts, per-call time and the byte split go.
_MARKDOWN_DROP_FIRST = (
    *("disp.", "dispatches", "inv.", "µs/call", "write MB", "model MB", "read MB"),
    *("µs at peak", "% peak", "% time", "FLOP/B", "invocations"),
)


def _markdown_budget(headers: list[str], lines: list[list[str]]) -> tuple[list[str], list[list[str]], list[str]]:
    """Drop columns (:data:`_MARKDOWN_DROP_FIRST` order) down to :data:`MARKDOWN_COLUMNS`; the dropped named."""
    keep, dropped = _drop_columns(headers, _MARKDOWN_DROP_FIRST, lambda cols: len(cols) <= MARKDOWN_COLUMNS)
    return [headers[j] for j in keep], [[line[j] for j in keep] for line in lines], dropped


def _drop_columns(
    headers: list[str], order: Iterable[str], fits: Callable[[list[int]], bool]
) -> tuple[list[int], list[str]]:
    """Column positions kept after dropping headers in ``order`` until ``fits(kept)``, and those dropped."""
    keep = list(range(len(headers)))
    dropped: list[str] = []
    for name in order:
        if fits(keep):
            break
        if name in headers and headers.index(name) in keep:
            keep.remove(headers.index(name))
            dropped.append(name)
    return keep, dropped


def render_text(
    report: Report,
    fmt: Literal["table", "markdown"] = "table",
    width: int | None = None,
    *,
    all_columns: bool = False,
) -> str:
    """Render a report for people: a table for terminals (rich) or Markdown for PR reviews.

    Args:
        report: from :func:`rocroof.report.tables.build_report` (rows as a DataFrame) or
            :func:`rocroof.report.quick.stored_report` (rows as :class:`Rows`).
        fmt: ``table`` or ``markdown``.
        width: terminal width for ``table`` (default: the terminal's, 160 into a file or pipe).
        all_columns: Markdown only: every column, not :data:`MARKDOWN_COLUMNS` at most.

    Returns:
        The text, ending with a newline.
    """
    headers, lines = _human_rows(report)
    footer = []
    if report.total_rows == 0:
        footer.append(
            "no ggml op invocations in this run (no ggml markers or op metadata were captured); try --by kernel"
            if report.by == "invocation"
            else "no kernel dispatches in this run"
        )
    if report.total_rows > len(report.rows):
        footer.append(
            f"showing {len(report.rows):,} of {report.total_rows:,} rows, the longest (--top N for more; "
            "--format csv or json for all)"
        )
    footer += _flag_lines(report)
    fused_line = _fused_line(report)
    if fused_line:
        footer.append(fused_line)
    legend_at = len(footer)  # the key line goes here, once the columns shown are known
    if report.by == "op" and report.totals.get("unattributed_dispatches"):
        footer.append(
            f"{report.totals['unattributed_dispatches']} of {report.totals['dispatches']} dispatches "
            "are outside any ggml range"
        )
    if fmt == "markdown":
        md_dropped: list[str] = []
        if not all_columns:
            headers, lines, md_dropped = _markdown_budget(headers, lines)
        legend = _legend(report, headers)
        if legend:
            footer.insert(legend_at, legend)
        if md_dropped:
            footer.insert(
                0,
                f"left out to fit a review ({MARKDOWN_COLUMNS} columns at most): {', '.join(md_dropped)} "
                "(--all-columns shows them)",
            )
        # the header lines quote the capture (its path, GPU name, labels, ceiling sources): Markdown's
        # markup in them escaped, as in the cells, the footers and the notes (markdown_text)
        header_lines = _header_lines(report)
        labels = [line for line in header_lines[1:] if line.startswith("labels: ")]
        out = [f"**rocroof** {markdown_text(header_lines[0])}  ", *(f"{markdown_text(line)}  " for line in labels), ""]
        # the provenance (timings, ceilings and their sources) folded: one click away in a PR comment
        out += ["<details><summary>how it was measured</summary>", ""]
        out += [f"{markdown_text(line)}  " for line in header_lines[1:] if line not in labels]
        out += ["", "</details>", ""]
        text_cols = {i for i, h in enumerate(headers) if i == 0 or h in ("kernel", "op", "bound")}
        out.append("| " + " | ".join(markdown_text(h) for h in headers) + " |")
        out.append("|" + "|".join(":---" if i in text_cols else "---:" for i in range(len(headers))) + "|")
        for line in lines:
            out.append("| " + " | ".join(_md_cell(c, code=headers[i] == "kernel") for i, c in enumerate(line)) + " |")
        out.append("")
        for f in footer:
            out.append(f"_{markdown_text(f)}_  ")
        for n in report.notes:
            if n.severity != "info":
                out.append(f"- **{markdown_text(n.severity)}** ({markdown_text(n.code)}): {markdown_text(n.message)}")
        n_info = sum(1 for n in report.notes if n.severity == "info")
        if n_info:
            out.append(f"_({n_info} info note(s): rocroof runs --notes {report.run['run_id']})_")
        return "\n".join(out).rstrip() + "\n"
    # going to a file or a pipe (no width given, no terminal): prose lines stay whole, unwrapped
    # (a PR or a log reflows them); the table still fits the width
    soft = width is None and not _stdout_is_terminal()

    def say(text: str) -> None:
        console.print(text, highlight=False, markup=False, soft_wrap=soft)

    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    width = width or _width()
    all_headers, all_lines = headers, lines
    headers, lines, dropped, needed = _fit_columns(headers, lines, width)
    console = Console(file=io.StringIO(), width=width, force_terminal=False, color_system=None)
    for text in _header_lines(report):
        say(text)
    if needed > width:  # not even the fewest columns fit: one block per row, every value whole
        legend = _legend(report, all_headers)
        if legend:
            footer.insert(legend_at, legend)
        for block_line in _record_blocks(all_headers, all_lines):
            console.print(block_line, highlight=False, markup=False)
    else:
        legend = _legend(report, headers)  # the key explains the columns shown
        if legend:
            footer.insert(legend_at, legend)
        if dropped:
            footer.insert(
                0,
                f"left out for a terminal of {width} columns: {', '.join(dropped)} (a wider terminal or "
                "--format markdown|csv|json shows every column)",
            )
        table = Table(box=box.SIMPLE_HEAVY, show_edge=False, pad_edge=False)
        for i, h in enumerate(headers):
            table.add_column(
                h,
                justify="left" if i == 0 or h in _TEXT_COLUMNS else "right",
                overflow="fold",
                no_wrap=h not in _FOLDING_COLUMNS,  # numbers and op names stay whole; long names fold
            )
        for cells in lines:
            table.add_row(*(Text(c) for c in cells))  # literal text: '[ref-5]' is not console markup
        console.print(table)
    for f in footer:
        say(f)
    for n in report.notes:
        if n.severity != "info":
            say(note_line(n))
    infos = [n for n in report.notes if n.severity == "info"]
    if infos:
        say(f"({len(infos)} info note(s): rocroof runs --notes {report.run['run_id']})")
    out = console.file.getvalue()  # type: ignore[attr-defined]
    return str(out)


#: Report columns of text (left-aligned in tables and HTML); the others are numbers.
_TEXT_COLUMNS = ("kernel", "op", "bound")
