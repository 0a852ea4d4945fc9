"""``rocroof sweep``: run a sweep file, or show where its points stand."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from ..text import printable
from .app import (
    DEFAULT_DB,
    cli,
    echo,
    format_option,
    progress_bar,
    stderr_console,
)


class _SweepGroup(click.Group):
    """``rocroof sweep FILE ...`` runs the sweep (the ``run`` command); ``rocroof sweep status FILE`` reports on it."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """Send anything that is not a subcommand's name (a sweep file, an option, --help) to ``run``."""
        if not args or args[0] not in self.commands:
            args = ["run", *args]
        return super().parse_args(ctx, args)


class _SweepRunCommand(click.Command):
    """``run``, whose usage line reads ``rocroof sweep [OPTIONS] FILE`` (``run`` may be left out)."""

    def format_usage(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """``Usage: rocroof sweep [OPTIONS] FILE``."""
        path = ctx.parent.command_path if ctx.parent is not None else ctx.command_path
        formatter.write_usage(path, " ".join(self.collect_usage_pieces(ctx)))


@cli.group(cls=_SweepGroup, short_help="Run a sweep file, or show where its points stand (sweep status FILE).")
def sweep() -> None:
    """Run a sweep file (rocroof sweep FILE), or show where its points stand (rocroof sweep status FILE)."""


@sweep.command("run", cls=_SweepRunCommand)
@click.argument("file", type=click.Path(path_type=Path))
@click.option(
    "--dry-run",
    is_flag=True,
    help="Print the points (id, labels, command, environment), and with --executor slurm the batch script; run "
    "and submit nothing.",
)
@click.option(
    "--executor",
    type=click.Choice(["local", "slurm"]),
    default="local",
    show_default=True,
    help="local: on this machine. slurm: one job array, one task per pending point, each running "
    "'rocroof sweep FILE --point ID' on a node (sbatch must be on PATH).",
)
@click.option(
    "--gpus",
    metavar="IDS",
    default=None,
    help="Local: GPUs to use, e.g. 0,1: one point per GPU at a time, pinned with CUDA_/HIP_/ROCR_VISIBLE_DEVICES. "
    "(Slurm gives each task its GPU: --gres=gpu:1.)",
)
@click.option(
    "--jobs",
    type=click.IntRange(min=1),
    default=None,
    help="Points at once (local: default the number of --gpus, else 1; slurm: array tasks at once, --array=...%N).",
)
@click.option(
    "--point",
    "only",
    multiple=True,
    metavar="ID",
    help="Only this point: an id from --dry-run or a unique prefix of one (repeatable).",
)
@click.option(
    "--db",
    "db",
    default=None,
    help="Results database (file or URL), instead of the sweep file's db. [default: the file's db, else env "
    "ROCROOF_DB, else rocroof.db]",
)
@click.option(
    "--wait",
    is_flag=True,
    help="Slurm: wait for the job array, showing each point as it starts and ends, then print the summary "
    "(Ctrl-C stops waiting, not the jobs). Without it rocroof returns once the array is submitted.",
)
@click.option(
    "--sbatch-arg",
    "sbatch_args",
    multiple=True,
    metavar="OPT",
    help="Slurm: one more sbatch option for the array (repeatable), after the sweep file's slurm: section, "
    "e.g. --sbatch-arg=--constraint=mi300x.",
)
def sweep_run(
    file: Path,
    dry_run: bool,
    executor: str,
    gpus: str | None,
    jobs: int | None,
    only: tuple[str, ...],
    db: str | None,
    wait: bool,
    sbatch_args: tuple[str, ...],
) -> None:
    """Run a sweep file: one command over a matrix of values, each point profiled and stored.

    FILE (configs/sweeps/*.yaml, version: 1) gives the command template with {placeholders},
    the matrix of their values (and env sets), the profiler (rocprofv3, ncu, or replay of
    recorded captures), repeats, labels, out, db, on_error (stop | skip) and slurm (partition,
    account, qos, time, gres, extra). Each point is profiled like 'rocroof collect' into
    OUT/<point id> and stored in its own transaction, labelled with its matrix values, repeat,
    sweep=<name> and sweep_point=<point id>.

    A rerun resumes: points already in the database are skipped, failed and interrupted ones run
    again (a capture finished before an interruption is only ingested). Ctrl-C stops cleanly;
    nothing is stored half.

    With --executor slurm the pending points become one job array (script, submission record and
    task logs in OUT/slurm/); each task runs 'rocroof sweep FILE --point ID' on its node with this
    Python, in this directory, into the same database (give a file every node can reach, or a
    PostgreSQL URL). 'rocroof sweep status FILE' shows each point: pending, running, done or failed
    with the reason. ('rocroof sweep run FILE' is the same as 'rocroof sweep FILE'.)

    \b
    Examples:
      rocroof sweep configs/sweeps/h200-tiny.yaml --dry-run
      rocroof sweep configs/sweeps/h200-tiny.yaml --gpus 0,1
      rocroof sweep configs/sweeps/replay-examples.yaml --db examples.db
      rocroof sweep configs/sweeps/h200-tiny.yaml --point 5ebe7e0    # only this point
      rocroof sweep configs/sweeps/h200-tiny.yaml --executor slurm --dry-run   # the batch script
      rocroof sweep configs/sweeps/h200-tiny.yaml --executor slurm --jobs 4 --wait
      rocroof sweep status configs/sweeps/h200-tiny.yaml
    """
    import signal
    import threading

    from rich.progress import TaskID

    from ..report.tables import render_frame
    from ..sweep import SweepEvent, expand, load_sweep, make_executor, parse_gpus, run_sweep, select
    from ..sweep.run import raise_for_failures
    from ..sweep.text import describe_points, header, result_line, summary_counts, summary_frame

    spec = load_sweep(file)
    points = expand(spec)
    if only:
        points = select(points, only, spec)
    gpu_ids = parse_gpus(gpus)
    runner = make_executor(
        executor, gpus=gpu_ids, jobs=jobs, profiles=not spec.profiler.replay, wait=wait, sbatch_args=sbatch_args
    )
    target = db or spec.db or os.environ.get("ROCROOF_DB") or DEFAULT_DB
    head = header(spec, points, target, gpu_ids, jobs)
    if dry_run:
        more = runner.describe(spec, points, target)
        echo(head + "\n\n" + describe_points(points, spec) + (f"\n\n{more}" if more else ""))
        return
    stderr_console().print(printable(head), markup=False, highlight=False, soft_wrap=True)

    def interrupt(_signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt  # SIGTERM (a batch system's stop) winds down like Ctrl-C

    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, interrupt) if main_thread else None
    lock = threading.Lock()
    try:
        with progress_bar() as progress:
            overall = progress.add_task(f"sweep {spec.name}", total=len(points), detail="")
            tasks: dict[str, TaskID] = {}

            def on_event(event: SweepEvent) -> None:
                with lock:
                    point = event.point
                    if event.kind == "start" and point is not None:
                        where = f" gpu {event.gpu}" if event.gpu is not None else ""
                        values = " ".join(f"{k}={v}" for k, v in point.params.items())
                        values = values if len(values) <= 48 else values[:45] + "..."
                        tasks[point.id] = progress.add_task(
                            printable(f"  {point.id}{where} {values}"), total=None, detail="starting"
                        )
                    elif event.kind == "stage" and point is not None and point.id in tasks:
                        progress.update(tasks[point.id], detail=printable(event.detail))
                    elif event.kind == "end" and point is not None and event.result is not None:
                        task = tasks.pop(point.id, None)
                        if task is not None:
                            progress.remove_task(task)
                        progress.advance(overall)
                        line = printable(result_line(event.result))
                        progress.console.print(line, markup=False, highlight=False, soft_wrap=True)
                    elif event.kind in ("stopping", "info"):
                        progress.console.print(printable(event.detail), markup=False, highlight=False, soft_wrap=True)

            outcome = run_sweep(spec, points, db=target, executor=runner, on_event=on_event)
    except KeyboardInterrupt:
        stderr_console().print(
            "Interrupted: points stored so far stay stored, nothing is stored half; rerun the same command to resume.",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        raise click.exceptions.Exit(130) from None
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, previous)
    echo(render_frame(summary_frame(outcome), "table").rstrip("\n"))
    echo(summary_counts(outcome))
    if outcome.interrupted:
        left = outcome.counts["interrupted"] + outcome.counts["not-run"]
        queued = outcome.counts["submitted"]
        text = f"Interrupted: {left} point(s) not stored; rerun the same command to resume (stored points are skipped)."
        if queued:
            text = (
                f"Stopped waiting: {queued} point(s) are still queued or running as batch jobs; 'rocroof sweep status "
                f"{file}' shows where they stand."
            )
        stderr_console().print(text, markup=False, highlight=False, soft_wrap=True)
        raise click.exceptions.Exit(130)
    raise_for_failures(outcome)


@sweep.command("status")
@click.argument("file", type=click.Path(path_type=Path))
@click.option(
    "--point",
    "only",
    multiple=True,
    metavar="ID",
    help="Only this point: an id or a unique prefix of one (repeatable).",
)
@click.option(
    "--db",
    "db",
    default=None,
    help="Results database (file or URL). [default: the one the last submission wrote to, else the sweep file's db, "
    "env ROCROOF_DB, rocroof.db]",
)
@format_option
def sweep_status(file: Path, only: tuple[str, ...], db: str | None, fmt: str) -> None:
    """Show where each point of a sweep stands: done, running, pending or failed, with the reason.

    Reads the last job array submitted with --executor slurm (OUT/slurm/*.json): Slurm's queue
    (squeue; sacct where accounting is kept) for pending and running tasks, the database for the
    points stored (done, with their run), and each point's status file OUT/<point>.json and task
    log for the reason a point failed. Points outside that array are done (stored), failed
    (their status file says so) or not submitted. Without any submission it still tells what the
    database holds. Changes nothing.

    \b
    Examples:
      rocroof sweep status configs/sweeps/h200-tiny.yaml
      rocroof sweep status configs/sweeps/h200-tiny.yaml --format json     # for scripts
      rocroof sweep status configs/sweeps/h200-tiny.yaml --point 5ebe7e0
    """
    from ..report.tables import render_frame
    from ..sweep import expand, load_sweep, select
    from ..sweep.slurm import sweep_status as status_of

    spec = load_sweep(file)
    points = expand(spec)
    if only:
        points = select(points, only, spec)
    status = status_of(spec, points, db=db, default_db=spec.db or os.environ.get("ROCROOF_DB") or DEFAULT_DB)
    if fmt in ("table", "markdown"):
        echo(status.heading() + "\n")
    echo(render_frame(status.frame(), fmt), nl=False)  # type: ignore[arg-type]
    if fmt in ("table", "markdown"):
        echo("\n" + status.summary())
