"""``rocroof ingest``, ``collect`` and ``scrub``: captures in, runs stored, captures shared."""

from __future__ import annotations

import shlex
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import click

from ..errors import InputError, RocroofError
from ..text import one_line
from .app import (
    DEFAULT_DB,
    cli,
    db_arg,
    db_option,
    echo,
    lock_notice,
    parse_labels,
    progress_bar,
    stderr_console,
)

if TYPE_CHECKING:
    from rich.progress import Progress  # imported where used: not needed for `rocroof --help`

    from ..capture.readers import Found


def _ingest_one(
    path: Path,
    db: str,
    labels: dict[str, str],
    attach: list[Path],
    arch: str | None,
    replace: bool,
    keep_instances: bool,
    keep_warmup: bool,
    found: Found | None = None,
) -> str:
    """Read, attribute and store one capture; the summary to print.

    ``found`` is the :class:`~rocroof.capture.readers.Found` of a capture that is part of a folder
    (its own files, its name); ``path`` is then its folder.
    """
    from ..capture.readers import read_capture
    from ..ingest.windows import ingest
    from ..report.tables import stored_reports
    from ..store import Store

    store = Store(db, on_wait=lock_notice())  # a wait for another writer: a line on stderr, Ctrl-C stops it
    try:
        store.preflight()
        name = found.name if found is not None else str(path)
        with progress_bar() as progress:
            task = progress.add_task(f"reading {one_line(name)}", total=None, detail="")  # the path as typed
            seen: dict[str, Any] = {}

            def read() -> Any:
                capture = read_capture(
                    path,
                    attachments=attach,
                    keep_instances=keep_instances,
                    only=found.files if found is not None else None,
                )
                progress.update(
                    task, description=f"attributing {sum(len(p.dispatches) for p in capture.passes):,} dispatches"
                )
                # what the summary says of the capture (its file list and passes), not the capture: the
                # build lets the reader's frames go as it takes what the run needs of them
                seen["capture"] = SimpleNamespace(
                    files_read=list(capture.files_read),
                    source_format=capture.source_format,
                    passes=[None] * len(capture.passes),
                )
                return capture

            def cb(stage: str, done: int, total: int) -> None:
                progress.update(
                    task, description=f"writing {stage}", completed=done, total=total, detail=f"{done:,}/{total:,} rows"
                )

            def write(frames: Any) -> int:
                seen["facts"] = _facts(seen["capture"], frames)
                # the write lets go of each frame once stored: peak memory is not the run twice
                return store.write_run(
                    frames, labels=labels, replace=replace, progress=cb, release=True, reports=stored_reports
                )

            run_id, frames = ingest(read, write, arch_override=arch, source_path=name, keep_warmup=keep_warmup)
            facts = seen["facts"]
    finally:
        store.close()
    facts.update(run=dict(frames.run), notes=list(frames.notes))  # final once every window is written
    return _summary(run_id, name, facts, db, store.replaced_run_id) + _upgrade_line(store.upgraded, db)


def _upgrade_line(applied: list[str], db: str) -> str:
    """A line saying that the write upgraded an older database's schema ('' when it did not)."""
    if not applied:
        return ""
    from ..store import shown_db  # a URL's password masked
    from ..store.migrations import SCHEMA_VERSION

    return (
        f"\nUpgraded {one_line(shown_db(db))} to schema version {SCHEMA_VERSION} (applied {', '.join(applied)}): "
        "an older rocroof can no longer read it"
    )


def _next_command(run_id: int, db: str, has_ops: bool) -> str:
    """The report to run next, as a command that works pasted as it is (the database named unless default)."""
    where = db_arg(db)
    if has_ops:
        return f"Next: rocroof report{where} --run {run_id} --by op   (or --by kernel, --by dispatch)"
    return f"Next: rocroof report{where} --run {run_id} --by kernel   (no ggml ops in this run; or --by dispatch)"


