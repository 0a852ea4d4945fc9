"""The NVIDIA path: Nsight Compute / Nsight Systems readers, the ncu+nsys backend, collect and ingest.

Expected values are computed here, independently of rocroof, from the recorded H200 trial
(``fixtures/h200-trial``, see PROVENANCE.md): the ncu raw CSV is parsed with :mod:`csv` (units
from its second row applied by hand, thousands separators stripped), the nsys export is queried
with :mod:`sqlite3`, and ggml ranges are matched with a regular expression of this file.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import re
import shlex
import shutil
import sqlite3
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from rocroof.capture.collect import execute, make_plan
from rocroof.capture.markers import marker_messages, region_messages
from rocroof.capture.profilers import choose_profiler
from rocroof.capture.profilers.base import Device
from rocroof.capture.profilers.nsight import DRAM_METRICS, FLOP_METRICS, NsightPair, parse_smi, resolve_metrics
from rocroof.capture.profilers.rocprofv3 import Rocprofv3
from rocroof.capture.readers import read_capture
from rocroof.capture.readers.nvidia import is_ncu_csv, is_nsys_sqlite, read_ncu_csv, read_nsys_sqlite, unit_scale
from rocroof.cli import cli
from rocroof.errors import ConfigError, InputError, ParseError, ProfilerFailed, ProfilerNotFound
from rocroof.ingest.attribution import normalise_kernel_name
from rocroof.ingest.pipeline import build_run
from rocroof.store import Store

from .conftest import fixture_path

NCU_CSV = "dense_ncu_raw.csv.gz"
NSYS_DB = "dense_nsys.sqlite.gz"
NVTX_COLUMN = "thread Domain:Push/Pop_Range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg"
#: Nsight Compute units (decimal prefixes) to bytes and ns, written out by hand for this test.
UNIT = {"byte": 1.0, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "ns": 1.0, "us": 1e3, "ms": 1e6}
#: A ggml range inside one entry of ncu's NVTX stack cell: ``ggml:<OP>:<node>:<invocation>:<payload...>``.
STACK_RANGE = re.compile(r"ggml:([A-Z0-9_]+):([^:\"]+):(\d+):")
#: A whole ggml range message (nsys NVTX_EVENTS).
RANGE = re.compile(r"ggml:([A-Z0-9_]+):(.+):(\d+)")
APP = ["llama-completion", "-m", "tiny-llama-q8_0.gguf", "-ngl", "99", "-n", "4"]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GGML_CUDA_MARKERS", "GGML_CUDA_OP_META", "ROCROOF_DB", "ROCROOF_TRACEBACK"):
        monkeypatch.delenv(name, raising=False)


# ---- independent readings of the recorded files ---------------------------------------------


@dataclass(frozen=True)
class NcuKernel:
    """One row of the ncu raw CSV, as read by this test."""

    kernel_id: int
    name: str
    op: str
    node: str
    invocation: int
    ordinal: int
    thread_id: int
    read_bytes: float
    write_bytes: float
    duration_ns: int
    block: tuple[int, int, int]
    grid_blocks: tuple[int, int, int]


def _number(cell: str, unit: str) -> float:
    return float(cell.replace(",", "")) * UNIT[unit]


def _triple(cell: str) -> tuple[int, int, int]:
    a, b, c = (int(x) for x in cell.strip("() ").split(","))
    return a, b, c


def ncu_rows() -> tuple[list[str], list[str], list[list[str]]]:
    """(header, units, rows) of the recorded ncu CSV."""
    with gzip.open(fixture_path("h200-trial", NCU_CSV), "rt", encoding="utf-8", newline="") as fh:
        rows = list(csv.reader(fh))
    return rows[0], rows[1], rows[2:]


def ncu_kernels() -> list[NcuKernel]:
    header, units, rows = ncu_rows()
    col = {name: i for i, name in enumerate(header)}
    read, write, dur = col["dram__bytes_read.sum"], col["dram__bytes_write.sum"], col["gpu__time_duration.sum"]
    seen: Counter[int] = Counter()
    out = []
    for row in rows:
        cell = row[col[NVTX_COLUMN]]
        ranges = STACK_RANGE.findall(cell)
        assert ranges, f"kernel {row[col['ID']]} carries no ggml range: {cell!r}"
        op, node, inv_text = ranges[-1]  # innermost (the stack is outermost first)
        inv = int(inv_text)
        out.append(
            NcuKernel(
                kernel_id=int(row[col["ID"]]),
                name=row[col["Kernel Name"]],
                op=op,
                node=node,
                invocation=inv,
                ordinal=seen[inv],
                thread_id=int(cell.split()[0]),
                read_bytes=_number(row[read], units[read]),
                write_bytes=_number(row[write], units[write]),
                duration_ns=round(_number(row[dur], units[dur])),
                block=_triple(row[col["Block Size"]]),
                grid_blocks=_triple(row[col["Grid Size"]]),
            )
        )
        seen[inv] += 1
    return out


def gunzip(src: Path, dst: Path) -> Path:
    dst.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(src, "rb") as fin, open(dst, "wb") as fout:
        shutil.copyfileobj(fin, fout)
    return dst


@pytest.fixture
def nsys_db(tmp_path: Path) -> Path:
    """The recorded nsys export, decompressed into tmp_path for sqlite3."""
    return gunzip(fixture_path("h200-trial", NSYS_DB), tmp_path / "plain" / "nsys.sqlite")


@dataclass(frozen=True)
class NsysFacts:
    kernels: int
    kernel_time_ns: int
    names: list[str]
    correlation_ids: list[int]
    range_ops: Counter[str]
    ggml_ranges: int
    marks: int
    arch: str


def nsys_facts(db: Path) -> NsysFacts:
    con = sqlite3.connect(db)
    try:
        kernels, total = con.execute("SELECT COUNT(*), SUM(end - start) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()
        named = con.execute(
            "SELECT s.value, k.correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s "
            "ON s.id = k.demangledName ORDER BY k.correlationId"
        ).fetchall()
        messages = [
            m
            for (m,) in con.execute(
                "SELECT COALESCE(e.text, s.value) FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId "
                "WHERE e.eventType = 59"
            )
        ]
        (marks,) = con.execute("SELECT COUNT(*) FROM NVTX_EVENTS WHERE eventType = 34").fetchone()
        major, minor = con.execute("SELECT computeMajor, computeMinor FROM TARGET_INFO_GPU").fetchone()
    finally:
        con.close()
    ops: dict[int, str] = {}
    for m in messages:
        if match := RANGE.fullmatch(m or ""):
            ops[int(match.group(3))] = match.group(1)
    return NsysFacts(
        kernels=kernels,
        kernel_time_ns=total,
        names=[n for n, _ in named],
        correlation_ids=[c for _, c in named],
        range_ops=Counter(ops.values()),
        ggml_ranges=sum(1 for m in messages if RANGE.fullmatch(m or "")),
        marks=marks,
        arch=f"sm_{major}{minor}",
    )


# ---- Nsight Compute units and file detection ------------------------------------------------


def test_unit_scale_for_the_units_of_the_recorded_csv() -> None:
    _, units, _ = ncu_rows()
    expected = {
        "": 1.0,
        "byte": 1.0,
        "Kbyte": 1e3,
        "Mbyte": 1e6,
        "us": 1e3,
        "%": 1.0,
        "Ghz": 1e9,
        "byte/cycle": 1.0,
        "Kbyte/cycle": 1e3,
        "Gbyte/s": 1e9,
        "Tbyte/s": 1e12,
        "Kbyte/block": 1e3,
        "block": 1.0,
        "thread": 1.0,
        "warp": 1.0,
        "register/thread": 1.0,
    }
    assert set(expected) <= set(units)  # every unit checked here occurs in the capture
    for unit, factor in expected.items():
        assert unit_scale(unit) == pytest.approx(factor), unit
    # the units of the columns rocroof needs are among them
    header = ncu_rows()[0]
    for name in ("gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum"):
        assert units[header.index(name)] in expected
    # and those of other captures (--print-units base, other prefixes)
    for unit, factor in {"ns": 1, "ms": 1e6, "s": 1e9, "Gbyte": 1e9, "KiB": 1024, "Mbyte/s": 1e6, "MB": 1e6}.items():
        assert unit_scale(unit) == pytest.approx(factor), unit
    assert unit_scale("furlong") is None


def test_ncu_and_nsys_files_are_recognised_and_nothing_else(tmp_path: Path, nsys_db: Path) -> None:
    ncu_gz = fixture_path("h200-trial", NCU_CSV)
    nsys_gz = fixture_path("h200-trial", NSYS_DB)
    assert is_ncu_csv(ncu_gz) and not is_nsys_sqlite(ncu_gz)
    assert is_nsys_sqlite(nsys_gz) and not is_ncu_csv(nsys_gz)
    assert is_nsys_sqlite(nsys_db)
    other_csv = tmp_path / "kernel_trace.csv"
    other_csv.write_text('"Kind","Kernel_Name"\n"KERNEL_DISPATCH","k"\n')
    assert not is_ncu_csv(other_csv)
    not_sqlite = tmp_path / "x.sqlite"
    not_sqlite.write_text("not a database\n")
    assert not is_nsys_sqlite(not_sqlite)
    other_db = tmp_path / "other.sqlite"
    with sqlite3.connect(other_db) as con:
        con.execute("CREATE TABLE t (x INTEGER)")
    con.close()
    assert not is_nsys_sqlite(other_db)
    damaged = tmp_path / "cut.sqlite.gz"
    damaged.write_bytes(nsys_gz.read_bytes()[:2000])
    assert not is_nsys_sqlite(damaged)
    with pytest.raises(ParseError, match="no CUPTI_ACTIVITY_KIND_KERNEL"):
        read_nsys_sqlite(other_db, "trace")


# ---- the readers on the recorded files --------------------------------------------------------


def test_read_ncu_csv_applies_the_units_row_and_reads_the_nvtx_stack() -> None:
    expected = ncu_kernels()
    p, facts = read_ncu_csv(fixture_path("h200-trial", NCU_CSV), "ncu")
    d = p.dispatches
    assert len(d) == len(expected) == 343
    assert p.kind == "counter"
    assert p.region_method == "nvtx_stack"
    assert list(d["kernel_name"]) == [k.name for k in expected]
    assert list(d["dispatch_id"]) == [k.kernel_id for k in expected]
    assert list(d["duration_ns"]) == [k.duration_ns for k in expected]
    assert list(region_messages(d)) == [f"ggml:{k.op}:{k.node}:{k.invocation}" for k in expected]
    assert d["region"].isna().all()  # read as their parts (op, node name, invocation): the texts let go
    assert list(d["thread_id"]) == [k.thread_id for k in expected]
    # ncu's Grid Size counts blocks; rocroof's counts threads
    assert list(d["workgroup_x"]) == [k.block[0] for k in expected]
    assert list(d["grid_x"]) == [k.grid_blocks[0] * k.block[0] for k in expected]
    assert list(d["grid_size"]) == [
        k.grid_blocks[0] * k.grid_blocks[1] * k.grid_blocks[2] * k.block[0] * k.block[1] * k.block[2] for k in expected
    ]
    c = p.counters
    for metric, attr in (("dram__bytes_read.sum", "read_bytes"), ("dram__bytes_write.sum", "write_bytes")):
        got = c[c["counter_name"] == metric].set_index("row")["value"].sort_index()
        assert list(got.index) == list(range(len(expected)))
        assert list(got) == pytest.approx([getattr(k, attr) for k in expected], rel=1e-12, abs=1e-6)
    assert not c["counter_name"].str.startswith("device__attribute").any()  # facts of the GPU, not counters
    assert facts["gfx_arch"] == "sm_90"


def test_read_ncu_csv_in_base_units_takes_the_innermost_ggml_range(tmp_path: Path) -> None:
    # ``--print-units base``: the units row names base units (nsecond, byte); numbers with thousands
    # separators; a nested NVTX stack
    path = tmp_path / "base_units.csv"
    stack = (
        '77  "<default domain>:llama_decode:none:none:none:none:none:none" '
        '"<default domain>:ggml:MUL_MAT:ffn_up-0:12:none:none:none:none:none:none" '
        '"<default domain>:inner work:none:none:none:none:none:none" '
    )
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh, quoting=csv.QUOTE_ALL)
        w.writerow(["ID", "Kernel Name", NVTX_COLUMN, "CC", "gpu__time_duration.sum", "dram__bytes_read.sum"])
        w.writerow(["", "", "", "", "nsecond", "byte"])
        w.writerow(["0", "void k<256, 1>(float *)", stack, "9.0", "12,345", "1,048,576"])
        w.writerow(["1", "void k<256, 1>(float *)", "", "9.0", "678", "n/a"])
    assert is_ncu_csv(path)
    p, facts = read_ncu_csv(path, "ncu")
    assert list(p.dispatches["duration_ns"]) == [12345, 678]
    assert region_messages(p.dispatches)[0] == "ggml:MUL_MAT:ffn_up-0:12"
    assert region_messages(p.dispatches)[1] is None
    assert p.dispatches["thread_id"].iloc[0] == 77
    reads = p.counters[p.counters["counter_name"] == "dram__bytes_read.sum"]
    assert list(reads["row"]) == [0]  # n/a is unknown, not zero
    assert list(reads["value"]) == [1_048_576.0]
    assert facts["gfx_arch"] == "sm_90"


def test_an_ncu_csv_without_its_units_row_is_refused_not_read_in_the_wrong_unit(tmp_path: Path) -> None:
    # ncu writes the units row with every raw page (--print-units base names base units there); without
    # it 0.5 (Mbyte) would be stored as 0.5 bytes
    path = tmp_path / "no_units.csv"
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh, quoting=csv.QUOTE_ALL)
        w.writerow(["ID", "Kernel Name", "CC", "gpu__time_duration.sum", "dram__bytes_read.sum"])
        w.writerow(["0", "void k(float *)", "9.0", "1.5", "0.5"])
    with pytest.raises(ParseError, match=r"no_units.csv:2: row 2 is not Nsight Compute's units row"):
        read_ncu_csv(path, "ncu")
    header_only = tmp_path / "header_only.csv"  # no kernel profiled: nothing to misread
    header_only.write_text(path.read_text().splitlines()[0] + "\n")
    p, _ = read_ncu_csv(header_only, "ncu")
    assert len(p.dispatches) == 0


def test_byte_counters_in_decimal_units_become_whole_bytes(tmp_path: Path) -> None:
    # in floating point 0.509952 * 1e6 is 509951.99999999994; ncu counts whole bytes
    path = tmp_path / "units.csv"
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh, quoting=csv.QUOTE_ALL)
        w.writerow(["ID", "Kernel Name", "CC", "gpu__time_duration.sum", "dram__bytes_read.sum", "lts__t_bytes.avg"])
        w.writerow(["", "", "", "us", "Mbyte", "Kbyte"])
        w.writerow(["0", "void k(float *)", "9.0", "1.5", "0.509952", "2.108936"])
    p, _ = read_ncu_csv(path, "ncu")
    values = dict(zip(p.counters["counter_name"], p.counters["value"], strict=True))
    twice = tmp_path / "twice.csv"
    lines = path.read_text().splitlines()
    twice.write_text("\n".join(line + "," + line.split(",")[4] for line in lines) + "\n")  # dram column again
    with pytest.raises(ParseError, match=r"twice.csv:1: column 'dram__bytes_read.sum' appears more than once"):
        read_ncu_csv(twice, "ncu")
    assert values["dram__bytes_read.sum"] == 509_952  # exactly
    assert values["lts__t_bytes.avg"] == pytest.approx(2_108.936)  # an average over units may be fractional
    assert list(p.dispatches["duration_ns"]) == [1500]


def test_read_ncu_csv_names_the_row_without_a_kernel_name(tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    path.write_text('"ID","Kernel Name","gpu__time_duration.sum"\n"","","us"\n"0","k","1.5"\n"1","","2.0"\n')
    with pytest.raises(ParseError, match=r"bad\.csv:4: column 'Kernel Name' is empty; expected a kernel name"):
        read_ncu_csv(path, "ncu")  # line 4: header and units rows come first


def test_read_nsys_sqlite_matches_the_export(nsys_db: Path) -> None:
    facts = nsys_facts(nsys_db)
    assert facts.kernels == 343
    p, agents, more = read_nsys_sqlite(fixture_path("h200-trial", NSYS_DB), "trace")
    d = p.dispatches
    assert p.kind == "trace"
    assert p.source == str(fixture_path("h200-trial", NSYS_DB))
    assert len(d) == facts.kernels
    assert int((d["end_ns"] - d["start_ns"]).sum()) == facts.kernel_time_ns
    assert list(d["kernel_name"]) == facts.names
    assert list(d["correlation_id"]) == facts.correlation_ids
    assert d["thread_id"].notna().all()  # every kernel joined to its launching runtime call
    assert set(p.launches["correlation_id"]) >= set(facts.correlation_ids)
    # the ggml ranges' messages as read: their parts (op, node, invocation), the text given back exactly
    messages = marker_messages(p.markers)
    ranges = messages[(p.markers["kind"] == "range").to_numpy(dtype=bool)]
    assert sum(1 for m in ranges if RANGE.fullmatch(m)) == facts.ggml_ranges
    assert p.markers["message"].isna().sum() == facts.ggml_ranges  # every one let go: its parts rebuild it
    assert int((p.markers["kind"] == "mark").sum()) == facts.marks
    assert list(agents["gfx_arch"]) == [facts.arch] == ["sm_90"]
    assert "nsys_gpu_l2_bytes" in more


# ---- kernel names across tools ----------------------------------------------------------------


def test_kernel_names_are_the_first_id_s_name_else_the_second_s() -> None:
    """``COALESCE(name(demangled id), name(short id))``, by hand, with missing ids of each kind."""
    import numpy as np
    import pandas as pd

    from rocroof.capture.readers.nvidia import _names

    first = pd.Series([1, None, 2, 1, np.nan, 3], dtype=object)
    second = pd.Series([10, 11, None, 12, 11, 3], dtype=object)
    strings: dict[object, object] = {1: "a", 11: "b", 12: "c", 3: "d"}
    assert _names(first, second, strings).tolist() == ["a", "b", None, "a", "b", "d"]
    assert _names(first, None, strings).tolist() == ["a", None, None, "a", None, "d"]
    assert _names(pd.Series([], dtype=object), pd.Series([], dtype=object), strings).tolist() == []


def test_normalise_kernel_name_drops_the_casts_nsys_writes() -> None:
    assert (
        normalise_kernel_name("void k<(int)256, (bool)1>(const float *, int)") == "void k<256, 1>(const float *, int)"
    )
    assert normalise_kernel_name("void k<(unsigned int)3, (ggml_type)8>(int)") == "void k<3, 8>(int)"
    assert normalise_kernel_name("void k<(int)-1>(float *)") == "void k<-1>(float *)"
    assert normalise_kernel_name("vecCopy(double*, double*) (.kd)") == "vecCopy(double*, double*)"
    assert normalise_kernel_name("  a   b ") == "a b"
    assert normalise_kernel_name(None) == ""
    # a parameter list is not a cast
    assert normalise_kernel_name("quantize_q8_1(const float *, void *, long)") == (
        "quantize_q8_1(const float *, void *, long)"
    )


def test_recorded_kernel_names_agree_once_normalised(nsys_db: Path) -> None:
    ncu = [k.name for k in ncu_kernels()]
    nsys = nsys_facts(nsys_db).names
    assert len(ncu) == len(nsys) == 343
    assert sum(a != b for a, b in zip(ncu, nsys, strict=True)) > 0  # the tools do spell them differently
    assert [normalise_kernel_name(n) for n in ncu] == [normalise_kernel_name(n) for n in nsys]


# ---- a recorded NVIDIA capture, ingested --------------------------------------------------------


def _store(capture_dir: Path, db: Path) -> tuple[Store, int]:
    capture = read_capture(capture_dir)
    frames = build_run(capture)
    run_id = Store(db).write_run(frames)
    return Store(db, read_only=True), run_id


def _check_joined_run(ro: Store, run_id: int, nsys: NsysFacts, *, counter_pass_label: str) -> None:
    """The assertions every ncu+nsys run of the recorded trial must pass."""
    expected = ncu_kernels()
    notes = ro.query(f"SELECT severity, code, message FROM run_note WHERE run_id={run_id}")
    assert "pass-mismatch" not in set(notes["code"]), notes.to_dict("records")
    assert not notes["message"].str.contains("do not match").any()

    passes = ro.query(
        f"SELECT pass_index, kind, label, is_timing_pass, dispatch_count, matched_count FROM pass "
        f"WHERE run_id={run_id} ORDER BY pass_index"
    ).to_dict("records")
    assert [(p["kind"], p["label"]) for p in passes] == [("trace", "trace"), ("counter", counter_pass_label)]
    assert [bool(p["is_timing_pass"]) for p in passes] == [True, False]
    assert [p["dispatch_count"] for p in passes] == [nsys.kernels, len(expected)]
    assert passes[1]["matched_count"] == len(expected) == 343

    run = ro.query(f"SELECT * FROM run WHERE run_id={run_id}").iloc[0]
    assert run["gpu_arch"] == nsys.arch == "sm_90"
    assert run["timing_source"] == "trace"
    assert not run["serialised_timings"]

    rows = ro.query(
        f"SELECT invocation, kernel_ordinal, op, kernel_name, duration_ns, dram_read_bytes, dram_write_bytes "
        f"FROM dispatch_dram WHERE run_id={run_id}"
    )
    assert len(rows) == nsys.kernels == 343
    # durations are the trace's (nsys), and every nanosecond of kernel time belongs to a ggml op
    assert int(rows["duration_ns"].sum()) == nsys.kernel_time_ns
    assert rows["op"].notna().all()
    time = ro.query(
        f"SELECT SUM(CASE WHEN op IS NULL THEN duration_ns ELSE 0 END) AS outside, SUM(duration_ns) AS total "
        f"FROM dispatch_dram WHERE run_id={run_id}"
    ).iloc[0]
    assert time["outside"] == 0 and time["total"] == nsys.kernel_time_ns
    # bytes per dispatch: ncu's, joined by (invocation, kernel ordinal)
    got = {(int(r.invocation), int(r.kernel_ordinal)): r for r in rows.itertuples()}
    assert set(got) == {(k.invocation, k.ordinal) for k in expected}
    for k in expected:
        row = got[(k.invocation, k.ordinal)]
        assert row.op == k.op
        assert normalise_kernel_name(row.kernel_name) == normalise_kernel_name(k.name)
        assert row.dram_read_bytes == pytest.approx(k.read_bytes, rel=1e-9, abs=1e-6)
        assert row.dram_write_bytes == pytest.approx(k.write_bytes, rel=1e-9, abs=1e-6)
    assert rows["dram_read_bytes"].sum() == pytest.approx(sum(k.read_bytes for k in expected), rel=1e-9)
    assert rows["dram_write_bytes"].sum() == pytest.approx(sum(k.write_bytes for k in expected), rel=1e-9)
    # ncu's own (serialised) durations are kept on its pass
    ncu_time = ro.query(f"SELECT SUM(duration_ns) AS ns FROM dispatch WHERE run_id={run_id} AND pass_index=1")
    assert int(ncu_time["ns"].iloc[0]) == sum(k.duration_ns for k in expected)

    # invocations per op: the NVTX ranges of both tools, counted here
    ncu_ops = Counter({k.invocation: k.op for k in expected}.values())
    assert ncu_ops == nsys.range_ops
    per_op = ro.query(f"SELECT op, invocations, dispatches FROM op_summary WHERE run_id={run_id}")
    assert dict(zip(per_op["op"], per_op["invocations"], strict=True)) == dict(ncu_ops)
    assert dict(zip(per_op["op"], per_op["dispatches"], strict=True)) == dict(Counter(k.op for k in expected))


def test_recorded_ncu_and_nsys_files_ingest_as_one_joined_run(tmp_path: Path, nsys_db: Path) -> None:
    cap = tmp_path / "cap"
    (cap / "trace").mkdir(parents=True)
    (cap / "ncu").mkdir()
    shutil.copy(fixture_path("h200-trial", NSYS_DB), cap / "trace" / "nsys.sqlite.gz")  # gzip accepted
    shutil.copy(fixture_path("h200-trial", NCU_CSV), cap / "ncu" / "ncu_raw.csv.gz")
    capture = read_capture(cap)
    assert capture.source_format == "nvidia"
    assert capture.profiler == "ncu+nsys"
    assert [(p.label, p.kind) for p in capture.passes] == [("trace", "trace"), ("ncu", "counter")]
    assert "no-trace-pass" not in {n.code for n in capture.notes}
    ro, run_id = _store(cap, tmp_path / "r.db")
    _check_joined_run(ro, run_id, nsys_facts(nsys_db), counter_pass_label="ncu")


def _recorded_pair(tmp_path: Path, *, bad_nsys: bool, bad_ncu: bool) -> Path:
    """The recorded nsys + ncu pair in a capture folder; a kernel start that is text in the export
    and the last kernel row twice in the CSV where asked."""
    cap = tmp_path / "cap"
    gunzip(fixture_path("h200-trial", NSYS_DB), cap / "trace" / "nsys.sqlite")
    gunzip(fixture_path("h200-trial", NCU_CSV), cap / "ncu" / "ncu_raw.csv")
    if bad_nsys:
        with sqlite3.connect(cap / "trace" / "nsys.sqlite") as conn:
            conn.execute(
                "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = 'abc' "
                "WHERE rowid = (SELECT MIN(rowid) FROM CUPTI_ACTIVITY_KIND_KERNEL)"
            )
    if bad_ncu:
        text = (cap / "ncu" / "ncu_raw.csv").read_text()
        (cap / "ncu" / "ncu_raw.csv").write_text(text + text.rstrip("\n").rsplit("\n", 1)[1] + "\n")
    return cap


def test_the_nsys_export_is_read_beside_the_ncu_csv_and_its_error_comes_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The export is read in a second thread while the CSV is parsed; the run is the one read in turn."""
    import threading

    import rocroof.capture.readers as readers

    threads: list[str] = []
    real = readers.nvidia.read_nsys_sqlite

    def read_nsys(*args: object) -> object:
        threads.append(threading.current_thread().name)
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(readers.nvidia, "read_nsys_sqlite", read_nsys)
    capture = read_capture(_recorded_pair(tmp_path / "good", bad_nsys=False, bad_ncu=False))
    assert len(threads) == 1 and threads[0].startswith("rocroof-nsys")
    assert [(p.label, p.kind, len(p.dispatches)) for p in capture.passes] == [
        ("trace", "trace", nsys_facts(tmp_path / "good" / "cap" / "trace" / "nsys.sqlite").kernels),
        ("ncu", "counter", 343),
    ]
    with pytest.raises(ParseError, match=r"nsys\.sqlite.*CUPTI_ACTIVITY_KIND_KERNEL\.start holds 'abc'"):
        read_capture(_recorded_pair(tmp_path / "both", bad_nsys=True, bad_ncu=True))
    with pytest.raises(ParseError, match=r"ncu_raw\.csv.*appears twice"):
        read_capture(_recorded_pair(tmp_path / "ncu", bad_nsys=False, bad_ncu=True))
    with pytest.raises(ParseError, match=r"nsys\.sqlite.*holds 'abc'"):
        read_capture(_recorded_pair(tmp_path / "nsys", bad_nsys=True, bad_ncu=False))


