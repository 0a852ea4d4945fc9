"""rocpd schema 4.0 (timestamps in ``rocpd_timestamp``, owners in ``rocpd_track``) read like schema 3.

No public real schema 4 database exists (no rocprofiler-sdk release writes one; the schema is an
in-development ``rocpd_tables.sql`` and ``generateRocpd.cpp`` in the public code index), so
every database here is built by the test itself with ``tests/rocpd_builder.py``
``RocpdV4Builder``, which follows that SQL (columns, constraints, foreign keys) and that writer
(one track per owner, a start and an end timestamp per record, Perfetto category names, the
marker message as the region name). Expected values are computed by hand from the rows the test
writes, never taken from rocroof's output; where a test compares a v4 file with the same run
written in schema 3, it also checks the values by hand.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocroof.capture.readers import detect, read_capture, rocpd
from rocroof.errors import ParseError
from rocroof.ingest.pipeline import build_run
from rocroof.records import PassData
from rocroof.store import Store

from . import test_fuzz_readers as fuzz
from .rocpd_builder import UUID_A, UUID_B, RocpdV4Builder, create_views, rocpd_db, suffix
from .test_rocpd import (
    COUNTERS,
    EXPECTED_BYTES,
    LAUNCHES,
    OPS,
    RANGES,
    _ingest,
    _messages,
    _query,
    _write_llama_pass,
)

GFX942 = "gfx942"
DAMAGED = "rocprofiler-sdk writes start and end for every dispatch; the database is damaged"


def _gpu(b: RocpdV4Builder) -> int:
    b.add_node_and_process()
    return b.add_agent(name=GFX942)


def _counter(p: PassData, row: int, counter: str) -> float:
    c = p.counters
    sel = c[(c["row"] == row) & (c["counter_name"] == counter)]
    assert len(sel) == 1, f"{counter} of row {row}: {len(sel)} rows"
    return float(sel["value"].iloc[0])


def _instance_values(p: PassData, row: int, counter: str) -> list[float]:
    inst = p.instances
    sel = inst[(inst["row"] == row) & (inst["counter_name"] == counter)].sort_values("instance")
    return [float(v) for v in sel["value"]]


def _sql(db: Path, *statements: str) -> None:
    """Run statements on a built database with its foreign keys off (as damage would come)."""
    conn = sqlite3.connect(db)
    try:
        conn.execute("PRAGMA foreign_keys = OFF")
        for statement in statements:
            conn.execute(statement)
        conn.commit()
    finally:
        conn.close()


# ---- 1. the schema as built ---------------------------------------------------------------------


def test_builder_writes_the_schema_4_layout(tmp_path: Path) -> None:
    """The built file has the 4.0 shape: ids not times in the dispatch view, every foreign key satisfied."""
    db = tmp_path / "1_results.db"
    _write_llama_pass(db, pid=4242, schema=4)
    conn = sqlite3.connect(db)
    try:
        kd = [r[1] for r in conn.execute("PRAGMA table_info(rocpd_kernel_dispatch)")]
        sample = [r[1] for r in conn.execute("PRAGMA table_info(rocpd_sample)")]
        assert {"track_id", "start_id", "end_id"} <= set(kd)
        assert not {"start", "end", "pid", "tid", "agent_id", "queue_id", "stream_id"} & set(kd)
        assert "timestamp_id" in sample and "timestamp" not in sample
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        # 4 dispatches + 3 ranges + 4 launches, a start and an end timestamp each
        assert conn.execute("SELECT COUNT(*) FROM rocpd_timestamp").fetchone()[0] == 2 * (4 + 3 + 4)
    finally:
        conn.close()
    assert rocpd.is_rocpd(db)
    assert detect(tmp_path) == "rocpd"
    assert rocpd.read_metadata(db)["rocpd_schema_version"] == "4.0.0"


# ---- 2. dispatches ------------------------------------------------------------------------------


def test_dispatch_times_and_owners_come_from_timestamp_and_track_rows(tmp_path: Path) -> None:
    """start/end from rocpd_timestamp.value; pid/tid/agent/queue/stream from rocpd_track (DB built by the test)."""
    db = tmp_path / "4242_results.db"
    with rocpd_db(db, schema=4) as b:
        gpu = _gpu(b)
        k_mm = b.add_kernel_symbol(
            "_Z11mul_mat_q4_PKvPf", "mul_mat_q4(void const*, float*)", sgpr=48, vgpr=96, accum_vgpr=64
        )
        k_add = b.add_kernel_symbol("_Z7add_f32PfPKf", "add_f32(float*, float const*)")
        # a timestamp no record names, first: the dispatches' timestamps get ids 2..5, not 1..4
        b.timestamp(1, 0, b.track(tid=4242))
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

    d = rocpd.read_pass(db, "trace").dispatches
    assert d["dispatch_id"].tolist() == [7, 8]
    assert d["kernel_name"].tolist() == ["mul_mat_q4(void const*, float*)", "add_f32(float*, float const*)"]
    assert d["start_ns"].tolist() == [5_000, 7_300]
    assert d["end_ns"].tolist() == [7_250, 7_400]
    assert d["process_id"].tolist() == [4242, 4242]
    assert d["thread_id"].tolist() == [4242, 4250]
    assert d["agent_label"].tolist() == [str(gpu), str(gpu)]
    assert d["queue_id"].tolist() == [3, 1]  # the second dispatch: builder default queue 1, stream 0
    assert d["stream_id"].tolist() == [5, 0]
    assert d["correlation_id"].tolist() == [31, 33]
    first = d.iloc[0]
    assert (first["grid_x"], first["grid_y"], first["grid_z"]) == (4096, 4, 2)
    assert first["grid_size"] == 4096 * 4 * 2 and first["workgroup_size"] == 256 * 2 * 1
    assert (first["lds_bytes"], first["scratch_bytes"]) == (16384, 96)
    assert (first["sgpr_count"], first["vgpr_count"], first["accum_vgpr_count"]) == (48, 96, 64)
    assert d["region"].isna().all()


def test_agents_take_the_gfx_target_from_generic_name(tmp_path: Path) -> None:
    """Schema 4 moves the gfx target to generic_name; name is the product (DB built by the test)."""
    db = tmp_path / "1_results.db"
    with rocpd_db(db, schema=4) as b:
        b.add_node_and_process(hostname="node-17", command="llama-cli -m model.gguf")
        gpu = b.add_agent(absolute_index=2, logical_index=2, name=GFX942, product_name="AMD Instinct MI300X")
    agents = rocpd.read_agents(db)
    assert agents["agent_label"].tolist() == [str(gpu)]
    assert agents["gfx_arch"].tolist() == [GFX942]
    assert agents["product_name"].tolist() == ["AMD Instinct MI300X"]
    assert (agents["cu_count"].iloc[0], agents["wave_size"].iloc[0]) == (304, 64)
    meta = rocpd.read_metadata(db)
    assert (meta["command"], meta["host"]) == ("llama-cli -m model.gguf", "node-17")


# ---- 3. the same run in both schemas ------------------------------------------------------------


@pytest.mark.parametrize("views", [True, False], ids=["views", "tables-only"])
def test_a_schema_4_file_reads_as_the_same_run_in_schema_3(tmp_path: Path, views: bool) -> None:
    """Same dispatches, durations, counters, instances, markers and launches from both layouts.

    Both files are built by the test (tests/rocpd_builder.py) from the same rows; the v4 one
    also has one rocpd_info_pmc row per counter instance, as the 4.0 writer does.
    """
    v3, v4 = tmp_path / "v3" / "1_results.db", tmp_path / "v4" / "1_results.db"
    _write_llama_pass(v3, pid=4242)
    _write_llama_pass(v4, pid=4242, schema=4)
    if not views:
        conn = sqlite3.connect(v4)
        for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'view'").fetchall():
            conn.execute(f'DROP VIEW "{name}"')
        conn.commit()
        conn.close()
    a, b = rocpd.read_pass(v3, "x"), rocpd.read_pass(v4, "x")
    for frame in ("dispatches", "counters", "instances", "markers", "launches"):
        pd.testing.assert_frame_equal(getattr(a, frame), getattr(b, frame), obj=frame)

    # and by hand, from LAUNCHES / COUNTERS / RANGES in tests/test_rocpd.py
    d = b.dispatches
    assert d["dispatch_id"].tolist() == [1, 2, 3, 4]
    assert (d["end_ns"] - d["start_ns"]).tolist() == [2_450 - 2_150, 2_900 - 2_650, 3_300 - 3_100, 3_900 - 3_400]
    # dispatch 1: TCC_EA0_RDREQ = sum(100 + ch, ch=0..15) = 1600 + 120 = 1720
    assert _counter(b, 0, "TCC_EA0_RDREQ") == 1720.0
    # dispatch 2: TCC_EA0_WRREQ = sum(3 * ch) = 3 * 120 = 360; dispatch 4: RDREQ = 2 * 120 = 240
    assert _counter(b, 1, "TCC_EA0_WRREQ") == 360.0
    assert _counter(b, 3, "TCC_EA0_RDREQ") == 240.0
    assert _counter(b, 2, "TCC_EA0_RDREQ_32B_sum") == 16.0
    assert _instance_values(b, 0, "TCC_EA0_RDREQ") == [100.0 + ch for ch in range(16)]
    assert len(b.counters) == 4 * 5
    m = b.markers
    assert _messages(m) == [msg for msg, _, _ in RANGES]
    assert list(zip(m["start_ns"], m["end_ns"], strict=True)) == [(s, e) for _, s, e in RANGES]
    assert m["kind"].tolist() == ["range"] * 3
    lc = b.launches
    assert lc["start_ns"].tolist() == [row[2] for row in LAUNCHES]
    assert lc["end_ns"].tolist() == [row[3] for row in LAUNCHES]
    assert set(COUNTERS) == set(d["dispatch_id"])


def test_end_to_end_attributes_and_computes_dram_bytes_from_a_schema_4_file(tmp_path: Path) -> None:
    """read_capture -> build_run -> Store on a v4 file: op by launch time, duration, gfx942 DRAM bytes.

    Expected values are the hand-computed ones of the schema 3 test (EXPECTED_BYTES, OPS,
    LAUNCHES in tests/test_rocpd.py); the DB is built by the test in schema 4.0.
    """
    cap = tmp_path / "capture"
    _write_llama_pass(cap / "4242_results.db", pid=4242, schema=4)
    capture = read_capture(cap)
    assert capture.source_format == "rocpd" and capture.command == "llama-bench -m m.gguf"
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


def test_a_schema_3_trace_pass_joins_a_schema_4_counter_pass(tmp_path: Path) -> None:
    """trace/ in schema 3, pass_1/ in schema 4 (another run: other pid, ids and clock): joined per invocation."""
    cap = tmp_path / "capture"
    _write_llama_pass(cap / "trace" / "1111_results.db", pid=1111, uuid=UUID_A, counters=False)
    _write_llama_pass(
        cap / "pass_1" / "2222_results.db", pid=2222, uuid=UUID_B, id_offset=500, time_offset=1_000_000, schema=4
    )
    db = tmp_path / "results.db"
    run_id = _ingest(cap, db)
    rows = _query(
        db,
        "SELECT dispatch_id, op, invocation, kernel_ordinal, duration_ns, dram_read_bytes, dram_write_bytes "
        f"FROM dispatch_dram WHERE run_id = {run_id} ORDER BY dispatch_id",
    )
    assert rows["dispatch_id"].tolist() == [1, 2, 3, 4]
    for row in rows.to_dict("records"):
        did = row["dispatch_id"]
        _, _, _, _, g0, g1 = LAUNCHES[did - 1]
        op, invocation, _, ordinal = OPS[did]
        assert (row["op"], row["invocation"], row["kernel_ordinal"]) == (op, invocation, ordinal)
        assert row["duration_ns"] == g1 - g0
        assert (row["dram_read_bytes"], row["dram_write_bytes"]) == EXPECTED_BYTES[did]


# ---- 4. markers and launches --------------------------------------------------------------------


def test_roctx_ranges_marks_and_launches(tmp_path: Path) -> None:
    """marker_api regions (message = region name), marks as regions and as samples, hip_api launches.

    The DB is built by the test in schema 4.0 (tests/rocpd_builder.py RocpdV4Builder).
    """
    db = tmp_path / "1_results.db"
    with rocpd_db(db, pid=77, tid=77, schema=4) as b:
        gpu = _gpu(b)
        k = b.add_kernel_symbol("k", "k()")
        b.add_mark("ggml reset", timestamp=50, stack_id=1)  # the writer: a region with start == end
        b.add_range("ggml:MUL_MAT:Qcur-0:0", start=100, end=400, stack_id=2)
        b.add_range("inner work", start=150, end=300, stack_id=3, tid=78)
        b.add_hip_launch(stack_id=4, start=160, end=170, tid=78)
        b.add_dispatch(dispatch_id=1, kernel_id=k, agent_id=gpu, start=900, end=950, stack_id=4, tid=78)
        # an API call with a message in extdata: not a marker, and launched nothing
        b.add_region(
            name="hipStreamSynchronize", category="hip_api", start=430, end=440, stack_id=6, extdata={"message": "x"}
        )
        # a roctx range without a message: the writer names it by its operation, extdata {}
        b.add_region(name="roctxThreadRangeA", category="marker_api", start=450, end=460, stack_id=7)
        # the schema 3 layout in a schema 4 file: the operation as name, the message in extdata
        b.add_region(
            name="roctxThreadRangeA",
            category="marker_api",
            start=470,
            end=480,
            stack_id=9,
            extdata={"message": "ggml:ADD:x-0:1"},
        )
        b.add_mark("ggml-fused:0:MUL_MAT+ADD:Qcur-0|Qcur-0-add", timestamp=390, stack_id=8, as_sample=True)

    p = rocpd.read_pass(db, "trace")
    m = p.markers
    assert _messages(m) == [
        "ggml reset",
        "ggml:MUL_MAT:Qcur-0:0",
        "inner work",
        "ggml-fused:0:MUL_MAT+ADD:Qcur-0|Qcur-0-add",
        "ggml:ADD:x-0:1",
    ]
    assert m["kind"].tolist() == ["mark", "range", "range", "mark", "range"]
    assert m["start_ns"].tolist() == [50, 100, 150, 390, 470]
    assert m["end_ns"].tolist() == [50, 400, 300, 390, 480]
    assert m["correlation_id"].tolist() == [1, 2, 3, 8, 9]
    assert m["process_id"].tolist() == [77] * 5
    assert m["thread_id"].tolist() == [77, 77, 78, 77, 77]
    lc = p.launches
    assert lc["correlation_id"].tolist() == [4]
    assert lc["api_name"].tolist() == ["hipLaunchKernel"]
    assert (lc["start_ns"].iloc[0], lc["end_ns"].iloc[0], lc["thread_id"].iloc[0]) == (160, 170, 78)


def test_reset_mark_drops_warmup(tmp_path: Path) -> None:
    """A 'ggml reset' mark (a zero-length marker_api region) ends warm-up (DB built by the test, schema 4.0)."""
    cap = tmp_path / "capture"
    with rocpd_db(cap / "1_results.db", schema=4) as b:
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
    assert d["duration_ns"].tolist() == [1_300 - 1_200]
    assert any(n.code == "warmup-dropped" for n in frames.notes)


# ---- 5. merged databases ------------------------------------------------------------------------


def _merged_db(path: Path, *, views: bool) -> None:
    """Two processes' v4 tables in one file: dispatch, event, pmc, track and timestamp ids restart in each."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path)
    try:
        for uuid, pid, base, values in ((UUID_A, 100, 0, [1.0, 2.0, 3.0]), (UUID_B, 200, 10_000, [40.0, 50.0])):
            b = RocpdV4Builder(conn, uuid, pid=pid, tid=pid)
            gpu = _gpu(b)
            k = b.add_kernel_symbol(f"k{pid}", f"kernel_of_{pid}")
            b.add_range(f"ggml:ADD:n-{pid}:0", start=base + 100, end=base + 200, stack_id=10)
            b.add_hip_launch(stack_id=11, start=base + 120, end=base + 130)
            d = b.add_dispatch(
                dispatch_id=1, kernel_id=k, agent_id=gpu, start=base + 1000, end=base + 1500, stack_id=11
            )
            b.add_counter(d.event_id, b.add_pmc("TCC_EA0_RDREQ", gpu), values)
        if views:
            create_views(conn, [UUID_A, UUID_B], schema=4)
        conn.commit()
    finally:
        conn.close()