def _facts(capture: Any, frames: Any) -> dict[str, Any]:
    """What the ingest summary says of a run, taken before the write lets its frames go.

    A windowed run's counts are summed as the write takes each window (``frames.windows`` is
    wrapped); its run row and notes are final only after the write (the caller adds them then).
    """
    facts: dict[str, Any] = {
        "files": [Path(f).name for f in capture.files_read],
        "source_format": capture.source_format,
        "passes": len(capture.passes),
        **dict.fromkeys(("timing_dispatches", "ops", "attributed", "known_reads", "known_writes", "bounded"), 0),
    }
    if frames.windows is None:
        _add_counts(facts, frames.tables)
        return facts

    def counted(windows: Any) -> Any:
        for window in windows:
            _add_counts(facts, window)
            yield window

    frames.windows = counted(frames.windows)
    return facts


def _add_counts(facts: dict[str, Any], tables: dict[str, Any]) -> None:
    """Add the summary's counts of ``tables`` (a run's, or one window's) to ``facts``."""
    disp = tables.get("dispatch")
    if disp is None or not len(disp):
        facts["ops"] += len(tables.get("op_invocation", ()))
        return
    # a mask, not a copy of the timing dispatches' rows (every column: ~200 MB at 10^6 of 2x10^6 rows)
    timing = (disp["timing_dispatch_index"] == disp["dispatch_index"]).fillna(False).to_numpy(dtype=bool)
    dram = tables.get("dram_traffic")
    n = int(timing.sum())
    facts["timing_dispatches"] += n
    facts["ops"] += len(tables.get("op_invocation", ()))
    facts["attributed"] += int((disp["op_index"].notna().to_numpy(dtype=bool) & timing).sum()) if n else 0
    if dram is not None and len(dram):
        facts["known_reads"] += int(dram["dram_read_bytes"].notna().sum())
        facts["known_writes"] += int(dram["dram_write_bytes"].notna().sum())
        facts["bounded"] += int((dram["dram_read_bytes"].isna() & dram["dram_read_bytes_min"].notna()).sum())


def _summary(
    run_id: int, path: Path | str, facts: dict[str, Any], db: str = DEFAULT_DB, replaced: int | None = None
) -> str:
    from ..report.render import ceiling_rule_text, gpu_text, timing_text

    run, n, files = facts["run"], facts["timing_dispatches"], facts["files"]
    gpu = gpu_text(run.get("gpu_name"), run.get("gpu_arch"))
    shown = ", ".join(one_line(f) for f in files[:6]) + (f" and {len(files) - 6} more" if len(files) > 6 else "")
    # one fact per line: the summary reads in a terminal and pastes into a log or a PR comment
    parts = [
        f"Stored run {run_id} from {one_line(str(path))} ({facts['source_format']}, {gpu or 'unknown GPU'}).",
        *(
            [f"  replaces run {replaced} (the same content, deleted: its labels kept unless given again)"]
            if replaced is not None
            else []
        ),
        f"  read {len(files)} file(s): {shown}",
        f"  {facts['passes']} pass(es), {n:,} dispatch(es) in the timing pass, "
        f"{facts['ops']:,} ggml op invocation(s), {facts['attributed']:,} dispatch(es) attributed "
        f"({run['attribution_method']})",
        f"  DRAM bytes known for {facts['known_reads']:,}/{n:,} reads ({facts['bounded']:,} bounded only) and "
        f"{facts['known_writes']:,}/{n:,} writes; durations from {timing_text(run['timing_source'])}",
    ]
    sample = next((note.message for note in facts["notes"] if note.code == "counter-sample"), None)
    if sample:
        parts.append(f"  {sample}")
    if run.get("dram_peak_gbps"):
        parts.append(f"  ceiling {run['dram_peak_gbps']:,.1f} GB/s{ceiling_rule_text(run)}: {run['dram_peak_source']}")
    warnings = [note for note in facts["notes"] if note.severity != "info"]
    if warnings:
        parts.append(f"{len(warnings)} warning(s):")
    text = "\n".join(parts)
    for note in warnings:
        text += f"\n  - {one_line(note.message)}"  # a path in a note (a newline in it) stays on its line
    text += "\n" + _next_command(run_id, db, facts["ops"] > 0)
    return text


