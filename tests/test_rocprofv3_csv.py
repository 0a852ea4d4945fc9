"""The rocprofv3 CSV reader: file names, header versions, rocpd convert, gzip, exact timestamps, errors.

Expected values come from the rows the tests write (or from the rows of the official doc
examples in ``shared/fixtures/rocprofv3-docs``, worked out by hand), never from rocroof.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from rocroof import fileio
from rocroof.capture.markers import marker_messages
from rocroof.capture.readers import read_capture, rocprofv3_csv
from rocroof.capture.readers.rocprofv3_csv import classify, group_pass_files, read_pass
from rocroof.errors import ParseError
from rocroof.ingest.pipeline import build_run
from rocroof.store import Store

from .conftest import fixture_path
from .rocprof_csv import (
    AGENT_INFO,
    API_TRACE,
    COUNTERS_6X,
    COUNTERS_62,
    COUNTERS_70,
    KERNEL_TRACE_62,
    KERNEL_TRACE_63,
    KERNEL_TRACE_70,
    T0,
    Kernel,
    Raw,
    api,
    counter_rows62,
    mark,
    rng,
    row62,
    write_csv,
    write_pass,
)

DOCS = ("rocprofv3-docs",)


def _ingest(path: Path, db: Path) -> tuple[Store, int]:
    run_id = Store(db).write_run(build_run(read_capture(path)))
    return Store(db, read_only=True), run_id


def _table(store: Store, run_id: int, table: str, order: str) -> pd.DataFrame:
    return store.query(f"SELECT * FROM {table} WHERE run_id = {run_id} ORDER BY {order}")


def _pass(directory: Path) -> Any:
    (files,) = group_pass_files(p for p in directory.iterdir()).values()
    return read_pass(files, "p")


# --------------------------------------------------------------------------------------------
# file names
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("4242_kernel_trace.csv", ("kernel_trace", "4242")),
        ("4242_counter_collection.csv", ("counter_collection", "4242")),
        ("4242_marker_api_trace.csv", ("marker_api_trace", "4242")),
        ("4242_hip_api_trace.csv", ("hip_api_trace", "4242")),
        ("4242_agent_info.csv", ("agent_info", "4242")),
        ("out_kernel_trace.csv", ("kernel_trace", "out")),  # rocpd convert -f csv
        ("out_hip_api_trace.csv.gz", ("hip_api_trace", "out")),
        ("kernel_trace.csv", ("kernel_trace", None)),
        ("4242_kernel_stats.csv", None),
        ("4242_hsa_api_trace.csv", None),
        ("4242_memory_copy_trace.csv", None),
        ("4242_kernel_trace.json", None),
    ],
)
def test_classify_file_names(name: str, expected: tuple[str, str | None] | None) -> None:
    assert classify(Path(name)) == expected


def test_each_directory_is_one_pass(tmp_path: Path) -> None:
    paths = [
        tmp_path / "1_kernel_trace.csv",
        tmp_path / "1_hip_api_trace.csv",
        tmp_path / "pmc_1" / "host" / "2_counter_collection.csv",
        tmp_path / "pmc_2" / "host" / "3_counter_collection.csv",
        tmp_path / "pmc_2" / "host" / "3_counter_collection_stats.csv",
        tmp_path / "notes.txt",
    ]
    passes = group_pass_files(paths)
    assert sorted(passes) == [tmp_path, tmp_path / "pmc_1" / "host", tmp_path / "pmc_2" / "host"]
    assert sorted(passes[tmp_path].files) == ["hip_api_trace", "kernel_trace"]
    assert passes[tmp_path / "pmc_2" / "host"].files == {
        "counter_collection": [("3", tmp_path / "pmc_2" / "host" / "3_counter_collection.csv")]
    }


# --------------------------------------------------------------------------------------------
# the official doc examples (ROCm 7.0 headers)
# --------------------------------------------------------------------------------------------

# End_Timestamp - Start_Timestamp of each row of docs/kernel_trace.csv, worked out by hand
DOC_KERNEL_NS = {1: 12800, 2: 8240, 3: 11160, 4: 11200, 5: 11400, 6: 9160, 11: 9920, 12: 12440, 13: 9840}


def test_doc_kernel_trace_ingests(tmp_path: Path) -> None:
    cap = tmp_path / "cap"
    cap.mkdir()
    shutil.copy(fixture_path(*DOCS, "kernel_trace.csv"), cap / "834304_kernel_trace.csv")
    store, run_id = _ingest(cap, tmp_path / "r.db")
    d = _table(store, run_id, "dispatch", "dispatch_index")
    # the file lists dispatches in completion order; the table is in enqueue (dispatch id) order
    assert d["dispatch_id"].tolist() == [1, 2, 3, 4, 5, 6, 11, 12, 13]
    assert d["ordinal"].tolist() == list(range(9))
    assert dict(zip(d["dispatch_id"], d["duration_ns"], strict=True)) == DOC_KERNEL_NS
    first = d.iloc[0]
    assert first["kernel_name"] == "void addition_kernel<float>(float*, float const*, float const*, int, int)"
    assert (first["start_ns"], first["end_ns"]) == (1550151853029637, 1550151853042437)
    assert (first["grid_x"], first["grid_y"], first["grid_z"], first["grid_size"]) == (1024, 1024, 1, 1024 * 1024)
    assert (first["workgroup_x"], first["workgroup_size"]) == (64, 64)
    assert first["thread_id"] == 834304
    assert first["process_id"] == 834304  # from the file name prefix
    divide = d[d["dispatch_id"] == 4].iloc[0]
    assert (divide["vgpr_count"], divide["accum_vgpr_count"], divide["sgpr_count"]) == (12, 4, 16)
    assert d["queue_id"].tolist() == [1, 1, 1, 1, 2, 2, 3, 3, 4]
    assert d["stream_id"].tolist() == d["queue_id"].tolist()
    agents = _table(store, run_id, "agent", "agent_index")
    assert agents["agent_label"].tolist() == ["Agent 4"]
    assert d["attribution_method"].unique().tolist() == ["none"]


def test_entries_of_the_capture_folder_that_cannot_be_read_are_named_in_a_warning(tmp_path: Path) -> None:
    """A dangling link (here the counter file), a FIFO and links in a loop cannot be read: the run says so."""
    import os

    cap = tmp_path / "cap"
    cap.mkdir()
    shutil.copy(fixture_path(*DOCS, "kernel_trace.csv"), cap / "834304_kernel_trace.csv")
    (cap / "834304_counter_collection.csv").symlink_to(tmp_path / "gone.csv")
    os.mkfifo(cap / "pipe\x1b[31m")
    (cap / "zz_loop_a").symlink_to(cap / "zz_loop_b")
    (cap / "zz_loop_b").symlink_to(cap / "zz_loop_a")
    capture = read_capture(cap)
    notes = [n for n in capture.notes if n.code == "entries-not-read"]
    assert len(notes) == 1 and notes[0].severity == "warning"
    assert notes[0].message == (
        "4 entries of the capture folder could not be read and are left out: "
        "834304_counter_collection.csv (a symbolic link to no file); pipe\\x1b[31m (a FIFO); "
        "zz_loop_a (a symbolic link to no file); zz_loop_b (a symbolic link to no file)"
    )
    assert len(capture.passes) == 1 and len(capture.passes[0].counters) == 0  # the kernel trace alone


def test_doc_counter_collection_without_kernel_trace(tmp_path: Path) -> None:
    cap = tmp_path / "cap"
    cap.mkdir()
    shutil.copy(fixture_path(*DOCS, "counter_collection.csv"), cap / "15606_counter_collection.csv")
    store, run_id = _ingest(cap, tmp_path / "r.db")
    d = _table(store, run_id, "dispatch", "dispatch_index")
    assert d["dispatch_id"].tolist() == [1, 2, 3, 4]
    assert d["kernel_name"].str.split("(").str[0].tolist() == [
        "void addition_kernel<float>",
        "subtract_kernel",
        "multiply_kernel",
        "divide_kernel",
    ]
    # End_Timestamp - Start_Timestamp of the four rows, by hand
    assert d["duration_ns"].tolist() == [52151, 49780, 46818, 48151]
    assert d["grid_size"].tolist() == [1048576] * 4
    assert d["workgroup_size"].tolist() == [64] * 4
    counters = _table(store, run_id, "counter_value", "dispatch_index")
    assert counters["counter_name"].tolist() == ["SQ_WAVES"] * 4
    # 1,048,576 work-items in waves of 64 lanes
    assert counters["value"].tolist() == [1048576 / 64] * 4
    run = _table(store, run_id, "run", "run_id").iloc[0]
    assert run["timing_source"] == "counter_pass"
    assert bool(run["serialised_timings"])
    assert _table(store, run_id, "pass", "pass_index")["kind"].tolist() == ["counter"]


def test_doc_marker_trace_ranges_marks_and_depth(tmp_path: Path) -> None:
    cap = tmp_path / "cap"
    cap.mkdir()
    shutil.copy(fixture_path(*DOCS, "kernel_trace.csv"), cap / "717_kernel_trace.csv")
    shutil.copy(fixture_path(*DOCS, "marker_api_trace.csv"), cap / "717_marker_api_trace.csv")
    store, run_id = _ingest(cap, tmp_path / "r.db")
    m = _table(store, run_id, "marker_range", "range_index").set_index("correlation_id")
    assert sorted(m.index) == [1, 2, 3, 4, 5]
    assert m.loc[[1, 4], "kind"].tolist() == ["mark", "mark"]  # Start == End
    assert m.loc[[2, 3, 5], "kind"].tolist() == ["range"] * 3
    assert m.loc[3, ["message", "start_ns", "end_ns"]].tolist() == [
        "hipLaunchKernel",
        1520113899684965,
        1520113901491622,
    ]
    # thread 717: "hipMemcpy" lies inside "hipLaunchKernel"; the process range sits on thread 0
    assert m.loc[3, "depth"] == 0
    assert m.loc[5, "depth"] == 1
    assert m.loc[2, "depth"] == 0 and m.loc[2, "thread_id"] == 0
    assert m.loc[1, "depth"] == 0  # "before hipLaunchKernel": no range open yet
    assert m.loc[4, "depth"] == 1  # "after hipLaunchKernel": inside the "hipLaunchKernel" range
    assert m["invocation"].isna().all()


# --------------------------------------------------------------------------------------------
# header versions and spellings
# --------------------------------------------------------------------------------------------


def test_rocm63_kernel_trace_header(tmp_path: Path) -> None:
    rows = [
        {
            "Kind": "KERNEL_DISPATCH",
            "Agent_Id": 1,  # 6.x: the bare node id
            "Queue_Id": 1,
            "Thread_Id": 69,
            "Dispatch_Id": 7,
            "Kernel_Id": 3,
            "Kernel_Name": "vecCopy(double*, double*, double*, int, int)",
            "Correlation_Id": 12,
            "Start_Timestamp": T0,
            "End_Timestamp": T0 + 4321,
            "Private_Segment_Size": 16,
            "Group_Segment_Size": 2048,
            "Workgroup_Size_X": 256,
            "Workgroup_Size_Y": 2,
            "Workgroup_Size_Z": 1,
            "Grid_Size_X": 4096,
            "Grid_Size_Y": 4,
            "Grid_Size_Z": 2,
        }
    ]
    write_csv(tmp_path / "cap" / "69_kernel_trace.csv", KERNEL_TRACE_63, rows)
    p = _pass(tmp_path / "cap")
    d = p.dispatches.iloc[0]
    assert d["agent_label"] == "1"
    assert (d["scratch_bytes"], d["lds_bytes"]) == (16, 2048)
    assert (d["grid_size"], d["workgroup_size"]) == (4096 * 4 * 2, 256 * 2)
    assert pd.isna(d["stream_id"]) and pd.isna(d["vgpr_count"])
    assert (d["start_ns"], d["end_ns"], d["correlation_id"], d["thread_id"]) == (T0, T0 + 4321, 12, 69)
    frames = build_run(read_capture(tmp_path / "cap"))
    assert frames.tables["dispatch"]["duration_ns"].tolist() == [4321]
    assert frames.tables["agent"]["agent_label"].tolist() == ["1"]


def test_rocm6_counter_collection_without_timestamps(tmp_path: Path) -> None:
    k = Kernel(3, "vecCopy(double*, double*, double*, int, int)", 3, 0, 0, agent="2")
    rows = [
        {key: v for key, v in r.items() if key in COUNTERS_6X}
        for r in k.counter_rows(55, {"TCC_EA0_RDREQ_sum": 65757.0, "TCC_EA0_WRREQ_sum": 131072.0})
    ]
    write_csv(tmp_path / "cap" / "55_counter_collection.csv", COUNTERS_6X, rows)
    p = _pass(tmp_path / "cap")
    assert p.kind == "counter"
    assert p.dispatches["dispatch_id"].tolist() == [3]
    assert p.dispatches["start_ns"].isna().all()
    assert dict(zip(p.counters["counter_name"], p.counters["value"], strict=True)) == {
        "TCC_EA0_RDREQ_sum": 65757.0,
        "TCC_EA0_WRREQ_sum": 131072.0,
    }
    frames = build_run(read_capture(tmp_path / "cap"))
    assert frames.tables["dispatch"]["duration_ns"].isna().all()  # unknown, not 0


@pytest.mark.parametrize("spelling", [str.lower, str.upper])
def test_column_names_are_case_insensitive(tmp_path: Path, spelling: Any) -> None:
    k = Kernel(1, "k", 2, T0, T0 + 10, tid=5)
    row = {spelling(key): v for key, v in k.row70().items()}
    write_csv(tmp_path / "cap" / "5_kernel_trace.csv", [spelling(h) for h in KERNEL_TRACE_70], [row])
    marker = {spelling(key): v for key, v in rng("ggml:ADD:x-0:0", 1, T0 - 100, T0 - 50, pid=5, tid=5).items()}
    write_csv(tmp_path / "cap" / "5_marker_api_trace.csv", [spelling(h) for h in API_TRACE], [marker])
    launch = {spelling(key): v for key, v in api("hipLaunchKernel", 2, T0 - 80, T0 - 70, pid=5, tid=5).items()}
    write_csv(tmp_path / "cap" / "5_hip_api_trace.csv", [spelling(h) for h in API_TRACE], [launch])
    frames = build_run(read_capture(tmp_path / "cap"))
    d = frames.tables["dispatch"].iloc[0]
    assert (d["start_ns"], d["duration_ns"], d["grid_size"], d["vgpr_count"]) == (T0, 10, 4096, 8)
    assert (d["launch_ns"], d["attribution_method"]) == (T0 - 80, "launch_api")
    assert frames.tables["op_invocation"]["op"].tolist() == ["ADD"]


def test_newer_rocpd_column_casing(tmp_path: Path) -> None:
    header = [
        {"LDS_Block_Size": "Lds_Block_Size", "VGPR_Count": "Vgpr_Count", "SGPR_Count": "Sgpr_Count"}.get(h, h)
        for h in KERNEL_TRACE_70
    ]
    header = [h.replace("Accum_VGPR_Count", "Accum_Vgpr_Count") for h in header]
    row = Kernel(1, "k", 2, T0, T0 + 10).row70()
    row = {"Lds_Block_Size": 512, "Vgpr_Count": 24, "Sgpr_Count": 32, "Accum_Vgpr_Count": 4} | {
        key: v
        for key, v in row.items()
        if key not in ("LDS_Block_Size", "VGPR_Count", "SGPR_Count", "Accum_VGPR_Count")
    }
    write_csv(tmp_path / "cap" / "out_kernel_trace.csv", header, [row])
    d = _pass(tmp_path / "cap").dispatches.iloc[0]
    assert (d["lds_bytes"], d["vgpr_count"], d["sgpr_count"], d["accum_vgpr_count"]) == (512, 24, 32, 4)


def test_rocpd_convert_csv_with_guid_column(tmp_path: Path) -> None:
    """``rocpd convert -f csv`` output: ``out_<domain>.csv``, a leading Guid column, no pid in the names."""
    cap = tmp_path / "rocpd-output-data"
    cap.mkdir()
    shutil.copy(fixture_path(*DOCS, "rocpd-to-csv.csv"), cap / "out_hip_api_trace.csv")
    guid = "0000ddb5-8903-7903-b269-cd8d3745bb8a"
    # the doc's HIP trace: hipLaunchKernel is correlation id 10 on thread 137,
    # host time 3719662416752501..3719662417325443; its kernel runs later on the GPU
    kernel = Kernel(1, "void addition_kernel<float>(float*, float const*, float const*, int, int)", 10, 0, 0, tid=137)
    row = kernel.row70() | {"Start_Timestamp": 3719662417400000, "End_Timestamp": 3719662417412800}
    write_csv(cap / "out_kernel_trace.csv", ["Guid", *KERNEL_TRACE_70], [{"Guid": guid, **row}])
    write_csv(
        cap / "out_marker_api_trace.csv",
        ["Guid", *API_TRACE],
        [{"Guid": guid, **rng("ggml:ADD:sum-0:0", 9, 3719662416740000, 3719662417326000, pid=137, tid=137)}],
    )
    p = _pass(cap)
    assert p.launches[["correlation_id", "start_ns", "thread_id", "api_name"]].values.tolist() == [
        [10, 3719662416752501, 137, "hipLaunchKernel"]  # only the launch of a traced kernel is kept
    ]
    store, run_id = _ingest(cap, tmp_path / "r.db")
    d = _table(store, run_id, "dispatch", "dispatch_index").iloc[0]
    assert pd.isna(d["process_id"])  # "out" is no pid
    assert (d["launch_ns"], d["duration_ns"], d["attribution_method"]) == (3719662416752501, 12800, "launch_api")
    v = store.query(f"SELECT invocation, op, node_name FROM dispatch_dram WHERE run_id = {run_id}").iloc[0]
    assert v.tolist() == [0, "ADD", "sum-0"]


def test_gzip_compressed_files(tmp_path: Path) -> None:
    cap = tmp_path / "cap"
    kernels = [Kernel(1, "rms_norm_f32", 2, T0 + 1000, T0 + 1100), Kernel(2, "mul_mat_q", 4, T0 + 1100, T0 + 1300)]
    write_csv(cap / "1234_kernel_trace.csv.gz", KERNEL_TRACE_70, [k.row70() for k in kernels], compress=True)
    markers = [rng("ggml:RMS_NORM:norm-0:0", 1, T0, T0 + 100), rng("ggml:MUL_MAT:Qcur-0:1", 3, T0 + 101, T0 + 200)]
    write_csv(cap / "1234_marker_api_trace.csv.gz", API_TRACE, markers, compress=True)
    apis = [api("hipLaunchKernel", 2, T0 + 10, T0 + 20), api("hipLaunchKernel", 4, T0 + 110, T0 + 120)]
    write_csv(cap / "1234_hip_api_trace.csv.gz", API_TRACE, apis, compress=True)
    assert (cap / "1234_kernel_trace.csv.gz").read_bytes()[:2] == b"\x1f\x8b"
    store, run_id = _ingest(cap, tmp_path / "r.db")
    v = store.query(f"SELECT dispatch_id, op, duration_ns FROM dispatch_dram WHERE run_id = {run_id} ORDER BY 1")
    assert v.values.tolist() == [[1, "RMS_NORM", 100], [2, "MUL_MAT", 200]]


def test_agent_info_maps_trace_agents(tmp_path: Path) -> None:
    """ROCm 7.0 traces name agents ``Agent <logical node id>``; CPUs are counted too."""
    cap = tmp_path / "cap"
    agents = [
        {"Node_Id": 0, "Logical_Node_Id": 0, "Agent_Type": "CPU", "Wave_Front_Size": 0, "Name": "AMD EPYC 9454"},
        {
            "Node_Id": 2,
            "Logical_Node_Id": 1,
            "Agent_Type": "GPU",
            "Cu_Count": 304,
            "Simd_Count": 1216,
            "Wave_Front_Size": 64,
            "Num_Xcc": 8,
            "Max_Engine_Clk_Fcompute": 2100,
            "Name": "gfx942",
            "Product_Name": "AMD Instinct MI300X",
        },
    ]
    write_csv(cap / "9_agent_info.csv", AGENT_INFO, agents)
    write_pass(cap, 9, kernels=[Kernel(1, "k", 2, T0, T0 + 10, agent="Agent 1")])
    store, run_id = _ingest(cap, tmp_path / "r.db")
    a = _table(store, run_id, "agent", "agent_index").set_index("node_id")
    assert a.loc[2, ["agent_type", "gfx_arch", "product_name", "cu_count", "num_xcc", "wave_size"]].tolist() == [
        "GPU",
        "gfx942",
        "AMD Instinct MI300X",
        304,
        8,
        64,
    ]
    assert a.loc[2, "max_clock_mhz"] == 2100.0
    assert a.loc[0, "agent_type"] == "CPU" and _missing(a.loc[0, "gfx_arch"])  # a CPU model is no gfx target
    v = store.query(f"SELECT gfx_arch FROM dispatch_dram WHERE run_id = {run_id}")
    assert v["gfx_arch"].tolist() == ["gfx942"]
    assert _table(store, run_id, "run", "run_id")["gpu_name"].tolist() == ["AMD Instinct MI300X"]


def _missing(value: object) -> bool:
    return value is None or bool(pd.isna(value))


# --------------------------------------------------------------------------------------------
# values
# --------------------------------------------------------------------------------------------


def test_17_digit_timestamps_stay_exact(tmp_path: Path) -> None:
    start = 98_765_432_109_876_543
    assert float(start) != start  # a float64 round trip would change it
    assert int(float(start + 1)) == int(float(start))  # ...and make a 1 ns kernel last 0 ns
    kernels = [Kernel(1, "tiny", 2, start, start + 1), Kernel(2, "next", 3, start + 3, start + 1_000_000_007)]
    write_pass(tmp_path / "cap", 7, kernels=kernels)
    store, run_id = _ingest(tmp_path / "cap", tmp_path / "r.db")
    d = _table(store, run_id, "dispatch", "dispatch_index")
    assert d["start_ns"].tolist() == [start, start + 3]
    assert d["end_ns"].tolist() == [start + 1, start + 1_000_000_007]
    assert d["duration_ns"].tolist() == [1, 1_000_000_004]
    assert _table(store, run_id, "pass", "pass_index")["timestamps_exact"].astype(bool).tolist() == [True]


def test_dispatches_come_in_dispatch_id_order(tmp_path: Path) -> None:
    kernels = [Kernel(i, f"k{i}", 10 + i, T0 + 100 * i, T0 + 100 * i + 50) for i in (3, 1, 4, 2)]
    write_pass(tmp_path / "cap", 7, kernels=kernels)
    p = _pass(tmp_path / "cap")
    assert p.dispatches["dispatch_id"].tolist() == [1, 2, 3, 4]
    assert p.dispatches["kernel_name"].tolist() == ["k1", "k2", "k3", "k4"]
    assert p.dispatches["correlation_id"].tolist() == [11, 12, 13, 14]


def test_counters_without_kernel_trace_give_the_dispatches(tmp_path: Path) -> None:
    kernels = [Kernel(2, "quantize", 5, T0 + 100, T0 + 180), Kernel(1, "mul_mat_q", 3, T0, T0 + 90)]
    values = {2: {"SQ_WAVES": 16.0, "GRBM_GUI_ACTIVE": 1.5e3}, 1: {"SQ_WAVES": 64.0, "GRBM_GUI_ACTIVE": 2.5e3}}
    write_pass(tmp_path / "cap", 88, counters=values, counter_kernels=kernels)
    assert [p.name for p in (tmp_path / "cap").iterdir()] == ["88_counter_collection.csv"]
    p = _pass(tmp_path / "cap")
    assert p.kind == "counter"
    d = p.dispatches
    assert d["dispatch_id"].tolist() == [1, 2]
    assert d["kernel_name"].tolist() == ["mul_mat_q", "quantize"]
    assert d["process_id"].tolist() == [88, 88]
    assert (d["end_ns"] - d["start_ns"]).tolist() == [90, 80]
    assert d["grid_size"].tolist() == [4096, 4096]
    got = {(int(r), n): v for r, n, v in p.counters[["row", "counter_name", "value"]].itertuples(index=False)}
    assert got == {
        (0, "SQ_WAVES"): 64.0,
        (0, "GRBM_GUI_ACTIVE"): 2500.0,
        (1, "SQ_WAVES"): 16.0,
        (1, "GRBM_GUI_ACTIVE"): 1500.0,
    }


def test_counter_values_in_scientific_notation(tmp_path: Path) -> None:
    k = Kernel(1, "k", 2, T0, T0 + 10)
    rows = k.counter_rows(3, {"TA_BUSY_avr": 0.0})
    rows[0]["Counter_Value"] = Raw("1.68555351e-01")
    write_csv(tmp_path / "cap" / "3_counter_collection.csv", COUNTERS_70, rows)
    assert _pass(tmp_path / "cap").counters["value"].tolist() == [pytest.approx(0.168555351, rel=1e-12)]


def test_counters_join_the_kernel_trace_of_the_same_pass(tmp_path: Path) -> None:
    kernels = [Kernel(1, "a", 2, T0, T0 + 10), Kernel(2, "b", 4, T0 + 10, T0 + 30)]
    write_pass(tmp_path / "cap", 9, kernels=kernels, counters={2: {"SQ_WAVES": 7.0}, 1: {"SQ_WAVES": 3.0}})
    p = _pass(tmp_path / "cap")
    assert len(p.dispatches) == 2
    assert dict(zip(p.counters["row"], p.counters["value"], strict=True)) == {0: 3.0, 1: 7.0}


def test_marker_domains_without_user_messages_are_dropped(tmp_path: Path) -> None:
    rows = [
        {**mark("roctxNameOsThread", 1, T0), "Domain": "MARKER_NAME_API"},
        {**rng("roctxProfilerPause", 2, T0 + 1, T0 + 2), "Domain": "MARKER_CONTROL_API"},
        mark("ggml reset", 3, T0 + 5),
        rng("ggml:ADD:x-0:0", 4, T0 + 10, T0 + 20),
    ]
    write_pass(tmp_path / "cap", 1234, kernels=[Kernel(1, "k", 5, T0 + 100, T0 + 200)], markers=rows)
    m = _pass(tmp_path / "cap").markers
    assert marker_messages(m).tolist() == ["ggml reset", "ggml:ADD:x-0:0"]
    assert m["kind"].tolist() == ["mark", "range"]


def test_rows_read_in_small_chunks_give_the_same_pass(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Large files are read in chunks: a dispatch's counter rows may straddle two chunks."""
    kernels = [Kernel(i, f"k{i}", 2 * i, T0 + 100 * i, T0 + 100 * i + i) for i in range(1, 6)]
    values = {k.dispatch_id: {"A": float(k.dispatch_id), "B": 10.0 * k.dispatch_id, "C": 0.5} for k in kernels}
    write_pass(tmp_path / "cap", 4, kernels=kernels, counters=values)
    whole = _pass(tmp_path / "cap")

    real = fileio.read_csv_chunks

    def tiny(path: Path, chunk_rows: int = 2) -> Iterator[tuple[pd.DataFrame, int]]:
        return real(path, 2)

    monkeypatch.setattr(rocprofv3_csv, "read_csv_chunks", tiny)
    chunked = _pass(tmp_path / "cap")
    pd.testing.assert_frame_equal(chunked.dispatches, whole.dispatches)
    pd.testing.assert_frame_equal(chunked.counters, whole.counters)
    assert len(chunked.counters) == 15
    # row numbers stay file rows across chunks: break row 7 (the 6th data row)
    path = tmp_path / "cap" / "4_counter_collection.csv"
    lines = path.read_text().splitlines()
    lines[6] = lines[6].replace(",0.500000,", ",n/a,")
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ParseError) as err:
        _pass(tmp_path / "cap")
    assert err.value.row == 7