@pytest.mark.parametrize("views", [False, True], ids=["tables-only", "union-views"])
def test_merged_database_keeps_processes_apart(tmp_path: Path, views: bool) -> None:
    """Timestamp and track ids repeat per process: every join matches guid (DB built by the test, schema 4.0)."""
    db = tmp_path / "merged.db"
    _merged_db(db, views=views)
    p = rocpd.read_pass(db, "merged")
    d = p.dispatches
    assert d["process_id"].tolist() == [100, 200]
    assert d["dispatch_id"].tolist() == [1, 1]
    assert d["kernel_name"].tolist() == ["kernel_of_100", "kernel_of_200"]
    # both processes' dispatch timestamps have ids 5 and 6 (range 1-2, launch 3-4): only guid tells them apart
    assert d["start_ns"].tolist() == [1000, 11_000]
    assert d["end_ns"].tolist() == [1500, 11_500]
    assert _counter(p, 0, "TCC_EA0_RDREQ") == 1.0 + 2.0 + 3.0
    assert _counter(p, 1, "TCC_EA0_RDREQ") == 40.0 + 50.0
    assert _instance_values(p, 0, "TCC_EA0_RDREQ") == [1.0, 2.0, 3.0]
    assert _instance_values(p, 1, "TCC_EA0_RDREQ") == [40.0, 50.0]
    assert _messages(p.markers) == ["ggml:ADD:n-100:0", "ggml:ADD:n-200:0"]
    assert p.markers["start_ns"].tolist() == [100, 10_100]
    lc = p.launches.sort_values("start_ns")
    assert lc["process_id"].tolist() == [100, 200]
    assert lc["start_ns"].tolist() == [120, 10_120]


