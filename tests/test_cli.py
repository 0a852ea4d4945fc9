"""The command line as a user meets it: every mistake is one line, nothing is half-stored.

User errors must exit 1 with a single ``Error: ...`` line that names the file (and row) and
what was expected, and no traceback. Values are checked against the recorded captures
themselves (timestamps read from the CSV here) or hardware truth (vcopy moves 8 MiB each way).
"""

from __future__ import annotations

import contextlib
import csv
import gzip
import hashlib
import io
import json
import re
import shlex
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner, Result

from rocroof.cli import cli
from rocroof.errors import InputError
from rocroof.store.migrations import SCHEMA_VERSION

from .conftest import REPO, VCOPY_BYTES, fixture_path

REQUIRED_DISPATCH_KEYS = {
    "run_id",
    "dispatch_id",
    "kernel_name",
    "duration_ns",
    "dram_read_bytes",
    "dram_write_bytes",
    "achieved_gbps",
    "op",
}
REQUIRED_OP_KEYS = {
    "op",
    "invocations",
    "dispatches",
    "duration_ns",
    "dram_read_bytes",
    "dram_write_bytes",
    "achieved_gbps",
}


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ROCROOF_DB", "ROCROOF_TRACEBACK"):
        monkeypatch.delenv(name, raising=False)


@contextlib.contextmanager
def connect(db: Path) -> Iterator[sqlite3.Connection]:
    """A plain sqlite3 connection that commits and closes (to look at the file as another program would)."""
    conn = sqlite3.connect(db)
    try:
        with conn:
            yield conn
    finally:
        conn.close()


def run(*args: Any, catch: bool = False) -> Result:
    """Invoke the CLI; a non-RocroofError exception propagates (a traceback would be a bug)."""
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=catch)


def ok(*args: Any) -> str:
    result = run(*args)
    assert result.exit_code == 0, result.output
    return result.output


def error(*args: Any) -> str:
    """Run a command that must fail as a user error; return its one message line."""
    result = run(*args)
    assert result.exit_code == 1, result.output
    assert result.output.startswith("Error: "), result.output
    assert "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1, result.output
    return result.output.strip()


def counts(db: Path) -> dict[str, int]:
    with connect(db) as conn:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")]
        out = {name: conn.execute(f'SELECT COUNT(*) FROM "{name}"').fetchone()[0] for name in names}
    return out


def vcopy(name: str = "MI300X_A1_rocpd") -> Path:
    return fixture_path("rocprof-compute", "vcopy", name)


def docs_csv() -> Path:
    return fixture_path("rocprofv3-docs")


@pytest.fixture
def stored(tmp_path: Path) -> Path:
    """A database holding AMD's MI300X vcopy workload (rocprofv3 rocpd) as run 1."""
    db = tmp_path / "vcopy.db"
    ok("ingest", vcopy(), "--db", db, "--label", "model=vcopy", "--label", "size = 8MiB")
    return db


# ---- help ---------------------------------------------------------------------------------


def _all_commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = [prefix]
    for name, cmd in sorted(group.commands.items()):
        if isinstance(cmd, click.Group):
            out += _all_commands(cmd, (*prefix, name))
        else:
            out.append((*prefix, name))
    return out


@pytest.mark.parametrize("command", _all_commands(cli), ids=lambda c: " ".join(c) or "rocroof")
def test_every_help_exits_0_and_shows_an_example(command: tuple[str, ...]) -> None:
    text = ok(*command, "--help")
    assert "Example" in text or "Typical session" in text
    assert f"rocroof {' '.join(command)}".strip() in text.replace("Usage: ", "")


# ---- the happy path, checked against hardware truth ------------------------------------------------


def test_ingest_prints_a_summary_of_a_fact_per_line_and_report_dispatch_json_has_the_contract_keys(
    tmp_path: Path,
) -> None:
    db = tmp_path / "r.db"
    out = ok("ingest", vcopy(), "--db", db)
    first, *rest = out.strip().splitlines()
    assert first.startswith("Stored run 1 from ") and "MI300X" in first and "gfx942" in first
    assert any(line.startswith("  ") and "pass(es), 3 dispatch(es) in the timing pass" in line for line in rest)
    assert all(len(line) <= 240 or "ceiling" in line for line in rest[:-1])  # no 600-character line
    # the hint names the database and, for a run without ggml ops, the report that has rows; it runs as printed
    assert rest[-1].startswith(f"Next: rocroof report --db {db} --run 1 --by kernel")
    hinted = shlex.split(rest[-1].removeprefix("Next: ").split("   (")[0])
    assert hinted[0] == "rocroof" and "vcopy" in ok(*hinted[1:])

    doc = json.loads(ok("report", "--db", db, "--by", "dispatch", "--format", "json"))
    assert doc["report"] == "dispatch" and doc["run"]["run_id"] == 1 and "host" not in doc["run"]
    assert doc["ceilings"]["dram_gbps"]["value"] == doc["run"]["dram_peak_gbps"]
    rows = doc["rows"]
    assert isinstance(rows, list) and len(rows) == 3
    for row in rows:
        assert set(row) >= REQUIRED_DISPATCH_KEYS
        assert row["run_id"] == 1 and row["op"] is None  # vcopy has no ggml ops
        assert row["kernel_name"].startswith("vecCopy")
        assert row["dram_read_bytes"] == pytest.approx(VCOPY_BYTES, rel=0.01)
        assert row["dram_write_bytes"] == pytest.approx(VCOPY_BYTES, rel=0.01)
        assert isinstance(row["duration_ns"], int) and row["duration_ns"] > 0
        expected = (row["dram_read_bytes"] + row["dram_write_bytes"]) / row["duration_ns"]
        assert row["achieved_gbps"] == pytest.approx(expected)
    assert sorted(r["dispatch_id"] for r in rows) == [r["dispatch_id"] for r in rows]


