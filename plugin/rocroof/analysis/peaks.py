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
import copy
import math
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields, replace
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from ..errors import ConfigError
from .ceiling_text import DRAM_RULES as DRAM_RULES
from .ceiling_text import SHIPPED_LABEL as SHIPPED_LABEL
from .dram import base_arch

#: Environment variable naming an alternative peaks file.
PEAKS_ENV = "ROCROOF_PEAKS"
#: Marks a value of the peaks table may carry.
MARKS = ("verified", "derived", "unverified")
#: Mark of a ceiling measured on the profiled machine (never used in the table itself).
MEASURED = "measured"
#: A PCI device id as the table writes it (four hex digits, as libdrm's amdgpu.ids).
_PCI_ID = re.compile(r"[0-9A-Fa-f]{4}")
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
ENTRY_KEYS = ("name", "vendor", "gfx_arch", "aliases", "default_for_arch", "pci_device_ids")


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


#: Tables already loaded, by (path, modification time ns, size): an ingest looks the ceilings up
#: once per window (rocroof.ingest.windows), and parsing the YAML took ~0.13 s each time.
_LOADED: dict[tuple[str, int, int], list[dict[str, Any]]] = {}


def load_peaks(path: Path | None = None) -> list[dict[str, Any]]:
    """Load and validate the peaks table.

    Every mapping under a GPU needs a numeric ``value``, a ``source`` and a mark; a value with
    ``arithmetic`` must equal it to 0.1%. A table read before and unchanged since (same path,
    modification time and size) is not parsed again; each call gets its own copy.

    Raises:
        ConfigError: unreadable file, invalid YAML, or an entry without name/values/marks, or
            arithmetic that does not give its value.
    """
    return copy.deepcopy(_peaks_table(path))


def _peaks_table(path: Path | None) -> list[dict[str, Any]]:
    """:func:`load_peaks`' table itself, not a copy: for lookups that only read it (one per window).

    Raises:
        ConfigError: as :func:`load_peaks`.
    """
    path = path or peaks_path()
    try:
        st = path.stat()
        key: tuple[str, int, int] | None = (str(path.resolve()), st.st_mtime_ns, st.st_size)
    except OSError:
        key = None  # read below, which says why it cannot be
    if key is not None and key in _LOADED:
        return _LOADED[key]
    gpus = _load_peaks(path)
    if key is not None:
        _LOADED.clear()  # one table at a time: another path or an edited file replaces it
        _LOADED[key] = gpus
    return gpus


def _load_peaks(path: Path) -> list[dict[str, Any]]:
    """:func:`load_peaks` without the cache."""
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
    except RecursionError as exc:  # the YAML composer recurses once per nesting level
        raise ConfigError(f"{path}: nested too deeply (a peaks table is a few levels deep)") from exc
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
            ids_ok = isinstance(val, list) and all(isinstance(v, str) and _PCI_ID.fullmatch(v) for v in val)
            if key == "pci_device_ids" and not ids_ok:
                raise ConfigError(f"{path}: {where} is {val!r}; expected a list of 4-digit hex ids such as '74a1'")
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


def _pci_ids(gpu: dict[str, Any]) -> set[int]:
    return {int(v, 16) for v in gpu.get("pci_device_ids", [])}


def _table_cus(gpu: dict[str, Any]) -> int | None:
    cu = gpu.get("compute_units")
    return int(cu["value"]) if isinstance(cu, dict) else None


#: How :func:`_matches` marks a match by architecture and CU count that several table rows share.
AMBIGUOUS = "one of"


