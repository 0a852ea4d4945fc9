"""Legacy rocprof (v1, rocprofv2): the recorded MI250X Laplacian, and synthetic captures of each variant.

Truth for the recorded capture (amd/HPCTrainingExamples, ROCm blog "Finite difference method -
Laplacian, part 1", kernel 2): the kernel writes the 510^3 interior of a 512^3 grid of doubles,
and rocprof's WRITE_SIZE is kilobytes (ROCm/rocprofiler metrics.xml: ".../1024").
"""

from __future__ import annotations

import csv
import os
import shutil
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from rocroof.capture.readers import detect, read_capture
from rocroof.capture.readers.rocprof_columns import kernel_symbol_name, property_of, split_columns
from rocroof.capture.readers.rocprof_legacy import read_roctx_trace
from rocroof.cli import cli
from rocroof.errors import InputError
from rocroof.ingest.pipeline import build_run
from rocroof.store import Store

from .conftest import fixture_path
from .rocprof_legacy_files import (
    PROPS_OLD,
    Kernel,
    Roctx,
    kernel_csv,
    results_db,
    roctx_trace,
    sysinfo,
    v2_results,
)

LAPLACIAN = ("rocprof-v1", "mi250x-laplacian-kernel2")
INTERIOR_BYTES = 510**3 * 8  # doubles written by the kernel: every point but the boundary


def _store(capture_path: Path, db: Path) -> tuple[Store, int]:
    store = Store(db)
    run_id = store.write_run(build_run(read_capture(capture_path)))
    return Store(db, read_only=True), run_id


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_the_recorded_mi250x_capture_is_legacy_rocprof_not_a_damaged_rocpd() -> None:
    folder = fixture_path(*LAPLACIAN)
    assert detect(folder) == "rocprof-legacy"
    assert detect(folder / "results.db") == "rocprof-legacy"
    assert detect(folder / "results.csv") == "rocprof-legacy"


def test_laplacian_writes_equal_write_size_times_1024_and_the_interior(db_path: Path) -> None:
    folder = fixture_path(*LAPLACIAN)
    store, run_id = _store(folder, db_path)
    counters = _rows(folder / "data_movement.csv")
    trace = _rows(folder / "results.csv")
    got = store.query(
        f"SELECT dispatch_id, kernel_name, duration_ns, dram_read_bytes, dram_write_bytes FROM dispatch_dram "
        f"WHERE run_id = {run_id} ORDER BY dispatch_id"
    )
    assert len(got) == len(trace) == len(counters) == 1004
    laplacian = got[got["kernel_name"] == "laplacian_kernel"]
    assert len(laplacian) == 1001
    for row in laplacian.itertuples():
        hand = counters[row.dispatch_id]
        assert row.dram_write_bytes == pytest.approx(float(hand["WRITE_SIZE"]) * 1024)
        assert row.dram_read_bytes == pytest.approx(float(hand["FETCH_SIZE"]) * 1024)
        assert row.dram_write_bytes == pytest.approx(INTERIOR_BYTES, rel=0.01)
        # GPU time of the trace run (results.csv): EndNs - BeginNs, not the host DispatchNs/CompleteNs
        t = trace[row.dispatch_id]
        assert row.duration_ns == int(t["EndNs"]) - int(t["BeginNs"]) == int(t["DurationNs"])


def test_laplacian_names_its_gpu_from_rocminfo_and_keeps_properties_out_of_counters(db_path: Path) -> None:
    store, run_id = _store(fixture_path(*LAPLACIAN), db_path)
    run = store.query(f"SELECT gpu_name, gpu_arch, profiler FROM run WHERE run_id = {run_id}").iloc[0]
    assert run["gpu_arch"] == "gfx90a"
    assert "MI250X" in run["gpu_name"]
    assert run["profiler"] == "rocprof"
    names = set(store.query(f"SELECT DISTINCT counter_name FROM counter_value WHERE run_id={run_id}")["counter_name"])
    assert names == {
        "FETCH_SIZE",
        "WRITE_SIZE",
        "TCP_TOTAL_CACHE_ACCESSES_sum",
        "TCP_TCC_READ_REQ_sum",
        "TCP_TCC_WRITE_REQ_sum",
    }
    notes = store.query(f"SELECT code FROM run_note WHERE run_id={run_id}")["code"].tolist()
    assert "no-markers" in notes


