"""The roofline analysis in reports: ceilings, bound, % of ceiling, flags, plot, HTML, graph export.

Expected numbers are computed in the tests from the roofline definition (attainable = min(peak,
intensity × bandwidth)) and from the dense-500m model's shapes (examples/h200/README.md).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from rocroof.analysis.roofline import add_roofline_columns, compute_peaks, compute_type, flag_for, per_op_compute_peaks
from rocroof.capture.readers import read_capture
from rocroof.cli import cli
from rocroof.ingest.pipeline import build_run
from rocroof.report.tables import build_report, render
from rocroof.store import Store

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "h200"


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("roof") / "r.db"
    store = Store(path)
    for case in ("dense500m-decode", "moe-prefill"):
        store.write_run(build_run(read_capture(EXAMPLES / case)))
    return path


def test_bound_and_percent_of_ceiling_follow_the_roofline() -> None:
    rows = pd.DataFrame(
        {
            "op": ["MUL_MAT", "MUL_MAT", "ADD", "GET_ROWS"],
            # 2 FLOP/B at 4,800 GB/s: roof 9.6 TFLOP/s, far below 1,000: memory-bound
            # 1,000 FLOP/B: 4,800 TFLOP/s > 1,000: compute-bound on the matrix peak
            # ADD at 0.25 FLOP/B: roof 1.2 TFLOP/s < 60 (vector peak): memory-bound
            "arithmetic_intensity": [2.0, 1000.0, 0.25, None],
            "flops": [2.4e6, 5e8, 1e3, 0.0],
            "duration_ns": [1000.0, 1000.0, 1000.0, 1000.0],  # 2.4, 500, 0.001 TFLOP/s
            "achieved_gbps": [1200.0, 0.5, 4.0, 480.0],
            "share_of_time_pct": [40.0, 40.0, 10.0, 10.0],
        }
    )
    ceilings = {"dram_gbps": 4800.0, "fp16_matrix_tflops": 1000.0, "fp32_vector_tflops": 60.0}
    out = add_roofline_columns(rows, {}, ceilings)
    # ADD runs at 0.08% of its roof in 1-µs calls: launch/latency-bound, not a memory problem
    assert list(out["bound"]) == ["memory", "compute", "latency", "memory"]
    assert out["time_at_roof_ns"][0] == pytest.approx(2.4e6 / 9.6e3)  # FLOP / (TFLOP/s = 1e3 FLOP/ns)
    assert out["mean_us_per_call"][0] == pytest.approx(1.0)
    assert out["attainable_tflops"][0] == pytest.approx(9.6)
    assert out["pct_of_ceiling"][0] == pytest.approx(100 * 2.4 / 9.6)
    assert out["attainable_tflops"][1] == pytest.approx(1000.0)
    assert out["pct_of_ceiling"][1] == pytest.approx(50.0)
    assert out["governing_ceiling"][1] == "FP16 matrix peak"
    assert out["pct_of_ceiling"][2] == pytest.approx(100 * 0.001 / 1.2)
    assert out["pct_of_ceiling"][3] == pytest.approx(10.0)  # no FLOPs: judged on bandwidth, 480 of 4,800 GB/s
    assert list(out["time_share"]) == [0.4, 0.4, 0.1, 0.1]


@pytest.mark.parametrize(
    ("row", "run", "expected"),
    [
        ({"measured_over_model": 1.0}, {}, ""),
        ({"measured_over_model": 0.5, "dram_write_bytes": 0, "model_write_bytes": 1e6}, {}, "write-back L2"),
        (
            {"measured_over_model": 0.5, "dram_write_bytes": 1e6, "model_write_bytes": 1e6, "model_bytes": 4e6},
            {"cache_control": None},
            "served from L2/Infinity Cache",
        ),
        (
            {"measured_over_model": 0.5, "dram_write_bytes": 1e6, "model_write_bytes": 1e6, "model_bytes": 4e6},
            {"cache_control": "all"},
            "cold caches",
        ),
        (
            {"measured_over_model": 0.4, "model_write_bytes": 0, "model_note": "experts_used unknown: bound 8 of 8"},
            {"cache_control": "all"},
            "upper bound",
        ),
        ({"measured_over_model": 2.0, "model_bytes": 4096}, {}, "small op"),
        ({"measured_over_model": 2.0, "model_bytes": 4e9}, {}, "re-reads"),
        ({"measured_over_model": 0.5, "model_bytes": 4e9}, {"gpu_arch": "gfx1151", "cache_control": "all"}, "#2352"),
    ],
)
def test_flags_explain_by_how_the_run_was_measured(
    row: dict[str, object], run: dict[str, object], expected: str
) -> None:
    text = flag_for(row, run, {"llc_bytes": 256 * 2**20})
    assert (expected in text) if expected else text == ""


def test_decode_report_carries_model_and_roofline(db: Path) -> None:
    rep = build_report(Store(db, read_only=True), 1, by="op")
    mm = rep.rows.set_index("op").loc["MUL_MAT"]
    # by hand, per token: 10 layers of q, k, v, attn_out, gate+up, down; fused ADD (attn_out in layers 0-8,
    # ffn_out in all 10) and SWIGLU (2 FLOP per output element), and the 32000-row output head
    per_token = (
        10 * (2 * 2048 * 2048 * 2 + 2 * 512 * 2048 * 2 + 2 * 2 * 5632 * 2048 + 2 * 2048 * 5632)
        + 9 * 2048
        + 10 * 2 * 5632
        + 10 * 2048
        + 2 * 32000 * 2048
    )
    assert mm["flops"] == 4 * per_token
    assert mm["measured_over_model"] == pytest.approx(1.0, abs=0.01)
    assert mm["bound"] == "memory" and mm["governing_ceiling"] == "DRAM bandwidth"
    assert mm["flag"] == ""
    # the memory roof at the op's intensity, and the op's achieved rate as % of it
    bw = rep.ceilings["dram_gbps"]["value"]
    achieved = mm["flops"] / mm["duration_ns"] / 1e3
    assert mm["pct_of_ceiling"] == pytest.approx(100 * achieved / (mm["arithmetic_intensity"] * bw / 1e3))
    for key in (
        "model_read_bytes",
        "model_write_bytes",
        "arithmetic_intensity",
        "model_arithmetic_intensity",
        "time_share",
    ):
        assert key in rep.rows.columns
    text = render(rep, "table")
    assert "meas/model" in text and "compute ceilings: INT8 matrix 1,978.9 TOP/s (unverified), FP16 matrix" in text


@pytest.mark.parametrize("width", [80, 100, 120])
def test_a_narrow_terminal_drops_whole_columns_and_names_them(db: Path, width: int) -> None:
    rep = build_report(Store(db, read_only=True), 1, by="op")
    wide = render(rep, "table", width=160)
    assert "left out for" not in wide
    assert "µs at roof" in next(line for line in wide.splitlines() if line.startswith("ggml op"))
    text = render(rep, "table", width=width)
    lines = text.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("ggml op"))
    rule = lines[header + 1]
    assert set(rule) == {"━"} and len(rule) <= width
    # one line per op: no number folded onto a second line
    body = lines[header + 2 : header + 2 + len(rep.rows)]
    assert [line.split()[0] for line in body] == list(rep.rows["op"])
    time_us = f"{rep.rows['duration_ns'].iloc[0] / 1e3:,.2f}"
    assert time_us in body[0]
    dropped = next(line for line in lines if line.startswith("left out for a"))
    assert f"left out for a terminal of {width} columns: µs at roof, disp." in dropped
    for name in ("meas/model", "bound", "% roof"):  # the roofline verdict stays
        assert name in lines[header]
    # the key explains only the columns shown
    assert "µs/call = time per op invocation" in wide
    assert ("µs/call = time per op invocation" in text) == ("µs/call" in lines[header])


def test_a_terminal_too_narrow_for_the_fewest_columns_gets_one_block_per_row(db: Path) -> None:
    rep = build_report(Store(db, read_only=True), 1, by="op")
    text = render(rep, "table", width=50)
    assert max(len(line) for line in text.splitlines()) <= 50
    blocks = text.split("-- row ")[1:]
    assert len(blocks) == len(rep.rows)
    first = blocks[0].splitlines()
    assert first[1].split(": ") == ["   ggml op", rep.rows["op"].iloc[0]]
    assert f"time µs: {rep.rows['duration_ns'].iloc[0] / 1e3:,.2f}" in blocks[0]  # whole, on one line
    assert "µs at roof: " in blocks[0]  # every column, nothing left out


def test_runs_too_wide_for_the_terminal_print_one_block_per_run(db: Path) -> None:
    result = CliRunner().invoke(cli, ["runs", "--db", str(db)], env={"COLUMNS": "60"})
    assert result.exit_code == 0, result.output
    assert result.output.startswith("-- row 1 --\n")
    assert "       run: 1\n" in result.output and "dispatches: 784\n" in result.output  # not cut to '78'


def test_moe_report_explains_the_flagged_ops(db: Path) -> None:
    rep = build_report(Store(db, read_only=True), 2, by="op")
    flagged = rep.rows[rep.rows["flag"] != ""]
    assert len(flagged) > 0
    md = render(rep, "markdown")
    assert "outside \\[0.7, 1.3\\]" in md  # Markdown's brackets escaped: GitHub shows them as written
    listed = " ".join(line for line in md.splitlines() if line.startswith("_\\* "))  # the mark, escaped
    for op in flagged["op"]:
        assert op in listed


def test_json_report_has_the_issue_keys(db: Path) -> None:
    result = CliRunner().invoke(cli, ["report", "--db", str(db), "--run", "1", "--format", "json"])
    rows = json.loads(result.output)["rows"]
    for key in (
        "model_read_bytes",
        "model_write_bytes",
        "flops",
        "arithmetic_intensity",
        "model_arithmetic_intensity",
        "pct_of_ceiling",
        "bound",
        "share_of_time_pct",
    ):
        assert key in rows[0]
    assert "time_share" not in rows[0]  # share_of_time_pct / 100: one of the two


def test_plot_html_and_graph_commands(db: Path, tmp_path: Path) -> None:
    for bad in ("", str(tmp_path)):  # no file name, a directory
        res = CliRunner().invoke(cli, ["plot", "--db", str(db), "--run", "1", "--out", bad])
        assert (
            res.exit_code == 1 and "expected a file name (the .png and .svg files are named after it)" in res.output
        ), res.output
    res = CliRunner().invoke(cli, ["plot", "--db", str(db), "--run", "1", "--out", str(tmp_path / "roof")])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "roof.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "<svg" in (tmp_path / "roof.svg").read_text()
    html = CliRunner().invoke(cli, ["report", "--db", str(db), "--run", "2", "--format", "html"]).output
    assert html.startswith("<!doctype html>") and "<svg" in html and "MUL_MAT_ID" in html
    dot = CliRunner().invoke(cli, ["graph", "--db", str(db), "--run", "1", "--evaluation", "1"]).output
    assert dot.startswith('digraph "run 1" {') and dot.rstrip().endswith("}") and "->" in dot
    graph = json.loads(CliRunner().invoke(cli, ["graph", "--db", str(db), "--run", "1", "--format", "json"]).output)
    assert {n["evaluation"] for n in graph["nodes"]} == {0, 1, 2, 3}  # four decode tokens
    bad = CliRunner().invoke(cli, ["graph", "--db", str(db), "--run", "1", "--evaluation", "7"])
    assert bad.exit_code == 1 and bad.output.startswith("Error: ")


@pytest.mark.parametrize(
    ("given", "base"),
    [
        ("moe.v2", "moe.v2"),  # a dot inside the name is kept: the extensions are appended
        ("x/r3.png", "x/r3"),  # the files' own extension given: dropped, not doubled
        ("r3.SVG", "r3"),
        ("a.png.png", "a.png"),  # only the last one
        ("run.3.svg.bak", "run.3.svg.bak"),
    ],
)
def test_plot_base_appends_to_the_whole_name(given: str, base: str) -> None:
    from rocroof.report.plot import plot_base

    assert plot_base(Path(given)) == Path(base)


@pytest.mark.parametrize("bad", [".png", ".SVG", "x/.svg"])
def test_plot_base_refuses_an_extension_alone(bad: str) -> None:
    from rocroof.errors import InputError
    from rocroof.report.plot import plot_base

    with pytest.raises(InputError, match="expected a file name"):
        plot_base(Path(bad), "--plot")


@pytest.mark.parametrize(
    ("out", "written"),
    [
        # Path.with_suffix made moe.v2 into moe.png and the heat map overwrote the roofline there
        ("moe.v2", ["moe.v2.png", "moe.v2.svg", "moe.v2-experts.png", "moe.v2-experts.svg"]),
        ("r3.png", ["r3.png", "r3.svg", "r3-experts.png", "r3-experts.svg"]),
    ],
)
def test_plot_out_with_a_dot_writes_four_distinct_files(db: Path, tmp_path: Path, out: str, written: list[str]) -> None:
    # run 2 is moe-prefill: the roofline and the experts heat map, each as PNG and SVG
    res = CliRunner().invoke(cli, ["plot", "--db", str(db), "--run", "2", "--out", str(tmp_path / out)])
    assert res.exit_code == 0, res.output
    assert res.output.strip() == "Wrote " + ", ".join(str(tmp_path / name) for name in written)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(written)
    png = [(tmp_path / name).read_bytes() for name in written if name.endswith(".png")]
    assert all(b[:8] == b"\x89PNG\r\n\x1a\n" for b in png) and png[0] != png[1]  # two plots, not one twice
    svg = [(tmp_path / name).read_text() for name in written if name.endswith(".svg")]
    assert "tokens routed" not in svg[0] and "tokens routed" in svg[1]


@pytest.mark.parametrize("typed", ["/", "/."])
def test_plot_out_and_fleet_plot_naming_a_folder_are_refused(db: Path, tmp_path: Path, typed: str) -> None:
    # --out is a file name (its help: "File name in an existing folder"), and an existing folder is refused;
    # a folder that does not exist yet, typed as one, lost its "/" to pathlib: --out plots/ wrote plots.png
    # and plots.svg beside it
    out = str(tmp_path / "plots") + typed
    for args, option, name in (
        (["plot", "--db", str(db), "--run", "1", "--out", out], "--out", "decode-roofline"),
        (["fleet", "--db", str(db), "--plot", out], "--plot", "fleet"),
    ):
        res = CliRunner().invoke(cli, args)
        assert res.exit_code == 1, res.output
        assert res.output == (
            f"Error: {option} '{out}' names a folder: expected a file name (the .png and .svg files are named "
            f"after it), e.g. {tmp_path}/plots/{name}\n"
        )
        assert list(tmp_path.iterdir()) == []  # no plots.png, plots.svg


NAN = float("nan")


@pytest.mark.parametrize(
    ("op", "quant", "arch", "tokens", "n_experts", "expected"),
    [
        # ggml/src/ggml-cuda/mmq.cu ggml_cuda_should_use_mmq (llama.cpp 0c1e570), case by case:
        ("MUL_MAT", "q8_0", "sm_90", 512, NAN, "int8"),  # Turing+ int8 MMA: MMQ for every listed type
        ("MUL_MAT", "q4_K", "sm_89", 4096, NAN, "int8"),
        ("MUL_MAT", "q8_0", "sm_70", 512, NAN, "fp16"),  # Volta: no int8 MMA; dequantize + cuBLAS FP16
        ("MUL_MAT", "mxfp4", "sm_90", 512, NAN, "int8"),
        ("MUL_MAT", "mxfp4", "sm_100", 512, NAN, "fp16"),  # Blackwell multiplies FP4 natively: no INT8 roof
        ("MUL_MAT", "q6_K", "gfx942:sramecc+:xnack-", 4096, NAN, "int8"),  # CDNA3: MMQ always
        ("MUL_MAT", "q6_K", "gfx950", 512, NAN, "fp16"),  # CDNA4, large batch, not a listed type: hipBLAS
        ("MUL_MAT", "q6_K", "gfx950", 128, NAN, "int8"),  # ne11 <= 128
        ("MUL_MAT_ID", "q6_K", "gfx950", 512, 128, "int8"),  # n_experts > 64
        ("MUL_MAT", "q4_0", "gfx90a", 4096, NAN, "int8"),  # Q4_0/Q4_1/Q5_0/Q5_1 always
        ("MUL_MAT", "q4_K", "gfx950", 256, NAN, "int8"),  # Q4_K/Q5_K up to 256
        ("MUL_MAT", "q4_K", "gfx950", 257, NAN, "fp16"),
        ("MUL_MAT", "q6_K", "gfx1100", 200, NAN, "fp16"),  # RDNA3.0: Q6_K only up to 128
        ("MUL_MAT", "q6_K", "gfx1151", 200, NAN, "int8"),  # RDNA3.5: up to 256
        ("MUL_MAT", "q2_K", "gfx1100", 129, NAN, "fp16"),
        ("MUL_MAT", "iq2_xs", "gfx1151", 4096, NAN, "int8"),
        ("MUL_MAT_ID", "q2_K", "gfx1100", 4096, 64, "int8"),  # n_experts >= 64
        ("MUL_MAT", "q8_0", "gfx1201", 4096, NAN, "int8"),  # RDNA4: MMQ always
        ("MUL_MAT", "q8_0", "gfx1030", 512, NAN, "fp16"),  # RDNA2: no matrix int8 path
        ("MUL_MAT", "q6_K", "gfx950", NAN, NAN, "fp16"),  # unknown batch counts as large
        ("MUL_MAT", "f16", "sm_90", 512, NAN, "fp16"),
        ("MUL_MAT", "bf16", "gfx942", 512, NAN, "bf16"),
        ("MUL_MAT", "f32", "sm_90", 512, NAN, "fp32"),  # cublasSgemm / mmvf
        ("FLASH_ATTN_EXT", "f16", "sm_90", 512, NAN, "fp16"),
        ("ADD", "f32", "sm_90", NAN, NAN, "fp32"),
        ("MUL_MAT", None, "sm_90", 512, NAN, "fp16"),  # no metadata: the matrix default
    ],
)
def test_compute_type_follows_ggml_kernel_choice(
    op: str, quant: str | None, arch: str, tokens: float, n_experts: float, expected: str
) -> None:
    assert compute_type(op, quant, arch, tokens, n_experts) == expected


def test_int8_peak_governs_quantized_matmuls_and_mixed_ops_add_their_time() -> None:
    ceilings = {
        "dram_gbps": 5000.0,
        "int8_matrix_tops": 2000.0,
        "fp16_matrix_tflops": 1000.0,
        "fp32_vector_tflops": 50.0,
    }
    inv = pd.DataFrame(
        {
            "op": ["MUL_MAT", "MUL_MAT", "ADD"],
            "quant": ["q4_K", "f16", "f32"],
            "m": [4096, 4096, None],
            "n_experts": [None, None, None],
            "flops": [3e12, 1e12, 1e6],
        }
    )
    peaks = compute_peaks(inv, "gfx942", ceilings)
    assert list(peaks["compute_peak"]) == ["INT8 matrix", "FP16 matrix", "FP32 vector"]
    assert list(peaks["compute_peak_tflops"]) == [2000.0, 1000.0, 50.0]
    per_op = per_op_compute_peaks(inv.join(peaks)).set_index("op")
    # 3e12 at 2000 TOP/s = 1.5 s, 1e12 at 1000 TFLOP/s = 1 s: 4e12 in 2.5 s = 1600 per second at the roofs
    assert per_op.loc["MUL_MAT", "compute_peak_tflops"] == pytest.approx(1600.0)
    assert per_op.loc["MUL_MAT", "compute_peak"] == "mixed: INT8 matrix 75%, FP16 matrix 25%"
    # a GPU without an INT8 figure: the FP16 peak, said so
    no_int8 = compute_peaks(inv.head(1), "gfx942", {"fp16_matrix_tflops": 1000.0})
    assert no_int8["compute_peak"][0] == "FP16 matrix (INT8 peak unknown)"
    assert no_int8["compute_peak_tflops"][0] == 1000.0
    # compute-bound on the INT8 roof: 1,500 TOP/s achieved of 2,000
    rows = pd.DataFrame(
        {
            "op": ["MUL_MAT"],
            "arithmetic_intensity": [1000.0],  # x 5,000 GB/s = 5,000 TFLOP/s > 2,000: right of the ridge
            "flops": [1.5e9],
            "duration_ns": [1000.0],
            "achieved_gbps": [1.5],
            "share_of_time_pct": [100.0],
            "compute_peak_tflops": [2000.0],
            "compute_peak": ["INT8 matrix"],
        }
    )
    out = add_roofline_columns(rows, {}, ceilings)
    assert out["governing_ceiling"][0] == "INT8 matrix peak"
    assert out["bound"][0] == "compute"
    assert out["pct_of_ceiling"][0] == pytest.approx(75.0)
    assert out["time_at_roof_ns"][0] == pytest.approx(1.5e9 / 2000e3)  # TOP/s = 1e3 op/ns


def test_without_a_dram_ceiling_ops_with_flops_are_not_called_memory_bound() -> None:
    rows = pd.DataFrame(
        {
            "op": ["MUL_MAT", "GET_ROWS"],
            "arithmetic_intensity": [66.8, None],
            "flops": [1e9, 0.0],
            "duration_ns": [1000.0, 1000.0],
            "achieved_gbps": [15.0, 480.0],
            "share_of_time_pct": [50.0, 50.0],
        }
    )
    out = add_roofline_columns(rows, {}, {"fp16_matrix_tflops": 1000.0})
    assert pd.isna(out["bound"][0])  # 66.8 FLOP/B: which side of a ridge nobody knows
    assert out["bound"][1] == "memory"  # a gather only moves bytes
    assert np.isnan(out["pct_of_ceiling"][0])
    unknown = compute_peaks(pd.DataFrame({"op": ["MUL_MAT"], "quant": ["q8_0"], "m": [512]}), "sm_90", {})
    assert unknown["compute_peak"][0] == "INT8 matrix (peak unknown)"


def test_headers_name_the_peaks_table_also_for_runs_stored_before_sources_named_it(db: Path) -> None:
    rep = build_report(Store(db, read_only=True), 1, by="op")
    assert rep.ceilings["fp16_matrix_tflops"]["source"].startswith("configs/peaks.yaml: ")
    text = render(rep, "table", width=400)
    assert "FP32 vector 66.9 TFLOP/s (unverified) — configs/peaks.yaml" in text
    for c in rep.ceilings.values():  # as an older rocroof stored them: the citation alone
        c["source"] = str(c["source"]).removeprefix("configs/peaks.yaml: ")
    assert "FP32 vector 66.9 TFLOP/s (unverified) — configs/peaks.yaml" in render(rep, "table", width=400)


def _copy(db: Path, dest: Path) -> Path:
    """A consistent copy of a (WAL) database, by SQLite's backup API."""
    import sqlite3

    with sqlite3.connect(db) as src, sqlite3.connect(dest) as dst:
        src.backup(dst)
    return dest


