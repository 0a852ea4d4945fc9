"""The one small interface every profiler backend implements.

A backend plans the passes of a capture, builds each command, and runs them; the output
directory is then read by :func:`rocroof.capture.readers.read_capture` like any recorded capture.
Nothing outside ``rocroof.capture.profilers`` knows which profiler ran.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ...errors import ProfilerFailed, ProfilerNotFound

#: run(argv, env, log_path) -> exit status. Injected so tests run without a GPU.
Runner = Callable[[Sequence[str], dict[str, str], Path], int]


@dataclass(frozen=True)
class Device:
    """What a backend learned about the GPU.

    Attributes:
        arch: ``gfx942``, ``sm_90``...
        name: product name, when known.
        counters: counter names the profiler lists as available (empty = unknown).
    """

    arch: str
    name: str | None = None
    counters: frozenset[str] = field(default_factory=frozenset)


@dataclass(frozen=True)
class PlannedRun:
    """One application run of a capture.

    Attributes:
        label: its sub-directory under the output directory (``trace``, ``pass_1``...).
        kind: ``trace`` or ``counter`` (an application run), ``export`` (the profiler converting
            the previous run's report into a file rocroof reads; the application does not run), or
            ``probe`` (the copy-bandwidth probe, :mod:`rocroof.analysis.bandwidth`; no counters).
        counters: counters collected (empty for the trace pass, an export and the probe).
        argv: the full command line.
        env: environment variables set on top of the caller's.
        log_name: file under ``label`` that receives the command's stdout and stderr.
        output: the report the run must leave (None: not checked). A profiler that exits 0 without
            it (Nsight Systems does when its importer cannot load a library) is a failed run.
        progress: a regular expression matching the log line the profiler writes as it starts on
            each kernel it counts (None: it writes none), for a progress bar with an ETA.
        seconds_per_kernel: the profiler's time per counted kernel, for the estimate printed
            before the run (None: unknown).
        startup_s: the run's time besides its counted kernels (the application's start, its
            uncounted kernels), for the same estimate.
        window: ``(skip, count)`` kernel launches this counter run counts (None: every one).
        warning: what the user should know before this run starts (printed with the plan), or None.
    """

    label: str
    kind: str
    counters: tuple[str, ...]
    argv: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    log_name: str = "profiler.log"
    output: Path | None = None
    progress: str | None = None
    seconds_per_kernel: float | None = None
    startup_s: float = 0.0
    window: tuple[int, int] | None = None
    warning: str | None = None


class Profiler(Protocol):
    """A profiler backend (rocprofv3; Nsight Compute + Nsight Systems)."""

    name: str

    @property
    def settings(self) -> dict[str, str]:
        """Settings that shape the numbers (e.g. ncu's cache control), stored with the run."""
        ...

    def resolve_counters(self, spec: str, arch: str) -> list[tuple[str, ...]]:
        """Expand ``--counters`` (a preset or names) into bundles for this profiler and GPU."""
        ...

    def locate(self) -> str:
        """The executable path; raises :class:`~rocroof.errors.ProfilerNotFound`."""
        ...

    def version(self) -> str | None:
        """The profiler's version string, when it tells."""
        ...

    def detect(self) -> Device:
        """Ask the profiler which GPU and counters are present."""
        ...

    def plan(
        self,
        app: Sequence[str],
        out_dir: Path,
        device: Device,
        counters: Sequence[Sequence[str]],
        env: dict[str, str],
        sdk_version: str | None = None,
    ) -> list[PlannedRun]:
        """The runs that make up one capture (trace pass first); ``counters`` are bundles."""
        ...

    def sample_runs(self, runs: Sequence[PlannedRun], windows: Sequence[tuple[int, int]]) -> list[PlannedRun]:
        """The counter runs of ``runs`` (and their exports) restricted to kernel launch ``windows``.

        ``windows`` are ``(skip, count)`` launches of the application's process, in launch order
        (:mod:`rocroof.ingest.sample`). Runs that are not counter runs pass unchanged.

        Raises:
            ConfigError: the profiler cannot count a window of launches.
        """
        ...


def subprocess_runner(argv: Sequence[str], env: dict[str, str], log: Path) -> int:
    """Run a command with ``env`` added, teeing nothing: stdout+stderr go to ``log``, stdin is closed."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "wb") as fh:
        try:
            proc = subprocess.run(
                list(argv),
                env={**os.environ, **env},
                stdin=subprocess.DEVNULL,  # a chat tool (llama-cli) must not wait for the terminal
                stdout=fh,
                stderr=subprocess.STDOUT,
                check=False,
            )
        except FileNotFoundError as exc:
            raise ProfilerNotFound(f"{argv[0]}: not found on PATH ({exc.strerror})") from exc
    return proc.returncode


def run_checked(run: PlannedRun, runner: Runner, log: Path) -> None:
    """Run one planned run; raise :class:`ProfilerFailed` with the log's tail on failure.

    Raises:
        ProfilerFailed: a non-zero exit status, or status 0 without the run's ``output`` report.
    """
    status = runner(run.argv, run.env, log)
    missing = status == 0 and run.output is not None and not run.output.exists()
    if status != 0 or missing:
        tail = ""
        if log.is_file():
            tail = "\n".join(log.read_text(encoding="utf-8", errors="replace").splitlines()[-20:])
        if missing:
            assert run.output is not None
            last = tail.strip().splitlines()[-1] if tail.strip() else "empty"
            tail += f"\nit wrote no {run.output.name} (its log {log} ends: {last})"
        raise ProfilerFailed(list(run.argv), status, tail or f"see {log}")