def test_an_ncu_csv_with_a_trailing_comma_on_every_row_is_refused_not_shifted(tmp_path: Path) -> None:
    """Nsight Compute's first column (ID) counts 0, 1, 2...: pandas would take it for its own index
    and shift every column left by one (found by a trial user: the Process ID read as the kernel ID)."""
    cap = tmp_path / "cap"
    csv_path = gunzip(fixture_path("h200-trial", NCU_CSV), cap / "ncu" / "ncu_raw.csv")
    lines = csv_path.read_text().splitlines()
    csv_path.write_text("\n".join([lines[0], *(line + "," for line in lines[1:])]) + "\n")
    with pytest.raises(ParseError) as err:
        read_capture(cap)
    assert err.value.row == 3 and err.value.path == str(csv_path)
    assert "this row has" in str(err.value) and "a trailing separator on every row?" in str(err.value)


def test_text_in_a_metric_column_of_numbers_is_refused_not_read_as_not_collected(tmp_path: Path) -> None:
    """One ``dram__bytes_read.sum`` cell of the recorded CSV made ``abc``: one line naming the column and
    row (it read as "not collected" for that kernel, found by a trial user). A column of text only
    (``launch__cluster_scheduling_policy``) stays a metric without a number."""
    import csv as csv_module

    cap = tmp_path / "cap"
    csv_path = gunzip(fixture_path("h200-trial", NCU_CSV), cap / "ncu" / "ncu_raw.csv")
    with csv_path.open(newline="") as fh:
        rows = list(csv_module.reader(fh))
    column = rows[0].index("dram__bytes_read.sum")
    assert rows[1][column].strip() and rows[4][column].replace(".", "").replace(",", "").isdigit()
    rows[4][column] = "abc"  # file row 5: header, units, then kernels
    with csv_path.open("w", newline="") as fh:
        csv_module.writer(fh, quoting=csv_module.QUOTE_ALL).writerows(rows)
    with pytest.raises(ParseError) as err:
        read_capture(cap)
    assert err.value.row == 5 and err.value.path == str(csv_path)
    assert "column 'dram__bytes_read.sum' holds 'abc'; expected a number (or n/a)" in str(err.value)


