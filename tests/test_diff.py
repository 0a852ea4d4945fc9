"""rocroof diff on a recorded run against itself and against a copy with slowed-down matvec kernels.

The change is planted by the test (Nsight Systems kernel end times moved so that every
``mul_mat_vec_q`` kernel takes 1.5x as long), so which ops must come out slower is known
without rocroof.
"""

from __future__ import annotations

import gzip
import shutil
import sqlite3
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from rocroof.capture.readers import read_capture
from rocroof.cli import cli
from rocroof.ingest.pipeline import build_run
from rocroof.report.diff import diff_runs, render_diff
from rocroof.store import Store

from .conftest import writable_copy

DECODE = Path(__file__).resolve().parent.parent / "examples" / "h200" / "dense500m-decode"


def _slowed_copy(tmp_path: Path, factor: float) -> Path:
    cap = tmp_path / "slow"
    writable_copy(DECODE, cap)
    gz = cap / "trace" / "nsys.sqlite.gz"
    db = cap / "trace" / "nsys.sqlite"
    db.write_bytes(gzip.decompress(gz.read_bytes()))
    gz.unlink()
    with sqlite3.connect(db) as con:
        ids = [r[0] for r in con.execute("SELECT id FROM StringIds WHERE value LIKE '%mul_mat_vec_q%'")]
        marks = ",".join("?" * len(ids))
        con.execute(
            f"UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = start + CAST((end - start) * ? AS INTEGER) "
            f"WHERE demangledName IN ({marks}) OR shortName IN ({marks})",
            (factor, *ids, *ids),
        )
    return cap


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Store, Path]:
    tmp = tmp_path_factory.mktemp("diff")
    path = tmp / "r.db"
    s = Store(path)
    s.write_run(build_run(read_capture(DECODE)))
    s.write_run(build_run(read_capture(_slowed_copy(tmp, 1.5))))
    s.close()  # its WAL is checkpointed into the file, which a test copies
    return Store(path, read_only=True), path


def test_a_run_against_itself_is_all_noise(store: tuple[Store, Path]) -> None:
    d = diff_runs(store[0], 1, 1)
    t = d.total.iloc[0]
    assert t["delta_us"] == 0 and t["nodes_faster"] == 0 and t["nodes_slower"] == 0
    assert t["matched_nodes"] == t["nodes_noise"] > 0
    assert (d.by_node["verdict"] == "noise").all()
    assert "No change beyond run-to-run noise." in render_diff(d, "markdown")


def test_slowed_matvecs_show_up_as_slower_matmuls_only(store: tuple[Store, Path]) -> None:
    d = diff_runs(store[0], 1, 2)
    matmul = d.by_node[d.by_node["op"] == "MUL_MAT"]
    assert (matmul["verdict"] == "slower").all()
    # each MUL_MAT op is a quantize kernel (unchanged) plus one matvec (x1.5): between +0% and +50%
    assert ((matmul["delta_pct"] > 5) & (matmul["delta_pct"] <= 50.5)).all()
    others = d.by_node[d.by_node["op"] != "MUL_MAT"]
    assert (others["verdict"] == "noise").all(), others[["node_name", "verdict"]]
    md = render_diff(d, "markdown")
    assert md.startswith("**rocroof diff**: run 1 → run 2") and "| MUL_MAT |" in md
    # at most 9 columns a table (A and B paired in a cell), every column with --all-columns
    for row in (line for line in md.splitlines() if line.startswith("| op |")):
        assert row.count(" | ") + 1 <= 9, row
    wide = render_diff(d, "markdown", all_columns=True)
    assert wide.startswith("**rocroof diff**: A = run 1, B = run 2") and "| µs/eval A | µs/eval B |" in wide
    assert "Nodes that changed beyond noise" in md


def test_cli_diff(store: tuple[Store, Path]) -> None:
    result = CliRunner().invoke(cli, ["diff", "1", "2", "--db", str(store[1]), "--format", "csv"])
    assert result.exit_code == 0 and result.output.startswith("op,op_list,node_name")
    bad = CliRunner().invoke(cli, ["diff", "1", "9", "--db", str(store[1])])
    assert bad.exit_code == 1 and bad.output.startswith("Error: ")


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--min-change-us", "inf"),  # every change under an infinite floor: all noise, exit 0
        ("--min-change-us", "1e999"),  # inf once read
        ("--min-change-us", "nan"),
        ("--min-change", "nan"),
        ("--min-change", "inf"),
    ],
)
def test_a_noise_floor_must_be_finite(store: tuple[Store, Path], option: str, value: str) -> None:
    # runs 1 and 2 differ by the slowed matvecs (x1.5), beyond any finite floor under 100%
    result = CliRunner().invoke(cli, ["diff", "1", "2", "--db", str(store[1]), option, value])
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    assert f"Error: Invalid value for '{option}': " in result.output


