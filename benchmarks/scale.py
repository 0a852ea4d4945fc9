"""How rocroof scales: ingest time and memory per format, against the practical limits.

For each format of :mod:`generate` (rocprofv3 CSV, rocpd, NVIDIA nsys + ncu) and each size
(default 10^4, 10^5 and 10^6 dispatches, 8 counters each), in a child process per measurement
(so that ``ru_maxrss`` is that step's peak resident memory):

* **ingest**: ``rocroof ingest CAPTURE --db NEW.db`` (the command itself, run through click in the
  child), with the time of its stages (read, attribute + build, write) taken around the library
  calls the command makes; peak RSS of the whole child.
* **rocpd raw copy** (the practical limit): a fresh database with rocroof's schema (``Store.upgrade``),
  then plain sqlite3 ``ATTACH`` + ``INSERT ... SELECT`` of the same dispatch, counter_value and
  marker_range rows from the rocpd database in one transaction, measured two ways: into the
  indexed tables, and into the tables with the secondary indexes dropped and created after the
  copy (the cheaper one is the limit).
* **CSV, the obvious pandas path**: ``pd.read_csv`` + ``DataFrame.to_sql`` of each CSV file into
  SQLite; rows/s against rocroof's ingest of the same files.
* **report**: ``rocroof report --by op`` on the ingested database (a fresh process, best of 2).
* **attribution**: ``attribute_pass`` alone on the same workload (built in memory, launch-API
  path); its growth as the slope of log(time) against log(n), and time / (n log2 n).

Goals: 10^6 dispatches + 8x10^6 counters ingested in <= 30 s with <= 1 GB peak RSS; rocpd within
2x of the raw copy; CSV >= 3x faster than pandas + to_sql; report <= 2 s; attribution O(n log n).
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
import platform
import resource
import shlex
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
import generate  # noqa: E402

FORMATS = ("csv", "rocpd", "nvidia")
GOAL_INGEST_S = 30.0
GOAL_RSS_MB = 1000.0
GOAL_ROCPD_RATIO = 2.0
GOAL_CSV_SPEEDUP = 3.0
GOAL_REPORT_S = 2.0
#: The pandas baseline holds whole CSV files as Python strings: run it only with this much memory free.
PANDAS_NEEDS_GB_PER_MILLION = 12.0


# ---- child processes ------------------------------------------------------------------------------


def _child_ingest(path: str, db: str) -> dict[str, Any]:
    """``rocroof ingest PATH --db DB`` with its stages timed (the command's own library calls)."""
    t0 = time.perf_counter()
    import rocroof.capture.readers
    import rocroof.ingest.pipeline
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
        return real_write(self, frames, **kwargs)

    rocroof.capture.readers.read_capture = timed("read_s", rocroof.capture.readers.read_capture)
    rocroof.ingest.pipeline.build_run = timed("build_s", rocroof.ingest.pipeline.build_run)
    rocroof.store.Store.write_run = timed("write_s", write_run)  # type: ignore[method-assign]
    t1 = time.perf_counter()
    cli.main(["ingest", path, "--db", db], standalone_mode=False)
    t2 = time.perf_counter()
    return {"import_s": t1 - t0, "command_s": t2 - t1, **stages, "rows": rows}


def _child_rocpd_copy(path: str, db: str, deferred: str) -> dict[str, Any]:
    """Plain SQL copy of the rocpd rows rocroof stores per dispatch, into rocroof's schema.

    ``deferred == "1"``: the secondary indexes are dropped before the copy and created after it
    (in the same transaction), which is how a bulk load is usually done.
    """
    from rocroof.store import Store, schema

    t0 = time.perf_counter()
    store = Store(db)
    store.upgrade()  # rocroof's own schema code: tables, indexes, views; WAL
    store.close()
    src = next(Path(path).glob("*_results.db"))
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute(f"ATTACH DATABASE 'file:{src.resolve().as_posix()}?mode=ro' AS src")
    conn.execute("BEGIN")
    index_sql = [
        r[0] for r in conn.execute("SELECT sql FROM main.sqlite_master WHERE type = 'index' AND sql IS NOT NULL")
    ]
    if deferred == "1":
        for index in schema.INDEXES:
            conn.execute(f"DROP INDEX {index.name}")
    t1 = time.perf_counter()
    conn.execute(
        "INSERT INTO run (created_at, source_format, source_path) VALUES ('2026-01-01T00:00:00', 'rocpd', ?)", (path,)
    )
    run_id = conn.execute("SELECT max(run_id) FROM run").fetchone()[0]
    conn.execute(
        "INSERT INTO pass (run_id, pass_index, kind, label, source, is_timing_pass, dispatch_count, timestamps_exact) "
        "SELECT ?, 0, 'counter', 'p', ?, 1, COUNT(*), 1 FROM src.rocpd_kernel_dispatch",
        (run_id, path),
    )
    conn.execute(
        "CREATE TEMP TABLE dmap AS SELECT kd.guid AS guid, kd.event_id AS event_id, kd.id AS id, "
        "ROW_NUMBER() OVER (ORDER BY kd.pid, kd.guid, kd.id) - 1 AS idx FROM src.rocpd_kernel_dispatch kd"
    )
    conn.execute("CREATE INDEX temp.dmap_event ON dmap (event_id, guid)")
    conn.execute(
        "INSERT INTO dispatch (run_id, dispatch_index, pass_index, ordinal, dispatch_id, kernel_name, kernel_id, "
        "queue_id, stream_id, process_id, thread_id, correlation_id, start_ns, end_ns, duration_ns, grid_size, "
        "workgroup_size, grid_x, grid_y, grid_z, workgroup_x, workgroup_y, workgroup_z, lds_bytes, scratch_bytes, "
        "vgpr_count, accum_vgpr_count, sgpr_count, timing_dispatch_index) "
        "SELECT ?, m.idx, 0, m.idx, kd.id, COALESCE(NULLIF(ks.display_name, ''), ks.kernel_name), kd.kernel_id, "
        'kd.queue_id, kd.stream_id, kd.pid, kd.tid, e.stack_id, kd.start, kd."end", kd."end" - kd.start, '
        "kd.grid_size_x * kd.grid_size_y * kd.grid_size_z, "
        "kd.workgroup_size_x * kd.workgroup_size_y * kd.workgroup_size_z, kd.grid_size_x, kd.grid_size_y, "
        "kd.grid_size_z, kd.workgroup_size_x, kd.workgroup_size_y, kd.workgroup_size_z, kd.group_segment_size, "
        "kd.private_segment_size, ks.sgpr_count, ks.arch_vgpr_count, ks.accum_vgpr_count, m.idx "
        "FROM src.rocpd_kernel_dispatch kd JOIN dmap m ON m.id = kd.id AND m.guid = kd.guid "
        "LEFT JOIN src.rocpd_info_kernel_symbol ks ON ks.id = kd.kernel_id AND ks.guid = kd.guid "
        "LEFT JOIN src.rocpd_event e ON e.id = kd.event_id AND e.guid = kd.guid ORDER BY m.idx",
        (run_id,),
    )
    conn.execute(
        "INSERT INTO counter_value (run_id, dispatch_index, counter_name, value) "
        "SELECT ?, m.idx, pmc.name, SUM(pe.value) FROM src.rocpd_pmc_event pe "
        "JOIN src.rocpd_info_pmc pmc ON pmc.id = pe.pmc_id AND pmc.guid = pe.guid "
        "JOIN dmap m ON m.event_id = pe.event_id AND m.guid = pe.guid GROUP BY m.idx, pmc.name",
        (run_id,),
    )
    conn.execute(
        "INSERT INTO marker_range (run_id, range_index, pass_index, kind, process_id, thread_id, start_ns, end_ns, "
        "message, depth, correlation_id) "
        "SELECT ?, ROW_NUMBER() OVER (ORDER BY r.start, r.id) - 1, 0, 'range', r.pid, r.tid, r.start, r.\"end\", "
        "json_extract(e.extdata, '$.message'), 0, e.stack_id FROM src.rocpd_region r "
        "JOIN src.rocpd_event e ON e.id = r.event_id AND e.guid = r.guid "
        "JOIN src.rocpd_string c ON c.id = e.category_id AND c.guid = e.guid WHERE c.string LIKE 'MARKER%'",
        (run_id,),
    )
    t2 = time.perf_counter()
    if deferred == "1":
        for index in schema.INDEXES:
            conn.execute(next(sql for sql in index_sql if f" {index.name} " in sql))
    t3 = time.perf_counter()
    conn.execute("COMMIT")
    counts = {
        t: conn.execute(f"SELECT COUNT(*) FROM {t} WHERE run_id = ?", (run_id,)).fetchone()[0]
        for t in ("dispatch", "counter_value", "marker_range")
    }
    conn.close()
    t4 = time.perf_counter()
    return {"schema_s": t1 - t0, "copy_s": t2 - t1, "index_s": t3 - t2, "commit_s": t4 - t3, "rows": counts}


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
    "rocpd-copy": _child_rocpd_copy,
    "pandas-csv": _child_pandas_csv,
}


