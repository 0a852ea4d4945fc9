"""Roofline plots (matplotlib): ceilings of the run's GPU and one point per ggml op type; the MoE heat map.

The roofline (Williams, Waterman, Patterson, "Roofline: an insightful visual performance model",
CACM 52(4), 2009): attainable FLOP/s = min(peak FLOP/s, arithmetic intensity × peak DRAM
bandwidth). x is arithmetic intensity in FLOP per DRAM byte, y achieved FLOP/s; both log scale.
Each op type is drawn twice at the same height (its achieved FLOP/s): a filled marker at the
intensity from *measured* DRAM bytes and a hollow one at the intensity from *modelled* bytes,
joined by a thin line, so a reader sees at once how far the measurement is from the model
(a point right of its model: fewer DRAM bytes than modelled, e.g. served from cache).
Marker area is proportional to the op type's share of GPU time.
"""

from __future__ import annotations

import contextlib
import io
import math
import os
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..errors import InputError, OutputError
from ..text import one_line

#: Extensions of the files a plot is written as; a name given with one of them (any case) has it dropped.
IMAGE_SUFFIXES = (".png", ".svg")
#: Columns :func:`roofline_figure` reads from its ``points`` frame.
POINT_COLUMNS = ("label", "ai_measured", "ai_model", "flops_per_s", "time_share")
#: Points (the ops with the most time) named beside their marker; the legend names them all.
LABELLED_POINTS = 12


@dataclass(frozen=True)
class PlotCeilings:
    """Ceilings to draw.

    Attributes:
        dram_gbps: peak DRAM bandwidth, GB/s (1e9 B/s); the slanted roof.
        compute_tflops: flat roofs, name -> TFLOP/s (1e12 FLOP/s; TOP/s for names starting with
            ``INT``), e.g. ``{"FP16 matrix": 989.4}``.
        source: one line naming where the numbers come from (shown under the title).
        dram_mark: the DRAM value's mark (verified, derived, unverified, measured), shown in the legend.
    """

    dram_gbps: float
    compute_tflops: Mapping[str, float] = field(default_factory=dict)
    source: str = ""
    dram_mark: str = ""


def plot_text(text: object) -> str:
    """``text`` for matplotlib: one line, controls escaped (``\\x1b``), ``$`` literal (not mathtext).

    A capture's path, op or run name drawn as is would draw nothing for ESC or BEL (matplotlib
    warns that the font lacks the glyph, naming its own files) and break a title at a newline;
    text between two ``$`` would be parsed as mathematics, and a bad formula fails the plot.
    """
    return one_line(str(text)).replace("$", r"\$")