def _ggml_capture(folder: Path, *, raw_roctx: bool = False) -> Path:
    """One thread; GPU times long after the ranges closed, as llama.cpp enqueues ahead of the GPU."""
    folder.mkdir()
    kernels = [
        Kernel("rms_norm_f32<1024>", dispatch_ns=1_500, begin_ns=10_000, end_ns=10_400, complete_ns=10_500),
        Kernel("mul_mat_vec_q.kd", dispatch_ns=2_200, begin_ns=10_400, end_ns=13_000, complete_ns=13_100),
        Kernel("mul_mat_vec_q.kd", dispatch_ns=2_600, begin_ns=13_000, end_ns=15_500, complete_ns=15_600),
        Kernel("__amd_rocclr_copyBuffer.kd", dispatch_ns=3_500, begin_ns=15_500, end_ns=15_700, complete_ns=15_800),
    ]
    kernel_csv(folder / "results.csv", kernels, stats=True)
    ranges = [
        (500, 3_400, 4242, 4242, "decode"),
        (1_000, 2_000, 4242, 4242, "ggml:RMS_NORM:norm-0:0"),
        (1_100, 1_101, 4242, 4242, "ggml-fused:0:RMS_NORM+MUL:norm-0|attn_norm-0"),
        (2_000, 3_000, 4242, 4242, "ggml:MUL_MAT:ffn_up-0:1"),
    ]
    if raw_roctx:
        roctx_trace(
            folder / "roctx_trace.txt",
            [
                Roctx(500, 1, "decode"),
                Roctx(1_000, 1, "ggml:RMS_NORM:norm-0:0"),
                Roctx(1_100, 0, "ggml-fused:0:RMS_NORM+MUL:norm-0|attn_norm-0"),
                Roctx(2_000, 2),
                Roctx(2_000, 1, "ggml:MUL_MAT:ffn_up-0:1"),
                Roctx(3_000, 2),
                Roctx(3_400, 2),
            ],
        )
    else:
        results_db(folder / "results.db", kernels, ranges)
    sysinfo(folder / "results.sysinfo.txt")
    return folder


@pytest.mark.parametrize("raw_roctx", [False, True], ids=["results.db rocTX", "roctx_trace.txt"])
def test_roctx_ranges_attribute_kernels_by_their_host_dispatch_time(tmp_path: Path, raw_roctx: bool) -> None:
    store, run_id = _store(_ggml_capture(tmp_path / "cap", raw_roctx=raw_roctx), tmp_path / "r.db")
    rows = store.query(
        "SELECT d.dispatch_id, d.kernel_name, d.attribution_method, d.launch_ns, o.invocation, o.op, d.kernel_ordinal "
        f"FROM dispatch d LEFT JOIN op_invocation o ON o.run_id = d.run_id AND o.op_index = d.op_index "
        f"WHERE d.run_id = {run_id} ORDER BY d.dispatch_id"
    )
    # by hand: DispatchNs 1500 is inside norm-0's range, 2200 and 2600 inside ffn_up-0's, 3500 after both
    assert rows["invocation"].tolist()[:3] == [0, 1, 1]
    assert rows["op"].tolist()[:3] == ["RMS_NORM", "MUL_MAT", "MUL_MAT"]
    assert rows["kernel_ordinal"].tolist()[1:3] == [0, 1]
    assert pd_isna(rows["invocation"].iloc[3])
    assert rows["attribution_method"].tolist() == ["host_dispatch"] * 3 + ["none"]
    assert rows["launch_ns"].tolist() == [1_500, 2_200, 2_600, 3_500]
    assert rows["kernel_name"].tolist()[1] == "mul_mat_vec_q"
    ops = store.query(f"SELECT invocation, op_list FROM op_invocation WHERE run_id = {run_id} ORDER BY invocation")
    assert ops["op_list"].tolist() == ["RMS_NORM+MUL", "MUL_MAT"]
    run = store.query(f"SELECT attribution_method, gpu_arch FROM run WHERE run_id = {run_id}").iloc[0]
    assert run["attribution_method"] == "host_dispatch"
    assert run["gpu_arch"] == "gfx90a"


def pd_isna(value: object) -> bool:
    import pandas as pd

    return bool(pd.isna(value))


