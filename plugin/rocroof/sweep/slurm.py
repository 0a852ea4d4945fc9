"""Sweeps on a Slurm cluster: one job array per submission, one array task per pending point.

:class:`SlurmExecutor` implements :class:`~rocroof.sweep.executors.Executor` by writing a batch
script ``<out>/slurm/<sweep>-<YYYYmmdd-HHMMSS>.sbatch`` and submitting it with ``sbatch``. Array
task ``i`` runs ``<this python> -m rocroof sweep FILE --point <id i> --db <database>`` in the
directory the sweep was submitted from (``--chdir``), so the point goes through the same
:class:`~rocroof.sweep.run.PointRunner` as with the local executor and its run lands in the
sweep's database, labelled ``sweep_point=<id>``. Each task logs to
``<out>/slurm/<sweep>-<job>_<task>.log``; ``<out>/slurm/<stem>.json`` records the submission
(job id, point of each task, database), which :func:`sweep_status` reads back.

A point's state comes from, in this order: the database (``done``: a run labelled with it);
its status file ``<out>/<id>.json`` written since the submission (``failed`` with the error,
``skipped``); Slurm's queue (``squeue``; ``sacct`` for tasks the queue has forgotten, where
accounting is enabled): ``pending`` with Slurm's reason, ``running`` on a node; a task that
ended otherwise is ``failed`` with its Slurm state and the last ``Error:`` line of its log.

``on_error: stop`` is kept by the tasks themselves: a task whose point fails (exit status 1)
writes its id to ``<out>/slurm/<stem>.stop``, and tasks that start after that do not run their
point (``not-run``). Tasks already running finish.

Nothing else in rocroof knows about Slurm: the executor is chosen by
:func:`~rocroof.sweep.executors.make_executor`, the ``slurm:`` section of the sweep file is
validated by :mod:`.spec`.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import shlex
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pandas as pd
import sqlalchemy as sa

from .. import __version__
from ..errors import ConfigError, RocroofError
from ..store import is_url, shown_db
from .executors import EventSink, NothingStarted, PointWork, SweepEvent
from .spec import Sweep, slurm_own_option

if TYPE_CHECKING:
    from .expand import Point
    from .run import PointResult

#: Subdirectory of the sweep's ``out`` holding scripts, submission records and task logs.
SUBDIR = "slurm"
#: Slurm job states (``squeue %T``, ``sacct State``) of a task that has not started.
QUEUED_STATES = frozenset({"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD"})
#: States of a task that has ended.
ENDED_STATES = frozenset(
    {
        "COMPLETED",
        "FAILED",
        "CANCELLED",
        "TIMEOUT",
        "OUT_OF_MEMORY",
        "NODE_FAIL",
        "PREEMPTED",
        "BOOT_FAIL",
        "DEADLINE",
        "SPECIAL_EXIT",
        "REVOKED",
    }
)
#: The states :func:`sweep_status` reports.
State = Literal["done", "pending", "running", "failed", "skipped", "not run", "not submitted", "unknown"]
#: How long a submitted array may be missing from ``squeue`` before ``--wait`` takes it as ended (s).
UNLISTED_GRACE_S = 30.0


class SlurmError(RocroofError):
    """Slurm could not be used: ``sbatch`` or ``squeue`` missing, a submission refused (Slurm's words quoted)."""


class NotSubmitted(SlurmError, NothingStarted):
    """No job was submitted: ``sbatch`` is missing, could not be started or refused the array.

    The batch script and the folders the submission created are removed; the database and
    ``out`` that :func:`~rocroof.sweep.run.run_sweep` created go as well.
    """


# ---- the submission record ----------------------------------------------------------------------


@dataclass(frozen=True)
class Submission:
    """One submitted array job, as recorded in ``<out>/slurm/<stem>.json``.

    Attributes:
        job: Slurm's array job id (digits; empty for a script not submitted).
        stem: ``<sweep>-<YYYYmmdd-HHMMSS>`` (``-2``... when taken): names the script, record and stop file.
        directory: ``<out>/slurm``, absolute.
        points: the point id of array task ``i`` at index ``i``.
        submitted: when, in UTC (ISO 8601, seconds).
        db: the database the tasks write to (a URL's password masked).
        script: the batch script.
        log: the task log template (``%A``: array job id, ``%a``: task index).
        on_error: the sweep's ``on_error`` at submission.
    """

    job: str
    stem: str
    directory: Path
    points: tuple[str, ...]
    submitted: str
    db: str
    script: Path
    log: str
    on_error: str

    @property
    def record(self) -> Path:
        """``<out>/slurm/<stem>.json``."""
        return self.directory / f"{self.stem}.json"

    @property
    def stop_file(self) -> Path:
        """``<out>/slurm/<stem>.stop``: ids of the points that failed under ``on_error: stop``."""
        return self.directory / f"{self.stem}.stop"

    def task(self, index: int) -> str:
        """``<job>_<index>``, Slurm's name of array task ``index``."""
        return f"{self.job}_{index}"

    def log_path(self, index: int) -> Path:
        """The log file of array task ``index``."""
        return Path(self.log.replace("%A", self.job).replace("%a", str(index)))

    def submitted_at(self) -> dt.datetime:
        """:attr:`submitted` as an aware datetime."""
        return dt.datetime.fromisoformat(self.submitted)

    def to_json(self) -> dict[str, Any]:
        """The record's JSON document."""
        return {
            "job": self.job,
            "stem": self.stem,
            "points": list(self.points),
            "submitted": self.submitted,
            "db": self.db,
            "script": str(self.script),
            "log": self.log,
            "on_error": self.on_error,
            "rocroof": __version__,
        }


def submissions_dir(sweep: Sweep) -> Path:
    """``<out>/slurm`` of ``sweep``."""
    return sweep.out / SUBDIR


def last_submission(sweep: Sweep) -> Submission | None:
    """The newest submission recorded under ``<out>/slurm`` (None when there is none).

    Records that cannot be read are passed over.
    """
    best: tuple[str, str, Submission] | None = None
    directory = submissions_dir(sweep)
    for path in directory.glob(f"{sweep.name}-*.json") if directory.is_dir() else []:
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            sub = Submission(
                job=str(doc["job"]),
                stem=str(doc["stem"]),
                directory=path.parent.absolute(),
                points=tuple(str(p) for p in doc["points"]),
                submitted=str(doc["submitted"]),
                db=str(doc["db"]),
                script=Path(doc["script"]),
                log=str(doc["log"]),
                on_error=str(doc.get("on_error", "stop")),
            )
            sub.submitted_at()
        except (OSError, ValueError, KeyError, TypeError):
            continue
        key = (sub.submitted, sub.stem)
        if best is None or key > best[:2]:
            best = (*key, sub)
    return best[2] if best is not None else None


def _new_stem(sweep: Sweep, directory: Path, now: dt.datetime) -> str:
    base = f"{sweep.name}-{now.strftime('%Y%m%d-%H%M%S')}"
    stem, n = base, 1
    while (directory / f"{stem}.sbatch").exists() or (directory / f"{stem}.json").exists():
        n += 1
        stem = f"{base}-{n}"
    return stem


# ---- the batch script ---------------------------------------------------------------------------


def _sbatch_value(text: str) -> str:
    """A path for an ``#SBATCH`` line: double-quoted when it has spaces (sbatch strips the quotes)."""
    if any(c in text for c in '"\n'):
        raise ConfigError(f"{text!r}: a path with a double quote or a newline cannot go on an #SBATCH line")
    return f'"{text}"' if any(c.isspace() for c in text) else text


def _db_for_job(db: str, cwd: Path) -> tuple[str, str, bool]:
    """(the database for the job's command line, for the record, whether the job reads it from ROCROOF_DB).

    A relative SQLite path becomes absolute against ``cwd``; a URL holding a password is passed in
    the job's environment (sbatch exports it) rather than written into the script.
    """
    if not is_url(db):
        path = Path(db).expanduser()
        text = str(path if path.is_absolute() else cwd / path)
        return text, text, False
    try:
        url = sa.make_url(db)
    except (sa.exc.ArgumentError, ValueError):
        return db, db, False
    if url.password is None:
        return db, db, False
    return "$ROCROOF_DB", url.render_as_string(hide_password=True), True


def check_sbatch_args(args: Sequence[str]) -> tuple[str, ...]:
    """Validate ``--sbatch-arg`` values: options without spaces that rocroof does not set itself.

    Raises:
        ConfigError: one line naming the argument.
    """
    for arg in args:
        if not arg.startswith("-") or not arg.strip() or any(c.isspace() for c in arg):
            raise ConfigError(
                f"--sbatch-arg {arg!r}: expected one sbatch option without spaces (it becomes an #SBATCH line), "
                "e.g. --sbatch-arg=--constraint=mi300x"
            )
        reason = slurm_own_option(arg)
        if reason:
            raise ConfigError(f"--sbatch-arg {arg!r}: {reason}")
    return tuple(args)


def batch_script(
    sweep: Sweep,
    points: Sequence[Point],
    *,
    db: str,
    stem: str,
    directory: Path,
    cwd: Path,
    python: str,
    jobs: int | None = None,
    sbatch_args: Sequence[str] = (),
    now: dt.datetime | None = None,
) -> str:
    """The job array script: task ``i`` runs ``python -m rocroof sweep FILE --point <points[i].id> --db DB``.

    ``#SBATCH`` lines: ``--job-name=rocroof-<sweep>``, ``--array=0-<n-1>`` (``%<jobs>`` when given),
    ``--output=<directory>/<sweep>-%A_%a.log``, ``--chdir=<cwd>``, ``--gres`` (``gpu:1`` when
    the sweep profiles, none for replay; ``slurm.gres`` overrides), the ``slurm:`` section's
    ``partition``, ``account``, ``qos``, ``time`` and ``extra``, then ``sbatch_args``.

    Args:
        sweep: the sweep.
        points: the points to run, one array task each (non-empty).
        db: the database as given (a relative SQLite path is made absolute against ``cwd``).
        stem: names the stop file (``<directory>/<stem>.stop``).
        directory: where logs go (absolute).
        cwd: the directory each task runs in (where the sweep was submitted from), absolute.
        python: the interpreter that runs rocroof (``sys.executable``: a virtual environment's works).
        jobs: array tasks at once (None: as many as Slurm allows).
        sbatch_args: more sbatch options (``--sbatch-arg``).
        now: the time written in the header (default: now).

    Returns:
        The script's text (bash).

    Raises:
        ConfigError: no points, or a path that cannot go on an ``#SBATCH`` line.
    """
    if not points:
        raise ConfigError("no points to submit")
    cfg = sweep.slurm
    gres = cfg.gres if cfg.gres is not None else (None if sweep.profiler.replay else "gpu:1")
    db_arg, db_shown, _ = _db_for_job(db, cwd)
    sweep_file = Path(sweep.path).expanduser()
    sweep_file = sweep_file if sweep_file.is_absolute() else cwd / sweep_file
    when = (now or dt.datetime.now(dt.UTC)).strftime("%Y-%m-%d %H:%M:%S UTC")
    array = f"0-{len(points) - 1}" + (f"%{jobs}" if jobs else "")
    lines = [
        "#!/bin/bash",
        f"# rocroof sweep {sweep.name} ({sweep_file}): {len(points)} point(s), one array task each;",
        f"# written by rocroof {__version__} on {when}. Task i runs point points[i] through",
        "# 'rocroof sweep FILE --point ID' and stores its run in the database below, labelled",
        "# sweep_point=<id>. Submitting this file again reruns the points (stored ones are skipped).",
        f"#SBATCH --job-name=rocroof-{sweep.name}",
        f"#SBATCH --array={array}",
        f"#SBATCH --output={_sbatch_value(str(directory / f'{sweep.name}-%A_%a.log'))}",
        f"#SBATCH --chdir={_sbatch_value(str(cwd))}",
    ]
    if gres and gres != "none":
        lines.append(f"#SBATCH --gres={gres}")
    for option, value in (
        ("partition", cfg.partition),
        ("account", cfg.account),
        ("qos", cfg.qos),
        ("time", cfg.time),
    ):
        if value:
            lines.append(f"#SBATCH --{option}={value}")
    lines += [f"#SBATCH {arg}" for arg in (*cfg.extra, *sbatch_args)]
    lines += [
        "",
        "set -u",
        "task=${SLURM_ARRAY_TASK_ID:?submit this script with sbatch: it is a job array}",
        "points=(",
    ]
    for p in points:
        values = " ".join(f"{k}={v}" for k, v in p.params.items())
        values = "".join(c if c.isprintable() else " " for c in values)
        lines.append(f"  {p.id}  # {values}")
    command = [python, "-m", "rocroof", "sweep", str(sweep_file), "--point", "@POINT@", "--db", "@DB@"]
    run = shlex.join(command).replace("@POINT@", '"$point"')
    run = run.replace("@DB@", '"$ROCROOF_DB"' if db_arg == "$ROCROOF_DB" else shlex.quote(db_arg))
    lines += [
        ")",
        "point=${points[$task]}",
        'echo "rocroof: point $point is task $task of Slurm job ${SLURM_ARRAY_JOB_ID:-?} on $(hostname)"',
        f"# database: {db_shown}"
        + (" (the URL, with its password, comes from ROCROOF_DB)" if db_arg != db_shown else ""),
    ]
    stop = shlex.quote(str(directory / f"{stem}.stop"))
    if sweep.on_error == "stop":
        lines += [
            f"stop={stop}  # on_error: stop: a failed point's id goes here; later tasks then do not run",
            'if [ -s "$stop" ]; then',
            '  echo "rocroof: not run: point $(head -n 1 "$stop") failed first (on_error: stop)"',
            "  exit 0",
            "fi",
            run,
            "status=$?",
            'if [ "$status" -eq 1 ]; then echo "$point" >>"$stop"; fi',
            'exit "$status"',
        ]
    else:
        lines.append(f"exec {run}")
    return "\n".join(lines) + "\n"


# ---- the queue ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TaskState:
    """One array task as Slurm reports it.

    Attributes:
        state: Slurm's job state (``PENDING``, ``RUNNING``, ``COMPLETED``, ``FAILED``...).
        reason: why it waits or ended (``Resources``, ``Priority``, ``NonZeroExitCode``), '' for none.
        node: where it runs or ran ('' when not known).
        elapsed: run time so far, as Slurm prints it (``0:42``), '' when not known.
        exit_code: ``code:signal`` (sacct only), '' when not known.
    """

    state: str
    reason: str = ""
    node: str = ""
    elapsed: str = ""
    exit_code: str = ""

    @property
    def queued(self) -> bool:
        """True before the task starts."""
        return self.state in QUEUED_STATES

    @property
    def ended(self) -> bool:
        """True once the task has ended (in any way)."""
        return self.state in ENDED_STATES


def _run_tool(argv: list[str], timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False, stdin=subprocess.DEVNULL)


def _last_error(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    errors = [line for line in lines if "error" in line.lower()]
    line = (errors or lines or ["no output"])[-1]
    for prefix in ("sbatch: error: ", "squeue: error: ", "sacct: error: ", "slurm_load_jobs error: "):
        line = line.removeprefix(prefix)
    return line


def queue_tasks(job: str, count: int) -> dict[int, TaskState]:
    """The array tasks of ``job`` that Slurm still knows: ``{task index: state}``.

    Asks ``squeue`` (every state, one row per task; Slurm keeps ended jobs for ``MinJobAge``,
    300 s by default); when it lists fewer than ``count`` tasks, ``sacct`` too (where accounting
    is enabled) for the tasks it has forgotten.

    Raises:
        SlurmError: squeue is not on PATH, or fails for another reason than an unknown job.
    """
    squeue = shutil.which("squeue")
    if squeue is None:
        raise SlurmError("squeue: not found on PATH (Slurm's client commands are needed to follow the job)")
    try:
        done = _run_tool([squeue, "-h", "-r", "-t", "all", "-j", job, "-o", "%F|%K|%T|%r|%N|%M"])
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SlurmError(f"squeue -j {job}: {exc}") from exc
    tasks: dict[int, TaskState] = {}
    if done.returncode != 0 and "invalid job id" not in done.stderr.lower():
        raise SlurmError(f"squeue -j {job} failed: {_last_error(done.stderr)}")
    for line in done.stdout.splitlines() if done.returncode == 0 else []:
        parts = line.strip().split("|")
        if len(parts) < 6 or parts[0] != job or not parts[1].isdigit():
            continue
        reason = "" if parts[3] in ("None", "(null)") else parts[3]
        node = "" if parts[4] in ("(null)", "") else parts[4]
        tasks[int(parts[1])] = TaskState(parts[2].split()[0], reason, node, parts[5])
    if len(tasks) < count:
        return {**_accounting_tasks(job), **tasks}
    return tasks


def _accounting_tasks(job: str) -> dict[int, TaskState]:
    """``sacct``'s view of ``job``'s array tasks; empty without sacct or accounting storage."""
    sacct = shutil.which("sacct")
    if sacct is None:
        return {}
    try:
        done = _run_tool([sacct, "-n", "-P", "-X", "-j", job, "-o", "JobID,State,ExitCode,NodeList,Elapsed"])
    except (OSError, subprocess.TimeoutExpired):
        return {}
    tasks: dict[int, TaskState] = {}
    for line in done.stdout.splitlines() if done.returncode == 0 else []:
        parts = line.strip().split("|")
        if len(parts) < 5:
            continue
        array, _, index = parts[0].partition("_")
        if array != job or not index.isdigit():
            continue
        state = parts[1].split()[0] if parts[1].split() else "UNKNOWN"
        node = "" if parts[3] in ("None assigned", "") else parts[3]
        tasks[int(index)] = TaskState(state, "", node, parts[4], parts[2])
    return tasks


# ---- what became of a point -------------------------------------------------------------------------


@dataclass(frozen=True)
class PointState:
    """Where one point of a sweep stands.

    Attributes:
        point: the point.
        state: ``done``, ``pending``, ``running``, ``failed``, ``skipped``, ``not run`` (``on_error:
            stop`` kept its task from running it), ``not submitted`` (not in the last array and not
            stored) or ``unknown`` (submitted, but Slurm cannot be asked here).
        run_id: its stored run (done, or skipped because the capture is stored as another run).
        job: ``<job>_<task>`` in the last array; None when the point is not in it (or nothing was
            submitted): null in JSON, blank in tables and CSV, as :attr:`run_id`.
        detail: Slurm's reason, the node, the error or the log to read; one line.
    """

    point: Point
    state: State
    run_id: int | None = None
    job: str | None = None
    detail: str = ""


def _status_since(status: Mapping[str, Any], since: dt.datetime) -> Mapping[str, Any]:
    """``status`` when it was written at or after ``since`` (to the second), else empty."""
    try:
        updated = dt.datetime.fromisoformat(str(status.get("updated", "")))
    except ValueError:
        return {}
    return status if updated >= since.replace(microsecond=0) else {}


def _log_error(path: Path) -> str:
    """The last ``Error:`` or ``rocroof:`` line of a task log ('' when none or unreadable)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 65536))
            text = fh.read().decode("utf-8", "replace")
    except OSError:
        return ""
    found = ""
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("Error: ") or line.startswith("rocroof: not run"):
            found = line
    return found


def point_state(
    sub: Submission,
    index: int,
    point: Point,
    *,
    task: TaskState | None,
    listed: bool,
    stored: Mapping[str, int],
    status: Mapping[str, Any],
) -> PointState:
    """The state of array task ``index`` of ``sub`` (point ``point``) from everything known about it.

    Args:
        sub: the submission.
        index: the task index.
        point: its point.
        task: Slurm's view of the task (None: Slurm does not list it).
        listed: True when a missing ``task`` means it has ended (Slurm was asked and answered);
            False when it may not be listed yet, or Slurm could not be asked.
        stored: ``{point id: run_id}`` of the database.
        status: the point's status file (:func:`~rocroof.sweep.run.read_status`).
    """
    job = sub.task(index)
    if point.id in stored:
        return PointState(point, "done", stored[point.id], job)
    recent = _status_since(status, sub.submitted_at())
    state = recent.get("state")
    if state == "failed":
        return PointState(point, "failed", None, job, str(recent.get("error") or "failed"))
    if state == "skipped":
        rid = recent.get("run_id")
        return PointState(point, "skipped", rid if isinstance(rid, int) else None, job, str(recent.get("detail", "")))
    if task is not None and task.queued:
        return PointState(point, "pending", None, job, f"waiting in Slurm's queue ({task.reason or task.state})")
    if task is not None and not task.ended:
        where = f" on {task.node}" if task.node else ""
        took = f" for {task.elapsed}" if task.elapsed else ""
        doing = f"; {state}" if state in ("profiling", "captured") else ""
        return PointState(point, "running", None, job, f"{task.state.lower()}{where}{took}{doing}")
    if task is None and not listed:
        return PointState(point, "unknown", None, job, f"Slurm cannot be asked here; log {sub.log_path(index)}")
    log = sub.log_path(index)
    said = _log_error(log)
    if said.startswith("rocroof: not run"):
        return PointState(point, "not run", None, job, said.removeprefix("rocroof: not run: "))
    how = (
        f"Slurm state {task.state}" + (f" ({task.reason})" if task.reason else "")
        if task
        else "Slurm no longer lists it"
    )
    detail = f"the job ended without storing the point ({how})"
    if state == "interrupted":
        detail = f"interrupted ({how}); a rerun resumes it"
    if said:
        detail += f"; {said.removeprefix('Error: ')}"
    return PointState(point, "failed", None, job, f"{detail}; log {log}")


@dataclass
class SweepStatus:
    """Where every point of a sweep stands (:func:`sweep_status`).

    Attributes:
        sweep: the sweep.
        db: the database read.
        submission: the last submission (None: none recorded).
        states: one per point, in sweep order.
        queue_error: why Slurm could not be asked ('' when it answered).
    """

    sweep: Sweep
    db: str
    submission: Submission | None
    states: list[PointState]
    queue_error: str = ""

    def counts(self) -> dict[str, int]:
        """``{state: number of points}``, states in a fixed order, only those present."""
        order = ("done", "running", "pending", "failed", "skipped", "not run", "unknown", "not submitted")
        return {s: n for s in order if (n := sum(p.state == s for p in self.states))}

    def frame(self) -> pd.DataFrame:
        """One row per point: point, state, run, job, values, detail."""
        rows = [
            {
                "point": s.point.id,
                "state": s.state,
                "run": s.run_id,  # a number (JSON, CSV), or unknown: null in JSON, blank in tables
                "job": s.job,  # Slurm's <job>_<task>, or none (not in the last array): null in JSON, blank in tables
                "values": " ".join(f"{k}={v}" for k, v in s.point.params.items()),
                "detail": s.detail,
            }
            for s in self.states
        ]
        df = pd.DataFrame(rows, columns=["point", "state", "run", "job", "values", "detail"])
        df["run"] = df["run"].astype("Int64")
        return df

    def heading(self) -> str:
        """One or two lines: which submission, when, its script and logs, the database."""
        sub = self.submission
        if sub is None:
            lines = [f"Sweep {self.sweep.name}: no Slurm submission recorded under {submissions_dir(self.sweep)}"]
        else:
            lines = [
                f"Sweep {self.sweep.name}: Slurm job {sub.job}, {len(sub.points)} array task(s) submitted "
                f"{sub.submitted_at():%Y-%m-%d %H:%M:%S %Z}; script {sub.script}; "
                f"logs {sub.log.replace('%A', sub.job)}",
            ]
        if self.queue_error:
            lines.append(f"  Slurm could not be asked ({self.queue_error}): states from the database and status files")
        missing = not is_url(self.db) and not Path(self.db).expanduser().exists()
        lines.append(
            f"  database {shown_db(self.db)}"
            + (" (does not exist: nothing stored there yet; another --db?)" if missing else "")
        )
        return "\n".join(lines)

    def summary(self) -> str:
        """``3 done, 1 failed`` (every state present)."""
        return ", ".join(f"{n} {s}" for s, n in self.counts().items()) or "no points"


def _stored(db: str, ids: Sequence[str]) -> dict[str, int]:
    from .run import stored_points

    if not is_url(db) and not Path(db).expanduser().exists():
        return {}
    return stored_points(db, list(ids))


def sweep_status(sweep: Sweep, points: Sequence[Point], *, db: str | None, default_db: str) -> SweepStatus:
    """Where each point of ``sweep`` stands after its last Slurm submission.

    Args:
        sweep: the sweep.
        points: its points (``expand(sweep)``, or the ``--point`` selection).
        db: the database given on the command line; None to use the one the last submission
            wrote to (``default_db`` when there is none, or its URL's password was masked).
        default_db: the sweep's database otherwise (file's ``db``, ``ROCROOF_DB``, ``rocroof.db``).

    Returns:
        One :class:`PointState` per point. Points outside the last array are ``done``,
        ``failed`` (their status file says so), ``not run`` (interrupted, or never started when
        nothing was submitted), ``unknown`` (a status file left at profiling: a process still
        running, or one killed) or ``not submitted``.

    Raises:
        SchemaError: a database that cannot be read.
    """
    from .run import read_status

    sub = last_submission(sweep)
    target = db or (sub.db if sub is not None and "***" not in sub.db else None) or default_db
    tasks: dict[int, TaskState] = {}
    queue_error = ""
    if sub is not None:
        try:
            tasks = queue_tasks(sub.job, len(sub.points))
        except SlurmError as exc:
            queue_error = str(exc)
    stored = _stored(target, [p.id for p in points])
    index = {pid: i for i, pid in enumerate(sub.points)} if sub is not None else {}
    states = []
    for p in points:
        status = read_status(sweep, p)
        if sub is not None and p.id in index:
            i = index[p.id]
            states.append(
                point_state(sub, i, p, task=tasks.get(i), listed=not queue_error, stored=stored, status=status)
            )
        elif p.id in stored:
            states.append(PointState(p, "done", stored[p.id]))
        elif status.get("state") == "failed":
            states.append(PointState(p, "failed", None, None, str(status.get("error") or "failed")))
        elif status.get("state") == "interrupted":
            states.append(PointState(p, "not run", None, None, "interrupted; a rerun resumes it"))
        elif status.get("state") in ("profiling", "captured"):
            when = status.get("updated") or "?"
            states.append(
                PointState(p, "unknown", None, None, f"{status['state']} since {when} and not stored (still running?)")
            )
        else:
            states.append(PointState(p, "not submitted" if sub is not None else "not run"))
    return SweepStatus(sweep, target, sub, states, queue_error)


# ---- the executor -------------------------------------------------------------------------------------


def _remove_unsubmitted(script: Path | None, made: Sequence[Path]) -> None:
    """Remove the batch script of an array that was not submitted, and the folders made for it when empty.

    ``made``: the folders that did not exist before the submission, deepest first.
    """
    if script is not None:
        with contextlib.suppress(OSError):
            script.unlink(missing_ok=True)
    for folder in made:
        try:
            folder.rmdir()
        except OSError:  # not empty (another writer put something there), or gone
            return


class SlurmExecutor:
    """Submits a sweep's pending points as one Slurm job array; optionally waits for it.

    Args:
        jobs: array tasks at once (``--array=0-N%jobs``); None: as many as Slurm gives.
        wait: wait for the array to end, reporting each point as it starts and ends; without it
            :meth:`run` returns right after ``sbatch`` with every point ``submitted``.
        sbatch_args: more sbatch options (``#SBATCH`` lines after the sweep file's ``slurm:``).
        python: the interpreter tasks run rocroof with (default ``sys.executable``).
        cwd: the directory tasks run in (default: the current one).
        poll_s: how often ``--wait`` asks Slurm in its first 30 s (s); then every 5 s, after 5 minutes every 15 s.

    Raises:
        ConfigError: ``jobs`` < 1 or a bad ``sbatch_args`` entry.
    """

    name = "slurm"
    runs_here = False

    def __init__(
        self,
        *,
        jobs: int | None = None,
        wait: bool = False,
        sbatch_args: Sequence[str] = (),
        python: str | None = None,
        cwd: Path | None = None,
        poll_s: float = 1.0,
    ) -> None:
        if jobs is not None and jobs < 1:
            raise ConfigError(f"--jobs {jobs}: expected at least 1")
        self.jobs = jobs
        self.wait = wait
        self.sbatch_args = check_sbatch_args(sbatch_args)
        self.python = python or sys.executable
        self.cwd = (cwd or Path.cwd()).absolute()
        self.poll_s = poll_s

    def _interval(self, waited_s: float) -> float:
        """Seconds between two looks at the queue: ``poll_s`` for the first 30 s, then at most every 5 s, 15 s."""
        if waited_s < 30:
            return self.poll_s
        return max(self.poll_s, 5.0 if waited_s < 300 else 15.0)

    def preflight(self, sweep: Sweep) -> None:
        """Check that sbatch (and squeue, for ``wait``) are on PATH and the interpreter is known.

        Raises:
            SlurmError: one line saying what is missing.
        """
        for tool in ("sbatch", "squeue") if self.wait else ("sbatch",):
            if shutil.which(tool) is None:
                raise SlurmError(
                    f"{tool}: not found on PATH; --executor slurm submits from a machine with Slurm's client "
                    "commands (a login node), or run the sweep here with --executor local"
                )
        if not self.python:
            raise SlurmError("the Python interpreter running rocroof is not known (sys.executable is empty)")

    def _script(self, sweep: Sweep, points: Sequence[Point], db: str, stem: str, now: dt.datetime) -> str:
        return batch_script(
            sweep,
            points,
            db=db,
            stem=stem,
            directory=(self.cwd / submissions_dir(sweep)).absolute(),
            cwd=self.cwd,
            python=self.python,
            jobs=self.jobs,
            sbatch_args=self.sbatch_args,
            now=now,
        )

    def describe(self, sweep: Sweep, points: Sequence[Point], db: str) -> str:
        """The batch script for the points ``db`` does not hold, and where it would go (``--dry-run``).

        A database that cannot be read (a server out of reach) counts as holding none; the text says so.
        """
        note = ""
        try:
            stored = _stored(db, [p.id for p in points])
        except (RocroofError, OSError, sa.exc.SQLAlchemyError) as exc:
            stored = {}
            note = f" (the database could not be read, so every point counts as pending: {str(exc).splitlines()[0]})"
        pending = [p for p in points if p.id not in stored]
        if not pending:
            return f"Slurm: nothing to submit: the database holds all {len(points)} point(s)"
        now = dt.datetime.now(dt.UTC)
        directory = (self.cwd / submissions_dir(sweep)).absolute()
        stem = _new_stem(sweep, directory, now)
        script = directory / f"{stem}.sbatch"
        head = (
            f"Slurm: {len(pending)} pending point(s) of {len(points)} would be one job array{note}: this script, "
            f"written to {script} and submitted with: sbatch --parsable {shlex.quote(str(script))}"
        )
        return head + "\n\n" + self._script(sweep, pending, db, stem, now)

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
        """Submit ``points`` as one array (skipping those queued or running in the last one); wait when asked.

        ``work`` is not called here: each task runs it on its node through ``rocroof sweep FILE --point``.

        Raises:
            SlurmError: sbatch failed (its error quoted), or squeue failed for longer than a while
                during ``wait`` (the jobs go on).
        """
        from .run import PointResult

        results: dict[str, PointResult] = {}
        busy = self._in_flight(sweep, points)
        for p in points:
            if p.id in busy:
                results[p.id] = PointResult(p, "skipped", detail=f"queued or running already as Slurm job {busy[p.id]}")
                on_event(SweepEvent("end", p, result=results[p.id]))
        todo = [p for p in points if p.id not in results]
        if todo and not cancel.is_set():
            sub = self.submit(sweep, todo, db=db)
            on_event(
                SweepEvent(
                    "info",
                    None,
                    f"submitted Slurm job {sub.job}: {len(todo)} array task(s); script {sub.script}; logs "
                    f"{sub.log.replace('%A', sub.job)}",
                )
            )
            if not is_url(db):
                on_event(
                    SweepEvent(
                        "info",
                        None,
                        "the database is a SQLite file: its writers must share one host (WAL), so a cluster of several "
                        "nodes needs a PostgreSQL URL (--db postgresql://...)",
                    )
                )
            if self.wait:
                results.update(self._wait(sweep, sub, todo, db, on_event, cancel))
            else:
                on_event(
                    SweepEvent(
                        "info",
                        None,
                        f"not waiting for it: 'rocroof sweep status {sweep.path}' shows where each point stands "
                        "(--wait waits)",
                    )
                )
            for i, p in enumerate(todo):
                results.setdefault(p.id, PointResult(p, "submitted", detail=f"Slurm job {sub.task(i)}"))
        return [results.get(p.id) or PointResult(p, "not-run") for p in points]

    def _in_flight(self, sweep: Sweep, points: Sequence[Point]) -> dict[str, str]:
        """``{point id: job_task}`` of the points queued or running in the last submission."""
        sub = last_submission(sweep)
        if sub is None or shutil.which("squeue") is None:
            return {}
        try:
            tasks = queue_tasks(sub.job, len(sub.points))
        except SlurmError:
            return {}
        wanted = {p.id for p in points}
        return {
            pid: sub.task(i) for i, pid in enumerate(sub.points) if pid in wanted and i in tasks and not tasks[i].ended
        }

    def submit(self, sweep: Sweep, points: Sequence[Point], *, db: str) -> Submission:
        """Write the script and the record under ``<out>/slurm`` and submit the array with ``sbatch --parsable``.

        Returns:
            The submission (its record written).

        Raises:
            SlurmError: sbatch is missing or refused the job (its error quoted), or ``<out>/slurm``
                cannot be written.
        """
        sbatch = shutil.which("sbatch")
        if sbatch is None:
            raise NotSubmitted("sbatch: not found on PATH; --executor slurm needs Slurm's client commands")
        now = dt.datetime.now(dt.UTC)
        directory = (self.cwd / submissions_dir(sweep)).absolute()
        made = [d for d in (directory, *directory.parents) if not d.exists()]  # deepest first: removed if unused
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            _remove_unsubmitted(None, made)
            raise NotSubmitted(f"{directory}: cannot create it for the batch script ({exc.strerror})") from exc
        stem = _new_stem(sweep, directory, now)
        script = directory / f"{stem}.sbatch"
        text = self._script(sweep, points, db, stem, now)
        _, db_shown, db_in_env = _db_for_job(db, self.cwd)
        try:
            script.write_text(text, encoding="utf-8")
        except OSError as exc:
            _remove_unsubmitted(script, made)
            raise NotSubmitted(f"{script}: cannot write the batch script ({exc.strerror})") from exc
        env = {**os.environ, **({"ROCROOF_DB": db} if db_in_env else {})}
        unsent = "nothing was submitted, and the batch script is removed (--dry-run prints it)"
        try:
            done = subprocess.run(
                [sbatch, "--parsable", str(script)],
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
                cwd=self.cwd,
                env=env,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired as exc:  # sbatch may have queued the array before it stopped answering
            raise SlurmError(
                f"sbatch {script}: no answer in {exc.timeout:g} s; the job array may be queued all the same "
                f"(squeue --me shows it); the batch script is kept: {script}"
            ) from exc
        except OSError as exc:
            _remove_unsubmitted(script, made)
            raise NotSubmitted(f"sbatch could not be started ({exc.strerror or exc}); {unsent}") from exc
        if done.returncode != 0:
            why = _last_error(done.stderr or done.stdout)
            _remove_unsubmitted(script, made)
            raise NotSubmitted(f"sbatch refused the job array (exit status {done.returncode}): {why}; {unsent}")
        job = done.stdout.strip().split(";")[0].strip()
        if not job.isdigit():  # sbatch said it worked: the array may be queued under a job id not understood here
            raise SlurmError(
                f"sbatch answered no job id ({done.stdout.strip()!r}); the job array may be queued all the same "
                f"(squeue --me shows it); the batch script is kept: {script}"
            )
        sub = Submission(
            job=job,
            stem=stem,
            directory=directory,
            points=tuple(p.id for p in points),
            submitted=now.isoformat(timespec="seconds"),
            db=db_shown,
            script=script,
            log=str(directory / f"{sweep.name}-%A_%a.log"),
            on_error=sweep.on_error,
        )
        tmp = sub.record.with_name(f".{sub.record.name}.{os.getpid()}")
        try:
            tmp.write_text(json.dumps(sub.to_json(), indent=1) + "\n", encoding="utf-8")
            os.replace(tmp, sub.record)
        except OSError as exc:
            raise SlurmError(
                f"{sub.record}: cannot record the submission of Slurm job {job} ({exc.strerror}); it runs all the "
                f"same; its batch script is {script}"
            ) from exc
        return sub

    def _wait(
        self,
        sweep: Sweep,
        sub: Submission,
        points: Sequence[Point],
        db: str,
        on_event: EventSink,
        cancel: threading.Event,
    ) -> dict[str, PointResult]:
        """Follow the array until every task ended (or ``cancel``/Ctrl-C); the ended points' results."""
        from .run import PointResult, Status, read_status

        results: dict[str, PointResult] = {}
        started: dict[str, float] = {}
        seen: set[int] = set()
        t0 = time.monotonic()
        failing_since: float | None = None
        stopping = False
        to_result: dict[str, Status] = {"done": "done", "failed": "failed", "skipped": "skipped", "not run": "not-run"}
        try:
            while len(results) < len(points) and not cancel.is_set():
                try:
                    tasks = queue_tasks(sub.job, len(sub.points))
                    failing_since = None
                except SlurmError as exc:
                    failing_since = failing_since or time.monotonic()
                    if time.monotonic() - failing_since > 120:
                        raise SlurmError(
                            f"{exc}; stopped waiting after 120 s of failures: Slurm job {sub.job} goes on ('rocroof "
                            f"sweep status {sweep.path}' shows where it stands)"
                        ) from exc
                    cancel.wait(self._interval(time.monotonic() - t0))
                    continue
                seen.update(tasks)
                listed = bool(tasks) or time.monotonic() - t0 > UNLISTED_GRACE_S
                stored = _stored(db, [p.id for p in points if p.id not in results])
                for i, p in enumerate(points):
                    if p.id in results:
                        continue
                    state = point_state(
                        sub,
                        i,
                        p,
                        task=tasks.get(i),
                        listed=listed or i in seen,
                        stored=stored,
                        status=read_status(sweep, p),
                    )
                    if state.state == "running" and p.id not in started:
                        started[p.id] = time.monotonic()
                        on_event(SweepEvent("start", p))
                        on_event(SweepEvent("stage", p, f"{state.detail} (job {state.job})"))
                    if state.state not in to_result:
                        continue
                    secs = round(time.monotonic() - started[p.id], 3) if p.id in started else None
                    result = PointResult(
                        p, to_result[state.state], run_id=state.run_id, detail=state.detail, seconds=secs
                    )
                    results[p.id] = result
                    on_event(SweepEvent("end", p, result=result))
                    if result.status == "failed" and sweep.on_error == "stop" and not stopping:
                        stopping = True
                        on_event(
                            SweepEvent(
                                "stopping",
                                None,
                                f"point {p.id} failed (on_error: stop): tasks of Slurm job {sub.job} that have not "
                                "started do not run their points",
                            )
                        )
                if len(results) < len(points):
                    cancel.wait(self._interval(time.monotonic() - t0))
        except KeyboardInterrupt:
            cancel.set()
        if cancel.is_set() and len(results) < len(points):
            on_event(
                SweepEvent(
                    "stopping",
                    None,
                    f"stopped waiting: Slurm job {sub.job} goes on (scancel {sub.job} stops it); 'rocroof sweep status "
                    f"{sweep.path}' shows where each point stands",
                )
            )
        return results
