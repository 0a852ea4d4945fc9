"""The ``rocroof`` command line: a thin click layer over the library.

Every :class:`~rocroof.errors.RocroofError` becomes a one-line ``Error: ...`` message and exit
status 1; anything else is a bug and keeps its traceback. ``--traceback`` shows tracebacks for
user errors too.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from sqlalchemy import exc as sa_exc

from . import __version__
from .errors import InputError, RocroofError

DEFAULT_DB = "rocroof.db"
DB_HELP = (
    "Results database: a SQLite file or an SQLAlchemy URL (postgresql://...). [env ROCROOF_DB; default rocroof.db]"
)
FORMATS = ("table", "csv", "json", "markdown")


class RocroofGroup(click.Group):
    """A click group that turns :class:`RocroofError` into one-line messages."""

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command; user errors become ``Error: <message>`` and exit status 1."""
        args = [*getattr(ctx, "_protected_args", []), *ctx.args]  # the subcommand line, to name the database
        try:
            return super().invoke(ctx)
        except RocroofError as exc:
            if ctx.params.get("traceback") or os.environ.get("ROCROOF_TRACEBACK"):
                raise
            raise click.ClickException(_printable(str(exc))) from None
        except sa_exc.OperationalError as exc:  # the database refused: read-only, locked, full disk, gone
            if os.environ.get("ROCROOF_TRACEBACK"):
                raise
            shown = _db_in_args(args) or "the database"
            reason = str(exc.orig).strip().splitlines()[0] if exc.orig is not None else type(exc).__name__
            message = f"{shown}: the database refused the command ({reason}); no run is left half-written"
            raise click.ClickException(_printable(message)) from None


def _db_in_args(args: Sequence[str]) -> str | None:
    """The database a command line names (``--into``, ``--db``, else ``ROCROOF_DB``), shown safely."""
    from .store import shown_db  # here, not at start-up: the store pulls in pandas

    for flag in ("--into", "--db"):
        for i, a in enumerate(args):
            if a == flag and i + 1 < len(args):
                return shown_db(args[i + 1])
            if a.startswith(flag + "="):
                return shown_db(a.split("=", 1)[1])
    env = os.environ.get("ROCROOF_DB")
    return shown_db(env) if env else None


