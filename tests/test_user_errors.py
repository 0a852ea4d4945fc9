"""Mistakes a first-time user made, and what rocroof must answer (one line, no traceback).

Each case comes from a new-user trial of the CLI; the expected answers are the behaviour a
user should get, not rocroof's earlier output.
"""

from __future__ import annotations

import csv
import gzip
import json
import os
import re
import shutil
import signal
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from rocroof import fileio
from rocroof.capture.readers import read_capture
from rocroof.cli import cli
from rocroof.errors import InputError, ParseError
from rocroof.store import Store

from .conftest import fixture_path
from .lockwait import held_write_lock, signal_after_first_line

KERNEL_HEADER = (
    '"Kind","Agent_Id","Queue_Id","Stream_Id","Thread_Id","Dispatch_Id","Kernel_Id","Kernel_Name","Correlation_Id",'
    '"Start_Timestamp","End_Timestamp","LDS_Block_Size","Scratch_Size","VGPR_Count","Accum_VGPR_Count","SGPR_Count",'
    '"Workgroup_Size_X","Workgroup_Size_Y","Workgroup_Size_Z","Grid_Size_X","Grid_Size_Y","Grid_Size_Z"'
)


def _row(dispatch: int, start: str, end: str, name: str = "k") -> str:
    return f'"KERNEL_DISPATCH","Agent 1",1,1,7,{dispatch},1,"{name}",{dispatch},{start},{end},0,0,8,0,16,64,1,1,64,1,1'


def run(*args: object, env: dict[str, str] | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(cli, [os.fsdecode(a) if isinstance(a, bytes) else str(a) for a in args], env=env)
    return result.exit_code, result.output


def one_line_error(*args: object, env: dict[str, str] | None = None) -> str:
    code, out = run(*args, env=env)
    assert code == 1, out
    assert out.startswith("Error: "), out
    assert "Traceback" not in out
    assert len(out.strip().splitlines()) == 1, out
    return out


def _capture(tmp_path: Path, rows: list[str], name: str = "cap") -> Path:
    cap = tmp_path / name
    cap.mkdir()
    (cap / "7_kernel_trace.csv").write_text(KERNEL_HEADER + "\n" + "\n".join(rows) + "\n")
    return cap


# ---- names and text that are not UTF-8 ---------------------------------------------------------


def test_capture_directory_whose_name_is_not_utf8(tmp_path: Path) -> None:
    cap = _capture(tmp_path, [_row(1, "100", "300")], name=os.fsdecode(b"na\xefme"))
    code, out = run("ingest", cap, "--db", tmp_path / "r.db")
    assert code == 0, out
    stored = Store(tmp_path / "r.db", read_only=True).query("SELECT source_path FROM run")["source_path"].iloc[0]
    assert stored.endswith("na\\xefme")


def test_file_name_that_is_not_utf8(tmp_path: Path) -> None:
    cap = tmp_path / "cap"
    cap.mkdir()
    (cap / os.fsdecode(b"7\xff_kernel_trace.csv")).write_text(KERNEL_HEADER + "\n" + _row(1, "100", "300") + "\n")
    code, out = run("ingest", cap, "--db", tmp_path / "r.db")
    assert code == 0, out


def test_label_and_query_that_are_not_utf8(tmp_path: Path) -> None:
    cap = _capture(tmp_path, [_row(1, "100", "300")])
    assert "not UTF-8" in one_line_error("ingest", cap, "--db", tmp_path / "r.db", "--label", os.fsdecode(b"k=\xff"))
    run("ingest", cap, "--db", tmp_path / "r.db")
    assert "not UTF-8" in one_line_error("query", os.fsdecode(b"SELECT '\xff'"), "--db", tmp_path / "r.db")


# ---- collect ----------------------------------------------------------------------------------


def test_collect_out_that_is_a_file(tmp_path: Path) -> None:
    f = tmp_path / "f"
    f.write_text("x")
    msg = one_line_error("collect", "--dry-run", "--arch", "gfx942", "--out", f, "--", "./app")
    assert "must be a directory" in msg


def test_collect_with_arch_but_no_rocprofv3_stops_before_running(tmp_path: Path) -> None:
    msg = one_line_error(
        "collect", "--arch", "gfx942", "--out", tmp_path / "o", "--", "./app", env={"PATH": "/nonexistent"}
    )
    assert "rocprofv3 not found" in msg
    assert not (tmp_path / "o").exists()


def test_collect_refuses_an_nvidia_arch_for_rocprofv3(tmp_path: Path) -> None:
    assert "NVIDIA" in one_line_error(
        "collect", "--profiler", "rocprofv3", "--dry-run", "--arch", "sm_90", "--", "./app"
    )


def test_collect_dry_run_quotes_the_command(tmp_path: Path) -> None:
    code, out = run(
        "collect", "--dry-run", "--arch", "gfx942", "--out", tmp_path / "o", "--", "app", "-p", "hi; rm -rf x"
    )
    assert code == 0, out
    assert "-- app -p 'hi; rm -rf x'" in out


# ---- report --------------------------------------------------------------------------------------


def test_top_dispatches_are_the_longest(tmp_path: Path) -> None:
    # durations 200, 900, 50, 600 ns: the two longest are dispatches 2 and 4, in that order
    rows = [_row(1, "100", "300"), _row(2, "400", "1300"), _row(3, "1400", "1450"), _row(4, "1500", "2100")]
    cap = _capture(tmp_path, rows)
    run("ingest", cap, "--db", tmp_path / "r.db")
    code, out = run("report", "--by", "dispatch", "--top", "2", "--format", "json", "--db", tmp_path / "r.db")
    assert code == 0, out
    assert [(r["dispatch_id"], r["duration_ns"]) for r in json.loads(out)["rows"]] == [(2, 900), (4, 600)]


def test_markdown_left_aligns_names_and_keeps_template_arguments(tmp_path: Path) -> None:
    cap = _capture(tmp_path, [_row(1, "100", "300", name="void mul_mat_vec_q<float, 8>(float const*, float*)")])
    run("ingest", cap, "--db", tmp_path / "r.db")
    code, out = run("report", "--by", "dispatch", "--format", "markdown", "--db", tmp_path / "r.db")
    assert code == 0, out
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("| # |"))
    assert lines[header + 1].startswith("|:---|:---|:---|---:")
    assert "`mul_mat_vec_q<float, 8>`" in lines[header + 2]


