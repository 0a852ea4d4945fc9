"""Synthetic captures of any size for robustness tests, from ``benchmarks/generate.py``.

The benchmark's generator writes each format rocroof reads (rocprofv3 CSV, rocpd, Nsight
Systems SQLite + Nsight Compute CSV) for a llama.cpp-like run of N dispatches; the tests use
small N (CI) and ~10^5 (``-m large``). Captures are cached per session under a temporary
directory and copied for tests that change them.
"""

from __future__ import annotations

import shutil
import sqlite3
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO / "benchmarks") not in sys.path:
    sys.path.insert(0, str(REPO / "benchmarks"))

import generate  # noqa: E402

FORMATS = tuple(generate.WRITERS)


def capture(fmt: str, n: int, cache: Path, dest: Path | None = None) -> Path:
    """A capture of ``fmt`` with ``n`` dispatches (cached under ``cache``), or a copy at ``dest``."""
    src = generate.ensure(fmt, n, cache)
    if dest is None:
        return src
    shutil.copytree(src, dest)
    return dest


def row_counts(db: Path) -> dict[str, dict[int, int]]:
    """Rows per run of every table and view that has a ``run_id`` column, read with plain sqlite3.

    Views count too: the logical tables (``dispatch``, ``counter_value``, ``dram_traffic``) are views
    over the stored layout since schema 6. Also checks the file with ``PRAGMA integrity_check``.
    """
    con = sqlite3.connect(db)
    try:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")]
        out: dict[str, dict[int, int]] = {}
        for table in tables:
            columns = [r[1] for r in con.execute(f'PRAGMA table_info("{table}")')]
            if "run_id" in columns:
                rows = con.execute(f'SELECT run_id, COUNT(*) FROM "{table}" GROUP BY 1')
                out[table] = {int(r): int(c) for r, c in rows}
        return out
    finally:
        con.close()


def of_run(counts: dict[str, dict[int, int]], run_id: int) -> dict[str, int]:
    """The row count of each table for one run (tables without its rows give 0)."""
    return {table: per_run.get(run_id, 0) for table, per_run in counts.items()}


def run_ids(counts: dict[str, dict[int, int]]) -> set[int]:
    """The runs stored (rows of the ``run`` table)."""
    return set(counts.get("run", {}))


#: A rocprofiler-compute ``sysinfo.csv`` (the columns rocroof reads, as the recorded MI300X workload spells them).
SYSINFO = (
    "workload_name,command,hostname,gpu_model,gpu_arch,cu_per_gpu,wave_size,max_sclk,hbm_bw,num_xcd\n"
    'bench,"./app -n 3",host,MI300X_A1,gfx942,304,64,2100,5324.8,8\n'
)
PMC_PERF_HEADER = (
    "Dispatch_ID,GPU_ID,Queue_ID,PID,TID,Grid_Size,Workgroup_Size,LDS_Per_Workgroup,Scratch_Per_Workitem,Arch_VGPR,"
    "Accum_VGPR,SGPR,Wave_Size,Kernel_Name,Start_Timestamp,End_Timestamp,Correlation_ID,TCC_EA0_RDREQ_sum,"
    "TCC_EA0_RDREQ_32B_sum,TCC_BUBBLE_sum,TCC_EA0_WRREQ_sum,TCC_EA0_WRREQ_64B_sum,TCC_HIT[0],TCC_HIT[1]"
)


def rocprof_compute_workload(dest: Path, n: int = 30) -> Path:
    """A rocprofiler-compute workload: ``sysinfo.csv`` and a wide merged ``pmc_perf.csv`` of ``n`` dispatches."""
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "sysinfo.csv").write_text(SYSINFO)
    rows = [PMC_PERF_HEADER]
    t = 12_345_678_901_234_567
    for i in range(n):
        name = generate.KERNELS[i % len(generate.KERNELS)][0]
        rows.append(
            f'{i},2,1,4242,4242,{1024 * (1 + i % 4)},256,0,0,32,0,16,64,"{name}",{t},{t + 700 + i},{i + 1},'
            f"{1000 + i}.000000,{i}.000000,3.000000,{500 + i}.000000,{400 + i}.000000,{7 + i}.000000,{9 + i}.000000"
        )
        t += 1_000
    (dest / "pmc_perf.csv").write_text("\n".join(rows) + "\n")
    return dest


def ggml_metadata(dest: Path, rows: list[dict[str, object]]) -> Path:
    """A ``GGML_ROOFLINE_OUT`` JSON file (AMD's fork: rows carry their kernels) in directory ``dest``."""
    import json

    dest.mkdir(parents=True, exist_ok=True)
    doc = {"device": "gfx1151", "total_gpu_time_us": 100.0, "rows": rows}
    path = dest / "roofline.json"
    path.write_text(json.dumps(doc, indent=1))
    return dest