@contextlib.contextmanager
def _no_glyph_warnings() -> Iterator[None]:
    """Matplotlib's warnings about glyphs its font lacks, silenced (e.g. CJK in a path: 漢).

    Control characters never get there (:func:`plot_text`); a printable character the font lacks is
    drawn as a box, and the warning, naming matplotlib's files, would reach the user's terminal.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"Glyph \d+ .*missing from", category=UserWarning)
        yield


def _pct(value: float) -> str:
    """A share of time for the legend: one decimal under 1%, none above."""
    return f"{value:.1f}%" if value < 1 else f"{value:.0f}%"


@_no_glyph_warnings()
def roofline_figure(points: pd.DataFrame, ceilings: PlotCeilings, title: str) -> object:
    """A matplotlib Figure of the roofline with ``points`` (see :data:`POINT_COLUMNS`).

    Points without FLOPs or intensity are left out (ops that do no arithmetic, e.g. GET_ROWS).
    Every text drawn (title, ceiling names, op labels) passes :func:`plot_text`.

    Raises:
        ValueError: a missing column in ``points`` or a non-positive bandwidth.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    missing = [c for c in POINT_COLUMNS if c not in points.columns]
    if missing:
        raise ValueError(f"points lack column(s) {', '.join(missing)}")
    if not ceilings.dram_gbps or ceilings.dram_gbps <= 0:
        raise ValueError("a roofline needs a positive DRAM bandwidth ceiling")
    # an op is drawn where measured bytes place it (filled), modelled bytes (hollow), or both
    plotted = (points["flops_per_s"] > 0) & ((points["ai_measured"] > 0) | (points["ai_model"] > 0))
    pts = points[plotted].copy()
    left_out = [plot_text(v) for v in points.loc[~plotted, "label"]]
    fig, ax = plt.subplots(figsize=(10, 5.5), dpi=120)
    # the x range covers every point (measured and modelled), at least 10^-2 .. 10^4 FLOP/B
    xs = pd.concat([pts["ai_measured"], pts["ai_model"]]).astype(float)
    xs = xs[np.isfinite(xs) & (xs > 0)]
    x_lo = min(-2.0, math.floor(math.log10(float(xs.min())) - 0.3)) if len(xs) else -2.0
    x_hi = max(4.0, math.ceil(math.log10(float(xs.max())) + 0.3)) if len(xs) else 4.0
    ai = np.logspace(x_lo, x_hi, 400)
    bw = ceilings.dram_gbps * 1e9
    peaks = {k: v * 1e12 for k, v in ceilings.compute_tflops.items() if v and v > 0}
    top = max(peaks.values()) if peaks else None
    roof = ai * bw if top is None else np.minimum(ai * bw, top)
    dram_mark = plot_text(ceilings.dram_mark)
    dram_label = f"DRAM {ceilings.dram_gbps:,.0f} GB/s" + (f" ({dram_mark})" if dram_mark else "")
    ax.plot(ai, roof, color="black", lw=1.8, label=dram_label)
    styles = ["--", ":", "-."]
    above = float("inf")  # the roof drawn just above this one
    for i, (name, peak) in enumerate(sorted(peaks.items(), key=lambda kv: -kv[1])):
        ridge = peak / bw
        if peak != top:  # the highest roof is the black line's own flat part: not drawn twice
            ax.plot([ridge, ai[-1]], [peak, peak], ls=styles[i % 3], color="dimgray", lw=1.2)
        unit = "TOP/s" if name.startswith("INT") else "TFLOP/s"  # integer roofs count operations
        # a label sits on its roof, or under it when the roof above is within 3x (INT8 is 2x FP16)
        va = "top" if above / peak < 3 else "bottom"
        ax.annotate(
            f"{plot_text(name)} {peak / 1e12:,.0f} {unit}",
            (ai[-1] / 1.5, peak),
            xytext=(0, -3 if va == "top" else 2),  # points: clear of the roof's own line
            textcoords="offset points",
            ha="right",
            va=va,
            fontsize=8,
            bbox={"fc": "white", "ec": "none", "alpha": 0.85, "pad": 1},  # a line crossing it stays behind
            zorder=4,
        )
        above = peak
    colors = plt.get_cmap("tab10")
    for i, row in enumerate(pts.sort_values("time_share", ascending=False).itertuples(index=False)):
        size = 40 + 1400 * float(row.time_share)
        c = colors(i % 10)
        marker = _MARKERS[(i // 10) % len(_MARKERS)]  # colour and shape together tell up to 60 ops apart
        measured = pd.notna(row.ai_measured) and row.ai_measured > 0
        modelled = pd.notna(row.ai_model) and row.ai_model > 0
        name = plot_text(row.label)
        label = f"{name} ({_pct(100 * row.time_share)} time)" + ("" if measured else ", modelled")
        if measured:
            ax.scatter(
                [row.ai_measured],
                [row.flops_per_s],
                s=size,
                color=c,
                marker=marker,
                alpha=0.8,
                edgecolors="black",
                zorder=3,
                label=label,
            )
        if modelled:
            ax.scatter(
                [row.ai_model],
                [row.flops_per_s],
                s=size,
                marker=marker,
                facecolors="none",
                edgecolors=[c],
                linewidths=1.5,
                zorder=3,
                label=None if measured else label,
            )
        if measured and modelled:
            ax.plot([row.ai_model, row.ai_measured], [row.flops_per_s] * 2, color=c, lw=0.8, zorder=2)
        if i < LABELLED_POINTS:  # the ops with the most time carry their name beside the point
            ax.annotate(
                name,
                (row.ai_measured if measured else row.ai_model, row.flops_per_s),
                xytext=(math.sqrt(size) / 2 + 3, math.sqrt(size) / 4),  # beside the marker (s: points^2)
                textcoords="offset points",
                fontsize=7,
                color="#333",
                zorder=5,
            )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP / DRAM byte); filled: measured bytes, hollow: modelled bytes")
    ax.set_ylabel("achieved FLOP/s")
    lo = min([float(pts["flops_per_s"].min())] if len(pts) else [1e9]) / 10
    ax.set_ylim(lo, (top or float(roof.max())) * 3)
    ax.set_xlim(ai[0], ai[-1])
    source = plot_text(ceilings.source)
    ax.set_title(plot_text(title) + (f"\n{source}" if source else ""), fontsize=10)
    if left_out:
        ax.text(
            0.99,
            0.01,
            "no FLOPs or no bytes, not plotted: " + ", ".join(left_out),
            transform=ax.transAxes,
            ha="right",
            va="bottom",
            fontsize=7,
            color="dimgray",
        )
    ax.grid(True, which="major", alpha=0.3)
    from matplotlib.lines import Line2D

    handles, labels = ax.get_legend_handles_labels()
    fixed: list[Any] = []  # legend markers of one size: the plot's sizes encode time share, not identity
    n_points = 0
    for h in handles:
        if hasattr(h, "get_facecolor"):
            marker = _MARKERS[(n_points // 10) % len(_MARKERS)]
            n_points += 1
            faces = h.get_facecolor()
            hollow = len(faces) == 0  # an op with modelled bytes only: its hollow marker in the legend
            fixed.append(
                Line2D(
                    [],
                    [],
                    marker=marker,
                    ls="",
                    markersize=7,
                    markerfacecolor="none" if hollow else faces[0],
                    markeredgecolor=h.get_edgecolor()[0] if hollow else "black",  # type: ignore[attr-defined]
                )
            )
        else:
            fixed.append(h)
    # beside the axes, so that it never hides the roof or a point
    ax.legend(fixed, labels, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), framealpha=0.9)
    fig.tight_layout()
    return fig


#: Marker shapes, one per group of ten ops (the colour map has ten colours).
_MARKERS = ("o", "s", "^", "D", "v", "P")


def plot_base(name: str | Path, option: str = "--out", example: str = "docs/decode-roofline") -> Path:
    """The base name of a plot's files, from the name the user gave (``--out``, ``--plot``).

    The rule: a trailing ``.png`` or ``.svg`` (any case) is dropped, since each plot is written
    as both; any other dot stays part of the name, and the extensions are appended to the whole
    name by the ``save_*`` functions. ``moe.v2`` -> ``moe.v2`` (``moe.v2.png``, ``moe.v2.svg``);
    ``r3.png`` and ``r3.SVG`` -> ``r3`` (``r3.png``, ``r3.svg``); ``a.png.png`` -> ``a.png``.

    Args:
        name: the path as typed (relative to the working folder, or absolute); give the string:
            a :class:`~pathlib.Path` has already lost a trailing ``/`` (``plots/`` is ``plots``).
        option: the option's name, for the error message.
        example: a good name, for the error message.

    Raises:
        InputError: no file name is left (``""``, ``.png``, ``..png``), or ``name`` names a folder: an
            existing one, or one written as a folder (ending in ``/``, ``/.`` or ``..``).
    """
    text = os.fspath(name)
    path = Path(text)
    typed_last = text.replace(os.sep, "/").rsplit("/", 1)[-1]  # Path("plots/") and Path("plots/.") are "plots"
    if text and (typed_last in ("", ".", "..") or path.is_dir()):
        raise InputError(
            f"{option} {text!r} names a folder: expected a file name (the .png and .svg files are named after it), "
            f"e.g. {path / Path(example).name}"
        )
    stem = path.name
    if stem.lower().endswith(IMAGE_SUFFIXES):
        stem = stem[: -len(".png")]  # both suffixes have four characters
    if stem in ("", ".", ".."):  # ".png", "..png"
        raise InputError(
            f"{option} {text!r}: expected a file name (the .png and .svg files are named after it), e.g. {example}"
        )
    return path.with_name(stem)


def save_roofline(points: pd.DataFrame, ceilings: PlotCeilings, title: str, base: Path) -> list[Path]:
    """Write ``<base>.png`` and ``<base>.svg``; return the paths (no timestamps in the files).

    The extensions are appended to the whole name: ``moe.v2`` gives ``moe.v2.png`` (see
    :func:`plot_base` for a name given with ``.png`` or ``.svg``).

    Raises:
        OutputError: ``base``'s folder does not exist or is a file, or a file cannot be written
            (permissions, a full disk); nothing is left half-written under the final names.
    """
    _check_folder(base)
    return _save(roofline_figure(points, ceilings, title), base)


@_no_glyph_warnings()
def expert_heatmap_figure(tokens: pd.DataFrame, title: str) -> object:
    """A matplotlib Figure: tokens routed to each expert (x) of each MoE layer (y), one cell each.

    Args:
        tokens: :func:`rocroof.analysis.moe.layer_expert_tokens` (index layer, one column per
            expert, tokens summed over the run's evaluations).
        title: the figure's title.

    Each row is coloured on the same scale; a row's hottest cell against its mean is the layer's
    skew, which the colour bar's token counts let a reader read off.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = tokens.to_numpy(dtype=float)
    n_layers, n_experts = data.shape
    fig, ax = plt.subplots(figsize=(min(16.0, 3.0 + 0.18 * n_experts), min(14.0, 1.8 + 0.28 * n_layers)), dpi=110)
    image = ax.imshow(data, aspect="auto", cmap="viridis", interpolation="nearest", origin="upper")
    ax.set_xlabel("expert")
    ax.set_ylabel("layer")
    ax.set_yticks(range(n_layers), [plot_text(v) for v in tokens.index])
    step = max(1, n_experts // 16)
    ax.set_xticks(range(0, n_experts, step), [str(v) for v in range(0, n_experts, step)])
    ax.set_title(plot_text(title), fontsize=10)
    fig.colorbar(image, ax=ax, label="tokens routed (all evaluations)")
    fig.tight_layout()
    return fig


@_no_glyph_warnings()
def fleet_heatmap_figure(share: pd.DataFrame, title: str) -> object:
    """A matplotlib Figure: each op's share (%) of each run's GPU time, ops (y) by runs (x).

    Op and run names (labels) and the title pass :func:`plot_text`.

    Args:
        share: :func:`rocroof.report.fleet.fleet_matrix` (index op list, one column per run name,
            % of that run's GPU time; NaN where the op did not run, drawn blank).
        title: the figure's title.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = share.to_numpy(dtype=float)
    n_ops, n_runs = data.shape
    fig, ax = plt.subplots(figsize=(min(18.0, 4.0 + 0.55 * n_runs), min(14.0, 2.0 + 0.3 * n_ops)), dpi=110)
    image = ax.imshow(data, aspect="auto", cmap="magma_r", interpolation="nearest", origin="upper")
    ax.set_yticks(range(n_ops), [plot_text(v) for v in share.index], fontsize=8)
    ax.set_xticks(range(n_runs), [plot_text(v) for v in share.columns], rotation=60, ha="right", fontsize=7)
    top = np.nanmax(data) if np.isfinite(data).any() else 1.0
    for i in range(n_ops):
        for j in range(n_runs):
            if np.isfinite(data[i, j]):
                text = f"{data[i, j]:.0f}" if data[i, j] >= 1 else "<1"
                color = "white" if data[i, j] > 0.5 * top else "black"  # readable on dark and light cells
                ax.text(j, i, text, ha="center", va="center", fontsize=6, color=color)
    ax.set_title(plot_text(title), fontsize=10)
    fig.colorbar(image, ax=ax, label="% of the run's GPU time")
    fig.tight_layout()
    return fig


def save_fleet_heatmap(share: pd.DataFrame, title: str, base: Path) -> list[Path]:
    """Write the fleet heat map as ``<base>.png`` and ``<base>.svg``; return the paths.

    The extensions are appended to the whole name, as by :func:`save_roofline`.


    Raises:
        OutputError: as :func:`save_roofline`.
    """
    _check_folder(base)
    return _save(fleet_heatmap_figure(share, title), base)


def save_expert_heatmap(tokens: pd.DataFrame, title: str, base: Path) -> list[Path]:
    """Write the MoE routing heat map as ``<base>.png`` and ``<base>.svg``; return the paths.

    The extensions are appended to the whole name, as by :func:`save_roofline`.


    Raises:
        OutputError: as :func:`save_roofline`.
    """
    _check_folder(base)
    return _save(expert_heatmap_figure(tokens, title), base)


@_no_glyph_warnings()
def expert_heatmap_svg(tokens: pd.DataFrame, title: str) -> str:
    """The heat map as SVG text (for the HTML report)."""
    import matplotlib.pyplot as plt

    fig: Any = expert_heatmap_figure(tokens, title)
    buf = io.StringIO()
    try:
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    finally:
        plt.close(fig)
    return buf.getvalue()


def _check_folder(base: Path) -> None:
    folder = base.parent
    if not folder.is_dir():
        what = "is not a folder" if folder.exists() else "does not exist (create it first)"
        raise OutputError(f"{folder}: {what}; cannot write {base.name}.png and {base.name}.svg there")


@_no_glyph_warnings()
def _save(fig: Any, base: Path) -> list[Path]:
    """Write ``fig`` as ``<base>.png`` and ``<base>.svg`` through ``.part`` files (no timestamps).

    The extension is appended to the whole name (``Path.with_suffix`` would replace the part
    after a dot in it: ``moe.v2`` would become ``moe.png``).
    """
    import matplotlib.pyplot as plt

    out = []
    try:
        for ext, meta in (("png", {"Software": None}), ("svg", {"Date": None, "Creator": None})):
            path = base.with_name(f"{base.name}.{ext}")
            part = path.with_name(path.name + ".part")
            try:
                fig.savefig(part, format=ext, metadata=meta)
                os.replace(part, path)
            except OSError as exc:
                with contextlib.suppress(OSError):  # a read-only folder cannot hold the part file either
                    part.unlink(missing_ok=True)
                raise OutputError(f"{path}: cannot write the plot ({exc.strerror or exc})") from exc
            out.append(path)
    finally:
        plt.close(fig)
    return out
