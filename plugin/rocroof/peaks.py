"""GPU ceilings from ``configs/peaks.yaml``: DRAM bandwidth (GB/s) and compute peaks.

The file lists, per GPU, each value with its source and a ``verified | derived | unverified``
mark. Lookup is by product name (aliases, case-insensitive) and falls back to the GPU of the
architecture marked ``default_for_arch``. Measured ceilings carried by a capture (e.g.
rocprofiler-compute ``roofline.csv``) take precedence over this table; that choice is made by
the caller.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from .dram import base_arch
from .errors import ConfigError

#: Environment variable naming an alternative peaks file.
PEAKS_ENV = "ROCROOF_PEAKS"
MARKS = ("verified", "derived", "unverified")


@dataclass(frozen=True)
class Peak:
    """One ceiling value.

    Attributes:
        gpu: the table entry's name (e.g. ``MI300X``).
        value: the number, in the unit of the key (``dram_gbps``: GB/s = 1e9 B/s).
        source: where it comes from.
        mark: ``verified``, ``derived`` or ``unverified``.
        matched_by: how the GPU was recognised (``product name`` or ``architecture default``).
    """

    gpu: str
    value: float
    source: str
    mark: str
    matched_by: str

    def describe(self) -> str:
        """One line for reports: ``MI300X datasheet 5325 GB/s (verified; ...)``."""
        return f"configs/peaks.yaml {self.gpu} ({self.mark}, matched by {self.matched_by}): {self.source}"


def peaks_path() -> Path:
    """The peaks file in use: ``$ROCROOF_PEAKS``, else the one shipped with rocroof."""
    env = os.environ.get(PEAKS_ENV)
    if env:
        return Path(env)
    return Path(str(resources.files("rocroof") / "data" / "peaks.yaml"))


def load_peaks(path: Path | None = None) -> list[dict[str, Any]]:
    """Load and validate the peaks table.

    Raises:
        ConfigError: unreadable file, invalid YAML, or an entry without name/values/marks.
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
    for i, gpu in enumerate(doc["gpus"]):
        if not isinstance(gpu, dict) or not isinstance(gpu.get("name"), str):
            raise ConfigError(f"{path}: gpus[{i}] needs a 'name'")
        for key, val in gpu.items():
            if isinstance(val, dict) and (
                not isinstance(val.get("value"), int | float) or val.get("mark") not in MARKS or not val.get("source")
            ):
                raise ConfigError(f"{path}: gpus[{i}].{key} needs a numeric 'value', a 'source' and a mark in {MARKS}")
    return list(doc["gpus"])


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
    gpus = load_peaks(path)
    want = (product or "").strip().lower()
    a = base_arch(arch)
    candidates = []
    if want:
        for gpu in gpus:
            names = [gpu["name"], *gpu.get("aliases", [])]
            for alias in names:
                al = str(alias).lower()
                if al == want or al in want:
                    candidates.append((len(al), gpu))
        candidates.sort(key=lambda c: -c[0])
    for _, gpu in candidates:
        if not a or base_arch(gpu.get("gfx_arch")) in ("", a):
            val = gpu.get(key)
            if isinstance(val, dict):
                return Peak(gpu["name"], float(val["value"]), str(val["source"]), str(val["mark"]), "product name")
    if a:
        for gpu in gpus:
            if gpu.get("default_for_arch") and base_arch(gpu.get("gfx_arch")) == a:
                val = gpu.get(key)
                if isinstance(val, dict):
                    return Peak(
                        gpu["name"],
                        float(val["value"]),
                        str(val["source"]),
                        str(val["mark"]),
                        f"architecture {a} default",
                    )
    return None
