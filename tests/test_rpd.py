"""rocmProfileData (RPD) traces: the recorded vLLM trace, and small ggml-style traces written here.

The truth for the recorded trace is computed from the raw file with sqlite3 and Python only: the
innermost UserMarker range (latest start among those holding the launch) on the launching call's
thread, at the call's start time.
"""

from __future__ import annotations

import bisect
import gzip
import shutil
import sqlite3
from collections import defaultdict
from pathlib import Path

import pandas as pd
import pytest

from rocroof.capture.readers import detect, read_capture
from rocroof.errors import ParseError
from rocroof.ingest.pipeline import build_run
from rocroof.store import Store

from .conftest import fixture_path
from .rpd_files import Call, Marker, write_rpd


def _store(path: Path, db: Path, arch: str | None = None) -> tuple[Store, int]:
    run_id = Store(db).write_run(build_run(read_capture(path), arch_override=arch))
    return Store(db, read_only=True), run_id


def _innermost_by_hand(rpd: Path) -> dict[int, str]:
    """op id -> message of the innermost UserMarker holding its launching call's start, same thread."""
    con = sqlite3.connect(rpd)
    marker_rows = con.execute(
        """SELECT a.tid, a.start, a."end", s.string FROM rocpd_api a JOIN rocpd_string n ON n.id = a.apiName_id
           JOIN rocpd_string s ON s.id = a.args_id WHERE n.string = 'UserMarker'"""
    ).fetchall()
    kernels = con.execute(
        """SELECT o.id, a.tid, a.start FROM rocpd_op o JOIN rocpd_string t ON t.id = o.opType_id
           JOIN rocpd_api_ops ao ON ao.op_id = o.id JOIN rocpd_api a ON a.id = ao.api_id
           WHERE t.string IN ('KernelExecution', 'Task')"""
    ).fetchall()
    con.close()
    by_tid: dict[int, list[tuple[int, int, str]]] = defaultdict(list)
    for tid, start, end, msg in marker_rows:
        by_tid[tid].append((start, end, msg))
    for ranges in by_tid.values():
        ranges.sort()
    out = {}
    for op_id, tid, t in kernels:
        ranges = by_tid.get(tid, [])
        i = bisect.bisect_right(ranges, (t, 2**63, "")) - 1
        while i >= 0 and ranges[i][1] < t:  # latest-starting range that still holds t
            i -= 1
        if i >= 0:
            out[op_id] = ranges[i][2]
    return out


def test_recorded_rpd_kernels_carry_their_enclosing_roctx_range(tmp_path: Path) -> None:
    gz = fixture_path("rpd", "mytrace.rpd.gz")
    assert detect(gz) == "rpd"
    plain = tmp_path / "mytrace.rpd"
    with gzip.open(gz, "rb") as src, open(plain, "wb") as dst:
        shutil.copyfileobj(src, dst)
    expected = _innermost_by_hand(plain)
    store, run_id = _store(gz, tmp_path / "r.db")
    got = store.query(
        "SELECT d.dispatch_id, d.kernel_name, r.message, d.duration_ns, d.start_ns, d.end_ns FROM dispatch d "
        f"LEFT JOIN marker_range r ON r.run_id = d.run_id AND r.range_index = d.range_index WHERE d.run_id = {run_id}"
    )
    # PROVENANCE.md: 1,228 KernelExecution ops, plus the HIP-graph kernels (Task); 11,884 UserMarker rows
    con = sqlite3.connect(plain)
    (tasks,) = con.execute(
        "SELECT COUNT(*) FROM rocpd_op o JOIN rocpd_string t ON t.id = o.opType_id WHERE t.string = 'Task'"
    ).fetchone()
    con.close()
    assert len(got) == 1228 + tasks
    assert dict(zip(got["dispatch_id"], got["message"], strict=True)) == expected
    assert (got["duration_ns"] == got["end_ns"] - got["start_ns"]).all()
    ranges = store.query(f"SELECT COUNT(*) AS n FROM marker_range WHERE run_id = {run_id}")["n"].iloc[0]
    assert ranges == 11_884


