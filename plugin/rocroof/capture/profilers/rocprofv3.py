"""rocprofv3 backend: pass planning and command construction.

A capture is one trace run (``--kernel-trace --marker-trace --hip-runtime-trace``: the
timings) and one counter run per group of counters that fits the hardware in one pass (each
with the same traces, so every pass attributes its own dispatches; counter collection
serialises kernels, so those durations are not the timings). Output format: ``rocpd`` on
rocprofiler-sdk >= 1.0 (ROCm 7.0, where it is the default) else ``csv``
(rocprofiler-sdk CHANGELOG "1.0.0 for ROCm release 7.0").

rocprofv3 does not split counters into passes itself: a set that does not fit aborts at the
first dispatch (``shared/reference/rocprofv3-formats.md`` §5). Groups are planned from the
per-block limits of simultaneous counters that rocprofiler-compute uses
(``src/utils/mi_gpu_spec.yaml`` ``perfmon_config``, copied there from aqlprofile
``gfx9_block_info.h``): e.g. TCC 4, SQ 8, TCP 4, TA 2, TD 2, GRBM 2, GL2C 4. A counter's block
is its name prefix (AMD counters are named ``<BLOCK>_<EVENT>``); ``X_sum`` is
``reduce(X,sum)`` and costs one counter of X's block; derived counters (``FETCH_SIZE``) cost
their inputs. ``rocprofv3-avail pmc-check`` confirms a group on the machine when present.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ...analysis.dram import base_arch, counters_for
from ...errors import ConfigError, ProfilerFailed, ProfilerNotFound
from .base import Device, PlannedRun

#: Simultaneous counters per block (rocprofiler-compute mi_gpu_spec.yaml perfmon_config).
BLOCK_LIMITS: dict[str, int] = {
    "SQ": 8,
    "SQC": 8,
    "TA": 2,
    "TD": 2,
    "TCP": 4,
    "TCC": 4,
    "CPC": 2,
    "CPF": 2,
    "SPI": 6,
    "GRBM": 2,
    "GDS": 4,
    "GCEA": 2,
    "GL1A": 4,
    "GL1C": 4,
    "GL2A": 4,
    "GL2C": 4,
}
DEFAULT_LIMIT = 2

#: Inputs of derived counters that rocroof may be asked for, per formula family.
_DERIVED: dict[str, dict[str, tuple[str, ...]]] = {
    "FETCH_SIZE": {
        "tcc_ea": ("TCC_EA_RDREQ", "TCC_EA_RDREQ_32B"),
        "tcc_ea0_bubble": ("TCC_BUBBLE", "TCC_EA0_RDREQ", "TCC_EA0_RDREQ_32B"),
        "tcc_ea0_sized": ("TCC_EA0_RDREQ_128B", "TCC_EA0_RDREQ_64B", "TCC_EA0_RDREQ_32B"),
        "gl2c_mc": ("GL2C_EA_RDREQ_32B", "GL2C_EA_RDREQ_64B", "GL2C_EA_RDREQ_96B", "GL2C_EA_RDREQ_128B"),
        "gl2c_ea": ("GL2C_EA_RDREQ_32B", "GL2C_EA_RDREQ_64B", "GL2C_EA_RDREQ_128B"),
    },
    "WRITE_SIZE": {
        "tcc_ea": ("TCC_EA_WRREQ", "TCC_EA_WRREQ_64B"),
        "tcc_ea0_bubble": ("TCC_EA0_WRREQ", "TCC_EA0_WRREQ_64B"),
        "tcc_ea0_sized": ("TCC_EA0_WRREQ", "TCC_EA0_WRREQ_64B"),
        "gl2c_mc": ("GL2C_MC_WRREQ", "GL2C_EA_WRREQ_64B"),
    },
}

#: FLOP counters of the roofline preset (rocprofiler-compute roofline_calc.py, CDNA).
_FLOP_COUNTERS_CDNA = tuple(
    f"SQ_INSTS_VALU_{op}_{t}" for t in ("F16", "F32", "F64") for op in ("ADD", "MUL", "FMA", "TRANS")
) + (
    "SQ_INSTS_VALU_MFMA_MOPS_F16",
    "SQ_INSTS_VALU_MFMA_MOPS_BF16",
    "SQ_INSTS_VALU_MFMA_MOPS_F32",
    "SQ_INSTS_VALU_MFMA_MOPS_F64",
)

#: Integer operation counters of the ops preset (rocprofiler-compute 0200 system speed-of-light,
#: gfx90a/gfx942: VALU IOPs = 64 x (INT32 + INT64), MFMA IOPs = 512 x MOPS_I8).
_IOP_COUNTERS_CDNA = ("SQ_INSTS_VALU_INT32", "SQ_INSTS_VALU_INT64", "SQ_INSTS_VALU_MFMA_MOPS_I8")

PRESETS = ("dram", "roofline", "ops")


def block_of(counter: str) -> str:
    """The hardware block a counter name belongs to (its prefix), e.g. ``TCC_EA0_RDREQ_sum`` -> ``TCC``."""
    name = counter.split(":", 1)[0]
    for block in sorted(BLOCK_LIMITS, key=len, reverse=True):
        if name.startswith(block + "_"):
            return block
    return name.split("_", 1)[0]


def hardware_inputs(counter: str, arch: str) -> tuple[str, ...]:
    """The hardware counters a requested counter occupies (``X_sum`` -> ``X``; derived -> inputs)."""
    from ...analysis.dram import family

    name = counter.split(":", 1)[0]
    if name in _DERIVED:
        fam = family(arch) or ""
        return _DERIVED[name].get(fam, (name,))
    return (name[:-4] if name.endswith("_sum") else name,)


def resolve_counters(spec: str, arch: str) -> list[tuple[str, ...]]:
    """Expand ``--counters`` into bundles: counters that feed one formula stay in one pass.

    ``spec`` is a preset (``dram``: the DRAM read and write counters of the architecture, as two
    bundles; ``roofline``: those plus the CDNA FLOP counters; ``ops``: plus the integer VALU and
    int8 MFMA counters) or counter names separated by
    commas or spaces (one bundle each).

    Raises:
        ConfigError: a preset that has no counters for this architecture, an empty list, or an
            Nsight Compute metric name (``dram__bytes_read.sum``).
    """
    items = [s for s in re.split(r"[,\s]+", spec.strip()) if s]
    bundles: list[tuple[str, ...]] = []
    for item in items:
        if item.lower() in PRESETS:
            dram = counters_for(arch)
            if not dram:
                raise ConfigError(
                    f"no DRAM counters known for architecture {arch!r}; name the counters with --counters A,B,..."
                )
            reads = tuple(c for c in dram if "RD" in c or "BUBBLE" in c or "read" in c)
            writes = tuple(c for c in dram if c not in reads)
            bundles += [b for b in (reads, writes) if b]
            if item.lower() in ("roofline", "ops") and base_arch(arch).startswith("gfx9"):
                bundles += [(c,) for c in _FLOP_COUNTERS_CDNA]
            if item.lower() == "ops" and base_arch(arch).startswith("gfx9"):
                bundles += [(c,) for c in _IOP_COUNTERS_CDNA]
        elif "__" in item or "." in item.split(":", 1)[0]:
            raise ConfigError(
                f"--counters {item}: looks like an Nsight Compute metric; rocprofv3 counters are named like "
                "TCC_EA0_RDREQ_sum or FETCH_SIZE ('rocprofv3 -L' lists them), or use --profiler ncu"
            )
        else:
            bundles.append((item,))
    if not bundles:
        raise ConfigError("--counters is empty; give a preset (dram, roofline, ops) or counter names")
    seen: set[str] = set()
    out = []
    for bundle in bundles:
        fresh = tuple(c for c in bundle if c not in seen)
        seen.update(fresh)
        if fresh:
            out.append(fresh)
    return out


@dataclass
class _Group:
    counters: list[str]
    used: dict[str, int]


def _need(counters: Sequence[str], arch: str) -> dict[str, int]:
    need: dict[str, int] = {}
    for counter in counters:
        for hw in hardware_inputs(counter, arch):
            need[block_of(hw)] = need.get(block_of(hw), 0) + 1
    return need


def plan_groups(
    bundles: Sequence[Sequence[str]], arch: str, limits: dict[str, int] | None = None
) -> list[tuple[str, ...]]:
    """Pack counter bundles into passes so that no block exceeds its simultaneous-counter limit.

    A bundle (counters feeding one formula) stays in one pass when it fits one pass; a bundle
    too large for any pass is split counter by counter. First fit, in request order.

    Args:
        bundles: from :func:`resolve_counters`.
        arch: the GPU architecture (for the inputs of derived counters).
        limits: per-block limits overriding :data:`BLOCK_LIMITS`.

    Returns:
        The counter groups, one per pass.

    Raises:
        ConfigError: a single counter needs more of a block than one pass has.
    """
    limits = {**BLOCK_LIMITS, **(limits or {})}

    def fits(need: dict[str, int], used: dict[str, int]) -> bool:
        return all(used.get(b, 0) + n <= limits.get(b, DEFAULT_LIMIT) for b, n in need.items())

    units: list[tuple[str, ...]] = []
    for bundle in bundles:
        if fits(_need(bundle, arch), {}):
            units.append(tuple(bundle))
            continue
        for counter in bundle:
            need = _need([counter], arch)
            if not fits(need, {}):
                block = next(b for b, n in need.items() if n > limits.get(b, DEFAULT_LIMIT))
                raise ConfigError(
                    f"counter {counter} needs {need[block]} {block} counters but a pass has "
                    f"{limits.get(block, DEFAULT_LIMIT)}"
                )
            units.append((counter,))
    groups: list[_Group] = []
    for unit in units:
        need = _need(unit, arch)
        for g in groups:
            if fits(need, g.used):
                g.counters += list(unit)
                for b, n in need.items():
                    g.used[b] = g.used.get(b, 0) + n
                break
        else:
            groups.append(_Group(list(unit), dict(need)))
    return [tuple(g.counters) for g in groups]


def parse_list_avail(text: str) -> list[Device]:
    """Parse ``rocprofv3 -L`` / ``rocprofv3-avail list --pmc`` output.

    Format (rocprofiler-sdk ``source/bin/rocprofv3-avail.py`` ``listing``): per GPU a line
    ``GPU <pad>:\\t<index>``, a line ``Name <pad>:\\t<gfx target>``, a line ``PMC <pad>:``, then
    counter names separated by spaces over several lines.
    """
    devices: list[Device] = []
    arch: str | None = None
    names: set[str] = set()
    in_pmc = False

    def flush() -> None:
        if arch:
            devices.append(Device(arch=arch, counters=frozenset(names)))

    for raw in text.splitlines():
        line = raw.strip()
        key, sep, value = line.partition(":")
        k = key.strip().upper()
        if sep and k == "GPU":
            flush()
            arch, names, in_pmc = None, set(), False
            continue
        if sep and k == "NAME":
            arch = value.strip()
            continue
        if sep and k in ("PMC", "SPM") and not value.strip():
            in_pmc = True
            continue
        if in_pmc and line:
            names.update(tok for tok in line.split() if re.fullmatch(r"[A-Za-z0-9_.\[\]]+", tok))
    flush()
    return devices


def choose_format(sdk_version: str | None, requested: str | None = None) -> str:
    """``rocpd`` for rocprofiler-sdk >= 1.0 (ROCm 7.0), else ``csv``; ``requested`` wins."""
    if requested:
        return requested
    if sdk_version:
        m = re.search(r"(\d+)\.(\d+)", sdk_version)
        if m and int(m.group(1)) >= 1:
            return "rocpd"
    return "csv"


class Rocprofv3:
    """The rocprofv3 backend.

    Args:
        executable: the rocprofv3 command (default: found on ``PATH``).
        output_format: force ``csv`` or ``rocpd``.
    """

    name = "rocprofv3"

    def __init__(self, executable: str = "rocprofv3", output_format: str | None = None) -> None:
        self.executable = executable
        self.output_format = output_format

    @property
    def settings(self) -> dict[str, str]:
        """Nothing beyond the counters shapes rocprofv3's numbers."""
        return {}

    def resolve_counters(self, spec: str, arch: str) -> list[tuple[str, ...]]:
        """See :func:`resolve_counters`."""
        return resolve_counters(spec, arch)

    def locate(self) -> str:
        """The rocprofv3 path.

        Raises:
            ProfilerNotFound: not on ``PATH``.
        """
        path = shutil.which(self.executable)
        if path is None:
            raise ProfilerNotFound(
                f"{self.executable} not found on PATH: install ROCm's rocprofiler-sdk (it puts rocprofv3 in "
                "/opt/rocm/bin; add that to PATH), or ingest a capture recorded elsewhere with 'rocroof ingest DIR'"
            )
        return path

    def version(self) -> str | None:
        """The rocprofiler-sdk version, from ``rocprofv3 --version`` (None if it does not say)."""
        try:
            out = subprocess.run([self.locate(), "--version"], capture_output=True, text=True, timeout=60, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None
        m = re.search(r"(\d+\.\d+\.\d+)", out.stdout + out.stderr)
        return m.group(1) if m else None

    def detect(self) -> Device:
        """The first GPU listed by ``rocprofv3 -L``.

        Raises:
            ProfilerFailed: the listing failed or shows no GPU.
        """
        exe = self.locate()
        proc = subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=300, check=False)
        devices = parse_list_avail(proc.stdout)
        if not devices:
            raise ProfilerFailed([exe, "-L"], proc.returncode or 1, proc.stderr or "no GPU agent listed")
        return devices[0]

    def sample_runs(self, runs: Sequence[PlannedRun], windows: Sequence[tuple[int, int]]) -> list[PlannedRun]:
        """Not yet: see :mod:`rocroof.ingest.sample`.

        Raises:
            ConfigError: always.
        """
        raise ConfigError("rocprofv3 counter samples are not supported yet; use --sample all")

    def plan(
        self,
        app: Sequence[str],
        out_dir: Path,
        device: Device,
        counters: Sequence[Sequence[str]],
        env: dict[str, str],
        sdk_version: str | None = None,
    ) -> list[PlannedRun]:
        """Build the trace run and one counter run per group.

        Raises:
            ConfigError: a counter the GPU does not list (when the listing is known), or a
                counter that cannot fit one pass.
        """
        if base_arch(device.arch).startswith("sm_"):
            raise ConfigError(
                f"rocprofv3 profiles AMD GPUs; {device.arch} is an NVIDIA architecture (use a gfx target with --arch)"
            )
        if device.counters:
            unknown = [c for b in counters for c in b if c.split(":", 1)[0] not in device.counters]
            if unknown:
                raise ConfigError(f"{device.arch} does not list counter(s) {', '.join(unknown)} (see 'rocprofv3 -L')")
        fmt = choose_format(sdk_version, self.output_format)
        common = ["--kernel-trace", "--marker-trace", "--hip-runtime-trace", "--output-format", fmt]
        runs = [
            PlannedRun(
                label="trace",
                kind="trace",
                counters=(),
                argv=(self.executable, *common, "-d", str(out_dir / "trace"), "-o", "%pid%", "--", *app),
                env=dict(env),
                log_name="rocprofv3.log",
            )
        ]
        for i, group in enumerate(plan_groups(counters, device.arch), start=1):
            label = f"pass_{i}"
            counter_env = {k: v for k, v in env.items() if k != "GGML_CUDA_OP_META"}
            runs.append(
                PlannedRun(
                    label=label,
                    kind="counter",
                    counters=group,
                    argv=(
                        self.executable,
                        "--pmc",
                        *group,
                        *common,
                        "-d",
                        str(out_dir / label),
                        "-o",
                        "%pid%",
                        "--",
                        *app,
                    ),
                    env=counter_env,
                    log_name="rocprofv3.log",
                )
            )
        return runs