# --------------------------------------------------------------------------------------------
# errors name the file and the row (the header is row 1)
# --------------------------------------------------------------------------------------------


def test_missing_required_column(tmp_path: Path) -> None:
    header = [h for h in KERNEL_TRACE_70 if h != "Start_Timestamp"]
    row = {key: v for key, v in Kernel(1, "k", 2, T0, T0 + 1).row70().items() if key != "Start_Timestamp"}
    path = write_csv(tmp_path / "cap" / "1_kernel_trace.csv", header, [row])
    with pytest.raises(ParseError) as err:
        read_capture(tmp_path / "cap")
    assert err.value.row == 1
    assert str(err.value).startswith(f"{path}:1: ")
    assert "Start_Timestamp" in str(err.value)


def test_the_first_bad_row_is_named_whichever_column_it_is_in(tmp_path: Path) -> None:
    """A bad End_Timestamp on line 2 and a bad Start_Timestamp on line 5: the message names line 2."""
    rows = [Kernel(i, "k", 2, T0 + 10 * i, T0 + 10 * i + 5).row70() for i in range(1, 6)]
    rows[0]["End_Timestamp"] = Raw("12ab")  # line 2 (the header is line 1)
    rows[3]["Start_Timestamp"] = Raw("x")  # line 5
    path = write_csv(tmp_path / "cap" / "1_kernel_trace.csv", KERNEL_TRACE_70, rows)
    with pytest.raises(ParseError) as err:
        read_capture(tmp_path / "cap")
    assert err.value.row == 2
    assert str(err.value).startswith(f"{path}:2: ") and "End_Timestamp" in str(err.value)


