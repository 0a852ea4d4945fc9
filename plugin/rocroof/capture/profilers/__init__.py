"""Profiler backends behind one interface (see :mod:`rocroof.capture.profilers.base`).

``rocprofv3`` (AMD, rocprofiler-sdk) and ``ncu`` (NVIDIA: Nsight Systems for timings, Nsight
Compute for counters). :func:`choose_profiler` is the only place that picks one.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence

from ...errors import ConfigError, ProfilerNotFound
from .base import Profiler

PROFILERS = ("rocprofv3", "ncu")


def choose_profiler(
    name: str | None,
    arch: str | None = None,
    *,
    output_format: str | None = None,
    cache_control: str = "all",
    nvtx_include: Sequence[str] = (),
    nsys: str | None = None,
    bandwidth_probe: bool = True,
) -> Profiler:
    """The backend for ``--profiler`` (``rocprofv3``, ``ncu``) or, when None, for the GPU.

    Without a name: a ``gfx*`` ``arch`` means rocprofv3 and ``sm_*`` means ncu; without either,
    the profiler found on ``PATH`` (rocprofv3 first).

    Args:
        name: ``rocprofv3``, ``ncu`` (or ``nsight``), or None to choose.
        arch: the GPU architecture when known (``gfx942``, ``sm_90``).
        output_format: rocprofv3's ``csv`` or ``rocpd`` (rocprofv3 only).
        cache_control: ncu's ``--cache-control`` (``all`` or ``none``; ncu only).
        nvtx_include: ncu ``--nvtx-include`` expressions (ncu only).
        nsys: the nsys executable, or ``none`` for no trace run (ncu only).
        bandwidth_probe: measure the GPU's copy bandwidth first (ncu only; :mod:`rocroof.analysis.bandwidth`).

    Raises:
        ConfigError: an unknown name, or an option the chosen profiler does not have.
        ProfilerNotFound: no name, no arch, and neither profiler on ``PATH``.
    """
    from .nsight import NsightPair
    from .rocprofv3 import Rocprofv3

    if name is None:
        if arch:
            name = "ncu" if arch.startswith("sm_") else "rocprofv3"
        elif shutil.which("rocprofv3"):
            name = "rocprofv3"
        elif shutil.which("ncu"):
            name = "ncu"
        else:
            raise ProfilerNotFound(
                "no profiler on PATH: rocroof collect drives rocprofv3 (AMD; ROCm's /opt/rocm/bin) or ncu + nsys "
                "(NVIDIA Nsight Compute / Systems); add one to PATH, or ingest a capture recorded elsewhere"
            )
    if name == "rocprofv3":
        if cache_control != "all" or nvtx_include or nsys:
            raise ConfigError("--cache-control, --nvtx-include and --nsys belong to --profiler ncu")
        return Rocprofv3(output_format=output_format)
    if name in ("ncu", "nsight"):
        if output_format:
            raise ConfigError("--output-format belongs to --profiler rocprofv3")
        return NsightPair(
            nsys=nsys, cache_control=cache_control, nvtx_include=nvtx_include, bandwidth_probe=bandwidth_probe
        )
    raise ConfigError(f"--profiler {name!r}: expected one of {', '.join(PROFILERS)}")
