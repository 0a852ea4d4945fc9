"""Write the databases of tests/data/old-databases with earlier rocroof versions (run by hand).

Each database holds one run: the capture this script writes (a rocprofv3 CSV pass of 6 ggml ops
with roctx ranges, HIP launches and gfx942 DRAM counters, ``capture()``) ingested by the rocroof of
one commit, checked out in a git worktree and run with this checkout's virtual environment:

    .venv/bin/python tests/data/old-databases/make.py [STEM ...]   (default: all of COMMITS)

The commits are those whose schema a user's database may still have (docs: tests/test_migrations.py).
"""

from __future__ import annotations

import gzip
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
#: (file stem, commit, what it is)
COMMITS = [
    ("schema1-81fc4a9", "81fc4a9", "first results database (migration 0001)"),
    ("schema2-8152b6a", "8152b6a", "byte/FLOP model tables (0002)"),
    ("schema4-a4cefa9", "a4cefa9", "version 0.1 as released (0001-0004)"),
    ("schema5-d7b6726", "d7b6726", "ceiling rule columns (0005)"),
    ("schema6-7e85bc8", "7e85bc8", "lean layout (0006), rowid tables"),
    ("schema7-42e22b0", "42e22b0", "version 0.2.0 as released (clustered tables, 0007)"),
]


def capture(dest: Path) -> Path:
    """A small rocprofv3 CSV capture: 6 ops, 9 kernels, gfx942's DRAM counters (dispatch 3 without TCC_BUBBLE)."""
    sys.path.insert(0, str(REPO))
    from tests.rocprof_csv import AGENT_INFO, Recorder, write_csv

    rec = Recorder(pid=4242)
    for inv, (op, node, kernels) in enumerate(
        [
            ("MUL_MAT", "Qcur-0", ["mul_mat_q4", "quantize_q8_1"]),
            ("ROPE", "Qcur-0", ["rope_f32"]),
            ("MUL_MAT", "Kcur-0", ["mul_mat_q4", "quantize_q8_1"]),
            ("ADD", "ffn_inp-0", ["add_f32"]),
            ("RMS_NORM", "norm-0", ["rms_norm_f32"]),
            ("MUL_MAT", "ffn_out-0", ["mul_mat_q4"]),
        ],
        start=1,
    ):
        rec.push(f"ggml:{op}:{node}:{inv}")
        for name in kernels:
            rec.launch(name)
        rec.pop()
    rec.sync()
    rec.write(dest)
    from tests.rocprof_csv import COUNTERS_70

    rows = []
    for k in rec.kernels:
        n = k.dispatch_id
        values = {
            "TCC_EA0_RDREQ_sum": 1000.0 * n,
            "TCC_EA0_RDREQ_32B_sum": 100.0 * n,
            "TCC_BUBBLE_sum": 10.0 * n,
            "TCC_EA0_WRREQ_sum": 50.0 * n,
            "TCC_EA0_WRREQ_64B_sum": 20.0 * n,
        }
        if n == 3:  # no TCC_BUBBLE: read bytes unknown, with bounds
            del values["TCC_BUBBLE_sum"]
        rows += k.counter_rows(4242, values)
    write_csv(dest / "4242_counter_collection.csv", COUNTERS_70, rows)
    info = dict.fromkeys(AGENT_INFO, 0)
    info.update({"Node_Id": 4, "Logical_Node_Id": 4, "Agent_Type": "GPU", "Name": "gfx942", "Cu_Count": 304})
    write_csv(dest / "4242_agent_info.csv", AGENT_INFO, [info])
    return dest


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="rocroof-old-"))
    cap = capture(work / "capture")
    wanted = set(sys.argv[1:])
    for stem, commit, _what in COMMITS:
        if wanted and stem not in wanted:
            continue
        tree = work / commit
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(tree), commit], check=True)
        try:
            db = work / f"{stem}.db"
            env = {"PYTHONPATH": str(tree / "plugin"), "PATH": "/usr/bin:/bin"}
            proc = subprocess.run(
                [sys.executable, "-m", "rocroof", "ingest", str(cap), "--db", str(db), "--label", "case=old"],
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
            print(stem, proc.returncode, proc.stdout.strip().splitlines()[:1], proc.stderr.strip()[-300:])
            if proc.returncode == 0:
                (HERE / f"{stem}.db.gz").write_bytes(gzip.compress(db.read_bytes(), mtime=0))
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)], check=True)
    shutil.copytree(cap, HERE / "capture", dirs_exist_ok=True)


if __name__ == "__main__":
    main()
