"""Reading stored runs: `rocroof runs`, `report`, `advise`, `export`, `fleet`, `plot`, `query`, `graph`, `diff`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from ..errors import InputError
from ..text import one_line
from .app import (
    FORMATS,
    FiniteFloatRange,
    all_columns_option,
    cli,
    db_option,
    echo,
    format_option,
    label_option,
    raw_option,
    stderr_console,
)

#: Rows ``rocroof report`` shows in a table or Markdown without --top (the longest; the count of the
#: rest below them; a GitHub comment holds 65,536 characters, ~300 rows of a report table).
MARKDOWN_ROWS = 100
#: Rows ``rocroof query`` shows at most as a table or Markdown (csv and json stream them all).
TABLE_ROWS = 10_000


#: --run's help: every command that takes one run.
RUN_HELP = (
    "Run id, 'latest', or labels: key=value[,key=value] picking one run (* matches any text; "
    "latest:key=value the newest of several)."
)


@cli.command()
@db_option
@format_option
@click.option(
    "--notes", "notes_for", default=None, metavar="RUN", help="Show all notes of one run (an id or 'latest') instead."
)
@label_option
def runs(db: str, fmt: str, notes_for: str | None, label_filters: tuple[str, ...]) -> None:
    """List stored runs (or one run's notes with --notes RUN).

    \b
    Examples:
      rocroof runs
      rocroof runs --label model=dense-tiny --label env=fusion   # a sweep's points
      rocroof runs --label 'model=moe*'
      rocroof runs --notes 3                  # every note of run 3 (missing counters, ...)
      rocroof runs --notes latest
      rocroof runs --format json --db team.db
    """
    import sqlalchemy as sa

    from ..report.tables import render_frame, runs_for_people, runs_frame
    from ..store import Store, schema

    store = Store(db, read_only=True)
    store.check()
    if notes_for is not None:
        if label_filters:  # one run's notes: a label selection has nothing to select
            raise InputError(
                "--notes shows one run's notes: give the run to --notes (labels too: --notes model=x), not --label"
            )
        rid = store.resolve_run(notes_for)
        df = store.frame(
            sa.select(schema.run_note.c.severity, schema.run_note.c.code, schema.run_note.c.message)
            .where(schema.run_note.c.run_id == rid)
            .order_by(schema.run_note.c.note_index)
        )
    else:
        df = runs_frame(store, labels_as_mapping=fmt == "json")
        if label_filters:
            from ..labels import parse_selectors

            latest = next((t for t in label_filters if t.lower().startswith("latest:")), None)
            if latest is not None:
                raise InputError(f"--label {latest!r}: runs --label takes key=value (latest: picks one run for --run)")
            selector = parse_selectors(label_filters)
            df = df[df["run_id"].isin(store.runs_with_labels(selector))].reset_index(drop=True)
        if fmt in ("table", "markdown"):
            df, common = runs_for_people(df)
            if common:  # labels every listed run shares (a sweep's name, its device...) once, above the table
                echo(one_line(f"labels of every run below: {common}") + ("  " if fmt == "markdown" else ""))
            echo(render_frame(df, fmt, wrap=["labels"]), nl=False)  # type: ignore[arg-type]
            return
    echo(render_frame(df, fmt), nl=False)  # type: ignore[arg-type]


@cli.command()
@db_option
@click.option("--run", "run_spec", default="latest", show_default=True, help=RUN_HELP)
@click.option(
    "--by",
    type=click.Choice(["op", "kernel", "dispatch", "invocation"]),
    default="op",
    show_default=True,
    help="One row per ggml op, kernel name, timing-pass dispatch, or op invocation.",
)
@click.option(
    "--top",
    type=click.IntRange(min=1),
    default=None,
    help="Only the first N rows (longest first). Tables and Markdown show the longest 100 unless --top says "
    "otherwise; csv, json and html carry every row.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice([*FORMATS, "html"]),
    default="table",
    show_default=True,
    help="table for terminals, markdown for PR reviews, html (tables + roofline plot, one file), csv/json for "
    "scripts (raw values, units in names).",
)
@raw_option
@all_columns_option
def report(db: str, run_spec: str, by: str, top: int | None, fmt: str, raw: bool, all_columns: bool) -> None:
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
    out whole columns and names them. The op report (table, Markdown) is the one stored with the
    run at ingest, printed in a fraction of a second; other reports are built from the run's
    tables (see 'rocroof db status' for runs stored without one).

    \b
    Examples:
      rocroof report                          # latest run, per ggml op
      rocroof report --run 3 --by dispatch --format json > run3.json
      rocroof report --by kernel --top 10 --format markdown
      rocroof report --run 3 --format html > run3.html
    """
    if fmt in ("markdown", "table") and top is None:
        # a PR comment holds 65,536 characters, and a terminal is read, not scrolled through 10^6
        # dispatches (laid out in ~10 minutes): the longest rows, the count of the others below them
        top = MARKDOWN_ROWS
    from ..report.quick import stored_text

    text = stored_text(db, run_spec, by, top, fmt, all_columns=all_columns)
    if text is not None:  # the op report stored with the run, read without pandas or SQLAlchemy
        echo(text, nl=False)
        return
    from ..report.tables import build_report, render
    from ..store import Store

    store = Store(db, read_only=True)
    rid = store.resolve_run(run_spec)
    if by in ("dispatch", "invocation") and fmt == "csv" and top is None:  # every row: written as it is read
        from ..report.tables import dispatch_csv_chunks, invocation_csv_chunks

        chunks = dispatch_csv_chunks if by == "dispatch" else invocation_csv_chunks
        for chunk in chunks(store, rid, raw=raw):
            echo(chunk, nl=False, exact=raw)
        return
    if by == "invocation" and fmt == "json" and top is None:  # one document, its rows written as read
        from ..report.tables import invocation_json_chunks

        for chunk in invocation_json_chunks(store, rid):
            echo(chunk, nl=False)
        return
    rep = build_report(store, rid, by=by, top=top)  # type: ignore[arg-type]
    if fmt == "html":
        echo(_html_report(rep, store), nl=False)
        return
    text = render(rep, fmt, raw=raw, all_columns=all_columns)  # type: ignore[arg-type]
    echo(text, nl=False, exact=raw and fmt == "csv")  # --raw: the CSV cells as stored


@cli.command()
@db_option
@click.option("--run", "run_spec", default="latest", show_default=True, help=RUN_HELP)
@click.option(
    "--top",
    type=click.IntRange(min=1),
    default=10,
    show_default=True,
    help="Op groups to show (JSON and CSV carry all of them).",
)
@format_option
@click.option(
    "--evaluations",
    "show_evaluations",
    is_flag=True,
    help="Also list every graph evaluation: wall, GPU busy and idle time, host time per op (with --format csv: "
    "the evaluations instead of the groups).",
)
def advise(db: str, run_spec: str, top: int, fmt: str, show_evaluations: bool) -> None:
    """What would pay most: op groups ranked by the time they would save at their roof, with causes.

    An op group is one op (or fused group) with one weight type and one set of shapes, e.g. the
    28 layers' ffn_gate matmuls of a decode token. Its recoverable time is its GPU time minus
    its time at the governing roof (the op_verdict view: DRAM bandwidth left of the ridge, the
    compute peak right of it). Causes are evidence: launch-bound (calls under 10 µs while the
    GPU idles between kernels), re-reads (measured DRAM bytes over 1.3x the model), cache-resident
    (L2 bytes over 3x DRAM bytes, in runs without cache flush), low occupancy or under one wave
    (Nsight launch metrics), compute-bound far below the peak.

    Above the table: launch overhead per graph evaluation (token): wall time from the first
    kernel's start to the last one's end, GPU busy time (the union of kernel intervals, so
    concurrent streams count once), the idle share, and the host time between op launches; the
    idle time bounds what CUDA/HIP graphs would recover. With MoE routing read back
    (tokens_per_expert): the imbalance per layer (busiest expert / balanced share).

    \b
    Examples:
      rocroof advise                            # latest run, top 10 groups
      rocroof advise --run 3 --format markdown  # for a PR review
      rocroof advise --format json | jq '.groups[0]'
      rocroof advise --evaluations              # every token's idle share
    """
    from ..report.advise import build_advice, render_advice
    from ..store import Store

    store = Store(db, read_only=True)
    advice = build_advice(store, store.resolve_run(run_spec))
    echo(render_advice(advice, fmt, top=top, evaluations=show_evaluations), nl=False)  # type: ignore[arg-type]


@cli.command()
@db_option
@click.option("--run", "run_spec", default="latest", show_default=True, help=RUN_HELP)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["perfetto"]),
    default="perfetto",
    show_default=True,
    help="perfetto: the JSON trace-event format ui.perfetto.dev and chrome://tracing open.",
)
@click.option(
    "--out",
    "out",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="File to write (default: standard output).",
)
def export(db: str, run_spec: str, fmt: str, out: Path | None) -> None:
    """Export a run as a timeline: GPU kernels per queue/stream, ggml op ranges per host thread.

    One track per GPU queue/stream with its kernels, one per host thread with the roctx/NVTX
    ranges of the ggml ops, and counter tracks for DRAM GB/s and cumulative DRAM MB. Each kernel
    carries its op, node, invocation, kernel ordinal and measured and modelled bytes; open the
    file at https://ui.perfetto.dev (it stays in your browser) or chrome://tracing. Times are the
    trace pass's, from the run's first event. Dispatches whose start or duration is unknown
    (no timestamps, timestamps the profiler rounded or that end before they start, no stored
    duration) are left out, with a warning that counts them by reason; a run with none known is
    an error.

    \b
    Examples:
      rocroof export --run 3 > run3.json
      rocroof export --run model=qwen3,env=fusion --out fusion.json
    """
    import json

    from ..report.perfetto import trace_document
    from ..store import Store

    store = Store(db, read_only=True)
    rid = store.resolve_run(run_spec)
    doc = trace_document(store, rid)
    other = doc["otherData"]
    left = int(other["dispatches_left_out"])
    drawn = sum(1 for e in doc["traceEvents"] if e["ph"] != "M")
    why = _left_out_why(other)
    if left and not drawn:
        raise InputError(
            f"run {rid}: none of its {left:,} dispatches has a known start and duration ({why}): nothing to draw; "
            "export a run with a trace pass (nsys, rocprofv3 --kernel-trace)"
        )
    if left:
        stderr_console().print(
            f"warning: {left:,} dispatch(es) left out of the timeline, their time unknown ({why})",
            markup=False,
            soft_wrap=True,
        )
    text = json.dumps(doc, separators=(",", ":"), allow_nan=False) + "\n"
    if out is None:
        echo(text, nl=False)
        return
    try:
        out.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise InputError(f"--out {out}: cannot write ({exc.strerror or exc})") from exc
    events = len(doc["traceEvents"])
    echo(f"Wrote {out}: {events:,} trace events (open it at https://ui.perfetto.dev or chrome://tracing)")


