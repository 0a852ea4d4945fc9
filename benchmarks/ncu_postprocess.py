"""rocroof's own post-processing time for Nsight captures, against the profiler's wall time.

For each ``rocroof collect --profiler ncu`` capture given (default: examples/h200/*), time
``read_capture`` + ``build_run`` + ``Store.write_run`` (what ``rocroof collect`` does after the
profiler runs) over a few repetitions, and compare the best time with the capture's profiling wall
time from its manifest (``finished - started``: nsys run and export, ncu run and export). Goal: under
5%. Appends a section to benchmarks/RESULTS.md with the machine and date.

    .venv/bin/python benchmarks/ncu_postprocess.py [CAPTURE ...] [--repeat 5] [--no-write]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import tempfile
import time
from pathlib import Path

from rocroof.capture.readers import read_capture
from rocroof.ingest.pipeline import build_run
from rocroof.store import Store

REPO = Path(__file__).resolve().parent.parent


def profile_wall_s(capture: Path) -> float:
    """Seconds the profiler runs took, from the manifest's started/finished stamps."""
    m = json.loads((capture / "rocroof-collect.json").read_text())
    runs = [p.get("wall_s") for p in m.get("passes", []) + m.get("exports", [])]
    if runs and all(isinstance(w, (int, float)) for w in runs):
        return float(sum(runs))
    started, finished = (dt.datetime.fromisoformat(m[k]) for k in ("started", "finished"))
    return (finished - started).total_seconds()


def post_process_s(capture: Path, repeat: int) -> tuple[float, int]:
    """Best wall time of read + build + store, and the number of dispatches stored."""
    best, n = float("inf"), 0
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            frames = build_run(read_capture(capture))
            Store(Path(tmp) / "r.db").write_run(frames)
            best = min(best, time.perf_counter() - t0)
            n = len(frames.tables["dispatch"])
    return best, n


def main() -> None:
    """Time the post-processing of the given Nsight captures and append the table to RESULTS.md."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("captures", nargs="*", type=Path)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--no-write", action="store_true", help="print only; do not append to RESULTS.md")
    args = ap.parse_args()
    captures = args.captures or sorted(p for p in (REPO / "examples" / "h200").iterdir() if p.is_dir())
    lines = [
        f"## Nsight post-processing vs profiling time — {dt.date.today().isoformat()}",
        "",
        f"Post-processing machine: {platform.machine()}, {os.cpu_count()} CPUs, {platform.system()}, Python "
        f"{platform.python_version()}. Profiling wall time: the capture's manifest (an NVIDIA H200 host, "
        "16 cores; nsys + ncu runs and their exports).",
        "",
        "| capture | dispatch rows (all passes) | profiling wall s | rocroof post-processing s | ratio |",
        "|---|---:|---:|---:|---:|",
    ]
    for cap in captures:
        wall = profile_wall_s(cap)
        post, n = post_process_s(cap, args.repeat)
        lines.append(f"| `{cap.name}` | {n:,} | {wall:.1f} | {post:.2f} | {100 * post / wall:.1f}% |")
    lines.append("")
    text = "\n".join(lines)
    print(text)
    if not args.no_write:
        results = REPO / "benchmarks" / "RESULTS.md"
        head = "" if results.exists() else "# Benchmark results\n\nAppended by the scripts in benchmarks/.\n\n"
        with open(results, "a", encoding="utf-8") as fh:
            fh.write(head + text + "\n")


if __name__ == "__main__":
    main()