# ---- captures that are wrong -------------------------------------------------------------------


def test_one_rounded_timestamp_blanks_only_that_dispatch(tmp_path: Path) -> None:
    cap = _capture(tmp_path, [_row(1, "100", "300"), _row(2, "1.5e3", "1700")])
    code, out = run("ingest", cap, "--db", tmp_path / "r.db")
    assert code == 0, out
    assert "7_kernel_trace.csv" in out and "rounded timestamps" in out
    df = Store(tmp_path / "r.db", read_only=True).query("SELECT dispatch_id, duration_ns FROM dispatch_dram")
    assert dict(zip(df["dispatch_id"], df["duration_ns"], strict=True)) == {1: 200, 2: None} or (
        df.set_index("dispatch_id")["duration_ns"].loc[1] == 200
        and df.set_index("dispatch_id")["duration_ns"].isna().loc[2]
    )


def test_a_dispatch_that_ends_before_it_starts_is_reported(tmp_path: Path) -> None:
    cap = _capture(tmp_path, [_row(1, "100", "300"), _row(2, "900", "800")])
    code, out = run("ingest", cap, "--db", tmp_path / "r.db")
    assert code == 0, out
    assert "end before they start" in out


def test_a_repeated_dispatch_id_is_an_error(tmp_path: Path) -> None:
    cap = _capture(tmp_path, [_row(1, "100", "300"), _row(1, "400", "500")])
    msg = one_line_error("ingest", cap, "--db", tmp_path / "r.db")
    assert "7_kernel_trace.csv:3:" in msg and "appears twice" in msg


def test_a_capture_without_dispatches_is_an_error(tmp_path: Path) -> None:
    cap = _capture(tmp_path, [])
    assert "no kernel dispatches" in one_line_error("ingest", cap, "--db", tmp_path / "r.db")


def test_truncated_wide_pmc_perf_is_an_error(tmp_path: Path) -> None:
    src = fixture_path("rocprof-compute", "vcopy", "MI300X_A1")
    work = tmp_path / "w"
    shutil.copytree(src, work)
    data = (src / "pmc_perf.csv").read_bytes()
    (work / "pmc_perf.csv").chmod(0o644)
    (work / "pmc_perf.csv").write_bytes(data[:30000])  # cut inside the header line
    msg = one_line_error("ingest", work, "--db", tmp_path / "r.db")
    assert "pmc_perf.csv" in msg and "truncated" in msg


def test_a_folder_of_several_workloads_is_one_run_each(tmp_path: Path) -> None:
    folder = fixture_path("rocprof-compute")
    # every folder of the fixtures with a sysinfo.csv and a pmc_perf.csv is one recorded workload
    # (roofline-benchmark/MI200 holds measured peaks, no profile: not a capture)
    workloads = sorted(p.parent for p in folder.rglob("sysinfo.csv") if (p.parent / "pmc_perf.csv").is_file())
    assert len(workloads) >= 2
    db = tmp_path / "r.db"
    result = CliRunner().invoke(cli, ["ingest", str(folder), "--db", str(db)])
    assert result.exit_code == 0, result.output
    stored = Store(db, read_only=True).query("SELECT source_path FROM run ORDER BY source_path")["source_path"]
    assert list(stored) == sorted(str(w) for w in workloads)
    with pytest.raises(InputError, match=f"{len(workloads)} rocprofiler-compute workload"):
        read_capture(folder)  # the reader alone still refuses to merge them


def test_arch_only_fills_in_what_the_capture_does_not_record(tmp_path: Path) -> None:
    cap = fixture_path("rocprof-compute", "vcopy", "MI300X_A1_rocpd")
    assert "records gfx942" in one_line_error("ingest", cap, "--arch", "gfx90a", "--db", tmp_path / "r.db")
    assert "not a GPU architecture rocroof knows" in one_line_error(
        "ingest", cap, "--arch", "banana", "--db", tmp_path / "r.db"
    )


@pytest.mark.parametrize("arch", ["gfx9999", "gfx924", "sm_999", "gfx90a:"])
def test_a_mistyped_arch_is_refused_and_nothing_stored(tmp_path: Path, arch: str) -> None:
    # a trial user's --arch gfx9999 stored a run on "gfx9999", and gfx924 one with an info note only
    db = tmp_path / "r.db"
    msg = one_line_error("ingest", fixture_path("rpd", "mytrace.rpd.gz"), "--arch", arch, "--db", db)
    assert msg.startswith(f"Error: --arch {arch!r}: not a GPU architecture rocroof knows")
    for known in ("gfx908", "gfx90a", "gfx942", "gfx950", "gfx1151", "gfx1201", "sm_80", "sm_89", "sm_90"):
        assert re.search(rf"\b{known}\b", msg), known  # each named
    assert not db.exists()
    if arch == "gfx924":
        assert "did you mean gfx942?" in msg


