"""rocpd SQLite reader (``rocroof.capture.readers.rocpd``) and its path through the pipeline and the store.

No public real rocpd database exists, so every database here is built by the test itself
(``tests/rocpd_builder.py``) in the documented schema: rocprofiler-sdk ``rocpd_tables.sql`` /
``rocpd_views.sql``, schema version 3 (UUID-suffixed physical tables, unsuffixed ``rocpd_*``
views, one database per process). Expected values are computed by hand from the rows the
test writes, never taken from rocroof's output.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import rocroof.spill as spill
from rocroof import keys
from rocroof.capture.markers import marker_messages
from rocroof.capture.readers import detect, read_capture, rocpd, sqlite_arrow
from rocroof.errors import InputError, ParseError
from rocroof.ingest.pipeline import build_run
from rocroof.records import PassData, non_decreasing
from rocroof.store import Store

from .rocpd_builder import UUID_A, UUID_B, RocpdBuilder, create_views, rocpd_db, suffix

GFX942 = "gfx942"


# ---- helpers ----------------------------------------------------------------------------------


def _gpu(b: RocpdBuilder) -> int:
    b.add_node_and_process()
    return b.add_agent(name=GFX942)


def _texts(column: pd.Series) -> list[object]:
    """A text column's values, None where missing: object values, or a categorical of a spilled read."""
    return [None if pd.isna(v) else v for v in column.astype(object).tolist()]


def _messages(markers: pd.DataFrame) -> list[object]:
    """Every marker's message, those the reader let go of (a large read: ranges as their parts) written back."""
    return [None if pd.isna(v) else v for v in marker_messages(markers).tolist()]


def _ingest(capture: Path, db: Path) -> int:
    store = Store(db)
    try:
        return store.write_run(build_run(read_capture(capture)))
    finally:
        store.close()


def _query(db: Path, sql: str) -> pd.DataFrame:
    store = Store(db, read_only=True)
    try:
        return store.query(sql)
    finally:
        store.close()


def _instance_values(p: PassData, row: int, counter: str) -> list[float]:
    inst = p.instances
    sel = inst[(inst["row"] == row) & (inst["counter_name"] == counter)].sort_values("instance")
    assert sel["instance"].tolist() == list(range(len(sel)))
    return [float(v) for v in sel["value"]]


def _counter(p: PassData, row: int, counter: str) -> float:
    c = p.counters
    sel = c[(c["row"] == row) & (c["counter_name"] == counter)]
    assert len(sel) == 1, f"{counter} of row {row}: {len(sel)} rows"
    return float(sel["value"].iloc[0])


# ---- 1. dispatches ----------------------------------------------------------------------------


def test_dispatch_columns_come_from_dispatch_symbol_and_event_rows(tmp_path: Path) -> None:
    """Every dispatch column maps to its documented rocpd source column (DB built by the test, schema v3)."""
    db = tmp_path / "4242_results.db"
    with rocpd_db(db) as b:
        gpu = _gpu(b)
        k_mm = b.add_kernel_symbol(
            "_Z11mul_mat_q4_PKvPf", "mul_mat_q4(void const*, float*)", sgpr=48, vgpr=96, accum_vgpr=64
        )
        k_add = b.add_kernel_symbol("_Z7add_f32PfPKf", "add_f32(float*, float const*)", sgpr=12, vgpr=8)
        b.add_dispatch(
            dispatch_id=7,
            kernel_id=k_mm,
            agent_id=gpu,
            start=5_000,
            end=7_250,
            stack_id=31,
            grid=(4096, 4, 2),
            workgroup=(256, 2, 1),
            lds=16384,
            scratch=96,
            queue_id=3,
            stream_id=5,
        )
        b.add_dispatch(dispatch_id=8, kernel_id=k_add, agent_id=gpu, start=7_300, end=7_400, stack_id=33, tid=4250)

    p = rocpd.read_pass(db, "trace")
    d = p.dispatches
    assert p.kind == "trace" and p.label == "trace" and p.source == str(db)
    assert d["dispatch_id"].tolist() == [7, 8]
    assert d["kernel_name"].tolist() == ["mul_mat_q4(void const*, float*)", "add_f32(float*, float const*)"]
    assert d["kernel_id"].tolist() == [k_mm, k_add]
    assert d["start_ns"].tolist() == [5_000, 7_300]
    assert d["end_ns"].tolist() == [7_250, 7_400]
    assert d["correlation_id"].tolist() == [31, 33]  # the dispatch event's stack_id
    assert d["agent_label"].tolist() == [str(gpu), str(gpu)]
    assert d["process_id"].tolist() == [4242, 4242]
    assert d["thread_id"].tolist() == [4242, 4250]
    first = d.iloc[0]
    assert (first["grid_x"], first["grid_y"], first["grid_z"]) == (4096, 4, 2)
    assert (first["workgroup_x"], first["workgroup_y"], first["workgroup_z"]) == (256, 2, 1)
    assert first["grid_size"] == 4096 * 4 * 2
    assert first["workgroup_size"] == 256 * 2 * 1
    assert first["lds_bytes"] == 16384
    assert first["scratch_bytes"] == 96
    assert (first["sgpr_count"], first["vgpr_count"], first["accum_vgpr_count"]) == (48, 96, 64)
    assert (first["queue_id"], first["stream_id"]) == (3, 5)
    assert d.iloc[1]["grid_size"] == 1024 and d.iloc[1]["workgroup_size"] == 256  # builder defaults
    # no --kernel-rename: the region string is "" -> no region
    assert d["region"].isna().all()
    # durations are left to the pipeline (end - start)
    assert d["duration_ns"].isna().all()


def test_dispatches_are_ordered_by_dispatch_id_not_by_insertion(tmp_path: Path) -> None:
    """The writer may insert out of order; the pass is in dispatch-id order (DB built by the test, schema v3)."""
    db = tmp_path / "1_results.db"
    with rocpd_db(db) as b:
        gpu = _gpu(b)
        k = b.add_kernel_symbol("k", "k()")
        for did in (12, 3, 9):
            b.add_dispatch(
                dispatch_id=did, kernel_id=k, agent_id=gpu, start=did * 100, end=did * 100 + 50, stack_id=did
            )
    d = rocpd.read_pass(db, "x").dispatches
    assert d["dispatch_id"].tolist() == [3, 9, 12]
    assert d["start_ns"].tolist() == [300, 900, 1200]
    assert d["correlation_id"].tolist() == [3, 9, 12]


@pytest.mark.parametrize("display", [None, ""])
def test_kernel_name_falls_back_to_symbol_when_display_name_is_missing(tmp_path: Path, display: str | None) -> None:
    """display_name NULL or '' -> kernel_name (DB built by the test in the documented schema v3)."""
    db = tmp_path / "1_results.db"
    with rocpd_db(db) as b:
        gpu = _gpu(b)
        k = b.add_kernel_symbol("_Z6kernelv", display)
        b.add_dispatch(dispatch_id=1, kernel_id=k, agent_id=gpu, start=1, end=2, stack_id=1)
    assert rocpd.read_pass(db, "x").dispatches["kernel_name"].tolist() == ["_Z6kernelv"]


def test_agents_and_metadata(tmp_path: Path) -> None:
    """rocpd_info_agent rows become agents keyed by their id; metadata, command and host are read.

    The DB is built by the test in the documented schema (rocpd_tables.sql, schema version 3).
    """
    db = tmp_path / "1_results.db"
    with rocpd_db(db) as b:
        b.add_node_and_process(hostname="node-17", command="llama-cli -m model.gguf -p hi")
        cpu = b.add_agent(
            agent_type="CPU", absolute_index=0, logical_index=0, name="AMD EPYC", product_name="EPYC", extdata="{}"
        )
        gpu = b.add_agent(
            absolute_index=2,
            logical_index=2,
            name=GFX942,
            extdata={"cu_count": 304, "simd_count": 1216, "num_xcc": 8, "wave_front_size": 64},
        )
        odd = b.add_agent(absolute_index=3, logical_index=3, name=GFX942, extdata={"cu_count": "many"})
        broken = b.add_agent(absolute_index=4, logical_index=4, name=GFX942, extdata="not json")
    agents = rocpd.read_agents(db)
    assert agents["agent_label"].tolist() == [str(cpu), str(gpu), str(odd), str(broken)]
    assert agents["agent_type"].tolist() == ["CPU", "GPU", "GPU", "GPU"]
    assert agents["node_id"].tolist() == [0, 2, 3, 4]
    g = agents.iloc[1]
    assert (g["gfx_arch"], g["product_name"]) == (GFX942, "AMD Instinct MI300X")
    assert (g["cu_count"], g["simd_count"], g["num_xcc"], g["wave_size"]) == (304, 1216, 8, 64)
    # a detail that is not an integer, or extdata that is not JSON, is unknown (not an error)
    assert agents.iloc[2][["cu_count", "simd_count"]].isna().all()
    assert agents.iloc[3][["cu_count", "wave_size"]].isna().all()

    meta = rocpd.read_metadata(db)
    assert meta["rocpd_schema_version"] == "3"
    assert meta["rocpd_guid"] == UUID_A
    assert meta["rocpd_uuid"] == suffix(UUID_A)[1:]
    assert meta["command"] == "llama-cli -m model.gguf -p hi"
    assert meta["host"] == "node-17"


# ---- 2. counters ------------------------------------------------------------------------------


def _counter_db(path: Path) -> None:
    """Two dispatches; per-instance TCC_EA0_RDREQ (16 TCC channels), derived TCC_BUBBLE_sum.

    Records are written interleaved (channel i of dispatch 2 before channel i+1 of dispatch 1)
    and dispatch 2's event is written first, so row mapping and instance order are exercised.
    """
    with rocpd_db(path) as b:
        gpu = _gpu(b)
        k = b.add_kernel_symbol("copy", "copy()")
        d2 = b.add_dispatch(dispatch_id=2, kernel_id=k, agent_id=gpu, start=300, end=400, stack_id=20)
        d1 = b.add_dispatch(dispatch_id=1, kernel_id=k, agent_id=gpu, start=100, end=200, stack_id=10)
        rdreq = b.add_pmc("TCC_EA0_RDREQ", gpu)
        bubble = b.add_pmc("TCC_BUBBLE_sum", gpu, is_derived=1)
        for ch in range(16):
            b.add_counter(d1.event_id, rdreq, [1000 + 37 * ch])
            b.add_counter(d2.event_id, rdreq, [5 * (16 - ch)])
        b.add_counter(d1.event_id, bubble, [512.0])
        b.add_counter(d2.event_id, bubble, [3.5])


