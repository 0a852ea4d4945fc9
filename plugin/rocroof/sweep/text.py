"""Words for the command line: the dry-run listing, one line per finished point, the summary table."""

from __future__ import annotations

import shlex
from collections.abc import Sequence

import pandas as pd

from ..store import shown_db
from .executors import PIN_VARIABLES, pin_env
from .expand import Point
from .run import VENDORS, PointResult, SweepOutcome
from .spec import Sweep

#: How each status reads in lines and the summary.
STATUS_WORD = {
    "done": "done",
    "skipped": "skipped",
    "failed": "FAILED",
    "interrupted": "stopped",
    "not-run": "not run",
    "submitted": "queued",
}


def _pairs(labels: dict[str, str]) -> str:
    return " ".join(f"{k}={v}" for k, v in labels.items())


def _profiler_text(sweep: Sweep) -> str:
    shown = {k: (",".join(v) if isinstance(v, tuple) else v) for k, v in sweep.profiler.options.items()}
    extra = ", ".join(f"{k}={v}" for k, v in shown.items())
    return f"{sweep.profiler.name}" + (f" ({extra})" if extra else "")


def header(sweep: Sweep, points: Sequence[Point], db: str, gpus: Sequence[str] = (), jobs: int | None = None) -> str:
    """What the sweep will do, in a few lines: points, profiler, database, output, executor."""
    combos = {tuple((k, v) for k, v in p.params.items() if k != "repeat") for p in points}
    repeats = {p.repeat for p in points}
    total = f"{len(points)} point(s)"
    if len(repeats) > 1 and len(points) == len(combos) * len(repeats):
        total += f" = {len(combos)} combination(s) x {len(repeats)} repeats"
    lines = [
        f"Sweep {sweep.name} ({sweep.path}): {total}; profiler {_profiler_text(sweep)}; on_error {sweep.on_error}",
        f"  database {shown_db(db)}; runs labelled sweep={sweep.name} sweep_point=<point>"
        + (f" {_pairs(sweep.labels)}" if sweep.labels else ""),
    ]
    if not sweep.profiler.replay:
        lines.append(f"  captures under {sweep.out}/<point>")
        n = jobs if jobs is not None else max(1, len(gpus))
        if gpus:
            pinned = pin_env("<gpu>", VENDORS.get(sweep.profiler.name))
            lines.append(
                f"  GPUs {','.join(gpus)}: {n} point(s) at a time, each pinned with "
                + " ".join(f"{k}={pinned[k]}" for k in PIN_VARIABLES)
            )
    return "\n".join(lines)


def describe_points(points: Sequence[Point], sweep: Sweep) -> str:
    """The dry-run listing: per point its id, labels, command, environment (and replayed capture)."""
    out = []
    width = len(str(len(points)))
    for n, p in enumerate(points, 1):
        out.append(f"[{n:>{width}}/{len(points)}] {p.id}  {_pairs(p.params)}")
        pad = " " * (width * 2 + 4)
        if p.command:
            out.append(f"{pad}{'recorded: ' if sweep.profiler.replay else ''}{shlex.join(p.command)}")
        if sweep.profiler.replay:
            out.append(f"{pad}capture {p.capture_dir}")
        if p.env:
            out.append(f"{pad}env {' '.join(f'{k}={shlex.quote(v)}' for k, v in p.env.items())}")
    return "\n".join(out)


def result_line(result: PointResult) -> str:
    """One line for a finished point: status, id, GPU, its matrix values, run or reason, time."""
    p = result.point
    values = _pairs(p.params)
    gpu = f" [gpu {result.gpu}]" if result.gpu is not None else ""
    if result.status == "done":
        tail = f"run {result.run_id}" + (f"; {result.detail}" if result.detail else "")
    else:
        tail = result.detail or STATUS_WORD[result.status]
    secs = f" ({result.seconds:.1f} s)" if result.seconds is not None and result.status != "skipped" else ""
    return f"{STATUS_WORD[result.status]:<7} {p.id}{gpu} {values}: {tail}{secs}"


def summary_frame(outcome: SweepOutcome) -> pd.DataFrame:
    """One row per point: id, status, run, matrix values, seconds, detail."""
    rows = []
    for r in outcome.results:
        p = r.point
        rows.append(
            {
                "point": p.id,
                "status": STATUS_WORD[r.status],
                "run": "" if r.run_id is None else str(r.run_id),
                "values": _pairs(p.params),
                "gpu": r.gpu or "",
                "s": "" if r.seconds is None or r.status == "skipped" else f"{r.seconds:.1f}",
                "detail": r.detail,
            }
        )
    df = pd.DataFrame(rows, columns=["point", "status", "run", "values", "gpu", "s", "detail"])
    if not (df["gpu"] != "").any():
        df = df.drop(columns=["gpu"])
    return df


def summary_counts(outcome: SweepOutcome) -> str:
    """``3 done, 1 skipped (already stored), 0 failed`` (and interrupted / not run / submitted when any), time, db."""
    c = outcome.counts
    stored = sum(1 for r in outcome.results if r.status == "skipped" and r.run_id is not None)
    parts = [f"{c['done']} done", f"{c['skipped']} skipped ({stored} already stored)", f"{c['failed']} failed"]
    if c["interrupted"]:
        parts.append(f"{c['interrupted']} stopped")
    if c["not-run"]:
        parts.append(f"{c['not-run']} not run")
    if c["submitted"]:
        parts.append(f"{c['submitted']} submitted (queued or running as batch jobs)")
    return f"{', '.join(parts)} in {outcome.seconds:.1f} s; database {shown_db(outcome.db)}"
