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
    )


def execute(
    plan: CollectPlan,
    app: Sequence[str],
    *,
    runner: Runner = subprocess_runner,
    on_run: Callable[[int, int, PlannedRun], None] | None = None,
) -> Path:
    """Run every planned run and write the manifest; return the capture directory.

    Raises:
        ProfilerFailed: a run exited with an error (its log is kept under the output dir); a failed
            ``probe`` run (the optional bandwidth probe) is recorded in the manifest instead.
    """
    plan.out_dir.mkdir(parents=True, exist_ok=True)
    started = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    wall_s: list[float] = []
    probe_errors: dict[str, str] = {}
    for i, run in enumerate(plan.runs):
        if on_run:
            on_run(i, len(plan.runs), run)
        sidecar = run.env.get("GGML_CUDA_OP_META")
        if sidecar:
            # the hook fopen()s the file and creates no directory (without nsys no trace run creates it)
            Path(sidecar).parent.mkdir(parents=True, exist_ok=True)
        t0 = time.monotonic()
        try:
            run_checked(run, runner, plan.out_dir / run.label / run.log_name)
        except ProfilerFailed as exc:
            if run.kind != "probe":
                raise
            probe_errors[run.label] = str(exc)  # an optional measurement: the capture goes on without it
        wall_s.append(round(time.monotonic() - t0, 3))
    manifest = {
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
    (plan.out_dir / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return plan.out_dir
