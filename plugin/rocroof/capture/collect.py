"""``rocroof collect``: profile an application, keep the raw output, ingest it.

Flow: pick the profiler (rocprofv3 on AMD, Nsight Systems + Nsight Compute on NVIDIA), detect
the GPU (or take ``--arch``), plan the passes, run each one with the ggml marker hook switched
on (``GGML_CUDA_MARKERS=1``; the op-metadata sidecar ``GGML_CUDA_OP_META`` in the trace pass
only), write ``rocroof-collect.json`` next to the raw output, then read it back like any
capture (passes joined per op invocation and kernel ordinal).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InputError, ProfilerFailed
from .profilers import choose_profiler
from .profilers.base import Device, PlannedRun, Profiler, Runner, run_checked, subprocess_runner
from .readers import MANIFEST

#: Environment the llama.cpp hook reads (tools/llama.cpp); set unless the user set them.
HOOK_ENV = {"GGML_CUDA_MARKERS": "1"}


@dataclass
class CollectPlan:
    """What ``rocroof collect`` will do.

    Attributes:
        device: the GPU.
        runs: the commands, trace pass first (application runs and report exports).
        out_dir: where raw output goes.
        output_format: what the reader will find (``rocpd``, ``csv``, ``nsys-sqlite+ncu-csv``).
        sdk_version: the profiler's version, when known.
        profiler: the backend's name (``rocprofv3``, ``ncu+nsys``).
        settings: what else shapes the numbers (ncu cache control...), stored with the run.
    """

    device: Device
    runs: list[PlannedRun]
    out_dir: Path
    output_format: str
    sdk_version: str | None
    profiler: str = "rocprofv3"
    settings: dict[str, str] = field(default_factory=dict)
    backend: Profiler | None = field(default=None, repr=False, compare=False)


def make_plan(
    app: Sequence[str],
    out_dir: Path,
    *,
    counters: str | None = None,
    arch: str | None = None,
    profiler: Profiler | str | None = None,
    output_format: str | None = None,
    sidecar: bool = True,
    dry_run: bool = False,
    env: Mapping[str, str] | None = None,
) -> CollectPlan:
    """Plan a capture.

    Args:
        app: the application command.
        out_dir: where the raw output will go (must not hold an earlier capture).
        counters: a preset (``dram``, ``roofline``) or counter/metric names; None: ``dram`` for
            rocprofv3, ``roofline`` for ncu (DRAM bytes plus the FP instruction counters).
        arch: the GPU architecture; when None it is detected (``rocprofv3 -L``, ``nvidia-smi``).
        profiler: a backend object (tests pass one with a fake executable), or its name
            (``rocprofv3``, ``ncu``); None picks by ``arch`` or by what is installed.
        output_format: force rocprofv3's ``csv`` or ``rocpd``.
        sidecar: ask the llama.cpp hook for the op-metadata JSON in the trace pass.
        dry_run: only plan; the profiler need not be installed when ``arch`` is given.
        env: environment for the application, added to every run and recorded in the manifest
            (``rocroof sweep``: the point's variables and GPU pinning). A marker-hook variable set
            here (``GGML_CUDA_MARKERS``, ``GGML_CUDA_OP_META``) replaces collect's default.

    Raises:
        ProfilerNotFound: no profiler (and no ``arch`` for a dry run).
        InputError: empty command or a non-empty output directory.
        ConfigError: unknown counters or a preset without counters for the arch.
    """
    if not app:
        raise InputError("no application command: put it after '--', e.g. rocroof collect -- llama-bench -m model.gguf")
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(f"{out_dir}: --out must be a directory (this is a file)")
    if out_dir.exists() and any(out_dir.iterdir()):
        raise InputError(f"{out_dir}: output directory is not empty; choose another with --out")
    prof = profiler if profiler is not None and not isinstance(profiler, str) else None
    if prof is None:
        prof = choose_profiler(profiler if isinstance(profiler, str) else None, arch, output_format=output_format)
    if not dry_run:
        prof.locate()
    if arch:
        device = Device(arch=arch)
        try:
            sdk = prof.version()
        except Exception:
            sdk = None
    else:
        prof.locate()
        device = prof.detect()
        sdk = prof.version()
    extra = dict(env or {})
    env = {k: v for k, v in HOOK_ENV.items() if k not in os.environ and k not in extra}
    if sidecar and "GGML_CUDA_OP_META" not in os.environ and "GGML_CUDA_OP_META" not in extra:
        env["GGML_CUDA_OP_META"] = str(out_dir / "trace" / "ggml-op-meta.json")
    env = {**extra, **env}
    spec = counters or ("roofline" if prof.name.startswith("ncu") else "dram")
    names = prof.resolve_counters(spec, device.arch)
    runs = prof.plan(app, out_dir, device, names, env, sdk_version=sdk)
    name = prof.name
    if prof.name.startswith("ncu"):
        traced = any(r.kind == "trace" for r in runs)
        fmt = "nsys-sqlite+ncu-csv" if traced else "ncu-csv"
        name = prof.name if traced else "ncu"
    else:
        fmt = "rocpd" if "rocpd" in runs[0].argv else "csv"
    return CollectPlan(
        device=device,
        runs=runs,
        out_dir=out_dir,
        output_format=fmt,
        sdk_version=sdk,
        profiler=name,
        settings=dict(prof.settings),
        backend=prof,
    )


@dataclass(frozen=True)
class Sample:
    """What the counter pass measures, as ``sampler`` plans it after the trace pass.

    Attributes:
        windows: ``(skip, count)`` kernel launches to count; empty: every launch (no sampling).
        kernels: launches the counter runs will count.
        launches: kernel launches of the whole application run.
        manifest: what the capture's manifest records about the sample (``sample``).
    """

    windows: tuple[tuple[int, int], ...]
    kernels: int
    launches: int
    manifest: dict[str, object] = field(default_factory=dict)


#: ``sampler(trace_dir) -> Sample``: plans the counter sample from the finished trace pass.
Sampler = Callable[[Path], Sample]
#: ``on_progress(run, kernels_done, kernels_planned)`` while a counter run is counting kernels.
ProgressCallback = Callable[[PlannedRun, int, int | None], None]


class TooManyKernels(InputError):
    """The counter pass would count more kernels than ``--max-kernels`` allows."""


def estimate_s(runs: Sequence[PlannedRun], kernels: int, windows: int = 1) -> float | None:
    """Seconds the counter runs take for ``kernels`` counted kernels in ``windows`` application runs.

    From the profiler's own figures (:attr:`PlannedRun.seconds_per_kernel`, ``startup_s``);
    None when it gives none.
    """
    counter = [r for r in runs if r.kind == "counter" and r.seconds_per_kernel]
    if not counter:
        return None
    passes = len({r.counters for r in counter})  # rocprofv3: one application run per group
    rate = max(r.seconds_per_kernel or 0.0 for r in counter)
    startup = max(r.startup_s for r in counter)
    return passes * (kernels * rate + startup * max(windows, 1))


class _LogWatch:
    """Counts a profiler's per-kernel progress lines in its log while it runs (a thread)."""

    #: Bytes read again with the next read (longer than any progress line's match).
    CARRY = 4096

    def __init__(self, log: Path, pattern: str, on_count: Callable[[int], None]) -> None:
        import re
        import threading

        self.log = log
        self.pattern = re.compile(pattern.encode())
        self.on_count = on_count
        self.count = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rocroof-progress", daemon=True)

    def __enter__(self) -> _LogWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        offset, carry = 0, b""
        while True:
            stopping = self._stop.wait(0.5)
            try:
                with open(self.log, "rb") as fh:
                    fh.seek(offset)
                    data = fh.read()
            except OSError:
                data = b""
            if data or (stopping and carry):
                offset += len(data)
                text = carry + data
                found = len(self.pattern.findall(text))
                # a match cut by the read boundary is counted with the next read: the last bytes are
                # read again then, and what they hold whole is counted there, not here
                carry = b"" if stopping else text[-self.CARRY :]
                found -= len(self.pattern.findall(carry))
                if found:
                    self.count += found
                    self.on_count(self.count)
            if stopping:
                return


def execute(
    plan: CollectPlan,
    app: Sequence[str],
    *,
    runner: Runner = subprocess_runner,
    on_run: Callable[[int, int, PlannedRun], None] | None = None,
    sampler: Sampler | None = None,
    on_sample: Callable[[Sample, float | None], None] | None = None,
    max_kernels: int | None = None,
    on_progress: ProgressCallback | None = None,
) -> Path:
    """Run every planned run and write the manifest; return the capture directory.

    Args:
        plan: from :func:`make_plan`.
        app: the application command (for the manifest).
        runner: runs one command (tests inject a fake).
        on_run: ``on_run(index, total, run)`` before each run.
        sampler: plans the counter sample once the trace pass is done (:mod:`rocroof.ingest.sample`
            through the command line); the counter runs are then restricted to its windows.
            None: every kernel is counted.
        on_sample: ``on_sample(sample, estimated_s)`` once the sample is planned, before the
            counter runs (the estimate from the profiler's time per kernel, when known).
        max_kernels: refuse (before any counter run) a counter pass that would count more kernels.
        on_progress: ``on_progress(run, done, planned)`` as a counter run reports each kernel.

    Raises:
        ProfilerFailed: a run exited with an error (its log is kept under the output dir); a failed
            ``probe`` run (the optional bandwidth probe) is recorded in the manifest instead.
        TooManyKernels: the counter pass would count more than ``max_kernels`` kernels.
    """
    plan.out_dir.mkdir(parents=True, exist_ok=True)
    started = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    wall_s: list[float] = []
    probe_errors: dict[str, str] = {}
    runs = list(plan.runs)
    sample: Sample | None = None
    planned_sample = False
    i = 0
    while i < len(runs):
        run = runs[i]
        if run.kind == "counter" and not planned_sample:
            planned_sample = True
            sample = _plan_counters(plan, runs, i, sampler, max_kernels, on_sample)
            if sample is not None and sample.windows:
                assert plan.backend is not None
                runs[i:] = plan.backend.sample_runs(runs[i:], sample.windows)
                run = runs[i]
        if on_run:
            on_run(i, len(runs), run)
        sidecar = run.env.get("GGML_CUDA_OP_META")
        if sidecar:
            # the hook fopen()s the file and creates no directory (without nsys no trace run creates it)
            Path(sidecar).parent.mkdir(parents=True, exist_ok=True)
        t0 = time.monotonic()
        log = plan.out_dir / run.label / run.log_name
        planned = run.window[1] if run.window else (sample.launches if sample else None)
        try:
            if run.progress and on_progress is not None:
                log.parent.mkdir(parents=True, exist_ok=True)
                on_progress(run, 0, planned)
                with _LogWatch(log, run.progress, _reporter(on_progress, run, planned)):
                    run_checked(run, runner, log)
            else:
                run_checked(run, runner, log)
        except ProfilerFailed as exc:
            if run.kind != "probe":
                raise
            probe_errors[run.label] = str(exc)  # an optional measurement: the capture goes on without it
        wall_s.append(round(time.monotonic() - t0, 3))
        i += 1
    plan.runs = runs
    manifest: dict[str, object] = {
        "tool": "rocroof collect",
        "profiler": plan.profiler,
        "profiler_version": plan.sdk_version,
        "command": list(app),
        "arch": plan.device.arch,
        "output_format": plan.output_format,
        "started": started,
        "finished": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "settings": plan.settings,
        "passes": [
            {
                "dir": r.label,
                "kind": r.kind,
                "counters": list(r.counters),
                "argv": list(r.argv),
                "env": r.env,
                "wall_s": w,
            }
            for r, w in zip(plan.runs, wall_s, strict=True)
            if r.kind not in ("export", "probe")
        ],
        "probes": [
            {
                "dir": r.label,
                "argv": list(r.argv),
                "output": str(r.output.relative_to(plan.out_dir)) if r.output else None,
                "wall_s": w,
                "error": probe_errors.get(r.label),
            }
            for r, w in zip(plan.runs, wall_s, strict=True)
            if r.kind == "probe"
        ],
        "exports": [
            {"dir": r.label, "argv": list(r.argv), "wall_s": w}
            for r, w in zip(plan.runs, wall_s, strict=True)
            if r.kind == "export"
        ],
    }
    if sample is not None and sample.manifest:
        manifest["sample"] = sample.manifest
    (plan.out_dir / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return plan.out_dir


def _reporter(on_progress: ProgressCallback, run: PlannedRun, planned: int | None) -> Callable[[int], None]:
    def report(done: int) -> None:
        on_progress(run, done, planned)

    return report


def _plan_counters(
    plan: CollectPlan,
    runs: list[PlannedRun],
    first_counter: int,
    sampler: Sampler | None,
    max_kernels: int | None,
    on_sample: Callable[[Sample, float | None], None] | None,
) -> Sample | None:
    """Plan the sample (when asked), check ``max_kernels`` and report the estimate, before any counter run."""
    trace = next((r for r in runs[:first_counter] if r.kind == "trace"), None)
    sample = sampler(plan.out_dir / trace.label) if sampler is not None and trace is not None else None
    if sample is None:
        return None
    counter_runs = [r for r in runs[first_counter:] if r.kind == "counter"]
    estimate = estimate_s(counter_runs, sample.kernels, len(sample.windows))
    if on_sample is not None:
        on_sample(sample, estimate)
    if max_kernels is not None and sample.kernels > max_kernels:
        raise TooManyKernels(
            f"the counter pass would count {sample.kernels:,} kernels (of {sample.launches:,} launched), more than "
            f"--max-kernels {max_kernels:,}: sample fewer graph evaluations (--sample prefill=1,decode=1), profile a "
            f"shorter run (fewer prompt or generated tokens), or raise --max-kernels; the trace pass is kept in "
            f"{plan.out_dir}"
        )
    return sample
