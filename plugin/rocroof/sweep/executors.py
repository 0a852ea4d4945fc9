"""Where and how many points run at a time: the :class:`Executor` interface and the local executor.

The sweep (:func:`rocroof.sweep.run.run_sweep`) decides *what* is pending and how one point is
run (:class:`~rocroof.sweep.run.PointRunner`: profile, then ingest in one transaction); an
executor decides *where*: :class:`LocalExecutor` runs up to ``jobs`` points at once in threads
of this process, one per GPU, pinned by environment. A batch executor
(:class:`rocroof.sweep.slurm.SlurmExecutor`) implements the same :class:`Executor` protocol by
submitting ``rocroof sweep FILE --point ID`` for each point (the same
:class:`~rocroof.sweep.run.PointRunner` then runs on the node) and reporting each point's
outcome from the database label ``sweep_point`` and the point's status file
(:func:`rocroof.sweep.run.read_status`).
"""

from __future__ import annotations

import queue
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

from ..errors import ConfigError, RocroofError

if TYPE_CHECKING:
    from .expand import Point
    from .run import PointResult
    from .spec import Sweep

EXECUTORS = ("local", "slurm")
#: Pinning variables per vendor. ROCm applies ROCR_VISIBLE_DEVICES first and indexes
#: HIP_VISIBLE_DEVICES / CUDA_VISIBLE_DEVICES within what it left (one GPU: index 0).
PIN_VARIABLES = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")

EventKind = Literal["start", "stage", "end", "stopping", "info"]


@dataclass(frozen=True)
class SweepEvent:
    """Something that happened to a point, for progress displays.

    Attributes:
        kind: ``start`` (a point began; ``gpu`` set when pinned), ``stage`` (``detail`` says what it
            does now), ``end`` (``result`` is its outcome), ``stopping`` (the sweep winds down:
            ``detail`` says why; ``point`` is None), ``info`` (news about the whole sweep, such as a
            batch job's id: ``detail``; ``point`` is None).
        point: the point.
        detail: words for the display.
        gpu: the GPU the point is pinned to.
        result: the outcome (``end`` only).
    """

    kind: EventKind
    point: Point | None
    detail: str = ""
    gpu: str | None = None
    result: PointResult | None = None


EventSink = Callable[[SweepEvent], None]


@dataclass(frozen=True)
class Slot:
    """Where one point runs in this process.

    Attributes:
        gpu: the GPU id it is pinned to, or None (no ``--gpus``: not pinned).
        cancel: set when the sweep is interrupted; a running point stops at its next step.
    """

    gpu: str | None
    cancel: threading.Event


#: Runs one point in this process; returns its result (RocroofErrors become a failed result).
PointWork = Callable[["Point", Slot], "PointResult"]


class NothingStarted(RocroofError):
    """An executor failed before any point ran or was handed to a batch system.

    :func:`~rocroof.sweep.run.run_sweep` then removes what it created for the sweep: a database
    that did not exist before (still without runs) and an ``out`` directory left empty.
    """


class Executor(Protocol):
    """Runs a sweep's pending points.

    Contract for :meth:`run`:

    * return one :class:`~rocroof.sweep.run.PointResult` per point, in the order given; a point
      never started has status ``not-run``;
    * emit :class:`SweepEvent` ``start`` and ``end`` around each point (``stage`` comes from the
      work itself);
    * start no point once ``cancel`` is set; on KeyboardInterrupt set ``cancel``, let running
      points stop (they are not marked done; the store's transaction leaves no half run), and
      return;
    * with ``sweep.on_error == "stop"``, start no point after a failed one (running ones finish);
    * an error raised before any point started or was submitted is a :class:`NothingStarted`,
      after removing what the executor itself wrote.

    A batch executor returns ``submitted`` for points it handed to the batch system and did not
    wait for.

    Attributes:
        name: ``--executor`` name.
        runs_here: True when points run in this process (the profiler must then be installed
            here); False when they run elsewhere (a batch job on a compute node).
    """

    name: str
    runs_here: bool

    def preflight(self, sweep: Sweep) -> None:
        """Check, before anything is written, that this executor can run ``sweep`` here.

        Raises:
            RocroofError: it cannot (e.g. the batch system's commands are not installed).
        """
        ...

    def describe(self, sweep: Sweep, points: Sequence[Point], db: str) -> str:
        """For ``--dry-run``: what the executor would do with ``points`` beyond running them ('' for nothing)."""
        ...

    def run(
        self,
        sweep: Sweep,
        points: Sequence[Point],
        work: PointWork,
        *,
        db: str,
        on_event: EventSink,
        cancel: threading.Event,
    ) -> list[PointResult]:
        """Run ``points`` (see the class docstring for the contract); ``db`` is where ``work`` stores them."""
        ...


