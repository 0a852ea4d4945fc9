"""Output a capture cannot hijack, and commands that end in one line whatever the output does.

A kernel name, ggml op or label comes from a capture someone else made: it must not reach a
terminal as an escape sequence, a spreadsheet as a formula, or an HTML page as markup. Results are
streamed, big run ids and odd output paths end in one-line errors, and a full disk is said so.
"""

from __future__ import annotations

import csv
import io
import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from rocroof.cli import cli
from rocroof.report.tables import csv_text
from rocroof.text import printable

from .rocprof_csv import T0, Kernel, rng, write_pass

#: An OSC sequence that sets the terminal's title, then one that would hide what follows, a CSI
#: cursor move, a C1 CSI (U+009B), a bidi override, and a carriage return that overwrites the line.
HOSTILE = "k\x1b]0;pwned\x07\x1b[8m\x1b[2J\x9b31m\u202eevil\rX"


def run(*args: Any, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False, env=env)


def _no_controls(text: str) -> None:
    bad = [c for c in text if (ord(c) < 0x20 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F or c == "\u202e"]
    assert not bad, f"control characters reached the output: {bad!r}"


@pytest.fixture
def hostile_db(tmp_path: Path) -> Path:
    """A database with one run whose kernel name, op names and marker text carry escape sequences."""
    kernels = [
        Kernel(1, HOSTILE, 2, T0 + 1_000, T0 + 3_000),
        Kernel(2, '=HYPERLINK("http://x","y")', 4, T0 + 4_000, T0 + 5_000),
        Kernel(3, "+cmd|' /C calc'!A0", 6, T0 + 6_000, T0 + 7_000),
        Kernel(4, "<img src=x onerror=alert`1`>", 8, T0 + 8_000, T0 + 9_000),
    ]
    markers = [
        rng("ggml:MUL_MAT:\x1b]0;title\x07-0:1", 1, T0 + 100, T0 + 900),
        rng("ggml:ADD:@SUM(A1)-0:2", 3, T0 + 1_000, T0 + 1_100),
        rng("ggml:ADD:-2+3-0:3", 5, T0 + 1_200, T0 + 1_300),
    ]
    write_pass(tmp_path / "cap", 1234, kernels=kernels, markers=markers)
    db = tmp_path / "r.db"
    result = run("ingest", tmp_path / "cap", "--db", db)
    assert result.exit_code == 0, result.output
    return db


def test_printable_escapes_every_terminal_control_but_tab_and_newline() -> None:
    assert printable("a\tb\nc") == "a\tb\nc"
    assert printable("\x1b]0;t\x07") == "\\x1b]0;t\\x07"
    assert printable("\x9b2J") == "\\x9b2J"  # C1 CSI, one character
    assert printable("x\ry") == "x\\x0dy"
    assert printable("\u202eabc") == "\\u202eabc"
    assert printable("caf\u00e9 \u00b5s") == "caf\u00e9 \u00b5s"  # printable non-ASCII passes
    assert printable("bad \udcff byte") == "bad \\xff byte"  # an undecodable byte of a file name
    # invisible characters that make two names look alike: zero-width space/joiner, LRM, BOM, word joiner
    for ch in ("\u200b", "\u200d", "\u200e", "\u061c", "\ufeff", "\u2060"):
        assert printable(f"q4{ch}_k") == f"q4\\u{ord(ch):04x}_k"


def test_a_label_with_a_zero_width_space_is_shown_escaped(tmp_path: Path) -> None:
    """Two labels that differ by an invisible character must not look the same in ``runs``."""
    db = tmp_path / "r.db"
    example = Path(__file__).resolve().parent.parent / "examples" / "h200" / "dense-prefill"
    assert run("ingest", example, "--db", db, "--label", "model=q4\u200b_k").exit_code == 0
    out = run("runs", "--db", db).output
    assert "model=q4\\u200b_k" in out and "\u200b" not in out


@pytest.mark.parametrize("fmt", ["table", "markdown", "csv", "json"])
@pytest.mark.parametrize("by", ["kernel", "dispatch"])
def test_reports_never_print_a_capture_s_control_characters(hostile_db: Path, fmt: str, by: str) -> None:
    result = run("report", "--db", hostile_db, "--by", by, "--format", fmt)
    assert result.exit_code == 0, result.output
    _no_controls(result.output)
    if fmt == "json":  # JSON escapes them itself: the name comes back exactly
        rows = json.loads(result.output)["rows"]
        names = {r["kernel_name"] if "kernel_name" in r else r.get("kernel") for r in rows}
        assert HOSTILE in names
    else:
        assert "\\x1b]0;pwned\\x07" in result.output  # shown, escaped: the user sees what the capture holds


def test_html_report_escapes_markup_and_controls(hostile_db: Path) -> None:
    result = run("report", "--db", hostile_db, "--by", "kernel", "--format", "html")
    assert result.exit_code == 0
    _no_controls(result.output)
    assert "<img" not in result.output
    assert "&lt;img src=x onerror=alert`1`&gt;" in result.output


def test_query_and_runs_escape_controls(hostile_db: Path) -> None:
    for args in (
        ("query", "SELECT message FROM marker_range", "--db", hostile_db),
        ("query", "SELECT kernel_name, op FROM dispatch_dram", "--db", hostile_db),
        ("query", "SELECT kernel_name FROM dispatch", "--db", hostile_db, "--format", "markdown"),
        ("runs", "--db", hostile_db),
        ("runs", "--db", hostile_db, "--notes", "latest"),
    ):
        result = run(*args)
        assert result.exit_code == 0, result.output
        _no_controls(result.output)


def test_an_error_naming_a_hostile_value_is_escaped(hostile_db: Path) -> None:
    result = run("report", "--db", hostile_db, "--run", "\x1b]0;x\x07")
    assert result.exit_code == 1
    _no_controls(result.output)
    assert "\\x1b]0;x\\x07" in result.output


def test_paths_with_a_newline_stay_on_one_line(tmp_path: Path) -> None:
    """A capture path with a newline: the stored line and an error each stay one line, the newline escaped."""
    cap = tmp_path / "run\n2"
    write_pass(cap, 77, kernels=[Kernel(1, "k", 2, T0 + 1_000, T0 + 2_000)])
    trace = cap / "77_kernel_trace.csv"
    trace.write_bytes(trace.read_bytes().rstrip(b"\n"))  # cut inside its last row: a warning names the file
    result = run("ingest", cap, "--db", tmp_path / "r.db")
    assert result.exit_code == 0, result.output
    first = result.output.splitlines()[0]
    assert first.startswith("Stored run 1 from ") and first.split(" (")[0].endswith("run\\x0a2")
    cut = [line for line in result.output.splitlines() if "ends inside its last row" in line]
    assert len(cut) == 1 and cut[0].startswith("  - ") and "run\\x0a2/77_kernel_trace.csv" in cut[0]
    assert not any(line.startswith("2/") for line in result.output.splitlines())
    missing = run("ingest", tmp_path / "gone\nhere", "--db", tmp_path / "r.db")
    assert missing.exit_code == 1
    lines = missing.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and "gone\\x0ahere" in lines[0]


def test_csv_cells_a_spreadsheet_would_run_get_a_quote_numbers_never(hostile_db: Path) -> None:
    result = run("report", "--db", hostile_db, "--by", "dispatch", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(result.output)))
    names = {r["kernel_name"] for r in rows}
    assert '\'=HYPERLINK("http://x","y")' in names
    assert "'+cmd|' /C calc'!A0" in names
    for r in rows:  # numbers stay numbers (a negative number is no formula)
        float(r["duration_ns"])
    raw = run("report", "--db", hostile_db, "--by", "dispatch", "--format", "csv", "--raw")
    assert '=HYPERLINK(""http://x"",""y"")' in raw.output  # as stored (CSV doubles the quotes)