def run_child(*args: str) -> tuple[dict[str, Any], float, float]:
    """Run this script as a child; return (its JSON result, wall s, peak RSS MB)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, __file__, "--child", *args], stdout=subprocess.PIPE, cwd=REPO)
    assert proc.stdout is not None
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"child {args} failed with status {proc.returncode}")
    return json.loads(out.decode().strip().splitlines()[-1]), wall, usage.ru_maxrss / 1024.0


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


def _meminfo(key: str) -> float:
    """A /proc/meminfo value in GiB (0 when unknown)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024 / 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0.0


def _machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import numpy
    import pandas

    return (
        f"{cpu}, {os.cpu_count()} CPUs, {_meminfo('MemTotal'):.0f} GiB RAM, {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}, pandas {pandas.__version__}, numpy {numpy.__version__}, SQLite "
        f"{sqlite3.sqlite_version}"
    )


def _commit() -> str:
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO, capture_output=True, text=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + (" with uncommitted changes" if dirty else "")


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} / {five:.2f} / {fifteen:.2f}"


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
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        kind, *rest = args.child
        result = _child_attribution([int(x) for x in rest]) if kind == "attribution" else CHILDREN[kind](*rest)
        print(json.dumps(result))
        return

    command = "python benchmarks/scale.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    started = dt.datetime.now(dt.UTC)
    commit = _commit()  # the code measured: taken at the start (a commit made meanwhile is not what ran)
    load_start = _load()
    args.data.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="rocroof-scale-"))
    ingest_rows = []
    extra_rows = []
    notes: list[str] = []
    goals: list[tuple[str, str, str]] = []
    top = max(args.sizes)
    for fmt in args.formats:
        for n in args.sizes:
            cap = generate.ensure(fmt, n, args.data)
            size_mb = sum(f.stat().st_size for f in cap.rglob("*") if f.is_file()) / 1e6
            db = work / f"{fmt}-{n}.db"
            res, wall, rss = run_child("ingest", str(cap), str(db))
            rows = res["rows"]
            report_s = time_report(db)
            line = {
                "fmt": fmt,
                "n": n,
                "input_mb": size_mb,
                "wall": wall,
                "rss": rss,
                "read": res.get("read_s", float("nan")),
                "build": res.get("build_s", float("nan")),
                "write": res.get("write_s", float("nan")),
                "dispatch_rows": rows.get("dispatch", 0),
                "counter_rows": rows.get("counter_value", 0),
                "stored": sum(rows.values()),
                "report": report_s,
            }
            print(json.dumps(line), flush=True)
            ingest_rows.append(line)
            if fmt == "rocpd":
                results = {}
                for deferred in ("0", "1"):
                    cres, cwall, crss = run_child(
                        "rocpd-copy", str(cap), str(work / f"copy-{n}-{deferred}.db"), deferred
                    )
                    results[deferred] = (cres, cwall, crss)
                best = min(results, key=lambda k: results[k][1])
                cres, cwall, crss = results[best]
                extra = {
                    "fmt": fmt,
                    "n": n,
                    "what": "raw ATTACH + INSERT ... SELECT, "
                    + ("indexes created after the copy" if best == "1" else "into the indexed tables"),
                    "wall": cwall,
                    "rss": crss,
                    "copy_s": cres["copy_s"],
                    "index_s": cres["index_s"],
                    "other_wall": results["1" if best == "0" else "0"][1],
                    "rows": sum(cres["rows"].values()),
                    "ratio": wall / cwall,
                }
                print(json.dumps(extra), flush=True)
                extra_rows.append(extra)
            if fmt == "csv":
                free_gb = _meminfo("MemAvailable")
                if free_gb < PANDAS_NEEDS_GB_PER_MILLION * n / 1e6:
                    notes.append(
                        f"pandas baseline at {n:,} dispatches not run: {free_gb:.0f} GiB free, it needs about "
                        f"{PANDAS_NEEDS_GB_PER_MILLION * n / 1e6:.0f} GiB"
                    )
                else:
                    pres, pwall, prss = run_child("pandas-csv", str(cap), str(work / f"pandas-{n}.db"))
                    extra = {
                        "fmt": fmt,
                        "n": n,
                        "what": "pd.read_csv + DataFrame.to_sql",
                        "wall": pwall,
                        "rss": prss,
                        "rows": pres["rows"],
                        "rocroof_rows_per_s": pres["rows"] / wall,
                        "pandas_rows_per_s": pres["rows"] / pwall,
                        "speedup": pwall / wall,
                    }
                    print(json.dumps(extra), flush=True)
                    extra_rows.append(extra)
            for p in work.glob("*.db*"):
                p.unlink()
    shutil.rmtree(work, ignore_errors=True)
    attr, _, _ = run_child("attribution", *[str(n) for n in args.sizes])
    print(json.dumps(attr), flush=True)
    load_end = _load()

    # ---- goals
    for line in ingest_rows:
        if line["n"] != top:
            continue
        fmt = line["fmt"]
        goals.append(
            (
                f"{fmt}: ingest of {top:,} dispatches <= {GOAL_INGEST_S:.0f} s",
                "met" if line["wall"] <= GOAL_INGEST_S else "gap",
                f"{line['wall']:.1f} s",
            )
        )
        goals.append(
            (
                f"{fmt}: peak RSS <= {GOAL_RSS_MB:.0f} MB",
                "met" if line["rss"] <= GOAL_RSS_MB else "gap",
                f"{line['rss']:,.0f} MB",
            )
        )
        goals.append(
            (
                f"{fmt}: report --by op <= {GOAL_REPORT_S:.0f} s",
                "met" if line["report"] <= GOAL_REPORT_S else "gap",
                f"{line['report']:.2f} s",
            )
        )
    for extra in extra_rows:
        if extra["n"] != top:
            continue
        if extra["fmt"] == "rocpd":
            goals.append(
                (
                    f"rocpd: ingest within {GOAL_ROCPD_RATIO:.0f}x of the raw copy",
                    "met" if extra["ratio"] <= GOAL_ROCPD_RATIO else "gap",
                    f"{extra['ratio']:.2f}x",
                )
            )
        else:
            goals.append(
                (
                    f"csv: >= {GOAL_CSV_SPEEDUP:.0f}x faster than pandas + to_sql",
                    "met" if extra["speedup"] >= GOAL_CSV_SPEEDUP else "gap",
                    f"{extra['speedup']:.2f}x",
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
        "measurement in its own child process: wall time includes interpreter start and imports, peak RSS "
        "is the child's `ru_maxrss`).",
        "",
        "| format | dispatches | input MB | ingest s | read s | attribute + build s | write s | peak RSS MB "
        "| rows stored | dispatch rows/s | report --by op s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in ingest_rows:
        lines.append(
            f"| {r['fmt']} | {r['n']:,} | {r['input_mb']:,.0f} | {r['wall']:.1f} | {r['read']:.1f} | "
            f"{r['build']:.1f} | {r['write']:.1f} | {r['rss']:,.0f} | {r['stored']:,} | "
            f"{r['n'] / r['wall']:,.0f} | {r['report']:.2f} |"
        )
    lines += [
        "",
        "| baseline | dispatches | what | wall s | peak RSS MB | rows | rocroof ingest vs baseline |",
        "|---|---:|---|---:|---:|---:|---:|",
    ]
    for e in extra_rows:
        if e["fmt"] == "rocpd":
            what = (
                f"{e['what']} (copy {e['copy_s']:.1f} s + indexes {e['index_s']:.1f} s; the other way "
                f"{e['other_wall']:.1f} s)"
            )
            cmp_text = f"rocroof takes {e['ratio']:.2f}x as long"
        else:
            what = e["what"]
            cmp_text = (
                f"rocroof {e['rocroof_rows_per_s']:,.0f} rows/s vs pandas {e['pandas_rows_per_s']:,.0f} "
                f"rows/s: {e['speedup']:.2f}x"
            )
        lines.append(
            f"| {e['fmt']} | {e['n']:,} | {what} | {e['wall']:.1f} | {e['rss']:,.0f} | {e['rows']:,} | {cmp_text} |"
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
    text = "\n".join(lines)
    print(text)
    if not args.no_write:
        with open(REPO / "benchmarks" / "RESULTS.md", "a", encoding="utf-8") as fh:
            fh.write("\n" + text + "\n")


if __name__ == "__main__":
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a child killed for memory leaves no core file
    main()