def _left_out_why(other: dict[str, Any]) -> str:
    """Why ``export`` left dispatches out, in words: the counts of :func:`rocroof.report.perfetto.trace_document`."""
    rid = other["rocroof_run_id"]
    reasons = (
        (
            "dispatches_without_timestamps",
            "without start and end timestamps: an Nsight Compute replay records durations only",
        ),
        ("dispatches_ending_before_start", "that end before they start"),
        ("dispatches_with_rounded_timestamps", "whose timestamps the profiler rounded: no duration"),
        (
            "dispatches_without_stored_duration",
            "with a start and a later end but no stored duration (duration_ns is NULL; if the ingest refused the "
            f"profiler's duration, 'rocroof runs --notes {rid}' says so)",
        ),
    )
    return "; ".join(f"{n:,} {text}" for key, text in reasons if (n := int(other[key])))


@cli.group(invoke_without_command=True)
@db_option
@click.option("--sweep", "sweep_name", default=None, help="The runs of this sweep (the label sweep=NAME).")
@label_option
@format_option
@click.option(
    "--plot",
    "plot_out",
    type=click.Path(path_type=str),  # as typed: a Path drops the trailing "/" of a folder
    default=None,
    help="Also draw the heat map (ops x runs, % of each run's GPU time) as PLOT.png and PLOT.svg. A dot in PLOT "
    "stays (f.v1: f.v1.png, f.v1.svg); a trailing .png or .svg is dropped (f.png: f.png, f.svg).",
)
@click.pass_context
def fleet(
    ctx: click.Context,
    db: str,
    sweep_name: str | None,
    label_filters: tuple[str, ...],
    fmt: str,
    plot_out: str | None,
) -> None:
    """Per ggml op across many runs (a sweep): share of time, % of roof, furthest runs.

    Which op costs the fleet most, and where is it furthest from its roof: one row per op (fused
    groups apart), with its share of all the runs' GPU time, its mean share of each run, its
    time-weighted % of roof over the measured invocations, and the runs where it is furthest from
    its roof (named by the labels that tell the runs apart). `fleet diff A B` compares two sides.

    \b
    Examples:
      rocroof fleet --sweep h200-tiny --plot fleet   # + fleet.png/.svg: ops x runs
      rocroof fleet --label model=dense-tiny --format markdown
      rocroof fleet diff env=fusion env=no-fusion --fail-on-regression 5
    """
    if ctx.invoked_subcommand is not None:
        return
    from ..labels import parse_selectors
    from ..report.fleet import fleet_view, left_out_line, render_fleet, split_by_ops
    from ..store import Store

    store = Store(db, read_only=True)
    selector = parse_selectors(label_filters, {"sweep": sweep_name} if sweep_name else None)
    selected = sorted(store.runs_with_labels(selector))
    if not selected:
        shown = ", ".join(f"{k}={v}" for k, v in selector.items()) or "any labels"
        raise InputError(f"no stored run has {shown} (rocroof runs lists the runs and their labels)")
    runs, left_out = split_by_ops(store, selected)  # per-op figures: the runs with op rows only
    if not runs:
        raise InputError(
            f"none of the {len(selected)} selected run(s) has ggml op rows (captured without ggml markers or op "
            "metadata): the fleet view is per op; rocroof report --by kernel shows each run"
        )
    left = left_out_line(left_out)
    if left and fmt in ("csv", "json"):  # the rows are data: the runs left out are said on stderr
        stderr_console().print(one_line(f"warning: {left}"), markup=False, highlight=False, soft_wrap=True)
    df = fleet_view(store, runs)
    if plot_out is not None:
        from ..report.fleet import fleet_matrix
        from ..report.plot import plot_base, save_fleet_heatmap

        base = plot_base(plot_out, "--plot", "docs/fleet")
        matrix = fleet_matrix(store, runs)
        kept = f"the {len(matrix)} ops with the most time of {len(df)}" if len(matrix) < len(df) else "every op"
        title = f"{sweep_name or 'runs'}: % of each run's GPU time per ggml op ({kept})"
        paths = save_fleet_heatmap(matrix, title, base)
        stderr_console().print(
            "Wrote " + ", ".join(one_line(str(p)) for p in paths), markup=False, highlight=False, soft_wrap=True
        )
    echo(render_fleet(df, fmt, runs=len(runs), left_out=left_out), nl=False)