def test_counter_file_without_counter_name_column(tmp_path: Path) -> None:
    header = [h for h in COUNTERS_70 if h != "Counter_Name"]
    rows = [
        {k: v for k, v in r.items() if k != "Counter_Name"} for r in Kernel(1, "k", 2, 0, 1).counter_rows(1, {"X": 1})
    ]
    path = write_csv(tmp_path / "cap" / "1_counter_collection.csv", header, rows)
    with pytest.raises(ParseError, match="Counter_Name") as err:
        read_capture(tmp_path / "cap")
    assert str(err.value).startswith(f"{path}:1: ")


def test_non_numeric_timestamp(tmp_path: Path) -> None:
    rows = [Kernel(i, "k", i, T0 + i, T0 + i + 1).row70() for i in (1, 2, 3)]
    rows[1]["End_Timestamp"] = "12:00:01"
    path = write_csv(tmp_path / "cap" / "1_kernel_trace.csv", KERNEL_TRACE_70, rows)
    with pytest.raises(ParseError) as err:
        read_capture(tmp_path / "cap")
    assert err.value.row == 3  # header row 1, then rows 2, 3, 4
    assert str(err.value).startswith(f"{path}:3: ")
    assert "End_Timestamp" in str(err.value) and "12:00:01" in str(err.value)


