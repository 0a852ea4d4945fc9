"""GPU ceilings from ``configs/peaks.yaml``: DRAM bandwidth, compute peaks, caches, CU/SM count.

The file lists, per GPU, each value with its source and a ``verified | derived | unverified``
mark (see the file's header for what each means, the units, and the FP32 convention used).
Lookup is by product name (aliases, case-insensitive, longest alias first) and falls back to the
GPU of the architecture marked ``default_for_arch``.

Two interfaces:

* :func:`find_peak` returns one value as a :class:`Peak` (the pipeline's DRAM ceiling).
* :func:`find_ceilings` returns every ceiling of the matched GPU as a typed :class:`Ceilings`,
  each value a :class:`Ceiling` with its unit, source and mark. Measured ceilings (e.g.
  rocprofiler-compute ``roofline.csv``, read by
  :func:`rocroof.capture.readers.rocprof_compute.read_roofline_ceilings`) take precedence over the
  table: :func:`combine_ceilings` merges the two. Which one a report uses is the caller's choice.
"""

from __future__ import annotations

import ast
import math
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields, replace
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from ..errors import ConfigError
from .dram import base_arch

#: Environment variable naming an alternative peaks file.
PEAKS_ENV = "ROCROOF_PEAKS"
#: How reports name the shipped table.
SHIPPED_LABEL = "configs/peaks.yaml"
#: Marks a value of the peaks table may carry.
MARKS = ("verified", "derived", "unverified")
#: Mark of a ceiling measured on the profiled machine (never used in the table itself).
MEASURED = "measured"
#: Relative tolerance between a value and its ``arithmetic``: printed figures are rounded to ~0.1%.
ARITHMETIC_REL_TOL = 1e-3

#: Unit of each ceiling field (``Ceilings`` attribute names; the table uses the same keys).
UNITS: dict[str, str] = {
    "dram_gbps": "GB/s",
    "fp16_matrix_tflops": "TFLOP/s",
    "bf16_matrix_tflops": "TFLOP/s",
    "fp32_vector_tflops": "TFLOP/s",
    "int8_matrix_tops": "TOP/s",
    "llc_bytes": "bytes",
    "compute_units": "CUs/SMs",
    "l2_bytes": "bytes",
    "l2_gbps": "GB/s",
    "llc_gbps": "GB/s",
    "l1_gbps": "GB/s",
    "lds_gbps": "GB/s",
}
#: Table keys read into :class:`Ceilings` (the measured-only bandwidths have no table entry).
TABLE_KEYS = (
    "dram_gbps",
    "fp16_matrix_tflops",
    "bf16_matrix_tflops",
    "fp32_vector_tflops",
    "int8_matrix_tops",
    "llc_bytes",
    "compute_units",
    "l2_bytes",
)


@dataclass(frozen=True)
class Peak:
    """One ceiling value.

    Attributes:
        gpu: the table entry's name (e.g. ``MI300X``).
        value: the number, in the unit of the key (``dram_gbps``: GB/s = 1e9 B/s).
        source: where it comes from.
        mark: ``verified``, ``derived`` or ``unverified``.
        matched_by: how the GPU was recognised (``product name`` or ``architecture default``).
        table: the peaks table it comes from (:func:`peaks_label`).
    """

    gpu: str
    value: float
    source: str
    mark: str
    matched_by: str
    table: str = SHIPPED_LABEL

    def describe(self) -> str:
        """One line for reports: ``configs/peaks.yaml MI300X (derived, matched by product name): ...``."""
        return f"{self.table} {self.gpu} ({self.mark}, matched by {self.matched_by}): {self.source}"


@dataclass(frozen=True)
class Ceiling:
    """One ceiling with its unit and provenance.

    Attributes:
        value: the number, in ``unit``.
        unit: ``GB/s`` (1e9 B/s), ``TFLOP/s`` (1e12 FLOP/s), ``TOP/s`` (1e12 integer ops/s),
            ``bytes`` or ``CUs/SMs``.
        source: where it comes from (a citation from ``configs/peaks.yaml``, or
            ``roofline.csv (measured by rocprofiler-compute)``).
        mark: ``verified``, ``derived``, ``unverified`` (table values) or ``measured``.
        level: for cache sizes, which cache it is (``AMD Infinity Cache (...)``, ``L2 (...)``).
        arithmetic: the computation behind a derived value, in plain numbers.
        note: cross-checks, the reason a value is unverified, or the measurement's details.
    """

    value: float
    unit: str
    source: str
    mark: str
    level: str | None = None
    arithmetic: str | None = None
    note: str | None = None

    def describe(self) -> str:
        """One line: ``5,324.8 GB/s (derived: 8192 * 5.2 / 8; AMD footnote ...)``."""
        how = f"{self.mark}: {self.arithmetic}" if self.arithmetic else self.mark
        what = f" {self.level}" if self.level else ""
        number = f"{self.value:,.4f}".rstrip("0").rstrip(".")
        return f"{number} {self.unit}{what} ({how}; {self.source})"