def pin_env(gpu: str | None, vendor: str | None) -> dict[str, str]:
    """The environment that pins a point to one GPU (empty when ``gpu`` is None).

    Args:
        gpu: the GPU's index or UUID, as the vendor's tools number it.
        vendor: ``amd`` or ``nvidia``; None when not known.

    Returns:
        NVIDIA (or unknown): all three variables set to ``gpu``. AMD: ``ROCR_VISIBLE_DEVICES=gpu``
        and ``HIP_VISIBLE_DEVICES=CUDA_VISIBLE_DEVICES=0``, because the HIP runtime applies its
        variables to the devices ROCR_VISIBLE_DEVICES left (PyTorch ``torch/cuda/__init__.py``
        ``_parse_visible_devices``: "The ROCR env var is processed first which then reduces the
        number of GPUs that HIP can select from"); HIP_VISIBLE_DEVICES=1 beside
        ROCR_VISIBLE_DEVICES=1 would leave no GPU.
    """
    if gpu is None:
        return {}
    if vendor == "amd":
        return {"CUDA_VISIBLE_DEVICES": "0", "HIP_VISIBLE_DEVICES": "0", "ROCR_VISIBLE_DEVICES": gpu}
    return dict.fromkeys(PIN_VARIABLES, gpu)


#: A GPU as CUDA_/HIP_/ROCR_VISIBLE_DEVICES take it: an index, or a GPU / MIG UUID.
_GPU_ID = re.compile(r"\d{1,4}|(?:GPU|MIG)-[0-9A-Za-z][0-9A-Za-z./-]*")


def parse_gpus(text: str | None) -> list[str]:
    """``--gpus 0,1,3`` as a list of ids (indices or UUIDs).

    Raises:
        ConfigError: an empty id, one that is neither an index nor a GPU/MIG UUID, or an id given twice.
    """
    if text is None:
        return []
    ids = [g.strip() for g in text.split(",")]
    if not text.strip() or any(not g for g in ids):
        raise ConfigError(f"--gpus {text!r}: expected GPU ids separated by commas, e.g. --gpus 0,1")
    bad = [g for g in ids if not _GPU_ID.fullmatch(g)]
    if bad:
        raise ConfigError(
            f"--gpus {text!r}: {bad[0]!r} is not a GPU id; expected indices as nvidia-smi / rocm-smi list them "
            "(0,1,...) or UUIDs (GPU-..., MIG-...)"
        )
    twice = sorted({g for g in ids if ids.count(g) > 1})
    if twice:
        raise ConfigError(f"--gpus {text!r}: GPU {twice[0]} is given twice (one point runs per GPU at a time)")
    return ids