def _ggml_trace(path: Path, schema: int) -> Path:
    """Two ggml ops on thread 500; the GPU runs them long after the ranges closed (llama.cpp enqueues ahead)."""
    calls = [
        Call(
            "hipLaunchKernel", 1_100, 1_150, ops=[("rms_norm_f32", 90_000, 90_400, "KernelExecution")], grid=(16, 1, 1)
        ),
        Call(
            "hipLaunchKernel", 2_100, 2_150, ops=[("mul_mat_q4_0", 90_400, 95_000, "KernelExecution")], grid=(64, 2, 1)
        ),
        Call(
            "hipExtModuleLaunchKernel",
            2_200,
            2_250,
            ops=[("mul_mat_q4_0", 95_000, 99_000, "KernelExecution")],
            grid=(16384, 2, 1),
        ),
        Call(
            "hipGraphLaunch",
            3_500,
            3_600,
            ops=[("add_f32", 99_000, 99_100, "Task"), ("scale_f32", 99_100, 99_200, "Task")],
        ),
        Call("hipLaunchKernel", 5_000, 5_050, ops=[("copy_f32", 99_200, 99_300, "KernelExecution")]),
        Call("hipMemcpyAsync", 5_100, 5_200, ops=[("", 99_300, 99_900, "CopyDeviceToHost")]),
    ]
    markers = [
        Marker("decode", 500, 6_000),
        Marker("ggml:RMS_NORM:norm-0:7", 1_000, 2_000),
        Marker("ggml-fused:7:RMS_NORM+MUL:norm-0|attn_norm-0", 1_050, 1_050),
        Marker("ggml:MUL_MAT:ffn_up-0:8", 2_000, 3_000),
        Marker("ggml:ADD:ffn_out-0:9", 3_400, 4_000),
    ]
    return write_rpd(path, calls, markers, schema=schema)


@pytest.mark.parametrize("schema", [2, 3])
def test_ggml_ranges_in_an_rpd_attribute_kernels_to_ops(tmp_path: Path, schema: int) -> None:
    rpd = _ggml_trace(tmp_path / "llama.rpd", schema)
    store, run_id = _store(rpd, tmp_path / "r.db", arch="gfx942")
    rows = store.query(
        "SELECT d.kernel_name, o.invocation, o.op, o.op_list, d.attribution_method, d.kernel_ordinal, d.grid_size, "
        "d.workgroup_size, d.duration_ns FROM dispatch d LEFT JOIN op_invocation o "
        f"ON o.run_id = d.run_id AND o.op_index = d.op_index WHERE d.run_id = {run_id} ORDER BY d.start_ns"
    )
    # by hand: launches at 1100 (norm-0), 2100 and 2200 (ffn_up-0), 3500 (a graph of two kernels, ffn_out-0),
    # 5000 (inside "decode" only); the memory copy is not a kernel
    assert rows["kernel_name"].tolist() == [
        "rms_norm_f32",
        "mul_mat_q4_0",
        "mul_mat_q4_0",
        "add_f32",
        "scale_f32",
        "copy_f32",
    ]
    assert rows["invocation"].tolist()[:5] == [7, 8, 8, 9, 9]
    assert pd.isna(rows["invocation"].iloc[5])
    assert rows["op_list"].tolist()[:5] == ["RMS_NORM+MUL", "MUL_MAT", "MUL_MAT", "ADD", "ADD"]
    assert rows["attribution_method"].tolist() == ["launch_api"] * 5 + ["none"]
    assert rows["kernel_ordinal"].tolist()[1:5] == [0, 1, 0, 1]
    # hipLaunchKernel's gridX counts workgroups, hipExtModuleLaunchKernel's work-items (RoctracerDataSource.cpp)
    assert rows["grid_size"].tolist()[:3] == [16 * 256, 64 * 2 * 256, 16384 * 2]
    assert rows["duration_ns"].tolist() == [400, 4_600, 4_000, 100, 100, 100]
    notes = store.query(f"SELECT code FROM run_note WHERE run_id = {run_id}")["code"].tolist()
    assert "rpd-other-ops" in notes


def test_schema3_counters_join_their_op(tmp_path: Path) -> None:
    calls = [Call("hipLaunchKernel", 10, 20, ops=[("k", 100, 200, "KernelExecution")])]
    rpd = write_rpd(tmp_path / "c.rpd", calls, schema=3, counters={0: {"TCC_EA0_RDREQ_sum": 5.0, "SQ_WAVES": 64.0}})
    (p,) = read_capture(rpd).passes
    assert p.kind == "counter"
    assert p.counters.set_index("counter_name")["value"].to_dict() == {"SQ_WAVES": 64.0, "TCC_EA0_RDREQ_sum": 5.0}


def test_an_rpd_without_rocpd_op_says_which_family_it_resembles(tmp_path: Path) -> None:
    bad = tmp_path / "broken.rpd"
    con = sqlite3.connect(bad)
    con.execute("CREATE TABLE rocpd_api (id integer, pid integer)")
    con.execute("CREATE TABLE rocpd_string (id integer, string text)")
    con.commit()
    con.close()
    with pytest.raises(ParseError) as err:
        read_capture(bad)
    assert "resembles a rocmProfileData (RPD) trace" in str(err.value)
    assert "rocpd_op" in str(err.value)
    assert str(bad) in str(err.value)