def test_counter_instances_are_summed_per_dispatch_and_counter(tmp_path: Path) -> None:
    """16 per-channel records -> one summed value (as the counters_collection view SUMs); DB built by the test."""
    db = tmp_path / "1_results.db"
    _counter_db(db)
    p = rocpd.read_pass(db, "pmc_1")
    assert p.kind == "counter"
    assert p.dispatches["dispatch_id"].tolist() == [1, 2]
    # dispatch 1: sum(1000 + 37*ch, ch=0..15) = 16*1000 + 37*(0+1+...+15) = 16000 + 37*120 = 20440
    assert _counter(p, 0, "TCC_EA0_RDREQ") == 20440.0
    # dispatch 2: sum(5*(16-ch)) = 5*(16+15+...+1) = 5*136 = 680
    assert _counter(p, 1, "TCC_EA0_RDREQ") == 680.0
    # derived counters are a single record: kept as is
    assert _counter(p, 0, "TCC_BUBBLE_sum") == 512.0
    assert _counter(p, 1, "TCC_BUBBLE_sum") == 3.5
    assert len(p.counters) == 4


def test_counter_instances_are_kept_in_record_order(tmp_path: Path) -> None:
    """keep_instances=True returns each channel's value in pmc_event order (DB built by the test, schema v3)."""
    db = tmp_path / "1_results.db"
    _counter_db(db)
    p = rocpd.read_pass(db, "pmc_1", keep_instances=True)
    assert _instance_values(p, 0, "TCC_EA0_RDREQ") == [1000.0 + 37 * ch for ch in range(16)]
    assert _instance_values(p, 1, "TCC_EA0_RDREQ") == [5.0 * (16 - ch) for ch in range(16)]
    # a single-record (derived) counter has no per-instance breakdown
    assert set(p.instances["counter_name"]) == {"TCC_EA0_RDREQ"}
    assert len(p.instances) == 32


def test_counter_instances_are_dropped_when_not_wanted(tmp_path: Path) -> None:
    """keep_instances=False: summed counters only (DB built by the test in the documented schema v3)."""
    db = tmp_path / "1_results.db"
    _counter_db(db)
    p = rocpd.read_pass(db, "pmc_1", keep_instances=False)
    assert len(p.instances) == 0
    assert _counter(p, 0, "TCC_EA0_RDREQ") == 20440.0


def test_counter_records_of_no_dispatch_are_ignored(tmp_path: Path) -> None:
    """A pmc_event whose event is not a dispatch's adds to no dispatch (DB built by the test, schema v3)."""
    db = tmp_path / "1_results.db"
    with rocpd_db(db) as b:
        gpu = _gpu(b)
        k = b.add_kernel_symbol("k", "k()")
        d = b.add_dispatch(dispatch_id=1, kernel_id=k, agent_id=gpu, start=1, end=2, stack_id=1)
        stray = b.event("KERNEL_DISPATCH", 99)
        pmc = b.add_pmc("SQ_WAVES", gpu)
        b.add_counter(d.event_id, pmc, [4.0, 6.0])
        b.add_counter(stray, pmc, [1000.0, 1000.0])
    p = rocpd.read_pass(db, "x")
    assert p.counters["row"].tolist() == [0]
    assert _counter(p, 0, "SQ_WAVES") == 10.0
    assert _instance_values(p, 0, "SQ_WAVES") == [4.0, 6.0]


# ---- 3. markers and launches ------------------------------------------------------------------


def test_roctx_ranges_marks_and_launches(tmp_path: Path) -> None:
    """Ranges from MARKER_CORE_RANGE_API regions, marks from rocpd_sample, launches from HIP regions.

    The DB is built by the test in the documented schema (rocpd_tables.sql, schema version 3).
    """
    db = tmp_path / "1_results.db"
    with rocpd_db(db, pid=77, tid=77) as b:
        gpu = _gpu(b)
        k = b.add_kernel_symbol("k", "k()")
        b.add_mark("ggml reset", timestamp=50, stack_id=1)
        b.add_range("ggml:MUL_MAT:Qcur-0:0", start=100, end=400, stack_id=2)
        b.add_range("inner work", start=150, end=300, stack_id=3, tid=78)
        b.add_hip_launch(stack_id=4, start=160, end=170, tid=78)
        b.add_dispatch(dispatch_id=1, kernel_id=k, agent_id=gpu, start=900, end=950, stack_id=4, tid=78)
        # API calls that launched no dispatch: not launches, not markers (even with a message in extdata)
        b.add_region(name="hipMemcpyAsync", category="HIP_RUNTIME_API_EXT", start=410, end=420, stack_id=5)
        b.add_region(
            name="hipStreamSynchronize",
            category="HIP_RUNTIME_API_EXT",
            start=430,
            end=440,
            stack_id=6,
            extdata={"message": "not a marker"},
        )
        # a marker region without a message is no marker
        b.add_range("unused", start=450, end=460, stack_id=7, extdata="{}")
        b.add_mark("ggml-fused:0:MUL_MAT+ADD:Qcur-0|Qcur-0-add", timestamp=390, stack_id=8)

    p = rocpd.read_pass(db, "trace")
    m = p.markers
    assert _messages(m) == [
        "ggml reset",
        "ggml:MUL_MAT:Qcur-0:0",
        "inner work",
        "ggml-fused:0:MUL_MAT+ADD:Qcur-0|Qcur-0-add",
    ]
    assert m["kind"].tolist() == ["mark", "range", "range", "mark"]
    assert m["start_ns"].tolist() == [50, 100, 150, 390]
    assert m["end_ns"].tolist() == [50, 400, 300, 390]
    assert m["correlation_id"].tolist() == [1, 2, 3, 8]
    assert m["process_id"].tolist() == [77, 77, 77, 77]
    assert m["thread_id"].tolist() == [77, 77, 78, 77]

    lc = p.launches
    assert lc["correlation_id"].tolist() == [4]
    assert lc["api_name"].tolist() == ["hipLaunchKernel"]
    assert (lc["start_ns"].iloc[0], lc["end_ns"].iloc[0], lc["thread_id"].iloc[0]) == (160, 170, 78)


def test_ranges_with_equal_start_put_the_outer_range_first(tmp_path: Path) -> None:
    """Nested ranges opened at the same ns: the longer (outer) one first (DB built by the test, schema v3)."""
    db = tmp_path / "1_results.db"
    with rocpd_db(db) as b:
        gpu = _gpu(b)
        k = b.add_kernel_symbol("k", "k()")
        b.add_dispatch(dispatch_id=1, kernel_id=k, agent_id=gpu, start=1, end=2, stack_id=9)
        b.add_range("inner", start=100, end=150, stack_id=2)
        b.add_range("outer", start=100, end=500, stack_id=1)
    assert _messages(rocpd.read_pass(db, "x").markers) == ["outer", "inner"]


def test_marker_core_api_ranges_and_process_ranges_are_ranges(tmp_path: Path) -> None:
    """Any MARKER_* category with a message is a marker; start != end makes it a range.

    rocprofv3's own CSV names the domain of thread and process ranges MARKER_CORE_API
    (``marker_api_trace.csv`` in its docs, a process range on thread 0), so the category is
    matched by prefix. DB built by the test in the documented schema v3.
    """
    db = tmp_path / "1_results.db"
    with rocpd_db(db) as b:
        gpu = _gpu(b)
        k = b.add_kernel_symbol("k", "k()")
        b.add_dispatch(dispatch_id=1, kernel_id=k, agent_id=gpu, start=1, end=2, stack_id=9)
        b.add_region(
            name="roctxRangePushA", category="MARKER_CORE_API", start=10, end=40, stack_id=1, extdata={"message": "t"}
        )
        b.add_region(
            name="roctxProcessRangeA",
            category="MARKER_CORE_RANGE_API",
            start=5,
            end=50,
            stack_id=2,
            tid=0,
            extdata={"message": "whole run"},
        )
    m = rocpd.read_pass(db, "x").markers
    assert _messages(m) == ["whole run", "t"]
    assert m["kind"].tolist() == ["range", "range"]
    assert m["thread_id"].tolist() == [0, 4242]


# ---- 4. end to end ----------------------------------------------------------------------------

#: (dispatch id, kernel, host launch [start, end], GPU [start, end], counters) per dispatch, in
#: three ggml ranges. Every GPU start lies after the kernel's own range closed, and dispatches 1
#: and 2 run during the host interval of the *next* range: only the launch time attributes right.
RANGES = [
    ("ggml:MUL_MAT:Qcur-0:0", 1_000, 2_000),
    ("ggml:ADD:ffn_out-0:1", 2_100, 2_500),
    ("ggml:RMS_NORM:norm-1:2", 2_600, 3_000),
]
LAUNCHES = [
    # dispatch id, kernel, launch start/end (host), GPU start/end
    (1, "mul_mat_q4_0", 1_100, 1_150, 2_150, 2_450),
    (2, "mul_mat_reduce", 1_500, 1_550, 2_650, 2_900),
    (3, "add_f32", 2_200, 2_250, 3_100, 3_300),
    (4, "rms_norm_f32", 2_700, 2_750, 3_400, 3_900),
]
#: per dispatch: TCC_EA0_RDREQ per channel (16), TCC_EA0_RDREQ_32B_sum, TCC_BUBBLE_sum,
#: TCC_EA0_WRREQ per channel (16), TCC_EA0_WRREQ_64B_sum
COUNTERS = {
    1: ([100 + ch for ch in range(16)], 200, 1000, [50] * 16, 600),
    2: ([10] * 16, 0, 100, [3 * ch for ch in range(16)], 0),
    3: ([1] * 16, 16, 0, [8] * 16, 128),
    4: ([2 * ch for ch in range(16)], 40, 60, [0] * 16, 0),
}
#: read/write bytes by hand with the gfx942 formula:
#:   read  = 128*BUBBLE + 32*RDREQ_32B + 64*(RDREQ - BUBBLE - RDREQ_32B)
#:   write = 32*(WRREQ - WRREQ_64B) + 64*WRREQ_64B
EXPECTED_BYTES = {
    # RDREQ = 100*16 + (0+..+15) = 1720; 64-byte term 1720-1000-200 = 520; WRREQ = 800
    1: (128 * 1000 + 32 * 200 + 64 * 520, 32 * (800 - 600) + 64 * 600),
    # RDREQ = 160; 64-byte term 160-100-0 = 60; WRREQ = 3*120 = 360, none of 64 B
    2: (128 * 100 + 32 * 0 + 64 * 60, 32 * 360),
    # RDREQ = 16, all 32-byte; WRREQ = 128, all 64-byte
    3: (32 * 16, 64 * 128),
    # RDREQ = 2*120 = 240; 64-byte term 240-60-40 = 140; no writes
    4: (128 * 60 + 32 * 40 + 64 * 140, 0),
}
OPS = {1: ("MUL_MAT", 0, "Qcur-0", 0), 2: ("MUL_MAT", 0, "Qcur-0", 1), 3: ("ADD", 1, "ffn_out-0", 0)}
OPS[4] = ("RMS_NORM", 2, "norm-1", 0)