@fleet.command("diff")
@db_option
@click.argument("side_a")
@click.argument("side_b")
@click.option("--top", type=click.IntRange(min=1), default=15, show_default=True, help="Op changes to show.")
@click.option(
    "--fail-on-regression",
    "fail_pct",
    type=FiniteFloatRange(min=0),
    default=None,
    metavar="PCT",
    help="Exit with status 1 when a pair's GPU time per graph evaluation grew by more than PCT percent (for CI).",
)
@format_option
def fleet_diff_command(db: str, side_a: str, side_b: str, top: int, fail_pct: float | None, fmt: str) -> None:
    """Compare two sets of runs pair by pair: SIDE_A and SIDE_B are a sweep name or key=value[,key=value].

    Runs are paired by the labels they share values of (the matrix values: model, phase, repeat...);
    a label whose values differ between the sides entirely (env=fusion vs env=no-fusion, a sweep's
    name) is what is compared. Each pair gets `rocroof diff` (its noise rules); the per-op changes of
    all pairs are ranked by the µs they add per graph evaluation. Unpaired runs are listed, and so
    are pairs with a run that has no ggml op rows (not compared; an error only when no pair is left).

    \b
    Examples:
      rocroof fleet diff env=fusion env=no-fusion
      rocroof fleet diff nightly-1201 nightly-1202 --fail-on-regression 5 --format markdown
    """
    from ..report.fleet import fleet_diff, regressions, render_fleet_diff, select_runs
    from ..store import Store

    store = Store(db, read_only=True)
    d = fleet_diff(store, select_runs(store, side_a), select_runs(store, side_b))
    echo(render_fleet_diff(d, fmt, side_a, side_b, top=top, fail_pct=fail_pct), nl=False)
    if fail_pct is not None:
        lines, failed = regressions(d, fail_pct)
        err = stderr_console()
        for line in lines:  # the pairs are named by their labels: one line each, controls escaped
            err.print(one_line(line), markup=False, highlight=False, soft_wrap=True)
        if failed:
            raise click.exceptions.Exit(1)