def _printable(text: str) -> str:
    """Text any terminal can print: undecodable bytes of file names become ``\\xNN``."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _echo(text: str, nl: bool = True) -> None:
    click.echo(_printable(text), nl=nl)


def _stderr() -> Console:
    return Console(stderr=True, highlight=False)


def _db_option(fn: Any) -> Any:
    return click.option("--db", "db", envvar="ROCROOF_DB", default=DEFAULT_DB, show_default=False, help=DB_HELP)(fn)


def _format_option(fn: Any) -> Any:
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(FORMATS),
        default="table",
        show_default=True,
        help="table for terminals, markdown for PR reviews, csv/json for scripts (raw values, units in names).",
    )(fn)


@click.group(cls=RocroofGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="rocroof")
@click.option("--traceback", is_flag=True, help="Show Python tracebacks for errors (for bug reports).")
def cli(traceback: bool) -> None:
    """rocroof: per-ggml-op DRAM roofline profiles of llama.cpp, in a database you can query.

    \b
    Typical session:
      rocroof collect --out cap1 -- llama-bench -m model.gguf -p 512 -n 0 -r 1
      rocroof report --by op
      rocroof report --by dispatch --top 20 --format markdown
      rocroof query "SELECT op, SUM(duration_ns) FROM dispatch_dram GROUP BY op"

    \b
    Already have profiler output? Ingest it:
      rocroof ingest path/to/rocprofv3-output/ --label model=qwen3-30b
    """


def _parse_labels(labels: Sequence[str]) -> dict[str, str]:
    out = {}
    for item in labels:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InputError(f"--label {item!r}: expected key=value")
        try:
            item.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InputError("--label: the label contains bytes that are not UTF-8") from exc
        if any(ch < " " or ch == "\x7f" for ch in item):
            raise InputError(f"--label {item!r}: control characters (newlines, tabs...) are not allowed in labels")
        if "," in key:
            raise InputError(f"--label {item!r}: a key cannot hold ',' (labels are listed as key=value,...)")
        out[key.strip()] = value.strip()
    return out


def _progress() -> Progress:
    console = _stderr()
    return Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.fields[detail]}"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,  # a pipe or log file gets no spinner frames or stray newlines
    )


def _ingest_one(
    path: Path,
    db: str,
    labels: dict[str, str],
    attach: list[Path],
    arch: str | None,
    replace: bool,
    keep_instances: bool,
    keep_warmup: bool,
) -> str:
    from .pipeline import build_run
    from .readers import read_capture
    from .store import Store

    store = Store(db)
    try:
        store.preflight()
        with _progress() as progress:
            task = progress.add_task(f"reading {path}", total=None, detail="")
            capture = read_capture(path, attachments=attach, keep_instances=keep_instances)
            progress.update(
                task, description=f"attributing {sum(len(p.dispatches) for p in capture.passes):,} dispatches"
            )
            frames = build_run(capture, arch_override=arch, source_path=str(path), keep_warmup=keep_warmup)

            def cb(stage: str, done: int, total: int) -> None:
                progress.update(
                    task, description=f"writing {stage}", completed=done, total=total, detail=f"{done:,}/{total:,} rows"
                )

            run_id = store.write_run(frames, labels=labels, replace=replace, progress=cb)
    finally:
        store.close()
    return _summary(run_id, path, capture, frames)


def _summary(run_id: int, path: Path, capture: Any, frames: Any) -> str:
    run = frames.run
    disp = frames.tables["dispatch"]
    timing = disp[disp["timing_dispatch_index"] == disp["dispatch_index"]] if len(disp) else disp
    dram = frames.tables["dram_traffic"]
    n = len(timing)
    attributed = int(timing["op_index"].notna().sum()) if n else 0
    known_r = int(dram["dram_read_bytes"].notna().sum()) if len(dram) else 0
    known_w = int(dram["dram_write_bytes"].notna().sum()) if len(dram) else 0
    bounded = int((dram["dram_read_bytes"].isna() & dram["dram_read_bytes_min"].notna()).sum()) if len(dram) else 0
    from .report import gpu_text, timing_text

    gpu = gpu_text(run.get("gpu_name"), run.get("gpu_arch"))
    files = [Path(f).name for f in capture.files_read]
    shown = ", ".join(files[:6]) + (f" and {len(files) - 6} more" if len(files) > 6 else "")
    # one fact per line: the summary reads in a terminal and pastes into a log or a PR comment
    parts = [
        f"Stored run {run_id} from {path} ({capture.source_format}, {gpu or 'unknown GPU'}).",
        f"  read {len(files)} file(s): {shown}",
        f"  {len(capture.passes)} pass(es), {n:,} dispatch(es) in the timing pass, "
        f"{len(frames.tables['op_invocation']):,} ggml op invocation(s), {attributed:,} dispatch(es) attributed "
        f"({run['attribution_method']})",
        f"  DRAM bytes known for {known_r:,}/{n:,} reads ({bounded:,} bounded only) and {known_w:,}/{n:,} writes; "
        f"durations from {timing_text(run['timing_source'])}",
    ]
    if run.get("dram_peak_gbps"):
        parts.append(f"  ceiling {run['dram_peak_gbps']:,.1f} GB/s ({run['dram_peak_source']})")
    warnings = [note for note in frames.notes if note.severity != "info"]
    if warnings:
        parts.append(f"{len(warnings)} warning(s):")
    text = "\n".join(parts)
    for note in warnings:
        text += f"\n  - {note.message}"
    text += f"\nNext: rocroof report --run {run_id} --by op   (or --by kernel, --by dispatch)"
    return text


@cli.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@_db_option
@click.option(
    "--label", "labels", multiple=True, metavar="KEY=VALUE", help="Label the run (repeatable), e.g. --label model=q4_k."
)
@click.option(
    "--attach",
    multiple=True,
    type=click.Path(path_type=Path),
    help="Extra file of this run: ggml op metadata JSON, or a log with ggml-fused: lines.",
)
@click.option("--arch", metavar="GFX", help="GPU architecture when the capture does not record it (e.g. gfx942).")
@click.option(
    "--replace",
    is_flag=True,
    help="Replace a stored run with the same content (new run id; its labels are kept unless given again).",
)
@click.option(
    "--instances/--no-instances",
    default=True,
    show_default=True,
    help="Keep per-instance counter values (e.g. one per TCC channel) where the source has them.",
)
@click.option("--keep-warmup", is_flag=True, help="Keep dispatches before the last 'ggml reset' mark.")
def ingest(
    paths: tuple[Path, ...],
    db: str,
    labels: tuple[str, ...],
    attach: tuple[Path, ...],
    arch: str | None,
    replace: bool,
    instances: bool,
    keep_warmup: bool,
) -> None:
    """Store recorded profiler output: one run per PATH (per capture in a folder of them).

    PATH is a capture directory or file, or a folder of 'rocroof collect' captures. The
    format is detected: rocprofv3 CSV (also 'rocpd convert' CSV and multi-pass pmc_N/ or
    pass_N/ directories), rocprofv3 rocpd databases (*_results.db), rocprofiler-compute
    workloads, Nsight Systems SQLite + Nsight Compute raw CSV exports, and ggml op metadata
    JSON (AMD's GGML_ROOFLINE_OUT). Files may be gzip-compressed. Each run is written in one
    transaction: a failed ingest stores nothing.

    \b
    Examples:
      rocroof ingest out/ --label model=llama-3b --label ubatch=512
      rocroof ingest examples/h200                     # three captures: three runs
      rocroof ingest workloads/vcopy/MI300X_A1 --db team.db
      rocroof ingest kernel_trace_dir/ --attach roofline.json --arch gfx1151
    """
    from .readers import collect_captures

    label_map = _parse_labels(labels)
    runs = [capture for path in paths for capture in collect_captures(path)]
    if attach and len(runs) > 1:
        raise InputError("--attach belongs to one run; ingest one capture at a time with it")
    if len(runs) == 1:
        _echo(_ingest_one(runs[0], db, label_map, list(attach), arch, replace, instances, keep_warmup))
        return
    # several captures: store each in its own transaction, skip those already stored, go on after a bad one
    from .errors import DuplicateRunError
    from .store import Store

    store = Store(db)  # a database that cannot be used stops everything, once
    try:
        store.preflight()
    finally:
        store.close()

    failed = []
    for path in runs:
        try:
            _echo(_ingest_one(path, db, label_map, list(attach), arch, replace, instances, keep_warmup))
        except DuplicateRunError as exc:
            reason = str(exc)  # names the capture already, as a rule
            _echo(f"Skipped {reason if reason.startswith(str(path)) else f'{path}: {reason}'}")
        except RocroofError as exc:
            _stderr().print(f"Error: {_printable(str(exc))}", markup=False, highlight=False, soft_wrap=True)
            failed.append(str(path))
    if failed:
        raise InputError(f"{len(failed)} of {len(runs)} capture(s) not stored: {', '.join(failed)} (errors above)")


@cli.command()
@click.argument("app", nargs=-1, required=True)
@click.option(
    "--profiler",
    type=click.Choice(["rocprofv3", "ncu"]),
    default=None,
    help="rocprofv3 (AMD) or ncu (NVIDIA: nsys for timings, ncu for counters). Default: by --arch, else the one "
    "on PATH.",
)
@click.option(
    "--counters",
    default=None,
    help="Preset (dram, roofline) or names: TCC_EA0_RDREQ_sum,... for rocprofv3, dram__bytes_read.sum,... for ncu. "
    "[default: dram for rocprofv3, roofline for ncu]",
)
@click.option(
    "--out",
    "out",
    type=click.Path(path_type=Path),
    default=None,
    help="Directory for the raw profiler output (default: rocroof-out/<timestamp>).",
)
@_db_option
@click.option("--arch", metavar="ARCH", help="Skip GPU detection and plan for this architecture (gfx942, sm_90...).")
@click.option(
    "--output-format",
    type=click.Choice(["rocpd", "csv"]),
    default=None,
    help="rocprofv3 output format (default: rocpd on ROCm >= 7.0, else csv).",
)
@click.option(
    "--cache-control",
    type=click.Choice(["all", "none"]),
    default="all",
    show_default=True,
    help="ncu: flush caches before each profiled kernel (all: cold-L2 DRAM bytes) or not (none). Stored with the run.",
)
@click.option(
    "--nvtx-include",
    "nvtx_include",
    multiple=True,
    metavar="EXPR",
    help="ncu: profile only kernels inside matching NVTX ranges (passed to ncu --nvtx-include; repeatable).",
)
@click.option(
    "--nsys",
    metavar="PATH",
    default=None,
    help="ncu: the nsys executable (default: PATH, then beside ncu); 'none' skips the trace run (durations then "
    "come from ncu's serialised replay).",
)
@click.option(
    "--no-bandwidth-probe",
    is_flag=True,
    help="ncu: skip the copy-bandwidth probe (1 GiB device-to-device copies, about a second) that gives the run "
    "a measured DRAM ceiling.",
)
@click.option("--label", "labels", multiple=True, metavar="KEY=VALUE", help="Label the run (repeatable).")
@click.option("--no-sidecar", is_flag=True, help="Do not ask the llama.cpp hook for the op-metadata JSON.")
@click.option("--dry-run", is_flag=True, help="Print the plan and the commands; run nothing.")
def collect(
    app: tuple[str, ...],
    profiler: str | None,
    counters: str | None,
    out: Path | None,
    db: str,
    arch: str | None,
    output_format: str | None,
    cache_control: str,
    nvtx_include: tuple[str, ...],
    nsys: str | None,
    no_bandwidth_probe: bool,
    labels: tuple[str, ...],
    no_sidecar: bool,
    dry_run: bool,
) -> None:
    """Profile APP and store the result.

    Runs APP once for timings (rocprofv3 kernel/marker/HIP traces, or nsys CUDA+NVTX traces)
    and for the counters (rocprofv3: one run per group of counters that fits the GPU; ncu: one
    run, replaying each kernel), keeps the raw output under --out, joins the runs per ggml op
    invocation, and ingests. APP should be built with rocroof's llama.cpp marker hook
    (tools/llama.cpp); collect sets GGML_CUDA_MARKERS=1 for it.

    \b
    Examples:
      rocroof collect -- llama-bench -m qwen3-30b-a3b-q4_k.gguf -p 512 -n 0 -r 1
      rocroof collect --counters roofline --out cap/ -- llama-completion -m m.gguf -p hi -n 8
      rocroof collect --profiler ncu -- llama-bench -m m.gguf -p 0 -n 16 -r 1
      rocroof collect --arch gfx942 --dry-run -- ./app
    """
    import datetime as dt

    from .collect import execute, make_plan
    from .profilers import choose_profiler

    label_map = _parse_labels(labels)  # before the (long) application runs, not after
    if arch is not None and not re.fullmatch(r"gfx[0-9a-f]{3,5}|sm_\d{2,3}[a-z]?", arch):
        raise InputError(f"--arch {arch}: expected an AMD gfx target (gfx942, gfx90a...) or an NVIDIA sm_XX (sm_90)")
    if counters is not None and not counters.strip():
        raise InputError("--counters is empty; give a preset (dram, roofline) or counter names")
    out_dir = out or Path("rocroof-out") / dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    backend = choose_profiler(
        profiler,
        arch,
        output_format=output_format,
        cache_control=cache_control,
        nvtx_include=nvtx_include,
        nsys=nsys,
        bandwidth_probe=not no_bandwidth_probe,
    )
    plan = make_plan(
        list(app),
        out_dir,
        counters=counters,
        arch=arch,
        profiler=backend,
        sidecar=not no_sidecar,
        dry_run=dry_run,
    )
    lines = [
        f"GPU {plan.device.arch}: {plan.profiler}, "
        f"{sum(r.kind in ('trace', 'counter') for r in plan.runs)} application run(s), "
        f"output {plan.output_format}, raw output in {out_dir}"
    ]
    if plan.settings:
        lines.append("  settings: " + ", ".join(f"{k}={v}" for k, v in plan.settings.items()))
    if plan.profiler == "ncu":
        lines.append("  no nsys (Nsight Systems): no trace run; durations will come from ncu's serialised replay")
    for run in plan.runs:
        what = {"trace": "timings", "export": "export the report"}.get(run.kind, f"counters {' '.join(run.counters)}")
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in run.env.items())
        lines.append(f"  {run.label}: {what}\n    {env + ' ' if env else ''}{shlex.join(run.argv)}")
    if dry_run:
        _echo("\n".join(lines))
        return
    from .store import Store

    store = Store(db)
    try:
        store.preflight()
    finally:
        store.close()
    _stderr().print("\n".join(lines), markup=False, soft_wrap=True)  # commands stay whole, to copy

    def on_run(i: int, total: int, run: Any) -> None:
        doing = {
            "export": "exporting the report",
            "probe": "measuring the GPU's copy bandwidth (rocroof.bandwidth)",
        }.get(run.kind, f"running the application under {run.argv[0]}")
        _stderr().print(f"[{i + 1}/{total}] {run.label}: {doing} ...", markup=False, soft_wrap=True)

    # each profiler run in its own process group, stopped as a whole (SIGINT, then SIGTERM, then SIGKILL)
    # when rocroof is interrupted: the application a profiler started must not outlive it
    import threading

    from .sweep.run import cancellable_runner

    capture_dir = execute(plan, list(app), runner=cancellable_runner(threading.Event()), on_run=on_run)
    _echo(_ingest_one(capture_dir, db, label_map, [], arch, False, True, False))


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

    from .report import render_frame
    from .sweep import SweepEvent, expand, load_sweep, make_executor, parse_gpus, run_sweep, select
    from .sweep.run import raise_for_failures
    from .sweep.text import describe_points, header, result_line, summary_counts, summary_frame

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
        _echo(head + "\n\n" + describe_points(points, spec) + (f"\n\n{more}" if more else ""))
        return
    _stderr().print(_printable(head), markup=False, highlight=False, soft_wrap=True)

    def interrupt(_signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt  # SIGTERM (a batch system's stop) winds down like Ctrl-C

    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, interrupt) if main_thread else None
    lock = threading.Lock()
    try:
        with _progress() as progress:
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
                            _printable(f"  {point.id}{where} {values}"), total=None, detail="starting"
                        )
                    elif event.kind == "stage" and point is not None and point.id in tasks:
                        progress.update(tasks[point.id], detail=_printable(event.detail))
                    elif event.kind == "end" and point is not None and event.result is not None:
                        task = tasks.pop(point.id, None)
                        if task is not None:
                            progress.remove_task(task)
                        progress.advance(overall)
                        line = _printable(result_line(event.result))
                        progress.console.print(line, markup=False, highlight=False, soft_wrap=True)
                    elif event.kind in ("stopping", "info"):
                        progress.console.print(_printable(event.detail), markup=False, highlight=False, soft_wrap=True)

            outcome = run_sweep(spec, points, db=target, executor=runner, on_event=on_event)
    except KeyboardInterrupt:
        _stderr().print(
            "Interrupted: points stored so far stay stored, nothing is stored half; rerun the same command to resume.",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        raise click.exceptions.Exit(130) from None
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, previous)
    _echo(render_frame(summary_frame(outcome), "table").rstrip("\n"))
    _echo(summary_counts(outcome))
    if outcome.interrupted:
        left = outcome.counts["interrupted"] + outcome.counts["not-run"]
        queued = outcome.counts["submitted"]
        text = f"Interrupted: {left} point(s) not stored; rerun the same command to resume (stored points are skipped)."
        if queued:
            text = (
                f"Stopped waiting: {queued} point(s) are still queued or running as batch jobs; 'rocroof sweep status "
                f"{file}' shows where they stand."
            )
        _stderr().print(text, markup=False, highlight=False, soft_wrap=True)
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
@_format_option
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
    from .report import render_frame
    from .sweep import expand, load_sweep, select
    from .sweep.slurm import sweep_status as status_of

    spec = load_sweep(file)
    points = expand(spec)
    if only:
        points = select(points, only, spec)
    status = status_of(spec, points, db=db, default_db=spec.db or os.environ.get("ROCROOF_DB") or DEFAULT_DB)
    if fmt in ("table", "markdown"):
        _echo(status.heading() + "\n")
    _echo(render_frame(status.frame(), fmt), nl=False)  # type: ignore[arg-type]
    if fmt in ("table", "markdown"):
        _echo("\n" + status.summary())


@cli.command()
@_db_option
@_format_option
@click.option("--notes", "notes_for", type=int, default=None, metavar="RUN", help="Show all notes of one run instead.")
def runs(db: str, fmt: str, notes_for: int | None) -> None:
    """List stored runs (or one run's notes with --notes RUN).

    \b
    Examples:
      rocroof runs
      rocroof runs --notes 3                  # every note of run 3 (missing counters, ...)
      rocroof runs --format json --db team.db
    """
    import sqlalchemy as sa

    from .report import render_frame, runs_for_people, runs_frame
    from .store import Store, schema

    store = Store(db, read_only=True)
    store.check()
    if notes_for is not None:
        rid = store.resolve_run(notes_for)
        df = store.frame(
            sa.select(schema.run_note.c.severity, schema.run_note.c.code, schema.run_note.c.message)
            .where(schema.run_note.c.run_id == rid)
            .order_by(schema.run_note.c.note_index)
        )
    else:
        df = runs_frame(store, labels_as_mapping=fmt == "json")
        if fmt in ("table", "markdown"):
            df = runs_for_people(df)
            _echo(render_frame(df, fmt, wrap=["labels"]), nl=False)  # type: ignore[arg-type]
            return
    _echo(render_frame(df, fmt), nl=False)  # type: ignore[arg-type]


@cli.command()
@_db_option
@click.option("--run", "run_spec", default="latest", show_default=True, help="Run id or 'latest'.")
@click.option(
    "--by",
    type=click.Choice(["op", "kernel", "dispatch", "invocation"]),
    default="op",
    show_default=True,
    help="One row per ggml op, kernel name, timing-pass dispatch, or op invocation.",
)
@click.option("--top", type=click.IntRange(min=1), default=None, help="Only the first N rows (longest first).")
@click.option(
    "--format",
    "fmt",
    type=click.Choice([*FORMATS, "html"]),
    default="table",
    show_default=True,
    help="table for terminals, markdown for PR reviews, html (tables + roofline plot, one file), csv/json for "
    "scripts (raw values, units in names).",
)
def report(db: str, run_spec: str, by: str, top: int | None, fmt: str) -> None:
    """Per-op / per-kernel / per-dispatch time, DRAM bytes, model and roofline of a run.

    Achieved bandwidth is (read + write DRAM bytes) / GPU time against the run's measured or
    datasheet DRAM ceiling (named in the header). With op metadata (the llama.cpp hook's
    sidecar or the fork's JSON), op and invocation reports add the modelled bytes and FLOPs:
    meas/model (measured / modelled DRAM bytes; rows outside [0.7, 1.3] are marked * and
    explained), FLOP/B (arithmetic intensity on measured bytes), bound (memory or compute: the
    side of the roofline's ridge; latency: under 10% of the roof in calls under 20 µs, where
    launches, latency or too little parallelism limit it) and % roof (achieved as % of the
    governing ceiling: DRAM left of the ridge, right of it compute_peak in JSON/CSV, the INT8
    matrix peak for matmuls on quantized weights, FP16/BF16 matrix for other matrix ops, FP32
    otherwise; compute_peak_tflops is in TFLOP/s, TOP/s for INT8). Unknown values print as '?',
    with the bounds the counters allow. Tables fit the terminal (COLUMNS): a narrow one leaves
    out whole columns and names them.

    \b
    Examples:
      rocroof report                          # latest run, per ggml op
      rocroof report --run 3 --by dispatch --format json > run3.json
      rocroof report --by kernel --top 10 --format markdown
      rocroof report --run 3 --format html > run3.html
    """
    from .report import build_report, render
    from .store import Store

    store = Store(db, read_only=True)
    rid = store.resolve_run(run_spec)
    rep = build_report(store, rid, by=by, top=top)  # type: ignore[arg-type]
    if fmt == "html":
        _echo(_html_report(rep), nl=False)
        return
    _echo(render(rep, fmt), nl=False)  # type: ignore[arg-type]


def _html_report(rep: Any) -> str:
    import tempfile

    from .plot import save_roofline
    from .report import plot_ceilings, plot_title, render_html, roofline_points

    svg = None
    ceilings = plot_ceilings(rep)
    if rep.by == "op" and ceilings is not None and len(roofline_points(rep)):
        with tempfile.TemporaryDirectory() as tmp:
            paths = save_roofline(roofline_points(rep), ceilings, plot_title(rep), Path(tmp) / "roofline")
            svg = paths[1].read_text(encoding="utf-8")
    return render_html(rep, svg)


@cli.command()
@_db_option
@click.option("--run", "run_spec", default="latest", show_default=True, help="Run id or 'latest'.")
@click.option(
    "--out",
    "out",
    type=click.Path(path_type=Path),
    default=None,
    help="File name without extension; writes OUT.png and OUT.svg (default: roofline-run<N>).",
)
def plot(db: str, run_spec: str, out: Path | None) -> None:
    """Draw the run's roofline: ceilings, and one point per ggml op type.

    Filled markers sit at the arithmetic intensity from measured DRAM bytes, hollow ones at the
    intensity from modelled bytes (same height: achieved FLOP/s); marker area is the op type's
    share of GPU time. Ceilings come from configs/peaks.yaml (their marks are in the legend).
    Needs op metadata (FLOPs come from the model).

    \b
    Examples:
      rocroof plot --run 3 --out docs/decode-roofline
    """
    from .errors import InputError as _InputError
    from .plot import save_roofline
    from .report import build_report, plot_ceilings, plot_title, roofline_points
    from .store import Store

    if out is not None and (not out.name or out.name in (".", "..") or out.is_dir()):
        raise _InputError(f"--out {str(out)!r}: expected a file name without extension, e.g. docs/decode-roofline")
    store = Store(db, read_only=True)
    rid = store.resolve_run(run_spec)
    rep = build_report(store, rid, by="op")
    points = roofline_points(rep)
    ceilings = plot_ceilings(rep)
    if ceilings is None:
        raise _InputError(
            f"run {rid}: no DRAM ceiling known for its GPU; add it to configs/peaks.yaml (or a ROCROOF_PEAKS "
            "table), then re-ingest the capture with rocroof ingest --replace"
        )
    if not len(points) or not (points["flops_per_s"] > 0).any():
        raise _InputError(
            f"run {rid}: no modelled FLOPs (the run has no op metadata); collect with the llama.cpp hook's sidecar "
            "or --attach the op metadata JSON when ingesting"
        )
    base = out or Path(f"roofline-run{rid}")
    paths = save_roofline(points, ceilings, plot_title(rep), base)
    _echo("Wrote " + ", ".join(str(p) for p in paths))


@cli.command()
@click.argument("sql")
@_db_option
@_format_option
def query(sql: str, db: str, fmt: str) -> None:
    """Run one read-only SQL query on the database.

    Views: dispatch_dram, op_invocation_summary, op_roofline (measured beside modelled bytes
    and FLOPs), op_summary, kernel_summary; tables: run, run_ceiling, pass, dispatch,
    counter_value, counter_instance, marker_range, op_invocation, op_model, op_edge,
    op_operand, dram_traffic, run_note... (docs/schema.md). Statements that write are refused.
    Wide results print one record per block in the terminal; use --format csv for a sheet.

    \b
    Examples:
      rocroof query "SELECT op, SUM(duration_ns)/1e3 AS us FROM dispatch_dram WHERE run_id=1 GROUP BY op"
      rocroof query "SELECT * FROM run_note WHERE severity='warning'" --format markdown
    """
    from .report import render_frame
    from .store import Store

    store = Store(db, read_only=True)
    store.check()
    _echo(render_frame(store.query(sql), fmt), nl=False)  # type: ignore[arg-type]


@cli.command()
@_db_option
@click.option("--run", "run_spec", default="latest", show_default=True, help="Run id or 'latest'.")
@click.option("--evaluation", type=int, default=None, help="One graph evaluation (0-based; e.g. one decode token).")
@click.option("--format", "fmt", type=click.Choice(["dot", "json"]), default="dot", show_default=True)
def graph(db: str, run_spec: str, evaluation: int | None, fmt: str) -> None:
    """Export the op graph: producer -> consumer edges between op invocations, with time and bytes.

    Edges come from the op metadata's storage ids (the last writer of a storage feeds its
    readers). Nodes carry op, name, GPU time and DRAM bytes; the critical path (the longest
    chain by time in its evaluation) is red in DOT.

    \b
    Examples:
      rocroof graph --run 3 --evaluation 1 | dot -Tsvg > token1.svg
      rocroof graph --run 3 --format json > graph.json
    """
    import json

    from .analysis import graph_dot, stored_graph
    from .store import Store

    store = Store(db, read_only=True)
    rid = store.resolve_run(run_spec)
    nodes, edges = stored_graph(store, rid, evaluation)
    if not len(nodes):
        every, _ = stored_graph(store, rid, None)
        evals = sorted({int(e) for e in every["evaluation"].dropna()}) if len(every) else []
        if evaluation is not None and evals:
            raise InputError(f"run {rid}: no evaluation {evaluation}; it has evaluations {evals[0]}–{evals[-1]}")
        raise InputError(f"run {rid}: no op graph (it needs op metadata: the hook's sidecar or the fork's JSON)")
    if fmt == "dot":
        _echo(graph_dot(nodes, edges, f"run {rid}").rstrip("\n"))
        return
    doc = {
        "run_id": rid,
        "evaluation": evaluation,
        "nodes": json.loads(nodes.to_json(orient="records")),
        "edges": json.loads(edges.to_json(orient="records")),
    }
    _echo(json.dumps(doc, indent=1))


@cli.command()
@click.argument("run_a")
@click.argument("run_b")
@_db_option
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="markdown",
    show_default=True,
    help="markdown pastes into a PR review; table for terminals; csv gives every node; json every node plus the "
    "whole-graph totals and per-op rows.",
)
@click.option("--top", type=int, default=15, show_default=True, help="Largest node changes to list.")
@click.option(
    "--min-change",
    type=click.FloatRange(0, 100, max_open=True),
    default=5.0,
    show_default=True,
    metavar="PCT",
    help="Changes under PCT % of A's time are noise, whatever the spread.",
)
@click.option(
    "--min-change-us",
    type=click.FloatRange(0),
    default=0.25,
    show_default=True,
    metavar="US",
    help="Changes under US µs per call are noise, whatever the spread.",
)
def diff(run_a: str, run_b: str, db: str, fmt: str, top: int, min_change: float, min_change_us: float) -> None:
    """Compare RUN_B against RUN_A per ggml op: time and DRAM bytes, with noise told apart.

    Nodes are matched by op, node name and shapes. A node evaluated several times (decode
    tokens, repetitions) gives its own spread: a change smaller than twice the standard error
    of the difference, under --min-change or under --min-change-us is reported as noise, not as
    a gain (repeats of one decode run on the H200 moved 1-5 µs kernels by up to 0.2 µs, 8.5%).
    When nodes appear in one run only (fusion on vs off, another model) the whole graph's time per
    evaluation is compared too. The heading names each run by its capture and the labels that
    differ between the two.

    \b
    Examples:
      rocroof diff 3 4                          # Markdown for a PR comment
      rocroof diff 3 latest --format table --top 30
      rocroof diff 3 4 --min-change 2            # call 2% changes real (quiet machine, many samples)
    """
    from .diff import diff_runs, render_diff
    from .report import run_labels
    from .store import Store

    store = Store(db, read_only=True)
    store.check()
    a, b = store.resolve_run(run_a), store.resolve_run(run_b)

    def describe(rid: int, own: dict[str, str], other: dict[str, str]) -> str:
        path = store.query(f"SELECT source_path FROM run WHERE run_id = {rid}")["source_path"].iloc[0]
        text = ", ".join(f"{k}={v}" for k, v in own.items() if other.get(k) != v)  # what tells A from B
        return " ".join(x for x in (str(path or ""), f"[{text}]" if text else "") if x)

    la, lb = run_labels(store, a), run_labels(store, b)
    names = (describe(a, la, lb), describe(b, lb, la))
    for name, value in (("--min-change", min_change), ("--min-change-us", min_change_us)):
        if value != value:  # NaN passes click's range check
            raise click.BadParameter("expected a number, not nan", param_hint=name)
    d = diff_runs(store, a, b, min_change=min_change / 100, min_change_us=min_change_us)
    _echo(render_diff(d, fmt, top=top, names=names).rstrip("\n"))


# ---- rocroof merge ------------------------------------------------------------------------------


@cli.command()
@click.argument("sources", nargs=-1, required=True, metavar="SOURCE...")
@click.option(
    "--into",
    "into",
    required=True,
    metavar="DB",
    help="Target database: a SQLite file (created when absent) or a URL (postgresql://user@host/db).",
)
def merge(sources: tuple[str, ...], into: str) -> None:
    """Copy every run of the SOURCE databases, with all its rows, into one database.

    SOURCEs and the target are SQLite files or URLs (postgresql://...), in any mix. Each run is
    copied in one transaction and gets a new run id; a run whose content the target already
    holds (same raw capture) is skipped and named. All databases must be at this rocroof's
    schema version: run 'rocroof db upgrade --db X' on an older one first.

    \b
    Examples:
      rocroof merge alice.db bob.db --into team.db
      rocroof merge sweep-*.db --into postgresql://rocroof@dbhost/rocroof
      rocroof merge postgresql://rocroof@dbhost/rocroof --into snapshot.db
    """
    from .store import shown_db
    from .store.merge import MergedRun
    from .store.merge import merge as merge_databases

    def report_run(r: MergedRun) -> None:
        what = f"run {r.source_run_id} of {r.source}" + (f" ({r.source_path})" if r.source_path else "")
        if r.run_id is not None:
            _echo(f"Copied {what} as run {r.run_id} ({r.rows:,} rows)")
        elif r.existing_run_id is not None:
            _echo(f"Skipped {what}: already stored as run {r.existing_run_id} (same content)")
        else:
            _echo(f"Skipped {what}: stored by another writer meanwhile (same content)")

    done = merge_databases(list(sources), into, on_run=report_run)
    copied = [r.run_id for r in done if r.run_id is not None]
    ids = f" (run ids {min(copied)}–{max(copied)})" if len(copied) > 1 else f" (run {copied[0]})" if copied else ""
    _echo(f"Merged {len(copied)} run(s) into {shown_db(into)}{ids}; skipped {len(done) - len(copied)} already there.")


# ---- end of rocroof merge -----------------------------------------------------------------------


@cli.command()
@click.argument("capture", type=click.Path(path_type=Path))
@click.option(
    "--out", "out", type=click.Path(path_type=Path), required=True, help="Destination directory (new or empty)."
)
@click.option("--gzip", "compress", is_flag=True, help="Compress .sqlite/.db/.csv/.json files (rocroof reads .gz).")
@click.option("--host", "hosts", multiple=True, metavar="NAME", help="Another host name to replace (repeatable).")
def scrub(capture: Path, out: Path, compress: bool, hosts: tuple[str, ...]) -> None:
    """Copy CAPTURE without environment variables, host names or paths, to share it.

    Profiler output embeds the profiled process's whole environment (tokens included), the
    host name, the working directory and every path on the command line. The copy keeps the
    measurements (ingest it: same numbers), drops binary reports (.ncu-rep, .nsys-rep; their
    exports stay), keeps GGML_* variables, and shortens absolute paths to their last part.

    \b
    Examples:
      rocroof scrub rocroof-out/20261130-1225 --out share/dense-prefill --gzip
      rocroof scrub cap/ --out cap-clean --host gpu-node-17
    """
    from .scrub import SHORT_HOST, scrub_capture

    rep = scrub_capture(capture, out, compress=compress, extra_hosts=hosts)
    removed = ", ".join(f"{n} {kind}(s)" for kind, n in sorted(rep.removed.items())) or "nothing"
    lines = [f"Wrote {len(rep.written)} file(s) to {out}; removed {removed}; paths shortened to their last part."]
    if rep.hosts:
        lines.append(f"  host names replaced with 'host': {', '.join(rep.hosts)}")
        short = [h for h in rep.hosts if len(h) < SHORT_HOST]
        if short:
            lines.append(
                f"  warning: {', '.join(short)} replaced in host fields only (shorter than {SHORT_HOST} characters, it "
                "would hit ordinary words in free text): check logs and commands for it before sharing"
            )
    if rep.dropped:
        lines.append(f"  left out (binary reports; their exports are kept): {', '.join(rep.dropped)}")
    lines.append(
        "Search it before sharing; compressed and SQLite files need e.g. "
        f"find {shlex.quote(str(out))} -type f -exec sh -c "
        '\'zcat -f "$1" | grep -a -q -e "$USER" && echo "$1"\' _ {} \\;'
    )
    _echo("\n".join(lines))


@cli.group()
def db() -> None:
    """Database schema: status and upgrades.

    \b
    Examples:
      rocroof db status --db team.db
      rocroof db upgrade --db team.db
    """


@db.command("status")
@_db_option
def db_status(db: str) -> None:
    """Show the schema migrations and whether they are applied.

    \b
    Example:
      rocroof db status --db team.db
    """
    from .store import Store
    from .store.migrations import MIGRATIONS, SCHEMA_VERSION

    store = Store(db, read_only=True)
    known = {name for name, _ in MIGRATIONS}
    for name, applied in store.status():
        if name not in known:
            _echo(f"{name}: applied {applied} (unknown to rocroof {__version__}: written by a newer rocroof)")
        else:
            _echo(f"{name}: {'applied ' + applied if applied else 'pending'}")
    _echo(f"rocroof {__version__} knows schema version {SCHEMA_VERSION}")


@db.command("upgrade")
@_db_option
def db_upgrade(db: str) -> None:
    """Create the schema or apply pending migrations.

    \b
    Example:
      rocroof db upgrade --db team.db
    """
    from .store import Store

    ran = Store(db).upgrade(recreate_views=True)
    _echo(f"applied {', '.join(ran)}" if ran else "schema is up to date")


def _terminated(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM (kill, scancel, a batch system's time limit): stop as on Ctrl-C


def main(argv: Sequence[str] | None = None) -> None:
    """Console entry point.

    SIGTERM is handled as Ctrl-C: a profiler run stops with rocroof, a transaction in progress
    rolls back, a sweep marks its running points interrupted.
    """
    import signal

    if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _terminated)
    cli.main(args=list(argv) if argv is not None else None, prog_name="rocroof")


if __name__ == "__main__":  # pragma: no cover
    main()