def test_empty_timestamp_in_hip_trace(tmp_path: Path) -> None:
    apis = [api("hipMalloc", 1, T0, T0 + 5), api("hipLaunchKernel", 2, T0 + 10, T0 + 20)]
    apis[1]["Start_Timestamp"] = None
    write_pass(tmp_path / "cap", 1, kernels=[Kernel(1, "k", 2, T0 + 30, T0 + 40)], apis=apis)
    with pytest.raises(ParseError) as err:
        read_capture(tmp_path / "cap")
    assert err.value.row == 3
    assert str(err.value).startswith(f"{tmp_path / 'cap' / '1_hip_api_trace.csv'}:3: ")


def test_marker_that_ends_before_it_starts(tmp_path: Path) -> None:
    rows = [
        {**mark("roctxNameOsThread", 1, T0), "Domain": "MARKER_NAME_API"},  # a dropped domain comes first
        rng("ggml:ADD:x-0:0", 2, T0 + 10, T0 + 20),
        rng("ggml:MUL:y-0:1", 3, T0 + 40, T0 + 30),
    ]
    write_pass(tmp_path / "cap", 1, kernels=[Kernel(1, "k", 5, T0 + 100, T0 + 200)], markers=rows)
    with pytest.raises(ParseError) as err:
        read_capture(tmp_path / "cap")
    assert err.value.row == 4
    assert str(err.value).startswith(f"{tmp_path / 'cap' / '1_marker_api_trace.csv'}:4: ")
    assert "ends before it starts" in str(err.value)