def test_an_ncu_csv_alone_ingests_with_serialised_timings(tmp_path: Path) -> None:
    expected = ncu_kernels()
    cap = tmp_path / "cap"
    cap.mkdir()
    gunzip(fixture_path("h200-trial", NCU_CSV), cap / "dense_ncu_raw.csv")
    capture = read_capture(cap)
    assert capture.profiler == "ncu"
    assert "no-trace-pass" in {n.code for n in capture.notes}
    assert list(capture.agents["gfx_arch"]) == ["sm_90"]  # from the CC column
    ro, run_id = _store(cap, tmp_path / "r.db")
    run = ro.query(
        f"SELECT timing_source, serialised_timings, gpu_arch, attribution_method FROM run WHERE run_id={run_id}"
    )
    assert run.iloc[0]["timing_source"] == "counter_pass"
    assert run.iloc[0]["serialised_timings"]
    assert run.iloc[0]["gpu_arch"] == "sm_90"
    assert run.iloc[0]["attribution_method"] == "nvtx_stack"
    rows = ro.query(f"SELECT op, duration_ns, dram_read_bytes FROM dispatch_dram WHERE run_id={run_id}")
    assert len(rows) == len(expected) == 343
    assert int(rows["duration_ns"].sum()) == sum(k.duration_ns for k in expected)
    assert rows["op"].notna().all()
    assert rows["dram_read_bytes"].sum() == pytest.approx(sum(k.read_bytes for k in expected), rel=1e-9)
    per_op = ro.query(f"SELECT op, invocations FROM op_summary WHERE run_id={run_id}")
    own = Counter({k.invocation: k.op for k in expected}.values())
    assert dict(zip(per_op["op"], per_op["invocations"], strict=True)) == dict(own)
    codes = set(ro.query(f"SELECT code FROM run_note WHERE run_id={run_id}")["code"])
    assert {"no-trace-pass", "serialised-timings"} <= codes