def test_report_by_op_json_has_the_contract_keys(stored: Path) -> None:
    doc = json.loads(ok("report", "--db", stored, "--by", "op", "--format", "json"))
    rows = doc["rows"]
    assert len(rows) == 1 and doc["labels"] == {"model": "vcopy", "size": "8MiB"}
    (row,) = rows
    assert set(row) >= REQUIRED_OP_KEYS
    assert row["op"] is None and row["invocations"] == 0 and row["dispatches"] == 3
    assert row["dram_read_bytes"] == pytest.approx(3 * VCOPY_BYTES, rel=0.01)
    assert row["dram_write_bytes"] == pytest.approx(3 * VCOPY_BYTES, rel=0.01)
    assert row["achieved_gbps"] == pytest.approx(
        (row["dram_read_bytes"] + row["dram_write_bytes"]) / row["duration_ns"]
    )


def test_report_formats_and_top(stored: Path) -> None:
    table = ok("report", "--db", stored, "--by", "kernel")
    assert table.startswith("run 1: ") and "vecCopy" in table and "GB/s" in table
    md = ok("report", "--db", stored, "--by", "dispatch", "--format", "markdown")
    assert md.startswith("**rocroof** run 1") and "| # | kernel |" in md
    assert table.splitlines()[1] == md.splitlines()[1].rstrip() == "labels: model=vcopy, size=8MiB"
    rows = list(csv.DictReader(io.StringIO(ok("report", "--db", stored, "--by", "kernel", "--format", "csv"))))
    assert len(rows) == 1 and rows[0]["dispatches"] == "3"
    assert float(rows[0]["dram_write_bytes"]) == pytest.approx(3 * VCOPY_BYTES, rel=0.01)
    top = json.loads(ok("report", "--db", stored, "--by", "dispatch", "--top", "1", "--format", "json"))
    assert len(top["rows"]) == 1 and top["rows_total"] == 3
    assert "showing 1 of 3 rows" in ok("report", "--db", stored, "--by", "dispatch", "--top", "1")
    assert ok("report", "--db", stored, "--run", "latest") == ok("report", "--db", stored, "--run", "1")


def test_runs_lists_labels_and_the_db_can_come_from_the_environment(stored: Path) -> None:
    (run,) = json.loads(ok("runs", "--db", stored, "--format", "json"))
    assert run["run_id"] == 1 and run["dispatches"] == 3 and run["attributed"] == 0
    assert run["labels"] == {"model": "vcopy", "size": "8MiB"}  # JSON: a mapping (values may hold commas)
    result = CliRunner().invoke(cli, ["runs", "--format", "csv"], env={"ROCROOF_DB": str(stored)})
    assert result.exit_code == 0 and result.output.startswith("run_id,")
    md = ok("runs", "--db", stored, "--format", "markdown").splitlines()
    assert md[0] == "| run | created | capture | profiler | GPU | timing | dispatches | attributed | labels |"
    cells = [c.strip() for c in md[2].strip("|").split("|")]
    assert cells[0] == "1" and re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d", cells[1])  # to the minute
    assert cells[2].startswith("…/") and str(vcopy()).endswith(cells[2][1:])  # cut at a '/', the end kept
    assert len(cells[2]) <= 40 and cells[-1] == "model=vcopy, size=8MiB"
    table = ok("runs", "--db", stored)
    assert "model=vcopy," in table and "size=8MiB" in table


def test_query_output_formats(stored: Path) -> None:
    sql = "SELECT dispatch_id, dram_write_bytes FROM dispatch_dram WHERE run_id = 1 ORDER BY dispatch_id"
    rows = json.loads(ok("query", sql, "--db", stored, "--format", "json"))
    assert [r["dispatch_id"] for r in rows] == [1, 2, 3]
    assert all(r["dram_write_bytes"] == pytest.approx(VCOPY_BYTES, rel=0.01) for r in rows)
    assert ok("query", sql, "--db", stored, "--format", "csv").splitlines()[0] == "dispatch_id,dram_write_bytes"
    assert ok("query", sql, "--db", stored, "--format", "markdown").startswith("| dispatch_id | dram_write_bytes |")
    assert ok("query", "SELECT 1 AS x WHERE 0", "--db", stored).strip().endswith("(no rows)")
    assert ok("query", "SELECT 1 AS x WHERE 0", "--db", stored, "--format", "json") == "[]\n"
    blob = json.loads(ok("query", "SELECT x'00ff' AS b, 1 AS a, 2 AS a", "--db", stored, "--format", "json"))
    assert blob == [{"b": "00ff", "a": 1, "a_2": 2}]
    # square brackets are text, not console markup: '[ref-5]' in a ceiling source stays
    text = "[bold]x[/bold] [red]y [h200-ncu] z"
    assert ok("query", f"SELECT '{text}' AS \"[s]\"", "--db", stored).splitlines()[::2] == ["[s]" + " " * 31, text]


