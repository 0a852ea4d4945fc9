"""``rocroof collect``: profile an application, keep the raw output, ingest it.

Flow: detect the GPU (or take ``--arch``), plan the passes, run each one with the ggml marker
hook switched on (``GGML_CUDA_MARKERS=1``; the op-metadata sidecar ``GGML_CUDA_OP_META`` in
the trace pass only), write ``rocroof-collect.json`` next to the raw output, then read it
back like any capture (passes joined per op invocation and kernel ordinal).
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .errors import InputError
from .profilers.base import Device, PlannedRun, Runner, run_checked, subprocess_runner
from .profilers.rocprofv3 import Rocprofv3, resolve_counters
from .readers import MANIFEST

#: Environment the llama.cpp hook reads (tools/llama.cpp); set unless the user set them.
HOOK_ENV = {"GGML_CUDA_MARKERS": "1"}


@dataclass
class CollectPlan:
    """What ``rocroof collect`` will do.

    Attributes:
        device: the GPU.
        runs: the application runs, trace pass first.
        out_dir: where raw output goes.
        output_format: rocprofv3 output format.
        sdk_version: rocprofiler-sdk version, when known.
    """

    device: Device
    runs: list[PlannedRun]
    out_dir: Path
    output_format: str
    sdk_version: str | None


def make_plan(
    app: Sequence[str],
    out_dir: Path,
    *,
    counters: str = "dram",
    arch: str | None = None,
    profiler: Rocprofv3 | None = None,
    output_format: str | None = None,
    sidecar: bool = True,
    dry_run: bool = False,
) -> CollectPlan:
    """Plan a capture.

    Args:
        app: the application command.
        out_dir: where the raw output will go (must not hold an earlier capture).
        counters: a preset (``dram``, ``roofline``) or counter names.
        arch: the GPU architecture; when None it is detected with ``rocprofv3 -L``.
        profiler: the backend (tests pass one with a fake executable).
        output_format: force ``csv`` or ``rocpd``.
        sidecar: ask the llama.cpp hook for the op-metadata JSON in the trace pass.
        dry_run: only plan; the profiler need not be installed when ``arch`` is given.

    Raises:
        ProfilerNotFound: no rocprofv3 (and no ``arch`` for a dry run).
        InputError: empty command or a non-empty output directory.
        ConfigError: unknown counters or a preset without counters for the arch.
    """
    if not app:
        raise InputError("no application command: put it after '--', e.g. rocroof collect -- llama-bench -m model.gguf")
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(f"{out_dir}: --out must be a directory (this is a file)")
    if out_dir.exists() and any(out_dir.iterdir()):
        raise InputError(f"{out_dir}: output directory is not empty; choose another with --out")
    prof = profiler or Rocprofv3(output_format=output_format)
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
    env = {k: v for k, v in HOOK_ENV.items() if k not in os.environ}
    if sidecar and "GGML_CUDA_OP_META" not in os.environ:
        env["GGML_CUDA_OP_META"] = str(out_dir / "trace" / "ggml-op-meta.json")
    names = resolve_counters(counters, device.arch)
    runs = prof.plan(app, out_dir, device, names, env, sdk_version=sdk)
    fmt = "rocpd" if "rocpd" in runs[0].argv else "csv"
    return CollectPlan(device=device, runs=runs, out_dir=out_dir, output_format=fmt, sdk_version=sdk)


def execute(
    plan: CollectPlan,
    app: Sequence[str],
    *,
    runner: Runner = subprocess_runner,
    on_run: Callable[[int, int, PlannedRun], None] | None = None,
) -> Path:
    """Run every planned run and write the manifest; return the capture directory.

    Raises:
        ProfilerFailed: a run exited with an error (its log is kept under the output dir).
    """
    plan.out_dir.mkdir(parents=True, exist_ok=True)
    started = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    for i, run in enumerate(plan.runs):
        if on_run:
            on_run(i, len(plan.runs), run)
        run_checked(run, runner, plan.out_dir / run.label / "rocprofv3.log")
    manifest = {
        "tool": "rocroof collect",
        "profiler": "rocprofv3",
        "profiler_version": plan.sdk_version,
        "command": list(app),
        "arch": plan.device.arch,
        "output_format": plan.output_format,
        "started": started,
        "finished": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "passes": [
            {"dir": r.label, "kind": r.kind, "counters": list(r.counters), "argv": list(r.argv), "env": r.env}
            for r in plan.runs
        ],
    }
    (plan.out_dir / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return plan.out_dir