# ---- 6. a track-based layout with inline times (rocm-systems versions/4.1.0) --------------------


def test_track_based_records_with_inline_times_are_read(tmp_path: Path) -> None:
    """``track_id`` with ``start``/``end`` on the record (rocm-systems ``versions/4.1.0/rocpd_tables.sql``).

    Built by the test: a 4.0 file whose rocpd_kernel_dispatch and rocpd_region views show the
    4.1.0 columns (the times joined in, no start_id/end_id).
    """
    db = tmp_path / "1_results.db"
    _write_llama_pass(db, pid=4242, schema=4)
    sfx = suffix(UUID_A)
    conn = sqlite3.connect(db)
    try:
        for table, other in (
            (
                "rocpd_kernel_dispatch",
                "r.kernel_id, r.dispatch_id, r.private_segment_size, r.group_segment_size, "
                "r.workgroup_size_x, r.workgroup_size_y, r.workgroup_size_z, r.grid_size_x, r.grid_size_y, "
                "r.grid_size_z, r.region_name_id",
            ),
            ("rocpd_region", "r.name_id"),
        ):
            conn.execute(f'DROP VIEW "{table}"')
            conn.execute(
                f'CREATE VIEW "{table}" AS SELECT r.id, r.guid, r.track_id, {other}, s.value AS start, '
                f'e.value AS "end", r.event_id, r.extdata FROM "{table}{sfx}" r '
                f'JOIN "rocpd_timestamp{sfx}" s ON s.id = r.start_id JOIN "rocpd_timestamp{sfx}" e ON e.id = r.end_id'
            )
        conn.commit()
    finally:
        conn.close()
    p = rocpd.read_pass(db, "x")
    d = p.dispatches
    assert d["start_ns"].tolist() == [row[4] for row in LAUNCHES]
    assert d["end_ns"].tolist() == [row[5] for row in LAUNCHES]
    assert d["thread_id"].tolist() == [4242] * 4
    assert _messages(p.markers) == [msg for msg, _, _ in RANGES]
    assert p.launches["start_ns"].tolist() == [row[2] for row in LAUNCHES]