def test_kernel_trace_durations_are_the_csv_timestamps(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    ok("ingest", docs_csv(), "--db", db)
    with open(docs_csv() / "kernel_trace.csv", newline="") as fh:
        truth = {int(r["Dispatch_Id"]): int(r["End_Timestamp"]) - int(r["Start_Timestamp"]) for r in csv.DictReader(fh)}
    rows = json.loads(ok("report", "--db", db, "--by", "dispatch", "--format", "json"))["rows"]
    assert {r["dispatch_id"]: r["duration_ns"] for r in rows} == truth
    assert truth[1] == 12_800  # 1550151853042437 - 1550151853029637


# ---- unknown architecture, missing counters -----------------------------------------------------------


def test_unknown_architecture_ingests_with_unknown_bytes_and_a_note_suggesting_arch(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    out = ok("ingest", docs_csv(), "--db", db)
    assert "unknown GPU" in out and "--arch" in out
    rows = json.loads(ok("report", "--db", db, "--by", "dispatch", "--format", "json"))["rows"]
    assert len(rows) == 9
    for row in rows:
        assert row["dram_read_bytes"] is None and row["dram_write_bytes"] is None and row["achieved_gbps"] is None
        assert "--arch" in row["dram_bytes_note"]
    table = ok("report", "--db", db, "--by", "op")
    line = next(x for x in table.splitlines() if x.startswith("(unattributed)"))
    assert line.split()[-5:] == ["?", "?", "?", "?", "?"]  # read, write, GB/s, % peak, µs at peak
    assert "--arch" in table and "DRAM ceiling: unknown" in table


def test_arch_of_the_other_vendor_is_refused(tmp_path: Path) -> None:
    # an NVIDIA architecture for a rocprofv3 capture (which records none here) would take the H200's
    # ceiling and formulas: refused, and nothing stored
    db = tmp_path / "r.db"
    assert error("ingest", docs_csv(), "--db", db, "--arch", "sm_90") == (
        "Error: --arch sm_90: an NVIDIA architecture, but this is an AMD capture (rocprofv3-csv); give its GPU's "
        "own (gfx942, gfx90a... for AMD; sm_90, sm_89... for NVIDIA)"
    )
    assert not db.exists() or json.loads(ok("runs", "--db", db, "--format", "json")) == []


def test_arch_option_removes_the_architecture_note(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    out = ok("ingest", docs_csv(), "--db", db, "--arch", "gfx942")
    assert "architecture 'unknown'" not in out and "use --arch" not in out
    (run,) = json.loads(ok("runs", "--db", db, "--format", "json"))
    assert run["gpu_arch"] == "gfx942"
    notes = json.loads(ok("runs", "--db", db, "--notes", "1", "--format", "json"))
    assert not any("--arch" in n["message"] for n in notes)
    # the doc captures hold no DRAM counters: still unknown, now for the right reason
    assert any(n["code"] == "dram-bytes-unknown" and "not collected" in n["message"] for n in notes)
    table = ok("report", "--db", db, "--by", "kernel")
    assert "on gfx942" in table and "(gfx942)" not in table.splitlines()[0]


def test_missing_counters_are_listed_as_notes(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    ok("ingest", vcopy("MI350"), "--db", db)
    notes = json.loads(ok("runs", "--db", db, "--notes", "1", "--format", "json"))
    assert {"severity", "code", "message"} <= set(notes[0])
    missing = [n for n in notes if n["code"] == "missing-counter"]
    # rocprofiler-compute asks for hundreds of counters: those it could not collect are listed as info;
    # the ones the DRAM formula needs surface as a warning on the bytes
    assert missing and all(n["severity"] == "info" for n in missing)
    assert any(n["code"] == "dram-bytes-unknown" and n["severity"] == "warning" for n in notes)
    assert "missing-counter" in ok("runs", "--db", db, "--notes", "1")
    # MI350's read request size was not recorded: bounds around the truth, no number
    for row in json.loads(ok("report", "--db", db, "--by", "dispatch", "--format", "json"))["rows"]:
        assert row["dram_read_bytes"] is None
        assert row["dram_read_bytes_min"] <= VCOPY_BYTES <= row["dram_read_bytes_max"]
        assert row["dram_write_bytes"] == pytest.approx(VCOPY_BYTES, rel=0.01)


# ---- bad input to ingest -----------------------------------------------------------------------------


def _copy_docs(tmp_path: Path, name: str = "cap") -> Path:
    dest = tmp_path / name
    shutil.copytree(docs_csv(), dest)
    return dest


def _rewrite_kernel_trace(cap: Path, edit: Any) -> Path:
    """Keep only kernel_trace.csv in ``cap`` and apply ``edit`` to its bytes."""
    for f in cap.iterdir():
        if f.name != "kernel_trace.csv":
            f.unlink()
    path = cap / "kernel_trace.csv"
    path.write_bytes(edit(path.read_bytes()))
    return path


def _drop_column(data: bytes, column: str) -> bytes:
    rows = list(csv.reader(io.StringIO(data.decode())))
    i = rows[0].index(column)
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_NONNUMERIC, lineterminator="\n").writerows(r[:i] + r[i + 1 :] for r in rows)
    return out.getvalue().encode()


def _cut_inside_row(data: bytes, line: int, marker: bytes) -> bytes:
    """The first ``line - 1`` lines, then line ``line`` (1-based) cut just after ``marker``."""
    lines = data.split(b"\n")
    keep = lines[line - 1]
    return b"\n".join(lines[: line - 1] + [keep[: keep.index(marker) + len(marker)]])


def test_ingest_a_nonexistent_path(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    msg = error("ingest", tmp_path / "nope", "--db", db)
    assert "nope: no such file or directory" in msg
    assert not db.exists()


def test_ingest_an_empty_directory(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    msg = error("ingest", tmp_path / "empty", "--db", tmp_path / "r.db")
    assert "empty: directory is empty" in msg and "expected" in msg


def test_ingest_a_directory_of_unrelated_files(tmp_path: Path) -> None:
    d = tmp_path / "misc"
    d.mkdir()
    (d / "notes.txt").write_text("hello\n")
    (d / "data.csv").write_text("a,b\n1,2\n")
    msg = error("ingest", d, "--db", tmp_path / "r.db")
    assert "misc: no profiler output found" in msg and "data.csv" in msg and "expected rocprofv3" in msg
    msg = error("ingest", d / "data.csv", "--db", tmp_path / "r.db")
    assert "data.csv: unknown file format" in msg


def test_ingest_a_kernel_trace_without_a_required_column(tmp_path: Path) -> None:
    _rewrite_kernel_trace(_copy_docs(tmp_path), lambda b: _drop_column(b, "Kernel_Name"))
    msg = error("ingest", tmp_path / "cap", "--db", tmp_path / "r.db")
    assert "kernel_trace.csv:1: missing column 'Kernel_Name'" in msg


def test_ingest_non_utf8_names_the_line(tmp_path: Path) -> None:
    # line 3 of the docs kernel trace is divide_kernel; a Latin-1 byte lands in its name
    _rewrite_kernel_trace(_copy_docs(tmp_path), lambda b: b.replace(b"divide_kernel", b"divide_k\xe9rnel", 1))
    msg = error("ingest", tmp_path / "cap", "--db", tmp_path / "r.db")
    assert "kernel_trace.csv:3:" in msg and "0xe9" in msg and "UTF-8" in msg


def test_ingest_a_kernel_trace_cut_mid_row(tmp_path: Path) -> None:
    # line 4 (multiply_kernel) ends inside its End_Timestamp: the file was still being written
    _rewrite_kernel_trace(_copy_docs(tmp_path), lambda b: _cut_inside_row(b, 4, b",1550151853"))
    msg = error("ingest", tmp_path / "cap", "--db", tmp_path / "r.db")
    assert "kernel_trace.csv:4:" in msg and "truncated" in msg


def test_ingest_a_kernel_trace_cut_inside_a_quoted_name(tmp_path: Path) -> None:
    _rewrite_kernel_trace(_copy_docs(tmp_path), lambda b: _cut_inside_row(b, 4, b'"Ag'))
    msg = error("ingest", tmp_path / "cap", "--db", tmp_path / "r.db")
    # the quote opens on line 4 of the file (pandas' own words said "row 3", counting from 0)
    assert "kernel_trace.csv:4: malformed CSV row: a quoted field opens here and the file ends before it closes" in msg


def test_ingest_a_kernel_trace_cut_inside_a_quoted_name_names_the_row(tmp_path: Path) -> None:
    _rewrite_kernel_trace(_copy_docs(tmp_path), lambda b: _cut_inside_row(b, 4, b'"Ag'))
    assert "kernel_trace.csv:4:" in error("ingest", tmp_path / "cap", "--db", tmp_path / "r.db")


def test_ingest_a_counter_file_cut_mid_row(tmp_path: Path) -> None:
    cap = _copy_docs(tmp_path)
    for f in cap.iterdir():
        if f.name != "counter_collection.csv":
            f.unlink()
    path = cap / "counter_collection.csv"
    # line 3 (subtract_kernel) is cut inside its SQ_WAVES value 16384.000000
    path.write_bytes(_cut_inside_row(path.read_bytes(), 3, b'"SQ_WAVES",163'))
    db = tmp_path / "r.db"
    msg = error("ingest", cap, "--db", db)
    assert "counter_collection.csv:3:" in msg
    assert not db.exists()


def test_ingest_a_rocprof_compute_workload_cut_mid_row(tmp_path: Path) -> None:
    cap = tmp_path / "wl"
    shutil.copytree(vcopy("MI300X_A1"), cap)
    lines = (cap / "pmc_perf.csv").read_bytes().split(b"\n")
    (cap / "pmc_perf.csv").write_bytes(b"\n".join(lines[:2] + [lines[2][: len(lines[2]) // 2]]))
    msg = error("ingest", cap, "--db", tmp_path / "r.db")
    assert "pmc_perf.csv:3:" in msg


def test_ingest_a_truncated_gzip(tmp_path: Path) -> None:
    cap = tmp_path / "gz"
    cap.mkdir()
    data = gzip.compress((docs_csv() / "kernel_trace.csv").read_bytes())
    (cap / "kernel_trace.csv.gz").write_bytes(data[: len(data) // 2])
    db = tmp_path / "r.db"
    for target in (cap, cap / "kernel_trace.csv.gz"):
        msg = error("ingest", target, "--db", db)
        assert "kernel_trace.csv.gz: compressed data is damaged or truncated" in msg
    assert not db.exists()


def test_a_whole_gzip_capture_ingests(tmp_path: Path) -> None:
    cap = tmp_path / "gz"
    cap.mkdir()
    (cap / "kernel_trace.csv.gz").write_bytes(gzip.compress((docs_csv() / "kernel_trace.csv").read_bytes()))
    ok("ingest", cap, "--db", tmp_path / "r.db")
    assert len(json.loads(ok("report", "--db", tmp_path / "r.db", "--by", "dispatch", "--format", "json"))["rows"]) == 9


@pytest.mark.parametrize("label", ["model", "=value", " =x"])
def test_bad_label_syntax(tmp_path: Path, label: str) -> None:
    db = tmp_path / "r.db"
    msg = error("ingest", docs_csv(), "--db", db, "--label", label)
    assert msg == f"Error: --label {label!r}: expected key=value"
    assert not db.exists()


def test_a_label_key_given_two_values_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    msg = error("ingest", docs_csv(), "--db", db, "--label", "model=a", "--label", "model=b")
    assert msg.startswith("Error: --label 'model' given twice ('a' and 'b')")
    assert not db.exists()
    ok("ingest", docs_csv(), "--db", db, "--label", "model=a", "--label", "model=a")  # the same value twice: one label


@pytest.mark.parametrize("label", ["model=*", "model=q4*", "model=*_k"])
def test_a_label_value_with_the_selector_wildcard_is_refused(tmp_path: Path, label: str) -> None:
    """'*' matches any text in selectors (--run model=*): a run labelled with it could not be picked by it."""
    db = tmp_path / "r.db"
    msg = error("ingest", docs_csv(), "--db", db, "--label", label)
    assert msg.startswith(f"Error: --label {label!r}: a label value cannot hold '*', the wildcard of label selectors")
    assert not db.exists()
    result = CliRunner().invoke(  # collect refuses it before anything runs
        cli, ["collect", "--label", label, "--out", str(tmp_path / "o"), "--", "true"], env={"PATH": "/nonexistent"}
    )
    assert result.exit_code == 1 and "the wildcard of label selectors" in result.output
    assert not (tmp_path / "o").exists()
    ok("ingest", docs_csv(), "--db", db, "--label", "*=x")  # a key is never a pattern: '*' is refused in values only
    assert "*=x" in ok("runs", "--db", db)


def test_bad_label_stops_collect_before_anything_runs(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli,
        ["collect", "--label", "oops", "--out", str(tmp_path / "o"), "--", "true"],
        env={"PATH": "/nonexistent"},
        catch_exceptions=False,
    )
    assert result.exit_code == 1 and result.output.strip() == "Error: --label 'oops': expected key=value"


def test_a_failed_ingest_leaves_the_database_as_it_was(stored: Path, tmp_path: Path) -> None:
    before = counts(stored)
    digest = hashlib.sha256(stored.read_bytes()).hexdigest()
    _rewrite_kernel_trace(_copy_docs(tmp_path), lambda b: _drop_column(b, "End_Timestamp"))
    error("ingest", tmp_path / "cap", "--db", stored)
    assert counts(stored) == before
    assert hashlib.sha256(stored.read_bytes()).hexdigest() == digest
    ok("ingest", docs_csv(), "--db", stored)
    assert counts(stored)["run"] == 2


def test_ingest_several_paths_stores_one_run_each_until_one_fails(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    result = run("ingest", vcopy(), tmp_path / "missing", "--db", db)
    assert result.exit_code == 1
    assert result.output.startswith("Stored run 1 from ")
    assert result.output.strip().splitlines()[-1].startswith("Error: ")
    assert json.loads(ok("runs", "--db", db, "--format", "json"))[0]["run_id"] == 1


def test_the_same_capture_twice_is_refused_and_replace_gives_a_new_run_id(stored: Path) -> None:
    before = counts(stored)
    msg = error("ingest", vcopy(), "--db", stored)
    assert "already stored as run 1" in msg and "--replace" in msg
    assert counts(stored) == before
    out = ok("ingest", vcopy(), "--db", stored, "--replace")
    assert out.startswith("Stored run 2 from ")
    # the summary says which run went (from a new-user trial: the new id alone left it unsaid)
    assert out.splitlines()[1] == "  replaces run 1 (the same content, deleted: its labels kept unless given again)"
    runs = json.loads(ok("runs", "--db", stored, "--format", "json"))
    assert [r["run_id"] for r in runs] == [2]
    assert runs[0]["labels"] == {"model": "vcopy", "size": "8MiB"}  # kept: the labels are the run's only description
    assert counts(stored) == before
    out = ok("ingest", vcopy(), "--db", stored, "--replace", "--label", "model=copy")
    assert out.splitlines()[1].startswith("  replaces run 2 (")
    (run3,) = json.loads(ok("runs", "--db", stored, "--format", "json"))
    assert run3["run_id"] == 3 and run3["labels"] == {"model": "copy", "size": "8MiB"}


def test_traceback_flag_shows_the_exception() -> None:
    with pytest.raises(InputError, match="no such file or directory"):
        run("--traceback", "ingest", "/definitely/not/here")
    result = CliRunner().invoke(
        cli, ["ingest", "/definitely/not/here"], env={"ROCROOF_TRACEBACK": "1"}, catch_exceptions=True
    )
    assert isinstance(result.exception, InputError)


@pytest.mark.parametrize(
    "args",
    [
        ["ingest", "/definitely/not/here", "--traceback"],
        ["ingest", "--traceback", "/definitely/not/here"],
        ["db", "status", "--db", "/definitely/not/here.db", "--traceback"],  # a command of a command group
        ["query", "SELECT 1", "--db", "/definitely/not/here.db", "--traceback"],
    ],
)
def test_traceback_flag_works_after_the_command_too(args: list[str]) -> None:
    with pytest.raises(InputError, match="/definitely/not/here"):
        run(*args)


def test_traceback_after_a_double_dash_belongs_to_the_application(tmp_path: Path) -> None:
    """collect -- APP --traceback: the word is APP's argument, not rocroof's flag."""
    result = run("collect", "--arch", "gfx942", "--dry-run", "--out", str(tmp_path / "o"), "--", "./app", "--traceback")
    assert result.exit_code == 0, result.output
    assert "-- ./app --traceback\n" in result.output


# ---- bad databases ------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", [["report"], ["runs"], ["query", "SELECT 1"], ["db", "status"]])
def test_reading_a_nonexistent_database(tmp_path: Path, command: list[str]) -> None:
    db = tmp_path / "none.db"
    msg = error(*command, "--db", db)
    assert f"{db}: no such database" in msg and "rocroof ingest" in msg
    assert not db.exists()


@pytest.mark.parametrize("command", [["report"], ["runs"], ["query", "SELECT 1"]])
def test_reading_an_empty_database_file(tmp_path: Path, command: list[str]) -> None:
    db = tmp_path / "empty.db"
    db.touch()
    assert "empty database; ingest a capture first" in error(*command, "--db", db)


def test_report_on_a_database_without_runs(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    assert ok("db", "upgrade", "--db", db).startswith("applied 0001_initial")
    assert "no runs stored yet" in error("report", "--db", db)
    assert ok("runs", "--db", db, "--format", "json") == "[]\n"


@pytest.mark.parametrize("command", [["report"], ["runs"], ["query", "SELECT 1"], ["db", "status"], ["db", "upgrade"]])
def test_a_foreign_sqlite_database(tmp_path: Path, command: list[str]) -> None:
    db = tmp_path / "app.db"
    with connect(db) as conn:
        conn.execute("CREATE TABLE users (id INTEGER)")
    digest = hashlib.sha256(db.read_bytes()).hexdigest()
    assert "not a rocroof database" in error(*command, "--db", db)
    assert hashlib.sha256(db.read_bytes()).hexdigest() == digest


def test_ingest_into_a_foreign_database_fails_before_reading_the_capture(tmp_path: Path) -> None:
    db = tmp_path / "app.db"
    with connect(db) as conn:
        conn.execute("CREATE TABLE users (id INTEGER)")
    digest = hashlib.sha256(db.read_bytes()).hexdigest()
    # the capture is broken too: the database is what the message must be about
    msg = error("ingest", tmp_path / "missing-capture", "--db", db)
    assert "app.db: not a rocroof database" in msg
    assert hashlib.sha256(db.read_bytes()).hexdigest() == digest


@pytest.mark.parametrize(
    "command", [["report"], ["runs"], ["query", "SELECT 1"], ["db", "status"], ["db", "upgrade"], ["ingest", "."]]
)
def test_a_file_that_is_not_a_database(tmp_path: Path, command: list[str]) -> None:
    db = tmp_path / "notes.db"
    db.write_text("these are my notes, not a database\n" * 50)
    assert "notes.db: " in error(*command, "--db", db)
    assert db.read_text().startswith("these are my notes")


def test_a_database_from_a_newer_rocroof(stored: Path) -> None:
    with connect(stored) as conn:
        conn.execute("INSERT INTO rocroof_migration VALUES ('0999_future', '2030-01-01T00:00:00+00:00')")
    before = counts(stored)
    for command in (["report"], ["runs"], ["query", "SELECT 1"], ["db", "upgrade"], ["ingest", docs_csv()]):
        assert "written by a newer rocroof (migration 0999_future)" in error(*command, "--db", stored)
    status = ok("db", "status", "--db", stored)
    assert "0999_future: applied 2030-01-01T00:00:00+00:00 (unknown to rocroof" in status
    assert counts(stored) == before


def test_db_upgrade_and_status(tmp_path: Path) -> None:
    db = tmp_path / "team.db"
    assert ok("db", "upgrade", "--db", db).startswith("applied 0001_initial")
    assert ok("db", "upgrade", "--db", db).strip() == "schema is up to date"
    status = ok("db", "status", "--db", db)
    assert "0001_initial: applied " in status and f"schema version {SCHEMA_VERSION}" in status


def test_db_directory_missing(tmp_path: Path) -> None:
    msg = error("ingest", docs_csv(), "--db", tmp_path / "no" / "r.db")
    assert "does not exist" in msg


# ---- report and query mistakes ---------------------------------------------------------------------------


def test_report_run_that_does_not_exist(stored: Path) -> None:
    assert "no run 99 (see 'rocroof runs')" in error("report", "--db", stored, "--run", "99")
    assert "no run 99" in error("runs", "--db", stored, "--notes", "99")
    assert "run must be a number, 'latest' or labels key=value[,key=value], not 'first'" in error(
        "report", "--db", stored, "--run", "first"
    )


def test_report_option_mistakes_are_usage_errors(stored: Path) -> None:
    for args in (["--by", "layer"], ["--top", "0"], ["--format", "xml"]):
        result = run("report", "--db", stored, *args)
        assert result.exit_code == 2 and "Traceback" not in result.output


@pytest.mark.parametrize(
    "sql",
    [
        "DELETE FROM dispatch",
        "INSERT INTO run_label VALUES (1, 'k', 'v')",
        "DROP TABLE run",
        "DROP VIEW op_summary",
        "UPDATE run SET host = 'x'",
        "PRAGMA journal_mode = DELETE",
    ],
)
def test_query_that_writes_is_refused_and_changes_nothing(stored: Path, sql: str) -> None:
    before = counts(stored)
    msg = error("query", sql, "--db", stored)
    assert "refused: rocroof query runs read-only SELECT/WITH statements" in msg
    assert counts(stored) == before


@pytest.mark.parametrize(
    ("sql", "would"),
    [
        ("VACUUM", "vacuum (rewrite) the database file"),
        ("INSERT INTO run_label VALUES (1, 'k', 'v')", "insert into run_label"),
        ("DROP TABLE run", "drop table run"),
        ("PRAGMA user_version = 7", "set PRAGMA user_version=7"),
        ("ATTACH DATABASE '{side}' AS side", "attach (create or open) the file {side}"),
    ],
)
def test_query_that_is_not_a_read_says_what_query_runs_and_how_to_write(
    stored: Path, tmp_path: Path, sql: str, would: str
) -> None:
    side = tmp_path / "side.db"
    statement = sql.format(side=side)
    before = counts(stored)
    msg = error("query", statement, "--db", stored)
    assert msg.startswith(
        f"Error: refused: rocroof query runs read-only SELECT/WITH statements, and this one would "
        f"{would.format(side=side)}; "
        "the database was not changed. "
    )
    assert msg.endswith(
        "To run statements that write, use the sqlite3 shell, after a backup: "
        f"sqlite3 {shlex.quote(str(stored))} {shlex.quote(statement)}"
    )
    assert counts(stored) == before and not side.exists()


def test_query_attach_creates_no_file(stored: Path, tmp_path: Path) -> None:
    side = tmp_path / "side.db"
    assert "refused" in error("query", f"ATTACH DATABASE '{side}' AS side", "--db", stored)
    assert not side.exists()


@pytest.mark.parametrize(
    ("sql", "words"),
    [("SELEC * FROM run", "syntax error"), ("SELECT * FROM nope", "no such table: nope"), ("", "empty query")],
)
def test_query_mistakes_are_one_line(stored: Path, sql: str, words: str) -> None:
    assert words in error("query", sql, "--db", stored)


def test_db_that_is_a_directory_or_a_bad_url(tmp_path: Path) -> None:
    assert f"{tmp_path}: is a directory; --db wants a database file" in error("runs", "--db", tmp_path)
    assert "is a directory" in error("ingest", docs_csv(), "--db", tmp_path)
    for url, backend in (("nosuchdb://host/x", "nosuchdb"), ("mysql://x@y/z", "mysql")):  # the trial's mysql URL
        assert error("runs", "--db", url) == (
            f"Error: {url}: rocroof stores results in SQLite (a file path, or sqlite:///path) or PostgreSQL "
            f"(postgresql://user@host/db), not '{backend}'"
        )


def test_a_sqlite_url_is_opened_like_the_file(stored: Path) -> None:
    url = f"sqlite:///{stored}"
    assert json.loads(ok("runs", "--db", url, "--format", "json"))[0]["run_id"] == 1
    before = counts(stored)
    assert "refused" in error("query", "DELETE FROM run", "--db", url)
    assert counts(stored) == before


def test_collect_dry_run_touches_no_database(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    result = CliRunner().invoke(
        cli,
        ["collect", "--dry-run", "--arch", "gfx942", "--db", str(db), "--out", str(tmp_path / "o"), "--", "./app"],
        env={"PATH": "/nonexistent"},
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    assert result.output.startswith("GPU gfx942: ") and "rocprofv3 --pmc" in result.output
    assert not db.exists() and not (tmp_path / "o").exists()


# ---- runs picked by their labels ----------------------------------------------------------------------


@pytest.fixture
def labelled(tmp_path: Path) -> Path:
    """Runs 1-4 of the hand-made run with sweep-like labels (2 models x 2 envs) and one unlabelled run 5."""
    from rocroof.store import Store

    from .test_store import _frames

    db = tmp_path / "l.db"
    store = Store(db)
    for i, (model, env) in enumerate(
        [("dense", "fusion"), ("dense", "no-fusion"), ("moe", "fusion"), ("moe", "no-fusion")]
    ):
        store.write_run(_frames(sha=str(i) * 64), labels={"model": model, "env": env, "sweep": "s1"})
    store.write_run(_frames(sha="9" * 64))
    store.close()
    return db


def test_runs_report_and_diff_pick_runs_by_their_labels(labelled: Path) -> None:
    import csv as csv_mod

    def ids(*filters: str) -> list[int]:
        args = [a for f in filters for a in ("--label", f)]
        text = ok("runs", "--db", labelled, "--format", "csv", *args)
        return [int(r["run_id"]) for r in csv_mod.DictReader(io.StringIO(text))]

    assert ids() == [1, 2, 3, 4, 5]
    assert ids("model=moe") == [3, 4]
    assert ids("model=moe", "env=fusion") == [3] == ids("model=moe,env=fusion")
    assert ids("env=*fusion") == [1, 2, 3, 4] and ids("env=no-*") == [2, 4]
    assert ids("model=none") == [] and ids("repeat=1") == []
    # one run: --run takes the labels; several: an error that names them, or latest: picks the newest
    report = ok("report", "--db", labelled, "--run", "model=moe,env=no-fusion", "--format", "json")
    assert json.loads(report)["run"]["run_id"] == 4
    message = error("report", "--db", labelled, "--run", "env=fusion")
    assert "match runs 1, 3" in message and "latest:env=fusion" in message
    assert (
        json.loads(ok("report", "--db", labelled, "--run", "latest:env=fusion", "--format", "json"))["run"]["run_id"]
        == 3
    )
    assert "no run has the labels model=gpt" in error("report", "--db", labelled, "--run", "model=gpt")
    assert "expected key=value" in error("report", "--db", labelled, "--run", "model=x,fusion")
    # diff A B by labels is diff of their ids
    by_label = ok("diff", "--db", labelled, "model=dense,env=fusion", "model=moe,env=fusion", "--format", "json")
    assert json.loads(by_label)["run_a"] == 1 and json.loads(by_label)["run_b"] == 3
    # the table lists the labels all runs share once, above it
    table = ok("runs", "--db", labelled, "--label", "model=moe")
    assert table.splitlines()[0] == "labels of every run below: model=moe, sweep=s1"


def test_labels_and_run_ids_are_read_strictly(labelled: Path, tmp_path: Path) -> None:
    """What a fresh user's trial found: each is one clear line, nothing stored."""
    assert "cannot hold ','" in error("ingest", docs_csv(), "--db", tmp_path / "x.db", "--label", "a=b,c=d")
    assert not (tmp_path / "x.db").exists() or counts(tmp_path / "x.db").get("run", 0) == 0
    assert "'model' given twice" in error("report", "--db", labelled, "--run", "model=moe,model=dense")
    assert "runs --label takes key=value" in error("runs", "--db", labelled, "--label", "latest:model=moe")
    # two --label options giving one key two values: no run can match both (before: the last one won)
    assert "model is already 'moe'" in error("runs", "--db", labelled, "--label", "model=moe", "--label", "model=dense")
    for bad in ("1.5", "\u0663", "1_0", "+2", "1e3"):
        assert "run must be a number" in error("report", "--db", labelled, "--run", bad), bad
    message = error("diff", "--db", labelled, "1", "model=nope")
    assert message.startswith("Error: run B (model=nope): ")
    assert "no such database" in error("db", "datasette-metadata", "--db", tmp_path / "missing.db")
    assert not (tmp_path / "missing.db").exists()


def test_the_python_api_refuses_run_ids_that_are_not_whole_numbers(labelled: Path) -> None:
    import rocroof
    from rocroof.errors import InputError as ApiInputError

    with rocroof.open(labelled) as db:
        for bad in (1.5, True, "1.0", "\u0663"):
            with pytest.raises(ApiInputError, match="run must be a number"):
                db.ops(bad)  # type: ignore[arg-type]
        assert db.run_id(2) == 2 and db.run_id(2.0) == 2  # type: ignore[arg-type]


def test_markdown_reports_show_the_longest_100_rows_by_default(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    ok("ingest", REPO / "examples" / "h200-sampled" / "moe24-decode-sample", "--db", db)
    md = ok("report", "--db", db, "--by", "dispatch", "--format", "markdown")
    rows = [line for line in md.splitlines() if line.startswith("| ") and not line.startswith("| # ")]
    assert len(rows) == 100 and "showing 100 of" in md
    assert len(md) < 65_536  # a GitHub comment's limit
    md_all = ok("report", "--db", db, "--by", "dispatch", "--format", "markdown", "--top", "5000")
    assert "showing 5,000 of" in md_all


def _dense_prefill_db(tmp_path: Path) -> Path:
    """A database holding the dense prefill example as run 1."""
    db = tmp_path / "r.db"
    result = CliRunner().invoke(cli, ["ingest", str(REPO / "examples" / "h200" / "dense-prefill"), "--db", str(db)])
    assert result.exit_code == 0, result.output
    return db


def test_an_interrupted_read_only_command_does_not_speak_of_storing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Ctrl-C in a report: exit status 130 and "Aborted: interrupted." — nothing was being stored
    import rocroof.report.tables as tables_mod

    db = _dense_prefill_db(tmp_path)

    def interrupted(*_a: object, **_k: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(tables_mod, "build_report", interrupted)
    out = CliRunner().invoke(cli, ["report", "--by", "kernel", "--db", str(db)])
    assert out.exit_code == 130
    assert out.output.strip().splitlines()[-1] == "Aborted: interrupted."


def test_runs_notes_with_a_label_selection_is_refused(tmp_path: Path) -> None:
    # --notes shows one run; a --label beside it used to be ignored without a word
    db = _dense_prefill_db(tmp_path)
    out = CliRunner().invoke(cli, ["runs", "--notes", "1", "--label", "model=x", "--db", str(db)])
    assert out.exit_code == 1
    assert out.output.startswith("Error: --notes shows one run's notes") and out.output.count("\n") == 1


def test_runs_separates_thousands_for_people_not_for_scripts(tmp_path: Path) -> None:
    import pandas as pd

    from rocroof.report.tables import runs_for_people

    frame = pd.DataFrame(
        {
            "run_id": [1],
            "created_at": ["2026-12-01T10:00:00"],
            "source_path": ["cap"],
            "profiler": ["rocprofv3"],
            "gpu_name": ["MI300X"],
            "gpu_arch": ["gfx942"],
            "timing_source": ["trace"],
            "dispatches": [1_234_567],
            "attributed": [9208],
            "labels": [None],
        }
    )
    people, _ = runs_for_people(frame)
    assert (people["dispatches"][0], people["attributed"][0]) == ("1,234,567", "9,208")
    # a stored run of over 1,000 dispatches, as the commands show it
    db = tmp_path / "r.db"
    ok("ingest", REPO / "examples" / "h200-sweep" / "moe-tiny-decode-no-fusion-r1", "--db", db)
    sql = "SELECT COUNT(*) AS n FROM dispatch_record WHERE timing_dispatch_index = dispatch_index"
    n = int(next(csv.DictReader(ok("query", sql, "--db", db, "--format", "csv").splitlines()))["n"])
    assert n >= 1000
    for fmt in ("table", "markdown"):
        shown = ok("runs", "--db", db, "--format", fmt)
        assert f" {n:,} " in shown and str(n) not in shown, shown
    rows = list(csv.DictReader(ok("runs", "--db", db, "--format", "csv").splitlines()))
    assert rows[0]["dispatches"] == str(n)
    assert json.loads(ok("runs", "--db", db, "--format", "json"))[0]["dispatches"] == n