def _verdicts(db: Path) -> pd.DataFrame:
    import sqlite3

    with sqlite3.connect(db) as con:
        return pd.read_sql("SELECT * FROM op_verdict ORDER BY run_id, op_index", con)


@pytest.mark.parametrize("int8_tops", [None, 1.0])
def test_op_verdict_view_applies_the_roofline_in_sql(db: Path, tmp_path: Path, int8_tops: float | None) -> None:
    """Each invocation's verdict recomputed by hand from its stored numbers and the run's ceilings.

    The recorded runs are memory- and latency-bound; with the INT8 peak set to 1 TOP/s the
    quantized matmuls of the MoE prefill land right of the ridge (compute-bound).
    """
    import sqlite3

    if int8_tops is not None:
        db = _copy(db, tmp_path / "c.db")
        with sqlite3.connect(db) as con:
            con.execute("UPDATE run_ceiling SET value = ? WHERE name = 'int8_matrix_tops'", (int8_tops,))
    v = _verdicts(db)
    with sqlite3.connect(db) as con:
        ceil = {(r, n): x for r, n, x in con.execute("SELECT run_id, name, value FROM run_ceiling")}
        raw = pd.read_sql(
            "SELECT d.run_id, d.op_index, SUM(d.duration_ns) AS ns, "
            "SUM(d.dram_read_bytes + d.dram_write_bytes) AS bytes, m.flops, m.compute_ceiling "
            "FROM dispatch_dram d JOIN op_model m ON m.run_id = d.run_id AND m.op_index = d.op_index "
            "GROUP BY d.run_id, d.op_index ORDER BY d.run_id, d.op_index",
            con,
        )
    assert len(v) == len(raw) > 500
    seen = set()
    for r, got in zip(raw.itertuples(), v.itertuples(), strict=True):
        assert (got.run_id, got.op_index) == (r.run_id, r.op_index)
        bw = ceil[(r.run_id, "dram_gbps")]
        if r.flops and r.flops > 0:
            peak = ceil[(r.run_id, r.compute_ceiling)]
            mem_roof = r.flops / r.bytes * bw / 1e3  # FLOP/B × GB/s → TFLOP/s
            roof = min(mem_roof, peak)
            pct = 100 * (r.flops / r.ns / 1e3) / roof
            side = "memory" if mem_roof < peak else "compute"
            at_roof = r.flops / (roof * 1e3)
            assert got.attainable_tflops == pytest.approx(roof)
            assert got.governing_ceiling == ("dram_gbps" if side == "memory" else r.compute_ceiling)
        else:
            pct = 100 * (r.bytes / r.ns) / bw
            side = "memory"
            at_roof = r.bytes / bw
            assert got.governing_ceiling == "dram_gbps"
        expected = "latency" if pct < 10 and r.ns / 1e3 < 20 else side
        assert got.bound == expected
        assert got.pct_of_ceiling == pytest.approx(pct)
        assert got.time_at_roof_ns == pytest.approx(at_roof)
        assert got.time_over_roof_ns == pytest.approx(r.ns - at_roof)
        seen.add(expected)
    assert seen == ({"memory", "latency"} if int8_tops is None else {"memory", "latency", "compute"})