def test_a_single_ncu_csv_file_is_a_capture() -> None:
    capture = read_capture(fixture_path("h200-trial", NCU_CSV))
    assert capture.source_format == "nvidia"
    assert [(p.label, p.kind, len(p.dispatches)) for p in capture.passes] == [(NCU_CSV[: -len(".gz")], "counter", 343)]
    assert "no-trace-pass" in {n.code for n in capture.notes}


def test_an_ncu_report_without_its_csv_export_is_refused(tmp_path: Path) -> None:
    cap = tmp_path / "cap"
    cap.mkdir()
    (cap / "dense.ncu-rep").write_bytes(b"\x00binary report")
    with pytest.raises(InputError, match=r"ncu --import dense\.ncu-rep --csv --page raw"):
        read_capture(cap)
    result = CliRunner().invoke(cli, ["ingest", str(cap), "--db", str(tmp_path / "r.db")])
    assert result.exit_code == 1, result.output
    assert result.output.startswith("Error: ")
    assert "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert "ncu --import dense.ncu-rep --csv --page raw" in result.output
    assert (
        not (tmp_path / "r.db").exists()
        or Store(tmp_path / "r.db", read_only=True).query("SELECT COUNT(*) AS n FROM run")["n"].iloc[0] == 0
    )


def test_two_nsys_exports_in_one_capture_are_refused(tmp_path: Path) -> None:
    cap = tmp_path / "cap"
    for name in ("a", "b"):
        (cap / name).mkdir(parents=True)
        shutil.copy(fixture_path("h200-trial", NSYS_DB), cap / name / "nsys.sqlite.gz")
    with pytest.raises(InputError, match="more than one Nsight Systems export"):
        read_capture(cap)


# ---- the backend: metrics, GPUs, choosing it ---------------------------------------------------