# ---- 7. times that point nowhere ----------------------------------------------------------------


def _two_dispatches(db: Path) -> None:
    with rocpd_db(db, schema=4) as b:
        gpu = _gpu(b)
        k = b.add_kernel_symbol("k", "k()")
        b.add_dispatch(dispatch_id=6, kernel_id=k, agent_id=gpu, start=100, end=200, stack_id=1)  # timestamps 1, 2
        b.add_dispatch(dispatch_id=7, kernel_id=k, agent_id=gpu, start=300, end=450, stack_id=2)  # timestamps 3, 4


@pytest.mark.parametrize(("column", "ts_id"), [("start_id", 3), ("end_id", 4)])
def test_a_dispatch_time_pointing_to_no_timestamp_row_is_refused(tmp_path: Path, column: str, ts_id: int) -> None:
    """start_id/end_id naming no rocpd_timestamp row: one-line ParseError naming file, table and dispatch id."""
    cap = tmp_path / "capture"
    db = cap / "1_results.db"
    _two_dispatches(db)
    _sql(db, f'DELETE FROM "rocpd_timestamp{suffix(UUID_A)}" WHERE id = {ts_id}')
    expected = f"{db}: rocpd_kernel_dispatch id 7: {column} {ts_id} points to no rocpd_timestamp row ({DAMAGED})"
    with pytest.raises(ParseError) as err:
        rocpd.read_pass(db, "x")
    assert str(err.value) == expected
    with pytest.raises(ParseError) as err:
        build_run(read_capture(cap))
    assert str(err.value) == expected