def test_op_verdict_agrees_with_the_invocation_report(db: Path) -> None:
    """The SQL view and ``report --by invocation`` (pandas) give one verdict per invocation."""
    v = _verdicts(db)
    store = Store(db)
    try:
        for run_id in (1, 2):
            rows = build_report(store, run_id, by="invocation", top=None).rows
            got = v[v["run_id"] == run_id].set_index("invocation").loc[rows["invocation"]]
            assert list(got["bound"]) == list(rows["bound"])
            assert np.allclose(got["pct_of_ceiling"], rows["pct_of_ceiling"], equal_nan=True)
            assert np.allclose(got["time_at_roof_ns"], rows["time_at_roof_ns"], equal_nan=True)
            assert np.allclose(got["attainable_tflops"], rows["attainable_tflops"], equal_nan=True)
    finally:
        store.close()


@pytest.mark.parametrize("top", [0, 1, 7, 10_000])
def test_the_longest_invocations_are_cut_by_the_database_as_the_whole_report_would(db: Path, top: int) -> None:
    """``--top N`` by invocation reads N rows: the same rows, shares and totals as the whole report's first N."""
    import sqlite3

    store = Store(db, read_only=True)
    try:
        for run_id in (1, 2):
            whole = build_report(store, run_id, by="invocation")
            cut = build_report(store, run_id, by="invocation", top=top)
            # (a column of N unknown values comes back as object, not Int64: dtypes aside, the same values)
            pd.testing.assert_frame_equal(cut.rows, whole.rows.head(top).reset_index(drop=True), check_dtype=False)
            assert cut.total_rows == whole.total_rows == len(whole.rows)
            assert cut.totals == whole.totals
            # the share of time is over every attributed timing dispatch, summed here from the table
            with sqlite3.connect(db) as conn:
                (total,) = conn.execute(
                    "SELECT SUM(duration_ns) FROM dispatch_record WHERE run_id = ? AND op_index IS NOT NULL "
                    "AND timing_dispatch_index = dispatch_index",
                    (run_id,),
                ).fetchone()
            if not top:  # no row shown (the Python API allows 0): the counts are still of every row
                continue
            first = cut.rows.iloc[0]
            assert first["share_of_time_pct"] == pytest.approx(100.0 * first["duration_ns"] / total)
    finally:
        store.close()