@dataclass(frozen=True)
class Ceilings:
    """The roofline ceilings of one GPU; a field is None when nothing is known.

    Attributes:
        gpu: the table entry's name (``MI300X``...) or, for measured ceilings, what was measured.
        matched_by: how the GPU was recognised (``product name``, ``architecture gfx942 default``,
            ``measured``, or both joined when :func:`combine_ceilings` merged two).
        dram_gbps: peak DRAM/HBM bandwidth, GB/s.
        fp16_matrix_tflops: dense FP16 matrix-engine peak (MFMA, WMMA, tensor cores), TFLOP/s.
        bf16_matrix_tflops: dense BF16 matrix-engine peak, TFLOP/s.
        fp32_vector_tflops: FP32 vector peak, TFLOP/s (table convention: the vendor vector peak,
            packed/dual-issue FMA; see ``configs/peaks.yaml``).
        int8_matrix_tops: dense INT8 matrix-engine peak (MFMA, WMMA, tensor cores), TOP/s
            (1e12 integer operations/s, multiply-add = 2): the roof of ggml's quantized matmul
            kernels (MMQ), which multiply int8 quants.
        llc_bytes: last-level cache before DRAM, bytes; ``level`` says which cache.
        compute_units: CUs (AMD) or SMs (NVIDIA).
        l2_bytes: L2 size, bytes.
        l2_gbps: L2 bandwidth, GB/s (measured only).
        llc_gbps: Infinity Cache (MALL) bandwidth, GB/s (measured only).
        l1_gbps: vector L1 bandwidth, GB/s (measured only).
        lds_gbps: LDS bandwidth, GB/s (measured only).
        extra: other measured rates keyed like ``fp64_vector_tflops``, ``int8_vector_tops``.
    """

    gpu: str
    matched_by: str
    dram_gbps: Ceiling | None = None
    fp16_matrix_tflops: Ceiling | None = None
    bf16_matrix_tflops: Ceiling | None = None
    fp32_vector_tflops: Ceiling | None = None
    int8_matrix_tops: Ceiling | None = None
    llc_bytes: Ceiling | None = None
    compute_units: Ceiling | None = None
    l2_bytes: Ceiling | None = None
    l2_gbps: Ceiling | None = None
    llc_gbps: Ceiling | None = None
    l1_gbps: Ceiling | None = None
    lds_gbps: Ceiling | None = None
    extra: Mapping[str, Ceiling] = field(default_factory=dict)

    def values(self) -> dict[str, Ceiling]:
        """Every known ceiling by name (named fields first, then ``extra``)."""
        out = {f.name: v for f in fields(self) if isinstance(v := getattr(self, f.name), Ceiling)}
        out.update(self.extra)
        return out

    def ridge_point(self, compute: str = "fp16_matrix_tflops") -> float | None:
        """Arithmetic intensity (FLOP per DRAM byte) where ``compute`` meets the DRAM roof, or None."""
        peak = self.values().get(compute)
        if peak is None or peak.unit not in ("TFLOP/s", "TOP/s") or self.dram_gbps is None or self.dram_gbps.value <= 0:
            return None
        return peak.value * 1e12 / (self.dram_gbps.value * 1e9)


def combine_ceilings(measured: Ceilings | None, datasheet: Ceilings | None) -> Ceilings | None:
    """Measured ceilings where known, the datasheet's elsewhere.

    Args:
        measured: e.g. from ``read_roofline_ceilings`` (roofline.csv), or None.
        datasheet: e.g. from :func:`find_ceilings`, or None.

    Returns:
        The merged ceilings (each value keeps its own source and mark), or None when both are None.
    """
    if measured is None or datasheet is None:
        return measured or datasheet
    named = {f.name for f in fields(Ceilings)} - {"gpu", "matched_by", "extra"}
    merged: dict[str, Any] = {}
    for name in named:
        value = getattr(measured, name)
        merged[name] = value if value is not None else getattr(datasheet, name)
    extra = dict(datasheet.extra)
    extra.update(measured.extra)
    return replace(
        datasheet,
        matched_by=f"{datasheet.matched_by}; measured values from {measured.gpu}",
        extra=extra,
        **merged,
    )


def peaks_path() -> Path:
    """The peaks file in use: ``$ROCROOF_PEAKS``, else the one shipped with rocroof."""
    env = os.environ.get(PEAKS_ENV)
    if env:
        return Path(env)
    return Path(str(resources.files("rocroof") / "data" / "peaks.yaml"))