def test_a_timestamp_of_another_process_does_not_count(tmp_path: Path) -> None:
    """Merged file: process A's dispatch start_id names a row only process B has -> refused (guid honoured)."""
    db = tmp_path / "merged.db"
    _merged_db(db, views=True)
    _sql(db, f'DELETE FROM "rocpd_timestamp{suffix(UUID_A)}" WHERE id = 5')  # A's dispatch start; B keeps its id 5
    with pytest.raises(ParseError) as err:
        rocpd.read_pass(db, "x")
    # process A's dispatch 1 (process B has a dispatch 1 too: the message says whose)
    assert str(err.value) == (
        f"{db}: rocpd_kernel_dispatch id 1 of process {UUID_A}: start_id 5 points to no rocpd_timestamp row ({DAMAGED})"
    )


def test_a_dispatch_ending_before_it_starts_is_refused(tmp_path: Path) -> None:
    """end timestamp value below the start's: refused by dispatch id (DB built by the test, schema 4.0)."""
    db = tmp_path / "1_results.db"
    _two_dispatches(db)
    _sql(db, f'UPDATE "rocpd_timestamp{suffix(UUID_A)}" SET value = 250 WHERE id = 4')
    with pytest.raises(ParseError) as err:
        rocpd.read_pass(db, "x")
    assert str(err.value) == (
        f"{db}: rocpd_kernel_dispatch id 7: end 250 ns is before start 300 ns "
        "(a dispatch cannot end before it starts; the database is damaged)"
    )