def test_raw_roctx_trace_pairs_push_pop_per_thread_and_start_stop_by_id(tmp_path: Path) -> None:
    path = roctx_trace(
        tmp_path / "roctx_trace.txt",
        [
            Roctx(10, 1, "outer", tid=1),
            Roctx(11, 1, "outer", tid=2),  # another thread's stack
            Roctx(12, 1, "inner", tid=1),
            Roctx(13, 0, "mark", tid=1),
            Roctx(14, 2, tid=1),  # pops inner
            Roctx(15, 3, "span", rid=7, tid=1),
            Roctx(16, 2, tid=1),  # pops outer of thread 1
            Roctx(17, 4, rid=7, tid=3),  # stops span on another thread
            Roctx(18, 2, tid=9),  # a pop without its push: left out
            Roctx(19, 1, "never popped", tid=2),
        ],
    )
    m, notes = read_roctx_trace(path)
    got = sorted(zip(m["message"], m["thread_id"], m["start_ns"], m["end_ns"], m["kind"], strict=True))
    assert got == [
        ("inner", 1, 12, 14, "range"),
        ("mark", 1, 13, 13, "mark"),
        ("outer", 1, 10, 16, "range"),
        ("span", 3, 15, 17, "range"),
    ]
    # thread 2 pushed "outer" and "never popped" and popped neither
    assert [n.code for n in notes] == ["roctx-never-closed"] and "2 roctx range(s)" in notes[0].message


def test_counter_csv_without_gpu_times_joins_the_trace_run_and_converts_kilobytes(tmp_path: Path) -> None:
    cap = tmp_path / "cap"
    cap.mkdir()
    trace = [Kernel("copy.kd", 100, 1_000, 3_000, 3_100), Kernel("copy.kd", 200, 3_000, 5_000, 5_100)]
    kernel_csv(cap / "results.csv", trace)
    counted = [
        Kernel("copy.kd", None, None, None, counters={"FETCH_SIZE": 8192.0, "WRITE_SIZE": 4096.5}),
        Kernel("copy.kd", None, None, None, counters={"FETCH_SIZE": 16.25, "WRITE_SIZE": 0.0}),
    ]
    kernel_csv(cap / "input.csv", counted, counters=["FETCH_SIZE", "WRITE_SIZE"], timestamps=False)
    sysinfo(cap / "results.sysinfo.txt")
    store, run_id = _store(cap, tmp_path / "r.db")
    rows = store.query(
        f"SELECT dram_read_bytes, dram_write_bytes, duration_ns FROM dispatch_dram WHERE run_id={run_id} "
        "ORDER BY dispatch_id"
    )
    assert rows["dram_read_bytes"].tolist() == [8192 * 1024, 16.25 * 1024]
    assert rows["dram_write_bytes"].tolist() == [4096.5 * 1024, 0.0]
    assert rows["duration_ns"].tolist() == [2_000, 2_000]


def test_only_host_times_give_upper_bound_durations_with_a_warning(tmp_path: Path) -> None:
    cap = tmp_path / "cap"
    cap.mkdir()
    kernel_csv(cap / "results.csv", [Kernel("k", 1_000, None, None, 4_500)])
    sysinfo(cap / "results.sysinfo.txt")
    store, run_id = _store(cap, tmp_path / "r.db")
    assert store.query(f"SELECT duration_ns FROM dispatch WHERE run_id={run_id}")["duration_ns"].tolist() == [3_500]
    notes = store.query(f"SELECT severity, code, message FROM run_note WHERE run_id={run_id}")
    bound = notes[notes["code"] == "duration-upper-bound"]
    assert bound["severity"].tolist() == ["warning"]
    assert "upper bounds" in bound["message"].iloc[0]


def test_pre_rocm_5_3_headers_and_none_cells(tmp_path: Path) -> None:
    cap = tmp_path / "cap"
    cap.mkdir()
    kernels = [
        Kernel("k.kd", 10, 100, 250, 300, counters={"TCC_EA_RDREQ_sum": 10.0}),
        Kernel("k.kd", 20, 300, 420, 500, counters={}),  # a counter missing: rocprof writes None
    ]
    kernel_csv(cap / "results.csv", kernels, counters=["TCC_EA_RDREQ_sum"], props=PROPS_OLD)
    capture = read_capture(cap)
    (p,) = capture.passes
    assert p.dispatches["vgpr_count"].tolist() == [8, 8]
    assert p.dispatches["kernel_name"].tolist() == ["k", "k"]
    assert p.counters["counter_name"].tolist() == ["TCC_EA_RDREQ_sum"]  # fbar is a property, None is not collected
    assert p.counters["row"].tolist() == [0]