def test_counters_for_a_dispatch_missing_from_the_kernel_trace(tmp_path: Path) -> None:
    traced = Kernel(1, "a", 2, T0, T0 + 10)
    untraced = Kernel(2, "b", 3, T0 + 10, T0 + 20)
    write_pass(tmp_path / "cap", 6, kernels=[traced], counters={2: {"SQ_WAVES": 1.0}}, counter_kernels=[untraced])
    with pytest.raises(ParseError, match="dispatch 2") as err:
        read_capture(tmp_path / "cap")
    assert err.value.path == str(tmp_path / "cap" / "6_counter_collection.csv")


def test_counter_file_cut_inside_a_value(tmp_path: Path) -> None:
    """A file still being written ends inside a row: its counter value must not be stored cut short."""
    kernels = [Kernel(1, "a", 2, T0, T0 + 10), Kernel(2, "b", 3, T0 + 10, T0 + 20)]
    write_pass(
        tmp_path / "cap", 5, counters={1: {"SQ_WAVES": 16384.0}, 2: {"SQ_WAVES": 16384.0}}, counter_kernels=kernels
    )
    path = tmp_path / "cap" / "5_counter_collection.csv"
    data = path.read_bytes()
    path.write_bytes(data[: data.rindex(b'"SQ_WAVES",163') + len(b'"SQ_WAVES",163')])  # row 3 ends in "163"
    with pytest.raises(ParseError) as err:
        read_capture(tmp_path / "cap")
    assert err.value.row == 3
    assert str(err.value).startswith(f"{path}:3: ")