@pytest.mark.parametrize("record", ["range", "launch", "sample"])
def test_marker_and_launch_times_pointing_nowhere_are_refused(tmp_path: Path, record: str) -> None:
    """A marker region, a launching HIP call or a marker sample whose timestamp row is gone: refused by id."""
    db = tmp_path / "1_results.db"
    with rocpd_db(db, schema=4) as b:
        gpu = _gpu(b)
        k = b.add_kernel_symbol("k", "k()")
        b.add_range("ggml:ADD:x-0:0", start=10, end=90, stack_id=5)  # timestamps 1, 2
        b.add_hip_launch(stack_id=6, start=20, end=30)  # timestamps 3, 4
        b.add_dispatch(dispatch_id=1, kernel_id=k, agent_id=gpu, start=100, end=200, stack_id=6)  # 5, 6
        b.add_mark("ggml reset", timestamp=95, stack_id=8, as_sample=True)  # timestamp 7
    table, ts_id, column = {
        "range": ("rocpd_region id 5", 2, "end_id"),
        "launch": ("rocpd_region id 6", 3, "start_id"),
        "sample": ("rocpd_sample id 8", 7, "timestamp_id"),
    }[record]
    _sql(db, f'DELETE FROM "rocpd_timestamp{suffix(UUID_A)}" WHERE id = {ts_id}')
    with pytest.raises(ParseError) as err:
        rocpd.read_pass(db, "x")
    what = {"range": "marker range", "launch": "API call", "sample": "mark"}[record]
    assert str(err.value) == (
        f"{db}: {table}: {column} {ts_id} points to no rocpd_timestamp row "
        f"(rocprofiler-sdk writes start and end for every {what}; the database is damaged)"
    )


def test_a_file_without_the_timestamp_table_is_refused(tmp_path: Path) -> None:
    """start_id columns but no rocpd_timestamp table or view: ParseError naming the file, no sqlite3 error."""
    db = tmp_path / "1_results.db"
    _two_dispatches(db)
    _sql(db, "DROP VIEW rocpd_timestamp", f'DROP TABLE "rocpd_timestamp{suffix(UUID_A)}"')
    with pytest.raises(ParseError) as err:
        rocpd.read_pass(db, "x")
    assert str(err.value) == (
        f"{db}: rocpd_kernel_dispatch refers to rocpd_timestamp rows (start_id) but the database has no rocpd_timestamp"
    )


# ---- 8. fuzzing a schema 4 file -----------------------------------------------------------------

