"""How fast the command line starts: ``rocroof --help`` against a bare interpreter.

Whole-process wall times (start, imports, help text, exit), each the median of ``--runs`` runs
(default 10), the commands taken in turn so that a change of load hits all of them alike, after
one unmeasured warm-up run of each:

* ``python -c pass`` - the floor: the interpreter and site (this venv's editable-install finder
  included);
* ``python -m rocroof --help`` and the ``rocroof`` console script beside this Python
  (``bin/rocroof --help``);
* ``python -m rocroof <command> --help`` for report, ingest, collect, query and sweep;
* the floor and ``python -m rocroof --help`` again with a bytecode cache (``PYTHONPYCACHEPREFIX``
  in a temporary folder, ``PYTHONDONTWRITEBYTECODE`` unset): where the environment sets
  ``PYTHONDONTWRITEBYTECODE``, every run compiles rocroof's modules from source, which an
  installed rocroof does not.

Goal: every ``--help`` within 60 ms of ``python -c pass`` (in the environment as it is), importing
none of pandas, SQLAlchemy, numpy, matplotlib or rich (tests/test_cli_startup.py checks the
imports; the time is measured here, not in the unit tests). The machine (CPU, cores, RAM), the
date, the git commit and the load average before and after go with the results; the section is
appended to benchmarks/RESULTS.md unless ``--no-write``.

    .venv/bin/python benchmarks/startup.py [--runs 10] [--no-write]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
import machine as host  # noqa: E402
from machine import load, machine  # noqa: E402

GOAL_MS = 60.0
#: Top-level packages ``--help`` must not import (tests/test_cli_startup.py holds the same list).
HEAVY = ("pandas", "sqlalchemy", "numpy", "matplotlib", "rich")
SUBCOMMANDS = ("report", "ingest", "collect", "query", "sweep")
#: Runs ``python -m rocroof ARGS`` in the child, then names the heavy packages it imported (on stderr).
PROBE = (
    "import runpy, sys\n"
    "sys.argv = ['rocroof', *sys.argv[1:]]\n"
    "try:\n"
    "    runpy.run_module('rocroof', run_name='__main__', alter_sys=True)\n"
    "except SystemExit:\n"
    "    pass\n"
    f"print(' '.join(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r}))), file=sys.stderr)\n"
)


def _wall(cmd: list[str], env: dict[str, str]) -> float:
    """Wall seconds of one run of ``cmd`` (output discarded; a failure stops the benchmark)."""
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=REPO, env=env)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{shlex.join(cmd)} failed with status {proc.returncode}: {proc.stderr.decode()[-500:]}")
    return wall


def _heavy_imports(args: list[str]) -> str:
    """The heavy packages that ``python -m rocroof ARGS`` imports, or ``none``."""
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=REPO
    )
    found = proc.stderr.decode().strip().splitlines()
    return (found[-1] if found else "") or "none"


def main() -> None:
    """Time every command, print the table and append it to RESULTS.md."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=10, help="runs of each command; the median is reported")
    ap.add_argument("--no-write", action="store_true", help="print only; do not append to RESULTS.md")
    args = ap.parse_args()

    command = "python benchmarks/startup.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    started = dt.datetime.now(dt.UTC)
    commit = host.commit()  # the code measured: taken at the start (a commit made meanwhile is not what ran)
    load_start = load()
    python = sys.executable
    script = str(Path(python).parent / "rocroof")
    as_is = dict(os.environ)
    cache_dir = tempfile.mkdtemp(prefix="rocroof-startup-pyc-")
    cached = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    cached["PYTHONPYCACHEPREFIX"] = cache_dir
    writes_pyc = not os.environ.get("PYTHONDONTWRITEBYTECODE")

    #: (name, command, environment, the floor it is compared with, ``rocroof`` arguments to probe)
    cases: list[tuple[str, list[str], dict[str, str], str, list[str] | None]] = [
        ("python -c pass", [python, "-c", "pass"], as_is, "", None),
        ("python -m rocroof --help", [python, "-m", "rocroof", "--help"], as_is, "python -c pass", ["--help"]),
    ]
    if os.access(script, os.X_OK):
        cases.append(("bin/rocroof --help", [script, "--help"], as_is, "python -c pass", ["--help"]))
    for sub in SUBCOMMANDS:
        cases.append(
            (
                f"python -m rocroof {sub} --help",
                [python, "-m", "rocroof", sub, "--help"],
                as_is,
                "python -c pass",
                [sub, "--help"],
            )
        )
    cases += [
        ("python -c pass, bytecode cached", [python, "-c", "pass"], cached, "", None),
        (
            "python -m rocroof --help, bytecode cached",
            [python, "-m", "rocroof", "--help"],
            cached,
            "python -c pass, bytecode cached",
            None,
        ),
    ]

    times: dict[str, list[float]] = {name: [] for name, *_ in cases}
    try:
        for _, cmd, env, _, _ in cases:  # warm-up: the page cache and the bytecode cache, not measured
            _wall(cmd, env)
        for _ in range(args.runs):
            for name, cmd, env, _, _ in cases:
                times[name].append(_wall(cmd, env))
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)
    load_end = load()
    medians = {name: 1000 * statistics.median(ts) for name, ts in times.items()}

    lines = [
        f"## Start-up: `rocroof --help` against `python -c pass` — {started.date().isoformat()}",
        "",
        f"Machine: {machine()}. Commit {commit}. Started {started.isoformat(timespec='seconds')}; load "
        f"average (1 / 5 / 15 min) {load_start} at the start, {load_end} at the end (other processes share "
        "this machine).",
        "",
        f"Command: `{command}` (whole-process wall time, median of {args.runs} runs each, the commands taken "
        "in turn after one warm-up run of each; heavy packages: those of "
        f"{', '.join(HEAVY)} that the command imported). This environment "
        + (
            "writes bytecode caches"
            if writes_pyc
            else "sets PYTHONDONTWRITEBYTECODE: rocroof's modules are compiled from source at every start"
        )
        + "; the last rows have a bytecode cache (PYTHONPYCACHEPREFIX), as an installed rocroof does.",
        "",
        "| command | median ms | min ms | max ms | over `python -c pass` ms | heavy packages imported |",
        "|---|---:|---:|---:|---:|---|",
    ]
    worst = 0.0
    heavy_found: dict[str, list[str]] = {}
    for name, _, env, floor, probe_args in cases:
        ts = times[name]
        over = medians[name] - medians[floor] if floor else None
        heavy = "" if probe_args is None else _heavy_imports(probe_args)
        if over is not None and env is as_is:
            worst = max(worst, over)
        if heavy not in ("", "none"):
            heavy_found.setdefault(heavy, []).append(name)
        lines.append(
            f"| `{name}` | {medians[name]:.0f} | {1000 * min(ts):.0f} | {1000 * max(ts):.0f} | "
            f"{'' if over is None else f'{over:+.0f}'} | {heavy} |"
        )
    found_text = "; ".join(f"{h} ({len(names)} command(s))" for h, names in heavy_found.items()) or "none imported"
    lines += [
        "",
        "| goal | status | measured |",
        "|---|---|---|",
        f"| every `--help` within {GOAL_MS:.0f} ms of `python -c pass` | "
        f"{'met' if worst <= GOAL_MS else 'gap'} | worst {worst:+.0f} ms |",
        f"| `--help` imports none of {', '.join(HEAVY)} | {'met' if not heavy_found else 'gap'} | {found_text} |",
        "",
    ]
    host.publish(lines, write=not args.no_write)


if __name__ == "__main__":
    main()