def _write_llama_pass(
    path: Path,
    *,
    pid: int,
    uuid: str = UUID_A,
    trace: bool = True,
    counters: bool = True,
    id_offset: int = 0,
    time_offset: int = 0,
    schema: int = 3,
) -> None:
    """One llama.cpp process (gfx942): three ggml ranges around HIP launches, optional counters.

    ``id_offset`` shifts dispatch and correlation ids and ``time_offset`` all timestamps, as in
    another application run of the same command. ``schema`` 4 writes the same run in the rocpd
    schema 4.0 layout (``tests/rocpd_builder.py`` ``RocpdV4Builder``).
    """
    with rocpd_db(path, uuid=uuid, pid=pid, tid=pid, schema=schema) as b:
        gpu = _gpu(b)
        syms = {name: b.add_kernel_symbol(f"_Z{len(name)}{name}v", name) for _, name, *_ in LAUNCHES}
        pmc = {}
        if counters:
            for name, derived in (
                ("TCC_EA0_RDREQ", 0),
                ("TCC_EA0_RDREQ_32B_sum", 1),
                ("TCC_BUBBLE_sum", 1),
                ("TCC_EA0_WRREQ", 0),
                ("TCC_EA0_WRREQ_64B_sum", 1),
            ):
                pmc[name] = b.add_pmc(name, gpu, is_derived=derived)
        corr = 100 + id_offset
        for msg, start, end in RANGES:
            b.add_range(msg, start=start + time_offset, end=end + time_offset, stack_id=corr)
            corr += 1
            for did, name, l0, l1, g0, g1 in LAUNCHES:
                if not start <= l0 <= end:
                    continue
                if trace:
                    b.add_hip_launch(stack_id=corr, start=l0 + time_offset, end=l1 + time_offset)
                d = b.add_dispatch(
                    dispatch_id=did + id_offset,
                    kernel_id=syms[name],
                    agent_id=gpu,
                    start=g0 + time_offset,
                    end=g1 + time_offset,
                    stack_id=corr,
                )
                corr += 1
                if counters:
                    rd, rd32, bubble, wr, wr64 = COUNTERS[did]
                    b.add_counter(d.event_id, pmc["TCC_EA0_RDREQ"], rd)
                    b.add_counter(d.event_id, pmc["TCC_EA0_RDREQ_32B_sum"], [rd32])
                    b.add_counter(d.event_id, pmc["TCC_BUBBLE_sum"], [bubble])
                    b.add_counter(d.event_id, pmc["TCC_EA0_WRREQ"], wr)
                    b.add_counter(d.event_id, pmc["TCC_EA0_WRREQ_64B_sum"], [wr64])


def test_end_to_end_attributes_by_host_launch_time_and_computes_gfx942_dram_bytes(tmp_path: Path) -> None:
    """read_capture -> build_run -> Store: op/invocation by launch time, DRAM bytes from summed instances.

    The DB is built by the test in the documented schema (rocpd_tables.sql / rocpd_views.sql,
    schema version 3).
    """
    cap = tmp_path / "capture"
    _write_llama_pass(cap / "4242_results.db", pid=4242)
    capture = read_capture(cap)
    assert capture.source_format == "rocpd" and capture.profiler == "rocprofv3"
    assert capture.command == "llama-bench -m m.gguf" and capture.host == "testhost"
    assert len(capture.passes) == 1 and capture.passes[0].kind == "counter"

    db = tmp_path / "results.db"
    run_id = _ingest(cap, db)
    rows = _query(
        db,
        "SELECT dispatch_id, kernel_name, gfx_arch, op, invocation, node_name, kernel_ordinal, attribution_method, "
        f"duration_ns, dram_read_bytes, dram_write_bytes FROM dispatch_dram WHERE run_id = {run_id} "
        "ORDER BY dispatch_id",
    )
    assert rows["dispatch_id"].tolist() == [1, 2, 3, 4]
    for row in rows.to_dict("records"):
        did = row["dispatch_id"]
        _, name, _, _, g0, g1 = LAUNCHES[did - 1]
        op, invocation, node, ordinal = OPS[did]
        assert (row["kernel_name"], row["gfx_arch"]) == (name, GFX942)
        assert (row["op"], row["invocation"], row["node_name"], row["kernel_ordinal"]) == (
            op,
            invocation,
            node,
            ordinal,
        )
        assert row["attribution_method"] == "launch_api"
        assert row["duration_ns"] == g1 - g0
        assert (row["dram_read_bytes"], row["dram_write_bytes"]) == EXPECTED_BYTES[did]

    run = _query(db, f"SELECT gpu_arch, timing_source, serialised_timings FROM run WHERE run_id = {run_id}")
    assert run["gpu_arch"].tolist() == [GFX942]
    # a single counter pass: its (serialised) timings are the only ones
    assert run["timing_source"].tolist() == ["counter_pass"]
    # per-instance values reach the store too: channel 5 of dispatch 1's TCC_EA0_RDREQ = 100 + 5
    inst = _query(
        db,
        "SELECT ci.value FROM counter_instance ci JOIN dispatch d ON d.run_id = ci.run_id "
        f"AND d.dispatch_index = ci.dispatch_index WHERE ci.run_id = {run_id} AND d.dispatch_id = 1 "
        "AND ci.counter_name = 'TCC_EA0_RDREQ' AND ci.instance = 5",
    )
    assert inst["value"].tolist() == [105.0]


@pytest.mark.parametrize("hip_trace_in_counter_pass", [True, False], ids=["launch-api", "enqueue-order"])
def test_end_to_end_joins_a_trace_pass_and_a_counter_pass_per_invocation(
    tmp_path: Path, hip_trace_in_counter_pass: bool
) -> None:
    """trace/ (timings, no counters) + pass_1/ (counters): joined per invocation and kernel ordinal.

    The two processes have different pids, dispatch ids, correlation ids and clocks, as two
    application runs do. Without a HIP trace in the counter pass its dispatches are placed by
    the correlation ids (rocpd_event.stack_id) that ranges and launches share. Each DB is built
    by the test in the documented schema v3.
    """
    cap = tmp_path / "capture"
    _write_llama_pass(cap / "trace" / "1111_results.db", pid=1111, uuid=UUID_A, counters=False)
    _write_llama_pass(
        cap / "pass_1" / "2222_results.db",
        pid=2222,
        uuid=UUID_B,
        trace=hip_trace_in_counter_pass,
        id_offset=500,
        time_offset=1_000_000,
    )
    db = tmp_path / "results.db"
    run_id = _ingest(cap, db)

    passes = _query(
        db,
        f"SELECT label, kind, is_timing_pass, dispatch_count, matched_count FROM pass WHERE run_id = {run_id} "
        "ORDER BY label",
    )
    assert passes["label"].tolist() == ["pass_1", "trace"]
    assert passes["kind"].tolist() == ["counter", "trace"]
    assert passes["is_timing_pass"].astype(bool).tolist() == [False, True]
    assert passes["dispatch_count"].tolist() == [4, 4]
    assert passes["matched_count"].tolist() == [4, 4]

    rows = _query(
        db,
        "SELECT dispatch_id, kernel_name, op, invocation, kernel_ordinal, duration_ns, dram_read_bytes, "
        f"dram_write_bytes FROM dispatch_dram WHERE run_id = {run_id} ORDER BY dispatch_id",
    )
    # the timing pass's dispatches (ids 1..4), with the counter pass's counters (ids 501..504)
    assert rows["dispatch_id"].tolist() == [1, 2, 3, 4]
    for row in rows.to_dict("records"):
        did = row["dispatch_id"]
        _, name, _, _, g0, g1 = LAUNCHES[did - 1]
        op, invocation, _, ordinal = OPS[did]
        assert (row["kernel_name"], row["op"], row["invocation"], row["kernel_ordinal"]) == (
            name,
            op,
            invocation,
            ordinal,
        )
        assert row["duration_ns"] == g1 - g0
        assert (row["dram_read_bytes"], row["dram_write_bytes"]) == EXPECTED_BYTES[did]
    methods = _query(
        db,
        f"SELECT p.label, d.attribution_method FROM dispatch d JOIN pass p ON p.run_id = d.run_id "
        f"AND p.pass_index = d.pass_index WHERE d.run_id = {run_id} ORDER BY p.label, d.dispatch_id",
    )
    counter_method = "launch_api" if hip_trace_in_counter_pass else "enqueue_order"
    assert methods["attribution_method"].tolist() == [counter_method] * 4 + ["launch_api"] * 4
    run = _query(db, f"SELECT timing_source, serialised_timings FROM run WHERE run_id = {run_id}")
    assert run["timing_source"].tolist() == ["trace"]
    assert not bool(run["serialised_timings"].iloc[0])