def test_rocprofv2_results_with_a_blank_line_after_the_header(tmp_path: Path) -> None:
    out = tmp_path / "out" / "pmc_1"
    out.mkdir(parents=True)
    kernels = [Kernel("vecCopy(double*, double*) (.kd)", None, 1_000, 2_500, counters={"SQ_WAVES": 16384})]
    v2_results(out / "results_777.csv", kernels, counters=["SQ_WAVES"])
    capture = read_capture(tmp_path / "out")
    assert capture.source_format == "rocprof-legacy"
    assert capture.profiler == "rocprofv2"
    (p,) = capture.passes
    d = p.dispatches.iloc[0]
    assert (d["dispatch_id"], d["kernel_name"], d["start_ns"], d["end_ns"]) == (
        1,
        "vecCopy(double*, double*)",
        1_000,
        2_500,
    )
    assert p.counters.set_index("counter_name")["value"].to_dict() == {"SQ_WAVES": 16384.0}


def test_a_bad_timestamp_names_file_row_and_column(tmp_path: Path) -> None:
    cap = tmp_path / "cap"
    cap.mkdir()
    path = kernel_csv(cap / "results.csv", [Kernel("k", 1, 2, 3, 4), Kernel("k", 5, 6, 7, 8)])
    lines = path.read_text().splitlines()
    lines[2] = lines[2].rsplit(",", 3)[0] + ",6,seven,8"
    path.write_text("\n".join(lines) + "\n")
    result = CliRunner().invoke(cli, ["ingest", os.fspath(cap), "--db", os.fspath(tmp_path / "r.db")])
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [f"Error: {path}:3: column 'EndNs' has 'seven'; expected an integer"]


def test_the_column_catalogue_knows_every_generation() -> None:
    v1 = "Index,KernelName,gpu-id,queue-id,queue-index,pid,tid,grd,wgr,lds,scr,arch_vgpr,accum_vgpr,sgpr"
    v1 += ",wave_size,sig,obj"
    split = split_columns([*v1.split(","), "FETCH_SIZE", "TCC_HIT[3]", "DispatchNs", "BeginNs", "EndNs", "CompleteNs"])
    assert split.counters == ["FETCH_SIZE", "TCC_HIT[3]"]
    assert split.properties["start_ns"] == "BeginNs"
    assert split.properties["agent_label"] == "gpu-id"
    assert {"sig", "obj", "wave_size", "queue-index"} <= set(split.skipped)
    omniperf = [
        "Dispatch_ID",
        "Kernel_Name",
        "GPU_ID",
        "obj",
        "obj_1",
        "wave_size_12",
        "Correlation_ID_3",
        "XCC_Index_2",
    ]
    split = split_columns([*omniperf, "SQC_DCACHE_REQ_READ_16", "TCC_EA0_WRREQ_64B_sum"])
    assert split.counters == ["SQC_DCACHE_REQ_READ_16", "TCC_EA0_WRREQ_64B_sum"]
    assert property_of("Begin_Timestamp") == (True, "start_ns")
    assert kernel_symbol_name('"__omp_offloading_32_6b6b__QQmain_l18.kd"') == "__omp_offloading_32_6b6b__QQmain_l18"
    assert kernel_symbol_name("vecCopy(double*, double*, double*, int, int) [clone .kd]") == (
        "vecCopy(double*, double*, double*, int, int)"
    )


# ---- damaged legacy captures: one line naming the file, the row and what was expected -----------


def _one_line_error(capture: Path, db: Path) -> str:
    result = CliRunner().invoke(cli, ["ingest", os.fspath(capture), "--db", os.fspath(db)])
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.output
    return lines[0]


def _small_capture(tmp_path: Path, **counters: float) -> Path:
    cap = tmp_path / "cap"
    cap.mkdir()
    kernels = [Kernel("k", 100, 1_000, 2_000, 2_100), Kernel("k", 200, 2_000, 3_000, 3_100)]
    kernel_csv(cap / "results.csv", kernels)
    if counters:
        counted = [Kernel("k", None, None, None, counters=dict(counters)) for _ in kernels]
        kernel_csv(cap / "input.csv", counted, counters=list(counters), timestamps=False)
    sysinfo(cap / "results.sysinfo.txt")
    return cap