def _matches(
    gpus: list[dict[str, Any]],
    product: str | None,
    arch: str | None,
    cu_count: int | None = None,
    device_id: int | None = None,
) -> Iterator[tuple[dict[str, Any], str]]:
    """Table entries that may be this GPU, best first, with how each matched.

    Rules, best first (an entry's architecture must agree with ``arch`` when both are known; a
    CU count agrees when either side does not know it, or when the recorded count is the table's
    or a half, quarter or eighth of it: a compute partition):

    1. ``PCI device id 0x74a1``: the entry lists the recorded PCI device id (libdrm's
       ``amdgpu.ids`` numbering) and its CU count agrees;
    2. ``product name``: the entry's name or an alias occurs in ``product`` (longest alias
       first) and its CU count agrees;
    3. ``PCI device id ... (CU count differs)``: a partitioned or harvested part of a listed chip;
    4. ``architecture gfxN and N CUs``: the only way to tell GPUs whose names are ambiguous
       (rocminfo's ``AMD Instinct MI250X / MI250``; rocprofiler-compute's ``MI200``/``MI210`` for
       every gfx90a part) or generic (``MI300``);
    5. ``product name (CU count differs)``;
    6. ``architecture gfxN default``: the entry marked ``default_for_arch``.
    """
    want = (product or "").strip().lower()
    a = base_arch(arch)

    def arch_ok(gpu: dict[str, Any]) -> bool:
        return not a or base_arch(gpu.get("gfx_arch")) in ("", a)

    def cu_ok(gpu: dict[str, Any]) -> bool:
        # a compute partition (DPX, QPX, CPX) shows a half, quarter or eighth of the GPU's CUs
        cus = _table_cus(gpu)
        return cu_count is None or cus is None or any(cus == int(cu_count) * k for k in (1, 2, 4, 8))

    by_device = [g for g in gpus if device_id is not None and int(device_id) in _pci_ids(g) and arch_ok(g)]
    named: list[tuple[int, int, dict[str, Any]]] = []
    if want:
        for order, gpu in enumerate(gpus):
            best = max(
                (
                    len(al)
                    for alias in [gpu["name"], *gpu.get("aliases", [])]
                    if (al := str(alias).strip().lower()) and (al == want or al in want)
                ),
                default=0,
            )
            if best and arch_ok(gpu):
                named.append((best, order, gpu))
        named.sort(key=lambda c: (-c[0], c[1]))
    device_text = f"PCI device id {int(device_id):#06x}" if device_id is not None else ""
    seen: set[str] = set()

    def once(gpu: dict[str, Any], how: str) -> Iterator[tuple[dict[str, Any], str]]:
        if gpu["name"] not in seen:
            seen.add(gpu["name"])
            yield gpu, how

    for gpu in by_device:
        if cu_ok(gpu):
            yield from once(gpu, device_text)
    for _, _, gpu in named:
        if cu_ok(gpu):
            yield from once(gpu, "product name")
    for gpu in by_device:
        yield from once(gpu, f"{device_text} (CU count differs)")
    if a and cu_count is not None:
        same = [g for g in gpus if base_arch(g.get("gfx_arch")) == a and _table_cus(g) == int(cu_count)]
        # several parts of one architecture with one CU count (H100 SXM, H100 NVL, H200): a guess
        either = f" ({AMBIGUOUS} {', '.join(str(g['name']) for g in same)})" if len(same) > 1 else ""
        for gpu in same:
            yield from once(gpu, f"architecture {a} and {int(cu_count)} CUs{either}")
    for _, _, gpu in named:
        yield from once(gpu, "product name (CU count differs)")
    if a:
        for gpu in gpus:
            if gpu.get("default_for_arch") and base_arch(gpu.get("gfx_arch")) == a:
                yield from once(gpu, f"architecture {a} default")


def find_peak(
    key: str,
    product: str | None,
    arch: str | None,
    path: Path | None = None,
    *,
    cu_count: int | None = None,
    device_id: int | None = None,
) -> Peak | None:
    """The ``key`` ceiling (e.g. ``dram_gbps``) for a GPU, or None when the table has none.

    Args:
        key: a value key of the table (``dram_gbps``, ``fp16_matrix_tflops``...).
        product: the product name as recorded (``MI300X_A1``, ``NVIDIA H200``...), or None.
        arch: the gfx / sm architecture, or None.
        path: an alternative peaks file.
        cu_count: the CUs / SMs the capture records for the GPU, or None.
        device_id: the GPU's PCI device id (``0x74a1``), or None.

    Raises:
        ConfigError: the table is invalid.
    """
    for gpu, how in _matches(_peaks_table(path), product, arch, cu_count, device_id):
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


def find_ceilings(
    gpu_name: str | None,
    gfx_arch: str | None,
    path: Path | None = None,
    *,
    cu_count: int | None = None,
    device_id: int | None = None,
) -> Ceilings | None:
    """Every ceiling the table has for a GPU, or None when no entry matches.

    The GPU is matched as in :func:`find_peak` (product name, then the architecture's default
    entry), but all values come from that one entry: a value it lacks stays None.

    Args:
        gpu_name: the product name as recorded (``MI300X_A1``, ``AMD Radeon RX 7900 XTX``,
            ``NVIDIA H200``...), or None.
        gfx_arch: the gfx / sm architecture (``gfx942:sramecc+:xnack-``, ``sm_90``...), or None.
        path: an alternative peaks file.
        cu_count: the CUs / SMs the capture records, or None.
        device_id: the GPU's PCI device id, or None.

    Raises:
        ConfigError: the table is invalid.
    """
    for gpu, how in _matches(_peaks_table(path), gpu_name, gfx_arch, cu_count, device_id):
        kwargs: dict[str, Any] = {
            key: _ceiling(key, val) for key in TABLE_KEYS if isinstance(val := gpu.get(key), dict)
        }
        return Ceilings(gpu=str(gpu["name"]), matched_by=how, **kwargs)
    return None


#: A measured ceiling is plausible between these fractions of the GPU's peak (a copy reaches 60-95%).
MEASURED_UNDER_PEAK = 0.25
MEASURED_OVER_PEAK = 1.05
#: A bandwidth the capture records (a theoretical peak, like the table's) is plausible within this
#: fraction of the named GPU's table value, or of an even share of it (a memory partition, NPS2-8).
RECORDED_TOLERANCE = 0.05
_PARTITIONS = (1, 2, 4, 8)
#: Against an architecture's default GPU (another part of that architecture may be slower or faster),
#: a recorded bandwidth is plausible from a partition's share of it to twice it.
RECORDED_VS_DEFAULT = (0.1, 2.0)