# ---- rocprofv3 of ROCm 6.2: kernel traces without Dispatch_Id / Thread_Id ----------------------


def test_the_2024_docs_kernel_trace_ingests_with_end_minus_start(tmp_path: Path) -> None:
    import csv as csv_module

    folder = fixture_path("rocprofv3-docs-2024-07")
    with open(folder / "kernel_trace.csv", newline="") as fh:
        rows = list(csv_module.DictReader(fh))
    assert "Dispatch_Id" not in rows[0]
    store, run_id = _ingest(folder, tmp_path / "r.db")
    got = store.query(f"SELECT kernel_name, duration_ns, correlation_id FROM dispatch WHERE run_id = {run_id}")
    assert got["duration_ns"].tolist() == [int(r["End_Timestamp"]) - int(r["Start_Timestamp"]) for r in rows]
    assert got["kernel_name"].tolist() == [r["Kernel_Name"] for r in rows]
    notes = store.query(f"SELECT code FROM run_note WHERE run_id = {run_id}")["code"].tolist()
    assert "early-rocprofv3" in notes


def test_rocm62_pass_orders_by_start_and_takes_dispatch_ids_from_its_counter_file(tmp_path: Path) -> None:
    # one HIP call (correlation 14) launched two kernels: initHeap then the user kernel (LUMI sample)
    heap = Kernel(1, "__amd_rocclr_initHeap", 14, T0 + 100, T0 + 200)
    user = Kernel(2, "taylor_base(float*, float*, unsigned long, unsigned long)", 14, T0 + 300, T0 + 900)
    copy = Kernel(3, "copy_kernel", 15, T0 + 1_000, T0 + 1_600)
    d = tmp_path / "pass"
    # rows come in buffer-flush order, not time order
    write_csv(d / "77_kernel_trace.csv", KERNEL_TRACE_62, [row62(k) for k in (copy, user, heap)])
    counters = {heap: {"SQ_WAVES": 1}, user: {"SQ_WAVES": 4096}, copy: {"SQ_WAVES": 64}}
    rows = [r for k, c in counters.items() for r in counter_rows62(k, 77, c)]
    write_csv(d / "77_counter_collection.csv", COUNTERS_62, rows)
    capture = read_capture(d)
    (p,) = capture.passes
    assert p.dispatches["kernel_name"].tolist() == [heap.name, user.name, copy.name]
    assert p.dispatches["dispatch_id"].tolist() == [1, 2, 3]
    assert (p.dispatches["end_ns"] - p.dispatches["start_ns"]).tolist() == [100, 600, 600]
    waves = p.counters.set_index("row")["value"].to_dict()
    assert waves == {0: 1.0, 1: 4096.0, 2: 64.0}


