"""Running a sweep: each pending point is profiled (``rocroof collect`` semantics) and ingested.

**Done** means stored: a point is done when the database holds a run labelled
``sweep_point=<id>``. The label is written in the run's own transaction
(:meth:`rocroof.store.Store.write_run`), so a point is either stored with its labels or not at
all; a rerun skips stored points and runs the others, whatever happened before.

**Resume without rerunning.** Beside each capture ``<out>/<id>/`` the point keeps a status file
``<out>/<id>.json`` (``profiling``, ``captured``, ``failed``, ``interrupted``, ``done``; the
attempt number, the GPU, the error). When a rerun finds a complete capture (its
``rocroof-collect.json`` manifest, which :func:`rocroof.capture.collect.execute` writes after the last
profiler run) of a point that did not fail, it only ingests it: a sweep killed between the
profiler and the commit does not profile that point again. A capture left incomplete (killed
during the profiler), or one whose point failed, is moved to ``<out>/attempts/<id>.<n>/`` (its
logs stay there) and the point starts afresh.

**One process per point.** A lock file ``<out>/.locks/<id>`` (``flock``) keeps two sweeps (or
batch jobs) from running the same point at once; the database is checked again under it.
Replay points take no lock (the database's content hash already refuses a capture stored
twice) and create ``out`` only to record a failure (``sweep status`` then gives the reason);
otherwise they write their status file only where ``out`` exists (a batch executor creates it
for its scripts and logs, and reads the files back).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import sqlalchemy as sa

from ..capture.profilers.base import PlannedRun, Profiler, Runner
from ..capture.readers import MANIFEST
from ..errors import DuplicateRunError, InputError, ProfilerNotFound, RocroofError
from .executors import EventSink, Executor, LocalExecutor, NothingStarted, Slot, SweepEvent, pin_env
from .expand import Point, expand
from .spec import ProfilerSpec, Sweep

if TYPE_CHECKING:
    from ..store.locking import LockWait

Status = Literal["done", "skipped", "failed", "interrupted", "not-run", "submitted"]
STATUSES: tuple[Status, ...] = ("done", "skipped", "failed", "interrupted", "not-run", "submitted")
#: Builds the profiler backend of a sweep (tests pass fakes).
ProfilerFactory = Callable[[ProfilerSpec], Profiler]
VENDORS = {"rocprofv3": "amd", "ncu": "nvidia"}


@dataclass(frozen=True)
class PointResult:
    """What became of one point.

    Attributes:
        point: the point.
        status: ``done`` (stored now), ``skipped`` (already stored, or being run by another
            process), ``failed``, ``interrupted`` (Ctrl-C; not stored, resumes on a rerun) or
            ``not-run`` (the sweep stopped before it) or ``submitted`` (handed to a batch system
            that runs it later; ``detail`` names the job).
        run_id: the stored run (done, or skipped because stored).
        detail: the error (failed) or the reason (skipped), one line.
        gpu: the GPU it ran on, when pinned.
        seconds: wall time spent on it here.
    """

    point: Point
    status: Status
    run_id: int | None = None
    detail: str = ""
    gpu: str | None = None
    seconds: float | None = None


@dataclass
class SweepOutcome:
    """The results of :func:`run_sweep`, one per point in sweep order.

    Attributes:
        sweep: the sweep.
        db: the database the runs went to.
        results: one per point.
        interrupted: Ctrl-C (or a point interrupted) stopped the sweep; a rerun resumes it.
        seconds: wall time.
    """

    sweep: Sweep
    db: str
    results: list[PointResult]
    interrupted: bool = False
    seconds: float = 0.0
    counts: dict[str, int] = field(init=False)

    def __post_init__(self) -> None:
        self.counts = {s: sum(r.status == s for r in self.results) for s in STATUSES}

    @property
    def failed(self) -> list[PointResult]:
        """The failed points."""
        return [r for r in self.results if r.status == "failed"]

    @property
    def stopped(self) -> bool:
        """True when ``on_error: stop`` stopped the sweep at a failure."""
        return self.sweep.on_error == "stop" and bool(self.failed)


class SweepFailed(RocroofError):
    """Points of a sweep failed (the message names the first one, or counts them)."""


def raise_for_failures(outcome: SweepOutcome) -> None:
    """Raise :class:`SweepFailed` when points failed; the message is one line.

    ``on_error: stop``: names the failed point, its values and error, and how many points did not
    run. ``skip``: how many failed and which.

    Raises:
        SweepFailed: a point failed.
    """
    failed = outcome.failed
    if not failed:
        return
    first = failed[0]
    values = " ".join(f"{k}={v}" for k, v in first.point.params.items())
    if outcome.stopped:
        left = outcome.counts["not-run"]
        raise SweepFailed(
            f"point {first.point.id} ({values}) failed: {first.detail}; stopped there (on_error: stop) with {left} "
            "point(s) not run; fix it and rerun the same command to resume"
        )
    ids = ", ".join(r.point.id for r in failed[:5]) + (", ..." if len(failed) > 5 else "")
    raise SweepFailed(
        f"{len(failed)} of {len(outcome.results)} point(s) failed ({ids}; reasons above); rerun the same command "
        "to retry them"
    )


class PointInterrupted(Exception):
    """The sweep was interrupted while this point ran (not a failure: a rerun resumes it)."""


def default_profiler(spec: ProfilerSpec) -> Profiler:
    """The profiler backend for a sweep's ``profiler`` section (:func:`rocroof.capture.profilers.choose_profiler`).

    Raises:
        ConfigError: options the profiler does not have.
    """
    from ..capture.profilers import choose_profiler

    o = spec.options
    return choose_profiler(
        spec.name,
        o.get("arch"),
        output_format=o.get("output_format"),
        cache_control=o.get("cache_control", "all"),
        nvtx_include=o.get("nvtx_include", ()),
        nsys=o.get("nsys"),
        bandwidth_probe=o.get("bandwidth_probe", True),
    )


# ---- the point's files -------------------------------------------------------------------------


def status_path(sweep: Sweep, point: Point) -> Path:
    """``<out>/<id>.json``: the point's state, attempt, GPU and last error."""
    return sweep.out / f"{point.id}.json"