def test_csv_text_guards_text_cells_only() -> None:
    import pandas as pd

    df = pd.DataFrame({"name": ["=1+2", "+a", "-b", "@c", "\tx", "ok", None], "value": [-2.5, 1, 2, 3, 4, 5, 6]})
    rows = list(csv.reader(io.StringIO(csv_text(df))))
    assert [r[0] for r in rows[1:]] == ["'=1+2", "'+a", "'-b", "'@c", "'\tx", "ok", ""]
    assert rows[1][1] == "-2.5"
    assert [r[0] for r in csv.reader(io.StringIO(csv_text(df, raw=True)))][1] == "=1+2"


def test_query_csv_guards_formulas_and_raw_opts_out(hostile_db: Path) -> None:
    sql = "SELECT '=1+2' AS f, -5 AS n, '@x' AS g"
    assert run("query", sql, "--db", hostile_db, "--format", "csv").output.splitlines() == ["f,n,g", "'=1+2,-5,'@x"]
    assert run("query", sql, "--db", hostile_db, "--format", "csv", "--raw").output.splitlines()[1] == "=1+2,-5,@x"


def test_query_streams_csv_and_json_in_batches_with_every_row(
    hostile_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import rocroof.store as store

    calls: list[int] = []
    real = store.Store.query_batches

    def small_batches(self: Any, sql: str, batch_rows: int | None = 7) -> Any:
        calls.append(batch_rows or 0)
        return real(self, sql, 7)

    monkeypatch.setattr(store.Store, "query_batches", small_batches)
    sql = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 30) SELECT i FROM n"
    out = run("query", sql, "--db", hostile_db, "--format", "csv").output
    assert out.splitlines() == ["i", *[str(i) for i in range(1, 31)]]  # header once, 30 rows in 5 batches
    doc = json.loads(run("query", sql, "--db", hostile_db, "--format", "json").output)
    assert doc == [{"i": i} for i in range(1, 31)]
    empty = run("query", "SELECT 1 AS i WHERE 0", "--db", hostile_db, "--format", "json").output
    assert json.loads(empty) == []
    assert calls