def _html_report(rep: Any, store: Any = None) -> str:
    import tempfile

    from ..report.plot import save_roofline
    from ..report.tables import build_report, plot_ceilings, plot_title, render_html, roofline_points

    svg = None
    ceilings = plot_ceilings(rep)
    points = roofline_points(rep) if rep.by == "op" and ceilings is not None else None
    if ceilings is not None and points is not None and len(points):
        with tempfile.TemporaryDirectory() as tmp:
            paths = save_roofline(points, ceilings, plot_title(rep), Path(tmp) / "roofline")
            svg = paths[1].read_text(encoding="utf-8")
    kernels = build_report(store, int(rep.run["run_id"]), by="kernel") if store is not None and rep.by == "op" else None
    experts_svg = None
    advice = None
    if store is not None and rep.by == "op":
        from ..report.advise import advice_html_rows, build_advice, expert_tokens
        from ..report.plot import expert_heatmap_svg

        tokens = expert_tokens(store, int(rep.run["run_id"]))
        if len(tokens):
            experts_svg = expert_heatmap_svg(tokens, f"run {rep.run['run_id']}: tokens routed per expert and layer")
        advice = advice_html_rows(build_advice(store, int(rep.run["run_id"])))
    return render_html(rep, svg, kernels, experts_svg=experts_svg, advice=advice)