def peaks_label(path: Path | None = None) -> str:
    """How reports name the peaks table: ``configs/peaks.yaml`` for the shipped one, else its path."""
    if path is None and not os.environ.get(PEAKS_ENV):
        return SHIPPED_LABEL
    return str((path or peaks_path()).absolute())  # a relative ROCROOF_PEAKS means nothing elsewhere


def evaluate_arithmetic(expr: str) -> float:
    """Evaluate plain arithmetic (numbers, ``+ - * / **``, parentheses) without ``eval``.

    >>> evaluate_arithmetic("8192 * 5.2 / 8")
    5324.8

    Raises:
        ValueError: anything else in the expression (names, calls...), or a huge exponent.
    """

    def ev(node: ast.AST) -> float:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
            return float(node.value)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
            v = ev(node.operand)
            return -v if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.BinOp):
            a, b = ev(node.left), ev(node.right)
            if isinstance(node.op, ast.Add):
                return a + b
            if isinstance(node.op, ast.Sub):
                return a - b
            if isinstance(node.op, ast.Mult):
                return a * b
            if isinstance(node.op, ast.Div):
                if b == 0:
                    raise ValueError("division by zero")
                return a / b
            if isinstance(node.op, ast.Pow):
                if abs(b) > 64:
                    raise ValueError(f"exponent {b:g} too large")
                return float(a**b)
        raise ValueError(f"only numbers and + - * / ** are allowed, not {ast.dump(node)[:40]}")

    try:
        tree = ast.parse(expr.strip(), mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"not arithmetic ({exc.msg})") from exc
    return ev(tree)


#: Keys of a GPU entry that are not ceilings.
ENTRY_KEYS = ("name", "vendor", "gfx_arch", "aliases", "default_for_arch")


#: Keys a ceiling's mapping may have.
VALUE_KEYS = ("value", "mark", "source", "arithmetic", "reason", "level", "note")
#: Top-level keys of the table.
TOP_KEYS = ("version", "fp32_vector_convention", "gpus")


def _check_value(path: Path, where: str, val: dict[str, Any]) -> None:
    unknown = [k for k in val if k not in VALUE_KEYS]
    if unknown:
        raise ConfigError(f"{path}: {where}.{unknown[0]}: unknown key (expected {', '.join(VALUE_KEYS)})")
    if not isinstance(val.get("value"), int | float) or isinstance(val.get("value"), bool):
        raise ConfigError(f"{path}: {where} needs a numeric 'value', a 'source' and a mark in {MARKS}")
    if not math.isfinite(val["value"]) or val["value"] <= 0:
        raise ConfigError(f"{path}: {where}.value is {val['value']}; a ceiling is a positive, finite number")
    if val.get("mark") not in MARKS or not val.get("source"):
        raise ConfigError(f"{path}: {where} needs a numeric 'value', a 'source' and a mark in {MARKS}")
    if val["mark"] == "unverified" and not str(val.get("reason") or "").strip():
        raise ConfigError(f"{path}: {where} is marked unverified without a 'reason' saying why")
    key = where.rsplit(".", 1)[-1]
    if (key.endswith("_bytes") or key == "compute_units") and not float(val["value"]).is_integer():
        raise ConfigError(f"{path}: {where}.value is {val['value']}; expected a whole number")
    arithmetic = val.get("arithmetic")
    if arithmetic is None:
        return
    try:
        computed = evaluate_arithmetic(str(arithmetic))
    except ValueError as exc:
        raise ConfigError(f"{path}: {where}.arithmetic {arithmetic!r}: {exc}") from exc
    if not math.isclose(computed, float(val["value"]), rel_tol=ARITHMETIC_REL_TOL):
        raise ConfigError(
            f"{path}: {where}.arithmetic {arithmetic!r} gives {computed:g}, not the value {val['value']:g} "
            f"(allowed difference {ARITHMETIC_REL_TOL:.1%})"
        )