def test_resolve_metrics_presets_and_names() -> None:
    assert resolve_metrics("dram") == [DRAM_METRICS]
    assert resolve_metrics("roofline") == [DRAM_METRICS + FLOP_METRICS]
    assert "dram__bytes_read.sum" in DRAM_METRICS and "dram__bytes_write.sum" in DRAM_METRICS
    # names: commas or spaces; the duration is always collected, first
    assert resolve_metrics("dram__bytes_read.sum, lts__t_bytes.sum") == [
        ("gpu__time_duration.sum", "dram__bytes_read.sum", "lts__t_bytes.sum")
    ]
    assert resolve_metrics("gpu__time_duration.sum dram__bytes_write.sum") == [
        ("gpu__time_duration.sum", "dram__bytes_write.sum")
    ]
    for spec in ("TCC_EA0_RDREQ_sum", "dram__bytes_read.sum,FETCH_SIZE", "", "  ,  "):
        with pytest.raises(ConfigError, match="Nsight Compute metric names"):
            resolve_metrics(spec)
    with pytest.raises(ConfigError, match="FETCH_SIZE"):
        resolve_metrics("dram__bytes_read.sum,FETCH_SIZE")


def test_parse_smi_reads_each_gpu() -> None:
    text = "NVIDIA H200, 9.0\nNVIDIA GeForce RTX 4090, 8.9\nNo devices were found\n\n"
    devices = parse_smi(text)
    assert [(d.name, d.arch) for d in devices] == [("NVIDIA H200", "sm_90"), ("NVIDIA GeForce RTX 4090", "sm_89")]
    assert parse_smi("") == []


def test_choose_profiler_by_arch_and_options() -> None:
    assert isinstance(choose_profiler(None, "sm_90"), NsightPair)
    assert isinstance(choose_profiler(None, "gfx942"), Rocprofv3)
    assert isinstance(choose_profiler("nsight"), NsightPair)
    pair = choose_profiler("ncu", cache_control="none", nvtx_include=["ggml:MUL_MAT/"], nsys="none")
    assert isinstance(pair, NsightPair)
    assert (pair.cache_control, pair.nvtx_include, pair.nsys) == ("none", ("ggml:MUL_MAT/",), "none")
    with pytest.raises(ConfigError, match="--output-format belongs to --profiler rocprofv3"):
        choose_profiler("ncu", output_format="rocpd")
    with pytest.raises(ConfigError, match="--output-format belongs to --profiler rocprofv3"):
        choose_profiler(None, "sm_90", output_format="csv")
    for kwargs in ({"cache_control": "none"}, {"nvtx_include": ["x"]}, {"nsys": "none"}):
        with pytest.raises(ConfigError, match="belong to --profiler ncu"):
            choose_profiler("rocprofv3", **kwargs)
    with pytest.raises(ConfigError, match="expected one of rocprofv3, ncu"):
        choose_profiler("nvprof")


def test_nsight_pair_settings_and_bad_cache_control() -> None:
    with pytest.raises(ConfigError, match="--cache-control 'some'"):
        NsightPair(cache_control="some")
    assert NsightPair().settings == {
        "ncu_cache_control": "all",
        "ncu_clock_control": "none",
        "ncu_replay_mode": "kernel",
    }
    assert NsightPair(cache_control="none", nvtx_include=["a/", "b/"]).settings["ncu_nvtx_include"] == "a/ b/"


def _tool(directory: Path, name: str, body: str = "exit 0") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


NCU_VERSION = (
    'echo "NVIDIA (R) Nsight Compute Command Line Profiler"\n'
    'echo "Copyright (c) 2018-2025 NVIDIA Corporation"\n'
    'echo "Version 2025.3.1.0 (build 36398880) (public-release)"'
)


def test_locate_nsys(tmp_path: Path) -> None:
    nsys = _tool(tmp_path / "bin", "nsys")
    assert NsightPair(nsys="none").locate_nsys() is None
    assert NsightPair(nsys=str(nsys)).locate_nsys() == str(nsys)
    with pytest.raises(ProfilerNotFound, match="--nsys .*: not found"):
        NsightPair(nsys=str(tmp_path / "missing" / "nsys")).locate_nsys()


def test_plan_builds_the_nsys_and_ncu_commands(tmp_path: Path) -> None:
    nsys = str(_tool(tmp_path / "bin", "nsys"))
    out = tmp_path / "cap"
    include = ["ggml:MUL_MAT/", "regex:ggml:.*/"]
    pair = NsightPair(ncu="ncu", nsys=nsys, cache_control="none", nvtx_include=include, bandwidth_probe=False)
    env = {"GGML_CUDA_MARKERS": "1", "GGML_CUDA_OP_META": str(out / "trace" / "ggml-op-meta.json")}
    runs = pair.plan(APP, out, Device("sm_90"), resolve_metrics("dram"), env)
    assert [(r.label, r.kind) for r in runs] == [
        ("trace", "trace"),
        ("trace", "export"),
        ("ncu", "counter"),
        ("ncu", "export"),
    ]
    trace, trace_export, counter, counter_export = runs

    assert trace.argv[:2] == (nsys, "profile")
    assert trace.argv[trace.argv.index("-t") + 1] == "cuda,nvtx"
    assert "--sample=none" in trace.argv and "--cpuctxsw=none" in trace.argv
    report = trace.argv[trace.argv.index("-o") + 1]
    assert report == str(out / "trace" / "nsys")
    assert trace.argv[-len(APP) :] == tuple(APP)
    assert trace_export.argv[:4] == (nsys, "export", "--type", "sqlite")
    assert trace_export.argv[trace_export.argv.index("-o") + 1] == str(out / "trace" / "nsys.sqlite")
    assert trace_export.argv[-1] == report + ".nsys-rep"

    a = counter.argv
    assert a[0] == "ncu" and "--nvtx" in a
    assert a[a.index("--cache-control") + 1] == "none"
    assert a[a.index("--clock-control") + 1] == "none"
    assert a[a.index("--metrics") + 1].split(",") == list(DRAM_METRICS)
    assert [a[i + 1] for i, w in enumerate(a) if w == "--nvtx-include"] == ["ggml:MUL_MAT/", "regex:ggml:.*/"]
    assert a[a.index("-o") + 1] == str(out / "ncu" / "ncu")
    assert a[-len(APP) :] == tuple(APP)
    assert counter.counters == DRAM_METRICS
    assert counter_export.argv[:2] == ("sh", "-c")
    words = shlex.split(counter_export.argv[2])
    assert words == [
        "ncu",
        "--import",
        str(out / "ncu" / "ncu.ncu-rep"),
        "--csv",
        "--page",
        "raw",
        ">",
        str(out / "ncu" / "ncu_raw.csv"),
    ]

    # the sidecar is written by the trace run only; the markers are on in both application runs
    assert trace.env == env
    assert counter.env == {"GGML_CUDA_MARKERS": "1"}
    # default cache control: ncu's own (flush before each kernel)
    plain = NsightPair(nsys=nsys, bandwidth_probe=False)
    default = plain.plan(APP, out, Device("sm_90"), resolve_metrics("dram"), env)[2].argv
    assert default[default.index("--cache-control") + 1] == "all"
    assert "--nvtx-include" not in default


def test_plan_without_nsys_gives_the_sidecar_to_the_ncu_run(tmp_path: Path) -> None:
    out = tmp_path / "cap"
    env = {"GGML_CUDA_MARKERS": "1", "GGML_CUDA_OP_META": str(out / "trace" / "ggml-op-meta.json")}
    runs = NsightPair(nsys="none", bandwidth_probe=False).plan(APP, out, Device("sm_90"), resolve_metrics("dram"), env)
    assert [(r.label, r.kind) for r in runs] == [("ncu", "counter"), ("ncu", "export")]
    assert runs[0].env == env


def test_a_run_pinned_to_one_gpu_gets_its_own_ncu_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Nsight Compute's lock file lives in $TMPDIR: one directory per pinned GPU lets two GPUs profile at once
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    pair = NsightPair(nsys="none", bandwidth_probe=False)
    runs = pair.plan(APP, tmp_path / "a", Device("sm_90"), resolve_metrics("dram"), {"CUDA_VISIBLE_DEVICES": "1"})
    assert runs[0].env["TMPDIR"] == str(tmp_path / "tmp" / "rocroof-ncu-lock-1")
    assert (tmp_path / "tmp" / "rocroof-ncu-lock-1").is_dir()
    uuid = {"CUDA_VISIBLE_DEVICES": "GPU-1b2c/x"}
    assert (
        pair.plan(APP, tmp_path / "b", Device("sm_90"), resolve_metrics("dram"), uuid)[0]
        .env["TMPDIR"]
        .endswith("rocroof-ncu-lock-GPU-1b2c_x")
    )
    for env in ({}, {"CUDA_VISIBLE_DEVICES": "0,1"}, {"CUDA_VISIBLE_DEVICES": "1", "TMPDIR": "/scratch"}):
        run = pair.plan(APP, tmp_path / "c", Device("sm_90"), resolve_metrics("dram"), dict(env))[0]
        assert run.env.get("TMPDIR") == env.get("TMPDIR")


