"""The GPU architectures rocroof knows, and the check of one a user names (``--arch``, a sweep's ``arch``).

An architecture is known when rocroof has a DRAM byte formula for it (:func:`rocroof.analysis.dram.family`)
or a row of the peaks table (``configs/peaks.yaml``, or ``$ROCROOF_PEAKS``) names it. ``family`` covers
RDNA by prefix (``gfx10``, ``gfx11``, ``gfx12``) and NVIDIA by ``sm_``, which would let a mistyped name
through (a trial user's ``gfx9999`` and ``gfx924`` were stored as runs of those GPUs); the names
accepted are the real processors of those prefixes instead:

* AMD: the processors of LLVM's AMDGPU back end (``llvm/docs/AMDGPUUsage.rst``, table "AMDGPU
  Processors") that :func:`~rocroof.analysis.dram.family` has a formula for, each with or without
  target features (``gfx90a:xnack-``, ``gfx942:sramecc+:xnack-``);
* NVIDIA: the compute capabilities of the CUDA C++ Programming Guide's table "Compute Capability"
  (``nvcc --list-gpu-arch`` of CUDA 12.x-13.x), from ``sm_90`` also with the ``a`` (architecture-
  specific) and ``f`` (family) suffixes.

This module imports nothing heavy: the peaks table is read only for a name not in these lists.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path

from ..errors import InputError

#: AMD processors with a DRAM byte formula (rocroof.analysis.dram.family): CDNA1-4 and Vega10, RDNA1-4.
FORMULA_GFX = (
    "gfx900",
    "gfx908",
    "gfx90a",
    "gfx940",
    "gfx941",
    "gfx942",
    "gfx950",
    "gfx1010",
    "gfx1011",
    "gfx1012",
    "gfx1013",
    "gfx1030",
    "gfx1031",
    "gfx1032",
    "gfx1033",
    "gfx1034",
    "gfx1035",
    "gfx1036",
    "gfx1100",
    "gfx1101",
    "gfx1102",
    "gfx1103",
    "gfx1150",
    "gfx1151",
    "gfx1152",
    "gfx1153",
    "gfx1200",
    "gfx1201",
)
#: NVIDIA compute capabilities (Maxwell to Blackwell): every one has the DRAM formula of ``dram__bytes``.
NVIDIA_SM = (
    "sm_50",
    "sm_52",
    "sm_53",
    "sm_60",
    "sm_61",
    "sm_62",
    "sm_70",
    "sm_72",
    "sm_75",
    "sm_80",
    "sm_86",
    "sm_87",
    "sm_89",
    "sm_90",
    "sm_100",
    "sm_101",
    "sm_103",
    "sm_110",
    "sm_120",
    "sm_121",
)

#: A gfx target with its feature suffixes (``gfx942:sramecc+:xnack-``), or a compute capability.
_FORM = re.compile(r"(gfx[0-9]{2,4}[a-z]?)((?::[a-z0-9]+[+-]?)*)|(sm_[0-9]{2,3})([af]?)")


def _table_archs(peaks: Path | None) -> list[str]:
    """The base architectures the peaks table's rows name (``gfx_arch``), lower-cased."""
    from .peaks import load_peaks  # the YAML table: read only for a name the lists above lack

    return sorted({str(g["gfx_arch"]).split(":", 1)[0].strip().lower() for g in load_peaks(peaks) if g.get("gfx_arch")})


def known_archs(peaks: Path | None = None) -> list[str]:
    """Every base architecture rocroof knows: :data:`FORMULA_GFX`, :data:`NVIDIA_SM` and the peaks table's."""
    names = set(FORMULA_GFX) | set(NVIDIA_SM) | set(_table_archs(peaks))
    return sorted(names, key=lambda n: (not n.startswith("gfx"), len(n), n))


def known_text(peaks: Path | None = None) -> str:
    """The known architectures on one line, each named (a user looks for the name of their GPU's)."""
    names = known_archs(peaks)
    amd = ", ".join(n for n in names if not n.startswith("sm_"))
    nvidia = ", ".join(n for n in names if n.startswith("sm_"))
    return (
        f"{amd}, each with or without target features (gfx90a:xnack-); NVIDIA {nvidia}, from sm_90 also with an "
        "a or f suffix (sm_90a)"
    )


def arch_problem(arch: str, peaks: Path | None = None) -> str | None:
    """Why ``arch`` is no architecture rocroof knows (one line, naming the known ones), or None when it is one.

    Args:
        arch: ``gfx942``, ``gfx90a:xnack-``, ``sm_90``... (case and surrounding spaces do not matter).
        peaks: the peaks table (default: :func:`rocroof.analysis.peaks.peaks_path`).
    """
    text = str(arch).strip().lower()
    m = _FORM.fullmatch(text)
    if m is not None:
        if m.group(3) is not None:
            base, suffix_ok = m.group(3), not m.group(4) or int(m.group(3)[3:]) >= 90
        else:
            base, suffix_ok = m.group(1), True
        if suffix_ok and (base in FORMULA_GFX or base in NVIDIA_SM or base in _table_archs(peaks)):
            return None
    close = difflib.get_close_matches(text.split(":", 1)[0], known_archs(peaks), n=1, cutoff=0.75)
    hint = f" did you mean {close[0]}?" if close else ""
    return (
        f"not a GPU architecture rocroof knows;{hint} known (a DRAM byte formula or a peaks table row): "
        f"{known_text(peaks)}"
    )


def check_arch(arch: str, what: str = "--arch", peaks: Path | None = None) -> str:
    """Validate an architecture a user names; return it lower-cased, without surrounding spaces.

    Args:
        arch: ``gfx942``, ``gfx90a:xnack-``, ``sm_90``...
        what: how the message names where it was given (``--arch``).
        peaks: the peaks table (default: :func:`rocroof.analysis.peaks.peaks_path`).

    Raises:
        InputError: ``<what> '<arch>': `` and :func:`arch_problem`'s reason.
    """
    problem = arch_problem(arch, peaks)
    if problem is not None:
        raise InputError(f"{what} {arch!r}: {problem}")
    return str(arch).strip().lower()