V4_FUZZ_TABLES = [
    t + suffix(UUID_A)
    for t in (
        "rocpd_kernel_dispatch",
        "rocpd_timestamp",
        "rocpd_track",
        "rocpd_event",
        "rocpd_info_category",
        "rocpd_pmc_event",
        "rocpd_info_pmc",
        "rocpd_region",
        "rocpd_sample",
        "rocpd_string",
        "rocpd_info_kernel_symbol",
        "rocpd_info_agent",
        "rocpd_metadata",
    )
]


@pytest.fixture(scope="module")
def v4_base(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A valid schema 4.0 capture (ranges, launches, dispatches, counters, a sample mark) and an empty store."""
    root = tmp_path_factory.mktemp("fuzz_v4")
    cap = root / "capture"
    with rocpd_db(cap / "4242_results.db", schema=4) as b:
        gpu = _gpu(b)
        k = b.add_kernel_symbol("_Z4gemmv", "gemm")
        rdreq = b.add_pmc("TCC_EA0_RDREQ", gpu)
        b.add_mark("ggml reset", timestamp=5, stack_id=1, as_sample=True)
        for i in range(8):
            base = 1_000 * (i + 1)
            b.add_range(f"ggml:MUL_MAT:blk.{i}:{i}", start=base, end=base + 500, stack_id=10 * i + 2)
            b.add_hip_launch(stack_id=10 * i + 3, start=base + 100, end=base + 150)
            d = b.add_dispatch(
                dispatch_id=i + 1, kernel_id=k, agent_id=gpu, start=base + 200, end=base + 700, stack_id=10 * i + 3
            )
            b.add_counter(d.event_id, rdreq, [float(i + ch) for ch in range(4)])
    store = Store(root / "empty.db")
    store.upgrade()
    store.close()
    return {"capture": cap, "empty.db": root / "empty.db"}


def test_the_fuzz_base_reads(v4_base: dict[str, Path]) -> None:
    """The undamaged base: 8 dispatches of 500 ns, RDREQ = sum(i + ch, ch=0..3) = 4i + 6."""
    p = rocpd.read_pass(v4_base["capture"] / "4242_results.db", "x")
    assert (p.dispatches["end_ns"] - p.dispatches["start_ns"]).tolist() == [500] * 8
    assert [_counter(p, i, "TCC_EA0_RDREQ") for i in range(8)] == [4.0 * i + 6 for i in range(8)]
    assert p.markers["kind"].tolist() == ["mark"] + ["range"] * 8


@fuzz.FUZZ
@given(ops=st.lists(fuzz.SQL_OPS, min_size=1, max_size=3), byte_ops=st.lists(fuzz.BYTE_OPS, max_size=1))
def test_fuzz_rocpd_v4(v4_base: dict[str, Path], ops: list[tuple[Any, ...]], byte_ops: list[tuple[Any, ...]]) -> None:
    """A damaged schema 4 file: a whole run, or one RocroofError naming the file (tests/test_fuzz_readers.py)."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        cap = work / "capture"
        shutil.copytree(v4_base["capture"], cap)
        (db,) = cap.glob("*_results.db")
        fuzz.damage_sqlite(db, V4_FUZZ_TABLES, ops, byte_ops)
        fuzz.check_ingest(cap, db, v4_base["empty.db"], work)


def test_scrub_keeps_the_schema_4_tables_and_the_same_numbers(tmp_path: Path) -> None:
    """scrub's allow-list keeps rocpd_timestamp and rocpd_info_category: the copy ingests alike."""
    from rocroof.capture.scrub import scrub_capture

    cap = tmp_path / "capture"
    _write_llama_pass(cap / "4242_results.db", pid=4242, schema=4)
    scrub_capture(cap, tmp_path / "clean")
    before = _query_after_ingest(cap, tmp_path / "a.db")
    after = _query_after_ingest(tmp_path / "clean", tmp_path / "b.db")
    assert after == before
    assert [r[0] for r in before] == [1, 2, 3, 4]
    assert all(r[1] is not None for r in before)  # every dispatch attributed in the copy too


def _query_after_ingest(cap: Path, db: Path) -> list[tuple[object, ...]]:
    run_id = _ingest(cap, db)
    rows = _query(
        db,
        "SELECT dispatch_id, op, duration_ns, dram_read_bytes, dram_write_bytes FROM dispatch_dram "
        f"WHERE run_id = {run_id} ORDER BY dispatch_id",
    )
    return [tuple(r) for r in rows.itertuples(index=False)]