@pytest.mark.parametrize(
    ("delta_us", "floor_us", "verdict"),
    [
        (0.20, 0.25, "noise"),  # 15% of a 1.3 µs kernel, but under the per-call floor
        (0.30, 0.25, "slower"),  # beyond every floor and 2 SE (0.0447 µs)
        (0.20, 0.0, "slower"),  # without the floor: 15% and far beyond 2 SE
        (-0.05, 0.0, "noise"),  # 3.8%: under the 5% floor
    ],
)
def test_a_change_must_clear_the_spread_and_both_floors(delta_us: float, floor_us: float, verdict: str) -> None:
    from rocroof.report.diff import _verdict

    # 8 samples a side with a standard deviation of 0.05 µs: 2 SE = 2 * sqrt(2 * 0.05**2 / 8) = 0.05 µs
    row = pd.Series({"n_a": 8, "n_b": 8, "mean_us_a": 1.3, "sd_us_a": 0.05, "sd_us_b": 0.05, "delta_us": delta_us})
    assert _verdict(row, min_change=0.05, min_change_us=floor_us) == verdict


def test_cli_diff_names_the_labels_that_tell_the_runs_apart(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    slow = _slowed_copy(tmp_path, 1.5)
    for cap, take in ((DECODE, "take=1"), (slow, "take=2")):
        result = CliRunner().invoke(
            cli, ["ingest", str(cap), "--db", str(db), "--label", "model=dense500m", "--label", take]
        )
        assert result.exit_code == 0, result.output
    out = CliRunner().invoke(cli, ["diff", "1", "2", "--db", str(db)]).output
    assert out.splitlines()[0] == "**rocroof diff**: run 1 → run 2"  # the runs folded below the title
    assert f"A = run 1 ({DECODE} \\[take=1\\])  \nB = run 2 ({slow} \\[take=2\\])" in out  # "[" escaped: no link
    wide = CliRunner().invoke(cli, ["diff", "1", "2", "--db", str(db), "--all-columns"]).output
    a, b = f"{DECODE} \\[take=1\\]", f"{slow} \\[take=2\\]"
    assert wide.splitlines()[0] == f"**rocroof diff**: A = run 1 ({a}), B = run 2 ({b})"


def test_a_diff_across_gpus_or_timing_sources_says_so(store: tuple[Store, Path], tmp_path: Path) -> None:
    db = tmp_path / "two.db"
    shutil.copyfile(store[1], db)
    with sqlite3.connect(db) as con:
        con.execute("UPDATE run SET gpu_arch = 'gfx942', timing_source = 'counter_pass' WHERE run_id = 2")
    con.close()
    d = diff_runs(Store(db, read_only=True), 1, 2)
    gpus = "the runs ran on different GPUs (NVIDIA H200 (sm_90) vs NVIDIA H200 (gfx942)): time differences include that"
    assert gpus in d.notes and d.warnings == [gpus]
    assert "the runs have different timing sources (trace vs counter_pass): time differences include that" in d.notes
    assert not [n for n in diff_runs(store[0], 1, 2).notes if "different GPU" in n or "timing sources" in n]


def test_a_diff_of_a_run_with_itself_or_across_gpus_warns_on_stderr(store: tuple[Store, Path], tmp_path: Path) -> None:
    import json

    _, path = store
    same = CliRunner().invoke(cli, ["diff", "1", "1", "--db", str(path), "--format", "json"])
    assert same.exit_code == 0, same.output
    said = "A and B are the same run (1): every difference is zero by construction"
    assert same.stderr == f"warning: {said}\n" and json.loads(same.stdout)["warnings"] == [said]
    kernels = CliRunner().invoke(cli, ["diff", "1", "1", "--db", str(path), "--by", "kernel"])
    assert kernels.stderr.startswith("warning: A and B are the same run (1)") and len(kernels.stderr.splitlines()) == 1
    two = CliRunner().invoke(cli, ["diff", "1", "2", "--db", str(path)])
    assert two.exit_code == 0 and two.stderr == ""  # two runs of one GPU: nothing to warn of
    db = tmp_path / "gpus.db"
    shutil.copyfile(path, db)
    with sqlite3.connect(db) as con:  # the same arch, another GPU model: a warning all the same
        con.execute("UPDATE run SET gpu_name = 'NVIDIA H100 80GB HBM3' WHERE run_id = 2")
    con.close()
    for by in ("op", "kernel"):
        other = CliRunner().invoke(cli, ["diff", "1", "2", "--db", str(db), "--by", by, "--format", "csv"])
        assert other.exit_code == 0, other.output
        assert other.stderr == (
            "warning: the runs ran on different GPUs (NVIDIA H200 (sm_90) vs NVIDIA H100 80GB HBM3 (sm_90)): "
            "time differences include that\n"
        )
        assert "warning" not in other.stdout  # the CSV stays a table


# ---- per kernel: runs without ggml ops ------------------------------------------------------------


def _kernel_run(tmp_path: Path, name: str, kernels: dict[str, list[int]]) -> Path:
    """A rocprofv3 capture without markers: each kernel name's dispatches with the given durations (ns)."""
    from .rocprof_csv import T0, Kernel, write_pass

    rows, t, did = [], T0, 0
    for kernel, durations in kernels.items():
        for ns in durations:
            did += 1
            rows.append(Kernel(did, kernel, did, t, t + ns))
            t += ns + 100
    return write_pass(tmp_path / name, 4000 + len(name), kernels=rows)


def test_runs_without_ggml_ops_are_compared_per_kernel(tmp_path: Path) -> None:
    a = _kernel_run(tmp_path, "a", {"gemm": [1000, 1010, 990, 1000], "copy": [200, 200], "old": [50]})
    b = _kernel_run(tmp_path, "b", {"gemm": [1500, 1510, 1490, 1500], "copy": [200, 202], "new": [70, 70]})
    db = tmp_path / "r.db"
    for cap in (a, b):
        assert CliRunner().invoke(cli, ["ingest", str(cap), "--db", str(db)]).exit_code == 0
    result = CliRunner().invoke(cli, ["diff", "1", "2", "--db", str(db), "--format", "json"])
    assert result.exit_code == 0, result.output
    import json

    doc = json.loads(result.output)
    assert doc["notes"][0] == "run 1 and run 2 have no ggml ops: compared per kernel"
    rows = {r["kernel"]: r for r in doc["kernels"]}
    # by hand: gemm's mean 1000 -> 1500 ns, spread (sample sd) 8.165 ns on each side: far beyond noise
    gemm = rows["gemm"]
    assert (gemm["dispatches_a"], gemm["dispatches_b"]) == (4, 4)
    assert gemm["mean_us_a"] == pytest.approx(1.0) and gemm["mean_us_b"] == pytest.approx(1.5)
    assert gemm["delta_pct"] == pytest.approx(50.0) and gemm["verdict"] == "slower"
    assert gemm["total_us_a"] == pytest.approx(4.0) and gemm["total_us_b"] == pytest.approx(6.0)
    assert rows["copy"]["verdict"] == "noise"  # +0.5%: under the 5% floor
    assert rows["old"]["verdict"] == "only in A" and rows["new"]["verdict"] == "only in B"
    total = doc["total"]
    assert total["us_all_a"] == pytest.approx((4000 + 400 + 50) / 1e3)
    assert total["us_all_b"] == pytest.approx((6000 + 402 + 140) / 1e3)
    assert (total["matched_kernels"], total["kernels_slower"], total["kernels_noise"]) == (2, 1, 1)
    assert (total["only_in_a"], total["only_in_b"]) == (1, 1)
    # the Markdown names the change, largest GPU time change first
    md = CliRunner().invoke(cli, ["diff", "1", "2", "--db", str(db)]).output
    assert "**rocroof diff** per kernel: run 1 → run 2" in md
    table = md.split("**Kernels that changed beyond noise")[1]
    assert table.index("| gemm |") < table.index("| new |") and "| copy |" not in table
    # --by op on runs without ops says so in one line
    op = CliRunner().invoke(cli, ["diff", "1", "2", "--db", str(db), "--by", "op"])
    assert (
        op.exit_code == 1
        and op.output.strip() == "Error: run 1 has no ggml op invocations to compare (was it attributed?)"
    )


def test_runs_with_ggml_ops_can_be_compared_per_kernel_too(store: tuple[Store, Path]) -> None:
    _, db = store
    result = CliRunner().invoke(cli, ["diff", "1", "1", "--db", str(db), "--by", "kernel", "--format", "table"])
    assert result.exit_code == 0, result.output
    assert "rocroof diff per kernel" in result.output and "No change beyond run-to-run noise." in result.output


def test_a_kernel_without_a_timed_dispatch_on_one_side_is_time_unknown(tmp_path: Path) -> None:
    """Its dispatches are there on both sides: neither "only in A" nor "only in B"."""
    import json

    a = _kernel_run(tmp_path, "a", {"gemm": [1000, 1000], "copy": [200, 200]})
    b = _kernel_run(tmp_path, "b", {"gemm": [1000, 1001], "copy": [200, 200]})  # not the same content as A
    db = tmp_path / "r.db"
    for cap in (a, b):
        assert CliRunner().invoke(cli, ["ingest", str(cap), "--db", str(db)]).exit_code == 0
    with sqlite3.connect(db) as conn:  # as a capture with rounded timestamps stores them: time unknown
        conn.execute(
            "UPDATE dispatch_record SET duration_ns = NULL WHERE run_id = 1 AND kernel_index = "
            "(SELECT kernel_index FROM kernel_symbol WHERE run_id = 1 AND kernel_name = 'copy')"
        )
    result = CliRunner().invoke(cli, ["diff", "1", "2", "--db", str(db), "--format", "json"])
    assert result.exit_code == 0, result.output
    rows = {r["kernel"]: r for r in json.loads(result.output)["kernels"]}
    assert rows["copy"]["verdict"] == "time unknown" and rows["copy"]["dispatches_a"] == 2
    assert rows["gemm"]["verdict"] == "noise"
    # the text counts it, and its last line does not call an uncompared kernel "no change"
    text = CliRunner().invoke(cli, ["diff", "1", "2", "--db", str(db), "--format", "table"]).output
    assert "within noise 1, time unknown 1." in text
    assert text.strip().splitlines()[-1] == (
        "No change beyond run-to-run noise in the 1 kernel(s) with times on both sides; 1 kernel(s) were not "
        "compared: no timed dispatch in run 1 (rocroof runs --notes 1 says why)."
    )


def test_a_diff_where_no_kernel_has_a_time_on_one_side_says_nothing_was_compared(tmp_path: Path) -> None:
    """The trial: a capture with rounded timestamps against another read "No change beyond run-to-run noise"."""
    a = _kernel_run(tmp_path, "a", {"gemm": [1000, 1000], "copy": [200, 200]})
    b = _kernel_run(tmp_path, "b", {"gemm": [3000, 3000], "copy": [900, 900]})
    db = tmp_path / "r.db"
    for cap in (a, b):
        assert CliRunner().invoke(cli, ["ingest", str(cap), "--db", str(db)]).exit_code == 0
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE dispatch_record SET duration_ns = NULL WHERE run_id = 2")
    for args, last in (
        (
            ["1", "2"],
            "Nothing to compare: the 2 kernel(s) in both runs have no timed dispatch in run 2 "
            "(rocroof runs --notes 2 says why).",
        ),
        (
            ["2", "2"],
            "Nothing to compare: the 2 kernel(s) in both runs have no timed dispatch in run 2 "
            "(rocroof runs --notes 2 says why).",
        ),
    ):
        out = CliRunner().invoke(cli, ["diff", *args, "--db", str(db), "--format", "markdown"]).output
        assert out.strip().splitlines()[-1] == last, out
        assert "No change beyond" not in out


def test_changes_are_signed_in_tables_and_markdown_but_plain_in_csv_and_json(tmp_path: Path) -> None:
    import json

    # by hand: gemm 1.0 -> 1.5 µs per dispatch (+0.50 µs, +50.00%), fill 2.0 -> 1.0 µs (-1.00 µs, -50.00%)
    a = _kernel_run(tmp_path, "a", {"gemm": [1000, 1000, 1000, 1000], "fill": [2000, 2000]})
    b = _kernel_run(tmp_path, "b", {"gemm": [1500, 1500, 1500, 1500], "fill": [1000, 1000]})
    db = tmp_path / "r.db"
    for cap in (a, b):
        assert CliRunner().invoke(cli, ["ingest", str(cap), "--db", str(db)]).exit_code == 0
    for fmt in ("markdown", "table"):
        out = CliRunner().invoke(cli, ["diff", "1", "2", "--db", str(db), "--format", fmt]).output
        gemm = next(line for line in out.splitlines() if "gemm" in line)
        fill = next(line for line in out.splitlines() if "fill" in line)
        assert "+0.50" in gemm and "+50.00" in gemm, (fmt, gemm)
        assert "-1.00" in fill and "-50.00" in fill and "+" not in fill, (fmt, fill)
    csv_out = CliRunner().invoke(cli, ["diff", "1", "2", "--db", str(db), "--format", "csv"]).output
    rows = {r["kernel"]: r for r in __import__("csv").DictReader(csv_out.splitlines())}
    assert (rows["gemm"]["delta_us"], rows["gemm"]["delta_pct"]) == ("0.5", "50.0")
    assert (rows["fill"]["delta_us"], rows["fill"]["delta_pct"]) == ("-1.0", "-50.0")
    doc = json.loads(CliRunner().invoke(cli, ["diff", "1", "2", "--db", str(db), "--format", "json"]).output)
    assert {r["kernel"]: r["delta_us"] for r in doc["kernels"]} == {"gemm": 0.5, "fill": -1.0}


def test_a_change_that_rounds_to_zero_has_no_sign() -> None:
    from rocroof.report.diff import _cell

    assert (_cell(0.004, signed=True), _cell(-0.004, signed=True)) == ("0.00", "0.00")
    assert (_cell(1234.5, signed=True), _cell(-0.006, signed=True)) == ("+1,234.50", "-0.01")
    assert _cell(float("nan"), signed=True) == "—" and _cell(3.0) == "3.00"


def test_markdown_helpers_escape_by_hand() -> None:
    from rocroof.text import markdown_code, markdown_text

    # by hand (CommonMark: a backslash before ASCII punctuation shows it; "_" inside a word is no emphasis)
    assert markdown_text("void foo<float, 4>(T*)") == "void foo\\<float, 4\\>(T\\*)"
    assert markdown_text("_Z3bar_v a|b `x` [l](u) ~D") == "\\_Z3bar_v a\\|b \\`x\\` \\[l\\](u) \\~D"
    assert markdown_text("a\\*b C:\\dir") == "a\\\\\\*b C:\\dir"  # a backslash before * shown, before d left
    assert markdown_code("foo<T*>") == "`foo<T*>`" and markdown_code("a`b|c") == "``a`b\\|c``"
    assert markdown_code("`x") == "`` `x ``" and markdown_code("") == ""


def test_markdown_escapes_the_capture_s_text_once(tmp_path: Path) -> None:
    """Kernel names and labels render on GitHub as written: Markdown's markup escaped, and only once."""
    odd = "foo<float*, 4>"  # a name that reports show whole (no return type or arguments to shorten)
    a = _kernel_run(tmp_path, "a", {odd: [1000, 1000, 1000, 1000], "a|b": [500, 500]})
    b = _kernel_run(tmp_path, "b", {odd: [1500, 1500, 1500, 1500], "a|b": [900, 900]})
    db = tmp_path / "r.db"
    for cap, label in ((a, "note=_x_"), (b, "note=<y>")):  # ('*' is the selector's wildcard: no label holds it)
        assert CliRunner().invoke(cli, ["ingest", str(cap), "--db", str(db), "--label", label]).exit_code == 0
    md = CliRunner().invoke(cli, ["diff", "1", "2", "--db", str(db)]).stdout
    assert "| foo\\<float\\*, 4\\> |" in md and "| a\\|b |" in md and "foo<" not in md
    assert "\\[note=\\_x\\_\\]" in md and "\\[note=\\<y\\>\\]" in md  # the labels that tell A from B
    table = CliRunner().invoke(cli, ["diff", "1", "2", "--db", str(db), "--format", "table"]).stdout
    assert odd in table and "[note=_x_]" in table  # a terminal shows the text as it is
    args = ["--db", str(db), "--run", "1", "--by", "kernel", "--format", "markdown"]
    report = CliRunner().invoke(cli, ["report", *args])
    assert f"| `{odd}` |" in report.stdout and "| `a\\|b` |" in report.stdout
    assert "labels: note=\\_x\\_  " in report.stdout.splitlines()
    runs = CliRunner().invoke(cli, ["runs", "--db", str(db), "--format", "markdown"]).stdout
    assert "note=\\_x\\_" in runs and "note=\\<y\\>" in runs