@pytest.mark.parametrize("value", [-1818729.0625, 1e300])
def test_a_counter_value_no_counter_gives_is_refused(tmp_path: Path, value: float) -> None:
    cap = _small_capture(tmp_path, FETCH_SIZE=value, WRITE_SIZE=1.0)
    msg = _one_line_error(cap, tmp_path / "r.db")
    assert "input.csv:2: FETCH_SIZE is" in msg and "expected a counter value" in msg


@pytest.mark.parametrize("begin", ["-5", "9223372036854775807"])
def test_a_timestamp_no_clock_gives_is_refused(tmp_path: Path, begin: str) -> None:
    cap = _small_capture(tmp_path)
    lines = (cap / "results.csv").read_text().splitlines()
    cells = lines[1].split(",")
    cells[-3] = begin  # BeginNs of the first dispatch
    lines[1] = ",".join(cells)
    (cap / "results.csv").write_text("\n".join(lines) + "\n")
    msg = _one_line_error(cap, tmp_path / "r.db")
    assert f"results.csv:2: column 'BeginNs' has {begin}; expected a time in ns from 0 to 2**62" in msg


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        (
            ['2000 1:1 1:0:"ggml:ADD:x:1"', '1000 1:1 2:0:""'],
            "roctx_trace.txt:2: the range 'ggml:ADD:x:1' ends at 1000",
        ),
        (['99999999999999999999999 1:1 0:0:"m"'], "roctx_trace.txt:1: a time beyond 2**62 ns"),
        (["not a roctx line"], "roctx_trace.txt:1: expected a roctx record"),
    ],
)
def test_a_damaged_roctx_trace_names_its_line(tmp_path: Path, lines: list[str], expected: str) -> None:
    cap = _small_capture(tmp_path)
    (cap / "roctx_trace.txt").write_text("\n".join(lines) + "\n")
    assert expected in _one_line_error(cap, tmp_path / "r.db")


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        ((1_000, 2_000, 4242, "main", "r"), "table rocTX row 1: column 'tid' has 'main'; expected an integer"),
        ((1_000, "99999999999999999999999", 4242, 4242, "r"), "table rocTX row 1: column 'EndNs' has"),
        ((3_000, 2_000, 4242, 4242, "r"), "table rocTX row 1: EndNs 2000 is before BeginNs 3000"),
    ],
)
def test_a_damaged_roctx_table_names_its_row(tmp_path: Path, row: tuple[object, ...], expected: str) -> None:
    cap = _small_capture(tmp_path)
    results_db(cap / "results.db", [], [])
    con = sqlite3.connect(cap / "results.db")
    con.execute(
        "INSERT INTO rocTX (BeginNs, EndNs, pid, tid, Name) VALUES (?, ?, 1, ?, ?)", (row[0], row[1], row[3], row[4])
    )
    con.commit()
    con.close()
    assert expected in _one_line_error(cap, tmp_path / "r.db")


def test_a_row_cut_short_in_the_middle_is_refused(tmp_path: Path) -> None:
    cap = _small_capture(tmp_path)
    lines = (cap / "results.csv").read_text().splitlines()
    lines[1] = lines[1].rsplit(",", 6)[0]  # the first dispatch loses its last six fields
    (cap / "results.csv").write_text("\n".join(lines) + "\n")
    msg = _one_line_error(cap, tmp_path / "r.db")
    header = len(lines[0].split(","))
    assert f"results.csv:2: this row has {header - 6} field(s), the header {header}" in msg


def test_a_kernel_table_without_index_says_which_column_is_missing(tmp_path: Path) -> None:
    cap = _small_capture(tmp_path)
    lines = (cap / "results.csv").read_text().splitlines()
    lines = [",".join(line.split(",")[1:]) for line in lines]  # the Index column removed
    (cap / "results.csv").write_text("\n".join(lines) + "\n")
    assert "results.csv:1: missing column 'Index'" in _one_line_error(cap, tmp_path / "r.db")