def test_a_kernel_in_two_identical_ranges_goes_to_the_one_pushed_last(tmp_path: Path) -> None:
    """Ranges ggml:ADD (correlation id 10) and ggml:MUL (11) over the same ns, listed inner first as
    popped; the kernel launched at 150 ns belongs to MUL, pushed inside ADD (by hand)."""
    cap = write_pass(
        tmp_path / "cap",
        1234,
        kernels=[Kernel(1, "k_mul", corr=12, start=1000, end=1100)],
        markers=[rng("ggml:MUL:b:2", 11, 100, 200), rng("ggml:ADD:a:1", 10, 100, 200)],
        apis=[api("hipLaunchKernel", 12, 150, 160)],
    )
    run = build_run(read_capture(cap))
    d = run.tables["dispatch"]
    ops = run.tables["op_invocation"].set_index("op_index")
    assert d["attribution_method"].tolist() == ["launch_api"]
    assert ops.loc[int(d["op_index"].iloc[0]), "invocation"] == 2


def test_two_processes_numbering_the_same_invocations_are_warned_about(tmp_path: Path) -> None:
    """Processes 777 (ranges ggml:ADD:n:1..3) and 888 (ggml:MUL:n:1..3) in one pass: a run keeps one op
    per invocation number, so the warning says their ops merge and how to ingest one process."""
    cap = tmp_path / "cap"
    for pid, op in ((777, "ADD"), (888, "MUL")):
        kernels = [
            Kernel(i, f"k_{op}", corr=100 + i, start=10_000 + 100 * i, end=10_050 + 100 * i, tid=pid)
            for i in range(1, 4)
        ]
        markers = [rng(f"ggml:{op}:n{i}:{i}", i, 1000 * i, 1000 * i + 500, pid=pid, tid=pid) for i in range(1, 4)]
        apis = [api("hipLaunchKernel", 100 + i, 1000 * i + 100, 1000 * i + 200, pid=pid, tid=pid) for i in range(1, 4)]
        write_pass(cap, pid, kernels=kernels, markers=markers, apis=apis)
    notes = [n for n in build_run(read_capture(cap)).notes if n.code == "invocations-shared-by-processes"]
    assert len(notes) == 1 and notes[0].severity == "warning"
    assert "3 ggml op invocation number(s) appear in the ranges of more than one process" in notes[0].message
    alone = build_run(read_capture(cap / "888_kernel_trace.csv"))
    assert not [n for n in alone.notes if n.code == "invocations-shared-by-processes"]
    assert sorted(alone.tables["op_invocation"]["op"].astype(str)) == ["MUL", "MUL", "MUL"]