def test_plan_refuses_an_amd_gpu(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="gfx942 is an AMD architecture"):
        NsightPair(nsys="none").plan(APP, tmp_path / "o", Device("gfx942"), resolve_metrics("dram"), {})


# ---- collect with a fake nsys/ncu that writes the recorded files ------------------------------


PROBE_RESULT = {
    "gbps_best": 4000.0,
    "gbps_median": 3950.0,
    "bytes_per_copy": 1 << 30,
    "repeats": 10,
    "device": "NVIDIA H200",
}


class FakeNsight:
    """A runner standing in for nsys and ncu: each command leaves what the real tool would.

    ``nsys profile`` writes the report, ``nsys export`` the recorded SQLite export, ``ncu`` the
    report, and the ``ncu --import`` shell line the recorded raw CSV. Every call is recorded with
    its environment and whether the sidecar's directory existed when the application started
    (the llama.cpp hook ``fopen``\\ s the file and creates no directory).
    """

    def __init__(self, ncu: str, nsys: str | None) -> None:
        self.ncu, self.nsys = ncu, nsys
        self.calls: list[tuple[tuple[str, ...], dict[str, str]]] = []
        self.sidecar_dir_ready: list[bool] = []

    def __call__(self, argv: Sequence[str], env: dict[str, str], log: Path) -> int:
        argv = tuple(argv)
        log.parent.mkdir(parents=True, exist_ok=True)  # as subprocess_runner does
        self.calls.append((argv, dict(env)))
        meta = env.get("GGML_CUDA_OP_META")
        if meta is not None:
            self.sidecar_dir_ready.append(Path(meta).parent.is_dir())
        if argv[1:3] == ("-m", "rocroof.analysis.bandwidth"):  # the probe: a result an H200 could give
            probe = Path(argv[argv.index("--out") + 1])
            probe.parent.mkdir(parents=True, exist_ok=True)
            probe.write_text(json.dumps(PROBE_RESULT))
        elif argv[0] == self.nsys and argv[1] == "profile":
            report = Path(argv[argv.index("-o") + 1])
            report.with_name(report.name + ".nsys-rep").write_bytes(b"fake nsys report")
        elif argv[0] == self.nsys and argv[1] == "export":
            if not Path(argv[-1]).is_file():
                log.write_text(f"no such report {argv[-1]}\n")
                return 1
            gunzip(fixture_path("h200-trial", NSYS_DB), Path(argv[argv.index("-o") + 1]))
        elif argv[0] == self.ncu:
            report = Path(argv[argv.index("-o") + 1])
            report.with_name(report.name + ".ncu-rep").write_bytes(b"fake ncu report")
        elif argv[:2] == ("sh", "-c"):
            words = shlex.split(argv[2])
            assert words[:2] == [self.ncu, "--import"] and words[3:7] == ["--csv", "--page", "raw", ">"]
            if not Path(words[2]).is_file():
                log.write_text(f"==ERROR== cannot open {words[2]}\n")
                return 1
            gunzip(fixture_path("h200-trial", NCU_CSV), Path(words[7]))
        else:
            log.write_text(f"unexpected command {argv}\n")
            return 127
        log.write_text("ok\n")
        return 0


def _pair(tmp_path: Path, *, nsys: bool = True, **kwargs: object) -> NsightPair:
    fixture_path("h200-trial", NSYS_DB)  # skip before anything runs when the recordings are absent
    fixture_path("h200-trial", NCU_CSV)
    ncu = _tool(tmp_path / "bin", "ncu", NCU_VERSION)
    nsys_path = str(_tool(tmp_path / "bin", "nsys")) if nsys else "none"
    return NsightPair(ncu=str(ncu), nsys=nsys_path, **kwargs)  # type: ignore[arg-type]


def test_collect_with_ncu_and_nsys_then_ingest(tmp_path: Path) -> None:
    pair = _pair(tmp_path, nvtx_include=["regex:ggml:.*/"])
    out = tmp_path / "cap"
    plan = make_plan(APP, out, counters="dram", arch="sm_90", profiler=pair)
    assert plan.profiler == "ncu+nsys"
    assert plan.output_format == "nsys-sqlite+ncu-csv"
    assert plan.sdk_version == "2025.3.1.0"
    fake = FakeNsight(pair.ncu, pair.nsys)
    capture_dir = execute(plan, APP, runner=fake)
    assert capture_dir == out

    ran = [(argv[0], argv[1]) for argv, _ in fake.calls]
    assert ran == [
        (sys.executable, "-m"),  # the bandwidth probe, in the application's GPU pinning
        (pair.nsys, "profile"),
        (pair.nsys, "export"),
        (pair.ncu, "--nvtx"),
        ("sh", "-c"),
    ]
    (probe_argv, probe_env), (trace_argv, trace_env), _, (ncu_argv, ncu_env), _ = fake.calls
    assert probe_argv[1:3] == ("-m", "rocroof.analysis.bandwidth") and "GGML_CUDA_MARKERS" not in probe_env
    assert trace_env["GGML_CUDA_OP_META"] == str(out / "trace" / "ggml-op-meta.json")
    assert "GGML_CUDA_OP_META" not in ncu_env
    assert trace_env["GGML_CUDA_MARKERS"] == ncu_env["GGML_CUDA_MARKERS"] == "1"
    assert fake.sidecar_dir_ready == [True]
    assert ncu_argv[ncu_argv.index("--nvtx-include") + 1] == "regex:ggml:.*/"
    assert ncu_argv[ncu_argv.index("--cache-control") + 1] == "all"

    manifest = json.loads((out / "rocroof-collect.json").read_text())
    assert manifest["profiler"] == "ncu+nsys"
    assert manifest["profiler_version"] == "2025.3.1.0"
    assert manifest["command"] == APP
    assert manifest["arch"] == "sm_90"
    assert manifest["settings"] == {
        "ncu_cache_control": "all",
        "ncu_clock_control": "none",
        "ncu_replay_mode": "kernel",
        "ncu_nvtx_include": "regex:ggml:.*/",
    }
    assert [(p["dir"], p["kind"]) for p in manifest["passes"]] == [("trace", "trace"), ("ncu", "counter")]
    assert manifest["passes"][1]["counters"] == list(DRAM_METRICS)
    assert [e["dir"] for e in manifest["exports"]] == ["trace", "ncu"]
    assert manifest["probes"] == [
        {
            "dir": "probe",
            "argv": list(probe_argv),
            "output": "probe/bandwidth.json",
            "wall_s": manifest["probes"][0]["wall_s"],
            "error": None,
        }
    ]

    ro, run_id = _store(capture_dir, tmp_path / "r.db")
    _check_joined_run(ro, run_id, nsys_facts(out / "trace" / "nsys.sqlite"), counter_pass_label="ncu")
    run = ro.query(f"SELECT profiler, profiler_version, command, cache_control FROM run WHERE run_id={run_id}").iloc[0]
    assert run["profiler"] == "ncu+nsys"
    assert run["profiler_version"] == "2025.3.1.0"
    assert run["command"] == " ".join(APP)
    assert run["cache_control"] == "all"
    settings = ro.query(f"SELECT key, value FROM run_setting WHERE run_id={run_id}")
    stored = dict(zip(settings["key"], settings["value"], strict=True))
    assert stored["ncu_cache_control"] == "all"
    assert stored["ncu_nvtx_include"] == "regex:ggml:.*/"
    codes = set(ro.query(f"SELECT code FROM run_note WHERE run_id={run_id}")["code"])
    assert "missing-counter" not in codes  # the recorded CSV holds every metric of the dram preset
    requested = ro.query(f"SELECT requested_counters FROM pass WHERE run_id={run_id} AND pass_index=1")
    assert requested["requested_counters"].iloc[0].split() == list(DRAM_METRICS)
    # the probe's best copy is the run's DRAM ceiling, ahead of the H200 datasheet's 4,800 GB/s
    peak = ro.query(f"SELECT dram_peak_gbps, dram_peak_source FROM run WHERE run_id={run_id}").iloc[0]
    assert peak["dram_peak_gbps"] == PROBE_RESULT["gbps_best"]
    assert peak["dram_peak_source"].startswith("measured: NVIDIA H200 device-to-device copy, best of 10 x 1 GiB")