def read_status(sweep: Sweep, point: Point) -> dict[str, Any]:
    """The point's status file as a dict (empty when absent or unreadable)."""
    try:
        data = json.loads(status_path(sweep, point).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_status(sweep: Sweep, point: Point, **fields: Any) -> None:
    """Replace the status file atomically; a status that cannot be written does not fail the point.

    Nothing is written when ``out`` does not exist (a replay sweep run here does not create it),
    except a failure: ``out`` is then created, so that ``sweep status`` can say why.
    """
    path = status_path(sweep, point)
    if fields.get("state") == "failed":
        with contextlib.suppress(OSError):
            path.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "point": point.id,
        **fields,
        "updated": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "labels": point.matrix_labels,
        "command": list(point.command),
        "env": point.env,
    }
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
    with contextlib.suppress(OSError):
        tmp.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
        os.replace(tmp, path)


def capture_complete(capture: Path) -> bool:
    """True when ``capture`` holds the manifest ``rocroof collect`` writes after its last run."""
    try:
        data = json.loads((capture / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and isinstance(data.get("passes"), list)


def _set_aside(capture: Path, attempts: Path, point_id: str) -> Path:
    """Move an earlier attempt's output to ``attempts/<id>.<n>`` (first free n)."""
    attempts.mkdir(parents=True, exist_ok=True)
    n = 1
    while (attempts / f"{point_id}.{n}").exists():
        n += 1
    dest = attempts / f"{point_id}.{n}"
    capture.rename(dest)
    return dest


@contextlib.contextmanager
def _point_lock(path: Path) -> Iterator[bool]:
    """Hold ``path`` exclusively (``flock``); yields False when another process holds it."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: no locking
        yield True
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def stored_points(db: str, ids: Sequence[str] | None = None) -> dict[str, int]:
    """``{point id: run_id}`` of the runs labelled ``sweep_point`` in ``db`` (only ``ids`` when given).

    Raises:
        SchemaError: a database that cannot be read.
    """
    from ..store import Store, schema

    store = Store(db)
    try:
        lab = schema.run_label
        stmt = sa.select(lab.c.value, lab.c.run_id).where(lab.c.key == "sweep_point")
        if ids is not None:
            stmt = stmt.where(lab.c.value.in_(list(ids)))
        df = store.frame(stmt)
    finally:
        store.close()
    return {str(v): int(r) for v, r in zip(df["value"].tolist(), df["run_id"].tolist(), strict=True)} if len(df) else {}


# ---- the application runner ----------------------------------------------------------------------


#: Process groups of the commands running now (a second Ctrl-C kills them before leaving).
_LIVE_GROUPS: set[int] = set()
_LIVE_LOCK = threading.Lock()


def kill_running_commands() -> int:
    """SIGKILL the process group of every command a :func:`cancellable_runner` is running; return how many."""
    with _LIVE_LOCK:
        groups = list(_LIVE_GROUPS)
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
    return len(groups)


def cancellable_runner(cancel: threading.Event, *, grace_s: float = 10.0, poll_s: float = 0.2) -> Runner:
    """A :data:`~rocroof.capture.profilers.base.Runner` whose command stops when ``cancel`` is set.

    The command runs in its own process group with stdout and stderr in its log; when ``cancel``
    is set the group gets SIGINT, then SIGTERM after ``grace_s`` seconds, then SIGKILL, and the
    runner raises :class:`PointInterrupted`.

    Raises:
        ProfilerNotFound: the executable does not exist.
        PointInterrupted: ``cancel`` was set before or while it ran.
    """

    def run(argv: Sequence[str], env: dict[str, str], log: Path) -> int:
        if cancel.is_set():
            raise PointInterrupted()
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "wb") as fh:
            try:
                proc = subprocess.Popen(
                    list(argv),
                    env={**os.environ, **env},
                    stdin=subprocess.DEVNULL,  # a chat tool (llama-cli) must not wait for the terminal
                    stdout=fh,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # its own group: stopped as a whole, by us
                )
            except FileNotFoundError as exc:
                raise ProfilerNotFound(f"{argv[0]}: not found on PATH ({exc.strerror})") from exc
            with _LIVE_LOCK:
                _LIVE_GROUPS.add(proc.pid)
            try:
                while True:
                    try:
                        return proc.wait(timeout=poll_s)
                    except subprocess.TimeoutExpired:
                        if cancel.is_set():
                            raise PointInterrupted() from None
            except BaseException:
                _stop_group(proc, grace_s)
                raise
            finally:
                with _LIVE_LOCK:
                    _LIVE_GROUPS.discard(proc.pid)

    return run


def _stop_group(proc: subprocess.Popen[bytes], grace_s: float) -> None:
    """SIGINT the command's process group, then SIGTERM, then SIGKILL, until no member is left.

    The leader exiting is not enough: a profiler's application, or a shell's background job
    (which ignores SIGINT), may outlive it in the group.
    """
    for sig, wait in ((signal.SIGINT, grace_s), (signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            break
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            proc.poll()  # reap the leader: a zombie still counts as a member
            if not _group_alive(proc.pid):
                return
            time.sleep(0.05)
    proc.poll()


def _group_alive(pgid: int) -> bool:
    """True while a process of group ``pgid`` runs; zombies (orphans no init has reaped yet) do not count."""
    proc = Path("/proc")
    if proc.is_dir():  # Linux: /proc/<pid>/stat is "pid (comm) state ppid pgrp ..."
        for stat in proc.glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if len(fields) > 2 and fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
                return True
        return False
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


# ---- one point -------------------------------------------------------------------------------------


class PointRunner:
    """Runs one point in this process: the :data:`~rocroof.sweep.executors.PointWork` of every executor.

    Args:
        sweep: the sweep.
        db: the database (file or URL).
        runner: runs each profiler command (default: :func:`cancellable_runner`); tests pass fakes.
        make_profiler: builds the profiler backend (default: :func:`default_profiler`).
        on_event: receives ``stage`` events.
        write_lock: held around each database write (points of one process then never wait
            on SQLite's busy timeout for each other).
    """

    def __init__(
        self,
        sweep: Sweep,
        db: str,
        *,
        runner: Runner | None = None,
        make_profiler: ProfilerFactory | None = None,
        on_event: EventSink | None = None,
        write_lock: threading.Lock | None = None,
    ) -> None:
        self.sweep = sweep
        self.db = db
        self.runner = runner
        self.make_profiler = make_profiler or default_profiler
        self.on_event = on_event or (lambda _e: None)
        self.write_lock = write_lock or threading.Lock()

    def __call__(self, point: Point, slot: Slot) -> PointResult:
        """Profile (or resume) and ingest ``point``; RocroofErrors become a ``failed`` result.

        Raises:
            Exception: only bugs (anything that is not a RocroofError, OSError or database error).
        """
        t0 = time.monotonic()

        def result(status: Status, **kw: Any) -> PointResult:
            return PointResult(point, status, gpu=slot.gpu, seconds=round(time.monotonic() - t0, 3), **kw)

        if self.sweep.profiler.replay:
            return self._run(point, slot, result)
        try:
            with _point_lock(self.sweep.out / ".locks" / point.id) as held:
                if not held:
                    return result("skipped", detail="being run by another rocroof process now")
                return self._run(point, slot, result)
        except OSError as exc:  # the lock file (the point's own errors are handled in _run)
            return result("failed", detail=f"cannot lock the point: {exc}")

    def _run(self, point: Point, slot: Slot, result: Callable[..., PointResult]) -> PointResult:
        replay = self.sweep.profiler.replay
        attempt = 1
        reused = ""
        try:
            rid = stored_points(self.db, [point.id]).get(point.id)
            if rid is not None:
                return result("skipped", run_id=rid, detail=f"already stored as run {rid}")
            if replay:
                capture = point.capture_dir
            else:
                left = read_status(self.sweep, point).get("state")
                fresh = not capture_complete(point.capture_dir) or left == "failed"
                capture, attempt = self._capture(point, slot)
                if not fresh:
                    reused = f"ingested the capture already in {capture} (not profiled again; remove it to re-profile)"
            if slot.cancel.is_set():
                raise PointInterrupted()
            self._stage(point, slot, "ingesting")
            run_id = self._ingest(point, capture, slot)
        except (PointInterrupted, KeyboardInterrupt) as exc:
            if isinstance(exc, KeyboardInterrupt):
                slot.cancel.set()
            _write_status(self.sweep, point, state="interrupted", attempt=attempt, gpu=slot.gpu)
            return result("interrupted", detail="interrupted; a rerun resumes it")
        except DuplicateRunError as exc:
            m = re.search(r"as run (\d+)", str(exc))
            run = int(m.group(1)) if m else None
            where = f"run {run}" if run is not None else "another run"
            detail = f"the same capture is already stored as {where} (other labels)"
            _write_status(self.sweep, point, state="skipped", attempt=attempt, gpu=slot.gpu, run_id=run, detail=detail)
            return result("skipped", run_id=run, detail=detail)
        except (RocroofError, OSError, sa.exc.DBAPIError) as exc:
            if slot.cancel.is_set():
                _write_status(self.sweep, point, state="interrupted", attempt=attempt, gpu=slot.gpu)
                return result("interrupted", detail="interrupted; a rerun resumes it")
            detail = _one_line(exc)
            _write_status(self.sweep, point, state="failed", attempt=attempt, gpu=slot.gpu, error=detail)
            return result("failed", detail=detail)
        _write_status(self.sweep, point, state="done", attempt=attempt, gpu=slot.gpu, run_id=run_id)
        return result("done", run_id=run_id, detail=reused)

    def _stage(self, point: Point, slot: Slot, text: str) -> None:
        self.on_event(SweepEvent("stage", point, text, gpu=slot.gpu))

    def _capture(self, point: Point, slot: Slot) -> tuple[Path, int]:
        """Profile the point, or reuse the complete capture an interrupted sweep left; (capture, attempt)."""
        from ..capture.collect import execute, make_plan

        capture = point.capture_dir
        status = read_status(self.sweep, point)
        previous = int(status.get("attempt") or 0) if str(status.get("attempt", "")).isdigit() else 0
        if capture_complete(capture) and status.get("state") != "failed":
            self._stage(point, slot, "ingesting the capture an interrupted sweep left")
            return capture, max(previous, 1)
        attempt = previous + 1
        if capture.exists() or capture.is_symlink():
            _set_aside(capture, self.sweep.out / "attempts", point.id)
        _write_status(self.sweep, point, state="profiling", attempt=attempt, gpu=slot.gpu)
        opts = self.sweep.profiler.options
        env = {**point.env, **pin_env(slot.gpu, VENDORS.get(self.sweep.profiler.name))}
        plan = make_plan(
            list(point.command),
            capture,
            counters=opts.get("counters"),
            arch=opts.get("arch"),
            profiler=self.make_profiler(self.sweep.profiler),
            sidecar=opts.get("sidecar", True),
            env=env,
        )

        def on_run(i: int, total: int, run: PlannedRun) -> None:
            if slot.cancel.is_set():
                raise PointInterrupted()
            doing = {"export": "export", "probe": "bandwidth probe"}.get(run.kind, "profile")
            self._stage(point, slot, f"{run.label}: {doing} ({i + 1}/{total})")

        execute(plan, list(point.command), runner=self.runner or cancellable_runner(slot.cancel), on_run=on_run)
        _write_status(self.sweep, point, state="captured", attempt=attempt, gpu=slot.gpu)
        return capture, attempt

    def _ingest(self, point: Point, capture: Path, slot: Slot) -> int:
        from ..capture.readers import read_capture
        from ..ingest.windows import ingest
        from ..report.tables import stored_reports
        from ..store import Store

        labels = dict(point.labels)
        if slot.gpu is not None:
            labels["sweep_gpu"] = slot.gpu

        def write(frames: Any) -> int:
            if slot.cancel.is_set():
                raise PointInterrupted()
            with self.write_lock:
                # another process writing to the file: the point says so, and Ctrl-C stops the wait
                store = Store(self.db, on_wait=_lock_wait(lambda text: self._stage(point, slot, text), slot.cancel))
                try:
                    return store.write_run(frames, labels=labels, reports=stored_reports)
                finally:
                    store.close()

        run_id, _frames = ingest(
            lambda: read_capture(capture),  # the capture is this point's alone
            write,
            arch_override=self.sweep.profiler.options.get("arch"),
            source_path=str(capture),
        )
        return run_id


def _lock_wait(tell: Callable[[str], None], cancel: threading.Event | None = None) -> LockWait:
    """A :class:`~rocroof.store.Store` ``on_wait`` hook for a sweep's own waits for the database.

    It stops the wait (:class:`PointInterrupted`) once ``cancel`` is set (Ctrl-C reaches the main
    thread only, not a point's), and ``tell`` s a line once a wait has lasted
    :data:`~rocroof.store.locking.WAIT_NOTICE_S`.
    """
    from ..store.locking import WAIT_NOTICE_S

    last = [0.0]

    def on_wait(location: str, waited_s: float, timeout_s: float) -> None:
        if cancel is not None and cancel.is_set():
            raise PointInterrupted()
        before, last[0] = last[0], waited_s
        if before < WAIT_NOTICE_S <= waited_s:
            tell(f"waiting for {location}: another process is writing to it (up to {timeout_s:g} s)")

    return on_wait


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, sa.exc.DBAPIError):
        orig = str(exc.orig).strip().splitlines() if exc.orig is not None else []
        return f"database error: {orig[0] if orig else type(exc).__name__}"
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


# ---- the sweep ---------------------------------------------------------------------------------------


def _remove_new_database(db: str) -> None:
    """Remove the SQLite file a sweep created when it still holds no run (its -wal, -shm, -journal too).

    Called when the executor started nothing: the file is the empty schema :func:`run_sweep`
    wrote a moment ago. One that holds a run (another writer's, meanwhile) is left alone.
    """
    from ..store import Store

    try:
        store = Store(db, read_only=True)
        try:
            if store.runs_with_labels({}):
                return
        finally:
            store.close()
    except (RocroofError, sa.exc.SQLAlchemyError, OSError):
        return
    path = Path(db).expanduser()
    for suffix in ("-wal", "-shm", "-journal", ""):
        with contextlib.suppress(OSError):
            path.with_name(path.name + suffix).unlink(missing_ok=True)


def run_sweep(
    sweep: Sweep,
    points: Sequence[Point] | None = None,
    *,
    db: str,
    executor: Executor | None = None,
    runner: Runner | None = None,
    make_profiler: ProfilerFactory | None = None,
    on_event: EventSink | None = None,
    cancel: threading.Event | None = None,
) -> SweepOutcome:
    """Run the points of ``sweep`` that ``db`` does not hold yet.

    Skips the points the database already holds (label ``sweep_point``), checks that the
    executor can run here and that the profiler is installed (when the points run in this
    process), creates or upgrades the database (once, before points run in parallel), then hands
    the rest to ``executor``. A profiler that is missing stops it before anything is written.

    Args:
        sweep: from :func:`~rocroof.sweep.spec.load_sweep`.
        points: a subset of ``expand(sweep)`` (``--point``); default: all.
        db: the database file or URL.
        executor: default :class:`~rocroof.sweep.executors.LocalExecutor` (one point at a time).
        runner: runs profiler commands (tests); default :func:`cancellable_runner`.
        make_profiler: builds the profiler backend (tests); default :func:`default_profiler`.
        on_event: progress events (``end`` also for points skipped as stored).
        cancel: set it to stop the sweep from another thread; Ctrl-C sets it.

    Returns:
        One result per point; ``interrupted`` when it was stopped by Ctrl-C.

    Raises:
        SchemaError: a database this rocroof cannot write.
        ProfilerNotFound: the profiler is not installed (nothing has run).
        InputError: ``out`` cannot be created.
        RocroofError: the executor's own errors (e.g. a batch submission that failed).
    """
    t0 = time.monotonic()
    points = expand(sweep) if points is None else list(points)
    sink = on_event or (lambda _e: None)
    cancel = cancel or threading.Event()
    executor = executor or LocalExecutor()
    from ..store import Store, is_url

    def tell(text: str) -> None:
        sink(SweepEvent("info", None, f"{text}; Ctrl-C to stop"))

    store = Store(db, on_wait=_lock_wait(tell))
    try:
        store.preflight()  # a foreign or newer database stops everything, before anything runs
        fresh = not is_url(db) and not Path(db).expanduser().exists()
        if not fresh:
            store.upgrade()
    finally:
        store.close()
    stored = {} if fresh else stored_points(db)
    results: dict[str, PointResult] = {}
    pending: list[Point] = []
    for p in points:
        if p.id in stored:
            rid = stored[p.id]
            results[p.id] = PointResult(p, "skipped", run_id=rid, detail=f"already stored as run {rid}")
            sink(SweepEvent("end", p, result=results[p.id]))
        else:
            pending.append(p)
    if pending:
        executor.preflight(sweep)
    made_out = not sweep.out.exists()  # removed again, when left empty, if the executor starts nothing
    if pending and not sweep.profiler.replay:
        if executor.runs_here:  # a batch job finds the profiler on its node
            (make_profiler or default_profiler)(sweep.profiler).locate()
        if sweep.out.exists() and not sweep.out.is_dir():
            raise InputError(f"{sweep.out}: the sweep's out is a file; it must be a directory")
        try:
            sweep.out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InputError(f"{sweep.out}: cannot create the sweep's out directory ({exc.strerror})") from exc
    if pending:
        if fresh:  # create the schema once, before points write in parallel
            store = Store(db, on_wait=_lock_wait(tell))
            try:
                store.upgrade()
            finally:
                store.close()
        work = PointRunner(sweep, db, runner=runner, make_profiler=make_profiler, on_event=sink)
        try:
            ran = executor.run(sweep, pending, work, db=db, on_event=sink, cancel=cancel)
        except KeyboardInterrupt:  # a second Ctrl-C: leave now, without orphaned profilers
            cancel.set()
            kill_running_commands()
            raise
        except NothingStarted:  # a batch submission refused: no trace of the sweep is left behind
            if fresh:
                _remove_new_database(db)
            if made_out:
                with contextlib.suppress(OSError):
                    sweep.out.rmdir()  # only when empty
            raise
        for r in ran:
            results[r.point.id] = r
    return SweepOutcome(
        sweep=sweep,
        db=db,
        results=[results[p.id] for p in points],
        interrupted=cancel.is_set(),
        seconds=round(time.monotonic() - t0, 3),
    )