def load_peaks(path: Path | None = None) -> list[dict[str, Any]]:
    """Load and validate the peaks table.

    Every mapping under a GPU needs a numeric ``value``, a ``source`` and a mark; a value with
    ``arithmetic`` must equal it to 0.1%.

    Raises:
        ConfigError: unreadable file, invalid YAML, or an entry without name/values/marks, or
            arithmetic that does not give its value.
    """
    path = path or peaks_path()
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the peaks table ({exc.strerror or exc})") from exc
    if len(text) > 4 << 20:
        raise ConfigError(f"{path}: peaks table larger than 4 MiB; refusing to load it")
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{path}{where}: invalid YAML ({getattr(exc, 'problem', exc)})") from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("gpus"), list):
        raise ConfigError(f"{path}: expected a mapping with a 'gpus' list")
    unknown = [k for k in doc if k not in TOP_KEYS]
    if unknown:
        raise ConfigError(f"{path}: {unknown[0]}: unknown top-level key (expected {', '.join(TOP_KEYS)})")
    seen: dict[str, int] = {}
    for i, gpu in enumerate(doc["gpus"]):
        if not isinstance(gpu, dict) or not isinstance(gpu.get("name"), str):
            raise ConfigError(f"{path}: gpus[{i}] needs a 'name'")
        if gpu["name"] in seen:
            raise ConfigError(f"{path}: gpus[{i}]: {gpu['name']!r} is listed twice (also gpus[{seen[gpu['name']]}])")
        seen[gpu["name"]] = i
        for key, val in gpu.items():
            where = f"gpus[{i}] ({gpu['name']}).{key}"
            if key in TABLE_KEYS:
                if not isinstance(val, dict):
                    raise ConfigError(f"{path}: {where} is {val!r}; expected a mapping with value, mark and source")
                _check_value(path, where, val)
            elif key not in ENTRY_KEYS:
                raise ConfigError(
                    f"{path}: {where}: unknown key (ceilings: {', '.join(TABLE_KEYS)}; "
                    f"other keys: {', '.join(ENTRY_KEYS)})"
                )
    return list(doc["gpus"])


def _matches(gpus: list[dict[str, Any]], product: str | None, arch: str | None) -> Iterator[tuple[dict[str, Any], str]]:
    """Table entries that may be this GPU, best first, with how each matched.

    First entries whose name or an alias occurs in ``product`` (longest alias first) and whose
    architecture agrees with ``arch`` (when both are known), then the ``default_for_arch`` entries
    of ``arch``.
    """
    want = (product or "").strip().lower()
    a = base_arch(arch)
    candidates: list[tuple[int, int, dict[str, Any]]] = []
    if want:
        for order, gpu in enumerate(gpus):
            for alias in [gpu["name"], *gpu.get("aliases", [])]:
                al = str(alias).strip().lower()
                if al and (al == want or al in want):
                    candidates.append((len(al), order, gpu))
        candidates.sort(key=lambda c: (-c[0], c[1]))
    for _, _, gpu in candidates:
        if not a or base_arch(gpu.get("gfx_arch")) in ("", a):
            yield gpu, "product name"
    if a:
        for gpu in gpus:
            if gpu.get("default_for_arch") and base_arch(gpu.get("gfx_arch")) == a:
                yield gpu, f"architecture {a} default"


def find_peak(key: str, product: str | None, arch: str | None, path: Path | None = None) -> Peak | None:
    """The ``key`` ceiling (e.g. ``dram_gbps``) for a GPU, or None when the table has none.

    Args:
        key: a value key of the table (``dram_gbps``, ``fp16_matrix_tflops``...).
        product: the product name as recorded (``MI300X_A1``, ``NVIDIA H200``...), or None.
        arch: the gfx / sm architecture, or None.
        path: an alternative peaks file.

    Raises:
        ConfigError: the table is invalid.
    """
    for gpu, how in _matches(load_peaks(path), product, arch):
        val = gpu.get(key)
        if isinstance(val, dict):
            return Peak(gpu["name"], float(val["value"]), str(val["source"]), str(val["mark"]), how, peaks_label(path))
    return None


def _ceiling(key: str, val: dict[str, Any]) -> Ceiling:
    notes = [str(val[k]).strip() for k in ("reason", "note") if val.get(k)]
    if val.get("reason"):
        notes[0] = f"unverified because {notes[0]}"
    return Ceiling(
        value=float(val["value"]),
        unit=UNITS[key],
        source=str(val["source"]).strip(),
        mark=str(val["mark"]),
        level=str(val["level"]) if val.get("level") else None,
        arithmetic=str(val["arithmetic"]) if val.get("arithmetic") else None,
        note="; ".join(notes) or None,
    )


def find_ceilings(gpu_name: str | None, gfx_arch: str | None, path: Path | None = None) -> Ceilings | None:
    """Every ceiling the table has for a GPU, or None when no entry matches.

    The GPU is matched as in :func:`find_peak` (product name, then the architecture's default
    entry), but all values come from that one entry: a value it lacks stays None.

    Args:
        gpu_name: the product name as recorded (``MI300X_A1``, ``AMD Radeon RX 7900 XTX``,
            ``NVIDIA H200``...), or None.
        gfx_arch: the gfx / sm architecture (``gfx942:sramecc+:xnack-``, ``sm_90``...), or None.
        path: an alternative peaks file.

    Raises:
        ConfigError: the table is invalid.
    """
    for gpu, how in _matches(load_peaks(path), gpu_name, gfx_arch):
        kwargs: dict[str, Any] = {
            key: _ceiling(key, val) for key in TABLE_KEYS if isinstance(val := gpu.get(key), dict)
        }
        return Ceilings(gpu=str(gpu["name"]), matched_by=how, **kwargs)
    return None