def test_nsys_exiting_0_without_its_report_is_a_failed_run_with_the_log_named(tmp_path: Path) -> None:
    # seen on the H200: nsys profile exits 0 when its importer cannot load libdw, and writes no report
    pair = _pair(tmp_path)
    out = tmp_path / "cap"
    plan = make_plan(APP, out, counters="dram", arch="sm_90", profiler=pair)
    fake = FakeNsight(pair.ncu, pair.nsys)

    def importer_broken(argv: Sequence[str], env: dict[str, str], log: Path) -> int:
        if tuple(argv[:2]) == (pair.nsys, "profile"):
            log.parent.mkdir(parents=True, exist_ok=True)
            log.write_text("QdstrmImporter: error while loading shared libraries: libdw.so.1\n")
            return 0
        return fake(argv, env, log)

    with pytest.raises(ProfilerFailed) as err:
        execute(plan, APP, runner=importer_broken)
    assert "wrote no nsys.nsys-rep" in str(err.value) and "libdw.so.1" in str(err.value)
    assert str(out / "trace" / "nsys.log") in str(err.value)


def test_a_failed_bandwidth_probe_is_recorded_and_the_capture_goes_on(tmp_path: Path) -> None:
    pair = _pair(tmp_path)
    out = tmp_path / "cap"
    plan = make_plan(APP, out, counters="dram", arch="sm_90", profiler=pair)
    fake = FakeNsight(pair.ncu, pair.nsys)

    def no_memory(argv: Sequence[str], env: dict[str, str], log: Path) -> int:
        if tuple(argv[1:3]) == ("-m", "rocroof.analysis.bandwidth"):
            log.parent.mkdir(parents=True, exist_ok=True)
            log.write_text("rocroof bandwidth probe: cuMemAlloc_v2 failed: out of memory\n")
            return 1
        return fake(argv, env, log)

    execute(plan, APP, runner=no_memory)
    manifest = json.loads((out / "rocroof-collect.json").read_text())
    assert "out of memory" in manifest["probes"][0]["error"]
    assert [p["dir"] for p in manifest["passes"]] == ["trace", "ncu"]
    assert not (out / "probe" / "bandwidth.json").exists()
    ro, run_id = _store(out, tmp_path / "r.db")
    peak = ro.query(f"SELECT dram_peak_gbps, dram_peak_source FROM run WHERE run_id={run_id}").iloc[0]
    assert peak["dram_peak_gbps"] == pytest.approx(2 * 3.201 * 6016 / 8)  # the H200 memory clock x bus width
    assert "measured" not in peak["dram_peak_source"]
    notes = ro.query(f"SELECT code, message FROM run_note WHERE run_id={run_id} AND code='probe-failed'")
    assert "out of memory" in notes["message"].iloc[0]
    manifest["probes"][0]["error"] = "   "  # a failure recorded without a reason
    (out / "rocroof-collect.json").write_text(json.dumps(manifest))
    ro, run_id = _store(out, tmp_path / "r2.db")
    notes = ro.query(f"SELECT message FROM run_note WHERE run_id={run_id} AND code='probe-failed'")
    assert "(no reason recorded)" in notes["message"].iloc[0]


def test_collect_with_cache_control_none_records_it(tmp_path: Path) -> None:
    pair = _pair(tmp_path, cache_control="none")
    out = tmp_path / "cap"
    plan = make_plan(APP, out, counters="dram", arch="sm_90", profiler=pair)
    fake = FakeNsight(pair.ncu, pair.nsys)
    execute(plan, APP, runner=fake)
    ncu_argv = next(argv for argv, _ in fake.calls if argv[0] == pair.ncu)
    assert ncu_argv[ncu_argv.index("--cache-control") + 1] == "none"
    assert "--nvtx-include" not in ncu_argv
    manifest = json.loads((out / "rocroof-collect.json").read_text())
    assert manifest["settings"]["ncu_cache_control"] == "none"
    ro, run_id = _store(out, tmp_path / "r.db")
    assert ro.query(f"SELECT cache_control FROM run WHERE run_id={run_id}")["cache_control"].iloc[0] == "none"


def test_collect_default_counters_are_the_roofline_preset_and_missing_ones_are_named(tmp_path: Path) -> None:
    pair = _pair(tmp_path)
    out = tmp_path / "cap"
    plan = make_plan(APP, out, arch="sm_90", profiler=pair)
    assert plan.runs[3].counters == DRAM_METRICS + FLOP_METRICS  # after the probe, nsys and its export
    execute(plan, APP, runner=FakeNsight(pair.ncu, pair.nsys))
    frames = build_run(read_capture(out))
    missing = [n.message for n in frames.notes if n.code == "missing-counter"]
    assert len(missing) == 1
    header = set(ncu_rows()[0])
    absent = [m for m in FLOP_METRICS if m not in header]
    assert absent  # the recorded trial collected no FLOP counters
    for name in absent:
        assert name in missing[0]
    for name in DRAM_METRICS:
        assert name not in missing[0]


def test_collect_without_nsys_gives_the_sidecar_to_ncu_and_notes_it(tmp_path: Path) -> None:
    pair = _pair(tmp_path, nsys=False)
    out = tmp_path / "cap"
    plan = make_plan(APP, out, counters="dram", arch="sm_90", profiler=pair)
    assert plan.output_format == "ncu-csv"
    assert [(r.label, r.kind) for r in plan.runs] == [("probe", "probe"), ("ncu", "counter"), ("ncu", "export")]
    fake = FakeNsight(pair.ncu, None)
    execute(plan, APP, runner=fake)
    _, (ncu_argv, ncu_env), _ = fake.calls
    assert ncu_argv[0] == pair.ncu
    assert ncu_env["GGML_CUDA_OP_META"] == str(out / "trace" / "ggml-op-meta.json")
    assert fake.sidecar_dir_ready == [True]  # the hook can create the file
    capture = read_capture(out)
    assert "no-trace-pass" in {n.code for n in capture.notes}
    assert [p.kind for p in capture.passes] == ["counter"]
    ro, run_id = _store(out, tmp_path / "r.db")
    run = ro.query(f"SELECT timing_source, serialised_timings FROM run WHERE run_id={run_id}").iloc[0]
    assert run["timing_source"] == "counter_pass"
    assert run["serialised_timings"]
    expected = ncu_kernels()
    total = ro.query(f"SELECT COUNT(*) AS n, SUM(duration_ns) AS ns FROM dispatch_dram WHERE run_id={run_id}").iloc[0]
    assert total["n"] == len(expected)
    assert int(total["ns"]) == sum(k.duration_ns for k in expected)


# ---- the command line ------------------------------------------------------------------------