def test_query_table_shows_at_most_max_rows_and_says_so(hostile_db: Path) -> None:
    sql = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 50) SELECT i FROM n"
    result = CliRunner().invoke(cli, ["query", sql, "--db", str(hostile_db), "--max-rows", "5"])
    assert result.exit_code == 0
    lines = [line.strip() for line in result.stdout.splitlines()]
    assert "5" in lines and "6" not in lines
    assert "showing 5 of 50 rows" in result.stderr


def test_sql_starting_with_a_comment_is_sql_not_an_option(hostile_db: Path) -> None:
    result = run("query", "-- how many dispatches\nSELECT COUNT(*) AS n FROM dispatch", "--db", hostile_db)
    assert result.exit_code == 0, result.output
    assert "4" in result.output.split()


@pytest.mark.parametrize("run_id", ["99999999999999999999999", "2147483648", "-1", "0"])
def test_run_ids_beyond_any_stored_one_are_one_line_errors(hostile_db: Path, run_id: str) -> None:
    result = run("report", "--db", hostile_db, "--run", run_id)
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [f"Error: {hostile_db}: no run {int(run_id)} (see 'rocroof runs')"]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full on this system")
def test_output_to_a_full_device_is_one_line(hostile_db: Path, tmp_path: Path) -> None:
    import subprocess
    import sys

    for args in (["runs"], ["report", "--by", "dispatch"], ["query", "SELECT * FROM dispatch", "--format", "csv"]):
        with open("/dev/full", "w") as full:
            proc = subprocess.run(
                [sys.executable, "-m", "rocroof", *args, "--db", str(hostile_db)],
                stdout=full,
                stderr=subprocess.PIPE,
                text=True,
                check=False,
            )
        assert proc.returncode == 1
        assert proc.stderr.strip().splitlines() == ["Error: cannot write the output: No space left on device"]


def test_plot_out_into_a_file_or_a_missing_folder_is_one_line(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    example = Path(__file__).resolve().parent.parent / "examples" / "h200" / "dense-prefill"
    assert run("ingest", example, "--db", db).exit_code == 0
    (tmp_path / "afile").write_text("x")
    for out, says in (("afile/plot", "is not a folder"), ("missing/plot", "does not exist (create it first)")):
        result = run("plot", "--db", db, "--out", tmp_path / out)
        assert result.exit_code == 1
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and says in lines[0], result.output
    assert not (tmp_path / "missing").exists()
    assert run("plot", "--db", db, "--out", tmp_path / "ok").exit_code == 0
    assert (tmp_path / "ok.png").stat().st_size > 0 and (tmp_path / "ok.svg").stat().st_size > 0
    assert not list(tmp_path.glob("*.part"))


def test_an_invalid_label_leaves_no_database_behind(tmp_path: Path) -> None:
    write_pass(tmp_path / "cap", 1, kernels=[Kernel(1, "k", 2, T0, T0 + 10)])
    for label in ("novalue", "a=b\nc", "a,b=c"):
        db = tmp_path / "fresh.db"
        result = run("ingest", tmp_path / "cap", "--db", db, "--label", label)
        assert result.exit_code == 1
        assert len(result.output.strip().splitlines()) == 1
        assert not db.exists()
    # a database there already keeps its content
    db = tmp_path / "kept.db"
    assert run("ingest", tmp_path / "cap", "--db", db).exit_code == 0
    assert run("ingest", tmp_path / "cap", "--db", db, "--replace", "--label", "x").exit_code == 1
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT COUNT(*) FROM run").fetchone() == (1,)


def test_every_format_and_separator_character_of_this_python_s_unicode_is_escaped() -> None:
    """Unicode categories Cf, Zl, Zp and the controls (but tab and newline) never print as they are."""
    import sys
    import unicodedata

    shown_raw = [
        c
        for c in range(sys.maxunicode + 1)
        if unicodedata.category(chr(c)) in ("Cf", "Zl", "Zp", "Cc")
        and chr(c) not in "\t\n"
        and printable(chr(c)) == chr(c)
    ]
    assert shown_raw == []
    assert printable("tag\U000e0041") == "tag\\U000e0041"
    assert printable("caf\u00e9 \u4e2d \u05d0") == "caf\u00e9 \u4e2d \u05d0"  # letters of any script pass