@cli.command()
@db_option
@click.option("--run", "run_spec", default="latest", show_default=True, help=RUN_HELP)
@click.option(
    "--out",
    "out",
    type=click.Path(path_type=str),  # as typed: a Path drops the trailing "/" of a folder
    default=None,
    help="File name in an existing folder; writes OUT.png and OUT.svg (default: roofline-run<N>), and for MoE runs "
    "OUT-experts.png and OUT-experts.svg. A dot in OUT stays (moe.v2: moe.v2.png, moe.v2.svg); a trailing .png or "
    ".svg is dropped (r3.png: r3.png, r3.svg).",
)
def plot(db: str, run_spec: str, out: str | None) -> None:
    """Draw the run's roofline: ceilings, and one point per ggml op type (and the MoE heat map).

    Filled markers sit at the arithmetic intensity from measured DRAM bytes, hollow ones at the
    intensity from modelled bytes (same height: achieved FLOP/s); marker area is the op type's
    share of GPU time. Ceilings come from configs/peaks.yaml (their marks are in the legend).
    Needs op metadata (FLOPs come from the model). A run with MoE routing read back
    (tokens_per_expert) also gets OUT-experts.png and OUT-experts.svg: tokens routed to each
    expert (x) of each layer (y) over the run.

    \b
    Examples:
      rocroof plot --run 3 --out docs/decode-roofline
    """
    from ..errors import InputError as _InputError
    from ..report.plot import plot_base, save_roofline
    from ..report.tables import build_report, plot_ceilings, plot_title, roofline_points
    from ..store import Store

    given = plot_base(out) if out is not None else None
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
    base = given or Path(f"roofline-run{rid}")
    paths = save_roofline(points, ceilings, plot_title(rep), base)
    from ..report.advise import expert_tokens
    from ..report.plot import save_expert_heatmap

    tokens = expert_tokens(store, rid)
    if len(tokens):  # MoE routing read back: the layer x expert heat map beside the roofline
        paths += save_expert_heatmap(
            tokens, f"run {rid}: tokens routed per expert and layer", base.with_name(base.name + "-experts")
        )
    echo("Wrote " + ", ".join(one_line(str(p)) for p in paths))