@pytest.mark.parametrize(
    ("stored", "shown"),
    [("'soon'", "'soon'"), ("100.5", "'100.5'"), ("-5", "'-5'"), ("9223372036854775807", "'9223372036854775807'")],
)
def test_an_rpd_op_time_that_is_no_time_names_the_row(tmp_path: Path, stored: str, shown: str) -> None:
    rpd = write_rpd(tmp_path / "t.rpd", [Call("hipLaunchKernel", 10, 20, ops=[("k", 100, 200, "KernelExecution")])])
    con = sqlite3.connect(rpd)
    con.execute(f"UPDATE rocpd_op SET start = {stored}")
    con.commit()
    con.close()
    with pytest.raises(ParseError) as err:
        read_capture(rpd)
    assert f"rocpd_op id 1: column 'start' is {shown}; expected a time in ns from 0 to 2**62" in str(err.value)


def test_kernels_without_their_launching_call_are_named_in_a_warning(tmp_path: Path) -> None:
    calls = [
        Call("hipLaunchKernel", 10, 20, ops=[("k", 100, 200, "KernelExecution"), ("k", 200, 300, "KernelExecution")])
    ]
    rpd = write_rpd(tmp_path / "t.rpd", calls)
    con = sqlite3.connect(rpd)
    con.execute("UPDATE rocpd_api_ops SET api_id = 999 WHERE op_id = 2")  # an API call rocpd_api does not hold
    con.commit()
    con.close()
    (p,) = read_capture(rpd).passes
    (note,) = [n for n in p.notes if n.code == "rpd-no-launch"]
    assert "1 kernel(s) without their launching call (0 not in rocpd_api_ops, 1 naming" in note.message


def test_kernel_names_that_differ_at_the_end_stay_apart_in_the_kernel_report(tmp_path: Path) -> None:
    """The recorded RPD's Tensile kernels share their first 72 characters: the table shows their ends."""
    from rocroof.report.render import distinct_short_names
    from rocroof.report.tables import build_report, render

    rpd = fixture_path("rpd", "mytrace.rpd.gz")
    ro, run_id = _store(rpd, tmp_path / "r.db")
    rows = build_report(ro, run_id, by="kernel").rows
    names = [str(n) for n in rows["kernel_name"]]
    long = [n for n in names if n.startswith("Cijk_") and len(n) > 72]
    assert len({n[:71] for n in long}) < len(long)  # some share their first 71 characters: cut at the end, one text
    text = render(build_report(ro, run_id, by="kernel"), "table", width=400)
    shown = [line.split("  ")[0] for line in text.splitlines() if line.startswith("Cijk_")]
    assert len(shown) == len(long) and len(set(shown)) == len(shown)
    # by hand: 35 characters, "…", the last 36
    for name in long:
        assert (name[:35] + "…" + name[-36:] in shown) or (name[:71] + "…" in shown)
    assert distinct_short_names(["a" * 80 + "1", "a" * 80 + "2", "b"], width=10) == ["aaaa…aaaa1", "aaaa…aaaa2", "b"]
    assert distinct_short_names(["void k(int)", "void k(float)"]) == ["k", "k"]  # the same kernel's overloads
    ro.close()


def test_notes_name_a_compressed_trace_as_given(tmp_path: Path) -> None:
    """A trace given as t.rpd.gz is named t.rpd.gz in its notes, not t.rpd (the name it has inside the gzip)."""
    calls = [
        Call("hipLaunchKernel", 10, 20, ops=[("k", 100, 200, "KernelExecution"), ("k", 200, 300, "KernelExecution")]),
        Call("hipMemcpyAsync", 30, 40, ops=[("", 300, 400, "CopyDeviceToDevice")]),
    ]
    plain = write_rpd(tmp_path / "t.rpd", calls)
    con = sqlite3.connect(plain)
    con.execute("UPDATE rocpd_api_ops SET api_id = 999 WHERE op_id = 2")  # kernel 2's call is not in rocpd_api
    con.commit()
    con.close()
    packed = tmp_path / "t.rpd.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    plain.unlink()
    (p,) = read_capture(packed).passes
    messages = {n.code: n.message for n in p.notes}
    assert messages["rpd-other-ops"] == "t.rpd.gz: 1 memory copies and fills are not kernels; left out"
    assert messages["rpd-no-launch"].startswith("t.rpd.gz: 1 kernel(s) without their launching call")