@pytest.mark.parametrize("with_pids", [True, False])
def test_counter_file_dispatches_that_disagree_with_the_kernel_trace_are_counted(
    tmp_path: Path, with_pids: bool
) -> None:
    """Each counter-file dispatch is compared with the kernel-trace dispatch of its key, as a join would."""
    pid = pd.array([7] * 6 if with_pids else [None] * 6, dtype="Int64")
    dispatches = pd.DataFrame(
        {
            "process_id": pid,
            "dispatch_id": pd.array([1, 2, 3, 4, 5, None], dtype="Int64"),
            "start_ns": pd.array([100, 200, 300, 400, None, 600], dtype="Int64"),
            "kernel_name": ["a", "b", None, "d", "e", "f"],
        }
    )
    info = pd.DataFrame(
        {
            "process_id": pd.array([7] * 7 if with_pids else [None] * 7, dtype="Int64"),
            # 9 matches no dispatch; the NULL id matches the dispatch with a NULL id (as in pandas' merge)
            "dispatch_id": pd.array([1, 2, 3, 4, 5, 9, None], dtype="Int64"),
            "start_ns": pd.array([100, 201, 300, 400, 500, 900, 600], dtype="Int64"),
            "kernel_name": [None, None, "c", "x", "e", "z", None],
        }
    )
    # by hand: dispatch 2's start differs; 3's name (None against "c": "" != "c"); 4's name; 5 has no
    # kernel-trace start (not compared); 9 is in no kernel trace; the NULL-id rows agree
    files = rocprofv3_csv.PassFiles(tmp_path, {"counter_collection": [(None, tmp_path / "c.csv")]})
    notes = rocprofv3_csv._check_counter_timestamps(files, dispatches, info)
    assert len(notes) == 1 and "3 of 6 dispatches" in notes[0].message
    same = info.copy()
    same["start_ns"] = dispatches["start_ns"].tolist() + [None]
    same["kernel_name"] = None
    assert rocprofv3_csv._check_counter_timestamps(files, dispatches, same) == []


# --------------------------------------------------------------------------------------------
# enqueue order, repeated ids and the counter cross-check without whole-column sorts
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dense", [True, False])
def test_a_dispatch_id_twice_out_of_order_names_its_second_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dense: bool
) -> None:
    """In a file out of id order the repeat is found by the table of dense ids, or by pandas: same row."""
    if not dense:
        monkeypatch.setattr(rocprofv3_csv.keys.DenseKeys, "build", classmethod(lambda cls, *a, **k: None))
    kernels = [Kernel(i, "k", 10 + n, T0 + 10 * n, T0 + 10 * n + 5) for n, i in enumerate((3, 1, 2, 5, 1, 4, 3))]
    write_pass(tmp_path / "cap", 7, kernels=kernels)
    with pytest.raises(ParseError) as err:
        _pass(tmp_path / "cap")
    # by hand: id 1 is on data rows 2 and 5 (file rows 3 and 6), id 3 on rows 1 and 7: row 6 comes first
    assert err.value.row == 6 and "dispatch id 1 appears twice" in err.value.reason


@pytest.mark.parametrize("dense", [True, False])
def test_dispatches_of_two_processes_in_completion_order_come_in_enqueue_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dense: bool
) -> None:
    if not dense:  # the three keys sorted in memory, as before
        monkeypatch.setattr(rocprofv3_csv.keys.DenseKeys, "build", classmethod(lambda cls, *a, **k: None))
    for pid, ids in ((9, (4, 2, 3, 1)), (5, (2, 7, 1))):  # id 7: a gap in process 5's ids
        kernels = [Kernel(i, f"k{pid}-{i}", 100 * pid + i, T0 + 1000 * n, T0 + 1000 * n + i) for n, i in enumerate(ids)]
        write_pass(tmp_path / "cap", pid, kernels=kernels)
    p = _pass(tmp_path / "cap")
    d = p.dispatches
    assert list(zip(d["process_id"], d["dispatch_id"], strict=True)) == [
        (5, 1),
        (5, 2),
        (5, 7),
        (9, 1),
        (9, 2),
        (9, 3),
        (9, 4),
    ]
    assert [str(v) for v in d["kernel_name"].tolist()] == ["k5-1", "k5-2", "k5-7", "k9-1", "k9-2", "k9-3", "k9-4"]
    assert (d["end_ns"] - d["start_ns"]).tolist() == [1, 2, 7, 1, 2, 3, 4]


def test_counter_file_of_another_run_is_warned_about_once_per_dispatch(tmp_path: Path) -> None:
    """The cross-check reads each counter-file dispatch once, whichever of its rows come first."""
    kernels = [Kernel(i, f"k{i}", 10 + i, T0 + 100 * i, T0 + 100 * i + 50) for i in (1, 2, 3, 4)]
    write_pass(tmp_path / "cap", 3, kernels=kernels)
    rows = []
    for k in kernels:
        first, second = k.counter_rows(3, {"SQ_WAVES": 1.0}), k.counter_rows(3, {"GRBM_COUNT": 2.0})
        if k.dispatch_id in (2, 4):  # another run's timestamps for dispatches 2 and 4
            for row in first + second:
                row["Start_Timestamp"] += 7
        rows.append((first, second))
    # dispatch 1's rows in two runs: before and after dispatch 2's
    ordered = rows[0][0] + rows[1][0] + rows[1][1] + rows[0][1] + rows[2][0] + rows[2][1] + rows[3][0] + rows[3][1]
    write_csv(tmp_path / "cap" / "3_counter_collection.csv", COUNTERS_70, ordered)
    p = _pass(tmp_path / "cap")
    notes = [n for n in p.notes if n.code == "files-disagree"]
    # by hand: 4 dispatches in the counter file, 2 with other timestamps
    assert len(notes) == 1 and "2 of 4 dispatches have other timestamps" in notes[0].message
    assert sorted(zip(p.counters["row"].tolist(), p.counters["value"].tolist(), strict=True)) == [
        (r, v) for r in range(4) for v in (1.0, 2.0)
    ]