@cli.command(context_settings={"ignore_unknown_options": True})  # SQL may begin with a "-- comment"
@click.argument("sql")
@db_option
@format_option
@raw_option
@click.option(
    "--max-rows",
    type=click.IntRange(min=1),
    default=TABLE_ROWS,
    show_default=True,
    help="table/markdown: rows shown at most (csv and json stream every row).",
)
def query(sql: str, db: str, fmt: str, raw: bool, max_rows: int) -> None:
    """Run one read-only SQL query on the database.

    Views: dispatch_dram, op_invocation_summary, op_roofline (measured beside modelled bytes
    and FLOPs), op_summary, kernel_summary; tables: run, run_ceiling, pass, dispatch,
    counter_value, counter_instance, marker_range, op_invocation, op_model, op_edge,
    op_operand, dram_traffic, run_note... (docs/schema.md). Only reads run (SELECT, WITH);
    statements that write are refused: run those with the sqlite3 shell (sqlite3 rocroof.db ...).
    Wide results print one record per block in the terminal; use --format csv for a sheet.

    \b
    Examples:
      rocroof query "SELECT op, SUM(duration_ns)/1e3 AS us FROM dispatch_dram WHERE run_id=1 GROUP BY op"
      rocroof query "SELECT * FROM run_note WHERE severity='warning'" --format markdown
    """
    from ..report.tables import render_batch, render_frame
    from ..store import Store

    store = Store(db, read_only=True)
    store.check()
    batches = store.query_batches(sql)
    try:
        if fmt in ("csv", "json"):  # streamed: memory holds one batch, whatever the result's size
            n = 0
            for i, frame in enumerate(batches):
                text = render_batch(frame, fmt, first=i == 0, raw=raw)  # type: ignore[arg-type]
                echo(text, nl=False, exact=raw and fmt == "csv")  # --raw: the CSV cells as stored
                n += len(frame)
            if fmt == "json":
                echo("\n]" if n else "]")
            return
        rows, shown = [], 0
        for frame in batches:  # read on only to count what is not shown
            if shown < max_rows:
                rows.append(frame.head(max_rows - shown))
            shown += len(frame)
        import pandas as pd

        echo(render_frame(pd.concat(rows) if len(rows) > 1 else rows[0], fmt), nl=False)  # type: ignore[arg-type]
        if shown > max_rows:
            stderr_console().print(
                f"showing {max_rows:,} of {shown:,} rows (--max-rows; --format csv or json writes them all)",
                markup=False,
                highlight=False,
            )
    finally:
        batches.close()


@cli.command()
@db_option
@click.option("--run", "run_spec", default="latest", show_default=True, help=RUN_HELP)
@click.option("--evaluation", type=int, default=None, help="One graph evaluation (0-based; e.g. one decode token).")
@click.option("--format", "fmt", type=click.Choice(["dot", "json"]), default="dot", show_default=True)
def graph(db: str, run_spec: str, evaluation: int | None, fmt: str) -> None:
    """Export the op graph: producer -> consumer edges between op invocations, with time and bytes.

    Edges come from the op metadata's storage ids (the last writer of a storage feeds its
    readers). Nodes carry op, name, GPU time and DRAM bytes; the critical path (the longest
    chain by time in its evaluation) is red in DOT. A run without op metadata has no graph: an
    error, whether or not --evaluation is given.

    \b
    Examples:
      rocroof graph --run 3 --evaluation 1 | dot -Tsvg > token1.svg
      rocroof graph --run 3 --format json > graph.json
    """
    import json

    from ..report.graph import graph_dot, stored_graph
    from ..store import Store

    store = Store(db, read_only=True)
    rid = store.resolve_run(run_spec)
    nodes, edges = stored_graph(store, rid, evaluation)  # InputError: no op graph, no such evaluation
    if fmt == "dot":
        echo(graph_dot(nodes, edges, f"run {rid}").rstrip("\n"))
        return
    doc = {
        "run_id": rid,
        "evaluation": evaluation,
        "nodes": json.loads(nodes.to_json(orient="records")),
        "edges": json.loads(edges.to_json(orient="records")),
    }
    echo(json.dumps(doc, indent=1))