@pytest.mark.parametrize("by", ["invocation", "dispatch"])
def test_a_top_beyond_what_sql_can_limit_keeps_every_row(db: Path, by: str) -> None:
    """``--top`` larger than a 64-bit LIMIT: every row, as a --top of the row count would give, not a traceback."""
    huge = CliRunner().invoke(cli, ["report", "--db", str(db), "--run", "1", "--by", by, "--top", str(10**20)])
    assert huge.exit_code == 0, huge.output
    store = Store(db, read_only=True)
    try:
        n = build_report(store, 1, by=by).total_rows
        every = build_report(store, 1, by=by, top=n)  # the longest n: every row, longest first
        huge_rows = build_report(store, 1, by=by, top=10**20)
        assert huge_rows.total_rows == n == len(huge_rows.rows)
        pd.testing.assert_frame_equal(huge_rows.rows, every.rows, check_dtype=False)
    finally:
        store.close()


def test_op_verdict_falls_back_to_the_fp16_peak_when_int8_is_unknown(db: Path, tmp_path: Path) -> None:
    import sqlite3

    from rocroof.analysis import roofline
    from rocroof.store import views

    assert (views.LATENCY_PCT, views.LATENCY_US) == (roofline.LATENCY_PCT, roofline.LATENCY_US)
    copy = _copy(db, tmp_path / "c.db")
    with sqlite3.connect(copy) as con:
        con.execute("DELETE FROM run_ceiling WHERE name = 'int8_matrix_tops'")
        fp16 = dict(con.execute("SELECT run_id, value FROM run_ceiling WHERE name = 'fp16_matrix_tflops'"))
        int8 = set(con.execute("SELECT run_id, op_index FROM op_model WHERE compute_ceiling = 'int8_matrix_tops'"))
    v = _verdicts(copy)
    moved = v[[(r, i) in int8 for r, i in zip(v["run_id"], v["op_index"], strict=True)]]
    assert len(moved) and set(moved["compute_ceiling"]) == {"fp16_matrix_tflops"}
    assert np.allclose(moved["compute_ceiling_tflops"], moved["run_id"].map(fp16))