@cli.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@db_option
@click.option(
    "--label",
    "labels",
    multiple=True,
    metavar="KEY=VALUE",
    help="Label the run (repeatable), e.g. --label model=q4_k; a value cannot hold * (the selector wildcard).",
)
@click.option(
    "--attach",
    multiple=True,
    type=click.Path(path_type=Path),
    help="Extra file of this run: ggml op metadata JSON, or a log with ggml-fused: lines.",
)
@click.option(
    "--arch",
    metavar="GFX",
    help="GPU architecture when the capture does not record it (gfx942, gfx90a... for AMD captures; sm_90... "
    "for Nsight ones).",
)
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
    """Store recorded profiler output: one run per capture, each PATH or each capture in a folder PATH.

    PATH is a capture directory or file, or a folder of captures. The format is detected:
    rocprofv3 CSV (also 'rocpd convert' CSV and multi-pass pmc_N/ or pass_N/ directories),
    rocprofv3 rocpd databases (*_results.db), rocprofiler-compute workloads, legacy rocprof, RPD
    traces, Nsight Systems SQLite + Nsight Compute raw CSV exports, and ggml op metadata JSON
    (AMD's GGML_ROOFLINE_OUT). Files may be gzip-compressed.

    A folder is one capture, read whole, when it holds a 'rocroof collect' manifest, is a
    rocprofiler-compute workload, or has counter-pass sub-folders (rocprofv3's pmc_N/, pass_N/).
    In any other folder each sub-folder with profiler output is a capture of its own (or a folder
    of them), and the folder's own files are one per profiler (one per RPD file); a folder of one
    capture is read whole. Several captures are stored one by one, going on after a bad one; the exit status is 1
    if any was not stored. A capture already stored (same content) is an error when it is a PATH
    itself (--replace stores it again) and skipped when found in a folder PATH: ingesting a folder
    again stores only its new captures.

    Each run is written in one transaction: a failed ingest stores nothing. Columns that are only
    stored (counter values, sizes, timestamps) wait in unnamed temporary files in TMPDIR, or
    ROCROOF_SPILL_DIR: up to ~0.7 kB of disk per dispatch, gone when the ingest ends.

    \b
    Examples:
      rocroof ingest out/ --label model=llama-3b --label ubatch=512
      rocroof ingest examples/h200                     # three captures: three runs
      rocroof ingest workloads/vcopy/MI300X_A1 --db team.db
      rocroof ingest kernel_trace_dir/ --attach roofline.json --arch gfx1151
    """
    from ..capture.readers import find_captures

    label_map = parse_labels(labels)
    if arch is not None:  # once, before any capture is read (a folder's captures would each refuse it)
        from ..analysis.arch import check_arch

        arch = check_arch(arch, "--arch")
    # (the PATH given, the capture found at or in it)
    runs = [(path, found) for path in paths for found in find_captures(path)]
    if attach and len(runs) > 1:
        raise InputError("--attach belongs to one run; ingest one capture at a time with it")
    if len(runs) == 1:
        _, found = runs[0]
        echo(_ingest_one(found.path, db, label_map, list(attach), arch, replace, instances, keep_warmup, found))
        return
    # several captures: store each in its own transaction, skip those already stored, go on after a bad one
    from ..errors import DuplicateRunError
    from ..store import Store

    store = Store(db, on_wait=lock_notice())  # a database that cannot be used stops everything, once
    try:
        store.preflight()
    finally:
        store.close()

    failed = []
    for given, found in runs:
        name = found.name
        try:
            echo(_ingest_one(found.path, db, label_map, list(attach), arch, replace, instances, keep_warmup, found))
        except DuplicateRunError as exc:
            reason = str(exc)  # names the capture already, as a rule
            reason = reason if reason.startswith(name) else f"{name}: {reason}"
            if found.path == given and found.files is None:  # a PATH itself: an error, as when it is given alone
                stderr_console().print(f"Error: {one_line(reason)}", markup=False, highlight=False, soft_wrap=True)
                failed.append(name)
            else:
                echo(one_line(f"Skipped {reason}"))
        except RocroofError as exc:
            stderr_console().print(f"Error: {one_line(str(exc))}", markup=False, highlight=False, soft_wrap=True)
            failed.append(name)
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
    help="Preset (dram; roofline: + FLOP counters; ops: + tensor/MFMA and integer counters, dp4a per opcode on "
    "NVIDIA, slow) or names: TCC_EA0_RDREQ_sum,... for rocprofv3, dram__bytes_read.sum,... for ncu. "
    "[default: dram for rocprofv3, roofline for ncu]",
)
@click.option(
    "--out",
    "out",
    type=click.Path(path_type=Path),
    default=None,
    help="Directory for the raw profiler output (default: rocroof-out/<timestamp>).",
)
@db_option
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
@click.option(
    "--sample",
    "sample_spec",
    default=None,
    metavar="SPEC",
    help="Graph evaluations the counter pass measures: prefill=N,decode=M (the first N prompt ubatches and M "
    "decoded tokens after warm-up), all, or auto: the first prompt ubatch and the first decoded token, or the "
    "token alone when both together exceed 800 kernels (~2 minutes of ncu). The trace pass times every kernel "
    "either way. [default: auto with ncu; all with rocprofv3]",
)
@click.option(
    "--max-kernels",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Refuse, after the trace pass, a counter pass that would count more than N kernels.",
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
    sample_spec: str | None,
    max_kernels: int | None,
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

    Counters are slow (ncu replays each kernel: dram 1 pass, ~45 ms; roofline 3-6, ~160 ms; ops 8-9
    with SASS patching, ~280 ms): after the trace pass,
    collect reads it, picks the graph evaluations of --sample, prints how many kernels the
    counter pass will count and how long that takes, and counts only those (ncu --launch-skip
    / --launch-count). Reports then say which evaluations the DRAM bytes come from; times
    cover every evaluation.

    llama.cpp tools that work under collect: llama-completion (give -no-cnv, or it waits for
    input), llama-bench, llama-mtmd-cli, and llama-cli with --single-turn (or -no-cnv where the
    build has it) and a prompt. The application's stdin is closed.

    \b
    Examples:
      rocroof collect -- llama-bench -m qwen3-30b-a3b-q4_k.gguf -p 512 -n 0 -r 1
      rocroof collect --profiler ncu -- llama-completion -m m.gguf -p "$(cat prompt.txt)" -n 16 -no-cnv
      rocroof collect --profiler ncu --sample prefill=1,decode=4 -- llama-bench -m m.gguf -p 512 -n 16 -r 1
      rocroof collect --counters roofline --out cap/ -- llama-completion -m m.gguf -p hi -n 8 -no-cnv
      rocroof collect --arch gfx942 --dry-run -- ./app
    """
    import datetime as dt

    from ..capture.collect import execute, make_plan
    from ..capture.profilers import choose_profiler
    from ..ingest.sample import DEFAULT_SAMPLE, parse_sample, sampler_for

    label_map = parse_labels(labels)  # before the (long) application runs, not after
    spec = parse_sample(sample_spec) if sample_spec is not None else None
    if arch is not None:
        from ..analysis.arch import check_arch

        arch = check_arch(arch, "--arch")  # the check of ingest --arch and of a sweep's arch
    if counters is not None and not counters.strip():
        raise InputError("--counters is empty; give a preset (dram, roofline, ops) or counter names")
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
    traced = any(r.kind == "trace" for r in plan.runs)
    if spec is None:  # the default: a sample where the profiler can count launch windows
        spec = parse_sample(DEFAULT_SAMPLE if plan.profiler.startswith("ncu") and traced else "all")
    elif spec.auto and not (plan.profiler.startswith("ncu") and traced):
        spec = parse_sample("all")
    if not spec.everything and not plan.profiler.startswith("ncu"):
        raise InputError(
            f"--sample {spec}: rocprofv3 cannot count a window of a process's dispatches (--kernel-iteration-range "
            "counts per kernel name, -P periods are timed, --selected-regions leaves counters on in ROCm 7.0): its "
            "counter passes count every dispatch; leave --sample out (or give --sample all)"
        )
    if not spec.everything and not traced:
        raise InputError(
            f"--sample {spec}: a counter sample is planned from the trace pass, and this plan has none "
            "(no nsys found: give --nsys PATH, or --sample all)"
        )
    # the plan quotes the command, its environment and the output folder as typed: each piece one line,
    # controls escaped (one_line), so that a line of the plan is the plan's, and no terminal acts on them
    lines = [
        f"GPU {one_line(plan.device.arch)}: {one_line(plan.profiler)}, "
        f"{sum(r.kind in ('trace', 'counter') for r in plan.runs)} application run(s), "
        f"output {one_line(plan.output_format)}, raw output in {one_line(str(out_dir))}"
    ]
    if plan.settings:
        lines.append("  settings: " + one_line(", ".join(f"{k}={v}" for k, v in plan.settings.items())))
    if plan.profiler == "ncu":
        lines.append("  no nsys (Nsight Systems): no trace run; durations will come from ncu's serialised replay")
    if not spec.everything:
        lines.append(
            f"  counter sample: {spec} (graph evaluations after warm-up; planned from the trace pass, before the "
            "counter runs)"
        )
    lines += [f"  warning: {one_line(r.warning)}" for r in plan.runs if r.warning]
    for run in plan.runs:
        what = {
            "trace": "timings",
            "export": "export the report",
            "probe": "the GPU's copy bandwidth (1 GiB device-to-device copies, about a second; no counters): the "
            "run's measured DRAM ceiling (--no-bandwidth-probe skips it)",
        }.get(run.kind, f"counters {' '.join(run.counters)}")
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in run.env.items())
        command = one_line(f"{env + ' ' if env else ''}{shlex.join(run.argv)}")
        lines.append(f"  {one_line(run.label)}: {one_line(what)}\n    {command}")
    if dry_run:
        echo("\n".join(lines))
        return
    from ..store import Store

    store = Store(db, on_wait=lock_notice())
    try:
        store.preflight()
    finally:
        store.close()
    stderr_console().print("\n".join(lines), markup=False, soft_wrap=True)  # commands stay whole, to copy

    def on_run(i: int, total: int, run: Any) -> None:
        doing = {
            "export": "exporting the report",
            "probe": "measuring the GPU's copy bandwidth (rocroof.analysis.bandwidth)",
        }.get(run.kind, f"running the application under {run.argv[0]}")
        line = one_line(f"[{i + 1}/{total}] {run.label}: {doing} ...")  # the profiler's path as typed
        stderr_console().print(line, markup=False, highlight=False, soft_wrap=True)

    # each profiler run in its own process group, stopped as a whole (SIGINT, then SIGTERM, then SIGKILL)
    # when rocroof is interrupted: the application a profiler started must not outlive it
    import threading

    from ..sweep.run import cancellable_runner

    progress = _CounterProgress()
    try:
        capture_dir = execute(
            plan,
            list(app),
            runner=cancellable_runner(threading.Event()),
            on_run=progress.before(on_run),
            sampler=None if spec.everything else sampler_for(spec),
            on_sample=_print_sample,
            max_kernels=max_kernels,
            on_progress=progress.update,
        )
    finally:
        progress.stop()
    echo(_ingest_one(capture_dir, db, label_map, [], arch, False, True, False))


def _print_sample(sample: Any, estimate_s: float | None) -> None:
    """The counter sample planned from the trace pass: its notes and size, each one line (controls escaped)."""
    for note in sample.manifest.get("notes") or []:
        stderr_console().print(one_line(f"  note: {note}"), markup=False, highlight=False, soft_wrap=True)
    text = one_line(str(sample.manifest.get("description") or ""))
    when = f"; about {_duration(estimate_s)} at the profiler's usual rate" if estimate_s is not None else ""
    windows = len(sample.windows)
    runs = f" in {windows} application runs" if windows > 1 else ""
    stderr_console().print(
        f"counter pass: {sample.kernels:,} of {sample.launches:,} kernel launches{runs} ({text}){when}",
        markup=False,
        soft_wrap=True,
    )


def _duration(seconds: float) -> str:
    """``45 s``, ``3 min 20 s``, ``2 h 05 min``."""
    s = int(round(seconds))
    if s < 90:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


class _CounterProgress:
    """A progress bar with an ETA for a counter run: kernels counted of those planned."""

    def __init__(self) -> None:
        self._progress: Progress | None = None
        self._task: Any = None
        self._run: Any = None

    def update(self, run: Any, done: int, planned: int | None) -> None:
        if self._run is not run:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self.stop()
            self._run = run
            self._progress = Progress(
                TextColumn("  {task.description}", markup=False),  # the run's label as text, not console markup
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("kernels"),
                TimeElapsedColumn(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                console=stderr_console(),
                transient=False,
            )
            self._progress.start()
            self._task = self._progress.add_task(one_line(run.label), total=planned)
        assert self._progress is not None
        self._progress.update(self._task, completed=max(done - 1, 0) if planned is None or done < planned else done)

    def before(self, on_run: Any) -> Any:
        """``on_run`` that first ends the bar of the previous run."""

        def wrapped(i: int, total: int, run: Any) -> None:
            self.stop()
            on_run(i, total, run)

        return wrapped

    def stop(self) -> None:
        if self._progress is not None:
            self._progress.stop()
        self._progress, self._run = None, None


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
    exports stay), keeps GGML_* variables, and shortens absolute paths to their last part
    (secrets that end a path are redacted too). Nothing is copied as it is: files rocroof does
    not read, symbolic links, and logs, CSV or JSON files that are not UTF-8 text (binary data,
    another encoding) are left out and listed; a capture of no files rocroof reads is refused.
    CAPTURE is a capture directory, or a capture that is one file (an RPD, rocpd or Nsight
    Systems SQLite file, plain or .gz): OUT then holds its copy under the same name.

    \b
    Examples:
      rocroof scrub rocroof-out/20261130-1225 --out share/dense-prefill --gzip
      rocroof scrub cap/ --out cap-clean --host gpu-node-17
      rocroof scrub mytrace.rpd.gz --out share/rpd
    """
    from ..capture.scrub import SHORT_HOST, scrub_capture

    rep = scrub_capture(capture, out, compress=compress, extra_hosts=hosts)
    removed = ", ".join(f"{n} {kind}(s)" for kind, n in sorted(rep.removed.items())) or "nothing"
    lines = [
        f"Wrote {len(rep.written)} file(s) to {out} ({len(rep.rewritten)} rewritten); removed or replaced {removed}; "
        "paths shortened to their last part."
    ]
    if rep.hosts:
        lines.append(f"  host names replaced with 'host': {', '.join(rep.hosts)}")
        short = [h for h in rep.hosts if len(h) < SHORT_HOST]
        if short:
            lines.append(
                f"  warning: {', '.join(short)} replaced in host fields only (shorter than {SHORT_HOST} characters, it "
                "would hit ordinary words in free text): check logs and commands for it before sharing"
            )
    if rep.dropped:
        lines.append(f"  left out ({len(rep.dropped)}):")
        lines += [f"    {name}: {why}" for name, why in sorted(rep.dropped.items())]
    lines.append(
        "Search it before sharing; compressed and SQLite files need e.g. "
        f"find {shlex.quote(str(out))} -type f -exec sh -c "
        '\'zcat -f "$1" | grep -a -q -e "$USER" && echo "$1"\' _ {} \\;'
    )
    echo("\n".join(lines))