@cli.command()
@click.argument("run_a")
@click.argument("run_b")
@db_option
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="markdown",
    show_default=True,
    help="markdown pastes into a PR review; table for terminals; csv gives every node; json every node plus the "
    "whole-graph totals and per-op rows.",
)
@click.option("--top", type=click.IntRange(min=0), default=15, show_default=True, help="Largest node changes to list.")
@click.option(
    "--min-change",
    type=FiniteFloatRange(0, 100, max_open=True),
    default=5.0,
    show_default=True,
    metavar="PCT",
    help="Changes under PCT % of A's time are noise, whatever the spread.",
)
@click.option(
    "--min-change-us",
    type=FiniteFloatRange(0),
    default=0.25,
    show_default=True,
    metavar="US",
    help="Changes under US µs per call are noise, whatever the spread.",
)
@click.option(
    "--by",
    type=click.Choice(["auto", "op", "kernel"]),
    default="auto",
    show_default=True,
    help="op: per ggml graph node; kernel: per kernel name (each dispatch a sample); auto: op when both runs have "
    "ggml ops, else kernel.",
)
@raw_option
@all_columns_option
def diff(
    run_a: str,
    run_b: str,
    db: str,
    fmt: str,
    top: int,
    min_change: float,
    min_change_us: float,
    by: str,
    raw: bool,
    all_columns: bool,
) -> None:
    """Compare RUN_B against RUN_A per ggml op (per kernel for runs without ops): time and DRAM bytes, noise told apart.

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
      rocroof diff model=dense-tiny,env=fusion model=dense-tiny,env=no-fusion   # runs by their labels
      rocroof diff 3 latest --format table --top 30
      rocroof diff 3 4 --min-change 2            # call 2% changes real (quiet machine, many samples)
      rocroof diff 5 6 --by kernel               # per kernel name (the default for runs without ggml ops)
    """
    from ..report.diff import diff_kernels, diff_runs, has_op_invocations, render_diff
    from ..report.tables import run_labels
    from ..store import Store

    store = Store(db, read_only=True)
    store.check()
    try:
        a = store.resolve_run(run_a)
    except InputError as exc:
        raise InputError(f"run A ({run_a}): {exc}") from None
    try:
        b = store.resolve_run(run_b)
    except InputError as exc:
        raise InputError(f"run B ({run_b}): {exc}") from None

    def describe(rid: int, own: dict[str, str], other: dict[str, str]) -> str:
        path = store.query(f"SELECT source_path FROM run WHERE run_id = {rid}")["source_path"].iloc[0]
        text = ", ".join(f"{k}={v}" for k, v in own.items() if other.get(k) != v)  # what tells A from B
        return " ".join(x for x in (str(path or ""), f"[{text}]" if text else "") if x)

    la, lb = run_labels(store, a), run_labels(store, b)
    names = (describe(a, la, lb), describe(b, lb, la))
    without_ops = [rid for rid in dict.fromkeys((a, b)) if not has_op_invocations(store, rid)] if by == "auto" else []
    if by == "kernel" or without_ops:
        d = diff_kernels(store, a, b, min_change=min_change / 100, min_change_us=min_change_us)
        if without_ops:
            runs = " and ".join(f"run {rid}" for rid in without_ops)
            d.notes.insert(0, f"{runs} {'has' if len(without_ops) == 1 else 'have'} no ggml ops: compared per kernel")
    else:
        d = diff_runs(store, a, b, min_change=min_change / 100, min_change_us=min_change_us)
    err = stderr_console()
    for warning in d.warnings:  # the same run twice, runs on different GPUs: said where the user looks
        err.print(one_line(f"warning: {warning}"), markup=False, highlight=False, soft_wrap=True)
    text = render_diff(d, fmt, top=top, names=names, raw=raw, all_columns=all_columns).rstrip("\n")
    echo(text, exact=raw and fmt == "csv")  # --raw: the CSV cells as stored
