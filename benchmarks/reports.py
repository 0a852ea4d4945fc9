"""How the reports of a large run scale: wall time and peak memory of each report command.

Each command runs as ``python -m rocroof ...`` in a child process of its own (interpreter start and
imports included), its peak resident memory taken from the child's ``ru_maxrss`` (``os.wait4``),
its output counted and thrown away. The run is the database's latest (``--run``): by default the
10^6-dispatch database ``benchmarks/scale.py`` ingests from ``benchmarks/generate.py``'s rocprofv3
CSV capture (8 counters per dispatch, ggml op ranges, no op metadata)::

    .venv/bin/rocroof ingest /tmp/rocroof-bench/csv-1000000 --db /tmp/rocroof-bench/reports-1000000.db
    .venv/bin/python benchmarks/reports.py --db /tmp/rocroof-bench/reports-1000000.db [--no-write]

The commands are those whose work grows with the run (every dispatch or invocation read):
``advise``, ``report --format html``, ``report --by kernel``, ``report --by invocation --top 20``,
the whole invocation and dispatch reports as CSV, and ``report --by op`` (stored with the run) for
scale (``--command`` picks some of them). The machine (CPU, cores, RAM), the date, the git commit and
the load average before and after go with the results; the section is appended to
benchmarks/RESULTS.md unless ``--no-write``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shlex
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
import machine as host  # noqa: E402
from machine import load, machine  # noqa: E402

COMMANDS = (
    "report --by op",
    "report --by kernel",
    "report --by invocation --top 20",
    "advise",
    "report --format html",
    "report --by invocation --format csv",
    "report --by dispatch --format csv",
)


def measure(db: str, command: str) -> tuple[float, float, int, int]:
    """``rocroof COMMAND --db DB`` in a child: (wall s, peak RSS MB, output bytes, exit status)."""
    argv = [sys.executable, "-m", "rocroof", *shlex.split(command), "--db", db]
    t0 = time.perf_counter()
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL) as child:
        assert child.stdout is not None
        size = 0
        while chunk := child.stdout.read(1 << 20):
            size += len(chunk)
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
    return time.perf_counter() - t0, usage.ru_maxrss / 1024, size, child.returncode


def main() -> None:
    """Measure every command of :data:`COMMANDS` on the latest run, print the table, append it to RESULTS.md."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", default="/tmp/rocroof-bench/reports-1000000.db", help="the database to report on")
    ap.add_argument("--no-write", action="store_true", help="print only; do not append to RESULTS.md")
    ap.add_argument(
        "--command",
        action="append",
        choices=COMMANDS,
        help="measure only this command (repeatable; default: every command of COMMANDS)",
    )
    args = ap.parse_args()
    if not Path(args.db).exists():
        sys.exit(f"{args.db}: no such database (see this script's docstring for how to make it)")
    con = sqlite3.connect(f"file:{args.db}?mode=ro", uri=True)
    run = con.execute("SELECT MAX(run_id) FROM run").fetchone()[0]
    dispatches = con.execute(
        "SELECT COUNT(*) FROM dispatch_record WHERE run_id = ? AND timing_dispatch_index = dispatch_index", (run,)
    ).fetchone()[0]
    invocations = con.execute("SELECT COUNT(*) FROM op_invocation WHERE run_id = ?", (run,)).fetchone()[0]
    con.close()
    started, load_before = dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), load()
    rows = []
    for command in args.command or COMMANDS:
        wall, rss, size, code = measure(args.db, command)
        rows.append(f"| `rocroof {command}` | {wall:.1f} | {rss:,.0f} | {size / 1e6:,.1f} | {code} |")
        print(rows[-1], flush=True)
    lines = [
        "",
        f"## Reports of one run of {dispatches:,} dispatches — {started[:10]}",
        "",
        f"Machine: {machine()}. Commit {host.commit()}. Started {started}; load average (1 / 5 / 15 min) "
        f"{load_before} at the start, {load()} at the end (other processes share this machine).",
        "",
        f"Command: `python benchmarks/reports.py --db {args.db}"
        + "".join(f" --command '{c}'" for c in args.command or ())
        + f"`: run {run}, {dispatches:,} timing dispatches, "
        f"{invocations:,} op invocations; each command in its own child process (wall time includes "
        "interpreter start and imports; peak RSS is the child's `ru_maxrss`).",
        "",
        "| command | wall s | peak RSS MB | output MB | exit |",
        "|---|---:|---:|---:|---:|",
        *rows,
    ]
    host.publish(lines, not args.no_write)


if __name__ == "__main__":
    main()
