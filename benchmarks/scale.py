"""How rocroof scales: ingest time and memory per format, against the practical limits.

For each format of :mod:`generate` (rocprofv3 CSV, rocpd, NVIDIA nsys + ncu) and each size
(default 10^4, 10^5 and 10^6 dispatches, 8 counters each), in a child process per measurement
(its peak memory is sampled over its process tree: see :func:`run_child`):

* **ingest**: ``rocroof ingest CAPTURE --db NEW.db`` (the command itself, run through click in the
  child), with the time of its stages (read, attribute + build, write) taken around the library
  calls the command makes; peak RSS and PSS of the child's process tree. A run built in windows
  (:mod:`rocroof.ingest.windows`) counts its plan and first window as "attribute + build"; its
  other windows are built (in a second process, :mod:`rocroof.ingest.forked`) as the write takes
  them, so their time is in "write".
* **the limit** (fixed, not rocroof's schema): plain sqlite3 ``ATTACH`` + ``INSERT ... SELECT`` of n
  narrow dispatch rows (run, dispatch, kernel id, start, end, duration, grid, workgroup) and 8n
  counter rows (run, dispatch, counter id, value) into a new WAL database, a primary key on each
  and one counter index, one transaction; measured two ways (rowid tables with the index built
  during the copy, ``WITHOUT ROWID`` tables with the index built after it), the faster one is the
  limit. The source file is made once (``limit-N.db`` in ``--data``).
* **CSV, the obvious pandas path**: ``pd.read_csv`` + ``DataFrame.to_sql`` of each CSV file into
  SQLite; rows/s against rocroof's ingest of the same files.
* **report**: ``rocroof report --by op`` on the ingested database (a fresh process, best of 2).
* **attribution**: ``attribute_pass`` alone on the same workload (built in memory, launch-API
  path); its growth as the slope of log(time) against log(n), and time / (n log2 n).

Goals (issue "scale"): at 10^6 dispatches with 8x10^6 counter values, CSV and rocpd ingest within
3x of the limit and NVIDIA within 4x; peak RSS <= 700 MB for CSV and rocpd, <= 1 GB for NVIDIA, flat
from 10^5 to 10^6 (within 1.25x, judged on the process tree's PSS: shared pages counted once); the
database <= 450 bytes per dispatch; ``report --by op`` <= 0.5 s; attribution
O(n log n).
The machine (CPU, cores, RAM), the date, the git commit and the load average before and after go
with the results; the section is appended to benchmarks/RESULTS.md unless ``--no-write``.

    .venv/bin/python benchmarks/scale.py [--sizes 10000 100000 1000000] [--formats csv rocpd nvidia]
        [--data /tmp/rocroof-bench] [--no-write]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import resource
import shlex
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
import generate  # noqa: E402
import machine as host  # noqa: E402
from machine import load, machine, meminfo  # noqa: E402

FORMATS = ("csv", "rocpd", "nvidia")
#: Ingest time / the limit's, and peak RSS MB, per format at 10^6 dispatches.
GOAL_RATIO = {"csv": 3.0, "rocpd": 3.0, "nvidia": 4.0}
GOAL_RSS_MB = {"csv": 700.0, "rocpd": 700.0, "nvidia": 1000.0}
GOAL_DB_BYTES_PER_DISPATCH = 450.0
GOAL_REPORT_S = 0.5
#: The pandas baseline holds whole CSV files as Python strings: run it only with this much memory free.
PANDAS_NEEDS_GB_PER_MILLION = 12.0


# ---- child processes ------------------------------------------------------------------------------


def _child_ingest(path: str, db: str) -> dict[str, Any]:
    """``rocroof ingest PATH --db DB`` with its stages timed (the command's own library calls)."""
    t0 = time.perf_counter()
    import rocroof.capture.readers
    import rocroof.ingest.windows
    import rocroof.store
    from rocroof.cli import cli

    stages: dict[str, float] = {}
    rows: dict[str, int] = {}

    def timed(name: str, fn: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                stages[name] = stages.get(name, 0.0) + time.perf_counter() - start

        return wrapper

    real_write = rocroof.store.Store.write_run

    def write_run(self: Any, frames: Any, **kwargs: Any) -> Any:
        rows.update({k: len(v) for k, v in frames.tables.items()})
        if frames.windows is not None:  # a windowed run: its rows counted as the write takes them
            windows = frames.windows

            def counted() -> Any:
                for window in windows:
                    for name, frame in window.items():
                        rows[name] = rows.get(name, 0) + len(frame)
                    yield window

            frames.windows = counted()
        return real_write(self, frames, **kwargs)

    rocroof.capture.readers.read_capture = timed("read_s", rocroof.capture.readers.read_capture)
    # a windowed build (rocroof.ingest.windows) times its plan and first window here; the other
    # windows are built as the write takes them, inside write_s
    rocroof.ingest.windows.build = timed("build_s", rocroof.ingest.windows.build)
    rocroof.store.Store.write_run = timed("write_s", write_run)  # type: ignore[method-assign]
    t1 = time.perf_counter()
    cli.main(["ingest", path, "--db", db], standalone_mode=False)
    t2 = time.perf_counter()
    return {"import_s": t1 - t0, "command_s": t2 - t1, **stages, "rows": rows}


#: The reference limit's tables, as the scale issue fixes them: one narrow dispatch row per dispatch
#: and one (run, dispatch, counter id, value) row per counter value, a primary key on each and one
#: index on the counters; not rocroof's schema, so that a schema change cannot move the goal.
LIMIT_DDL = (
    "CREATE TABLE {db}d (run INTEGER NOT NULL, dispatch INTEGER NOT NULL, kernel INTEGER NOT NULL, "
    "start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL, duration_ns INTEGER NOT NULL, grid INTEGER NOT NULL, "
    "workgroup INTEGER NOT NULL, PRIMARY KEY (run, dispatch))",
    "CREATE TABLE {db}c (run INTEGER NOT NULL, dispatch INTEGER NOT NULL, counter INTEGER NOT NULL, "
    "value REAL NOT NULL, PRIMARY KEY (run, dispatch, counter))",
)
LIMIT_COUNTERS = 8


def _limit_source(n: int, root: Path) -> Path:
    """The attached file the limit copies from: ``n`` dispatch rows and 8n counter rows (cached)."""
    path = root / f"limit-{n}.db"
    if path.exists():
        return path
    tmp = path.with_suffix(".tmp")
    tmp.unlink(missing_ok=True)
    conn = sqlite3.connect(tmp, isolation_level=None)
    conn.execute("BEGIN")
    for ddl in LIMIT_DDL:
        conn.execute(ddl.format(db=""))
    conn.execute(
        "WITH RECURSIVE i(x) AS (SELECT 0 UNION ALL SELECT x + 1 FROM i WHERE x + 1 < ?) "
        "INSERT INTO d SELECT 1, x, x % 11, 1000 * x, 1000 * x + 400 + x % 97, 400 + x % 97, 4096 * (1 + x % 7), "
        "256 FROM i",
        (n,),
    )
    conn.execute(
        "INSERT INTO c SELECT 1, d.dispatch, k.k, abs(random() % 1000000) "
        f"FROM d, (WITH RECURSIVE k(k) AS (SELECT 0 UNION ALL SELECT k + 1 FROM k WHERE k + 1 < {LIMIT_COUNTERS}) "
        "SELECT k FROM k) k ORDER BY d.dispatch, k.k"
    )
    conn.execute("COMMIT")
    conn.close()
    tmp.rename(path)
    return path


def _child_limit(src: str, db: str, way: str) -> dict[str, Any]:
    """The fixed reference: plain sqlite3 ``INSERT ... SELECT`` of the narrow rows from an attached file.

    A new database (WAL, as rocroof's), the two tables with their primary keys and one counter
    index, one transaction; the time covers creating the tables, the copy, the index and the commit.
    ``way``: ``rowid`` (rowid tables, the index there during the copy) or ``clustered`` (``WITHOUT
    ROWID`` tables, the index built after the copy).
    """
    t0 = time.perf_counter()
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"ATTACH DATABASE 'file:{Path(src).resolve().as_posix()}?mode=ro' AS src")
    conn.execute("BEGIN")
    suffix = " WITHOUT ROWID" if way == "clustered" else ""
    for ddl in LIMIT_DDL:
        conn.execute(ddl.format(db="main.") + suffix)
    if way != "clustered":
        conn.execute("CREATE INDEX main.ix_c_counter ON c (run, counter)")
    conn.execute("INSERT INTO main.d SELECT * FROM src.d")
    conn.execute("INSERT INTO main.c SELECT * FROM src.c")
    if way == "clustered":
        conn.execute("CREATE INDEX main.ix_c_counter ON c (run, counter)")
    conn.execute("COMMIT")
    rows = {t: conn.execute(f"SELECT COUNT(*) FROM main.{t}").fetchone()[0] for t in ("d", "c")}
    conn.close()
    return {"total_s": time.perf_counter() - t0, "rows": rows}


def _child_pandas_csv(path: str, db: str) -> dict[str, Any]:
    """The obvious path: each CSV file whole with ``pd.read_csv``, then ``DataFrame.to_sql``."""
    import pandas as pd

    t0 = time.perf_counter()
    conn = sqlite3.connect(db)
    rows = 0
    for f in sorted(Path(path).glob("*.csv")):
        if f.name.endswith("agent_info.csv"):
            continue
        df = pd.read_csv(f)
        df.to_sql(f.stem.split("_", 1)[1], conn, index=False, if_exists="replace")
        rows += len(df)
        del df
    conn.commit()
    conn.close()
    return {"total_s": time.perf_counter() - t0, "rows": rows}


def _child_attribution(sizes: list[int]) -> dict[str, Any]:
    import numpy as np
    import pandas as pd

    from rocroof.ingest.attribution import attribute_pass
    from rocroof.records import DISPATCH_COLUMNS, LAUNCH_COLUMNS, MARKER_COLUMNS, PassData, conform

    out = {}
    for n in sizes:
        w = generate.make_workload(n)
        disp = conform(
            pd.DataFrame(
                {
                    "dispatch_id": np.arange(1, n + 1),
                    "kernel_name": [generate.KERNELS[k][0] for k in w.kernel.tolist()],
                    "process_id": generate.PID,
                    "thread_id": w.tid,
                    "correlation_id": w.corr,
                    "start_ns": w.gpu_start,
                    "end_ns": w.gpu_end,
                    "agent_label": "Agent 1",
                }
            ),
            DISPATCH_COLUMNS,
        )
        nm = len(w.m_msg)
        markers = conform(
            pd.DataFrame(
                {
                    "process_id": generate.PID,
                    "thread_id": np.concatenate([w.r_tid, w.m_tid]),
                    "start_ns": np.concatenate([w.r_start, w.m_t]),
                    "end_ns": np.concatenate([w.r_end, w.m_t]),
                    "message": w.r_msg + w.m_msg,
                    "kind": ["range"] * len(w.r_msg) + ["mark"] * nm,
                    "correlation_id": np.concatenate([w.r_corr, w.m_corr]),
                }
            ),
            MARKER_COLUMNS,
        )
        launches = conform(
            pd.DataFrame(
                {
                    "correlation_id": w.corr,
                    "process_id": generate.PID,
                    "thread_id": w.tid,
                    "start_ns": w.launch_start,
                    "end_ns": w.launch_end,
                    "api_name": "hipLaunchKernel",
                }
            ),
            LAUNCH_COLUMNS,
        )
        p = PassData(
            kind="trace", label="bench", source="generate", dispatches=disp, markers=markers, launches=launches
        )
        best = math.inf
        for _ in range(3 if n <= 100_000 else 2):
            t0 = time.perf_counter()
            a = attribute_pass(p)
            best = min(best, time.perf_counter() - t0)
        assert a.methods.get("launch_api") == n, a.methods
        out[str(n)] = {"s": best, "markers": len(markers)}
    return out


CHILDREN = {
    "ingest": _child_ingest,
    "limit": _child_limit,
    "pandas-csv": _child_pandas_csv,
}


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants (Linux ``/proc``; an ingest builds its windows in a child process)."""
    out = [pid]
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as fh:
                for child in fh.read().split():
                    out += _tree(int(child))
    except OSError:
        pass
    return out


def _rss_pss_kb(pid: int) -> tuple[int, int]:
    """(Rss, Pss) of one process in kB from ``/proc/PID/smaps_rollup``; zeros when it is gone."""
    rss = pss = 0
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                if line.startswith("Rss:"):
                    rss = int(line.split()[1])
                elif line.startswith("Pss:"):
                    pss = int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return rss, pss


#: Seconds between two samples of the process tree's memory (:func:`run_child`).
TREE_SAMPLE_S = 0.05


def run_child(*args: str) -> tuple[dict[str, Any], float, float, float]:
    """Run this script as a child; return (its JSON result, wall s, peak RSS MB, peak PSS MB).

    Peak RSS is the larger of the child's ``ru_maxrss`` (one process: wait4 gives the largest of the
    tree's, not their sum) and the peak of the RSS summed over the child's process tree, sampled every
    :data:`TREE_SAMPLE_S` (an ingest built in windows runs two processes: the sum counts the pages they
    share twice, so it is an upper bound). Peak PSS is the peak of the summed proportional set size
    (shared pages split between the processes that map them: the memory the tree takes from the machine).
    """
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, __file__, "--child", *args], stdout=subprocess.PIPE, cwd=REPO)
    assert proc.stdout is not None
    peaks = [0, 0]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(TREE_SAMPLE_S):
            pairs = [_rss_pss_kb(p) for p in _tree(proc.pid)]
            peaks[0] = max(peaks[0], sum(r for r, _ in pairs))
            peaks[1] = max(peaks[1], sum(p for _, p in pairs))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    done.set()
    sampler.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"child {args} failed with status {proc.returncode}")
    rss = max(usage.ru_maxrss, peaks[0]) / 1024.0
    pss = (peaks[1] or usage.ru_maxrss) / 1024.0
    return json.loads(out.decode().strip().splitlines()[-1]), wall, rss, pss


def time_report(db: Path) -> float:
    """Best of two wall times of ``rocroof report --by op`` in a fresh process."""
    best = math.inf
    for _ in range(2):
        t0 = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "rocroof", "report", "--db", str(db), "--by", "op"],
            check=True,
            stdout=subprocess.DEVNULL,
            cwd=REPO,
        )
        best = min(best, time.perf_counter() - t0)
    return best


def _machine() -> str:
    import numpy
    import pandas

    return machine(f"pandas {pandas.__version__}, numpy {numpy.__version__}, SQLite {sqlite3.sqlite_version}")


def _slope(points: list[tuple[int, float]]) -> float:
    """Least-squares slope of log(time) against log(n): ~1 for O(n), ~1.05-1.1 for O(n log n) here."""
    xs = [math.log(n) for n, _ in points]
    ys = [math.log(t) for _, t in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den if den else float("nan")


def main() -> None:
    """Run every measurement, print the tables and append them to RESULTS.md."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--formats", nargs="+", choices=FORMATS, default=list(FORMATS))
    ap.add_argument("--data", type=Path, default=Path(tempfile.gettempdir()) / "rocroof-bench")
    ap.add_argument("--no-write", action="store_true", help="print only; do not append to RESULTS.md")
    ap.add_argument("--no-pandas", action="store_true", help="skip the pd.read_csv + to_sql baseline")
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        kind, *rest = args.child
        result = _child_attribution([int(x) for x in rest]) if kind == "attribution" else CHILDREN[kind](*rest)
        print(json.dumps(result))
        return

    command = "python benchmarks/scale.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    started = dt.datetime.now(dt.UTC)
    commit = host.commit()  # the code measured: taken at the start (a commit made meanwhile is not what ran)
    load_start = load()
    args.data.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="rocroof-scale-"))
    ingest_rows = []
    extra_rows = []
    notes: list[str] = []
    goals: list[tuple[str, str, str]] = []
    top = max(args.sizes)
    limits: dict[int, dict[str, float]] = {}
    for n in args.sizes:  # the limit first, per size: every format is compared with it
        src = _limit_source(n, args.data)
        ways = {}
        for way in ("rowid", "clustered"):
            target = work / f"limit-{n}-{way}.db"
            res, wall, _, _ = run_child("limit", str(src), str(target), way)
            ways[way] = wall  # the whole child process, as the ingest it is compared with
            for p in work.glob("limit-*.db*"):
                p.unlink()
        limits[n] = ways
        print(json.dumps({"limit": n, **ways}), flush=True)
    for fmt in args.formats:
        for n in args.sizes:
            cap = generate.ensure(fmt, n, args.data)
            size_mb = sum(f.stat().st_size for f in cap.rglob("*") if f.is_file()) / 1e6
            db = work / f"{fmt}-{n}.db"
            res, wall, rss, pss = run_child("ingest", str(cap), str(db))
            rows = res["rows"]
            report_s = time_report(db)
            db_bytes = sum(p.stat().st_size for p in work.glob(f"{fmt}-{n}.db*"))
            limit = min(limits[n].values())
            line = {
                "fmt": fmt,
                "n": n,
                "input_mb": size_mb,
                "wall": wall,
                "rss": rss,
                "pss": pss,
                "read": res.get("read_s", float("nan")),
                "build": res.get("build_s", float("nan")),
                "write": res.get("write_s", float("nan")),
                "dispatch_rows": rows.get("dispatch", 0),
                "counter_rows": rows.get("counter_value", 0),
                "db_bytes": db_bytes,
                "limit": limit,
                "ratio": wall / limit,
                "report": report_s,
            }
            print(json.dumps(line), flush=True)
            ingest_rows.append(line)
            if fmt == "csv" and not args.no_pandas:
                free_gb = meminfo("MemAvailable")
                if free_gb < PANDAS_NEEDS_GB_PER_MILLION * n / 1e6:
                    notes.append(
                        f"pandas baseline at {n:,} dispatches not run: {free_gb:.0f} GiB free, it needs about "
                        f"{PANDAS_NEEDS_GB_PER_MILLION * n / 1e6:.0f} GiB"
                    )
                else:
                    pres, pwall, prss, _ = run_child("pandas-csv", str(cap), str(work / f"pandas-{n}.db"))
                    extra = {
                        "fmt": fmt,
                        "n": n,
                        "what": "pd.read_csv + DataFrame.to_sql",
                        "wall": pwall,
                        "rss": prss,
                        "rows": pres["rows"],
                        "speedup": pwall / wall,
                    }
                    print(json.dumps(extra), flush=True)
                    extra_rows.append(extra)
            for p in work.glob("*.db*"):
                p.unlink()
    shutil.rmtree(work, ignore_errors=True)
    attr, _, _, _ = run_child("attribution", *[str(n) for n in args.sizes])
    print(json.dumps(attr), flush=True)
    load_end = load()

    # ---- goals
    by_size = {(r["fmt"], r["n"]): r for r in ingest_rows}
    for line in ingest_rows:
        if line["n"] != top:
            continue
        fmt = line["fmt"]
        goals.append(
            (
                f"{fmt}: ingest of {top:,} dispatches within {GOAL_RATIO[fmt]:.0f}x of the limit",
                "met" if line["ratio"] <= GOAL_RATIO[fmt] else "gap",
                f"{line['wall']:.1f} s = {line['ratio']:.2f}x of {line['limit']:.1f} s",
            )
        )
        goals.append(
            (
                f"{fmt}: peak RSS <= {GOAL_RSS_MB[fmt]:,.0f} MB",
                "met" if line["rss"] <= GOAL_RSS_MB[fmt] else "gap",
                f"{line['rss']:,.0f} MB",
            )
        )
        tenth = by_size.get((fmt, top // 10))
        if tenth is not None:
            # the tree's PSS: a windowed ingest is two processes (rocroof.ingest.forked), and their
            # summed RSS counts every page they share (the interpreter, the imports) twice
            goals.append(
                (
                    f"{fmt}: peak memory (process tree PSS) flat from {top // 10:,} to {top:,} dispatches",
                    "met" if line["pss"] <= 1.25 * tenth["pss"] else "gap",
                    f"PSS {tenth['pss']:,.0f} -> {line['pss']:,.0f} MB = {line['pss'] / tenth['pss']:.2f}x "
                    f"(summed RSS {tenth['rss']:,.0f} -> {line['rss']:,.0f} MB)",
                )
            )
        goals.append(
            (
                f"{fmt}: database <= {GOAL_DB_BYTES_PER_DISPATCH:.0f} B per dispatch",
                "met" if line["db_bytes"] / top <= GOAL_DB_BYTES_PER_DISPATCH else "gap",
                f"{line['db_bytes'] / top:,.0f} B",
            )
        )
        goals.append(
            (
                f"{fmt}: report --by op <= {GOAL_REPORT_S} s",
                "met" if line["report"] <= GOAL_REPORT_S else "gap",
                f"{line['report']:.2f} s",
            )
        )
    sizes = sorted(args.sizes)
    slope = _slope([(n, attr[str(n)]["s"]) for n in sizes]) if len(sizes) > 1 else float("nan")
    base_n = sizes[0]
    base = attr[str(base_n)]["s"] / (base_n * math.log2(base_n))
    worst = max(attr[str(n)]["s"] / (n * math.log2(n)) / base for n in sizes)
    goals.append(
        (
            f"attribution O(n log n) from {sizes[0]:,} to {sizes[-1]:,} dispatches",
            "met" if worst <= 1.5 else "gap",
            f"log-log slope {slope:.2f}; time / (n log2 n) at most {worst:.2f}x that of {base_n:,}",
        )
    )

    lines = [
        f"## Scale: ingest, report and attribution up to {top:,} dispatches — {started.date().isoformat()}",
        "",
        f"Machine: {_machine()}. Commit {commit}. Started {started.isoformat(timespec='seconds')}; load "
        f"average (1 / 5 / 15 min) {load_start} at the start, {load_end} at the end (other processes share "
        "this machine).",
        "",
        f"Command: `{command}` (inputs from `benchmarks/generate.py`, cached in `{args.data}`; every "
        "measurement in its own child process: wall time includes interpreter start and imports; peak RSS "
        "is the larger of the child's `ru_maxrss` and its process tree's summed RSS, sampled every "
        f"{TREE_SAMPLE_S * 1000:.0f} ms (a windowed ingest builds its windows in a second process); peak PSS "
        "is the tree's summed proportional set size, shared pages split).",
        "",
        "| format | dispatches | input MB | ingest s | ÷ limit | read s | attribute + build s | write s | peak RSS MB "
        "| peak PSS MB | database B per dispatch | dispatch rows/s | report --by op s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in ingest_rows:
        lines.append(
            f"| {r['fmt']} | {r['n']:,} | {r['input_mb']:,.0f} | {r['wall']:.1f} | {r['ratio']:.2f}x | "
            f"{r['read']:.1f} | {r['build']:.1f} | {r['write']:.1f} | {r['rss']:,.0f} | {r['pss']:,.0f} | "
            f"{r['db_bytes'] / r['n']:,.0f} | "
            f"{r['n'] / r['wall']:,.0f} | {r['report']:.2f} |"
        )
    lines += [
        "",
        "| baseline | dispatches | what | wall s | peak RSS MB | rows | rocroof ingest vs baseline |",
        "|---|---:|---|---:|---:|---:|---:|",
    ]
    for n, ways in limits.items():
        lines.append(
            f"| limit | {n:,} | ATTACH + INSERT ... SELECT of {n:,} dispatch and {LIMIT_COUNTERS * n:,} counter rows "
            f"(rowid tables, index during the copy: {ways['rowid']:.1f} s; WITHOUT ROWID, index after: "
            f"{ways['clustered']:.1f} s) | {min(ways.values()):.1f} | | {(1 + LIMIT_COUNTERS) * n:,} | "
            "the ÷ limit column above |"
        )
    for e in extra_rows:
        lines.append(
            f"| {e['fmt']} | {e['n']:,} | {e['what']} | {e['wall']:.1f} | {e['rss']:,.0f} | {e['rows']:,} | "
            f"rocroof {e['speedup']:.2f}x faster |"
        )
    lines += [
        "",
        f"| attribute_pass | dispatches | marker rows | s | us per dispatch | s / (n log2 n), relative to {base_n:,} |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for n in sizes:
        a = attr[str(n)]
        lines.append(
            f"| | {n:,} | {a['markers']:,} | {a['s']:.2f} | {1e6 * a['s'] / n:.2f} | "
            f"{a['s'] / (n * math.log2(n)) / base:.2f} |"
        )
    lines += ["", f"Slope of log(time) against log(n): {slope:.2f} (1 = linear).", ""]
    lines += ["| goal | status | measured |", "|---|---|---|"]
    lines += [f"| {g} | {s} | {m} |" for g, s, m in goals]
    lines += [f"\n{note}." for note in notes]
    lines.append("")
    host.publish(lines, write=not args.no_write)


if __name__ == "__main__":
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a child killed for memory leaves no core file
    main()