@pytest.mark.parametrize("spilled", [False, True], ids=["in-memory", "spilled"])
def test_reset_mark_from_rocpd_sample_drops_warmup(
    tmp_path: Path, spilled: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 'ggml reset' roctxMark (a rocpd_sample) ends warm-up: dispatches launched before it are dropped.

    The DB is built by the test in the documented schema (rocpd_tables.sql, schema version 3). Read
    ``spilled``, the messages are a categorical whose codes are in a file (a large capture's read).
    """
    if spilled:
        monkeypatch.setattr(spill, "SPILL_MIN_BYTES", 0)
    cap = tmp_path / "capture"
    with rocpd_db(cap / "1_results.db") as b:
        gpu = _gpu(b)
        k = b.add_kernel_symbol("k", "k()")
        b.add_range("ggml:ADD:warm-0:0", start=100, end=200, stack_id=1)
        b.add_hip_launch(stack_id=2, start=110, end=120)
        b.add_dispatch(dispatch_id=1, kernel_id=k, agent_id=gpu, start=1_000, end=1_100, stack_id=2)
        b.add_mark("ggml reset", timestamp=300, stack_id=3)
        b.add_range("ggml:ADD:x-0:1", start=400, end=500, stack_id=4)
        b.add_hip_launch(stack_id=5, start=410, end=420)
        b.add_dispatch(dispatch_id=2, kernel_id=k, agent_id=gpu, start=1_200, end=1_300, stack_id=5)
    frames = build_run(read_capture(cap))
    d = frames.tables["dispatch"]
    assert d["dispatch_id"].tolist() == [2]
    assert any(n.code == "warmup-dropped" for n in frames.notes)
    ops = frames.tables["op_invocation"]
    assert ops.loc[ops["op_index"] == d["op_index"].iloc[0], "invocation"].tolist() == [1]


# ---- 5. databases without the unsuffixed views ------------------------------------------------


def test_database_without_views_reads_the_suffixed_tables(tmp_path: Path) -> None:
    """Only `<table>_<uuid>` tables, no `rocpd_*` views: read the same as with views (DB built by the test)."""
    with_views, without = tmp_path / "a" / "1_results.db", tmp_path / "b" / "1_results.db"
    _counter_db(with_views)
    with rocpd_db(without, views=False) as b:
        gpu = _gpu(b)
        k = b.add_kernel_symbol("copy", "copy()")
        d2 = b.add_dispatch(dispatch_id=2, kernel_id=k, agent_id=gpu, start=300, end=400, stack_id=20)
        d1 = b.add_dispatch(dispatch_id=1, kernel_id=k, agent_id=gpu, start=100, end=200, stack_id=10)
        rdreq = b.add_pmc("TCC_EA0_RDREQ", gpu)
        bubble = b.add_pmc("TCC_BUBBLE_sum", gpu, is_derived=1)
        for ch in range(16):
            b.add_counter(d1.event_id, rdreq, [1000 + 37 * ch])
            b.add_counter(d2.event_id, rdreq, [5 * (16 - ch)])
        b.add_counter(d1.event_id, bubble, [512.0])
        b.add_counter(d2.event_id, bubble, [3.5])
        b.add_range("ggml:CPY:x:0", start=10, end=20, stack_id=5)
    with sqlite3.connect(without) as conn:
        views = conn.execute("SELECT count(*) FROM sqlite_master WHERE type = 'view'").fetchone()[0]
    conn.close()
    assert views == 0
    assert detect(without.parent) == "rocpd"
    a, b_ = rocpd.read_pass(with_views, "x"), rocpd.read_pass(without, "x")
    pd.testing.assert_frame_equal(a.dispatches, b_.dispatches)
    pd.testing.assert_frame_equal(a.counters, b_.counters)
    pd.testing.assert_frame_equal(a.instances, b_.instances)
    assert _messages(b_.markers) == ["ggml:CPY:x:0"]
    assert rocpd.read_metadata(without)["rocpd_schema_version"] == "3"
    assert rocpd.read_agents(without)["gfx_arch"].tolist() == [GFX942]


def _merged_db(path: Path, *, views: bool) -> None:
    """Two processes' tables in one file (as after `rocpd merge`): ids restart in each."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path)
    try:
        for uuid, pid, base, values in ((UUID_A, 100, 0, [1.0, 2.0, 3.0]), (UUID_B, 200, 10_000, [40.0, 50.0])):
            b = RocpdBuilder(conn, uuid, pid=pid, tid=pid)
            gpu = _gpu(b)
            k = b.add_kernel_symbol(f"k{pid}", f"kernel_of_{pid}")
            b.add_range(f"ggml:ADD:n-{pid}:0", start=base + 100, end=base + 200, stack_id=10)
            b.add_hip_launch(stack_id=11, start=base + 120, end=base + 130)
            d = b.add_dispatch(
                dispatch_id=1, kernel_id=k, agent_id=gpu, start=base + 1000, end=base + 1500, stack_id=11
            )
            b.add_counter(d.event_id, b.add_pmc("TCC_EA0_RDREQ", gpu), values)
        if views:
            create_views(conn, [UUID_A, UUID_B])
        conn.commit()
    finally:
        conn.close()


@pytest.mark.parametrize("views", [False, True], ids=["tables-only", "union-views"])
def test_merged_database_keeps_processes_apart(tmp_path: Path, views: bool) -> None:
    """Two suffixes in one file: dispatch, event and pmc ids repeat per process, guid tells them apart.

    Built by the test in the documented schema v3, with (or without) `rocpd merge`-style UNION ALL views.
    """
    db = tmp_path / "merged.db"
    _merged_db(db, views=views)
    p = rocpd.read_pass(db, "merged")
    d = p.dispatches
    assert d["process_id"].tolist() == [100, 200]
    assert d["dispatch_id"].tolist() == [1, 1]
    assert d["kernel_name"].tolist() == ["kernel_of_100", "kernel_of_200"]
    assert d["start_ns"].tolist() == [1000, 11_000]
    # 1+2+3 for the first process, 40+50 for the second: not 96 each, not crossed
    assert _counter(p, 0, "TCC_EA0_RDREQ") == 6.0
    assert _counter(p, 1, "TCC_EA0_RDREQ") == 90.0
    assert _instance_values(p, 0, "TCC_EA0_RDREQ") == [1.0, 2.0, 3.0]
    assert _instance_values(p, 1, "TCC_EA0_RDREQ") == [40.0, 50.0]
    assert _messages(p.markers) == ["ggml:ADD:n-100:0", "ggml:ADD:n-200:0"]
    lc = p.launches.sort_values("start_ns")
    assert lc["process_id"].tolist() == [100, 200]
    assert lc["start_ns"].tolist() == [120, 10_120]


# ---- 6. --kernel-rename -----------------------------------------------------------------------


def test_kernel_rename_region_attributes_without_markers_or_launches(tmp_path: Path) -> None:
    """region_name_id -> a ggml range message: attribution method kernel_rename (DB built by the test, schema v3)."""
    cap = tmp_path / "capture"
    with rocpd_db(cap / "1_results.db") as b:
        gpu = _gpu(b)
        k = b.add_kernel_symbol("_Z4gemmv", "gemm")
        b.add_dispatch(
            dispatch_id=1, kernel_id=k, agent_id=gpu, start=10, end=20, stack_id=1, region="ggml:MUL_MAT:blk.0.q:5"
        )
        b.add_dispatch(
            dispatch_id=2, kernel_id=k, agent_id=gpu, start=30, end=40, stack_id=2, region="ggml:MUL_MAT:blk.0.q:5"
        )
        b.add_dispatch(dispatch_id=3, kernel_id=k, agent_id=gpu, start=50, end=60, stack_id=3, region="user range")
        b.add_dispatch(dispatch_id=4, kernel_id=k, agent_id=gpu, start=70, end=80, stack_id=4)
    d = rocpd.read_pass(cap / "1_results.db", "trace").dispatches
    assert _texts(d["region"]) == ["ggml:MUL_MAT:blk.0.q:5", "ggml:MUL_MAT:blk.0.q:5", None, None]
    # the renamed region does not replace the kernel name (rocpd keeps display_name)
    assert d["kernel_name"].tolist() == ["gemm"] * 4

    db = tmp_path / "results.db"
    run_id = _ingest(cap, db)
    rows = _query(
        db,
        "SELECT dispatch_id, op, invocation, node_name, kernel_ordinal, attribution_method FROM dispatch_dram "
        f"WHERE run_id = {run_id} ORDER BY dispatch_id",
    )
    assert rows["attribution_method"].tolist() == ["kernel_rename", "kernel_rename", "none", "none"]
    assert rows["op"].tolist()[:2] == ["MUL_MAT", "MUL_MAT"]
    assert rows["invocation"].tolist()[:2] == [5, 5]
    assert rows["node_name"].tolist()[:2] == ["blk.0.q", "blk.0.q"]
    assert rows["kernel_ordinal"].tolist()[:2] == [0, 1]
    assert rows["op"].iloc[2:].isna().all()


# ---- 7. bad input -----------------------------------------------------------------------------


def test_sqlite_file_that_is_not_rocpd(tmp_path: Path) -> None:
    """An SQLite file without rocpd tables: detection says so, the reader raises ParseError naming it."""
    cap = tmp_path / "capture"
    cap.mkdir()
    db = cap / "1_results.db"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE kernels (id INTEGER, name TEXT)")
    conn.commit()
    conn.close()
    assert not rocpd.is_rocpd(db)
    with pytest.raises(InputError) as info:
        read_capture(cap)
    assert "1_results.db" in str(info.value)
    for read in (lambda: rocpd.read_pass(db, "x"), lambda: rocpd.read_agents(db), lambda: rocpd.read_metadata(db)):
        with pytest.raises(ParseError) as err:
            read()
        assert str(db) in str(err.value) and "not a rocpd database" in str(err.value)


def test_table_named_like_rocpd_but_with_other_columns(tmp_path: Path) -> None:
    """A rocpd_kernel_dispatch table of some other layout: ParseError naming the file, no sqlite3 error."""
    db = tmp_path / "odd_results.db"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE rocpd_kernel_dispatch (id INTEGER, name TEXT)")
    conn.commit()
    conn.close()
    assert rocpd.is_rocpd(db)
    with pytest.raises(ParseError) as err:
        rocpd.read_pass(db, "x")
    assert str(db) in str(err.value)


def test_text_file_named_results_db(tmp_path: Path) -> None:
    """Not SQLite at all: no rocpd capture (InputError naming the file)."""
    db = tmp_path / "1_results.db"
    db.write_text("this is not a database\n")
    assert not rocpd.is_rocpd(db)
    with pytest.raises(InputError) as info:
        read_capture(db)
    assert str(db) in str(info.value)
    with pytest.raises(ParseError) as err:
        rocpd.read_pass(db, "x")
    assert str(db) in str(err.value)


def _big_db(path: Path) -> None:
    with rocpd_db(path) as b:
        gpu = _gpu(b)
        k = b.add_kernel_symbol("k", "k()")
        pmc = b.add_pmc("TCC_EA0_RDREQ", gpu)
        for i in range(1, 301):
            b.add_hip_launch(stack_id=2 * i, start=10 * i, end=10 * i + 5)
            d = b.add_dispatch(
                dispatch_id=i, kernel_id=k, agent_id=gpu, start=10_000 + i, end=10_001 + i, stack_id=2 * i
            )
            b.add_counter(d.event_id, pmc, [1.0] * 16)


def test_truncated_database_raises_parse_error_naming_the_file(tmp_path: Path) -> None:
    """A rocpd file cut in half (schema pages intact, data pages lost) -> ParseError, not sqlite3.DatabaseError.

    Built by the test in the documented schema v3 (tables and views first, as the writer does).
    """
    full = tmp_path / "full.db"
    _big_db(full)
    data = full.read_bytes()
    assert len(data) > 200_000
    cap = tmp_path / "capture"
    cap.mkdir()
    cut = cap / "1_results.db"
    cut.write_bytes(data[: len(data) // 2])
    assert rocpd.is_rocpd(cut)
    with pytest.raises(ParseError) as err:
        read_capture(cap)
    assert str(cut) in str(err.value)
    assert "truncated" in str(err.value)


def test_database_with_damaged_schema_is_still_recognised(tmp_path: Path) -> None:
    """Schema root page wiped: still detected as rocpd (its table names are in the file), then ParseError.

    Without this a damaged capture reads as "unknown file format". Built by the test in the
    documented schema v3.
    """
    full = tmp_path / "full.db"
    _big_db(full)
    data = bytearray(full.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    data[100:page] = b"\x00" * (page - 100)  # keep the 100-byte file header, lose the schema's root
    cap = tmp_path / "capture"
    cap.mkdir()
    damaged = cap / "2_results.db"
    damaged.write_bytes(bytes(data))
    assert rocpd.is_rocpd(damaged)
    assert detect(cap) == "rocpd"
    for target in (cap, damaged):
        with pytest.raises(ParseError) as err:
            read_capture(target)
        assert str(damaged) in str(err.value)
        assert "malformed" in str(err.value) and "damaged" in str(err.value)


@pytest.mark.parametrize("where", ["range", "mark"])
def test_marker_extdata_that_is_not_json(tmp_path: Path, where: str) -> None:
    """Marker extdata that is not JSON -> ParseError naming the file and the event row (DB built by the test)."""
    db = tmp_path / "1_results.db"
    with rocpd_db(db) as b:
        gpu = _gpu(b)
        k = b.add_kernel_symbol("k", "k()")
        b.add_dispatch(dispatch_id=1, kernel_id=k, agent_id=gpu, start=1, end=2, stack_id=1)
        if where == "range":
            b.add_range("x", start=0, end=5, stack_id=9, extdata="{message: ggml:ADD:x:0")
        else:
            b.add_mark("x", timestamp=3, stack_id=9)
            b.conn.execute(f'UPDATE "rocpd_event{b.sfx}" SET extdata = ? WHERE stack_id = 9', ("message=x",))
    with pytest.raises(ParseError) as err:
        read_capture(tmp_path)
    text = str(err.value)
    assert str(db) in text and "not valid JSON" in text and "rocpd_event id" in text


def test_markers_are_read_in_a_second_thread_and_a_dispatch_error_comes_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Markers and API calls are queried on their own connection beside the dispatches and counters.

    A database damaged in both its dispatches (a start stored as text) and its markers (extdata
    that is not JSON) names the dispatch, as a read in turn does; damaged markers alone name the
    event row. DB built by the test, schema v3.
    """
    import threading

    threads: list[str] = []
    real = rocpd._markers

    def markers(*args: Any, **kwargs: Any) -> Any:
        threads.append(threading.current_thread().name)
        return real(*args, **kwargs)

    monkeypatch.setattr(rocpd, "_markers", markers)

    def build(db: Path, *, bad_start: bool, bad_marker: bool) -> Path:
        with rocpd_db(db) as b:
            gpu = _gpu(b)
            k = b.add_kernel_symbol("k", "k()")
            b.add_dispatch(dispatch_id=1, kernel_id=k, agent_id=gpu, start=1, end=2, stack_id=1)
            extdata = "{message: ggml:ADD:x:0" if bad_marker else json.dumps({"message": "ggml:ADD:x:0"})
            b.add_range("x", start=0, end=5, stack_id=9, extdata=extdata)
            if bad_start:
                b.conn.execute(f'UPDATE "rocpd_kernel_dispatch{b.sfx}" SET start = ?', ("soon",))
        return db

    good = rocpd.read_pass(build(tmp_path / "a" / "1_results.db", bad_start=False, bad_marker=False), "x")
    assert threads and all(t.startswith("rocroof-rocpd") for t in threads)
    assert _messages(good.markers) == ["ggml:ADD:x:0"] and len(good.dispatches) == 1
    with pytest.raises(ParseError, match="rocpd_kernel_dispatch id 1: start holds 'soon', not an integer"):
        rocpd.read_pass(build(tmp_path / "b" / "1_results.db", bad_start=True, bad_marker=True), "x")
    with pytest.raises(ParseError, match="not valid JSON.*rocpd_event id|rocpd_event id.*not valid JSON"):
        rocpd.read_pass(build(tmp_path / "c" / "1_results.db", bad_start=False, bad_marker=True), "x")


def test_non_numeric_timestamp_raises_parse_error(tmp_path: Path) -> None:
    """A timestamp stored as text -> ParseError naming the column (DB built by the test, schema v3)."""
    db = tmp_path / "1_results.db"
    with rocpd_db(db) as b:
        gpu = _gpu(b)
        k = b.add_kernel_symbol("k", "k()")
        b.add_dispatch(dispatch_id=1, kernel_id=k, agent_id=gpu, start=1, end=2, stack_id=1)
        b.conn.execute(f'UPDATE "rocpd_kernel_dispatch{b.sfx}" SET start = ?', ("soon",))
    with pytest.raises(ParseError) as err:
        rocpd.read_pass(db, "x")
    assert str(db) in str(err.value)
    assert "rocpd_kernel_dispatch id 1: start holds 'soon', not an integer" in str(err.value)


def test_missing_file_raises_parse_error(tmp_path: Path) -> None:
    missing = tmp_path / "gone_results.db"
    readers: list[Callable[[], object]] = [
        lambda: rocpd.read_pass(missing, "x"),
        lambda: rocpd.read_agents(missing),
        lambda: rocpd.read_metadata(missing),
    ]
    for read in readers:
        with pytest.raises(ParseError) as err:
            read()
        assert str(missing) in str(err.value)


def test_uncheckpointed_write_ahead_log_is_read(tmp_path: Path) -> None:
    """A database whose rows are still in its -wal file (writer alive or crashed) is read whole.

    Built by the test in the documented schema v3, in WAL journal mode.
    """
    db = tmp_path / "1_results.db"
    conn = sqlite3.connect(db)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA wal_autocheckpoint = 0")
        b = RocpdBuilder(conn, UUID_A)
        create_views(conn, [UUID_A])
        gpu = _gpu(b)
        k = b.add_kernel_symbol("k", "k()")
        b.add_dispatch(dispatch_id=1, kernel_id=k, agent_id=gpu, start=1, end=2, stack_id=1)
        conn.commit()
        assert (tmp_path / "1_results.db-wal").stat().st_size > 0
        assert rocpd.is_rocpd(db)
        assert rocpd.read_pass(db, "x").dispatches["dispatch_id"].tolist() == [1]
    finally:
        conn.close()


# ---- 8. dispatch times ------------------------------------------------------------------------

DAMAGED_DISPATCH = "rocprofiler-sdk writes start and end for every dispatch; the database is damaged"


def _two_dispatch_db(db: Path) -> None:
    with rocpd_db(db) as b:
        gpu = _gpu(b)
        k = b.add_kernel_symbol("k", "k()")
        b.add_dispatch(dispatch_id=6, kernel_id=k, agent_id=gpu, start=100, end=200, stack_id=1)
        b.add_dispatch(dispatch_id=7, kernel_id=k, agent_id=gpu, start=300, end=450, stack_id=2)


@pytest.mark.parametrize("column", ["start", "end"])
def test_a_dispatch_without_a_start_or_end_time_is_refused(tmp_path: Path, column: str) -> None:
    """NULL start/end (NOT NULL in rocpd_tables.sql): one-line ParseError naming file, table and dispatch id.

    Stored, such a dispatch would skew every share of time. DB built by the test, schema v3.
    """
    cap = tmp_path / "capture"
    db = cap / "1_results.db"
    _two_dispatch_db(db)
    with sqlite3.connect(db) as conn:
        conn.execute(f'UPDATE "rocpd_kernel_dispatch{suffix(UUID_A)}" SET "{column}" = NULL WHERE id = 7')
    conn.close()
    expected = f"{db}: rocpd_kernel_dispatch id 7: no {column} time ({DAMAGED_DISPATCH})"
    with pytest.raises(ParseError) as err:
        rocpd.read_pass(db, "x")
    assert str(err.value) == expected
    with pytest.raises(ParseError) as err:
        build_run(read_capture(cap))
    assert str(err.value) == expected


def test_a_dispatch_ending_before_it_starts_is_refused(tmp_path: Path) -> None:
    """end < start: ParseError naming the dispatch and both times (DB built by the test, schema v3)."""
    db = tmp_path / "1_results.db"
    _two_dispatch_db(db)
    with sqlite3.connect(db) as conn:
        conn.execute(f'UPDATE "rocpd_kernel_dispatch{suffix(UUID_A)}" SET "end" = 250 WHERE id = 7')
    conn.close()
    with pytest.raises(ParseError) as err:
        rocpd.read_pass(db, "x")
    assert str(err.value) == (
        f"{db}: rocpd_kernel_dispatch id 7: end 250 ns is before start 300 ns "
        "(a dispatch cannot end before it starts; the database is damaged)"
    )


def test_a_zero_length_dispatch_is_kept(tmp_path: Path) -> None:
    """start == end is a (very short) dispatch, not damage (DB built by the test, schema v3)."""
    db = tmp_path / "1_results.db"
    _two_dispatch_db(db)
    with sqlite3.connect(db) as conn:
        conn.execute(f'UPDATE "rocpd_kernel_dispatch{suffix(UUID_A)}" SET "end" = 300 WHERE id = 7')
    conn.close()
    d = rocpd.read_pass(db, "x").dispatches
    assert (d["end_ns"] - d["start_ns"]).tolist() == [200 - 100, 0]


# ---- the integer read of dispatch records against the general one ---------------------------------


def _renamed_db(path: Path) -> None:
    """--kernel-rename regions (ggml ranges and others) and a dispatch without one."""
    with rocpd_db(path) as b:
        gpu = _gpu(b)
        k = b.add_kernel_symbol("_Z4gemmv", "gemm")
        for i, region in enumerate(["ggml:MUL_MAT:blk.0.q:5", "ggml:MUL_MAT:blk.0.q:5", "user range"]):
            b.add_dispatch(
                dispatch_id=i + 1,
                kernel_id=k,
                agent_id=gpu,
                start=10 + 20 * i,
                end=20 + 20 * i,
                stack_id=i + 1,
                region=region,
            )
        b.add_dispatch(dispatch_id=9, kernel_id=k, agent_id=gpu, start=90, end=95, stack_id=9)


def _v4_merged(path: Path) -> None:
    from .test_rocpd_v4 import _merged_db as merged_v4

    merged_v4(path, views=True)


def _synthetic_rocpd(path: Path) -> None:
    from . import synthetic

    src = synthetic.capture("rocpd", 3000, path.parent / "cache")
    shutil.copy(next(src.glob("*.db")), path)


#: Databases with counters that both fast-path comparisons below read (each adds its own).
_COUNTER_DATABASES = [
    pytest.param(_counter_db, id="counters"),
    pytest.param(_big_db, id="big"),
    pytest.param(lambda p: _merged_db(p, views=True), id="merged-views"),
    pytest.param(lambda p: _merged_db(p, views=False), id="merged-tables"),
    pytest.param(_v4_merged, id="v4"),
    pytest.param(_synthetic_rocpd, id="synthetic-3000"),
]


@pytest.mark.parametrize(
    "make",
    [
        *_COUNTER_DATABASES,
        pytest.param(_two_dispatch_db, id="two-dispatches"),
        pytest.param(_renamed_db, id="renamed"),
    ],
)
def test_integer_read_of_dispatches_equals_the_general_read(
    tmp_path: Path, make: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fast path gives the frame that pandas' typed read gives, column for column."""
    reader = rocpd
    db = tmp_path / "results.db"
    make(db)
    assert sqlite_arrow.USE_ADBC and reader._FAST
    arrow = reader.read_pass(db, "p")  # ADBC's Arrow columns
    monkeypatch.setattr(sqlite_arrow, "USE_ADBC", False)
    integers = reader.read_pass(db, "p")  # sqlite3 rows as integers
    monkeypatch.setattr(reader, "_FAST", False)
    monkeypatch.setattr(reader, "_has_json", lambda conn: False)  # every marker message read by Python
    general = reader.read_pass(db, "p")  # pandas' typed read
    assert len(general.dispatches) > 0
    for fast in (arrow, integers):
        pd.testing.assert_frame_equal(fast.dispatches, general.dispatches)
        pd.testing.assert_frame_equal(fast.counters, general.counters)
        pd.testing.assert_frame_equal(fast.markers, general.markers)


def _read_in_one_range(
    tmp_path: Path, make: Any, monkeypatch: pytest.MonkeyPatch, ids_per_range: str
) -> tuple[Path, PassData]:
    """``make``'s database, and its pass read with one range of every id (``rocpd.<ids_per_range>`` = 10^9)."""
    db = tmp_path / "results.db"
    make(db)
    monkeypatch.setattr(rocpd, ids_per_range, 10**9)
    return db, rocpd.read_pass(db, "p")


def _ids_made(path: Path, first: object, last: object) -> None:
    """:func:`_big_db` whose counter records are served by a plain table with ids ``first`` .. ``last`` at its ends."""
    _big_db(path)
    conn = sqlite3.connect(path)
    try:
        (table,) = [
            r[0]
            for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table' AND name LIKE 'rocpd_pmc_event_%'")
        ]
        conn.execute(f'CREATE TABLE plain_pmc AS SELECT * FROM "{table}"')  # no primary key: any id
        conn.execute("UPDATE plain_pmc SET id = ? WHERE id = (SELECT MIN(id) FROM plain_pmc)", (first,))
        conn.execute(
            "UPDATE plain_pmc SET id = ? WHERE id = (SELECT MAX(id) FROM plain_pmc WHERE typeof(id) = 'integer')",
            (last,),
        )
        conn.execute("DROP VIEW rocpd_pmc_event")
        conn.execute("CREATE VIEW rocpd_pmc_event AS SELECT * FROM plain_pmc")
        conn.commit()
    finally:
        conn.close()


@pytest.mark.parametrize(
    "make",
    [
        *_COUNTER_DATABASES,
        pytest.param(lambda p: _ids_made(p, None, 10**6), id="null-id"),  # a NULL id sorts first: one query
        pytest.param(lambda p: _ids_made(p, 1, "x"), id="text-id"),  # a text id sorts last: one query
        pytest.param(lambda p: _ids_made(p, -5, 1e7 + 0.5), id="real-id"),  # a REAL id at the end: one query
        pytest.param(lambda p: _ids_made(p, -5, 1_000), id="sparse"),  # sparse ids: ranges without records
    ],
)
def test_counters_read_a_range_of_ids_at_a_time_equal_the_whole_read(
    tmp_path: Path, make: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ADBC reads counter records a range of ids at a time (bounded Arrow results): the same counters."""
    db, whole = _read_in_one_range(tmp_path, make, monkeypatch, "PAGE_IDS")
    assert len(whole.counters) > 0
    with sqlite3.connect(db) as conn:
        source = rocpd._resolve(conn, db)["rocpd_pmc_event"]
        # the ends as SQLite orders them (NULL first, text last), as the reader finds them
        (low,) = conn.execute(f"SELECT id FROM {source} ORDER BY id LIMIT 1").fetchone()
        (high,) = conn.execute(f"SELECT id FROM {source} ORDER BY id DESC LIMIT 1").fetchone()
        integers = type(low) is int and type(high) is int
        span = int(high) - int(low) + 1 if integers else 100
        for ids in sorted({max(1, -(-span // pages)) for pages in (2, 5, 33)} | ({2} if span <= 1_000 else set())):
            monkeypatch.setattr(rocpd, "PAGE_IDS", ids)
            (view,) = conn.execute(
                "SELECT COALESCE(MAX(sql), '') FROM sqlite_master WHERE type = 'view' AND name = 'rocpd_pmc_event'"
            ).fetchone()
            merged = source.startswith("(") or "UNION" in view.upper()  # several tables: read whole
            expected = integers and span > ids and not merged
            assert (len(rocpd._id_pages(conn, source)) > 1) == expected
            paged = rocpd.read_pass(db, "p")
            pd.testing.assert_frame_equal(paged.counters, whole.counters)
            pd.testing.assert_frame_equal(paged.instances, whole.instances)
    monkeypatch.setattr(sqlite_arrow, "USE_ADBC", False)
    pd.testing.assert_frame_equal(rocpd.read_pass(db, "p").counters, whole.counters)


def _synthetic_changed(path: Path, *statements: str) -> None:
    """:func:`_synthetic_rocpd` changed by ``statements`` (``{kd}``, ``{rg}``, ``{ev}``, ``{st}``: its tables)."""
    _synthetic_rocpd(path)
    with sqlite3.connect(path) as conn:
        names = {
            key: next(
                r[0]
                for r in conn.execute(
                    "SELECT name FROM sqlite_master WHERE type='table' AND name LIKE ?", (f"rocpd_{table}_%",)
                )
            )
            for key, table in (("kd", "kernel_dispatch"), ("rg", "region"), ("ev", "event"), ("st", "string"))
        }
        for statement in statements:
            conn.execute(statement.format(**{k: f'"{v}"' for k, v in names.items()}))
    conn.close()


def _pids_out_of_id_order(path: Path) -> None:
    """:func:`_synthetic_rocpd` whose first half of dispatches (by id) has a later process id than the second."""
    _synthetic_changed(path, "UPDATE {kd} SET pid = pid + 1 WHERE id <= (SELECT AVG(id) FROM {kd})")


#: The id of the last roctx range of a :func:`_synthetic_changed` file (SQL).
_LAST_MARKER = (
    "(SELECT MAX(r.id) FROM {rg} r JOIN {ev} e ON e.id = r.event_id JOIN {st} c ON c.id = e.category_id "
    "WHERE c.string LIKE 'MARKER%')"
)
#: The ids of the launch calls of a :func:`_synthetic_changed` file: HIP calls whose correlation id a dispatch has.
_LAUNCH_CALLS = (
    "SELECT r.id FROM {rg} r JOIN {st} n ON n.id = r.name_id JOIN {ev} e ON e.id = r.event_id "
    "WHERE n.string LIKE 'hip%' AND e.stack_id IN (SELECT k.stack_id FROM {ev} k JOIN {kd} d ON d.event_id = k.id)"
)


#: Files the range reads must read as a read of every record at once (found by a helper trying to break them).
_RANGE_EDGE_CASES = [
    pytest.param(_pids_out_of_id_order, id="pids-out-of-id-order"),  # ranges out of query order: one query
    # a NULL process id sorts first: after others, the ranges are out of query order (not an overflow)
    pytest.param(
        lambda p: _synthetic_changed(p, "UPDATE {kd} SET pid = NULL WHERE id > (SELECT AVG(id) FROM {kd})"),
        id="null-pids-last",
    ),
    # a roctx range of a second guid in the one region table, tied with another (start, end): by guid, then id
    pytest.param(
        lambda p: _synthetic_changed(
            p,
            # (the string table's text is unique: the other guid's category has a name of its own)
            "INSERT INTO {st} (id, guid, string) VALUES (-7, 'other', 'MARKER_CORE_RANGE_API_OTHER')",
            "INSERT INTO {ev} (id, guid, category_id, stack_id, extdata) SELECT -7, 'other', -7, stack_id, "
            '\'{{"message": "from the other"}}\' FROM {ev} WHERE id = (SELECT event_id FROM {rg} '
            f"WHERE id = {_LAST_MARKER})",
            "INSERT INTO {rg} (id, guid, nid, pid, tid, start, \"end\", name_id, event_id) SELECT -7, 'other', nid, "
            f'pid, tid, start, "end", name_id, -7 FROM {{rg}} WHERE id = {_LAST_MARKER}',
        ),
        id="two-guids-in-the-region-table",
    ),
    # launch calls starting at the int64 minimum (the lower id) and without a start: NULL first, as SQLite orders
    pytest.param(
        lambda p: _synthetic_changed(
            p,
            f"UPDATE {{rg}} SET start = -9223372036854775808 WHERE id = (SELECT MIN(id) FROM ({_LAUNCH_CALLS}))",
            f"UPDATE {{rg}} SET start = NULL WHERE id = (SELECT MAX(id) FROM ({_LAUNCH_CALLS}))",
        ),
        id="api-start-null-and-int64-min",
    ),
    # ids 10^12 apart: ranges start at every size-th id, not at every size ids (3.8x10^6 ranges)
    pytest.param(
        lambda p: _synthetic_changed(
            p,
            "UPDATE {kd} SET id = id + 1000000000000 WHERE id > (SELECT AVG(id) FROM {kd})",
            "UPDATE {rg} SET id = id + 1000000000000 WHERE id > (SELECT AVG(id) FROM {rg})",
        ),
        id="ids-far-apart",
    ),
]


@pytest.mark.parametrize(
    "make",
    [
        *_COUNTER_DATABASES,
        *_RANGE_EDGE_CASES,
    ],
)
def test_dispatches_markers_and_calls_read_a_range_of_ids_at_a_time_equal_the_whole_read(
    tmp_path: Path, make: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ADBC reads one process's dispatch and region records a range of ids at a time: the same pass."""
    db, whole = _read_in_one_range(tmp_path, make, monkeypatch, "TABLE_PAGE_IDS")
    assert len(whole.dispatches) > 0
    queries: list[str] = []
    real = sqlite_arrow.arrow_columns

    def counted(conn: sqlite3.Connection, sql: str) -> Any:
        queries.append(sql)
        return real(conn, sql)

    monkeypatch.setattr(rocpd, "arrow_columns", counted)
    monkeypatch.setattr(sqlite_arrow, "arrow_columns", counted)
    with sqlite3.connect(db) as conn:
        src = rocpd._resolve(conn, db)
        guids = conn.execute(f"SELECT COUNT(DISTINCT guid) FROM {src['rocpd_kernel_dispatch']}").fetchone()[0]
        spans, counts = zip(
            *(
                conn.execute(f"SELECT COALESCE(MAX(id) - MIN(id) + 1, 0), COUNT(*) FROM {src[table]}").fetchone()
                for table in ("rocpd_kernel_dispatch", "rocpd_region")
                if table in src
            ),
            strict=True,
        )
    conn.close()
    span = max(spans)
    # ranges of ids (a half to a 33rd of each table's span) and of records (count / 4: ids far apart
    # then start a range at every size-th id rather than spanning the gap in ranges of size ids)
    sizes = {max(1, -(-one // pages)) for one in spans for pages in (2, 5, 33)} | {max(1, max(counts) // 4)}
    for ids in sorted(sizes):
        monkeypatch.setattr(rocpd, "TABLE_PAGE_IDS", ids)
        queries.clear()
        paged = rocpd.read_pass(db, "p")
        for name in ("dispatches", "counters", "markers", "launches"):
            pd.testing.assert_frame_equal(getattr(paged, name), getattr(whole, name), obj=f"{name} in ranges of {ids}")
        ranged = [q for q in queries if ".id >= " in q]
        # one process's tables are read in ranges; a merged database's (several guids) in one query each
        assert bool(ranged) == (guids == 1 and span > ids)
    if make is _pids_out_of_id_order:  # the check that sends such a file to one query is what keeps the order
        monkeypatch.setattr(rocpd, "_non_decreasing_or_null", lambda values: True)
        assert not rocpd.read_pass(db, "p").dispatches.equals(whole.dispatches)


def test_an_id_range_without_roctx_ranges_keeps_the_arrow_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """API calls stored before every roctx range (whole id ranges of calls): no fallback to the sqlite3 read."""
    db = tmp_path / "results.db"
    # the roctx ranges' ids moved past every other region's: the first id ranges hold API calls only
    _synthetic_changed(
        db,
        "UPDATE {rg} SET id = id + 10000000 WHERE event_id IN (SELECT e.id FROM {ev} e JOIN {st} c ON "
        "c.id = e.category_id WHERE c.string LIKE 'MARKER%')",
    )
    monkeypatch.setattr(rocpd, "TABLE_PAGE_IDS", 10**9)
    whole = rocpd.read_pass(db, "p")
    assert len(whole.markers) > 100
    fallbacks: list[str] = []
    real = rocpd._chunked

    def chunked(conn: sqlite3.Connection, path: Path, sql: str, *args: Any) -> Any:
        fallbacks.append(sql)
        return real(conn, path, sql, *args)

    monkeypatch.setattr(rocpd, "_chunked", chunked)
    monkeypatch.setattr(rocpd, "TABLE_PAGE_IDS", 500)
    paged = rocpd.read_pass(db, "p")
    pd.testing.assert_frame_equal(paged.markers, whole.markers)
    pd.testing.assert_frame_equal(paged.launches, whole.launches)
    assert fallbacks == []


def test_counter_records_sorted_a_block_of_dispatches_at_a_time() -> None:
    """Records of non-decreasing rows, each dispatch's counters in any order: sorted per block as by a whole sort."""
    rng = np.random.default_rng(7)
    width = 5
    row = np.repeat(np.arange(40), rng.integers(1, width + 1, 40))
    code = np.concatenate([rng.permutation(width)[: int((row == r).sum())] for r in range(40)]).astype(np.int32)
    value = rng.random(len(row))
    order = np.lexsort((code, row))  # independently: (row, counter) order
    for block in (1, 2, 3, 7, 1000):
        got = rocpd._sorted_per_dispatch(row, code, value, width, block=block)
        assert got is not None
        np.testing.assert_array_equal(got[0], row[order])
        np.testing.assert_array_equal(got[1], code[order])
        np.testing.assert_array_equal(got[2], value[order])
    twice = np.array([0, 0, 1, 1, 1])  # dispatch 1 has counter 2 twice
    assert rocpd._sorted_per_dispatch(twice, np.array([1, 0, 2, 0, 2], dtype=np.int32), np.ones(5), 3, block=2) is None
    assert non_decreasing(np.array([0, 0, 1, 2, 2]), block=2)
    assert not non_decreasing(np.array([0, 1, 2, 1, 3]), block=2)  # falls back within a block
    assert not non_decreasing(np.array([0, 1, 2, 2, 1]), block=2)  # and across blocks
    assert non_decreasing(np.array([0, 1, 2, 5, 9]), block=2, strict=True)
    assert not non_decreasing(np.array([0, 0, 1, 2, 3]), block=2, strict=True)  # a repeat within a block
    assert not non_decreasing(np.array([0, 1, 1, 2, 3]), block=2, strict=True)  # and across blocks


def test_counter_ids_split_into_ranges_only_when_both_ends_are_integers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rocpd, "PAGE_IDS", 100)
    db = tmp_path / "results.db"
    _ids_made(db, -5, 10**4)
    conn = sqlite3.connect(db)
    try:
        pages = rocpd._id_pages(conn, '"rocpd_pmc_event"')
        # ranges of 100 ids from the first id to the last: -5 .. 10**4 in 101 ranges
        assert pages[0] == " AND pe.id >= -5 AND pe.id < 95" and len(pages) == (10**4 + 5) // 100 + 1
        # ids so far apart that over 1,024 ranges would span them: a range starts at every 100th id
        conn.execute("UPDATE plain_pmc SET id = 10 * 1000 * 1000 * 1000 WHERE id = 10000")
        ids = [r[0] for r in conn.execute("SELECT id FROM plain_pmc ORDER BY id")]
        pages = rocpd._id_pages(conn, '"rocpd_pmc_event"')
        assert len(pages) == -(-len(ids) // 100) and pages[0] == f" AND pe.id >= -5 AND pe.id < {ids[100]}"
        assert pages[-1] == f" AND pe.id >= {ids[len(ids) - 1 - (len(ids) - 1) % 100]}"  # the last: no upper end
    finally:
        conn.close()
    for first, last in ((None, 10**6), (1, "x"), (-5, 1e7 + 0.5)):
        path = tmp_path / f"{first}-{last}.db"
        _ids_made(path, first, last)
        with sqlite3.connect(path) as conn:
            assert rocpd._id_pages(conn, '"rocpd_pmc_event"') == [""]


def test_adbc_reads_what_it_is_given_and_nothing_else(tmp_path: Path) -> None:
    """The Arrow path returns exactly typed columns, or None (then sqlite3 reads and names the problem)."""
    db = tmp_path / "t.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE t (a INTEGER, b INTEGER)")
        conn.executemany("INSERT INTO t VALUES (?, ?)", [(i, None if i % 3 else i) for i in range(3000)])
        conn.execute("INSERT INTO t VALUES ('text', 1)")
    conn.close()
    conn = rocpd._connect(db)
    try:
        ints = sqlite_arrow.arrow_columns(conn, "SELECT a, b FROM t WHERE typeof(a) = 'integer'")
        assert ints is not None
        b = sqlite_arrow.arrow_integers(ints["b"])
        assert int(b.isna().sum()) == 2000 and b[2997] == 2997  # NULL in two rows of three, kept as NA
        assert sqlite_arrow.arrow_columns(conn, "SELECT a FROM t") is None  # text after integers: not one type
        assert sqlite_arrow.arrow_columns(conn, "SELECT nope FROM t") is None  # any failure: the sqlite3 path
    finally:
        conn.close()


#: extdata texts whose message SQLite may find (the first) and the others, which Python reads or refuses.
_EXTDATA = [
    '{"message":"ggml:MUL_MAT:Qcur-0:12"}',
    '{ "message" : "spaced" }',
    '{"message":"caf\u00e9 \u4e2d \U0001f600"}',
    '{"message":"esc\\u00e9aped \\"quote\\""}',
    '{"message":"tab\there"}',
    '{"message":"a","message":"b"}',
    '{"message":"x","other":1}',
    '{"message":5}',
    '{"message":true}',
    '{"message":null}',
    '{"other":"x"}',
    '["message"]',
    "",
    "   ",
]


def _range_around_a_dispatch(b: RocpdBuilder, message: str, extdata: object = None) -> None:
    """One roctx range (5-50 ns) holding one dispatch (10-20 ns) of kernel ``add``."""
    gpu = _gpu(b)
    k = b.add_kernel_symbol("_Z3addv", "add")
    b.add_range(message, start=5, end=50, stack_id=1, extdata=extdata)
    b.add_dispatch(dispatch_id=1, kernel_id=k, agent_id=gpu, start=10, end=20, stack_id=2)


@pytest.mark.parametrize("extdata", _EXTDATA)
def test_marker_messages_found_by_sqlite_equal_python_s_reading(
    tmp_path: Path, extdata: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever extdata holds, the marker rows (or the refusal) are those of the all-Python reading."""
    db = tmp_path / "results.db"
    with rocpd_db(db) as b:
        _range_around_a_dispatch(b, "placeholder")
        b.conn.execute(f'UPDATE "rocpd_event{suffix(UUID_A)}" SET extdata = ? WHERE stack_id = 1', (extdata,))

    def read() -> object:
        try:
            return rocpd.read_pass(db, "p").markers
        except ParseError as exc:
            return str(exc)

    sql = read()
    monkeypatch.setattr(rocpd, "_has_json", lambda conn: False)
    python = read()
    if isinstance(python, str):
        assert sql == python
    else:
        assert isinstance(sql, pd.DataFrame)
        pd.testing.assert_frame_equal(sql, python)


def test_a_counter_without_a_name_is_refused_naming_its_row(tmp_path: Path) -> None:
    db = tmp_path / "results.db"
    _counter_db(db)
    with sqlite3.connect(db) as conn:
        conn.execute(f"UPDATE 'rocpd_info_pmc{suffix(UUID_A)}' SET name = NULL WHERE name = 'TCC_BUBBLE_sum'")
    conn.close()
    with pytest.raises(ParseError, match=r"rocpd_info_pmc id \d+: no counter name, but counter records refer to it"):
        rocpd.read_pass(db, "p")


def test_text_that_is_not_utf8_is_a_one_line_error_through_either_path(tmp_path: Path) -> None:
    """Arrow's reader fails on such text (a Rust panic in polars); the sqlite3 path names it."""
    db = tmp_path / "results.db"
    with rocpd_db(db) as b:
        _range_around_a_dispatch(b, "ggml:ADD:n:9")
        b.conn.execute(
            f"UPDATE 'rocpd_string{suffix(UUID_A)}' SET string = CAST(X'726F637478FF546872656164' AS TEXT) "
            "WHERE string = 'roctxThreadRangeA'"
        )
    with pytest.raises(ParseError, match="UTF-8"):
        read_capture(db)


def test_a_lone_surrogate_in_a_marker_message_is_stored_escaped(tmp_path: Path) -> None:
    """A JSON escape of half a surrogate pair gives text UTF-8 cannot hold: stored as ``\\ud800``."""
    cap = tmp_path / "capture"
    with rocpd_db(cap / "1_results.db") as b:
        _range_around_a_dispatch(b, "x", extdata='{"message": "ggml:ADD:n\\ud800:9"}')
    db = tmp_path / "r.db"
    run_id = _ingest(cap, db)
    rows = _query(db, f"SELECT message FROM marker_range WHERE run_id = {run_id}")
    assert rows["message"].tolist() == ["ggml:ADD:n\\ud800:9"]


def test_a_dispatch_lasting_over_an_hour_is_flagged_and_its_time_unknown(tmp_path: Path) -> None:
    cap = tmp_path / "capture"
    with rocpd_db(cap / "1_results.db") as b:
        gpu = _gpu(b)
        k = b.add_kernel_symbol("_Z3addv", "add")
        b.add_dispatch(dispatch_id=1, kernel_id=k, agent_id=gpu, start=10, end=20, stack_id=1)
        b.add_dispatch(dispatch_id=2, kernel_id=k, agent_id=gpu, start=30, end=2**63 - 1, stack_id=2)
    frames = build_run(read_capture(cap))
    durations = frames.tables["dispatch"].set_index("dispatch_id")["duration_ns"]
    assert durations[1] == 10 and pd.isna(durations[2])
    note = next(n for n in frames.notes if n.code == "implausible-duration")
    assert note.severity == "warning" and "1 dispatch(es) last over an hour (e.g. dispatch 2:" in note.message


def test_simple_messages_in_polars_match_the_python_reading() -> None:
    """The ADBC path finds ``{"message": "..."}`` with polars' regex engine: the same rows and texts as Python.

    Mixed extdata: what rocprofv3 writes, white space JSON allows, escapes, control characters,
    other keys, non-ASCII text, empty objects, not JSON at all. A value the fast path leaves is
    kept in ``extdata`` for the row-by-row reading (which names what is wrong).
    """
    import random

    import polars as pl

    from rocroof.capture.readers import rocpd as reader

    pieces = ['{"message": "ggml:ADD:x:1"}', '{ "message" :"a b" }', '{"message":"\\u00e9"}', '{"message":"é ü"}',
              '{"message":"tab\there"}', '{"message":"q\\"q"}', '{"message":""}', '{}', '{"message":1}',
              '{"message":"a","b":2}', '{"message":"a"}\n', '\n{"message":"a"}', 'not json', '', '{"Message":"a"}',
              '{\t"message"\r\n:\n"x"\t}', '{"message":"a\x01"}']  # fmt: skip
    gen = random.Random(11)
    values = [gen.choice(pieces) if gen.random() < 0.9 else None for _ in range(5000)]
    out = reader._simple_messages({"extdata": pl.Series("extdata", values, dtype=pl.String)})
    simple, rest = out["simple_message"].to_list(), out["extdata"].to_list()
    for value, got, left in zip(values, simple, rest, strict=True):
        match = reader._SIMPLE_MESSAGE.fullmatch(value) if value is not None else None
        assert got == (match.group(1) if match else None), value
        assert left == (None if match else value), value
    assert sum(s is not None for s in simple) > 1000


def test_counter_keys_are_checked_in_order_across_blocks() -> None:
    """``_increasing``: keys row * width + code strictly increase, also where a block ends (block of 2)."""
    import numpy as np

    def inc(rows: list[int], codes: list[int]) -> bool:
        return rocpd._increasing(np.array(rows, dtype=np.int64), np.array(codes, dtype=np.int32), 2, block=2)

    assert inc([0, 0, 1, 1, 2], [0, 1, 0, 1, 0])  # keys 0 1 2 3 4
    assert not inc([0, 0, 1, 1], [0, 1, 1, 0])  # 3 then 2: across a block end
    assert not inc([0, 0, 0, 1], [0, 1, 1, 0])  # 1 twice: the second block starts where the first ended
    assert not inc([1, 1, 0, 0], [0, 1, 0, 1])  # the second block starts below the first
    assert inc([], []) and inc([5], [1])


@pytest.mark.parametrize("suffix", ["-wal", "-journal"])
def test_a_database_still_being_written_is_flagged(tmp_path: Path, suffix: str) -> None:
    """A non-empty -wal or -journal beside a rocpd database: its writer may still be running; a warning says so."""
    db = tmp_path / "1_results.db"
    with rocpd_db(db) as b:
        gpu = _gpu(b)
        k = b.add_kernel_symbol("k", "k()")
        b.add_dispatch(dispatch_id=1, kernel_id=k, agent_id=gpu, start=100, end=200, stack_id=1)
    assert [n.code for n in read_capture(db).notes if n.severity == "warning"] == []
    (tmp_path / f"1_results.db{suffix}").write_bytes(b"\0" * 512)  # what a writer leaves while it runs
    (note,) = [n for n in read_capture(tmp_path).notes if n.code == "database-being-written"]
    assert note.severity == "warning"
    assert note.message.startswith(
        f"1_results.db: 1_results.db{suffix} beside it is not empty: the profiler (or another program) may still "
        "be writing this database"
    )
    assert "the run may be incomplete" in note.message


def test_an_empty_wal_left_by_a_reader_is_no_warning(tmp_path: Path) -> None:
    """A WAL-mode database read once leaves an empty -wal (and -shm): reading it again gives no warning."""
    db = tmp_path / "1_results.db"
    with rocpd_db(db) as b:
        gpu = _gpu(b)
        k = b.add_kernel_symbol("k", "k()")
        b.add_dispatch(dispatch_id=1, kernel_id=k, agent_id=gpu, start=100, end=200, stack_id=1)
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA journal_mode=WAL").fetchone() == ("wal",)
    con.close()
    (tmp_path / "1_results.db-wal").write_bytes(b"")
    assert not [n for n in read_capture(db).notes if n.code == "database-being-written"]


# ---- a large read holds its rows in spill files ---------------------------------------------------


def _spilled(column: pd.Series) -> bool:
    """True when every per-row part of ``column`` lies in a spill file (a text column: its codes)."""
    array = column.array
    if isinstance(array, pd.Categorical):
        return spill.is_spilled(np.asarray(array.codes))
    if isinstance(array, pd.arrays.IntegerArray | pd.arrays.BooleanArray):
        return spill.is_spilled(array._data) and spill.is_spilled(array._mask)
    return column.dtype != object and spill.is_spilled(column.to_numpy())


def _plain(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` in memory as the small read gives it: text as object values (None missing), messages written back."""
    if "range_op" in frame.columns:
        frame = frame.assign(message=pd.Series(marker_messages(frame), dtype=object))
        frame = frame.drop(columns=["range_op", "range_node", "range_invocation"])
    out = {}
    for name in frame.columns:
        column = frame[name]
        if isinstance(column.dtype, pd.CategoricalDtype) and name != "kind":
            out[name] = pd.Series(_texts(column), dtype=object)
        else:
            out[name] = column.copy(deep=True)
    return pd.DataFrame(out)


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(_synthetic_rocpd, id="synthetic-3000"),
        pytest.param(_counter_db, id="counter-instances"),
        pytest.param(lambda p: _merged_db(p, views=True), id="merged-views"),
        pytest.param(_v4_merged, id="v4"),
        pytest.param(_renamed_db, id="renamed"),
    ],
)
def test_a_large_read_holds_its_rows_in_spill_files_with_the_values_of_a_small_one(
    tmp_path: Path, make: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every per-row column of a read past ``SPILL_MIN_BYTES`` lies in a spill file (text: its codes), and holds
    the small read's values; its sorts and checks go a few rows at a time, its tables a few ids a query."""
    db = tmp_path / "results.db"
    make(db)
    memory = rocpd.read_pass(db, "p")
    monkeypatch.setattr(spill, "SPILL_MIN_BYTES", 0)
    monkeypatch.setattr(keys, "BLOCK", 16)  # sorts a bucket of 16 rows at a time
    monkeypatch.setattr(rocpd, "BLOCK", 16)  # checks 16 rows at a time
    monkeypatch.setattr(rocpd, "TABLE_PAGE_IDS", 97)  # several queries, sorted as one
    monkeypatch.setattr(rocpd, "FETCH_ROWS", 13)
    spilled = rocpd.read_pass(db, "p")
    assert len(spilled.dispatches) > 0
    for name in ("dispatches", "counters", "instances", "markers", "launches"):
        frame = getattr(spilled, name)
        assert [c for c in frame.columns if len(frame) and not _spilled(frame[c])] == [], name
        expected = getattr(memory, name)
        if name == "counters":  # the fast path's names are a categorical in either read
            expected = expected.astype({"counter_name": object})
        pd.testing.assert_frame_equal(_plain(frame), _plain(expected), obj=name)
    if make is _synthetic_rocpd:  # the ggml ranges as their parts, no text per range
        assert spilled.markers["range_op"].notna().sum() > 1000
        assert spilled.markers["message"].notna().sum() < len(spilled.markers) // 5