def test_collect_dry_run_prints_the_nsys_and_ncu_commands(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    nsys = _tool(bin_dir, "nsys")
    out = tmp_path / "o"
    result = CliRunner().invoke(
        cli,
        ["collect", "--profiler", "ncu", "--dry-run", "--arch", "sm_90", "--out", str(out), "--", "app", "-m", "x"],
        env={"PATH": str(bin_dir)},
    )
    assert result.exit_code == 0, result.output
    text = result.output
    assert "2 application run(s)" in text
    assert "ncu_cache_control=all" in text
    assert f"{nsys} profile -t cuda,nvtx" in text
    assert f"{nsys} export --type sqlite" in text
    assert "ncu --nvtx --clock-control none --cache-control all" in text
    assert "--csv --page raw" in text
    assert not out.exists()
    # the bandwidth probe counts nothing: its line says what it measures, not an empty list of counters
    assert "probe: counters" not in text
    assert (
        "  probe: the GPU's copy bandwidth (1 GiB device-to-device copies, about a second; no counters): the run's "
        "measured DRAM ceiling (--no-bandwidth-probe skips it)\n" in text
    )
    # the ncu run lists what it counts: the roofline preset (default for ncu), DRAM bytes among them
    ncu_line = next(line for line in text.splitlines() if line.startswith("  ncu: counters "))
    assert {"dram__bytes_read.sum", "dram__bytes_write.sum", "gpu__time_duration.sum"} <= set(ncu_line.split()[2:])

    # --nsys none: the ncu run alone; --cache-control and --nvtx-include reach its command
    result = CliRunner().invoke(
        cli,
        [
            "collect",
            "--profiler",
            "ncu",
            "--nsys",
            "none",
            "--cache-control",
            "none",
            "--nvtx-include",
            "ggml:MUL_MAT/",
            "--dry-run",
            "--arch",
            "sm_90",
            "--out",
            str(out),
            "--",
            "app",
        ],
        env={"PATH": str(bin_dir)},
    )
    assert result.exit_code == 0, result.output
    assert "1 application run(s)" in result.output
    assert " profile -t cuda,nvtx" not in result.output
    assert "--cache-control none" in result.output
    assert "--nvtx-include ggml:MUL_MAT/" in result.output


def test_collect_rocprofv3_options_are_refused_with_ncu(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli,
        ["collect", "--profiler", "ncu", "--output-format", "csv", "--dry-run", "--arch", "sm_90", "--", "app"],
    )
    assert result.exit_code == 1, result.output
    assert result.output.startswith("Error: --output-format belongs to --profiler rocprofv3")
    assert len(result.output.strip().splitlines()) == 1


def test_ingest_the_recorded_pair_from_the_command_line(tmp_path: Path) -> None:
    cap = tmp_path / "cap"
    cap.mkdir()
    shutil.copy(fixture_path("h200-trial", NSYS_DB), cap / "nsys.sqlite.gz")
    shutil.copy(fixture_path("h200-trial", NCU_CSV), cap / "ncu_raw.csv.gz")
    db = tmp_path / "r.db"
    result = CliRunner().invoke(cli, ["ingest", str(cap), "--db", str(db)])
    assert result.exit_code == 0, result.output
    ro = Store(db, read_only=True)
    assert ro.query("SELECT COUNT(*) AS n FROM dispatch_dram")["n"].iloc[0] == 343
    report = CliRunner().invoke(cli, ["report", "--by", "op", "--format", "json", "--db", str(db)])
    assert report.exit_code == 0, report.output
    ops = {r["op"]: r for r in json.load(io.StringIO(report.output))["rows"]}
    own = Counter({k.invocation: k.op for k in ncu_kernels()}.values())
    assert {op: r["invocations"] for op, r in ops.items()} == dict(own)


@pytest.mark.parametrize("capture", ["dense500m-decode", "moe-prefill", "synthetic-2000"])
def test_nsys_export_read_as_arrow_equals_the_sqlite3_read(
    capture: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Arrow columns of ADBC's driver and sqlite3's rows give the same trace pass and agents."""
    import pandas as pd

    from rocroof.capture.readers import nvidia, sqlite_arrow

    from . import synthetic

    if capture.startswith("synthetic"):
        root = synthetic.capture("nvidia", 2000, tmp_path / "cache")
    else:
        root = Path(__file__).resolve().parent.parent / "examples" / "h200" / capture
    export = next(p for p in root.rglob("*") if p.name.startswith("nsys") and ".sqlite" in p.name)
    arrow_pass, arrow_agents, arrow_facts = nvidia.read_nsys_sqlite(export, "trace")
    monkeypatch.setattr(sqlite_arrow, "USE_ADBC", False)
    plain_pass, plain_agents, plain_facts = nvidia.read_nsys_sqlite(export, "trace")
    assert len(plain_pass.dispatches) > 0
    for name in ("dispatches", "markers", "launches"):
        pd.testing.assert_frame_equal(getattr(arrow_pass, name), getattr(plain_pass, name), check_dtype=True)
    pd.testing.assert_frame_equal(arrow_agents, plain_agents)
    assert arrow_facts == plain_facts


@pytest.mark.parametrize("head", ["99999999999999999999", "\u00b2", "9223372036854775808"])
def test_an_nvtx_thread_id_that_is_no_64_bit_number_is_an_unknown_thread(tmp_path: Path, head: str) -> None:
    """A thread word of digits past 2**63 - 1 (or superscript digits) made a traceback; now the thread is unknown."""
    path = tmp_path / "odd_thread.csv"
    stack = f'{head}  "<default domain>:ggml:ADD:l_out-0:5:none:none:none:none:none:none" '
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh, quoting=csv.QUOTE_ALL)
        w.writerow(["ID", "Kernel Name", NVTX_COLUMN, "CC", "gpu__time_duration.sum"])
        w.writerow(["", "", "", "", "nsecond"])
        w.writerow(["0", "void k(float *)", stack, "9.0", "100"])
    p, _ = read_ncu_csv(path, "ncu")
    assert region_messages(p.dispatches)[0] == "ggml:ADD:l_out-0:5"
    assert p.dispatches["thread_id"].isna().iloc[0]


def test_an_ncu_export_rewritten_with_minimal_quoting_reads_as_the_original(tmp_path: Path) -> None:
    """ncu quotes every cell; a script that filters rows with Python's csv module quotes only where needed."""
    with gzip.open(fixture_path("h200-trial", NCU_CSV), "rt", encoding="utf-8", newline="") as fh:
        rows = list(csv.reader(fh))
    plain = tmp_path / "plain" / "ncu_raw.csv"
    plain.parent.mkdir()
    with open(plain, "w", encoding="utf-8", newline="") as fh:
        csv.writer(fh).writerows(rows)
    assert plain.read_text(encoding="utf-8").startswith("ID,Process ID,")  # header cells unquoted
    assert is_ncu_csv(plain)
    ours = read_capture(plain).passes[0]
    original = read_capture(fixture_path("h200-trial", NCU_CSV)).passes[0]
    assert len(ours.dispatches) == len(rows) - 2  # header and units rows
    pd_testing = pytest.importorskip("pandas.testing")
    pd_testing.assert_frame_equal(ours.dispatches, original.dispatches)
    pd_testing.assert_frame_equal(ours.counters, original.counters)


@pytest.mark.parametrize("unit", ["furlong", "Mbit", ""])
def test_a_byte_counter_with_a_unit_rocroof_does_not_know_is_refused(tmp_path: Path, unit: str) -> None:
    """``dram__bytes_read.sum`` in an unknown unit would be stored off by that unit's factor: refused, row 2 named."""
    with gzip.open(fixture_path("h200-trial", NCU_CSV), "rt", encoding="utf-8", newline="") as fh:
        rows = list(csv.reader(fh))
    col = rows[0].index("dram__bytes_read.sum")
    assert rows[1][col] in ("Mbyte", "Kbyte", "byte")
    rows[1][col] = unit
    path = tmp_path / "ncu_raw.csv"
    with open(path, "w", encoding="utf-8", newline="") as fh:
        csv.writer(fh, quoting=csv.QUOTE_ALL).writerows(rows)
    if unit == "":  # no unit: bytes, as ncu writes for a plain count
        assert read_capture(path).passes[0].counters["counter_name"].eq("dram__bytes_read.sum").any()
        return
    # a byte metric rocroof does not read, in a unit it does not scale: left out, as before
    ratio = "smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.ratio"
    wider = [[*r, ratio if i == 0 else unit if i == 1 else "32"] for i, r in enumerate(rows)]
    wider[1][col] = rows[1][col] = "Mbyte"
    with open(path, "w", encoding="utf-8", newline="") as fh:
        csv.writer(fh, quoting=csv.QUOTE_ALL).writerows(wider)
    assert not read_capture(path).passes[0].counters["counter_name"].eq(ratio).any()
    rows[1][col] = unit
    with open(path, "w", encoding="utf-8", newline="") as fh:
        csv.writer(fh, quoting=csv.QUOTE_ALL).writerows(rows)
    with pytest.raises(ParseError) as err:
        read_capture(path)
    text = str(err.value)
    assert f"{path}:2:" in text and "dram__bytes_read.sum" in text and repr(unit) in text


@pytest.mark.parametrize("on_disk", [False, True])
def test_launch_threads_by_hand(on_disk: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """A dispatch's thread is its first launch call's; missing without a correlation id, a call or the call's thread."""
    import pandas as pd

    from rocroof import spill
    from rocroof.capture.readers import nvidia

    if on_disk:
        monkeypatch.setattr(spill, "SPILL_MIN_BYTES", 0)
    monkeypatch.setattr(nvidia.keys, "BLOCK", 2)  # several blocks
    corr = pd.Series(pd.array([5, None, 7, 9, 5, 4], dtype="Int64"))
    calls = pd.DataFrame(
        {
            "correlation_id": pd.array([4, 5, 5, 7], dtype="Int64"),
            "thread_id": pd.array([40, 11, 12, None], dtype="Int64"),
        }
    )
    expected = [11, None, None, None, 11, 40]
    for launches in (calls, calls.iloc[[3, 2, 1, 0]].reset_index(drop=True)):
        got = nvidia._launch_threads(corr, launches)
        assert [None if pd.isna(v) else int(v) for v in got] == (
            expected if launches is calls else [12, None, None, None, 12, 40]  # the first call of id 5 is then 12's
        )
        assert spill.is_spilled(got) == on_disk