def _gbps(value: float) -> str:
    """A bandwidth for a message: ``5,324.8``; an absurd one in scientific notation, not 300 digits."""
    return f"{value:,.1f}" if abs(value) < 1e9 else f"{value:.3g}"


@dataclass(frozen=True)
class DramCeiling:
    """The DRAM ceiling a run uses and why.

    Attributes:
        gbps: the ceiling, GB/s (1e9 B/s), or None when nothing is known.
        source: where the number comes from (a file, a table row with its citation).
        rule: a :data:`DRAM_RULES` key, or None without a ceiling.
        warnings: why a better-ranked candidate was not used, one line each.
    """

    gbps: float | None
    source: str | None
    rule: str | None
    warnings: tuple[str, ...] = ()


def table_rule(matched_by: str) -> str:
    """The :data:`DRAM_RULES` key of a table match (``Peak.matched_by``)."""
    if matched_by.startswith("PCI device id"):
        return "table_device"
    if matched_by.startswith("product name"):
        return "table_name"
    return "table_cu" if matched_by.startswith("architecture") and " CUs" in matched_by else "table_arch"


def choose_dram_ceiling(
    recorded: tuple[float, str, str] | None,
    gpu_name: str | None,
    arch: str | None,
    *,
    cu_count: int | None = None,
    device_id: int | None = None,
    path: Path | None = None,
) -> DramCeiling:
    """The run's DRAM ceiling, by precedence, highest first.

    1. a measured probe (``probe``), 2. an empirical ``roofline.csv`` (``roofline_csv``): each
    within :data:`MEASURED_UNDER_PEAK`-:data:`MEASURED_OVER_PEAK` of the table's peak for the GPU;
    3. a bandwidth the capture records (``capture``: nsys ``memoryBandwidth``, rocprofiler-compute
    ``hbm_bw``): a theoretical peak, plausible within :data:`RECORDED_TOLERANCE` of the table row of
    the GPU it names (or of an even share of it: a memory partition); against an architecture
    default, within :data:`RECORDED_VS_DEFAULT` of it (the default may be another part of the
    architecture); 4. the table row matched by PCI device id,
    product name or CU count; 5. the architecture's default row.

    Args:
        recorded: ``(GB/s, source, rule)`` from the capture (rule ``probe``, ``roofline_csv`` or
            ``capture``), or None.
        gpu_name: the GPU's product name as recorded, or None.
        arch: its architecture (gfx target, sm_XY), or None.
        cu_count: its CUs / SMs as recorded, or None.
        device_id: its PCI device id, or None.
        path: an alternative peaks file.

    Returns:
        The :class:`DramCeiling`; ``warnings`` explain a recorded value that was not used.

    Raises:
        ConfigError: the peaks table is invalid.
    """
    table = find_peak("dram_gbps", gpu_name, arch, path, cu_count=cu_count, device_id=device_id)
    warnings: list[str] = []
    if recorded is not None:
        value, source, rule = recorded
        if table is None:
            return DramCeiling(value, source, rule)
        ratio = value / table.value
        if rule in ("probe", "roofline_csv"):
            if MEASURED_UNDER_PEAK <= ratio <= MEASURED_OVER_PEAK:
                return DramCeiling(value, source, rule)
            warnings.append(
                f"the capture's measured DRAM ceiling {_gbps(value)} GB/s is {ratio:.0%} of the GPU's peak "
                f"{_gbps(table.value)} GB/s (plausible: {MEASURED_UNDER_PEAK:.0%}-{MEASURED_OVER_PEAK:.0%}); "
                f"the peak is used instead ({source})"
            )
        elif table_rule(table.matched_by) == "table_arch" or f"({AMBIGUOUS} " in table.matched_by:
            # the table row is a guess (the architecture's default, or one of several parts with these
            # CUs): the capture's own record of its GPU is the better witness within a wide band
            low, high = RECORDED_VS_DEFAULT
            if low <= ratio <= high:
                return DramCeiling(value, source, rule)
            which = (
                "its architecture's default GPU"
                if table_rule(table.matched_by) == "table_arch"
                else f"matched by {table.matched_by}"
            )
            warnings.append(
                f"the capture records a DRAM bandwidth of {_gbps(value)} GB/s ({source}), {ratio:.3g}x the "
                f"{_gbps(table.value)} GB/s of {table.gpu}, {which} (plausible: {low:g}x to "
                f"{high:g}x); the table's value is used"
            )
        elif any(abs(ratio * k - 1) <= RECORDED_TOLERANCE for k in _PARTITIONS):
            return DramCeiling(value, source, rule)
        else:
            warnings.append(
                f"the capture records a DRAM bandwidth of {_gbps(value)} GB/s ({source}), {ratio:.0%} of the "
                f"{table.gpu}'s {_gbps(table.value)} GB/s ({table.mark}, matched by {table.matched_by}); the "
                "table's value is used"
            )
    if table is None:
        return DramCeiling(None, None, None, tuple(warnings))
    return DramCeiling(table.value, table.describe(), table_rule(table.matched_by), tuple(warnings))