def test_a_garbled_rocminfo_chip_id_leaves_the_id_unknown(tmp_path: Path) -> None:
    cap = _small_capture(tmp_path)
    info = cap / "results.sysinfo.txt"
    info.write_text(
        info.read_text().replace(
            "  Node:                    2",
            "  Chip ID:                 99999999999999999999999(0x740c)\n  Node:                    2",
        )
    )
    agents = read_capture(cap).agents
    gpu = agents[agents["agent_type"] == "GPU"].iloc[0]
    assert pd_isna(gpu["pci_device_id"]) and gpu["gfx_arch"] == "gfx90a"


def test_a_folder_holding_two_profilers_output_is_one_run_each(tmp_path: Path) -> None:
    """Two tools' files in one folder are two captures: ingest stores each (its companions with it); a read refuses."""
    cap = _small_capture(tmp_path)
    docs = fixture_path("rocprofv3-docs-2024-07", "kernel_trace.csv")
    shutil.copy(docs, cap / "kernel_trace.csv")
    with open(docs, newline="") as fh:
        docs_kernels = len(list(csv.reader(fh))) - 1  # rows below the header
    db = tmp_path / "r.db"
    result = CliRunner().invoke(cli, ["ingest", os.fspath(cap), "--db", os.fspath(db)])
    assert result.exit_code == 0, result.output
    runs = Store(db, read_only=True).query(
        "SELECT r.source_path, r.gpu_arch, COUNT(d.dispatch_index) AS n FROM run r JOIN dispatch d USING (run_id) "
        "GROUP BY r.run_id ORDER BY r.run_id"
    )
    got = {
        row.source_path: (row.n, row.gpu_arch if isinstance(row.gpu_arch, str) else None) for row in runs.itertuples()
    }
    # results.sysinfo.txt came with the legacy run: rocminfo's gfx90a
    assert got == {str(cap / "kernel_trace.csv"): (docs_kernels, None), str(cap / "results.csv"): (2, "gfx90a")}
    with pytest.raises(InputError) as err:
        read_capture(cap)
    assert "holds the output of 2 profilers (rocprofv3-csv: kernel_trace.csv; rocprof-legacy: " in str(err.value)


def test_a_folder_of_several_rocprof_runs_is_one_run_each_not_merged(tmp_path: Path) -> None:
    """HPCTrainingExamples keeps one rocprof run per .xr/<date>_<name>/ folder: three kernels, three runs."""
    top = tmp_path / "xr"
    for n, name in enumerate(("kernel1", "kernel2"), start=1):
        run = top / name
        run.mkdir(parents=True)
        kernel_csv(
            run / "results.csv", [Kernel("k", 100 * i, 1_000 * i, 2_000 * i, 2_100 * i) for i in range(1, n + 1)]
        )
    db = tmp_path / "r.db"
    result = CliRunner().invoke(cli, ["ingest", os.fspath(top), "--db", os.fspath(db)])
    assert result.exit_code == 0, result.output
    runs = Store(db, read_only=True).query(
        "SELECT r.source_path, COUNT(d.dispatch_index) AS n FROM run r JOIN dispatch d USING (run_id) "
        "GROUP BY r.run_id ORDER BY r.run_id"
    )
    assert dict(zip(runs["source_path"], runs["n"], strict=True)) == {str(top / "kernel1"): 1, str(top / "kernel2"): 2}
    with pytest.raises(InputError, match=r"holds 2 rocprof runs \(kernel1, kernel2\); one run is one capture"):
        read_capture(top)  # the reader alone still refuses to merge them


def test_a_capture_without_its_architecture_says_to_give_arch(tmp_path: Path) -> None:
    cap = tmp_path / "cap"
    cap.mkdir()
    kernel_csv(cap / "results.csv", [Kernel("k", 100, 1_000, 2_000, 2_100)])  # no results.sysinfo.txt
    store, run_id = _store(cap, tmp_path / "r.db")
    notes = store.query(f"SELECT severity, code, message FROM run_note WHERE run_id = {run_id}")
    row = notes[notes["code"] == "no-gpu-arch"].iloc[0]
    assert row["severity"] == "warning" and "--arch" in row["message"]
    result = CliRunner().invoke(cli, ["runs", "--notes", "latest", "--db", os.fspath(tmp_path / "r.db")])
    assert result.exit_code == 0 and "no-gpu-arch" in result.output