def test_a_mistyped_arch_is_refused_once_for_a_folder_of_captures(tmp_path: Path) -> None:
    for name in ("a", "b"):
        (tmp_path / "m" / name).mkdir(parents=True)
        shutil.copy(fixture_path("rpd", "mytrace.rpd.gz"), tmp_path / "m" / name / "mytrace.rpd.gz")
    msg = one_line_error("ingest", tmp_path / "m", "--arch", "gfx9999", "--db", tmp_path / "r.db")
    assert msg.startswith("Error: --arch 'gfx9999': not a GPU architecture")  # once, before any capture is read


def _shipped_archs() -> set[str]:
    import yaml

    table = Path(__file__).resolve().parent.parent / "configs" / "peaks.yaml"
    return {str(g["gfx_arch"]) for g in yaml.safe_load(table.read_text())["gpus"] if g.get("gfx_arch")}


def test_every_arch_the_shipped_tables_know_is_accepted_with_and_without_features() -> None:
    from rocroof.analysis.arch import FORMULA_GFX, check_arch
    from rocroof.analysis.dram import family

    shipped = _shipped_archs()
    assert {"gfx908", "gfx90a", "gfx942", "gfx950", "gfx1100", "gfx1151", "gfx1201", "sm_80", "sm_89"} <= shipped
    for arch in shipped | set(FORMULA_GFX) | {"sm_90a", "sm_100f", "sm_120"}:
        assert check_arch(arch) == arch
        assert check_arch(f" {arch.upper()} ") == arch
        assert family(arch) is not None  # each has a DRAM byte formula
        if arch.startswith("gfx"):
            for features in (":xnack-", ":sramecc+:xnack-", ":xnack+"):
                assert check_arch(arch + features) == arch + features


def test_an_arch_only_a_custom_peaks_table_names_is_accepted(tmp_path: Path) -> None:
    from rocroof.analysis.arch import check_arch

    table = tmp_path / "peaks.yaml"
    table.write_text(
        "version: 2\ngpus:\n  - name: MI50\n    vendor: AMD\n    gfx_arch: gfx906\n"
        "    dram_gbps: {value: 1024, mark: unverified, source: test, reason: test}\n"
    )
    assert check_arch("gfx906", peaks=table) == "gfx906"
    with pytest.raises(InputError, match="not a GPU architecture rocroof knows"):
        check_arch("gfx906")  # the shipped table has no MI50