class LocalExecutor:
    """Points in threads of this process: up to ``jobs`` at once, at most one per GPU.

    Args:
        gpus: GPU ids; each running point gets one to itself and is pinned to it. Empty: not pinned.
        jobs: points at once (default: the number of GPUs, else 1).
        poll_s: how often the scheduler looks for finished points and Ctrl-C (s).

    Raises:
        ConfigError: ``jobs`` < 1, or more jobs than GPUs.
    """

    name = "local"
    runs_here = True

    def __init__(self, gpus: Sequence[str] = (), jobs: int | None = None, *, poll_s: float = 0.1) -> None:
        self.gpus = list(gpus)
        self.jobs = jobs if jobs is not None else max(1, len(self.gpus))
        if self.jobs < 1:
            raise ConfigError(f"--jobs {self.jobs}: expected at least 1")
        if self.gpus and self.jobs > len(self.gpus):
            raise ConfigError(
                f"--jobs {self.jobs} with {len(self.gpus)} GPU(s) ({','.join(self.gpus)}): one point runs per GPU at a "
                f"time; give at most --jobs {len(self.gpus)} or more --gpus"
            )
        self.poll_s = poll_s

    def preflight(self, sweep: Sweep) -> None:
        """Nothing to check: the points run in this process (run_sweep checks the profiler)."""

    def describe(self, sweep: Sweep, points: Sequence[Point], db: str) -> str:
        """Nothing beyond the points themselves: ''."""
        return ""

    def run(
        self,
        sweep: Sweep,
        points: Sequence[Point],
        work: PointWork,
        *,
        db: str,
        on_event: EventSink,
        cancel: threading.Event,
    ) -> list[PointResult]:
        """Run ``points`` (see :class:`Executor`).

        A bug in ``work`` (an exception other than the ones a point turns into a failure) is
        re-raised here once the others stopped, under ``on_error: stop``; under ``skip`` the point
        fails with the exception named and the sweep goes on.
        """
        from .run import PointResult

        free: list[str | None] = list(self.gpus) if self.gpus else [None] * self.jobs
        finished: queue.Queue[tuple[int, PointResult | None, BaseException | None, str | None]] = queue.Queue()
        results: dict[int, PointResult] = {}
        pending = list(range(len(points)))
        running = 0
        stop_new = False
        bug: BaseException | None = None

        def worker(i: int, gpu: str | None) -> None:
            try:
                result: PointResult | None = work(points[i], Slot(gpu, cancel))
                finished.put((i, result, None, gpu))
            except KeyboardInterrupt:  # raised inside the point (a test's stand-in for Ctrl-C)
                cancel.set()
                finished.put((i, PointResult(points[i], "interrupted", detail="interrupted", gpu=gpu), None, gpu))
            except BaseException as exc:  # a bug: stop the sweep, re-raise in the caller's thread
                finished.put((i, None, exc, gpu))

        def collect(item: tuple[int, PointResult | None, BaseException | None, str | None]) -> None:
            nonlocal running, stop_new, bug
            i, result, exc, gpu = item
            running -= 1
            free.append(gpu)
            if exc is not None and sweep.on_error == "skip":
                # a rocroof bug on one point: under skip the other points still run; the point says how
                # to see the traceback (the sweep does not print one per point)
                result = PointResult(
                    points[i],
                    "failed",
                    detail=f"internal error: {exc!r} (a rocroof bug, please report it; "
                    f"'rocroof sweep FILE --point {points[i].id}' shows the traceback)",
                    gpu=gpu,
                )
            elif exc is not None:
                bug = bug or exc
                cancel.set()
                result = PointResult(points[i], "failed", detail=f"internal error: {exc!r}", gpu=gpu)
            assert result is not None
            results[i] = result
            on_event(SweepEvent("end", points[i], gpu=gpu, result=result))
            if result.status == "failed" and sweep.on_error == "stop" and not stop_new:
                stop_new = True
                if pending:
                    on_event(
                        SweepEvent("stopping", None, f"point {points[i].id} failed (on_error: stop): no new points")
                    )

        interrupted_here = False
        while pending or running:
            try:
                while pending and free and not stop_new and not cancel.is_set():
                    i = pending.pop(0)
                    gpu = free.pop(0)
                    on_event(SweepEvent("start", points[i], gpu=gpu))
                    threading.Thread(target=worker, args=(i, gpu), name=f"sweep-{points[i].id}", daemon=True).start()
                    running += 1
                if not running:
                    break
                try:
                    collect(finished.get(timeout=self.poll_s))
                except queue.Empty:
                    continue
            except KeyboardInterrupt:
                if interrupted_here:
                    raise  # a second Ctrl-C: leave at once (the store rolls back an unfinished run)
                interrupted_here = True
                cancel.set()
                on_event(
                    SweepEvent(
                        "stopping",
                        None,
                        f"interrupted: stopping {running} running point(s); Ctrl-C again to quit at once",
                    )
                )
        if bug is not None:
            raise bug
        for i in range(len(points)):
            results.setdefault(i, PointResult(points[i], "not-run"))
        return [results[i] for i in range(len(points))]


def make_executor(
    name: str,
    *,
    gpus: Sequence[str] = (),
    jobs: int | None = None,
    profiles: bool = True,
    wait: bool = False,
    sbatch_args: Sequence[str] = (),
) -> Executor:
    """The executor for ``--executor NAME``.

    Args:
        name: ``local`` or ``slurm``.
        gpus: ``--gpus`` (local only: Slurm hands each array task its GPU).
        jobs: ``--jobs``: points at once (local), or array tasks at once (slurm: ``--array=...%N``).
        profiles: whether the points run a profiler (False for replay): several local points at once
            without ``--gpus`` would profile on the same GPU and are refused.
        wait: ``--wait`` (slurm only): wait for the array job and report each point's outcome.
        sbatch_args: ``--sbatch-arg`` (slurm only): more sbatch options for the array job.

    Raises:
        ConfigError: an unknown executor, bad ``--jobs``/``--gpus``, or an option the executor does not take.
    """
    if name == "slurm":
        if gpus:
            raise ConfigError(
                "--gpus: with --executor slurm each array task gets its GPU from Slurm (--gres=gpu:1, or slurm.gres in "
                "the sweep file); leave out --gpus"
            )
        from .slurm import SlurmExecutor

        return SlurmExecutor(jobs=jobs, wait=wait, sbatch_args=sbatch_args)
    if name != "local":
        raise ConfigError(f"--executor {name!r}: expected one of {', '.join(EXECUTORS)}")
    if wait:
        raise ConfigError("--wait: only for --executor slurm (the local executor runs the points and waits anyway)")
    if sbatch_args:
        raise ConfigError(
            "--sbatch-arg: only for --executor slurm (options for sbatch; the local executor submits nothing)"
        )
    if profiles and not gpus and jobs is not None and jobs > 1:
        raise ConfigError(
            f"--jobs {jobs} without --gpus would profile {jobs} points on the same GPU at once; give the GPUs to "
            f"use (--gpus 0,1,...)"
        )
    return LocalExecutor(gpus, jobs)
