"""NVIDIA backend: Nsight Systems for the timings, Nsight Compute for the DRAM counters.

A capture is two application runs, exactly as on AMD:

* ``trace``: ``nsys profile -t cuda,nvtx --sample=none --cpuctxsw=none`` (kernel activity, the
  CUDA runtime launches and the NVTX ranges, nothing else: with default CPU sampling a short
  llama.cpp run writes hundreds of MB), then ``nsys export --type sqlite``. Kernels run
  concurrently and at full speed, so these durations are the timings.
* ``ncu``: ``ncu --nvtx --clock-control none --cache-control all|none --metrics ...``, then
  ``ncu --import ... --csv --page raw`` into ``ncu_raw.csv``. Nsight Compute replays each
  kernel as often as its metrics need and serialises kernels; with ``--cache-control all`` (its
  default) it flushes the caches before each kernel, so DRAM bytes are those of a cold L2, and
  with ``none`` a small model's weights may stay in the L2 (50 MB on an H100; the H200 reports 60 MiB) (a trial here
  saw one matmul fall from 89.5 MB to 9.6 MB). The setting is recorded in the manifest and the
  run.

Metric names are Nsight Compute's (``ncu --query-metrics``); the FLOP counters are the SASS
thread-instruction counters its roofline section uses (FADD/FMUL/FFMA, HADD/HMUL/HFMA,
DADD/DMUL/DFMA): tensor-core work is not among them. The ``ops`` preset adds the tensor-path
operation counters and the per-opcode thread instructions (dp4a), for measured operations
(:mod:`rocroof.analysis.ops`).

Nsight Compute serialises profiling across the whole host through a lock file,
``$TMPDIR/nsight-compute-lock``. When the environment pins the application to one GPU
(``CUDA_VISIBLE_DEVICES=<one id>``, as ``rocroof sweep --gpus`` does), the ncu run gets a
``TMPDIR`` of its own per GPU (:func:`ncu_lock_dir`), so points on different GPUs profile at once
while two runs on the same GPU still wait for each other.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from ...analysis.bandwidth import BANDWIDTH_FILE
from ...errors import ConfigError, ProfilerFailed, ProfilerNotFound
from .base import Device, PlannedRun

#: Nsight Compute metrics per ``--counters`` preset. ``dram``: timings and bytes; ``roofline``: + FLOP counters.
DRAM_METRICS = ("gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum", "lts__t_bytes.sum")
FLOP_METRICS = tuple(
    f"sm__sass_thread_inst_executed_op_{op}_pred_on.sum"
    for op in ("fadd", "fmul", "ffma", "hadd", "hmul", "hfma", "dadd", "dmul", "dfma")
)
#: Tensor-core operations by source type: "# of math ops executed in Tensor path" (ncu --query-metrics);
#: one m16n8k32 int8 IMMA warp instruction adds 8,192 (= 2 x 16 x 8 x 32: multiply and add counted
#: apart) and one m16n8k16 fp16 HMMA 4,096 (H200 probe, tools/h200/counter-probe, docs/measured-ops.md).
TENSOR_METRICS = tuple(
    f"sm__ops_path_tensor_src_{src}.sum" for src in ("fp16", "bf16_dst_fp32", "tf32_dst_fp32", "fp8", "fp64", "int8")
)
#: Thread instructions per SASS opcode (an instanced metric: exported with --print-metric-instances
#: details); its IDP count is dp4a, the int8 dot product of ggml's MMVQ kernels, which no other
#: counter separates (smsp__sass_thread_inst_executed_op_integer_pred_on counts it among all integer
#: instructions). Slow: Nsight Compute patches the SASS to count it.
OPCODE_METRIC = "sass__thread_inst_executed_true_per_opcode"
PRESETS = {
    "dram": DRAM_METRICS,
    "roofline": DRAM_METRICS + FLOP_METRICS,
    "ops": DRAM_METRICS + FLOP_METRICS + TENSOR_METRICS + (OPCODE_METRIC,),
}
#: Nsight Compute's time per profiled kernel, s, measured on the H200 (ncu 2025.3, caches flushed):
#: the ``dram`` metrics need 1 replay pass (~45 ms per kernel), ``roofline`` 3 (0.16 s: a 28-layer
#: model's 866 and 538 kernels took 162 s and 109 s under ncu, 22 s of which start the application
#: and run its other kernels: :data:`NCU_STARTUP_S`); ``ops`` 9 passes and SASS patching (0.28 s: the
#: decoded token's 538 kernels in 172 s, caches kept).
SECONDS_PER_KERNEL = {"dram": 0.045, "roofline": 0.16, "ops": 0.28}
NCU_STARTUP_S = 22.0
#: The line Nsight Compute writes as it starts on a kernel: ``==PROF== Profiling "<kernel>" - <n>: 0%....``.
PROGRESS_LINE = r'==PROF== Profiling "'

CACHE_CONTROL = ("all", "none")
_METRIC = re.compile(r"[a-z0-9_]+__[a-z0-9_.]+")

#: Where Nsight Systems hides when it is not on PATH: beside Nsight Compute (``host/target-linux-x64``,
#: where ncu ships it) or in its own install under /opt/nvidia or the CUDA toolkit.
_NSYS_GLOBS = (
    "/opt/nvidia/nsight-systems/*/bin/nsys",
    "/opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys",
    "/usr/local/cuda*/bin/nsys",
)


def resolve_metrics(spec: str) -> list[tuple[str, ...]]:
    """``--counters`` for ncu: a preset (``dram``, ``roofline``) or metric names (commas or spaces).

    Returns one bundle: Nsight Compute schedules its own replay passes.

    Raises:
        ConfigError: a name that is not an Nsight Compute metric (``<unit>__<counter>.<rollup>``).
    """
    if spec in PRESETS:
        return [PRESETS[spec]]
    names = [n for n in re.split(r"[,\s]+", spec.strip()) if n]
    bad = [n for n in names if not _METRIC.fullmatch(n)]
    if bad or not names:
        raise ConfigError(
            f"--counters {spec!r}: expected a preset ({', '.join(PRESETS)}) or Nsight Compute metric names such as "
            f"dram__bytes_read.sum (not {', '.join(bad) or 'nothing'})"
        )
    if "gpu__time_duration.sum" not in names:
        names.insert(0, "gpu__time_duration.sum")  # every kernel row needs a duration
    return [tuple(names)]


def parse_smi(text: str) -> list[Device]:
    """GPUs from ``nvidia-smi --query-gpu=name,compute_cap --format=csv,noheader``.

    >>> parse_smi("NVIDIA H200, 9.0\\n")
    [Device(arch='sm_90', name='NVIDIA H200', counters=frozenset())]
    """
    devices = []
    for line in text.splitlines():
        name, sep, cc = line.rpartition(",")
        if sep and re.fullmatch(r"\s*\d+\.\d+\s*", cc):
            devices.append(Device(arch="sm_" + cc.strip().replace(".", ""), name=name.strip()))
    return devices


def ncu_lock_dir(env: dict[str, str]) -> Path | None:
    """The ``TMPDIR`` that scopes Nsight Compute's lock file to the one GPU ``env`` pins, or None.

    Args:
        env: the application's environment; ``CUDA_VISIBLE_DEVICES`` holding one id (an index or a
            UUID) pins it. No pinning, several GPUs, or a ``TMPDIR`` already given: None (ncu's
            host-wide lock applies).

    Returns:
        ``<system temp>/rocroof-ncu-lock-<id>`` (characters outside ``[A-Za-z0-9_.-]`` become ``_``).
    """
    gpu = env.get("CUDA_VISIBLE_DEVICES", "").strip()
    if not gpu or "," in gpu or "TMPDIR" in env:
        return None
    return Path(tempfile.gettempdir()) / ("rocroof-ncu-lock-" + re.sub(r"[^A-Za-z0-9_.-]", "_", gpu))


class NsightPair:
    """The NVIDIA backend (Nsight Compute ``ncu`` + Nsight Systems ``nsys``).

    Args:
        ncu: the ncu command.
        nsys: the nsys command; found beside ncu or under /opt/nvidia when None and not on PATH;
            ``none`` skips the trace run. Without nsys durations come from ncu's serialised replay.
        cache_control: ``all`` (flush caches before each profiled kernel; ncu's default) or ``none``.
        nvtx_include: ncu ``--nvtx-include`` expressions, passed unchanged (profile only kernels
            inside matching NVTX ranges; see ``ncu --help``).
        replay_mode: ncu ``--replay-mode`` (``kernel`` default; ``application`` reruns the app per pass).
    """

    name = "ncu+nsys"
    counter_label = "ncu"

    def __init__(
        self,
        ncu: str = "ncu",
        nsys: str | None = None,
        *,
        cache_control: str = "all",
        nvtx_include: Sequence[str] = (),
        replay_mode: str = "kernel",
        bandwidth_probe: bool = True,
    ) -> None:
        if cache_control not in CACHE_CONTROL:
            raise ConfigError(f"--cache-control {cache_control!r}: expected one of {', '.join(CACHE_CONTROL)}")
        self.ncu = ncu
        self.nsys = nsys
        self.cache_control = cache_control
        self.nvtx_include = tuple(nvtx_include)
        self.replay_mode = replay_mode
        self.bandwidth_probe = bandwidth_probe

    @property
    def settings(self) -> dict[str, str]:
        """What shapes the numbers, for the manifest: cache control, clock control, replay mode."""
        out = {
            "ncu_cache_control": self.cache_control,
            "ncu_clock_control": "none",
            "ncu_replay_mode": self.replay_mode,
        }
        if self.nvtx_include:
            out["ncu_nvtx_include"] = " ".join(self.nvtx_include)
        return out

    def locate(self) -> str:
        """The ncu path.

        Raises:
            ProfilerNotFound: ncu is not on ``PATH``.
        """
        path = shutil.which(self.ncu)
        if path is None:
            raise ProfilerNotFound(
                f"{self.ncu} not found on PATH: install Nsight Compute (the CUDA toolkit ships it in "
                "/usr/local/cuda/bin or /opt/nvidia/nsight-compute/<version>; add that to PATH), or ingest a capture "
                "recorded elsewhere with 'rocroof ingest DIR'"
            )
        return path

    def locate_nsys(self) -> str | None:
        """The nsys path, or None when there is none (then the capture has no trace run).

        Raises:
            ProfilerNotFound: an explicit ``nsys`` that does not exist.
        """
        if self.nsys == "none":
            return None
        if self.nsys:
            path = shutil.which(self.nsys)
            if path is None:
                raise ProfilerNotFound(f"--nsys {self.nsys}: not found (give the nsys executable, or 'none')")
            return path
        found = shutil.which("nsys")
        if found:
            return found
        ncu = shutil.which(self.ncu)
        candidates: list[Path] = []
        if ncu:
            root = Path(ncu).resolve().parent
            candidates += [root / "host" / "target-linux-x64" / "nsys", root.parent / "bin" / "nsys"]
        for pattern in _NSYS_GLOBS:
            candidates += sorted(Path("/").glob(pattern.lstrip("/")), reverse=True)
        for c in candidates:
            if c.is_file() and c.stat().st_mode & 0o111:
                return str(c)
        return None

    def version(self) -> str | None:
        """Nsight Compute's version, from ``ncu --version`` (e.g. ``2025.3.1.0``)."""
        try:
            out = subprocess.run([self.locate(), "--version"], capture_output=True, text=True, timeout=60, check=False)
        except (OSError, subprocess.TimeoutExpired, ProfilerNotFound):
            return None
        m = re.search(r"Version\s+(\d+(?:\.\d+)+)", out.stdout + out.stderr)
        return m.group(1) if m else None

    def detect(self) -> Device:
        """The first GPU that ``nvidia-smi`` lists.

        Raises:
            ProfilerNotFound: no nvidia-smi.
            ProfilerFailed: it lists no GPU.
        """
        smi = shutil.which("nvidia-smi")
        if smi is None:
            raise ProfilerNotFound(
                "nvidia-smi not found on PATH: is the NVIDIA driver installed? (or pass --arch sm_90)"
            )
        argv = [smi, "--query-gpu=name,compute_cap", "--format=csv,noheader"]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
        devices = parse_smi(proc.stdout)
        if not devices:
            raise ProfilerFailed(argv, proc.returncode or 1, proc.stderr or "no GPU listed")
        return devices[0]

    def resolve_counters(self, spec: str, arch: str) -> list[tuple[str, ...]]:
        """See :func:`resolve_metrics` (the architecture does not change the metric names)."""
        return resolve_metrics(spec)

    def sample_runs(self, runs: Sequence[PlannedRun], windows: Sequence[tuple[int, int]]) -> list[PlannedRun]:
        """Each ncu run (and its CSV export) once per window, with ``--launch-skip`` / ``--launch-count``.

        Nsight Compute counts the kernel launches of the profiled process from its start and
        profiles ``count`` of them after skipping ``skip`` (``ncu --help``: ``--launch-skip``,
        ``--launch-count``); the other kernels run unprofiled at full speed. The first window
        keeps the directory ``ncu``; the others get ``ncu.2``, ``ncu.3``..., which the reader
        joins into one counter pass.
        """
        out: list[PlannedRun] = []
        pending = list(runs)
        while pending:
            run = pending.pop(0)
            if run.kind != "counter":
                out.append(run)
                continue
            has_export = bool(pending) and pending[0].kind == "export" and pending[0].label == run.label
            export = pending.pop(0) if has_export else None
            for i, (skip, count) in enumerate(windows, start=1):
                label = run.label if i == 1 else f"{run.label}.{i}"
                out += self._windowed(run, export, label, skip, count)
        return out

    def _windowed(
        self, run: PlannedRun, export: PlannedRun | None, label: str, skip: int, count: int
    ) -> list[PlannedRun]:
        """One counter run (and export) of one launch window, written under ``label``."""
        assert run.output is not None  # every ncu run names its report
        old_dir = str(run.output.parent) + "/"
        new_dir = str(run.output.parent.with_name(label)) + "/"

        def moved(text: str) -> str:
            return text.replace(old_dir, new_dir) if label != run.label else text

        argv = list(run.argv)
        at = argv.index("--force-overwrite")
        argv[at:at] = ["--launch-skip", str(skip), "--launch-count", str(count)]
        output = Path(moved(str(run.output))) if run.output else None
        runs = [
            PlannedRun(
                label=label,
                kind="counter",
                counters=run.counters,
                argv=tuple(moved(a) for a in argv),
                env=dict(run.env),
                log_name=run.log_name,
                output=output,
                progress=run.progress,
                seconds_per_kernel=run.seconds_per_kernel,
                startup_s=run.startup_s,
                window=(skip, count),
            )
        ]
        if export is not None:
            runs.append(
                PlannedRun(
                    label=label,
                    kind="export",
                    counters=(),
                    argv=tuple(moved(a) for a in export.argv),
                    log_name=export.log_name,
                )
            )
        return runs

    def plan(
        self,
        app: Sequence[str],
        out_dir: Path,
        device: Device,
        counters: Sequence[Sequence[str]],
        env: dict[str, str],
        sdk_version: str | None = None,
    ) -> list[PlannedRun]:
        """The bandwidth probe, the nsys trace run and its export, then the ncu run and its CSV export.

        The probe (``python -m rocroof.analysis.bandwidth``, unless ``bandwidth_probe`` is off) times a
        device-to-device copy on the GPU the application will use and writes
        ``probe/bandwidth.json``: the run's measured DRAM ceiling. A failed probe does not fail the
        capture (:func:`rocroof.capture.collect.execute` records it).

        The op-metadata sidecar (``GGML_CUDA_OP_META`` in ``env``) is written by the trace run only.

        Raises:
            ConfigError: an AMD architecture.
        """
        if device.arch.startswith("gfx"):
            raise ConfigError(
                f"Nsight Compute profiles NVIDIA GPUs; {device.arch} is an AMD architecture (use rocprofv3)"
            )
        metrics = list(dict.fromkeys(m for bundle in counters for m in bundle))
        runs: list[PlannedRun] = []
        if self.bandwidth_probe:  # the measured DRAM ceiling (rocroof.analysis.bandwidth), pinned like the application
            probe = out_dir / "probe" / BANDWIDTH_FILE
            runs.append(
                PlannedRun(
                    label="probe",
                    kind="probe",
                    counters=(),
                    argv=(sys.executable, "-m", "rocroof.analysis.bandwidth", "--out", str(probe)),
                    env={k: v for k, v in env.items() if k.endswith("VISIBLE_DEVICES")},
                    log_name="bandwidth.log",
                    output=probe,
                )
            )
        nsys = self.locate_nsys()
        if nsys is not None:
            trace = out_dir / "trace"
            report = trace / "nsys"
            runs.append(
                PlannedRun(
                    label="trace",
                    kind="trace",
                    counters=(),
                    argv=(
                        nsys,
                        "profile",
                        "-t",
                        "cuda,nvtx",
                        "--sample=none",
                        "--cpuctxsw=none",
                        "--force-overwrite=true",
                        "-o",
                        str(report),
                        *app,
                    ),
                    env=dict(env),
                    log_name="nsys.log",
                    output=Path(str(report) + ".nsys-rep"),
                )
            )
            runs.append(
                PlannedRun(
                    label="trace",
                    kind="export",
                    counters=(),
                    argv=(
                        nsys,
                        "export",
                        "--type",
                        "sqlite",
                        "--force-overwrite=true",
                        "-o",
                        str(trace / "nsys.sqlite"),
                        str(report) + ".nsys-rep",
                    ),
                    log_name="nsys-export.log",
                )
            )
        ncu_dir = out_dir / self.counter_label
        rep = ncu_dir / "ncu"
        counter_env = dict(env) if nsys is None else {k: v for k, v in env.items() if k != "GGML_CUDA_OP_META"}
        lock_dir = ncu_lock_dir(counter_env)
        if lock_dir is not None:  # ncu's lock per GPU, not per host (module docstring)
            lock_dir.mkdir(parents=True, exist_ok=True)
            counter_env["TMPDIR"] = str(lock_dir)
        argv = [
            self.ncu,
            "--nvtx",
            "--clock-control",
            "none",
            "--cache-control",
            self.cache_control,
            "--replay-mode",
            self.replay_mode,
            "--target-processes",
            "all",
            "--metrics",
            ",".join(metrics),
        ]
        for expr in self.nvtx_include:
            argv += ["--nvtx-include", expr]
        argv += ["--force-overwrite", "-o", str(rep), *app]
        dram_only = set(metrics) <= set(PRESETS["dram"])
        per_opcode = any(m.startswith("sass__") and "per_opcode" in m for m in metrics)
        runs.append(
            PlannedRun(
                label=self.counter_label,
                kind="counter",
                counters=tuple(metrics),
                argv=tuple(argv),
                env=counter_env,
                log_name="ncu.log",
                output=Path(str(rep) + ".ncu-rep"),
                progress=PROGRESS_LINE,
                seconds_per_kernel=SECONDS_PER_KERNEL["dram" if dram_only else "ops" if per_opcode else "roofline"],
                startup_s=NCU_STARTUP_S,
                warning=None
                if dram_only or self.cache_control != "none"
                else "--cache-control none with counters beyond --counters dram: ncu replays each kernel in several "
                "passes and the later ones find the L2 warm, so DRAM bytes may be far too low (count DRAM bytes with "
                "--counters dram, operations with --counters ops)",
            )
        )
        # an instanced metric (per opcode) exports its instances by name: "total (IDP: n; FFMA: n; ...)"
        instances = ["--print-metric-instances", "details"] if per_opcode else []
        export = shlex.join([self.ncu, "--import", str(rep) + ".ncu-rep", "--csv", "--page", "raw", *instances])
        runs.append(
            PlannedRun(
                label=self.counter_label,
                kind="export",
                counters=(),
                argv=("sh", "-c", f"{export} > {shlex.quote(str(ncu_dir / 'ncu_raw.csv'))}"),
                log_name="ncu-export.log",
            )
        )
        return runs