def test_ingest_keeps_an_arch_with_target_features(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    code, out = run("ingest", fixture_path("rpd", "mytrace.rpd.gz"), "--arch", "gfx90a:xnack-", "--db", db)
    assert code == 0, out
    con = sqlite3.connect(db)
    try:
        assert con.execute("SELECT DISTINCT gfx_arch FROM agent WHERE gfx_arch IS NOT NULL").fetchall() == [
            ("gfx90a:xnack-",)
        ]
    finally:
        con.close()


def test_no_instances_keeps_no_per_instance_values(tmp_path: Path) -> None:
    cap = fixture_path("rocprof-compute", "vcopy", "MI300X_A1")
    run("ingest", cap, "--no-instances", "--db", tmp_path / "r.db")
    n = Store(tmp_path / "r.db", read_only=True).query("SELECT COUNT(*) AS n FROM counter_instance")["n"].iloc[0]
    assert n == 0


def test_counter_and_kernel_files_from_different_runs_are_flagged(tmp_path: Path) -> None:
    # the docs' counter_collection.csv (pid 15606) and kernel_trace.csv come from different programs
    code, out = run("ingest", fixture_path("rocprofv3-docs"), "--db", tmp_path / "r.db")
    assert code == 0, out
    assert "look like different runs" in out


def test_a_fused_log_from_another_run_is_flagged(tmp_path: Path) -> None:
    cap = _capture(tmp_path, [_row(1, "100", "300")])
    log = tmp_path / "stderr.log.gz"
    with gzip.open(log, "wt") as fh:
        fh.write("ggml-fused:0:RMS_NORM+MUL:norm-0|attn_norm-0\n")
    code, out = run("ingest", cap, "--attach", log, "--db", tmp_path / "r.db")
    assert code == 0, out
    assert "ggml-fused group(s) name an invocation" in out


def test_a_broken_json_file_names_its_line(tmp_path: Path) -> None:
    bad = tmp_path / "meta.json"
    bad.write_text('{"rows": [\n')
    msg = one_line_error("ingest", bad, "--db", tmp_path / "r.db")
    assert "meta.json:2:" in msg and "invalid JSON" in msg


def test_attach_a_directory(tmp_path: Path) -> None:
    cap = _capture(tmp_path, [_row(1, "100", "300")])
    assert "not a directory" in one_line_error("ingest", cap, "--attach", tmp_path, "--db", tmp_path / "r.db")


@pytest.mark.parametrize("content", [b"SQLite format 3\x00" + b"\x00" * 100, b"not a database at all"])
def test_a_damaged_db_file_is_named(tmp_path: Path, content: bytes) -> None:
    cap = tmp_path / "cap"
    cap.mkdir()
    (cap / "123_results.db").write_bytes(content)
    msg = one_line_error("ingest", cap, "--db", tmp_path / "r.db")
    assert "123_results.db" in msg and "damaged" in msg
    # it names each SQLite family rocroof reads and what that family must hold
    for family in ("rocprofv3's rocpd (no rocpd_kernel_dispatch", "rocprof v1's results.db (no KERN", "RPD trace"):
        assert family in msg


# ---- collect options and attachments -------------------------------------------------------------

EXAMPLE_H200 = Path(__file__).resolve().parent.parent / "examples" / "h200" / "dense-prefill"


def test_collect_refuses_an_unknown_arch_and_empty_counters() -> None:
    msg = one_line_error("collect", "--arch", "banana", "--dry-run", "--", "./a")
    assert "not a GPU architecture rocroof knows" in msg
    assert "--counters is empty" in one_line_error(
        "collect", "--arch", "gfx942", "--counters", " ", "--dry-run", "--", "a"
    )


def test_collect_refuses_an_ncu_metric_for_rocprofv3() -> None:
    msg = one_line_error("collect", "--arch", "gfx942", "--counters", "dram__bytes_read.sum", "--dry-run", "--", "a")
    assert "looks like an Nsight Compute metric" in msg


def test_attach_refuses_files_that_are_neither_metadata_nor_a_fused_log(tmp_path: Path) -> None:
    prose = tmp_path / "notes.txt"
    prose.write_text("this log mentions ggml-fused: lines but has none\n")
    msg = one_line_error("ingest", EXAMPLE_H200, "--attach", prose, "--db", tmp_path / "r.db")
    assert "notes.txt" in msg and "has neither" in msg
    other = tmp_path / "other.json"
    other.write_text('{"a": 1}')
    assert "this file is JSON of something else" in one_line_error(
        "ingest", EXAMPLE_H200, "--attach", other, "--db", tmp_path / "r.db"
    )
    garbage = tmp_path / "garbage.json"
    garbage.write_bytes(bytes(range(256)))
    assert "this file is not a JSON object" in one_line_error(
        "ingest", EXAMPLE_H200, "--attach", garbage, "--db", tmp_path / "r.db"
    )
    assert not (tmp_path / "r.db").exists() or run("runs", "--db", tmp_path / "r.db")[1].count("examples") == 0


def test_a_new_database_in_a_folder_that_refuses_writes_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite says only "unable to open database file"; the folder's permissions say why.

    The folder's refusal is simulated (``os.access``): the tests may run as root, whom no folder refuses.
    """
    import os
    import sqlite3
    from sqlite3 import dbapi2

    folder = tmp_path / "readonly"
    folder.mkdir()
    real_access, real_connect = os.access, sqlite3.connect

    def access(path: object, mode: int, **kwargs: object) -> bool:
        return False if Path(str(path)) == folder and mode & os.W_OK else real_access(path, mode, **kwargs)  # type: ignore[arg-type]

    def connect(target: object, *args: object, **kwargs: object) -> sqlite3.Connection:
        if str(folder) in str(target):
            raise sqlite3.OperationalError("unable to open database file")
        return real_connect(target, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "access", access)
    monkeypatch.setattr(sqlite3, "connect", connect)
    monkeypatch.setattr(dbapi2, "connect", connect)  # what SQLAlchemy's driver calls
    capture = Path(__file__).resolve().parent.parent / "examples" / "h200" / "dense-prefill"
    result = CliRunner().invoke(cli, ["ingest", str(capture), "--db", str(folder / "r.db")])
    assert result.exit_code == 1
    assert result.output.strip().splitlines()[-1] == (
        f"Error: {folder / 'r.db'}: cannot open the database (a new database cannot be created: its folder "
        f"{folder} is not writable)"
    )


def test_a_database_that_refuses_writes_is_one_line_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # e.g. a read-only mount or an immutable file: SQLite raises "attempt to write a readonly database"
    import sqlalchemy as sa

    def refuse(self: Store, *args: object, **kwargs: object) -> int:
        raise sa.exc.OperationalError("INSERT INTO run ...", {}, Exception("attempt to write a readonly database"))

    monkeypatch.setattr(Store, "write_run", refuse)
    capture = Path(__file__).resolve().parent.parent / "examples" / "h200" / "dense-prefill"
    db = tmp_path / "ro.db"
    result = CliRunner().invoke(cli, ["ingest", str(capture), "--db", str(db)])
    assert result.exit_code == 1
    assert result.output.strip().splitlines()[-1] == (
        f"Error: {db}: the database refused the command (attempt to write a readonly database); "
        "no run is left half-written"
    )
    assert "Traceback" not in result.output
    url = "postgresql://alice:s3cret@127.0.0.1:1/x"
    result = CliRunner().invoke(cli, ["ingest", str(capture)], env={"ROCROOF_DB": url})
    assert "s3cret" not in result.output


def test_a_database_path_under_a_file_says_the_file_is_not_a_folder(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("x")
    db = tmp_path / "notes.txt" / "r.db"
    capture = Path(__file__).resolve().parent.parent / "examples" / "h200" / "dense-prefill"
    result = CliRunner().invoke(cli, ["ingest", str(capture), "--db", str(db)])
    assert result.exit_code == 1
    assert result.output.strip().splitlines()[-1] == (
        f"Error: {db}: cannot open the database ({tmp_path / 'notes.txt'} is not a folder)"
    )


# ---- op metadata of another run ------------------------------------------------------------------

SIDECAR_H200 = EXAMPLE_H200 / "trace" / "ggml-op-meta.json.gz"


def _sidecar_rows() -> dict[str, object]:
    doc: dict[str, object] = json.loads(gzip.decompress(SIDECAR_H200.read_bytes()))
    return doc


def _write_sidecar(path: Path, doc: dict[str, object]) -> Path:
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return path


def _stored_ops(db: Path) -> tuple[int, int, list[tuple[str, str]]]:
    """(op invocations, those from the metadata, warning notes (code, message)) of run 1."""
    con = sqlite3.connect(db)
    try:
        ops, from_meta = con.execute("SELECT COUNT(*), COALESCE(SUM(from_metadata), 0) FROM op_invocation").fetchone()
        notes = con.execute("SELECT code, message FROM run_note WHERE severity = 'warning'").fetchall()
    finally:
        con.close()
    return int(ops), int(from_meta), [(str(c), str(m)) for c, m in notes]


def test_op_metadata_attached_to_a_capture_without_markers_is_refused(tmp_path: Path) -> None:
    # a trial user attached an NVIDIA llama.cpp run's sidecar to an AMD vcopy workload: it was stored
    # as 65 op invocations without one dispatch, silently
    cap = fixture_path("rocprof-compute", "vcopy", "MI100")
    rows = len(_sidecar_rows()["rows"])  # type: ignore[arg-type]
    dispatches = len((cap / "pmc_perf.csv").read_text().splitlines()) - 1  # one row per dispatch under the header
    assert (rows, dispatches) == (65, 3)
    db = tmp_path / "r.db"
    msg = one_line_error("ingest", cap, "--attach", SIDECAR_H200, "--db", db)
    assert msg.startswith(f"Error: --attach {SIDECAR_H200}: ")
    assert f"its {rows} op invocations match none of the capture's {dispatches} dispatches" in msg
    assert "another run" in msg
    assert not db.exists()  # nothing stored


def test_op_metadata_beside_a_capture_without_markers_is_left_out(tmp_path: Path) -> None:
    folder = tmp_path / "f"
    folder.mkdir()
    shutil.copy(fixture_path("rpd", "mytrace.rpd.gz"), folder / "mytrace.rpd.gz")
    shutil.copy(SIDECAR_H200, folder / "ggml-op-meta.json.gz")
    db = tmp_path / "r.db"
    code, out = run("ingest", folder, "--arch", "gfx90a", "--db", db)
    assert code == 0, out
    assert "0 ggml op invocation(s)" in out and "left out" in out
    ops, from_meta, warnings = _stored_ops(db)
    assert (ops, from_meta) == (0, 0)
    assert [c for c, _ in warnings] == ["metadata-unmatched"]
    assert str(folder / "ggml-op-meta.json.gz") in warnings[0][1] and "its 65 op invocations" in warnings[0][1]
    # the report does not contradict itself: no op metadata, and no fused groups from it
    code, report = run("report", "--db", db, "--run", "1", "--by", "op")
    assert code == 0, report
    assert "no op metadata in this run" in report and "fused groups" not in report


def _capture_with_markers(tmp_path: Path) -> Path:
    """The H200 example's Nsight Systems pass (ggml ranges of invocations 66-130), without its sidecar."""
    cap = tmp_path / "cap"
    cap.mkdir()
    shutil.copy(EXAMPLE_H200 / "trace" / "nsys.sqlite.gz", cap / "nsys.sqlite.gz")
    return cap


def test_op_metadata_whose_invocations_are_none_of_the_capture_s_is_refused_or_left_out(tmp_path: Path) -> None:
    doc = _sidecar_rows()
    rows = doc["rows"]
    assert isinstance(rows, list)
    assert (min(r["invocation"] for r in rows), max(r["invocation"] for r in rows)) == (66, 130)
    for r in rows:  # another run's numbers: the capture's ranges carry 66-130
        r["invocation"] += 1000
    cap = _capture_with_markers(tmp_path)
    other = _write_sidecar(tmp_path / "other-meta.json.gz", doc)
    msg = one_line_error("ingest", cap, "--attach", other, "--db", tmp_path / "a.db")
    assert msg.startswith(f"Error: --attach {other}: none of its 65 op invocations (invocations 1066-1130)")
    assert "has the number and op of one of the capture's" in msg
    assert not (tmp_path / "a.db").exists()
    # the same file beside the capture: stored without it
    _write_sidecar(cap / "ggml-op-meta.json.gz", doc)
    code, out = run("ingest", cap, "--db", tmp_path / "b.db")
    assert code == 0, out
    ops, from_meta, warnings = _stored_ops(tmp_path / "b.db")
    assert ops == 65 and from_meta == 0  # the capture's own ranges: invocations 66-130
    assert [c for c, _ in warnings] == ["metadata-unmatched"]


def test_op_metadata_with_other_ops_under_the_capture_s_numbers_is_refused(tmp_path: Path) -> None:
    doc = _sidecar_rows()
    rows = doc["rows"]
    assert isinstance(rows, list)
    for r in rows:  # the same numbers, but every op another one (a model of another graph)
        r["ggml_op"] = "ARGSORT" if r["ggml_op"] != "ARGSORT" else "CONCAT"
        r.pop("fused_ops", None)
    other = _write_sidecar(tmp_path / "other-meta.json.gz", doc)
    msg = one_line_error("ingest", _capture_with_markers(tmp_path), "--attach", other, "--db", tmp_path / "a.db")
    assert "none of its 65 op invocations (invocations 66-130) has the number and op" in msg


def test_op_metadata_of_the_run_itself_is_kept(tmp_path: Path) -> None:
    cap = _capture_with_markers(tmp_path)
    code, out = run("ingest", cap, "--attach", SIDECAR_H200, "--db", tmp_path / "r.db")
    assert code == 0, out
    ops, from_meta, warnings = _stored_ops(tmp_path / "r.db")
    assert (ops, from_meta) == (65, 65) and not warnings


def test_the_fused_groups_line_counts_only_the_capture_s_invocations(tmp_path: Path) -> None:
    from rocroof.report.tables import build_report

    doc = _sidecar_rows()
    rows = doc["rows"]
    assert isinstance(rows, list)
    expected: dict[str, int] = {}
    for r in rows:
        if r.get("fused_ops"):
            op_list = "+".join(f["ggml_op"] for f in r["fused_ops"])
            expected[op_list] = expected.get(op_list, 0) + 1
    assert expected["RMS_NORM+MUL"] == 9 and sum(expected.values()) == 15
    # a fused row of an invocation the capture does not have (a warm-up the capture dropped): in no row
    extra = json.loads(json.dumps(next(r for r in rows if r.get("fused_ops") and r["ggml_op"] == "RMS_NORM")))
    extra["invocation"] = 5000
    rows.append(extra)
    cap = _capture_with_markers(tmp_path)
    _write_sidecar(cap / "ggml-op-meta.json.gz", doc)
    db = tmp_path / "r.db"
    code, out = run("ingest", cap, "--db", db)
    assert code == 0, out
    store = Store(db, read_only=True)
    try:
        report = build_report(store, 1, "op")
    finally:
        store.close()
    assert {op_list: n for _, op_list, n in report.fused} == expected


# ---- a database another process is writing to ------------------------------------------------------
#
# The trial: another process held the results file's write lock; `rocroof ingest` printed nothing
# for as long as it waited (up to 600 s), and Ctrl-C did nothing until the lock went: SQLite waited
# in its busy handler, in C.


def _runs(db: Path) -> int:
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        return int(conn.execute("SELECT COUNT(*) FROM run").fetchone()[0])
    finally:
        conn.close()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_an_ingest_waiting_for_another_writer_says_so_and_stops_at_ctrl_c(tmp_path: Path, sig: int) -> None:
    db = tmp_path / "r.db"
    assert run("ingest", _capture(tmp_path, [_row(1, "100", "300")], "first"), "--db", db)[0] == 0
    capture = _capture(tmp_path, [_row(1, "100", "300"), _row(2, "400", "900")], "second")
    with held_write_lock(db, "BEGIN EXCLUSIVE"):
        # the first line comes about 2 s into the wait (a silent wait: no line at all)
        done = signal_after_first_line(
            [sys.executable, "-m", "rocroof", "ingest", str(capture), "--db", str(db)], sig, stream="stderr"
        )
    assert done.first_line == f"waiting for {db}: another process is writing to it (up to 600 s; Ctrl-C to stop)\n"
    assert done.returncode == 130, done  # at once, not when the other writer is done
    assert done.rest.strip().splitlines() == [
        "Aborted: interrupted; nothing is stored half (a run being stored was rolled back)."
    ], done
    assert done.took_s < 20, done.took_s  # a try at the lock lasts 0.1 s
    assert _runs(db) == 1


def test_an_ingest_that_waits_too_long_for_another_writer_is_one_line_after_the_waiting_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import rocroof.store as store_mod
    from rocroof.store import locking

    monkeypatch.setattr(store_mod, "WRITE_TIMEOUT_S", 1)
    monkeypatch.setattr(locking, "WAIT_NOTICE_S", 0.3)
    db = tmp_path / "r.db"
    assert run("ingest", _capture(tmp_path, [_row(1, "100", "300")], "first"), "--db", db)[0] == 0
    with held_write_lock(db, "BEGIN EXCLUSIVE"):
        code, out = run("ingest", _capture(tmp_path, [_row(2, "400", "900")], "second"), "--db", db)
    assert code == 1, out
    assert out.splitlines() == [
        f"waiting for {db}: another process is writing to it (up to 1 s; Ctrl-C to stop)",
        f"Error: {db}: another process kept the database locked for 1 s (database is locked); try again when it "
        "has finished",
    ]
    assert _runs(db) == 1


# ---- damaged CSV files: every reader, every way a file gets damaged ------------------------------
#
# Each case copies a recorded capture, damages one CSV file of it and expects a ParseError naming
# that file, the physical line (header = line 1) and what was expected. The line numbers and field
# counts are worked out here from the fixture's own text (csv module), not taken from rocroof.


def _v3(*names: str, hip: bool = False) -> Any:
    def setup(dest: Path) -> tuple[Path, Path]:
        dest.mkdir()
        for name in ("kernel_trace.csv", *names):
            shutil.copy(fixture_path("rocprofv3-docs", name), dest / name)
        if hip:
            shutil.copy(fixture_path("rocprofv3-docs", "rocpd-to-csv.csv"), dest / "out_hip_api_trace.csv")
            return dest, dest / "out_hip_api_trace.csv"
        return dest, dest / (names[-1] if names else "kernel_trace.csv")

    return setup


def _folder(*parts: str, target: str) -> Any:
    def setup(dest: Path) -> tuple[Path, Path]:
        shutil.copytree(fixture_path(*parts), dest)
        return dest, dest / target

    return setup


def _ncu(dest: Path) -> tuple[Path, Path]:
    dest.mkdir()
    plain = dest / "dense_ncu_raw.csv"
    plain.write_bytes(gzip.decompress(fixture_path("h200-trial", "dense_ncu_raw.csv.gz").read_bytes()))
    return plain, plain


#: reader case -> (setup, the damaged line in the middle: a data row)
_READERS: dict[str, tuple[Any, int]] = {
    "rocprofv3-kernel_trace": (_v3(), 3),
    "rocprofv3-counter_collection": (_v3("counter_collection.csv"), 3),
    "rocprofv3-marker_api_trace": (_v3("marker_api_trace.csv"), 3),
    "rocprofv3-hip_api_trace": (_v3(hip=True), 3),
    "rocprof-v1-results": (_folder("rocprof-v1", "mi250x-laplacian-kernel2", target="results.csv"), 3),
    "rocprof-compute-wide": (_folder("rocprof-compute", "vcopy", "MI300X_A1", target="pmc_perf.csv"), 3),
    "rocprof-compute-long": (_folder("rocprof-compute", "vcopy", "MI300X_A1_rocpd", target="pmc_perf.csv"), 3),
    "ncu-raw": (_ncu, 4),  # line 2 is the units row
}


def _header_fields(data: bytes) -> int:
    return len(next(csv.reader([data.split(b"\n", 1)[0].decode()])))


def _damage(kind: str, data: bytes, line: int) -> tuple[bytes, int | None, str]:
    """``(damaged bytes, the line the error must name, a part of its message)``."""
    lines = data.split(b"\n")
    n = _header_fields(data)
    if kind == "row-short":
        fields = next(csv.reader([lines[line - 1].decode()]))
        assert len(fields) == n and "," not in fields[-1]
        lines[line - 1] = lines[line - 1].rsplit(b",", 1)[0]
        return b"\n".join(lines), line, f"this row has {n - 1} field(s), the header {n}"
    # a bad byte goes into the last value, which every path reads (a column no reader reads may go unread:
    # its damage changes nothing stored)
    if kind == "nul":
        lines[line - 1] = lines[line - 1][:-1] + b"\x00" + lines[line - 1][-1:]
        return b"\n".join(lines), line, "a NUL byte"
    if kind == "last-value-cut":  # cut right after the last separator: every field, the last one empty
        body = data.rstrip(b"\n")
        last_line = body.count(b"\n") + 1
        return body[: body.rindex(b",") + 1], last_line, "the last row ends with an empty field and no newline"
    if kind == "not-utf8":
        lines[line - 1] = lines[line - 1][:-1] + b"\xff" + lines[line - 1][-1:]
        return b"\n".join(lines), line, "byte 0xff is not valid UTF-8"
    if kind == "empty":
        return b"", None, "file is empty"
    assert kind == "gzip-cut"
    packed = gzip.compress(data)
    return packed[: len(packed) * 2 // 3], None, "compressed data is damaged or truncated"


@pytest.mark.parametrize("kind", ["row-short", "nul", "last-value-cut", "not-utf8", "empty", "gzip-cut"])
@pytest.mark.parametrize("reader", list(_READERS))
def test_a_damaged_csv_file_is_one_error_naming_its_line(tmp_path: Path, reader: str, kind: str) -> None:
    setup, line = _READERS[reader]
    capture, target = setup(tmp_path / "cap")
    damaged, expected_line, expected = _damage(kind, target.read_bytes(), line)
    if kind == "gzip-cut":
        target.unlink()
        packed = target.with_name(target.name + ".gz")
        capture, target = (packed if capture == target else capture), packed
    target.write_bytes(damaged)
    with pytest.raises(ParseError) as err:
        read_capture(capture)
    assert Path(err.value.path).name == target.name
    assert expected in err.value.reason
    if expected_line is not None:
        assert err.value.row == expected_line


@pytest.mark.parametrize("kind", ["row-short", "nul", "last-value-cut"])
@pytest.mark.parametrize("reader", [r for r in _READERS if r.startswith("rocprofv3")])
def test_a_damaged_rocprofv3_csv_gives_the_same_error_on_the_polars_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reader: str, kind: str
) -> None:
    """Large files are read with polars (fileio.POLARS_MIN_BYTES): lowered to 0, these files take that path."""
    monkeypatch.setattr(fileio, "POLARS_MIN_BYTES", 0)
    monkeypatch.setattr(fileio, "SPLIT_POLARS_MIN_BYTES", 0)
    setup, line = _READERS[reader]
    capture, target = setup(tmp_path / "cap")
    damaged, expected_line, expected = _damage(kind, target.read_bytes(), line)
    target.write_bytes(damaged)
    with pytest.raises(ParseError) as err:
        read_capture(capture)
    assert (Path(err.value.path).name, err.value.row) == (target.name, expected_line)
    assert expected in err.value.reason


def test_a_counter_row_cut_short_is_refused_when_only_some_columns_are_read(tmp_path: Path) -> None:
    """With a kernel trace beside it, a counter file is read without its kernel names (pandas usecols)."""
    capture, target = _v3("counter_collection.csv")(tmp_path / "cap")
    lines = target.read_bytes().split(b"\n")
    lines[2] = lines[2].rsplit(b",", 1)[0]  # line 3 loses its End_Timestamp
    target.write_bytes(b"\n".join(lines))
    with pytest.raises(ParseError, match=r"counter_collection\.csv:3: this row has 18 field\(s\), the header 19"):
        read_capture(capture)


def test_the_doc_samples_without_a_final_newline_still_ingest(tmp_path: Path) -> None:
    capture, _ = _v3("counter_collection.csv", "marker_api_trace.csv")(tmp_path / "cap")
    assert not (capture / "counter_collection.csv").read_bytes().endswith(b"\n")
    assert not (capture / "marker_api_trace.csv").read_bytes().endswith(b"\n")
    read_capture(capture)  # no error


@pytest.mark.parametrize("target", ["results.csv", "data_movement.csv"])
def test_a_rocprof_v1_kernel_csv_with_only_its_header_is_refused(tmp_path: Path, target: str) -> None:
    capture, path = _folder("rocprof-v1", "mi250x-laplacian-kernel2", target=target)(tmp_path / "cap")
    path.write_bytes(path.read_bytes().split(b"\n", 1)[0] + b"\n")
    with pytest.raises(ParseError) as err:
        read_capture(capture)
    assert (Path(err.value.path).name, err.value.row) == (target, 2)
    assert "holds only its header row" in err.value.reason


def test_attach_broken_json_names_its_line_column_and_what_was_expected(tmp_path: Path) -> None:
    """Invalid JSON given to --attach: the file, the line and column of the error, and what the file must hold."""
    cap = _capture(tmp_path, [_row(1, "100", "300")])  # a capture without op metadata of its own
    other = tmp_path / "other.json"
    other.write_text('{"a": 1,}')  # a trailing comma: the '}' at line 1, column 9 is not a property name
    msg = one_line_error("ingest", cap, "--attach", other, "--db", tmp_path / "r.db")
    assert f"{other}:1: invalid JSON at column 9: Expecting property name" in msg
    assert "expected ggml op metadata: a JSON object with a 'rows' list" in msg
    meta = tmp_path / "meta.json"
    meta.write_text('{"rows": [\n  {"invocation": 1, "ggml_op": "ADD"},\n  ]\n}\n')  # the ']' at line 3, column 3
    msg = one_line_error("ingest", cap, "--attach", meta, "--db", tmp_path / "r.db")
    assert f"{meta}:3: invalid JSON at column 3: Expecting value" in msg
    assert "expected ggml op metadata" in msg
    cut = tmp_path / "cut.json"
    cut.write_text('{"rows": [\n')  # ends after line 1: the error is at line 2, column 1
    msg = one_line_error("ingest", cap, "--attach", cut, "--db", tmp_path / "r.db")
    assert f"{cut}:2: invalid JSON at column 1: Expecting value (the file ends there: cut short?)" in msg


def _one_line_error(args: list[str]) -> str:
    """The last line ``rocroof ARGS`` prints, after checking it failed with exit status 1 and no traceback."""
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    return str(result.output.strip().splitlines()[-1])


def _damaged_database(tmp_path: Path) -> Path:
    """A results database of examples/h200/dense-prefill whose ``dispatch_record`` table is damaged.

    The table's root page (sqlite_master's ``rootpage``) is overwritten with 0xFF bytes, as a bad
    disk or a copy cut short would leave it: the file still opens, the schema and the run rows
    read, and any read of the table fails with SQLite's "database disk image is malformed"
    (SQLITE_CORRUPT, https://www.sqlite.org/rescode.html).
    """
    capture = Path(__file__).resolve().parent.parent / "examples" / "h200" / "dense-prefill"
    db = tmp_path / "damaged.db"
    result = CliRunner().invoke(cli, ["ingest", str(capture), "--db", str(db)])
    assert result.exit_code == 0, result.output
    con = sqlite3.connect(db)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # every page in the main file
    page = con.execute("PRAGMA page_size").fetchone()[0]
    root = con.execute("SELECT rootpage FROM sqlite_master WHERE name = 'dispatch_record'").fetchone()[0]
    con.close()
    with db.open("r+b") as fh:
        fh.seek((root - 1) * page)  # pages are numbered from 1
        fh.write(b"\xff" * page)
    return db


DAMAGED = (
    "the database file is damaged (database disk image is malformed); restore it from a copy, or save what "
    "can be read with the sqlite3 shell's .recover"
)


def test_a_damaged_database_is_one_line_naming_it(tmp_path: Path) -> None:
    # from a new-user trial: a database damaged in its middle passed the open-time check, and
    # `report --by kernel`, `advise`, `export` and `plot` ended in a SQLAlchemy traceback
    db = _damaged_database(tmp_path)
    for command in (["report", "--run", "1", "--by", "kernel"], ["export", "--run", "1", "--out", str(tmp_path / "x")]):
        assert _one_line_error([*command, "--db", str(db)]) == f"Error: {db}: {DAMAGED}; no run is left half-written"


def test_a_query_of_a_damaged_table_names_the_database(tmp_path: Path) -> None:
    # `diff` and `query` said "query failed: database disk image is malformed", naming no file
    db = _damaged_database(tmp_path)
    line = _one_line_error(["query", "SELECT count(*) FROM dispatch_record", "--db", str(db)])
    assert line == f"Error: {db}: {DAMAGED}"


def test_merge_of_a_damaged_source_names_it_and_stores_nothing_of_the_run(tmp_path: Path) -> None:
    db = _damaged_database(tmp_path)
    target = tmp_path / "merged.db"
    assert _one_line_error(["merge", str(db), "--into", str(target)]) == (
        f"Error: {db}: run 1 could not be copied into {target} (database disk image is malformed): a file is "
        "damaged: restore it from a copy, or save what can be read with the sqlite3 shell's .recover; nothing "
        "of this run is stored, the runs copied before it are kept"
    )
    con = sqlite3.connect(target)
    assert con.execute("SELECT count(*) FROM run").fetchone()[0] == 0
    assert con.execute("SELECT count(*) FROM dispatch_record").fetchone()[0] == 0
    con.close()


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (sqlite3.DatabaseError("database disk image is malformed"), f"x.db: {DAMAGED}; no run is left half-written"),
        (sqlite3.DatabaseError("file is not a database"), "x.db: the database file is damaged (file is not a"),
        (sqlite3.OperationalError("database is locked"), "x.db: the database refused the command (database is locked)"),
        (sqlite3.IntegrityError("UNIQUE constraint failed: run.run_id"), None),  # rocroof's own statement: a bug
        (ValueError("database disk image is malformed"), None),  # not the driver's
    ],
)
def test_which_driver_errors_become_one_line(error: Exception, expected: str | None) -> None:
    from rocroof.cli.app import _database_failure

    message = _database_failure(error, ["report", "--db", "x.db"])
    if expected is None:
        assert message is None
    else:
        assert message is not None and message.startswith(expected)


def test_a_gzip_export_cut_short_says_so(tmp_path: Path) -> None:
    # from a new-user trial: an ncu_raw.csv.gz cut to half its bytes was "not an Nsight Compute raw
    # export ... empty, damaged or another CSV": the bounded reader read a whole 1 MB buffer at a time, and
    # a stream that ends early gave nothing of itself before its EOFError (the header included)
    capture = tmp_path / "cap"
    shutil.copytree(Path(__file__).resolve().parent.parent / "examples" / "h200" / "dense-prefill", capture)
    export = capture / "ncu" / "ncu_raw.csv.gz"
    export.write_bytes(export.read_bytes()[:16000])  # of 32,519 bytes: the header's 12,599 characters are in it
    from rocroof.capture.readers import nvidia

    assert nvidia.is_ncu_csv(export)
    db = tmp_path / "r.db"
    last = _one_line_error(["ingest", str(capture), "--db", str(db)])
    assert last.startswith(f"Error: {export}: compressed data is damaged or truncated (")
    if db.exists():
        con = sqlite3.connect(db)
        assert con.execute("SELECT count(*) FROM run").fetchone()[0] == 0
        con.close()
